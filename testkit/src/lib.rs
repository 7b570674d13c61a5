//! What the workspace's tests share across crates: the Python venv that `cargo xtask setup`
//! makes (scapy, the tests' independent encoder and decoder), the skip rule for tests that need
//! something a developer's machine may lack (with the record of skips that `cargo xtask test`
//! sums up, [`skipped`]), tshark (the second independent decoder) over a
//! list of frames, the checks that committed STF files and example fabrics are still what their
//! generators write,
//! and p4c and BMv2 ([`bmv2`]: the toolchain, the programs BMv2 runs and their p4c outputs,
//! compiled once), and a lab PKI for the TLS tests ([`pki`]).
//!
//! It depends on `p4toolchain` (itself without dependencies) and rcgen, so that softswitch and
//! fabric can use it as a dev-dependency without linking the control plane.
#![forbid(unsafe_code)]

pub mod bmv2;
mod generated;
pub mod pki;
pub mod skipped;

pub use generated::{assert_fabrics_match_generators, assert_stfs_match_generators};

use std::path::{Path, PathBuf};

/// A directory of a test's own under the system's temporary directory
/// (`PREFIX-PID-N-NAME`, N counting the process's directories), removed on drop; `.0` is its
/// path.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Makes a new, empty `PREFIX-PID-N-NAME`.
    pub fn new(prefix: &str, name: &str) -> TempDir {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("making a test directory");
        TempDir(dir)
    }

    /// Writes `text` to the file `name` (a path relative to the directory); its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("writing a test file");
        path
    }

    /// Copies every file of the folder `from` (not its subfolders) into the directory.
    pub fn copy_files(&self, from: &Path) {
        for entry in std::fs::read_dir(from).expect("reading a folder to copy") {
            let path = entry.expect("reading a folder to copy").path();
            if path.is_file() {
                std::fs::copy(&path, self.0.join(path.file_name().expect("a file's name")))
                    .expect("copying a test file");
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the workspace")
        .to_path_buf()
}

/// The files of `dir` whose names end in `.EXT`, sorted; panics naming `dir` when it cannot be
/// read.
pub fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// The output of `command`, which must succeed: a failure panics with what it printed on
/// standard error.
pub fn output_of(command: &mut std::process::Command) -> std::process::Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// How many random cases a fuzzing test runs and from which seed: `LOSSLESS_FUZZ_CASES` and
/// `LOSSLESS_FUZZ_SEED` (which `cargo xtask fuzz-diff` sets), else the test's own `cases`
/// and `seed`; a value that is not a number counts as unset.
pub fn fuzz_cases_and_seed(cases: u64, seed: u64) -> (u64, u64) {
    let env_or = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (
        env_or("LOSSLESS_FUZZ_CASES", cases),
        env_or("LOSSLESS_FUZZ_SEED", seed),
    )
}

/// The Python of the clone's `.venv` (made by `cargo xtask setup`, with scapy in it).
pub fn venv_python() -> PathBuf {
    workspace_root().join(".venv/bin/python")
}

/// Whether this runs under CI (`CI=true`, as CI services set it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The skip rule: outside CI, prints `SKIPPED test: reason`, records the skip for `cargo xtask
/// test`'s summary ([`skipped`]), and the caller returns, passing; under `CI=true` a skip is a
/// failure, so this panics.
pub fn skip(test: &str, reason: &str) {
    if under_ci() {
        panic!("{test} {reason}, and under CI=true a skipped test is a failure");
    }
    eprintln!("SKIPPED {test}: {reason}");
    skipped::record(test, reason);
}

/// The directory the environment variable `var` names (a shared reference folder such as
/// `LOSSLESS_HTSIM` or `LOSSLESS_WORKLOADS`, which `.ci/run` sets), if it is set and is a
/// directory; else applies the [`skip`] rule and gives `None`.
pub fn reference_dir_or_skip(test: &str, var: &str) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(dir) if dir.is_dir() => Some(dir),
        Some(dir) => {
            skip(
                test,
                &format!("${var} names {}, which is not a directory", dir.display()),
            );
            None
        }
        None => {
            skip(
                test,
                &format!("needs ${var}, the reference folder it names"),
            );
            None
        }
    }
}

