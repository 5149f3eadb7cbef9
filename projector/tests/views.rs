//! The projector's views against a real store: byte-identical as-stored views and exports,
//! per-user alias views, their inverse, and the one-form-per-line view; the round-trip law over
//! the Debian corpus.

use std::collections::BTreeMap;

use formdb_engine::change::{self, ChangeSet};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::store::{params, str_at, Params, Store};
use formdb_engine::syntax;
use formdb_projector::aliases::{self, AliasMap};
use formdb_projector::views::{self, Render};

fn import(files: &[(&str, &str)]) -> (Store, tempfile::TempDir) {
    formdb_testkit::store_of_as("test", files)
}

fn map(pairs: &[(&str, &str)]) -> AliasMap {
    AliasMap::from_pairs(pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())))
}

const CORE: &str = "(ns app.core
  \"The app.\"
  (:require [clojure.string :as string]
            [clojure.set :as set]
            [app.util :as u]))

;; string/join in a comment stays
(defn greet
  \"Says string/join.\"
  [names]
  (string/join \", \"
               (map u/shout names)))

(defn ^:private tidy [s] (string/trim s))
";

const UTIL: &str = "(ns app.util\r\n  (:require [clojure.string :as str]))\r\n\r\n(defn shout [s] (str/upper-case s))\r\n";

fn tree() -> Vec<(&'static str, &'static str)> {
    vec![
        ("src/app/core.clj", CORE),
        ("src/app/util.clj", UTIL),
        ("src/app/broken.clj", "(ns app.broken)\n(defn oops [x]\n"),
        ("resources/config.json", "{\"port\": 8080}"),
        ("deps.edn", "{:paths [\"src\"]}"),
    ]
}

