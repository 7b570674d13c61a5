//! ECN marking on real interfaces in network namespaces, read back with an independent
//! decoder (etherparse) and compared with `lossless host stats --json`.

use lossless_tests::{
    bed::{counter, privileged, Link},
    craft::{ecn_of, ipv4_checksum_ok, udp_src_port, with_vlan, Ecn},
};

/// A RED curve over a phantom queue drained so slowly that the backlog seen by packet i is
/// (i+1) × frame length: below Kmin nothing is marked, at Kmax everything is, and between
/// the marked count follows Σ p(q) within 4.5 standard deviations. Not-ECT and non-RoCE
/// frames arrive byte-identical; marked frames differ only in ECN and a valid checksum.
fn red_curve(mode: &str) {
    let link = Link::new().unwrap();
    let _attached = link.attach_rx(&["--mode", mode]);
    let (kmin, kmax, pmax) = (20_000u64, 60_000u64, 0.5);
    link.set_rx(&[
        "ecn.prio3.rate_bps=8000",
        &format!("ecn.prio3.kmin_bytes={kmin}"),
        &format!("ecn.prio3.kmax_bytes={kmax}"),
        &format!("ecn.prio3.pmax={pmax}"),
    ]);

    let n = 500;
    let mut sent = Vec::new();
    for i in 0..n {
        let mut spec = link.roce();
        spec.src_port = 10_000 + i as u16;
        spec.psn = i;
        if i % 5 == 4 {
            spec.ecn = Ecn::NotEct;
        }
        if i % 7 == 6 {
            spec.dst_port = 9999; // ECT, but not RoCEv2
        }
        sent.push(spec.build());
    }
    let len = sent[0].len() as u64;
    let received = link.send_and_capture(&sent);

    let (mut marked, mut expected, mut variance) = (0u64, 0.0f64, 0.0f64);
    for (i, (tx, rx)) in sent.iter().zip(&received).enumerate() {
        assert_eq!(
            udp_src_port(rx),
            udp_src_port(tx),
            "capture out of order at {i}"
        );
        let backlog = (i as u64 + 1) * len;
        let roce_ect = i % 5 != 4 && i % 7 != 6;
        if !roce_ect {
            assert_eq!(rx, tx, "frame {i} (Not-ECT or non-RoCE) changed");
            continue;
        }
        assert!(ipv4_checksum_ok(rx), "bad IPv4 checksum on frame {i}");
        let ce = ecn_of(rx) == Some(Ecn::Ce.bits());
        if ce {
            let mut unmarked = rx.clone();
            unmarked[15] = tx[15];
            unmarked[24..26].copy_from_slice(&tx[24..26]);
            assert_eq!(
                unmarked, *tx,
                "frame {i}: more than ECN and checksum changed"
            );
        } else {
            assert_eq!(rx, tx, "frame {i} changed without being marked");
        }
        // One frame of slack at each edge for the drain during the run.
        if backlog + len < kmin {
            assert!(!ce, "frame {i} marked at backlog {backlog} < Kmin");
        } else if backlog >= kmax + len {
            assert!(ce, "frame {i} not marked at backlog {backlog} >= Kmax");
        } else if backlog >= kmin + len && backlog + len < kmax {
            let p = pmax * (backlog - kmin) as f64 / (kmax - kmin) as f64;
            expected += p;
            variance += p * (1.0 - p);
            marked += ce as u64;
        }
    }
    let tolerance = 4.5 * variance.sqrt() + 2.0;
    assert!(
        (marked as f64 - expected).abs() <= tolerance,
        "marked {marked} between Kmin and Kmax, RED expects {expected:.1} ± {tolerance:.1}"
    );

    let stats = link.rx_stats();
    let ce_on_wire = received
        .iter()
        .filter(|f| ecn_of(f) == Some(Ecn::Ce.bits()))
        .count() as u64;
    let roce_sent = (0..n).filter(|i| i % 7 != 6).count() as u64;
    let ect_sent = (0..n).filter(|i| i % 5 != 4).count() as u64;
    assert_eq!(counter(&stats, 3, "rx_packets"), n as u64);
    assert_eq!(counter(&stats, 3, "rx_bytes"), n as u64 * len);
    assert_eq!(counter(&stats, 3, "ecn_marked"), ce_on_wire);
    assert_eq!(stats["ecn_marked"].as_u64(), Some(ce_on_wire));
    assert_eq!(counter(&stats, 3, "roce_packets"), roce_sent);
    assert_eq!(counter(&stats, 3, "ect_packets"), ect_sent);
    assert!(
        counter(&stats, 3, "would_mark_not_ect") > 0,
        "Not-ECT frames above Kmax are counted"
    );
    assert!(counter(&stats, 3, "vq_high_water_bytes") >= (n as u64 - 1) * len);
    for key in [
        "rx_packets",
        "rx_bytes",
        "roce_packets",
        "ect_packets",
        "ecn_marked",
        "parse_errors",
    ] {
        assert!(stats[key].is_u64(), "stats --json lacks {key}");
    }
}

