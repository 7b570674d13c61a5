//! Removing what a network leaves, found by its records, however its `lossless net up` ended:
//! the glue (asked to tear Mininet down, then killed), every process the glue recorded
//! ([`state::processes`]) that still runs, with everything in a host's network namespace while
//! its shell still holds it, then every process left in the network's own namespace, the
//! namespace itself and the state directory. `net up`'s teardown, `net down` (also of a
//! network whose `net up` was killed or hangs) and the next `net up` of the same name use it.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use super::state::{self, ProcessId, Running};

/// How long the glue may take to tear Mininet down once told to (it stops each switch, SIGTERM
/// then SIGKILL after 5 s, and each host).
pub const GLUE_TEARDOWN: Duration = Duration::from_secs(60);

/// Waits until `process` has ended or `timeout` has passed; whether it ended.
pub fn wait_gone(process: ProcessId, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while process.alive() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Asks the glue to tear Mininet down (SIGTERM: its teardown stops the switches and hosts),
/// waits for it, and kills it past [`GLUE_TEARDOWN`]; says so if it had to.
pub fn stop_glue(glue: ProcessId) -> Option<String> {
    if !glue.signal(libc::SIGTERM) {
        return None;
    }
    if wait_gone(glue, GLUE_TEARDOWN) {
        return None;
    }
    glue.signal(libc::SIGKILL);
    wait_gone(glue, Duration::from_secs(5));
    Some(format!(
        "the Mininet glue (pid {}) did not stop in {} s; killed",
        glue.pid,
        GLUE_TEARDOWN.as_secs()
    ))
}

/// Kills what the glue left of the network recorded in `dir` (in namespace `netns`), deletes
/// the namespace and the directory. Says what it had to kill and what it could not remove.
pub fn remove(dir: &Path, netns: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for record in state::processes(dir) {
        let process = record.process;
        if !process.alive() {
            continue;
        }
        if record.role == "host" {
            // The shell still holds the host's namespace: what runs in it is the host's.
            if let Some(ns) = namespace_of(&format!("/proc/{}/ns/net", process.pid)) {
                let strays = kill_in_namespace(ns);
                if strays > 0 {
                    problems.push(format!(
                        "{}: {strays} process(es) were still running in it; killed",
                        record.node
                    ));
                }
            }
        }
        if process.signal(libc::SIGKILL) {
            problems.push(format!(
                "{} ({}, pid {}) was still running; killed",
                record.node, record.role, process.pid
            ));
        }
    }
    let ns_path = Path::new("/run/netns").join(netns);
    if let Some(ns) = namespace_of(&ns_path.to_string_lossy()) {
        let strays = kill_in_namespace(ns);
        if strays > 0 {
            problems.push(format!(
                "{strays} process(es) were still running in the network's namespace {netns}; \
                 killed"
            ));
        }
    }
    if ns_path.exists() {
        if let Err(e) = sysutil::netns::ip(&["netns", "del", netns]) {
            problems.push(format!("deleting the namespace {netns}: {e:#}"));
        }
    }
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            problems.push(format!("removing {}: {e}", dir.display()));
        }
    }
    problems
}

/// Takes down the network `running` records, whose `net up` is gone or does not end: kills
/// that `net up` if it still runs, stops its glue, and [`remove`]s the rest.
pub fn force(running: &Running) -> Vec<String> {
    let mut problems = Vec::new();
    if running.up_process().signal(libc::SIGKILL) {
        problems.push(format!(
            "lossless net up (pid {}) did not end; killed",
            running.up.pid
        ));
        wait_gone(running.up_process(), Duration::from_secs(5));
    }
    if let Some(glue) = running.up.glue {
        problems.extend(stop_glue(glue));
    }
    problems.extend(remove(&running.dir, &running.up.netns));
    problems
}

/// A network namespace's identity: the device and inode of its nsfs file.
#[derive(Clone, Copy, PartialEq, Eq)]
struct NamespaceId(u64, u64);

fn namespace_of(path: &str) -> Option<NamespaceId> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some(NamespaceId(meta.dev(), meta.ino()))
}

/// SIGKILLs every process in network namespace `ns` but this one; how many it killed.
fn kill_in_namespace(ns: NamespaceId) -> usize {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own || namespace_of(&format!("/proc/{pid}/ns/net")) != Some(ns) {
            continue;
        }
        if let Some(process) = ProcessId::of(pid) {
            if process.signal(libc::SIGKILL) {
                killed += 1;
            }
        }
    }
    killed
}
