//! Edits against a real Cozo store holding the `examples/shop` tree: form ops by id, whole-file
//! saves, drafts, merges, deletes and restores.

use formdb_edit::ops::{self, Op, OpError, Options};
use formdb_edit::save::{self, Saved, Writer};
use formdb_engine::import::{import_dir, Quiet};
use formdb_engine::query::generation;
use formdb_engine::store::{params, str_at, Params, Store};
use formdb_projector::aliases::AliasMap;
use formdb_projector::views;
use formdb_testkit::shop;

fn agent() -> Writer {
    Writer::new("agent", AliasMap::default())
}

fn id_of(store: &Store, fqn: &str) -> String {
    let r = store.query("?[id] := *form{id, fqn: $f}", params([("f", fqn.into())])).unwrap();
    str_at(&r.rows[0], 0)
}

fn text(store: &Store, path: &str) -> String {
    views::stored_text(store, path).unwrap()
}

fn versions(store: &Store, id: &str) -> Vec<(String, String)> {
    let r = store
        .query(
            "?[v, author, op] := *version{id: $id, v, author, op} :order v",
            params([("id", id.into())]),
        )
        .unwrap();
    r.rows.iter().map(|r| (str_at(r, 1), str_at(r, 2))).collect()
}

const CART: &str = "src/shop/cart.clj";

#[test]
fn replace_form_rewrites_one_form_keeps_its_id_and_records_the_author() {
    let store = shop();
    let before = text(&store, CART);
    let id = id_of(&store, "shop.cart/subtotal");
    let other = id_of(&store, "shop.cart/total");
    let out = ops::apply(
        &store,
        &agent(),
        &[Op::Replace {
            id: id.clone(),
            source: "(defn subtotal [items] (transduce (map line-total) + 0 items))".into(),
            expected_hash: None,
        }],
        Options::default(),
    )
    .unwrap();
    assert_eq!(out.results[0].id, id, "same kind and name keeps the id");
    let after = text(&store, CART);
    assert!(after.contains("(defn subtotal [items] (transduce (map line-total) + 0 items))"));
    // Everything else is byte-identical.
    let cut = |t: &str| {
        t.replace(&t[t.find("(defn subtotal").unwrap()..t.find("(defn total").unwrap()], "")
    };
    assert_eq!(cut(&before), cut(&after));
    assert_eq!(versions(&store, &id).last().unwrap(), &("agent".into(), "replace_form".into()));
    assert_eq!(versions(&store, &other).len(), 1, "untouched forms get no version");
    let calls = store
        .query("?[to] := *calls{to, from: $id}", params([("id", id.as_str().into())]))
        .unwrap();
    let calls: Vec<String> = calls.rows.iter().map(|r| str_at(r, 0)).collect();
    assert!(calls.contains(&"clojure.core/transduce".to_string()), "{calls:?}");
}

#[test]
fn a_stale_hash_is_refused_with_the_current_source() {
    let store = shop();
    let id = id_of(&store, "shop.cart/subtotal");
    let gen = generation(&store).unwrap();
    let err = ops::apply(
        &store,
        &agent(),
        &[Op::Replace {
            id: id.clone(),
            source: "(defn subtotal [items] 0)".into(),
            expected_hash: Some("not-the-hash".into()),
        }],
        Options::default(),
    )
    .unwrap_err();
    match err {
        OpError::Stale { current_source, .. } => {
            assert!(current_source.starts_with("(defn subtotal [items]"), "{current_source}")
        }
        e => panic!("expected Stale, got {e}"),
    }
    assert_eq!(generation(&store).unwrap(), gen, "nothing written");
}

#[test]
fn unbalanced_source_is_refused_and_nothing_changes() {
    let store = shop();
    let id = id_of(&store, "shop.cart/subtotal");
    let before = text(&store, CART);
    let err = ops::apply(
        &store,
        &agent(),
        &[Op::Replace {
            id,
            source: "(defn subtotal [items]\n  (reduce + items)".into(),
            expected_hash: None,
        }],
        Options::default(),
    )
    .unwrap_err();
    let OpError::Source(p) = err else { panic!("expected a source problem") };
    assert!(p.window.contains("->"), "{}", p.window);
    assert_eq!(text(&store, CART), before);
}

#[test]
fn insert_without_position_goes_before_its_first_caller() {
    let store = shop();
    let subtotal = id_of(&store, "shop.cart/subtotal");
    // `subtotal` now calls `discounted`, which does not exist yet.
    ops::apply(
        &store,
        &agent(),
        &[
            Op::Replace {
                id: subtotal.clone(),
                source: "(defn subtotal [items] (reduce + (map discounted items)))".into(),
                expected_hash: None,
            },
            Op::Insert {
                ns: "shop.cart".into(),
                source: "(defn discounted [item] (* 9/10 (line-total item)))".into(),
                before: None,
                after: None,
            },
        ],
        Options::default(),
    )
    .unwrap();
    let t = text(&store, CART);
    let at = |s: &str| t.find(s).unwrap_or_else(|| panic!("{s} missing in\n{t}"));
    assert!(at("(defn line-total") < at("(defn discounted"));
    assert!(at("(defn discounted") < at("(defn subtotal"));
    assert!(t.contains("\n\n(defn discounted [item] (* 9/10 (line-total item)))\n\n(defn subtotal"));
    let unresolved = store.query("?[sym] := *unresolved{sym}", Default::default()).unwrap();
    assert!(
        !unresolved.rows.iter().any(|r| str_at(r, 0).contains("discounted")),
        "the call resolves to the new var"
    );
}

