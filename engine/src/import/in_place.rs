//! One top-level form replaced in place, when the rest of its file and the store stay as they
//! were: the fast path of an agent's form edit.

use super::*;

/// The change that gives one stored top-level form a new text, computed for that form alone,
/// when nothing else in the store can read differently because of it. `file_text` is the whole
/// new text of its file: its hash is the file's, and it is kept whole with the forms when it is
/// exactly what they read as.
///
/// A save of a file re-reads, re-parses and re-resolves the whole file; an agent replacing one
/// function of a large file paid for all of it. In place, the form is parsed at its place,
/// resolved under its namespace's stored declaration and tables, and classified against the
/// stored purity of what it calls. That holds only while the rest of the store stays as it was,
/// so `None` (take the whole file through [`file_changes`]) unless:
/// - the old and the new form are top-level definitions (no `ns` form, no `comment` block, no
///   top-level call: a `(require ...)` changes how the file's other forms resolve);
/// - the new form defines the same vars, with the same privacy (the namespace tables the
///   other forms resolve against stay the same);
/// - no other form starts on its last line (the forms after it then move by whole lines,
///   their columns unchanged);
/// - its purity class is the old one, and so is every other class of its file: when a callee
///   in its own file calls it back, the stored classes it is computed from came partly from its
///   old text, and the file's classes are propagated again to tell.
///
/// The forms after it come as their `form` rows alone, moved; the change carries the store
/// generation everything was read at, and `apply` refuses it at a later one.
pub fn form_in_place(
    store: &Store,
    path: &str,
    id: &str,
    source: &str,
    file_text: &str,
) -> Result<Option<Vec<Change>>> {
    let mut timings = Timings::traced("form in place");
    let Some(lang) = Lang::from_path(path).filter(|l| *l != Lang::Edn) else { return Ok(None) };
    let rows = store.query(
        "?[ns, pos, kind, line, col, end_line, leading, purity, private, decl, trailing, generation,
           hash, rhash, arglists, macro, platforms] :=
             *form{id: $id, file, ns, pos, parent, kind, line, col, end_line, leading, purity, private,
                   hash, rhash, arglists, macro, platforms},
             file == $path, parent == '',
             *file{path: file, ns: file_ns, error, trailing}, error == '', file_ns == ns,
             *ns_decl{ns, file: decl_file, decl}, decl_file == file,
             *meta{key: 'generation', value: generation}",
        params([("id", id.into()), ("path", path.into())]),
    )?;
    let Some(r) = rows.rows.first() else { return Ok(None) };
    let (ns, pos, old_kind) = (str_at(r, 0), int_at(r, 1), str_at(r, 2));
    let (line, col, end_line) = (int_at(r, 3), int_at(r, 4), int_at(r, 5));
    let (leading, old_purity, old_private) = (str_at(r, 6), str_at(r, 7), r[8] == true.into());
    let in_place = |k: Kind| !matches!(k, Kind::Ns | Kind::Comment | Kind::Other);
    if !in_place(Kind::parse(&old_kind)) {
        return Ok(None);
    }
    let decl: NsDecl = match &r[9] {
        DataValue::Json(j) => match serde_json::from_value(j.0.clone()) {
            Ok(d) => d,
            Err(_) => return Ok(None),
        },
        _ => return Ok(None),
    };
    let trailing = str_at(r, 10);
    // What everything below is read at: `apply` writes the change only at the same generation.
    let Ok(generation) = str_at(r, 11).parse::<u64>() else { return Ok(None) };
    let old_vars: BTreeSet<String> =
        crate::query::vars_defined_by(store, id)?.into_iter().collect();
    // The stored form as `apply` compares with it, so that it reads it no more.
    let mut old_forms = HashMap::new();
    old_forms.insert(id.to_string(), stored_old_form(id, path, r));
    timings.lap("stored form");

    // The new text where the old one starts: every place in it is the file's.
    let (Ok(line0), Ok(col0)) = (usize::try_from(line - 1), usize::try_from(col - 1)) else {
        return Ok(None);
    };
    let placed = format!("{}{}{source}", "\n".repeat(line0), " ".repeat(col0));
    let mut parsed = forms::parse_file(path, lang, placed);
    let forms::Content::Forms { forms, trailing: after } = &mut parsed.content else {
        return Ok(None);
    };
    let [form] = forms.as_mut_slice() else { return Ok(None) };
    // Whether `file_text` is exactly what the file's forms read as once this one is placed (no
    // trivia of the new text around the form, which its row does not keep): only then is it
    // kept whole with them.
    let file_text_exact = after.is_empty() && form.source == source;
    let a = &form.analysis;
    let new_vars: BTreeSet<String> = a.defines.iter().map(|d| format!("{ns}/{}", d.name)).collect();
    // Lines the forms after it move by.
    let shift = i64::from(form.end.line) - i64::from(form.start.line) - (end_line - line);
    if !in_place(a.kind)
        || !after.trim().is_empty()
        || new_vars != old_vars
        || a.flags.private != old_private
        || !next_form_on_a_later_line(store, path, pos)?
    {
        return Ok(None);
    }
    form.ns = ns.as_str().into();
    form.leading = leading.into();
    form.hash = forms::hash_text_compact(&[&form.leading, &form.source]);
    parsed.ns = ns.clone();
    parsed.decl = decl;
    timings.lap("parse");

    // Resolved under the namespace's tables as stored: the file's other forms define what
    // they did, and this one the same vars.
    let nss = namespace_tables(store, &[&parsed], &HashSet::new(), Some(generation))?;
    let resolved = forms::resolve_file(&parsed, &nss);
    let Some(res) = resolved.first() else { return Ok(None) };
    let mut row = row_of(&parsed, &parsed.forms()[0], res.clone(), id, "", pos as usize);
    timings.lap("resolve");

    // Purity: against the stored class of every callee, and again with the callees of its
    // own file taken as pure; the two agree when the stored classes of its file do not matter.
    let calls: Vec<String> = row
        .calls
        .iter()
        .map(|c| c.to.to_string())
        .filter(|c| *c != row.fqn)
        .chain(row.unresolved.iter().map(|(s, _)| format!("?{s}")))
        .collect();
    let defs: Vec<String> = row.defines.iter().map(|(v, _)| v.to_string()).collect();
    let callees: BTreeSet<&str> =
        calls.iter().map(String::as_str).filter(|c| !c.starts_with('?')).collect();
    let mut stored = HashMap::new();
    let mut own_file = HashMap::new();
    for (var, p, file) in stored_purity_rows(store, &callees)? {
        by_var(&mut stored, var.clone(), p);
        by_var(&mut own_file, var, if file == path { Purity::Pure } else { p });
    }
    let one = [((), defs.clone(), calls)];
    let purity = purity::propagate(&one, &stored)[&()];
    if purity.as_str() != old_purity {
        return Ok(None);
    }
    if purity != purity::propagate(&one, &own_file)[&()]
        && calls_back(store, path, &own_file, &stored, &defs)?
        && !classes_of_file_hold(store, path, id, &one[0].2)?
    {
        return Ok(None);
    }
    row.purity = purity.as_str().into();
    timings.lap("purity");
    let file = FileRow {
        path: path.to_string(),
        lang: lang.as_str().into(),
        ns,
        hash: forms::content_hash(file_text.as_bytes()),
        trailing,
        error: None,
        raw: Vec::new(),
    };
    let mut forms = vec![row];
    if shift != 0 {
        forms.extend(forms_after(store, path, pos, shift, &mut old_forms)?);
        timings.lap("forms after");
    }
    let read = StoredForms { generation, paths: HashSet::new(), forms: old_forms };
    let text = (file_text_exact && file_text.len() <= change::FILE_TEXT_MAX)
        .then(|| crate::packed::pack(file_text.as_bytes()));
    Ok(Some(vec![Change::PutForms { file, forms, generation, text }, Change::Read(Box::new(read))]))
}

