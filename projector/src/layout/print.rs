//! Printing a form tree through a `pretty` document, top-level forms one after another.

use super::*;
use formdb_engine::syntax::{KindOf, NodeKind};

/// The parse of a text layout may walk: it parses, and no form nests past the depth gate (the
/// layout recurses once per level).
pub(super) fn parse_checked(source: &str) -> Result<Tree, LayoutError> {
    let tree = syntax::parse(source);
    if let Some(e) =
        syntax::first_error(&tree, source).or_else(|| syntax::too_deep_error(&tree, source))
    {
        return Err(LayoutError::Syntax { line: e.pos.line, col: e.pos.col, message: e.message });
    }
    Ok(tree)
}

#[derive(PartialEq, Eq, Clone, Copy)]
pub(super) enum BlockKind {
    Empty,
    Comments,
    Form,
}

/// Lay out every top-level form and comment of `source`; returns the text (no final newline)
/// and the number of forms.
pub(super) fn layout_top(
    source: &str,
    opts: &LayoutOptions,
) -> Result<(String, usize), LayoutError> {
    let tree = parse_checked(source)?;
    let root = tree.root_node();
    let mut blocks: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut cur_kind = BlockKind::Empty;
    let mut forms = 0;
    let mut prev: Option<Node> = None;
    let mut cursor = root.walk();
    for child in root.children(&mut cursor) {
        let gap_start = prev.map_or(0, |p| p.end_byte());
        let gap = &source[gap_start..child.start_byte()];
        let prev_comment = prev.is_some_and(|p| p.node_kind() == NodeKind::Comment);
        let newlines = gap.matches('\n').count() + usize::from(prev_comment);
        if child.node_kind() == NodeKind::Comment {
            let text = syntax::text(child, source).trim_end();
            if cur_kind == BlockKind::Form && newlines == 0 {
                cur.push(' ');
                cur.push_str(text);
            } else {
                if cur_kind == BlockKind::Form || (cur_kind == BlockKind::Comments && newlines > 1)
                {
                    blocks.push(std::mem::take(&mut cur));
                } else if cur_kind == BlockKind::Comments {
                    cur.push('\n');
                }
                cur.push_str(text);
                cur_kind = BlockKind::Comments;
            }
        } else if child.is_named() {
            // A top-level `#_` discard is kept but is not a form.
            forms += usize::from(child.node_kind() != NodeKind::Dis);
            let laid = layout_node(child, source, opts.width);
            match cur_kind {
                BlockKind::Comments if newlines <= 1 => cur.push('\n'),
                BlockKind::Empty => {}
                _ => blocks.push(std::mem::take(&mut cur)),
            }
            cur.push_str(&laid);
            cur_kind = BlockKind::Form;
        }
        prev = Some(child);
    }
    if cur_kind != BlockKind::Empty {
        blocks.push(cur);
    }
    Ok((blocks.join("\n\n"), forms))
}

/// Lay out one parsed form at column 0.
pub(super) fn layout_node(node: Node, src: &str, width: usize) -> String {
    let form = convert(node, src);
    let arena = Arena::new();
    let b = Builder { a: &arena, width, unusual: Cell::new(false) };
    let (doc, _) = b.form(&form, 0, Ctx::None);
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = doc.render_fmt(width, &mut out);
    // The document indents the way cljfmt does; only around comments, discards, reader
    // conditional heads and wide characters may the two disagree, and there cljfmt's own rules
    // get the last word.
    let unusual = b.unusual.get() || !syntax::text(node, src).is_ascii();
    #[cfg(test)]
    if tests::VERIFY.with(Cell::get) {
        let fixed = reindent(&out);
        if fixed != out {
            tests::REINDENTED.with(|r| r.borrow_mut().push((unusual, out.clone())));
        }
    }
    if unusual {
        reindent(&out)
    } else {
        out
    }
}

pub(super) type Doc<'a> = RefDoc<'a, ()>;
pub(super) type Bld<'a> = DocBuilder<'a, Arena<'a, ()>, ()>;

/// What a layout needs to know about a child: its width on one line (None when it must break)
/// and the narrowest width any of its layouts needs, counting the closing brackets that follow
/// it on its last line.
#[derive(Clone, Copy, Debug)]
pub(super) struct M {
    pub(super) flat: Option<usize>,
    pub(super) min: usize,
    /// The width it needs when every call in it hangs its arguments after the first one (the
    /// layout people expect): where that fits, nothing gets squeezed.
    pub(super) hang: usize,
}

pub(super) fn add_flat(a: Option<usize>, b: Option<usize>, sep: usize) -> Option<usize> {
    Some(a? + sep + b?)
}

