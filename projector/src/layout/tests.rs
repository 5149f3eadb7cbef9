use super::*;
use formdb_engine::syntax::{KindOf, NodeKind};
use std::path::{Path, PathBuf};

thread_local! {
    /// Layouts the final re-indentation had to correct.
    pub(super) static REINDENTED: RefCell<Vec<(bool, String)>> = const { RefCell::new(Vec::new()) };
    /// Whether to check every layout against `reindent` (off when timing).
    pub(super) static VERIFY: Cell<bool> = const { Cell::new(true) };
}

fn lay(src: &str, width: usize) -> String {
    layout_form(src, &LayoutOptions { width }).unwrap()
}

/// Lay out at the default width and check what every layout must satisfy.
fn fmt(src: &str) -> String {
    let out = lay(src, DEFAULT_WIDTH);
    assert_eq!(tokens(&out), tokens(src), "tokens changed:\n{out}");
    assert_eq!(misindented_lines(&out), Vec::<usize>::new(), "misindented:\n{out}");
    out
}

fn check(src: &str, expected: &str) {
    check_at(DEFAULT_WIDTH, src, expected);
}

fn check_at(width: usize, src: &str, expected: &str) {
    let out = lay(src, width);
    assert_eq!(tokens(&out), tokens(src), "tokens changed:\n{out}");
    assert_eq!(out, expected, "\n--- got ---\n{out}\n--- want ---\n{expected}\n");
    // A cljfmt-formatted form is indented the way cljfmt wants, and stays put.
    assert_eq!(misindented_lines(expected), Vec::<usize>::new(), "{expected}");
    assert_eq!(reindent(expected), expected);
    assert_eq!(lay(expected, width), expected, "not idempotent");
}

const ATOMIC: &[&str] = &[
    "str_lit",
    "regex_lit",
    "char_lit",
    "num_lit",
    "kwd_lit",
    "nil_lit",
    "bool_lit",
    "sym_name",
    "sym_ns",
    "auto_res_mark",
];

fn collect_tokens(n: Node, out: &mut Vec<(usize, usize)>) {
    if n.node_kind() == NodeKind::Comment {
        return;
    }
    let bare_sym = n.node_kind() == NodeKind::Sym && metas_of(n).is_empty();
    if ATOMIC.contains(&n.kind()) || n.child_count() == 0 || bare_sym {
        out.push((n.start_byte(), n.end_byte()));
        return;
    }
    let mut c = n.walk();
    for k in n.children(&mut c) {
        collect_tokens(k, out);
    }
}

/// Every token but comments, in order.
pub(super) fn tokens(src: &str) -> Vec<String> {
    let tree = syntax::parse(src);
    assert!(syntax::first_error(&tree, src).is_none(), "does not parse:\n{src}");
    let mut spans = Vec::new();
    collect_tokens(tree.root_node(), &mut spans);
    spans.into_iter().map(|(s, e)| src[s..e].to_string()).collect()
}

fn is_opener(t: &str) -> bool {
    matches!(
        t,
        "(" | "["
            | "{"
            | "#"
            | "#?"
            | "#?@"
            | "'"
            | "`"
            | "~"
            | "~@"
            | "@"
            | "#'"
            | "#_"
            | "^"
            | "#^"
            | "##"
            | "#="
    )
}

