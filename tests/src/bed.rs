//! Running privileged tests: the skip rule, the CLI under test, a sender/receiver pair.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    sync::{
        mpsc::{self, Receiver},
        Mutex, MutexGuard,
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde_json::Value;
pub use sysutil::netns::subnet_link;
use sysutil::netns::{check, Endpoint, Namespace};

use crate::{capture::RawSocket, craft::FrameSpec};

/// Source MAC of every frame a test sends, so captures ignore the kernel's own traffic.
pub const TEST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// How long a test waits for frames or a condition before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Frames in flight at once: a veth with XDP queues at most 256 frames in its ring.
const WINDOW: usize = 32;

/// Runs `command` with `input` on its standard input (closed after it), and collects what it
/// prints on both streams.
pub fn output_with_input(command: &mut Command, input: &[u8]) -> std::io::Result<Output> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().expect("piped").write_all(input)?;
    child.wait_with_output()
}

/// The output of `child` once it has exited successfully, waited for at most `limit`: past it
/// the child is killed and the test fails, as it does when the child fails; `what` names the
/// child in the message, with its stderr.
pub fn succeeded_within(child: Child, limit: Duration, what: &str) -> Output {
    let pid = child.id();
    let (send, done) = mpsc::channel();
    std::thread::spawn(move || send.send(child.wait_with_output()));
    let out = match done.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // The waiting thread still owns the child, so it is killed by its id.
            // SAFETY: kill(2) with a pid this test started and has not reaped yet.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let out = done.recv().unwrap().unwrap();
            panic!(
                "{what} still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether `frame` was sent by a test (its source MAC is [`TEST_MAC`]).
pub fn from_test_mac(frame: &[u8]) -> bool {
    frame.len() >= 12 && frame[6..12] == TEST_MAC
}

/// A counter of `stats --json` kept as one number (`cnp_sent`, ...).
pub fn stat(stats: &Value, key: &str) -> u64 {
    stats[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {stats}"))
}

/// A counter of `stats --json` kept as an array by priority (`pfc_pause_rx`, ...).
pub fn by_priority(stats: &Value, key: &str, priority: usize) -> u64 {
    stats[key][priority]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key}[{priority}] in {stats}"))
}

/// A per-priority counter of `stats --json`.
pub fn counter(stats: &Value, priority: usize, key: &str) -> u64 {
    stats["per_priority"][priority][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {stats}"))
}

/// Whether a test that needs root and network namespaces can run. Outside CI a non-root run
/// prints the reason and skips; under `CI=true` a skip is a failure.
pub fn privileged(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    testkit::skip(test, "needs root (network namespaces, eBPF)");
    false
}

/// For a test that needs root ([`privileged`]) and one more thing that `find` looks for (one
/// of `testkit`'s `*_or_skip` functions, which say the skip): that thing, or `None` when the
/// test is to stop here.
pub fn privileged_and<T>(test: &str, find: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    if !privileged(test) {
        return None;
    }
    find(test)
}

/// One test at a time of those that ask: they measure rates and times on a machine with few
/// cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// For a test that can run ([`privileged`]), the right to run alone among the tests of its
/// binary that ask for it too.
pub fn exclusive(test: &str) -> Option<MutexGuard<'static, ()>> {
    privileged(test).then(|| ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The `lossless` binary under test: `$LOSSLESS_BIN`, else the one in the same profile
/// directory as the running binary (`target/PROFILE/` for a bin, its `deps/` for a test).
pub fn lossless_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("LOSSLESS_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("running binary path");
    let dir = exe.parent().expect("binary directory");
    let profile_dir = if dir.ends_with("deps") {
        dir.parent().expect("profile directory")
    } else {
        dir
    };
    profile_dir.join("lossless")
}

/// Two namespaces joined by a veth pair: `tx` sends, `rx` is where the programs attach.
pub struct Link {
    /// The sending end's namespace.
    pub tx_ns: Namespace,
    /// The receiving end's namespace.
    pub rx_ns: Namespace,
    /// The sending interface.
    pub tx: Endpoint,
    /// The receiving interface.
    pub rx: Endpoint,
}

impl Link {
    /// For a test that can run ([`privileged`]), a fresh link ([`Link::new`]).
    pub fn for_test(test: &str) -> Option<Self> {
        privileged(test).then(|| Link::new().unwrap())
    }

    /// A fresh pair of namespaces and a veth between them (10.77.0.1 → 10.77.0.2).
    pub fn new() -> anyhow::Result<Self> {
        let tx_ns = Namespace::create("ltx")?;
        let rx_ns = Namespace::create("lrx")?;
        let (tx, rx) = subnet_link(&tx_ns, &rx_ns, [10, 77, 0])?;
        Ok(Link {
            tx_ns,
            rx_ns,
            tx,
            rx,
        })
    }

    /// Runs `lossless ARGS` in `ns`, failing with its stderr.
    pub fn lossless(ns: &Namespace, args: &[&str]) -> anyhow::Result<Output> {
        let output = ns
            .command(lossless_bin())
            .args(args)
            .output()
            .context("running lossless")?;
        check(&format!("lossless {}", args.join(" ")), output)
    }

    /// A RoCEv2 frame from the tx end to the rx end, from [`TEST_MAC`].
    pub fn roce(&self) -> FrameSpec {
        FrameSpec::roce(
            TEST_MAC,
            self.rx.mac,
            self.tx.ipv4.octets(),
            self.rx.ipv4.octets(),
        )
    }

    /// Sends `frames` from the tx end and returns those of them that arrive at the rx end, in
    /// order. Sends a window at a time and waits for it, so no ring or socket buffer overflows.
    pub fn send_and_capture(&self, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let capture = self.rx_socket();
        let sender = self.tx_socket();
        let mut received = Vec::with_capacity(frames.len());
        for window in frames.chunks(WINDOW) {
            window.iter().for_each(|frame| sender.send(frame).unwrap());
            received.extend(
                capture
                    .receive(window.len(), TIMEOUT, from_test_mac)
                    .unwrap(),
            );
        }
        received
    }

    /// A raw socket on the tx end.
    pub fn tx_socket(&self) -> RawSocket {
        RawSocket::open_in(&self.tx_ns, &self.tx.ifname)
    }

    /// The rx end attached with `lossless host attach RX_IFACE OPTIONS...`.
    pub fn attach_rx(&self, options: &[&str]) -> Attached<'_> {
        Attached::new(&self.rx_ns, &self.rx.ifname, options).unwrap()
    }

    /// The tx end attached with `lossless host attach TX_IFACE OPTIONS...`.
    pub fn attach_tx(&self, options: &[&str]) -> Attached<'_> {
        Attached::new(&self.tx_ns, &self.tx.ifname, options).unwrap()
    }

    /// A raw socket on the rx end.
    pub fn rx_socket(&self) -> RawSocket {
        RawSocket::open_in(&self.rx_ns, &self.rx.ifname)
    }

    /// `lossless host set RX_IFACE ASSIGNMENTS...`.
    pub fn set_rx(&self, assignments: &[&str]) {
        Self::host_set(&self.rx_ns, &self.rx.ifname, assignments);
    }

    /// `lossless host set TX_IFACE ASSIGNMENTS...`.
    pub fn set_tx(&self, assignments: &[&str]) {
        Self::host_set(&self.tx_ns, &self.tx.ifname, assignments);
    }

    /// The tx end attached as a sender that PFC pauses, at 10 Mb/s (a quantum is 51.2 µs): XDP
    /// records the pauses it receives, TC egress counts the frames that leave while paused
    /// (`pfc_violations`).
    pub fn attach_paused_sender(&self) -> Attached<'_> {
        let attached = self.attach_tx(&["--mode", "skb", "--hooks", "xdp,tc"]);
        self.set_tx(&["pfc.link_speed_bps=10m"]);
        attached
    }

    /// `lossless host set IFACE ASSIGNMENTS...` in `ns`.
    pub fn host_set(ns: &Namespace, iface: &str, assignments: &[&str]) {
        let mut args = vec!["host", "set", iface];
        args.extend_from_slice(assignments);
        Self::lossless(ns, &args).unwrap();
    }

    /// Polls the rx end's stats until `done` holds (frames are in flight), failing after
    /// [`TIMEOUT`].
    pub fn wait_for_rx_stats(&self, done: impl Fn(&Value) -> bool) -> Value {
        Self::wait_for_stats(&self.rx_ns, &self.rx.ifname, done)
    }

    /// Polls `iface`'s `host stats --json` in `ns` until `done` holds, failing after
    /// [`TIMEOUT`].
    pub fn wait_for_stats(ns: &Namespace, iface: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let stats = Self::stats(ns, iface).unwrap();
            if done(&stats) {
                return stats;
            }
            assert!(Instant::now() < deadline, "condition never held: {stats}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the kernel shows an XDP program on the rx interface (`ip -d link`).
    pub fn rx_xdp_attached(&self) -> bool {
        let ip = self
            .rx_ns
            .command("ip")
            .args(["-d", "link", "show", "dev", &self.rx.ifname])
            .output()
            .unwrap();
        String::from_utf8_lossy(&ip.stdout).contains("prog/xdp")
    }

    /// The rx interface's entry in `lossless host status --json`.
    pub fn rx_status(&self) -> Value {
        let status = Self::lossless(&self.rx_ns, &["host", "status", "--json"]).unwrap();
        let status: Value = serde_json::from_slice(&status.stdout).unwrap();
        let entry = status
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["interface"] == self.rx.ifname.as_str());
        entry
            .cloned()
            .unwrap_or_else(|| panic!("{} missing from status: {status}", self.rx.ifname))
    }

    /// `lossless host stats IFACE --json` in `ns`, parsed.
    pub fn stats(ns: &Namespace, iface: &str) -> anyhow::Result<serde_json::Value> {
        let out = Self::lossless(ns, &["host", "stats", iface, "--json"])?;
        serde_json::from_slice(&out.stdout).context("stats --json is not JSON")
    }

    /// The rx end's `lossless host stats --json`.
    pub fn rx_stats(&self) -> Value {
        Self::stats(&self.rx_ns, &self.rx.ifname).unwrap()
    }

    /// The tx end's `lossless host stats --json`.
    pub fn tx_stats(&self) -> Value {
        Self::stats(&self.tx_ns, &self.tx.ifname).unwrap()
    }
}

/// Detaches `iface` in `ns` when dropped, so a failing test leaves no pins behind.
pub struct Attached<'a> {
    ns: &'a Namespace,
    iface: String,
}

impl<'a> Attached<'a> {
    /// Runs `lossless host attach IFACE EXTRA...` in `ns`.
    pub fn new(ns: &'a Namespace, iface: &str, extra: &[&str]) -> anyhow::Result<Self> {
        let mut args = vec!["host", "attach", iface];
        args.extend_from_slice(extra);
        Link::lossless(ns, &args)?;
        Ok(Attached {
            ns,
            iface: iface.to_owned(),
        })
    }

    /// Detaches now, reporting errors.
    pub fn detach(mut self) -> anyhow::Result<()> {
        let iface = std::mem::take(&mut self.iface);
        Link::lossless(self.ns, &["host", "detach", &iface]).map(drop)
    }
}

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        if !self.iface.is_empty() {
            let _ = Link::lossless(self.ns, &["host", "detach", &self.iface]);
        }
    }
}