/// The top-level form `id` of `path` as `apply` compares with it, from the columns
/// [`form_in_place`] reads of it.
pub(super) fn stored_old_form(id: &str, path: &str, r: &[DataValue]) -> change::OldForm {
    // In `change::OLD_FORM_COLS` order: id, hash, pos, line, col, parent, purity, file, ns,
    // rhash, arglists, macro, kind, platforms.
    let old = [
        id.into(),
        r[12].clone(),
        r[1].clone(),
        r[3].clone(),
        r[4].clone(),
        "".into(),
        r[7].clone(),
        path.into(),
        r[0].clone(),
        r[13].clone(),
        r[14].clone(),
        r[15].clone(),
        r[2].clone(),
        r[16].clone(),
    ];
    change::OldForm::from_row(&old)
}

/// Stored forms as `apply` compares with them, from their rows read with `change::FORM_COLS`.
pub(super) fn old_forms_of_rows(
    rows: &[Vec<DataValue>],
) -> impl Iterator<Item = (String, change::OldForm)> + '_ {
    let form_cols: Vec<&str> = change::FORM_COLS.split(", ").collect();
    // The `FORM_COLS` place of each `OLD_FORM_COLS` column.
    let at: Vec<usize> = (change::OLD_FORM_COLS.split(", "))
        .map(|c| form_cols.iter().position(|f| *f == c).expect("a column of `form`"))
        .collect();
    rows.iter().map(move |r| {
        let old: Vec<DataValue> = at.iter().map(|&i| r[i].clone()).collect();
        (str_at(r, 0), change::OldForm::from_row(&old))
    })
}

