//! ERSPAN mirroring by the host's eBPF programs, read by `lossless telemetry collect` and decoded
//! by tshark: three namespaces (a peer, the mirroring host, a collector), the host's interface
//! toward the peer attached with the `mirror` hook and a session set with `lossless host mirror
//! set` out of its other interface toward the collector. scapy's CNPs, NAKs, an ACK and data
//! frames cross the mirrored interface both ways; only the selected ones arrive at the
//! collector, as ERSPAN II or III that tshark decodes down to the inner BTH; the collector's
//! per-QP table and the host's counters count what was sent, and every frame still arrives as
//! it was sent (the program puts the original back after the clone).

use std::time::{Duration, Instant};

use lossless_tests::{
    bed::{from_test_mac, privileged, subnet_link, Attached, Link, TEST_MAC, TIMEOUT},
    capture::{Collector, RawSocket},
    craft::{scapy_frame, tshark_fields, ERSPAN_FIELDS},
};
use serde_json::Value;
use sysutil::netns::{Endpoint, Namespace};

/// The ERSPAN session of the test.
const SESSION: &str = "5";
/// Type III's hardware id the test sets.
const HW_ID: &str = "7";
/// The UDP source port of every RoCEv2 frame the test sends.
const SPORT: u16 = 49152;

/// The three namespaces: `peer` ↔ `host` (mirrored, `host_end`) and `host` (`via`) ↔ `collector`.
struct Bed {
    peer_ns: Namespace,
    host_ns: Namespace,
    collector_ns: Namespace,
    peer: Endpoint,
    host_end: Endpoint,
    via: Endpoint,
    collector: Endpoint,
}

impl Bed {
    fn new() -> Self {
        let peer_ns = Namespace::create("lmp").unwrap();
        let host_ns = Namespace::create("lmh").unwrap();
        let collector_ns = Namespace::create("lmc").unwrap();
        for ns in [&peer_ns, &host_ns, &collector_ns] {
            ns.disable_ipv6().unwrap();
        }
        let (peer, host_end) = subnet_link(&peer_ns, &host_ns, [10, 79, 0]).unwrap();
        let (via, collector) = subnet_link(&host_ns, &collector_ns, [10, 79, 1]).unwrap();
        Bed {
            peer_ns,
            host_ns,
            collector_ns,
            peer,
            host_end,
            via,
            collector,
        }
    }
}

/// Which way a frame crosses the mirrored interface.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    /// From the peer: the host receives it (TC ingress).
    In,
    /// From the host: it leaves (TC egress).
    Out,
}

/// A test frame: its way, DSCP, BTH (scapy) and what follows it, and whether it is a CNP or a
/// NAK (mirrored by `--cnp --nak`).
struct TestFrame {
    way: Way,
    dscp: u8,
    bth: &'static str,
    rest: &'static str,
    cnp_or_nak: bool,
}

/// A CNP the peer sends (twice in [`FRAMES`]).
const PEER_CNP: TestFrame = TestFrame {
    way: Way::In,
    dscp: 48,
    bth: "opcode=0x81, dqpn=0x11, becn=1",
    rest: "/CNPPadding()",
    cnp_or_nak: true,
};

const FRAMES: [TestFrame; 8] = [
    // The peer sends an ACK and a data frame (not CNPs or NAKs), two CNPs and a NAK (PSN
    // sequence error)...
    TestFrame {
        way: Way::In,
        dscp: 26,
        bth: "opcode=0x11, dqpn=0x11, psn=1",
        rest: "/AETH(syndrome=0x1f, msn=1)",
        cnp_or_nak: false,
    },
    TestFrame {
        way: Way::In,
        dscp: 0,
        bth: "opcode=0x04, dqpn=0x11, psn=2",
        rest: "/Raw(b'x' * 64)",
        cnp_or_nak: false,
    },
    PEER_CNP,
    PEER_CNP,
    TestFrame {
        way: Way::In,
        dscp: 26,
        bth: "opcode=0x11, dqpn=0x11, psn=9",
        rest: "/AETH(syndrome=0x60, msn=1)",
        cnp_or_nak: true,
    },
    // ...and the host sends a CNP, an RNR NAK and a data frame.
    TestFrame {
        way: Way::Out,
        dscp: 48,
        bth: "opcode=0x81, dqpn=0x22, becn=1",
        rest: "/CNPPadding()",
        cnp_or_nak: true,
    },
    TestFrame {
        way: Way::Out,
        dscp: 26,
        bth: "opcode=0x11, dqpn=0x22, psn=4",
        rest: "/AETH(syndrome=0x2e, msn=1)",
        cnp_or_nak: true,
    },
    TestFrame {
        way: Way::Out,
        dscp: 26,
        bth: "opcode=0x04, dqpn=0x22, psn=5",
        rest: "/Raw(b'y' * 32)",
        cnp_or_nak: false,
    },
];

