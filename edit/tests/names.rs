//! What a form is called: a replace keeps the var a form defines (renames go through
//! `rename_symbol`), no form's id moves to another, and `rename_symbol` takes only names the
//! Clojure reader reads back as that symbol (checked against the Debian Clojure reader).

use std::io::Write;
use std::process::{Command, Stdio};

use formdb_edit::ops::{self, save_form_text, Op, OpError, Options};
use formdb_edit::refactor::rename_symbol;
use formdb_edit::save::{Saved, Writer};
use formdb_edit::EditError;
use formdb_engine::import::{import_dir, Quiet};
use formdb_engine::store::{params, str_at, Store};
use formdb_projector::aliases::AliasMap;
use formdb_projector::views;

const PATH: &str = "src/app/core.clj";
const CORE: &str = "(ns app.core)\n\n(defn f [] 1)\n\n(defn w [] 2)\n\n(println (f) (w))\n";

fn store_of_core() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/app");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("core.clj"), CORE).unwrap();
    let store = Store::open_in_memory().unwrap();
    import_dir(&store, dir.path(), "import", &Quiet).unwrap();
    store
}

fn agent() -> Writer {
    Writer::new("agent", AliasMap::default())
}

/// The file's top-level forms: (id, source), in order.
fn forms(store: &Store) -> Vec<(String, String)> {
    let r = store
        .query(
            "?[pos, id, source] := *form_at{file: $f, pos, id}, *form{id, source, parent}, parent == '' :order pos",
            params([("f", PATH.into())]),
        )
        .unwrap();
    r.rows.iter().map(|r| (str_at(r, 1), str_at(r, 2))).collect()
}

fn replace(store: &Store, id: &str, source: &str) -> Result<ops::Edited, OpError> {
    let op = Op::Replace { id: id.into(), source: source.into(), expected_hash: None };
    ops::apply(store, &agent(), &[op], Options::default())
}

