//! lossless.p4 in the example leaf/spine fabric (dataplane-p4/topologies/leaf-spine: 1 Gb/s,
//! priority 3 lossless and ECN-marked, switch CNPs on): what the old in-process fabric tested,
//! now on the simulator.

mod common;

use common::{counter, leaf_spine, queue, LONG};
use sim::flows::{FlowSpec, Start};
use sim::simulation::RunEnd;

/// Three senders at line rate into h31, `packets` of 1,000 bytes each (MTU 1,000).
fn incast(
    sim: &mut sim::simulation::Simulation,
    nodes: &std::collections::BTreeMap<String, u32>,
    packets: u64,
) {
    let per = sim.host(nodes["h11"]).unwrap().payload_per_packet();
    for (i, src) in ["h11", "h12", "h21"].iter().enumerate() {
        sim.add_flow(FlowSpec {
            src: nodes[*src],
            dst: nodes["h31"],
            bytes: packets * per,
            start: Start::At(0),
            connection: i as u32,
            qp: 0,
        })
        .unwrap();
    }
}

#[test]
fn incast_with_pfc_loses_nothing_and_pauses_upstream() {
    let (mut sim, nodes) = leaf_spine(&common::host(1000), Some(200_000));
    incast(&mut sim, &nodes, 300);
    assert_eq!(sim.run(LONG, |_| true), RunEnd::Idle);
    for (_, _, t) in sim.flows().iter() {
        assert!(t.delivered.is_some(), "every flow is delivered");
    }
    let h31 = sim.host(nodes["h31"]).unwrap();
    assert_eq!(h31.stats.out_of_order, 0, "nothing lost, nothing reordered");
    for (name, &node) in &nodes {
        if let Ok(s) = sim.switch(node) {
            assert_eq!(
                s.core.drop_counts().buffer_full,
                0,
                "{name} dropped nothing"
            );
        }
    }
    let leaf3 = nodes["leaf3"];
    let paused_spines: u64 = [3, 4]
        .iter()
        .map(|&p| counter(&sim, leaf3, "LosslessIngress.pfc_pause_tx", queue(p, 3)))
        .sum();
    assert!(paused_spines > 0, "leaf3 paused the spines");
    let spine_pauses: u64 = ["spine1", "spine2"]
        .iter()
        .map(|s| sim.switch(nodes[*s]).unwrap().stats.pauses_received[3][3])
        .sum();
    assert_eq!(
        spine_pauses, paused_spines,
        "the spines' MACs got every PAUSE leaf3 sent"
    );
    let h11 = sim.host(nodes["h11"]).unwrap();
    assert!(
        h11.stats.pauses_received > 0,
        "the pause spread back to the senders"
    );
}

#[test]
fn incast_without_pfc_drops_in_a_small_buffer() {
    let (mut sim, nodes) = leaf_spine(&common::host(1000), Some(64_000));
    for node in nodes.values() {
        if let Ok(s) = sim.switch_mut(*node) {
            let t = s.core.table_id("LosslessIngress.pfc_profile").unwrap();
            s.core.clear_table(t).unwrap();
        }
    }
    incast(&mut sim, &nodes, 300);
    sim.run(LONG, |_| true);
    let drops: u64 = nodes
        .values()
        .filter_map(|n| sim.switch(*n).ok())
        .map(|s| s.core.drop_counts().buffer_full)
        .sum();
    assert!(
        drops > 0,
        "a 3:1 incast overflows a 64 kB buffer without PFC"
    );
    let h31 = sim.host(nodes["h31"]).unwrap();
    assert!(h31.stats.naks_sent > 0, "the losses show up as NAKs");
    for (_, _, t) in sim.flows().iter() {
        assert!(t.delivered.is_some(), "go-back-N still delivers every flow");
    }
}
