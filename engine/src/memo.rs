//! What the last analysis and resolution of a file being edited found for each of its forms,
//! so that the next save of the file analyses and resolves only the forms whose text changed.
//!
//! A save of one form of an 8,000-line file used to analyse and resolve all of its 650 forms
//! again (about 25 ms of a 50 ms save). A form's analysis is a function of its own text; its
//! resolution, of its text, its namespace's declaration and the namespace tables. Both are kept
//! here per form, keyed by the form's text and starting column, for the last few files parsed
//! through [`crate::forms::parse_edited_file`], per store handle; a form found again at another place is the
//! same result moved by whole lines and bytes (its text, hence every column in it, is the
//! same). Resolutions are reused only under the same declaration and tables (`Env`).
//!
//! Nothing here reads the store; a memo that does not apply is simply not used.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use crate::forms::{FormRefs, Namespaces, ParsedForm, Resolved};
use crate::nsdecl::NsDecl;
use crate::syntax::{Lang, Pos};

/// How many files keep their memo (the files being edited now).
const FILES: usize = 32;

static MEMOS: Mutex<Vec<FileMemo>> = Mutex::new(Vec::new());

/// The forms of one file of one store (by `Store::id`) as last analysed, and resolved where
/// they were.
#[derive(Default)]
pub(crate) struct FileMemo {
    store: u64,
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

pub(crate) struct Memo {
    form: ParsedForm,
    /// The form's resolutions, each kind under the `env` and with the form starting on the
    /// line it was made at.
    resolved: Option<Made<Vec<Resolved>>>,
    refs: Option<Made<FormRefs>>,
}

/// A resolution made under `env`, with the form starting on `line`.
pub(crate) struct Made<T> {
    env: u64,
    line: u32,
    value: T,
}

/// A resolution of a form, moved with the form by whole lines.
pub(crate) trait Resolution: Clone {
    fn moved(self, lines: i64) -> Self;
    fn slot(memo: &mut Memo) -> &mut Option<Made<Self>>;
    fn get(memo: &Memo) -> &Option<Made<Self>>;
}

impl Resolution for Vec<Resolved> {
    fn moved(mut self, lines: i64) -> Self {
        for r in &mut self {
            for c in &mut r.calls {
                c.pos = shift(c.pos, lines);
            }
            for (_, p) in &mut r.unresolved {
                *p = shift(*p, lines);
            }
            for site in &mut r.sites {
                site.pos = shift(site.pos, lines);
            }
        }
        self
    }
    fn slot(memo: &mut Memo) -> &mut Option<Made<Self>> {
        &mut memo.resolved
    }
    fn get(memo: &Memo) -> &Option<Made<Self>> {
        &memo.resolved
    }
}

impl Resolution for FormRefs {
    fn moved(mut self, lines: i64) -> Self {
        for r in &mut self.refs {
            r.pos = shift(r.pos, lines);
        }
        self
    }
    fn slot(memo: &mut Memo) -> &mut Option<Made<Self>> {
        &mut memo.refs
    }
    fn get(memo: &Memo) -> &Option<Made<Self>> {
        &memo.refs
    }
}

/// The memo of `path`, taken out while the file is parsed and resolved (a second thread
/// editing the same file meanwhile finds none and works without).
pub(crate) fn take(store: u64, path: &str) -> FileMemo {
    let mut memos = MEMOS.lock().unwrap_or_else(|p| p.into_inner());
    match memos.iter().position(|m| m.store == store && m.path == path) {
        Some(i) => memos.remove(i),
        None => FileMemo { store, path: path.to_string(), forms: HashMap::new() },
    }
}

/// Keep `memo` for the next save of its file; the least recently kept memo goes. A file of more
/// than [`crate::syntax::KEEP_AT_MOST`] bytes of forms is not kept: its memo would hold
/// gigabytes (a 10 MB file of small forms: 3.5 GB) for as long as the process runs.
pub(crate) fn keep(memo: FileMemo) {
    let bytes: usize = memo.forms.keys().map(|k| k.source.len()).sum();
    if bytes > crate::syntax::KEEP_AT_MOST {
        return;
    }
    let mut memos = MEMOS.lock().unwrap_or_else(|p| p.into_inner());
    memos.retain(|m| m.store != memo.store || m.path != memo.path);
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

    /// The resolution of `form` (with its children) of kind `T` if one was made under `env`,
    /// moved to where the form is now.
    pub(crate) fn resolution<T: Resolution>(&self, form: &ParsedForm, env: u64) -> Option<T> {
        let memo = self.forms.get(&Key { source: form.source.clone(), col: form.start.col })?;
        let made = T::get(memo).as_ref().filter(|m| m.env == env)?;
        Some(made.value.clone().moved(i64::from(form.start.line) - i64::from(made.line)))
    }

    /// Forget every form but those of the new parse (a memo holds one version of a file).
    pub(crate) fn replace_forms(&mut self, forms: &[ParsedForm]) {
        let mut old = std::mem::take(&mut self.forms);
        for f in forms {
            let key = Key { source: f.source.clone(), col: f.start.col };
            let (resolved, refs) = old.remove(&key).map_or((None, None), |m| (m.resolved, m.refs));
            self.forms.insert(key, Memo { form: f.clone(), resolved, refs });
        }
    }

    /// Remember how `form` resolved under `env`.
    pub(crate) fn record<T: Resolution>(&mut self, form: &ParsedForm, env: u64, value: T) {
        let key = Key { source: form.source.clone(), col: form.start.col };
        let memo = self.forms.entry(key).or_insert_with(|| Memo {
            form: form.clone(),
            resolved: None,
            refs: None,
        });
        *T::slot(memo) = Some(Made { env, line: form.start.line, value });
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

#[cfg(test)]
mod tests {
    use crate::forms::parse_edited_file;
    use crate::store::Store;
    use crate::syntax::{self, Lang};

    /// Two stores in one process edit a file of the same path with different texts: each
    /// store's memo and kept parse hold its own text's forms, never the other's.
    #[test]
    fn stores_keep_their_own_memos_and_parses_of_one_path() {
        let (a, b) = (Store::open_in_memory().unwrap(), Store::open_in_memory().unwrap());
        assert_ne!(a.id(), b.id());
        let path = "src/app/core.clj";
        let (text_a, text_b) = ("(ns app.core)\n(defn f [] 1)\n", "(ns app.core)\n(defn g [] 2)\n");
        parse_edited_file(&a, path, Lang::Clj, text_a.to_string());
        let (sources, parsed) = memo_of(&b, path);
        assert!(sources.is_empty() && parsed.is_none(), "b sees nothing of a: {sources:?}");
        parse_edited_file(&b, path, Lang::Clj, text_b.to_string());
        for (store, text) in [(&a, text_a), (&b, text_b)] {
            let (sources, parsed) = memo_of(store, path);
            let mut want: Vec<String> = text.lines().map(str::to_string).collect();
            want.sort();
            assert_eq!(sources, want);
            assert_eq!(parsed.as_deref(), Some(text));
        }
    }

    /// The sources of the forms `store`'s memo of `path` holds (put back as found), and the
    /// text its kept parse is of.
    fn memo_of(store: &Store, path: &str) -> (Vec<String>, Option<String>) {
        let memo = super::take(store.id(), path);
        let mut sources: Vec<String> = memo.forms.keys().map(|k| k.source.clone()).collect();
        sources.sort();
        super::keep(memo);
        (sources, syntax::last_parsed_text(store, path))
    }
}
