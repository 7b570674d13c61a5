//! `lossless traffic send` with either engine on a veth pair between two namespaces: the
//! frames — built once per QP and numbered in place — leave by an AF_PACKET or an AF_XDP socket
//! (copy mode on veth) and arrive whole at the peer, counted by the peer's kernel, captured
//! there, and decoded by scapy (RoCEv2 BTH with its ICRC, the IPv4 header checksum or the IPv6
//! UDP checksum recomputed, the ECN bits, each QP's PSNs in order past a byte boundary); and
//! where AF_XDP cannot be had (here: another AF_XDP socket holds queue 0 of the interface) the
//! sender says why and sends with AF_PACKET.

use std::io::Write as _;
use std::process::Stdio;

use lossless_tests::{
    bed::{lossless_bin, privileged, subnet_link, TIMEOUT},
    capture::RawSocket,
};
use serde_json::Value;
use sysutil::netns::{check, Endpoint, Namespace};

/// Two namespaces joined by a veth pair: the sender's end and the receiver's.
fn pair(prefix: &str) -> (Namespace, Namespace, Endpoint, Endpoint) {
    let a = Namespace::create(&format!("{prefix}s")).unwrap();
    let b = Namespace::create(&format!("{prefix}r")).unwrap();
    let (tx, rx) = subnet_link(&a, &b, [10, 43, 0]).unwrap();
    // GRO would merge the frames of a QP into larger ones before the capture sees them.
    let out = b
        .command("ethtool")
        .args(["-K", &rx.ifname, "gro", "off"])
        .output()
        .unwrap();
    check("ethtool -K gro off", out).unwrap();
    (a, b, tx, rx)
}

/// The kernel's receive counter of `iface` in `ns`.
fn rx_packets(ns: &Namespace, iface: &str) -> u64 {
    let out = ns
        .command("ip")
        .args(["-j", "-s", "link", "show", "dev", iface])
        .output()
        .unwrap();
    let links: Value = serde_json::from_slice(&check("ip -s link", out).unwrap().stdout).unwrap();
    links[0]["stats64"]["rx"]["packets"].as_u64().unwrap()
}

/// `lossless traffic send --json` from `tx` to `rx` (its IPv4 address) with `extra`: the
/// summary and stderr.
fn send(ns: &Namespace, tx: &Endpoint, rx: &Endpoint, extra: &[&str]) -> (Value, String) {
    send_to(ns, tx, rx, &rx.ipv4.to_string(), extra)
}

