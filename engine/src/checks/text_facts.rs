//! What the checks read from the texts of the called vars' definitions, each parsed once per
//! distinct text: the shape of an arglist, whether a `defn`'s signature differs by platform,
//! and the macros a form defines below its head.
//!
//! Each is a function of the text alone, so it is kept by the text's hash, for the life of the
//! process, up to [`TEXTS_KEPT`] texts a kind. Without it every batch of a million-line import
//! parsed the same callees' texts again (0.34 s of the writer, most of it tree-sitter parsing
//! one-element vectors like `[x & more]`), and so did every edit.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use tree_sitter::Node;

use crate::syntax::{self, KindOf, NodeKind};

/// Texts kept per kind of fact; past it the kind starts over empty. Each entry is a 32-byte
/// hash and a small value: about 1 MB a kind when full.
const TEXTS_KEPT: usize = 16_384;

/// Facts of one kind, by the hash of the text they were read from.
struct Memo<V>(LazyLock<Mutex<HashMap<blake3::Hash, V>>>);

impl<V: Clone> Memo<V> {
    const fn new() -> Memo<V> {
        Memo(LazyLock::new(|| Mutex::new(HashMap::new())))
    }

    /// The map, locked. A panic elsewhere while the lock was held left complete entries.
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<blake3::Hash, V>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The fact of `text`, read by `read` the first time the text is seen.
    fn get(&self, text: &str, read: impl FnOnce(&str) -> V) -> V {
        let key = blake3::hash(text.as_bytes());
        if let Some(v) = self.map().get(&key).cloned() {
            return v;
        }
        // Read outside the lock: two threads reading the same new text both parse it, and
        // agree.
        let v = read(text);
        let mut map = self.map();
        if map.len() >= TEXTS_KEPT {
            map.clear();
        }
        map.insert(key, v.clone());
        v
    }
}

static ARGLISTS: Memo<Option<Arglist>> = Memo::new();
static PER_PLATFORM: Memo<bool> = Memo::new();
static MACROS: Memo<Vec<String>> = Memo::new();

/// What one arglist accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Arglist {
    /// Exactly this many arguments.
    Fixed(usize),
    /// At least this many (the parameters before `&`).
    Variadic(usize),
}

/// One stored arglist (`[x & more]`); `None` if it is not one vector.
pub(super) fn arglist(text: &str) -> Option<Arglist> {
    ARGLISTS.get(text, read_arglist)
}

fn read_arglist(text: &str) -> Option<Arglist> {
    let tree = syntax::parse(text);
    let top = syntax::top_level_forms(&tree);
    let [v] = top.as_slice() else { return None };
    if v.node_kind() != NodeKind::Vec || syntax::first_error(&tree, text).is_some() {
        return None;
    }
    let vals = syntax::values(*v);
    Some(
        match vals
            .iter()
            .position(|p| p.node_kind() == NodeKind::Sym && syntax::text(*p, text) == "&")
        {
            Some(i) => Arglist::Variadic(i),
            None => Arglist::Fixed(vals.len()),
        },
    )
}

/// Whether a `defn`'s signature may differ by platform: a reader conditional outside the bodies
/// of its arities (around the name, an arity, a parameter vector, or the whole form). One
/// inside a body (`([x] #?(:clj (f x) :cljs (g x)))`) changes what the function does, not what
/// it accepts. Unparseable text counts as per platform.
pub(super) fn signature_per_platform(source: &str) -> bool {
    PER_PLATFORM.get(source, read_signature_per_platform)
}

fn read_signature_per_platform(source: &str) -> bool {
    let tree = syntax::parse(source);
    let Some(form) = syntax::top_level_forms(&tree).first().copied() else { return true };
    if form.node_kind() != NodeKind::List || syntax::first_error(&tree, source).is_some() {
        return true;
    }
    let conditional =
        |n: Node| matches!(n.node_kind(), NodeKind::ReadCond | NodeKind::SplicingReadCond);
    let holds_conditional = |n: Node| {
        let mut found = false;
        syntax::visit(n, &mut |m| found |= conditional(m));
        found
    };
    for part in syntax::values(form) {
        match part.node_kind() {
            // `(defn f [params] body...)`: what follows the parameters is the body.
            NodeKind::Vec => return holds_conditional(part),
            // An arity `([params] body...)`: its parameters count, its body does not.
            NodeKind::List => {
                let params = syntax::values(part).first().copied();
                if params.is_none_or(|p| p.node_kind() != NodeKind::Vec || holds_conditional(p)) {
                    return true;
                }
            }
            _ if conditional(part) => return true,
            _ => {}
        }
    }
    false
}