/// The priority `--priority` mirrors in the type III run: DSCP 26's by default.
const MIRRORED_PRIORITY_DSCP: u8 = 26;

impl TestFrame {
    /// Its bytes, from scapy, addressed across the link its way.
    fn build(&self, bed: &Bed) -> Vec<u8> {
        let (src_ip, dst, dst_ip) = match self.way {
            Way::In => (bed.peer.ipv4, &bed.host_end, bed.host_end.ipv4),
            Way::Out => (bed.host_end.ipv4, &bed.peer, bed.peer.ipv4),
        };
        let mac = |m: [u8; 6]| m.map(|b| format!("{b:02x}")).join(":");
        scapy_frame(&format!(
            "Ether(src='{}', dst='{}')/IP(src='{src_ip}', dst='{dst_ip}', tos={})/\
             UDP(sport={SPORT}, dport=4791)/BTH({}){}",
            mac(TEST_MAC),
            mac(dst.mac),
            u32::from(self.dscp) << 2,
            self.bth,
            self.rest
        ))
        .unwrap()
    }

    /// Whether a session of `--cnp --nak`, with `--priority 3` when `priority`, mirrors it.
    fn mirrored(&self, priority: bool) -> bool {
        self.cnp_or_nak || (priority && self.dscp == MIRRORED_PRIORITY_DSCP)
    }
}

/// `lossless ARGS` in `ns`, which must succeed; its stdout.
fn lossless(ns: &Namespace, args: &[&str]) -> String {
    let out = Link::lossless(ns, args).unwrap_or_else(|e| panic!("{e:#}"));
    String::from_utf8(out.stdout).unwrap()
}

/// UDP datagrams the kernel of `ns` received for a port nobody listens on (`/proc/net/snmp`'s
/// `Udp: NoPorts`): the RoCEv2 frames that reached its stack whole (good IPv4 and UDP
/// checksums), since no socket has port 4791.
fn udp_no_ports(ns: &Namespace) -> u64 {
    let out = ns.command("cat").arg("/proc/net/snmp").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "NoPorts")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// Waits until `done` holds of the host's `stats --json`, failing after [`TIMEOUT`].
fn wait_for_stats(bed: &Bed, done: impl Fn(&Value) -> bool) -> Value {
    Link::wait_for_stats(&bed.host_ns, &bed.host_end.ifname, done)
}

