//! `diagnostics` against real Cozo stores holding small real Clojure trees and `examples/shop`:
//! every kind found at the right place, and nothing reported on clean code.

use formdb_edit::diagnostics::{diagnostics, Diagnostic, Scope};
use formdb_edit::save::{self, Saved, Writer};
use formdb_edit::EditError;
use formdb_engine::store::{params, str_at, Store};
use formdb_projector::aliases::AliasMap;

use formdb_testkit::store_of;

fn id_of(store: &Store, fqn: &str) -> String {
    let r = store.query("?[id] := *form{id, fqn: $f}", params([("f", fqn.into())])).unwrap();
    str_at(&r.rows[0], 0)
}

/// 1-based line and column of the first occurrence of `needle` in `text`.
fn pos_of(text: &str, needle: &str) -> (u32, u32) {
    let at = text.find(needle).unwrap_or_else(|| panic!("`{needle}` not in the text"));
    let before = &text[..at];
    let line = before.matches('\n').count() as u32 + 1;
    let col = before.rsplit('\n').next().unwrap().chars().count() as u32 + 1;
    (line, col)
}

fn of_kind<'a>(ds: &'a [Diagnostic], kind: &str) -> Vec<&'a Diagnostic> {
    ds.iter().filter(|d| d.kind == kind).collect()
}

const LIB: &str = "(ns d.lib)

(defn one [x] x)

(defn many [x & more] (apply + x more))

(defn two
  ([a] a)
  ([a b] (+ a b)))

(defmacro m [& body] `(do ~@body))

(defn start! [] (println \"starting\"))

(defn meta-args {:arglists '([a b])} [& xs] (vec xs))

(defmacro methods [& impls] `(reify ~@impls))
";

const USE: &str = "(ns d.use
  (:require [d.lib :as lib :refer [one]]))

(defn good [x]
  (+ (one x) (lib/many 1) (lib/many 1 2 3) (lib/two 1) (lib/two 1 2)
     (-> x (lib/two 5)) (-> x one) (cond-> x true (lib/two 2)) (lib/m 1 2 3)
     (first (lib/meta-args 1 #_2 ;; a comment
             2))
     (apply lib/one [x])))

(defn bad [x]
  (let [one (fn [a b] a)]
    (one x x))
  (lib/one x x))

(defn bad2 [x]
  (-> x (lib/one 2)))

(defn unres [x]
  (frobnicate x))

(defn impl [x]
  (lib/methods Object (one [x] x)))