/// The names of the macros a form defines through a macro-defining head below its own
/// (`#?(:clj (do (defmacro a ...)))`, `(defmacroalias a other/a)`).
pub(super) fn macros_defined(source: &str) -> Vec<String> {
    // Such a head is a word of the text, its name starting `def` and holding `macro`; without
    // one the text is not parsed (nor kept): a text that says "macro" elsewhere (a docstring,
    // a `macroexpand` call) is common.
    let delimiter = |c: char| c.is_whitespace() || "()[]{}\",;".contains(c);
    let head_like = |word: &str| {
        let word = word.trim_start_matches(|c| "^#'`~@".contains(c));
        macro_defining(word.rsplit('/').next().unwrap_or(word))
    };
    if !source.split(delimiter).any(head_like) {
        return Vec::new();
    }
    MACROS.get(source, read_macros_defined)
}

fn macro_defining(name: &str) -> bool {
    name.starts_with("def") && name.contains("macro")
}

fn read_macros_defined(source: &str) -> Vec<String> {
    let tree = syntax::parse(source);
    let Some(form) = syntax::top_level_forms(&tree).first().copied() else { return Vec::new() };
    let mut names = Vec::new();
    syntax::visit(form, &mut |n| {
        let Some(head) = syntax::list_head_name(n, source) else { return };
        if !macro_defining(head) {
            return;
        }
        names.extend(syntax::values(n).get(1).map(|v| syntax::sym_parts(*v, source).1.to_string()));
    });
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arglists_are_read_by_their_shape() {
        assert_eq!(arglist("[x y]"), Some(Arglist::Fixed(2)));
        assert_eq!(arglist("[]"), Some(Arglist::Fixed(0)));
        assert_eq!(arglist("[x & more]"), Some(Arglist::Variadic(1)));
        assert_eq!(arglist("[{:keys [a b]} [c & d] & opts]"), Some(Arglist::Variadic(2)));
        assert_eq!(arglist("[^long x #_ignored y]"), Some(Arglist::Fixed(2)));
        assert_eq!(arglist("(x)"), None);
        assert_eq!(arglist("[x] [y]"), None);
        assert_eq!(arglist("[x"), None);
        // Asked again, the kept answer is the same.
        assert_eq!(arglist("[x & more]"), Some(Arglist::Variadic(1)));
    }

    #[test]
    fn signatures_and_macros_are_read_from_the_text() {
        assert!(!signature_per_platform("(defn f [x] #?(:clj (g x) :cljs (h x)))"));
        assert!(signature_per_platform("(defn f #?(:clj [x] :cljs [x y]) x)"));
        assert!(signature_per_platform("(defn f ([x] 1) #?(:clj ([x y] 2)))"));
        assert!(signature_per_platform("(defn f [x"));
        let block = "#?(:clj (do (defmacro a [] 1) (my/defmacroalias b other/b)))";
        assert_eq!(macros_defined(block), ["a", "b"]);
        assert_eq!(macros_defined(block), ["a", "b"]);
        assert!(macros_defined("(defn g \"no macro here, only macroexpand\" [] 1)").is_empty());
    }

    #[test]
    fn a_full_memo_starts_over_and_still_answers() {
        let memo: Memo<usize> = Memo::new();
        let mut reads = 0;
        for i in 0..TEXTS_KEPT + 10 {
            let text = format!("[{i}]");
            assert_eq!(
                memo.get(&text, |t| {
                    reads += 1;
                    t.len()
                }),
                text.len()
            );
        }
        assert_eq!(reads, TEXTS_KEPT + 10);
        assert!(memo.map().len() <= TEXTS_KEPT);
        // A text kept is not read again.
        assert_eq!(memo.get("[16393]", |_| unreachable!("kept")), 7);
    }
}
