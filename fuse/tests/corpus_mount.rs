//! Every file of the Debian Clojure corpus (`scripts/corpus.sh`) read through a real mount of a
//! store imported from it: the same bytes as on disk, and a stat size equal to the read length.

use std::sync::Arc;

use formdb_engine::import::{self, Quiet};
use formdb_engine::store::Store;
use formdb_testkit::relative_files;

#[test]
fn every_corpus_file_reads_back_through_the_mount() {
    let Some(corpus) = formdb_testkit::corpus() else { return };
    let dir = tempfile::Builder::new()
        .prefix("corpus-mount-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let store = Arc::new(Store::open(&dir.path().join(".formdb")).unwrap());
    import::import_dir(&store, &corpus, "import", &Quiet).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let m = formdb_fuse::spawn(store, &mnt, &formdb_fuse::Options::default()).unwrap();
    let files = relative_files(&corpus);
    let mounted = relative_files(&mnt);
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
