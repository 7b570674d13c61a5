//! softswitch's `--log-console` trace on real ports, read against BMv2's own: the same p4c JSON
//! of `tests/p4/trace.p4` (parser states, an LPM hit and miss, a condition, a drop, an ingress
//! clone and an egress recirculation) runs on softswitch standing in for simple_switch_grpc
//! (entries over P4Runtime) and on BMv2's simple_switch (its logging build, entries over
//! simple_switch_CLI); the same five frames, sent by scapy, give the same sequence of events
//! per packet and copy in both logs. softswitch also logs the control-plane writes, and with
//! its log at the default level prints nothing per packet.

use std::collections::BTreeMap;

use lossless_tests::{
    bed::{output_with_input, privileged_and, TIMEOUT},
    switch::{program as p4_file, Bmv2Build, Host, SwitchBed, Topology},
    tutorial_bed::TutorialBed,
};

/// The scapy script that sends the five test frames out of `argv[1]`: to a routed address, to
/// an unrouted one, an ARP frame, to the cloned route and to the recirculated one.
const SEND: &str = "import sys
from scapy.all import Ether, IP, ARP, UDP, sendp
eth = Ether(dst='08:00:00:00:02:00', src='08:00:00:00:01:11')
udp = UDP(sport=4000, dport=4000) / (b'x' * 8)
sendp([eth / IP(src='10.0.1.1', dst='10.0.2.2') / udp,
       eth / IP(src='10.0.1.1', dst='10.0.9.9') / udp,
       Ether(dst='ff:ff:ff:ff:ff:ff', src='08:00:00:00:01:11') / ARP(pdst='10.0.2.2'),
       eth / IP(src='10.0.1.1', dst='10.0.3.3') / udp,
       eth / IP(src='10.0.1.1', dst='10.0.4.4') / udp], iface=sys.argv[1], verbose=False)
";

/// The frames the switch sends to h2 (port 2): packets 0, 3 and 4.
const TO_H2: usize = 3;

/// The messages the comparison keeps: BMv2's per-packet events. (The `Primitive` lines BMv2
/// prints for each statement of an action are not in softswitch's trace.)
const EVENTS: &[&str] = &[
    "Processing packet received on port",
    "Parser '",
    "Extracting header",
    "Parser state",
    "Bytes parsed",
    "Pipeline '",
    "Condition \"",
    "Applying table",
    "Looking up key",
    "Table '",
    "Dumping entry",
    "Action entry is",
    "Action ",
    "Egress port is",
    "Dropping packet",
    "Cloning packet",
    "Resubmitting packet",
    "Recirculating packet",
    "Multicast requested",
    "Replicating packet",
    "Deparser '",
    "Deparsing header",
    "Transmitting packet",
];

/// The events of a log, by packet and copy (`3.1`), in the order logged.
fn events(lines: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in lines {
        let Some((head, message)) = line.split_once("] [cxt 0] ") else {
            continue;
        };
        let Some(packet) = head.rsplit('[').next() else {
            continue;
        };
        // A condition's place (`trace.p4(83) `) is the file as p4c was given it.
        let message = message
            .find("Condition \"")
            .map_or(message, |at| &message[at..]);
        if EVENTS.iter().any(|e| message.starts_with(e)) {
            out.entry(packet.to_string())
                .or_default()
                .push(message.to_string());
        }
    }
    out
}

/// Sends the five frames from `host` with scapy and waits until h2 (`to`) has received the
/// three the switch forwards to it.
fn send_and_wait(python: &std::path::Path, host: &Host, to: &Host) {
    let rx = to.socket();
    let out = testkit::output_of(host.ns.command(python).args(["-c", SEND]).arg(&host.iface));
    assert!(
        out.status.success(),
        "scapy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rx.receive(TO_H2, TIMEOUT, |f| {
        lossless_tests::craft::udp_src_port(f) == Some(4000)
    })
    .unwrap();
}

