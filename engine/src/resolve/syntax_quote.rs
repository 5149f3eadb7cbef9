//! Quote and syntax-quote: symbols in a syntax-quoted template resolve as the reader would
//! qualify them, except gensyms and unquoted parts.

use super::*;

impl<'a> Resolver<'a> {
    /// Quoted data: nothing is a reference; `::alias/kw` is still resolved by the reader.
    pub(super) fn quoted(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Kwd => self.keyword(node),
            K::Sym
            | K::Str
            | K::Num
            | K::Char
            | K::Nil
            | K::Bool
            | K::Regex
            | K::Comment
            | K::SymVal => {}
            kind => {
                // Only `::` keywords matter here; most quoted data has none.
                if !self.text(node).contains("::") {
                    return;
                }
                if kind == K::NsMap {
                    self.ns_map_prefix(node);
                }
                let (s, e) = self.kids(node);
                for i in s..e {
                    let n = self.buf[i];
                    self.quoted(n);
                }
                self.buf.truncate(s);
            }
        }
    }

    /// A syntax-quote template: symbols resolve as the reader resolves them (as values, locals
    /// ignored, gensyms and special forms left alone); `~x` and `~@xs` are code.
    pub(super) fn sq(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Sym => {
                let sym = self.sym_parts(node);
                if sym.meta {
                    self.walk_meta(node, false);
                }
                if sym.name.is_empty() {
                    return;
                }
                match sym.ns {
                    Some(ns) => {
                        self.qualified(&sym, ns, RefKind::Value);
                    }
                    None => {
                        self.unqualified(sym.anchor, sym.name, RefKind::Value, true);
                    }
                }
            }
            K::Kwd => self.keyword(node),
            K::Unquote | K::UnquoteSplicing => self.each(node),
            K::Str | K::Num | K::Char | K::Nil | K::Bool | K::Regex | K::Comment | K::SymVal => {}
            kind => {
                if kind == K::NsMap {
                    self.ns_map_prefix(node);
                }
                let anon = kind == K::AnonFn;
                let cond = kind == K::ReadCond;
                if anon {
                    self.anon += 1;
                }
                let (s, e) = self.kids(node);
                if self.kids_meta && kind != K::SynQuote {
                    self.walk_meta(node, false);
                }
                // `(. target member args)`: the member is no symbol to resolve.
                let dot = kind == K::List && s < e && self.plain_sym_text(self.buf[s]) == Some(".");
                for (k, i) in (s..e).enumerate() {
                    if cond && k % 2 == 0 {
                        continue;
                    }
                    let n = self.buf[i];
                    if dot && k == 2 {
                        if self::kind(n) == K::List {
                            let (ms, me) = self.kids(n);
                            for j in (ms + 1).min(me)..me {
                                let m = self.buf[j];
                                self.sq(m);
                            }
                            self.buf.truncate(ms);
                        }
                        continue;
                    }
                    self.sq(n);
                }
                self.buf.truncate(s);
                if anon {
                    self.anon -= 1;
                }
            }
        }
    }
}
