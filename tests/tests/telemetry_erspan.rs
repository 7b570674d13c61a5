//! ERSPAN mirroring of lossless.p4 on softswitch, read by `lossless telemetry collect` and
//! decoded by tshark: three hosts on veths in namespaces (a sender, a receiver, a collector),
//! a mirror session set with `lossless p4 mirror set` toward the collector's port, and scapy's
//! CNPs, NAKs, an ACK and data frames sent through the switch. Only the CNPs and NAKs arrive at
//! the collector, as ERSPAN II or III that tshark decodes down to the inner BTH; the collector's
//! per-QP table counts what was sent, and the receiver still gets every frame.

use lossless_tests::{
    bed::{lossless_bin, privileged, TEST_MAC, TIMEOUT},
    capture::Collector,
    craft::{scapy_frame, tshark_fields, udp_src_port, ERSPAN_FIELDS},
    switch::{dataplane_p4, SwitchBed, Topology},
};

/// The collector's MAC, set on its interface: the session's outer destination.
const COLLECTOR_MAC: &str = "02:00:00:00:00:c0";
/// The ERSPAN session of the test.
const SESSION: &str = "5";
/// The UDP source port of every RoCEv2 frame the test sends.
const SPORT: u16 = 49152;

/// A RoCEv2 frame from host 1 to host 2 (10.0.2.9) with DSCP `dscp`, BTH `bth` and what
/// follows it (`rest`, scapy).
fn roce(dscp: u8, bth: &str, rest: &str) -> Vec<u8> {
    let src = TEST_MAC.map(|b| format!("{b:02x}")).join(":");
    scapy_frame(&format!(
        "Ether(src='{src}', dst='02:00:00:00:00:f1')/IP(src='10.0.1.9', dst='10.0.2.9', \
         tos={tos})/UDP(sport={SPORT}, dport=4791)/BTH({bth}){rest}",
        tos = u32::from(dscp) << 2
    ))
    .unwrap()
}

