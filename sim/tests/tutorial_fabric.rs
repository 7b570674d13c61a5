//! lossless.p4 in the example leaf/spine fabric (dataplane-p4/topologies/leaf-spine: 1 Gb/s,
//! priority 3 lossless and ECN-marked, switch CNPs on): what the old in-process fabric tested,
//! now on the simulator.
#![forbid(unsafe_code)]

mod common;

use std::collections::BTreeMap;

use common::{counter, leaf_spine, queue, LONG};
use dcqcn::DcqcnParams;
use sim::event::NodeId;
use sim::flows::{FlowSpec, Start};
use sim::host::HostConfig;
use sim::link::End;
use sim::runtime::{apply_entry, TableEntrySpec};
use sim::simulation::{RunEnd, Simulation};
use sim::time::{MS, US};

/// 64 frames of 1,000 bytes: BMv2's default queue, as a whole switch's buffer.
const SMALL_BUFFER: u64 = 64_000;

/// Empties `table` on every switch.
fn clear(sim: &mut Simulation, nodes: &BTreeMap<String, NodeId>, table: &str) {
    for node in nodes.values() {
        if let Ok(s) = sim.switch_mut(*node) {
            let t = s.core.table_id(table).unwrap();
            s.core.clear_table(t).unwrap();
        }
    }
}

/// A counter summed over every switch, its cells `0..cells`.
fn everywhere(sim: &Simulation, nodes: &BTreeMap<String, NodeId>, name: &str, cells: usize) -> u64 {
    nodes
        .values()
        .filter(|n| sim.switch(**n).is_ok())
        .map(|&n| (0..cells).map(|i| counter(sim, n, name, i)).sum::<u64>())
        .sum()
}

/// Buffer drops over every switch.
fn buffer_drops(sim: &Simulation, nodes: &BTreeMap<String, NodeId>) -> u64 {
    nodes
        .values()
        .filter_map(|n| sim.switch(*n).ok())
        .map(|s| s.core.drop_counts().buffer_full)
        .sum()
}

/// A flow of `packets` full packets from `src` to `dst` on its own connection `c`.
fn flow(
    sim: &Simulation,
    nodes: &BTreeMap<String, NodeId>,
    src: &str,
    dst: &str,
    c: u32,
    packets: u64,
) -> FlowSpec {
    let per = sim.host(nodes[src]).unwrap().payload_per_packet();
    FlowSpec {
        src: nodes[src],
        dst: nodes[dst],
        bytes: packets * per,
        start: Start::At(0),
        connection: c,
        qp: 0,
    }
}

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
    assert_eq!(sim.run(LONG, |_| true).unwrap(), RunEnd::Idle);
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
    sim.run(LONG, |_| true).unwrap();
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

/// The CNPs the senders of these incasts, h11 and h21, received.
fn senders_cnps(sim: &Simulation, nodes: &BTreeMap<String, NodeId>) -> u64 {
    ["h11", "h21"]
        .iter()
        .map(|h| sim.host(nodes[*h]).unwrap().stats.cnps_received)
        .sum()
}

/// h11 and h21 send 2,000 frames each to h31 (a 2:1 incast), without PFC, in a small buffer;
/// with `reaction`, DCQCN senders.
fn two_to_one(host: &HostConfig, reaction: bool) -> (Simulation, BTreeMap<String, NodeId>) {
    let host = HostConfig {
        dcqcn: reaction.then(DcqcnParams::default),
        ..host.clone()
    };
    let (mut sim, nodes) = leaf_spine(&host, Some(SMALL_BUFFER));
    clear(&mut sim, &nodes, "LosslessIngress.pfc_profile");
    for (c, src) in ["h11", "h21"].iter().enumerate() {
        let f = flow(&sim, &nodes, src, "h31", c as u32, 2000);
        sim.add_flow(f).unwrap();
    }
    assert_eq!(sim.run(LONG, |_| true).unwrap(), RunEnd::Idle);
    (sim, nodes)
}