#[test]
fn xdp_native_marks_by_the_red_curve() {
    if privileged("xdp_native_marks_by_the_red_curve") {
        red_curve("native");
    }
}

#[test]
fn xdp_skb_marks_by_the_red_curve() {
    if privileged("xdp_skb_marks_by_the_red_curve") {
        red_curve("skb");
    }
}

/// A queue drained faster than the offered load never marks; `set` turns marking on live,
/// and the counters and config survive between separate runs of the CLI (pins).
#[test]
fn set_changes_behaviour_without_reattach() {
    let Some(link) = Link::for_test("set_changes_behaviour_without_reattach") else {
        return;
    };
    let _attached = link.attach_rx(&[]);
    let burst = |link: &Link| {
        let frames: Vec<_> = (0..50).map(|_| link.roce().build()).collect();
        link.send_and_capture(&frames)
    };
    let before = burst(&link);
    assert!(
        before.iter().all(|f| ecn_of(f) == Some(Ecn::Ect0.bits())),
        "default 10 Gb/s drain must not mark 50 frames"
    );

    link.set_rx(&[
        "ecn.prio3.rate_bps=8000",
        "ecn.prio3.kmin_bytes=1",
        "ecn.prio3.kmax_bytes=2",
    ]);
    let after = burst(&link);
    assert!(
        after.iter().all(|f| ecn_of(f) == Some(Ecn::Ce.bits())),
        "after set, every frame is above Kmax"
    );

    let ours = link.rx_status();
    assert_eq!(ours["config"]["ecn"][3]["kmax_bytes"], 2);
    let stats = link.rx_stats();
    assert_eq!(
        counter(&stats, 3, "rx_packets"),
        100,
        "counters kept across CLI runs"
    );
    assert_eq!(counter(&stats, 3, "ecn_marked"), 50);

    // A bad value is refused and changes nothing.
    let bad = Link::lossless(
        &link.rx_ns,
        &[
            "host",
            "set",
            &link.rx.ifname,
            "ecn.prio3.kmin_bytes=5",
            "ecn.prio3.pmax=2",
        ],
    );
    assert!(format!("{:#}", bad.unwrap_err()).contains("Pmax"));
    let ours = link.rx_status();
    assert_eq!(ours["config"]["ecn"][3]["kmin_bytes"], 1);
}

/// The TC egress hook marks with bpf_skb_ecn_set_ce as frames leave the sender.
#[test]
fn tc_egress_marks_leaving_frames() {
    let Some(link) = Link::for_test("tc_egress_marks_leaving_frames") else {
        return;
    };
    let _attached = link.attach_tx(&["--hooks", "tc"]);
    link.set_tx(&[
        "ecn.prio3.rate_bps=8000",
        "ecn.prio3.kmin_bytes=1000",
        "ecn.prio3.kmax_bytes=1500",
    ]);
    let mut frames: Vec<_> = (0..40).map(|_| link.roce().build()).collect();
    let mut v6 = link.roce();
    v6.ipv6 = true;
    frames.push(v6.build());
    let received = link.send_and_capture(&frames);
    let len = frames[0].len();
    for (i, frame) in received.iter().enumerate() {
        let above_kmax = (i + 1) * len >= 1500 + len;
        if above_kmax {
            assert_eq!(
                ecn_of(frame),
                Some(Ecn::Ce.bits()),
                "frame {i} above Kmax left unmarked"
            );
        }
        assert!(ipv4_checksum_ok(frame), "bad checksum on frame {i}");
    }
    let stats = link.tx_stats();
    let ce = received
        .iter()
        .filter(|f| ecn_of(f) == Some(Ecn::Ce.bits()))
        .count() as u64;
    assert_eq!(stats["per_hook"]["tc"]["ecn_marked"].as_u64(), Some(ce));
    assert_eq!(stats["per_hook"]["xdp"]["rx_packets"].as_u64(), Some(0));
}

