//! Every target over its seeds, in every `cargo test`: the files in
//! `schedlat/fuzz/corpus/<target>/` (real files from kernels and tools,
//! and each input libFuzzer once found failing) are the targets'
//! regression cases. The search for new inputs is libFuzzer's alone
//! (`cargo xtask fuzz`, the last step of `cargo xtask test`).

use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// Runs `check` on each seed of `target`, in name order; a panic names
/// the seed.
pub(super) fn run_seeds(target: &str, check: impl Fn(&[u8])) {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fuzz corpus {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "fuzz corpus {} is empty", dir.display());
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&data)));
        assert!(
            outcome.is_ok(),
            "fuzz target {target} fails on its seed {}",
            file.display()
        );
    }
}
