//! The alias view of a text longer than [`syntax::IN_RUNS_OVER`] that the scanner does not
//! vouch for as a whole, a top-level form at a time.
//!
//! **Why.** Such a text was parsed whole, a tree of about 70 bytes a byte: one `nil/x` in a
//! 20 MB file cost +1.5 GB and 15 s on every read of its view. Each top-level form's tokens,
//! lines and alignment are its own (the file is at the top level before and after it), so the
//! text is cut where the engine's reading in runs ([`syntax::readable_forms_in_runs`]) ends its
//! forms, and each piece (a form with the trivia before it) is read on its own: by the scanner
//! where it vouches for the piece, else from the piece's own parse tree. What the whole text
//! decides is decided over all pieces: the declaration (its forms in file order), the
//! qualifiers used, whether every token renames back, and whether every piece's
//! re-indentation does.

use super::*;

/// A piece of a text: a top-level form with the trivia before it, or the text's trailing
/// trivia.
type Piece = std::ops::Range<usize>;

/// The pieces of `text`, or `None` where it is not read into forms (a syntax error, or a form
/// nested too deep or too long): the engine keeps such a text raw, and it is shown as stored.
fn pieces(text: &str) -> Option<Vec<Piece>> {
    let idx = LineIndex::new(text);
    let mut ends = Vec::new();
    let unreadable =
        syntax::readable_forms_in_runs(&idx, syntax::RUN_BYTES, |form| ends.push(form.end_byte()));
    if unreadable.is_some() {
        return None;
    }
    let mut start = 0;
    let mut out = Vec::with_capacity(ends.len() + 1);
    for end in ends {
        out.push(start..end);
        start = end;
    }
    out.push(start..text.len());
    Some(out)
}

/// A piece as read: by the scanner, or its own parse tree where the scanner declines it.
enum Read {
    Scanned(scan::Scan),
    Parsed(Tree),
}

impl Read {
    fn of(piece: &str) -> Read {
        match scan::scan(piece) {
            Some(s) => Read::Scanned(s),
            None => Read::Parsed(syntax::parse(piece)),
        }
    }

    fn into_sites(self, piece: &str) -> Vec<Site> {
        match self {
            Read::Scanned(s) => s.sites,
            Read::Parsed(tree) => sites(&tree, piece),
        }
    }

    /// The texts of its forms that may declare aliases, each followed by a newline.
    fn push_decl_forms(&self, piece: &str, out: &mut String) {
        let mut push = |text: &str| {
            out.push_str(text);
            out.push('\n');
        };
        match self {
            Read::Scanned(s) => s.decl_forms.iter().for_each(|(a, b)| push(&piece[*a..*b])),
            Read::Parsed(tree) => {
                for node in syntax::top_level_forms(tree) {
                    if nsdecl::parse_ns_form(node, piece).is_some()
                        || nsdecl::apply_top_level_directive(&mut NsDecl::default(), node, piece)
                    {
                        push(syntax::text(node, piece));
                    }
                }
            }
        }
    }

    fn aligned_after(&self, piece: &str, starts: &[usize], first: usize) -> Cow<'_, [Aligned]> {
        match self {
            Read::Scanned(s) => Cow::Borrowed(s.aligned_after(first)),
            Read::Parsed(tree) => Cow::Owned(aligned_lines(tree, piece, starts, first)),
        }
    }
}

/// A text's pieces with their alias tokens, and the plan of its declaration under a map;
/// `None` where the text is shown as stored (not read into forms, or declaring no namespace).
fn read(text: &str, map: &AliasMap) -> Option<(Vec<Piece>, Vec<Vec<Site>>, Plan)> {
    let pieces = pieces(text)?;
    let mut decl_forms = String::new();
    let mut qualifiers = BTreeSet::new();
    let mut sites = Vec::with_capacity(pieces.len());
    for p in &pieces {
        let piece = &text[p.clone()];
        let read = Read::of(piece);
        read.push_decl_forms(piece, &mut decl_forms);
        let found = read.into_sites(piece);
        qualifiers.extend(used(piece, &found));
        sites.push(found);
    }
    let tree = syntax::parse(&decl_forms);
    let decl = file_decl(&tree, &decl_forms)?;
    let plan = plan(&decl, &qualifiers, map);
    Some((pieces, sites, plan))
}

/// [`user_view_text_parsed`] of a big text, a piece at a time.
pub(super) fn user_view(stored: &str, map: &AliasMap) -> UserView {
    let unchanged = |fallbacks| UserView { text: stored.to_string(), fallbacks };
    let Some((pieces, sites, plan)) = read(stored, map) else { return unchanged(Vec::new()) };
    if plan.renames.is_empty() {
        return unchanged(plan.fallbacks);
    }
    let mut invertible = true;
    let edits: Vec<Vec<Edit>> = (pieces.iter().zip(sites))
        .map(|(p, sites)| {
            let (edits, each) = rename_edits(&stored[p.clone()], &sites, &plan.renames);
            invertible &= each;
            edits
        })
        .collect();
    let text = renamed_pieces(stored, &pieces, edits, invertible, true);
    UserView { text, fallbacks: plan.fallbacks }
}

/// The plan of a big text under a map ([`plan_for`]).
pub(super) fn plan_for(stored: &str, map: &AliasMap) -> Plan {
    read(stored, map).map(|(_, _, plan)| plan).unwrap_or_default()
}

/// [`rename`] of a big text, a piece at a time.
pub(super) fn rename(text: &str, renames: &BTreeMap<String, String>, reindent: bool) -> String {
    let Some(pieces) = pieces(text) else { return text.to_string() };
    let edits: Vec<Vec<Edit>> = (pieces.iter())
        .map(|p| {
            let piece = &text[p.clone()];
            rename_edits(piece, &Read::of(piece).into_sites(piece), renames).0
        })
        .collect();
    renamed_pieces(text, &pieces, edits, reindent, false)
}

/// [`renamed`] over pieces: each piece's `edits` (its own offsets), its aligned lines
/// re-indented when `reindent`, and with `check`, none re-indented unless every piece renames
/// back exactly (as [`renamed`] decides it for the whole text).
fn renamed_pieces(
    text: &str,
    pieces: &[Piece],
    edits: Vec<Vec<Edit>>,
    reindent: bool,
    check: bool,
) -> String {
    let mut moves: Vec<Vec<Edit>> = Vec::new();
    if reindent {
        for (p, edits) in pieces.iter().zip(&edits) {
            let piece = &text[p.clone()];
            let each = if edits.is_empty() {
                Some(Vec::new())
            } else {
                // Read again, not kept from the first read: every piece's scan held at once
                // would hold the alignment of every line of the text.
                let read = Read::of(piece);
                reindent_edits(piece, edits, check, |starts, first| {
                    read.aligned_after(piece, starts, first)
                })
            };
            match each {
                Some(m) => moves.push(m),
                None => {
                    moves.clear();
                    break;
                }
            }
        }
    }
    let mut moves = moves.into_iter();
    let mut out = String::with_capacity(text.len() + 64);
    for (p, edits) in pieces.iter().zip(edits) {
        push_with_moves(&mut out, &text[p.clone()], edits, moves.next().unwrap_or_default());
    }
    out
}
