//! A big file is read a run of top-level forms at a time, with no whole-file syntax tree
//! (`forms::parse_file_in_runs`, what a save of a text past `syntax::IN_RUNS_OVER` does). Its
//! read must be the whole-file read's: the same forms, trivia, namespaces, analysis, syntax
//! error, resolution, and the same rows once identified against the store. Runs here are a few
//! bytes long, so that every form boundary of the input is a run boundary somewhere.

use std::path::{Path, PathBuf};

use formdb_engine::change::{self, Change, ChangeSet};
use formdb_engine::forms::{self, Namespaces, ParsedFile};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::store::Store;
use formdb_engine::syntax::Lang;

/// Everything a read gives but the tree, to compare two reads.
fn read_of(f: &ParsedFile) -> String {
    format!("{:?}\n{:?}\n{:?}\n{:?}\n{:?}", f.content, f.ns, f.decl, f.hash, f.text)
}

/// The namespace tables of one file on its own: its vars, public and private.
fn own_tables(f: &ParsedFile) -> Namespaces {
    let mut nss = Namespaces::default();
    for (ns, var) in f.defined_vars() {
        nss.all_vars.entry(ns.to_string()).or_default().insert(var.to_string());
        nss.publics.entry(ns.to_string()).or_default().insert(var.to_string());
        std::sync::Arc::make_mut(&mut nss.known).insert(ns.to_string());
    }
    nss
}

/// Read `text` whole and in runs of each of `run_sizes` bytes: the reads and resolutions agree.
fn same_in_runs(path: &str, text: &str, run_sizes: &[usize]) {
    let lang = Lang::from_path(path).unwrap_or(Lang::Clj);
    let whole = forms::parse_file(path, lang, text.to_string());
    let nss = own_tables(&whole);
    let resolved = format!("{:?}", forms::resolve_file(&whole, &nss));
    let refs = format!("{:?}", forms::resolve_refs(&whole, &nss));
    for &run_bytes in run_sizes {
        let runs = forms::parse_file_in_runs(path, lang, text.to_string(), run_bytes);
        assert!(runs.tree.is_none(), "{path}: a read in runs keeps no tree");
        assert_eq!(read_of(&runs), read_of(&whole), "{path} read in runs of {run_bytes} bytes");
        assert_eq!(
            format!("{:?}", forms::resolve_file(&runs, &nss)),
            resolved,
            "{path} resolved in runs of {run_bytes} bytes"
        );
        assert_eq!(
            format!("{:?}", forms::resolve_refs(&runs, &nss)),
            refs,
            "{path}: references in runs of {run_bytes} bytes"
        );
    }
}

const TRICKY: &[(&str, &str)] = &[
    ("brackets in strings", "(ns a.b)\n(def s \"(((\")\n(def t \"\\\")]}\")\n(def u 1)\n"),
    ("brackets in comments", "; (((\n(def a 1) ; )))\n;; [{\n(def b 2)\n"),
    ("brackets in regexes", "(def r #\"[(\\\"]\")\n(def q #\"\\)\")\n(re-find r \"(\")\n"),
    ("brackets as characters", "(def c \\()\n(def d \\\")\n(def e \\;)\n(def f [\\] \\}])\n"),
    ("discards", "#_ #_ (a) (b)\n(def x 1)\n#_(def y 2) #_\n(def z 3)\n#_ foo"),
    (
        "reader conditionals",
        "(ns a.c)\n#?(:clj (defn f [] (inc 1)) :cljs (defn f [] 2))\n[#?@(:clj [1 2] :cljs [3])]\n(f)\n",
    ),
    ("metadata", "^:private (def p 1)\n^{:doc \"x)\"}\n(def q 2)\n#^String (def r \"\")\n"),
    ("prefixes", "'(a b) `(c ~d ~@e) @x #'inc #inst \"2020-01-01\" #uuid \"x\" #=(+ 1 2)"),
    ("comment block", "(ns a.d)\n(defn g [x] x)\n(comment\n  (g 1)\n  ;; why\n  (g (g 2)))\n(g 3)"),
    ("in-ns", "(ns a.e (:require [c.d :as d]))\n(d/f 1)\n(in-ns 'other)\n(def z 1)\n(z)\n"),
    ("CRLF", "(ns a.f)\r\n\r\n(defn h\r\n  [x]\r\n  (str x))\r\n(h 1)\r\n"),
    ("BOM", "\u{feff}(ns a.g)\n(def x 1)\n(inc x)\n"),
    ("BOM and a form at once", "\u{feff}x y"),
    ("non-ASCII", "(ns a.h)\n(def ü \"é(\")\n(defn ñ [] ü)\n"),
    ("shebang", "#!/usr/bin/env bb\n(println 1)\n(println 2)\n"),
    ("trailing trivia", "(def a 1)\n\n;; end\n\n"),
    ("atoms", "1 2 :k foo nil true \"s\" \\a 3.5 1/2 ##Inf"),
    ("atoms on lines", "1/2 3/4 a/b\n:k/v ::w 0x1F\n\\newline \\u00e9 -1.5e3\n##NaN 1N 2M"),
    ("a string over lines", "(def a 1)\n\"\n(def b 2)\n\"\n(def c 3)\n"),
    ("no final newline", "(def a 1) foo"),
    ("only trivia", ";; nothing\n\n#_(x)\n"),
    ("empty", ""),
    ("unclosed", "(ns a.i)\n(def a 1)\n(def b (\n(def c 3)\n"),
    ("extra closing", "(ns a.j)\n(def a 1))\n(def b 2)\n"),
    ("unterminated string", "(def a 1)\n(def b \"abc)\n(def c 3)\n"),
    ("error late", "(def a 1)\n(def b 2)\n(def c 3)\n(def d 4)\n(def e ]\n"),
];

