use super::*;
use crate::oneline::oneline_text;

fn map(pairs: &[(&str, &str)]) -> AliasMap {
    AliasMap::from_pairs(pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())))
}

#[test]
fn renames_tokens_not_strings_or_comments() {
    let src = "(ns a (:require [clojure.string :as str]))\n;; str/x\n(defn f [x] \"str/join\" (str/join x ::str/k #::str{:a 1}))\n";
    let v = user_view_text(src, &map(&[("clojure.string", "s")]));
    assert_eq!(
        v.text,
        "(ns a (:require [clojure.string :as s]))\n;; str/x\n(defn f [x] \"str/join\" (s/join x ::s/k #::s{:a 1}))\n"
    );
    assert_eq!(parse_back_text(src, &v.text, &map(&[("clojure.string", "s")])), src);
}

#[test]
fn reindentation_that_would_not_invert_is_left_out() {
    let m = map(&[("clojure.string", "s")]);
    // Line 3 sits inside the first `string` token's columns: it stays, but renamed back,
    // the shortened token would end before it and move it. So no line moves.
    let src = "(ns a (:require [clojure.string :as string]))\n(f string/a string/b\n        x)\n";
    let v = user_view_text(src, &m);
    assert_eq!(v.text, "(ns a (:require [clojure.string :as s]))\n(f s/a s/b\n        x)\n");
    assert_eq!(v, user_view_text_checked(src, &m));
    assert_eq!(parse_back_text(src, &v.text, &m), src);
    // A token left alone that is spelled like the new alias: renaming back would rename it.
    let src = "(ns a (:require [clojure.string :as string]))\n(let [[x :as s] y]\n  (string/f x\n           s))\n";
    let v = user_view_text(src, &m);
    assert_eq!(v, user_view_text_checked(src, &m));
    assert!(v.text.contains("(s/f x\n           s)"), "{}", v.text);
    // Aligned lines that do invert move with the token.
    let src = "(ns a (:require [clojure.string :as string]))\n(string/f a\n          b)\n";
    let v = user_view_text(src, &m);
    assert_eq!(v.text, "(ns a (:require [clojure.string :as s]))\n(s/f a\n     b)\n");
    assert_eq!(v, user_view_text_checked(src, &m));
    assert_eq!(parse_back_text(src, &v.text, &m), src);
}

/// The scanner's reading of a text is the tree's: the same alias tokens, the same aligned
/// lines, the same declaration; and it declines every text the tree has an error in.
fn check_scan(text: &str) -> bool {
    let tree = syntax::parse(text);
    let error = syntax::first_error(&tree, text).is_some();
    let Some(scan) = scan::scan(text) else { return false };
    assert!(!error, "the scanner accepted a text with a syntax error: {text:?}");
    assert_eq!(scan.sites, sites(&tree, text), "sites of {text:?}");
    let starts = line_starts(text);
    assert_eq!(scan.aligned, aligned_lines(&tree, text, &starts, 0), "aligned lines of {text:?}");
    assert_eq!(scanned_decl(text, &scan), Some(file_decl(&tree, text)), "decl of {text:?}");
    true
}

#[test]
fn scanner_reads_edge_cases_as_the_tree_does() {
    let accepted = [
        "(ns a (:require [clojure.string :as str]))\n(str/join \"str/x\" ;; str/y\n  #\"str/z\\\"\" \\( \\; \\\" \\space\n  str/k)\n",
        "(ns a (:require [b :as-alias bb] #?(:clj [c :as cc] :cljs [d :as dd])))\n(defn f [{::bb/keys [x]}]\n  #::cc{:a ::dd/b\n        :c 1}\n  #::{:d 2} #:e{:f 3} #:: {:g 4})\n",
        "(ns a)\n(require '[x.y :as xy])\n(alias 'q 'x.z)\n(clojure.core/alias (quote r) 'x.w)\n(def ^{:tag xy/T\n       :doc \"d\"}\n  v xy/v)\n",
        "(ns ^{:doc \"x\"} a\n  (:require [b :as b]))\n^:private\n(defn f\n  [x]\n  (b/g x\n       #_(b/h\n          y)\n       ^long\n       z))\n",
        "(ns a (:require [b :as b])) #_#_ (b/x) (b/y)\n`(b/f ~b/g ~@(b/h) @b/i #'b/j)\n'b/k ##Inf ##-Inf #inst \"2020\" #b/tag {:x 1}\n(let [[x :as b] y\n      {:as m} z]\n  [x b m])\n",
        "\u{feff}(ns a (:require [b :as b]))\r\n(b/f 1 -2 +3.5e2M 0x1F 017N 2r101 1/2 \\u00e9 \\o17 \\newline\r\n     b/g)\r\n",
        "(ns a (:require [b :as b]))\n(f b/x\n\t b/y\n   , b/z\n  \"line\n   b/not-a-token\"\n  \\\n   b/after-char-newline)\n",
        "(ns a (:require [clojure.core :as cc] [b :as b]))\n(cc// 1 2) (b/a/b 3) (b/x:y 'b/z# a'b)\n#?@(:clj [(b/p)] :cljs [(b/q)])\n#!shebang b/x\n#=(b/f) #= ^:m b/g #=#?(:clj (b/h))\n",
        "; only comments\n",
        "",
        "(def x 1)\n(f x/y)\n",
    ];
    for text in accepted {
        assert!(check_scan(text), "the scanner declined {text:?}");
    }
    // Syntax errors, and tokens the scanner leaves to tree-sitter (where the tree has no
    // error, `check_scan` has checked it would have read them alike): declined.
    let declined = [
        "(ns a (:require [b :as b]))\n(b/f\n",
        "(ns a)\n(f x))\n",
        "(ns a)\n(f [x)]\n",
        "(ns a)\n(f \"x)\n",
        "(ns a)\n(f \\abc)\n",
        "(ns a)\n(f 1abc/d)\n",
        "(ns a)\n(f foo/)\n",
        "(ns a)\n(f :a/)\n",
        "(ns a)\n(f ::a/)\n",
        "(ns a)\n(f :::a)\n",
        "(ns a)\n(f ^:m 1)\n",
        "(ns a)\n(f #=:k)\n",
        "(ns a)\n(f ^:m :k)\n",
        "(ns a)\n(f ^:m nil)\n",
        "(ns a)\n(f \\u12)\n",
        "(ns a)\n(f #)\n",
        "(ns a)\n#?[:clj 1]\n",
        "(ns a)\n#:a(x)\n",
        "(ns a)\n'\n",
        "(ns a)\n(f ^)\n",
        "(ns a)\n(f #_)\n",
        "(ns a)\n\"\\\n\"\n",
    ];
    for text in declined {
        check_scan(text);
        assert!(scan::scan(text).is_none(), "the scanner accepted {text:?}");
    }
    // Nesting below the depth gate (`syntax::MAX_DEPTH` tree nodes) is read; deeper is left
    // to the tree, which keeps such a file raw.
    let nested = format!("(ns a){}b/c{}", "([{#{".repeat(60), "}}])".repeat(60));
    assert!(check_scan(&nested));
    let deep = format!("(ns a){}{}", "(".repeat(1000), ")".repeat(1000));
    assert!(scan::scan(&deep).is_none());
    assert_eq!(user_view_text(&deep, &map(&[("b", "c")])).text, deep);
}