#[test]
fn a_batch_is_all_or_nothing() {
    let store = shop();
    let id = id_of(&store, "shop.cart/subtotal");
    let gen = generation(&store).unwrap();
    let err = ops::apply(
        &store,
        &agent(),
        &[
            Op::Replace { id, source: "(defn subtotal [items] 0)".into(), expected_hash: None },
            Op::Delete { id: "nosuchid".into() },
        ],
        Options::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("op 2 (delete_form)"), "{err}");
    assert_eq!(generation(&store).unwrap(), gen);
}

#[test]
fn delete_comment_and_line_replace() {
    let store = shop();
    let id = id_of(&store, "shop.cart/print-receipt!");
    ops::apply(&store, &agent(), &[Op::Delete { id: id.clone() }], Options::default()).unwrap();
    assert!(!text(&store, CART).contains("(defn print-receipt!"));
    assert_eq!(versions(&store, &id).last().unwrap().1, "delete");

    let total = id_of(&store, "shop.cart/total");
    ops::apply(
        &store,
        &agent(),
        &[Op::InsertComment {
            anchor_id: Some(total),
            file: None,
            line: None,
            text: "Totals include tax.\nSee *tax-rate*.".into(),
            position: "before".into(),
        }],
        Options::default(),
    )
    .unwrap();
    let t = text(&store, CART);
    assert!(t.contains("\n\n;; Totals include tax.\n;; See *tax-rate*.\n(defn total"), "{t}");

    let line = t[..t.find("(defn subtotal").unwrap()].matches('\n').count() as u32 + 1;
    let bad = ops::apply(
        &store,
        &agent(),
        &[Op::ReplaceTopLevel {
            file: CART.into(),
            line: line + 1,
            target_line: Some("(defn nothing-here [])".into()),
            new_form: "(defn subtotal [xs] 0)".into(),
        }],
        Options::default(),
    )
    .unwrap_err();
    assert!(bad.to_string().contains("(defn subtotal [items]"), "shows nearby lines: {bad}");
    ops::apply(
        &store,
        &agent(),
        &[Op::ReplaceTopLevel {
            file: CART.into(),
            line: line + 2,
            target_line: Some("(defn subtotal [items]".into()),
            new_form: "(defn subtotal [xs] (reduce + (map line-total xs)))".into(),
        }],
        Options::default(),
    )
    .unwrap();
    assert!(text(&store, CART).contains("(defn subtotal [xs] (reduce + (map line-total xs)))"));
}

#[test]
fn create_namespace_places_the_file_beside_its_siblings() {
    let store = shop();
    let out = ops::apply(
        &store,
        &agent(),
        &[
            Op::CreateNamespace {
                ns: "shop.tax".into(),
                path: None,
                doc: Some("Tax rules.".into()),
                requires: vec!["shop.money :as money".into()],
            },
            Op::Insert {
                ns: "shop.tax".into(),
                source: "(defn vat [c] (money/cents 0 (quot c 5)))".into(),
                before: None,
                after: None,
            },
        ],
        Options::default(),
    )
    .unwrap();
    assert_eq!(out.files, vec!["src/shop/tax.clj".to_string()]);
    let t = text(&store, "src/shop/tax.clj");
    assert_eq!(
        t,
        "(ns shop.tax\n  \"Tax rules.\"\n  (:require [shop.money :as money]))\n\n(defn vat [c] (money/cents 0 (quot c 5)))\n"
    );
    let calls = store
        .query(
            "?[to] := *calls{to, from}, *form{id: from, fqn: 'shop.tax/vat'}",
            Default::default(),
        )
        .unwrap();
    assert!(calls.rows.iter().any(|r| str_at(r, 0) == "shop.money/cents"));
    let again = ops::apply(
        &store,
        &agent(),
        &[Op::CreateNamespace { ns: "shop.tax".into(), path: None, doc: None, requires: vec![] }],
        Options::default(),
    );
    assert!(again.unwrap_err().to_string().contains("exists already"));
}

#[test]
fn a_users_aliases_are_mapped_back_to_the_stored_ones() {
    let store = shop();
    let mut map = std::collections::BTreeMap::new();
    map.insert("clojure.string".to_string(), "s".to_string());
    let user = Writer::new("ann", AliasMap(map));
    let id = id_of(&store, "shop.cart/receipt");
    let shown = ops::form_text(&store, &user, &id).unwrap();
    assert!(shown.contains("(s/join"), "{shown}");
    ops::apply(
        &store,
        &user,
        &[Op::Replace {
            id,
            source: "(defn receipt [items] (s/join \"\\n\" (map :name items)))".into(),
            expected_hash: None,
        }],
        Options::default(),
    )
    .unwrap();
    let t = text(&store, CART);
    assert!(t.contains("(defn receipt [items] (str/join \"\\n\" (map :name items)))"), "{t}");
}

#[test]
fn a_save_that_does_not_parse_is_a_draft_and_changes_nothing() {
    let store = shop();
    let before = text(&store, CART);
    let gen_forms = store.query("?[count(id)] := *version{id}", Default::default()).unwrap();
    let bad = before.replace("(defn subtotal [items]", "(defn subtotal [items");
    let saved = save::save(&store, &agent(), CART, bad.as_bytes(), None).unwrap();
    let d = saved.draft().expect("a draft");
    assert!(d.line > 0 && !d.error.is_empty(), "{d:?}");
    assert_eq!(text(&store, CART), before, "the store is unchanged");
    let read = save::read(&store, CART, &views::Render::AsStored).unwrap().unwrap();
    assert_eq!(read, bad.as_bytes(), "the draft reads back exactly as written");
    let now = store.query("?[count(id)] := *version{id}", Default::default()).unwrap();
    assert_eq!(now.rows, gen_forms.rows);
    // A good save replaces the draft.
    let good =
        before.replace("(reduce + (map line-total items))", "(apply + (map line-total items))");
    let saved = save::save(&store, &agent(), CART, good.as_bytes(), None).unwrap();
    assert!(matches!(saved, Saved::Committed { .. }), "{saved:?}");
    assert!(save::draft(&store, CART).unwrap().is_none());
    assert_eq!(text(&store, CART), good);
}

