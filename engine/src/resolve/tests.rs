use std::collections::BTreeSet;

use super::*;
use crate::nsdecl::{apply_top_level_directive, parse_ns_form};
use crate::syntax::{parse, sym_parts, top_level_forms, values};
use crate::syntax::{KindOf, NodeKind};

/// What resolving the last form of a small file gives.
struct Out {
    r: Resolution,
    canonical: String,
}

impl Out {
    fn refs(&self) -> BTreeSet<&str> {
        self.r.refs.iter().map(|v| v.fqn.as_str()).collect()
    }
    fn calls(&self) -> BTreeSet<&str> {
        self.r.refs.iter().filter(|v| v.kind == RefKind::Call).map(|v| v.fqn.as_str()).collect()
    }
    fn values(&self) -> BTreeSet<&str> {
        self.r.refs.iter().filter(|v| v.kind == RefKind::Value).map(|v| v.fqn.as_str()).collect()
    }
    fn unresolved(&self) -> BTreeSet<&str> {
        self.r.unresolved.iter().map(|u| u.symbol.as_str()).collect()
    }
    fn classes(&self) -> BTreeSet<&str> {
        self.r.classes.iter().map(String::as_str).collect()
    }
}

fn set<'x>(xs: &[&'x str]) -> BTreeSet<&'x str> {
    xs.iter().copied().collect()
}

/// Read the ns form (if the file starts with one) and top-level directives, collect the
/// names every `def…` form defines, and resolve the last form.
fn resolve_last_in(src: &str, publics: &[(&str, &[&str])], core_ns: &str) -> Out {
    let tree = parse(src);
    let forms = top_level_forms(&tree);
    let mut decl = NsDecl { name: "user".into(), ..NsDecl::default() };
    let mut own = HashSet::new();
    for (i, f) in forms.iter().enumerate() {
        if i == 0 {
            if let Some(d) = parse_ns_form(*f, src) {
                decl = d;
                continue;
            }
        }
        apply_top_level_directive(&mut decl, *f, src);
        let vs = values(*f);
        if let [head, name, ..] = vs.as_slice() {
            if head.node_kind() == NodeKind::Sym && name.node_kind() == NodeKind::Sym {
                let head = sym_parts(*head, src).1;
                let name = sym_parts(*name, src).1.to_string();
                if head.starts_with("def") {
                    if matches!(head, "defrecord" | "deftype") {
                        own.insert(format!("->{name}"));
                    }
                    if head == "defprotocol" {
                        for sig in vs.iter().filter(|s| s.node_kind() == NodeKind::List) {
                            if let Some(m) = values(*sig).first() {
                                own.insert(sym_parts(*m, src).1.to_string());
                            }
                        }
                    }
                    own.insert(name);
                }
            }
        }
    }
    let publics: HashMap<String, HashSet<String>> = publics
        .iter()
        .map(|(ns, vars)| (ns.to_string(), vars.iter().map(|v| v.to_string()).collect()))
        .collect();
    let env = ResolveEnv {
        decl: &decl,
        own_vars: &own,
        publics: &publics,
        known_nss: &HashSet::new(),
        core_ns,
        core_publics: clojure_core_publics(),
    };
    let last = *forms.last().expect("a form");
    let r = resolve_form(last, src, &env);
    let mut canonical = String::new();
    let mut at = last.start_byte();
    for w in &r.rewrites {
        assert!(w.start >= at, "rewrites overlap or are out of order: {:?}", r.rewrites);
        canonical.push_str(&src[at..w.start]);
        canonical.push_str(&w.replacement);
        at = w.end;
    }
    canonical.push_str(&src[at..last.end_byte()]);
    Out { r, canonical }
}

fn resolve_last(src: &str) -> Out {
    resolve_last_with(src, &[])
}

fn resolve_last_with(src: &str, publics: &[(&str, &[&str])]) -> Out {
    resolve_last_in(src, publics, "clojure.core")
}

