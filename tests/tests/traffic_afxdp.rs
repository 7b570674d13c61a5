//! `lossless traffic send --engine afxdp` on a veth pair between two namespaces: the frames
//! leave by an AF_XDP socket (copy mode on veth) and arrive whole at the peer — counted by the
//! peer's kernel, captured there, and decoded by scapy (RoCEv2 BTH with its ICRC and the IPv4
//! checksum recomputed, each QP's PSNs in order); and where AF_XDP cannot be had (here: another
//! AF_XDP socket holds queue 0 of the interface) the sender says why and sends with AF_PACKET.

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::process::Stdio;

use lossless::netns::{check, veth_pair, Endpoint, Namespace};
use lossless_tests::{
    bed::{lossless_bin, privileged, TIMEOUT},
    capture::RawSocket,
};
use serde_json::Value;

/// Two namespaces joined by a veth pair: the sender's end and the receiver's.
fn pair(prefix: &str) -> (Namespace, Namespace, Endpoint, Endpoint) {
    let a = Namespace::create(&format!("{prefix}s")).unwrap();
    let b = Namespace::create(&format!("{prefix}r")).unwrap();
    let (tx, rx) = veth_pair(
        &a,
        Ipv4Addr::new(10, 43, 0, 1),
        &b,
        Ipv4Addr::new(10, 43, 0, 2),
    )
    .unwrap();
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

/// `lossless traffic send --json` from `tx` to `rx` with `extra`: the summary and stderr.
fn send(ns: &Namespace, tx: &Endpoint, rx: &Endpoint, extra: &[&str]) -> (Value, String) {
    let mac: Vec<String> = rx.mac.iter().map(|b| format!("{b:02x}")).collect();
    let output = ns
        .command(lossless_bin())
        .args(["traffic", "send", "--iface", &tx.ifname])
        .args([
            "--dst-ip",
            &rx.ipv4.to_string(),
            "--dst-mac",
            &mac.join(":"),
        ])
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

/// Whether `frame` is RoCEv2 (IPv4, UDP to 4791).
fn is_roce(frame: &[u8]) -> bool {
    frame.len() > 42
        && frame[12..14] == [0x08, 0x00]
        && frame[23] == 17
        && frame[36..38] == [0x12, 0xb7]
}

/// Each frame decoded by scapy (`scapy.contrib.roce`): [DestQP, PSN, ICRC right, IPv4
/// checksum right, length].
fn scapy_decode(frames: &[Vec<u8>]) -> Vec<Value> {
    let program = r#"
import sys, json
from scapy.all import Ether, IP, raw
from scapy.contrib.roce import BTH
out = []
for line in sys.stdin:
    p = Ether(bytes.fromhex(line.strip()))
    q = p.copy()
    q[BTH].icrc = None
    ip = p[IP].copy()
    ip.chksum = None
    out.append([p[BTH].dqpn, p[BTH].psn, Ether(raw(q))[BTH].icrc == p[BTH].icrc,
                IP(raw(ip)).chksum == p[IP].chksum, len(p)])
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

#[test]
fn afxdp_sender_frames_arrive_intact() {
    if !privileged("afxdp_sender_frames_arrive_intact") {
        return;
    }
    let (a, b, tx, rx) = pair("axi");
    // The capture is read after the sender ends: its socket buffer holds some 250 such frames.
    let capture = RawSocket::open_in(&b, &rx.ifname);
    let before = rx_packets(&b, &rx.ifname);
    let (summary, stderr) = send(
        &a,
        &tx,
        &rx,
        &[
            "--engine", "afxdp", "--count", "150", "--qps", "3", "--size", "128",
        ],
    );
    assert_eq!(
        summary["engine"], "afxdp (copy mode)",
        "{summary}\n{stderr}"
    );
    assert!(summary["engine_fallback"].is_null(), "{summary}");
    assert_eq!(summary["packets"], 150, "{summary}");
    let frames = capture.receive(150, TIMEOUT, is_roce).unwrap();
    assert_eq!(frames.len(), 150);
    assert!(rx_packets(&b, &rx.ifname) - before >= 150);
    let decoded = scapy_decode(&frames);
    let mut next_psn = [0u64; 3];
    for d in &decoded {
        let qp = d[0].as_u64().unwrap();
        assert!((256..259).contains(&qp), "{d}");
        let i = (qp - 256) as usize;
        assert_eq!(
            d[1].as_u64().unwrap(),
            next_psn[i],
            "PSNs of QP {qp} in order"
        );
        next_psn[i] += 1;
        assert_eq!(d[2], true, "ICRC: {d}");
        assert_eq!(d[3], true, "IPv4 checksum: {d}");
        assert_eq!(d[4], 128, "{d}");
    }
    assert_eq!(next_psn, [50, 50, 50]);
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
