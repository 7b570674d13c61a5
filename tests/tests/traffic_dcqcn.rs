//! The traffic tool's congestion loop on a veth pair between two namespaces, run through the
//! `lossless` binary: a DCQCN sender cuts its rate on CNPs from `recv --cnp` and recovers
//! without them; `recv --cnp` answers CE marks at most once per QP per interval with CNPs that
//! scapy decodes (opcode, DestQP, ICRC recomputed); a sender on an attached interface holds its
//! frames during a PFC pause (built by scapy) until expiry or XON, and with `--ignore-pfc` does not.

use std::{
    io::Write as _,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use lossless_tests::{
    bed::{exclusive, lossless_bin, Link, TIMEOUT},
    capture::RawSocket,
    craft::scapy_frame,
};
use serde_json::Value;
use sysutil::netns::{check, Namespace};

/// A pause of 2000 quanta at 10 Mb/s (51.2 µs each).
const PAUSE_2000: Duration = Duration::from_micros(102_400);

/// Timing slack of what the capture sees: its thread, the sender and the test share two cores
/// with whatever else runs, so a frame can be read some milliseconds after it arrived.
const SLACK: Duration = Duration::from_millis(20);

/// How long a capture waits for a frame before it looks at its stop flag again.
const CAPTURE_POLL: Duration = Duration::from_millis(20);

/// Frames, each with the time it was read.
type Frames = Vec<(Instant, Vec<u8>)>;

/// Frames captured on one interface, each with the time it was read.
struct Capture {
    frames: Arc<Mutex<Frames>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Capture {
    /// Captures the frames arriving at `iface` in `ns` that `keep` accepts, from now on.
    fn start(ns: &Namespace, iface: &str, keep: impl Fn(&[u8]) -> bool + Send + 'static) -> Self {
        let socket = RawSocket::open_in(ns, iface);
        let frames = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (out, stopped) = (frames.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                // A timeout only means nothing arrived during the poll.
                if let Ok(got) = socket.receive(1, CAPTURE_POLL, &keep) {
                    let now = Instant::now();
                    out.lock()
                        .unwrap()
                        .extend(got.into_iter().map(|f| (now, f)));
                }
            }
        });
        Capture {
            frames,
            stop,
            thread: Some(thread),
        }
    }

    /// How many frames were captured so far.
    fn len(&self) -> usize {
        self.frames.lock().unwrap().len()
    }

    /// When the last frame arrived.
    fn last(&self) -> Option<Instant> {
        self.frames.lock().unwrap().last().map(|(t, _)| *t)
    }

    /// Waits until `done` holds for the capture, failing after [`TIMEOUT`].
    fn wait_for(&self, what: &str, done: impl Fn(&Capture) -> bool) {
        let deadline = Instant::now() + TIMEOUT;
        while !done(self) {
            assert!(Instant::now() < deadline, "never happened: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Stops capturing and returns the frames.
    fn finish(mut self) -> Frames {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.frames.lock().unwrap())
    }
}

/// Starts `lossless ARGS` in `ns` with its output captured.
fn spawn(ns: &Namespace, args: &[String]) -> Child {
    ns.command(lossless_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `ns` has at least `n` packet sockets (a receiver has opened its own), failing
/// after [`TIMEOUT`].
fn wait_for_packet_sockets(ns: &Namespace, n: usize) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let table = ns
            .run(|| std::fs::read_to_string("/proc/thread-self/net/packet"))
            .unwrap()
            .unwrap();
        if table.lines().skip(1).count() >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no receiver listening in {}",
            ns.name()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts `lossless traffic recv --iface RX --json EXTRA...` on the rx end and waits until it
/// listens (its frame socket and its CNP socket are open).
fn spawn_receiver(link: &Link, extra: &[&str]) -> Child {
    let mut args = vec![
        "traffic",
        "recv",
        "--iface",
        &link.rx.ifname,
        "--cnp",
        "--json",
    ];
    args.extend_from_slice(extra);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let child = spawn(&link.rx_ns, &args);
    wait_for_packet_sockets(&link.rx_ns, 2);
    child
}

/// Waits for a `lossless ... --json` started by [`spawn`] and parses its summary.
fn summary(child: Child) -> Value {
    let output = check("lossless traffic", child.wait_with_output().unwrap()).unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Starts `traffic send --json` from the tx end to the rx end with `extra` options.
fn spawn_sender(link: &Link, extra: &[&str]) -> Child {
    spawn(&link.tx_ns, &send_args(link, extra))
}

/// `traffic send` from the tx end to the rx end with `extra` options, as arguments.
fn send_args(link: &Link, extra: &[&str]) -> Vec<String> {
    let mac = link.rx.mac.map(|b| format!("{b:02x}")).join(":");
    let mut args: Vec<String> = [
        "traffic",
        "send",
        "--iface",
        &link.tx.ifname,
        "--dst-ip",
        &link.rx.ipv4.to_string(),
        "--dst-mac",
        &mac,
        "--json",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Whether `frame` is a RoCEv2 CNP (IPv4, UDP 4791, BTH opcode 0x81).
fn is_cnp(frame: &[u8]) -> bool {
    frame.len() >= 43
        && frame[12..14] == [0x08, 0x00]
        && frame[23] == 17
        && frame[36..38] == 4791u16.to_be_bytes()
        && frame[42] == 0x81
}

/// Each frame decoded by scapy (`scapy.contrib.roce`): BTH opcode, DestQP, BECN, the ICRC as
/// received and as scapy recomputes it, the CNP padding's length, the IP TOS.
fn scapy_decode(frames: &[Vec<u8>]) -> Vec<Value> {
    let python = testkit::venv_python();
    let program = r#"
import sys, json
from scapy.all import Ether, IP, UDP, raw
from scapy.contrib.roce import BTH, CNPPadding
out = []
for line in sys.stdin:
    p = Ether(bytes.fromhex(line.strip()))
    b = p[BTH]
    got = b.icrc
    b.icrc = None
    again = Ether(raw(p))[BTH].icrc
    out.append({"opcode": b.opcode, "dqpn": b.dqpn, "becn": b.becn, "icrc": got,
                "icrc_recomputed": again, "padding": len(raw(p[CNPPadding])) if CNPPadding in p else -1,
                "tos": p[IP].tos, "dport": p[UDP].dport})
print(json.dumps(out))
"#;
    let mut child = Command::new(&python)
        .args(["-c", program])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} (run `cargo xtask setup`): {e}", python.display()));
    let mut input = String::new();
    for frame in frames {
        input += &frame.iter().map(|b| format!("{b:02x}")).collect::<String>();
        input.push('\n');
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = check("scapy", child.wait_with_output().unwrap()).unwrap();
    serde_json::from_slice::<Vec<Value>>(&output.stdout).unwrap()
}

/// The rate timeline's points of the one QP in a `--rate-log` JSON file.
fn timeline(path: &std::path::Path) -> Vec<Value> {
    let log: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(log.as_array().unwrap().len(), 1, "one QP: {log}");
    log[0]["points"].as_array().unwrap().clone()
}

/// A DCQCN sender sending CE-marked frames to `recv --cnp` is cut by its CNPs; once the
/// receiver stops (no more CNPs) it climbs back to its line rate. Asserted on its rate
/// timeline: a CNP point per CNP received, the lowest rate at most half the start, the last
/// point back within 5% of the start, and no cut after the last CNP.
#[test]
fn dcqcn_cuts_on_cnps_and_recovers_without_them() {
    let Some(_alone) = exclusive("dcqcn_cuts_on_cnps_and_recovers_without_them") else {
        return;
    };
    let link = Link::new().unwrap();
    let dir = std::env::temp_dir().join(format!("lossless-dcqcn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("rates.json");
    let line_rate = 200_000_000u64;
    let receiver = spawn_receiver(&link, &["--duration", "0.4"]);
    let sender = spawn_sender(
        &link,
        &[
            "--rate",
            "200mbit",
            "--size",
            "512",
            "--duration",
            "1.2",
            "--ecn",
            "ce",
            "--dcqcn",
            "--dcqcn-min-rate",
            "10mbit",
            "--rate-log",
            log.to_str().unwrap(),
        ],
    );
    let received = summary(receiver);
    let sent = summary(sender);
    let points = timeline(&log);
    std::fs::remove_dir_all(&dir).unwrap();

    let cnps = sent["cnp_received"].as_u64().unwrap();
    assert!(cnps >= 10, "too few CNPs to test: {sent}");
    assert_eq!(cnps, received["cnp_sent"].as_u64().unwrap(), "CNPs lost");
    assert_eq!(sent["qps"][0]["cnp_received"], cnps);
    let is_cnp_point = |p: &Value| p["event"] == "cnp";
    assert_eq!(
        points.iter().filter(|p| is_cnp_point(p)).count() as u64,
        cnps
    );
    let rate = |p: &Value| p["rate_bps"].as_u64().unwrap();
    assert_eq!(
        (points[0]["event"].as_str(), rate(&points[0])),
        (Some("start"), line_rate)
    );
    let lowest = points.iter().map(rate).min().unwrap();
    assert!(lowest <= line_rate / 2, "never cut below {lowest} bit/s");
    let last_cnp = points.iter().rposition(is_cnp_point).unwrap();
    let after = &points[last_cnp..];
    assert!(
        after.windows(2).all(|w| rate(&w[1]) >= rate(&w[0])),
        "the rate fell without a CNP"
    );
    let end = rate(points.last().unwrap());
    assert!(
        end >= line_rate * 95 / 100,
        "recovered only to {end} bit/s from {} after the last CNP",
        rate(&points[last_cnp])
    );
}

/// `recv --cnp` under a flood of CE-marked frames on two QPs answers at most one per QP per
/// interval: with a 1 ms interval over a sender running D seconds, each QP gets at most
/// D/1ms + 2 CNPs and at least a quarter of D/1ms (the sender sends every ~90 µs per QP, so
/// every interval has about eleven CE marks); every CE mark is either answered or counted as
/// suppressed, and the sender receives at least 90% of them (the receiver may lag behind the
/// flood and answer its last marks after the sender ended: at 200 Mb/s of 256-byte frames a
/// busy 2-core machine left it 70 ms behind, so the flood is no faster than it needs to be).
#[test]
fn recv_cnp_rate_limits_under_a_flood() {
    let Some(_alone) = exclusive("recv_cnp_rate_limits_under_a_flood") else {
        return;
    };
    let link = Link::new().unwrap();
    let receiver = spawn_receiver(
        &link,
        &["--cnp-interval-us", "1000", "--idle-timeout", "0.3"],
    );
    let sent = summary(spawn_sender(
        &link,
        &[
            "--rate",
            "50mbit",
            "--size",
            "256",
            "--qps",
            "2",
            "--duration",
            "0.5",
            "--ecn",
            "ce",
        ],
    ));
    let received = summary(receiver);
    let cnp_sent = received["cnp_sent"].as_u64().unwrap();
    let intervals = sent["duration_s"].as_f64().unwrap() * 1000.0;
    for qp in received["qps"].as_array().unwrap() {
        let (answered, suppressed) = (
            qp["cnp_sent"].as_u64().unwrap(),
            qp["cnp_suppressed"].as_u64().unwrap(),
        );
        assert_eq!(answered + suppressed, qp["ce"].as_u64().unwrap(), "{qp}");
        assert!(
            answered as f64 <= intervals + 2.0,
            "{answered} CNPs in {intervals} intervals"
        );
        assert!(
            answered as f64 >= intervals / 4.0,
            "{answered} CNPs in {intervals} intervals"
        );
        assert!(suppressed > answered, "not a flood: {qp}");
    }
    // The receiver may lag behind the flood and answer its last marks after the sender ended.
    let cnp_received = sent["cnp_received"].as_u64().unwrap();
    assert!(
        cnp_received <= cnp_sent && cnp_received * 10 >= cnp_sent * 9,
        "the sender received {cnp_received} of {cnp_sent} CNPs"
    );
}

/// Below the interval no CE mark goes unanswered: 40 CE-marked frames on two QPs, each QP's
/// frames at least 4 ms apart, get 40 CNPs (none suppressed), and every CNP passes scapy: BTH opcode
/// 0x81, BECN, DestQP = the data QP, 16 reserved bytes, ICRC recomputed equal, DSCP 48,
/// not-ECT, UDP port 4791.
#[test]
fn recv_cnp_answers_every_mark_below_the_interval() {
    let Some(_alone) = exclusive("recv_cnp_answers_every_mark_below_the_interval") else {
        return;
    };
    let link = Link::new().unwrap();
    let capture = Capture::start(&link.tx_ns, &link.tx.ifname, is_cnp);
    let receiver = spawn_receiver(&link, &["--count", "40", "--duration", "5"]);
    let sent = summary(spawn_sender(
        &link,
        &[
            "--rate",
            "1mbit",
            "--size",
            "256",
            "--qps",
            "2",
            "--count",
            "40",
            "--ecn",
            "ce",
            // A late sender skips time rather than sending a QP's frames back to back.
            "--max-burst-us",
            "0",
        ],
    ));
    let received = summary(receiver);
    assert_eq!(
        (
            received["ce"].as_u64(),
            received["cnp_sent"].as_u64(),
            received["cnp_suppressed"].as_u64()
        ),
        (Some(40), Some(40), Some(0)),
        "{received}"
    );
    capture.wait_for("40 CNPs captured", |c| c.len() >= 40);
    let frames: Vec<Vec<u8>> = capture.finish().into_iter().map(|(_, f)| f).collect();
    assert_eq!(frames.len(), 40);
    let decoded = scapy_decode(&frames);
    let mut per_qp = [0; 2];
    for cnp in &decoded {
        assert_eq!(cnp["opcode"], 0x81, "{cnp}");
        assert_eq!(cnp["becn"], 1, "{cnp}");
        assert_eq!(cnp["icrc"], cnp["icrc_recomputed"], "{cnp}");
        assert_eq!(
            (cnp["padding"].as_i64(), cnp["tos"].as_u64()),
            (Some(16), Some(48 << 2))
        );
        assert_eq!(cnp["dport"], 4791);
        let qp = cnp["dqpn"].as_u64().unwrap();
        assert!(qp == 256 || qp == 257, "{cnp}");
        per_qp[(qp - 256) as usize] += 1;
    }
    assert_eq!(per_qp, [20, 20]);
    // The CNPs of the last marks may still be in flight when the sender ends.
    assert!(sent["cnp_received"].as_u64().unwrap() >= 38, "{sent}");
}

/// PFC frames for priority 3, built by scapy before the run (python starts slowly), sent to
/// the sender's attached interface from the link peer.
struct Pauser {
    socket: RawSocket,
    /// The frames, by pause time in quanta (0: XON).
    frames: Vec<(u16, Vec<u8>)>,
}

impl Pauser {
    /// A pauser on the rx end's interface with a frame for each of `quanta`.
    fn new(link: &Link, quanta: &[u16]) -> Self {
        let frames = quanta
            .iter()
            .map(|&q| {
                let frame = scapy_frame(&format!(
                    "Ether(src='02:00:00:00:00:09', dst='01:80:c2:00:00:01')/\
                     MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time={q})"
                ));
                (q, frame.unwrap())
            })
            .collect();
        Pauser {
            socket: link.rx_socket(),
            frames,
        }
    }

    /// Sends the frame of `quanta`; returns when it left.
    fn send(&self, quanta: u16) -> Instant {
        let (_, frame) = self.frames.iter().find(|(q, _)| *q == quanta).unwrap();
        let at = Instant::now();
        self.socket.send(frame).unwrap();
        at
    }
}

/// The longest gap between consecutive data frames from `from` on, and when it began.
fn longest_gap(arrivals: &[Instant], from: Instant) -> (Duration, Instant) {
    arrivals
        .windows(2)
        .filter(|w| w[1] > from)
        .map(|w| (w[1] - w[0], w[0]))
        .max()
        .unwrap_or_else(|| {
            let last = arrivals.last().map(|t| t.saturating_duration_since(from));
            panic!(
                "{} frames, none after the pause (last {last:?} after it)",
                arrivals.len()
            )
        })
}

/// A sender of DSCP 26 (priority 3) on the tx end, attached, with a 10 Mb/s PFC link speed
/// (one quantum = 51.2 µs), 20 Mbit/s of 256-byte frames (one every ~107 µs); the rx end
/// captures the data frames' arrival times. Runs `during` once frames flow, then returns the
/// sender's summary and the arrivals.
fn paused_run(
    extra: &[&str],
    quanta: &[u16],
    during: impl FnOnce(&Pauser, &Capture),
) -> (Value, Vec<Instant>, Value) {
    let link = Link::new().unwrap();
    let pauser = Pauser::new(&link, quanta);
    let attached = link.attach_paused_sender();
    let tx_mac = link.tx.mac;
    let capture = Capture::start(&link.rx_ns, &link.rx.ifname, move |f| {
        f.len() >= 12 && f[6..12] == tx_mac && f.len() >= 256
    });
    let mut args = vec!["--rate", "20mbit", "--size", "256", "--duration", "1.2"];
    args.extend_from_slice(extra);
    let sender = spawn_sender(&link, &args);
    capture.wait_for("data frames flowing", |c| c.len() >= 100);
    during(&pauser, &capture);
    let sent = summary(sender);
    let arrivals = capture.finish().into_iter().map(|(t, _)| t).collect();
    let stats = link.tx_stats();
    attached.detach().unwrap();
    (sent, arrivals, stats)
}

/// A PAUSE of 2000 quanta (102.4 ms at 10 Mb/s) stops the sender within [`SLACK`]; the peer
/// sees a gap of 102.4 ms within -10 ms/+[`SLACK`]; the summary counts the time held and the frames held; the
/// kernel's `pfc_violations` (TC egress) counts at most two frames leaving while paused.
#[test]
fn sender_pauses_until_expiry() {
    let Some(_alone) = exclusive("sender_pauses_until_expiry") else {
        return;
    };
    let mut paused_at = None;
    let (sent, arrivals, stats) = paused_run(&[], &[2000], |pauser, _| {
        paused_at = Some(pauser.send(2000));
    });
    let paused_at = paused_at.unwrap();
    assert_eq!(stats["pfc_pause_rx"][3], 1, "{stats}");
    let (gap, began) = longest_gap(&arrivals, paused_at);
    let pause = PAUSE_2000;
    assert!(
        began <= paused_at + SLACK,
        "the sender went on for {:?} after the PAUSE",
        began.saturating_duration_since(paused_at)
    );
    assert!(
        gap + Duration::from_millis(10) >= pause && gap <= pause + SLACK,
        "gap {gap:?} for a {pause:?} pause"
    );
    assert_eq!(
        (
            sent["pfc_honoured"].as_bool(),
            sent["pfc_priority"].as_u64()
        ),
        (Some(true), Some(3))
    );
    let held = sent["pfc_paused_ns"].as_u64().unwrap();
    assert!(
        (95_000_000..=115_000_000).contains(&held),
        "held {held} ns: {sent}"
    );
    assert!(sent["pfc_holds"].as_u64().unwrap() >= 1, "{sent}");
    // The kernel agrees: at most a frame or two (already handed over) left while paused.
    let violations = stats["pfc_violations"][3].as_u64().unwrap();
    assert!(violations <= 2, "{violations} frames left while paused");
}

/// Under a PAUSE of 65535 quanta (3.36 s), an XON sent once the peer has seen no frame for
/// 100 ms resumes the sender within [`SLACK`]; the sender counts the time from PAUSE to XON as
/// held, within 10 ms.
#[test]
fn sender_resumes_on_xon() {
    let Some(_alone) = exclusive("sender_resumes_on_xon") else {
        return;
    };
    let mut times = None;
    let (sent, arrivals, stats) = paused_run(&[], &[65535, 0], |pauser, capture| {
        let paused_at = pauser.send(65535);
        capture.wait_for("a 100 ms gap", |c| {
            c.last()
                .is_some_and(|t| t.elapsed() >= Duration::from_millis(100))
        });
        times = Some((paused_at, pauser.send(0)));
    });
    let (paused_at, xon_at) = times.unwrap();
    assert_eq!(stats["pfc_resume_rx"][3], 1, "{stats}");
    let (gap, began) = longest_gap(&arrivals, paused_at);
    let resumed = began + gap;
    assert!(resumed >= xon_at, "frames flowed during the pause");
    assert!(
        resumed <= xon_at + SLACK,
        "resumed {:?} after the XON",
        resumed - xon_at
    );
    // The sender held from the PAUSE to the XON, within 10 ms either way.
    let held = Duration::from_nanos(sent["pfc_paused_ns"].as_u64().unwrap());
    let between = xon_at - paused_at;
    assert!(
        held + Duration::from_millis(10) >= between && held <= between + Duration::from_millis(10),
        "held {held:?} for a pause of {between:?}: {sent}"
    );
}

/// With `--ignore-pfc` the same PAUSE (recorded by the data path) holds nothing back: during
/// its 102.4 ms the peer receives at least half the ~957 frames the rate sends in that time
/// (an honouring sender sends none), and the kernel counts as many `pfc_violations`.
#[test]
fn ignore_pfc_sends_through_a_pause() {
    let Some(_alone) = exclusive("ignore_pfc_sends_through_a_pause") else {
        return;
    };
    let mut paused_at = None;
    let (sent, arrivals, stats) = paused_run(&["--ignore-pfc"], &[2000], |pauser, capture| {
        let at = pauser.send(2000);
        paused_at = Some(at);
        capture.wait_for("the pause time passed", |c| {
            c.last().is_some_and(|t| t >= at + PAUSE_2000)
        });
    });
    assert_eq!(stats["pfc_pause_rx"][3], 1, "{stats}");
    let paused_at = paused_at.unwrap();
    let during = arrivals
        .iter()
        .filter(|&&t| t > paused_at && t <= paused_at + PAUSE_2000)
        .count();
    let violations = stats["pfc_violations"][3].as_u64().unwrap();
    assert!(
        violations >= 478,
        "the kernel counted {violations} frames sent while paused"
    );
    assert!(
        during >= 478,
        "{during} frames during the pause while ignoring PFC: {sent}"
    );
    assert_eq!(
        (
            sent["pfc_honoured"].as_bool(),
            sent["pfc_paused_ns"].as_u64()
        ),
        (Some(false), Some(0))
    );
}
