//! Resolving one symbol: locals, aliases, refers, core names, classes; keywords and metadata.

use super::*;

impl<'a> Resolver<'a> {
    pub(super) fn is_local(&self, name: &str) -> bool {
        self.locals.iter().rev().any(|l| *l == name)
    }

    /// `clojure.core`, `cljs.core` or the configured core namespace: its macros are known.
    pub(super) fn is_core_ns(&self, ns: &str) -> bool {
        ns == self.env.core_ns || ns == "clojure.core" || ns == "cljs.core"
    }

    /// The platform the code at byte `at` is read for.
    pub(super) fn platform_at(&self, at: usize) -> Platform {
        // Outer branches come first, so the last branch holding `at` is the innermost.
        let branch = self.branches.iter().rev().find(|(s, e, _)| (*s..*e).contains(&at));
        match branch {
            Some((_, _, p)) => *p,
            None if self.env.core_ns == "cljs.core" => Platform::Cljs,
            None => Platform::Clj,
        }
    }

    /// The core namespace of `platform` and its public names; the file's own for a platform
    /// without a table.
    pub(super) fn core_of(&self, platform: Platform) -> (&'a str, &'a HashSet<String>) {
        let env = self.env;
        let file_is_cljs = env.core_ns == "cljs.core";
        match platform {
            Platform::Cljs if !file_is_cljs => ("cljs.core", cljs_core_publics()),
            Platform::Clj if file_is_cljs => ("clojure.core", clojure_core_publics()),
            _ => (env.core_ns, env.core_publics),
        }
    }

