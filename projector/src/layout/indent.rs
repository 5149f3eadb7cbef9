//! cljfmt's indentation pass over the tree-sitter tree: which lines are misindented, and
//! re-indenting them.

use super::*;
use formdb_engine::syntax::{KindOf, NodeKind};

/// A location in rewrite-clj's view of the tree. rewrite-clj wraps a form with metadata in one
/// `:meta` node per `^meta` and a reader conditional or namespaced map in a reader-macro node
/// around the list or map; tree-sitter keeps those in one node. `N(node, layer)`: layers below
/// the node's metadata count are the metadata wrappers, the layer equal to it is the node, and
/// one more is the inner list/map of a reader conditional or namespaced map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Loc<'t> {
    Root,
    N(Node<'t>, usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tag {
    List,
    Fn,
    Meta,
    Uneval,
    ReaderCond,
    Other,
}

/// A line's start in rewrite-clj terms: the line break inside `container`, after `idx`
/// elements (discards not counted).
#[derive(Clone, Debug)]
pub(super) struct Z<'t> {
    pub(super) container: Loc<'t>,
    /// The container's elements (comments left out, discards kept).
    pub(super) kids: Rc<[Loc<'t>]>,
    pub(super) idx: isize,
    pub(super) has_left: bool,
    pub(super) raw_left_uneval: bool,
}