#[test]
fn softswitch_traces_each_packet_as_bmv2s_log_console_does() {
    let test = "softswitch_traces_each_packet_as_bmv2s_log_console_does";
    let Some(toolchain) = privileged_and(test, testkit::bmv2::toolchain_or_skip) else {
        return;
    };
    let Some(python) = testkit::venv_python_or_skip(test) else {
        return;
    };
    let program = p4_file("trace.p4");

    // softswitch as simple_switch_grpc with --log-console (the tutorials' line), given p4c's
    // JSON and P4Info over P4Runtime.
    let mut soft = TutorialBed::softswitch_as_bmv2().unwrap();
    soft.program(&program, &p4_file("trace-runtime.json"));
    send_and_wait(&python, soft.h1(), soft.h2());
    soft.bed
        .wait_for_log("[4.1] [cxt 0] Transmitting packet of size 50 out of port 2")
        .unwrap();
    soft.bed
        .wait_for_log("[3.1] [cxt 0] Transmitting packet of size 50 out of port 1")
        .unwrap();
    let soft_lines = soft.bed.lines.clone();
    for write in [
        "Entry 0 added to table 'MyIngress.ipv4_lpm'",
        "Entry 2 added to table 'MyIngress.ipv4_lpm'",
        "Entry 0 added to table 'MyEgress.loop'",
    ] {
        assert!(
            soft_lines.iter().any(|l| l.ends_with(write)),
            "no '{write}' in softswitch's log:\n{}",
            soft_lines.join("\n")
        );
    }
    // BMv2's line: time, program, level, thread, then the packet.
    assert!(
        soft_lines
            .iter()
            .any(|l| l.contains("] [bmv2] [D] [thread ")
                && l.ends_with("[0.0] [cxt 0] Processing packet received on port 1")),
        "{}",
        soft_lines.join("\n")
    );
    drop(soft);

    // BMv2's simple_switch (logging build) on the same JSON, entries over its CLI.
    let compiled = testkit::bmv2::compiled(toolchain, &program).unwrap();
    let dir = std::env::temp_dir().join(sysutil::netns::unique_name("lltrace"));
    std::fs::create_dir_all(&dir).unwrap();
    let topology = Topology::new(2).unwrap();
    let mut bmv2 = SwitchBed::start_bmv2(
        topology,
        &toolchain.simple_switch,
        Bmv2Build::Thrift,
        Some(&compiled.json),
        &dir,
        &["--log-console"],
    )
    .unwrap();
    let mut cli = bmv2
        .topology()
        .switch_ns
        .command(&toolchain.simple_switch_cli.program);
    toolchain.simple_switch_cli.set_env(&mut cli);
    let commands = std::fs::read(p4_file("trace-bmv2-cli.txt")).unwrap();
    let out = output_with_input(cli.args(["--thrift-port", "9090"]), &commands).unwrap();
    assert!(
        out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("Error"),
        "simple_switch_CLI: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    send_and_wait(&python, &bmv2.hosts()[0], &bmv2.hosts()[1]);
    bmv2.wait_for_log("[4.1] [cxt 0] Transmitting packet of size 50 out of port 2")
        .unwrap();
    bmv2.wait_for_log("[3.1] [cxt 0] Transmitting packet of size 50 out of port 1")
        .unwrap();
    let bmv2_lines = bmv2.lines.clone();
    drop(bmv2);
    let _ = std::fs::remove_dir_all(&dir);

    let (ours, theirs) = (events(&soft_lines), events(&bmv2_lines));
    for (packet, event) in [
        ("0.0", "Table 'MyIngress.ipv4_lpm': hit with handle 0"),
        ("1.0", "Table 'MyIngress.ipv4_lpm': miss"),
        ("2.0", "Condition \"hdr.ipv4.isValid()\" (node_2) is false"),
        ("3.0", "Cloning packet to egress port 1"),
        ("4.0", "Recirculating packet"),
    ] {
        assert!(
            theirs
                .get(packet)
                .is_some_and(|e| e.iter().any(|l| l == event)),
            "BMv2's log has no '{event}' for packet {packet}: {theirs:#?}"
        );
    }
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        ["0.0", "1.0", "2.0", "3.0", "3.1", "4.0", "4.1"],
        "softswitch's packets"
    );
    for (packet, want) in &theirs {
        assert_eq!(
            ours.get(packet),
            Some(want),
            "packet {packet}: softswitch's events (left) differ from BMv2's (right)"
        );
    }
    assert_eq!(ours.len(), theirs.len());
}

#[test]
fn with_the_log_at_its_default_level_nothing_per_packet_is_printed() {
    let test = "with_the_log_at_its_default_level_nothing_per_packet_is_printed";
    let Some(python) = privileged_and(test, testkit::venv_python_or_skip) else {
        return;
    };
    let mut bed = TutorialBed::new().unwrap();
    bed.program(&p4_file("trace.p4"), &p4_file("trace-runtime.json"));
    send_and_wait(&python, bed.h1(), bed.h2());
    let status = bed.bed.stop().unwrap();
    assert!(status.success());
    // The frames were forwarded (h2 got them) and counted, and not one line about them.
    assert!(
        bed.bed.lines.iter().any(|l| l.contains("received")),
        "{}",
        bed.bed.lines.join("\n")
    );
    let traced: Vec<&String> = bed
        .bed
        .lines
        .iter()
        .filter(|l| l.contains("[cxt 0]") || l.contains("added to table"))
        .collect();
    assert!(traced.is_empty(), "{traced:#?}");
}