/// The form on one line: tokens joined by single spaces, comments dropped.
pub(super) fn collapse(n: Node, src: &str) -> String {
    fn walk(n: Node, src: &str, out: &mut String, glue: &mut bool) {
        let emit = |t: &str, out: &mut String, glue: &mut bool| {
            let closer = matches!(t, ")" | "]" | "}");
            let hazard = out.ends_with('~') && t.starts_with('@');
            if !out.is_empty() && (!*glue || hazard) && !closer {
                out.push(' ');
            }
            out.push_str(t);
            *glue = is_opener(t);
        };
        match n.node_kind() {
            NodeKind::Comment => {}
            NodeKind::Sym => {
                let mut start = None;
                for (field, k) in kids_with_fields(n) {
                    if matches!(field, Some("meta" | "old_meta")) || k.node_kind() == NodeKind::Dis
                    {
                        walk(k, src, out, glue);
                    } else if k.node_kind() != NodeKind::Comment && start.is_none() {
                        start = Some(k.start_byte());
                    }
                }
                emit(&src[start.unwrap_or(n.start_byte())..n.end_byte()], out, glue);
            }
            _ if ATOMIC.contains(&n.kind()) || n.child_count() == 0 => {
                emit(syntax::text(n, src), out, glue)
            }
            _ => {
                for (field, k) in kids_with_fields(n) {
                    walk(k, src, out, glue);
                    if n.node_kind() == NodeKind::NsMap && field == Some("prefix") {
                        *glue = true;
                    }
                }
            }
        }
    }
    let mut out = String::new();
    let mut glue = true;
    walk(n, src, &mut out, &mut glue);
    out
}

/// Lines longer than `width` that hold more than one token.
pub(super) fn overlong_lines(text: &str, width: usize) -> Vec<usize> {
    let tree = syntax::parse(text);
    let mut spans = Vec::new();
    collect_tokens(tree.root_node(), &mut spans);
    let spans: Vec<(usize, usize)> = spans
        .into_iter()
        .filter(|(s, e)| !matches!(&text[*s..*e], "(" | ")" | "[" | "]" | "{" | "}" | "#"))
        .filter(|(s, e)| !is_opener(&text[*s..*e]))
        .collect();
    let mut bad = Vec::new();
    let mut start = 0;
    for (i, line) in text.split('\n').enumerate() {
        let end = start + line.len();
        if width_of(line) > width {
            let n = spans.iter().filter(|(s, e)| *s < end && *e > start).count();
            if n > 1 {
                bad.push(i + 1);
            }
        }
        start = end + 1;
    }
    bad
}

// --- cljfmt's documented indentation ---

#[test]
fn defn_with_docstring_and_body() {
    check(
        "(defn greet \"Say hello to someone, politely and at some length.\" [name] \
         (println \"Hello\" name) (println \"Goodbye\" name))",
        "(defn greet\n  \"Say hello to someone, politely and at some length.\"\n  [name]\n  \
         (println \"Hello\" name)\n  (println \"Goodbye\" name))",
    );
    check(
        "(defn greet [name] (println \"Hello there, how are you doing today\" name) (str name))",
        "(defn greet [name]\n  (println \"Hello there, how are you doing today\" name)\n  \
         (str name))",
    );
    check("(defn f [x] (inc x))", "(defn f [x] (inc x))");
    check(
        "(defn- multi ([x] (multi x 1)) ([x y] (+ x y (some-long-function-name x y) \
         (another-one x))))",
        "(defn- multi\n  ([x] (multi x 1))\n  ([x y] (+ x y (some-long-function-name x y) \
         (another-one x))))",
    );
}

#[test]
fn let_bindings_are_pairs() {
    check(
        "(let [x 1 y (compute-something-long x) z (another-function-with-a-long-name x y)] \
         (+ x y z))",
        "(let [x 1\n      y (compute-something-long x)\n      \
         z (another-function-with-a-long-name x y)]\n  (+ x y z))",
    );
    check(
        "(loop [i 0 acc []] (if (< i 10) (recur (inc i) (conj acc (* i i i i))) \
         (persistent-result-of acc)))",
        "(loop [i 0 acc []]\n  (if (< i 10)\n    (recur (inc i) (conj acc (* i i i i)))\n    \
         (persistent-result-of acc)))",
    );
}

