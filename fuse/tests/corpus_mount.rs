//! Every file of the Debian Clojure corpus (`scripts/corpus.sh`) read through a real mount of a
//! store imported from it: the same bytes as on disk, and a stat size equal to the read length.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use formdb_engine::import::{self, Quiet};
use formdb_engine::store::Store;

fn corpus() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::var_os("FORMDB_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/corpus"));
    let status = Command::new(root.join("scripts/corpus.sh"))
        .arg(&dir)
        .status()
        .expect("run scripts/corpus.sh");
    assert!(status.success(), "scripts/corpus.sh failed");
    dir
}

fn walk(root: &Path, rel: &str, out: &mut Vec<String>) {
    for e in std::fs::read_dir(root.join(rel)).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().to_string();
        if name == ".formdb" {
            continue;
        }
        let r = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        if e.file_type().unwrap().is_dir() {
            walk(root, &r, out);
        } else {
            out.push(r);
        }
    }
}

#[test]
fn every_corpus_file_reads_back_through_the_mount() {
    let corpus = corpus();
    let dir = tempfile::Builder::new()
        .prefix("corpus-mount-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let store = Arc::new(Store::open(&dir.path().join(".formdb")).unwrap());
    import::import_dir(&store, &corpus, "import", &Quiet).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let m = formdb_fuse::spawn(store, &mnt, &formdb_fuse::Options::default()).unwrap();
    let mut files = Vec::new();
    walk(&corpus, "", &mut files);
    let mut mounted = Vec::new();
    walk(&mnt, "", &mut mounted);
    files.sort();
    mounted.sort();
    assert!(files.len() > 100, "a corpus of {} files", files.len());
    assert_eq!(mounted, files, "the mount lists exactly the corpus files");
    for rel in &files {
        let want = std::fs::read(corpus.join(rel)).unwrap();
        let got = std::fs::read(mnt.join(rel)).unwrap();
        assert!(got == want, "{rel} differs through the mount");
        assert_eq!(
            std::fs::metadata(mnt.join(rel)).unwrap().len(),
            want.len() as u64,
            "{rel}: stat size"
        );
    }
    m.unmount().unwrap();
}