#[test]
fn as_stored_and_export_are_byte_identical() {
    let (store, dir) = import(&tree());
    assert_eq!(views::as_stored(&store, "app.core").unwrap(), CORE);
    assert_eq!(views::as_stored(&store, "app.util").unwrap(), UTIL);
    let out = tempfile::tempdir().unwrap();
    for path in formdb_engine::query::paths(&store).unwrap() {
        let (bytes, _) = views::render_path(&store, &path, &Render::AsStored).unwrap();
        let dest = out.path().join(&path);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
    for (path, text) in tree() {
        assert_eq!(std::fs::read_to_string(out.path().join(path)).unwrap(), text, "{path}");
        assert_eq!(std::fs::read(dir.path().join(path)).unwrap(), text.as_bytes());
    }
    assert!(views::as_stored(&store, "no.such").is_err());
}

#[test]
fn user_views_follow_each_users_aliases() {
    let (store, _dir) = import(&tree());
    let alice = map(&[("clojure.string", "str")]);
    let bob = map(&[("clojure.string", "s")]);
    let a = views::user_view(&store, "app.core", &alice).unwrap();
    let b = views::user_view(&store, "app.core", &bob).unwrap();
    assert!(a.fallbacks.is_empty() && b.fallbacks.is_empty());
    assert!(a.text.contains("[clojure.string :as str]"), "{}", a.text);
    assert!(a.text.contains("(str/join \", \""), "{}", a.text);
    assert!(a.text.contains("(str/trim s)"));
    assert!(b.text.contains("[clojure.string :as s]"), "{}", b.text);
    assert!(b.text.contains("(s/join \", \""));
    // Comments and strings are not code.
    assert!(a.text.contains(";; string/join in a comment stays"));
    assert!(a.text.contains("\"Says string/join.\""));
    // The store keeps the fully-qualified call whatever the view.
    let rows =
        store.query("?[c] := *form{fqn: 'app.core/greet', canonical: c}", params([])).unwrap();
    assert!(str_at(&rows.rows[0], 0).contains("clojure.string/join"), "{rows:?}");
    // app.util uses `str` already: alice's view of it is the stored text.
    let u = views::user_view(&store, "app.util", &alice).unwrap();
    assert_eq!(u.text, UTIL);
    let u = views::user_view(&store, "app.util", &bob).unwrap();
    assert!(u.text.contains("(s/upper-case s)") && u.text.contains("\r\n"), "{}", u.text);
    for m in [&alice, &bob] {
        let broken = views::stored_text(&store, "src/app/broken.clj").unwrap();
        assert_eq!(views::user_view_text(&broken, m).text, broken);
        for ns in ["app.core", "app.util"] {
            let v = views::user_view(&store, ns, m).unwrap();
            assert_eq!(
                views::parse_back(&store, ns, &v.text, m).unwrap(),
                views::as_stored(&store, ns).unwrap()
            );
        }
    }
}

#[test]
fn auto_resolved_keywords_and_metadata_follow() {
    let src = "(ns app.spec (:require [clojure.spec.alpha :as spec] [app.model :as-alias m]))\n\n(spec/def ::m/id int?)\n(defn f [^m/Thing x] {::m/id x, :m/plain 1, #::m{:a 1} 2})\n(alias 'q 'app.model)\n";
    let (store, _d) = import(&[("src/app/spec.clj", src)]);
    let m = map(&[("clojure.spec.alpha", "s"), ("app.model", "model")]);
    let v = views::user_view(&store, "app.spec", &m).unwrap();
    assert_eq!(
        v.text,
        "(ns app.spec (:require [clojure.spec.alpha :as s] [app.model :as-alias model]))\n\n(s/def ::model/id int?)\n(defn f [^model/Thing x] {::model/id x, :m/plain 1, #::model{:a 1} 2})\n(alias 'q 'app.model)\n"
    );
    assert_eq!(views::parse_back(&store, "app.spec", &v.text, &m).unwrap(), src);
}

#[test]
fn aligned_continuation_lines_are_reindented() {
    let src = "(ns app.align
  (:require [clojure.string :as string :refer [blank?
                                              join]]
            [clojure.set :as set]))

(defn f [xs]
  (string/join \",\"
               (remove string/blank?
                       xs)))
";
    let (store, _d) = import(&[("src/app/align.clj", src)]);
    let m = map(&[("clojure.string", "s")]);
    let v = views::user_view(&store, "app.align", &m).unwrap();
    assert_eq!(
        v.text,
        "(ns app.align
  (:require [clojure.string :as s :refer [blank?
                                         join]]
            [clojure.set :as set]))

(defn f [xs]
  (s/join \",\"
          (remove s/blank?
                  xs)))
"
    );
    assert_eq!(views::parse_back(&store, "app.align", &v.text, &m).unwrap(), src);
    // Longer aliases push the other way.
    let m = map(&[("clojure.string", "cstring")]);
    let v = views::user_view(&store, "app.align", &m).unwrap();
    assert!(v.text.contains("(cstring/join \",\"\n                (remove cstring/blank?\n                        xs)"), "{}", v.text);
    assert_eq!(views::parse_back(&store, "app.align", &v.text, &m).unwrap(), src);
}

#[test]
fn collisions_fall_back_and_are_reported() {
    let src = "(ns app.c (:require [clojure.string :as str] [clojure.set :as s] [clojure.walk :as walk]))\n(defn f [x] (s/union (str/trim x) (walk/keywordize-keys x)))\n";
    let (store, _d) = import(&[("src/app/c.clj", src)]);
    // `s` is clojure.set's alias here; clojure.walk and clojure.set both want `w`.
    let m = map(&[("clojure.string", "s"), ("clojure.walk", "w"), ("clojure.pprint", "w")]);
    let v = views::user_view(&store, "app.c", &m).unwrap();
    assert_eq!(v.fallbacks.len(), 1, "{:?}", v.fallbacks);
    let f = &v.fallbacks[0];
    assert_eq!((f.ns.as_str(), f.wanted.as_str(), f.used.as_str()), ("clojure.string", "s", "str"));
    assert!(f.reason.contains("clojure.set"), "{}", f.reason);
    assert!(v.text.contains("(str/trim x)") && v.text.contains("(w/keywordize-keys x)"));
    // Two preferred aliases meeting in one ns.
    let m = map(&[("clojure.string", "x"), ("clojure.walk", "x")]);
    let v = views::user_view(&store, "app.c", &m).unwrap();
    assert_eq!(v.fallbacks.len(), 2, "{:?}", v.fallbacks);
    assert_eq!(v.text, src);
    // A swap is not a collision.
    let m = map(&[("clojure.string", "s"), ("clojure.set", "str")]);
    let v = views::user_view(&store, "app.c", &m).unwrap();
    assert!(v.fallbacks.is_empty());
    assert!(v.text.contains("(str/union (s/trim x)"), "{}", v.text);
    assert_eq!(views::parse_back(&store, "app.c", &v.text, &m).unwrap(), src);
}