#[test]
fn if_when_cond() {
    check(
        "(if (some-predicate? value with args) (do-the-true-thing value) \
         (do-the-false-thing value))",
        "(if (some-predicate? value with args)\n  (do-the-true-thing value)\n  \
         (do-the-false-thing value))",
    );
    check(
        "(when (seq coll) (println \"The collection is not empty\") (process-all-of coll and-more))",
        "(when (seq coll)\n  (println \"The collection is not empty\")\n  \
         (process-all-of coll and-more))",
    );
    check(
        "(cond (pos? x) (do-something-with x and-more args) (neg? x) \
         (do-something-else x with args) :else nil)",
        "(cond\n  (pos? x) (do-something-with x and-more args)\n  \
         (neg? x) (do-something-else x with args)\n  :else nil)",
    );
    // A block form whose body argument stays on the head line aligns like a call.
    check(
        "(do (println \"Hello\")\n    (println \"World\"))",
        "(do (println \"Hello\") (println \"World\"))",
    );
}

#[test]
fn threading_and_call_alignment() {
    check(
        "(-> request (assoc :session session) (update :headers merge default-headers) \
         (dissoc :body))",
        "(-> request\n    (assoc :session session)\n    \
         (update :headers merge default-headers)\n    (dissoc :body))",
    );
    check(
        "(println \"hello\" \"world\" \"this is a call whose arguments cannot all fit in one line\" 42)",
        "(println \"hello\"\n         \"world\"\n         \
         \"this is a call whose arguments cannot all fit in one line\"\n         42)",
    );
    // A head too long to align after: everything one column in.
    let out = fmt("(some.very.long.namespace/a-function-with-a-long-name \
         \"an argument that is long enough\" :another-argument)");
    assert_eq!(
        out,
        "(some.very.long.namespace/a-function-with-a-long-name\n \
         \"an argument that is long enough\"\n :another-argument)"
    );
}

#[test]
fn nested_maps_and_vectors() {
    check(
        "{:a 1 :b {:c [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20] \
         :d \"a string value\"} :e #{:x :y}}",
        "{:a 1\n :b {:c [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20]\n     \
         :d \"a string value\"}\n :e #{:x :y}}",
    );
    let out = lay("[:a :b :c :d :e :f :g :h :i :j :k :l :m :n :o :p :q :r :s :t]", 20);
    assert_eq!(out, "[:a :b :c :d :e :f\n :g :h :i :j :k :l\n :m :n :o :p :q :r\n :s :t]");
    check(
        "{:key-one (some-function with several arguments) :key-two \
         (another-function-call with args)}",
        "{:key-one (some-function with several arguments)\n \
         :key-two (another-function-call with args)}",
    );
    check("{:a 1, :b 2}", "{:a 1, :b 2}");
}

#[test]
fn ns_with_requires() {
    check(
        "(ns example.core (:require [clojure.string :as str] [clojure.set :as set] \
         [clojure.java.io :as io]) (:import (java.util Date UUID)))",
        "(ns example.core\n  (:require [clojure.string :as str]\n            \
         [clojure.set :as set]\n            [clojure.java.io :as io])\n  \
         (:import (java.util Date UUID)))",
    );
}

#[test]
fn protocols_records_reify() {
    check(
        "(defprotocol Greeter \"A protocol for things that greet.\" (greet [this] \
         \"Greets.\") (farewell [this name] [this name extra]))",
        "(defprotocol Greeter\n  \"A protocol for things that greet.\"\n  \
         (greet [this] \"Greets.\")\n  (farewell [this name] [this name extra]))",
    );
    check(
        "(defrecord Person [first-name last-name] Greeter (greet [this] (str \"Hello, \" \
         first-name \" \" last-name \"! Welcome to the show.\")))",
        "(defrecord Person [first-name last-name]\n  Greeter\n  (greet [this]\n    \
         (str \"Hello, \" first-name \" \" last-name \"! Welcome to the show.\")))",
    );
    check(
        "(reify clojure.lang.IDeref (deref [_] (str \"Hello\" \"World\" \
         \"and some more text to make it long enough, really\")))",
        "(reify clojure.lang.IDeref\n  (deref [_]\n    \
         (str \"Hello\" \"World\" \"and some more text to make it long enough, really\")))",
    );
    check(
        "(deftype Box [value] clojure.lang.IDeref (deref [_] value) Object (toString [_] \
         (str \"Box of \" value)))",
        "(deftype Box [value]\n  clojure.lang.IDeref\n  (deref [_] value)\n  Object\n  \
         (toString [_] (str \"Box of \" value)))",
    );
    check(
        "(extend-protocol Greeter String (greet [s] (str \"Hello, \" s)) nil \
         (greet [_] \"Hello, nobody in particular\"))",
        "(extend-protocol Greeter\n  String\n  (greet [s] (str \"Hello, \" s))\n  nil\n  \
         (greet [_] \"Hello, nobody in particular\"))",
    );
}

