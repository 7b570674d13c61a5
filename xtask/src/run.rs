//! Running commands, and the `test`, `demo` and `bench` tasks built on them.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _};

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// `$CARGO_HOME/bin`, where `cargo install` puts binaries.
pub fn cargo_home_bin() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo")
        });
    home.join("bin")
}

/// A command that is echoed, run in the workspace root, and must succeed.
pub struct Cmd(Command);

impl Cmd {
    /// A new command running `program`.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        let mut command = Command::new(program);
        command.current_dir(workspace_root());
        Cmd(command)
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.0.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.0.args(args);
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.0.env(key, value);
        self
    }

    /// Runs it to the end, then says how long it took; fails unless it exits 0.
    pub fn run(mut self) -> anyhow::Result<()> {
        eprintln!("xtask: {:?}", self.0);
        let started = std::time::Instant::now();
        let status = self
            .0
            .status()
            .with_context(|| format!("starting {:?}", self.0.get_program()))?;
        eprintln!(
            "xtask: {status} after {:.0} s",
            started.elapsed().as_secs_f64()
        );
        if !status.success() {
            bail!("{:?} failed: {status}", self.0.get_program());
        }
        Ok(())
    }
}

fn cargo() -> Cmd {
    with_build_env(Cmd::new(
        std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
    ))
}

/// Nightly's cargo (through rustup: `$CARGO` is the toolchain's own cargo, which takes no
/// `+nightly`), for cargo fuzz.
fn nightly_cargo() -> Cmd {
    with_build_env(Cmd::new("rustup").args(["run", "nightly", "cargo"]))
}

/// `command` with `$CARGO_HOME/bin` first on PATH: bpf-linker and rustup's nightly for the eBPF
/// build in host/build.rs, cargo-fuzz. Under CI, without incremental compilation: a CI run
/// builds a clean clone once, and the incremental state (about 10 GB) is never read again.
fn with_build_env(command: Cmd) -> Cmd {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![cargo_home_bin()];
    paths.extend(std::env::split_paths(&path));
    let command = command.env(
        "PATH",
        std::env::join_paths(paths).expect("PATH entries are valid"),
    );
    if testkit::under_ci() {
        command.env("CARGO_INCREMENTAL", "0")
    } else {
        command
    }
}

fn require_root(task: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("{task} needs root (network namespaces, eBPF): run it as root");
    }
    Ok(())
}

/// The fuzz targets `test` fuzzes (fuzz/): every one. The control plane's parsers
/// (`runtime_json`, `host_config`, `agent_config`, `topology_json`, `p4app_json`) live in
/// crates without the eBPF build (`p4client`, `hostconfig`, `netfiles`), so fuzzing them builds
/// no eBPF programs.
const FUZZED: &[&str] = &[
    "frontend",
    "bmv2_json",
    "stf",
    "p4rt_write",
    "p4rt_set_pipeline",
    "sim_runtime_json",
    "thrift_calls",
    "workload",
    "htsim_matrix",
    "size_cdf",
    "runtime_json",
    "host_config",
    "agent_config",
    "topology_json",
    "p4app_json",
];

/// How long `test` fuzzes each target, in seconds: a smoke run that keeps the whole of `test`
/// within its 40 minutes on a 2-core machine (the run with 10 took 41); a longer search is
/// `cargo +nightly fuzz run TARGET`.
const FUZZ_SECONDS: u32 = 5;