/// The leaves of a form's tree as comparable tokens: comments and discards dropped, strings by
/// value.
fn tokens(text: &str) -> Vec<String> {
    fn walk(n: tree_sitter::Node, src: &str, out: &mut Vec<String>) {
        if syntax::is_trivia(n) {
            return;
        }
        if matches!(n.kind(), "str_lit" | "regex_lit") {
            out.push(format!("{}:{}", n.kind(), syntax::string_value(n, src)));
            return;
        }
        if n.child_count() == 0 {
            out.push(syntax::text(n, src).to_string());
            return;
        }
        let mut c = n.walk();
        for ch in n.children(&mut c) {
            walk(ch, src, out);
        }
    }
    let tree = syntax::parse(text);
    let mut out = Vec::new();
    walk(tree.root_node(), text, &mut out);
    out
}

fn check_oneline(text: &str) -> usize {
    let tree = syntax::parse(text);
    if syntax::first_error(&tree, text).is_some() {
        return 0;
    }
    let forms = syntax::top_level_forms(&tree);
    let one = views::oneline_text(text);
    let lines: Vec<&str> = one.lines().collect();
    assert_eq!(lines.len(), forms.len(), "{one}");
    assert!(one.is_empty() || one.ends_with('\n'));
    for (line, form) in lines.iter().zip(&forms) {
        assert_eq!(tokens(line), tokens(syntax::text(*form, text)), "{line}");
    }
    forms.len()
}

#[test]
fn oneline_puts_each_form_on_one_line() {
    let (store, _d) = import(&tree());
    let one = views::oneline(&store, "app.core").unwrap();
    assert_eq!(
        one.lines().nth(1).unwrap(),
        "(defn greet \"Says string/join.\" [names] (string/join \", \" (map u/shout names)))"
    );
    assert_eq!(check_oneline(CORE), 3);
    check_oneline("(ns x)\n(def s \"multi\nline\") ; c\n#_(gone)\n(defn f\n  [x] ;; c\n  #_x ^:m\n  {:a #\"re\" :b \\space})\n");
}

/// A text past `syntax::IN_RUNS_OVER` is read a run of forms at a time, as the engine reads it:
/// its one-form-per-line view is each form's line, and a text the engine keeps raw (here a
/// bracket never closed) is shown as stored, in the one-line and the alias views alike, with
/// no whole-file tree made to find that out (70 bytes a byte: gigabytes for a 50 MB file).
#[test]
fn a_big_text_is_viewed_a_run_of_forms_at_a_time() {
    let mut forms = vec!["(ns app.big\n  (:require [clojure.string :as string]))".to_string()];
    let mut text = format!("{}\n", forms[0]);
    let mut n = 0;
    while text.len() <= syntax::IN_RUNS_OVER + (64 << 10) {
        let form = format!(
            "(defn f{n}\n  \"Doc {n}.\"\n  [x] ; why\n  (string/join \", \"\n    [x {n}]))"
        );
        text.push_str(&format!("{form}\n\n"));
        forms.push(form);
        n += 1;
    }
    let one = views::oneline_text(&text);
    let each: String = forms.iter().map(|f| views::oneline_text(f)).collect();
    assert_eq!(one, each);
    assert_eq!(one.lines().count(), forms.len());
    // Left open at the top: shown as stored in both views.
    let open = text.replacen("(defn f0\n", "(defn f0\n  (let [y 1]\n", 1);
    assert_eq!(views::oneline_text(&open), open);
    let ann = map(&[("clojure.string", "str")]);
    assert_eq!(views::user_view_text(&open, &ann).text, open);
    // And read, the alias view renames.
    let viewed = views::user_view_text(&text, &ann).text;
    assert!(viewed.contains("(str/join \", \""), "{}", &viewed[..400]);
}