#[test]
fn try_catch_finally() {
    check(
        "(try (do-something-dangerous x y z) (catch Exception e (log/error e \"failed\") \
         nil) (finally (cleanup)))",
        "(try\n  (do-something-dangerous x y z)\n  \
         (catch Exception e (log/error e \"failed\") nil)\n  (finally (cleanup)))",
    );
    let out =
        lay("(try (f) (catch clojure.lang.ExceptionInfo e (log/error e \"failed\") nil))", 40);
    assert_eq!(
        out,
        "(try\n  (f)\n  (catch clojure.lang.ExceptionInfo e\n    (log/error e \"failed\")\n    \
         nil))"
    );
}

#[test]
fn case_condp_cond_threading() {
    check(
        "(case x :a (do-a-thing with-args) :b (do-b-thing with other args) \
         (default-thing x y z and more))",
        "(case x\n  :a (do-a-thing with-args)\n  :b (do-b-thing with other args)\n  \
         (default-thing x y z and more))",
    );
    check(
        "(condp = value 1 \"one\" 2 \"two\" 3 \"three\" \"something else entirely, sorry about that\")",
        "(condp = value\n  1 \"one\"\n  2 \"two\"\n  3 \"three\"\n  \
         \"something else entirely, sorry about that\")",
    );
    check(
        "(cond-> request (:session opts) (assoc :session (:session opts)) (:id opts) \
         (assoc :id (:id opts)))",
        "(cond-> request\n  (:session opts) (assoc :session (:session opts))\n  \
         (:id opts) (assoc :id (:id opts)))",
    );
}

#[test]
fn letfn_and_anonymous_fns() {
    check(
        "(letfn [(square [x] (* x x)) (sum-of-squares [x y] (+ (square x) (square y) 1 2 3))] \
         (sum-of-squares 3 4))",
        "(letfn [(square [x] (* x x))\n        \
         (sum-of-squares [x y] (+ (square x) (square y) 1 2 3))]\n  (sum-of-squares 3 4))",
    );
    let out = lay("(letfn [(twice [x] (* 2 (long-function-name x x x)))] (twice 3))", 32);
    assert_eq!(
        out,
        "(letfn [(twice [x]\n          (* 2\n             (long-function-name\n              \
         x\n              x\n              x)))]\n  (twice 3))"
    );
    check(
        "(map (fn [x] (* x x (some-long-function-name x) (another-long-function x))) coll)",
        "(map (fn [x] (* x x (some-long-function-name x) (another-long-function x)))\n     \
         coll)",
    );
    check(
        "(map #(assoc % :full-name (str (:first-name %) \" \" (:last-name %))) the-people-list)",
        "(map #(assoc % :full-name (str (:first-name %) \" \" (:last-name %)))\n     \
         the-people-list)",
    );
    let out = lay("(map #(do (println %) (inc %)) xs)", 20);
    assert_eq!(out, "(map #(do\n        (println %)\n        (inc %))\n     xs)");
}