    /// The core namespace that has `name` referred into this namespace, for the code at `at`:
    /// the platform's; for a platform without a table, the file's or else the other one.
    pub(super) fn core_having(&self, name: &str, at: usize) -> Option<&'a str> {
        let platform = self.platform_at(at);
        let (ns, names) = self.core_of(platform);
        if self.core_has(names, name) {
            return Some(ns);
        }
        if platform == Platform::Other {
            let other = if ns == "cljs.core" { Platform::Clj } else { Platform::Cljs };
            let (ns, names) = self.core_of(other);
            return self.core_has(names, name).then_some(ns);
        }
        None
    }

    /// Whether the core namespace's `name` (one of `names`) is referred into this namespace.
    pub(super) fn core_has(&self, names: &HashSet<String>, name: &str) -> bool {
        let decl = self.env.decl;
        names.contains(name)
            && !decl.core_exclude.contains(name)
            && decl.core_only.as_ref().is_none_or(|o| o.contains(name))
            && !decl.core_rename.values().any(|v| v == name)
    }

    /// A namespace this one can name: its own, the core one, anything required or aliased,
    /// anything the store knows.
    pub(super) fn known_ns(&self, ns: &str) -> bool {
        let env = self.env;
        let decl = env.decl;
        self.is_core_ns(ns)
            || decl.name == ns
            || decl.requires.iter().any(|r| r == ns)
            || decl.macro_libs.iter().any(|r| r == ns)
            || decl.refer_all.iter().any(|r| r == ns)
            || decl.aliases.values().any(|r| r == ns)
            || env.publics.contains_key(ns)
            || env.known_nss.contains(ns)
    }

    /// The class a name denotes: imported, fully qualified (`loose`: any dotted name, else one
    /// whose last segment is capitalised), a default import, or a record/type of this namespace.
    pub(super) fn class_name(&self, name: &str, loose: bool) -> Option<String> {
        let decl = self.env.decl;
        if let Some(full) = decl.imports.get(name) {
            return Some(full.clone());
        }
        if let Some((_, last)) = name.rsplit_once('.') {
            return (loose || starts_upper(last)).then(|| name.to_string());
        }
        if let Some(c) = default_import(name) {
            return Some(c);
        }
        if starts_upper(name) && self.env.own_vars.contains(&format!("->{name}")) {
            return Some(format!("{}.{name}", decl.name.replace('-', "_")));
        }
        None
    }

    /// Resolve a symbol node, record what it refers to, and say what it is.
    pub(super) fn symbol(&mut self, node: Node<'a>, kind: RefKind) -> Res<'a> {
        let sym = self.sym_parts(node);
        if sym.meta {
            self.walk_meta(node, false);
        }
        if sym.name.is_empty() {
            return Res::Other;
        }
        match sym.ns {
            Some(ns) => self.qualified(&sym, ns, kind),
            None => self.unqualified(sym.anchor, sym.name, kind, false),
        }
    }

    pub(super) fn qualified(&mut self, sym: &Sym<'a>, ns: &'a str, kind: RefKind) -> Res<'a> {
        let env = self.env;
        let name = sym.name;
        let at = sym.anchor;
        if self.is_core_ns(ns) {
            self.push_ref(format!("{ns}/{name}"), kind, at);
            return Res::Core(name);
        }
        if let Some(target) = env.decl.aliases.get(ns) {
            if target != ns && symbolic_ns(target) {
                self.rewrite(sym.ns_start, sym.ns_start + ns.len(), target.clone());
            }
            self.push_ref(format!("{target}/{name}"), kind, at);
            return if self.is_core_ns(target) { Res::Core(name) } else { Res::Var(name) };
        }
        if self.known_ns(ns) {
            self.push_ref(format!("{ns}/{name}"), kind, at);
            return Res::Var(name);
        }
        if ns == "js" {
            return Res::Other;
        }
        if let Some(class) = self.class_name(ns, false) {
            self.push_class(class);
            return Res::Other;
        }
        if starts_upper(ns) {
            self.push_class(ns.to_string());
            return Res::Other;
        }
        self.push_unresolved(format!("{ns}/{name}"), at);
        Res::Unresolved(name)
    }

    /// `sq`: inside a syntax-quote template, where the reader resolves symbols without regard
    /// to locals and leaves `x#` gensyms alone.
    pub(super) fn unqualified(
        &mut self,
        at: Node<'a>,
        name: &'a str,
        kind: RefKind,
        sq: bool,
    ) -> Res<'a> {
        if self.anon > 0 && is_percent(name) {
            return Res::Local;
        }
        if sq {
            if name.len() > 1 && name.ends_with('#') {
                return Res::Local;
            }
        } else if self.is_local(name) {
            return Res::Local;
        }
        if is_special(name) {
            return Res::Special(name);
        }
        if name != ".." && name.len() > 1 {
            if name.starts_with('.') {
                // `.method`, `.-field`: interop on whatever the target is.
                return Res::Other;
            }
            if let Some(class) = name.strip_suffix('.') {
                let full = self.class_name(class, true).unwrap_or_else(|| class.to_string());
                self.push_class(full);
                return Res::Other;
            }
            if name.contains('.') {
                self.push_class(name.to_string());
                return Res::Other;
            }
        }
        let env = self.env;
        let decl = env.decl;
        if let Some(full) = decl.imports.get(name) {
            self.push_class(full.clone());
            return Res::Other;
        }
        if let Some(orig) = decl.core_rename.get(name) {
            let core = self.core_of(self.platform_at(at.start_byte())).0;
            self.push_ref(format!("{core}/{orig}"), kind, at);
            return Res::Core(orig.as_str());
        }
        if let Some(fqn) = decl.refers.get(name) {
            self.push_ref(fqn.clone(), kind, at);
            let core = fqn.split_once('/').is_some_and(|(ns, _)| self.is_core_ns(ns));
            return if core { Res::Core(name) } else { Res::Var(name) };
        }
        if env.own_vars.contains(name) {
            self.push_ref(format!("{}/{name}", decl.name), kind, at);
            // Inside clojure.core itself, `fn`, `let`, … are own vars and still core macros.
            return if self.is_core_ns(&decl.name) { Res::Core(name) } else { Res::Var(name) };
        }
        if let Some(core) = self.core_having(name, at.start_byte()) {
            self.push_ref(format!("{core}/{name}"), kind, at);
            return Res::Core(name);
        }
        for ns in &decl.refer_all {
            if env.publics.get(ns).is_some_and(|p| p.contains(name)) {
                self.push_ref(format!("{ns}/{name}"), kind, at);
                return Res::Var(name);
            }
        }
        if let Some(class) = self.class_name(name, false) {
            self.push_class(class);
            return Res::Other;
        }
        // In a template, a symbol that names nothing is usually a method, field or binding name
        // of the generated code; the reader qualifies it with the current namespace and moves on.
        if !sq {
            self.push_unresolved(name.to_string(), at);
        }
        Res::Unresolved(name)
    }

    // ----- keywords and metadata -------------------------------------------------------------

    /// `::alias/kw` → `:full.ns/kw`.
    pub(super) fn keyword(&mut self, node: Node<'a>) {
        let t = self.text(node);
        let Some(rest) = t.strip_prefix("::") else { return };
        let Some((alias, _)) = rest.split_once('/') else { return };
        if let Some(target) = self.env.decl.aliases.get(alias).filter(|t| symbolic_ns(t)) {
            let start = node.start_byte();
            self.rewrite(start, start + 2 + alias.len(), format!(":{target}"));
        }
    }

    /// `#::alias{...}` → `#:full.ns{...}`.
    pub(super) fn ns_map_prefix(&mut self, node: Node<'a>) {
        let Some(prefix) = crate::syntax::field(node, crate::syntax::fields().prefix) else {
            return;
        };
        if kind(prefix) != K::Kwd {
            return;
        }
        let t = self.text(prefix);
        if let Some(alias) = t.strip_prefix("::") {
            if let Some(target) = self.env.decl.aliases.get(alias).filter(|t| symbolic_ns(t)) {
                self.rewrite(prefix.start_byte(), prefix.end_byte(), format!(":{target}"));
            }
        }
    }

    /// The metadata of a node. `eval`: map values are code (metadata of collection literals and
    /// of defined names is evaluated), except `:tag`. Otherwise only keywords are rewritten.
    pub(super) fn walk_meta(&mut self, node: Node<'a>, eval: bool) {
        for m in metas(node) {
            let Some(v) = meta_value(m) else { continue };
            if !eval || kind(v) != K::Map {
                self.quoted(v);
                continue;
            }
            let (s, e) = self.kids(v);
            let mut i = s;
            while i < e {
                let k = self.buf[i];
                let tag = self.text(k) == ":tag";
                self.quoted(k);
                if i + 1 < e {
                    let val = self.buf[i + 1];
                    if tag {
                        self.quoted(val);
                    } else {
                        self.form(val);
                    }
                }
                i += 2;
            }
            self.buf.truncate(s);
        }
    }
}
