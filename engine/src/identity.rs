//! Form identity: which new form is which old one, so ids survive re-import, edits and reorders.
//!
//! A form keeps its id while it is recognisably the same form: the same kind and name (and
//! dispatch value for `defmethod`); a kind change within one name (`defn` → `defn-`) still
//! matches; a form renamed and otherwise unchanged keeps its id; unnamed forms match by
//! identical content first, then by head symbol, position and content similarity. Ids of new forms are derived from the file path and the form's identity,
//! so importing the same tree twice into fresh stores gives the same ids.

use std::collections::{HashMap, HashSet};

/// What identity matching needs to know of a form.
#[derive(Clone, Debug)]
pub struct Key<'a> {
    pub kind: &'a str,
    pub head: &'a str,
    pub name: &'a str,
    pub dispatch: &'a str,
    pub hash: &'a str,
    pub source: &'a str,
    pub pos: usize,
}

/// For each new form, the index of the old form it continues, if any.
pub fn match_forms(old: &[Key], new: &[Key]) -> Vec<Option<usize>> {
    let mut result = vec![None; new.len()];
    let mut used = vec![false; old.len()];

    // 1. Same kind, name and dispatch value; 2. the same name whatever the kind.
    type IdentityKey = Option<(String, String, String)>;
    let passes: [fn(&Key) -> IdentityKey; 2] = [
        |k| {
            (!k.name.is_empty())
                .then(|| (k.kind.to_string(), k.name.to_string(), k.dispatch.to_string()))
        },
        |k| {
            (!k.name.is_empty())
                .then(|| (String::new(), k.name.to_string(), k.dispatch.to_string()))
        },
    ];
    for key_of in passes {
        let mut by_key: HashMap<(String, String, String), Vec<usize>> = HashMap::new();
        for (i, o) in old.iter().enumerate().rev() {
            if !used[i] {
                if let Some(k) = key_of(o) {
                    by_key.entry(k).or_default().push(i);
                }
            }
        }
        for (j, n) in new.iter().enumerate() {
            if result[j].is_some() {
                continue;
            }
            let Some(k) = key_of(n) else { continue };
            if let Some(i) = by_key.get_mut(&k).and_then(Vec::pop) {
                used[i] = true;
                result[j] = Some(i);
            }
        }
    }

    // 2b. A named form renamed in place: an old named form nothing matched whose text, with
    // its name replaced by the new one (recursive calls included), is the new form's text.
    // Renames by an agent's `rename_symbol` or in an editor keep the id that way.
    for (j, n) in new.iter().enumerate() {
        if result[j].is_some() || n.name.is_empty() {
            continue;
        }
        let renamed = (0..old.len()).find(|&i| {
            let o = &old[i];
            !used[i]
                && !o.name.is_empty()
                && o.kind == n.kind
                && o.dispatch == n.dispatch
                && replace_symbol(o.source, o.name, n.name) == n.source
        });
        if let Some(i) = renamed {
            used[i] = true;
            result[j] = Some(i);
        }
    }

    // 3. Identical content (leading trivia and source).
    let mut by_hash: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, o) in old.iter().enumerate().rev() {
        if !used[i] && o.name.is_empty() {
            by_hash.entry(o.hash).or_default().push(i);
        }
    }
    for (j, n) in new.iter().enumerate() {
        if result[j].is_none() && n.name.is_empty() {
            if let Some(i) = by_hash.get_mut(n.hash).and_then(Vec::pop) {
                used[i] = true;
                result[j] = Some(i);
            }
        }
    }

    // 4. Unnamed forms with the same head: the most similar content, nearest position breaking
    // ties; a form that shares too little is a new form.
    for (j, n) in new.iter().enumerate() {
        if result[j].is_some() || !n.name.is_empty() {
            continue;
        }
        let mut best: Option<(f64, usize, usize)> = None;
        for (i, o) in old.iter().enumerate() {
            if used[i] || !o.name.is_empty() || o.head != n.head || o.kind != n.kind {
                continue;
            }
            let sim = similarity(o.source, n.source);
            let dist = o.pos.abs_diff(n.pos);
            let score = sim - (dist as f64) * 0.01;
            if sim >= 0.5 && best.is_none_or(|(s, _, _)| score > s) {
                best = Some((score, dist, i));
            }
        }
        if let Some((_, _, i)) = best {
            used[i] = true;
            result[j] = Some(i);
        }
    }
    result
}

/// Share of the longer text covered by the common prefix and suffix: cheap, and enough to tell
/// an edited form from an unrelated one.
pub fn similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 1.0;
    }
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix =
        a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    (prefix + suffix) as f64 / longest as f64
}

pub(crate) const ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";

/// A new short printable id (8 characters, no look-alike letters) derived from `seed`; `taken`
/// says whether an id is already in use, and a collision moves on to the next derivation.
pub fn new_id(seed: &str, taken: &mut dyn FnMut(&str) -> bool) -> String {
    for attempt in 0u32.. {
        let mut h = blake3::Hasher::new();
        h.update(seed.as_bytes());
        h.update(&attempt.to_le_bytes());
        let bytes = h.finalize();
        let mut n = u64::from_le_bytes(bytes.as_bytes()[..8].try_into().expect("8 bytes"));
        let mut id = String::with_capacity(8);
        for _ in 0..8 {
            id.push(ALPHABET[(n % 32) as usize] as char);
            n /= 32;
        }
        if !taken(&id) {
            return id;
        }
    }
    unreachable!("the attempt counter is unbounded")
}

