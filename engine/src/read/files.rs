//! Stored files and blobs: their hashes and their pieces.

use std::collections::BTreeSet;

use cozo::DataValue;

use crate::store::{column, int_at, params, str_at, Params, Result, Store};

/// A stored blob (a file that is not Clojure source).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Blob {
    pub hash: String,
    pub content: Vec<u8>,
}

/// A path the store holds, with its content hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathHash {
    pub path: String,
    pub hash: String,
    /// A blob rather than a Clojure file.
    pub blob: bool,
}

/// The blob stored at `path`, if any.
pub fn blob(store: &Store, path: &str) -> Result<Option<Blob>> {
    let rows = store.query(
        "?[hash, content] := *blob{path: $path, hash, content}",
        params([("path", path.into())]),
    )?;
    Ok(rows.rows.first().map(|r| Blob {
        hash: str_at(r, 0),
        content: r[1].get_bytes().map(<[u8]>::to_vec).unwrap_or_default(),
    }))
}

/// A stored Clojure file's content hash and bytes: its top-level forms' texts in file order
/// (the trivia before each, then its source) and its trailing trivia, or, for a file that did
/// not parse, its raw bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileText {
    pub hash: String,
    pub bytes: Vec<u8>,
}

/// Top-level forms of one file read in one script. A file's rows as Cozo values take several
/// times their text while a script runs (a 5 MB file of 105,000 forms read in one took +99 MB):
/// a longer file is read this many forms at a time, its text growing as each part is read.
pub const FORMS_PER_READ: i64 = 4096;

/// The texts of the stored Clojure files among `paths`: one script for the texts kept whole
/// (`file_text`, a packed value a file of up to `change::FILE_TEXT_MAX` bytes), then, for the
/// others, one script for up to [`FORMS_PER_READ`] forms a file (and one more per that many
/// forms of a longer file): a reader of many files (a directory's worth) pays for parsing and
/// planning a script once, not twice a file. Paths that are not stored Clojure files are left
/// out. The scripts read one state of the store ([`Store::reading`]), and each text is checked
/// against the file's content hash.
pub fn file_texts(
    store: &Store,
    paths: &[&str],
) -> Result<std::collections::BTreeMap<String, FileText>> {
    if paths.is_empty() {
        return Ok(Default::default());
    }
    store.reading(|| read_file_texts(store, paths))
}

/// The texts kept whole (`file_text`) first, one value a file, each taken only if it hashes to
/// its file's hash; the rest from their forms' places.
fn read_file_texts(
    store: &Store,
    paths: &[&str],
) -> Result<std::collections::BTreeMap<String, FileText>> {
    let rows = store.query(
        "ps[path] <- $paths
         ?[path, hash, text] := ps[path], *file{path, hash, error}, error == '', *file_text{path, text}",
        params([("paths", column(paths.iter().map(|p| DataValue::from(*p))))]),
    )?;
    let mut files = std::collections::BTreeMap::new();
    for r in rows.rows {
        let (path, hash) = (str_at(&r, 0), str_at(&r, 1));
        let Some(DataValue::Bytes(packed)) = r.into_iter().nth(2) else { continue };
        let bytes = crate::packed::unpack(packed);
        if crate::forms::content_hash(&bytes) == hash {
            files.insert(path, FileText { hash, bytes });
        }
    }
    if files.len() < paths.len() {
        let rest: Vec<&str> = paths.iter().copied().filter(|p| !files.contains_key(*p)).collect();
        files.extend(read_texts_by_place(store, &rest)?);
    }
    Ok(files)
}