pub(super) fn width_of(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

/// How the parent lays a collection out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ctx {
    None,
    /// The binding vector of `let` and friends: pairs.
    Bindings,
    /// The binding vector of `letfn`: its lists are function bodies.
    LetfnVec,
    /// A method in `reify`, `deftype`, `letfn`…: inner indentation, arglist on the head line.
    Method,
    /// A `defprotocol` signature: inner indentation, all arglists on the head line if they fit.
    Sig,
}

/// A laid-out child of a collection.
#[derive(Clone, Copy)]
pub(super) struct Elem<'a> {
    pub(super) doc: Doc<'a>,
    pub(super) m: M,
    /// A comment or stray discard on its own line.
    pub(super) loose: bool,
    /// Ends with a `;` comment: the next thing starts on a new line.
    pub(super) breaks_after: bool,
    pub(super) atom: bool,
    /// Its width on one line plus the closing brackets that follow it.
    pub(super) fit: Option<usize>,
}

/// How a list is shaped.
#[derive(Clone, Copy, Debug)]
pub(super) enum Shape {
    /// Arguments aligned with the first one, or all one column in.
    Default,
    /// `[:block n]`: n arguments on the head line, the body two columns in.
    Block(usize),
    /// `[:inner 0]`: everything after the head line two columns in; n arguments stay on the
    /// head line if they fit.
    Inner(usize),
}

pub(super) struct Builder<'a> {
    pub(super) a: &'a Arena<'a, ()>,
    pub(super) width: usize,
    /// Set when the form holds something the document may indent differently from cljfmt.
    pub(super) unusual: Cell<bool>,
}