/// Whether `program ARG` can be started (a tool on PATH, `ARG` asking for its version); else
/// applies the [`skip`] rule for `test`, saying it needs the tool `because`.
pub fn runs_or_skip(test: &str, program: &str, arg: &str, because: &str) -> bool {
    let runs = std::process::Command::new(program)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    if !runs {
        skip(test, because);
    }
    runs
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

/// The environment variable that names the P4 tutorials (p4lang/tutorials, with PI's
/// `pi-proto/`), as users have them: `.ci/run` sets it to `../shared/tutorials` beside the clone.
pub const TUTORIALS_ENV: &str = "LOSSLESS_TUTORIALS";

/// The P4 tutorials' directory (`LOSSLESS_TUTORIALS`) if it is set and holds `exercises/`;
/// else applies the [`skip`] rule and gives `None`.
pub fn tutorials_or_skip(test: &str) -> Option<PathBuf> {
    let dir = reference_dir_or_skip(test, TUTORIALS_ENV)?;
    if dir.join("exercises").is_dir() {
        return Some(dir);
    }
    skip(
        test,
        &format!(
            "needs the P4 tutorials: {TUTORIALS_ENV}={} has no exercises/",
            dir.display()
        ),
    );
    None
}

/// Generates PI's `p4.tmp.p4config_pb2` (the wrapper of a device config the tutorials'
/// `p4runtime_lib` imports, on no package index) from the tutorials' `pi-proto/` into `dir`
/// with `python`'s grpc_tools, as a `p4` package that extends the installed one
/// (`pkgutil.extend_path`): `dir` goes on PYTHONPATH. A failure panics with protoc's message.
pub fn p4config_module(python: &Path, tutorials: &Path, dir: &Path) {
    protoc(
        python,
        &[
            "-I".as_ref(),
            tutorials.join("pi-proto").as_os_str(),
            "p4/tmp/p4config.proto".as_ref(),
        ],
        dir,
    );
    python_packages(dir, &["p4/tmp"]);
}

/// Generates the P4Runtime definitions (`p4.v1.p4runtime_pb2` and its gRPC stubs, `p4data_pb2`,
/// `p4.config.v1.p4info_pb2`, `p4types_pb2`) from the project's descriptor set
/// (`p4runtime/proto/p4runtime.fds`, the `p4runtime` package's own definitions) into `dir` with
/// `python`'s grpc_tools, as packages that take the place of the installed ones when `dir` is
/// first on PYTHONPATH. Generated for the venv's protobuf runtime, they read P4Info's map fields
/// (`type_info`) in its text format, which the package's modules (generated for protobuf 3,
/// run by protobuf's pure-Python implementation) do not. A failure panics with protoc's message.
pub fn p4runtime_modules(python: &Path, dir: &Path) {
    let descriptors = workspace_root().join("p4runtime/proto/p4runtime.fds");
    let mut descriptor_set_in = std::ffi::OsString::from("--descriptor_set_in=");
    descriptor_set_in.push(&descriptors);
    protoc(
        python,
        &[
            descriptor_set_in.as_os_str(),
            "p4/config/v1/p4types.proto".as_ref(),
            "p4/config/v1/p4info.proto".as_ref(),
            "p4/v1/p4data.proto".as_ref(),
        ],
        dir,
    );
    let mut grpc_out = std::ffi::OsString::from("--grpc_python_out=");
    grpc_out.push(dir);
    protoc(
        python,
        &[
            descriptor_set_in.as_os_str(),
            grpc_out.as_os_str(),
            "p4/v1/p4runtime.proto".as_ref(),
        ],
        dir,
    );
    python_packages(dir, &["p4/v1", "p4/config", "p4/config/v1"]);
}

/// Runs `python`'s grpc_tools protoc with `args`, writing Python modules into `dir`.
fn protoc(python: &Path, args: &[&std::ffi::OsStr], dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut python_out = std::ffi::OsString::from("--python_out=");
    python_out.push(dir);
    output_of(
        std::process::Command::new(python)
            .args(["-m", "grpc_tools.protoc"])
            .arg(python_out)
            .args(args),
    );
}

/// Makes the `packages` folders under `dir` Python packages beneath a `p4` package that extends
/// the installed one (`pkgutil.extend_path`), so that what `dir` lacks comes from there.
fn python_packages(dir: &Path, packages: &[&str]) {
    std::fs::write(
        dir.join("p4/__init__.py"),
        "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n",
    )
    .unwrap();
    for package in packages {
        std::fs::write(dir.join(package).join("__init__.py"), "").unwrap();
    }
}

/// Runs tshark over `frames` (Ethernet frames, written to a pcap file in a temporary directory
/// that is removed afterwards) with `args` after `-r FILE`, and returns its standard output;
/// an error names what failed (tshark missing, a non-zero exit with its standard error).
pub fn tshark(frames: &[&[u8]], args: &[&str]) -> Result<String, String> {
    // Global header: magic, version 2.4, zone 0, sigfigs 0, snaplen, LINKTYPE_ETHERNET.
    let mut pcap: Vec<u8> = [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1]
        .iter()
        .flat_map(|word| word.to_le_bytes())
        .collect();
    for frame in frames {
        let len = (frame.len() as u32).to_le_bytes();
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&len);
        pcap.extend_from_slice(&len);
        pcap.extend_from_slice(frame);
    }
    let path = std::env::temp_dir().join(format!(
        "lossless-{}-{:?}.pcap",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, &pcap).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let output = std::process::Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(args)
        .output();
    let _ = std::fs::remove_file(&path);
    let output =
        output.map_err(|e| format!("running tshark (cargo xtask setup installs it): {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "tshark {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
