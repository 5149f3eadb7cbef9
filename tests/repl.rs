//! The REPL loop against a real nREPL server (Debian's `clojure` and `libnrepl-clojure`),
//! started by the tests, on stores imported by the real `formdb` binary: edit with `eval`,
//! load from the store, exceptions, interrupts, a killed REPL, and the tests a change reaches
//! checked against a brute-force walk over the call graph.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use formdb_engine::reach;
use formdb_engine::store::Store;
use formdb_mcp::repl::{self as tools_repl, EvalArgs, LoadArgs, ReplLogArgs, RunTestsArgs};
use formdb_mcp::tools::{self, ReplaceArgs, Session};
use formdb_repl::server::{self, Endpoint};
use formdb_repl::Repl;

const BIN: &str = env!("CARGO_BIN_EXE_formdb");

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), p).unwrap();
        }
    }
}

/// `tree` copied to a temporary directory and imported by the `formdb` binary.
fn imported(tree: &Path) -> (tempfile::TempDir, PathBuf, Arc<Store>) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    copy_dir(tree, &root);
    let out = Command::new(BIN).arg("import").arg(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = Arc::new(Store::open_existing(&root.join(".formdb")).unwrap());
    (tmp, root, store)
}

fn shop() -> (tempfile::TempDir, PathBuf, Arc<Store>) {
    imported(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop"))
}

fn session(store: &Arc<Store>, repl: Option<Arc<Repl>>) -> Session {
    let opts = formdb_mcp::ServeOptions { user: "agent".into(), read_only: false, repl };
    formdb_mcp::session(store.clone(), &opts).unwrap()
}

/// An nREPL server for `root` started the way `--repl` starts one.
fn started(root: &Path) -> Arc<Repl> {
    let endpoint = server::start(root, None, Duration::from_secs(180)).unwrap();
    Arc::new(Repl::new(endpoint))
}

fn id_of(store: &Store, var: &str) -> String {
    reach::form_by_key(store, var).unwrap().unwrap_or_else(|| panic!("no {var}")).id
}

fn eval(s: &Session, code: &str, ns: Option<&str>) -> formdb_repl::session::Ran {
    let args = EvalArgs { code: code.into(), ns: ns.map(str::to_string), timeout_ms: None };
    tools_repl::eval(s, args).unwrap_or_else(|e| panic!("{code}: {}", e.error))
}

#[test]
fn without_a_repl_each_tool_says_how_to_start_one() {
    let (_tmp, root, store) = shop();
    // A tree with no `.nrepl-port`: the loop finds no server, in one sentence, at once.
    let s = session(&store, Some(Arc::new(Repl::new(Endpoint::PortFile(root.clone())))));
    let started = Instant::now();
    let e = tools_repl::eval(&s, EvalArgs { code: "(+ 1 2)".into(), ns: None, timeout_ms: None })
        .unwrap_err();
    assert!(e.error.contains("formdb up --repl") && e.error.contains(".nrepl-port"), "{}", e.error);
    let no_repl = session(&store, None);
    let e = tools_repl::load(
        &no_repl,
        LoadArgs { ids: vec![], ns: Some("shop.cart".into()), timeout_ms: None },
    )
    .unwrap_err();
    assert!(e.error.contains("no REPL") && e.error.contains("--repl"), "{}", e.error);
    assert!(started.elapsed() < Duration::from_secs(60), "nothing hangs");
}

#[test]
fn edit_with_eval_hot_reloads_and_the_loop_reports_what_ran() {
    let (_tmp, root, store) = shop();
    let repl = started(&root);
    let s = session(&store, Some(repl.clone()));

    // replace_form with eval: the REPL runs the new definition.
    let id = id_of(&store, "shop.money/cents");
    let out = tools::replace_form(
        &s,
        ReplaceArgs {
            id: id.clone(),
            source: "(defn cents \"Whole units and cents to cents.\" [units c] (+ 1000 (* 100 units) c))".into(),
            expected_hash: None,
            repair: false,
            full_diagnostics: false,
            eval: true,
            test: false,
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    let after = out.repl.expect("eval: true answers with the evaluation");
    assert!(after.error.is_none(), "{:?}", after.error);
    assert!(after.eval.as_ref().unwrap().exception.is_none(), "{:?}", after.eval);
    assert_eq!(eval(&s, "(shop.money/cents 1 2)", None).value.as_deref(), Some("1102"));

    // A namespace only the store holds, loaded from the store.
    tools::create_namespace(
        &s,
        tools::CreateNsArgs {
            ns: "shop.only-stored".into(),
            path: None,
            doc: None,
            requires: vec!["shop.money :as money".into()],
            full_diagnostics: false,
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    tools::insert_form(
        &s,
        tools::InsertArgs {
            ns: "shop.only-stored".into(),
            source: "(defn twice [x] (* 2 (money/cents 0 x)))".into(),
            before: None,
            after: None,
            repair: false,
            full_diagnostics: false,
            eval: false,
            test: false,
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    assert!(!root.join("src/shop/only_stored.clj").exists(), "no file on disk");
    let loaded = tools_repl::load(
        &s,
        LoadArgs { ids: vec![], ns: Some("shop.only-stored".into()), timeout_ms: None },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    assert!(loaded.exception.is_none(), "{loaded:?}");
    assert_eq!(eval(&s, "(twice 21)", Some("shop.only-stored")).value.as_deref(), Some("2042"));

    // An exception with its cause chain.
    let ran =
        eval(&s, "(throw (ex-info \"outer\" {} (IllegalStateException. \"the cause\")))", None);
    let ex = ran.exception.expect("an exception");
    assert_eq!(ex.class, "clojure.lang.ExceptionInfo");
    assert_eq!(ex.message, "outer");
    assert_eq!(ex.causes.len(), 1, "{ex:?}");
    assert_eq!(ex.causes[0].class, "java.lang.IllegalStateException");
    assert_eq!(ex.causes[0].message, "the cause");

    // An infinite loop is interrupted at the timeout; the next evaluation works.
    let args = EvalArgs { code: "(loop [] (recur))".into(), ns: None, timeout_ms: Some(500) };
    let ran = tools_repl::eval(&s, args).unwrap_or_else(|e| panic!("{}", e.error));
    assert!(ran.interrupted, "{ran:?}");
    assert_eq!(eval(&s, "(+ 40 2)", None).value.as_deref(), Some("42"));

    // Output over a page is cut, with the log entry to read on.
    let ran = eval(&s, "(print (apply str (repeat 10000 \"x\")))", None);
    assert!(ran.truncated && ran.out.chars().count() < 10000, "{}", ran.out.len());
    let log = tools_repl::repl_log(
        &s,
        ReplLogArgs { seq: Some(ran.log_seq), text_offset: None, offset: None, limit: None },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    let first = &log.entries[0];
    assert_eq!(first.next_text_offset, Some(formdb_repl::session::PAGE));
    let rest = tools_repl::repl_log(
        &s,
        ReplLogArgs {
            seq: Some(ran.log_seq),
            text_offset: first.next_text_offset,
            offset: None,
            limit: None,
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    let page = formdb_repl::session::PAGE;
    assert_eq!(first.out, "x".repeat(page));
    assert_eq!(rest.entries[0].out, "x".repeat(page));
    assert_eq!(rest.entries[0].next_text_offset, Some(2 * page));

    // Every evaluation is a row: the log, newest first, names the edit's form id.
    let log = tools_repl::repl_log(
        &s,
        ReplLogArgs { seq: None, text_offset: None, offset: None, limit: Some(100) },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    assert!(log.entries.windows(2).all(|w| w[0].seq > w[1].seq));
    assert!(log.entries.iter().any(|e| e.ids.contains(&id) && e.user == "agent"));
    assert!(log.entries.iter().any(|e| e.status == "interrupted"));
    assert!(log
        .entries
        .iter()
        .any(|e| e.exception.contains("caused by java.lang.IllegalStateException: the cause")));
}

/// The tests that reach `keys`, by walking the call graph breadth-first in Rust.
fn brute_force(g: &reach::CallGraph, keys: &[String]) -> BTreeSet<String> {
    let mut callers: HashMap<&str, Vec<&str>> = HashMap::new();
    for (from, to) in &g.calls {
        callers.entry(to.as_str()).or_default().push(from.as_str());
    }
    let mut vars_of: HashMap<&str, Vec<&str>> = HashMap::new();
    for (var, id) in &g.defines {
        vars_of.entry(id.as_str()).or_default().push(var.as_str());
    }
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = Vec::new();
    for k in keys {
        for (var, id) in &g.defines {
            if var == k || id == k {
                todo.push(id.clone());
            }
        }
    }
    while let Some(id) = todo.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        for var in vars_of.get(id.as_str()).into_iter().flatten() {
            for from in callers.get(var).into_iter().flatten() {
                todo.push(from.to_string());
            }
        }
    }
    seen.into_iter().filter(|id| g.tests.contains(id)).collect()
}

fn selected(store: &Store, keys: &[String]) -> BTreeSet<String> {
    reach::tests_reaching(store, keys).unwrap().into_iter().map(|t| t.id).collect()
}

#[test]
fn a_namespaces_tests_are_its_test_forms_in_file_order() {
    // One namespace over two files (`in-ns`): the tests of both, file by file, and none of
    // another namespace's or a non-test form.
    let tree = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop"), tree.path());
    std::fs::write(
        tree.path().join("test/shop/cart_more_test.clj"),
        "(in-ns 'shop.cart-test)\n\n(defn helper [] 1)\n\n(deftest more (is (= 1 (helper))))\n",
    )
    .unwrap();
    let (_dir, _, store) = imported(tree.path());
    let names: Vec<String> = reach::ns_tests(&store, "shop.cart-test")
        .unwrap()
        .into_iter()
        .map(|t| format!("{}:{}", t.file, t.fqn))
        .collect();
    assert_eq!(
        names,
        [
            "test/shop/cart_more_test.clj:shop.cart-test/more",
            "test/shop/cart_test.clj:shop.cart-test/totals",
            "test/shop/cart_test.clj:shop.cart-test/cents"
        ]
    );
    assert!(reach::ns_tests(&store, "shop.cart").unwrap().is_empty());
}

/// Every defining form of `store`: the tests it reaches equal the brute-force walk's.
fn check_selection_against_brute_force(store: &Store) -> usize {
    let g = reach::call_graph(store).unwrap();
    let mut nonempty = 0;
    for (id, var) in g.forms.iter().filter(|(_, var)| !var.is_empty()) {
        for key in [id.clone(), var.clone()] {
            let want = brute_force(&g, std::slice::from_ref(&key));
            assert_eq!(selected(store, std::slice::from_ref(&key)), want, "tests reaching {key}");
            nonempty += usize::from(!want.is_empty());
        }
    }
    nonempty
}

#[test]
fn affected_tests_on_the_example_run_and_map_failures_to_forms() {
    let (_tmp, root, store) = shop();
    assert!(check_selection_against_brute_force(&store) > 0);
    let line_total = id_of(&store, "shop.cart/line-total");
    let totals = id_of(&store, "shop.cart-test/totals");
    assert_eq!(
        selected(&store, std::slice::from_ref(&line_total)),
        BTreeSet::from([totals.clone()])
    );
    // Across namespaces: the cents test reaches shop.money/cents; nothing reaches
    // print-receipt!.
    let cents = id_of(&store, "shop.money/cents");
    assert_eq!(
        selected(&store, std::slice::from_ref(&cents)),
        BTreeSet::from([id_of(&store, "shop.cart-test/cents")])
    );
    let receipt = id_of(&store, "shop.cart/print-receipt!");
    assert!(
        selected(&store, std::slice::from_ref(&receipt)).is_empty(),
        "no test reaches print-receipt!"
    );

    let repl = started(&root);
    let s = session(&store, Some(repl.clone()));
    let report = tools_repl::run_tests(
        &s,
        RunTestsArgs {
            ns: vec![],
            ids: vec![],
            affected_by: vec!["shop.money/cents".into()],
            timeout_ms: None,
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    assert_eq!((report.ran, report.fail, report.error), (1, 0, 0), "{report:?}");
    assert_eq!(report.pass, 1);

    // A change that breaks a test: reported failing with the test's id, the form and line.
    let out = tools::replace_form(
        &s,
        ReplaceArgs {
            id: line_total.clone(),
            source: "(defn line-total\n  \"Price times quantity of one cart line.\"\n  [{:keys [price qty] :or {qty 1}}]\n  (* price qty 2))".into(),
            expected_hash: None,
            repair: false,
            full_diagnostics: false,
            eval: false,
            test: true,
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    let after = out.repl.unwrap();
    assert!(after.error.is_none(), "{:?}", after.error);
    let tests = after.tests.unwrap();
    assert_eq!((tests.ran, tests.fail), (1, 1), "{tests:?}");
    let f = &tests.failures[0];
    assert_eq!(f.test_id, totals);
    assert_eq!(f.form_id, totals);
    assert_eq!(f.file, "test/shop/cart_test.clj");
    assert_eq!(f.line, 7, "the `is` line of the stored file");
    assert_eq!(f.expected, "(= 756 (cart/total [{:name \"tea\", :price 350, :qty 2}]))");

    // A change no test reaches runs none.
    let out = tools::replace_form(
        &s,
        ReplaceArgs {
            id: receipt,
            source: "(defn print-receipt! [items]\n  (println (receipt items) \"\"))".into(),
            expected_hash: None,
            repair: false,
            full_diagnostics: false,
            eval: false,
            test: true,
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.error));
    let tests = out.repl.unwrap().tests.unwrap();
    assert!(tests.tests.is_empty() && tests.ran == 0, "{tests:?}");

    // The CLI, through the same server's port.
    let addr = repl.status().addr.unwrap();
    let out = Command::new(BIN)
        .current_dir(&root)
        .args(["eval", "--nrepl", &addr, "--json", "(shop.cart/line-total {:price 3 :qty 2})"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["value"], "12");
    let out = Command::new(BIN)
        .current_dir(&root)
        .args(["test", "--nrepl", &addr, "--json", "--affected-by", "shop.cart/total"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a failing test fails the command");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fail"], 1);
    assert_eq!(v["failures"][0]["form_id"], totals.as_str());
}

#[test]
fn affected_tests_on_a_corpus_library_match_a_brute_force_walk() {
    let Some(corpus) = std::env::var_os("FORMDB_CORPUS").map(PathBuf::from) else {
        eprintln!("skipped: FORMDB_CORPUS is not set (export FORMDB_CORPUS=target/corpus)");
        return;
    };
    let (_tmp, _root, store) = imported(&corpus.join("core.cache"));
    let reached = check_selection_against_brute_force(&store);
    assert!(reached > 10, "core.cache's tests reach its code: {reached}");
}

/// An nREPL server run as a Clojure developer would: in `dir`, writing `dir/.nrepl-port`.
fn own_server(dir: &Path) -> Child {
    let _ = std::fs::remove_file(dir.join(".nrepl-port"));
    let cp = format!("{}:{}", server::NREPL_JAR, dir.join("src").display());
    let child = Command::new("clojure")
        .args(["-cp", &cp, "-m", "nrepl.cmdline", "--bind", "127.0.0.1"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(180);
    while !dir.join(".nrepl-port").exists() {
        assert!(Instant::now() < until, "nREPL did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

#[test]
fn a_killed_repl_is_reported_and_a_new_one_reconnected() {
    let (_tmp, root, store) = shop();
    let repl = Arc::new(Repl::new(Endpoint::PortFile(root.clone())));
    let s = session(&store, Some(repl.clone()));
    let mut first = own_server(&root);
    assert_eq!(eval(&s, "(+ 1 1)", None).value.as_deref(), Some("2"));
    assert!(repl.status().connected);
    first.kill().unwrap();
    first.wait().unwrap();
    let e = tools_repl::eval(&s, EvalArgs { code: "(+ 1 1)".into(), ns: None, timeout_ms: None })
        .unwrap_err();
    assert!(e.error.contains("died") || e.error.contains("cannot reach"), "{}", e.error);
    assert!(!repl.status().connected);
    let mut second = own_server(&root);
    assert_eq!(eval(&s, "(+ 2 2)", None).value.as_deref(), Some("4"));
    second.kill().unwrap();
    second.wait().unwrap();
}