/// A draft is a writer's unsaved text, kept because it does not parse (or conflicts): another
/// writer's form edit of the same file changes the stored forms and leaves the draft alone.
/// Nothing else holds the draft's bytes; the writer's next good save merges the edit in.
#[test]
fn a_form_edit_by_another_writer_keeps_a_files_draft() {
    let store = shop();
    let before = text(&store, CART);
    let user = Writer::new("user", AliasMap::default());
    let unsaved =
        before.replace("(defn subtotal [items]", "(defn subtotal [items] ;; wip\n  (let [");
    let saved = save::save(&store, &user, CART, unsaved.as_bytes(), None).unwrap();
    assert!(saved.draft().is_some(), "{saved:?}");
    ops::apply(
        &store,
        &agent(),
        &[Op::Replace {
            id: id_of(&store, "shop.cart/line-total"),
            source: "(defn line-total [{:keys [price qty]}] (* qty price))".into(),
            expected_hash: None,
        }],
        Options::default(),
    )
    .unwrap();
    let draft = save::draft(&store, CART).unwrap().expect("the user's draft is kept");
    assert_eq!(draft.bytes, unsaved.as_bytes(), "the draft's bytes are the user's");
    // The user finishes the edit from the draft: the agent's form is merged in.
    let good =
        before.replace("(reduce + (map line-total items))", "(apply + (map line-total items))");
    let saved = save::save(&store, &user, CART, good.as_bytes(), Some(before.as_bytes())).unwrap();
    assert!(matches!(saved, Saved::Committed { .. }), "{saved:?}");
    let t = text(&store, CART);
    assert!(t.contains("(apply + (map line-total items))"), "{t}");
    assert!(t.contains("(* qty price)"), "the agent's edit survives: {t}");
    assert!(save::draft(&store, CART).unwrap().is_none());
}

/// A save merged against a store that moved: deleting a form leaves its neighbour more blank
/// lines before it, which is no change of that neighbour. Another writer deleted the
/// neighbour meanwhile: both deletions stand, with no conflict.
#[test]
fn a_neighbours_deletion_is_no_change_of_a_form_in_a_merge() {
    let (store, _dir) = formdb_testkit::store_of(&[(
        "src/m/a.clj",
        "(ns m.a)\n\n(def x 1)\n\n(def y 2)\n\n(def z 3)\n",
    )]);
    let base = text(&store, "src/m/a.clj");
    ops::apply(
        &store,
        &Writer::new("other", AliasMap::default()),
        &[Op::Delete { id: id_of(&store, "m.a/y") }],
        Options::default(),
    )
    .unwrap();
    // This writer deleted `x` (and its line) from the text it read: `y` now has two blank
    // lines before it.
    let mine = base.replace("(def x 1)\n", "");
    let saved = save::save(&store, &agent(), "src/m/a.clj", mine.as_bytes(), Some(base.as_bytes()))
        .unwrap();
    assert!(matches!(saved, Saved::Committed { .. }), "{saved:?}");
    let t = text(&store, "src/m/a.clj");
    assert!(!t.contains("(def x") && !t.contains("(def y") && t.contains("(def z 3)"), "{t}");
}

#[test]
fn saves_refuse_a_second_ns_and_a_namespace_owned_elsewhere() {
    let store = shop();
    let t = text(&store, CART);
    let twice = format!("{t}\n(ns other.thing)\n");
    let d = save::save(&store, &agent(), CART, twice.as_bytes(), None).unwrap();
    assert!(d.draft().unwrap().error.contains("second `ns`"));
    let stolen = "(ns shop.money)\n(def x 1)\n";
    let d = save::save(&store, &agent(), "src/shop/thief.clj", stolen.as_bytes(), None).unwrap();
    assert!(d.draft().unwrap().error.contains("src/shop/money.clj"), "{d:?}");
    assert!(save::paths(&store).unwrap().contains(&"src/shop/thief.clj".to_string()));
}

#[test]
fn concurrent_edits_to_different_forms_merge_and_the_same_form_conflicts() {
    let store = shop();
    let base = text(&store, CART);
    // The store moves on: an agent edits `total`.
    let total = id_of(&store, "shop.cart/total");
    ops::apply(
        &store,
        &agent(),
        &[Op::Replace {
            id: total,
            source: "(defn total [items] (subtotal items))".into(),
            expected_hash: None,
        }],
        Options { keep_layout: true, ..Options::default() },
    )
    .unwrap();
    // Meanwhile an editor that read `base` changes `subtotal`.
    let mine =
        base.replace("(reduce + (map line-total items))", "(apply + (map line-total items))");
    let saved = save::save(
        &store,
        &Writer::new("ed", AliasMap::default()),
        CART,
        mine.as_bytes(),
        Some(base.as_bytes()),
    )
    .unwrap();
    assert!(matches!(saved, Saved::Committed { .. }), "{saved:?}");
    let t = text(&store, CART);
    assert!(t.contains("(apply + (map line-total items))"), "editor's change kept");
    assert!(t.contains("(defn total [items] (subtotal items))"), "agent's change kept");

    // Both change `subtotal` from the same base: the store keeps its version, the editor's text
    // becomes a draft.
    let base = t.clone();
    let sub = id_of(&store, "shop.cart/subtotal");
    ops::apply(
        &store,
        &agent(),
        &[Op::Replace {
            id: sub,
            source: "(defn subtotal [items] 42)".into(),
            expected_hash: None,
        }],
        Options { keep_layout: true, ..Options::default() },
    )
    .unwrap();
    let mine =
        base.replace("(apply + (map line-total items))", "(reduce + 0 (map line-total items))");
    let saved = save::save(
        &store,
        &Writer::new("ed", AliasMap::default()),
        CART,
        mine.as_bytes(),
        Some(base.as_bytes()),
    )
    .unwrap();
    let Saved::Conflict { draft, .. } = saved else { panic!("expected a conflict: {saved:?}") };
    assert!(draft.error.contains("subtotal"), "{}", draft.error);
    assert!(text(&store, CART).contains("(defn subtotal [items] 42)"));
    assert_eq!(
        save::read(&store, CART, &views::Render::AsStored).unwrap().unwrap(),
        mine.as_bytes()
    );
}

