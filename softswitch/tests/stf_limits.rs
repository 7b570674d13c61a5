//! The STF runner refuses values past their range instead of wrapping them (a multicast group
//! 65536 was group 0, a counter index 2^64 was cell 0, a priority 256 was priority 0), applies
//! the traffic manager's own queue rules (the Queues service applies the same ones), and bounds
//! what a test may make it hold: its length, a packet's length, the bytes the switch sends.
//! Within them, it reads packets as p4c's runner does (an odd last digit, an empty packet).

use softswitch_core::switch::{Clock, Switch};
use softswitch_core::tm::{self, QueueSettingError};
use softswitch_frontend::source::SourceMap;
use softswitch_stf::{MAX_OUTPUT_BYTES, MAX_PACKET_BYTES, MAX_STF_BYTES};
use std::path::Path;

/// Runs `stf` against the corpus program `stateful.p4` (register, counters, multicast, clones):
/// `Ok` with the failures (empty when it passed) or `Err` with the rendered refusal.
fn run(stf: &str) -> Result<Vec<String>, String> {
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/stateful.p4");
    let mut map = SourceMap::new();
    let file = map.add("stateful.p4", std::fs::read_to_string(program).unwrap());
    let compiled = softswitch_frontend::compile(&mut map, file).map_err(|d| d.render(&map))?;
    let test = map.add("test.stf", stf.to_string());
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    softswitch_stf::run(&map, test, &mut switch)
        .map(|r| r.failures)
        .map_err(|d| d.render(&map))
}

fn refused(stf: &str, why: &str) {
    let err = run(stf).expect_err(stf);
    assert!(err.contains(why), "{stf}: refused with {err}");
}

#[test]
fn multicast_ids_past_16_bits_are_refused_not_wrapped() {
    // 65536 was group 0, 65537 group 1: the packet below went out of ports 2 and 3.
    refused(
        "mc_mgrp_create 65536",
        "a multicast group id (mcast_grp is 16 bits) is 0..65535, not 65536",
    );
    refused(
        "mc_mgrp_create 1\nmc_node_create 10 2\nmc_node_associate 65537 0",
        "0..65535, not 65537",
    );
    refused(
        "mc_node_create 65536 2",
        "a replication id (egress_rid is 16 bits) is 0..65535, not 65536",
    );
    // The top of the range is a group like any other.
    let passed = run(
        "add MyIngress.classify 10 hdr.eth.dstAddr:0xffffffffffff MyIngress.flood(group:65535)
mc_mgrp_create 65535
mc_node_create 10 2 3
mc_node_associate 65535 0
packet 1 ffffffffffff cccccccccccc 0800 99
expect 2 ffffffffffff cccccccccccc 000a 99 $
expect 3 ffffffffffff cccccccccccc 000a 99 $",
    )
    .unwrap();
    assert!(passed.is_empty(), "{passed:?}");
}

#[test]
fn queue_settings_follow_the_traffic_managers_rules() {
    // The same rule, and the same words, as the Queues service (tests/server.rs).
    let zero = QueueSettingError::Depth(0).to_string();
    refused("set_queue_depth 0", &zero);
    refused("set_queue_depth 0 2", &zero);
    refused(
        &format!("set_queue_depth {}", tm::MAX_DEPTH + 1),
        &QueueSettingError::Depth(tm::MAX_DEPTH as u128 + 1).to_string(),
    );
    // Priority 256 was priority 0.
    refused(
        "set_queue_depth 10 2 256",
        &QueueSettingError::Priority(256).to_string(),
    );
    refused(
        "set_queue_rate 18446744073709551616",
        &QueueSettingError::Rate(1 << 64).to_string(),
    );
    assert_eq!(
        run(&format!(
            "set_queue_depth {} 2 7\nset_queue_rate 0 2",
            tm::MAX_DEPTH
        )),
        Ok(vec![])
    );
}