/// The texts of the stored Clojure files among `paths` from their top-level forms' places,
/// [`FORMS_PER_READ`] forms a file a script.
fn read_texts_by_place(
    store: &Store,
    paths: &[&str],
) -> Result<std::collections::BTreeMap<String, FileText>> {
    use std::collections::BTreeMap;
    // One relation of two shapes: the file's own row at position -1, each top-level form at
    // its position (`a`, `b`: hash and trailing, or leading and source).
    let rows = store.query(
        "ps[path] <- $paths
         ?[path, pos, a, b, error, raw] := ps[path], *file{path, hash: a, trailing: b, error, raw}, pos = -1
         ?[path, pos, a, b, error, raw] := ps[path],
             *form_at{file: path, pos, id, source_chars}, pos < $upto, source_chars > 0,
             *form{id, leading: a, source: b}, error = '', raw = ''",
        params([
            ("paths", column(paths.iter().map(|p| DataValue::from(*p)))),
            ("upto", FORMS_PER_READ.into()),
        ]),
    )?;
    let mut rows = rows.rows;
    // Each file's row first, then its forms in order.
    rows.sort_unstable_by(|x, y| {
        (x[0].get_str(), crate::store::int_at(x, 1))
            .cmp(&(y[0].get_str(), crate::store::int_at(y, 1)))
    });
    let mut files: BTreeMap<String, FileText> = BTreeMap::new();
    // Per file read as forms: its trailing trivia and how many forms were read.
    let mut open: BTreeMap<String, (String, i64)> = BTreeMap::new();
    for r in rows {
        let path = str_at(&r, 0);
        if crate::store::int_at(&r, 1) < 0 {
            let hash = str_at(&r, 2);
            if str_at(&r, 4).is_empty() {
                open.insert(path.clone(), (str_at(&r, 3), 0));
                files.insert(path, FileText { hash, bytes: Vec::new() });
            } else {
                // A file that did not parse is kept whole, as its raw bytes.
                let raw = r[5].get_bytes().map(<[u8]>::to_vec).unwrap_or_default();
                files.insert(path, FileText { hash, bytes: raw });
            }
        } else if let (Some(file), Some((_, read))) = (files.get_mut(&path), open.get_mut(&path)) {
            push_piece(&mut file.bytes, &r[2], &r[3]);
            *read += 1;
        }
    }
    for (path, (trailing, mut read)) in open {
        let Some(file) = files.get_mut(&path) else { continue };
        // Top-level positions are 0, 1, 2, …: a full first part may have more after it.
        while read > 0 && read % FORMS_PER_READ == 0 {
            let part = push_forms(store, &path, read..read + FORMS_PER_READ, &mut file.bytes)?;
            if part == 0 {
                break;
            }
            read += part;
        }
        file.bytes.extend_from_slice(trailing.as_bytes());
        if crate::forms::content_hash(&file.bytes) != file.hash {
            // Not the text the file was stored with: its top-level positions are not 0, 1, 2,
            // … (nothing writes them so), and a form past a gap would go unread. Every form is
            // read in one script instead.
            file.bytes.clear();
            push_forms(store, &path, 0..i64::MAX, &mut file.bytes)?;
            file.bytes.extend_from_slice(trailing.as_bytes());
        }
        file.bytes.shrink_to_fit();
    }
    Ok(files)
}

/// Append the texts of `path`'s top-level forms at positions `at`, in position order, read in
/// one script; returns how many there were.
fn push_forms(
    store: &Store,
    path: &str,
    at: std::ops::Range<i64>,
    bytes: &mut Vec<u8>,
) -> Result<i64> {
    let rows = store.query(
        "?[pos, a, b] := *form_at{file: $path, pos, id, source_chars},
             pos >= $from, pos < $upto, source_chars > 0, *form{id, leading: a, source: b}",
        params([("path", path.into()), ("from", at.start.into()), ("upto", at.end.into())]),
    )?;
    let mut forms = rows.rows;
    forms.sort_unstable_by_key(|r| crate::store::int_at(r, 0));
    for r in &forms {
        push_piece(bytes, &r[1], &r[2]);
    }
    Ok(forms.len() as i64)
}

/// A top-level form's trivia and source, appended to its file's text.
fn push_piece(bytes: &mut Vec<u8>, leading: &DataValue, source: &DataValue) {
    bytes.extend_from_slice(leading.get_str().unwrap_or_default().as_bytes());
    bytes.extend_from_slice(source.get_str().unwrap_or_default().as_bytes());
}

/// The ids of the top-level forms of a stored file, in file order.
pub fn top_level_ids(store: &Store, path: &str) -> Result<Vec<String>> {
    let rows = store.query(
        "?[pos, id] := *form_at{file: $path, pos, id}, *form{id, parent}, parent = '' :order pos",
        params([("path", path.into())]),
    )?;
    Ok(rows.rows.iter().map(|r| str_at(r, 1)).collect())
}

