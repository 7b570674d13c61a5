//! PFC receive: 802.1Qbb frames built by scapy (an independent encoder) arrive at an
//! attached interface; the pause state, the counters and the consumption of the frames are
//! read back through `lossless host stats --json` and a capture.

use lossless_tests::{
    bed::{by_priority, from_test_mac, subnet_link, Link, Running, TIMEOUT},
    capture::RawSocket,
    craft::{scapy_decode, scapy_pfc, tshark_verbose},
};
use std::path::{Path, PathBuf};

use lossless_tests::bed::lossless_bin;
use serde_json::Value;
use sysutil::netns::Namespace;
use testkit::{workspace_root, TempDir};

/// 65535 quanta at 10 Mb/s, in ns.
const FULL_PAUSE_3: u64 = 65535 * 512 * 100;

/// Pauses are recorded per priority for quanta × 512 bit times, resumes end them, and the
/// frames are consumed (a capture after XDP never sees them).
#[test]
fn pauses_are_honoured_counted_and_consumed() {
    let Some(link) = Link::for_test("pauses_are_honoured_counted_and_consumed") else {
        return;
    };
    let _attached = link.attach_rx(&["--mode", "skb"]);
    // 10 Mb/s: one quantum is 51.2 µs, so pauses outlast the CLI calls that observe them.
    link.set_rx(&["pfc.link_speed_bps=10m"]);

    let capture = link.rx_socket();
    // Every frame is built before the first is sent: scapy takes seconds to start on a loaded
    // machine, and the XON below must arrive within priority 3's 3.36 s pause.
    let pause_0_and_7 =
        scapy_pfc("c0_enabled=1, c0_pause_time=100, c7_enabled=1, c7_pause_time=100");
    let pause_3 = scapy_pfc("c3_enabled=1, c3_pause_time=65535");
    let resume_3 = scapy_pfc("c3_enabled=1, c3_pause_time=0");
    let marker = link.roce().build();
    let sender = link.tx_socket();
    // 100 quanta (5.12 ms) for priorities 0 and 7; 65535 quanta (3.36 s) for priority 3.
    sender.send(&pause_0_and_7).unwrap();
    sender.send(&pause_3).unwrap();
    sender.send(&marker).unwrap();
    let seen = capture.receive(1, TIMEOUT, from_test_mac).unwrap();
    assert_eq!(seen[0], marker, "a PFC frame reached the stack");

    // Priorities 0 and 7 were paused for exactly 5.12 ms once their pause expired.
    let stats = link.wait_for_rx_stats(|s| by_priority(s, "pfc_paused_ns", 0) == 5_120_000);
    assert_eq!(by_priority(&stats, "pfc_paused_ns", 7), 5_120_000);
    for (priority, pauses) in [(0, 1), (3, 1), (7, 1), (1, 0), (6, 0)] {
        assert_eq!(
            by_priority(&stats, "pfc_pause_rx", priority),
            pauses,
            "priority {priority}"
        );
    }
    let paused_3 = by_priority(&stats, "pfc_paused_ns", 3);
    assert!(
        (5_120_000..FULL_PAUSE_3).contains(&paused_3),
        "priority 3 paused for {paused_3} ns"
    );

    // XON for priority 3: the pause ends and its paused time stops growing.
    sender.send(&resume_3).unwrap();
    let resumed = link.wait_for_rx_stats(|s| by_priority(s, "pfc_resume_rx", 3) == 1);
    let later = link.rx_stats();
    assert_eq!(
        by_priority(&later, "pfc_paused_ns", 3),
        by_priority(&resumed, "pfc_paused_ns", 3)
    );
    assert!(
        by_priority(&later, "pfc_paused_ns", 3) < FULL_PAUSE_3,
        "resume did not end the pause early"
    );
    assert_eq!(later["parse_errors"], 0);
}

