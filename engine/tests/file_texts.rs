//! A stored file's text is read back `read::files::FORMS_PER_READ` top-level forms a script
//! (a big file's rows as Cozo values took twenty times its text when read in one): it must be
//! the text written, at every count of forms around a part's end, and one state of the store
//! while another handle rewrites the file.

use formdb_engine::change::{self, ChangeSet};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::read::files::{file_texts, FORMS_PER_READ};
use formdb_engine::store::{params, Store};

/// A namespace of `n` top-level forms (`tag` in each), a comment block among them (its
/// children have positions of their own), and trailing trivia.
fn text(n: usize, tag: &str) -> String {
    let mut t = String::from("(ns big.texts)\n");
    for i in 1..n {
        if i == n / 2 {
            t.push_str("(comment\n  (f1 \"a\")\n  (f2 \"b\"))\n");
        } else {
            t.push_str(&format!(";; {tag} {i}\n(defn f{i} [x] (+ x {i}))\n\n"));
        }
    }
    t.push_str("\n;; the end\n");
    t
}

fn write(store: &Store, files: &[(String, String)]) {
    let incoming = files
        .iter()
        .map(|(path, text)| Incoming { path: path.clone(), bytes: text.as_bytes().to_vec() })
        .collect();
    let (changes, errors) = import::file_changes(store, incoming, &Quiet).unwrap();
    // Only the file written broken does not parse (it is stored raw).
    assert!(errors.iter().all(|e| e.path.ends_with("broken.clj")), "{errors:?}");
    let set = ChangeSet { author: "test".into(), op: "import".into(), changes };
    change::apply(store, &set).unwrap();
}

#[test]
fn a_file_is_read_back_as_written_a_part_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    let per = FORMS_PER_READ as usize;
    let mut files: Vec<(String, String)> = [1, per - 1, per, per + 1, 2 * per, 2 * per + 3]
        .iter()
        .map(|n| (format!("src/big/texts_{n}.clj"), text(*n, "form")))
        .collect();
    files.push(("src/big/broken.clj".into(), format!("{}(defn open [x]\n", text(per + 1, "b"))));
    write(&store, &files);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let read = file_texts(&store, &paths).unwrap();
    assert_eq!(read.len(), files.len());
    for (path, text) in &files {
        let got = String::from_utf8(read[path].bytes.clone()).unwrap();
        assert!(got == *text, "{path}: {} bytes read back, {} written", got.len(), text.len());
    }
    // One at a time, as a cold read of one file asks.
    let one = file_texts(&store, &[paths[5]]).unwrap();
    assert_eq!(one[paths[5]].bytes, files[5].1.as_bytes());
}

#[test]
fn a_file_read_in_parts_is_one_state_while_another_handle_rewrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".formdb");
    let store = Store::open(&db).unwrap();
    let path = "src/big/texts.clj".to_string();
    let n = 3 * FORMS_PER_READ as usize;
    let versions = [text(n, "old"), text(n, "new")];
    write(&store, &[(path.clone(), versions[0].clone())]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let other = Store::open(&db).unwrap();
            for i in 1..=6 {
                write(&other, &[(path.clone(), versions[i % 2].clone())]);
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut reads = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let read = file_texts(&store, &[path.as_str()]).unwrap();
            let got = &read[&path].bytes;
            assert!(
                versions.iter().any(|v| v.as_bytes() == got.as_slice()),
                "read {reads}: a text that is neither version ({} bytes)",
                got.len()
            );
            reads += 1;
        }
        writer.join().unwrap();
        reads
    });
    assert!(reads > 0);
}

/// Parts are read by position: a file whose top-level positions had a gap (nothing writes
/// them so) would lose the forms past it. Its text then fails its content hash, and it is read
/// whole instead.
#[test]
fn a_file_whose_positions_have_a_gap_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    let path = "src/big/gap.clj".to_string();
    let n = FORMS_PER_READ as usize + 10;
    let written = text(n, "gap");
    write(&store, &[(path.clone(), written.clone())]);
    // The last top-level form moves far past the others.
    let last = store
        .query(
            "?[pos, id, leading, source] := *form_at{file: $f, pos, id, leading, source}, source != ''
             :order -pos :limit 1",
            params([("f", path.as_str().into())]),
        )
        .unwrap()
        .rows
        .remove(0);
    let far = formdb_engine::store::int_at(&last, 0) + 3 * FORMS_PER_READ;
    let key =
        params([("f", path.as_str().into()), ("p", last[0].clone()), ("id", last[1].clone())]);
    store.write("?[file, pos, id] <- [[$f, $p, $id]] :rm form_at {file, pos, id}", key).unwrap();
    let row = params([
        ("f", path.as_str().into()),
        ("p", far.into()),
        ("id", last[1].clone()),
        ("l", last[2].clone()),
        ("s", last[3].clone()),
    ]);
    store
        .write(
            "?[file, pos, id, leading, source] <- [[$f, $p, $id, $l, $s]] :put form_at {file, pos, id => leading, source}",
            row,
        )
        .unwrap();
    let read = file_texts(&store, &[path.as_str()]).unwrap();
    assert!(read[&path].bytes == written.as_bytes(), "the form past the gap was not read");
}