#[test]
fn reader_conditionals_and_metadata() {
    check(
        "#?(:clj (java.util.Date.) :cljs (js/Date.) :default (throw (ex-info \"no date\" {})))",
        "#?(:clj (java.util.Date.)\n   :cljs (js/Date.)\n   \
         :default (throw (ex-info \"no date\" {})))",
    );
    check(
        "(def ^:private ^String greeting \"A greeting that is rather long, so that it breaks.\")",
        "(def ^:private ^String greeting\n  \"A greeting that is rather long, so that it breaks.\")",
    );
    check(
        "(defn ^{:added \"1.0\" :static true} some-function [x] (do-something-with x \
         and-more-arguments))",
        "(defn ^{:added \"1.0\" :static true} some-function [x]\n  \
         (do-something-with x and-more-arguments))",
    );
    check("(#?(:clj let :cljs when) [x 1] x)", "(#?(:clj let :cljs when) [x 1] x)");
    check("[#?@(:clj [1 2] :cljs [3])]", "[#?@(:clj [1 2] :cljs [3])]");
}

#[test]
fn comments_inside_forms() {
    check(
        "(defn f [x]\n  ;; own line\n  (inc x) ; trailing\n  (dec x))",
        "(defn f [x]\n  ;; own line\n  (inc x) ; trailing\n  (dec x))",
    );
    check("(foo ; why\n a b)", "(foo ; why\n a\n b)");
    check("{:a 1 ; one\n :b 2}", "{:a 1 ; one\n :b 2}");
    check("[1 2 ; two\n]", "[1\n 2 ; two\n ]");
    check("(let [x 1 ; why\n y 2] x)", "(let [x 1 ; why\n      y 2]\n  x)");
    check("(f #_ignored x #_(also ignored) y)", "(f #_ignored x #_(also ignored) y)");
    check("(foo a\n     #_b\n     c)", "(foo a #_b c)");
}

#[test]
fn strings_with_newlines() {
    check(
        "(defn f \"Line one.\n  Line two.\" [x] x)",
        "(defn f\n  \"Line one.\n  Line two.\"\n  [x]\n  x)",
    );
    check("(str \"a\nb\" x)", "(str \"a\nb\"\n     x)");
    check("{:doc \"multi\nline\" :x 1}", "{:doc \"multi\nline\"\n :x 1}");
}

#[test]
fn reader_prefixes_survive() {
    for src in [
        "`(let [x# ~x] ~@body)",
        "(~ @x)",
        "#'foo/bar",
        "@(deref a)",
        "#inst \"2020-01-01\"",
        "#:person{:name \"x\" :age 1}",
        "#::{:a 1}",
        "#{1 2 3}",
        "#\"a\\d+\"",
        "[\\a \\newline \\u00e9 ##Inf ##-Inf 1/2 0x1F 1.5M]",
        "^:dynamic *x*",
        "#^String y",
        "(fn* [] (. System (currentTimeMillis)))",
    ] {
        let out = fmt(src);
        assert_eq!(out, src);
    }
}

#[test]
fn keyword_arguments_go_in_pairs() {
    check(
        "(assoc response :status 200 :headers {\"Content-Type\" \"text/html\"} \
         :body (render-page user params))",
        "(assoc response\n       :status 200\n       \
         :headers {\"Content-Type\" \"text/html\"}\n       :body (render-page user params))",
    );
    check(
        "(ns app.core (:require [clojure.tools.analyzer.passes.jvm.annotate-loops :refer \
         [annotate-loops]]))",
        "(ns app.core\n  (:require [clojure.tools.analyzer.passes.jvm.annotate-loops\n             \
         :refer [annotate-loops]]))",
    );
}

#[test]
fn arities_keep_bodies_under_their_arglists() {
    check_at(
        50,
        "(defn greet ([name] (greet name \"Hello there, my friend\")) ([name greeting] \
         (println greeting name) (flush)))",
        "(defn greet\n  ([name] (greet name \"Hello there, my friend\"))\n  \
         ([name greeting]\n   (println greeting name)\n   (flush)))",
    );
}