/// The content hash of the file or blob at `path` (the file's, if both were stored). One
/// point lookup.
pub fn stored_hash(store: &Store, path: &str) -> Result<Option<String>> {
    let rows = store.query(
        "?[kind, hash] := *file{path: $path, hash}, kind = 0
         ?[kind, hash] := *blob{path: $path, hash}, kind = 1",
        params([("path", path.into())]),
    )?;
    Ok(rows.rows.iter().min_by_key(|r| r[0].get_int()).map(|r| str_at(r, 1)))
}

/// Every stored file and blob with its hash (`None`), or those of `only`.
pub fn path_hashes(store: &Store, only: Option<&BTreeSet<&str>>) -> Result<Vec<PathHash>> {
    const ALL: &str = "?[path, hash, kind] := *file{path, hash}, kind = 'file'
                       ?[path, hash, kind] := *blob{path, hash}, kind = 'blob'";
    const SOME: &str = "ps[path] <- $paths
                        ?[path, hash, kind] := ps[path], *file{path, hash}, kind = 'file'
                        ?[path, hash, kind] := ps[path], *blob{path, hash}, kind = 'blob'";
    let rows = match only {
        None => store.query(ALL, Params::new())?,
        Some(p) if p.is_empty() => return Ok(Vec::new()),
        Some(p) => {
            store.query(SOME, params([("paths", column(p.iter().map(|k| DataValue::from(*k))))]))?
        }
    };
    Ok(rows
        .rows
        .iter()
        .map(|r| PathHash { path: str_at(r, 0), hash: str_at(r, 1), blob: str_at(r, 2) == "blob" })
        .collect())
}

/// When each stored file last got a version (seconds since the Unix epoch).
pub fn last_version_times(store: &Store) -> Result<Vec<(String, f64)>> {
    let rows = store.query("?[file, max(at)] := *version{file, at}", Params::new())?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), r[1].get_float().unwrap_or(0.0))).collect())
}

/// When `file` last got a version, if it has one.
pub fn last_version_time(store: &Store, file: &str) -> Result<Option<f64>> {
    let rows =
        store.query("?[max(at)] := *version{file: $path, at}", params([("path", file.into())]))?;
    Ok(rows.rows.first().and_then(|r| r[0].get_float()))
}

/// A Clojure file that did not parse and is stored as raw text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unparsed {
    pub path: String,
    pub ns: String,
    pub error: String,
    pub line: i64,
    pub col: i64,
}

/// Every file stored raw because it did not parse.
pub fn unparsed(store: &Store) -> Result<Vec<Unparsed>> {
    let rows = store.query(
        "?[path, ns, error, line, col] := *file{path, ns, error, error_line: line, error_col: col}, error != ''",
        Params::new(),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| Unparsed {
            path: str_at(r, 0),
            ns: str_at(r, 1),
            error: str_at(r, 2),
            line: crate::store::int_at(r, 3),
            col: crate::store::int_at(r, 4),
        })
        .collect())
}

/// The namespace of the stored file at `path`, if the store has it.
pub fn ns_of(store: &Store, path: &str) -> Result<Option<String>> {
    let rows = store.query("?[ns] := *file{path: $p, ns}", params([("p", path.into())]))?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}

/// Every path a reader sees: stored files, blobs and drafts of files not stored yet, sorted.
pub fn visible_paths(store: &Store) -> Result<Vec<String>> {
    let rows = store.query(
        "?[path] := *file{path} ?[path] := *blob{path} ?[path] := *draft{path} :order path",
        Params::new(),
    )?;
    Ok(rows.rows.iter().map(|r| str_at(r, 0)).collect())
}

/// Every stored Clojure file's path, in path order.
pub fn file_paths(store: &Store) -> Result<Vec<String>> {
    let rows = store.query("?[path] := *file{path} :order path", Params::new())?;
    Ok(rows.rows.iter().map(|r| str_at(r, 0)).collect())
}

/// Every stored blob's path, in path order.
pub fn blob_paths(store: &Store) -> Result<Vec<String>> {
    let rows = store.query("?[path] := *blob{path} :order path", Params::new())?;
    Ok(rows.rows.iter().map(|r| str_at(r, 0)).collect())
}