#[test]
fn delete_then_restore_brings_the_file_back() {
    let store = shop();
    let before = text(&store, CART);
    let id = id_of(&store, "shop.cart/total");
    assert!(save::delete(&store, &agent(), CART).unwrap());
    assert!(views::stored_text(&store, CART).is_err());
    assert_eq!(versions(&store, &id).last().unwrap().1, "delete");
    save::restore(&store, &agent(), CART).unwrap();
    assert_eq!(text(&store, CART), before);
    assert_eq!(id_of(&store, "shop.cart/total"), id, "ids come back with the path");
}

#[test]
fn form_files_save_one_form_and_keep_bad_text_as_a_draft() {
    let store = shop();
    let id = id_of(&store, "shop.money/cents");
    let w = agent();
    let t = ops::form_text(&store, &w, &id).unwrap();
    assert!(t.starts_with("(defn cents") && t.ends_with(")\n"), "{t}");
    let edited = t.replace("(+ (* 100 units) c)", "(+ c (* 100 units))");
    ops::save_form_text(&store, &w, &id, edited.as_bytes(), Some(t.as_bytes())).unwrap();
    assert!(text(&store, "src/shop/money.clj").contains("(+ c (* 100 units))"));
    let saved = ops::save_form_text(&store, &w, &id, b"(defn cents [", None).unwrap();
    assert!(saved.draft().is_some());
    assert!(save::draft(&store, &format!(".formdb/forms/{id}.clj")).unwrap().is_some());
    assert!(text(&store, "src/shop/money.clj").contains("(+ c (* 100 units))"));
}

/// A namespace spread over files, as clojure.core is (`core.clj` declares it with `ns`, the
/// others switch to it with `in-ns`): the declaring file owns it whatever the import order, and
/// both kinds of file save.
#[test]
fn in_ns_files_share_the_namespace_their_ns_file_declares() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/big");
    std::fs::create_dir_all(&src).unwrap();
    // `zz_more.clj` sorts (and is imported) after `core.clj`: its `in-ns` must not take over.
    std::fs::write(src.join("zz_more.clj"), "(in-ns 'big.core)\n\n(defn more [] (base))\n")
        .unwrap();
    std::fs::write(src.join("core.clj"), "(ns big.core)\n\n(defn base [] 1)\n").unwrap();
    let store = Store::open_in_memory().unwrap();
    import_dir(&store, dir.path(), "import", &Quiet).unwrap();
    let owner =
        store.query("?[file] := *ns_decl{ns: 'big.core', file}", Default::default()).unwrap();
    assert_eq!(str_at(&owner.rows[0], 0), "src/big/core.clj");
    assert_eq!(views::ns_path(&store, "big.core").unwrap(), "src/big/core.clj");
    for (path, old, new) in [
        ("src/big/core.clj", "(defn base [] 1)", "(defn base [] 2)"),
        ("src/big/zz_more.clj", "(defn more [] (base))", "(defn more [] (inc (base)))"),
    ] {
        let t = text(&store, path).replace(old, new);
        let saved = save::save(&store, &agent(), path, t.as_bytes(), None).unwrap();
        assert!(matches!(saved, Saved::Committed { .. }), "{path}: {saved:?}");
        assert_eq!(text(&store, path), t);
    }
}

/// Top-level forms of a file, as (id, source) in file order.
fn ids_and_sources(store: &Store, path: &str) -> Vec<(String, String)> {
    let r = store
        .query(
            "?[pos, id, source] := *form_at{file: $path, pos, id}, *form{id, source, parent}, parent == '' :order pos",
            params([("path", path.into())]),
        )
        .unwrap();
    r.rows.iter().map(|r| (str_at(r, 1), str_at(r, 2))).collect()
}