/// A big text with a token the scanner leaves to tree-sitter (`nil/x`, which it could split
/// otherwise) was parsed whole for its alias view: +1.5 GB and 15 s for 20 MB, on every read.
/// It is viewed a top-level form at a time now, as the whole parse views it, and reads back.
#[test]
fn a_big_text_the_scanner_declines_is_viewed_a_form_at_a_time_as_a_whole_parse_views_it() {
    let mut text = "(ns app.big\n  (:require [clojure.string :as string]\n            [clojure.set :as set]))\n\n(def odd nil/x)\n".to_string();
    let mut n = 0;
    while text.len() <= syntax::IN_RUNS_OVER + (64 << 10) {
        // Continuation lines aligned past a renamed token, and a comment between forms.
        text.push_str(&format!(
            ";; form {n}\n(defn f{n}\n  [x]\n  (string/join \", \" [x\n                     {n}])\n  (set/union #{{x}}\n             #{{{n}}}))\n\n"
        ));
        n += 1;
    }
    text.push_str("(string/blank? \"\") ; the end\n");
    let ann = map(&[("clojure.string", "str"), ("clojure.set", "s")]);
    assert!(views::user_view_text_scanned(&text, &ann).is_none(), "the scanner declines it");
    let view = views::user_view_text(&text, &ann);
    assert_eq!(view, views::user_view_text_checked(&text, &ann));
    assert!(view.text.contains("(str/join \", \" [x\n                  "), "{}", &view.text[..600]);
    assert_eq!(views::parse_back_text(&text, &view.text, &ann), text);
    // An edit of one form in the view reads back as that edit of the stored text.
    let edited = view.text.replacen("(defn f7\n", "(defn f7\n  \"Seven.\"\n", 1);
    let stored_edit = text.replacen("(defn f7\n", "(defn f7\n  \"Seven.\"\n", 1);
    assert_eq!(views::parse_back_text(&text, &edited, &ann), stored_edit);
    // A form nested past the depth gate keeps it raw: shown as stored.
    let depth = syntax::MAX_DEPTH + 10;
    let deep = format!("{text}{}{}\n", "[".repeat(depth), "]".repeat(depth));
    assert_eq!(views::user_view_text(&deep, &ann).text, deep);
}