/// Malformed MAC control frames are counted by kind and never honoured.
#[test]
fn malformed_mac_control_frames_are_not_honoured() {
    let Some(link) = Link::for_test("malformed_mac_control_frames_are_not_honoured") else {
        return;
    };
    let _attached = link.attach_rx(&["--mode", "skb"]);
    let good = scapy_pfc("c2_enabled=1, c2_pause_time=65535");
    let mut classic_pause = good.clone();
    classic_pause[14..16].copy_from_slice(&[0x00, 0x01]); // 802.3x PAUSE, not PFC
    let short = good[..14 + 10].to_vec();
    let mut bad_vector = good.clone();
    bad_vector[16] = 0x01; // a reserved class-enable bit
    let sender = link.tx_socket();
    for frame in [&classic_pause, &short, &bad_vector] {
        sender.send(frame).unwrap();
    }
    let stats = link.wait_for_rx_stats(|s| s["parse_errors"] == 3);
    let errors = &stats["parse_errors_by_kind"];
    for kind in ["bad_pfc_opcode", "truncated_pfc", "bad_pfc_vector"] {
        assert_eq!(errors[kind], 1, "{kind} in {errors}");
    }
    assert_eq!(by_priority(&stats, "pfc_pause_rx", 2), 0);
    assert_eq!(by_priority(&stats, "pfc_paused_ns", 2), 0);
}

/// An unbroken run of PAUSE refreshes longer than the watchdog limit is a storm: counted
/// once; with `pfc.watchdog_ignore` the storm is no longer honoured.
#[test]
fn the_watchdog_sees_pause_storms() {
    let Some(link) = Link::for_test("the_watchdog_sees_pause_storms") else {
        return;
    };
    let _attached = link.attach_rx(&["--mode", "skb"]);
    link.set_rx(&["pfc.link_speed_bps=10m", "pfc.watchdog_ms=20"]);
    let sender = link.tx_socket();
    let pause = scapy_pfc("c4_enabled=1, c4_pause_time=65535");
    // Refresh the pause (each lasts 3.36 s) until the run outlasts the 20 ms limit.
    let storm = |expected: u64| {
        link.wait_for_rx_stats(|s| {
            sender.send(&pause).unwrap();
            by_priority(s, "pfc_storms", 4) == expected
        })
    };
    storm(1);
    let stats = storm(1);
    assert!(
        by_priority(&stats, "pfc_paused_ns", 4) >= 20_000_000,
        "a counted storm is still honoured"
    );

    // Ignoring storms: after XON a new run starts; once it storms, it is not honoured.
    link.set_rx(&["pfc.watchdog_ignore=true"]);
    sender
        .send(&scapy_pfc("c4_enabled=1, c4_pause_time=0"))
        .unwrap();
    let stormed = storm(2);
    sender.send(&pause).unwrap();
    let later = link.wait_for_rx_stats(|s| {
        by_priority(s, "pfc_pause_rx", 4) > by_priority(&stormed, "pfc_pause_rx", 4)
    });
    assert_eq!(
        by_priority(&later, "pfc_paused_ns", 4),
        by_priority(&stormed, "pfc_paused_ns", 4),
        "an ignored storm must not add paused time"
    );
}

/// The leaf-spine example copied into `dir` with h11's link at 10 Mb/s (as the test veth's
/// pauses are read), and `config` written as h11's host config: the topology's path and the
/// config's.
fn h11_at_10m(dir: &TempDir, config: &str) -> (PathBuf, PathBuf) {
    dir.copy_files(&workspace_root().join("dataplane-p4/topologies/leaf-spine"));
    let topology = dir.0.join("topology.json");
    let mut fabric: Value =
        serde_json::from_str(&std::fs::read_to_string(&topology).unwrap()).unwrap();
    let h11 = fabric["links"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|l| l[0] == "h11")
        .unwrap();
    h11[3] = 10.into();
    std::fs::write(&topology, fabric.to_string()).unwrap();
    let path = dir.0.join("h11.toml");
    std::fs::write(&path, config).unwrap();
    (topology, path)
}

