//! The switch's trace (`softswitch_core::trace`) in process, over `tests/p4/trace.p4` from P4
//! source and from p4c's BMv2 JSON: per packet, BMv2's lines in BMv2's order (parser states and
//! headers, the condition, tables with hit or miss and the action, egress port, drop, clone,
//! recirculation, transmission), the control-plane writes, and nothing without a sink. The
//! same program runs on real ports beside BMv2 itself in `tests/tests/softswitch_trace.rs`.

use std::cell::RefCell;
use std::fmt;
use std::path::PathBuf;
use std::rc::Rc;

use softswitch_core::ir::{ActionCall, Entry, FieldMatch, Program};
use softswitch_core::switch::{Clock, Switch};
use softswitch_core::trace::{Level, PacketId, TraceSink};

/// The program.
fn program_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/p4/trace.p4")
}

/// A sink that keeps every line, as `[id.copy] [cxt 0] message` for packets.
#[derive(Clone, Default)]
struct Lines(Rc<RefCell<Vec<String>>>);

impl TraceSink for Lines {
    fn packet(&mut self, _: Level, packet: PacketId, line: fmt::Arguments<'_>) {
        self.0.borrow_mut().push(format!("{packet} {line}"));
    }

    fn switch(&mut self, _: Level, line: fmt::Arguments<'_>) {
        self.0.borrow_mut().push(line.to_string());
    }
}

/// An Ethernet + IPv4 + 8 bytes frame to `dst` (or an ARP-typed frame when `ipv4` is false).
fn frame(dst: [u8; 4], ipv4: bool) -> Vec<u8> {
    let mut f = vec![8, 0, 0, 0, 2, 0, 8, 0, 0, 0, 1, 0x11];
    f.extend_from_slice(if ipv4 { &[8, 0] } else { &[8, 6] });
    f.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 1, 1]);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0; 8]);
    f
}

/// The routes and the recirculation of the tests, written through the runtime interface.
fn program_the_switch(switch: &mut Switch) {
    let lpm = switch.table_id("MyIngress.ipv4_lpm").unwrap();
    let forward = switch.action_id(lpm, "MyIngress.ipv4_forward").unwrap();
    let clone = switch
        .action_id(lpm, "MyIngress.forward_and_clone")
        .unwrap();
    let route = |dst: u128, action: usize, args: Vec<u128>| Entry {
        matches: vec![FieldMatch::Masked {
            value: dst,
            mask: 0xffff_ffff,
        }],
        priority: 0,
        action: ActionCall { action, args },
    };
    let routes = [
        route(0x0a00_0202, forward, vec![0x0800_0000_0222, 2]),
        route(0x0a00_0303, clone, vec![2, 5]),
        route(0x0a00_0404, forward, vec![0x0800_0000_0444, 2]),
    ];
    for r in routes {
        switch.add_entry(lpm, r).unwrap();
    }
    let lp = switch.table_id("MyEgress.loop").unwrap();
    let recirculate = switch.action_id(lp, "MyEgress.recirculate_once").unwrap();
    let once = Entry {
        matches: vec![FieldMatch::Masked {
            value: 0x0a00_0404,
            mask: 0xffff_ffff,
        }],
        priority: 0,
        action: ActionCall {
            action: recirculate,
            args: vec![],
        },
    };
    switch.add_entry(lp, once).unwrap();
    switch.set_clone_session(5, 1).unwrap();
}

/// The lines of packet `id` (all its copies), without their packet prefix nor the place of
/// a condition (`trace.p4(83) `: p4c's JSON names the file as p4c was given it).
fn of_packet(lines: &[String], id: u64) -> Vec<String> {
    let prefix = format!("[{id}.");
    lines
        .iter()
        .filter(|l| l.starts_with(&prefix))
        .map(|l| {
            let line = l.split_once("] [cxt 0] ").expect("a packet line").1;
            line.find("Condition \"")
                .map_or(line, |at| &line[at..])
                .to_string()
        })
        .collect()
}

/// Runs the five test packets through `program` with a sink; returns every line.
fn trace_of(program: Program) -> Vec<String> {
    let lines = Lines::default();
    let mut switch = Switch::new(program, Clock::Virtual(0));
    switch.set_trace(Some((Box::new(lines.clone()), Level::Trace)));
    program_the_switch(&mut switch);
    for (dst, ipv4) in [
        ([10, 0, 2, 2], true),
        ([10, 0, 9, 9], true),
        ([10, 0, 2, 2], false),
        ([10, 0, 3, 3], true),
        ([10, 0, 4, 4], true),
    ] {
        switch.receive(1, frame(dst, ipv4));
    }
    switch.drain();
    let out = lines.0.borrow().clone();
    out
}

