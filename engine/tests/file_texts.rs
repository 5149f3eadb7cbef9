//! A stored file's text is kept whole and packed (`file_text`, files of up to
//! `change::FILE_TEXT_MAX` bytes), in step with every change, and read as one value; a longer
//! one, or one whose kept text is missing or does not match, is read back
//! `read::files::FORMS_PER_READ` top-level forms a script (a big file's rows as Cozo values took
//! twenty times its text when read in one): it must be the text written, at every count of
//! forms around a part's end, and one state of the store while another handle rewrites the
//! file.

use cozo::DataValue;
use formdb_engine::change::{self, ChangeSet};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::read::{
    self,
    files::{file_texts, FORMS_PER_READ},
};
use formdb_engine::store::{params, Params, Store};

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

/// Drop every kept whole text, so that files are read from their forms' places.
fn forget_kept_texts(store: &Store) {
    store.write("?[path] := *file_text{path} :rm file_text {path}", Params::new()).unwrap();
}

/// The kept whole text of `path`, unpacked, if there is one.
fn kept_text(store: &Store, path: &str) -> Option<String> {
    let rows =
        store.query("?[text] := *file_text{path: $p, text}", params([("p", path.into())])).unwrap();
    let packed = rows.rows.first()?[0].get_bytes()?.to_vec();
    Some(String::from_utf8(formdb_engine::packed::unpack(packed)).unwrap())
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
    // As kept whole, then from the places.
    for kept in [true, false] {
        if !kept {
            forget_kept_texts(&store);
        }
        let read = file_texts(&store, &paths).unwrap();
        assert_eq!(read.len(), files.len());
        for (path, text) in &files {
            let got = String::from_utf8(read[path].bytes.clone()).unwrap();
            assert!(got == *text, "{path}: {} bytes read back, {} written", got.len(), text.len());
        }
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
    // Longer than a text kept whole: read in parts.
    let versions = [text(n, &"old ".repeat(200)), text(n, &"new ".repeat(200))];
    assert!(versions[0].len() > change::FILE_TEXT_MAX);
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
            "?[pos, id, leading, source] := *form_at{file: $f, pos, id, leading_chars: leading,
                 source_chars: source}, source > 0
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
            "?[file, pos, id, leading_chars, source_chars] <- [[$f, $p, $id, $l, $s]]
             :put form_at {file, pos, id => leading_chars, source_chars}",
            row,
        )
        .unwrap();
    forget_kept_texts(&store);
    let read = file_texts(&store, &[path.as_str()]).unwrap();
    assert!(read[&path].bytes == written.as_bytes(), "the form past the gap was not read");
}

