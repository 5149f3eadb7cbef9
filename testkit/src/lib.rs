//! What formdb's tests share, so that each finds its fixtures one way: stores built from files,
//! the `examples/shop` project, and the corpus of real Clojure sources.
//!
//! Dev-only (`publish = false`): every crate takes it as a dev-dependency. It depends on the
//! engine alone, so the crates above the engine can use it without a second copy of themselves.

use std::path::{Path, PathBuf};

use formdb_engine::import::{import_dir, Quiet};
use formdb_engine::store::{Store, STORE_DIR};
use tempfile::TempDir;

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("testkit lives in the workspace").into()
}

/// The `examples/shop` project: a small Clojure tree with sources and tests.
pub fn shop_dir() -> PathBuf {
    workspace_root().join("examples/shop")
}

/// A memory store holding `examples/shop`, imported as `import` does.
pub fn shop() -> Store {
    let store = Store::open_in_memory().unwrap();
    import_dir(&store, &shop_dir(), "import", &Quiet).unwrap();
    store
}

/// A copy of `examples/shop` at `to` (its `.formdb`, if any, left out).
pub fn copy_shop(to: &Path) {
    copy_dir(&shop_dir(), to);
}

/// A copy of the tree `from` at `to`; a `.formdb` directory is not copied.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != ".formdb" {
                copy_dir(&e.path(), &target);
            }
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Every file below `root` (a `.formdb` directory left out), as paths relative to it, sorted.
pub fn relative_files(root: &Path) -> Vec<String> {
    fn walk(root: &Path, rel: &str, out: &mut Vec<String>) {
        for e in std::fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            if name == ".formdb" {
                continue;
            }
            let r = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            if e.file_type().unwrap().is_dir() {
                walk(root, &r, out);
            } else {
                out.push(r);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, "", &mut out);
    out.sort();
    out
}

/// A fresh temporary directory holding `files` (relative path, text).
pub fn write_tree(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// A memory store holding `files` (relative path, text), imported by `author`; the directory
/// they were written to lives as long as the `TempDir`.
pub fn store_of_as(author: &str, files: &[(&str, &str)]) -> (Store, TempDir) {
    let dir = write_tree(files);
    let store = Store::open_in_memory().unwrap();
    import_dir(&store, dir.path(), author, &Quiet).unwrap();
    (store, dir)
}

/// [`store_of_as`] imported by `import`, as `formdb import` does.
pub fn store_of(files: &[(&str, &str)]) -> (Store, TempDir) {
    store_of_as("import", files)
}

/// [`store_of`] of files that must all import without an error.
pub fn clean_store_of(files: &[(&str, &str)]) -> (Store, TempDir) {
    let dir = write_tree(files);
    let store = Store::open_in_memory().unwrap();
    let summary = import_dir(&store, dir.path(), "import", &Quiet).unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    (store, dir)
}

/// An on-disk store in a fresh temporary directory (at `<tmp>/`[`STORE_DIR`]) holding the tree `src`,
/// imported by `author`: the store, the directory, and the store's own directory.
pub fn disk_store_of(src: &Path, author: &str) -> (Store, TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let sdir = tmp.path().join(STORE_DIR);
    let store = Store::open(&sdir).unwrap();
    import_dir(&store, src, author, &Quiet).unwrap();
    (store, tmp, sdir)
}

/// The corpus of real Clojure sources: the directory `FORMDB_CORPUS` names (`scripts/test.sh`
/// sets it, after `scripts/corpus.sh` extracted it). Without it the caller skips, and this says
/// so on stderr; a corpus that was asked for but is missing fails the test.
pub fn corpus() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("FORMDB_CORPUS").map(PathBuf::from) else {
        eprintln!("skipping: no corpus (set FORMDB_CORPUS, as scripts/test.sh does)");
        return None;
    };
    assert!(
        dir.is_dir(),
        "FORMDB_CORPUS={}: not a directory; run scripts/corpus.sh {0}",
        dir.display()
    );
    Some(dir)
}

/// The corpus's `.clj` files (under `corpus`, in the order of [`relative_files`]) one after
/// another as one file of namespace `ns`, repeated until it is `bytes` long: real code, for a
/// big save. Each file's own `ns` and `in-ns` forms become `comment` blocks, since one file
/// declares one namespace; the aliases they made then resolve to nothing, as in a file being
/// written.
pub fn corpus_as_one_file(corpus: &Path, ns: &str, bytes: usize) -> String {
    let files: Vec<String> =
        relative_files(corpus).into_iter().filter(|f| f.ends_with(".clj")).collect();
    assert!(!files.is_empty(), "no .clj files under {}", corpus.display());
    let mut text = format!("(ns {ns})\n");
    while text.len() < bytes {
        for f in &files {
            let code =
                String::from_utf8_lossy(&std::fs::read(corpus.join(f)).unwrap()).into_owned();
            let code = format!("\n{code}\n")
                .replace("\n(ns", "\n(comment ns")
                .replace("\n(in-ns", "\n(comment in-ns");
            text.push_str(&code);
            if text.len() >= bytes {
                break;
            }
        }
    }
    text
}

/// A seeded generator (xorshift64*) for the generated tests: the same seed makes the same
/// calls, so a failure is replayed exactly. Its seed is `FORMDB_RANDOM_SEED`, else `default`.
pub struct Seeded(u64);

impl Seeded {
    pub fn from_env(default: u64) -> Seeded {
        let var = std::env::var("FORMDB_RANDOM_SEED").ok().and_then(|s| s.parse::<u64>().ok());
        Seeded::new(var.unwrap_or(default))
    }

    /// A generator from `seed` (0, which xorshift never leaves, counts as 1).
    pub fn new(seed: u64) -> Seeded {
        Seeded(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// How many generated rounds a test runs: `FORMDB_RANDOM_ROUNDS`, else `default`.
pub fn random_rounds(default: u64) -> u64 {
    std::env::var("FORMDB_RANDOM_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// `text` with a comment added at the end of the first line of a `defn` in its second half whose
/// first line leaves the form open: the same definition with one form's text changed, as an
/// editor's save of one function is.
pub fn one_defn_edited(text: &str) -> String {
    let mut at = text.len() / 2;
    loop {
        let start = at + text[at..].find("\n(defn ").expect("a defn in the second half") + 1;
        let eol = start + text[start..].find('\n').unwrap_or(text.len() - start);
        if !text[start..eol].trim_end().ends_with(')') {
            return format!("{} ;; edited{}", &text[..eol], &text[eol..]);
        }
        at = eol;
    }
}