#[test]
fn tricky_texts_read_in_runs_as_whole() {
    for (what, text) in TRICKY {
        eprintln!("{what}");
        same_in_runs("src/a.clj", text, &[1, 5, 16, 64, 1 << 20]);
        same_in_runs("src/a.cljc", text, &[7, 100]);
    }
}

#[test]
fn a_form_nested_too_deep_reads_in_runs_as_whole() {
    let deep = format!("{}{}", "(".repeat(600), ")".repeat(600));
    // Too deep alone, and too deep before a syntax error, which a whole-file read reports first.
    same_in_runs("src/a.clj", &format!("(def a 1)\n(def d {deep})\n(def b 2)\n"), &[16, 4096]);
    same_in_runs("src/a.clj", &format!("(def a 1)\n(def d {deep})\n(def b ]\n"), &[16, 4096]);
}

fn clojure_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            clojure_files(&path, out);
        } else if path.to_str().and_then(Lang::from_path).is_some() {
            out.push(path);
        }
    }
}

/// The corpus (`FORMDB_CORPUS`, as `scripts/test.sh` sets it) and its Clojure files, in path
/// order; `None` (the caller skips) without one.
fn corpus_files() -> Option<(PathBuf, Vec<PathBuf>)> {
    let Some(corpus) = std::env::var_os("FORMDB_CORPUS").map(PathBuf::from) else {
        eprintln!("skipping: no corpus (set FORMDB_CORPUS, as scripts/test.sh does)");
        return None;
    };
    let mut files = Vec::new();
    clojure_files(&corpus, &mut files);
    files.sort();
    assert!(files.len() > 100, "{} Clojure files in {}", files.len(), corpus.display());
    Some((corpus, files))
}

#[test]
fn corpus_files_read_in_runs_as_whole() {
    let Some((corpus, files)) = corpus_files() else { return };
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let path = file.strip_prefix(&corpus).unwrap().to_string_lossy().into_owned();
        same_in_runs(&path, &text, &[200, 4096]);
    }
}

/// A run of real code stays near its size. A run cut inside a multi-line docstring once made
/// the parser's recovery turn the whole run into one error: nothing could be taken from it, and
/// it doubled, up to the whole text (whose tree is about 20 bytes a byte: +104 MB in a save of
/// 5 MB of the corpus). Runs now end before a line that opens a form.
#[test]
fn runs_of_real_code_stay_near_their_size() {
    let Some((_, mut files)) = corpus_files() else { return };
    files.retain(|f| f.extension().is_some_and(|x| x == "clj"));
    let mut text = String::new();
    for file in files.iter().cycle().take(2 * files.len()) {
        text.push_str(&String::from_utf8_lossy(&std::fs::read(file).unwrap()));
        text.push('\n');
    }
    let idx = formdb_engine::syntax::LineIndex::new(&text);
    let run = formdb_engine::syntax::RUN_BYTES;
    let (mut longest_run, mut longest_form, mut forms) = (0, 0, 0);
    let error = formdb_engine::syntax::parse_in_runs(&idx, run, |nodes| {
        if let (Some(first), Some(last)) = (nodes.first(), nodes.last()) {
            longest_run = longest_run.max(last.end_byte() - first.start_byte());
        }
        for n in nodes {
            longest_form = longest_form.max(n.end_byte() - n.start_byte());
        }
        forms += nodes.len();
    });
    assert_eq!(error, None);
    assert!(forms > 8000, "{forms} forms in {} bytes", text.len());
    assert!(
        longest_run <= 2 * run + longest_form,
        "a run of {longest_run} bytes (runs of {run}, the longest form {longest_form} bytes) in {} bytes of the corpus",
        text.len()
    );
}

