//! Scenarios on generated fabrics, lossless.p4 in every switch with the entries the control
//! plane computes: the invariants every run must keep (nothing lost in the lossless priority
//! with PFC on, every flow completes, no flow faster than alone on an idle path, the program's
//! counters agree with the simulator's accounting, the same seed gives the same summary).

use sim::report::summarise;
use sim::scenario::{build, CongestionControl, Scenario};
use sim::simulation::RunEnd;

fn scenario(topology: &str, workload: &[&str]) -> Scenario {
    Scenario {
        topology: topology.into(),
        workload: workload.iter().map(|w| w.to_string()).collect(),
        tuning: Default::default(),
        hosts: Default::default(),
        failures: Vec::new(),
        seed: 1,
        time: "100ms".into(),
    }
}

fn run(s: &Scenario) -> sim::report::Summary {
    let program = sim::program::lossless();
    let mut built = build(s, &program, &workload::Sources::default(), 4 << 30)
        .unwrap_or_else(|e| panic!("{e}"));
    let end = built.sim.run(built.time_limit, |_| true).unwrap();
    summarise(&built, end).0
}

fn assert_invariants(s: &sim::report::Summary) {
    assert_eq!(s.end, RunEnd::Idle, "the run ended on its own: {s:#?}");
    assert_eq!(s.flows.completed, s.flows.total, "every flow completes");
    assert_eq!(
        s.flows.faster_than_ideal, 0,
        "no flow beats its ideal: {:#?}",
        s.flows
    );
    assert_eq!(
        s.drops.buffer_full + s.drops.queue_full + s.drops.link_down,
        0,
        "nothing lost"
    );
    assert_eq!(s.transport.retransmitted, 0, "nothing sent twice");
    for c in &s.checks {
        assert!(
            c.agrees,
            "{}: program {} vs simulator {}",
            c.what, c.program, c.simulator
        );
    }
    assert!(
        s.checks.len() >= 4,
        "lossless.p4's counters were read: {:?}",
        s.checks
    );
}

#[test]
fn a_ring_allreduce_on_a_small_fat_tree_keeps_every_invariant() {
    let s = scenario(
        "fat-tree:4,speed=100G",
        &["allreduce:ranks=16,size=4MB,qps=2"],
    );
    let summary = run(&s);
    assert_invariants(&summary);
    let c = &summary.collectives[0];
    assert_eq!((c.ranks, c.completed), (16, 1));
    assert!(
        c.busbw_gbps > 0.0 && c.busbw_gbps <= 100.0 / 8.0,
        "bus bandwidth within the link rate: {c:?}"
    );
}

#[test]
fn an_incast_pauses_without_loss_and_the_same_seed_gives_the_same_summary() {
    let mut s = scenario(
        "fat-tree:4,speed=100G,buffer=1MB",
        &["incast:senders=8,size=2MB"],
    );
    s.hosts.cc = CongestionControl::None;
    let first = run(&s);
    assert_invariants(&first);
    assert!(
        first.pfc.pauses_sent > 0,
        "an 8:1 incast into 1 MB buffers pauses: {:?}",
        first.pfc
    );
    let again = run(&s);
    assert_eq!(first, again, "deterministic");
}
