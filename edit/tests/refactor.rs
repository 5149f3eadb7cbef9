//! `rename_symbol` and `move_form` against real Cozo stores holding small real Clojure trees
//! (and `examples/shop`), with every edited tree exported and loaded by the Debian Clojure
//! runtime.

use std::path::{Path, PathBuf};
use std::process::Command;

use formdb_edit::ops::OpError;
use formdb_edit::refactor::{move_form, rename_symbol};
use formdb_edit::save::Writer;
use formdb_edit::EditError;
use formdb_engine::query;
use formdb_engine::store::{params, str_at, Store};
use formdb_projector::aliases::AliasMap;
use formdb_projector::views;
use formdb_testkit::{clean_store_of as store_of, shop};

fn agent() -> Writer {
    Writer::new("agent", AliasMap::default())
}

fn text(store: &Store, path: &str) -> String {
    views::stored_text(store, path).unwrap()
}

fn id_of(store: &Store, fqn: &str) -> String {
    let r = store.query("?[id] := *form{id, fqn: $f}", params([("f", fqn.into())])).unwrap();
    assert!(!r.rows.is_empty(), "no form {fqn}");
    str_at(&r.rows[0], 0)
}

fn callers(store: &Store, fqn: &str) -> Vec<String> {
    let r = store
        .query(
            "?[ffqn] := *calls{to: $f, from}, *form{id: from, fqn: ffqn}",
            params([("f", fqn.into())]),
        )
        .unwrap();
    let mut v: Vec<String> = r.rows.iter().map(|r| str_at(r, 0)).collect();
    v.sort();
    v
}

fn snapshot(store: &Store) -> Vec<(String, String)> {
    query::paths(store).unwrap().into_iter().map(|p| (p.clone(), text(store, &p))).collect()
}

fn refused(r: Result<formdb_edit::ops::Edited, OpError>) -> String {
    match r {
        Err(OpError::Edit(EditError::Store(e))) => panic!("expected a refusal, got {e}"),
        Err(OpError::Edit(e)) => e.to_string(),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(e) => panic!("expected a refusal, got success: {:?}", e.notes),
    }
}

/// Export every stored file under a fresh directory.
fn export(store: &Store) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in query::paths(store).unwrap() {
        let out = dir.path().join(&p);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(out, text(store, &p)).unwrap();
    }
    dir
}

fn clojure_jar() -> PathBuf {
    let jar = PathBuf::from("/usr/share/java/clojure.jar");
    assert!(jar.exists(), "the Debian clojure package is needed: apt-get install clojure");
    jar
}

/// Load the exported tree with the real Clojure runtime and evaluate `expr`; returns stdout.
fn run_clojure(store: &Store, roots: &[&str], expr: &str) -> String {
    let dir = export(store);
    let mut cp = vec![clojure_jar().display().to_string()];
    for r in roots {
        cp.push(dir.path().join(r).display().to_string());
    }
    // spec.alpha and core.specs.alpha are dependencies of Clojure 1.11 itself.
    for extra in ["/usr/share/java/spec.alpha.jar", "/usr/share/java/core.specs.alpha.jar"] {
        if Path::new(extra).exists() {
            cp.push(extra.to_string());
        }
    }
    let out = Command::new("java")
        .args(["-cp", &cp.join(":"), "clojure.main", "-e", expr])
        .output()
        .expect("java runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "clojure failed on `{expr}`:\n{}\n{stdout}\nfiles:\n{}",
        String::from_utf8_lossy(&out.stderr),
        snapshot(store).iter().map(|(p, t)| format!("--- {p}\n{t}")).collect::<String>()
    );
    stdout
}

// ---------------------------------------------------------------------------------------------
// rename_symbol

const UTIL: &str = "(ns app.util
  \"Helpers.\")

(declare helper)

(defn helper
  \"Doubles x.\"
  [x]
  (* 2 x))

(defn twice [x]
  (helper (helper x)))

(defn shadow [helper]
  ;; the parameter shadows the var
  (inc helper))

(def by-var #'helper)

(comment
  (helper 21))
";

const CORE: &str = "(ns app.core
  (:require [app.util :as u]
            [clojure.string :as str]))

