//! Replays every file of every target's committed corpus (`corpus/TARGET/`) through the target,
//! as `cargo fuzz` would start: each must return (a panic fails the test, naming the file). This
//! is the fuzz targets' part of `cargo test`; `cargo xtask test` also fuzzes briefly.
#![forbid(unsafe_code)]

use std::path::Path;

#[test]
fn every_corpus_file_runs_through_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, target) in lossless_fuzz::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} has no seed", dir.display());
        for file in files {
            let data = std::fs::read(&file).unwrap();
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                panic!("{name} panicked on {}", file.display());
            }
        }
    }
}
