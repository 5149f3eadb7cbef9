//! The walk over a form: calls, special forms and the macros of `clojure.core` (and look-alikes)
//! understood by shape.

use super::*;

impl<'a> Resolver<'a> {
    /// Walk a node as code in value position.
    pub(super) fn form(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Sym => {
                self.symbol(node, RefKind::Value);
            }
            K::List => self.list(node),
            K::Kwd => self.keyword(node),
            K::Vec | K::Map | K::Set => {
                let (s, e) = self.kids(node);
                if self.kids_meta {
                    self.walk_meta(node, true);
                }
                self.forms(s, e);
                self.buf.truncate(s);
            }
            K::Quote => self.quoted(node),
            K::SynQuote => {
                let (s, e) = self.kids(node);
                for i in s..e {
                    let n = self.buf[i];
                    self.sq(n);
                }
                self.buf.truncate(s);
            }
            K::VarQuote => {
                // `#'x` is `(var x)`: a reference to the var itself.
                self.each(node);
            }
            K::Deref => {
                // `@x` reads as `(clojure.core/deref x)`.
                let core = self.core_of(self.platform_at(node.start_byte())).0;
                let fqn = format!("{core}/deref");
                self.push_ref(fqn, RefKind::Call, node);
                self.each(node);
            }
            K::AnonFn => {
                let (s, e) = self.kids(node);
                self.anon += 1;
                let top = std::mem::replace(&mut self.top, false);
                self.call(s, e, top);
                self.anon -= 1;
                self.buf.truncate(s);
            }
            K::ReadCond => {
                let (s, e) = self.kids(node);
                for i in (s..e).skip(1).step_by(2) {
                    let n = self.buf[i];
                    self.form(n);
                }
                self.buf.truncate(s);
            }
            K::SplicingReadCond => {
                let (s, e) = self.kids(node);
                for i in (s..e).skip(1).step_by(2) {
                    let n = self.buf[i];
                    self.each(n);
                }
                self.buf.truncate(s);
            }
            K::NsMap => {
                self.ns_map_prefix(node);
                self.each(node);
            }
            K::Tagged | K::Evaling | K::Unquote | K::UnquoteSplicing => {
                self.each(node);
            }
            _ => {}
        }
    }

    /// Walk every value child of a node as code.
    pub(super) fn each(&mut self, node: Node<'a>) {
        let (s, e) = self.kids(node);
        self.forms(s, e);
        self.buf.truncate(s);
    }

    /// Walk buffered nodes `a..b` as code.
    pub(super) fn forms(&mut self, a: usize, b: usize) {
        for i in a..b {
            let n = self.buf[i];
            self.form(n);
        }
    }

    pub(super) fn list(&mut self, node: Node<'a>) {
        let top = std::mem::replace(&mut self.top, false);
        let (s, e) = self.kids(node);
        if self.kids_meta {
            self.walk_meta(node, false);
        }
        self.call(s, e, top);
        self.buf.truncate(s);
    }

    /// A call-shaped sequence in the buffer: head at `s`, arguments after it.
    pub(super) fn call(&mut self, s: usize, e: usize, top: bool) {
        if s >= e {
            return;
        }
        let head = self.buf[s];
        let res = match kind(head) {
            K::Sym
                if self.in_test_assertion > 0
                    && matches!(
                        self.plain_sym_text(head),
                        Some("thrown?" | "thrown-with-msg?")
                    ) =>
            {
                // `(is (thrown? Class body))`: syntax of `is` (its `assert-expr` methods).
                Res::Other
            }
            K::Sym => self.symbol(head, RefKind::Call),
            K::ReadCond => {
                let (hs, he) = self.kids(head);
                for i in (hs..he).skip(1).step_by(2) {
                    let n = self.buf[i];
                    if kind(n) == K::Sym {
                        self.symbol(n, RefKind::Call);
                    } else {
                        self.form(n);
                    }
                }
                self.buf.truncate(hs);
                Res::Other
            }
            _ => {
                self.form(head);
                Res::Other
            }
        };
        let (a, b) = (s + 1, e);
        match res {
            Res::Special(name) => self.special(name, a, b),
            Res::Core(name) => self.core_macro(name, a, b),
            Res::Var(name) | Res::Unresolved(name) => self.other_macro(name, a, b, top),
            Res::Local | Res::Other => self.forms(a, b),
        }
    }

    pub(super) fn kind_at(&self, i: usize, b: usize) -> K {
        if i < b {
            kind(self.buf[i])
        } else {
            K::Other
        }
    }

    pub(super) fn special(&mut self, name: &str, a: usize, b: usize) {
        match name {
            "quote" => {
                for i in a..b {
                    let n = self.buf[i];
                    self.quoted(n);
                }
            }
            "def" => self.def_like(a, b),
            "fn*" => self.fn_form(a, b),
            "let*" | "loop*" => self.let_like(a, b),
            "letfn*" => self.letfn_star(a, b),
            "catch" => self.catch(a, b),
            "." => self.dot(a, b),
            "case*" | "deftype*" | "reify*" | "import*" | "js*" => {
                for i in a..b {
                    let n = self.buf[i];
                    self.quoted(n);
                }
            }
            // var, new, if, do, try, finally, throw, recur, set!, monitor-*: arguments are code
            // (`(var x)` and `(new Class)` resolve their symbol like any other).
            _ => self.forms(a, b),
        }
    }

    pub(super) fn core_macro(&mut self, name: &str, a: usize, b: usize) {
        match name {
            "defn" | "defn-" | "definline" => self.defn(a, b, false),
            "defmacro" => self.defn(a, b, true),
            "fn" | "bound-fn" => self.fn_form(a, b),
            "let" | "loop" | "when-let" | "when-some" | "when-first" | "with-open"
            | "with-local-vars" | "dotimes" => self.let_like(a, b),
            "if-let" | "if-some" => self.if_let(a, b),
            "for" | "doseq" => self.comprehension(a, b),
            "letfn" => self.letfn(a, b),
            "as->" => self.as_thread(a, b),
            // cljs: `(this-as self body)`.
            "this-as" => self.this_as(a, b),
            "case" => self.case(a, b),
            "binding" | "with-redefs" => self.binding(a, b),
            "defonce" | "defmulti" | "defstruct" => self.def_like(a, b),
            "defmethod" => self.defmethod(a, b),
            "deftype" | "defrecord" => self.deftype(a, b),
            "reify" => self.specs(a, b, false),
            "specify" | "specify!" => {
                if a < b {
                    let n = self.buf[a];
                    self.form(n);
                }
                self.specs(a + 1, b, false);
            }
            "proxy" => self.proxy(a, b),
            "extend-type" => self.extend_type(a, b),
            "extend-protocol" => self.extend_protocol(a, b),
            "->" | "->>" | "some->" | "some->>" | "doto" => self.thread(a, b),
            "cond->" | "cond->>" => self.cond_thread(a, b),
            ".." => self.dotdot(a, b),
            "areduce" => self.areduce(a, b),
            "amap" => self.amap(a, b),
            "proxy-super" => self.forms((a + 1).min(b), b),
            "comment" => {
                self.mute += 1;
                self.forms(a, b);
                self.mute -= 1;
            }
            // Names, class names and option keywords, none of them references.
            "declare" | "defprotocol" | "definterface" | "ns" | "import" | "gen-class"
            | "gen-interface" | "memfn" | "refer-clojure" => {
                for i in a..b {
                    let n = self.buf[i];
                    self.quoted(n);
                }
            }
            _ => self.forms(a, b),
        }
    }

    /// Heads that are not core vars: look-alikes of core binding macros, and, for the
    /// top-level form, `def`-something macros (`deftest`, `defstate`, `s/defn`, …) whose second
    /// element is the name they define.
    pub(super) fn other_macro(&mut self, name: &str, a: usize, b: usize, top: bool) {
        let first = self.kind_at(a, b);
        if binding_lookalike(name) && (first == K::Vec || (name == "fn" && first == K::Sym)) {
            self.core_macro(if name == "go-loop" { "loop" } else { name }, a, b);
        } else if matches!(name, "this-as" | "specify" | "specify!") {
            // cljs.core macros, unknown to a resolver given the clojure.core publics.
            self.core_macro(name, a, b);
        } else if name == "are" && first == K::Vec {
            // clojure.test/are: the argument vector names the template's locals.
            let mark = self.locals.len();
            let v = self.buf[a];
            self.bind(v);
            if a + 1 < b {
                let t = self.buf[a + 1];
                self.in_test_assertion += 1;
                self.form(t);
                self.in_test_assertion -= 1;
            }
            self.locals.truncate(mark);
            self.forms((a + 2).min(b), b);
        } else if name == "is" {
            self.in_test_assertion += 1;
            self.forms(a, b);
            self.in_test_assertion -= 1;
        } else if top && name.starts_with("def") && name.len() > 3 && first == K::Sym {
            self.def_like_macro(a, b);
        } else {
            self.forms(a, b);
        }
    }

    /// `(def name doc? init?)` and friends: the name is not a reference to itself.
    pub(super) fn def_like(&mut self, a: usize, b: usize) {
        let mut i = a;
        if self.is_name_at(i, b) {
            let n = self.buf[i];
            self.walk_meta(n, true);
            i += 1;
        }
        self.forms(i, b);
    }

    /// `(defsomething name doc? attr-map? [params] body...)` or with arities, or anything else.
    pub(super) fn def_like_macro(&mut self, a: usize, b: usize) {
        let n = self.buf[a];
        self.walk_meta(n, true);
        let mut i = a + 1;
        while i < b && matches!(kind(self.buf[i]), K::Str | K::Map) {
            let n = self.buf[i];
            self.form(n);
            i += 1;
        }
        if self.kind_at(i, b) == K::Vec && self.type_like(i + 1, b) {
            // `(defcache C [fields] Proto (method [this x] ..) ...)`: a deftype look-alike.
            let mark = self.locals.len();
            let fields = self.buf[i];
            self.bind(fields);
            self.specs(i + 1, b, false);
            self.locals.truncate(mark);
            return;
        }
        let fn_like = match self.kind_at(i, b) {
            K::Vec => i + 1 < b,
            K::List => {
                let mut all = true;
                for j in i..b {
                    let n = self.buf[j];
                    all &= self.starts_with_vec(n) == Some(true);
                }
                all
            }
            _ => false,
        };
        if fn_like {
            self.fn_tail(i, b);
        } else {
            self.forms(i, b);
        }
    }

    /// Whether `a..b` looks like the body of a deftype: protocol symbols and method
    /// implementations `(name [params] body...)`, with at least one symbol or two methods.
    pub(super) fn type_like(&mut self, a: usize, b: usize) -> bool {
        let (mut syms, mut methods) = (0, 0);
        for j in a..b {
            let n = self.buf[j];
            match kind(n) {
                K::Sym => syms += 1,
                K::List => {
                    let (s, e) = self.kids(n);
                    let method = e >= s + 3
                        && kind(self.buf[s]) == K::Sym
                        && kind(self.buf[s + 1]) == K::Vec;
                    self.buf.truncate(s);
                    if !method {
                        return false;
                    }
                    methods += 1;
                }
                _ => return false,
            }
        }
        methods > 0 && (syms > 0 || methods > 1)
    }

    /// Whether a node is a list whose first element is a vector (`None`: not a list).
    pub(super) fn starts_with_vec(&mut self, list: Node<'a>) -> Option<bool> {
        if kind(list) != K::List {
            return None;
        }
        let (s, e) = self.kids(list);
        let yes = s < e && kind(self.buf[s]) == K::Vec;
        self.buf.truncate(s);
        Some(yes)
    }

    /// `(defn name doc? attr-map? [params] body)` / `(defn name doc? attr-map? ([p] b)+ attr?)`.
    pub(super) fn defn(&mut self, a: usize, b: usize, is_macro: bool) {
        let mut i = a;
        if self.is_name_at(i, b) {
            let n = self.buf[i];
            self.walk_meta(n, true);
            i += 1;
        }
        // A docstring, possibly one per platform.
        if self.kind_at(i, b) == K::Str || (i < b && self.cond_of(self.buf[i], K::Str)) {
            i += 1;
        }
        if self.kind_at(i, b) == K::Map {
            let n = self.buf[i];
            self.form(n);
            i += 1;
        }
        let mark = self.locals.len();
        if is_macro {
            self.locals.push("&form");
            self.locals.push("&env");
        }
        self.fn_tail(i, b);
        self.locals.truncate(mark);
    }

    /// `(fn name? [params] body)` / `(fn name? ([params] body)+)`.
    pub(super) fn fn_form(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        let mut i = a;
        if self.kind_at(i, b) == K::Sym {
            let n = self.buf[i];
            self.bind(n);
            i += 1;
        }
        self.fn_tail(i, b);
        self.locals.truncate(mark);
    }

    /// `[params] body...` or `([params] body...)+`, anything else walked as code.
    pub(super) fn fn_tail(&mut self, i: usize, b: usize) {
        if i >= b {
            return;
        }
        let first = self.buf[i];
        // `#?(:clj [a ^long n] :cljs [a n])` as the parameter vector binds every branch.
        if kind(first) == K::Vec || self.cond_of(first, K::Vec) {
            self.fn_body(first, i + 1, b);
            return;
        }
        for j in i..b {
            let n = self.buf[j];
            self.arity(n);
        }
    }

    /// `([params] body...)`, possibly inside a reader conditional; anything else is code.
    pub(super) fn arity(&mut self, n: Node<'a>) {
        match kind(n) {
            K::List => {
                let (s, e) = self.kids(n);
                // `(#?(:clj ^long [n] :cljs [n]) body...)`: the parameters of every platform.
                if s < e && (kind(self.buf[s]) == K::Vec || self.cond_of(self.buf[s], K::Vec)) {
                    let params = self.buf[s];
                    self.fn_body(params, s + 1, e);
                } else {
                    self.forms(s, e);
                }
                self.buf.truncate(s);
            }
            K::ReadCond => {
                let (s, e) = self.branches(n);
                for j in s..e {
                    let b = self.buf[j];
                    self.arity(b);
                }
                self.buf.truncate(s);
            }
            _ => self.form(n),
        }
    }

    /// Push the branches of a reader conditional (not its platform keywords) onto the buffer.
    pub(super) fn branches(&mut self, n: Node<'a>) -> (usize, usize) {
        let (s, e) = self.kids(n);
        let mut w = s;
        for r in (s + 1..e).step_by(2) {
            self.buf[w] = self.buf[r];
            w += 1;
        }
        self.buf.truncate(w);
        (s, w)
    }

    /// Whether `n` is a reader conditional whose branches are all of kind `k`.
    pub(super) fn cond_of(&mut self, n: Node<'a>, k: K) -> bool {
        if kind(n) != K::ReadCond {
            return false;
        }
        let (s, e) = self.branches(n);
        let yes = s < e && (s..e).all(|j| kind(self.buf[j]) == k);
        self.buf.truncate(s);
        yes
    }

    /// Whether buffered node `i` (< `b`) is the defined name: a symbol, or one per platform.
    pub(super) fn is_name_at(&mut self, i: usize, b: usize) -> bool {
        if i >= b {
            return false;
        }
        let n = self.buf[i];
        kind(n) == K::Sym || self.cond_of(n, K::Sym)
    }

    /// Parameters, then an optional `{:pre .. :post ..}` map, then the body.
    pub(super) fn fn_body(&mut self, params: Node<'a>, a: usize, b: usize) {
        let mark = self.locals.len();
        self.bind(params);
        let mut i = a;
        if i + 1 < b && kind(self.buf[i]) == K::Map {
            // In :post, `%` is the return value.
            self.locals.push("%");
            let n = self.buf[i];
            self.form(n);
            self.locals.pop();
            i += 1;
        }
        self.forms(i, b);
        self.locals.truncate(mark);
    }

    /// `(case expr test result ... default?)`: the tests are constants.
    pub(super) fn case(&mut self, a: usize, b: usize) {
        if a >= b {
            return;
        }
        let n = self.buf[a];
        self.form(n);
        let clauses = b - (a + 1);
        for k in 0..clauses / 2 {
            let test = self.buf[a + 1 + 2 * k];
            self.quoted(test);
            let result = self.buf[a + 2 + 2 * k];
            self.form(result);
        }
        if clauses % 2 == 1 {
            let default = self.buf[b - 1];
            self.form(default);
        }
    }

    /// `(binding [*x* v] body)`: the left-hand symbols are vars, not new locals.
    pub(super) fn binding(&mut self, a: usize, b: usize) {
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            self.forms(s, e);
            self.buf.truncate(s);
        } else if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        self.forms((a + 1).min(b), b);
    }

    /// `(defmethod multi dispatch-value name? [params] body)` or with arities.
    pub(super) fn defmethod(&mut self, a: usize, b: usize) {
        if a < b {
            let multi = self.buf[a];
            self.form(multi);
        }
        if a + 1 < b {
            let dispatch = self.buf[a + 1];
            self.form(dispatch);
        }
        let mark = self.locals.len();
        let mut i = a + 2;
        if self.kind_at(i, b) == K::Sym {
            let n = self.buf[i];
            self.bind(n);
            i += 1;
        }
        self.fn_tail(i.min(b), b);
        self.locals.truncate(mark);
    }

    /// `(deftype Name [fields] opts* Proto (method [this ..] ..) ...)`; same for defrecord.
    pub(super) fn deftype(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        let mut i = a;
        if self.kind_at(i, b) == K::Sym {
            let n = self.buf[i];
            self.walk_meta(n, false);
            i += 1;
        }
        if self.kind_at(i, b) == K::Vec {
            let fields = self.buf[i];
            self.bind(fields);
            i += 1;
        }
        self.specs(i, b, false);
        self.locals.truncate(mark);
    }

    /// Protocol/interface names (references) and method implementations (names are not).
    pub(super) fn specs(&mut self, a: usize, b: usize, implicit_this: bool) {
        let mut i = a;
        while i < b {
            let n = self.buf[i];
            match kind(n) {
                K::Kwd => {
                    // deftype/defrecord options: `:load-ns true`.
                    i += 2;
                    continue;
                }
                _ => self.spec_item(n, implicit_this),
            }
            i += 1;
        }
    }

    pub(super) fn spec_item(&mut self, n: Node<'a>, implicit_this: bool) {
        match kind(n) {
            K::Sym => {
                self.symbol(n, RefKind::Value);
            }
            K::List => self.method(n, implicit_this),
            K::ReadCond => {
                let (s, e) = self.branches(n);
                for j in s..e {
                    let b = self.buf[j];
                    self.spec_item(b, implicit_this);
                }
                self.buf.truncate(s);
            }
            _ => self.form(n),
        }
    }

    /// `(name [params] body)` or `(name ([params] body)+)`.
    pub(super) fn method(&mut self, list: Node<'a>, implicit_this: bool) {
        let mark = self.locals.len();
        if implicit_this {
            self.locals.push("this");
        }
        let (s, e) = self.kids(list);
        if s < e && kind(self.buf[s]) == K::Sym {
            let name = self.buf[s];
            self.walk_meta(name, false);
        }
        self.fn_tail((s + 1).min(e), e);
        self.buf.truncate(s);
        self.locals.truncate(mark);
    }

    /// `(proxy [Class Iface] [ctor args] (method [params] body) ...)`: `this` is implicit.
    pub(super) fn proxy(&mut self, a: usize, b: usize) {
        if a < b {
            let classes = self.buf[a];
            self.form(classes);
        }
        if a + 1 < b {
            let args = self.buf[a + 1];
            self.form(args);
        }
        for i in (a + 2).min(b)..b {
            let n = self.buf[i];
            if kind(n) == K::List {
                self.method(n, true);
            } else {
                self.form(n);
            }
        }
    }

    /// The target type of `extend-type`/`extend-protocol`: cljs' base types are no symbols.
    pub(super) fn type_name(&mut self, n: Node<'a>) {
        if kind(n) == K::Sym {
            let t = self.text(n);
            if matches!(t, "default" | "object" | "string" | "number" | "function" | "array")
                || matches!(t, "boolean" | "nil")
            {
                return;
            }
            self.symbol(n, RefKind::Value);
        } else {
            self.form(n);
        }
    }

    pub(super) fn extend_type(&mut self, a: usize, b: usize) {
        if a < b {
            let t = self.buf[a];
            self.type_name(t);
        }
        self.specs((a + 1).min(b), b, false);
    }

    pub(super) fn extend_protocol(&mut self, a: usize, b: usize) {
        if a < b {
            let p = self.buf[a];
            self.form(p);
        }
        for i in (a + 1).min(b)..b {
            let n = self.buf[i];
            self.extension(n);
        }
    }

    /// A type or a method implementation of `extend-protocol`, possibly per platform.
    pub(super) fn extension(&mut self, n: Node<'a>) {
        match kind(n) {
            K::List => self.method(n, false),
            K::ReadCond => {
                let (s, e) = self.branches(n);
                for j in s..e {
                    let b = self.buf[j];
                    self.extension(b);
                }
                self.buf.truncate(s);
            }
            _ => self.type_name(n),
        }
    }

    /// `(catch Class e body)`.
    pub(super) fn catch(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let class = self.buf[a];
            self.form(class);
        }
        if a + 1 < b {
            let e = self.buf[a + 1];
            self.bind(e);
        }
        self.forms((a + 2).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(. target member args)` / `(. target (member args))`.
    pub(super) fn dot(&mut self, a: usize, b: usize) {
        if a < b {
            let t = self.buf[a];
            self.form(t);
        }
        if a + 1 < b {
            let m = self.buf[a + 1];
            self.member(m);
        }
        self.forms((a + 2).min(b), b);
    }

    /// A method or field name (not a reference), or `(method args)`.
    pub(super) fn member(&mut self, m: Node<'a>) {
        match kind(m) {
            K::List => {
                let (s, e) = self.kids(m);
                self.forms((s + 1).min(e), e);
                self.buf.truncate(s);
            }
            K::Sym => {}
            _ => self.form(m),
        }
    }

    /// `(.. target member (member args) ...)`.
    pub(super) fn dotdot(&mut self, a: usize, b: usize) {
        if a < b {
            let t = self.buf[a];
            self.form(t);
        }
        for i in (a + 1).min(b)..b {
            let m = self.buf[i];
            self.member(m);
        }
    }

    /// `(-> x f (g y))`: a bare symbol step is a call.
    pub(super) fn thread(&mut self, a: usize, b: usize) {
        if a < b {
            let x = self.buf[a];
            self.form(x);
        }
        for i in (a + 1).min(b)..b {
            let step = self.buf[i];
            self.step(step);
        }
    }

    pub(super) fn step(&mut self, step: Node<'a>) {
        if kind(step) == K::Sym {
            self.symbol(step, RefKind::Call);
        } else if !self.as_thread_step(step) {
            self.form(step);
        }
    }

    /// `(-> x (as-> name body...))`: the threaded value fills the expression slot, so the
    /// step's first element is the name `as->` binds. False if `step` is not such a form.
    pub(super) fn as_thread_step(&mut self, step: Node<'a>) -> bool {
        if kind(step) != K::List {
            return false;
        }
        let (s, e) = self.kids(step);
        let head = self.buf[s..e].first().copied();
        let is_as = head.and_then(|h| self.plain_sym_text(h)).is_some_and(|t| {
            t == "as->" || t.strip_suffix("/as->").is_some_and(|ns| self.is_core_ns(ns))
        });
        if is_as && s + 1 < e {
            let head = self.buf[s];
            self.symbol(head, RefKind::Call);
            let mark = self.locals.len();
            let name = self.buf[s + 1];
            self.bind(name);
            self.forms(s + 2, e);
            self.locals.truncate(mark);
        }
        self.buf.truncate(s);
        is_as && s + 1 < e
    }

    /// `(cond-> x test step ...)`.
    pub(super) fn cond_thread(&mut self, a: usize, b: usize) {
        if a < b {
            let x = self.buf[a];
            self.form(x);
        }
        for (k, i) in ((a + 1).min(b)..b).enumerate() {
            let n = self.buf[i];
            if k % 2 == 0 {
                self.form(n);
            } else {
                self.step(n);
            }
        }
    }

    /// `(areduce a idx ret init expr)`.
    pub(super) fn areduce(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        let at = |k: usize| (a + k < b).then_some(a + k);
        if let Some(i) = at(0) {
            let n = self.buf[i];
            self.form(n);
        }
        if let Some(i) = at(3) {
            let n = self.buf[i];
            self.form(n);
        }
        for k in [1, 2] {
            if let Some(i) = at(k) {
                let n = self.buf[i];
                self.bind(n);
            }
        }
        self.forms((a + 4).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(amap a idx ret expr)`.
    pub(super) fn amap(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        for i in (a + 1).min(b)..(a + 3).min(b) {
            let n = self.buf[i];
            self.bind(n);
        }
        self.forms((a + 3).min(b), b);
        self.locals.truncate(mark);
    }
}
