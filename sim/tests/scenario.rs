//! Scenarios on generated fabrics, lossless.p4 in every switch with the entries the control
//! plane computes: the invariants every run must keep (nothing lost in the lossless priority
//! with PFC on, every flow completes, no flow faster than alone on an idle path, the program's
//! counters agree with the simulator's accounting, the same seed gives the same summary).
#![forbid(unsafe_code)]

mod common;

use sim::report::{summarise, FlowRow, Summary};
use sim::scenario::{build, CongestionControl, Scenario};
use sim::simulation::{Execution, Node, RunEnd, Simulation};
use softswitch_core::runtime::CellIndex;
use softswitch_core::table::CounterCell;

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
    let mut built = build(
        s,
        &program,
        &workload::Sources::default(),
        4 << 30,
        Execution::Compiled,
    )
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
    // The receiver's queue held the incast: its traffic manager measured the wait, and the
    // pauses show up as time paused on the queues they held.
    let deepest = first
        .queues
        .iter()
        .max_by_key(|q| q.occupancy_max_packets)
        .unwrap();
    assert!(
        deepest.occupancy_max_packets > 10
            && deepest.sojourn_max_us > 0
            && deepest.sojourn_us_buckets.iter().sum::<u64>() == deepest.packets,
        "{deepest:?}"
    );
    let paused: f64 = first.queues.iter().map(|q| q.paused_us).sum();
    assert!(
        paused > 0.0 && paused <= first.pfc.paused_us_total + 1e-6,
        "{paused} µs paused on switch queues, {} in all",
        first.pfc.paused_us_total
    );
    let again = run(&s);
    assert_eq!(first, again, "deterministic");
}

#[test]
fn a_link_that_fails_mid_run_loses_frames_that_go_back_n_recovers_and_reroute_avoids() {
    let mut s = scenario("fat-tree:4,speed=100G", &["permutation:size=2MB"]);
    s.hosts.cc = CongestionControl::None;
    // An edge's uplink fails 20 µs in, while every flow is sending; routes avoid it 50 µs later.
    s.failures
        .push(common::link_failure("20us", "e0_0:3", Some("50us")));
    let summary = run(&s);
    assert_eq!(summary.end, RunEnd::Idle);
    assert_eq!(
        summary.flows.completed, summary.flows.total,
        "every flow still completes"
    );
    assert!(
        summary.drops.link_down > 0,
        "frames were lost on the failed link: {:?}",
        summary.drops
    );
    assert!(
        summary.transport.naks + summary.transport.timeouts > 0
            && summary.transport.retransmitted > 0,
        "losses were noticed and resent: {:?}",
        summary.transport
    );
    assert_eq!(summary.flows.faster_than_ideal, 0);
}

#[test]
fn scenarios_past_their_limits_are_refused_before_they_run() {
    let program = sim::program::lossless();
    let sources = workload::Sources::default();
    let refused =
        |s: &Scenario, memory: u64| match build(s, &program, &sources, memory, Execution::Compiled)
        {
            Ok(_) => panic!("{s:?} was accepted"),
            Err(e) => e.to_string(),
        };
    let ok = scenario("fat-tree:4", &["permutation:size=1MB"]);
    let e = refused(&ok, 1 << 20);
    assert!(e.contains("MB may be used"), "{e}");
    let too_long = Scenario {
        time: "11s".into(),
        ..ok.clone()
    };
    let too_large = Scenario {
        topology: "fat-tree:34".into(),
        ..ok.clone()
    };
    for (s, reason) in [(too_long, "time"), (too_large, "2..=32")] {
        let e = refused(&s, 1 << 32);
        assert!(e.contains(reason), "{e}");
    }
    let mut bad = ok.clone();
    bad.failures
        .push(common::link_failure("1us", "nosuch:1", None));
    let e = refused(&bad, 1 << 32);
    assert!(e.contains("no switch"), "{e}");
    // Failures are checked before anything is allocated: the estimate a sweep sizes its jobs
    // with refuses them too.
    let e = sim::scenario::estimate(&bad, &program, &sources)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no switch"), "{e}");
    bad.failures[0].link = Some("h0_0_0".into());
    bad.failures[0].at = "soon".into();
    let e = sim::scenario::estimate(&bad, &program, &sources)
        .unwrap_err()
        .to_string();
    assert!(e.contains("failure.at"), "{e}");
    // A connection matrix's own failure lines are refused, not ignored.
    let matrix =
        std::env::temp_dir().join(format!("lossless-sim-failure-{}.cm", std::process::id()));
    std::fs::write(&matrix, "Nodes 16\nConnections 1\nFailures 1\n0->1 id 1 start 0 size 1000\nfailure switch_type AGG switch_id 0 link_id 1\n")
        .unwrap();
    let e = refused(
        &scenario("fat-tree:4", &[matrix.to_str().unwrap()]),
        1 << 32,
    );
    let _ = std::fs::remove_file(&matrix);
    assert!(e.contains("failure"), "{e}");
    let e = refused(
        &Scenario {
            workload: vec!["allreduce:ranks=64,size=1MB".into()],
            ..ok.clone()
        },
        1 << 32,
    );
    assert!(e.contains("workload"), "{e}");
}

