//! The namespace tables resolution reads: the store's vars outside the files replaced, with
//! the new files' own definitions added.

use super::*;

/// The namespace tables resolving `parsed` needs, as the store holds them outside `replaced`
/// with the parsed files' own definitions added: every var of the namespaces the files' forms
/// live in, the public vars of those they refer wholesale (`:refer :all`, `:use`), and the names
/// of every namespace the store knows. Only those namespaces' vars are read: a save of one file
/// must not read the whole store's.
pub fn namespace_tables<P: std::borrow::Borrow<ParsedFile>>(
    store: &Store,
    parsed: &[P],
    replaced: &HashSet<&str>,
    generation: Option<u64>,
) -> Result<Namespaces> {
    let (needed, referred) = namespaces_read(parsed);
    let mut nss = stored_tables(store, Some((&needed, &referred)), replaced, generation)?;
    for f in parsed.iter().map(P::borrow) {
        add_definitions(&mut nss, f);
    }
    Ok(nss)
}

/// The namespaces whose vars resolving `parsed` reads (those their forms live in, and those
/// they refer wholesale), and those referred wholesale (`:refer :all`, `:use`).
pub(super) fn namespaces_read<P: std::borrow::Borrow<ParsedFile>>(
    parsed: &[P],
) -> (BTreeSet<&str>, BTreeSet<&str>) {
    let mut needed: BTreeSet<&str> = BTreeSet::new();
    let mut referred: BTreeSet<&str> = BTreeSet::new();
    for f in parsed.iter().map(P::borrow) {
        needed.insert(&f.decl.name);
        referred.extend(f.decl.refer_all.iter().map(String::as_str));
        needed.extend(f.forms().iter().map(|form| form.ns.as_str()));
    }
    needed.extend(&referred);
    needed.remove("");
    (needed, referred)
}