/// Fails with the command's output unless it succeeded; returns its stdout.
pub fn succeeded(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

/// A `lossless` process running in a namespace, its stderr read line by line on a thread;
/// killed on drop.
pub struct Running {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    /// Starts `lossless ARGS` in `ns` with `env` added to its environment.
    pub fn spawn(ns: &Namespace, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = ns
            .command(lossless_bin())
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting lossless");
        let stderr = child.stderr.take().expect("stderr piped");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a line of stderr that contains `needle`, failing after [`TIMEOUT`] with what
    /// it printed.
    pub fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "no line with '{needle}' within {TIMEOUT:?}; stderr so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Kills it with SIGKILL (no chance to clean up) and reaps it.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaping lossless");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The names of the pin directories of every namespace (and of the layout before namespace
/// keys), hidden ones included.
pub fn pin_dirs() -> Vec<String> {
    let names = |dir: &std::path::Path| -> Vec<(String, PathBuf)> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut found = Vec::new();
    for (name, path) in names(std::path::Path::new(sysutil::pins::ROOT)) {
        if name.starts_with("netns-") {
            found.extend(names(&path).into_iter().map(|(name, _)| name));
        } else {
            found.push(name);
        }
    }
    found
}

/// Asserts that process `pid` left no namespace named with one of `prefixes` and no pin
/// (names are PREFIX + pid % 100000 + "x" + a counter: `netns::unique_name`).
pub fn assert_nothing_left(prefixes: &[&str], pid: u32) {
    let tag = format!("{}x", pid % 100_000);
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    let left: Vec<&str> = netns
        .lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(&format!("{p}{tag}"))))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    let pins: Vec<String> = pin_dirs()
        .into_iter()
        .filter(|name| name.contains(&tag))
        .collect();
    assert!(pins.is_empty(), "pins left behind: {pins:?}");
}
