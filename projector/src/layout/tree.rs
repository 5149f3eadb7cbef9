//! The form tree a layout prints: atoms verbatim, collections, prefixed forms, metadata,
//! comments, converted from the tree-sitter tree.

use super::*;
use formdb_engine::syntax::{KindOf, NodeKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CollKind {
    List,
    AnonFn,
    Vector,
    Map,
    Set,
    ReaderCond,
    NsMap,
}

#[derive(Debug)]
pub(super) struct Form<'s> {
    /// `^meta` forms (each a `Wrap` with prefix `^` or `#^`), outermost first.
    pub(super) metas: Vec<Form<'s>>,
    /// Comments and discards between the metadata and the form itself.
    pub(super) pre: Vec<Item<'s>>,
    pub(super) body: Body<'s>,
    /// The name part when the form is a symbol.
    pub(super) sym: Option<&'s str>,
}

#[derive(Debug)]
pub(super) enum Body<'s> {
    /// Printed exactly as written (may contain newlines: strings, regexes).
    Atom(&'s str),
    Coll {
        open: Open<'s>,
        close: &'s str,
        kind: CollKind,
        items: Vec<Item<'s>>,
    },
    /// `'x`, `@x`, `#_x`, `^m`, `#inst "…"` (`space` after the tag), …
    Wrap {
        prefix: &'s str,
        space: bool,
        extras: Vec<Item<'s>>,
        inner: Box<Form<'s>>,
    },
}

/// A collection's opening: the dispatch and prefix (`#`, `#?`, `#:ns`, or nothing) and the
/// bracket. Whitespace the reader allows between them (`#?\n(`) is dropped.
#[derive(Clone, Copy, Debug)]
pub(super) struct Open<'s> {
    pub(super) pre: &'s str,
    pub(super) delim: &'s str,
}

impl Open<'_> {
    pub(super) fn width(&self) -> usize {
        width_of(self.pre) + width_of(self.delim)
    }
}

#[derive(Debug)]
pub(super) enum Item<'s> {
    Form { form: Form<'s>, comma: bool },
    Comment { text: &'s str, own_line: bool },
}

impl Form<'_> {
    pub(super) fn is_discard(&self) -> bool {
        self.metas.is_empty() && matches!(self.body, Body::Wrap { prefix: "#_", .. })
    }

    pub(super) fn coll_kind(&self) -> Option<CollKind> {
        match self.body {
            Body::Coll { kind, .. } => Some(kind),
            _ => None,
        }
    }

    pub(super) fn is_bare(&self, kind: CollKind) -> bool {
        self.metas.is_empty() && self.pre.is_empty() && self.coll_kind() == Some(kind)
    }

    pub(super) fn is_flat_atom(&self) -> bool {
        self.metas.is_empty()
            && self.pre.is_empty()
            && matches!(self.body, Body::Atom(t) if !t.contains('\n'))
    }
}

pub(super) const WRAPPERS: [NodeKind; 12] = [
    NodeKind::Quote,
    NodeKind::SynQuote,
    NodeKind::Unquote,
    NodeKind::UnquoteSplicing,
    NodeKind::VarQuote,
    NodeKind::Deref,
    NodeKind::Evaling,
    NodeKind::SymVal,
    NodeKind::Dis,
    NodeKind::Meta,
    NodeKind::OldMeta,
    NodeKind::Tagged,
];

pub(super) fn coll_kind_of(kind: NodeKind) -> Option<CollKind> {
    Some(match kind {
        NodeKind::List => CollKind::List,
        NodeKind::AnonFn => CollKind::AnonFn,
        NodeKind::Vec => CollKind::Vector,
        NodeKind::Map => CollKind::Map,
        NodeKind::Set => CollKind::Set,
        NodeKind::ReadCond | NodeKind::SplicingReadCond => CollKind::ReaderCond,
        NodeKind::NsMap => CollKind::NsMap,
        _ => return None,
    })
}