#[test]
fn indices_and_values_past_their_range_are_refused() {
    // 2^64 was index 0.
    refused(
        "counter_read MyIngress.port_counter 18446744073709551616 0",
        "counter index out of range",
    );
    refused(
        "register_write MyIngress.seen_per_port 18446744073709551616 1",
        "register index out of range",
    );
    // The error names the number given, not where it was clamped.
    refused(
        "register_write MyIngress.seen_per_port 99999999999999999999 5",
        "register index out of range: 99999999999999999999 is not below 16",
    );
    refused(
        "register_read MyIngress.seen_per_port 16 0",
        "register index out of range: 16 is not below 16",
    );
    refused(
        "register_write MyIngress.seen_per_port 1 0x100000000",
        "does not fit the register's 32 bits",
    );
    refused(
        "mirroring_add 4294967296 4",
        "a clone session id is 0..4294967295, not 4294967296",
    );
    refused(
        "add MyIngress.classify 2147483648 hdr.eth.dstAddr:0x01 MyIngress.drop()",
        "a priority is 0..2147483647",
    );
    // A counter compared with 2^64 was compared with 0.
    refused(
        "check_counter MyIngress.port_counter(1) 18446744073709551616",
        "a counter value is 0..18446744073709551615",
    );
    // More digits than 128 bits hold.
    refused(
        &format!(
            "add MyIngress.classify 1 hdr.eth.dstAddr:0x{} MyIngress.drop()",
            "f".repeat(33)
        ),
        "cannot read",
    );
}

#[test]
fn time_that_would_overflow_the_clock_stops_at_its_end() {
    assert_eq!(
        run("advance 18446744073709551615\nadvance 18446744073709551615\npacket 7 000000000001 aaaaaaaaaa00 0800\nwait"),
        Ok(vec![])
    );
}

#[test]
fn a_test_a_packet_and_the_output_are_bounded() {
    let long = format!("# {}\n", "x".repeat(MAX_STF_BYTES));
    refused(&long, &format!("longer than {MAX_STF_BYTES} bytes"));
    let packet = format!("packet 1 {}", "00".repeat(MAX_PACKET_BYTES + 1));
    refused(
        &packet,
        &format!("a packet is at most {MAX_PACKET_BYTES} bytes"),
    );
    // A 60 KB frame multicast to 510 ports, sent until the switch has sent more than the limit.
    let nodes: String = (1..=510).map(|p| format!(" {p}")).collect();
    let frame = "ff".repeat(6) + &"00".repeat(60_000);
    let sends = MAX_OUTPUT_BYTES / (510 * 60_000) + 2;
    let stf = format!(
        "add MyIngress.classify 10 hdr.eth.dstAddr:0xffffffffffff MyIngress.flood(group:1)
mc_mgrp_create 1
mc_node_create 10{nodes}
mc_node_associate 1 0
{}",
        format!("packet 0 {frame}\n").repeat(sends)
    );
    refused(
        &stf,
        &format!("the switch sent more than {MAX_OUTPUT_BYTES} bytes of packets"),
    );
}

#[test]
fn read_refuses_an_endless_file_without_reading_it_all() {
    let err = softswitch_stf::read(Path::new("/dev/zero")).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("longer than {MAX_STF_BYTES} bytes")),
        "{err}"
    );
}

#[test]
fn a_character_that_is_not_a_hex_digit_is_named_whatever_its_size() {
    // Found by the stf fuzz target: the error's span ended inside the two-byte character.
    refused(
        "packet 1 ffffffffffff\u{65c}cc 0800",
        "'\u{65c}' is not a hex digit",
    );
    refused("expect 1 ff\u{1F600}", "is not a hex digit");
}

#[test]
fn an_odd_last_digit_is_a_byte_and_a_packet_without_digits_is_empty_as_with_p4cs_runner() {
    // p4c's runner (bmv2stf.py) reads the digits two at a time: "...0800 0102030" ends in the
    // byte 0x00 after 0x03; its corpus has such lines, and `packet 0` with no digits at all.
    let add = "add MyIngress.classify 1 hdr.eth.dstAddr:0x0000000000** MyIngress.to_port(port:2)\n";
    let passed = run(&format!(
        "{add}packet 7 000000000001 aaaaaaaaaa00 0800 0102037
expect 2 000000000001 aaaaaaaaaa01 0800 01020307 $"
    ))
    .unwrap();
    assert!(passed.is_empty(), "{passed:?}");
    // One more digit is one more byte: the expectation above no longer holds.
    let failed = run(&format!(
        "{add}packet 7 000000000001 aaaaaaaaaa00 0800 01020307 5
expect 2 000000000001 aaaaaaaaaa01 0800 01020307 $"
    ))
    .unwrap();
    assert!(!failed.is_empty(), "a 7-byte payload passed as 6");
    // An empty packet: the parser finds it too short, ingress still runs (v1model), and an
    // empty packet leaves port 2 (on softswitch).
    let passed = run(&format!("{add}packet 7\nexpect 2 $")).unwrap();
    assert!(passed.is_empty(), "{passed:?}");
    let failed = run(&format!("{add}packet 7\nexpect 2 00 $")).unwrap();
    assert!(!failed.is_empty(), "an empty packet passed as one byte");
}