/// A text of `n` small forms in namespace `ns`, calling each other and `shop`'s vars.
fn many_forms(ns: &str, n: usize) -> String {
    let mut text = format!("(ns {ns}\n  (:require [clojure.string :as str]))\n\n");
    for i in 0..n {
        text.push_str(&format!(";; form {i}\n(defn f{i} [x] (str/upper-case (f{} x)))\n", i / 2));
    }
    text.push_str("(println (f0 \"a\") (undefined-thing))\n");
    text
}

#[test]
fn a_save_read_in_runs_stores_what_a_whole_read_stores() {
    let store = Store::open_in_memory().unwrap();
    let path = "src/big/forms.clj";
    let old = many_forms("big.forms", 300);
    let (changes, _) = import::file_changes(
        &store,
        vec![Incoming { path: path.into(), bytes: old.into_bytes() }],
        &Quiet,
    )
    .unwrap();
    let import = ChangeSet { author: "t".into(), op: "import".into(), changes };
    change::apply(&store, &import).unwrap();
    // The next version: forms gone, moved, changed and new, against the stored ids.
    let mut new = many_forms("big.forms", 320).replace("(defn f7 ", "(defn f7b ");
    new = new.replacen(";; form 3\n", ";; form 3, moved\n\n", 1);
    let whole = forms::parse_file(path, Lang::Clj, new.clone());
    let runs = forms::parse_file_in_runs(path, Lang::Clj, new, 512);
    let (a, errors_a) = import::parsed_file_changes(&store, vec![whole], &Quiet).unwrap();
    let (b, errors_b) = import::parsed_file_changes(&store, vec![runs], &Quiet).unwrap();
    assert!(errors_a.is_empty() && errors_b.is_empty());
    // Everything but what was read of the store to compute them (the same, in hash order).
    let written = |changes: Vec<Change>| {
        let changes: Vec<Change> =
            changes.into_iter().filter(|c| !matches!(c, Change::Read(_))).collect();
        format!("{changes:#?}")
    };
    assert_eq!(written(b), written(a));
}

/// A file longer than `syntax::IN_RUNS_OVER` is imported read in runs, as a save reads it (its
/// whole-file tree would be about 70 bytes a byte): the store holds what a whole read stores.
#[test]
fn a_big_file_imported_in_runs_stores_what_a_whole_read_stores() {
    let dir = tempfile::tempdir().unwrap();
    let path = "src/big/forms.clj";
    let doc = "Some words. ".repeat(40);
    let mut text = many_forms("big.forms", 10);
    let mut i = 0;
    while text.len() <= formdb_engine::syntax::IN_RUNS_OVER {
        text.push_str(&format!(
            "(defn g{i}\n  \"{doc}\"\n  [x]\n  (f{} (g{} x) 1))\n\n",
            i % 10,
            i / 2
        ));
        i += 1;
    }
    std::fs::create_dir_all(dir.path().join("tree/src/big")).unwrap();
    std::fs::write(dir.path().join("tree").join(path), &text).unwrap();
    let imported = Store::open(&dir.path().join("a")).unwrap();
    import::import_dir(&imported, &dir.path().join("tree"), "t", &Quiet).unwrap();
    let whole = Store::open(&dir.path().join("b")).unwrap();
    let parsed = forms::parse_file(path, Lang::Clj, text);
    assert!(parsed.tree.is_some(), "read whole");
    let (changes, errors) = import::parsed_file_changes(&whole, vec![parsed], &Quiet).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    change::apply(&whole, &ChangeSet { author: "t".into(), op: "import".into(), changes }).unwrap();
    let rows = |store: &Store, script: &str| {
        let rows = store.query(script, Default::default()).unwrap().rows;
        rows.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>()
    };
    for script in [
        "?[id, pos, line, hash, rhash, purity, callees, sites, canonical] := *form{id, pos, line, hash, rhash, purity, callees, sites, canonical}",
        "?[id, line, col, kind, message] := *diagnostic{id, line, col, kind, message}",
        "?[from, to] := *calls{from, to}",
    ] {
        let (a, b) = (rows(&imported, script), rows(&whole, script));
        assert!(a.len() > 2000, "{script}: {} rows", a.len());
        assert!(a == b, "{script}: the import differs from a whole read");
    }
}