#[test]
fn alias_maps_set_import_and_project_default() {
    let dir = tempfile::tempdir().unwrap();
    let sdir = dir.path().join(".formdb");
    let store = Store::open(&sdir).unwrap();
    std::fs::write(sdir.join("aliases.edn"), "{:aliases {clojure.string str clojure.java.io io}}")
        .unwrap();
    assert_eq!(
        aliases::load(&store, "ann").unwrap(),
        map(&[("clojure.string", "str"), ("clojure.java.io", "io")])
    );
    aliases::set(&store, "ann", "clojure.string", "s").unwrap();
    assert_eq!(aliases::load(&store, "ann").unwrap().get("clojure.string"), Some("s"));
    assert!(aliases::set(&store, "ann", "clojure.set", "s").is_err());
    assert!(aliases::set(&store, "ann", "clojure.set", "a/b").is_err());
    // Invalid imports write nothing.
    let e = aliases::import_edn(&store, "ann", "{:aliases {a.b x, c.d x}}").unwrap_err();
    assert!(e.to_string().contains("alias `x`"), "{e}");
    assert_eq!(aliases::user_map(&store, "ann").unwrap(), map(&[("clojure.string", "s")]));
    aliases::import_edn(&store, "ann", "{:aliases {clojure.set set}}").unwrap();
    assert_eq!(aliases::user_map(&store, "ann").unwrap(), map(&[("clojure.set", "set")]));
    assert!(aliases::user_map(&store, "bob").unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// The corpus

/// Alias maps over the corpus's namespaces: `prefix` renames every alias (`zz0`, `zz1`, ...),
/// `swap` trades common short aliases (`str` <-> `s`, ...), `last-segment` reads each namespace
/// by its last segment (many collide), `rotate` wants for each namespace the common alias of the
/// next one (collisions everywhere).
fn corpus_maps(store: &Store) -> Vec<(&'static str, AliasMap)> {
    let rows = store.query("?[ns, decl] := *ns_decl{ns, decl}", Params::new()).unwrap();
    // Every aliased namespace with its most common alias.
    let mut counts: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for r in &rows.rows {
        let decl = formdb_engine::query::to_json(&r[1]);
        if let Some(a) = decl["aliases"].as_object() {
            for (alias, ns) in a {
                *counts
                    .entry(ns.as_str().unwrap().to_string())
                    .or_default()
                    .entry(alias.clone())
                    .or_default() += 1;
            }
        }
    }
    let common: BTreeMap<String, String> = counts
        .iter()
        .map(|(ns, c)| (ns.clone(), c.iter().max_by_key(|(_, n)| **n).unwrap().0.clone()))
        .collect();
    let prefix = AliasMap::from_pairs(
        common.keys().enumerate().map(|(i, ns)| (ns.clone(), format!("zz{i}"))),
    );
    let swaps = [
        ("str", "s"),
        ("io", "jio"),
        ("set", "st"),
        ("walk", "w"),
        ("pp", "pprint"),
        ("t", "test"),
    ];
    let swap = AliasMap::from_pairs(common.iter().filter_map(|(ns, a)| {
        swaps
            .iter()
            .find_map(|(x, y)| {
                (a == x).then(|| y.to_string()).or_else(|| (a == y).then(|| x.to_string()))
            })
            .map(|w| (ns.clone(), w))
    }));
    let last = AliasMap::from_pairs(
        common.keys().map(|ns| (ns.clone(), ns.rsplit('.').next().unwrap().to_string())),
    );
    let names: Vec<&String> = common.keys().collect();
    let rotate = AliasMap::from_pairs(
        names
            .iter()
            .enumerate()
            .map(|(i, ns)| (ns.to_string(), common[names[(i + 1) % names.len()]].clone())),
    );
    vec![("prefix", prefix), ("swap", swap), ("last-segment", last), ("rotate", rotate)]
}

#[test]
fn corpus_round_trip_law() {
    let Some(dir) = formdb_testkit::corpus() else { return };
    let t = std::time::Instant::now();
    let store = Store::open_in_memory().unwrap();
    import::import_dir(&store, &dir, "import", &Quiet).unwrap();
    eprintln!("corpus import: {:?}", t.elapsed());
    let rows = store.query("?[ns] := *ns_decl{ns}", Params::new()).unwrap();
    let maps = corpus_maps(&store);
    let paths: Vec<String> = store
        .query("?[path] := *file{path} :order path", Params::new())
        .unwrap()
        .rows
        .iter()
        .map(|r| str_at(r, 0))
        .collect();
    let nss: Vec<String> = rows.rows.iter().map(|r| str_at(r, 0)).collect();
    let versions = || {
        let r = store.query("?[count(id)] := *version{id}", Params::new()).unwrap();
        formdb_engine::store::int_at(&r.rows[0], 0)
    };
    let mut forms = 0;
    for (name, m) in &maps {
        let t = std::time::Instant::now();
        let (mut changed, mut fallbacks, mut incoming) = (0, 0, Vec::new());
        for path in &paths {
            let Ok(stored) = views::stored_text(&store, path) else { continue };
            let v = views::user_view_text(&stored, m);
            // The one-pass view is the view the first implementation verified by rendering back.
            assert_eq!(v, views::user_view_text_checked(&stored, m), "{name}: {path}");
            changed += usize::from(v.text != stored);
            fallbacks += v.fallbacks.len();
            let back = views::parse_back_text(&stored, &v.text, m);
            assert_eq!(back, stored, "{name}: {path}");
            incoming.push(Incoming { path: path.clone(), bytes: back.into_bytes() });
        }
        for ns in &nss {
            let v = views::user_view(&store, ns, m).unwrap();
            assert_eq!(
                views::parse_back(&store, ns, &v.text, m).unwrap(),
                views::as_stored(&store, ns).unwrap(),
                "{name}: {ns}"
            );
        }
        let before = versions();
        let (changes, _errors) = import::file_changes(&store, incoming, &Quiet).unwrap();
        let applied =
            change::apply(&store, &ChangeSet { author: "law".into(), op: "save".into(), changes })
                .unwrap();
        assert_eq!(
            (applied.added, applied.changed, applied.removed),
            (0, 0, 0),
            "{name}: {applied:?}"
        );
        assert_eq!(versions(), before, "{name}");
        eprintln!(
            "{name}: {} aliases in map, {changed}/{} files differ in the view, {fallbacks} fallbacks, {:?}",
            m.0.len(),
            paths.len(),
            t.elapsed()
        );
    }
    for path in &paths {
        if let Ok(stored) = views::stored_text(&store, path) {
            forms += check_oneline(&stored);
        }
    }
    eprintln!("oneline: {forms} forms over {} files", paths.len());
}

/// The scanned alias view (no tree-sitter parse of the whole file) is the view rendered from
/// the parse tree, byte for byte and fallback for fallback, on every corpus file under every
/// corpus map; the scanner declines no stored file that parses; and the views served through the
/// store (the render cache) are those texts.
#[test]
fn corpus_scanned_views_are_the_parsed_views() {
    let Some(dir) = formdb_testkit::corpus() else { return };
    let store = Store::open_in_memory().unwrap();
    import::import_dir(&store, &dir, "import", &Quiet).unwrap();
    let maps = corpus_maps(&store);
    let files: Vec<(String, String)> = store
        .query("?[path, ns] := *file{path, ns, error}, error == ''", Params::new())
        .unwrap()
        .rows
        .iter()
        .map(|r| (str_at(r, 0), str_at(r, 1)))
        .collect();
    assert!(files.len() > 100, "{}", files.len());
    for (name, m) in &maps {
        let (mut changed, mut fallbacks) = (0, 0);
        for (path, _) in &files {
            let stored = views::stored_text(&store, path).unwrap();
            let parsed = views::user_view_text_parsed(&stored, m);
            let scanned = views::user_view_text_scanned(&stored, m)
                .unwrap_or_else(|| panic!("{name}: the scanner declined {path}"));
            assert_eq!(scanned.text, parsed.text, "{name}: {path}");
            assert_eq!(scanned.fallbacks, parsed.fallbacks, "{name}: {path}");
            assert_eq!(views::user_view_text(&stored, m), parsed, "{name}: {path}");
            changed += usize::from(parsed.text != stored);
            fallbacks += parsed.fallbacks.len();
        }
        let nss: Vec<&String> =
            files.iter().map(|(_, ns)| ns).filter(|ns| !ns.is_empty()).collect();
        for ns in nss {
            let stored = views::as_stored(&store, ns).unwrap();
            assert_eq!(
                views::user_view(&store, ns, m).unwrap(),
                views::user_view_text_parsed(&stored, m),
                "{name}: {ns}"
            );
        }
        eprintln!(
            "{name}: {changed}/{} files differ in the view, {fallbacks} fallbacks",
            files.len()
        );
        assert!(changed > 0, "{name}: no view differs");
    }
}