/// The stored forms after top-level position `pos` of `path` (with their comment-block
/// children), moved down by `shift` lines: what a whole-file save would write of them. Only
/// their `form` rows are read: what hangs off a form (calls, unresolved symbols, defines, call
/// sites, findings) is stored relative to its first line, and `apply` writes nothing else of
/// a form that only moved.
pub(super) fn forms_after(
    store: &Store,
    path: &str,
    pos: i64,
    shift: i64,
    old_forms: &mut HashMap<String, change::OldForm>,
) -> Result<Vec<FormRow>> {
    let cols = change::FORM_COLS;
    let top = store.query(
        &format!(
            "?[{cols}] := *form_at{{file: $path, pos: p, id}}, p > $pos, *form{{{cols}}}, parent == ''"
        ),
        params([("path", path.into()), ("pos", pos.into())]),
    )?;
    let mut rows = top.rows;
    // The children of the comment blocks among them (there is no index by parent: the file's
    // forms are read, and only when there is a block).
    let blocks: Vec<DataValue> =
        rows.iter().filter(|r| r[5].get_str() == Some("comment")).map(|r| r[0].clone()).collect();
    if !blocks.is_empty() {
        let children = store.query(
            &format!(
                "?[{cols}] := *form_at{{file: $path, id}}, *form{{{cols}}}, is_in(parent, $blocks)"
            ),
            params([("path", path.into()), ("blocks", DataValue::List(blocks))]),
        )?;
        rows.extend(children.rows);
    }
    // As stored, for `apply` to compare with instead of reading them again.
    old_forms.extend(old_forms_of_rows(&rows));
    let mut forms: Vec<FormRow> = rows.iter().map(|r| change::form_from_row(r)).collect();
    let moved = |l: u32| (i64::from(l) + shift).max(1) as u32;
    for f in &mut forms {
        f.start.line = moved(f.start.line);
        f.end.line = moved(f.end.line);
        // Stored sites count lines from the form's first: only found ones move.
        if let change::Sites::Found(sites) = &mut f.sites {
            for s in sites {
                s.pos.line = moved(s.pos.line);
            }
        }
    }
    forms.sort_by(|a, b| (&a.parent, a.pos).cmp(&(&b.parent, b.pos)));
    Ok(forms)
}

/// Whether a callee of the form defined in its own file (one whose class in `own_file` was
/// taken as pure) calls, through its file, one of the form's own vars `defs`: then its stored
/// class may have come from the form's old text.
pub(super) fn calls_back(
    store: &Store,
    path: &str,
    own_file: &HashMap<String, Purity>,
    stored: &HashMap<String, Purity>,
    defs: &[String],
) -> Result<bool> {
    let start: Vec<&str> = own_file
        .iter()
        .filter(|(v, p)| stored.get(*v) != Some(p))
        .map(|(v, _)| v.as_str())
        .collect();
    let rows = store.query(
        "start[v] <- $start
         reach[v] := start[v]
         reach[w] := reach[v], *defines{var: v, id}, *form{id, callees, file}, file == $path, w in callees
         ?[v] := reach[v], is_in(v, $own)",
        params([
            ("start", column(start.iter().map(|v| (*v).into()))),
            ("path", path.into()),
            ("own", DataValue::List(defs.iter().map(|v| v.as_str().into()).collect())),
        ]),
    )?;
    Ok(!rows.rows.is_empty())
}

/// Whether every form of `path` keeps its stored class once form `id` calls `calls`: the
/// classes of the whole file propagated again, as a save of the file would, with the callees
/// outside it at their stored classes. A form in a cycle of calls through its own file (`f`
/// calls `g`, which calls `f` back) took its stored class partly from its old text, so its
/// class against the stored ones proves nothing; this settles it exactly, for the price of
/// reading the file's forms (on the 1 M-line store, 8 edits in 300 fell back to a whole-file
/// save here, at 30–110 ms each).
fn classes_of_file_hold(store: &Store, path: &str, id: &str, calls: &[String]) -> Result<bool> {
    let ids: BTreeSet<String> = rows::ids_in_files(store, [path])?.into_iter().collect();
    let file_forms = classes::stored_purity_of(store, &ids)?;
    let mut graph = purity::Graph::default();
    for (form, defs, stored_calls, _) in &file_forms {
        let calls = if form == id { calls } else { stored_calls.as_slice() };
        graph.push(defs.iter().map(String::as_str), calls.iter().map(String::as_str));
    }
    let this_file = HashSet::from([path]);
    let outside = classes::stored_purity(store, graph.outside_callees(), &this_file, None)?;
    let classes = graph.propagate(&outside);
    Ok(file_forms.iter().zip(classes).all(|((_, _, _, was), now)| *was == now))
}

/// Whether the top-level form after position `pos` of `path` (if any) starts on a later line
/// than the one at `pos` ends.
pub(super) fn next_form_on_a_later_line(store: &Store, path: &str, pos: i64) -> Result<bool> {
    let rows = store.query(
        "?[leading] := *form_at{file: $path, pos: $next, id, source_chars}, source_chars > 0,
             *form{id, leading}",
        params([("path", path.into()), ("next", (pos + 1).into())]),
    )?;
    Ok(rows.rows.first().is_none_or(|r| str_at(r, 0).contains('\n')))
}