#[test]
fn switch_cnps_and_dcqcn_bound_the_queue() {
    let (sim, nodes) = two_to_one(&common::host(1000), true);
    assert_eq!(
        buffer_drops(&sim, &nodes),
        0,
        "DCQCN kept the 2:1 incast within the buffer"
    );
    let h31 = sim.host(nodes["h31"]).unwrap();
    assert_eq!(h31.stats.cnps_sent, 0, "the receiver sent no CNP itself");
    assert_eq!(h31.stats.naks_sent, 0, "nothing was lost");
    let switch_cnps = everywhere(&sim, &nodes, "LosslessEgress.cnp_sent", 512);
    let got = senders_cnps(&sim, &nodes);
    assert!(got > 0, "the senders got CNPs");
    assert_eq!(
        got, switch_cnps,
        "every CNP the switches sent reached a sender"
    );
    for (_, _, t) in sim.flows().iter() {
        assert!(t.delivered.is_some());
    }
}

#[test]
fn without_reaction_the_same_incast_overflows() {
    let (sim, nodes) = two_to_one(&common::host(1000), false);
    assert!(buffer_drops(&sim, &nodes) > 0);
    let got = senders_cnps(&sim, &nodes);
    assert!(got > 0, "CNPs came, nobody reacted");
    assert!(
        sim.host(nodes["h31"]).unwrap().stats.naks_sent > 0,
        "losses, NAKs"
    );
    for (_, _, t) in sim.flows().iter() {
        assert!(
            t.delivered.is_some(),
            "and go-back-N still delivered everything"
        );
    }
}

#[test]
fn receiver_cnps_reach_the_sender_when_the_switches_send_none() {
    let host = HostConfig {
        cnp_interval: Some(50 * US),
        ..common::host(1000)
    };
    let host = HostConfig {
        dcqcn: Some(DcqcnParams::default()),
        ..host
    };
    let (mut sim, nodes) = leaf_spine(&host, Some(SMALL_BUFFER));
    clear(&mut sim, &nodes, "LosslessIngress.pfc_profile");
    clear(&mut sim, &nodes, "LosslessEgress.cnp_config");
    for (c, src) in ["h11", "h21"].iter().enumerate() {
        let f = flow(&sim, &nodes, src, "h31", c as u32, 2000);
        sim.add_flow(f).unwrap();
    }
    assert_eq!(sim.run(LONG, |_| true).unwrap(), RunEnd::Idle);
    assert_eq!(everywhere(&sim, &nodes, "LosslessEgress.cnp_sent", 512), 0);
    let answered = sim.host(nodes["h31"]).unwrap().stats.cnps_sent;
    assert!(answered > 0, "h31 answered CE marks with CNPs");
    let got = senders_cnps(&sim, &nodes);
    assert_eq!(got, answered, "every CNP h31 sent reached its sender");
}

const ECMP: u64 = 0;
const FLOWLET: u64 = 1;
const DLB: u64 = 2;
const SPRAY: u64 = 3;

/// What a workload did under one policy.
#[derive(Debug)]
struct Outcome {
    finished_us: u64,
    /// Packets the receiver dropped out of order.
    out_of_order: u64,
    /// Frames of the workload leaf1 sent to spine1 and to spine2.
    via_spine: [u64; 2],
    /// QPs that used both spines.
    flows_on_both: usize,
}