/// Checks the trace of the five packets; `condition` is how the trace shows the ingress `if`
/// (its place and node name differ between P4 source and p4c's JSON) and `direct_drop` the
/// lines of the `else` branch's direct `drop()` (a table of its own in p4c's JSON).
fn check_trace(lines: &[String], condition: &str, direct_drop: &[&str]) {
    let writes: Vec<&String> = lines.iter().filter(|l| !l.starts_with('[')).collect();
    assert_eq!(
        writes[0].as_str(),
        "Entry 0 added to table 'MyIngress.ipv4_lpm'",
        "{writes:#?}"
    );
    assert_eq!(
        writes[1].as_str(),
        "Dumping entry 0\nMatch key:\n* hdr.ipv4.dstAddr    : LPM       0a000202/32\n\
         Action entry: MyIngress.ipv4_forward - 80000000222,2,\n"
    );
    assert!(writes
        .iter()
        .any(|l| *l == "Entry 0 added to table 'MyEgress.loop'"));

    let parse_ipv4 = [
        "Parser 'parser': start",
        "Parser 'parser' entering state 'start'",
        "Extracting header 'ethernet'",
        "Parser state 'start': key is 0800",
        "Bytes parsed: 14",
        "Parser 'parser' entering state 'parse_ipv4'",
        "Extracting header 'ipv4'",
        "Parser state 'parse_ipv4' has no switch, going to default next state",
        "Bytes parsed: 34",
        "Parser 'parser': end",
    ];
    let hit = |handle: usize, dst: &str, action: &str| -> Vec<String> {
        vec![
            format!("{condition} is true"),
            "Applying table 'MyIngress.ipv4_lpm'".into(),
            format!("Looking up key:\n* hdr.ipv4.dstAddr    : {dst}\n"),
            format!("Table 'MyIngress.ipv4_lpm': hit with handle {handle}"),
        ]
        .into_iter()
        .chain([format!(
            "Dumping entry {handle}\nMatch key:\n* hdr.ipv4.dstAddr    : LPM       {dst}/32\n\
             Action entry: {action}\n"
        )])
        .chain([format!("Action entry is {action}")])
        .collect()
    };
    let egress_miss = |dst: &str| -> Vec<String> {
        [
            "Pipeline 'egress': start",
            "Applying table 'MyEgress.loop'",
            &format!("Looking up key:\n* hdr.ipv4.dstAddr    : {dst}\n"),
            "Table 'MyEgress.loop': miss",
            "Action entry is NoAction - ",
            "Action NoAction",
            "Pipeline 'egress': end",
            "Deparser 'deparser': start",
            "Deparsing header 'ethernet'",
            "Deparsing header 'ipv4'",
            "Deparser 'deparser': end",
        ]
        .map(String::from)
        .to_vec()
    };
    let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let without_conditions = |lines: Vec<String>| -> Vec<String> {
        // The egress condition's text is checked once, in packet 0.
        lines
            .into_iter()
            .filter(|l| !l.contains("Condition \"meta.loops == 0\""))
            .collect()
    };

    // Packet 0: a hit, forwarded out of port 2.
    let p0 = of_packet(lines, 0);
    assert!(
        p0.iter()
            .any(|l| l.starts_with("Condition \"meta.loops == 0\" (node_")
                && l.ends_with(") is true")),
        "{p0:#?}"
    );
    let mut want = strs(&["Processing packet received on port 1"]);
    want.extend(strs(&parse_ipv4));
    want.push("Pipeline 'ingress': start".into());
    want.extend(hit(
        0,
        "0a000202",
        "MyIngress.ipv4_forward - 80000000222,2,",
    ));
    want.extend(strs(&[
        "Action MyIngress.ipv4_forward",
        "Pipeline 'ingress': end",
        "Egress port is 2",
    ]));
    want.extend(egress_miss("0a000202"));
    want.push("Transmitting packet of size 42 out of port 2".into());
    assert_eq!(without_conditions(p0), want);

    // Packet 1: a miss, dropped by the default action.
    let mut want = strs(&["Processing packet received on port 1"]);
    want.extend(strs(&parse_ipv4));
    want.extend([
        "Pipeline 'ingress': start".to_string(),
        format!("{condition} is true"),
        "Applying table 'MyIngress.ipv4_lpm'".into(),
        "Looking up key:\n* hdr.ipv4.dstAddr    : 0a000909\n".into(),
        "Table 'MyIngress.ipv4_lpm': miss".into(),
        "Action entry is MyIngress.drop - ".into(),
        "Action MyIngress.drop".into(),
        "Pipeline 'ingress': end".into(),
        "Egress port is 511".into(),
        "Dropping packet at the end of ingress".into(),
    ]);
    assert_eq!(of_packet(lines, 1), want);

    // Packet 2: not IPv4, the condition is false and the else branch drops.
    let mut want = strs(&[
        "Processing packet received on port 1",
        "Parser 'parser': start",
        "Parser 'parser' entering state 'start'",
        "Extracting header 'ethernet'",
        "Parser state 'start': key is 0806",
        "Bytes parsed: 14",
        "Parser 'parser': end",
        "Pipeline 'ingress': start",
    ]);
    want.push(format!("{condition} is false"));
    want.extend(strs(direct_drop));
    want.extend(strs(&[
        "Pipeline 'ingress': end",
        "Egress port is 511",
        "Dropping packet at the end of ingress",
    ]));
    assert_eq!(of_packet(lines, 2), want);

    // Packet 3: forwarded and cloned at ingress to session 5 (port 1); the clone, copy 1, is
    // parsed again and leaves port 1.
    let mut want = strs(&["Processing packet received on port 1"]);
    want.extend(strs(&parse_ipv4));
    want.push("Pipeline 'ingress': start".into());
    want.extend(hit(1, "0a000303", "MyIngress.forward_and_clone - 2,5,"));
    want.extend(strs(&[
        "Action MyIngress.forward_and_clone",
        "Pipeline 'ingress': end",
        "Cloning packet at ingress",
    ]));
    want.extend(strs(&parse_ipv4));
    want.extend(strs(&[
        "Cloning packet to egress port 1",
        "Egress port is 2",
    ]));
    let p3 = of_packet(lines, 3);
    assert_eq!(without_conditions(p3[..want.len()].to_vec()), want);
    let copies: Vec<&String> = lines.iter().filter(|l| l.starts_with("[3.1]")).collect();
    assert_eq!(
        copies.last().map(|l| l.as_str()),
        Some("[3.1] [cxt 0] Transmitting packet of size 42 out of port 1")
    );
    assert!(lines
        .iter()
        .any(|l| l == "[3.0] [cxt 0] Transmitting packet of size 42 out of port 2"));

    // Packet 4: its egress hit recirculates it once; copy 1 is forwarded out of port 2.
    let p4: Vec<&String> = lines.iter().filter(|l| l.starts_with("[4.0]")).collect();
    assert!(p4
        .iter()
        .any(|l| *l == "[4.0] [cxt 0] Table 'MyEgress.loop': hit with handle 0"));
    assert_eq!(
        p4.last().map(|l| l.as_str()),
        Some("[4.0] [cxt 0] Recirculating packet")
    );
    let again: Vec<&String> = lines.iter().filter(|l| l.starts_with("[4.1]")).collect();
    assert_eq!(
        again.first().map(|l| l.as_str()),
        Some("[4.1] [cxt 0] Processing packet received on port 1")
    );
    assert_eq!(
        again.last().map(|l| l.as_str()),
        Some("[4.1] [cxt 0] Transmitting packet of size 42 out of port 2")
    );
}