/// A directory rename moves every file, blob and draft under it in one change set; forms keep
/// their ids and callers elsewhere still resolve; a bad target changes nothing.
#[test]
fn rename_dir_moves_files_blobs_and_drafts_in_one_change_keeping_ids() {
    let store = shop();
    let w = agent();
    save::save(&store, &w, "src/shop/notes.txt", b"blob \x00 bytes", None).unwrap();
    let bad = b"(ns shop.extra)\n(defn broken [x\n";
    let saved = save::save(&store, &w, "src/shop/extra.clj", bad, None).unwrap();
    assert!(saved.draft().is_some());
    let money = ids_and_sources(&store, "src/shop/money.clj");
    let cart = ids_and_sources(&store, CART);
    let (money_text, cart_text) = (text(&store, "src/shop/money.clj"), text(&store, CART));
    let gen = generation(&store).unwrap();

    let moved = save::rename_dir(&store, &w, "src/shop", "src/store").unwrap();
    assert_eq!(generation(&store).unwrap(), gen + 1, "one change set");
    let news: Vec<&str> = moved.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        news,
        ["src/store/cart.clj", "src/store/extra.clj", "src/store/money.clj", "src/store/notes.txt"]
    );
    assert_eq!(ids_and_sources(&store, "src/store/money.clj"), money);
    assert_eq!(ids_and_sources(&store, "src/store/cart.clj"), cart);
    assert_eq!(text(&store, "src/store/money.clj"), money_text);
    assert_eq!(text(&store, "src/store/cart.clj"), cart_text);
    let read = |p: &str| save::read(&store, p, &views::Render::AsStored).unwrap();
    assert_eq!(read("src/store/notes.txt").unwrap(), b"blob \x00 bytes");
    assert_eq!(read("src/store/extra.clj").unwrap(), bad, "the draft moved, bytes exact");
    let drafts: Vec<String> = save::drafts(&store).unwrap().into_iter().map(|d| d.path).collect();
    assert_eq!(drafts, ["src/store/extra.clj"]);
    assert!(save::paths(&store).unwrap().iter().all(|p| !p.starts_with("src/shop/")));
    // The test namespace still resolves its call into the moved file.
    let total = id_of(&store, "shop.cart/total");
    assert!(cart.iter().any(|(id, _)| *id == total));
    let callers =
        store.query("?[from] := *calls{to: 'shop.cart/total', from}", Default::default()).unwrap();
    assert!(!callers.rows.is_empty(), "the test still calls shop.cart/total");
    assert_eq!(views::ns_path(&store, "shop.money").unwrap(), "src/store/money.clj");

    // Into itself, onto existing paths, or from an empty place: refused, nothing written.
    let gen = generation(&store).unwrap();
    for (from, to) in
        [("src/store", "src/store/sub"), ("src/store", "src/store"), ("src/none", "src/x")]
    {
        let e = save::rename_dir(&store, &w, from, to).unwrap_err().to_string();
        assert!(e.contains(from) || e.contains(to), "{from} -> {to}: {e}");
    }
    save::save(&store, &w, "lib/store/cart.clj", b"(ns lib.cart)\n", None).unwrap();
    let e = save::rename_dir(&store, &w, "src/store", "lib/store").unwrap_err().to_string();
    assert!(e.contains("lib/store/cart.clj") && e.contains("exists"), "{e}");
    assert_eq!(generation(&store).unwrap(), gen + 1, "only the save above was written");
}

/// A form file saved from a stale read keeps the store's version and the writer's text as a
/// draft; refusals other than parse errors (not UTF-8, a NUL byte, a form deleted meanwhile)
/// keep drafts too, each reading back exactly as written.
#[test]
fn form_file_saves_compare_with_what_was_read_and_keep_every_refusal_as_a_draft() {
    let store = shop();
    let w = agent();
    let id = id_of(&store, "shop.money/cents");
    let draft_path = format!(".formdb/forms/{id}.clj");
    let read = ops::form_text(&store, &w, &id).unwrap();
    // Someone else changes the form after we read it.
    let theirs = read.replace("Whole units and cents to cents.", "Theirs.");
    ops::save_form_text(&store, &agent(), &id, theirs.as_bytes(), None).unwrap();
    let mine = read.replace("(+ (* 100 units) c)", "(+ c (* 100 units))");
    let saved =
        ops::save_form_text(&store, &w, &id, mine.as_bytes(), Some(read.as_bytes())).unwrap();
    let Saved::Conflict { draft, .. } = &saved else { panic!("expected a conflict: {saved:?}") };
    assert!(draft.error.contains("conflict") && draft.error.contains(&id), "{}", draft.error);
    assert_eq!(ops::form_text(&store, &w, &id).unwrap(), theirs, "the store's version stays");
    assert_eq!(save::draft(&store, &draft_path).unwrap().unwrap().bytes, mine.as_bytes());
    // Saved again from what the store holds now: committed, the draft goes.
    let again = theirs.replace("(+ (* 100 units) c)", "(+ c (* 100 units))");
    let saved =
        ops::save_form_text(&store, &w, &id, again.as_bytes(), Some(theirs.as_bytes())).unwrap();
    assert!(matches!(saved, Saved::Committed { .. }), "{saved:?}");
    assert!(save::draft(&store, &draft_path).unwrap().is_none());
    // A base that differs only by blank lines around the form is the same read.
    let padded = format!("\n{again}\n\n");
    let last = again.replace("Theirs.", "Mine.");
    let saved =
        ops::save_form_text(&store, &w, &id, last.as_bytes(), Some(padded.as_bytes())).unwrap();
    assert!(matches!(saved, Saved::Committed { .. }), "{saved:?}");

    let stored = text(&store, "src/shop/money.clj");
    for (bytes, error) in [
        (&b"(defn cents [] \xff)\n"[..], "invalid UTF-8"),
        (&b"(defn cents [] \"\x00\")\n"[..], "NUL"),
    ] {
        let saved = ops::save_form_text(&store, &w, &id, bytes, None).unwrap();
        let d = saved.draft().expect("a draft").clone();
        assert!(d.error.contains(error), "{}", d.error);
        assert_eq!(save::draft(&store, &draft_path).unwrap().unwrap().bytes, bytes);
        assert_eq!(text(&store, "src/shop/money.clj"), stored, "store unchanged");
    }
    // The form deleted elsewhere: the text is kept as the draft of its form file.
    let rounding = id_of(&store, "shop.money/rounding-mode");
    let base = ops::form_text(&store, &w, &rounding).unwrap();
    ops::apply(&store, &w, &[Op::Delete { id: rounding.clone() }], Options::default()).unwrap();
    let mine = base.replace(":half-up", ":half-even");
    let saved =
        ops::save_form_text(&store, &w, &rounding, mine.as_bytes(), Some(base.as_bytes())).unwrap();
    let d = saved.draft().expect("a draft");
    assert!(
        d.error.contains("no form with id") && d.error.contains("deleted since you read it"),
        "{}",
        d.error
    );
    let kept = save::draft(&store, &format!(".formdb/forms/{rounding}.clj")).unwrap().unwrap();
    assert_eq!(kept.bytes, mine.as_bytes());
}