/// Every change keeps a parsed file's whole text in step: an import, a save of the whole
/// file, an edit of one form in place, a file that stops parsing, a delete; a file longer
/// than `FILE_TEXT_MAX` keeps none.
#[test]
fn a_files_whole_text_is_kept_in_step_with_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    let (a, b) = ("src/app/a.clj".to_string(), "src/app/b.clj".to_string());
    let a_text = "(ns app.a)\n\n(defn f [x] (+ x 1))\n\n(defn g [] (f 2))\n;; end\n".to_string();
    let b_text = "(ns app.b\n  (:require [app.a :as a]))\n\n(defn h [] (a/f 3))\n".to_string();
    let long = ("src/app/long.clj".to_string(), text(12_000, &"long ".repeat(150)));
    assert!(long.1.len() > change::FILE_TEXT_MAX);
    write(&store, &[(a.clone(), a_text.clone()), (b.clone(), b_text.clone()), long.clone()]);
    assert_eq!(kept_text(&store, &a).as_deref(), Some(a_text.as_str()));
    assert_eq!(kept_text(&store, &b).as_deref(), Some(b_text.as_str()));
    assert_eq!(kept_text(&store, &long.0), None, "a long file keeps no whole text");

    // The whole file saved again, a form added.
    let a_text = format!("{a_text}(defn k [] :k)\n");
    write(&store, &[(a.clone(), a_text.clone())]);
    assert_eq!(kept_text(&store, &a).as_deref(), Some(a_text.as_str()));

    // One form edited in place: a line longer, so the form after it moves too.
    let id = store.query("?[id] := *form{id, fqn}, fqn == 'app.a/f'", Params::new()).unwrap().rows
        [0][0]
        .get_str()
        .unwrap()
        .to_string();
    let new_f = "(defn f [x]\n  (+ x 10))";
    let edited = a_text.replace("(defn f [x] (+ x 1))", new_f);
    let changes = import::form_in_place(&store, &a, &id, new_f, &edited)
        .unwrap()
        .expect("a definition keeping its vars is edited in place");
    assert!(changes.iter().any(|c| matches!(c, change::Change::PutForms { .. })));
    change::apply(&store, &ChangeSet { author: "t".into(), op: "replace_form".into(), changes })
        .unwrap();
    assert_eq!(kept_text(&store, &a).as_deref(), Some(edited.as_str()));
    assert_eq!(file_texts(&store, &[a.as_str()]).unwrap()[&a].bytes, edited.as_bytes());

    // A file that stops parsing is stored raw, with no whole text kept.
    let broken = "src/big/broken.clj".to_string();
    let good = "(ns big.broken)\n(defn open [x] x)\n".to_string();
    write(&store, &[(broken.clone(), good.clone())]);
    assert_eq!(kept_text(&store, &broken).as_deref(), Some(good.as_str()));
    write(&store, &[(broken.clone(), "(ns big.broken)\n(defn open [x]\n".into())]);
    assert_eq!(kept_text(&store, &broken), None);

    // A delete takes it.
    let changes = vec![change::Change::DeleteFile { path: a.clone() }];
    change::apply(&store, &ChangeSet { author: "t".into(), op: "delete".into(), changes }).unwrap();
    assert_eq!(kept_text(&store, &a), None);
}

/// A whole text is read instead of the forms' places, and only while it is the file's text:
/// one that does not hash to the file's hash (written by hand here; nothing else writes one)
/// is passed over for the places.
#[test]
fn a_kept_text_is_read_only_while_it_matches_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    let path = "src/app/a.clj".to_string();
    let written = "(ns app.a)\n\n(defn f [x] (+ x 1))\n".to_string();
    write(&store, &[(path.clone(), written.clone())]);
    let put_kept = |text: &str| {
        let packed = formdb_engine::packed::pack(text.as_bytes());
        store
            .write(
                "?[path, text] <- [[$p, $t]] :put file_text {path => text}",
                params([("p", path.as_str().into()), ("t", DataValue::Bytes(packed))]),
            )
            .unwrap();
    };
    put_kept("(ns app.a)\n\n(defn f [x] (+ x 2))\n");
    assert_eq!(file_texts(&store, &[path.as_str()]).unwrap()[&path].bytes, written.as_bytes());

    // With its places gone, the file reads from its kept text alone.
    put_kept(&written);
    store
        .write(
            "?[file, pos, id] := *form_at{file, pos, id}, file == $p :rm form_at {file, pos, id}",
            params([("p", path.as_str().into())]),
        )
        .unwrap();
    assert_eq!(file_texts(&store, &[path.as_str()]).unwrap()[&path].bytes, written.as_bytes());
}

/// A parsed file keeps the very text it was written with, packed from that text where its
/// forms give it back: with a byte order mark, CRLF line ends, tabs, text that is not ASCII,
/// discarded forms, reader conditionals, a comment block and no final newline. Each is kept,
/// and read back the same whole and from its forms.
#[test]
fn every_kind_of_text_is_kept_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    let files = every_kind();
    write(&store, &files);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    for (path, text) in &files {
        assert_eq!(kept_text(&store, path).as_deref(), Some(text.as_str()), "{path}");
    }
    for kept in [true, false] {
        if !kept {
            forget_kept_texts(&store);
        }
        let read = file_texts(&store, &paths).unwrap();
        for (path, text) in &files {
            assert_eq!(read[path].bytes, text.as_bytes(), "{path}, kept whole: {kept}");
        }
    }
}

