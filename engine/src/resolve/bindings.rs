//! Forms that bind locals (`let`, `loop`, `for`, `letfn`, `as->`, …) and destructuring.

use super::*;

impl<'a> Resolver<'a> {
    /// Bind the pairs of a binding vector in order: each init sees the earlier bindings.
    /// The locals stay pushed; the caller truncates.
    pub(super) fn bindings(&mut self, vec: Node<'a>) {
        if kind(vec) != K::Vec {
            self.form(vec);
            return;
        }
        let (s, e) = self.kids(vec);
        let mut j = s;
        while j < e {
            let lhs = self.buf[j];
            if j + 1 < e {
                let init = self.buf[j + 1];
                self.form(init);
            }
            self.bind(lhs);
            j += 2;
        }
        self.buf.truncate(s);
    }

    pub(super) fn let_like(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let v = self.buf[a];
            self.bindings(v);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(if-let [x init] then else)`: the else branch does not see `x`.
    pub(super) fn if_let(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let v = self.buf[a];
            self.bindings(v);
        }
        if a + 1 < b {
            let then = self.buf[a + 1];
            self.form(then);
        }
        self.locals.truncate(mark);
        self.forms((a + 2).min(b), b);
    }

    /// `for`/`doseq` bindings with `:let`, `:when` and `:while`.
    pub(super) fn comprehension(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            let mut j = s;
            while j < e {
                let lhs = self.buf[j];
                let rhs = (j + 1 < e).then(|| self.buf[j + 1]);
                j += 2;
                if kind(lhs) == K::Kwd {
                    let Some(rhs) = rhs else { break };
                    match self.text(lhs) {
                        ":let" => self.bindings(rhs),
                        _ => self.form(rhs),
                    }
                    continue;
                }
                if let Some(rhs) = rhs {
                    self.form(rhs);
                }
                self.bind(lhs);
            }
            self.buf.truncate(s);
        } else if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(letfn [(f [x] ...) (g [y] ...)] body)`: every name is visible everywhere.
    pub(super) fn letfn(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            for j in s..e {
                let spec = self.buf[j];
                if kind(spec) == K::List {
                    let (fs, fe) = self.kids(spec);
                    if fs < fe && kind(self.buf[fs]) == K::Sym {
                        let n = self.buf[fs];
                        self.bind(n);
                    }
                    self.buf.truncate(fs);
                }
            }
            for j in s..e {
                let spec = self.buf[j];
                if kind(spec) == K::List {
                    let (fs, fe) = self.kids(spec);
                    let start = if fs < fe && kind(self.buf[fs]) == K::Sym { fs + 1 } else { fs };
                    self.fn_tail(start, fe);
                    self.buf.truncate(fs);
                } else {
                    self.form(spec);
                }
            }
            self.buf.truncate(s);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(letfn* [f (fn* f ...) g (fn* g ...)] body)`.
    pub(super) fn letfn_star(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            for j in (s..e).step_by(2) {
                let n = self.buf[j];
                self.bind(n);
            }
            for j in (s..e).skip(1).step_by(2) {
                let n = self.buf[j];
                self.form(n);
            }
            self.buf.truncate(s);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(as-> expr name forms...)`.
    pub(super) fn as_thread(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        if a + 1 < b {
            let n = self.buf[a + 1];
            self.bind(n);
        }
        self.forms((a + 2).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(this-as name body...)`.
    pub(super) fn this_as(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let n = self.buf[a];
            self.bind(n);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// Push the locals a binding form introduces; `:or` defaults and lookup keys are code.
    pub(super) fn bind(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Sym => {
                let sym = self.sym_parts(node);
                if sym.meta {
                    self.walk_meta(node, false);
                }
                if !sym.name.is_empty() && sym.name != "&" {
                    self.locals.push(sym.name);
                }
            }
            K::Vec => {
                let (s, e) = self.kids(node);
                let mut j = s;
                while j < e {
                    let n = self.buf[j];
                    j += 1;
                    if kind(n) == K::Kwd {
                        if self.text(n) == ":as" && j < e {
                            let t = self.buf[j];
                            self.bind(t);
                            j += 1;
                        }
                        continue;
                    }
                    self.bind(n);
                }
                self.buf.truncate(s);
            }
            K::Map => {
                let (s, e) = self.kids(node);
                let mut or = None;
                let mut j = s;
                while j < e {
                    let k = self.buf[j];
                    let v = (j + 1 < e).then(|| self.buf[j + 1]);
                    j += 2;
                    if kind(k) != K::Kwd {
                        // `{local :key}`: the key is looked up by value.
                        self.bind(k);
                        if let Some(v) = v {
                            self.form(v);
                        }
                        continue;
                    }
                    self.keyword(k);
                    let t = self.text(k);
                    let name = t.rsplit('/').next().unwrap_or(t).trim_start_matches(':');
                    let plain = !t.get(1..).unwrap_or("").contains('/') && !t.starts_with("::");
                    match (name, v) {
                        ("keys" | "strs" | "syms", Some(v)) => self.bind_names(v),
                        ("as", Some(v)) if plain => self.bind(v),
                        ("or", Some(v)) if plain => or = Some(v),
                        (_, Some(v)) => self.form(v),
                        (_, None) => {}
                    }
                }
                // Defaults may use the names bound by this map (`{:keys [a b] :or {b a}}`).
                if let Some(or) = or {
                    if kind(or) == K::Map {
                        let (os, oe) = self.kids(or);
                        for i in (os..oe).skip(1).step_by(2) {
                            let d = self.buf[i];
                            self.form(d);
                        }
                        self.buf.truncate(os);
                    } else {
                        self.form(or);
                    }
                }
                self.buf.truncate(s);
            }
            K::ReadCond => {
                let (s, e) = self.kids(node);
                for i in (s..e).skip(1).step_by(2) {
                    let n = self.buf[i];
                    self.bind(n);
                }
                self.buf.truncate(s);
            }
            _ => {}
        }
    }

    /// The vector of `:keys`/`:strs`/`:syms`: symbols or keywords, bound by their name part.
    pub(super) fn bind_names(&mut self, v: Node<'a>) {
        if !matches!(kind(v), K::Vec | K::List | K::Set) {
            self.form(v);
            return;
        }
        let (s, e) = self.kids(v);
        for i in s..e {
            let n = self.buf[i];
            match kind(n) {
                K::Sym => self.bind(n),
                K::Kwd => {
                    self.keyword(n);
                    let t = self.text(n);
                    let name = t.rsplit('/').next().unwrap_or(t).trim_start_matches(':');
                    if !name.is_empty() {
                        self.locals.push(name);
                    }
                }
                _ => {}
            }
        }
        self.buf.truncate(s);
    }
}