/// A form id [`new_id`] makes as a number (five bits a character), for sets of many ids; `None`
/// for any other string.
pub fn id_number(id: &str) -> Option<u64> {
    if id.len() != 8 {
        return None;
    }
    id.bytes().try_fold(0u64, |n, b| {
        let digit = ALPHABET.iter().position(|&a| a == b)?;
        Some(n << 5 | digit as u64)
    })
}

/// A set of form ids, those [`new_id`] makes held as numbers: a big save gives out an id a
/// form, and a big store holds one a form (as strings, about 90 bytes each).
#[derive(Default)]
pub(crate) struct IdSet {
    numbers: HashSet<u64>,
    others: HashSet<String>,
}

impl IdSet {
    pub(crate) fn insert(&mut self, id: &str) {
        match id_number(id) {
            Some(n) => self.numbers.insert(n),
            None => self.others.insert(id.to_string()),
        };
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        match id_number(id) {
            Some(n) => self.numbers.contains(&n),
            None => self.others.contains(id),
        }
    }
}

/// Does this look like a form id (as opposed to a var name)?
pub fn looks_like_id(s: &str) -> bool {
    s.len() == 8 && s.bytes().all(|b| ALPHABET.contains(&b))
}

/// `text` with every whole symbol `from` (not a part of a longer symbol) replaced by `to`.
fn replace_symbol(text: &str, from: &str, to: &str) -> String {
    let constituent = |c: char| c.is_alphanumeric() || "*+!-_'?<>=/.:#$%&|".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().last().or_else(|| out.chars().last());
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(constituent) || after.is_some_and(constituent) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(kind: &'a str, name: &'a str, source: &'a str, pos: usize) -> Key<'a> {
        Key { kind, head: kind, name, dispatch: "", hash: source, source, pos }
    }

    #[test]
    fn named_forms_match_by_name_across_reorder_and_edit() {
        let old = [
            key("ns", "a", "(ns a)", 0),
            key("defn", "f", "(defn f [] 1)", 1),
            key("defn", "g", "(defn g [] 2)", 2),
        ];
        let new = [
            key("ns", "a", "(ns a)", 0),
            key("defn", "g", "(defn g [] 2)", 1),
            key("defn", "f", "(defn f [] 100)", 2),
        ];
        assert_eq!(match_forms(&old, &new), vec![Some(0), Some(2), Some(1)]);
    }

    #[test]
    fn a_rename_in_place_keeps_identity_and_a_new_form_does_not() {
        let old = [key("defn", "f", "(defn f [n] (if (pos? n) (f (dec n)) 0))", 0)];
        let new = [
            key("defn", "g", "(defn g [n] (if (pos? n) (g (dec n)) 0))", 0),
            key("defn", "h", "(defn h [n] 1)", 1),
        ];
        assert_eq!(match_forms(&old, &new), vec![Some(0), None]);
        // A rename with another change is a new form.
        let new = [key("defn", "g", "(defn g [n] (if (pos? n) (g (dec n)) 1))", 0)];
        assert_eq!(match_forms(&old, &new), vec![None]);
    }

    #[test]
    fn whole_symbols_are_replaced() {
        assert_eq!(replace_symbol("(defn f [fx] (f fx))", "f", "g"), "(defn g [fx] (g fx))");
        assert_eq!(
            replace_symbol("(defn a-b [] (a-b-c a-b))", "a-b", "x"),
            "(defn x [] (a-b-c x))"
        );
    }

    #[test]
    fn kind_change_keeps_identity() {
        let old = [key("defn", "f", "(defn f [] 1)", 0)];
        let new = [key("defn-", "f", "(defn- f [] 1)", 0)];
        assert_eq!(match_forms(&old, &new), vec![Some(0)]);
    }

    #[test]
    fn unnamed_forms_match_by_content_then_similarity() {
        let old = [
            key("other", "", "(println 1)", 0),
            key("other", "", "(swap! a inc)", 1),
            key("other", "", "(reset! b {:x 1 :y 2})", 2),
        ];
        let new = [
            key("other", "", "(reset! b {:x 1 :y 3})", 0),
            key("other", "", "(println 1)", 1),
            key("other", "", "(completely different)", 2),
        ];
        assert_eq!(match_forms(&old, &new), vec![Some(2), Some(0), None]);
    }

    #[test]
    fn duplicate_names_pair_in_order() {
        let old = [key("def", "x", "(def x 1)", 0), key("def", "x", "(def x 2)", 1)];
        let new = [key("def", "x", "(def x 1)", 0), key("def", "x", "(def x 2)", 1)];
        assert_eq!(match_forms(&old, &new), vec![Some(0), Some(1)]);
    }

    #[test]
    fn ids_are_short_printable_deterministic_and_avoid_collisions() {
        let a = new_id("src/a.clj\0defn\0f", &mut |_| false);
        assert_eq!(a.len(), 8);
        assert!(looks_like_id(&a));
        assert_eq!(a, new_id("src/a.clj\0defn\0f", &mut |_| false));
        let b = new_id("src/a.clj\0defn\0f", &mut |id| id == a);
        assert_ne!(a, b);
        assert!(!looks_like_id("my.ns/f"));
    }

    /// Ids as numbers tell every id apart, and nothing else is one.
    #[test]
    fn ids_as_numbers_are_one_to_one() {
        let ids: Vec<String> =
            (0..2000).map(|i| new_id(&format!("f{i}"), &mut |_| false)).collect();
        let numbers: std::collections::HashSet<u64> =
            ids.iter().map(|id| id_number(id).unwrap()).collect();
        assert_eq!(numbers.len(), ids.iter().collect::<std::collections::HashSet<_>>().len());
        for not_an_id in ["", "abcdefg", "abcdefghi", "abcdefgl", "my.ns/fx", "ABCDEFGH"] {
            assert_eq!(id_number(not_an_id), None, "{not_an_id}");
        }
    }
}
