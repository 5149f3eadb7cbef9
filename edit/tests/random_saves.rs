//! Saves of generated text against a real Cozo store holding `examples/shop`: every outcome
//! holds what a save promises, whatever the bytes.
//!
//! Each text is made from a seeded generator (the seed is printed with any failure, so a
//! failure is replayed exactly): Clojure forms nested at random, cut and spliced with stray
//! brackets, unclosed strings, reader macros, NUL bytes, a byte-order mark, CRLF and non-ASCII.
//! For each save:
//! - nothing panics;
//! - a committed save reads back byte for byte (the file is a view of what was stored);
//! - a refused save (a draft) names a line and column, reads back as the bytes saved, and leaves
//!   the stored file as it was;
//! - the store's own consistency holds: every stored form of the file lies in its text.

use formdb_edit::save::{self, Saved, Writer};
use formdb_engine::store::Store;
use formdb_projector::aliases::AliasMap;
use formdb_projector::views::{self, Render};

/// The seeded generator of the texts: the same seed gives the same texts.
struct Gen(formdb_testkit::Seeded);

/// The seeds a test runs: `default` of them from 1, or `FORMDB_RANDOM_ROUNDS` of them from
/// `FORMDB_RANDOM_SEED` (to run more, or replay one).
fn seeds(default: u64) -> std::ops::Range<u64> {
    let first = std::env::var("FORMDB_RANDOM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    first..first + formdb_testkit::random_rounds(default)
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen(formdb_testkit::Seeded::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1))
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const ATOMS: &[&str] = &[
    "x",
    "f",
    "foo-bar",
    "a.b/c",
    "shop.cart/total",
    "clojure.string/join",
    "str",
    "+",
    "-",
    "*",
    "->",
    "..",
    ".",
    "/",
    "nil",
    "true",
    "false",
    "1",
    "-2.5",
    "1/2",
    "0x1F",
    "1e10",
    "42N",
    "1.5M",
    "##Inf",
    "##NaN",
    ":k",
    "::k",
    ":a/b",
    "::s/k",
    "\"s\"",
    "\"a\\\"b\"",
    "\"\\u00e9\"",
    "\\a",
    "\\newline",
    "\\u03bb",
    "\\space",
    "#\"[a-z]+\"",
    "#'f",
    "@a",
    "%",
    "%1",
    "%&",
    "&",
    "é",
    "λ",
    "🙂",
    "#inst \"2020-01-01\"",
    "#uuid \"00000000-0000-0000-0000-000000000000\"",
    "#my/tag 1",
    "#:a{:b 1}",
    "#::{:c 2}",
];

const HEADS: &[&str] = &[
    "defn",
    "defn-",
    "def",
    "defmacro",
    "defmulti",
    "defmethod",
    "defprotocol",
    "defrecord",
    "deftype",
    "let",
    "fn",
    "if",
    "do",
    "loop",
    "recur",
    "comment",
    "ns",
    "require",
    "when",
    "cond",
    "case",
    "try",
    "catch",
    "binding",
    "letfn",
    "reify",
    "proxy",
    "extend-type",
    "quote",
    "var",
    "new",
    "set!",
    "throw",
    "import",
];

const NOISE: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "#{",
    "#(",
    "#?(",
    "#?@(",
    "#_",
    "^",
    "^:private ",
    "'",
    "`",
    "~",
    "~@",
    "\"",
    "\\",
    ";",
    ";; note\n",
    "#",
    "#!",
    "#=",
    "\n",
    "\r\n",
    "\t",
    ",",
    "\u{0}",
    "\u{feff}",
    "\u{2028}",
    ":",
    "::",
    "#:",
    "#::",
    "^{:a 1} ",
];

const SPACE: &[&str] = &[" ", " ", " ", "\n", "\n  ", ", ", "\n\n", " ;; c\n ", "\r\n", "\t"];