/// An edit loads a file's top-level forms with their ids cut from its kept text at the lengths
/// their places keep: the same pieces its forms hold, which give back the text, whatever the
/// text holds; and from the forms' own texts where the kept text is gone or the lengths are
/// not its own.
#[test]
fn an_edits_forms_are_cut_from_the_kept_text_as_the_forms_hold_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    let mut files = every_kind();
    files.push(("src/k/many.clj".into(), text(300, "é ☕")));
    write(&store, &files);
    let pieces = |store: &Store, path: &str| read::files::top_level_id_pieces(store, path).unwrap();
    let cut: Vec<_> = files.iter().map(|(path, _)| pieces(&store, path)).collect();
    for ((path, text), cut) in files.iter().zip(&cut) {
        let trailing = read::files::head(&store, path).unwrap().unwrap().trailing;
        let joined: String = cut.iter().map(|p| format!("{}{}", p.leading, p.source)).collect();
        assert_eq!(format!("{joined}{trailing}"), *text, "{path}");
        let ids = read::files::top_level_ids(&store, path).unwrap();
        assert_eq!(cut.iter().map(|p| p.id.clone()).collect::<Vec<_>>(), ids, "{path}");
    }
    // Served from the kept text: a form's own text changed behind the store's back is not
    // what the edit loads (it is once the kept text is gone, below).
    let (many, last) = (files.len() - 1, cut.last().unwrap());
    let set_source = |id: &str, source: &str| {
        store
            .write(
                "?[id, source] <- [[$id, $source]] :update form {id => source}",
                params([("id", id.into()), ("source", source.into())]),
            )
            .unwrap();
    };
    set_source(&last[3].id, "(def not-the-text 0)");
    let loaded = pieces(&store, &files[many].0);
    assert_eq!(loaded[3].source, last[3].source, "cut from the kept text");
    assert_eq!(loaded, cut[many]);
    set_source(&last[3].id, &last[3].source);
    // A place whose lengths are not its text's (one character moved from a source to the
    // trivia after it): the forms' own texts are read.
    let (path, _) = &files[1];
    let second = &cut[1][1];
    store
        .write(
            "?[file, pos, id, leading_chars, source_chars] := *form_at{file, pos, id, leading_chars, source_chars: s},
                 file = $file, id = $id, source_chars = s - 1
             :put form_at {file, pos, id => leading_chars, source_chars}",
            params([("file", path.as_str().into()), ("id", second.id.as_str().into())]),
        )
        .unwrap();
    assert_eq!(pieces(&store, path), cut[1], "{path}, its lengths off");
    forget_kept_texts(&store);
    for ((path, _), cut) in files.iter().zip(&cut) {
        assert_eq!(pieces(&store, path), *cut, "{path}, no kept text");
    }
}

fn every_kind() -> Vec<(String, String)> {
    [
        ("src/k/bom.clj", "\u{feff}(ns k.bom)\n(def a 1)\n"),
        ("src/k/crlf.clj", "(ns k.crlf)\r\n\r\n(defn f [x]\r\n\t(inc x))\r\n"),
        ("src/k/utf.clj", "(ns k.utf)\n;; café ☕\n(def s \"naïve — ü\")\n"),
        ("src/k/discard.clj", "(ns k.discard)\n#_(def gone 1)\n#_ #_ a b\n(def kept 2)\n"),
        ("src/k/cond.cljc", "(ns k.cond)\n(def p #?(:clj 1 :cljs 2))\n#?(:clj (defn j [] 3))\n"),
        ("src/k/comment.clj", "(ns k.comment)\n(comment\n  (f 1)\n\n  (g 2))\n(def z 0)"),
        ("src/k/blank.clj", "(ns k.blank)\n\n   \n"),
    ]
    .iter()
    .map(|(p, t)| (p.to_string(), t.to_string()))
    .collect()
}