/// The store's namespace tables outside `replaced`: the vars of the namespaces `of` names
/// (`None`: of every namespace), public ones told apart in those referred wholesale (`None`:
/// in all), and the names of every namespace the store knows.
pub(super) fn stored_tables(
    store: &Store,
    of: Option<(&BTreeSet<&str>, &BTreeSet<&str>)>,
    replaced: &HashSet<&str>,
    generation: Option<u64>,
) -> Result<Namespaces> {
    let mut nss = Namespaces::default();
    let stored = stored_vars(store, of.map(|(needed, _)| needed), replaced)?;
    let referred = |ns: &str| of.is_none_or(|(_, referred)| referred.contains(ns));
    // Privacy matters only where a namespace is referred wholesale (`:refer :all`, `:use`):
    // asked of those vars alone, as it costs a read of each defining form.
    let referred_ids: Vec<&str> = stored
        .iter()
        .filter(|(var, _)| var.split_once('/').is_some_and(|(ns, _)| referred(ns)))
        .map(|(_, id)| id.as_str())
        .collect();
    let private: HashSet<String> = if referred_ids.is_empty() {
        HashSet::new()
    } else {
        let rows = store.query(
            "ids[id] <- $ids ?[id] := ids[id], *form{id, private}, private",
            params([("ids", column(referred_ids.iter().map(|id| (*id).into())))]),
        )?;
        rows.rows.iter().map(|r| str_at(r, 0)).collect()
    };
    for (var, id) in &stored {
        let Some((ns, name)) = var.split_once('/') else { continue };
        nss.all_vars.entry(ns.to_string()).or_default().insert(name.to_string());
        if referred(ns) && !private.contains(id) {
            nss.publics.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    }
    let mut known = known_namespaces(store, replaced, generation)?;
    // Shared with the store handle: copied only when a namespace is not in it yet.
    for ns in nss.all_vars.keys() {
        if !ns.is_empty() && !known.contains(ns) {
            std::sync::Arc::make_mut(&mut known).insert(ns.to_string());
        }
    }
    nss.known = known;
    Ok(nss)
}

/// Add a parsed file's namespaces and definitions to the tables.
pub(super) fn add_definitions(nss: &mut Namespaces, f: &ParsedFile) {
    for form in f.forms() {
        if !form.ns.is_empty() && !nss.known.contains(form.ns.as_str()) {
            std::sync::Arc::make_mut(&mut nss.known).insert(form.ns.to_string());
        }
    }
    for form in f.forms() {
        for d in &form.analysis.defines {
            add_var(&mut nss.all_vars, &form.ns, &d.name);
            if !form.analysis.flags.private {
                add_var(&mut nss.publics, &form.ns, &d.name);
            }
        }
    }
}

/// Add var `name` to namespace `ns`'s set, copying the names only when they are new: a big
/// file's forms are mostly of one namespace, and each defines names seen once.
fn add_var(table: &mut HashMap<String, HashSet<String>>, ns: &str, name: &str) {
    match table.get_mut(ns) {
        Some(names) => {
            if !names.contains(name) {
                names.insert(name.to_string());
            }
        }
        None => {
            table.insert(ns.to_string(), HashSet::from([name.to_string()]));
        }
    }
}

/// (var, defining form id) of every var of the `nss` namespaces defined outside `replaced`.
/// Read from `defines` by key range (`ns/` up to `ns0`, `0` being the byte after `/`), the
/// cheapest read of a namespace's vars; a change touching many namespaces (an import) reads
/// all of `defines` once instead.
pub(super) fn stored_vars(
    store: &Store,
    nss: Option<&BTreeSet<&str>>,
    replaced: &HashSet<&str>,
) -> Result<Vec<(String, String)>> {
    const RANGES_PER_QUERY: usize = 32;
    if nss.is_some_and(|nss| nss.is_empty()) {
        return Ok(Vec::new());
    }
    let rows = if let Some(nss) = nss.filter(|nss| nss.len() <= RANGES_PER_QUERY) {
        let mut script = Vec::new();
        let mut bounds = Vec::new();
        for (i, ns) in nss.iter().enumerate() {
            script.push(format!("?[var, id] := *defines{{var, id}}, var >= $lo{i}, var < $hi{i}"));
            bounds.push((format!("lo{i}"), DataValue::from(format!("{ns}/"))));
            bounds.push((format!("hi{i}"), DataValue::from(format!("{ns}0"))));
        }
        store.query(&script.join("\n"), bounds.into_iter().collect())?.rows
    } else {
        let rows = store.query("?[var, id] := *defines{var, id}", Default::default())?;
        rows.rows
            .into_iter()
            .filter(|r| {
                nss.is_none_or(|nss| {
                    r[0].get_str()
                        .and_then(|v| v.split_once('/'))
                        .is_some_and(|(ns, _)| nss.contains(ns))
                })
            })
            .collect()
    };
    let mut gone: HashSet<String> = HashSet::new();
    if !replaced.is_empty() {
        gone = rows::ids_in_files(store, replaced.iter().copied())?.into_iter().collect();
    }
    Ok(rows
        .iter()
        .map(|r| (str_at(r, 0), str_at(r, 1)))
        .filter(|(_, id)| !gone.contains(id))
        .collect())
}

/// The namespaces of the store's files outside `replaced`: the ones a fully qualified symbol
/// may name without a `require`. With nothing replaced, the set the store handle holds.
pub fn known_namespaces(
    store: &Store,
    replaced: &HashSet<&str>,
    generation: Option<u64>,
) -> Result<std::sync::Arc<HashSet<String>>> {
    // Held by the store handle from one generation to the next (see `Store::file_nss_at`).
    let held = generation.and_then(|g| store.file_nss_at(g));
    let nss = match held {
        Some(nss) => nss,
        None => {
            let rows =
                store.query("?[path, ns] := *file{path, ns}, ns != ''", Default::default())?;
            let nss: crate::store::FileNss =
                std::sync::Arc::new(crate::store::FileNamespaces::new(
                    rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect(),
                ));
            if let Some(g) = generation {
                store.hold_file_nss(g, nss.clone());
            }
            nss
        }
    };
    if !replaced.iter().any(|path| nss.by_path.contains_key(*path)) {
        return Ok(nss.known.clone());
    }
    Ok(std::sync::Arc::new(
        nss.by_path
            .iter()
            .filter(|(path, _)| !replaced.contains(path.as_str()))
            .map(|(_, ns)| ns.clone())
            .collect(),
    ))
}
