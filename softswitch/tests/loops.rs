//! A program that loops a packet for ever (recirculating, resubmitting or cloning E2E every
//! time) does not hang the switch: after `MAX_PASSES` loops the packet is dropped and logged;
//! one that doubles its copies at every pass stops at `MAX_PACKET_WORK` pipeline runs. (A program
//! that declares more state than the switch can hold is refused when it compiles:
//! `limits::MAX_EXTERN_CELLS`, tests/frontend_limits.rs.)

use softswitch_core::switch::{Clock, Switch, MAX_LOG_LINES, MAX_PACKET_WORK, MAX_PASSES};
use softswitch_frontend::source::SourceMap;

fn looping_program(ingress: &str, egress: &str) -> String {
    format!(
        "#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; }}
struct hs {{ h_t h; }}
struct m {{ }}
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.h); transition accept; }}
}}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ sm.egress_spec = 1; {ingress} }} }}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ {egress} }} }}
control C(inout hs hdr, inout m meta) {{ apply {{ }} }}
control D(packet_out pk, in hs hdr) {{ apply {{ pk.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"
    )
}

fn run(program: &str) -> Switch {
    run_with_depth(program, softswitch_core::tm::DEFAULT_DEPTH)
}

fn run_with_depth(program: &str, depth: usize) -> Switch {
    let mut map = SourceMap::new();
    let file = map.add("loop.p4", program);
    let compiled = softswitch_frontend::compile(&mut map, file)
        .unwrap_or_else(|d| panic!("{}", d.render(&map)));
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    switch.set_queue_depth(None, None, depth).unwrap();
    switch.set_clone_session(3, 2).unwrap();
    switch.receive(0, vec![0x2a]);
    switch.drain();
    switch
}

#[test]
fn endless_recirculation_is_cut() {
    let switch = run(&looping_program(
        "",
        "recirculate_preserving_field_list(0);",
    ));
    assert_eq!(switch.drops(), 1);
    assert!(switch
        .log()
        .0
        .iter()
        .any(|l| l.contains(&format!("looping {MAX_PASSES} times"))));
}

#[test]
fn endless_resubmission_is_cut() {
    let switch = run(&looping_program("resubmit_preserving_field_list(0);", ""));
    assert_eq!(switch.drops(), 1);
}

#[test]
fn endless_e2e_cloning_is_cut() {
    let mut switch = run(&looping_program("", "clone(CloneType.E2E, 3);"));
    // The original leaves port 1; its clones loop through port 2's egress until the limit.
    let outputs: Vec<u16> = switch.drain_outputs().map(|o| o.port).collect();
    assert_eq!(outputs.iter().filter(|&&p| p == 1).count(), 1);
    assert_eq!(
        outputs.iter().filter(|&&p| p == 2).count(),
        MAX_PASSES as usize
    );
    assert_eq!(switch.drops(), 1);
}

#[test]
fn copies_that_double_at_every_pass_stop_at_the_work_limit() {
    // Every copy is cloned and recirculated: 2^1000 pipeline runs within MAX_PASSES, which
    // queues deep enough would let run (this took hours before the limit).
    let switch = run_with_depth(
        &looping_program(
            "",
            "clone(CloneType.E2E, 3); recirculate_preserving_field_list(0);",
        ),
        softswitch_core::tm::MAX_DEPTH,
    );
    assert!(switch.drops() > 0);
    let notes: Vec<_> = switch
        .log()
        .0
        .iter()
        .filter(|l| l.contains(&format!("past {MAX_PACKET_WORK} pipeline runs")))
        .collect();
    assert_eq!(notes.len(), 1, "one note per received packet");
    assert!(switch.log().0.len() <= MAX_LOG_LINES);
}

#[test]
fn an_endless_for_loop_ends_its_block_at_the_work_limit() {
    use softswitch_core::ir::MAX_LOOP_WORK;
    // Ingress counts into the header in nested loops, the outer one endless.
    let mut switch = run(&looping_program(
        "bit<32> n = 0; \
         for (bit<8> i = 0; true; i = i + 1) { \
             for (bit<8> j = 0; j < 2; j = j + 1) { n = n + 1; hdr.h.a = (bit<8>)n; } \
         } \
         hdr.h.a = 0xff;",
        "",
    ));
    // The block ended as at exit: the statement after the loop did not run, egress did.
    let out: Vec<_> = switch.drain_outputs().collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    assert_ne!(out[0].data, vec![0xff]);
    let note = format!("more than {MAX_LOOP_WORK} units of work");
    let log = &switch.log().0;
    assert_eq!(
        log.iter().filter(|l| l.contains(&note)).count(),
        1,
        "{log:?}"
    );
}