/// A node's children with their field names, walked with a cursor (asking a node for the field
/// of its i-th child is linear in i).
pub(super) fn kids_with_fields(n: Node) -> Vec<(Option<&'static str>, Node)> {
    let mut out = Vec::with_capacity(n.child_count());
    let mut cursor = n.walk();
    if cursor.goto_first_child() {
        loop {
            out.push((cursor.field_name(), cursor.node()));
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

/// The first child in a field.
pub(super) fn field<'t>(kids: &[(Option<&'static str>, Node<'t>)], name: &str) -> Option<Node<'t>> {
    kids.iter().find(|(f, _)| *f == Some(name)).map(|(_, k)| *k)
}

pub(super) fn is_meta_field(field: Option<&str>) -> bool {
    matches!(field, Some("meta" | "old_meta"))
}

pub(super) fn is_extra(n: Node) -> bool {
    matches!(n.node_kind(), NodeKind::Comment | NodeKind::Dis)
}

pub(super) fn comment_text<'s>(n: Node, src: &'s str) -> &'s str {
    syntax::text(n, src).trim_end()
}

/// Turn a parsed node into a `Form`.
pub(super) fn convert<'s>(n: Node, src: &'s str) -> Form<'s> {
    let kids = kids_with_fields(n);
    let mut metas = Vec::new();
    let mut pre = Vec::new();
    let mut body_idx = None;
    for (i, (field, kid)) in kids.iter().enumerate() {
        if is_meta_field(*field) {
            metas.push(convert(*kid, src));
        } else if is_extra(*kid) && field.is_none() {
            if body_idx.is_none() {
                pre.push(extra_item(*kid, src, true));
            }
        } else {
            // Metadata and the comments around it come first; this is the form itself.
            body_idx = Some(i);
            break;
        }
    }
    let body_start = body_idx.map_or(n.start_byte(), |i| kids[i].1.start_byte());
    let kind = n.node_kind();
    let mut sym = None;
    let body = if let Some(ck) = coll_kind_of(kind) {
        convert_coll(&kids, body_start, ck, src)
    } else if WRAPPERS.contains(&kind) {
        convert_wrap(&kids, src)
    } else {
        if kind == NodeKind::Sym {
            sym = field(&kids, "name").map(|x| syntax::text(x, src));
        }
        Some(Body::Atom(&src[body_start..n.end_byte()]))
    };
    let body = body.unwrap_or(Body::Atom(&src[body_start..n.end_byte()]));
    Form { metas, pre, body, sym }
}

pub(super) fn extra_item<'s>(kid: Node, src: &'s str, own_line: bool) -> Item<'s> {
    if kid.node_kind() == NodeKind::Comment {
        Item::Comment { text: comment_text(kid, src), own_line }
    } else {
        Item::Form { form: convert(kid, src), comma: false }
    }
}

pub(super) fn convert_coll<'s>(
    kids: &[(Option<&'static str>, Node)],
    body_start: usize,
    kind: CollKind,
    src: &'s str,
) -> Option<Body<'s>> {
    let open = field(kids, "open")?;
    let close = field(kids, "close")?;
    let mut items: Vec<Item<'s>> = Vec::new();
    let mut prev_end = open.end_byte();
    let mut prev_comment = false;
    let mut first = true;
    for (field, kid) in kids {
        if kid.start_byte() < open.end_byte() || kid.id() == close.id() {
            continue;
        }
        let is_value = *field == Some("value");
        if !is_value && !is_extra(*kid) {
            continue;
        }
        let gap = &src[prev_end..kid.start_byte()];
        if gap.contains(',') {
            if let Some(Item::Form { comma, .. }) = items.last_mut() {
                *comma = true;
            }
        }
        if kid.node_kind() == NodeKind::Comment && !is_value {
            let own_line = first || prev_comment || gap.contains('\n');
            items.push(Item::Comment { text: comment_text(*kid, src), own_line });
            prev_comment = true;
        } else {
            items.push(Item::Form { form: convert(*kid, src), comma: false });
            prev_comment = false;
        }
        first = false;
        prev_end = kid.end_byte();
    }
    if src[prev_end..close.start_byte()].contains(',') {
        if let Some(Item::Form { comma, .. }) = items.last_mut() {
            *comma = true;
        }
    }
    Some(Body::Coll {
        open: Open {
            pre: src[body_start..open.start_byte()].trim_end(),
            delim: syntax::text(open, src),
        },
        close: syntax::text(close, src),
        kind,
        items,
    })
}

pub(super) fn convert_wrap<'s>(
    kids: &[(Option<&'static str>, Node)],
    src: &'s str,
) -> Option<Body<'s>> {
    let marker = field(kids, "marker")?;
    let value = field(kids, "value")?;
    let (prefix_end, space) = match field(kids, "tag") {
        Some(tag) => (tag.end_byte(), true),
        None => (marker.end_byte(), false),
    };
    let extras = kids
        .iter()
        .filter(|(field, kid)| {
            field.is_none()
                && is_extra(*kid)
                && kid.start_byte() >= prefix_end
                && kid.end_byte() <= value.start_byte()
        })
        .map(|(_, kid)| extra_item(*kid, src, false))
        .collect();
    Some(Body::Wrap {
        prefix: &src[marker.start_byte()..prefix_end],
        space,
        extras,
        inner: Box::new(convert(value, src)),
    })
}