impl<'a> Builder<'a> {
    pub(super) fn b(&self, d: Doc<'a>) -> Bld<'a> {
        self.a.nil().append(d)
    }

    pub(super) fn open(&self, o: Open<'a>) -> Bld<'a> {
        self.a.text(o.pre).append(o.delim)
    }

    pub(super) fn form(&self, f: &Form<'a>, trail: usize, ctx: Ctx) -> (Doc<'a>, M) {
        self.form_in(f, trail, ctx, false)
    }

    /// A form; with `meta_break`, a form with metadata may break after each `^meta`, the form
    /// under its metadata (only where the current nesting is where cljfmt puts an element).
    pub(super) fn form_in(
        &self,
        f: &Form<'a>,
        trail: usize,
        ctx: Ctx,
        meta_break: bool,
    ) -> (Doc<'a>, M) {
        let (body, bm) = self.body(f, trail, ctx);
        if f.metas.is_empty() && f.pre.is_empty() {
            return (body, bm);
        }
        let sep = || if meta_break { self.a.line() } else { self.a.text(" ") };
        let mut d = self.a.nil();
        let mut flat = Some(0);
        let mut lead = 0;
        let mut min = 0;
        for meta in &f.metas {
            let (md, mm) = self.form(meta, 0, Ctx::None);
            d = d.append(md).append(sep());
            flat = add_flat(flat, mm.flat, 1);
            lead += mm.flat.unwrap_or(mm.min) + 1;
            min = min.max(mm.min);
        }
        let (pd, pflat) = self.extras(&f.pre);
        d = d.append(pd).append(body);
        flat = add_flat(add_flat(flat, pflat, 0), bm.flat, 0);
        if meta_break {
            let min = min.max(bm.min).min(lead + bm.min);
            (d.group().into_doc(), M { flat, min, hang: min.max(bm.hang) })
        } else {
            (d.into_doc(), M { flat, min: lead + bm.min, hang: lead + bm.hang })
        }
    }

    /// Discards and comments inside a prefix: each followed by a space or a line break.
    pub(super) fn extras(&self, items: &[Item<'a>]) -> (Bld<'a>, Option<usize>) {
        if !items.is_empty() {
            self.unusual.set(true);
        }
        let mut d = self.a.nil();
        let mut flat = Some(0);
        for item in items {
            match item {
                Item::Form { form, .. } => {
                    let (fd, fm) = self.form(form, 0, Ctx::None);
                    d = d.append(fd).append(" ");
                    flat = add_flat(flat, fm.flat, 1);
                }
                Item::Comment { text, .. } => {
                    d = d.append(*text).append(self.a.hardline());
                    flat = None;
                }
            }
        }
        (d, flat)
    }

    pub(super) fn body(&self, f: &Form<'a>, trail: usize, ctx: Ctx) -> (Doc<'a>, M) {
        match &f.body {
            Body::Atom(t) => self.atom(t, trail),
            Body::Wrap { prefix, space, extras, inner } => {
                let mut w = width_of(prefix);
                let mut d = self.a.text(*prefix);
                // `~ @x` must not become `~@x`.
                let glue_hazard = prefix.ends_with('~')
                    && inner.metas.is_empty()
                    && matches!(inner.body, Body::Wrap { prefix: p, .. } if p.starts_with('@'));
                if *space || glue_hazard {
                    d = d.append(" ");
                    w += 1;
                }
                let (ed, eflat) = self.extras(extras);
                let (id, im) = self.form(inner, trail, Ctx::None);
                let flat = add_flat(add_flat(Some(w), eflat, 0), im.flat, 0);
                (d.append(ed).append(id).into_doc(), M { flat, min: w + im.min, hang: w + im.hang })
            }
            Body::Coll { open, close, kind, items } => {
                self.coll(*open, close, *kind, items, trail, ctx)
            }
        }
    }

    pub(super) fn atom(&self, t: &'a str, trail: usize) -> (Doc<'a>, M) {
        if !t.contains('\n') {
            let w = width_of(t);
            let m = M { flat: Some(w), min: w + trail, hang: w + trail };
            return (self.a.text(t).into_doc(), m);
        }
        // Lines after the first are printed from column 0, exactly as written.
        let mut lines = t.split('\n');
        let first = lines.next().unwrap_or("");
        let mut rest = self.a.nil();
        let mut last = first;
        for line in lines {
            rest = rest.append(self.a.hardline()).append(line);
            last = line;
        }
        let rest = rest.into_doc();
        let a = self.a;
        let tail = self.a.nesting(move |n| a.nil().append(rest).nest(-(n as isize)).into_doc());
        let min = width_of(first).max(width_of(last) + trail);
        (self.a.text(first).append(tail).into_doc(), M { flat: None, min, hang: min })
    }

    pub(super) fn coll(
        &self,
        open: Open<'a>,
        close: &'a str,
        kind: CollKind,
        items: &[Item<'a>],
        trail: usize,
        ctx: Ctx,
    ) -> (Doc<'a>, M) {
        let inner_trail = trail + width_of(close);
        if matches!(kind, CollKind::List | CollKind::AnonFn) {
            return self.list(open, close, items, trail, ctx);
        }
        // cljfmt's `[:inner 1]` rules look at the first element of whatever holds the list, so
        // `[proxy (f …)]` indents `(f …)` like a method of `proxy`.
        let first_sym = items.iter().find_map(|i| match i {
            Item::Form { form, .. } if !form.is_discard() => Some(form.sym),
            _ => None,
        });
        let deep = match first_sym.flatten() {
            Some("defprotocol") => Ctx::Sig,
            Some(name) if has_method_children(name) => Ctx::Method,
            _ if ctx == Ctx::LetfnVec => Ctx::Method,
            _ => Ctx::None,
        };
        let child = |idx: usize, f: &Form| {
            let list = f.is_bare(CollKind::List);
            if list && (idx >= 1 || ctx == Ctx::LetfnVec) {
                (deep, true)
            } else {
                (Ctx::None, true)
            }
        };
        match kind {
            CollKind::Map | CollKind::NsMap | CollKind::ReaderCond => {
                let elems = self.elems(items, inner_trail, &child);
                self.seq(open, close, &elems, 2, false)
            }
            _ => {
                let elems = self.elems(items, inner_trail, &child);
                if ctx == Ctx::Bindings {
                    return self.seq(open, close, &elems, 2, false);
                }
                // `[lib :as x :refer [y]]`: the keyword options a pair to a line.
                let forms: Vec<&Form> = items
                    .iter()
                    .filter_map(|i| match i {
                        Item::Form { form, .. } if !form.is_discard() => Some(form),
                        _ => None,
                    })
                    .collect();
                let pairs = (kind == CollKind::Vector && elems.len() == forms.len())
                    .then(|| keyword_pairs_from(&forms).filter(|from| *from == 1))
                    .flatten();
                if let Some(from) = pairs {
                    let mut chunks = elems[..from].to_vec();
                    chunks.extend(self.chunked(&elems[from..], 2));
                    return self.seq(open, close, &chunks, 1, false);
                }
                let fill = elems.iter().all(|e| e.atom && !e.breaks_after);
                self.seq(open, close, &elems, 1, fill)
            }
        }
    }

    /// Lay out the children of a collection: discards stick to a neighbour, trailing comments
    /// to the element before them.
    pub(super) fn elems(
        &self,
        items: &[Item<'a>],
        trail: usize,
        ctx_of: &dyn Fn(usize, &Form<'a>) -> (Ctx, bool),
    ) -> Vec<Elem<'a>> {
        let last_form = items.iter().rposition(|i| matches!(i, Item::Form { .. }));
        let mut out: Vec<Elem<'a>> = Vec::new();
        let mut pending: Vec<(Doc<'a>, M)> = Vec::new();
        let mut idx = 0;
        let attachable =
            |out: &Vec<Elem<'a>>| out.last().is_some_and(|e| !e.loose && !e.breaks_after);
        for (i, item) in items.iter().enumerate() {
            match item {
                Item::Form { form, comma } => {
                    let t = if Some(i) == last_form { trail } else { 0 };
                    let (ctx, meta_break) =
                        if form.is_discard() { (Ctx::None, false) } else { ctx_of(idx, form) };
                    let (mut d, mut m) = self.form_in(form, t, ctx, meta_break);
                    if *comma {
                        d = self.b(d).append(",").into_doc();
                        m.flat = m.flat.map(|w| w + 1);
                        m.min += 1;
                    }
                    if form.is_discard() {
                        self.unusual.set(true);
                        // A short discard goes in front of the next form (cljfmt counts them
                        // when it looks for the first body form of a block), or after the last
                        // one; a long one gets a line of its own.
                        if m.flat.is_some_and(|w| w <= self.width / 3) {
                            pending.push((d, m));
                        } else {
                            let attach = attachable(&out);
                            self.flush_pending(&mut pending, &mut out, attach);
                            pending.push((d, m));
                            self.flush_pending(&mut pending, &mut out, false);
                        }
                        continue;
                    }
                    let mut atom = form.is_flat_atom();
                    for (pd, pm) in pending.drain(..).rev() {
                        d = self.b(pd).append(" ").append(d).into_doc();
                        let lead = pm.flat.unwrap_or(pm.min) + 1;
                        m = M {
                            flat: add_flat(pm.flat, m.flat, 1),
                            min: (lead + m.min).max(pm.min),
                            hang: (lead + m.hang).max(pm.hang),
                        };
                        atom = false;
                    }
                    let fit = m.flat.map(|w| w + t);
                    out.push(Elem { doc: d, m, loose: false, breaks_after: false, atom, fit });
                    idx += 1;
                }
                Item::Comment { text, own_line } => {
                    self.unusual.set(true);
                    let attach = attachable(&out);
                    self.flush_pending(&mut pending, &mut out, attach);
                    if !own_line && attachable(&out) {
                        let prev = out.last_mut().expect("attachable");
                        prev.doc = self.b(prev.doc).append(" ").append(*text).into_doc();
                        prev.breaks_after = true;
                        prev.m.flat = None;
                        prev.fit = None;
                        prev.atom = false;
                    } else {
                        let w = width_of(text);
                        out.push(Elem {
                            doc: self.a.text(*text).into_doc(),
                            m: M { flat: None, min: w, hang: w },
                            loose: true,
                            breaks_after: true,
                            atom: false,
                            fit: None,
                        });
                    }
                }
            }
        }
        let attach = attachable(&out);
        self.flush_pending(&mut pending, &mut out, attach);
        out
    }

    pub(super) fn flush_pending(
        &self,
        pending: &mut Vec<(Doc<'a>, M)>,
        out: &mut Vec<Elem<'a>>,
        attach: bool,
    ) {
        if pending.is_empty() {
            return;
        }
        let mut d = self.a.nil();
        let mut m = M { flat: Some(0), min: 0, hang: 0 };
        for (i, (pd, pm)) in pending.drain(..).enumerate() {
            if i > 0 {
                d = d.append(" ");
            }
            d = d.append(pd);
            m = M {
                flat: add_flat(m.flat, pm.flat, usize::from(i > 0)),
                min: m.min.max(pm.min),
                hang: m.hang.max(pm.hang),
            };
        }
        match out.last_mut() {
            Some(prev) if attach => {
                prev.doc = self.b(prev.doc).append(" ").append(d).into_doc();
                let tail = m.flat.unwrap_or(m.min) + 1;
                prev.m = M {
                    flat: add_flat(prev.m.flat, m.flat, 1),
                    min: prev.m.min + tail,
                    hang: prev.m.hang + tail,
                };
                prev.fit = add_flat(prev.fit, m.flat, 1);
                prev.atom = false;
            }
            _ => out.push(Elem {
                doc: d.into_doc(),
                m,
                loose: true,
                breaks_after: true,
                atom: false,
                fit: None,
            }),
        }
    }

    /// Group elements into chunks of `size` forms (pairs for maps and bindings); comments and
    /// stray discards between chunks are chunks of their own.
    pub(super) fn chunk(elems: &[Elem<'a>], size: usize) -> Vec<Vec<Elem<'a>>> {
        let mut out = Vec::new();
        let mut cur: Vec<Elem<'a>> = Vec::new();
        let mut forms = 0;
        for e in elems {
            if e.loose && forms == 0 {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                out.push(vec![*e]);
                continue;
            }
            cur.push(*e);
            if !e.loose {
                forms += 1;
                if forms == size.max(1) {
                    out.push(std::mem::take(&mut cur));
                    forms = 0;
                }
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    /// One chunk as a single element: a pair keeps its value after the key when that can fit,
    /// else puts it under the key.
    pub(super) fn chunk_elem(&self, chunk: &[Elem<'a>]) -> Elem<'a> {
        if chunk.len() == 1 {
            return chunk[0];
        }
        let last = chunk[chunk.len() - 1];
        if chunk.len() == 2 && !chunk[0].loose && !chunk[0].breaks_after && !chunk[1].loose {
            let (k, v) = (chunk[0], chunk[1]);
            let width = self.width;
            let spaced = self.b(k.doc).append(" ").append(v.doc).into_doc();
            let broken = self.b(k.doc).append(self.a.line()).append(v.doc).into_doc();
            let doc = self
                .a
                .column(move |c| {
                    let Some(kw) = k.m.flat else { return broken };
                    let hang = c + kw + 1;
                    // After the key where it can hang there; else under the key if it fits
                    // there on one line or hanging; else after the key if it fits at all.
                    let flat_under = v.fit.is_some_and(|f| c + f <= width);
                    if hang + v.m.hang <= width {
                        spaced
                    } else if flat_under || c + v.m.hang <= width {
                        broken
                    } else if hang + v.m.min <= width {
                        spaced
                    } else {
                        broken
                    }
                })
                .group()
                .into_doc();
            let min = match k.m.flat {
                Some(kw) => (kw + 1 + v.m.min).min(k.m.min.max(v.m.min)),
                None => k.m.min.max(v.m.min),
            };
            let hang = match k.m.flat {
                Some(kw) => kw + 1 + v.m.hang,
                None => k.m.hang.max(v.m.hang),
            };
            let m = M { flat: add_flat(k.m.flat, v.m.flat, 1), min, hang };
            let fit = add_flat(k.m.flat, v.fit, 1);
            return Elem { doc, m, loose: false, breaks_after: v.breaks_after, atom: false, fit };
        }
        let doc = self.join(chunk, self.a.line()).group().into_doc();
        let mut flat = Some(0);
        for (i, e) in chunk.iter().enumerate() {
            flat = add_flat(flat, e.m.flat, usize::from(i > 0));
        }
        let min = chunk.iter().map(|e| e.m.min).max().unwrap_or(0);
        let hang = chunk.iter().map(|e| e.m.hang).max().unwrap_or(0);
        let fit = match (flat, last.fit, last.m.flat) {
            (Some(f), Some(lf), Some(lw)) => Some(f + lf - lw),
            _ => None,
        };
        Elem {
            doc,
            m: M { flat, min, hang },
            loose: chunk[0].loose,
            breaks_after: last.breaks_after,
            atom: false,
            fit,
        }
    }

    /// Join elements with `sep`, or a hard line break around comments.
    pub(super) fn join(&self, elems: &[Elem<'a>], sep: Bld<'a>) -> Bld<'a> {
        let mut d = self.a.nil();
        for (i, e) in elems.iter().enumerate() {
            if i > 0 {
                let prev = elems[i - 1];
                if prev.breaks_after || e.loose {
                    d = d.append(self.a.hardline());
                } else {
                    d = d.append(sep.clone());
                }
            }
            d = d.append(e.doc);
        }
        d
    }

    pub(super) fn chunked(&self, elems: &[Elem<'a>], size: usize) -> Vec<Elem<'a>> {
        if size <= 1 {
            return elems.to_vec();
        }
        Self::chunk(elems, size).iter().map(|c| self.chunk_elem(c)).collect()
    }

    pub(super) fn close_doc(&self, last: Option<&Elem<'a>>, close: &'a str) -> Bld<'a> {
        if last.is_some_and(|e| e.breaks_after) {
            self.a.hardline().append(close)
        } else {
            self.a.text(close)
        }
    }

    pub(super) fn flat_of(open: Open<'a>, close: &str, elems: &[Elem<'a>]) -> Option<usize> {
        let mut flat = Some(open.width() + width_of(close));
        for (i, e) in elems.iter().enumerate() {
            if e.breaks_after {
                return None;
            }
            flat = add_flat(flat, e.m.flat, usize::from(i > 0));
        }
        flat
    }

    /// Vectors, maps, sets, reader conditionals: every element aligned one column after the
    /// opening bracket.
    pub(super) fn seq(
        &self,
        open: Open<'a>,
        close: &'a str,
        elems: &[Elem<'a>],
        size: usize,
        fill: bool,
    ) -> (Doc<'a>, M) {
        let ow = open.width();
        if elems.is_empty() {
            let w = ow + width_of(close);
            let m = M { flat: Some(w), min: w, hang: w };
            return (self.open(open).append(close).into_doc(), m);
        }
        let chunks = self.chunked(elems, size);
        let sep = if fill { self.a.softline() } else { self.a.line() };
        let body = self.join(&chunks, sep);
        let close_d = self.close_doc(elems.last(), close);
        let doc = self.open(open).append(body.append(close_d).align()).group().into_doc();
        let min = ow + chunks.iter().map(|e| e.m.min).max().unwrap_or(0);
        let hang = ow + chunks.iter().map(|e| e.m.hang).max().unwrap_or(0);
        (doc, M { flat: Self::flat_of(open, close, elems), min, hang })
    }

    pub(super) fn list(
        &self,
        open: Open<'a>,
        close: &'a str,
        items: &[Item<'a>],
        trail: usize,
        ctx: Ctx,
    ) -> (Doc<'a>, M) {
        let forms: Vec<&Form<'a>> = items
            .iter()
            .filter_map(|i| match i {
                Item::Form { form, .. } if !form.is_discard() => Some(form),
                _ => None,
            })
            .collect();
        let name = forms.first().and_then(|f| f.sym).unwrap_or("");
        let shape = match ctx {
            Ctx::Method => Shape::Inner(usize::from(
                forms.get(1).is_some_and(|f| f.coll_kind() == Some(CollKind::Vector)),
            )),
            Ctx::Sig => Shape::Inner(
                forms[1.min(forms.len())..]
                    .iter()
                    .take_while(|f| f.coll_kind() == Some(CollKind::Vector))
                    .count(),
            ),
            _ => shape_of(name, &forms),
        };
        // A break under an argument's metadata lands where cljfmt puts the argument (the first
        // argument's doc is nested back to the list indentation where it is aligned against);
        // not under the head's.
        let meta_break = |idx: usize| idx >= 1;
        let child_ctx = move |idx: usize, f: &Form| -> Ctx {
            if idx == 0 {
                Ctx::None
            } else if idx == 1 && binds_first_arg(name) && f.is_bare(CollKind::Vector) {
                Ctx::Bindings
            } else if idx == 1 && name == "letfn" && f.is_bare(CollKind::Vector) {
                Ctx::LetfnVec
            } else if name == "defprotocol" && f.is_bare(CollKind::List) {
                Ctx::Sig
            } else if has_method_children(name) && f.is_bare(CollKind::List) {
                Ctx::Method
            } else {
                Ctx::None
            }
        };
        let child = move |idx: usize, f: &Form| (child_ctx(idx, f), meta_break(idx));
        let elems = self.elems(items, trail + width_of(close), &child);
        let odd_head = forms.first().is_some_and(|f| f.coll_kind() == Some(CollKind::ReaderCond));
        if odd_head || elems.first().is_some_and(|e| e.loose || e.m.flat.is_none()) {
            self.unusual.set(true);
        }
        if elems.is_empty() || elems[0].loose {
            return self.seq(open, close, &elems, 1, false);
        }
        let body_chunk = body_chunk_size(name, &forms);
        match shape {
            Shape::Default => {
                let pairs =
                    if elems.len() == forms.len() { keyword_pairs_from(&forms[1..]) } else { None };
                let arity = forms[0].coll_kind() == Some(CollKind::Vector);
                self.default_list(open, close, &elems, pairs, arity)
            }
            Shape::Block(n) => self.block_list(open, close, &elems, n, false, body_chunk),
            Shape::Inner(n) => self.block_list(open, close, &elems, n, true, body_chunk),
        }
    }

    /// cljfmt's default list indentation: arguments aligned with the first argument when it is
    /// on the head's line, else all one column in from the paren.
    pub(super) fn default_list(
        &self,
        open: Open<'a>,
        close: &'a str,
        elems: &[Elem<'a>],
        pairs: Option<usize>,
        arity: bool,
    ) -> (Doc<'a>, M) {
        let ow = open.width();
        let head = elems[0];
        let rest = &elems[1..];
        let flat = Self::flat_of(open, close, elems);
        if rest.is_empty() {
            let d = self.open(open).append(head.doc).append(self.close_doc(Some(&head), close));
            let m = M { flat, min: ow + head.m.min, hang: ow + head.m.hang };
            return (d.align().into_doc(), m);
        }
        let close_d = self.close_doc(rest.last(), close);
        // Keyword arguments (`:k v`) go a pair to a line.
        let (rest, shift) = match pairs {
            Some(from) => {
                let mut chunks = rest[..from].to_vec();
                chunks.extend(self.chunked(&rest[from..], 2));
                (chunks, from > 0)
            }
            None => (rest.to_vec(), true),
        };
        let rest = &rest[..];
        let args = self.join(rest, self.a.line());
        let args_min = rest.iter().map(|e| e.m.min).max().unwrap_or(0);
        let args_hang = rest.iter().map(|e| e.m.hang).max().unwrap_or(0);
        let a_args = if shift {
            self.join(&self.shift_first(rest, head.m.flat), self.a.line())
        } else {
            args.clone()
        };
        let a_doc =
            self.b(head.doc).append(" ").append(a_args.append(close_d.clone()).align()).into_doc();
        let first_sep =
            if head.breaks_after || rest[0].loose { self.a.hardline() } else { self.a.line() };
        let b_doc = self
            .b(head.doc)
            .append(first_sep.append(args).append(close_d).nest(ow as isize))
            .into_doc();
        let b_min = ow + head.m.min.max(args_min);
        let args_fit = rest.iter().map(|e| e.fit).collect::<Option<Vec<_>>>();
        let args_fit = args_fit.and_then(|f| f.into_iter().max());
        let (choice, min, hang) = if head.breaks_after || rest[0].loose || arity {
            // A function arity (`([x] body)`) keeps its body under the arglist.
            (b_doc, b_min, ow + head.m.hang.max(args_hang))
        } else {
            let width = self.width;
            let hm = head.m;
            let choice = self
                .a
                .column(move |c| {
                    let Some(hw) = hm.flat else { return a_doc };
                    let hang = c + hw + 1;
                    // Aligned after the first argument where everything in them can hang
                    // too; else one column in if they fit there on one line each or hanging;
                    // else whichever needs less width.
                    let flat_b = args_fit.is_some_and(|f| c + f <= width);
                    let a_need = hang + args_min;
                    let b_need = c + hm.min.max(args_min);
                    if hang + args_hang <= width {
                        a_doc
                    } else if flat_b || c + args_hang <= width {
                        b_doc
                    } else if a_need <= width || a_need <= b_need {
                        a_doc
                    } else {
                        b_doc
                    }
                })
                .into_doc();
            let a_min = ow + hm.flat.unwrap_or(hm.min) + 1 + args_min;
            let hang = match hm.flat {
                Some(hw) => ow + hw + 1 + args_hang,
                None => a_min,
            };
            (choice, a_min.min(b_min), hang)
        };
        let doc = self.open(open).append(choice).align().group().into_doc();
        (doc, M { flat, min, hang })
    }

    /// Elements aligned after the head, the first one nested back to the paren's column plus
    /// the opening's width: where cljfmt puts a line that breaks inside the first argument's
    /// metadata (its list indentation for index 1).
    pub(super) fn shift_first(
        &self,
        elems: &[Elem<'a>],
        head_flat: Option<usize>,
    ) -> Vec<Elem<'a>> {
        let mut out = elems.to_vec();
        if let (Some(hw), Some(first)) = (head_flat, out.first_mut()) {
            first.doc = self.b(first.doc).nest(-(hw as isize + 1)).into_doc();
        }
        out
    }

    /// `[:block n]` and `[:inner 0]` lists: the head and up to `n` arguments on the first line,
    /// the rest two columns in from the paren (`#(` three from the `#`).
    pub(super) fn block_list(
        &self,
        open: Open<'a>,
        close: &'a str,
        elems: &[Elem<'a>],
        n: usize,
        inner: bool,
        body_chunk: usize,
    ) -> (Doc<'a>, M) {
        let ow = open.width();
        let ind = (ow + 1) as isize;
        let head = elems[0];
        let rest = &elems[1..];
        // The segment: the first n forms after the head, with any comments among them.
        let mut seg_len = 0;
        let mut seen = 0;
        while seg_len < rest.len() && seen < n {
            if !rest[seg_len].loose {
                seen += 1;
            }
            seg_len += 1;
        }
        let (seg, body) = rest.split_at(seg_len);
        let comment_after_head = head.breaks_after || rest.first().is_some_and(|e| e.loose);
        let mut d = self.open(open).append(head.doc);
        let mut head_line = ow + head.m.flat.unwrap_or(head.m.min);
        let mut head_hang = head_line;
        if !seg.is_empty() {
            if comment_after_head {
                let seg_d = self.join(seg, self.a.line());
                let nest = if inner { ind } else { ow as isize };
                d = d.append(self.a.hardline().append(seg_d).nest(nest));
            } else {
                // The segment after the head, or (when it cannot fit there but fits better)
                // on the next line: two columns in for inner forms, one for blocks (cljfmt's
                // list indentation for the first argument).
                let seg_hang = if inner {
                    seg[0].m.hang
                } else {
                    seg.iter().map(|e| e.m.hang).max().unwrap_or(0)
                };
                let (same, next, seg_min) = if inner {
                    let seg_d = self.join(seg, self.a.line());
                    let same = self.a.text(" ").append(seg_d.clone().nest(ind)).group();
                    let next = self.a.line().append(seg_d).nest(ind).group();
                    (same, next, seg[0].m.min)
                } else {
                    let seg_min = seg.iter().map(|e| e.m.min).max().unwrap_or(0);
                    let next =
                        self.a.line().append(self.join(seg, self.a.line())).nest(ow as isize);
                    let first = self.shift_first(seg, head.m.flat);
                    let same =
                        self.a.text(" ").append(self.join(&first, self.a.line()).group().align());
                    (same, next, seg_min)
                };
                let (same, next) = (same.into_doc(), next.into_doc());
                let width = self.width;
                let flat_head = head.m.flat.is_some();
                d = d.append(self.a.column(move |c| {
                    if flat_head && c + 1 + seg_min > width {
                        next
                    } else {
                        same
                    }
                }));
                head_line += 1 + seg_min;
                head_hang += 1 + seg_hang;
            }
        }
        let last_before = seg.last().unwrap_or(&head);
        let mut min = head_line;
        let mut hang = head_hang;
        if body.is_empty() {
            d = d.append(self.close_doc(Some(last_before), close));
        } else {
            let chunks = self.chunked(body, body_chunk);
            let first_sep = if last_before.breaks_after || chunks[0].loose {
                self.a.hardline()
            } else {
                self.a.line()
            };
            let body_d = first_sep
                .append(self.join(&chunks, self.a.line()))
                .append(self.close_doc(body.last(), close));
            d = d.append(body_d.nest(ind));
            min = min.max(ind as usize + chunks.iter().map(|e| e.m.min).max().unwrap_or(0));
            hang = hang.max(ind as usize + chunks.iter().map(|e| e.m.hang).max().unwrap_or(0));
        }
        let doc = d.align().group().into_doc();
        (doc, M { flat: Self::flat_of(open, close, elems), min, hang })
    }
}

/// Where keyword arguments start: `(f :k v :k v)` from 0, `(assoc m :k v)` from 1.
pub(super) fn keyword_pairs_from(args: &[&Form]) -> Option<usize> {
    let keyword =
        |f: &Form| f.metas.is_empty() && matches!(f.body, Body::Atom(t) if t.starts_with(':'));
    (0..=1).find(|&from| {
        let rest = args.get(from..).unwrap_or(&[]);
        !rest.is_empty() && rest.len() % 2 == 0 && rest.iter().step_by(2).all(|f| keyword(f))
    })
}

/// The shape of a list from its head symbol (cljfmt's table; the first spec decides).
pub(super) fn shape_of(name: &str, forms: &[&Form]) -> Shape {
    let args = forms.len().saturating_sub(1);
    let is_vec = |i: usize| forms.get(i).is_some_and(|f| f.coll_kind() == Some(CollKind::Vector));
    let is_sym = |i: usize| forms.get(i).is_some_and(|f| f.sym.is_some());
    let inner_args = || -> usize {
        let n = match name {
            "defn" | "defn-" | "defmacro" => 1 + usize::from(is_vec(2)),
            "fn" | "bound-fn" | "rfn" => {
                if is_vec(1) {
                    1
                } else if is_sym(1) {
                    1 + usize::from(is_vec(2))
                } else {
                    0
                }
            }
            "defmethod" => 2 + usize::from(is_vec(3)),
            "ANY" | "DELETE" | "GET" | "HEAD" | "OPTIONS" | "PATCH" | "POST" | "PUT"
            | "context" => 2,
            _ => 1,
        };
        n.min(args)
    };
    match symbol_specs(name) {
        Some(specs) => match specs[0] {
            Spec::Block(n) => Shape::Block(n),
            Spec::Inner(..) => Shape::Inner(inner_args()),
        },
        None if PATTERNS.iter().any(|p| name.starts_with(p)) => Shape::Inner(inner_args()),
        None => Shape::Default,
    }
}

/// How many body forms go on one line: pairs for `cond`-like forms, a row per `are` binding.
pub(super) fn body_chunk_size(name: &str, forms: &[&Form]) -> usize {
    match name {
        "cond" | "cond->" | "cond->>" | "case" | "condp" | "match" | "alt!" | "alt!!" | "fdef" => 2,
        "are" => match forms.get(1).map(|f| &f.body) {
            Some(Body::Coll { kind: CollKind::Vector, items, .. }) => {
                items.iter().filter(|i| matches!(i, Item::Form { .. })).count().max(1)
            }
            _ => 1,
        },
        _ => 1,
    }
}