/// Malformed and unusual frames: never a crash, never a wrong mark, counted by kind.
#[test]
fn malformed_frames_are_counted_and_never_marked() {
    let Some(link) = Link::for_test("malformed_frames_are_counted_and_never_marked") else {
        return;
    };
    let _attached = link.attach_rx(&["--mode", "skb"]);
    // Everything eligible is above Kmax on every priority.
    let mut keys = Vec::new();
    for p in 0..8 {
        keys.extend([
            format!("ecn.prio{p}.rate_bps=8000"),
            format!("ecn.prio{p}.kmin_bytes=1"),
            format!("ecn.prio{p}.kmax_bytes=2"),
        ]);
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    link.set_rx(&keys);

    let good = link.roce().build();
    let mut v6 = link.roce();
    v6.ipv6 = true;
    let good_v6 = v6.build();
    // IPv6 + one hop-by-hop header (PadN) before UDP: still RoCEv2, must be marked.
    let hbh = with_ipv6_extensions(&good_v6, &[0]);
    // Five hop-by-hop/dest-options headers: past the bounded walk.
    let deep = with_ipv6_extensions(&good_v6, &[0, 60, 60, 60, 60]);
    // An IPv6 hop-by-hop header whose length runs past the end of the frame.
    let mut long_extension = with_ipv6_extensions(&good_v6, &[0]);
    long_extension[54 + 1] = 200;
    let mut ihl4 = good.clone();
    ihl4[14] = 0x44;
    let mut fragment = good.clone();
    fragment[14 + 6] = 0x20; // more fragments
    let mut ce_already = link.roce();
    ce_already.ecn = Ecn::Ce;
    let mut garbage_type = good.clone();
    garbage_type[12..14].copy_from_slice(&[0x12, 0x34]);
    // IP total length says the datagram ends inside the UDP header / inside the BTH.
    let mut short_udp = good[..14 + 20 + 4].to_vec();
    short_udp[16..18].copy_from_slice(&24u16.to_be_bytes());
    let mut short_bth = good[..14 + 20 + 8 + 6].to_vec();
    short_bth[16..18].copy_from_slice(&34u16.to_be_bytes());

    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("ipv4 roce", good.clone(), true),
        ("ipv6 roce", good_v6.clone(), true),
        ("ipv6 hop-by-hop roce", hbh, true),
        ("ipv6 five extension headers", deep, false),
        ("ipv6 extension past the end", long_extension, false),
        ("ipv4 options roce", with_ipv4_options(&good), true),
        ("ipv4 ihl 4", ihl4, false),
        ("ipv4 fragment", fragment, false),
        ("ce on arrival", ce_already.build(), false),
        ("unknown ethertype", garbage_type, false),
        ("cut in ipv4 header", good[..14 + 10].to_vec(), false),
        ("cut in ipv4 payload", good[..14 + 20 + 20].to_vec(), false),
        ("cut in ipv6 header", good_v6[..14 + 20].to_vec(), false),
        ("ip ends in udp", short_udp, false),
        ("ip ends in bth", short_bth, false),
    ];
    let frames: Vec<Vec<u8>> = cases.iter().map(|(_, f, _)| f.clone()).collect();
    let received = link.send_and_capture(&frames);
    for ((name, sent, marked), got) in cases.iter().zip(&received) {
        if *marked {
            assert_eq!(ecn_of(got), Some(Ecn::Ce.bits()), "{name}: not marked");
            assert!(ipv4_checksum_ok(got), "{name}: bad checksum");
        } else {
            assert_eq!(got, sent, "{name}: changed");
        }
    }

    // Tagged frames (the stack strips tags, and drops a cut tag, before a capture sees
    // them): check the counters instead.
    let qinq = with_vlan(&with_vlan(&good, 0x8100, 2, 10), 0x88a8, 5, 20);
    let three_tags = with_vlan(&qinq, 0x8100, 1, 30);
    let cut_tag = with_vlan(&good, 0x8100, 3, 1)[..16].to_vec();
    let sender = link.tx_socket();
    for frame in [&qinq, &cut_tag, &three_tags] {
        sender.send(frame).unwrap();
    }
    let stats = link.wait_for_rx_stats(|s| s["parse_errors_by_kind"]["too_many_vlans"] == 1);
    let errors = &stats["parse_errors_by_kind"];
    assert_eq!(errors["truncated_ipv4"], 2, "{errors}");
    assert_eq!(errors["truncated_ipv6_extension"], 1, "{errors}");
    for kind in [
        "too_many_ipv6_extensions",
        "bad_ipv4_header",
        "truncated_vlan",
        "truncated_ipv6",
        "truncated_udp",
        "truncated_bth",
        "too_many_vlans",
    ] {
        assert_eq!(errors[kind], 1, "{kind} in {errors}");
    }
    assert_eq!(stats["parse_errors"], 10, "{errors}");
    assert_eq!(
        stats["per_priority"][0]["parse_errors"], 10,
        "malformed frames are accounted at priority 0"
    );
    assert_eq!(
        counter(&stats, 5, "ecn_marked"),
        1,
        "QinQ frame classified by its outer PCP and marked"
    );
    assert_eq!(counter(&stats, 3, "ce_on_arrival"), 1);
    assert_eq!(stats["ecn_marked"], 5);
}