/// Whether `path` is a stored Clojure file.
pub fn is_file(store: &Store, path: &str) -> Result<bool> {
    let rows =
        store.query("?[path] := *file{path}, path = $path", params([("path", path.into())]))?;
    Ok(!rows.rows.is_empty())
}

/// Whether `path` is a stored blob.
pub fn is_blob(store: &Store, path: &str) -> Result<bool> {
    let rows =
        store.query("?[path] := *blob{path}, path = $path", params([("path", path.into())]))?;
    Ok(!rows.rows.is_empty())
}

/// The content hash of the blob at `path`, if one is stored.
pub fn blob_hash(store: &Store, path: &str) -> Result<Option<String>> {
    let rows =
        store.query("?[hash] := *blob{path: $path, hash}", params([("path", path.into())]))?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}

/// The text of the last deletion of `path`, if it was ever deleted.
pub fn last_deleted_text(store: &Store, path: &str) -> Result<Option<Vec<u8>>> {
    let rows = store.query(
        "?[at, bytes] := *file_tomb{path: $path, at, bytes} :order -at :limit 1",
        params([("path", path.into())]),
    )?;
    Ok(rows
        .rows
        .first()
        .map(|r| r.get(1).and_then(|v| v.get_bytes()).map(<[u8]>::to_vec).unwrap_or_default()))
}

/// A stored Clojure file's namespace and parse state, without its forms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileHead {
    pub ns: String,
    /// Trivia after the last form.
    pub trailing: String,
    /// Why the file did not parse (empty: it did).
    pub error: String,
}

/// The head of the stored Clojure file at `path`, if there is one.
pub fn head(store: &Store, path: &str) -> Result<Option<FileHead>> {
    let rows = store.query(
        "?[ns, trailing, error] := *file{path: $p, ns, trailing, error}",
        params([("p", path.into())]),
    )?;
    Ok(rows.rows.first().map(|r| FileHead {
        ns: str_at(r, 0),
        trailing: str_at(r, 1),
        error: str_at(r, 2),
    }))
}

/// A top-level form of a file with its id: the trivia before it and its source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdPiece {
    pub id: String,
    pub leading: String,
    pub source: String,
}

/// The top-level forms of a stored file with their ids, in file order: its text (kept whole,
/// else read from its forms) cut at the lengths its places keep, under one shared lock. Cut
/// from the kept text, an edit's load of a file is one value and a range of narrow rows, not a
/// point read of `form` a form; where the lengths do not add up to the text, which nothing
/// writes, the forms' own texts are read.
pub fn top_level_id_pieces(store: &Store, path: &str) -> Result<Vec<IdPiece>> {
    store.reading(|| {
        let places = store.query(
            "?[pos, id, l, s, trailing] := *form_at{file: $file, pos, id, leading_chars: l, source_chars: s},
                 s > 0, *file{path: $file, trailing} :order pos",
            params([("file", path.into())]),
        )?;
        let texts = read_file_texts(store, &[path])?;
        let text = texts.get(path).and_then(|t| std::str::from_utf8(&t.bytes).ok());
        let cut = text.and_then(|text| {
            let lengths = places.rows.iter().map(|r| (int_at(r, 2), int_at(r, 3)));
            let (pieces, rest) = cut_at_lengths(text, lengths)?;
            // What is left is the file's trailing text, else the lengths are not this text's.
            let trailing = places.rows.first().map_or("", |r| r[4].get_str().unwrap_or_default());
            (rest == trailing).then_some(pieces)
        });
        match cut {
            Some(pieces) => Ok(places
                .rows
                .iter()
                .zip(pieces)
                .map(|(r, (leading, source))| IdPiece {
                    id: str_at(r, 1),
                    leading: leading.to_string(),
                    source: source.to_string(),
                })
                .collect()),
            None => top_level_id_pieces_joined(store, path),
        }
    })
}

/// `text` cut into each top-level form's leading trivia and source, given their lengths in
/// characters, and what is left after them; `None` if they run past its end.
fn cut_at_lengths(
    text: &str,
    lengths: impl Iterator<Item = (i64, i64)>,
) -> Option<(Vec<(&str, &str)>, &str)> {
    let mut rest = text;
    let bytes_of = |rest: &str, n: i64| chars_in_bytes(rest, usize::try_from(n).ok()?);
    let mut pieces = Vec::new();
    for (l, s) in lengths {
        let l = bytes_of(rest, l)?;
        let (leading, after) = rest.split_at(l);
        let s = bytes_of(after, s)?;
        let (source, after) = after.split_at(s);
        pieces.push((leading, source));
        rest = after;
    }
    Some((pieces, rest))
}

