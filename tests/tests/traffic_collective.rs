//! `lossless traffic collective` on real frames: four ranks, each a `lossless` process in a
//! namespace of its own, behind a Linux bridge. A ring AllReduce completes on every rank and
//! reports nccl-tests' bandwidths; what each rank says it received the kernel's counters
//! confirm, and tshark reads its frames as RC SENDs and RC Acknowledges; a rank started late
//! is waited for (its neighbour's retransmission timeouts, no shared clock).

use std::net::Ipv4Addr;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use lossless_tests::bed::{exclusive, lossless_bin, TIMEOUT};
use lossless_tests::capture::RawSocket;
use serde_json::Value;
use sysutil::netns::{veth_pair, Endpoint, Namespace};

/// Ranks of the ring.
const RANKS: u32 = 4;
/// nccl-tests' size: bytes per rank.
const SIZE: u64 = 1 << 20;

/// Four hosts behind a bridge in a fifth namespace.
struct Ring {
    hosts: Vec<(Namespace, Endpoint)>,
    /// The bridge's port of each host.
    ports: Vec<Endpoint>,
    switch: Namespace,
}

impl Ring {
    fn new() -> Ring {
        let switch = Namespace::create("llcsw").unwrap();
        switch
            .ip(&["link", "add", "br0", "type", "bridge"])
            .unwrap();
        switch.ip(&["link", "set", "br0", "up"]).unwrap();
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        for i in 0..RANKS as u8 {
            let ns = Namespace::create("llcrank").unwrap();
            let (host, port) = veth_pair(
                &ns,
                Ipv4Addr::new(10, 0, 0, i + 1),
                &switch,
                Ipv4Addr::new(10, 0, 1, i + 1),
            )
            .unwrap();
            switch.ip(&["addr", "flush", "dev", &port.ifname]).unwrap();
            switch
                .ip(&["link", "set", &port.ifname, "master", "br0"])
                .unwrap();
            hosts.push((ns, host));
            ports.push(port);
        }
        Ring {
            hosts,
            ports,
            switch,
        }
    }

    fn host_list(&self) -> String {
        self.hosts
            .iter()
            .map(|(_, e)| e.ipv4.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts rank `i` with `extra` options, its JSON summary on stdout.
    fn start(&self, i: usize, extra: &[&str]) -> Child {
        let (ns, end) = &self.hosts[i];
        ns.command(lossless_bin())
            .args(["traffic", "collective"])
            .args(["--iface", &end.ifname, "--rank", &i.to_string()])
            .args(["--hosts", &self.host_list(), "--json"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting a rank")
    }
}

/// Waits for `child` at most [`TIMEOUT`] past `since`, and reads its JSON summary.
fn finish(child: Child, since: Instant) -> Value {
    let pid = child.id();
    let (send, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait_with_output());
    });
    let wait = TIMEOUT
        .saturating_sub(since.elapsed())
        .max(Duration::from_secs(1));
    let output: Output = match got.recv_timeout(wait) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            // SAFETY: a plain kill of the rank this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let output = got.recv().unwrap().unwrap();
            panic!(
                "rank {pid} did not finish within {TIMEOUT:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        }
    };
    assert!(
        output.status.success(),
        "a rank failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the rank's JSON")
}

fn sum(qps: &Value, direction: &str, key: &str) -> u64 {
    qps.as_array()
        .unwrap()
        .iter()
        .filter(|q| q["direction"] == direction)
        .map(|q| q[key].as_u64().unwrap())
        .sum()
}

/// Four ranks, 2 QPs per connection, 3 timed iterations after one warm-up: every rank
/// finishes every step, sends and receives 2(n−1)/n of the size per iteration, reports a bus
/// bandwidth of 2(n−1)/n times its algorithm bandwidth, and the kernel counted at least those
/// bytes into its interface; tshark reads a rank's frames as RC SEND First/Middle/Last and RC
/// Acknowledges with an AETH.
#[test]
fn a_four_rank_ring_allreduce_completes_and_reports_bus_bandwidth() {
    let Some(_alone) = exclusive("a_four_rank_ring_allreduce_completes_and_reports_bus_bandwidth")
    else {
        return;
    };
    let ring = Ring::new();
    // What rank 0 puts on the wire, as the bridge receives it.
    let socket = RawSocket::open_in(&ring.switch, &ring.ports[0].ifname);
    let capture = std::thread::spawn(move || {
        socket
            .receive(1500, TIMEOUT, |f: &[u8]| {
                f.len() > 42 && f[12..14] == [0x08, 0x00] && f[36..38] == 4791u16.to_be_bytes()
            })
            .expect("rank 0's RoCEv2 frames")
    });
    let since = Instant::now();
    let size = SIZE.to_string();
    let options = [
        "allreduce",
        "--size",
        &size,
        "--qps-per-conn",
        "2",
        "--iters",
        "3",
        "--warmup",
        "1",
    ];
    let children: Vec<Child> = (0..RANKS as usize)
        .map(|i| ring.start(i, &options))
        .collect();
    let summaries: Vec<Value> = children.into_iter().map(|c| finish(c, since)).collect();
    let per_iteration = SIZE * 2 * u64::from(RANKS - 1) / u64::from(RANKS);
    for (i, s) in summaries.iter().enumerate() {
        assert_eq!(s["rank"], i as u64);
        assert_eq!(s["ranks"], u64::from(RANKS));
        assert_eq!(s["collective"], "allreduce");
        assert_eq!(s["iterations"].as_array().unwrap().len(), 4, "{s}");
        assert_eq!(s["steps"].as_array().unwrap().len(), 6, "{s}");
        let (algbw, busbw) = (
            s["algbw_gbps"].as_f64().unwrap(),
            s["busbw_gbps"].as_f64().unwrap(),
        );
        assert!(algbw > 0.0, "{s}");
        assert!(
            (busbw / algbw - 1.5).abs() < 1e-9,
            "busbw = algbw × 2(n−1)/n: {s}"
        );
        let time_us = s["time_us"].as_f64().unwrap();
        assert!(
            (algbw - SIZE as f64 / time_us / 1e3).abs() < 1e-6 * algbw,
            "algbw = size / time: {s}"
        );
        // Two QPs to the successor, two from the predecessor.
        let qps = &s["qps"];
        assert_eq!(qps.as_array().unwrap().len(), 4, "{s}");
        assert_eq!(sum(qps, "send", "bytes"), 4 * per_iteration, "{s}");
        assert_eq!(sum(qps, "recv", "bytes"), 4 * per_iteration, "{s}");
        let (ns, end) = &ring.hosts[i];
        let rx = ns.rx_counter(&end.ifname, "bytes").unwrap();
        assert!(
            rx >= 4 * per_iteration,
            "rank {i}'s interface received {rx} bytes"
        );
    }
    let frames = capture.join().unwrap();
    let text = lossless_tests::craft::tshark_verbose(&frames).unwrap();
    for needle in [
        "SEND First",
        "SEND Middle",
        "SEND Last",
        "Acknowledge",
        "ACK Extended Transport Header",
        "Destination Queue Pair",
    ] {
        let mut opcodes: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.contains("pcode") || l.contains("Transport Header") || l.contains("Queue Pair")
            })
            .collect();
        opcodes.sort_unstable();
        opcodes.dedup();
        assert!(
            text.contains(needle),
            "tshark shows no {needle}: {opcodes:#?}"
        );
    }
}