#[test]
fn core_publics_are_loaded() {
    let core = clojure_core_publics();
    assert!(core.len() > 600);
    for name in ["map", "defn", "let", "+", "->", "..", "*out*", "/"] {
        assert!(core.contains(name), "{name}");
    }
    assert!(!core.contains("if"), "special forms are not vars");
}

#[test]
fn alias_qualified_symbols_resolve_and_are_rewritten() {
    let o = resolve_last(
        "(ns app.core (:require [clojure.string :as str] [app.db :as db]))
(defn f [x] (str/join \",\" (map db/row x)))",
    );
    assert_eq!(o.calls(), set(&["clojure.core/defn", "clojure.string/join", "clojure.core/map"]));
    assert_eq!(o.values(), set(&["app.db/row"]));
    assert!(o.unresolved().is_empty());
    assert_eq!(o.canonical, "(defn f [x] (clojure.string/join \",\" (map app.db/row x)))");
}

#[test]
fn as_alias_keywords_are_rewritten_plain_auto_keywords_kept() {
    let o = resolve_last(
        "(ns app.user (:require [my.domain.user :as-alias user] [clojure.spec.alpha :as s]))
(s/def ::user/id (s/and int? #(pos? %)))
(def k [::user/id ::local :other/x #::user{:name 1} '::user/q {::s/x 1}])",
    );
    assert!(o.refs().is_empty(), "{:?}", o.refs());
    assert_eq!(
        o.canonical,
        "(def k [:my.domain.user/id ::local :other/x #:my.domain.user{:name 1} \
         ':my.domain.user/q {:clojure.spec.alpha/x 1}])"
    );
}

#[test]
fn alias_rewrite_leaves_symbol_metadata_alone() {
    let src = "(ns m (:require [clojure.string :as str]))\n(def x ^{:tag String} str/join)";
    let o = resolve_last(src);
    assert_eq!(o.canonical, "(def x ^{:tag String} clojure.string/join)");
    assert_eq!(o.r.rewrites.len(), 1);
    let w = &o.r.rewrites[0];
    assert_eq!(&src[w.start..w.end], "str");
    assert_eq!(o.values(), set(&["clojure.string/join"]));
}

#[test]
fn referred_vars_resolve_to_their_namespace() {
    let o = resolve_last(
        "(ns r (:require [c.d :refer [x y]]))
(defn f [] (x (y)) x)",
    );
    assert_eq!(o.calls(), set(&["clojure.core/defn", "c.d/x", "c.d/y"]));
    assert_eq!(o.values(), set(&["c.d/x"]));
}

#[test]
fn refer_with_rename_uses_the_new_name() {
    let o = resolve_last(
        "(ns r (:require [c.d :refer [x] :rename {x z}]))
(defn f [] (z 1) (x 2))",
    );
    assert_eq!(o.calls(), set(&["clojure.core/defn", "c.d/x"]));
    assert_eq!(o.unresolved(), set(&["x"]));
}

#[test]
fn refer_all_and_use_need_the_publics() {
    let o = resolve_last_with(
        "(ns r (:require [lib.a :refer :all]) (:use lib.b))
(defn f [] (foo (bar) (baz)))",
        &[("lib.a", &["foo"]), ("lib.b", &["bar"])],
    );
    assert_eq!(o.calls(), set(&["clojure.core/defn", "lib.a/foo", "lib.b/bar"]));
    assert_eq!(o.unresolved(), set(&["baz"]));
}

#[test]
fn refer_clojure_exclude_and_rename() {
    let o = resolve_last(
        "(ns r (:refer-clojure :exclude [map] :rename {get core-get}))
(defn f [m] (map (core-get m :a) (get m :b) (filter odd? m)))",
    );
    assert_eq!(
        o.refs(),
        set(&["clojure.core/defn", "clojure.core/get", "clojure.core/filter", "clojure.core/odd?"])
    );
    assert_eq!(o.unresolved(), set(&["map", "get"]));
}

#[test]
fn refer_clojure_only_limits_core() {
    let o = resolve_last(
        "(ns r (:refer-clojure :only [defn inc]))
(defn f [x] (inc (dec x)))",
    );
    assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/inc"]));
    assert_eq!(o.unresolved(), set(&["dec"]));
}

#[test]
fn own_vars_win_over_core() {
    // No :refer-clojure :exclude: after loading, ns-resolve gives the namespace's own var.
    let o = resolve_last(
        "(ns a)
(defn helper [] 1)
(defn update [m] m)
(defn f [x] (update x (helper)) (str x) (clojure.core/update x :a inc))",
    );
    assert_eq!(
        o.calls(),
        set(&[
            "clojure.core/defn",
            "a/update",
            "a/helper",
            "clojure.core/str",
            "clojure.core/update"
        ])
    );
    assert_eq!(o.values(), set(&["clojure.core/inc"]));
}

#[test]
fn same_namespace_var_defined_later_in_the_file() {
    let src = "(ns a)\n(defn f [x] (g x))\n(defn g [x] x)";
    let tree = parse(src);
    let forms = top_level_forms(&tree);
    let decl = parse_ns_form(forms[0], src).unwrap();
    let own: HashSet<String> = ["f", "g"].iter().map(|s| s.to_string()).collect();
    let publics = HashMap::new();
    let env = ResolveEnv {
        decl: &decl,
        own_vars: &own,
        publics: &publics,
        known_nss: &HashSet::new(),
        core_ns: "clojure.core",
        core_publics: clojure_core_publics(),
    };
    let r = resolve_form(forms[1], src, &env);
    let fqns: Vec<(&str, RefKind, Pos)> =
        r.refs.iter().map(|v| (v.fqn.as_str(), v.kind, v.pos)).collect();
    assert_eq!(
        fqns,
        vec![
            ("clojure.core/defn", RefKind::Call, Pos { line: 2, col: 2 }),
            ("a/g", RefKind::Call, Pos { line: 2, col: 14 }),
        ]
    );
}

#[test]
fn var_quote_is_a_value_reference() {
    let o = resolve_last("(ns a)\n(defn h [] 1)\n(def x [#'h (#'h) #'clojure.core/map])");
    assert_eq!(o.values(), set(&["a/h", "clojure.core/map"]));
    assert!(o.calls().is_empty(), "{:?}", o.calls());
}

#[test]
fn defined_name_is_not_a_reference_but_recursion_is() {
    let o = resolve_last(
        "(ns a)
(defn fact \"Doc.\" {:added \"1.0\"} [n] (if (zero? n) 1 (* n (fact (dec n)))))",
    );
    assert_eq!(
        o.calls(),
        set(&[
            "clojure.core/defn",
            "clojure.core/zero?",
            "clojure.core/*",
            "a/fact",
            "clojure.core/dec"
        ])
    );
    assert_eq!(o.r.refs.iter().filter(|v| v.fqn == "a/fact").count(), 1);
    let o = resolve_last("(ns a)\n(def ^:private x (inc 1))");
    assert_eq!(o.refs(), set(&["clojure.core/inc"]));
}

#[test]
fn let_destructuring_vectors_maps_and_or_defaults() {
    let o = resolve_last(
        "(ns a)
(defn xs [] 1)
(defn default-b [] 1)
(defn f [ys zs]
  (let [[a & more :as all] (xs)
    {:keys [b c/d] :strs [e] :syms [g] :as m :or {b (default-b) e d}} ys
    {h :h [i j] :ij :person/keys [name age] ::keys [kw]} zs
    k (count a)]
(list a more all b d e g m h i j name age kw k unknown)))",
    );
    assert_eq!(
        o.refs(),
        set(&[
            "clojure.core/defn",
            "clojure.core/let",
            "a/xs",
            "a/default-b",
            "clojure.core/count",
            "clojure.core/list",
        ])
    );
    // `name` is a local, not clojure.core/name.
    assert_eq!(o.unresolved(), set(&["unknown"]));
}

#[test]
fn let_init_does_not_see_its_own_binding() {
    let o = resolve_last("(ns a)\n(defn x [] 1)\n(let [x (x)] x)");
    assert_eq!(o.calls(), set(&["clojure.core/let", "a/x"]));
    assert_eq!(o.r.refs.len(), 2);
}

#[test]
fn loop_and_recur() {
    let o = resolve_last(
        "(defn f [n] (loop [i 0 acc []] (if (< i n) (recur (inc i) (conj acc i)) acc)))",
    );
    assert_eq!(
        o.refs(),
        set(&[
            "clojure.core/defn",
            "clojure.core/loop",
            "clojure.core/<",
            "clojure.core/inc",
            "clojure.core/conj"
        ])
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
}

#[test]
fn if_let_else_branch_does_not_see_the_binding() {
    let o = resolve_last("(ns a)\n(def x 1)\n(defn f [] (if-let [x (seq [])] x x))");
    assert_eq!(o.values(), set(&["a/x"]));
    assert_eq!(o.r.refs.iter().filter(|v| v.fqn == "a/x").count(), 1);
}

#[test]
fn other_binding_macros() {
    let o = resolve_last(
        "(ns o (:require [clojure.java.io :as io]))
(defn f [xs path]
  (when-let [a (first xs)] a)
  (when-some [b (first xs)] b)
  (if-some [c (first xs)] c nil)
  (when-first [d xs] d)
  (with-open [r (io/reader path)] (slurp r))
  (with-local-vars [v 1] (var-get v))
  (dotimes [i 3] (println i))
  (as-> xs t (map inc t) (vec t)))",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    for core in ["when-let", "when-some", "if-some", "when-first", "with-open", "slurp"] {
        assert!(o.refs().contains(format!("clojure.core/{core}").as_str()), "{core}");
    }
    assert!(o.refs().contains("clojure.core/as->"));
    // clojure.java.io is neither required nor known.
    let o = resolve_last("(defn f [p] (clojure.java.io/reader p))");
    assert_eq!(o.unresolved(), set(&["clojure.java.io/reader"]));
}

#[test]
fn for_and_doseq_with_modifiers() {
    let o = resolve_last(
        "(defn f [xss]
  (for [xs xss :let [n (count xs) m (inc n)] :when (pos? m) x xs :while (< x n)] [x m])
  (doseq [[k v] {} :let [kv (str k v)]] (println kv)))",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert!(o.calls().contains("clojure.core/pos?"));
    assert!(o.calls().contains("clojure.core/str"));
}

#[test]
fn letfn_names_are_visible_everywhere() {
    let o = resolve_last(
        "(defn f [n]
  (letfn [(ev? [n] (if (zero? n) true (od? (dec n))))
      (od? [n] (if (zero? n) false (ev? (dec n))))]
(ev? n)))",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert_eq!(
        o.refs(),
        set(&["clojure.core/defn", "clojure.core/letfn", "clojure.core/zero?", "clojure.core/dec"])
    );
}

#[test]
fn fn_params_names_arities_and_conditions() {
    let o = resolve_last(
        "(def f (fn self
  ([] (self 1))
  ([x & {:keys [y]}]
   {:pre [(pos? x)] :post [(number? %)]}
   (+ x y))))",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert_eq!(
        o.refs(),
        set(&["clojure.core/fn", "clojure.core/pos?", "clojure.core/number?", "clojure.core/+"])
    );
    let o = resolve_last("(def g (fn* [a] (inc a)))");
    assert_eq!(o.refs(), set(&["clojure.core/inc"]));
    assert!(o.unresolved().is_empty());
}

#[test]
fn defmacro_has_form_and_env_locals() {
    let o = resolve_last(
        "(defmacro m \"doc\" [x & body] (when (:ns &env) (meta &form)) `(do ~x ~@body))",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert_eq!(
        o.calls(),
        set(&["clojure.core/defmacro", "clojure.core/when", "clojure.core/meta"])
    );
}

#[test]
fn defmethod_params_and_dispatch_value() {
    let o = resolve_last(
        "(ns shapes)
(defmulti area :shape)
(defmethod area ::circle area-of-circle [{:keys [r]}] (* Math/PI r r (area-of-circle {})))",
    );
    assert_eq!(o.values(), set(&["shapes/area"]));
    assert_eq!(o.calls(), set(&["clojure.core/defmethod", "clojure.core/*"]));
    assert_eq!(o.classes(), set(&["java.lang.Math"]));
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
}

#[test]
fn catch_binds_the_exception_and_names_a_class() {
    let o = resolve_last(
        "(ns t (:import (java.io IOException)))
(defn f [] (try (slurp \"x\") (catch IOException e (.getMessage e)) (catch Exception e e) (finally (flush))))",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert_eq!(o.classes(), set(&["java.io.IOException", "java.lang.Exception"]));
    assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/slurp", "clojure.core/flush"]));
}

#[test]
fn binding_left_hand_sides_are_var_references() {
    let o = resolve_last(
        "(ns b)
(def ^:dynamic *depth* 0)
(defn f [w] (binding [*out* w *depth* (inc *depth*)] (println *depth*)))",
    );
    assert_eq!(o.values(), set(&["clojure.core/*out*", "b/*depth*"]));
    assert_eq!(o.r.refs.iter().filter(|v| v.fqn == "b/*depth*").count(), 3);
    assert!(o.unresolved().is_empty());
}

#[test]
fn case_test_constants_are_not_references() {
    let o = resolve_last("(defn f [x] (case x (a b) 1 c 2 :k (inc 3) \"s\" x (str x)))");
    assert_eq!(
        o.refs(),
        set(&["clojure.core/defn", "clojure.core/case", "clojure.core/inc", "clojure.core/str"])
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
}

#[test]
fn quoted_forms_have_no_references() {
    let o = resolve_last(
        "(ns q (:require [clojure.string :as str]))
(def x ['(foo bar/baz str/join) (quote (nope)) 'map])",
    );
    assert!(o.refs().is_empty(), "{:?}", o.refs());
    assert!(o.unresolved().is_empty());
    assert!(o.r.rewrites.is_empty(), "a quoted symbol is data; its alias stays");
}

#[test]
fn syntax_quote_resolves_template_symbols_except_gensyms_and_unquotes() {
    let o = resolve_last(
        "(ns mac (:require [clojure.string :as str]))
(defn helper [x] x)
(defmacro m [x & body]
  `(let [y# ~(inc x)] (helper y# ~@body) (str/join y#) (if y# 'quoted-helper &)))",
    );
    assert_eq!(o.values(), set(&["clojure.core/let", "mac/helper", "clojure.string/join"]));
    assert_eq!(o.calls(), set(&["clojure.core/defmacro", "clojure.core/inc"]));
    // The reader would write `mac/quoted-helper`, which names nothing: in a template that
    // is a method, field or binding name of the generated code, not reported.
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert!(o.canonical.contains("(clojure.string/join y#)"));
    // A template symbol named like a local is still resolved as the reader does.
    let o = resolve_last("(defmacro m [inc] `(inc ~inc))");
    assert_eq!(o.values(), set(&["clojure.core/inc"]));
}

#[test]
fn interop_forms_are_classes_not_vars() {
    let o = resolve_last(
        "(ns i (:import java.util.Date [java.io File]))
(defn f [^String s]
  (.toUpperCase s) (.-x s) (Date.) (java.util.UUID/randomUUID) (Math/abs -1)
  (File. \"x\") (System/getProperty \"a\") (. s trim) (.. s trim length)
  (new StringBuilder) (instance? java.util.Map s) (js/alert s) BigDecimal/ONE [Date File])",
    );
    assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/..", "clojure.core/instance?"]));
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert_eq!(
        o.classes(),
        set(&[
            "java.util.Date",
            "java.util.UUID",
            "java.lang.Math",
            "java.io.File",
            "java.lang.System",
            "java.lang.StringBuilder",
            "java.util.Map",
            "java.math.BigDecimal",
        ])
    );
}

#[test]
fn clojurescript_interop_npm_aliases_and_this_as() {
    let o = resolve_last_in(
        "(ns app.ui (:require [\"react\" :as react] [\"@mui/material\" :as mui]
                          [goog.string :as gstr]))
(defn f [] (this-as self (.log js/console self)) (react/createElement \"div\") (mui/Button)
  (gstr/format \"%s\" @(atom 1)) #js {:a (inc 1)})",
        &[],
        "cljs.core",
    );
    assert_eq!(
        o.calls(),
        set(&[
            "cljs.core/defn",
            "react/createElement",
            "@mui/material/Button",
            "goog.string/format",
            "cljs.core/deref",
            "cljs.core/atom",
            "cljs.core/inc",
        ])
    );
    // this-as is not in the clojure.core publics; it still binds `self`.
    assert_eq!(o.unresolved(), set(&["this-as"]));
    assert_eq!(
        o.canonical,
        "(defn f [] (this-as self (.log js/console self)) (react/createElement \"div\") \
         (mui/Button)\n  (goog.string/format \"%s\" @(atom 1)) #js {:a (inc 1)})"
    );
}

#[test]
fn reader_conditionals_contribute_every_branch() {
    let o = resolve_last(
        "(ns rc)
(defn clj-only [] 1) (defn cljs-only [] 1) (defn a [] 1) (defn b [] 1)
(defn f [] #?(:clj (clj-only) :cljs (cljs-only)) [#?@(:clj [(a)] :cljs [(b)])]
  (let [#?@(:clj [x (a)] :cljs [x (b)])] x))",
    );
    assert_eq!(
        o.calls(),
        set(&[
            "clojure.core/defn",
            "clojure.core/let",
            "rc/clj-only",
            "rc/cljs-only",
            "rc/a",
            "rc/b"
        ])
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
}

#[test]
fn deftype_fields_are_locals_and_method_names_are_not_refs() {
    let o = resolve_last(
        "(ns geo)
(defprotocol Shape (area [s]) (describe [s] \"Describe it.\"))
(defrecord Point [x y]
  Shape
  (area [_] (* x y))
  (describe [this] (str (area this) x))
  Object
  (toString [_] (pr-str (->Point x y))))",
    );
    assert_eq!(
        o.refs(),
        set(&[
            "clojure.core/defrecord",
            "geo/Shape",
            "clojure.core/*",
            "clojure.core/str",
            "geo/area",
            "clojure.core/pr-str",
            "geo/->Point",
        ])
    );
    assert_eq!(o.classes(), set(&["java.lang.Object"]));
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    // defprotocol signatures contain no references.
    let o = resolve_last("(defprotocol P (m [this x] \"doc\") (n [this]))");
    assert_eq!(o.refs(), set(&["clojure.core/defprotocol"]));
    assert!(o.unresolved().is_empty());
}

#[test]
fn reify_proxy_extend_forms() {
    let o = resolve_last(
        "(ns e)
(defprotocol P (m [this x]))
(defn g [] [(reify P (m [this x] (inc x)) Runnable (run [_] (flush)))
   (proxy [Object] [] (toString [] (str this)))
   (extend-protocol P String (m [s x] (count s)) nil (m [_ x] x))
   (extend-type Long P (m [n x] (+ n x)))])",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert_eq!(
        o.refs(),
        set(&[
            "clojure.core/defn",
            "clojure.core/reify",
            "clojure.core/proxy",
            "clojure.core/extend-protocol",
            "clojure.core/extend-type",
            "e/P",
            "clojure.core/inc",
            "clojure.core/flush",
            "clojure.core/str",
            "clojure.core/count",
            "clojure.core/+",
        ])
    );
    assert_eq!(
        o.classes(),
        set(&["java.lang.Runnable", "java.lang.Object", "java.lang.String", "java.lang.Long"])
    );
}

#[test]
fn reader_conditionals_in_names_parameters_arities_and_types() {
    let o = resolve_last(
        "(ns rc2)
(defprotocol P (m [x]))
(defn #?(:clj f :cljs ^boolean f) #?(:clj ([x] (inc x)) :cljs ([x] (dec x))))
(defn g #?(:clj [a ^long n] :cljs [a n]) (+ a n))
(extend-protocol P #?(:clj String :cljs string) (m [s] (count s)) #?(:cljs default) (m [_] nil))",
    );
    assert_eq!(o.refs(), set(&["clojure.core/extend-protocol", "rc2/P", "clojure.core/count"]));
    assert_eq!(o.classes(), set(&["java.lang.String"]));
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    let o = resolve_last(
        "(defn #?(:clj f :cljs ^boolean f) #?(:clj ([x] (inc x)) :cljs ([x] (dec x))))",
    );
    // Each branch resolves for its platform: the :cljs arity calls cljs.core.
    assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/inc", "cljs.core/dec"]));
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    let o = resolve_last("(defn g #?(:clj [a ^long n] :cljs [a n]) (+ a n))");
    assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/+"]));
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
}

#[test]
fn binding_look_alikes_and_deftype_look_alikes() {
    let o = resolve_last(
        "(ns la (:require [promesa.core :as p] [clojure.core.async :refer [go-loop <!]]))
(defn f [ch] (p/let [x (p/resolved 1) {:keys [y]} (g x)] (+ x y))
  (go-loop [acc []] (recur (conj acc (<! ch)))))",
    );
    assert_eq!(o.unresolved(), set(&["g"]));
    assert!(o.calls().contains("promesa.core/let"));
    assert!(o.calls().contains("clojure.core.async/go-loop"));
    let o = resolve_last(
        "(ns dc (:require [clojure.core.cache :refer [defcache CacheProtocol]]))
(defcache BasicCache [cache]
  CacheProtocol
  (lookup [_ item] (get cache item))
  (has? [_ item] (contains? cache item)))",
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    assert_eq!(
        o.refs(),
        set(&[
            "clojure.core.cache/defcache",
            "clojure.core.cache/CacheProtocol",
            "clojure.core/get",
            "clojure.core/contains?",
        ])
    );
}

#[test]
fn dot_forms_in_templates_and_evaluated_metadata() {
    let o = resolve_last(
        "(defmacro with-b [m & body]
  `(do (. clojure.lang.Var (pushThreadBindings ~m)) (try ~@body (finally (. clojure.lang.Var (popThreadBindings))))))",
    );
    assert_eq!(o.refs(), set(&["clojure.core/defmacro"]));
    assert_eq!(o.classes(), set(&["clojure.lang.Var"]));
    assert!(o.unresolved().is_empty());
    let o = resolve_last(
        "(ns mt)
(defn check [] 1)
(def ^{:test (fn [] (check)) :tag String} x 1)",
    );
    assert_eq!(o.refs(), set(&["clojure.core/fn", "mt/check"]));
    assert!(o.classes().is_empty(), "a :tag is a type hint, not a use");
}

#[test]
fn own_record_constructor_is_a_class_of_the_namespace() {
    let o = resolve_last(
        "(ns my-geo.core)
(defrecord Point [x y])
(defn origin [] (Point. 0 0) (->Point 0 0))",
    );
    assert_eq!(o.classes(), set(&["my_geo.core.Point"]));
    assert_eq!(o.refs(), set(&["clojure.core/defn", "my-geo.core/->Point"]));
}

#[test]
fn anonymous_fn_params_are_locals() {
    let o = resolve_last("(def f #(apply + % %1 %2 %&))");
    assert_eq!(o.refs(), set(&["clojure.core/apply", "clojure.core/+"]));
    assert_eq!(o.values(), set(&["clojure.core/+"]));
    assert!(o.unresolved().is_empty());
    let o = resolve_last("(def g (fn [] %))");
    assert_eq!(o.unresolved(), set(&["%"]));
}

#[test]
fn threading_steps_are_calls_and_deref_is_core_deref() {
    let o = resolve_last("(defn f [a] (-> @a inc (max 3) str))");
    assert_eq!(
        o.calls(),
        set(&[
            "clojure.core/defn",
            "clojure.core/->",
            "clojure.core/deref",
            "clojure.core/inc",
            "clojure.core/max",
            "clojure.core/str",
        ])
    );
    assert!(o.values().is_empty());
}

#[test]
fn comment_blocks_rewrite_but_do_not_refer() {
    let o = resolve_last(
        "(ns c (:require [clojure.string :as str]))
(comment (str/join [1]) (undefined-thing))",
    );
    assert_eq!(o.refs(), set(&["clojure.core/comment"]));
    assert!(o.unresolved().is_empty());
    assert_eq!(o.canonical, "(comment (clojure.string/join [1]) (undefined-thing))");
}

#[test]
fn top_level_require_is_folded_into_the_declaration() {
    let o = resolve_last(
        "(ns t)
(require '[clojure.set :as set])
(defn f [a b] (set/union a b) (clojure.set/difference a b) (other.ns/x))",
    );
    assert_eq!(
        o.calls(),
        set(&["clojure.core/defn", "clojure.set/union", "clojure.set/difference"])
    );
    assert_eq!(o.unresolved(), set(&["other.ns/x"]));
    assert_eq!(
        o.canonical,
        "(defn f [a b] (clojure.set/union a b) (clojure.set/difference a b) (other.ns/x))"
    );
}

#[test]
fn def_like_macros_at_top_level_do_not_refer_to_their_name() {
    let o = resolve_last(
        "(ns t (:require [clojure.test :refer [deftest is are]]))
(deftest adds (is (= 2 (+ 1 1))) (are [x y] (= x (inc y)) 2 1))",
    );
    assert_eq!(
        o.calls(),
        set(&[
            "clojure.test/deftest",
            "clojure.test/is",
            "clojure.test/are",
            "clojure.core/=",
            "clojure.core/+",
            "clojure.core/inc",
        ])
    );
    assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
}

#[test]
fn positions_count_characters() {
    let o = resolve_last("(def s \"ü\") (def t [\"üü\" (inc 1) \"ä\" (dec 2)\n  (ü/x)])");
    let pos: Vec<Pos> = o.r.refs.iter().map(|r| r.pos).collect();
    assert_eq!(pos, vec![Pos { line: 1, col: 27 }, Pos { line: 1, col: 39 }]);
    assert_eq!(o.r.unresolved[0].pos, Pos { line: 2, col: 4 });
}

#[test]
fn odd_input_does_not_panic() {
    for src in [
        "()",
        "(let)",
        "(let [x])",
        "(let [1 2 :a 3 \"s\" 4] x)",
        "(let x y)",
        "(fn)",
        "(fn [])",
        "(fn name)",
        "(defn)",
        "(defn f)",
        "(defn f \"doc\")",
        "(letfn [(f)] (f))",
        "(letfn)",
        "(for [x] x)",
        "(for [:let] 1)",
        "(doseq [:when])",
        "(case)",
        "(case x)",
        "(catch)",
        "(try (catch))",
        "(binding)",
        "(defmethod)",
        "(defmethod m)",
        "(deftype)",
        "(defrecord R)",
        "(reify)",
        "(proxy)",
        "(extend-protocol)",
        "(areduce a)",
        "(amap)",
        "(. x)",
        "(..)",
        "(->)",
        "(cond-> x a)",
        "(as->)",
        "(let [{:keys} m {:or} n [& :as] o] 1)",
        "(let [{:keys [1 \"s\"] :or 5 :as 7} m] 1)",
        "#()",
        "`()",
        "`(~)",
        "#?()",
        "#?@()",
        "(#?(:clj f :cljs g) 1)",
        "^:meta ()",
        "(::foo/bar m)",
        "(a/)",
    ] {
        let _ = resolve_last(src);
    }
}