/// `lossless check TOPOLOGY --host-config h11=CONFIG --json` (with `--fix`): the report, and
/// the rules of the findings at h11's config (the original or its fixed copy).
fn check_h11(topology: &Path, config: &Path, fix: bool) -> (Value, Vec<String>) {
    let host = format!("h11={}", config.display());
    let mut args = vec![
        "check",
        topology.to_str().unwrap(),
        "--host-config",
        &host,
        "--json",
    ];
    if fix {
        args.push("--fix");
    }
    let out = std::process::Command::new(lossless_bin())
        .args(&args)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let host_rules: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["where"]["host"] == "h11/h11.toml" || f["where"]["host"] == "h11/h11.fixed.toml"
        })
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect();
    (report, host_rules)
}

/// Checks h11's `config` (it trips `rule` alone), fixes it, and checks the fixed copy clean:
/// the fixed copy's path.
fn fixed_h11(topology: &Path, config: &Path, rule: &str) -> PathBuf {
    let (report, rules) = check_h11(topology, config, true);
    assert_eq!(rules, [rule], "{report:#}");
    assert_eq!(report["fixed"]["errors_left"], 0, "{report:#}");
    assert_eq!(report["fixed"]["warnings_left"], 0, "{report:#}");
    let fixed = config.with_file_name("h11.fixed.toml");
    let fixed_topology = topology.with_file_name("topology.fixed.json");
    let (report, rules) = check_h11(&fixed_topology, &fixed, false);
    assert!(rules.is_empty(), "{report:#}");
    fixed
}

/// The bed of a test (`test`) of a check rule's symptom: a link, and h11's `config` checked to
/// trip `rule` alone and fixed ([`fixed_h11`]) in a scratch directory; the link, the directory,
/// the config's path and its fixed copy's. `None` when the test cannot run.
fn checked_h11(test: &str, config: &str, rule: &str) -> Option<(Link, TempDir, PathBuf, PathBuf)> {
    let link = Link::for_test(test)?;
    let dir = TempDir::new(&format!("lossless-{rule}"), "check");
    let (topology, config) = h11_at_10m(&dir, config);
    let fixed = fixed_h11(&topology, &config, rule);
    Some((link, dir, config, fixed))
}

/// The watchdog rule of `lossless check`, tied to its symptom: one host config with the
/// watchdog only counting storms is reported by the check (h11 of the leaf-spine example, its
/// link at 10 Mb/s as the veth's pauses are read); attached, a counted storm is still
/// honoured (the paused time keeps growing); `--fix`'s copy checks clean and, attached, stops
/// honouring the storm once it is called.
#[test]
fn the_checked_watchdog_rule_is_the_storm_honoured_and_its_fix_ends_it() {
    let Some((link, _dir, config, fixed)) = checked_h11(
        "the_checked_watchdog_rule_is_the_storm_honoured_and_its_fix_ends_it",
        "# the receiver\npfc.link_speed_bps = \"10m\"\npfc.watchdog_ms = 20\npfc.watchdog_ignore = false\n",
        "watchdog",
    ) else {
        return;
    };

    {
        let _attached = link.attach_rx(&["--mode", "skb", "--config", config.to_str().unwrap()]);
        let (stormed, later) = storm_then_pause(&link);
        assert!(
            stormed >= 20_000_000,
            "the storm was honoured until it was called"
        );
        assert!(
            later > stormed,
            "without the watchdog a called storm is still honoured"
        );
    }
    let link = Link::new().unwrap();
    let _attached = link.attach_rx(&["--mode", "skb", "--config", fixed.to_str().unwrap()]);
    let (stormed, later) = storm_then_pause(&link);
    assert_eq!(
        later, stormed,
        "with the fixed config a called storm must not add paused time"
    );
}

