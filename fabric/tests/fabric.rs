//! Multi-hop behaviour of lossless.p4 in the in-process fabric: the example leaf/spine topology
//! (dataplane-p4/topologies/leaf-spine: two spines, three leaves, two hosts per leaf, 1 Gb/s
//! links, priority 3 lossless and ECN-marked, switch CNPs on) with its runtime files.

mod common;

use dcqcn::DcqcnParams;
use fabric::host::FlowSpec;
use fabric::runtime::{apply_entry, TableEntrySpec};
use fabric::sim::{counter, Fabric, FabricConfig};
use fabric::topology::parse_ipv4;

const LINE_BPS: f64 = 1e9;
const FRAME: usize = 1000;
const PRIORITY: u8 = 3;

fn leaf_spine() -> Fabric {
    let topo = common::dataplane_p4().join("topologies/leaf-spine/topology.json");
    Fabric::load(&topo, &common::lossless(), FabricConfig::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn ip(host: &str) -> u32 {
    let (l, h) = (&host[1..2], &host[2..3]);
    parse_ipv4(&format!("10.0.{l}.{h}")).unwrap()
}

fn flow(dst: &str, qp: u32, packets: u64) -> FlowSpec {
    let sport = 49152 + qp as u16;
    FlowSpec {
        dst_ip: ip(dst),
        qp,
        sport,
        packets,
        frame_bytes: FRAME,
        rate_bps: LINE_BPS,
        start_us: 0,
        burst: 0,
        gap_us: 0,
        dcqcn: None,
    }
}

/// Three senders at line rate into h31: 3:1 oversubscription of leaf3's port to h31.
fn incast(f: &mut Fabric, packets: u64) {
    for (i, src) in ["h11", "h12", "h21"].iter().enumerate() {
        f.host(src).add_flow(flow("h31", 0x100 + i as u32, packets));
    }
}

fn received(f: &mut Fabric, dst: &str) -> u64 {
    f.host(dst).received.values().map(|r| r.packets).sum()
}

/// Removes every entry of `table` on every switch.
fn clear(f: &mut Fabric, table: &str) {
    for node in &mut f.switches {
        let t = node.switch.table_id(table).expect("a table of lossless.p4");
        node.switch.clear_table(t).expect("not a const table");
    }
}

/// A counter summed over every switch and port, indexed by `index(port)`.
fn everywhere(f: &Fabric, name: &str, index: impl Fn(u16) -> usize) -> u64 {
    f.switches
        .iter()
        .flat_map(|s| s.ports.keys().map(|&p| counter(&s.switch, name, index(p))))
        .sum()
}

fn queue(port: u16) -> usize {
    (usize::from(port) << 3) | usize::from(PRIORITY)
}

#[test]
fn incast_with_pfc_loses_nothing_and_pauses_upstream() {
    let mut f = leaf_spine();
    incast(&mut f, 300);
    assert!(f.run(1_000_000), "the fabric did not drain");
    assert_eq!(received(&mut f, "h31"), 900, "every frame arrives");
    assert_eq!(
        f.tail_drops(PRIORITY),
        0,
        "no drop in the lossless priority"
    );
    let leaf3 = f.switch("leaf3");
    let paused_spines = counter(leaf3, "LosslessIngress.pfc_pause_tx", queue(3))
        + counter(leaf3, "LosslessIngress.pfc_pause_tx", queue(4));
    assert!(paused_spines > 0, "leaf3 paused the spines");
    let resumed_spines = counter(leaf3, "LosslessEgress.pfc_resume_tx", queue(3))
        + counter(leaf3, "LosslessEgress.pfc_resume_tx", queue(4));
    let spine_rx: u64 = ["spine1", "spine2"]
        .iter()
        .map(|s| counter(f.switch(s), "LosslessIngress.pfc_rx", queue(3)))
        .sum();
    assert_eq!(
        spine_rx,
        paused_spines + resumed_spines,
        "the spines got every PFC frame leaf3 sent"
    );
    let held: u64 = ["spine1", "spine2"]
        .iter()
        .map(|s| counter(f.switch(s), "LosslessEgress.pfc_hold", queue(3)))
        .sum();
    assert!(held > 0, "the spines held frames for the paused port");
    assert!(
        f.max_queue("spine1", 3, PRIORITY) + f.max_queue("spine2", 3, PRIORITY) > 0,
        "the spines' queues to leaf3 built up instead of dropping"
    );
    for leaf in ["leaf1", "leaf2"] {
        let paused: u64 = [3, 4]
            .iter()
            .map(|&p| counter(f.switch(leaf), "LosslessIngress.pfc_rx", queue(p)))
            .sum();
        assert!(paused > 0, "the spines paused {leaf} in turn");
    }
    assert!(
        f.host("h11").pauses_received > 0,
        "and leaf1 paused its hosts"
    );
    let reordered: u64 = f.host("h31").received.values().map(|r| r.reordered).sum();
    assert_eq!(reordered, 0, "holding keeps each flow in order");
    assert_eq!(f.host("h31").bad_icrc, 0);
}

#[test]
fn incast_without_pfc_drops() {
    let mut f = leaf_spine();
    clear(&mut f, "LosslessIngress.pfc_profile");
    incast(&mut f, 300);
    assert!(f.run(1_000_000));
    let drops = f.tail_drops(PRIORITY);
    assert!(drops > 0, "a 3:1 incast overflows a 64-packet queue");
    assert_eq!(received(&mut f, "h31") + drops, 900);
    let leaf3 = f.switch("leaf3");
    assert_eq!(counter(leaf3, "LosslessIngress.pfc_pause_tx", queue(3)), 0);
}

#[test]
fn switch_cnps_and_dcqcn_bound_the_queue() {
    let mut f = leaf_spine();
    clear(&mut f, "LosslessIngress.pfc_profile");
    for (i, src) in ["h11", "h21"].iter().enumerate() {
        let mut spec = flow("h31", 0x200 + i as u32, 2000);
        spec.dcqcn = Some(DcqcnParams::default());
        f.host(src).add_flow(spec);
    }
    assert!(f.run(1_000_000));
    assert_eq!(
        f.tail_drops(PRIORITY),
        0,
        "DCQCN kept the 2:1 incast from overflowing"
    );
    let (max, switch, port) = f.deepest_queue(PRIORITY);
    assert!(
        max < 64,
        "the bottleneck queue never filled: {max} packets at {switch} port {port}"
    );
    assert_eq!(received(&mut f, "h31"), 4000);
    assert_eq!(
        f.host("h31").cnps_sent,
        0,
        "the receiver sent no CNP itself"
    );
    let switch_cnps = everywhere(&f, "LosslessEgress.cnp_sent", usize::from);
    let got: u64 = ["h11", "h21"].iter().map(|h| f.host(h).flows[0].cnps).sum();
    assert_eq!(
        got, switch_cnps,
        "every CNP the switches sent reached a sender"
    );
    for src in ["h11", "h21"] {
        let host = f.host(src);
        assert!(host.flows[0].cnps > 0, "{src} got CNPs");
        assert_eq!(host.bad_icrc, 0, "the switch's CNPs carry a valid ICRC");
    }
}

#[test]
fn without_reaction_the_same_incast_overflows() {
    let mut f = leaf_spine();
    clear(&mut f, "LosslessIngress.pfc_profile");
    for (i, src) in ["h11", "h21"].iter().enumerate() {
        f.host(src).add_flow(flow("h31", 0x200 + i as u32, 2000));
    }
    assert!(f.run(1_000_000));
    assert!(f.tail_drops(PRIORITY) > 0);
    assert_eq!(f.deepest_queue(PRIORITY).0, 64);
    assert!(f.host("h11").flows[0].cnps > 0, "CNPs came, nobody reacted");
}

const ECMP: u64 = 0;
const FLOWLET: u64 = 1;
const DLB: u64 = 2;
const SPRAY: u64 = 3;

/// Sets the policy of ECMP group 1 (leaf uplinks to the spines) on every leaf.
fn set_policy(f: &mut Fabric, policy: u64) {
    clear(f, "LosslessIngress.ecmp_group");
    let entry: TableEntrySpec = serde_json::from_value(serde_json::json!({
        "table": "LosslessIngress.ecmp_group",
        "match": {"meta.group": 1},
        "action_name": "LosslessIngress.set_group",
        "action_params": {"policy": policy, "size": 2, "flowlet_timeout_us": 100}
    }))
    .unwrap();
    for node in &mut f.switches {
        apply_entry(&mut node.switch, &entry).unwrap();
    }
}

/// What a workload did under one policy.
#[derive(Debug)]
struct Outcome {
    finished_us: u64,
    reordered: u64,
    /// Frames of the workload leaf1 sent to spine1 and to spine2.
    via_spine: [u64; 2],
    /// Flows that used both spines.
    flows_on_both: usize,
    received: u64,
}

/// Four flows from h11 to h21, 100 frames each at 250 Mb/s, in bursts of 10 with 300 µs gaps
/// (longer than the 100 µs flowlet timeout), under `policy`; leaf1's uplink to spine1 at
/// `spine1_mbps`.
fn lb_workload(policy: u64, spine1_mbps: u64) -> Outcome {
    let mut f = leaf_spine();
    set_policy(&mut f, policy);
    f.set_port_rate("leaf1", 3, spine1_mbps * 1_000_000)
        .unwrap();
    let flows: Vec<FlowSpec> = (0..4)
        .map(|i| FlowSpec {
            rate_bps: 250e6,
            burst: 10,
            gap_us: 300,
            ..flow("h21", 0x300 + i, 100)
        })
        .collect();
    for spec in &flows {
        f.host("h11").add_flow(spec.clone());
    }
    assert!(f.run(10_000_000));
    let h11 = ip("h11");
    let via = |port: u16| -> Vec<u64> {
        let link = f.link_from("leaf1", port);
        flows
            .iter()
            .map(|s| link.flows.get(&(h11, s.sport)).copied().unwrap_or(0))
            .collect()
    };
    let (one, two) = (via(3), via(4));
    let rx = &f.host("h21").received;
    Outcome {
        finished_us: rx.values().map(|r| r.last_us).max().unwrap_or(0),
        reordered: rx.values().map(|r| r.reordered).sum(),
        via_spine: [one.iter().sum(), two.iter().sum()],
        flows_on_both: one
            .iter()
            .zip(&two)
            .filter(|(a, b)| **a > 0 && **b > 0)
            .count(),
        received: rx.values().map(|r| r.packets).sum(),
    }
}

#[test]
fn ecmp_keeps_each_flow_on_one_spine_and_flowlets_move() {
    let ecmp = lb_workload(ECMP, 1000);
    assert_eq!(ecmp.flows_on_both, 0, "{ecmp:?}");
    assert_eq!(ecmp.reordered, 0);
    let flowlet = lb_workload(FLOWLET, 1000);
    assert!(
        flowlet.flows_on_both >= 2,
        "flowlets moved between spines: {flowlet:?}"
    );
    assert_eq!(
        flowlet.reordered, 0,
        "gaps longer than the path skew keep order"
    );
    assert_eq!((ecmp.received, flowlet.received), (400, 400));
}

#[test]
fn dlb_avoids_a_slow_spine() {
    let ecmp = lb_workload(ECMP, 100);
    let dlb = lb_workload(DLB, 100);
    println!("slow spine1 (100 Mb/s uplink from leaf1):\n  ecmp {ecmp:?}\n  dlb  {dlb:?}");
    assert!(
        ecmp.via_spine[0] > 0,
        "ECMP hashes some flows onto the slow spine"
    );
    assert!(
        dlb.via_spine[0] * 2 < ecmp.via_spine[0],
        "DLB sends less than half as much through the slow spine"
    );
    assert!(dlb.finished_us < ecmp.finished_us, "and finishes sooner");
    assert_eq!(dlb.received, 400);
}

#[test]
fn policies_compared_on_the_same_flows() {
    println!("policy   finished_us  reordered  via_spine1  via_spine2  flows_on_both");
    let mut outcomes = Vec::new();
    for (name, policy) in [
        ("ecmp", ECMP),
        ("flowlet", FLOWLET),
        ("dlb", DLB),
        ("spray", SPRAY),
    ] {
        let o = lb_workload(policy, 100);
        println!(
            "{name:8} {:11} {:10} {:11} {:11} {:14}",
            o.finished_us, o.reordered, o.via_spine[0], o.via_spine[1], o.flows_on_both
        );
        assert_eq!(o.received, 400, "{name} lost nothing");
        outcomes.push(o);
    }
    let [ecmp, _, dlb, spray] = &outcomes[..] else {
        unreachable!()
    };
    assert!(spray.reordered > 0, "spraying over unequal paths reorders");
    assert_eq!(ecmp.reordered, 0, "one path per flow never reorders");
    assert!(dlb.finished_us < ecmp.finished_us);
    for o in &outcomes {
        assert!(
            dlb.via_spine[0] <= o.via_spine[0],
            "DLB uses the slow spine least"
        );
    }
}

#[test]
fn receiver_cnps_reach_the_sender_when_the_switches_send_none() {
    let mut f = leaf_spine();
    clear(&mut f, "LosslessIngress.pfc_profile");
    clear(&mut f, "LosslessEgress.cnp_config");
    f.host("h31").cnp_interval_us = Some(50);
    for (i, src) in ["h11", "h21"].iter().enumerate() {
        let mut spec = flow("h31", 0x400 + i as u32, 2000);
        spec.dcqcn = Some(DcqcnParams::default());
        f.host(src).add_flow(spec);
    }
    assert!(f.run(1_000_000));
    assert_eq!(everywhere(&f, "LosslessEgress.cnp_sent", usize::from), 0);
    let answered = f.host("h31").cnps_sent;
    assert!(answered > 0, "h31 answered CE marks with CNPs");
    let got: u64 = ["h11", "h21"].iter().map(|h| f.host(h).flows[0].cnps).sum();
    assert_eq!(got, answered, "every CNP h31 sent reached its sender");
    assert_eq!(received(&mut f, "h31"), 4000);
}
