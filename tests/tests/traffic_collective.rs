//! `lossless traffic collective` on real frames: four ranks, each a `lossless` process in a
//! namespace of its own, behind a Linux bridge. A ring AllReduce completes on every rank and
//! reports nccl-tests' bandwidths; what each rank says it received the kernel's counters
//! confirm, and tshark reads its frames as RC SENDs and RC Acknowledges; a rank started late
//! is waited for (its neighbour's retransmission timeouts, no shared clock); a frame lost
//! between two hosts is NAKed, resent, and counted by both hosts' programs.

use std::net::Ipv4Addr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lossless_tests::bed::{exclusive, lossless_bin, succeeded_within, Attached, Link, TIMEOUT};
use lossless_tests::capture::RawSocket;
use lossless_tests::craft::{scapy_decode, tshark_verbose};
use serde_json::Value;
use sysutil::netns::{veth_pair, Endpoint, Namespace};

/// Ranks of the ring.
const RANKS: u32 = 4;
/// nccl-tests' size: bytes per rank.
const SIZE: u64 = 1 << 20;

/// One timed iteration of an allreduce of 256 KiB a rank: the options of the runs that look
/// at what happens to frames rather than at the bandwidth.
const ONE_SMALL_ALLREDUCE: [&str; 5] = ["allreduce", "--size", "256KiB", "--iters", "1"];

/// Hosts behind a bridge in a namespace of its own.
struct Ring {
    hosts: Vec<(Namespace, Endpoint)>,
    /// The bridge's port of each host.
    ports: Vec<Endpoint>,
    switch: Namespace,
}