/// Checks the formatting and lints the workspace (every warning, the workspace's `[lints]`
/// included, an error), builds everything once, runs every test of the workspace (the fuzz
/// targets' corpus included), then fuzzes each target of [`FUZZED`] for [`FUZZ_SECONDS`]. Ends
/// by saying which tests were skipped and why (testkit's record of skips), however the tests
/// ended.
pub fn test() -> anyhow::Result<()> {
    cargo().args(["fmt", "--all", "--check"]).run()?;
    cargo()
        .args(["clippy", "--workspace", "--all-targets", "--locked"])
        .args(["--", "-D", "warnings"])
        .run()?;
    cargo()
        .args(["build", "--workspace", "--all-targets", "--locked"])
        .run()?;
    let record = workspace_root().join("target/skipped-tests.txt");
    remove_if_present(&record)?;
    let tested = cargo()
        .args(["test", "--workspace", "--locked", "--no-fail-fast"])
        .env(
            "LOSSLESS_BIN",
            workspace_root().join("target/debug/lossless"),
        )
        .env(testkit::skipped::RECORD_ENV, &record)
        .run()
        .and_then(|()| fuzz_build())
        .and_then(|()| {
            FUZZED
                .iter()
                .try_for_each(|target| fuzz(target, FUZZ_SECONDS))
        });
    let skipped =
        testkit::skipped::read(&record).with_context(|| format!("reading {}", record.display()))?;
    match skipped.is_empty() {
        true => eprintln!("xtask: no test was skipped"),
        false => eprint!("xtask: {}", testkit::skipped::summary(&skipped)),
    }
    tested
}

/// Removes the file at `path` if there is one.
fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// softswitch-core's `interpreter` bench (compiled against interpreted), on the programs
/// `names` (all when empty).
fn interpreter_bench(names: &[&str]) -> Cmd {
    cargo()
        .args([
            "bench",
            "--locked",
            "-p",
            "softswitch-core",
            "--bench",
            "interpreter",
        ])
        .args(if names.is_empty() {
            &[][..]
        } else {
            &["--"][..]
        })
        .args(names)
}

/// cargo fuzz's options for `test`'s smoke runs: the libFuzzer entry points, no sanitizer (the
/// targets are safe Rust, whose bugs are panics, which libFuzzer catches), and a build without
/// optimisation (`--dev`). cargo fuzz's default, an optimised build in one codegen unit per
/// crate, took 13 minutes of the 2-core machine's CI run for the 15 targets; seconds of
/// fuzzing each do not repay it. A longer search is `cargo +nightly fuzz run TARGET`.
const FUZZ_BUILD: &[&str] = &[
    "--dev",
    "--no-default-features",
    "--features",
    "libfuzzer",
    "--sanitizer",
    "none",
];

/// Builds every fuzz target at once (their crates in parallel), as [`fuzz`] runs them.
fn fuzz_build() -> anyhow::Result<()> {
    nightly_cargo()
        .args(["fuzz", "build"])
        .args(FUZZ_BUILD)
        .run()
}

/// Runs fuzz target `target` for `seconds` from its committed corpus; inputs it finds go to
/// `target/fuzz-corpus/TARGET` (not committed), a crash to `fuzz/artifacts/TARGET/` and fails.
fn fuzz(target: &str, seconds: u32) -> anyhow::Result<()> {
    let found = workspace_root().join("target/fuzz-corpus").join(target);
    std::fs::create_dir_all(&found).with_context(|| format!("creating {}", found.display()))?;
    nightly_cargo()
        .args(["fuzz", "run"])
        .args(FUZZ_BUILD)
        .arg(target)
        .arg(&found)
        .arg(workspace_root().join("fuzz/corpus").join(target))
        .args([
            "--",
            &format!("-max_total_time={seconds}"),
            // An input that takes this long unoptimised is a hang (an input the loaders' limits
            // allow takes at most seconds); one that needs more memory, a leak.
            "-timeout=60",
            "-rss_limit_mb=2048",
        ])
        .run()
}