/// Renaming a file that has a draft moves its stored forms (ids kept) and its draft together.
#[test]
fn renaming_a_file_with_a_draft_moves_both_and_keeps_ids() {
    let store = shop();
    let w = agent();
    let before = ids_and_sources(&store, CART);
    let bad = b"(ns shop.cart)\n(defn broken [x\n";
    assert!(save::save(&store, &w, CART, bad, None).unwrap().draft().is_some());
    save::rename(&store, &w, CART, "src/shop/basket.clj", false).unwrap();
    assert_eq!(ids_and_sources(&store, "src/shop/basket.clj"), before);
    let read = save::read(&store, "src/shop/basket.clj", &views::Render::AsStored).unwrap();
    assert_eq!(read.unwrap(), bad, "the draft moved with it, exactly");
    let drafts: Vec<String> = save::drafts(&store).unwrap().into_iter().map(|d| d.path).collect();
    assert_eq!(drafts, ["src/shop/basket.clj"]);
    assert!(save::read(&store, CART, &views::Render::AsStored).unwrap().is_none());
}

/// Every row the store holds for the forms of `path`, relation by relation, in a fixed order.
fn rows_of_file(store: &Store, path: &str) -> Vec<String> {
    let cols = formdb_engine::change::FORM_COLS;
    let scripts = [
        format!("?[{cols}] := *form_at{{file: $f, id}}, *form{{{cols}}}"),
        "?[to, from, kind, line, col, count] := *form_at{file: $f, id: from}, *form{id: from, callees}, to in callees, *calls{to, from, kind, line, col, count}".into(),
        "?[from, sym, line, col] := *form_at{file: $f, id: from}, *unresolved{from, sym, line, col}".into(),
        "?[var, id, line] := *form_at{file: $f, id}, *defined_by{id, var}, *defines{var, id, line}".into(),
        "?[ns, id, line, col, kind, message, severity, report] := *form_at{file: $f, id}, *diagnostic{ns, id, line, col, kind, message, severity, report}".into(),
        "?[file, pos, id, leading_chars, source_chars] := *form_at{file: $f, pos, id, leading_chars, source_chars}, file = $f".into(),
        "?[path, lang, ns, hash, trailing, error] := *file{path: $f, lang, ns, hash, trailing, error}, path = $f".into(),
    ];
    let mut out = Vec::new();
    for s in &scripts {
        let r = store.query(s, params([("f", path.into())])).unwrap();
        let mut rows: Vec<String> = r.rows.iter().map(|r| format!("{r:?}")).collect();
        rows.sort();
        out.push(format!("{s}\n{}", rows.join("\n")));
    }
    out
}

/// Two stores of a tree holding `src` at `path`: one to edit in place, one to save whole.
fn two_stores_of(path: &str, src: &str) -> (Store, Store) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, src).unwrap();
    let open = || {
        let store = Store::open_in_memory().unwrap();
        import_dir(&store, dir.path(), "import", &Quiet).unwrap();
        store
    };
    (open(), open())
}

/// Replace form `id` of `path` by `source` in `in_place`, as an agent's edit, and save
/// `after` (the file's new text) whole in `whole`: the two must then hold the same rows.
fn edit_both_ways(
    in_place: &Store,
    whole: &Store,
    path: &str,
    id: &str,
    source: &str,
    after: &str,
) {
    let op = Op::Replace { id: id.to_string(), source: source.into(), expected_hash: None };
    let keep = Options { keep_layout: true, ..Options::default() };
    ops::apply(in_place, &agent(), &[op], keep).unwrap();
    assert_eq!(text(in_place, path), after, "{id}: the new text is stored");
    let saved = save::save(whole, &agent(), path, after.as_bytes(), None).unwrap();
    assert!(matches!(saved, Saved::Committed { .. }), "{saved:?}");
    assert_same_rows(in_place, whole, path, id);
}

/// `in_place` and `whole` hold the same rows of `path` in every relation ([`rows_of_file`]);
/// else the first line that differs, under `what`.
fn assert_same_rows(in_place: &Store, whole: &Store, path: &str, what: &str) {
    for (a, b) in rows_of_file(in_place, path).iter().zip(rows_of_file(whole, path)) {
        if *a == b {
            continue;
        }
        let differs = a.lines().zip(b.lines()).find(|(x, y)| x != y);
        let (x, y) = differs.unwrap_or_else(|| (a.lines().next().unwrap_or(""), "(rows missing)"));
        panic!("{what}: in place and whole-file save differ:\n{x}\n{y}");
    }
}