#[test]
fn tests_methods_and_proxies() {
    check(
        "(deftest addition (testing \"that small numbers add up the way we expect\" \
         (is (= 4 (+ 2 2))) (is (= 7 (+ 3 4)))))",
        "(deftest addition\n  (testing \"that small numbers add up the way we expect\"\n    \
         (is (= 4 (+ 2 2)))\n    (is (= 7 (+ 3 4)))))",
    );
    check(
        "(are [x y] (= x (inc y)) 2 1 3 2 4 3 5 4 6 5 7 6 8 7 9 8 10 9 11 10 12 11 13 12 14 13)",
        "(are [x y] (= x (inc y))\n  2 1\n  3 2\n  4 3\n  5 4\n  6 5\n  7 6\n  8 7\n  \
         9 8\n  10 9\n  11 10\n  12 11\n  13 12\n  14 13)",
    );
    check(
        "(defmethod area :rectangle [{:keys [width height]}] (* width height \
         (scale-factor-for :rectangle)))",
        "(defmethod area :rectangle [{:keys [width height]}]\n  \
         (* width height (scale-factor-for :rectangle)))",
    );
    check_at(
        50,
        "(proxy [java.io.InputStream] [] (read ([] (read-one-byte-from-somewhere-else)) \
         ([buf] (read-into buf))))",
        "(proxy [java.io.InputStream] []\n  (read\n    \
         ([] (read-one-byte-from-somewhere-else))\n    ([buf] (read-into buf))))",
    );
}

#[test]
fn discards_in_awkward_places_still_indent_like_cljfmt() {
    for src in [
        "(foo #_x a b (some-long-function-name with arguments) (another-long-function x y))",
        "(if #_x test (some-long-function-name with arguments) (another-long-function x y z))",
        "(let [a 1 #_#_b 2] (some-long-function-name with arguments) (another-long-function))",
        "(cond #_#_ignored clause (some-long-test? x) (some-long-function-name with arguments))",
        "(foo #_(a very long discarded form that does not fit in a third of the width) bar)",
    ] {
        fmt(src);
    }
}

#[test]
fn forms_are_separated_by_blank_lines() {
    let out = layout_forms(
        "(ns a)\n(def x 1) ; one\n;; about y\n(def y\n  2)\n\n\n;; the end\n",
        &LayoutOptions::default(),
    )
    .unwrap();
    assert_eq!(out, "(ns a)\n\n(def x 1) ; one\n\n;; about y\n(def y 2)\n\n;; the end\n");
    assert!(matches!(
        layout_form("(a) (b)", &LayoutOptions::default()),
        Err(LayoutError::NotOneForm { found: 2 })
    ));
    assert_eq!(
        layout_form("#_(old) (new)", &LayoutOptions::default()).unwrap(),
        "#_(old)\n\n(new)"
    );
    match layout_form("(defn f [x]\n  (inc x)", &LayoutOptions::default()) {
        Err(LayoutError::Syntax { line, .. }) => assert!(line >= 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn misindented_lines_finds_bad_lines() {
    let text = "(defn f [x]\n(inc x))\n(let [a 1\n  b 2]\n  a)\n(foo a\n   b)\n";
    assert_eq!(misindented_lines(text), vec![2, 4, 7]);
    assert_eq!(
        reindent(text),
        "(defn f [x]\n  (inc x))\n(let [a 1\n      b 2]\n  a)\n(foo a\n     b)\n"
    );
    // cljfmt's own examples.
    for ok in [
        "(println\n \"hello\"\n \"world\")",
        "(println \"hello\"\n         \"world\")",
        "(defn dismiss\n  [name]\n  (println \"Goodbye\" name))",
        "(reify\n  clojure.lang.IDeref\n  (deref [_]\n    (str \"Hello\"\n         \"World\")))",
        "(letfn [(square [x]\n          (* x x))\n        (sum [x y]\n          (+ x y))]\n  \
         (let [x 3\n        y 4]\n    (sum (square x)\n         (square y))))",
        "(do\n  (println \"Hello\")\n  (println \"World\"))",
        "(do (println \"Hello\")\n    (println \"World\"))",
        "(s/defn foo\n  [x]\n  x)",
        "(defschema Foo\n  {:a s/Str})",
        "(with-foo x\n  (body))",
        "#?(:clj\n   (foo)\n   :cljs\n   (bar))",
        "(def x\n  \"doc\nstring\"\n  1)",
        "(foo\n  ;; a comment anywhere\n bar)",
        "(defn ^:private\n  f [] 1)",
    ] {
        assert_eq!(misindented_lines(ok), Vec::<usize>::new(), "{ok}");
    }
}

// --- real code ---

fn corpus_dir() -> Option<PathBuf> {
    formdb_testkit::corpus()
}

pub(super) fn clojure_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            clojure_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "clj" || e == "cljc" || e == "cljs") {
            out.push(p);
        }
    }
}