/// `lossless traffic send --json` from `tx` to `dst_ip` at `rx`'s MAC with `extra`: the summary
/// and stderr.
fn send_to(
    ns: &Namespace,
    tx: &Endpoint,
    rx: &Endpoint,
    dst_ip: &str,
    extra: &[&str],
) -> (Value, String) {
    let mac: Vec<String> = rx.mac.iter().map(|b| format!("{b:02x}")).collect();
    let output = ns
        .command(lossless_bin())
        .args(["traffic", "send", "--iface", &tx.ifname])
        .args(["--dst-ip", dst_ip, "--dst-mac", &mac.join(":")])
        .args(["--rate", "10mbit", "--json"])
        .args(extra)
        .output()
        .unwrap();
    let output = check("lossless traffic send", output).unwrap();
    (
        serde_json::from_slice(&output.stdout).unwrap(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Whether `frame` is RoCEv2 (IPv4 or IPv6, UDP to 4791).
fn is_roce(frame: &[u8]) -> bool {
    match frame.get(12..14) {
        Some([0x08, 0x00]) => frame.len() > 42 && frame[23] == 17 && frame[36..38] == [0x12, 0xb7],
        Some([0x86, 0xdd]) => frame.len() > 62 && frame[20] == 17 && frame[56..58] == [0x12, 0xb7],
        _ => false,
    }
}

/// Each frame decoded by scapy (`scapy.contrib.roce`): [DestQP, PSN, ICRC right, IPv4 header
/// checksum (IPv6: UDP checksum) right, length, ECN].
fn scapy_decode(frames: &[Vec<u8>]) -> Vec<Value> {
    let program = r#"
import sys, json
from scapy.all import Ether, IP, IPv6, UDP, raw
from scapy.contrib.roce import BTH
out = []
for line in sys.stdin:
    p = Ether(bytes.fromhex(line.strip()))
    q = p.copy()
    q[BTH].icrc = None
    if IP in p:
        ip = p[IP].copy()
        ip.chksum = None
        checksum = IP(raw(ip)).chksum == p[IP].chksum
        ecn = p[IP].tos & 3
    else:
        r = p.copy()
        r[UDP].chksum = None
        checksum = p[UDP].chksum != 0 and Ether(raw(r))[UDP].chksum == p[UDP].chksum
        ecn = p[IPv6].tc & 3
    out.append([p[BTH].dqpn, p[BTH].psn, Ether(raw(q))[BTH].icrc == p[BTH].icrc,
                checksum, len(p), ecn])
print(json.dumps(out))
"#;
    let mut child = std::process::Command::new(testkit::venv_python())
        .args(["-c", program])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the venv's python (cargo xtask setup)");
    let mut stdin = child.stdin.take().unwrap();
    for frame in frames {
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        writeln!(stdin, "{hex}").unwrap();
    }
    drop(stdin);
    let output = check("scapy", child.wait_with_output().unwrap()).unwrap();
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Frames per QP in [`frames_arrive_intact`]: the PSNs cross a byte boundary (255 to 256).
const PER_QP: u64 = 300;

/// Sends `PER_QP` frames on each of 2 QPs of `size` bytes to `dst_ip` with `engine` and `ecn`,
/// captures them at the peer while they arrive, and checks every one with scapy.
fn frames_arrive_intact(
    (a, b, tx, rx): &(Namespace, Namespace, Endpoint, Endpoint),
    dst_ip: &str,
    engine: &str,
    expect_engine: &str,
    size: u64,
    ecn: (&str, u64),
) {
    let total = 2 * PER_QP;
    let capture = RawSocket::open_in(b, &rx.ifname);
    let reader = std::thread::spawn(move || capture.receive(total as usize, TIMEOUT, is_roce));
    let before = rx_packets(b, &rx.ifname);
    let (summary, stderr) = send_to(
        a,
        tx,
        rx,
        dst_ip,
        &[
            "--engine",
            engine,
            "--count",
            &total.to_string(),
            "--qps",
            "2",
            "--size",
            &size.to_string(),
            "--ecn",
            ecn.0,
        ],
    );
    assert_eq!(summary["engine"], expect_engine, "{summary}\n{stderr}");
    assert!(summary["engine_fallback"].is_null(), "{summary}");
    assert_eq!(summary["packets"], total, "{summary}");
    let frames = reader.join().unwrap().unwrap();
    assert_eq!(frames.len() as u64, total);
    assert!(rx_packets(b, &rx.ifname) - before >= total);
    let decoded = scapy_decode(&frames);
    let mut next_psn = [0u64; 2];
    for d in &decoded {
        let qp = d[0].as_u64().unwrap();
        assert!((256..258).contains(&qp), "{d}");
        let i = (qp - 256) as usize;
        assert_eq!(
            d[1].as_u64().unwrap(),
            next_psn[i],
            "PSNs of QP {qp} in order ({engine} to {dst_ip})"
        );
        next_psn[i] += 1;
        assert_eq!(d[2], true, "ICRC ({engine} to {dst_ip}): {d}");
        assert_eq!(d[3], true, "checksum ({engine} to {dst_ip}): {d}");
        assert_eq!(d[4], size, "{d}");
        assert_eq!(d[5], ecn.1, "ECN ({engine} to {dst_ip}): {d}");
    }
    assert_eq!(next_psn, [PER_QP; 2]);
}

#[test]
fn sender_frames_arrive_intact_with_either_engine() {
    if !privileged("sender_frames_arrive_intact_with_either_engine") {
        return;
    }
    let bed = pair("axi");
    let (a, b, tx, rx) = &bed;
    for (ns, end, addr) in [(a, tx, "fd43::1/64"), (b, rx, "fd43::2/64")] {
        ns.ip(&["-6", "addr", "add", addr, "dev", &end.ifname, "nodad"])
            .unwrap();
    }
    let rx_ipv4 = rx.ipv4.to_string();
    // An odd size puts the IPv6 frame's ICRC at an odd offset of the UDP checksum's words.
    for (engine, expect) in [("af-packet", "af-packet"), ("afxdp", "afxdp (copy mode)")] {
        frames_arrive_intact(&bed, &rx_ipv4, engine, expect, 128, ("ce", 3));
        frames_arrive_intact(&bed, "fd43::2", engine, expect, 1001, ("ect1", 1));
    }
}

#[test]
fn afxdp_sender_falls_back_to_af_packet_and_says_why() {
    if !privileged("afxdp_sender_falls_back_to_af_packet_and_says_why") {
        return;
    }
    let (a, b, tx, rx) = pair("axf");
    // Another AF_XDP socket holds queue 0 of the sender's interface: the kernel refuses a
    // second one there.
    let iface = tx.ifname.clone();
    let holder = a.run(move || afxdp::Xsk::open(&iface, false)).unwrap();
    let holder = holder.expect("the first AF_XDP socket opens");
    let capture = RawSocket::open_in(&b, &rx.ifname);
    let (summary, stderr) = send(&a, &tx, &rx, &["--engine", "afxdp", "--count", "50"]);
    assert_eq!(summary["engine"], "af-packet", "{summary}");
    let reason = summary["engine_fallback"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("AF_XDP on {}", tx.ifname)) && reason.contains("queue 0"),
        "{summary}"
    );
    assert!(
        stderr.contains(&format!("lossless: sending with AF_PACKET: {reason}")),
        "{stderr}"
    );
    assert_eq!(capture.receive(50, TIMEOUT, is_roce).unwrap().len(), 50);
    drop(holder);
}