/// Four QPs from h11 to h21, 10 bursts of 10 packets each, a burst every 400 µs (the gap is
/// longer than the 100 µs flowlet timeout), under `policy`; leaf1's uplink to spine1 at
/// `spine1_mbps`.
fn lb_workload(policy: u64, spine1_mbps: u64) -> Outcome {
    let (mut sim, nodes) = leaf_spine(&common::host(1000), Some(2_000_000));
    clear(&mut sim, &nodes, "LosslessIngress.ecmp_group");
    let entry: TableEntrySpec = serde_json::from_value(serde_json::json!({
        "table": "LosslessIngress.ecmp_group",
        "match": {"meta.group": 1},
        "action_name": "LosslessIngress.set_group",
        "action_params": {"policy": policy, "size": 2, "flowlet_timeout_us": 100}
    }))
    .unwrap();
    for n in nodes.values() {
        if let Ok(s) = sim.switch_mut(*n) {
            apply_entry(&mut s.core, &entry).unwrap();
        }
    }
    let leaf1 = nodes["leaf1"];
    let up = |port| sim.link_from(End { node: leaf1, port }).unwrap();
    let (to_spine1, to_spine2) = (up(3), up(4));
    sim.link_mut(to_spine1).rate_bps = spine1_mbps * 1_000_000;
    sim.link_mut(to_spine1).count_qps();
    sim.link_mut(to_spine2).count_qps();
    let per = sim.host(nodes["h11"]).unwrap().payload_per_packet();
    for qp in 0..4u16 {
        for burst in 0..10u64 {
            sim.add_flow(FlowSpec {
                src: nodes["h11"],
                dst: nodes["h21"],
                bytes: 10 * per,
                start: Start::At(burst * 400 * US + u64::from(qp) * 20 * US),
                // A connection per QP: four 5-tuples, as four flows.
                connection: u32::from(qp),
                qp: 0,
            })
            .unwrap();
        }
    }
    assert_eq!(sim.run(LONG, |_| true).unwrap(), RunEnd::Idle);
    let qpns: Vec<u32> = (0..4).map(|qp| sim.qp_of(qp * 10).0).collect();
    let sent = sim.host(nodes["h11"]).unwrap().stats.data_packets;
    let via = |link| -> Vec<u64> {
        let counts = sim.links()[link as usize].qps.as_ref().unwrap();
        qpns.iter()
            .map(|q| counts.get(q).copied().unwrap_or(0))
            .collect()
    };
    let (one, two) = (via(to_spine1), via(to_spine2));
    assert_eq!(
        one.iter().sum::<u64>() + two.iter().sum::<u64>(),
        sent,
        "every packet sent went up once"
    );
    Outcome {
        finished_us: sim
            .flows()
            .iter()
            .filter_map(|(_, _, t)| t.delivered)
            .max()
            .unwrap()
            / US,
        out_of_order: sim.host(nodes["h21"]).unwrap().stats.out_of_order,
        via_spine: [one.iter().sum(), two.iter().sum()],
        flows_on_both: one
            .iter()
            .zip(&two)
            .filter(|(a, b)| **a > 0 && **b > 0)
            .count(),
    }
}

#[test]
fn ecmp_keeps_each_flow_on_one_spine_and_flowlets_move() {
    let ecmp = lb_workload(ECMP, 1000);
    assert_eq!(ecmp.flows_on_both, 0, "{ecmp:?}");
    assert_eq!(ecmp.out_of_order, 0);
    let flowlet = lb_workload(FLOWLET, 1000);
    assert!(
        flowlet.flows_on_both >= 2,
        "flowlets moved between spines: {flowlet:?}"
    );
    assert_eq!(
        flowlet.out_of_order, 0,
        "gaps longer than the path skew keep order"
    );
}

#[test]
fn policies_compared_on_the_same_flows() {
    println!("policy   finished_us  out_of_order  via_spine1  via_spine2  flows_on_both");
    let mut outcomes = Vec::new();
    for (name, policy) in [
        ("ecmp", ECMP),
        ("flowlet", FLOWLET),
        ("dlb", DLB),
        ("spray", SPRAY),
    ] {
        let o = lb_workload(policy, 100);
        println!(
            "{name:8} {:11} {:13} {:11} {:11} {:14}",
            o.finished_us, o.out_of_order, o.via_spine[0], o.via_spine[1], o.flows_on_both
        );
        outcomes.push(o);
    }
    let [ecmp, _, dlb, spray] = &outcomes[..] else {
        unreachable!()
    };
    assert!(
        spray.out_of_order > 0,
        "spraying over unequal paths reorders (and go-back-N repairs it)"
    );
    assert_eq!(ecmp.out_of_order, 0, "one path per flow never reorders");
    assert!(
        ecmp.via_spine[0] > 0,
        "ECMP hashes some QPs onto the slow spine"
    );
    assert!(
        dlb.via_spine[0] * 2 < ecmp.via_spine[0],
        "DLB sends less than half as much through the slow spine"
    );
    assert!(dlb.finished_us < ecmp.finished_us, "and finishes sooner");
    for o in &outcomes {
        assert!(
            dlb.via_spine[0] <= o.via_spine[0],
            "DLB uses the slow spine least"
        );
    }
}

