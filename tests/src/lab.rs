//! Running a `lossless lab` through the binary: a fresh output directory, the command, and
//! Ctrl-C once the lab shows it is under way.

use std::{
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::bed::{assert_nothing_left, exclusive, lossless_bin, succeeded};

/// How long a lab may take to build its test bed and show it is under way.
const UNDER_WAY_WITHIN: Duration = Duration::from_secs(30);

/// How long a lab may take to clean up after Ctrl-C.
const STOPS_WITHIN: Duration = Duration::from_secs(10);

/// For a lab test that can run: the lock that runs it alone ([`exclusive`]: each lab runs
/// several senders on a machine with few cores) and a fresh output directory ([`out_dir`]).
pub fn alone_with_out_dir(
    test: &str,
    out: &str,
) -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf)> {
    exclusive(test).map(|alone| (alone, out_dir(out)))
}

/// A fresh output directory for one test.
pub fn out_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lossless-{test}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// `lossless lab NAME --out OUT ARGS`, stdout and stderr piped, not yet started.
pub fn lab(name: &str, out: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(lossless_bin());
    command
        .args(["lab", name, "--out"])
        .arg(out)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs `lossless lab NAME --out OUT ARGS` to its end, which must be a success that leaves no
/// namespace named with one of `prefixes`; returns what it printed on stdout.
pub fn run_to_end(name: &str, out: &Path, args: &[&str], prefixes: &[&str]) -> String {
    let child = lab(name, out, args).spawn().unwrap();
    let pid = child.id();
    let stdout = succeeded(child.wait_with_output().unwrap());
    assert_nothing_left(prefixes, pid);
    stdout
}

/// Starts `lossless lab NAME --out OUT ARGS` and interrupts it once it prints a line for which
/// `under_way` holds; it must then exit with success and leave no namespace
/// named with one of `prefixes`. Returns what it printed on stdout.
pub fn interrupted(
    name: &str,
    out: &Path,
    args: &[&str],
    under_way: fn(&str) -> bool,
    prefixes: &[&str],
) -> String {
    let child = lab(name, out, args).spawn().unwrap();
    let pid = child.id();
    let (status, stdout) = interrupt_when(child, under_way);
    assert!(
        status.success(),
        "the lab failed after Ctrl-C ({status}):\n{stdout}"
    );
    assert_nothing_left(prefixes, pid);
    stdout
}

/// The summary.json a lab wrote into `out`.
pub fn summary_json(out: &Path) -> Value {
    let path = out.join("summary.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A lab's CSV of samples at `path`, which must start with the line `header`: its text, and
/// its rows as numbers.
pub fn samples(path: &Path, header: &str) -> (String, Vec<Vec<f64>>) {
    let csv = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(header), "{}", path.display());
    let rows = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    (csv, rows)
}

/// Waits until `child` prints a line for which `under_way` holds, sends it SIGINT, and waits
/// for it to exit, which must take less than [`STOPS_WITHIN`]. Returns its status and all it
/// printed on stdout.
fn interrupt_when(mut child: Child, under_way: fn(&str) -> bool) -> (ExitStatus, String) {
    let pid = child.id();
    // Read stdout on a thread that keeps everything for the caller's checks.
    let stdout = child.stdout.take().expect("stdout piped");
    let (seen, sightings) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let mut lines = BufReader::new(stdout).lines();
        while let Some(Ok(line)) = lines.next() {
            if under_way(&line) {
                let _ = seen.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    sightings
        .recv_timeout(UNDER_WAY_WITHIN)
        .expect("the lab never showed it was under way");
    // SAFETY: the pid of our own child, not yet waited for.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let started = Instant::now();
    let status = child.wait().expect("waiting for the lab");
    assert!(
        started.elapsed() < STOPS_WITHIN,
        "the lab took {:?} to stop",
        started.elapsed()
    );
    (status, reader.join().expect("stdout reader"))
}