impl Ring {
    /// `ranks` hosts, 10.0.0.1 onwards.
    fn new(ranks: u8) -> Ring {
        let switch = Namespace::create("llcsw").unwrap();
        switch
            .ip(&["link", "add", "br0", "type", "bridge"])
            .unwrap();
        switch.ip(&["link", "set", "br0", "up"]).unwrap();
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        for i in 0..ranks {
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

    /// Waits until `count` more frames than now have reached host `i`'s interface (a peer
    /// is sending to it), failing after [`TIMEOUT`].
    fn wait_for_frames(&self, i: usize, count: u64) {
        let (ns, end) = &self.hosts[i];
        let before = ns.rx_packets(&end.ifname).unwrap();
        let deadline = Instant::now() + TIMEOUT;
        while ns.rx_packets(&end.ifname).unwrap() < before + count {
            assert!(Instant::now() < deadline, "no peer sent to rank {i}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts rank `i` with `extra` options, its JSON summary on stdout.
    fn start(&self, i: usize, extra: &[&str]) -> Rank {
        let (ns, end) = &self.hosts[i];
        let child = ns
            .command(lossless_bin())
            .args(["traffic", "collective"])
            .args(["--iface", &end.ifname, "--rank", &i.to_string()])
            .args(["--hosts", &self.host_list(), "--json"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting a rank");
        Rank(Some(child))
    }
}

/// A running rank, killed and reaped if the test ends (a failed assertion) before [`finish`].
struct Rank(Option<Child>);

impl Drop for Rank {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for `child` at most [`TIMEOUT`] past `since`, and reads its JSON summary.
fn finish(mut rank: Rank, since: Instant) -> Value {
    let child = rank.0.take().expect("a rank finishes once");
    let wait = TIMEOUT
        .saturating_sub(since.elapsed())
        .max(Duration::from_secs(1));
    let what = format!("rank {}", child.id());
    let output = succeeded_within(child, wait, &what);
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
    let ring = Ring::new(RANKS as u8);
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
    let children: Vec<Rank> = (0..RANKS as usize)
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
    let ring = Ring::new(RANKS as u8);
    let since = Instant::now();
    let options = [
        ONE_SMALL_ALLREDUCE.as_slice(),
        &[
            "--warmup",
            "1",
            "--window",
            "8",
            "--rto",
            "5ms",
            "--timeout",
            "8s",
        ],
    ]
    .concat();
    let mut children: Vec<(usize, Rank)> = (1..RANKS as usize)
        .map(|i| (i, ring.start(i, &options)))
        .collect();
    ring.wait_for_frames(0, 16);
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

/// The nftables ruleset that loses one frame as it leaves the bridge by `port`: the first RC
/// data frame (not an Acknowledge) with PSN `psn`, which is the QP's frame number `psn` as the
/// traffic tool's PSNs start at 0 (the test checks it by the NAK's PSN); its retransmissions
/// pass (the set remembers the loss). A deterministic single loss in the network, where this
/// kernel has no netem (a drop at the sender's own egress would fail its send call, not lose a
/// frame on the path).
fn lose_one_frame(port: &str, psn: u32) -> String {
    // Offsets from the IPv4 header (20 bytes, no options) in bits: the BTH opcode at byte 28,
    // its PSN at bytes 37..40.
    let data = format!("ip protocol udp udp dport 4791 @nh,224,8 != 0x11 @nh,296,24 {psn}");
    format!(
        "table netdev lossless_loss {{\n\
         set lost {{ type ipv4_addr; flags dynamic; }}\n\
         chain egress {{\n\
         type filter hook egress device \"{port}\" priority 0;\n\
         {data} ip saddr @lost accept\n\
         {data} add @lost {{ ip saddr }} counter drop\n\
         }}\n}}\n"
    )
}

/// Whether `frame` is an IPv4 RoCEv2 NAK: BTH opcode Acknowledge (0x11) and an AETH syndrome
/// whose top bits say NAK (0b011).
fn is_nak(frame: &[u8]) -> bool {
    frame.len() >= 58
        && frame[12..14] == [0x08, 0x00]
        && frame[36..38] == 4791u16.to_be_bytes()
        && frame[42] == 0x11
        && frame[54] >> 5 == 0b011
}

/// The `key` counter of `direction` of `qp` in a rank's summary.
fn qp_count(summary: &Value, qp: u64, direction: &str, key: &str) -> u64 {
    let entry = summary["qps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["qpn"] == qp && q["direction"] == direction)
        .unwrap_or_else(|| panic!("no {direction} QP {qp}: {summary}"));
    let side = if direction == "send" {
        "sent"
    } else {
        "received"
    };
    entry[side][key].as_u64().unwrap()
}

/// A host's NAK record (as `host stats --json` prints it) of `n` PSN sequence errors and no
/// other syndrome.
fn psn_sequence_errors(n: u64) -> Value {
    serde_json::json!({
        "psn_sequence_error": n,
        "invalid_request": 0,
        "remote_access_error": 0,
        "remote_operational_error": 0,
        "invalid_rd_request": 0,
        "reserved_code": 0,
        "rnr_nak": 0,
    })
}

/// Asserts a host's whole NAK record: `received` and `sent` PSN sequence errors and nothing
/// else, on the interface and on `qp`, the only QP with NAKs.
fn assert_host_naks(stats: &Value, qp: u64, received: u64, sent: u64) {
    let (received, sent) = (psn_sequence_errors(received), psn_sequence_errors(sent));
    assert_eq!(stats["nak_received"], received, "{stats}");
    assert_eq!(stats["nak_sent"], sent, "{stats}");
    assert_eq!(
        stats["nak_qps"],
        serde_json::json!([{"qp": qp, "received": received, "sent": sent}]),
        "{stats}"
    );
}

/// Issue 36's acceptance: two hosts with the lossless programs (XDP and TC) on both ends, a
/// bridge between them, run a two-rank AllReduce while the bridge loses one data frame of
/// rank 0 (PSN 40, after both ranks are up). Rank 1's receiver NAKs the gap and rank 0 goes
/// back N: the traffic tool reports the NAK and the resends; the receiving host counted the
/// NAKs sent (TC egress), the sending host the NAKs received (XDP), as many as the tool sent,
/// with the PSN sequence error syndrome; scapy and tshark read the captured NAK's syndrome.
#[test]
fn a_lost_frame_is_naked_counted_on_both_hosts_and_resent() {
    const TEST: &str = "a_lost_frame_is_naked_counted_on_both_hosts_and_resent";
    let Some(_alone) = exclusive(TEST) else {
        return;
    };
    if !testkit::runs_or_skip(TEST, "nft", "--version", "to lose one frame (nftables)") {
        return;
    }
    let ring = Ring::new(2);
    let [(tx_ns, tx), (rx_ns, rx)] = [&ring.hosts[0], &ring.hosts[1]];
    let attach = ["--mode", "skb", "--hooks", "xdp,tc"];
    let _sender = Attached::new(tx_ns, &tx.ifname, &attach).unwrap();
    let _receiver = Attached::new(rx_ns, &rx.ifname, &attach).unwrap();
    let ruleset = testkit::TempDir::new("lossless-nak", "loss");
    let rules = ruleset.file("loss.nft", &lose_one_frame(&ring.ports[1].ifname, 40));
    testkit::output_of(ring.switch.command("nft").arg("-f").arg(&rules));
    let naks = RawSocket::open_in(tx_ns, &tx.ifname);
    let capture = std::thread::spawn(move || naks.receive(1, TIMEOUT, is_nak));

    let options = [ONE_SMALL_ALLREDUCE.as_slice(), &["--warmup", "0"]].concat();
    let since = Instant::now();
    // Rank 1 first; rank 0 once rank 1 sends, so rank 0's first window finds rank 1 up.
    let rank1 = ring.start(1, &options);
    ring.wait_for_frames(0, 16);
    let rank0 = ring.start(0, &options);
    let (rank0, rank1) = (finish(rank0, since), finish(rank1, since));

    let listed = ring
        .switch
        .command("nft")
        .args(["list", "ruleset"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("counter packets 1 "),
        "one frame lost:\n{listed}"
    );
    // Rank 0's sending QP is the one that lost the frame.
    let qp = rank0["qps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["direction"] == "send")
        .unwrap()["qpn"]
        .as_u64()
        .unwrap();
    let naks_sent = qp_count(&rank1, qp, "recv", "naks");
    assert!(naks_sent >= 1, "rank 1 sent no NAK: {rank1}");
    assert!(qp_count(&rank0, qp, "send", "naks") >= 1, "{rank0}");
    assert!(
        qp_count(&rank0, qp, "send", "resent") >= 1,
        "no go-back-N: {rank0}"
    );

    let tx_stats = Link::stats(tx_ns, &tx.ifname).unwrap();
    let rx_stats = Link::stats(rx_ns, &rx.ifname).unwrap();
    assert_host_naks(&rx_stats, qp, 0, naks_sent);
    assert_host_naks(&tx_stats, qp, naks_sent, 0);

    let frames = capture.join().unwrap().expect("a NAK reached rank 0");
    let fields = scapy_decode(
        &frames[0],
        "{'opcode': p[BTH].opcode, 'dqpn': p[BTH].dqpn, 'syndrome': p[AETH].syndrome, \
         'psn': p[BTH].psn, 'icrc_ok': icrc_ok(p)}",
    )
    .unwrap();
    assert_eq!(fields["opcode"], 0x11, "{fields}");
    assert_eq!(fields["dqpn"], qp, "{fields}");
    assert_eq!(
        fields["syndrome"], 0x60,
        "NAK, PSN sequence error: {fields}"
    );
    // The NAK asks for the lost PSN: the rule matched the 41st frame, as the traffic tool's
    // PSNs start at 0 (`lose_one_frame` counts on it).
    assert_eq!(fields["psn"], 40, "the NAK's PSN is the lost one: {fields}");
    assert_eq!(fields["icrc_ok"], true, "{fields}");
    let text = tshark_verbose(&frames[..1]).unwrap();
    assert!(
        text.contains("Nak") && text.contains("PSN Sequence Error"),
        "tshark does not read a PSN sequence error NAK:\n{text}"
    );
}
