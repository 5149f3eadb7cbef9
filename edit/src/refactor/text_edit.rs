//! Text edits: replacements of byte ranges, applied together.

use super::*;

#[derive(Clone, Debug)]
pub(crate) struct Edit {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) text: String,
}

impl Edit {
    pub(super) fn replace(node: Node, text: &str) -> Edit {
        Edit { start: node.start_byte(), end: node.end_byte(), text: text.to_string() }
    }

    /// Replace a symbol as written (namespace and name; its metadata stays).
    pub(super) fn replace_sym(sym: Node, text: &str) -> Edit {
        let start = syntax::field(sym, syntax::fields().namespace).unwrap_or(sym);
        let start = if start == sym {
            syntax::field(sym, syntax::fields().name).unwrap_or(sym).start_byte()
        } else {
            start.start_byte()
        };
        let end =
            syntax::field(sym, syntax::fields().name).map_or(sym.end_byte(), |n| n.end_byte());
        Edit { start, end, text: text.to_string() }
    }
}

/// Remove one value of a collection with the whitespace before it (after it, for the first).
pub(super) fn remove_value(node: Node) -> Edit {
    let Some(parent) = node.parent() else {
        return Edit { start: node.start_byte(), end: node.end_byte(), text: String::new() };
    };
    let vals = syntax::values(parent);
    let i = vals.iter().position(|v| *v == node).unwrap_or(0);
    if i > 0 {
        Edit { start: vals[i - 1].end_byte(), end: node.end_byte(), text: String::new() }
    } else if vals.len() > 1 {
        Edit { start: node.start_byte(), end: vals[1].start_byte(), text: String::new() }
    } else {
        Edit { start: node.start_byte(), end: node.end_byte(), text: String::new() }
    }
}

/// Remove a key/value pair (or two adjacent values) with the whitespace before them.
pub(super) fn remove_pair(key: Node, val: Node) -> Edit {
    let start = key
        .parent()
        .map(|p| syntax::values(p))
        .and_then(|vals| {
            let i = vals.iter().position(|v| *v == key)?;
            (i > 0).then(|| vals[i - 1].end_byte())
        })
        .unwrap_or(key.start_byte());
    Edit { start, end: val.end_byte(), text: String::new() }
}

/// Append a symbol to a vector.
pub(super) fn insert_value(vec: Node, name: &str) -> Edit {
    match syntax::values(vec).last() {
        Some(last) => {
            Edit { start: last.end_byte(), end: last.end_byte(), text: format!(" {name}") }
        }
        None => {
            let at = vec.end_byte() - 1;
            Edit { start: at, end: at, text: name.to_string() }
        }
    }
}

/// Apply non-overlapping edits (duplicates by range dropped; an insertion at a point keeps the
/// order given).
pub(crate) fn apply_edits(text: &str, edits: Vec<Edit>) -> String {
    apply_edits_in(text, (0, text.len()), edits)
}

pub(super) fn apply_edits_in(text: &str, range: (usize, usize), mut edits: Vec<Edit>) -> String {
    edits.retain(|e| e.start >= range.0 && e.end <= range.1);
    edits.sort_by_key(|e| (e.start, e.end));
    edits.dedup_by(|b, a| a.start == b.start && a.end == b.end && a.start != a.end);
    let mut out = String::with_capacity(range.1 - range.0 + 64);
    let mut at = range.0;
    for e in edits {
        if e.start < at {
            continue; // overlapping: the earlier edit wins
        }
        out.push_str(&text[at..e.start]);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&text[at..range.1]);
    out
}