/// The corpus's Clojure files; none (the tests skip) only when no corpus was asked for:
/// with `FORMDB_CORPUS` set (as `scripts/test.sh` sets it), an empty corpus is a failure,
/// not a pass.
fn corpus_files() -> Vec<std::path::PathBuf> {
    let Some(dir) = formdb_testkit::corpus() else { return Vec::new() };
    let mut out = Vec::new();
    let mut todo = vec![dir.clone()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if syntax::Lang::from_path(&p.to_string_lossy()).is_some() {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(!out.is_empty(), "FORMDB_CORPUS={} holds no Clojure files", dir.display());
    out
}

/// Every corpus file, and prefixes of it cut at a dozen places (mostly syntax errors): the
/// scanner reads each as the tree does, or declines it; it declines none of the corpus files
/// that parse.
#[test]
fn scanner_reads_the_corpus_as_the_tree_does() {
    let files = corpus_files();
    if files.is_empty() {
        return;
    }
    let (mut whole, mut cuts, mut cuts_read) = (0, 0, 0);
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        let tree = syntax::parse(&text);
        if syntax::first_error(&tree, &text).is_none() {
            assert!(check_scan(&text), "the scanner declined {}", path.display());
            whole += 1;
        }
        for k in 1..12 {
            let mut cut = text.len() * k / 12;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            cuts += 1;
            cuts_read += usize::from(check_scan(&text[..cut]));
        }
    }
    eprintln!(
        "{whole} corpus files read alike; {cuts_read}/{cuts} cut prefixes read, the rest declined"
    );
    assert!(whole > 100, "{whole}");
}

/// Corpus text in pieces of four top-level forms, each with a few characters the reader treats
/// specially put in or taken out at pseudo-random places: whatever the scanner reads, it
/// reads as the tree does, and it declines what the tree has an error in.
#[test]
fn scanner_reads_mutated_corpus_text_as_the_tree_does() {
    let files = corpus_files();
    if files.is_empty() {
        return;
    }
    const INSERTS: [&str; 24] = [
        "\\", "#", "\"", "^", ":", "::", "/", "'", ";", "(", ")", "[", "]", "{", "}", "#_", "#?",
        "#:", "#::", "@", "~@", "\\o", "1", " ",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n.max(1) as u64) as usize
    };
    let (mut texts, mut read) = (0, 0);
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        let pieces = syntax::split_pieces(&syntax::parse(&text));
        for group in pieces.chunks(4) {
            let piece = &text[group[0].leading_start..group[group.len() - 1].end];
            for _ in 0..3 {
                let mut t = piece.to_string();
                for _ in 0..1 + next(3) {
                    let mut at = next(t.len() + 1);
                    while !t.is_char_boundary(at) {
                        at -= 1;
                    }
                    if next(3) == 0 {
                        let end = t[at..].chars().next().map_or(at, |c| at + c.len_utf8());
                        t.replace_range(at..end, "");
                    } else {
                        t.insert_str(at, INSERTS[next(INSERTS.len())]);
                    }
                }
                texts += 1;
                read += usize::from(check_scan(&t));
            }
        }
    }
    eprintln!("{read}/{texts} mutated pieces read alike, the rest declined");
    assert!(read > texts / 10, "{read}/{texts}");
}

#[test]
fn oneline_collapses() {
    let src = "(ns a)\n\n;; c\n(defn f\n  [x] ; c\n  #_(foo)\n  \"a\nb\"\n  (  inc x ))\n";
    assert_eq!(oneline_text(src), "(ns a)\n(defn f [x] \"a\\nb\" (inc x))\n");
}
