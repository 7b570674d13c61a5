//! Running a `lossless lab` through the binary: a fresh output directory, the command, and
//! Ctrl-C once the lab shows it is under way.

use std::{
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use crate::bed::lossless_bin;

/// How long a lab may take to build its test bed and show it is under way.
const UNDER_WAY_WITHIN: Duration = Duration::from_secs(30);

/// How long a lab may take to clean up after Ctrl-C.
const STOPS_WITHIN: Duration = Duration::from_secs(10);

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

/// Waits until `child` prints a line for which `under_way` holds, sends it SIGINT, and waits
/// for it to exit, which must take less than [`STOPS_WITHIN`]. Returns its status and all it
/// printed on stdout.
pub fn interrupt_when(mut child: Child, under_way: fn(&str) -> bool) -> (ExitStatus, String) {
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