/// The pause-quanta rule of `lossless check`, tied to its symptom: h11's config reads pause
/// quanta at 10 Gb/s on its 10 Mb/s link, which the check reports; attached, a PAUSE of 100
/// quanta (5.12 ms at 10 Mb/s) holds the priority a thousandth of that, 5.12 µs; `--fix`'s copy
/// (the link's speed) checks clean and, attached, holds it the whole 5.12 ms.
#[test]
fn the_checked_pause_quanta_rule_is_a_pause_too_short_and_its_fix_holds_it() {
    let Some((link, _dir, config, fixed)) = checked_h11(
        "the_checked_pause_quanta_rule_is_a_pause_too_short_and_its_fix_holds_it",
        "# the receiver\npfc.link_speed_bps = \"10g\"\npfc.watchdog_ms = 20\npfc.watchdog_ignore = true\n",
        "pause-quanta",
    ) else {
        return;
    };
    let pause = scapy_pfc("c2_enabled=1, c2_pause_time=100");
    let paused_by = |link: &Link, config: &Path| {
        let _attached = link.attach_rx(&["--mode", "skb", "--config", config.to_str().unwrap()]);
        link.tx_socket().send(&pause).unwrap();
        // The pause is over (the kernel's clock has passed its end) once a second reading of
        // the paused time equals the first; 5.12 ms at most.
        let first = link.wait_for_rx_stats(|s| by_priority(s, "pfc_pause_rx", 2) == 1);
        let mut last = by_priority(&first, "pfc_paused_ns", 2);
        for _ in 0..100 {
            let now = by_priority(&link.rx_stats(), "pfc_paused_ns", 2);
            if now == last {
                return now;
            }
            last = now;
        }
        panic!("the paused time still grows after 100 readings: {last} ns");
    };
    assert_eq!(
        paused_by(&link, &config),
        5_120,
        "100 quanta read at 10 Gb/s"
    );
    let link = Link::new().unwrap();
    assert_eq!(
        paused_by(&link, &fixed),
        5_120_000,
        "100 quanta read at the link's 10 Mb/s"
    );
}

/// Refreshes a pause of priority 4 (each lasts 3.36 s at 10 Mb/s) until the run outlasts the
/// rx end's watchdog limit and is counted as a storm, then once more: the paused time when the
/// storm was counted and after that refresh, which adds to it only while storms are honoured.
fn storm_then_pause(link: &Link) -> (u64, u64) {
    let sender = link.tx_socket();
    let pause = scapy_pfc("c4_enabled=1, c4_pause_time=65535");
    let stormed = link.wait_for_rx_stats(|s| {
        sender.send(&pause).unwrap();
        by_priority(s, "pfc_storms", 4) == 1
    });
    sender.send(&pause).unwrap();
    let later = link.wait_for_rx_stats(|s| {
        by_priority(s, "pfc_pause_rx", 4) > by_priority(&stormed, "pfc_pause_rx", 4)
    });
    (
        by_priority(&stormed, "pfc_paused_ns", 4),
        by_priority(&later, "pfc_paused_ns", 4),
    )
}

/// `host logs` streams the programs' logs with the pfc hook attached beside xdp (the first
/// program then is pfc's, which holds no log ring): the storm warning of host-pfc.md is read.
#[test]
fn host_logs_shows_the_pfc_storm_warning() {
    let Some(link) = Link::for_test("host_logs_shows_the_pfc_storm_warning") else {
        return;
    };
    let _attached = link.attach_rx(&["--mode", "skb", "--hooks", "xdp,pfc"]);
    link.set_rx(&["pfc.link_speed_bps=10m", "pfc.watchdog_ms=20"]);
    let mut logs = Running::spawn(&link.rx_ns, &["host", "logs", &link.rx.ifname], &[]);
    let sender = link.tx_socket();
    let pause = scapy_pfc("c4_enabled=1, c4_pause_time=65535");
    link.wait_for_rx_stats(|s| {
        sender.send(&pause).unwrap();
        by_priority(s, "pfc_storms", 4) == 1
    });
    let line = logs.wait_for("PFC storm on priority 4");
    assert!(line.contains("WARN"), "{line}");
}

