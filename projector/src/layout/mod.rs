//! Layout of Clojure forms that have no author layout, the way cljfmt indents them by default.
//!
//! Two halves share one indentation table (cljfmt's `cljfmt/indents/clojure.clj`, the compojure
//! table and the fuzzy `^def` / `^with-` patterns, all with their default precedence):
//!
//! * **Layout** (`layout_form`, `layout_forms`): the form is parsed, turned into a small tree
//!   (atoms verbatim, collections, prefixed forms, metadata, comments), and printed through a
//!   `pretty` document. `pretty` makes every breaking decision: a collection is a `group` (one
//!   line if it fits), nested alignment is `align`/`nest`, and where cljfmt allows two shapes (a
//!   call's arguments aligned after the first one, or all of them on their own lines one column
//!   in; a map value after its key or under it) a `column` document picks the shape from the
//!   column it lands on and the narrowest width each shape could reach.
//! * **Indentation** (`misindented_lines`, `reindent`): cljfmt's `indent` pass re-implemented
//!   over the tree-sitter tree (its `list-indent`, `block-indent`, `inner-indent`, reader
//!   conditionals, metadata and `#_` rules, including the way rewrite-clj nests metadata and
//!   reader macros). The document indents exactly the way these rules do; where a form holds
//!   something the two could disagree on (comments, discards, a reader conditional as a call's
//!   head, wide characters) the printed text also goes through `reindent`, so every line ends
//!   up where cljfmt would put it.
//!
//! Deliberate differences from cljfmt: commas are kept only right after the element they follow,
//! a closing bracket after a trailing `;` comment sits on its own line at the elements' column
//! (cljfmt moves it to column 0), and lines that start with a closing bracket are not checked.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use formdb_engine::syntax;
use pretty::{Arena, DocAllocator, DocBuilder, RefDoc};
use tree_sitter::{Node, Tree};

mod indent;
mod print;
mod table;
#[cfg(test)]
mod tests;
mod tree;

use indent::*;
use print::*;
use table::*;
use tree::*;

/// The default line width.
pub const DEFAULT_WIDTH: usize = 80;

/// How to lay forms out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutOptions {
    /// The line width to stay within where possible.
    pub width: usize,
}

impl Default for LayoutOptions {
    fn default() -> Self {
        LayoutOptions { width: DEFAULT_WIDTH }
    }
}

/// Why a text could not be laid out.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// The text does not parse.
    #[error("{line}:{col}: {message}")]
    Syntax { line: u32, col: u32, message: String },
    /// `layout_form` wants exactly one form.
    #[error("expected exactly one form, found {found}")]
    NotOneForm { found: usize },
}

/// Lay out one top-level form's source text. Errors if the text doesn't parse as exactly one form.
/// `;` comments around the form are kept on their own lines; the result has no final newline.
pub fn layout_form(source: &str, opts: &LayoutOptions) -> Result<String, LayoutError> {
    let (text, forms) = layout_top(source, opts)?;
    if forms != 1 {
        return Err(LayoutError::NotOneForm { found: forms });
    }
    Ok(text)
}

/// Lay out several top-level forms, separated by one blank line, ending in a newline. `;`
/// comments between forms are kept, attached to the form below them unless a blank line
/// separated them in the source.
pub fn layout_forms(source: &str, opts: &LayoutOptions) -> Result<String, LayoutError> {
    let (mut text, _) = layout_top(source, opts)?;
    if !text.is_empty() {
        text.push('\n');
    }
    Ok(text)
}

/// Lay out every top-level form of a file (what `formdb fmt` writes). Comments and discards
/// between forms are kept as written; runs of blank lines between forms become one blank line;
/// the file ends with one newline. A form that cannot be laid out is kept as written.
pub fn format_file(text: &str, opts: &LayoutOptions) -> Result<String, LayoutError> {
    let tree = parse_checked(text)?;
    let pieces = syntax::split_pieces(&tree);
    let mut out = String::with_capacity(text.len());
    for (i, p) in pieces.iter().enumerate() {
        let leading = &text[p.leading_start..p.start];
        if i == 0 || !leading.trim_matches(|c: char| c.is_whitespace() || c == ',').is_empty() {
            out.push_str(leading);
        } else {
            out.push_str("\n\n");
        }
        let source = &text[p.start..p.end];
        match layout_form(source, opts) {
            Ok(laid) => out.push_str(laid.trim_end_matches('\n')),
            Err(_) => out.push_str(source),
        }
    }
    let trailing = &text[pieces.last().map_or(0, |p| p.end)..];
    if trailing.trim().is_empty() {
        out.push('\n');
    } else {
        out.push_str(trailing);
    }
    Ok(out)
}

/// Does every line of `text` sit on the indentation cljfmt's default rules give it? Returns the
/// 1-based line numbers that don't (for tests and `--check`). Lines inside strings, blank lines,
/// lines that start with a `;` comment and lines that start with a closing bracket are not
/// checked. Only indentation is checked, not where lines break.
pub fn misindented_lines(text: &str) -> Vec<usize> {
    let tree = syntax::parse(text);
    let ix = Indenter::new(text, &tree);
    let mut bad = Vec::new();
    for line in 1..ix.line_starts.len() {
        let Some(target) = ix.line_target(line, false) else { continue };
        if ix.expected(&target) != ix.leading_ws(line) {
            bad.push(line + 1);
        }
    }
    bad
}

/// Re-indent `text` the way cljfmt's indentation pass does, keeping its line breaks. Lines that
/// start with a `;` comment or a closing bracket are indented like an element in their place.
pub fn reindent(text: &str) -> String {
    let tree = syntax::parse(text);
    let mut ix = Indenter::new(text, &tree);
    let mut new_indent: Vec<Option<usize>> = vec![None; ix.line_starts.len()];
    for (line, slot) in new_indent.iter_mut().enumerate().skip(1) {
        let Some(target) = ix.line_target(line, true) else { continue };
        let (expected, actual) = (ix.expected(&target), ix.leading_ws(line));
        if expected != actual || ix.leading_has_tab(line) {
            // Later lines measure columns on this one as they will be after the shift.
            ix.delta[line] = expected as isize - actual as isize;
            *slot = Some(expected);
        }
    }
    if new_indent.iter().all(Option::is_none) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (line, indent) in new_indent.iter().enumerate() {
        let start = ix.line_starts[line];
        let end = ix.line_starts.get(line + 1).copied().unwrap_or(text.len());
        let content = &text[start..end];
        match indent {
            Some(n) => {
                out.extend(std::iter::repeat_n(' ', *n));
                out.push_str(content.trim_start_matches([' ', '\t']));
            }
            None => out.push_str(content),
        }
    }
    out
}
