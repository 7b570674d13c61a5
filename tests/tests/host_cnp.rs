//! The kernel's notification point: CE-marked RoCEv2 packets arriving at an interface with
//! the `cnp` hook are answered with CNPs from the data path. The CNPs are captured where the
//! sender would receive them and decoded by scapy (ICRC recomputed) and tshark.

use lossless_tests::{
    bed::{stat, Link, TIMEOUT},
    craft::{scapy_decode, tshark_verbose, Ecn},
};

/// Whether `frame` is an IPv4 RoCEv2 CNP (BTH opcode 0x81 at the plain IPv4 offset).
fn is_cnp(frame: &[u8]) -> bool {
    frame.len() >= 43
        && frame[12..14] == [0x08, 0x00]
        && frame[36..38] == 4791u16.to_be_bytes()
        && frame[42] == 0x81
}

/// CE-marked RoCEv2 frames for `qps`, `per_qp` each (QP-major order).
fn ce_frames(link: &Link, qps: &[u32], per_qp: u32) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for qp in qps {
        for psn in 0..per_qp {
            let mut spec = link.roce();
            spec.ecn = Ecn::Ce;
            spec.qp = *qp;
            spec.psn = psn;
            spec.src_port = 50_000 + *qp as u16;
            frames.push(spec.build());
        }
    }
    frames
}

/// Every CE packet earns a CNP when the interval allows; the CNP is addressed back to the
/// sender with the mapped QP, passes scapy and tshark, and the data packets arrive unchanged.
#[test]
fn ce_packets_are_answered_with_valid_cnps() {
    let Some(link) = Link::for_test("ce_packets_are_answered_with_valid_cnps") else {
        return;
    };
    let _attached = link.attach_rx(&["--hooks", "cnp"]);
    Link::lossless(
        &link.rx_ns,
        &["host", "qp-map", &link.rx.ifname, "add", "0x11", "0x99"],
    )
    .unwrap();
    let cnps = link.tx_socket();

    let data = ce_frames(&link, &[0x11, 0x22], 1);
    let mut not_ce = link.roce();
    not_ce.qp = 0x33;
    let mut sent = data.clone();
    sent.push(not_ce.build());
    let arrived = link.send_and_capture(&sent);
    assert_eq!(arrived, sent, "data packets must arrive unchanged");

    let mut got = cnps.receive(2, TIMEOUT, is_cnp).unwrap();
    got.sort_by_key(|f| f[49]);
    for (cnp, (data_frame, dest_qp)) in got.iter().zip([(&data[1], 0x22), (&data[0], 0x99)]) {
        assert_eq!(cnp.len(), 74);
        assert_eq!(
            &cnp[0..6],
            &data_frame[6..12],
            "CNP goes back to the sender's MAC"
        );
        let fields = scapy_decode(
            cnp,
            "{'opcode': p[BTH].opcode, 'dqpn': p[BTH].dqpn, 'becn': p[BTH].becn, 'icrc_ok': icrc_ok(p), \
             'ip_ok': ipv4_checksum_ok(p), 'src': p[IP].src, 'dst': p[IP].dst, 'dport': p[UDP].dport, \
             'tos': p[IP].tos, 'reserved': len(p[BTH].payload)}",
        )
        .unwrap();
        assert_eq!(fields["opcode"], 0x81, "{fields}");
        assert_eq!(fields["dqpn"], dest_qp, "{fields}");
        assert_eq!(fields["becn"], 1, "{fields}");
        assert_eq!(
            fields["icrc_ok"], true,
            "ICRC recomputed by scapy differs: {fields}"
        );
        assert_eq!(fields["ip_ok"], true, "{fields}");
        assert_eq!(fields["src"], link.rx.ipv4.to_string());
        assert_eq!(fields["dst"], link.tx.ipv4.to_string());
        assert_eq!(fields["dport"], 4791);
        assert_eq!(
            fields["tos"],
            48 << 2,
            "DSCP 48, Not-ECT by default: {fields}"
        );
    }
    let text = tshark_verbose(&got).unwrap();
    assert!(
        !text.to_lowercase().contains("malformed"),
        "tshark:\n{text}"
    );
    assert!(
        text.contains("CNP") || text.contains("Congestion"),
        "tshark does not see a CNP:\n{text}"
    );

    assert_eq!(stat(&link.rx_stats(), "cnp_sent"), 2);
    assert_eq!(stat(&link.rx_stats(), "cnp_suppressed"), 0);
    // The CNPs arriving back at an attached sender are counted there.
    let _sender = link.attach_tx(&["--hooks", "cnp"]);
    let echo = link.tx_socket();
    let rx = link.rx_socket();
    for cnp in &got {
        rx.send(cnp).unwrap();
    }
    echo.receive(2, TIMEOUT, is_cnp).unwrap();
    let stats = link.tx_stats();
    assert_eq!(stats["cnp_received"], 2, "{stats}");
}

/// Under a flood of CE packets a QP gets at most one CNP per interval; other QPs still get
/// theirs; with a zero interval none is missing.
#[test]
fn cnps_are_rate_limited_per_qp() {
    let Some(link) = Link::for_test("cnps_are_rate_limited_per_qp") else {
        return;
    };
    let _attached = link.attach_rx(&["--hooks", "cnp"]);
    // A 10 s interval: the whole flood falls inside one interval per QP.
    link.set_rx(&["cnp.interval_us=10000000"]);
    let cnps = link.tx_socket();
    let flood = ce_frames(&link, &[1, 2, 3], 100);
    link.send_and_capture(&flood);
    let got = cnps.receive(3, TIMEOUT, is_cnp).unwrap();
    let mut qps: Vec<u8> = got.iter().map(|f| f[49]).collect();
    qps.sort();
    assert_eq!(qps, [1, 2, 3], "one CNP per QP");
    assert_eq!(stat(&link.rx_stats(), "cnp_sent"), 3);
    assert_eq!(stat(&link.rx_stats(), "cnp_suppressed"), 297);
    let stats = link.rx_stats();
    assert_eq!(stats["cnp_qps"][1]["cnp_suppressed"], 99, "{stats}");

    // No interval: every CE packet is answered, none lost.
    link.set_rx(&["cnp.interval_us=0"]);
    let every = ce_frames(&link, &[7], 64);
    link.send_and_capture(&every);
    let answered = cnps
        .receive(64, TIMEOUT, |f| is_cnp(f) && f[49] == 7)
        .unwrap();
    assert_eq!(answered.len(), 64);

    // Turned off live: no more CNPs.
    link.set_rx(&["cnp.enabled=false"]);
    link.send_and_capture(&ce_frames(&link, &[8], 10));
    assert_eq!(stat(&link.rx_stats(), "cnp_sent"), 3 + 64);
}