fn form(g: &mut Gen, depth: usize, out: &mut String) {
    if depth == 0 || g.below(3) == 0 {
        out.push_str(g.pick(ATOMS));
        return;
    }
    let (open, close) = match g.below(8) {
        0 => ("[", "]"),
        1 => ("{", "}"),
        2 => ("#{", "}"),
        3 => ("#?(:clj ", ")"),
        4 => ("#(", ")"),
        _ => ("(", ")"),
    };
    out.push_str(open);
    if open == "(" && g.below(2) == 0 {
        out.push_str(g.pick(HEADS));
        out.push(' ');
    }
    for i in 0..g.below(5) {
        if i > 0 {
            out.push_str(g.pick(SPACE));
        }
        if g.below(12) == 0 {
            out.push_str(g.pick(&["#_", "^:dynamic ", "'", "`", "~", "@"]));
        }
        form(g, depth - 1, out);
    }
    out.push_str(close);
}

/// A file's text: a namespace declaration, then top-level forms; a third of the texts are
/// then damaged (noise spliced in, a cut, a doubled range).
fn text(g: &mut Gen, ns: &str) -> String {
    let mut t = String::new();
    if g.below(4) != 0 {
        t.push_str(&format!("(ns {ns}\n  (:require [clojure.string :as s]))\n\n"));
    }
    for _ in 0..g.below(6) {
        match g.below(4) {
            0 => {
                let name = format!("f{}", g.below(4));
                t.push_str(&format!("(defn {name} [x]\n  "));
                form(g, 4, &mut t);
                t.push(')');
            }
            _ => form(g, 5, &mut t),
        }
        t.push_str(g.pick(&["\n\n", "\n", " ", "\n;; end\n", "\r\n\r\n"]));
    }
    if g.below(3) == 0 {
        for _ in 0..1 + g.below(3) {
            let at = floor_char(&t, g.below(t.len() + 1));
            match g.below(3) {
                0 => t.insert_str(at, g.pick(NOISE)),
                1 => {
                    let end = floor_char(&t, at + g.below(20)).max(at);
                    t.replace_range(at..end, "");
                }
                _ => {
                    let end = floor_char(&t, at + g.below(40)).max(at);
                    let copy = t[at..end].to_string();
                    t.insert_str(end, &copy);
                }
            }
        }
    }
    t
}

