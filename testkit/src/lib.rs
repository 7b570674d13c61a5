//! What the workspace's tests share across crates: the Python venv that `cargo xtask setup`
//! makes (scapy, the tests' independent encoder and decoder), the skip rule for tests that need
//! something a developer's machine may lack, the check that committed STF files are still
//! what their generators print, and p4c and BMv2 ([`bmv2`]: the toolchain, the programs BMv2
//! runs and their p4c outputs, compiled once).
//!
//! Its only dependency is `p4toolchain` (itself without dependencies), so that softswitch and
//! fabric can use it as a dev-dependency without linking the control plane.

pub mod bmv2;
mod generated;

pub use generated::assert_stfs_match_generators;

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the workspace")
        .to_path_buf()
}

/// The Python of the clone's `.venv` (made by `cargo xtask setup`, with scapy in it).
pub fn venv_python() -> PathBuf {
    workspace_root().join(".venv/bin/python")
}

/// The skip rule: outside CI, prints `SKIPPED test: reason` and the caller returns, passing;
/// under `CI=true` a skip is a failure, so this panics.
pub fn skip(test: &str, reason: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test} {reason}, and under CI=true a skipped test is a failure");
    }
    eprintln!("SKIPPED {test}: {reason}");
}

/// [`venv_python`] if the venv exists; else applies the [`skip`] rule and gives `None`.
pub fn venv_python_or_skip(test: &str) -> Option<PathBuf> {
    let python = venv_python();
    if python.exists() {
        return Some(python);
    }
    skip(
        test,
        &format!(
            "needs the test venv ({} is missing: run `cargo xtask setup`)",
            python.display()
        ),
    );
    None
}