/// A text read in runs, whose rest is too long to read at once, with a form that no run reads:
/// the text is kept raw with the error at the place of that form, found without parsing the
/// text whole (a 5 MB text with an unclosed bracket at its top was, a 256x bigger tree than a
/// run's). A form longer than `syntax::MAX_FORM_BYTES` is such a form; a long one under the
/// bound is read as a whole read reads it.
#[test]
fn a_big_text_reports_a_form_no_run_reads_where_the_form_starts() {
    use formdb_engine::forms::Content;
    use formdb_engine::syntax::MAX_FORM_BYTES;
    // Small forms, past twice the longest form, after `head` and before `tail`.
    let text_of = |head: &str, tail: &str| {
        let mut text = format!("(ns big.errors)\n{head}");
        let mut n = 0;
        while text.len() < 2 * MAX_FORM_BYTES + (64 << 10) {
            text.push_str(&format!("(defn f{n}\n  \"Doc {n}.\"\n  [x]\n  (+ x {n}))\n\n"));
            n += 1;
        }
        text.push_str(tail);
        text
    };
    let error_of =
        |text: String| match forms::parse_file_bounded("src/big/errors.clj", Lang::Clj, text)
            .content
        {
            Content::Raw { error } => (error.pos.line, error.pos.col, error.message),
            Content::Forms { forms, .. } => panic!("read as {} forms", forms.len()),
        };
    let long_vector = |bytes: usize| {
        let mut v = String::from("(def long-table\n  [");
        while v.len() < bytes {
            v.push_str(":entry ");
        }
        v.push_str("])\n");
        v
    };
    let unclosed = error_of(text_of("(defn being-written [x]\n  (let [y x]\n\n", ""));
    assert_eq!(unclosed, (2, 1, "unclosed bracket: no matching closing bracket".into()));
    let table = long_vector(MAX_FORM_BYTES + 100);
    let too_long = error_of(text_of(&table, ""));
    assert_eq!((too_long.0, too_long.1), (2, 1));
    assert_eq!(
        too_long.2,
        format!(
            "a top-level form of {} bytes: longer than the {MAX_FORM_BYTES} bytes one form may be",
            table.len() - 1
        )
    );
    // At the end of the text, where what is left is read at once.
    let at_end = text_of("", &table);
    let line = at_end[..at_end.len() - table.len()].lines().count() as u32 + 1;
    assert_eq!(error_of(at_end).0, line);
    // A stray bracket halfway, and a form that does not parse though its brackets balance:
    // where a whole read of the text puts them.
    for bad in ["(def x 1))\n", "(def bad #)\n"] {
        let half = text_of("", "");
        let cut = half[..half.len() / 2].rfind("\n(defn").unwrap() + 1;
        let text = format!("{}{bad}{}", &half[..cut], &half[cut..]);
        let Content::Raw { error } =
            forms::parse_file("src/a.clj", Lang::Clj, text.clone()).content
        else {
            panic!("{bad} parses");
        };
        assert_eq!(error_of(text), (error.pos.line, error.pos.col, error.message), "{bad}");
    }
    // A block of comments longer than the longest form, between forms: read as a whole read
    // reads it (they lead the form after them).
    let comments = ";; a line of a long comment block\n".repeat(3 * MAX_FORM_BYTES / 34);
    let commented = text_of(&comments, "");
    let whole =
        format!("{:?}", forms::parse_file("src/a.clj", Lang::Clj, commented.clone()).content);
    let runs = forms::parse_file_bounded("src/a.clj", Lang::Clj, commented).content;
    assert!(matches!(runs, Content::Forms { .. }));
    assert!(format!("{runs:?}") == whole, "a long comment block read in runs differs");
    // A form near the bound is read whole, as a whole read reads it.
    let near = text_of(&long_vector(MAX_FORM_BYTES - 4096), "");
    let Content::Forms { forms, .. } =
        forms::parse_file_bounded("src/a.clj", Lang::Clj, near.clone()).content
    else {
        panic!("a form under the bound is read");
    };
    let Content::Forms { forms: whole, .. } =
        forms::parse_file("src/a.clj", Lang::Clj, near).content
    else {
        unreachable!()
    };
    assert_eq!(forms.len(), whole.len());
    assert_eq!(forms[1].source, whole[1].source);
}