/// Rank 0 starts only once rank 3 has sent it a window and retransmitted (more frames reached
/// rank 0's interface than a window holds): every rank still finishes, and rank 3's sending
/// QPs count the retransmission timeouts that carried the ring over the wait.
#[test]
fn a_rank_started_late_is_waited_for() {
    let Some(_alone) = exclusive("a_rank_started_late_is_waited_for") else {
        return;
    };
    let ring = Ring::new();
    let since = Instant::now();
    let options = [
        "allreduce",
        "--size",
        "256KiB",
        "--iters",
        "1",
        "--warmup",
        "1",
        "--window",
        "8",
        "--rto",
        "5ms",
        "--timeout",
        "8s",
    ];
    let mut children: Vec<(usize, Child)> = (1..RANKS as usize)
        .map(|i| (i, ring.start(i, &options)))
        .collect();
    let (ns, end) = &ring.hosts[0];
    let before = ns.rx_packets(&end.ifname).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while ns.rx_packets(&end.ifname).unwrap() < before + 16 {
        assert!(Instant::now() < deadline, "rank 3 never sent to rank 0");
        std::thread::sleep(Duration::from_millis(5));
    }
    children.push((0, ring.start(0, &options)));
    for (i, child) in children {
        let s = finish(child, since);
        if i == 3 {
            let timeouts: u64 = s["qps"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|q| q["sent"]["timeouts"].as_u64())
                .sum();
            assert!(timeouts >= 1, "{s}");
        }
        assert_eq!(s["iterations"].as_array().unwrap().len(), 2, "{s}");
    }
}

/// `--size` is a size and nothing more: text that would add keys to the workload's short form
/// (a comma) is refused before anything opens.
#[test]
fn a_size_that_is_not_one_is_refused() {
    for size in ["1MB,ranks=9", "lots", "0"] {
        let output = std::process::Command::new(lossless_bin())
            .args([
                "traffic",
                "collective",
                "allreduce",
                "--iface",
                "lo",
                "--rank",
                "0",
            ])
            .args(["--hosts", "10.0.0.1,10.0.0.2", "--size", size])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "--size {size} was accepted");
        assert!(stderr.contains("--size"), "--size {size}: {stderr}");
    }
}
