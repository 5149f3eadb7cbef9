//! Diagnostics list a big draft by its header: the draft of a file the store does not have yet
//! is placed in its namespace from its first forms, not from a parse of the whole text (a 20
//! MB draft took +1.57 GB and 6 to 12 s on every call, and an MCP edit makes two). Alone in
//! its test binary: it measures the process's peak memory.

use formdb_edit::diagnostics::{self, Scope};
use formdb_edit::save::{self, Writer};
use formdb_engine::store::Store;
use formdb_projector::aliases::AliasMap;

/// The process's peak resident memory, in bytes.
fn peak() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn a_big_draft_of_a_new_file_is_listed_in_its_namespace_without_parsing_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let writer = Writer::new("ann", AliasMap::default());
    save::save(&store, &writer, "src/shop/core.clj", b"(ns shop.core)\n(defn g [] 1)\n", None)
        .unwrap();
    // 8 MB of forms after one left open, saved mid-edit to a file the store does not have.
    let mut text = String::from("(ns shop.half)\n(defn being-written [x]\n  (let [y x]\n\n");
    let mut n = 0;
    while text.len() < 8 << 20 {
        text.push_str(&format!("(defn f{n}\n  \"Doc {n}.\"\n  [x]\n  (+ x {n}))\n\n"));
        n += 1;
    }
    let saved = save::save(&store, &writer, "src/shop/half.clj", text.as_bytes(), None).unwrap();
    assert!(saved.draft().is_some(), "an unclosed form is kept as a draft: {saved:?}");
    let len = text.len() as u64;
    drop(text);

    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = peak();
    let scoped = diagnostics::diagnostics(&store, &Scope::Nss(vec!["shop.half".into()])).unwrap();
    let other = diagnostics::diagnostics(&store, &Scope::Nss(vec!["shop.core".into()])).unwrap();
    let all = diagnostics::diagnostics(&store, &Scope::All).unwrap();
    let grew = peak().saturating_sub(before);

    // Its namespace is the one its `ns` form declares: in that scope, in no other.
    let draft = |ds: &[diagnostics::Diagnostic]| {
        ds.iter().filter(|d| d.kind == "draft" && d.file == "src/shop/half.clj").count()
    };
    assert_eq!(draft(&scoped), 1, "{scoped:?}");
    assert_eq!(draft(&other), 0, "{other:?}");
    assert_eq!(draft(&all), 1, "{all:?}");
    let d = scoped.iter().find(|d| d.kind == "draft").unwrap();
    assert_eq!((d.ns.as_str(), d.line, d.col), ("shop.half", 2, 1), "{d:?}");
    // Reading its bytes is a few copies of them; its syntax tree was about 70 bytes a byte.
    assert!(grew < 8 * len, "+{} MB for three diagnostics beside a {len}-byte draft", grew >> 20);
}