fn floor_char(t: &str, mut at: usize) -> usize {
    at = at.min(t.len());
    while !t.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn stored(store: &Store, path: &str) -> Option<String> {
    views::stored_text(store, path).ok()
}

fn check_one(store: &Store, writer: &Writer, seed: u64, path: &str, t: &str) {
    let before = stored(store, path);
    let base = before.as_deref().map(str::as_bytes);
    let saved = save::save(store, writer, path, t.as_bytes(), base)
        .unwrap_or_else(|e| panic!("seed {seed}: the save failed: {e}\n--- text ---\n{t:?}"));
    let read = save::read(store, path, &Render::AsStored).unwrap().unwrap_or_default();
    match &saved {
        Saved::Committed { .. } | Saved::Unchanged { .. } => {
            assert_eq!(
                String::from_utf8_lossy(&read),
                t,
                "seed {seed}: a committed save reads back otherwise ({saved:?})\n--- text ---\n{t:?}"
            );
            assert!(save::draft(store, path).unwrap().is_none(), "seed {seed}: a draft is left");
        }
        Saved::Draft { draft } => {
            assert_eq!(read, t.as_bytes(), "seed {seed}: a draft reads back otherwise");
            let lines = t.split('\n').count() as u32;
            assert!(
                (1..=lines).contains(&draft.line) && draft.col >= 1 && !draft.error.is_empty(),
                "seed {seed}: the draft names no place in the text: {draft:?}\n--- text ---\n{t:?}"
            );
            assert_eq!(
                stored(store, path),
                before,
                "seed {seed}: a refused save changed the stored file\n--- text ---\n{t:?}"
            );
            // Back to the stored text for the next save.
            save::discard_draft(store, writer, path).unwrap();
        }
        Saved::Conflict { .. } => panic!("seed {seed}: a conflict with no other writer: {saved:?}"),
    }
}

#[test]
fn every_generated_save_reads_back_or_is_refused_with_its_place() {
    let store = formdb_testkit::shop();
    let writer = Writer::new("fuzz", AliasMap::default());
    let seeds = seeds(400);
    let runs = seeds.end - seeds.start;
    let (mut committed, mut refused) = (0, 0);
    for seed in seeds {
        let mut g = Gen::new(seed);
        // Each file declares its own namespace (two files declaring one are refused).
        let (path, ns) = [
            ("src/fz/a.clj", "fz.a"),
            ("src/fz/b.cljc", "fz.b"),
            ("src/fz/c.cljs", "fz.c"),
            ("resources/fz.edn", "fz.d"),
        ][g.below(4)];
        let t = text(&mut g, ns);
        check_one(&store, &writer, seed, path, &t);
        if save::draft(&store, path).unwrap().is_none()
            && stored(&store, path).as_deref() == Some(&t)
        {
            committed += 1;
        } else {
            refused += 1;
        }
    }
    eprintln!("{runs} saves: {committed} committed, {refused} refused");
    assert!(committed > runs / 10, "too few texts parse to test the committed path: {committed}");
}

/// A file saved through an alias view, then saved again as that view shows it (an editor
/// saving an untouched buffer): the second save changes nothing.
#[test]
fn saving_an_alias_view_as_shown_changes_nothing() {
    let store = formdb_testkit::shop();
    let aliases = AliasMap::from_pairs([
        ("clojure.string".to_string(), "str".to_string()),
        ("fz.b".to_string(), "bee".to_string()),
    ]);
    let writer = Writer::new("ana", aliases.clone());
    let view = Render::User(aliases);
    let seeds = seeds(400);
    let runs = seeds.end - seeds.start;
    let mut committed = 0;
    for seed in seeds {
        let mut g = Gen::new(seed);
        let (path, ns) = [("src/fz/a.clj", "fz.a"), ("src/fz/b.cljc", "fz.b")][g.below(2)];
        let mut t = text(&mut g, ns);
        if g.below(2) == 0 {
            t = t.replace("s/", "str/").replace(":as s]", ":as str]");
        }
        let before = save::read(&store, path, &view).unwrap();
        let saved = save::save(&store, &writer, path, t.as_bytes(), before.as_deref())
            .unwrap_or_else(|e| panic!("seed {seed}: the save failed: {e}\n--- text ---\n{t:?}"));
        match &saved {
            Saved::Committed { .. } | Saved::Unchanged { .. } => {
                committed += 1;
                let shown = save::read(&store, path, &view).unwrap().unwrap();
                let stored_before = stored(&store, path);
                let again = save::save(&store, &writer, path, &shown, Some(&shown)).unwrap();
                assert!(
                    matches!(again, Saved::Unchanged { .. }),
                    "seed {seed}: saving the view as shown did {again:?}\n--- saved ---\n{t:?}\n--- shown ---\n{:?}",
                    String::from_utf8_lossy(&shown)
                );
                assert_eq!(stored(&store, path), stored_before, "seed {seed}");
            }
            Saved::Draft { .. } => {
                save::discard_draft(&store, &writer, path).unwrap();
            }
            Saved::Conflict { .. } => panic!("seed {seed}: a conflict with no other writer"),
        }
    }
    assert!(committed > runs / 10, "too few texts parse: {committed}");
}

/// Form edits by id with generated sources: each is applied whole or refused with nothing
/// written, and after each the stored file is a text that saved again changes nothing (what
/// the store holds of its forms is what its text reads as).
#[test]
fn every_generated_form_edit_is_whole_or_refused() {
    use formdb_edit::ops::{self, Op, Options};
    use formdb_engine::store::{params, str_at};
    let store = formdb_testkit::shop();
    let writer = Writer::new("agent", AliasMap::default());
    let path = "src/shop/cart.clj";
    let seeds = seeds(300);
    let runs = seeds.end - seeds.start;
    let mut done = 0;
    for seed in seeds {
        let mut g = Gen::new(seed);
        let ids: Vec<String> = store
            .query(
                "?[id] := *form{id, file: $f, parent: '', kind}, kind != 'ns'",
                params([("f", path.into())]),
            )
            .unwrap()
            .rows
            .iter()
            .map(|r| str_at(r, 0))
            .collect();
        let mut source = String::new();
        if g.below(2) == 0 {
            source.push_str(&format!("(defn g{} [x]\n  ", g.below(6)));
            form(&mut g, 4, &mut source);
            source.push(')');
        } else {
            form(&mut g, 5, &mut source);
        }
        if g.below(4) == 0 {
            let at = floor_char(&source, g.below(source.len() + 1));
            source.insert_str(at, g.pick(NOISE));
        }
        let id = ids.get(g.below(ids.len().max(1))).cloned().unwrap_or_default();
        let op = match g.below(4) {
            0 => Op::Insert { ns: "shop.cart".into(), source, before: None, after: None },
            1 if ids.len() > 3 => Op::Delete { id },
            _ => Op::Replace { id, source, expected_hash: None },
        };
        let opts = Options { repair: g.below(2) == 0, keep_layout: g.below(2) == 0 };
        let before = (formdb_engine::query::generation(&store).unwrap(), stored(&store, path));
        match ops::apply(&store, &writer, std::slice::from_ref(&op), opts) {
            Ok(_) => done += 1,
            Err(e) => {
                let after =
                    (formdb_engine::query::generation(&store).unwrap(), stored(&store, path));
                assert_eq!(after, before, "seed {seed}: a refused edit wrote ({e})\n{op:?}");
                assert!(!e.to_string().is_empty(), "seed {seed}: an empty refusal");
            }
        }
        let text = stored(&store, path).unwrap();
        let again = save::save(&store, &writer, path, text.as_bytes(), Some(text.as_bytes()))
            .unwrap_or_else(|e| panic!("seed {seed}: the stored text does not save: {e}"));
        assert!(
            matches!(again, Saved::Unchanged { .. }),
            "seed {seed}: after {op:?} the stored text saved again did {again:?}\n--- text ---\n{text}"
        );
    }
    assert!(done > runs / 10, "too few edits applied to test them: {done}");
}

/// Ana saves `path` as `t0`, then as `ta` from `t0`; then Bob saves `tb` from `t0`, a stale
/// base: Bob's outcome and the text stored after it. `None` (nothing left to check) when
/// Ana's own saves are refused.
fn save_both(
    store: &Store,
    seed: u64,
    path: &str,
    [t0, ta, tb]: [&str; 3],
) -> Option<(Saved, String)> {
    let (ana, bob) =
        (Writer::new("ana", AliasMap::default()), Writer::new("bob", AliasMap::default()));
    let committed = |s: &Saved| matches!(s, Saved::Committed { .. } | Saved::Unchanged { .. });
    for (text, base) in [(t0, None), (ta, Some(t0.as_bytes()))] {
        if !committed(&save::save(store, &ana, path, text.as_bytes(), base).unwrap()) {
            save::discard_draft(store, &ana, path).unwrap();
            return None;
        }
    }
    let saved = save::save(store, &bob, path, tb.as_bytes(), Some(t0.as_bytes()))
        .unwrap_or_else(|e| panic!("seed {seed}: the stale save failed: {e}"));
    Some((saved, stored(store, path).unwrap()))
}

/// Two writers save the same file from the same text, form bodies changed at random on each
/// side; the second save's base is stale. Every form changed on one side only takes that
/// side's text; a form changed on both sides differently is a conflict that keeps the first
/// writer's text in the store and the second writer's whole text as a draft.
#[test]
fn generated_concurrent_saves_merge_form_by_form() {
    let store = formdb_testkit::shop();
    let bob = Writer::new("bob", AliasMap::default());
    let seeds = seeds(200);
    let runs = seeds.end - seeds.start;
    let (mut merged, mut conflicts) = (0, 0);
    for seed in seeds {
        let mut g = Gen::new(seed);
        let (ns, path) = (format!("mg.f{seed}"), format!("src/mg/f{seed}.clj"));
        let render = |bodies: &[String]| {
            let mut t = format!("(ns {ns})\n");
            for (k, b) in bodies.iter().enumerate() {
                t.push_str(&format!("\n(defn f{k} [x]\n  {b})\n"));
            }
            t
        };
        let body = |g: &mut Gen| {
            let mut b = String::new();
            form(g, 3, &mut b);
            b
        };
        let base: Vec<String> = (0..2 + g.below(6)).map(|_| body(&mut g)).collect();
        let side = |g: &mut Gen| -> Vec<String> {
            base.iter().map(|b| if g.below(3) == 0 { body(g) } else { b.clone() }).collect()
        };
        let (a, b) = (side(&mut g), side(&mut g));
        let (t0, ta, tb) = (render(&base), render(&a), render(&b));
        let Some((saved_b, text)) = save_both(&store, seed, &path, [&t0, &ta, &tb]) else {
            continue;
        };
        let both: Vec<usize> = (0..base.len())
            .filter(|&k| a[k] != base[k] && b[k] != base[k] && a[k] != b[k])
            .collect();
        let want = |k: usize| if b[k] != base[k] { &b[k] } else { &a[k] };
        let context = || {
            format!("\n--- base ---\n{t0}\n--- ana ---\n{ta}\n--- bob ---\n{tb}\n--- stored ---\n{text}")
        };
        match &saved_b {
            Saved::Draft { .. } => {
                // Bob's text was refused whole: the store holds Ana's.
                assert_eq!(text, ta, "seed {seed}: a refused save changed the store{}", context());
                save::discard_draft(&store, &bob, &path).unwrap();
                continue;
            }
            Saved::Conflict { draft, .. } => {
                conflicts += 1;
                assert!(
                    !both.is_empty(),
                    "seed {seed}: a conflict with none: {draft:?}{}",
                    context()
                );
                assert_eq!(draft.bytes, tb.as_bytes(), "seed {seed}: the draft is not Bob's text");
                save::discard_draft(&store, &bob, &path).unwrap();
            }
            _ => {
                merged += 1;
                assert!(both.is_empty(), "seed {seed}: forms {both:?} changed on both sides merged silently ({saved_b:?}){}", context());
            }
        }
        for (k, ak) in a.iter().enumerate() {
            let expect = if both.contains(&k) { ak } else { want(k) };
            let form = format!("(defn f{k} [x]\n  {expect})");
            assert!(text.contains(&form), "seed {seed}: form f{k} is not {form:?}{}", context());
        }
    }
    eprintln!("{runs} pairs: {merged} merged, {conflicts} conflicts");
    assert!(merged > 0 && conflicts > 0, "{merged} merged, {conflicts} conflicts");
}

/// As [`generated_concurrent_saves_merge_form_by_form`], with forms also deleted and added on
/// each side: a form deleted on one side and untouched on the other is gone, one added on a
/// side is there, and a form one side changed and the other deleted is never dropped without
/// a conflict.
#[test]
fn generated_concurrent_saves_with_adds_and_deletes_lose_nothing_silently() {
    let store = formdb_testkit::shop();
    let bob = Writer::new("bob", AliasMap::default());
    let seeds = seeds(200);
    let runs = seeds.end - seeds.start;
    let (mut merged, mut conflicts) = (0, 0);
    for seed in seeds {
        let mut g = Gen::new(seed);
        let (ns, path) = (format!("md.f{seed}"), format!("src/md/f{seed}.clj"));
        let render = |forms: &[(String, String)]| {
            let mut t = format!("(ns {ns})\n");
            for (name, body) in forms {
                t.push_str(&format!("\n(defn {name} [x]\n  {body})\n"));
            }
            t
        };
        let body = |g: &mut Gen| {
            let mut b = String::new();
            form(g, 3, &mut b);
            b
        };
        let base: Vec<(String, String)> =
            (0..2 + g.below(6)).map(|k| (format!("f{k}"), body(&mut g))).collect();
        let side = |g: &mut Gen, who: &str| -> Vec<(String, String)> {
            let mut out = Vec::new();
            for (name, b) in &base {
                match g.below(8) {
                    0 => {}
                    1 | 2 => out.push((name.clone(), body(g))),
                    _ => out.push((name.clone(), b.clone())),
                }
            }
            for j in 0..g.below(3) {
                let at = g.below(out.len() + 1);
                out.insert(at, (format!("{who}{j}"), body(g)));
            }
            out
        };
        let (a, b) = (side(&mut g, "a"), side(&mut g, "b"));
        let (t0, ta, tb) = (render(&base), render(&a), render(&b));
        let Some((saved_b, text)) = save_both(&store, seed, &path, [&t0, &ta, &tb]) else {
            continue;
        };
        let context = || {
            format!("\n--- base ---\n{t0}\n--- ana ---\n{ta}\n--- bob ---\n{tb}\n--- stored ---\n{text}\n--- outcome ---\n{saved_b:?}")
        };
        let find = |v: &[(String, String)], n: &str| {
            v.iter().find(|(m, _)| m == n).map(|(_, b)| b.clone())
        };
        let has = |name: &str, body: &str| text.contains(&format!("(defn {name} [x]\n  {body})"));
        let named = |name: &str| text.contains(&format!("(defn {name} [x]"));
        let conflict = match &saved_b {
            Saved::Draft { .. } => {
                assert_eq!(text, ta, "seed {seed}: a refused save changed the store{}", context());
                save::discard_draft(&store, &bob, &path).unwrap();
                continue;
            }
            Saved::Conflict { .. } => {
                conflicts += 1;
                save::discard_draft(&store, &bob, &path).unwrap();
                true
            }
            _ => {
                merged += 1;
                false
            }
        };
        for (name, b0) in &base {
            let (fa, fb) = (find(&a, name), find(&b, name));
            let changed = |f: &Option<String>| f.as_ref().is_some_and(|x| x != b0);
            match (&fa, &fb) {
                // Deleted on one side, untouched on the other: gone.
                (None, Some(x)) | (Some(x), None) if x == b0 => {
                    assert!(!named(name), "seed {seed}: deleted {name} is back{}", context())
                }
                (None, None) => {
                    assert!(!named(name), "seed {seed}: {name} deleted twice is back{}", context())
                }
                // Changed on one side, deleted on the other: kept, or reported.
                (Some(x), None) | (None, Some(x)) => {
                    assert!(conflict || has(name, x), "seed {seed}: {name}, changed on one side and deleted on the other, was dropped silently{}", context())
                }
                (Some(x), Some(y)) if changed(&fa) && changed(&fb) && x != y => {
                    assert!(
                        conflict,
                        "seed {seed}: {name} changed on both sides merged silently{}",
                        context()
                    );
                    assert!(has(name, x), "seed {seed}: the store lost Ana's {name}{}", context());
                }
                (Some(x), Some(y)) => {
                    let want = if y != b0 { y } else { x };
                    assert!(has(name, want), "seed {seed}: {name} is not {want:?}{}", context());
                }
            }
        }
        for (name, body) in a.iter().chain(b.iter()).filter(|(n, _)| !n.starts_with('f')) {
            assert!(has(name, body), "seed {seed}: added {name} is missing{}", context());
        }
    }
    eprintln!("{runs} pairs: {merged} merged, {conflicts} conflicts");
    assert!(merged > 0 && conflicts > 0, "{merged} merged, {conflicts} conflicts");
}
