//! The one-form-per-line view of a file's text.

use formdb_engine::syntax::{self, KindOf, NodeKind};
use tree_sitter::Node;

/// Every top-level form on exactly one line: whitespace runs collapsed to one space outside
/// strings (none after an opening or before a closing bracket), comments and `#_` discards
/// inside forms dropped, raw newlines in strings written as `\n`. A text that does not parse is
/// returned as is.
pub fn oneline_text(text: &str) -> String {
    if text.len() > syntax::IN_RUNS_OVER {
        return oneline_in_runs(text);
    }
    let tree = syntax::parse(text);
    if syntax::first_error(&tree, text).or_else(|| syntax::too_deep_error(&tree, text)).is_some() {
        return text.to_string();
    }
    let mut out = String::new();
    for form in syntax::top_level_forms(&tree) {
        push_form(form, text, &mut out);
    }
    out
}

/// [`oneline_text`] of a text longer than [`syntax::IN_RUNS_OVER`], read a run of forms at a
/// time as the engine reads it ([`syntax::parse_in_runs`]): its whole-file tree would be about
/// 70 bytes a byte.
fn oneline_in_runs(text: &str) -> String {
    let idx = syntax::LineIndex::new(text);
    let mut out = String::new();
    let unreadable = syntax::readable_forms_in_runs(&idx, syntax::RUN_BYTES, |form| {
        push_form(form, text, &mut out);
    });
    if unreadable.is_some() {
        return text.to_string();
    }
    out
}

/// One top-level form on its line.
fn push_form(form: Node, text: &str, out: &mut String) {
    let mut line = Line { out: String::new(), pending: false, after_open: true };
    emit(form, text, &mut line);
    out.push_str(&line.out);
    out.push('\n');
}

struct Line {
    out: String,
    pending: bool,
    after_open: bool,
}

fn is_open(kind: &str) -> bool {
    kind.ends_with('(') || kind.ends_with('[') || kind.ends_with('{')
}

fn is_close(kind: &str) -> bool {
    matches!(kind, ")" | "]" | "}")
}

fn push_piece(line: &mut Line, piece: &str, close: bool, open: bool) {
    if line.pending && !line.after_open && !close && !line.out.is_empty() {
        line.out.push(' ');
    }
    line.pending = false;
    line.out.push_str(piece);
    line.after_open = open;
}

fn emit(node: Node, src: &str, line: &mut Line) {
    let kind = node.node_kind();
    if matches!(kind, NodeKind::Str | NodeKind::Regex) || node.child_count() == 0 {
        let t = syntax::text(node, src);
        let t = if matches!(kind, NodeKind::Str | NodeKind::Regex) || t.contains('\n') {
            t.replace('\r', "\\r").replace('\n', "\\n")
        } else {
            t.to_string()
        };
        let named = node.is_named();
        push_piece(line, &t, !named && is_close(node.kind()), !named && is_open(node.kind()));
        return;
    }
    let mut cursor = node.walk();
    let mut prev_end = None;
    for child in node.children(&mut cursor) {
        if let Some(pe) = prev_end {
            if child.start_byte() > pe {
                line.pending = true;
            }
        }
        prev_end = Some(child.end_byte());
        if syntax::is_trivia(child) {
            line.pending = true;
            continue;
        }
        emit(child, src, line);
    }
}