/// An IPv6 frame with extension headers inserted before its UDP header: `kinds` are the
/// next-header numbers of each (0 hop-by-hop, 60 destination options), each 8 bytes of PadN.
fn with_ipv6_extensions(frame: &[u8], kinds: &[u8]) -> Vec<u8> {
    const FIXED_END: usize = 14 + 40;
    let mut out = frame[..FIXED_END].to_vec();
    out[14 + 6] = kinds[0];
    let payload_len = u16::from_be_bytes([out[18], out[19]]) + 8 * kinds.len() as u16;
    out[18..20].copy_from_slice(&payload_len.to_be_bytes());
    for next in kinds[1..].iter().chain([&17u8]) {
        out.extend_from_slice(&[*next, 0, 1, 4, 0, 0, 0, 0]);
    }
    out.extend_from_slice(&frame[FIXED_END..]);
    out
}

/// An IPv4 frame with four bytes of NOP options, header length and checksums recomputed by
/// etherparse.
fn with_ipv4_options(frame: &[u8]) -> Vec<u8> {
    let sliced = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = sliced.net else {
        panic!("not IPv4")
    };
    let mut header = ip.header().to_header();
    header.options = [1u8, 1, 1, 1][..].try_into().unwrap();
    let (dst, src): ([u8; 6], [u8; 6]) = (
        frame[..6].try_into().unwrap(),
        frame[6..12].try_into().unwrap(),
    );
    let Some(etherparse::TransportSlice::Udp(udp)) = sliced.transport else {
        panic!("not UDP")
    };
    let builder = etherparse::PacketBuilder::ethernet2(src, dst)
        .ip(etherparse::IpHeaders::Ipv4(header, Default::default()))
        .udp(udp.source_port(), udp.destination_port());
    let mut out = Vec::new();
    builder.write(&mut out, udp.payload()).unwrap();
    out
}

/// Detach removes every pin, the links, and so the programs.
#[test]
fn detach_leaves_nothing_behind() {
    let Some(link) = Link::for_test("detach_leaves_nothing_behind") else {
        return;
    };
    let attached = link.attach_rx(&["--hooks", "xdp,tc"]);
    let ours = link.rx_status();
    let link_ids: Vec<u64> = ours["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["link_id"].as_u64().unwrap())
        .collect();
    assert_eq!(link_ids.len(), 2);
    let again = Link::lossless(&link.rx_ns, &["host", "attach", &link.rx.ifname]);
    assert!(format!("{:#}", again.unwrap_err()).contains("already attached"));

    attached.detach().unwrap();
    assert!(!std::path::Path::new("/sys/fs/bpf/lossless")
        .join(&link.rx.ifname)
        .exists());
    let live: Vec<u64> = aya::programs::loaded_links()
        .filter_map(Result::ok)
        .map(|l| l.id() as u64)
        .collect();
    for id in link_ids {
        assert!(!live.contains(&id), "link {id} still loaded after detach");
    }
    assert!(!link.rx_xdp_attached(), "XDP still attached after detach");
    let detach_again = Link::lossless(&link.rx_ns, &["host", "detach", &link.rx.ifname]);
    assert!(format!("{:#}", detach_again.unwrap_err()).contains("not attached"));
}
