//! A save of a big file that changes one top-level definition, applied to that form alone.
//!
//! A whole-file save parses, resolves and classifies every form of the file and matches each
//! against its stored form: a save of a 5 MB file with one function changed took 7–25 s and
//! 12–51x the file's size in memory, as every form's row and stored form were held at once.
//! An editor saves a big file as often as a small one, mostly with one form changed, so such a
//! save is the edit of that form (`import::form_in_place`, the path of an agent's form edit),
//! when the engine can apply it there; any other save takes the whole-file path.

use formdb_engine::change::Change;
use formdb_engine::import;
use formdb_engine::read;
use formdb_engine::store::Store;
use formdb_projector::views;

use super::{apply, Saved, Writer};
use crate::Result;

/// Texts longer than this are saved in place when they can be. Shorter ones keep their parse
/// and per-form memo between saves (`syntax::KEEP_AT_MOST`), so the whole-file path is cheap
/// for them already, and stays the one path of ordinary files.
pub const IN_PLACE_OVER: usize = formdb_engine::syntax::KEEP_AT_MOST;

/// `text`, the new text of `path`, saved as the edit of the one stored top-level form it
/// differs in; `None` (nothing done) when the save is not one form's edit. It is when:
/// - the writer renders with no aliases and read what is stored (no merge: their text is what
///   is stored);
/// - the bytes that differ from the stored text lie inside one stored top-level form's source,
///   and that form's new text is one list, as its old one is: the rest of the file is byte for
///   byte what is stored, and a list's closing bracket ends its text, so the file reads as the
///   stored forms with this one replaced;
/// - `import::form_in_place` takes it (both texts definitions of the same vars and privacy, the
///   purity classes of the file kept, and the rest it checks).
pub(super) fn save_one_form(
    store: &Store,
    writer: &Writer,
    path: &str,
    text: &str,
    base: Option<&[u8]>,
    had_draft: bool,
) -> Result<Option<Saved>> {
    if text.len() <= IN_PLACE_OVER || !writer.aliases.is_empty() {
        return Ok(None);
    }
    let stored = match views::stored_text_shared(store, path) {
        Ok(t) => t,
        Err(views::ViewError::NoFile(_) | views::ViewError::NotText(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if base.is_some_and(|b| b != stored.as_bytes()) {
        return Ok(None);
    }
    // `None` for the stored text itself: the whole-file path reports it unchanged.
    let Some((start, end)) = changed_region(stored.as_bytes(), text.as_bytes()) else {
        return Ok(None);
    };
    let Some(span) = read::files::span_holding(store, path, &stored, (start, end))? else {
        return Ok(None);
    };
    // Past the old form's end the two texts are the same bytes, so its new end is as far
    // from the end of the new text.
    let new_end = text.len() - (stored.len() - span.end);
    let Some(source) = text.get(span.start..new_end) else { return Ok(None) };
    if !(source.starts_with('(') && source.ends_with(')')) {
        return Ok(None);
    }
    let Some(id) = read::files::id_at(store, path, span.pos)? else { return Ok(None) };
    let Some(mut changes) = import::form_in_place(store, path, &id, source, text)? else {
        return Ok(None);
    };
    drop(stored);
    if had_draft {
        changes.push(Change::DropDraft { path: path.to_string() });
    }
    let applied = apply(store, writer, "save", changes)?;
    Ok(Some(Saved::Committed { path: path.to_string(), applied }))
}

/// The bytes of `old` that `new` does not share with it, as a range of `old`: what lies
/// between their common start and their common end (empty for a pure insertion). `None` when
/// the two are the same.
fn changed_region(old: &[u8], new: &[u8]) -> Option<(usize, usize)> {
    if old == new {
        return None;
    }
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    // The common end may not reach into the common start of either text.
    let room = old.len().min(new.len()) - prefix;
    let suffix =
        old.iter().rev().zip(new.iter().rev()).take(room).take_while(|(a, b)| a == b).count();
    Some((prefix, old.len() - suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_changed_region_is_what_lies_between_the_common_start_and_end() {
        assert_eq!(changed_region(b"(a 1)(b 2)", b"(a 1)(b 2)"), None);
        assert_eq!(changed_region(b"(a 1)(b 2)", b"(a 1)(b 3)"), Some((8, 9)));
        assert_eq!(changed_region(b"(a 1)(b 2)", b"(a 1)(b 22)"), Some((9, 9)), "an insertion");
        assert_eq!(changed_region(b"(a 1)(b 22)", b"(a 1)(b 2)"), Some((9, 10)), "a deletion");
        // Repeated bytes: the common end is not counted into the common start.
        assert_eq!(changed_region(b"aaaa", b"aa"), Some((2, 4)));
        assert_eq!(changed_region(b"aa", b"aaaa"), Some((2, 2)));
        assert_eq!(changed_region(b"", b"(x)"), Some((0, 0)));
    }
}