#[test]
fn corpus_forms_collapsed_and_laid_out() {
    let Some(dir) = corpus_dir() else { return };
    let mut files = Vec::new();
    clojure_files(&dir, &mut files);
    // (as written, collapsed to one line)
    let mut forms: Vec<(String, String)> = Vec::new();
    for f in &files {
        let Ok(src) = std::fs::read_to_string(f) else { continue };
        let tree = syntax::parse(&src);
        if syntax::first_error(&tree, &src).is_some() {
            continue;
        }
        for n in syntax::top_level_forms(&tree) {
            forms.push((syntax::text(n, &src).to_string(), collapse(n, &src)));
        }
    }
    assert!(forms.len() >= 200, "corpus too small: {} forms", forms.len());
    let step = forms.len() / 200;
    let width = DEFAULT_WIDTH;
    let mut failures = Vec::new();
    let mut lines = 0;
    let started = std::time::Instant::now();
    for (i, (written, one_line)) in forms.iter().step_by(step).take(200).enumerate() {
        assert_eq!(tokens(one_line), tokens(written), "collapsing changed the tokens");
        let out = match layout_form(one_line, &LayoutOptions { width }) {
            Ok(out) => out,
            Err(e) => {
                failures.push(format!("#{i}: {e}\n{one_line}"));
                continue;
            }
        };
        lines += out.lines().count();
        if tokens(&out) != tokens(one_line) {
            failures.push(format!("#{i}: tokens differ\n{out}"));
        }
        let bad = misindented_lines(&out);
        if !bad.is_empty() {
            failures.push(format!("#{i}: misindented {bad:?}\n{out}"));
        }
        let long = overlong_lines(&out, width);
        if !long.is_empty() {
            failures.push(format!("#{i}: lines over {width}: {long:?}\n{out}"));
        }
    }
    eprintln!(
        "laid out 200 of {} corpus forms ({lines} lines) in {:?}",
        forms.len(),
        started.elapsed()
    );
    let fixed = REINDENTED.with(|r| r.borrow().clone());
    eprintln!("{} layouts needed re-indentation", fixed.len());
    for (unusual, f) in &fixed {
        if !unusual {
            failures.push(format!("the document disagrees with cljfmt's indentation:\n{f}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn corpus_files_against_cljfmt_rules() {
    let Some(dir) = corpus_dir() else { return };
    for name in ["clojure/set.clj", "clojure/string.clj", "clojure/walk.clj"] {
        let mut files = Vec::new();
        clojure_files(&dir, &mut files);
        let Some(path) = files.iter().find(|p| p.ends_with(name)) else { continue };
        let src = std::fs::read_to_string(path).unwrap();
        let bad = misindented_lines(&src);
        let total = src.lines().filter(|l| !l.trim().is_empty()).count();
        eprintln!(
            "{name}: {} of {total} non-blank lines off cljfmt's indentation ({:.1}%): {:?}",
            bad.len(),
            100.0 * bad.len() as f64 / total as f64,
            &bad[..bad.len().min(20)]
        );
        // Re-indenting is idempotent and leaves nothing to report.
        let fixed = reindent(&src);
        assert_eq!(misindented_lines(&fixed), Vec::<usize>::new(), "{name}");
        assert_eq!(reindent(&fixed), fixed);
    }
}

#[test]
fn layout_is_fast() {
    let mut src = String::from("(defn big [x]\n");
    for i in 0..60 {
        src.push_str(&format!(
            "(let [a{i} (compute x {i}) b{i} {{:key {i} :other [a{i} x]}}] \
             (when (pos? a{i}) (println \"value\" a{i} b{i})))\n"
        ));
    }
    src.push(')');
    let opts = LayoutOptions::default();
    let out = layout_form(&src, &opts).unwrap();
    assert!(out.lines().count() >= 100);
    VERIFY.with(|v| v.set(false));
    let runs = 50;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        layout_form(&src, &opts).unwrap();
    }
    let each = started.elapsed() / runs;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        syntax::parse(&src);
    }
    let parse = started.elapsed() / runs;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        reindent(&out);
    }
    let re = started.elapsed() / runs;
    eprintln!(
        "{} lines laid out in {each:?}, of which parsing {parse:?} (reindent, not needed \
         here, would add {re:?})",
        out.lines().count()
    );
    // Generous: the test profile is barely optimised and CI machines are shared.
    assert!(each < std::time::Duration::from_millis(25), "{each:?}");
}

/// Every top-level form of the corpus, collapsed to one line and as written (comments
/// kept), at three widths: the tokens survive, the indentation is cljfmt's, the layout is
/// stable, and (collapsed, from 80 columns) no line is too long unless one token makes it so.
/// Slow (a minute); run with `--ignored`.
#[test]
#[ignore]
fn whole_corpus_at_several_widths() {
    let Some(dir) = corpus_dir() else { return };
    let mut files = Vec::new();
    clojure_files(&dir, &mut files);
    let sources: Vec<String> =
        files.iter().filter_map(|f| std::fs::read_to_string(f).ok()).collect();
    let mut failures = Vec::new();
    for width in [40, 80, 120] {
        let opts = LayoutOptions { width };
        let mut count = 0;
        for src in &sources {
            let tree = syntax::parse(src);
            if syntax::first_error(&tree, src).is_some() {
                continue;
            }
            for node in syntax::top_level_forms(&tree) {
                let one_line = collapse(node, src);
                let written = syntax::text(node, src).to_string();
                for (collapsed, text) in [(true, one_line), (false, written)] {
                    count += 1;
                    let out = match layout_form(&text, &opts) {
                        Ok(out) => out,
                        Err(e) => {
                            failures.push(format!("w{width}: {e}\n{text}"));
                            continue;
                        }
                    };
                    if tokens(&out) != tokens(&text) {
                        failures.push(format!("w{width}: tokens differ\n{out}"));
                    }
                    let bad = misindented_lines(&out);
                    if !bad.is_empty() {
                        failures.push(format!("w{width}: misindented {bad:?}\n{out}"));
                    }
                    let long = overlong_lines(&out, width);
                    // Comments cannot be broken: only the collapsed forms have none.
                    if collapsed && width >= 80 && !long.is_empty() {
                        failures.push(format!("w{width}: lines too long {long:?}\n{out}"));
                    }
                    if layout_form(&out, &opts).ok().as_deref() != Some(&out[..]) {
                        failures.push(format!("w{width}: not stable\n{out}"));
                    }
                }
            }
        }
        for (unusual, f) in REINDENTED.with(|r| r.take()) {
            if !unusual {
                failures.push(format!("w{width}: disagrees with cljfmt's indentation\n{f}"));
            }
        }
        eprintln!("width {width}: {count} layouts, {} failures so far", failures.len());
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n\n")
    );
}

#[test]
fn a_form_nested_past_the_depth_gate_is_not_laid_out() {
    let levels = 100_000;
    let deep = format!("(defn f [] {}{})", "(g ".repeat(levels), ")".repeat(levels));
    for laid in [
        layout_form(&deep, &LayoutOptions::default()),
        format_file(&format!("(ns a)\n{deep}\n"), &LayoutOptions::default()),
    ] {
        let err = laid.unwrap_err().to_string();
        assert!(err.contains("nesting deeper than"), "{err}");
    }
}