pub(super) enum Target<'t> {
    /// Indent like this line break.
    Break(Z<'t>),
    /// Indent like this element (the line starts inside its metadata).
    Elem(Loc<'t>),
}

/// The `^meta` children of a node. They come first, so stop at the first other child.
pub(super) fn metas_of(n: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut cursor = n.walk();
    if cursor.goto_first_child() {
        loop {
            let node = cursor.node();
            if is_meta_field(cursor.field_name()) {
                out.push(node);
            } else if !is_extra(node) {
                break;
            }
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

pub(super) fn is_split(n: Node) -> bool {
    matches!(n.node_kind(), NodeKind::ReadCond | NodeKind::SplicingReadCond | NodeKind::NsMap)
}

pub(super) fn is_reader_cond(n: Node) -> bool {
    matches!(n.node_kind(), NodeKind::ReadCond | NodeKind::SplicingReadCond)
}

/// The first child that is not metadata, a comment or a discard: where the form itself starts.
pub(super) fn body_start_node(n: Node) -> Option<Node> {
    let mut cursor = n.walk();
    if cursor.goto_first_child() {
        loop {
            let (field, k) = (cursor.field_name(), cursor.node());
            if !(is_meta_field(field) || field.is_none() && is_extra(k)) {
                return Some(k);
            }
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    None
}

pub(super) fn open_node(n: Node) -> Option<Node> {
    syntax::field(n, syntax::fields().open)
}

/// Children by node id and layer.
pub(super) type KidsCache<'t> = RefCell<HashMap<(usize, usize), Rc<[Loc<'t>]>>>;

pub(super) struct Indenter<'t> {
    pub(super) src: &'t str,
    pub(super) tree: &'t Tree,
    pub(super) line_starts: Vec<usize>,
    /// Per line: how far the line has been shifted (reindent).
    pub(super) delta: Vec<isize>,
    /// `children` by node id and layer.
    pub(super) kids_cache: KidsCache<'t>,
}

impl<'t> Indenter<'t> {
    pub(super) fn new(src: &'t str, tree: &'t Tree) -> Self {
        let mut line_starts = vec![0];
        for (i, b) in src.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        let delta = vec![0; line_starts.len()];
        Indenter { src, tree, line_starts, delta, kids_cache: RefCell::default() }
    }

    pub(super) fn line_of(&self, byte: usize) -> usize {
        match self.line_starts.binary_search(&byte) {
            Ok(l) => l,
            Err(l) => l - 1,
        }
    }

    pub(super) fn col(&self, byte: usize) -> usize {
        let line = self.line_of(byte);
        let start = self.line_starts[line];
        let c = width_of(&self.src[start..byte]) as isize + self.delta[line];
        c.max(0) as usize
    }

    pub(super) fn leading_ws(&self, line: usize) -> usize {
        let start = self.line_starts[line];
        self.src[start..].bytes().take_while(|b| *b == b' ' || *b == b'\t').count()
    }

    pub(super) fn leading_has_tab(&self, line: usize) -> bool {
        let start = self.line_starts[line];
        self.src[start..].bytes().take_while(|b| *b == b' ' || *b == b'\t').any(|b| b == b'\t')
    }

    /// Is the node at `byte` the first thing on its line (only spaces before it)?
    pub(super) fn first_in_line(&self, byte: usize) -> bool {
        let before = &self.src[..byte];
        match before.trim_end_matches([' ', '\t']).chars().next_back() {
            None | Some('\n') => true,
            Some(_) => false,
        }
    }

    // --- rewrite-clj navigation ---

    pub(super) fn n_metas(n: Node) -> usize {
        metas_of(n).len()
    }

    pub(super) fn children(&self, loc: Loc<'t>) -> Rc<[Loc<'t>]> {
        let key = match loc {
            Loc::Root => (usize::MAX, 0),
            Loc::N(n, l) => (n.id(), l),
        };
        if let Some(kids) = self.kids_cache.borrow().get(&key) {
            return kids.clone();
        }
        let kids: Rc<[Loc<'t>]> = self.children_uncached(loc).into();
        self.kids_cache.borrow_mut().insert(key, kids.clone());
        kids
    }

    pub(super) fn children_uncached(&self, loc: Loc<'t>) -> Vec<Loc<'t>> {
        let elements = |n: Node<'t>, after: usize| -> Vec<Loc<'t>> {
            kids_with_fields(n)
                .into_iter()
                .filter(|(field, k)| {
                    k.start_byte() >= after
                        && (*field == Some("value") || k.node_kind() == NodeKind::Dis)
                })
                .map(|(_, k)| Loc::N(k, 0))
                .collect()
        };
        match loc {
            Loc::Root => {
                let root = self.tree.root_node();
                let mut cursor = root.walk();
                let kids: Vec<Node<'t>> = root.children(&mut cursor).collect();
                kids.into_iter()
                    .filter(|k| k.node_kind() != NodeKind::Comment)
                    .map(|k| Loc::N(k, 0))
                    .collect()
            }
            Loc::N(n, l) => {
                let metas = metas_of(n);
                let m = metas.len();
                if l < m {
                    let mut v = Vec::new();
                    if let Some(val) = syntax::meta_value(metas[l]) {
                        v.push(Loc::N(val, 0));
                    }
                    v.push(Loc::N(n, l + 1));
                    return v;
                }
                if l == m && is_split(n) {
                    let mut v = Vec::new();
                    let marker = syntax::field(n, syntax::fields().prefix)
                        .or_else(|| syntax::field(n, syntax::fields().marker));
                    if let Some(mk) = marker {
                        v.push(Loc::N(mk, 0));
                    }
                    v.push(Loc::N(n, m + 1));
                    return v;
                }
                let after = open_node(n).map_or(0, |o| o.end_byte());
                elements(n, after)
            }
        }
    }

    pub(super) fn parent(&self, loc: Loc<'t>) -> Option<Loc<'t>> {
        match loc {
            Loc::Root => None,
            Loc::N(n, l) if l > 0 => Some(Loc::N(n, l - 1)),
            Loc::N(n, _) => {
                let Some(p) = n.parent() else { return Some(Loc::Root) };
                match p.node_kind() {
                    NodeKind::Source => Some(Loc::Root),
                    NodeKind::Meta | NodeKind::OldMeta => {
                        let q = p.parent()?;
                        let i = metas_of(q).iter().position(|x| x.id() == p.id())?;
                        Some(Loc::N(q, i))
                    }
                    _ => {
                        let m = Self::n_metas(p);
                        let inner = is_split(p)
                            && open_node(p).is_some_and(|o| n.start_byte() >= o.end_byte());
                        Some(Loc::N(p, m + usize::from(inner)))
                    }
                }
            }
        }
    }

    pub(super) fn is_uneval(loc: Loc) -> bool {
        matches!(loc, Loc::N(n, 0) if n.node_kind() == NodeKind::Dis)
    }

    pub(super) fn index_of(&self, loc: Loc<'t>) -> isize {
        let Some(p) = self.parent(loc) else { return 0 };
        let kids = self.children(p);
        let pos = kids.iter().position(|k| *k == loc).unwrap_or(0);
        let before = kids[..pos].iter().filter(|k| !Self::is_uneval(**k)).count() as isize;
        if Self::is_uneval(loc) {
            before - 1
        } else {
            before
        }
    }

    pub(super) fn tag(&self, loc: Loc<'t>) -> Tag {
        match loc {
            Loc::Root => Tag::Other,
            Loc::N(n, l) => {
                let m = Self::n_metas(n);
                if l < m {
                    return Tag::Meta;
                }
                if l > m {
                    return if is_reader_cond(n) { Tag::List } else { Tag::Other };
                }
                match n.node_kind() {
                    NodeKind::List => Tag::List,
                    NodeKind::AnonFn => Tag::Fn,
                    NodeKind::Dis => Tag::Uneval,
                    NodeKind::ReadCond | NodeKind::SplicingReadCond => Tag::ReaderCond,
                    _ => Tag::Other,
                }
            }
        }
    }

    /// Where a location starts (rewrite-clj's margin is its column).
    pub(super) fn start(&self, loc: Loc<'t>) -> usize {
        match loc {
            Loc::Root => 0,
            Loc::N(n, l) => {
                let metas = metas_of(n);
                let m = metas.len();
                if l < m {
                    metas[l].start_byte()
                } else if l == m {
                    body_start_node(n).map_or(n.start_byte(), |b| b.start_byte())
                } else {
                    open_node(n).map_or(n.start_byte(), |o| o.start_byte())
                }
            }
        }
    }

    pub(super) fn margin(&self, loc: Loc<'t>) -> usize {
        match loc {
            Loc::Root => 0,
            _ => self.col(self.start(loc)),
        }
    }

    /// The margin of the location's first raw child: the column just after its opening.
    pub(super) fn coll_indent(&self, loc: Loc<'t>) -> usize {
        match loc {
            Loc::Root => 0,
            Loc::N(n, l) => {
                let metas = metas_of(n);
                let m = metas.len();
                let byte = if l < m {
                    syntax::meta_value(metas[l]).map_or(metas[l].end_byte(), |v| v.start_byte())
                } else if l == m && is_split(n) {
                    self.start(loc) + 1
                } else if let Some(o) = open_node(n) {
                    o.end_byte()
                } else if let Some(mk) = syntax::field(n, syntax::fields().marker) {
                    mk.end_byte()
                } else {
                    self.start(loc)
                };
                self.col(byte)
            }
        }
    }

    /// cljfmt's `form-symbol` for the children of `container`: the name of its first child when
    /// that is a symbol (metadata skipped), or the first symbol value of a reader conditional.
    pub(super) fn head_symbol(&self, container: Loc<'t>) -> Option<&'t str> {
        self.symbol_of(self.children(container).first().copied())
    }

    pub(super) fn symbol_of(&self, first: Option<Loc<'t>>) -> Option<&'t str> {
        let Some(Loc::N(n, l)) = first else { return None };
        if l > Self::n_metas(n) {
            return None;
        }
        if n.node_kind() == NodeKind::Sym {
            return syntax::field(n, syntax::fields().name).map(|x| syntax::text(x, self.src));
        }
        if is_reader_cond(n) {
            let values = syntax::values(n);
            let k = values.iter().position(|v| v.node_kind() == NodeKind::Kwd)?;
            let v = values.get(k + 1)?;
            if v.node_kind() == NodeKind::Sym {
                return syntax::field(*v, syntax::fields().name).map(|x| syntax::text(x, self.src));
            }
        }
        None
    }

    // --- cljfmt's indenters ---

    pub(super) fn list_indent(&self, z: &Z<'t>) -> usize {
        if z.idx > 1 || (z.idx == 1 && z.raw_left_uneval) {
            if let Some(fa) = z.kids.get(1).copied() {
                if Self::is_uneval(fa) {
                    let s = self.start(fa);
                    return self.margin(fa) + usize::from(!self.first_in_line(s));
                }
                return self.margin(fa);
            }
        }
        self.coll_indent(z.container)
    }

    pub(super) fn indent_width(&self, loc: Loc<'t>) -> usize {
        if self.tag(loc) == Tag::Fn {
            3
        } else {
            2
        }
    }

    /// `inner-indent` once the key has matched the form at the spec's depth.
    pub(super) fn inner_amount(&self, z: &Z<'t>) -> Option<usize> {
        z.has_left.then(|| self.margin(z.container) + self.indent_width(z.container))
    }

    /// `block-indent` once the key has matched the container's head.
    pub(super) fn block_amount(&self, z: &Z<'t>, idx: usize) -> Option<usize> {
        let after = z.kids.get(idx + 1).copied();
        let after_first = after.is_none_or(|a| self.first_in_line(self.start(a)));
        if after_first && z.idx > idx as isize {
            self.inner_amount(z)
        } else {
            Some(self.list_indent(z))
        }
    }

    pub(super) fn custom_indent(&self, z: &Z<'t>) -> usize {
        let head = self.symbol_of(z.kids.first().copied());
        // The ancestors the deep rules look at, computed once: depth 1 is the container, whose
        // own container's head must match; depth 2 one further up.
        let anc1 = z.container;
        let up1 = self.parent(anc1);
        let head1 = up1.and_then(|p| self.head_symbol(p));
        let head2 = up1.and_then(|anc2| self.parent(anc2)).and_then(|p| self.head_symbol(p));
        for key in DEEP_KEYS {
            for spec in symbol_specs(key).unwrap_or(&[]) {
                let hit = match *spec {
                    Spec::Block(i) if head == Some(key) => self.block_amount(z, i),
                    Spec::Inner(0, None) if head == Some(key) => self.inner_amount(z),
                    Spec::Inner(1, None) if head1 == Some(key) => self.inner_amount(z),
                    Spec::Inner(2, Some(i))
                        if head2 == Some(key)
                            && up1.is_some_and(|anc2| self.index_of(anc2) == i as isize + 1) =>
                    {
                        self.inner_amount(z)
                    }
                    _ => None,
                };
                if let Some(v) = hit {
                    return v;
                }
            }
        }
        if let Some(name) = head {
            if let Some(specs) = symbol_specs(name).filter(|_| !DEEP_KEYS.contains(&name)) {
                for spec in specs {
                    let hit = match *spec {
                        Spec::Block(i) => self.block_amount(z, i),
                        Spec::Inner(..) => self.inner_amount(z),
                    };
                    if let Some(v) = hit {
                        return v;
                    }
                }
            }
            if PATTERNS.iter().any(|p| name.starts_with(p)) {
                if let Some(v) = self.inner_amount(z) {
                    return v;
                }
            }
        }
        self.list_indent(z)
    }

    pub(super) fn indent_amount(&self, z: &Z<'t>) -> usize {
        let c = z.container;
        if let Some(Loc::N(gp, l)) = self.parent(c) {
            if is_reader_cond(gp) && l == Self::n_metas(gp) {
                return self.coll_indent(c);
            }
        }
        match self.tag(c) {
            Tag::List | Tag::Fn => self.custom_indent(z),
            Tag::Meta => self.element_indent(c),
            Tag::Uneval => {
                let s = self.start(c);
                self.margin(c) + usize::from(!self.first_in_line(s))
            }
            Tag::ReaderCond | Tag::Other => self.coll_indent(c),
        }
    }

    /// The indentation of a line that starts with the element `e`.
    pub(super) fn element_indent(&self, e: Loc<'t>) -> usize {
        let Some(container) = self.parent(e) else { return 0 };
        let kids = self.children(container);
        let pos = kids.iter().position(|k| *k == e).unwrap_or(0);
        let before = kids[..pos].iter().filter(|k| !Self::is_uneval(**k)).count() as isize;
        let idx = if Self::is_uneval(e) { before - 1 } else { before };
        let z = Z { container, kids, idx, has_left: pos > 0, raw_left_uneval: false };
        self.indent_amount(&z)
    }

    pub(super) fn expected(&self, t: &Target<'t>) -> usize {
        match t {
            Target::Break(z) => self.indent_amount(z),
            Target::Elem(e) => self.element_indent(*e),
        }
    }

    /// What decides line `line`'s indentation; None for lines that are not indented (inside a
    /// string, blank, and — unless `all` — comment lines and lines starting with a closer).
    pub(super) fn line_target(&self, line: usize, all: bool) -> Option<Target<'t>> {
        let start = self.line_starts[line];
        let rest = &self.src[start..];
        let ws = rest.bytes().take_while(|b| *b == b' ' || *b == b'\t').count();
        let q = start + ws;
        match self.src[q..].bytes().next() {
            None | Some(b'\n' | b'\r') => return None,
            Some(b';') if !all => return None,
            Some(b')' | b']' | b'}') if !all => return None,
            _ => {}
        }
        let root = self.tree.root_node();
        let end = (q + 1).min(self.src.len());
        let mut x = root.descendant_for_byte_range(q, end)?;
        if x.start_byte() < q {
            // Inside a token (a string or regex spanning lines) or an error.
            if x.child_count() == 0 || matches!(x.node_kind(), NodeKind::Str | NodeKind::Regex) {
                return None;
            }
        }
        while let Some(p) = x.parent() {
            if p.start_byte() != q || p.node_kind() == NodeKind::Source {
                break;
            }
            x = p;
        }
        let p = match x.parent() {
            None => return Some(self.break_in(Loc::Root, q)),
            Some(p) if p.node_kind() == NodeKind::Source => {
                return Some(self.break_in(Loc::Root, q))
            }
            Some(p) => p,
        };
        if p.is_error() || p.kind() == "ERROR" {
            return None;
        }
        let m = Self::n_metas(p);
        match p.node_kind() {
            NodeKind::Meta | NodeKind::OldMeta => {
                let owner = p.parent()?;
                return Some(Target::Elem(Loc::N(owner, 0)));
            }
            _ => {}
        }
        if m > 0 {
            let body = body_start_node(p).map_or(p.end_byte(), |b| b.start_byte());
            if q <= body {
                // Between metadata and the form: indented like the whole form.
                return Some(Target::Elem(Loc::N(p, 0)));
            }
        }
        if coll_kind_of(p.node_kind()).is_some() {
            let inner = is_split(p) && open_node(p).is_some_and(|o| q >= o.end_byte());
            return Some(self.break_in(Loc::N(p, m + usize::from(inner)), q));
        }
        if p.node_kind() == NodeKind::Dis {
            return Some(self.break_in(Loc::N(p, 0), q));
        }
        if WRAPPERS.contains(&p.node_kind()) {
            return Some(self.break_in(Loc::N(p, m), q));
        }
        None
    }

    pub(super) fn break_in(&self, container: Loc<'t>, q: usize) -> Target<'t> {
        let kids = self.children(container);
        let before = kids.iter().take_while(|k| self.end(**k) <= q).count();
        let idx = kids[..before].iter().filter(|k| !Self::is_uneval(**k)).count() as isize;
        let has_left = before > 0;
        let raw_left_uneval = before > 0 && {
            let k = kids[before - 1];
            Self::is_uneval(k) && {
                let gap = &self.src[self.end(k)..q];
                gap.starts_with('\n') || gap.starts_with("\r\n")
            }
        };
        Target::Break(Z { container, kids, idx, has_left, raw_left_uneval })
    }

    pub(super) fn end(&self, loc: Loc<'t>) -> usize {
        match loc {
            Loc::Root => self.src.len(),
            Loc::N(n, _) => n.end_byte(),
        }
    }
}
