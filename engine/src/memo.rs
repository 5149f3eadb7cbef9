//! What the last analysis and resolution of a file being edited found for each of its forms,
//! so that the next save of the file analyses and resolves only the forms whose text changed.
//!
//! A save of one form of an 8,000-line file used to analyse and resolve all of its 650 forms
//! again (about 25 ms of a 50 ms save). A form's analysis is a function of its own text; its
//! resolution, of its text, its namespace's declaration and the namespace tables. Both are kept
//! here per form, keyed by the form's text and starting column, for the last few files parsed
//! through [`crate::forms::parse_edited_file`]; a form found again at another place is the
//! same result moved by whole lines and bytes (its text, hence every column in it, is the
//! same). Resolutions are reused only under the same declaration and tables (`Env`).
//!
//! Nothing here reads the store; a memo that does not apply is simply not used.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use crate::forms::{Namespaces, ParsedForm, Resolved};
use crate::nsdecl::NsDecl;
use crate::syntax::{Lang, Pos};

/// How many files keep their memo (the files being edited now).
const FILES: usize = 32;

static MEMOS: Mutex<Vec<FileMemo>> = Mutex::new(Vec::new());

/// The forms of one file as last analysed, and resolved where they were.
#[derive(Default)]
pub(crate) struct FileMemo {
    path: String,
    forms: HashMap<Key, Memo>,
}

/// A top-level form's text and starting column: what its analysis and resolution depend on,
/// beside the context `Env` stands for.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    source: String,
    col: u32,
}

struct Memo {
    form: ParsedForm,
    /// The resolutions of the form and its comment-block children: under which `env`, and
    /// with the form starting on which line.
    resolved: Option<(u64, u32, Vec<Resolved>)>,
}

/// The memo of `path`, taken out while the file is parsed and resolved (a second thread
/// editing the same file meanwhile finds none and works without).
pub(crate) fn take(path: &str) -> FileMemo {
    let mut memos = MEMOS.lock().unwrap_or_else(|p| p.into_inner());
    match memos.iter().position(|m| m.path == path) {
        Some(i) => memos.remove(i),
        None => FileMemo { path: path.to_string(), forms: HashMap::new() },
    }
}

/// Keep `memo` for the next save of its file; the least recently kept memo goes.
pub(crate) fn keep(memo: FileMemo) {
    let mut memos = MEMOS.lock().unwrap_or_else(|p| p.into_inner());
    memos.retain(|m| m.path != memo.path);
    if memos.len() >= FILES {
        memos.remove(0);
    }
    memos.push(memo);
}

impl FileMemo {
    /// The analysed form with this text at this place, if the last parse had it anywhere:
    /// moved to `start` and `range.0`. Its leading trivia and namespace are the caller's to set.
    pub(crate) fn form(&self, source: &str, start: Pos, start_byte: usize) -> Option<ParsedForm> {
        let memo = self.forms.get(&Key { source: source.to_string(), col: start.col })?;
        let mut form = memo.form.clone();
        let lines = i64::from(start.line) - i64::from(form.start.line);
        let bytes = start_byte as i64 - form.range.0 as i64;
        shift_form(&mut form, lines, bytes);
        Some(form)
    }

    /// The resolutions of `form` (and its children) if it was resolved under `env`, moved to
    /// where it is now.
    pub(crate) fn resolved(&self, form: &ParsedForm, env: u64) -> Option<Vec<Resolved>> {
        let memo = self.forms.get(&Key { source: form.source.clone(), col: form.start.col })?;
        let (at, line, resolved) = memo.resolved.as_ref()?;
        if *at != env {
            return None;
        }
        let lines = i64::from(form.start.line) - i64::from(*line);
        let mut resolved = resolved.clone();
        for r in &mut resolved {
            for c in &mut r.calls {
                c.pos = shift(c.pos, lines);
            }
            for (_, p) in &mut r.unresolved {
                *p = shift(*p, lines);
            }
        }
        Some(resolved)
    }

    /// Forget every form but those of the new parse (a memo holds one version of a file).
    pub(crate) fn replace_forms(&mut self, forms: &[ParsedForm]) {
        let mut old = std::mem::take(&mut self.forms);
        for f in forms {
            let key = Key { source: f.source.clone(), col: f.start.col };
            let resolved = old.remove(&key).and_then(|m| m.resolved);
            self.forms.insert(key, Memo { form: f.clone(), resolved });
        }
    }

    /// Remember how `form` resolved under `env`.
    pub(crate) fn record(&mut self, form: &ParsedForm, env: u64, resolved: &[Resolved]) {
        let key = Key { source: form.source.clone(), col: form.start.col };
        let memo =
            self.forms.entry(key).or_insert_with(|| Memo { form: form.clone(), resolved: None });
        memo.resolved = Some((env, form.start.line, resolved.to_vec()));
    }
}

/// What the resolution of the forms of namespace `ns` in a file reads besides their text:
/// the declaration, the language and the namespace tables, hashed.
pub(crate) fn env(decl: &NsDecl, ns: &str, lang: Lang, tables: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(decl).unwrap_or_default().hash(&mut h);
    ns.hash(&mut h);
    lang.hash(&mut h);
    tables.hash(&mut h);
    h.finish()
}

/// The namespace tables hashed, whatever order their sets iterate in.
pub(crate) fn tables(nss: &Namespaces) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (label, map) in [("publics", &nss.publics), ("all", &nss.all_vars)] {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        label.hash(&mut h);
        for k in keys {
            let mut names: Vec<&String> = map[k].iter().collect();
            names.sort();
            (k, names).hash(&mut h);
        }
    }
    let mut known: Vec<&String> = nss.known.iter().collect();
    known.sort();
    known.hash(&mut h);
    h.finish()
}

fn shift(p: Pos, lines: i64) -> Pos {
    Pos { line: (i64::from(p.line) + lines) as u32, col: p.col }
}

fn shift_form(form: &mut ParsedForm, lines: i64, bytes: i64) {
    form.range = ((form.range.0 as i64 + bytes) as usize, (form.range.1 as i64 + bytes) as usize);
    form.start = shift(form.start, lines);
    form.end = shift(form.end, lines);
    for d in &mut form.analysis.defines {
        d.line = (i64::from(d.line) + lines) as u32;
    }
    for child in &mut form.children {
        shift_form(child, lines, bytes);
    }
}
