//! Stored files and blobs: their hashes and their pieces.

use std::collections::BTreeSet;

use cozo::DataValue;

use crate::store::{column, params, str_at, Params, Result, Store};

/// A stored Clojure file's own row (its forms come with it: [`files_with_pieces`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileRow {
    /// Content hash of the file's text.
    pub hash: String,
    /// Trivia after the last form.
    pub trailing: String,
    /// Why the file did not parse (empty: it did).
    pub error: String,
    /// The file's bytes, kept whole when it did not parse.
    pub raw: Vec<u8>,
}

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

/// The top-level form piece of a file: the trivia before it and its source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Piece {
    pub leading: String,
    pub source: String,
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

/// A stored Clojure file's row and its top-level forms, in file order (no forms for a file
/// stored raw).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileWithPieces {
    pub row: FileRow,
    pub pieces: Vec<Piece>,
}

/// The rows and top-level forms of the stored Clojure files among `paths`, in one script: a
/// reader of many files (a directory's worth) pays for parsing and planning a script once,
/// not twice a file. Paths that are not stored Clojure files are left out.
pub fn files_with_pieces(
    store: &Store,
    paths: &[&str],
) -> Result<std::collections::BTreeMap<String, FileWithPieces>> {
    use std::collections::BTreeMap;
    if paths.is_empty() {
        return Ok(BTreeMap::new());
    }
    // One relation of two shapes: the file's own row at position -1, each top-level form at
    // its position (`a`, `b`: hash and trailing, or leading and source).
    let rows = store.query(
        "ps[path] <- $paths
         ?[path, pos, a, b, error, raw] := ps[path], *file{path, hash: a, trailing: b, error, raw}, pos = -1
         ?[path, pos, a, b, error, raw] := ps[path],
             *form_at{file: path, pos, leading: a, source: b}, b != '', error = '', raw = ''",
        params([("paths", column(paths.iter().map(|p| DataValue::from(*p))))]),
    )?;
    let mut files: BTreeMap<String, FileWithPieces> = BTreeMap::new();
    let mut forms: Vec<(String, i64, Piece)> = Vec::new();
    for r in &rows.rows {
        let pos = crate::store::int_at(r, 1);
        if pos < 0 {
            let row = FileRow {
                hash: str_at(r, 2),
                trailing: str_at(r, 3),
                error: str_at(r, 4),
                raw: r[5].get_bytes().map(<[u8]>::to_vec).unwrap_or_default(),
            };
            files.insert(str_at(r, 0), FileWithPieces { row, pieces: Vec::new() });
        } else {
            forms.push((str_at(r, 0), pos, Piece { leading: str_at(r, 2), source: str_at(r, 3) }));
        }
    }
    forms.sort_unstable_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
    for (path, _, piece) in forms {
        if let Some(f) = files.get_mut(&path).filter(|f| f.row.error.is_empty()) {
            f.pieces.push(piece);
        }
    }
    Ok(files)
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

/// The top-level forms of a stored file with their ids, in file order.
pub fn top_level_id_pieces(store: &Store, path: &str) -> Result<Vec<IdPiece>> {
    let rows = store.query(
        "?[pos, id, leading, source] := *form_at{file: $file, pos, id, leading, source}, source != '' :order pos",
        params([("file", path.into())]),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| IdPiece { id: str_at(r, 1), leading: str_at(r, 2), source: str_at(r, 3) })
        .collect())
}