/// `lossless p4 ARGS` in the switch's namespace, which must succeed; its stdout.
fn p4(bed: &SwitchBed, args: &[&str]) -> String {
    let out = bed
        .topology()
        .switch_ns
        .command(lossless_bin())
        .arg("p4")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "lossless p4 {} failed: {}\nthe switch: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr),
        bed.lines.join("\n")
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Routes 10.0.2.0/24 to port 2, DSCP 26 to priority 3 and 48 to 6, and mirrors CNPs and
/// NAKs to session [`SESSION`] of type `kind` on port 3.
fn configure(bed: &SwitchBed, kind: &str) {
    for words in [
        "ipv4_lpm set_nexthop 10.0.2.0/24 => 2",
        "nexthop forward 2 => 2 02:00:00:00:00:f2 02:00:00:00:00:02",
        "dscp_priority set_priority 26 => 3",
        "dscp_priority set_priority 48 => 6",
    ] {
        let mut args = vec!["entries", "add"];
        args.extend(words.split_whitespace());
        p4(bed, &args);
    }
    let said = p4(
        bed,
        &[
            "mirror",
            "set",
            "--session",
            SESSION,
            "--port",
            "3",
            "--type",
            kind,
            "--src-mac",
            "02:00:00:00:00:f3",
            "--dst-mac",
            COLLECTOR_MAC,
            "--src-ip",
            "10.0.9.1",
            "--dst-ip",
            "10.0.9.2",
            "--hw-id",
            "7",
            "--cnp",
            "--nak",
        ],
    );
    assert!(said.contains("clone session 1029 to port 3"), "{said}");
}

fn mirrored_cnps_and_naks(test: &str, kind: &str, version: &str) {
    if !privileged(test) {
        return;
    }
    let topology = Topology::new(3).unwrap();
    let collector = &topology.hosts[2];
    collector
        .ns
        .ip(&["link", "set", &collector.iface, "address", COLLECTOR_MAC])
        .unwrap();
    let mut bed = SwitchBed::start(topology, Some(&dataplane_p4("lossless.p4"))).unwrap();
    configure(&bed, kind);

    // Every frame is built and every socket opened before the collector starts: scapy takes
    // seconds to start on a loaded machine, and the collector's --duration runs from its start.
    // What must not be mirrored first (an ACK, data), then 5 CNPs and 2 NAKs on two QPs.
    let frames = [
        roce(
            26,
            "opcode=0x11, dqpn=0x11, psn=1",
            "/AETH(syndrome=0x1f, msn=1)",
        ),
        roce(26, "opcode=0x04, dqpn=0x11, psn=2", "/Raw(b'x' * 64)"),
        roce(26, "opcode=0x04, dqpn=0x11, psn=3", "/Raw(b'x' * 64)"),
        roce(48, "opcode=0x81, dqpn=0x11, becn=1", "/CNPPadding()"),
        roce(48, "opcode=0x81, dqpn=0x11, becn=1", "/CNPPadding()"),
        roce(48, "opcode=0x81, dqpn=0x11, becn=1", "/CNPPadding()"),
        roce(48, "opcode=0x81, dqpn=0x22, becn=1", "/CNPPadding()"),
        roce(48, "opcode=0x81, dqpn=0x22, becn=1", "/CNPPadding()"),
        // A NAK (PSN sequence error) and an RNR NAK.
        roce(
            26,
            "opcode=0x11, dqpn=0x11, psn=9",
            "/AETH(syndrome=0x60, msn=1)",
        ),
        roce(
            26,
            "opcode=0x11, dqpn=0x22, psn=4",
            "/AETH(syndrome=0x2e, msn=1)",
        ),
    ];
    let receiver = bed.hosts()[1].socket();
    let sender = bed.hosts()[0].socket();

    // The collector, ready once its socket is open (it says so on stderr).
    let dir = std::env::temp_dir().join(format!("lossless-erspan-{}-{kind}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("mirror.pcap");
    let table = dir.join("table.csv");
    let host = &bed.hosts()[2];
    let collector = Collector::start(
        &host.ns,
        &host.iface,
        7,
        &pcap,
        &["--table".as_ref(), table.as_ref()],
    );

    for frame in &frames {
        sender.send(frame).unwrap();
    }
    // The receiver gets every frame: mirroring takes a copy, not the frame.
    let got = receiver
        .receive(frames.len(), TIMEOUT, |f| udp_src_port(f) == Some(SPORT))
        .unwrap();
    assert_eq!(got.len(), frames.len());

    let collected = collector.summary();
    assert_eq!(collected["erspan_frames"], 7, "{collected}");
    assert_eq!(collected["cnps"], 5, "{collected}");
    assert_eq!(collected["naks"], 2, "{collected}");
    assert_eq!(collected["other_mirrored"], 0, "{collected}");
    assert_eq!(collected["sessions"][SESSION], 7, "{collected}");
    let rows: Vec<(u64, u64, u64)> = collected["table"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["destination"], "10.0.2.9");
            (
                r["qp"].as_u64().unwrap(),
                r["cnps"].as_u64().unwrap(),
                r["naks"].as_u64().unwrap(),
            )
        })
        .collect();
    // All in one bucket of a second unless the frames straddled a bucket's end: sum per QP.
    let per_qp = |qp: u64| {
        rows.iter()
            .filter(|r| r.0 == qp)
            .fold((0, 0), |(c, n), r| (c + r.1, n + r.2))
    };
    assert_eq!(per_qp(0x11), (3, 1), "{rows:?}");
    assert_eq!(per_qp(0x22), (2, 1), "{rows:?}");
    let csv = std::fs::read_to_string(&table).unwrap();
    assert!(
        csv.starts_with("bucket_start_s,destination,qp,cnps,naks\n"),
        "{csv}"
    );

    // tshark decodes the capture: ERSPAN of the session, GRE sequence numbers 0..6, and the
    // inner RoCEv2 BTH (opcodes, QPs) and AETH of what was sent.
    let decoded = tshark_fields(&pcap, ERSPAN_FIELDS);
    let expected: Vec<(&str, &str, &str)> = vec![
        ("129", "0x000011", ""),
        ("129", "0x000011", ""),
        ("129", "0x000011", ""),
        ("129", "0x000022", ""),
        ("129", "0x000022", ""),
        // tshark prints the AETH syndrome in decimal: 0x60 (PSN sequence error), 0x2e (RNR).
        ("17", "0x000011", "96"),
        ("17", "0x000022", "46"),
    ];
    assert_eq!(decoded.len(), expected.len(), "{decoded:?}");
    for (n, (fields, (opcode, qp, syndrome))) in decoded.iter().zip(&expected).enumerate() {
        assert_eq!(
            fields[0], "10.0.9.2,10.0.2.9",
            "outer, then inner: {fields:?}"
        );
        assert_eq!(fields[1], version, "{fields:?}");
        assert_eq!(fields[2], SESSION, "{fields:?}");
        assert_eq!(fields[3], n.to_string(), "{fields:?}");
        assert_eq!(fields[4], *opcode, "{fields:?}");
        assert_eq!(fields[5], *qp, "{fields:?}");
        assert_eq!(fields[6], *syndrome, "{fields:?}");
    }

    // The switch counted what it mirrored.
    let sent = p4(
        &bed,
        &["counters", "read", "mirror_sent", "--index", SESSION],
    );
    assert!(sent.contains(" 7"), "mirror_sent: {sent}");
    bed.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cnps_and_naks_are_mirrored_as_erspan_ii_that_tshark_decodes() {
    mirrored_cnps_and_naks(
        "cnps_and_naks_are_mirrored_as_erspan_ii_that_tshark_decodes",
        "ii",
        "1",
    );
}

#[test]
fn cnps_and_naks_are_mirrored_as_erspan_iii_that_tshark_decodes() {
    mirrored_cnps_and_naks(
        "cnps_and_naks_are_mirrored_as_erspan_iii_that_tshark_decodes",
        "iii",
        "2",
    );
}