#[test]
fn links_keep_the_files_latency_and_bandwidth() {
    let (sim, _) = leaf_spine(&common::host(1000), None);
    assert!(!sim.links().is_empty());
    for link in sim.links() {
        // The example's links are all ["a", "b", "2us", 1000].
        assert_eq!((link.delay_ps, link.rate_bps), (common::HOP, 1_000_000_000));
    }
}

#[test]
fn a_file_it_cannot_build_is_refused_by_its_key() {
    let dir = std::env::temp_dir().join(format!("sim-tutorial-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runtime = common::dataplane_p4().join("topologies/two-hosts/s1-runtime.json");
    let file = dir.join("topology.json");
    let program = common::lossless();
    let error = |host: &str, link: &str| {
        let text = format!(
            r#"{{"hosts": {{"h1": {{"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:01" {host}}}}},
                "switches": {{"s1": {{"runtime_json": "{}"}}}}, "links": [{link}]}}"#,
            runtime.display()
        );
        std::fs::write(&file, text).unwrap();
        sim::tutorial::load(&file, &program, &common::host(1000), None)
            .err()
            .expect("refused")
            .to_string()
    };
    let gateway = r#", "gateway_mac": "00:aa:11:00:00:01""#;
    // netfiles' limits, with the file named.
    let late = error(gateway, r#"["h1", "s1-p1", "11s"]"#);
    assert!(
        late.starts_with(&file.display().to_string())
            && late.contains(r#"links[0][2]: "11s": a number of ms"#)
            && late.ends_with("from 0 to 10s"),
        "{late}"
    );
    let port = error(gateway, r#"["h1", "s1-p511"]"#);
    assert!(port.contains("ports are 1..=510"), "{port}");
    // What the simulator alone needs.
    let no_gateway = error("", r#"["h1", "s1-p1"]"#);
    assert!(
        no_gateway.starts_with("hosts.h1.gateway_mac: the simulator needs"),
        "{no_gateway}"
    );
    std::fs::write(
        &file,
        r#"{"hosts": {}, "switches": {"s1": {}}, "links": []}"#,
    )
    .unwrap();
    let no_entries = sim::tutorial::load(&file, &program, &common::host(1000), None)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        no_entries.starts_with("switches.s1.runtime_json: the simulator needs one"),
        "{no_entries}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The ring of dataplane-p4/misconfigured/cbd-ring (`fixed`: its corrected routes), each host
/// sending 2,000 frames of 1,000 bytes to the host two switches clockwise.
fn ring(fixed: bool) -> (Simulation, BTreeMap<String, NodeId>) {
    let folder = common::dataplane_p4().join("misconfigured/cbd-ring");
    let folder = if fixed { folder.join("fixed") } else { folder };
    let (mut sim, nodes) = sim::tutorial::load(
        &folder.join("topology.json"),
        &common::lossless(),
        &common::host(1000),
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (c, (src, dst)) in [("h1", "h3"), ("h2", "h1"), ("h3", "h2")]
        .iter()
        .enumerate()
    {
        let f = flow(&sim, &nodes, src, dst, c as u32, 2000);
        sim.add_flow(f).unwrap();
    }
    (sim, nodes)
}

/// Data packets that have left a switch (any port), summed over the ring.
fn forwarded(sim: &Simulation, nodes: &BTreeMap<String, NodeId>) -> u64 {
    nodes
        .values()
        .filter_map(|n| sim.switch(*n).ok())
        .map(|s| s.stats.queue_bytes.len())
        .sum()
}

/// One ring switch's port to the next switch, lossless priority, up to some time.
#[derive(Clone, Copy, Debug, PartialEq)]
struct RingPort {
    /// How long it has been paused, ps.
    paused_ps: u64,
    /// PAUSE frames it has received (the next switch's program's and its MAC's refreshes).
    pauses_received: u64,
    /// Resumes the next switch's program has sent it (out of the next switch's port 3:
    /// lossless.p4 counts them by the upstream port).
    resumes: u64,
}

/// Per ring switch (s1, s2, s3): its port to the next switch, up to `now`.
fn ring_ports(sim: &Simulation, nodes: &BTreeMap<String, NodeId>, now: u64) -> Vec<RingPort> {
    ["s1", "s2", "s3"]
        .iter()
        .zip(["s2", "s3", "s1"])
        .map(|(s, next)| {
            let switch = sim.switch(nodes[*s]).unwrap();
            RingPort {
                paused_ps: switch.paused_ps(now)[2][3],
                pauses_received: switch.stats.pauses_received[2][3],
                resumes: counter(
                    sim,
                    nodes[next],
                    "LosslessEgress.pfc_resume_tx",
                    queue(3, 3),
                ),
            }
        })
        .collect()
}

/// The textbook cyclic buffer dependency (dataplane-p4/misconfigured/cbd-ring, the fabric
/// control/tests/check_cli.rs has `lossless check` report as a buffer cycle through the same
/// ports s1:2, s2:2, s3:2): once the three ring queues are each over XOFF, each waits on the
/// next, the switches' MACs keep the program's PAUSEs in force and no resume comes. From then
/// on nothing moves: for 20 ms no switch forwards a single packet, every ring port stays paused
/// throughout, and no flow ends. The fixed routes run every flow to its end without a PAUSE.
#[test]
fn routes_around_a_ring_freeze_it_under_pauses_held_forever_and_the_fixed_routes_run_clean() {
    const CLOSED: u64 = 5 * MS;
    const WINDOW: u64 = 20 * MS;
    let (mut sim, nodes) = ring(false);
    assert_eq!(sim.run(CLOSED, |_| true).unwrap(), RunEnd::TimeLimit);
    let before = forwarded(&sim, &nodes);
    let ports_before = ring_ports(&sim, &nodes, CLOSED);
    assert_eq!(
        sim.run(CLOSED + WINDOW, |_| true).unwrap(),
        RunEnd::TimeLimit
    );
    let ports_after = ring_ports(&sim, &nodes, CLOSED + WINDOW);
    assert_eq!(
        forwarded(&sim, &nodes),
        before,
        "the ring forwarded packets in the {WINDOW} ps after the deadlock formed"
    );
    for (s, (b, a)) in ports_before.iter().zip(&ports_after).enumerate() {
        let s = s + 1;
        assert_eq!(
            a.paused_ps - b.paused_ps,
            WINDOW,
            "s{s}'s port to the next switch was paused throughout"
        );
        // A PAUSE of 977 quanta lasts 500 µs at 1 Gb/s: held for 20 ms, it was re-sent.
        assert!(
            a.pauses_received >= b.pauses_received + WINDOW / (500 * US),
            "the switch after s{s} kept its pause in force: {b:?} then {a:?}"
        );
        assert_eq!(
            a.resumes, b.resumes,
            "the switch after s{s} never resumed it"
        );
    }
    assert!(sim.flows().iter().all(|(_, _, t)| t.delivered.is_none()));

    let (mut fixed, fixed_nodes) = ring(true);
    assert_eq!(fixed.run(LONG, |_| true).unwrap(), RunEnd::Idle);
    assert!(
        fixed.flows().iter().all(|(_, _, t)| t.delivered.is_some()),
        "with the previous switch's /24 routed back, every flow ends"
    );
    let switch_pauses: u64 = fixed_nodes
        .values()
        .filter_map(|n| fixed.switch(*n).ok())
        .flat_map(|s| s.stats.pauses_received.iter().map(|p| p[3]))
        .sum();
    let host_pauses: u64 = fixed_nodes
        .values()
        .filter_map(|n| fixed.host(*n).ok())
        .map(|h| h.stats.pauses_received)
        .sum();
    assert_eq!(
        (switch_pauses, host_pauses),
        (0, 0),
        "no queue of the fixed ring reached XOFF"
    );
}
