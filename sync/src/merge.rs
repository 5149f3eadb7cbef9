//! The per-form three-way merge of a path changed both in `DIR` and in the store since they were
//! last in step: forms changed on one side only take that side's text; a form changed on both
//! sides (differently) takes the disk's text and is reported, so the store's text can be kept as
//! a draft.
//!
//! Forms are matched by identity (kind, name and dispatch value; unnamed forms by their text),
//! as `formdb_edit::save` matches a save against a moved store. A form owns the trivia before
//! it, so a comment added above a form is a change of that form.

use std::collections::{HashMap, HashSet};

use formdb_edit::save::{self, same_form_text as same, Piece};

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
    /// Names of forms the store deleted that the disk's text keeps (changed there, or
    /// contested): conflicts too, with no stored form to point at.
    pub kept_deleted: Vec<String>,
}

/// Merge the disk's and the store's texts of `path`, both changed from `base`. `None` when one
/// of the texts does not parse (the caller then treats the whole file as one conflict).
///
/// `older`: a text the file held before `base` that the disk's writer may have read instead,
/// when the texts cannot tell (the sync wrote the store's edits over it just before). A form
/// the two have differently is then contested: unless the disk has it as `base` has it, the
/// disk's text of it wins and it is reported, so that the store's text is kept as a draft
/// whichever the writer read.
pub(crate) fn merge(
    path: &str,
    lang: Lang,
    base: &str,
    store: &str,
    disk: &str,
    older: Option<&FormTexts>,
) -> Option<Merged> {
    let (base, _, base_trailing) = pieces(path, lang, base)?;
    let (store, store_labels, store_trailing) = pieces(path, lang, store)?;
    let (disk, disk_labels, disk_trailing) = pieces(path, lang, disk)?;
    let base_text: HashMap<&str, &str> =
        base.iter().map(|p| (p.key.as_str(), p.text.as_str())).collect();
    // The form is one `older` and `base` have differently.
    let contested = |key: &str| {
        older.is_some_and(|o| match (o.get(key), base_text.get(key)) {
            (Some(o), Some(b)) => !same(o, b),
            (o, b) => o.is_some() != b.is_some(),
        })
    };
    let store_at: HashMap<&str, usize> =
        store.iter().enumerate().map(|(i, p)| (p.key.as_str(), i)).collect();
    let disk_keys: HashSet<&str> = disk.iter().map(|p| p.key.as_str()).collect();
    let mut conflicts = Vec::new();
    let mut kept_deleted = Vec::new();
    let mut out: Vec<(&str, &str)> = Vec::new();
    for (d, label) in disk.iter().zip(&disk_labels) {
        let key = d.key.as_str();
        let s = store_at.get(key).map(|&i| (i, store[i].text.as_str()));
        let text = match (base_text.get(key), s) {
            // Unchanged on disk: the store's side (changed or not).
            (Some(b), Some((_, s))) if same(b, &d.text) => s,
            (Some(b), Some((i, s))) if same(b, s) || same(s, &d.text) => {
                if !same(s, &d.text) && contested(key) {
                    conflicts.push(i);
                }
                &d.text
            }
            (Some(_), Some((i, _))) | (None, Some((i, _))) if !same(&store[i].text, &d.text) => {
                conflicts.push(i);
                &d.text
            }
            // Deleted in the store, unchanged on disk: gone.
            (Some(b), None) if same(b, &d.text) => continue,
            // Deleted in the store and changed on disk, or contested and on disk: the disk's
            // text stays, and the store's deletion is reported.
            (Some(_), None) => {
                kept_deleted.push(label.clone());
                &d.text
            }
            (None, None) if contested(key) => {
                kept_deleted.push(label.clone());
                &d.text
            }
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
            Some(b) if same(b, &s.text) => {
                if contested(key) {
                    conflicts.push(i);
                }
                continue;
            }
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
    Some(Merged { text, conflicts, labels, kept_deleted })
}

/// A text's top-level forms, each with its text, by identity (as [`merge`] matches them), and
/// its trailing text: parsed once to be compared with several others.
pub(crate) struct FormTexts {
    forms: Vec<(String, String)>,
    by_key: HashMap<String, usize>,
    trailing: String,
}

impl FormTexts {
    /// `None` when `text` does not parse.
    pub(crate) fn parse(path: &str, lang: Lang, text: &str) -> Option<FormTexts> {
        let (pieces, trailing) = save::pieces(path, lang, text)?;
        let forms: Vec<(String, String)> = pieces.into_iter().map(|p| (p.key, p.text)).collect();
        let by_key = forms.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
        Some(FormTexts { forms, by_key, trailing })
    }

    /// The namespace its `ns` form declares, if it has one.
    pub(crate) fn namespace(&self) -> Option<&str> {
        let (key, _) = self.forms.iter().find(|(k, _)| k.starts_with("ns:"))?;
        key["ns:".len()..].split(':').next()
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.by_key.get(key).map(|&i| self.forms[i].1.as_str())
    }

    /// Whether both have the form of `key` alike (or both lack it).
    fn alike(&self, other: &FormTexts, key: &str) -> bool {
        match (self.get(key), other.get(key)) {
            (Some(a), Some(b)) => same(a, b),
            (a, b) => a.is_none() && b.is_none(),
        }
    }

    /// How many forms of `disk` differ from these (changed, added or gone), counting a changed
    /// trailing text as one. What tells which of the texts a file held lately its writer
    /// edited (see `Worker::classify`).
    pub(crate) fn distance(&self, disk: &FormTexts) -> usize {
        let changed = disk.forms.iter().filter(|(k, _)| !self.alike(disk, k));
        let gone = self.forms.iter().filter(|(k, _)| disk.get(k).is_none());
        changed.count() + gone.count() + usize::from(self.trailing != disk.trailing)
    }

    /// Whether both have the same forms in the same order, each alike (trailing text aside).
    pub(crate) fn same_forms(&self, other: &FormTexts) -> bool {
        self.forms.len() == other.forms.len()
            && self.forms.iter().zip(&other.forms).all(|((a, at), (b, bt))| a == b && same(at, bt))
    }
}

/// Whether `disk` has a form as `agreed` has it that `older` has otherwise or not at all (or
/// lacks one `agreed` lacks and `older` has): its writer read a text newer than `older`.
pub(crate) fn read_after(older: &FormTexts, agreed: &FormTexts, disk: &FormTexts) -> bool {
    let keys = older.forms.iter().chain(&agreed.forms).map(|(k, _)| k.as_str());
    keys.into_iter().any(|k| !older.alike(agreed, k) && disk.alike(agreed, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "(ns a)\n\n(defn f [] 1)\n\n(defn g [] 2)\n";

    fn run(store: &str, disk: &str) -> Merged {
        merge("a.clj", Lang::Clj, BASE, store, disk, None).unwrap()
    }

    fn parse(text: &str) -> FormTexts {
        FormTexts::parse("a.clj", Lang::Clj, text).unwrap()
    }

    fn run_older(older: &str, store: &str, disk: &str) -> Merged {
        merge("a.clj", Lang::Clj, BASE, store, disk, Some(&parse(older))).unwrap()
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

    #[test]
    fn blank_lines_a_deleted_neighbour_leaves_are_no_change_of_a_form() {
        // The disk deleted f, leaving two blank lines before g; the store deleted g.
        let m = run("(ns a)\n\n(defn f [] 1)\n", "(ns a)\n\n\n(defn g [] 2)\n");
        assert_eq!(m.text, "(ns a)\n");
        assert!(m.conflicts.is_empty() && m.kept_deleted.is_empty());
    }

    #[test]
    fn a_form_deleted_in_the_store_and_changed_on_disk_stays_and_is_reported() {
        let m = run("(ns a)\n\n(defn f [] 1)\n", "(ns a)\n\n(defn f [] 1)\n\n(defn g [] 20)\n");
        assert_eq!(m.text, "(ns a)\n\n(defn f [] 1)\n\n(defn g [] 20)\n");
        assert_eq!(m.kept_deleted, vec!["`g`".to_string()]);
    }

    #[test]
    fn forms_an_older_text_had_otherwise_take_the_disk_text_and_are_reported() {
        // The store's edits written over OLDER changed f and added h; the disk has both as
        // OLDER had them (it undid them, or wrote OLDER back): the disk wins, reported.
        let older = "(ns a)\n\n(defn f [] 0)\n\n(defn g [] 2)\n";
        let store = "(ns a)\n\n(defn f [] 1)\n\n(defn g [] 2)\n\n(defn h [] 3)\n";
        let base = store;
        let m = merge("a.clj", Lang::Clj, base, store, older, Some(&parse(older))).unwrap();
        assert_eq!(m.text, older);
        assert_eq!(m.labels, vec!["`f`".to_string(), "`h`".to_string()]);
        // Without the older text, the same disk text is an edit of f and a deletion of h.
        let m = merge("a.clj", Lang::Clj, base, store, older, None).unwrap();
        assert_eq!(m.text, older);
        assert!(m.conflicts.is_empty());
        // A form the two texts have alike merges as ever: g changed on disk alone, f as the
        // agreed text has it.
        let disk = BASE.replace("[] 2", "[] 22");
        let m = run_older(older, BASE, &disk);
        assert_eq!(m.text, disk);
        assert!(m.conflicts.is_empty(), "{:?}", m.labels);
    }

    #[test]
    fn a_disk_text_with_a_form_as_only_the_agreed_text_has_it_was_read_after_the_older() {
        let (older, agreed) = (parse("(ns a)\n\n(defn f [] 0)\n\n(defn g [] 2)\n"), parse(BASE));
        let read = |disk: &str| read_after(&older, &agreed, &parse(disk));
        assert!(read("(ns a)\n\n(defn f [] 1)\n\n(defn g [] 20)\n"), "f as agreed");
        assert!(!read("(ns a)\n\n(defn f [] 0)\n\n(defn g [] 20)\n"), "f as older");
        assert!(!read("(ns a)\n\n(defn f [] 5)\n"), "f as neither");
    }
}