/// Builds the CLI in release and runs the four labs of the demo, then the simulator on the
/// README's tour.
pub fn demo() -> anyhow::Result<()> {
    require_root("the demo")?;
    cargo()
        .args(["build", "--release", "--locked", "-p", "lossless"])
        .run()?;
    // Marks rise with load (ECN), marks become kernel CNPs and DCQCN rates converge
    // (incast, with a plot), a slow receiver pauses its sender without loss (PFC), and the
    // load-balancing policies run the same flows (lb, with a plot).
    let lossless = workspace_root().join("target/release/lossless");
    for lab in ["ecn", "incast", "pfc", "lb"] {
        Cmd::new(&lossless).args(["lab", lab]).run()?;
    }
    // The same policies at data-centre scale: a ring AllReduce across the pods of a 128-host
    // fat-tree, lossless.p4 in every switch (about half a minute).
    let ring = workspace_root().join("sim/examples/ring-across-pods.toml");
    Cmd::new(&lossless)
        .args(["sim", "run", "--topo", "fat-tree:8", "--workload"])
        .arg(&ring)
        .args(["--policy", "ecmp,e-ecmp,flowlet", "--out", "lab-output/sim"])
        .run()
}

/// Builds benchmark binary `bench` of lossless-tests in release with the binary it runs
/// (`bin` of `package`, which it finds beside itself); returns the benchmark's path.
fn build_bench(bench: &str, package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    cargo()
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "lossless-tests",
            "--bin",
            bench,
        ])
        .args(["-p", package, "--bin", bin])
        .run()?;
    Ok(workspace_root().join("target/release").join(bench))
}

/// The host benchmark: packets/s through a veth pair without a program, with XDP_PASS, with
/// the ECN program and with the CNP path; CE→CNP latency; the traffic tool's ceiling.
pub fn bench_host() -> anyhow::Result<()> {
    require_root("the host benchmark")?;
    // The benchmark attaches programs with the CLI.
    Cmd::new(build_bench("bench-host", "lossless", "lossless")?).run()
}

/// The softswitch interpreter's packet rate (the `interpreter` bench), then IPv4 forwarding
/// between two veths through a Linux bridge, `softswitch run` and the interpreter alone, as
/// ratios (bench-softswitch, root), which ends with issue 34's aims: the interpreter bench's
/// figures reach it through a file of this run (`LOSSLESS_BENCH_RESULTS`).
pub fn bench_softswitch() -> anyhow::Result<()> {
    let results = workspace_root().join("target/bench/softswitch-interpreter.txt");
    // Results of an earlier run must not pass for this run's.
    remove_if_present(&results)?;
    if let Some(dir) = results.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    interpreter_bench(&[])
        .env("LOSSLESS_BENCH_RESULTS", &results)
        .run()?;
    require_root("the softswitch port benchmark")?;
    Cmd::new(build_bench("bench-softswitch", "softswitch", "softswitch")?)
        .env("LOSSLESS_BENCH_RESULTS", &results)
        .run()
}

/// softswitch's compiled / interpreted factor on lossless.p4 (the `interpreter` bench's
/// `lossless`), then bench-sim: `lossless sim` with lossless.p4 compiled against interpreted,
/// packet-hops per CPU second and their factor, to read beside the first; then `lossless sim`
/// against htsim (`LOSSLESS_HTSIM`, else PATH) on the same fat-trees and connection matrices,
/// both as child processes, with the ratios of their CPU time, packet-hops per CPU second and
/// peak memory (no root needed).
pub fn bench_sim() -> anyhow::Result<()> {
    interpreter_bench(&["lossless"]).run()?;
    Cmd::new(build_bench("bench-sim", "lossless", "lossless")?).run()
}

/// The differential tests, softswitch against BMv2 (`softswitch/tests/differential/`) and the
/// compiled path against the interpreter (`softswitch/tests/compiled.rs`), with `cases` random
/// cases per program (per STF test, for the second) from seed `seed` on, instead of the few
/// `test` runs.
pub fn fuzz_diff(cases: u32, seed: Option<u64>) -> anyhow::Result<()> {
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    eprintln!("xtask: fuzz-diff, {cases} cases per program from seed {seed}");
    cargo()
        .args([
            "test",
            "--locked",
            "-p",
            "softswitch",
            "--test",
            "differential",
            "--test",
            "compiled",
            "--",
            "--nocapture",
        ])
        .env("LOSSLESS_FUZZ_CASES", cases.to_string())
        .env("LOSSLESS_FUZZ_SEED", seed.to_string())
        .run()
}