(when true
  (defn conditional [] (println \"defined\")))

(println \"loaded\")

(def conn (lib/start!))

(def handler (fn [] (lib/start!)))

(def state (atom {}))

(def later (delay (lib/start!)))

(comment
  (lib/start!))
";

fn tree() -> (Store, tempfile::TempDir) {
    store_of(&[
        ("src/d/lib.clj", LIB),
        ("src/d/use.clj", USE),
        ("src/c/x.clj", "(ns c.x\n  (:require [clojure.string :as str]\n            [c.y :as y]))\n\n(defn f [] (y/g))\n"),
        ("src/c/y.clj", "(ns c.y\n  (:require c.x))\n\n(defn g [] 1)\n"),
    ])
}

#[test]
fn arity_mismatches_are_found_at_the_call_and_locals_and_threading_respected() {
    let (store, _dir) = tree();
    let ds = diagnostics(&store, &Scope::Ns("d.use".into())).unwrap();
    let arity = of_kind(&ds, "arity");
    let (l1, c1) = pos_of(USE, "lib/one x x)");
    let (l2, c2) = pos_of(USE, "lib/one 2)");
    let places: Vec<(u32, u32)> = arity.iter().map(|d| (d.line, d.col)).collect();
    assert_eq!(places, vec![(l1, c1), (l2, c2)], "{arity:#?}");
    assert!(arity.iter().all(|d| d.severity == "error" && d.file == "src/d/use.clj"));
    assert_eq!(arity[0].id, id_of(&store, "d.use/bad"));
    assert_eq!(arity[1].id, id_of(&store, "d.use/bad2"));
    let m = &arity[0].message;
    assert!(m.contains("passes 2 arguments to `d.lib/one`, which takes [x]"), "{m}");
    assert!(m.contains(&format!("src/d/use.clj:{l1}:{c1}")), "{m}");
    let m = &arity[1].message;
    assert!(m.contains("passes 2 arguments"), "the threaded argument counts: {m}");
}

#[test]
fn unresolved_symbols_are_reported_where_they_are() {
    let (store, _dir) = tree();
    let ds = diagnostics(&store, &Scope::Ns("d.use".into())).unwrap();
    let un = of_kind(&ds, "unresolved");
    assert_eq!(un.len(), 1, "{un:#?}");
    let (l, c) = pos_of(USE, "frobnicate");
    assert_eq!((un[0].line, un[0].col), (l, c));
    assert_eq!(un[0].id, id_of(&store, "d.use/unres"));
    assert!(un[0].message.contains("`frobnicate` resolves to nothing"), "{}", un[0].message);
}

#[test]
fn top_level_side_effects_are_reported_and_deferred_ones_are_not() {
    let (store, _dir) = tree();
    let ds = diagnostics(&store, &Scope::Ns("d.use".into())).unwrap();
    let se = of_kind(&ds, "side_effect");
    let lines: Vec<u32> = se.iter().map(|d| d.line).collect();
    let println_line = pos_of(USE, "(println \"loaded\")").0;
    let conn_line = pos_of(USE, "(def conn").0;
    assert_eq!(lines, vec![println_line, conn_line], "{se:#?}");
    assert!(se[0].message.contains("runs every time `d.use` is loaded"), "{}", se[0].message);
    assert_eq!(se[0].severity, "warning");
    assert!(se[1].message.contains("`d.lib/start!`"), "{}", se[1].message);
    assert!(se[1].message.contains("(def conn ...)"), "{}", se[1].message);
}

#[test]
fn namespace_cycles_are_reported_at_the_require() {
    let (store, _dir) = tree();
    let ds = diagnostics(&store, &Scope::Ns("c.x".into())).unwrap();
    let cy = of_kind(&ds, "cycle");
    assert_eq!(cy.len(), 1, "{ds:#?}");
    assert_eq!((cy[0].file.as_str(), cy[0].line, cy[0].col), ("src/c/x.clj", 3, 13));
    assert!(cy[0].message.contains("c.x → c.y → c.x"), "{}", cy[0].message);
    let all = diagnostics(&store, &Scope::All).unwrap();
    let files: Vec<&str> = of_kind(&all, "cycle").iter().map(|d| d.file.as_str()).collect();
    assert_eq!(files, vec!["src/c/x.clj", "src/c/y.clj"]);
    let y = of_kind(&all, "cycle")[1];
    assert_eq!((y.line, y.col), (2, 13), "the bare `c.x` lib symbol");
    // d.lib is in no cycle and has nothing else wrong.
    assert_eq!(diagnostics(&store, &Scope::Ns("d.lib".into())).unwrap(), vec![]);
}

#[test]
fn drafts_and_raw_files_are_reported() {
    let (store, _dir) = tree();
    let writer = Writer::new("ana", AliasMap::default());
    let broken = LIB.replace("(defn one [x] x)", "(defn one [x] x");
    let saved = save::save(&store, &writer, "src/d/lib.clj", broken.as_bytes(), None).unwrap();
    let Saved::Draft { draft } = saved else { panic!("a broken save is a draft: {saved:?}") };
    let ds = diagnostics(&store, &Scope::Ns("d.lib".into())).unwrap();
    let dr = of_kind(&ds, "draft");
    assert_eq!(dr.len(), 1, "{ds:#?}");
    assert_eq!((dr[0].line, dr[0].col), (draft.line, draft.col));
    assert_eq!(dr[0].file, "src/d/lib.clj");
    assert_eq!(dr[0].severity, "error");
    assert!(
        dr[0].message.contains("a save of src/d/lib.clj by ana was kept as a draft"),
        "{}",
        dr[0].message
    );
    // Not in another namespace's scope.
    assert!(of_kind(&diagnostics(&store, &Scope::Ns("c.x".into())).unwrap(), "draft").is_empty());

    // A file imported broken is stored raw.
    let (store, _dir) =
        store_of(&[("src/r/broken.clj", "(ns r.broken)\n\n(defn f [x]\n  (inc x)\n")]);
    let ds = diagnostics(&store, &Scope::All).unwrap();
    assert_eq!(ds.len(), 1, "{ds:#?}");
    assert_eq!(ds[0].kind, "draft");
    assert_eq!(ds[0].file, "src/r/broken.clj");
    assert!(ds[0].line >= 3, "{:?}", ds[0]);
    assert!(ds[0].message.contains("stored as raw text"), "{}", ds[0].message);
}

#[test]
fn an_id_scope_reports_only_that_form() {
    let (store, _dir) = tree();
    let bad = id_of(&store, "d.use/bad");
    let ds = diagnostics(&store, &Scope::Id(bad.clone())).unwrap();
    assert_eq!(ds.len(), 1, "{ds:#?}");
    assert_eq!(ds[0].kind, "arity");
    assert_eq!(ds[0].id, bad);
    let good = id_of(&store, "d.use/good");
    assert_eq!(diagnostics(&store, &Scope::Id(good)).unwrap(), vec![], "clean calls pass");
    match diagnostics(&store, &Scope::Id("zzzzzzzz".into())) {
        Err(EditError::UnknownId { id }) => assert_eq!(id, "zzzzzzzz"),
        other => panic!("{other:?}"),
    }
    match diagnostics(&store, &Scope::Ns("no.such".into())) {
        Err(EditError::NoNamespace { ns }) => assert_eq!(ns, "no.such"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_shop_example_is_clean() {
    let store = formdb_testkit::shop();
    let ds = diagnostics(&store, &Scope::All).unwrap();
    // Only the REPL scratch of its `(comment ...)` block, which uses a `def` made in the block.
    assert_eq!(ds.len(), 1, "{ds:#?}");
    assert_eq!((ds[0].kind.as_str(), ds[0].severity.as_str()), ("unresolved", "info"));
    assert!(ds[0].message.contains("`items` (in a `comment` block)"), "{}", ds[0].message);
    // Break it: a wrong argument count and a bare top-level call.
    let writer = Writer::new("ana", AliasMap::default());
    let path = "src/shop/cart.clj";
    let text = formdb_projector::views::stored_text(&store, path).unwrap();
    let text = text
        .replace("(reduce + (map line-total items))", "(reduce + (map line-total items) 0 1)")
        + "\n(print-receipt! [])\n";
    save::save(&store, &writer, path, text.as_bytes(), None).unwrap();
    let ds = diagnostics(&store, &Scope::Ns("shop.cart".into())).unwrap();
    let ds: Vec<&Diagnostic> = ds.iter().filter(|d| d.severity != "info").collect();
    let kinds: Vec<&str> = ds.iter().map(|d| d.kind.as_str()).collect();
    assert_eq!(kinds, vec!["side_effect"], "reduce is not a store var: {ds:#?}");
    assert_eq!(ds[0].line, pos_of(&text, "(print-receipt! [])").0);
    let text = text.replace("(str/join \"\\n\"", "(str/join \"\\n\" (line-total 1 2)");
    save::save(&store, &writer, path, text.as_bytes(), None).unwrap();
    let ds = diagnostics(&store, &Scope::Ns("shop.cart".into())).unwrap();
    let arity = of_kind(&ds, "arity");
    assert_eq!(arity.len(), 1, "{ds:#?}");
    assert_eq!((arity[0].line, arity[0].col), pos_of(&text, "line-total 1 2)"));
}

/// Several namespaces in one pass (what an edit's before/after uses) report exactly what the
/// namespaces report one by one; a name the store does not have adds nothing.
#[test]
fn a_pass_over_several_namespaces_is_the_union_of_their_own() {
    let (store, _dir) = tree();
    let one_by_one = |nss: &[&str]| {
        let mut all: Vec<Diagnostic> = nss
            .iter()
            .flat_map(|ns| diagnostics(&store, &Scope::Ns(ns.to_string())).unwrap())
            .collect();
        all.sort_by(|a, b| {
            (&a.file, a.line, a.col, &a.kind).cmp(&(&b.file, b.line, b.col, &b.kind))
        });
        all
    };
    let expected = one_by_one(&["d.lib", "d.use"]);
    assert!(expected.iter().any(|d| d.ns == "d.use"), "the fixture has findings: {expected:?}");
    let nss = ["d.use", "d.lib", "no.such.ns"].map(String::from).to_vec();
    let mut got = diagnostics(&store, &Scope::Nss(nss)).unwrap();
    got.sort_by(|a, b| (&a.file, a.line, a.col, &a.kind).cmp(&(&b.file, b.line, b.col, &b.kind)));
    assert_eq!(got, expected);
    assert!(diagnostics(&store, &Scope::Nss(vec![])).unwrap().is_empty());
}

/// Every finding of the store, without ids (a fresh import gives new ids to edited forms).
fn findings(store: &Store) -> Vec<(String, u32, u32, String, String, String)> {
    let mut v: Vec<_> = diagnostics(store, &Scope::All)
        .unwrap()
        .into_iter()
        .map(|d| (d.file, d.line, d.col, d.kind, d.severity, d.message))
        .collect();
    v.sort();
    v
}

#[test]
fn stored_findings_follow_edits_of_the_called_vars_elsewhere() {
    // The checks of a form are stored when it is written; a save of another file that changes
    // what it calls (arity, macro-ness, purity) must check it again. After each save, the
    // store's findings are those a fresh import of the same texts finds.
    let lib = "(ns e.lib)\n\n(defn f [x] x)\n\n(defn g [] 1)\n\n(defn h [] (g))\n";
    let user = "(ns e.user\n  (:require [e.lib :as l]))\n\n(defn call [] (l/f 1 2))\n\n(def boot (l/h))\n\n(defn wrap [] (l/f (l/g) 3))\n";
    let (store, _dir) = store_of(&[("src/e/lib.clj", lib), ("src/e/user.clj", user)]);
    let writer = Writer::new("ana", AliasMap::default());
    let arity_at_call = |store: &Store| {
        let ds = diagnostics(store, &Scope::Ns("e.user".into())).unwrap();
        of_kind(&ds, "arity").len()
    };
    let side_effects = |store: &Store| {
        let ds = diagnostics(store, &Scope::Ns("e.user".into())).unwrap();
        of_kind(&ds, "side_effect").len()
    };
    assert_eq!(arity_at_call(&store), 2, "both calls pass 2 to a one-arg f");
    assert_eq!(side_effects(&store), 0, "`(def boot (l/h))` calls only pure code");
    let steps = [
        // f takes two: the call in e.user is right now.
        lib.replace("(defn f [x] x)", "(defn f [x y] x)"),
        // f takes one again and g prints: h is impure through g, so `boot` runs impure code at
        // load (purity moved two calls away), and both calls of f are wrong again.
        lib.replace("(defn g [] 1)", "(defn g [] (println 1) 1)"),
        // f becomes a macro: its calls are not checked against arglists.
        lib.replace("(defn f [x] x)", "(defmacro f [x] x)")
            .replace("(defn g [] 1)", "(defn g [] (println 1) 1)"),
        // g is gone: h calls nothing known.
        lib.replace("(defn g [] 1)\n\n", "").replace("(defn h [] (g))", "(defn h [] 2)"),
    ];
    let mut seen = Vec::new();
    for (i, text) in steps.iter().enumerate() {
        let saved = save::save(&store, &writer, "src/e/lib.clj", text.as_bytes(), None).unwrap();
        assert!(matches!(saved, Saved::Committed { .. }), "step {i}: {saved:?}");
        let (fresh, _fresh_dir) = store_of(&[("src/e/lib.clj", text), ("src/e/user.clj", user)]);
        assert_eq!(findings(&store), findings(&fresh), "step {i}: stored findings are stale");
        seen.push((arity_at_call(&store), side_effects(&store)));
    }
    assert_eq!(seen, [(0, 0), (2, 1), (0, 1), (2, 0)], "what each step changes in e.user");
}

// ---- diagnostics an agent can trust: `.cljc` libraries, platforms, macro syntax -------------

/// A `.cljc` library whose functions do different things per platform inside their bodies (what
/// they accept is the same everywhere), and one whose arities differ by platform.
const CLJC_LIB: &str = "(ns p.lib)

(defn collate-by
  \"Body differs by platform, arities do not.\"
  ([keyf collatef coll] (collate-by keyf collatef identity coll))
  ([keyf collatef initf coll]
   (reduce (fn [m v] #?(:cljs (assoc m (keyf v) (initf v))
                        :default (assoc m (keyf v) (collatef (get m (keyf v)) v))))
           {} coll)))

(defn one-arg [x] #?(:clj (str x) :cljs (pr-str x)))

(defn per-platform
  #?(:clj ([a] a)
     :cljs ([a b] b)))

(defn per-platform-params #?(:clj [a] :cljs [a b]) a)
";

/// Its tests, written the way real `.cljc` test files are: the test library required under
/// reader conditionals, the library by alias, a `:refer` only on the JVM, calls inside `is`.
const CLJC_TEST: &str = "(ns p.lib-test
  #?@(:cljs [] :default [(:import [clojure.lang ArityException])])
  (:require #?(:cljs [cljs.test :refer-macros [deftest is testing]]
               :default [clojure.test :refer :all])
            #?(:clj [p.lib :refer [one-arg]])
            [p.lib :as m]))

(defn bars-f [f coll] (m/collate-by f coll))

(deftest in-is
  (is (= {} (m/collate-by identity [])))
  (testing \"nested\"
    (is (m/one-arg 1 2))))

(defn referred [] (one-arg))

(defn fine [] [(m/per-platform 1) (m/per-platform 1 2) (m/per-platform-params 1 2)])
";

#[test]
fn arity_errors_in_a_cljc_tree_are_found_where_bodies_differ_by_platform() {
    let (store, _dir) =
        store_of(&[("src/p/lib.cljc", CLJC_LIB), ("test/p/lib_test.cljc", CLJC_TEST)]);
    let ds = diagnostics(&store, &Scope::Ns("p.lib-test".into())).unwrap();
    let arity = of_kind(&ds, "arity");
    let places: Vec<(u32, u32)> = arity.iter().map(|d| (d.line, d.col)).collect();
    let expected = vec![
        pos_of(CLJC_TEST, "m/collate-by f coll"),
        pos_of(CLJC_TEST, "m/collate-by identity"),
        pos_of(CLJC_TEST, "m/one-arg 1 2"),
        pos_of(CLJC_TEST, "one-arg))"),
    ];
    assert_eq!(places, expected, "{arity:#?}");
    let m = &arity[0].message;
    assert!(m.contains("passes 2 arguments to `p.lib/collate-by`, which takes [keyf collatef coll] or [keyf collatef initf coll]"), "{m}");
    // Arities that differ by platform are not judged, and nothing else is reported.
    assert_eq!(ds.len(), 4, "{ds:#?}");
}

const CLJC_PLATFORMS: &str = "(ns p.plat)

(defn part []
  #?(:clj (java.util.ArrayList.)
     :cljr (System.Collections.ArrayList.)
     :cljs (array-list)))

(defn same? [p]
  (#?(:cljs keyword-identical? :default identical?) p ::none))

(defn printer [] #?(:cljs [*print-fn* *target*] :clj *out*))

(defn err []
  (throw (#?(:clj IllegalArgumentException. :cljr ArgumentException. :cljs js/Error.) \"no\")))

(defn bb-only [] #?(:bb (babashka.fs/exists? \".\") :default nil))

(defn spliced [] [1 #?@(:cljs [(array-list) (js-obj)] :cljr [(Frobnicate.) cljr-only])])

(defn wrong-here []
  #?(:clj (array-list) :cljs (slurp \"x\")))

(defn typo-in-cljs [] #?(:cljs (arary-list)))
";

const CLJS_FILE: &str = "(ns p.web)

(defn make [] (array-list))

(defn now [] (js/Date.))

(defn same? [a b] (keyword-identical? a b))

(defn read-it [] (slurp \"x\"))
";

#[test]
fn reader_conditional_branches_resolve_for_their_own_platform() {
    let (store, _dir) =
        store_of(&[("src/p/plat.cljc", CLJC_PLATFORMS), ("src/p/web.cljs", CLJS_FILE)]);
    let ds = diagnostics(&store, &Scope::All).unwrap();
    let un: Vec<(&str, u32, u32)> =
        of_kind(&ds, "unresolved").iter().map(|d| (d.file.as_str(), d.line, d.col)).collect();
    let at = |file: &'static str, text: &str, needle: &str| {
        let (l, c) = pos_of(text, needle);
        (file, l, c)
    };
    assert_eq!(
        un,
        vec![
            // cljs names in a :clj branch, Clojure names in a :cljs branch, and typos, are
            // reported; what :cljr, :bb and :default branches name is not known.
            at("src/p/plat.cljc", CLJC_PLATFORMS, "array-list) :cljs"),
            at("src/p/plat.cljc", CLJC_PLATFORMS, "slurp \"x\")))"),
            at("src/p/plat.cljc", CLJC_PLATFORMS, "arary-list"),
            // A `.cljs` file resolves against cljs.core.
            at("src/p/web.cljs", CLJS_FILE, "slurp"),
        ],
        "{ds:#?}"
    );
    // The branch's own core namespace is what a cljs branch calls.
    let calls = store
        .query("?[to] := *calls{from, to}, *form{id: from, name: 'part'}", Default::default())
        .unwrap();
    let to: Vec<String> = calls.rows.iter().map(|r| str_at(r, 0)).collect();
    assert!(to.contains(&"cljs.core/array-list".to_string()), "{to:?}");
}

const TEST_SYNTAX: &str = "(ns p.syntax-test
  (:require [clojure.test :refer [deftest is are]]))

(deftest throws
  (is (thrown? ArithmeticException (/ 1 0)))
  (is (thrown-with-msg? Exception #\"boom\" (throw (Exception. \"boom\"))) \"message\")
  (are [x] (thrown? Exception (x)) #(throw (Exception.))))

(defmacro where [] [(meta &form) (keys &env)])

(defn outside-is [] (thrown? Exception (inc 1)))
";

#[test]
fn names_a_macro_introduces_are_not_unresolved() {
    let (store, _dir) = store_of(&[("test/p/syntax_test.clj", TEST_SYNTAX)]);
    let ds = diagnostics(&store, &Scope::All).unwrap();
    let un: Vec<(u32, u32)> = of_kind(&ds, "unresolved").iter().map(|d| (d.line, d.col)).collect();
    // `thrown?` outside `is` is a call of nothing.
    assert_eq!(un, vec![pos_of(TEST_SYNTAX, "thrown? Exception (inc")], "{ds:#?}");
}

#[test]
fn build_descriptions_are_data_and_build_scripts_are_code() {
    let project = "(defproject p \"0.1.0\"\n  :dependencies [[org.clojure/clojure \"1.11.1\"]]\n  :plugins [[lein-codox \"0.10.8\"]]\n  :profiles {:dev {:dependencies [[criterium \"0.4.6\"]]}})\n";
    let build = "(ns build\n  (:require [clojure.tools.build.api :as b]))\n\n(defn jar [_] (b/jar {}) (frobnicate))\n";
    let (store, _dir) = store_of(&[
        ("project.clj", project),
        ("profiles.clj", "{:user {:plugins [[lein-ancient \"1.0.0\"]]}}\n"),
        ("build.clj", build),
        ("src/data_readers.clj", "{p/thing p.readers/read-thing}\n"),
    ]);
    let ds = diagnostics(&store, &Scope::All).unwrap();
    let found: Vec<(&str, &str, u32, u32)> =
        ds.iter().map(|d| (d.kind.as_str(), d.file.as_str(), d.line, d.col)).collect();
    let (l, c) = pos_of(build, "frobnicate");
    assert_eq!(found, vec![("unresolved", "build.clj", l, c)], "{ds:#?}");
}

#[test]
fn a_namespace_requiring_its_own_macros_is_no_cycle() {
    let (store, _dir) = store_of(&[
        ("src/m/a.cljs", "(ns m.a\n  (:require-macros [m.a :refer [mac]]))\n\n(defn f [] (mac))\n"),
        (
            "src/m/b.cljc",
            "(ns m.b\n  (:require #?(:cljs [m.b :include-macros true])))\n\n(defmacro bm [] 2)\n",
        ),
        ("src/m/c.cljs", "(ns m.c\n  (:require [m.c :refer-macros [cm]]))\n\n(defn g [] (cm))\n"),
        (
            "src/m/d.cljc",
            "(ns m.d\n  #?(:cljs (:use-macros [m.d :only [dm]])))\n\n(defmacro dm [] 3)\n",
        ),
        // cljs macros come from the Clojure side: requiring them is no edge of the program.
        ("src/m/e.cljc", "(ns m.e\n  (:require [m.f]))\n"),
        ("src/m/f.cljc", "(ns m.f\n  #?(:cljs (:require-macros [m.e :refer [em]])))\n"),
        ("src/m/loop.clj", "(ns m.loop\n  (:require [m.loop]))\n"),
    ]);
    let ds = diagnostics(&store, &Scope::All).unwrap();
    let cycles: Vec<&str> = of_kind(&ds, "cycle").iter().map(|d| d.ns.as_str()).collect();
    // A Clojure namespace requiring itself still is one (Clojure refuses to load it).
    assert_eq!(cycles, vec!["m.loop"], "{ds:#?}");
}

#[test]
fn threaded_as_and_per_platform_parameter_vectors_bind_their_names() {
    let src = "(ns p.bind)

(defn wrap [x] (-> x str (as-> s (str s s))))

(defn wrap2 [x] (->> x (clojure.core/as-> t [t t])))

(def f (fn ([] 0) (#?(:clj ^long [n] :cljs [n]) (inc n))))

(defn choose #?(:clj \"On the JVM.\" :cljs \"In JS.\") [lower upper] (+ lower upper))

(defn still [] (-> 1 (as-> y (+ y zz))))
";
    let (store, _dir) = store_of(&[("src/p/bind.cljc", src)]);
    let ds = diagnostics(&store, &Scope::All).unwrap();
    let un: Vec<(u32, u32)> = of_kind(&ds, "unresolved").iter().map(|d| (d.line, d.col)).collect();
    assert_eq!(un, vec![pos_of(src, "zz")], "{ds:#?}");
}

#[test]
fn arguments_of_macros_defined_inside_wrappers_are_not_calls() {
    let lib = "(ns p.nav)

(defn transform* [path transform-fn structure] structure)

#?(:clj
   (do
     (defmacro nav [& impls] `(reify ~@impls))))

(defmacro defmacroalias [name target] `(def ~name ~target))

(defmacroalias richnav nav)

(defn uses [] [(nav (transform* [this structure next-fn] structure))
               (richnav (transform* [this structure next-fn] structure))
               (transform* 1 2)])
";
    let (store, _dir) = store_of(&[("src/p/nav.cljc", lib)]);
    let ds = diagnostics(&store, &Scope::All).unwrap();
    let arity: Vec<(u32, u32)> = of_kind(&ds, "arity").iter().map(|d| (d.line, d.col)).collect();
    assert_eq!(arity, vec![pos_of(lib, "transform* 1 2")], "{ds:#?}");
}