#[test]
fn an_edit_applied_in_place_stores_what_a_whole_file_save_stores() {
    // One form replaced by id is applied to that form (and the forms it moves) alone. The
    // store must end up exactly as if the whole new text of the file had been saved: the same
    // rows in every relation, for edits that keep, add and remove lines.
    let src = "(ns p.m\n  (:require [clojure.string :as str]))\n\n(defn f [x] (str/trim x))\n\n(defrecord R [a b])\n\n(defn g\n  [x]\n  (f x 1)\n  (undefined-thing x))\n\n(comment\n  (g 1)\n  (nope))\n\n(def boot (println \"hi\"))\n\n(defn h [] (g (f \"a\")))\n";
    let path = "src/p/m.clj";
    let (in_place, whole) = two_stores_of(path, src);
    let edits = [
        ("p.m/f", "(defn f\n  [x]\n  (str/trim\n    (str x)))"),
        ("p.m/g", "(defn g [x] (f x 2) (undefined-thing x))"),
        ("p.m/f", "(defn f [x] (str/upper-case x))"),
        ("p.m/h", "(defn h\n  []\n  (g\n   (f \"b\")))"),
    ];
    for (fqn, source) in edits {
        let id = id_of(&in_place, fqn);
        let before = text(&in_place, path);
        let at = before.find(&*format!("(defn {}", fqn.rsplit('/').next().unwrap())).unwrap();
        let end = at + before[at..].find("\n\n").unwrap_or(before.len() - at - 1);
        let after = format!("{}{source}{}", &before[..at], &before[end..]);
        assert!(
            formdb_engine::import::form_in_place(&in_place, path, &id, source, &after)
                .unwrap()
                .is_some(),
            "{fqn}: this edit is one the engine applies in place"
        );
        edit_both_ways(&in_place, &whole, path, &id, source, &after);
        for store in [&in_place, &whole] {
            assert_eq!(texts_placed_otherwise(store, path), Vec::<String>::new(), "{fqn}");
        }
    }
}

#[test]
fn an_edit_in_a_cycle_of_calls_is_applied_in_place_only_while_no_class_moves() {
    // `even?'` and `odd?'` call each other, and `odd?'` also writes an atom: both are impure.
    // Edited at its place, `even?'` measured against the stored class of `odd?'` proves
    // nothing, as that class came partly from `even?'`'s own old text: the file's classes are
    // propagated again. An edit that keeps every class is applied in place; one that moves
    // them (the write gone: both pure) is left to a whole-file save. Either way the store must
    // hold what a whole-file save of the new text holds.
    let src = "(ns p.r)\n\n(def counter (atom 0))\n\n(declare odd?')\n\n(defn even?' [n] (if (zero? n) true (odd?' (dec n))))\n\n(defn odd?' [n] (swap! counter inc) (if (zero? n) false (even?' (dec n))))\n";
    let path = "src/p/r.clj";
    let (in_place, whole) = two_stores_of(path, src);
    let defn = |store: &Store, name: &str| -> (String, String) {
        let r = store
            .query(
                "?[id, purity] := *form{id, name: $n, kind: 'defn', purity}",
                params([("n", name.into())]),
            )
            .unwrap();
        assert_eq!(r.rows.len(), 1, "one defn {name}");
        (str_at(&r.rows[0], 0), str_at(&r.rows[0], 1))
    };
    assert_eq!(defn(&in_place, "even?'").1, "impure", "through the cycle");
    let edits = [
        ("even?'", "(defn even?' [n] (if (zero? n) :yes (odd?' (dec n))))", true, "impure"),
        ("odd?'", "(defn odd?' [n] (if (zero? n) false (even?' (dec n))))", false, "pure"),
    ];
    for (name, source, applied_in_place, class) in edits {
        let (id, _) = defn(&in_place, name);
        let before = text(&in_place, path);
        let at = before.find(&*format!("(defn {name} ")).unwrap();
        let end = at + before[at..].find('\n').unwrap();
        let after = format!("{}{source}{}", &before[..at], &before[end..]);
        let changes =
            formdb_engine::import::form_in_place(&in_place, path, &id, source, &after).unwrap();
        assert_eq!(changes.is_some(), applied_in_place, "{name}: applied in place");
        edit_both_ways(&in_place, &whole, path, &id, source, &after);
        for store in [&in_place, &whole] {
            assert_eq!(defn(store, "even?'").1, class, "{name}");
            assert_eq!(defn(store, "odd?'").1, class, "{name}");
        }
    }
}

/// Forms of `path` whose place row (`form_at`) holds other lengths than their own row's texts
/// have: a top-level form's `leading` and `source`, a form inside one none.
fn texts_placed_otherwise(store: &Store, path: &str) -> Vec<String> {
    let rows = store
        .query(
            "?[id] := *form_at{file: $f, id, leading_chars: l, source_chars: s},
                 *form{id, parent, leading, source},
                 parent == '', or(l != length(leading), s != length(source))
             ?[id] := *form_at{file: $f, id, leading_chars: l, source_chars: s}, *form{id, parent},
                 parent != '', or(l != 0, s != 0)",
            params([("f", path.into())]),
        )
        .unwrap();
    let placed = store
        .query("?[count(id)] := *form_at{file: $f, id}", params([("f", path.into())]))
        .unwrap();
    assert!(placed.rows[0][0].get_int().unwrap() > 0, "{path} has forms");
    rows.rows.iter().map(|r| format!("{r:?}")).collect()
}

#[test]
fn a_form_wrapped_into_a_comment_and_out_again_reads_back_as_saved() {
    // Wrapped, `a` is a form inside the comment (another id) at the position the top-level
    // form had: its place row must hold no text, or the file would show it twice. Unwrapped,
    // it is the top-level form again, with its first id.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/p")).unwrap();
    let path = "src/p/w.clj";
    let top = "(defn a [] 1)\n\n(defn b [] 2)\n";
    std::fs::write(dir.path().join(path), top).unwrap();
    let store = Store::open_in_memory().unwrap();
    import_dir(&store, dir.path(), "import", &Quiet).unwrap();
    let named_a = || -> Vec<String> {
        let rows = store.query("?[id] := *form{id, name: 'a'}", Params::new()).unwrap();
        rows.rows.iter().map(|r| str_at(r, 0)).collect()
    };
    let id = named_a();
    assert_eq!(id.len(), 1, "{id:?}");
    let wrapped = "(comment\n  (defn a [] 1))\n\n(defn b [] 2)\n";
    for (round, bytes) in [wrapped, top, wrapped, top].into_iter().enumerate() {
        let saved = save::save(&store, &agent(), path, bytes.as_bytes(), None).unwrap();
        assert!(matches!(saved, Saved::Committed { .. }), "{round}: {saved:?}");
        assert_eq!(text(&store, path), bytes, "{round}: the file reads back as saved");
        let read = save::read(&store, path, &views::Render::AsStored).unwrap().unwrap();
        assert_eq!(String::from_utf8(read).unwrap(), bytes, "{round}");
        assert_eq!(texts_placed_otherwise(&store, path), Vec::<String>::new(), "{round}");
    }
    assert_eq!(named_a(), id, "one form `a`, the top-level one, with its first id");
}

