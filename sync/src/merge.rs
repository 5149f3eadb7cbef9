//! The per-form three-way merge of a path changed both in `DIR` and in the store since they were
//! last in step: forms changed on one side only take that side's text; a form changed on both
//! sides (differently) takes the disk's text and is reported, so the store's text can be kept as
//! a draft.
//!
//! Forms are matched by identity (kind, name and dispatch value; unnamed forms by their text),
//! as `formdb_edit::save` matches a save against a moved store. A form owns the trivia before
//! it, so a comment added above a form is a change of that form.

use std::collections::{HashMap, HashSet};

use formdb_edit::save::{self, Piece};

use formdb_engine::syntax::Lang;

/// The forms of one side, matched by identity as `formdb_edit::save` matches a mount's save
/// against a moved store; with each form's name for reports (`line N` for unnamed ones).
fn pieces(path: &str, lang: Lang, text: &str) -> Option<(Vec<Piece>, Vec<String>, String)> {
    let (pieces, trailing) = save::pieces(path, lang, text)?;
    let labels =
        pieces
            .iter()
            .map(|p| {
                if p.name.is_empty() {
                    format!("line {}", p.line)
                } else {
                    format!("`{}`", p.name)
                }
            })
            .collect();
    Some((pieces, labels, trailing))
}

/// The merged text, and the forms changed on both sides (indexes into the store's forms in
/// file order, which are the stored top-level forms by position).
pub(crate) struct Merged {
    pub text: String,
    pub conflicts: Vec<usize>,
    /// Names of the conflicting forms (`line N` for unnamed ones), in the same order.
    pub labels: Vec<String>,
}

/// Merge the disk's and the store's texts of `path`, both changed from `base`. `None` when one
/// of the three does not parse (the caller then treats the whole file as one conflict).
pub(crate) fn merge(path: &str, lang: Lang, base: &str, store: &str, disk: &str) -> Option<Merged> {
    let (base, _, base_trailing) = pieces(path, lang, base)?;
    let (store, store_labels, store_trailing) = pieces(path, lang, store)?;
    let (disk, _, disk_trailing) = pieces(path, lang, disk)?;
    let base_text: HashMap<&str, &str> =
        base.iter().map(|p| (p.key.as_str(), p.text.as_str())).collect();
    let store_at: HashMap<&str, usize> =
        store.iter().enumerate().map(|(i, p)| (p.key.as_str(), i)).collect();
    let disk_keys: HashSet<&str> = disk.iter().map(|p| p.key.as_str()).collect();
    let mut conflicts = Vec::new();
    let mut out: Vec<(&str, &str)> = Vec::new();
    for d in &disk {
        let key = d.key.as_str();
        let s = store_at.get(key).map(|&i| (i, store[i].text.as_str()));
        let text = match (base_text.get(key), s) {
            // Unchanged on disk: the store's side (changed or not).
            (Some(b), Some((_, s))) if *b == d.text => s,
            (Some(b), Some((_, s))) if *b == s || s == d.text => &d.text,
            (Some(_), Some((i, _))) | (None, Some((i, _))) if store[i].text != d.text => {
                conflicts.push(i);
                &d.text
            }
            // Deleted in the store, unchanged on disk: gone.
            (Some(b), None) if *b == d.text => continue,
            // Deleted in the store, changed on disk: the disk's text stays (nothing of the
            // store's is lost, so it is no conflict).
            _ => &d.text,
        };
        out.push((key, text));
    }
    // Forms the store added go after the form that precedes them in the store's text; forms
    // the disk deleted and the store changed stay deleted (the disk wins) and are reported.
    for (i, s) in store.iter().enumerate() {
        let key = s.key.as_str();
        if disk_keys.contains(key) {
            continue;
        }
        match base_text.get(key) {
            None => {}
            Some(b) if *b == s.text => continue,
            Some(_) => {
                conflicts.push(i);
                continue;
            }
        }
        let after = store[..i]
            .iter()
            .rev()
            .find_map(|prev| out.iter().position(|(k, _)| *k == prev.key.as_str()));
        out.insert(after.map_or(0, |a| a + 1), (key, s.text.as_str()));
    }
    let trailing = if disk_trailing == base_trailing { store_trailing } else { disk_trailing };
    let mut text: String = out.into_iter().map(|(_, t)| t).collect();
    text.push_str(&trailing);
    conflicts.sort_unstable();
    let labels = conflicts.iter().map(|&i| store_labels[i].clone()).collect();
    Some(Merged { text, conflicts, labels })
}

/// How many forms of `disk` differ from `other` (changed, added or gone), counting a changed
/// trailing text as one; `None` when either does not parse. What tells which of the texts a
/// file held lately its writer edited (see `Worker::classify`).
pub(crate) fn distance(path: &str, lang: Lang, other: &str, disk: &str) -> Option<usize> {
    let (other, other_trailing) = save::pieces(path, lang, other)?;
    let (disk, disk_trailing) = save::pieces(path, lang, disk)?;
    let other_text: HashMap<&str, &str> =
        other.iter().map(|p| (p.key.as_str(), p.text.as_str())).collect();
    let disk_keys: HashSet<&str> = disk.iter().map(|p| p.key.as_str()).collect();
    let changed = disk.iter().filter(|d| other_text.get(d.key.as_str()) != Some(&d.text.as_str()));
    let gone = other.iter().filter(|o| !disk_keys.contains(o.key.as_str()));
    Some(changed.count() + gone.count() + usize::from(other_trailing != disk_trailing))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "(ns a)\n\n(defn f [] 1)\n\n(defn g [] 2)\n";

    fn run(store: &str, disk: &str) -> Merged {
        merge("a.clj", Lang::Clj, BASE, store, disk).unwrap()
    }

    #[test]
    fn forms_changed_on_one_side_each_both_survive() {
        let m = run(
            "(ns a)\n\n(defn f [] 10)\n\n(defn g [] 2)\n",
            "(ns a)\n\n(defn f [] 1)\n\n(defn g [] 20)\n",
        );
        assert_eq!(m.text, "(ns a)\n\n(defn f [] 10)\n\n(defn g [] 20)\n");
        assert!(m.conflicts.is_empty());
    }

    #[test]
    fn a_form_changed_on_both_sides_takes_the_disk_text_and_is_reported() {
        let m = run(
            "(ns a)\n\n(defn f [] 10)\n\n(defn g [] 2)\n",
            "(ns a)\n\n(defn f [] 11)\n\n(defn g [] 2)\n",
        );
        assert_eq!(m.text, "(ns a)\n\n(defn f [] 11)\n\n(defn g [] 2)\n");
        assert_eq!(m.conflicts, vec![1]);
        assert_eq!(m.labels, vec!["`f`".to_string()]);
    }

    #[test]
    fn additions_and_deletions_on_either_side_merge() {
        // The store added h after f; the disk deleted g.
        let m = run(
            "(ns a)\n\n(defn f [] 1)\n\n(defn h [] 3)\n\n(defn g [] 2)\n",
            "(ns a)\n\n(defn f [] 1)\n",
        );
        assert_eq!(m.text, "(ns a)\n\n(defn f [] 1)\n\n(defn h [] 3)\n");
        assert!(m.conflicts.is_empty());
    }
}