(defn run [xs]
  (mapv u/helper xs))

(defn full [x]
  (app.util/helper x))

(defn shout [s] (str/upper-case s))

(defmacro helped [x]
  `(u/helper ~x))
";

const REFER: &str = "(ns app.refer
  (:require [app.util :refer [helper twice]]))

(defn go [x]
  (let [y (helper x)]
    (twice y)))

(defn local [x]
  (let [helper inc]
    (helper x)))
";

const RENAMED: &str = "(ns app.renamed
  (:require [app.util :refer [helper] :rename {helper h}]))

(defn go [x] (h x))
";

fn app() -> (Store, tempfile::TempDir) {
    store_of(&[
        ("src/app/util.clj", UTIL),
        ("src/app/core.clj", CORE),
        ("src/app/refer.clj", REFER),
        ("src/app/renamed.clj", RENAMED),
    ])
}

/// A refactoring walks the syntax tree of each file it changes, about 70 bytes a byte: a file
/// longer than `WHOLE_FILE_MAX` that calls the var is refused by name, and nothing changes.
#[test]
fn a_refactoring_refuses_a_file_too_long_to_read_whole_and_changes_nothing() {
    // Mostly one comment: a cheap import, and a long text all the same.
    let comment = ";; padding\n".repeat(formdb_edit::refactor::WHOLE_FILE_MAX / 11 + 1);
    let big = format!(
        "(ns app.big\n  (:require [app.util :as u]))\n\n{comment}(defn uses [] (u/helper 1))\n"
    );
    let mut files = vec![("src/app/util.clj", UTIL), ("src/app/core.clj", CORE)];
    files.push(("src/app/big.clj", &big));
    let (store, _dir) = store_of(&files);
    let before = snapshot(&store);
    let why = refused(rename_symbol(&store, &agent(), "app.util/helper", "dbl"));
    assert!(why.starts_with(&format!("src/app/big.clj is {} bytes", big.len())), "{why}");
    assert!(why.contains("nothing was changed"), "{why}");
    assert!(snapshot(&store) == before, "the refused rename changed the store");
    // Without the long file the same rename goes through.
    let (small, _dir) = store_of(&files[..2]);
    rename_symbol(&small, &agent(), "app.util/helper", "dbl").unwrap();
    assert!(text(&small, "src/app/core.clj").contains("u/dbl"));
}

#[test]
fn rename_rewrites_every_use_and_leaves_shadowing_locals_alone() {
    let (store, _dir) = app();
    let before_callers = callers(&store, "app.util/helper");
    assert!(before_callers.len() >= 5, "{before_callers:?}");
    let out = rename_symbol(&store, &agent(), "app.util/helper", "double-it").unwrap();

    let util = text(&store, "src/app/util.clj");
    let expected_util = UTIL
        .replace("(declare helper)", "(declare double-it)")
        .replace("(defn helper\n", "(defn double-it\n")
        .replace("(helper (helper x))", "(double-it (double-it x))")
        .replace("#'helper", "#'double-it")
        .replace("(helper 21)", "(double-it 21)");
    assert_eq!(util, expected_util, "only the var's tokens change; the shadowing parameter stays");
    assert!(
        util.contains("(defn shadow [helper]\n  ;; the parameter shadows the var\n  (inc helper))")
    );

    assert_eq!(
        text(&store, "src/app/core.clj"),
        CORE.replace("u/helper", "u/double-it").replace("app.util/helper", "app.util/double-it")
    );
    assert_eq!(
        text(&store, "src/app/refer.clj"),
        REFER
            .replace("[helper twice]", "[double-it twice]")
            .replace("(let [y (helper x)]", "(let [y (double-it x)]"),
        "the refer vector and its use change; the `let`-bound `helper` does not"
    );
    assert_eq!(
        text(&store, "src/app/renamed.clj"),
        RENAMED.replace(
            ":refer [helper] :rename {helper h}",
            ":refer [double-it] :rename {double-it h}"
        ),
        "the :rename source side changes, the local name `h` stays"
    );

    assert!(callers(&store, "app.util/helper").is_empty(), "no use of the old name is left");
    let after_callers = callers(&store, "app.util/double-it");
    assert_eq!(after_callers.len(), before_callers.len(), "{after_callers:?}");
    assert_eq!(out.files.len(), 4, "{:?}", out.files);
    assert_eq!(out.namespaces, vec!["app.core", "app.refer", "app.renamed", "app.util"]);
    assert_eq!(out.results[0].id, id_of(&store, "app.util/double-it"));
    // History: the definition's new version is by the agent, op rename_symbol.
    let v = store
        .query(
            "?[author, op] := *version{id: $id, author, op}",
            params([("id", out.results[0].id.as_str().into())]),
        )
        .unwrap();
    assert!(v.rows.iter().any(|r| str_at(r, 0) == "agent" && str_at(r, 1) == "rename_symbol"));
    // One transaction: every touched file was written by the same change set.
    assert_eq!(query::generation(&store).unwrap(), 2, "import + one rename");

    let printed = run_clojure(
        &store,
        &["src"],
        "(require 'app.util 'app.core 'app.refer 'app.renamed)
         (prn (app.core/run [1 2]) (app.refer/go 3) (app.refer/local 3) (app.renamed/go 5)
              (app.util/shadow 1) (@app.util/by-var 4) (app.core/helped 5))",
    );
    assert_eq!(printed.trim(), "[2 4] 24 4 10 2 8 10");
}

#[test]
fn rename_by_form_id_through_a_writer_with_its_own_aliases() {
    let (store, _dir) = app();
    // This writer sees `app.util` as `util/`: its view differs from the stored text.
    let writer =
        Writer::new("ana", AliasMap::from_pairs([("app.util".to_string(), "util".to_string())]));
    let id = id_of(&store, "app.util/twice");
    let out = rename_symbol(&store, &writer, &id, "twice-over").unwrap();
    assert_eq!(out.results[0].ns, "app.util");
    let core = text(&store, "src/app/core.clj");
    assert_eq!(core, CORE, "core does not use `twice`");
    let refer = text(&store, "src/app/refer.clj");
    assert!(refer.contains(":refer [helper twice-over]"), "{refer}");
    assert!(refer.contains("(twice-over y)"), "{refer}");
    assert!(callers(&store, "app.util/twice").is_empty());
    run_clojure(&store, &["src"], "(require 'app.refer) (assert (= 24 (app.refer/go 3)))");
}

#[test]
fn rename_through_an_alias_in_the_writers_view_keeps_the_stored_alias() {
    let (store, _dir) = app();
    let writer =
        Writer::new("ana", AliasMap::from_pairs([("app.util".to_string(), "util".to_string())]));
    rename_symbol(&store, &writer, "app.util/helper", "dbl").unwrap();
    let core = text(&store, "src/app/core.clj");
    assert!(core.contains("(mapv u/dbl xs)"), "stored text keeps its alias `u`: {core}");
    assert!(core.contains("[app.util :as u]"), "{core}");
}

#[test]
fn rename_is_refused_when_the_name_exists_or_is_bad_and_nothing_changes() {
    let (store, _dir) = app();
    let before = snapshot(&store);
    let m = refused(rename_symbol(&store, &agent(), "app.util/helper", "twice"));
    assert!(m.contains("`app.util/twice` exists already"), "{m}");
    assert!(m.contains("src/app/util.clj:11"), "names where it is defined: {m}");
    let m = refused(rename_symbol(&store, &agent(), "app.util/helper", "two words"));
    assert!(m.contains("not a valid Clojure symbol name"), "{m}");
    let m = refused(rename_symbol(&store, &agent(), "app.util/helper", "other.ns/x"));
    assert!(m.contains("move_form"), "{m}");
    let m = refused(rename_symbol(&store, &agent(), "app.util/nope", "x"));
    assert!(m.contains("no var `app.util/nope`"), "{m}");
    let m = refused(rename_symbol(&store, &agent(), "zzzzzzzz", "x"));
    assert!(m.contains("neither a var name"), "{m}");
    // `x` is a parameter of `twice`, which calls `helper`: renaming to `x` would capture it.
    let m = refused(rename_symbol(&store, &agent(), "app.util/helper", "x"));
    assert!(m.contains("would change what a symbol means"), "{m}");
    assert!(m.contains("src/app/refer.clj:5:"), "{m}");
    assert!(m.contains("refers to `app.util/helper`"), "{m}");
    // `inc` is clojure.core's, used unqualified in app.util: a var named `inc` would take it.
    let m = refused(rename_symbol(&store, &agent(), "app.util/helper", "inc"));
    assert!(m.contains("clojure.core/inc"), "{m}");
    assert_eq!(snapshot(&store), before, "a refused rename writes nothing");
    assert_eq!(query::generation(&store).unwrap(), 1);
}

#[test]
fn rename_in_the_shop_example_loads_in_clojure() {
    let store = shop();
    rename_symbol(&store, &agent(), "shop.money/format-cents", "cents->str").unwrap();
    let cart = text(&store, "src/shop/cart.clj");
    assert!(cart.contains("[shop.money :as money :refer [cents->str]]"), "{cart}");
    assert!(cart.contains("(str name \" \" (cents->str (line-total item)))"), "{cart}");
    assert!(cart.contains("(money/cents->str (total items))"), "{cart}");
    rename_symbol(&store, &agent(), "shop.cart/total", "grand-total").unwrap();
    let test = text(&store, "test/shop/cart_test.clj");
    assert!(test.contains("(cart/grand-total [{:name"), "{test}");
    let out = run_clojure(
        &store,
        &["src", "test"],
        "(require 'shop.cart 'shop.cart-test)
         (print (shop.cart/receipt [{:name \"tea\" :price 350 :qty 2}]))",
    );
    assert_eq!(out, "tea 7.00\nTOTAL 7.56");
}

// ---------------------------------------------------------------------------------------------
// move_form

const MA: &str = "(ns m.a
  (:require [clojure.string :as str]))

(def greeting \"hi\")

;; Shouting.
(defn shout [s]
  (str/upper-case (str s \"!\")))

(defn greet [who]
  (shout (str greeting \" \" who)))

(defn loud [x] (shout x))

(defn trim-all [xs] (map str/trim xs))
";

const MB: &str = "(ns m.b)

(defn loud [x] x)
";

const MC: &str = "(ns m.c
  (:require [m.a :as a :refer [shout]]))

(defn f [x] (a/shout x))

(defn g [x] (shout x))
";

const MD: &str = "(ns m.d
  (:require [m.a :as a]))

(defn hello [] (a/greet \"you\"))
";

const ME: &str = "(ns m.e
  (:require [m.a :as a]))

(def ws [\" a \" \"b \"])

(defn clean [] (vec (a/trim-all ws)))
";

fn moves() -> (Store, tempfile::TempDir) {
    store_of(&[
        ("src/m/a.clj", MA),
        ("src/m/b.clj", MB),
        ("src/m/c.clj", MC),
        ("src/m/d.clj", MD),
        ("src/m/e.clj", ME),
    ])
}

#[test]
fn move_rewrites_callers_and_adds_requires() {
    let (store, _dir) = moves();
    let id = id_of(&store, "m.a/shout");
    let out = move_form(&store, &agent(), &id, "m.b").unwrap();

    let a = text(&store, "src/m/a.clj");
    assert_eq!(
        a,
        "(ns m.a
  (:require [clojure.string :as str]
            [m.b :as b]))

(def greeting \"hi\")

(defn greet [who]
  (b/shout (str greeting \" \" who)))

(defn loud [x] (b/shout x))

(defn trim-all [xs] (map str/trim xs))
"
    );
    let b = text(&store, "src/m/b.clj");
    assert_eq!(
        b,
        "(ns m.b
  (:require [clojure.string :as str]))

(defn loud [x] x)

;; Shouting.
(defn shout [s]
  (str/upper-case (str s \"!\")))
",
        "appended after one blank line with its comment; its `str/` alias is required there"
    );
    let c = text(&store, "src/m/c.clj");
    assert_eq!(
        c,
        "(ns m.c
  (:require [m.a :as a]
            [m.b :as b :refer [shout]]))

(defn f [x] (b/shout x))

(defn g [x] (shout x))
",
        "qualified uses go through the new alias; the refer moves to the new namespace"
    );
    assert!(callers(&store, "m.a/shout").is_empty());
    assert_eq!(callers(&store, "m.b/shout"), vec!["m.a/greet", "m.a/loud", "m.c/f", "m.c/g"]);
    assert_eq!(out.results[0].ns, "m.b");
    assert_eq!(out.results[0].file, "src/m/b.clj");
    assert_eq!(out.results[0].id, id_of(&store, "m.b/shout"));
    assert_eq!(out.results[0].id, id, "the moved form keeps its id");
    assert!(
        out.notes.iter().any(|n| n.contains("added `[m.b :as b]` to the requires of src/m/a.clj")),
        "{:?}",
        out.notes
    );
    assert!(out.notes.iter().any(|n| n.contains("[clojure.string :as str]")), "{:?}", out.notes);
    assert_eq!(out.files, vec!["src/m/a.clj", "src/m/b.clj", "src/m/c.clj"]);
    assert_eq!(query::generation(&store).unwrap(), 2, "one transaction");
    let v = store
        .query(
            "?[op, author, v] := *version{id: $id, op, author, v} :order -v :limit 1",
            params([("id", out.results[0].id.as_str().into())]),
        )
        .unwrap();
    assert_eq!(str_at(&v.rows[0], 0), "move_form");
    assert_eq!(str_at(&v.rows[0], 1), "agent");

    let printed = run_clojure(
        &store,
        &["src"],
        "(require 'm.a 'm.b 'm.c 'm.d 'm.e)
         (prn (m.c/f \"x\") (m.c/g \"y\") (m.a/greet \"bo\") (m.d/hello))",
    );
    assert_eq!(printed.trim(), "\"X!\" \"Y!\" \"HI BO!\" \"HI YOU!\"");
}

#[test]
fn move_of_a_form_using_its_old_namespace_requires_it_with_an_alias() {
    let (store, _dir) = moves();
    let id = id_of(&store, "m.a/greet");
    let out = move_form(&store, &agent(), &id, "m.b").unwrap();
    let b = text(&store, "src/m/b.clj");
    assert!(b.starts_with("(ns m.b\n  (:require [m.a :as a]))\n"), "{b}");
    assert!(b.ends_with("(defn greet [who]\n  (a/shout (str a/greeting \" \" who)))\n"), "{b}");
    let d = text(&store, "src/m/d.clj");
    assert_eq!(
        d,
        "(ns m.d
  (:require [m.a :as a]
            [m.b :as b]))

(defn hello [] (b/greet \"you\"))
"
    );
    assert!(
        out.notes.iter().any(|n| n.contains("uses `greeting`, `shout` of `m.a`")),
        "{:?}",
        out.notes
    );
    let printed = run_clojure(&store, &["src"], "(require 'm.d) (prn (m.d/hello))");
    assert_eq!(printed.trim(), "\"HI YOU!\"");
}

#[test]
fn move_into_the_namespace_that_uses_it_goes_before_its_first_user() {
    let (store, _dir) = moves();
    let id = id_of(&store, "m.a/trim-all");
    move_form(&store, &agent(), &id, "m.e").unwrap();
    let e = text(&store, "src/m/e.clj");
    assert_eq!(
        e,
        "(ns m.e
  (:require [m.a :as a]
            [clojure.string :as str]))

(def ws [\" a \" \"b \"])

(defn trim-all [xs] (map str/trim xs))

(defn clean [] (vec (trim-all ws)))
"
    );
    assert!(!text(&store, "src/m/a.clj").contains("trim-all"));
    let printed = run_clojure(&store, &["src"], "(require 'm.e) (prn (m.e/clean))");
    assert_eq!(printed.trim(), "[\"a\" \"b\"]");
}

#[test]
fn move_is_refused_for_a_cycle_an_existing_name_or_a_bad_target() {
    let (store, _dir) = moves();
    let shout = id_of(&store, "m.a/shout");
    let loud = id_of(&store, "m.a/loud");
    let before = snapshot(&store);
    let m = refused(move_form(&store, &agent(), &shout, "m.a"));
    assert!(m.contains("is in `m.a` already"), "{m}");
    match move_form(&store, &agent(), &shout, "m.nowhere") {
        Err(OpError::Edit(EditError::NoNamespace { ns })) => assert_eq!(ns, "m.nowhere"),
        other => panic!("expected no namespace, got {other:?}"),
    }
    let m = refused(move_form(&store, &agent(), &loud, "m.b"));
    assert!(m.contains("`m.b/loud` exists already (src/m/b.clj:3"), "{m}");
    let m = refused(move_form(&store, &agent(), "zzzzzzzz", "m.b"));
    assert!(m.contains("no form with id"), "{m}");
    // m.e requires m.a; `greeting` is used by m.a/greet, so m.a would require m.e: a cycle.
    let greeting = id_of(&store, "m.a/greeting");
    let m = refused(move_form(&store, &agent(), &greeting, "m.e"));
    assert!(m.contains("namespace cycle m.a → m.e → m.a"), "{m}");
    assert_eq!(snapshot(&store), before, "refused moves write nothing");
    assert_eq!(query::generation(&store).unwrap(), 1);

    // After `shout` moved to m.b, m.a requires m.b: moving `greet` (which uses m.a's
    // `greeting`) there would need m.b to require m.a.
    move_form(&store, &agent(), &shout, "m.b").unwrap();
    let greet = id_of(&store, "m.a/greet");
    let m = refused(move_form(&store, &agent(), &greet, "m.b"));
    assert!(m.contains("needs `m.b` to require `m.a`"), "{m}");
    assert!(m.contains("m.b → m.a → m.b"), "{m}");
}

#[test]
fn move_in_the_shop_example_loads_in_clojure() {
    let store = shop();
    // cart_test requires shop.cart; move `format-cents` from shop.money into shop.cart, whose
    // ns refers it.
    let id = id_of(&store, "shop.money/format-cents");
    move_form(&store, &agent(), &id, "shop.cart").unwrap();
    let cart = text(&store, "src/shop/cart.clj");
    assert!(cart.contains("[shop.money :as money]))"), "the refer is gone: {cart}");
    assert!(cart.contains("(defn format-cents"), "{cart}");
    assert!(cart.contains("[(str \"TOTAL \" (format-cents (total items)))]"), "{cart}");
    assert!(
        cart.find("(defn format-cents").unwrap() < cart.find("(defn receipt").unwrap(),
        "placed before its first user"
    );
    assert!(!text(&store, "src/shop/money.clj").contains("format-cents"));
    let out = run_clojure(
        &store,
        &["src", "test"],
        "(require 'shop.cart 'shop.cart-test)
         (print (shop.cart/receipt [{:name \"tea\" :price 350 :qty 2}]))",
    );
    assert_eq!(out, "tea 7.00\nTOTAL 7.56");
}

#[test]
fn rename_is_refused_when_a_referring_namespace_has_the_new_name() {
    // app.clash refers `helper` from app.util and `dbl` from app.other: renaming
    // app.util/helper to `dbl` would refer two vars as `dbl` there.
    let (store, _dir) = store_of(&[
        ("src/app/util.clj", UTIL),
        ("src/app/other.clj", "(ns app.other)\n\n(defn dbl [x] x)\n"),
        (
            "src/app/clash.clj",
            "(ns app.clash\n  (:require [app.util :refer [helper]]\n            [app.other :refer [dbl]]))\n",
        ),
        ("src/app/own.clj", "(ns app.own\n  (:require [app.util :refer [twice]]))\n\n(defn quad [x] x)\n"),
    ]);
    let before = snapshot(&store);
    let m = refused(rename_symbol(&store, &agent(), "app.util/helper", "dbl"));
    assert!(m.contains("src/app/clash.clj refers `dbl` from `app.other` already"), "{m}");
    let m = refused(rename_symbol(&store, &agent(), "app.util/twice", "quad"));
    assert!(m.contains("`app.own` (src/app/own.clj) defines `quad`"), "{m}");
    assert_eq!(snapshot(&store), before);
    // Another name goes through, and the tree loads.
    rename_symbol(&store, &agent(), "app.util/twice", "quadruple").unwrap();
    run_clojure(&store, &["src"], "(require 'app.own 'app.clash)");
}