/// A file past `save::IN_PLACE_OVER`: definitions of about 200 bytes calling one another, with
/// a byte order mark, a require, a `comment` block, an impure form and text that is not ASCII.
fn big_file() -> String {
    let mut src = String::from("\u{feff}(ns p.big\n  (:require [clojure.string :as str]))\n\n");
    src.push_str("(def boot (println \"héllo\"))\n\n(comment\n  (f1 \"a\")\n  (nope))\n\n");
    let mut n = 0;
    while src.len() <= save::IN_PLACE_OVER + 4096 {
        let body = if n == 0 { "(str/trim x)".to_string() } else { format!("(f{} x)", n - 1) };
        src.push_str(&format!(
            "(defn f{n}\n  \"Trims x — the {n}th way, through the ones before it.\"\n  [x]\n  (let [y {body}]\n    (str/lower-case y)))\n\n"
        ));
        n += 1;
    }
    src
}

#[test]
fn a_big_file_saved_with_one_definition_changed_stores_what_a_whole_file_save_stores() {
    // The save of a big file that changes one definition is applied to that form alone; the
    // store must end up exactly as a whole-file save of the same text leaves it: the same rows
    // in every relation and the same versions. Saves that are not one definition's edit take
    // the whole-file path, in both stores.
    let path = "src/p/big.clj";
    let (in_place, whole) = two_stores_of(path, &big_file());
    // The text of the file's middle `defn`.
    let middle = |t: &str| -> (usize, usize) {
        let n = t.matches("\n(defn f").count() / 2;
        let at = t.find(&format!("\n(defn f{n}\n")).unwrap() + 1;
        (at, at + t[at..].find("\n\n").unwrap())
    };
    let in_middle = move |f: fn(&str) -> String| {
        move |t: &str| {
            let (a, b) = middle(t);
            format!("{}{}{}", &t[..a], f(&t[a..b]), &t[b..])
        }
    };
    type Edit = Box<dyn Fn(&str) -> String>;
    // What each save changes, how, and whether it is applied to that form alone.
    let edits: Vec<(&str, Edit, bool)> = vec![
        (
            "a form's body, on the same lines",
            Box::new(in_middle(|f| f.replace("(str/lower-case y)", "(str/upper-case y)"))),
            true,
        ),
        (
            "a line added inside a form: every later form moves",
            Box::new(in_middle(|f| f.replace("  [x]\n", "  [x]\n  ;; one more line\n"))),
            true,
        ),
        (
            "a docstring, with a character that is not ASCII",
            Box::new(in_middle(|f| f.replace("Trims x", "Trïms x"))),
            true,
        ),
        (
            "a form's name: another var",
            Box::new(in_middle(|f| f.replacen("(defn f", "(defn g", 1))),
            false,
        ),
        (
            "a comment between two forms",
            Box::new(move |t: &str| {
                let (a, _) = middle(t);
                format!("{};; between\n{}", &t[..a], &t[a..])
            }),
            false,
        ),
        ("a form added at the end", Box::new(|t: &str| format!("{t}(def added 1)\n")), false),
        (
            "two forms changed",
            Box::new(|t: &str| t.replacen("(str/lower-case y)", "(str/upper-case y)", 2)),
            false,
        ),
    ];
    for (what, edit, alone) in &edits {
        let before = text(&in_place, path);
        assert!(before == text(&whole, path), "{what}: the two stores hold one text before");
        let after = edit(&before);
        assert!(after != before, "{what}: the edit changes the text");
        let base = Some(before.as_bytes());
        let a = save::save(&in_place, &agent(), path, after.as_bytes(), base).unwrap();
        let b = save::save(&whole, &agent().saving_whole_files(), path, after.as_bytes(), base)
            .unwrap();
        let (Saved::Committed { applied: a, .. }, Saved::Committed { applied: b, .. }) = (&a, &b)
        else {
            panic!("{what}: both saves commit: {a:?} {b:?}");
        };
        // A whole-file save counts the forms it found unchanged; one form's edit reads no other.
        assert_eq!(a.unchanged == 0, *alone, "{what}: applied to the form alone: {a:?}");
        assert!(b.unchanged > 0, "{what}: the whole file: {b:?}");
        assert!(text(&in_place, path) == after, "{what}: the new text is stored");
        assert_same_rows(&in_place, &whole, path, what);
        assert_eq!(versions_of_file(&in_place, path), versions_of_file(&whole, path), "{what}");
    }
}

/// Every version of the forms of `path`: id, number, author and operation.
fn versions_of_file(store: &Store, path: &str) -> Vec<String> {
    let r = store
        .query(
            "?[id, v, author, op] := *form_at{file: $f, id}, *version{id, v, author, op}",
            params([("f", path.into())]),
        )
        .unwrap();
    r.rows.iter().map(|r| format!("{r:?}")).collect()
}