fn mirrored_by_the_host(test: &str, kind: &str, priority: bool) {
    if !privileged(test) {
        return;
    }
    let bed = Bed::new();
    let _attached =
        Attached::new(&bed.host_ns, &bed.host_end.ifname, &["--hooks", "mirror"]).unwrap();
    let collector_mac = bed.collector.mac.map(|b| format!("{b:02x}")).join(":");
    let collector_ip = bed.collector.ipv4.to_string();
    let mut set = vec![
        "host",
        "mirror",
        &bed.host_end.ifname,
        "set",
        "--via",
        &bed.via.ifname,
        "--collector-ip",
        &collector_ip,
        "--collector-mac",
        &collector_mac,
        "--session",
        SESSION,
        "--type",
        kind,
        "--hw-id",
        HW_ID,
        "--cnp",
        "--nak",
    ];
    if priority {
        set.extend(["--priority", "3"]);
    }
    let said = lossless(&bed.host_ns, &set);
    assert!(
        said.contains(&format!("session {SESSION} to {collector_ip}")),
        "{said}"
    );

    // Every frame is built and every socket opened before the collector starts (its
    // --duration runs from its start, and scapy is slow to start).
    let frames: Vec<Vec<u8>> = FRAMES.iter().map(|f| f.build(&bed)).collect();
    let peer_socket = RawSocket::open_in(&bed.peer_ns, &bed.peer.ifname);
    let host_socket = RawSocket::open_in(&bed.host_ns, &bed.host_end.ifname);
    let expected: Vec<&TestFrame> = FRAMES.iter().filter(|f| f.mirrored(priority)).collect();
    let count = |way: Way, cnp: bool| {
        FRAMES
            .iter()
            .filter(|f| f.way == way && f.mirrored(priority) && f.cnp_or_nak)
            .filter(|f| f.bth.contains("0x81") == cnp)
            .count() as u64
    };
    let count_priority = |way: Way| {
        FRAMES
            .iter()
            .filter(|f| f.way == way && f.mirrored(priority) && !f.cnp_or_nak)
            .count() as u64
    };
    // The built frames that cross the interface `way`, in the table's order.
    let crossing = |way: Way| -> Vec<&Vec<u8>> {
        FRAMES
            .iter()
            .zip(&frames)
            .filter(|(f, _)| f.way == way)
            .map(|(_, bytes)| bytes)
            .collect()
    };
    let no_ports_before = udp_no_ports(&bed.host_ns);

    let dir = std::env::temp_dir().join(format!(
        "lossless-host-mirror-{}-{kind}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("mirror.pcap");
    let collector = Collector::start(
        &bed.collector_ns,
        &bed.collector.ifname,
        expected.len(),
        &pcap,
        &[],
    );

    // The peer's frames first, all received (mirrored at ingress) before the host sends, so
    // the sequence numbers follow the table's order.
    let inbound = crossing(Way::In);
    // One at a time, each through the host's stack before the next, so that no two are mirrored
    // at once on two CPUs (the session's sequence number is not taken atomically).
    for (sent, frame) in inbound.iter().enumerate() {
        peer_socket.send(frame).unwrap();
        let deadline = Instant::now() + TIMEOUT;
        while udp_no_ports(&bed.host_ns) < no_ports_before + sent as u64 + 1 {
            assert!(
                Instant::now() < deadline,
                "the host's stack got {} of the {} frames whole",
                udp_no_ports(&bed.host_ns) - no_ports_before,
                inbound.len()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let rx_mirrored = count(Way::In, true) + count(Way::In, false) + count_priority(Way::In);
    wait_for_stats(&bed, |s| {
        s["mirror"]["rx_cnps"].as_u64().unwrap_or(0)
            + s["mirror"]["rx_naks"].as_u64().unwrap_or(0)
            + s["mirror"]["rx_priority"].as_u64().unwrap_or(0)
            >= rx_mirrored
    });
    // The received frames reached the host's stack whole (above): the program put them back.
    // The host's frames arrive at the peer byte for byte as sent.
    let outbound = crossing(Way::Out);
    // One at a time too, each at the peer before the next leaves.
    let mut arrived = Vec::new();
    for frame in &outbound {
        host_socket.send(frame).unwrap();
        arrived.extend(peer_socket.receive(1, TIMEOUT, from_test_mac).unwrap());
    }
    assert_eq!(
        arrived,
        outbound.iter().map(|f| f.to_vec()).collect::<Vec<_>>(),
        "the host's frames must leave unchanged"
    );

    let collected = collector.summary();
    let cnps = count(Way::In, true) + count(Way::Out, true);
    let naks = count(Way::In, false) + count(Way::Out, false);
    let others = count_priority(Way::In) + count_priority(Way::Out);
    assert_eq!(collected["erspan_frames"], expected.len(), "{collected}");
    assert_eq!(collected["cnps"], cnps, "{collected}");
    assert_eq!(collected["naks"], naks, "{collected}");
    assert_eq!(collected["other_mirrored"], others, "{collected}");
    assert_eq!(
        collected["sessions"][SESSION],
        expected.len(),
        "{collected}"
    );
    // Per destination and QP, summed over time buckets.
    let per = |destination: String, qp: u64| {
        collected["table"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["destination"] == destination.as_str() && r["qp"] == qp)
            .fold((0, 0), |(c, n), r| {
                (
                    c + r["cnps"].as_u64().unwrap(),
                    n + r["naks"].as_u64().unwrap(),
                )
            })
    };
    assert_eq!(
        per(bed.host_end.ipv4.to_string(), 0x11),
        (2, 1),
        "{collected}"
    );
    assert_eq!(per(bed.peer.ipv4.to_string(), 0x22), (1, 1), "{collected}");

    // tshark decodes the capture: ERSPAN of the session, GRE sequence numbers from 0, the
    // type's own fields, and the inner BTH and AETH of what crossed the interface.
    let host_ifindex = bed
        .host_ns
        .run(|| sysutil::interface::ifindex(&bed.host_end.ifname))
        .unwrap()
        .unwrap();
    let (version, own_fields) = match kind {
        "ii" => ("1", &["erspan.index"][..]),
        _ => ("2", &["erspan.direction", "erspan.hw", "erspan.gra"][..]),
    };
    let mut fields = ERSPAN_FIELDS.to_vec();
    fields.extend_from_slice(own_fields);
    let decoded = tshark_fields(&pcap, &fields);
    assert_eq!(decoded.len(), expected.len(), "{decoded:?}");
    for (n, (row, frame)) in decoded.iter().zip(&expected).enumerate() {
        let inner_dst = match frame.way {
            Way::In => bed.host_end.ipv4,
            Way::Out => bed.peer.ipv4,
        };
        assert_eq!(
            row[0],
            format!("{},{inner_dst}", bed.collector.ipv4),
            "{row:?}"
        );
        assert_eq!(row[1], version, "{row:?}");
        assert_eq!(row[2], SESSION, "{row:?}");
        assert_eq!(row[3], n.to_string(), "{row:?}");
        let opcode = frame
            .bth
            .split(',')
            .next()
            .unwrap()
            .trim_start_matches("opcode=");
        let opcode = u8::from_str_radix(opcode.trim_start_matches("0x"), 16).unwrap();
        assert_eq!(row[4], opcode.to_string(), "{row:?}");
        let qp = &frame.bth[frame.bth.find("dqpn=0x").unwrap() + 7..][..2];
        assert_eq!(row[5], format!("0x0000{qp}"), "{row:?}");
        let syndrome = frame
            .rest
            .strip_prefix("/AETH(syndrome=0x")
            .map(|s| u8::from_str_radix(&s[..2], 16).unwrap().to_string())
            .unwrap_or_default();
        assert_eq!(row[6], syndrome, "{row:?}");
        match kind {
            "ii" => assert_eq!(row[7], host_ifindex.to_string(), "{row:?}"),
            _ => {
                let direction = if frame.way == Way::Out { "1" } else { "0" };
                assert_eq!(
                    (row[7].as_str(), row[8].as_str(), row[9].as_str()),
                    (direction, HW_ID, "1"),
                    "{row:?}"
                );
            }
        }
    }

    // The host counted what it mirrored, by way and kind, and nothing failed.
    let stats = Link::stats(&bed.host_ns, &bed.host_end.ifname).unwrap();
    let mirror = &stats["mirror"];
    for (key, value) in [
        ("rx_cnps", count(Way::In, true)),
        ("rx_naks", count(Way::In, false)),
        ("rx_priority", count_priority(Way::In)),
        ("tx_cnps", count(Way::Out, true)),
        ("tx_naks", count(Way::Out, false)),
        ("tx_priority", count_priority(Way::Out)),
        ("mirrored", expected.len() as u64),
        ("skipped", 0),
        ("failed", 0),
    ] {
        assert_eq!(mirror[key], value, "{key}: {mirror}");
    }
    assert_eq!(
        mirror["session"]["next_sequence"],
        expected.len(),
        "{mirror}"
    );

    // Deleted, nothing more is mirrored.
    lossless(
        &bed.host_ns,
        &["host", "mirror", &bed.host_end.ifname, "delete"],
    );
    let before = udp_no_ports(&bed.host_ns);
    peer_socket.send(inbound[2]).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while udp_no_ports(&bed.host_ns) == before {
        assert!(Instant::now() < deadline, "the CNP never reached the host");
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = Link::stats(&bed.host_ns, &bed.host_end.ifname).unwrap();
    assert_eq!(after["mirror"]["mirrored"], expected.len(), "{after}");
    assert!(after["mirror"].get("session").is_none(), "{after}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cnps_and_naks_sent_and_received_are_mirrored_as_erspan_ii() {
    mirrored_by_the_host(
        "cnps_and_naks_sent_and_received_are_mirrored_as_erspan_ii",
        "ii",
        false,
    );
}

#[test]
fn cnps_naks_and_a_priority_are_mirrored_as_erspan_iii() {
    mirrored_by_the_host(
        "cnps_naks_and_a_priority_are_mirrored_as_erspan_iii",
        "iii",
        true,
    );
}