/// Frames that leave (TC egress) while their priority is paused are counted as violations;
/// other priorities are not.
#[test]
fn frames_sent_while_paused_are_violations() {
    let Some(link) = Link::for_test("frames_sent_while_paused_are_violations") else {
        return;
    };
    // The sender's interface receives the PAUSE (XDP) and sends the frames (TC egress).
    let _attached = link.attach_paused_sender();
    let peer = link.rx_socket();
    peer.send(&scapy_pfc("c3_enabled=1, c3_pause_time=65535"))
        .unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while by_priority(&link.tx_stats(), "pfc_pause_rx", 3) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the PAUSE never arrived"
        );
    }
    let data: Vec<Vec<u8>> = (0..20).map(|_| link.roce().build()).collect(); // DSCP 26: priority 3
    let mut other = link.roce();
    other.dscp = 0;
    let mut frames = data.clone();
    frames.push(other.build());
    link.send_and_capture(&frames);
    let stats = link.tx_stats();
    assert_eq!(by_priority(&stats, "pfc_violations", 3), 20, "{stats}");
    assert_eq!(by_priority(&stats, "pfc_violations", 0), 0, "{stats}");
}

/// A host whose ingress buffer crosses XOFF sends its peer a PAUSE (decoded by scapy and
/// tshark), refreshes it while above XON (honoured by the peer's XDP), and sends a resume once
/// the buffer falls below XON; no data packet is lost on the way.
#[test]
fn the_ingress_buffer_pauses_and_resumes_the_peer() {
    let Some(link) = Link::for_test("the_ingress_buffer_pauses_and_resumes_the_peer") else {
        return;
    };
    let _receiver = link.attach_rx(&["--hooks", "pfc"]);
    // Drained at 1000 B/s, the buffer only fills: XOFF after 20 KB of priority-3 frames.
    link.set_rx(&[
        "pfc.prio3.enabled=true",
        "pfc.prio3.xoff_bytes=20000",
        "pfc.prio3.xon_bytes=10000",
        "pfc.prio3.quanta=4000",
        "pfc.prio3.drain_bps=8000",
    ]);
    let pfc_frames = link.tx_socket();
    let is_pfc = |f: &[u8]| f.len() >= 14 && f[12..14] == [0x88, 0x08];

    let data: Vec<Vec<u8>> = (0..150).map(|_| link.roce().build()).collect();
    let arrived = link.send_and_capture(&data);
    assert_eq!(
        arrived.len(),
        data.len(),
        "PFC generation must not drop data"
    );
    let pause = pfc_frames.receive(1, TIMEOUT, is_pfc).unwrap().remove(0);
    assert_eq!(pause.len(), 60);
    let fields = scapy_decode(
        &pause,
        "{'dst': p.dst, 'opcode': p.payload._op_code, 'c3': p.c3_enabled, 'c0': p.c0_enabled, \
         't3': p.c3_pause_time}",
    )
    .unwrap();
    assert_eq!(fields["dst"], "01:80:c2:00:00:01", "{fields}");
    assert_eq!(fields["opcode"], 0x0101, "{fields}");
    assert_eq!(
        [&fields["c3"], &fields["c0"], &fields["t3"]],
        [1, 0, 4000],
        "{fields}"
    );
    let text = tshark_verbose(&[pause]).unwrap();
    assert!(
        !text.to_lowercase().contains("malformed"),
        "tshark:\n{text}"
    );

    // The peer now honours PFC. (Native XDP: generic XDP skips frames that a TC program
    // redirected on the same machine, which a generated PAUSE crossing a veth is.) Still
    // above XON, the next frame refreshes the pause; the peer's XDP consumes it.
    let _sender = link.attach_tx(&["--mode", "native"]);
    link.send_and_capture(&[link.roce().build()]);
    let deadline = std::time::Instant::now() + TIMEOUT;
    while by_priority(&link.tx_stats(), "pfc_pause_rx", 3) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the peer never honoured a refresh"
        );
    }

    // Drain fast: the next frame finds the buffer below XON, and a resume goes out.
    link.set_rx(&["pfc.prio3.drain_bps=10g"]);
    link.send_and_capture(&[link.roce().build()]);
    while by_priority(&link.tx_stats(), "pfc_resume_rx", 3) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the peer never got the resume"
        );
    }
    let stats = link.rx_stats();
    assert!(by_priority(&stats, "pfc_pause_tx", 3) >= 2, "{stats}");
    assert_eq!(by_priority(&stats, "pfc_resume_tx", 3), 1, "{stats}");
    assert_eq!(by_priority(&stats, "pfc_pause_tx", 0), 0, "{stats}");
}