fn refusal(result: Result<ops::Edited, OpError>) -> String {
    match result {
        Err(OpError::Edit(e @ (EditError::Invalid(_) | EditError::InOp { .. }))) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_replace_that_renames_is_refused_with_rename_symbol_and_no_id_moves() {
    let store = store_of_core();
    let before = forms(&store);
    let (f, w) = (before[1].0.clone(), before[2].0.clone());

    // Renamed to an existing var's name: the file would hold two `w`s and the untouched `w`
    // would lose its id to the replaced form.
    let m = refusal(replace(&store, &f, "(defn w [] 3)"));
    assert!(m.contains("rename_symbol") && m.contains("`app.core/f`") && m.contains("`w`"), "{m}");
    assert_eq!(forms(&store), before, "nothing changed");
    // Renamed to a free name: its callers would break.
    let m = refusal(replace(&store, &f, "(defn g [] 3)"));
    assert!(m.contains("rename_symbol") && m.contains("`g`"), "{m}");
    // By line, as replace_top_level_form does.
    let op = Op::ReplaceTopLevel {
        file: PATH.into(),
        line: 3,
        target_line: None,
        new_form: "(defn w [] 3)".into(),
    };
    let m = refusal(ops::apply(&store, &agent(), &[op], Options::default()));
    assert!(m.contains("rename_symbol"), "{m}");
    assert_eq!(forms(&store), before, "nothing changed");

    // A form naming no var may not become a second definition of `w` either.
    let m = refusal(replace(&store, &before[3].0, "(defn w [] 9)"));
    assert!(m.contains(&w) && m.contains("`app.core/w`"), "names the form defining it: {m}");
    assert_eq!(forms(&store), before, "nothing changed");

    // Same name, other kind: accepted, and every id stays.
    let out = replace(&store, &f, "(defn- f [] 5)").unwrap();
    assert_eq!(out.results[0].id, f);
    let after = forms(&store);
    assert_eq!(
        after.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        before.iter().map(|(id, _)| id).collect::<Vec<_>>()
    );
    assert_eq!(after[1].1, "(defn- f [] 5)");
    // The same batch may delete `w` and then give its name to the unnamed form.
    ops::apply(
        &store,
        &agent(),
        &[
            Op::Delete { id: w.clone() },
            Op::Replace {
                id: before[3].0.clone(),
                source: "(defn w [] 9)".into(),
                expected_hash: None,
            },
        ],
        Options::default(),
    )
    .unwrap();
    assert!(views::stored_text(&store, PATH).unwrap().contains("(defn w [] 9)"));
}

/// A human renaming a form in its own file (`.formdb/forms/<id>.clj` on the mount) keeps the
/// text as a draft with the same pointer, and the store as it was.
#[test]
fn a_form_file_save_that_renames_is_kept_as_a_draft() {
    let store = store_of_core();
    let before = forms(&store);
    let f = before[1].0.clone();
    let base = format!("{}\n", before[1].1);
    let saved =
        save_form_text(&store, &agent(), &f, b"(defn w [] 3)\n", Some(base.as_bytes())).unwrap();
    let Saved::Draft { draft } = saved else { panic!("expected a draft: {saved:?}") };
    assert!(draft.error.contains("rename_symbol"), "{}", draft.error);
    assert_eq!(forms(&store), before);
}

/// Whether the Clojure reader reads each of `names` back as that unqualified symbol, and
/// nothing after it.
fn clojure_reads_as_symbol(names: &[&str]) -> Vec<bool> {
    let script = r#"(doseq [l (line-seq (java.io.BufferedReader. *in*))]
      (let [n (read-string l)]
        (println (try (let [r (java.io.PushbackReader. (java.io.StringReader. n))
                            v (read r false ::eof)]
                        (and (symbol? v) (nil? (namespace v)) (= (name v) n) (= -1 (.read r))))
                      (catch Exception _ false)))))"#;
    let mut child = Command::new("java")
        .args(["-cp", "/usr/share/java/clojure.jar", "clojure.main", "-e", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("java with Debian's clojure.jar");
    let lines: String = names
        .iter()
        .map(|n| {
            format!("\"{}\"\n", n.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
        })
        .collect();
    child.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read: Vec<bool> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| l == "true").collect();
    assert_eq!(read.len(), names.len());
    read
}

#[test]
fn rename_symbol_takes_only_names_the_clojure_reader_reads_back() {
    let store = store_of_core();
    let before = views::stored_text(&store, PATH).unwrap();
    // The reader does not read these back as that symbol.
    let unreadable = [
        "1x", "-1", "+2", "a b", "a\tb", "a\nb", "a,b", "a(b", "a)", "[a]", "a]", "{a", "a}",
        "a\"b", "a;b", "@a", "a@b", "^a", "a^b", "`a", "a`b", "~a", "a~b", "a\\b", ":a", "#a",
        "'a", "a/", "a:", "a::b", "nil", "true", "false", "a/b/c", "",
    ];
    // Read back as a symbol, but reserved: `.` and `..` are special, leading and final dots
    // are interop, an inner one names a class, `&` marks rest arguments.
    let reserved = [".", "..", ".a", "a.", "a.b", "&"];
    let readable = [
        "g", "f-2", "f?", "f!", "*f*", "<f>", "a->b", "f'", "a:b", "a#", "ä", "+", "->x", "x1",
        "%a", "a'b",
    ];

    let all: Vec<&str> = unreadable.iter().chain(&reserved).chain(&readable).copied().collect();
    let read = clojure_reads_as_symbol(&all);
    for (name, read) in all.iter().zip(&read) {
        assert_eq!(*read, !unreadable.contains(name), "the Clojure reader on {name:?}");
    }

    for name in unreadable.iter().chain(&reserved) {
        let m = match rename_symbol(&store, &agent(), "app.core/f", name) {
            Err(OpError::Edit(EditError::Invalid(m))) => m,
            other => panic!("{name:?}: expected a refusal, got {other:?}"),
        };
        assert!(m.contains(&format!("`{name}`")) || m.contains("names namespace"), "{name:?}: {m}");
    }
    assert_eq!(views::stored_text(&store, PATH).unwrap(), before, "nothing changed");
    // Every readable name is taken (each renames `f` on from the last).
    let mut current = "f".to_string();
    for name in readable {
        rename_symbol(&store, &agent(), &format!("app.core/{current}"), name)
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        current = name.to_string();
    }
    assert!(views::stored_text(&store, PATH).unwrap().contains(&format!("(defn {current} [] 1)")));
}