/// A workload file that cannot be read is named once with its reason once, however the error is
/// printed (a command line prints the whole chain of sources).
#[test]
fn an_unreadable_workload_file_is_said_once() {
    let missing =
        std::env::temp_dir().join(format!("lossless-sim-missing-{}.toml", std::process::id()));
    let s = scenario("fat-tree:4", &[missing.to_str().unwrap()]);
    let program = sim::program::lossless();
    let e = build(
        &s,
        &program,
        &workload::Sources::default(),
        1 << 32,
        Execution::Compiled,
    )
    .err()
    .expect("a missing workload file is refused");
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        chain += &format!(": {s}");
        source = s.source();
    }
    assert_eq!(chain.matches("cannot read").count(), 1, "{chain}");
    assert_eq!(chain.matches("os error 2").count(), 1, "{chain}");
}

#[test]
fn the_example_ring_crosses_pods_at_every_step() {
    // The README's tour and `cargo xtask demo` run this file on fat-tree:8 (16 hosts a pod).
    let s = scenario("fat-tree:8", &["examples/ring-across-pods.toml"]);
    let built = build(
        &s,
        &sim::program::lossless(),
        &workload::Sources::default(),
        4 << 30,
        Execution::Interpreted,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let flows = built.sim.flows();
    // 64 ranks, 2 × 63 steps, 4 QPs with a share each.
    assert_eq!(flows.len(), 64 * 2 * 63 * 4);
    let pod = |node| built.host_nodes.iter().position(|&n| n == node).unwrap() / 16;
    for (id, flow, _) in flows.iter() {
        assert_ne!(pod(flow.src), pod(flow.dst), "flow {id} stays in its pod");
    }
}

/// Every cell of every counter and register of every switch, and each switch's drops: what
/// the program kept over a run.
fn program_state(sim: &Simulation) -> ProgramState {
    let mut state = Vec::new();
    for node in sim.nodes() {
        let Node::Switch(s) = node else { continue };
        state.push((
            s.name.clone(),
            "drops".to_string(),
            vec![format!("{:?}", s.core.drops())],
        ));
        for (id, instance) in s.core.program().instances.iter().enumerate() {
            let cells =
                |read: &dyn Fn(usize) -> Option<String>| (0..).map_while(read).collect::<Vec<_>>();
            let mut values = cells(&|i| {
                s.core
                    .read_cell::<CounterCell>(id, CellIndex::Index(i))
                    .ok()
                    .map(|c| format!("{c:?}"))
            });
            values.extend(cells(&|i| {
                s.core
                    .read_cell::<u128>(id, CellIndex::Index(i))
                    .ok()
                    .map(|v| v.to_string())
            }));
            state.push((s.name.clone(), instance.name.clone(), values));
        }
    }
    state
}

/// Every switch's program state: (switch, counter or register, its cells).
type ProgramState = Vec<(String, String, Vec<String>)>;

/// The run of `s` with every switch running lossless.p4 as `execution` says: its summary,
/// its flows' times and the program's state at the end.
fn run_as(s: &Scenario, execution: Execution) -> (Summary, Vec<FlowRow>, ProgramState) {
    let program = sim::program::lossless();
    let mut built = build(
        s,
        &program,
        &workload::Sources::default(),
        4 << 30,
        execution,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(built.sim.execution(), execution);
    assert_eq!(
        built.sim.compile_fallbacks(),
        [],
        "every block of lossless.p4 runs compiled"
    );
    let end = built.sim.run(built.time_limit, |_| true).unwrap();
    // The blocks the switches ran compiled: some when compiled (so that this test fails if the
    // simulator's switches never take the compiled path), none when interpreted.
    let compiled_runs: u64 = built
        .sim
        .nodes()
        .iter()
        .filter_map(|node| match node {
            Node::Switch(s) => Some(s.core.compiled_block_runs()),
            _ => None,
        })
        .sum();
    assert_eq!(
        compiled_runs > 0,
        execution == Execution::Compiled,
        "{compiled_runs} blocks ran compiled"
    );
    let (summary, flows) = summarise(&built, end);
    let state = program_state(&built.sim);
    (summary, flows, state)
}

/// The simulator is deterministic, so lossless.p4 compiled and interpreted give the same run:
/// every counter of the report and of the program, every flow's completion time. The incast
/// pauses (PFC, the program's hold passes) and marks (ECN, CNPs), so that most of the program
/// runs.
#[test]
fn the_compiled_program_runs_the_same_scenario_as_the_interpreter() {
    let s = scenario(
        "fat-tree:4,speed=100G,buffer=1MB",
        &["incast:senders=8,size=1MB"],
    );
    let (summary, flows, state) = run_as(&s, Execution::Compiled);
    assert_invariants(&summary);
    assert!(
        summary.pfc.pauses_sent > 0 && summary.ecn.marked > 0,
        "the incast pauses and marks: {:?} {:?}",
        summary.pfc,
        summary.ecn
    );
    assert_eq!(flows.len(), 8);
    let interpreted = run_as(&s, Execution::Interpreted);
    assert_eq!(summary, interpreted.0, "the report");
    assert_eq!(flows, interpreted.1, "the flows' times");
    assert_eq!(state, interpreted.2, "the program's counters and registers");
}