/// `pfc.relay`: a PAUSE received is honoured here and passed on, unchanged, to every relay
/// interface (a host that forwards without a buffer stops its upstream when its downstream
/// stops it); resumes and malformed frames are not passed on, and nothing is relayed once the
/// list is empty.
#[test]
fn pauses_are_relayed_to_the_relay_interfaces() {
    let Some(link) = Link::for_test("pauses_are_relayed_to_the_relay_interfaces") else {
        return;
    };
    // The relay target: a second veth from the rx namespace to a namespace of its own.
    let down_ns = Namespace::create("lrl").unwrap();
    let (relay, down) = subnet_link(&link.rx_ns, &down_ns, [10, 78, 0]).unwrap();
    let _attached = link.attach_rx(&["--mode", "skb"]);
    link.set_rx(&[&format!("pfc.relay={}", relay.ifname)]);
    let status = link.rx_status();
    assert_eq!(
        status["config"]["pfc_relay"],
        serde_json::json!([relay.ifname]),
        "{status}"
    );

    let resume = scapy_pfc("c3_enabled=1, c3_pause_time=0");
    let mut malformed = scapy_pfc("c3_enabled=1, c3_pause_time=100");
    malformed[14..16].copy_from_slice(&[0x00, 0x01]); // 802.3x PAUSE, not PFC
    let pause = scapy_pfc("c3_enabled=1, c3_pause_time=300");
    let is_pfc = |f: &[u8]| f.len() >= 14 && f[12..14] == [0x88, 0x08];
    let capture = RawSocket::open_in(&down_ns, &down.ifname);
    let sender = link.tx_socket();
    for frame in [&resume, &malformed, &pause] {
        sender.send(frame).unwrap();
    }
    // Frames cross the veth in order: the first MAC control frame to arrive is the pause.
    let relayed = capture.receive(1, TIMEOUT, is_pfc).unwrap().remove(0);
    assert_eq!(relayed, pause, "not the PAUSE, unchanged");
    let fields = scapy_decode(
        &relayed,
        "{'opcode': p.payload._op_code, 'c3': p.c3_enabled, 't3': p.c3_pause_time}",
    )
    .unwrap();
    assert_eq!(
        [&fields["opcode"], &fields["c3"], &fields["t3"]],
        [0x0101, 1, 300],
        "{fields}"
    );
    let stats = link.wait_for_rx_stats(|s| by_priority(s, "pfc_relayed", 3) == 1);
    assert_eq!(by_priority(&stats, "pfc_pause_rx", 3), 1, "{stats}");
    assert_eq!(by_priority(&stats, "pfc_resume_rx", 3), 1, "{stats}");
    assert_eq!(
        stats["parse_errors_by_kind"]["bad_pfc_opcode"], 1,
        "{stats}"
    );

    // Relaying off, the next pause is honoured and consumed; on again, the pause after it is
    // the first to reach the relay interface.
    link.set_rx(&["pfc.relay="]);
    sender.send(&pause).unwrap();
    link.wait_for_rx_stats(|s| by_priority(s, "pfc_pause_rx", 3) == 2);
    link.set_rx(&[&format!("pfc.relay={}", relay.ifname)]);
    let longer = scapy_pfc("c3_enabled=1, c3_pause_time=500");
    sender.send(&longer).unwrap();
    let relayed = capture.receive(1, TIMEOUT, is_pfc).unwrap().remove(0);
    assert_eq!(
        relayed, longer,
        "a pause was relayed while relaying was off"
    );
    let stats = link.wait_for_rx_stats(|s| by_priority(s, "pfc_pause_rx", 3) == 3);
    assert_eq!(by_priority(&stats, "pfc_relayed", 3), 2, "{stats}");
}
