//! Tidy: the crate boundaries ARCHITECTURE.md states, checked on the source tree.
//!
//! The engine owns the store: only `engine/` (and `queries/`, the named queries' text) write
//! Datalog against its relations, read result rows by position (`str_at`, `int_at`) or depend
//! on `cozo`. Every other crate calls `formdb_engine::read` and friends, so a relation or
//! column renamed in the schema breaks the engine's build instead of a query elsewhere at run
//! time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crates that may touch the store's relations and depend on `cozo`.
const STORE_OWNERS: [&str; 2] = ["engine", "queries"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's crate directories other than the store owners, each with its `src`.
fn other_crates() -> Vec<(String, PathBuf)> {
    let mut out = vec![(String::new(), root().join("src"))];
    for entry in std::fs::read_dir(root()).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if dir.join("Cargo.toml").is_file() && !STORE_OWNERS.contains(&name.as_str()) {
            out.push((name, dir.join("src")));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Where `line` names a relation the Datalog way: `*name{`, or a `:put`/`:rm`/`:replace`/
/// `:create`/`:ensure` of one, or a `::` system op on the store.
fn datalog_access(line: &str) -> Option<String> {
    let bytes = line.as_bytes();
    for (i, _) in line.match_indices('*') {
        let name: String = line[i + 1..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() && bytes.get(i + 1 + name.len()) == Some(&b'{') {
            return Some(format!("*{name}{{"));
        }
    }
    for op in [":put ", ":rm ", ":replace ", ":create ", ":ensure "] {
        if line.contains(op) {
            return Some(op.trim().to_string());
        }
    }
    line.match_indices("\"::")
        .find(|(i, m)| line[i + m.len()..].starts_with(|c: char| c.is_ascii_lowercase()))
        .map(|_| "::".to_string())
}

fn positional_read(line: &str) -> bool {
    ["str_at(", "int_at("].iter().any(|f| {
        line.match_indices(f).any(|(i, _)| {
            !line[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.')
                || line[..i].ends_with("store::")
        })
    })
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/")
}

#[test]
fn only_the_engine_runs_datalog_against_the_store_or_reads_rows_by_position() {
    let mut found: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for (_, src) in other_crates() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let rel = relative(&file);
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                let entry = found.entry(rel.clone()).or_default();
                if let Some(what) = datalog_access(line) {
                    entry.0.push(format!("{rel}:{}: `{what}` in: {}", n + 1, line.trim()));
                }
                if positional_read(line) {
                    entry.1.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    let mut wrong = Vec::new();
    for (rel, (datalog, reads)) in &found {
        if !datalog.is_empty() {
            wrong.push(format!(
                "{rel}: {} Datalog accesses to the store's relations; add a function to `engine/src/read/` and call it:\n  {}",
                datalog.len(),
                datalog.join("\n  ")
            ));
        }
        if !reads.is_empty() {
            wrong.push(format!(
                "{rel}: {} positional row reads; the engine returns structs:\n  {}",
                reads.len(),
                reads.join("\n  ")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The `[section]` headers of a Cargo.toml under which a `cozo` key appears.
fn cozo_sections(manifest: &str) -> Vec<String> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_string();
        } else if line.starts_with("cozo") && line[4..].trim_start().starts_with(['=', '.']) {
            out.push(section.clone());
        }
    }
    out
}

#[test]
fn only_the_engine_and_queries_depend_on_cozo() {
    let mut wrong = Vec::new();
    for (name, _) in other_crates() {
        let manifest = root().join(&name).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let sections: Vec<String> = cozo_sections(&text)
            .into_iter()
            // The root defines the version every crate shares; that is no dependency.
            .filter(|s| !(name.is_empty() && s == "[workspace.dependencies]"))
            .collect();
        if !sections.is_empty() {
            wrong.push(format!("{}: cozo under {}", relative(&manifest), sections.join(", ")));
        }
    }
    assert!(
        wrong.is_empty(),
        "only engine/ and queries/ may depend on cozo:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert_eq!(datalog_access("\"?[id] := *form{id}\"").as_deref(), Some("*form{"));
    assert_eq!(datalog_access("\"?[a] <- $r :put alias_map {a}\"").as_deref(), Some(":put"));
    assert_eq!(datalog_access("let x = *count; a * b { c }"), None);
    assert_eq!(datalog_access("store.query(\"::relations\", p)").as_deref(), Some("::"));
    assert_eq!(datalog_access("t.strip_prefix(\"::\"); [\"::1\"]"), None);
    assert!(positional_read("let s = str_at(r, 0);"));
    assert!(positional_read("formdb_engine::store::str_at(r, 0)"));
    assert!(!positional_read("fn first_str_at(r)"));
    assert_eq!(cozo_sections("[dependencies]\ncozo.workspace = true\n"), ["[dependencies]"]);
    assert_eq!(cozo_sections("[dev-dependencies]\ncozo = \"0.7\"\n"), ["[dev-dependencies]"]);
    assert!(cozo_sections("[dependencies]\ncozoish = \"1\"\n").is_empty());
}
