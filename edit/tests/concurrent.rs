//! Edits by two writers at once on one on-disk store, as `formdb up` runs them: an agent's form
//! ops (MCP) in one thread, an editor's whole-file saves (the mount) in another. An edit changes
//! only the forms it names; every other form keeps the store's current text.

use std::sync::Arc;

use formdb_edit::ops::{self, Op, Options};
use formdb_edit::save::{self, Saved, Writer};
use formdb_engine::import::{import_dir, Quiet};
use formdb_engine::store::{params, str_at, Store};
use formdb_projector::aliases::AliasMap;
use formdb_projector::views::{self, Render};

const PATH: &str = "src/app/core.clj";
const ROUNDS: i64 = 200;

/// A store in `dir/.formdb` holding `app.core` with `(def a 0)` and `(def w 0)`.
fn store_of_a_and_w(dir: &std::path::Path) -> Store {
    let src = dir.join("tree/src/app");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("core.clj"), "(ns app.core)\n\n(def a 0)\n\n(def w 0)\n").unwrap();
    let store = Store::open(&dir.join(".formdb")).unwrap();
    import_dir(&store, &dir.join("tree"), "import", &Quiet).unwrap();
    store
}

fn id_of(store: &Store, fqn: &str) -> String {
    let r = store.query("?[id] := *form{id, fqn: $f}", params([("f", fqn.into())])).unwrap();
    str_at(&r.rows[0], 0)
}

/// Every version of form `id`: (author, source), oldest first.
fn versions(store: &Store, id: &str) -> Vec<(String, String)> {
    // Through `history`: the current version's text is the form's own.
    let history = formdb_engine::query::history(store, id).unwrap();
    let rows = history.rows.iter();
    rows.map(|r| {
        (r["author"].as_str().unwrap().to_owned(), r["source"].as_str().unwrap().to_owned())
    })
    .collect()
}

/// The number `(def <name> n)` sets.
fn value_of(source: &str) -> i64 {
    source.trim().trim_end_matches(')').rsplit(' ').next().unwrap().parse().unwrap()
}

/// The reproduction: an agent replaces `(def a i)` 200 times while an editor saves the
/// whole file with `(def w i)`, from the text it read, 200 times. Every acknowledged edit holds
/// at the end, and neither writer ever wrote the other's form: no version of `w` by the agent,
/// none of `a` by the editor, and each form's versions only count up.
#[test]
fn an_agents_form_edits_and_an_editors_file_saves_never_revert_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(store_of_a_and_w(dir.path()));
    let (a, w) = (id_of(&store, "app.core/a"), id_of(&store, "app.core/w"));

    let agent = {
        let (store, a) = (store.clone(), a.clone());
        std::thread::spawn(move || {
            let writer = Writer::new("agent", AliasMap::default());
            let mut acknowledged = 0;
            for i in 1..=ROUNDS {
                let op = Op::Replace {
                    id: a.clone(),
                    source: format!("(def a {i})"),
                    expected_hash: None,
                };
                ops::apply(&store, &writer, &[op], Options::default()).unwrap();
                acknowledged = i;
            }
            acknowledged
        })
    };
    let editor = {
        let store = store.clone();
        std::thread::spawn(move || {
            let writer = Writer::new("editor", AliasMap::default());
            let mut acknowledged = 0;
            for i in 1..=ROUNDS {
                // What a mount serves at open, and what the editor writes at close.
                let base = save::read(&store, PATH, &Render::AsStored).unwrap().unwrap();
                let text = String::from_utf8(base.clone()).unwrap();
                let at = text.find("(def w ").unwrap();
                let end = at + text[at..].find(')').unwrap() + 1;
                let mine = format!("{}(def w {i}){}", &text[..at], &text[end..]);
                let saved =
                    save::save(&store, &writer, PATH, mine.as_bytes(), Some(&base)).unwrap();
                assert!(matches!(saved, Saved::Committed { .. }), "save {i}: {saved:?}");
                acknowledged = i;
            }
            acknowledged
        })
    };
    let (last_a, last_w) = (agent.join().unwrap(), editor.join().unwrap());

    let text = views::stored_text(&store, PATH).unwrap();
    assert_eq!(text, format!("(ns app.core)\n\n(def a {last_a})\n\n(def w {last_w})\n"));
    for (id, name, author) in [(&a, "a", "agent"), (&w, "w", "editor")] {
        let versions = versions(&store, id);
        let foreign: Vec<_> = versions[1..].iter().filter(|(by, _)| by != author).collect();
        assert!(foreign.is_empty(), "versions of `{name}` not by {author}: {foreign:?}");
        let values: Vec<i64> = versions.iter().map(|(_, s)| value_of(s)).collect();
        assert_eq!(values, (0..=ROUNDS).collect::<Vec<_>>(), "`{name}` went backwards or skipped");
    }
}