#[test]
fn the_trace_of_a_program_from_source_follows_each_packet_as_bmv2s_log_does() {
    let compiled = softswitch_frontend::compile_file(&program_path()).unwrap();
    let lines = trace_of(compiled.program);
    assert!(
        lines.iter().any(|l| l.ends_with(
            "[0.0] [cxt 0] trace.p4(83) Condition \"hdr.ipv4.isValid()\" (node_1) is true"
        )),
        "{lines:#?}"
    );
    check_trace(&lines, "Condition \"hdr.ipv4.isValid()\" (node_1)", &[]);
}

#[test]
fn the_trace_of_a_program_from_bmv2_json_names_what_p4c_names() {
    let test = "the_trace_of_a_program_from_bmv2_json_names_what_p4c_names";
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip(test) else {
        return;
    };
    let compiled = testkit::bmv2::compiled(toolchain, &program_path()).unwrap();
    let json = std::fs::read(&compiled.json).unwrap();
    let loaded = softswitch_bmv2json::load(&json).unwrap();
    let lines = trace_of(loaded.program);
    check_trace(
        &lines,
        "Condition \"hdr.ipv4.isValid()\" (node_2)",
        &[
            "Applying table 'tbl_drop'",
            "Looking up key:\n",
            "Table 'tbl_drop': miss",
            "Action entry is MyIngress.drop - ",
            "Action MyIngress.drop",
        ],
    );
}

#[test]
fn without_a_sink_or_below_debug_nothing_per_packet_is_formatted() {
    let compiled = softswitch_frontend::compile_file(&program_path()).unwrap();
    let lines = Lines::default();
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    switch.set_trace(Some((Box::new(lines.clone()), Level::Info)));
    program_the_switch(&mut switch);
    switch.receive(1, frame([10, 0, 2, 2], true));
    switch.drain();
    assert_eq!(lines.0.borrow().len(), 0, "{:#?}", lines.0.borrow());
    assert_eq!(switch.drain_outputs().count(), 1);
}

/// Names from a program (a BMv2 JSON's, a `#line` file name) are untrusted: a control
/// character in one is escaped in the trace, so no name writes a line of its own.
#[test]
fn a_name_with_a_newline_cannot_forge_a_trace_line() {
    let mut program = softswitch_frontend::compile_file(&program_path())
        .unwrap()
        .program;
    let forged = "\n[12:00:00.000] [bmv2] [E] forged";
    for table in &mut program.tables {
        for key in &mut table.keys {
            key.name.push_str(forged);
        }
    }
    for (_, header) in &mut program.trace_names.headers {
        header.push_str(forged);
    }
    for condition in &mut program.trace_names.conditions {
        condition.text.push_str(forged);
        if let Some(at) = &mut condition.location {
            at.push_str(forged);
        }
    }
    let lines = trace_of(program);
    let text = lines.join("\n");
    assert!(
        text.contains("\\n[12:00:00.000] [bmv2] [E] forged"),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("[12:00:00.000]")),
        "{text}"
    );
}