/// How many bytes the first `chars` characters of `text` take (as many where they are ASCII);
/// `None` if it has fewer. `form_at` keeps its lengths in characters, as Cozo counts them.
fn chars_in_bytes(text: &str, chars: usize) -> Option<usize> {
    if text.len() >= chars && text.as_bytes()[..chars].is_ascii() {
        return Some(chars);
    }
    match text.char_indices().nth(chars) {
        Some((at, _)) => Some(at),
        None => (text.chars().count() == chars).then_some(text.len()),
    }
}

/// [`top_level_id_pieces`] from the forms' own texts.
fn top_level_id_pieces_joined(store: &Store, path: &str) -> Result<Vec<IdPiece>> {
    let rows = store.query(
        "?[pos, id, leading, source] := *form_at{file: $file, pos, id, source_chars}, source_chars > 0,
             *form{id, leading, source} :order pos",
        params([("file", path.into())]),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| IdPiece { id: str_at(r, 1), leading: str_at(r, 2), source: str_at(r, 3) })
        .collect())
}

/// Where a stored top-level form's source stands in its file's stored text: its place among
/// the file's forms ([`id_at`] gives its id) and the byte offsets of its source, its leading
/// trivia before `start`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormSpan {
    pub pos: i64,
    pub start: usize,
    pub end: usize,
}

/// Places read from the store at a time by [`span_holding`].
const SPAN_PLACES: i64 = 4096;

/// The stored top-level form of `path` whose source holds bytes `start..end` of `text`, the
/// file's stored text; `None` when no one form's source does (the bytes fall in trivia between
/// forms, or across forms).
///
/// The file's text is its top-level forms' leading and source texts in order, then its
/// trailing text, so a form's place is the length of the texts before it. `form_at` keeps those
/// lengths (in characters, as Cozo counts them), read [`SPAN_PLACES`] places at a time up to
/// the form: a big file's texts would come back as a value each, several times its size.
pub fn span_holding(
    store: &Store,
    path: &str,
    text: &str,
    (start, end): (usize, usize),
) -> Result<Option<FormSpan>> {
    // Characters to bytes, read on from the last place; a length past the text's end stops at it.
    let after = |from: usize, chars: usize| -> usize {
        let rest = text.get(from..).unwrap_or_default();
        chars_in_bytes(rest, chars).map_or(text.len(), |n| from + n)
    };
    let count = |v: &DataValue| v.get_int().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
    let mut at = 0;
    let mut from = 0;
    loop {
        // A rule's rows come out in the order of its head: by place.
        let rows = store.query(
            "?[pos, leading, source] :=
                 *form_at{file: $file, pos, leading_chars: leading, source_chars: source},
                 pos >= $from, pos < $to",
            params([
                ("file", path.into()),
                ("from", from.into()),
                ("to", (from + SPAN_PLACES).into()),
            ]),
        )?;
        for r in &rows.rows {
            at = after(at, count(&r[1]));
            if at > start {
                // The bytes start in this form's leading trivia.
                return Ok(None);
            }
            // A form inside a `comment` block has a place row of zero lengths.
            let source = count(&r[2]);
            if source > 0 {
                let span = FormSpan {
                    pos: r[0].get_int().unwrap_or(-1),
                    start: at,
                    end: after(at, source),
                };
                if start <= span.end {
                    return Ok((end <= span.end).then_some(span));
                }
                at = span.end;
            }
        }
        if rows.rows.is_empty() {
            return Ok(None);
        }
        from += SPAN_PLACES;
    }
}

/// The id of the form at place `pos` of the stored file `path`.
pub fn id_at(store: &Store, path: &str, pos: i64) -> Result<Option<String>> {
    let rows = store.query(
        "?[id] := *form_at{file: $file, pos: $pos, id}",
        params([("file", path.into()), ("pos", pos.into())]),
    )?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}
