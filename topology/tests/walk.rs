//! Generated fabrics with every switch running lossless.p4 (softswitch's core) with the entries
//! this crate computes: a RoCEv2 frame (built by `wire`) from a host is walked hop by hop, each
//! switch's output delivered over the link the fabric says that port has, until it reaches a
//! host. It must reach the host it is addressed to, with that host's MAC from the MAC of the
//! port it hangs on, its ICRC and IPv4 checksum intact (`wire` parses it), its TTL less one per
//! switch; its path must go up then down and be as short as the live fabric allows (a
//! breadth-first search over the fabric, which knows nothing of the routes); ECMP groups must
//! spread flows over every uplink of a tier. After a failure, the changed entries are applied
//! to the running switches, and every host the live fabric still joins is still reached,
//! through nothing that failed.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::OnceLock;

use softswitch_core::ir::Program;
use softswitch_core::switch::{Clock, Switch};
use topology::entries::{self, Changes};
use topology::fabric::{End, Fabric, HostId, SwitchId};
use topology::{Failures, Policy, Spec, Tuning};
use wire::bth::{self, Opcode};
use wire::ethernet::Vlan;
use wire::ip::Ecn;
use wire::roce::RoceFrame;

/// lossless.p4, compiled once.
fn lossless() -> &'static Program {
    static PROGRAM: OnceLock<Program> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataplane-p4/lossless.p4");
        let mut map = softswitch_frontend::source::SourceMap::new();
        let text = std::fs::read_to_string(&path).expect("lossless.p4");
        let file = map.add(path.display().to_string(), text);
        softswitch_frontend::compile(&mut map, file)
            .unwrap_or_else(|d| panic!("{}", d.render(&map)))
            .program
    })
}

/// A fabric of running switches.
struct Running {
    fabric: Fabric,
    tuning: Tuning,
    switches: Vec<Switch>,
    configs: Vec<p4values::runtime_json::RuntimeConfig>,
    failures: Failures,
}

/// Where a frame went.
#[derive(Debug)]
struct Trip {
    /// Each switch it crossed, with the port it came in on and the one it left by.
    hops: Vec<(SwitchId, u16, u16)>,
    /// The host it reached and the frame as it arrived.
    arrived: Option<(HostId, Vec<u8>)>,
}

impl Running {
    fn new(spec: &str, tuning: Tuning) -> Running {
        let fabric = topology::build(&Spec::parse(spec).unwrap());
        let configs = entries::compute(&fabric, &tuning).unwrap();
        let switches = configs
            .iter()
            .map(|config| {
                let mut switch = Switch::new(lossless().clone(), Clock::Virtual(0));
                sim::runtime::apply(config, &mut switch).unwrap();
                switch
            })
            .collect();
        Running {
            fabric,
            tuning,
            switches,
            configs,
            failures: Failures::none(),
        }
    }

    /// Fails what `failures` names and applies the changed entries to the running switches.
    fn fail(&mut self, failures: Failures) {
        let new = entries::compute_with_failures(&self.fabric, &self.tuning, &failures).unwrap();
        for (i, config) in new.iter().enumerate() {
            let changes = entries::changes(&self.configs[i], config);
            apply_changes(&mut self.switches[i], &changes);
        }
        self.configs = new;
        self.failures = failures;
    }

    /// Sends a RoCEv2 frame from `from` to `to` with UDP source port `sport` and destination
    /// QP `qp`, and follows it.
    fn send(&mut self, from: HostId, to: Ipv4Addr, sport: u16, qp: u32) -> Trip {
        let host = self.fabric.host(from);
        let frame = RoceFrame {
            src_mac: host.mac,
            dst_mac: host.gateway_mac,
            vlan: Vlan::Untagged,
            src_ip: IpAddr::V4(host.ip),
            dst_ip: IpAddr::V4(to),
            dscp: topology::tuning::DSCP_DATA,
            ecn: Ecn::Ect0,
            ttl: 64,
            flow_label: 0,
            src_port: sport,
            bth: bth::Repr::new(Opcode::RcSendOnly, qp, 7),
            payload_len: 64,
        };
        let mut data = vec![0; frame.buffer_len()];
        frame.emit(&mut data, |p| p.fill(0x5a)).unwrap();
        let mut trip = Trip {
            hops: Vec::new(),
            arrived: None,
        };
        let (mut switch, mut port) = host.attachment;
        for _ in 0..16 {
            let s = &mut self.switches[switch.0];
            s.receive(port, data);
            let outputs: Vec<_> = s.drain_outputs().collect();
            let [out] = &outputs[..] else {
                // Dropped (no route), or more than one frame (which a lone frame never makes).
                assert!(
                    outputs.is_empty(),
                    "{} sent {outputs:?}",
                    self.fabric.switch(switch).name
                );
                return trip;
            };
            trip.hops.push((switch, port, out.port));
            let sent = self
                .fabric
                .switch(switch)
                .port(out.port)
                .expect("a wired port");
            assert!(
                self.failures.port_up(&self.fabric, switch, out.port),
                "{} sent into {}, which failed",
                self.fabric.switch(switch).name,
                self.fabric.describe_link(sent.link)
            );
            data = out.data.clone();
            match sent.peer {
                End::Host(h) => {
                    trip.arrived = Some((h, data));
                    return trip;
                }
                End::Switch(next, p) => (switch, port) = (next, p),
            }
        }
        panic!(
            "a frame from {} to {to} went round: {trip:?}",
            self.fabric.host(from).name
        );
    }

    /// Walks one frame from `from` to `to` and checks everything about its trip; returns it.
    fn check_walk(&mut self, from: HostId, to: HostId, sport: u16, qp: u32) -> Trip {
        let dst = self.fabric.host(to).clone();
        let trip = self.send(from, dst.ip, sport, qp);
        let name = format!("{} -> {}", self.fabric.host(from).name, dst.name);
        let (got, frame) = trip
            .arrived
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: lost at {:?}", trip.hops));
        assert_eq!(*got, to, "{name}: reached {}", self.fabric.host(*got).name);
        let (roce, payload) = RoceFrame::parse(frame).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(roce.dst_mac, dst.mac, "{name}");
        assert_eq!(roce.src_mac, dst.gateway_mac, "{name}");
        assert_eq!(roce.ttl as usize, 64 - trip.hops.len(), "{name}");
        assert_eq!((roce.src_port, roce.bth.dest_qp), (sport, qp), "{name}");
        assert!(payload.iter().all(|b| *b == 0x5a), "{name}");
        assert!(
            self.up_then_down(&trip),
            "{name}: not up then down: {:?}",
            self.path_names(&trip)
        );
        assert_eq!(
            Some(trip.hops.len()),
            self.shortest(from, to),
            "{name}: not a shortest path: {:?}",
            self.path_names(&trip)
        );
        trip
    }

    /// The fewest switches between two hosts over what is up, by breadth-first search.
    fn shortest(&self, from: HostId, to: HostId) -> Option<usize> {
        let f = &self.fabric;
        let up = |h: HostId| !self.failures.links.contains(&f.host(h).link);
        if !up(from) || !up(to) {
            return None;
        }
        let (start, goal) = (f.host(from).attachment.0, f.host(to).attachment.0);
        let mut seen = BTreeMap::from([(start, 1)]);
        let mut queue = VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            if self.failures.switches.contains(&s) {
                continue;
            }
            if s == goal {
                return Some(seen[&s]);
            }
            for port in &f.switch(s).ports {
                if let End::Switch(next, _) = port.peer {
                    if self.failures.port_up(f, s, port.number) && !seen.contains_key(&next) {
                        seen.insert(next, seen[&s] + 1);
                        queue.push_back(next);
                    }
                }
            }
        }
        None
    }

    /// Whether a trip's switches climb tier by tier, then only descend: no valley.
    fn up_then_down(&self, trip: &Trip) -> bool {
        let tiers: Vec<u8> = trip
            .hops
            .iter()
            .map(|h| self.fabric.switch(h.0).tier)
            .collect();
        let peak = tiers
            .iter()
            .position(|t| Some(t) == tiers.iter().max())
            .unwrap_or(0);
        let (up, down) = tiers.split_at(peak);
        up.windows(2).all(|w| w[0] < w[1])
            && up
                .last()
                .is_none_or(|t| down.first().is_some_and(|p| t < p))
            && down.windows(2).all(|w| w[0] > w[1])
    }

    fn path_names(&self, trip: &Trip) -> Vec<String> {
        trip.hops
            .iter()
            .map(|(s, i, o)| format!("{}:{i}>{o}", self.fabric.switch(*s).name))
            .collect()
    }

    /// Walks a frame between every pair of `sources` and `destinations` (every host when
    /// `None`): what the live fabric joins arrives, what it does not is dropped.
    fn check_pairs(
        &mut self,
        sources: Option<&[HostId]>,
        destinations: Option<&[HostId]>,
    ) -> usize {
        let all: Vec<HostId> = (0..self.fabric.hosts.len()).map(HostId).collect();
        let mut walked = 0;
        for &from in sources.unwrap_or(&all) {
            for &to in destinations.unwrap_or(&all) {
                if from == to {
                    continue;
                }
                if self.shortest(from, to).is_some() {
                    self.check_walk(from, to, 49152, 0x11);
                    walked += 1;
                } else if !self.failures.links.contains(&self.fabric.host(from).link) {
                    let ip = self.fabric.host(to).ip;
                    let trip = self.send(from, ip, 49152, 0x11);
                    assert!(
                        trip.arrived.is_none(),
                        "reached a host the fabric cannot: {trip:?}"
                    );
                }
            }
        }
        walked
    }

    /// The uplinks of every switch that frames between the given pairs took, over `flows`
    /// flows each: UDP source ports spread as RoCE NICs spread them (rdma-core's
    /// `rdma_get_udp_sport`: 0xC000 and 14 bits of a hash of the QPs; here a multiplicative
    /// hash of the flow's number), or, `by_qp`, QPs numbered in a row with one source port, as
    /// a connection's QPs are.
    fn uplinks_used(
        &mut self,
        pairs: &[(HostId, HostId)],
        flows: u16,
        by_qp: bool,
    ) -> BTreeMap<SwitchId, BTreeSet<u16>> {
        let mut used: BTreeMap<SwitchId, BTreeSet<u16>> = BTreeMap::new();
        for &(from, to) in pairs {
            for f in 0..flows {
                let (sport, qp) = if by_qp {
                    (0xC123, 0x100 + u32::from(f))
                } else {
                    (0xC000 | (f.wrapping_mul(40503) & 0x3FFF), 0x11)
                };
                let trip = self.check_walk(from, to, sport, qp);
                for (s, _, out) in trip.hops {
                    let me = self.fabric.switch(s);
                    if me.uplinks(&self.fabric).any(|p| p.number == out) {
                        used.entry(s).or_default().insert(out);
                    }
                }
            }
        }
        used
    }

    fn host(&self, name: &str) -> HostId {
        self.fabric
            .host_named(name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    fn switch(&self, name: &str) -> SwitchId {
        self.fabric
            .switch_named(name)
            .unwrap_or_else(|| panic!("no switch {name}"))
    }

    /// Every uplink of `switch`.
    fn all_uplinks(&self, switch: SwitchId) -> BTreeSet<u16> {
        self.fabric
            .switch(switch)
            .uplinks(&self.fabric)
            .map(|p| p.number)
            .collect()
    }
}

/// Applies `changes` to `switch` through its runtime interface, as a P4Runtime client would:
/// additions, modifications of the entry with the same key, removals.
fn apply_changes(switch: &mut Switch, changes: &Changes) {
    for e in &changes.add {
        sim::runtime::apply_entry(switch, e).unwrap();
    }
    for e in changes.modify.iter().chain(&changes.remove) {
        if e.default_action {
            sim::runtime::apply_entry(switch, e).unwrap();
            continue;
        }
        let table = switch.table_id(&e.table).unwrap();
        // The entry's key and action as the runtime reader reads them: from a scratch switch.
        let mut scratch = Switch::new(lossless().clone(), Clock::Virtual(0));
        sim::runtime::apply_entry(&mut scratch, e).unwrap();
        let (_, installed) = scratch.entries(table).unwrap().next().unwrap();
        let key = installed.entry.matches.clone();
        let action = installed.entry.action.clone();
        let handle = switch.entry_by_key(table, &key, None).unwrap().unwrap();
        if changes.modify.contains(e) {
            switch.modify_entry(table, handle, action).unwrap();
        } else {
            switch.remove_entry(table, handle).unwrap();
        }
    }
}

#[test]
fn leaf_spine_joins_every_pair() {
    let mut r = Running::new("leaf-spine:2,3,2", Tuning::default());
    assert_eq!(r.check_pairs(None, None), 30);
}

#[test]
fn fat_tree_4_joins_every_pair() {
    let mut r = Running::new("fat-tree:4", Tuning::default());
    assert_eq!(r.check_pairs(None, None), 16 * 15);
}

/// k = 8 has 128 hosts: every host sends to a sample of 12 (3 per pod, on different edges,
/// so that each source has destinations on its edge's neighbours, in its pod and beyond),
/// and the 12 send to everyone.
#[test]
fn fat_tree_8_joins_a_sample_of_pairs_every_way() {
    let mut r = Running::new("fat-tree:8,speed=400G,host-speed=100G", Tuning::default());
    let sample: Vec<HostId> = (0..4u16)
        .flat_map(|p| (0..3u16).map(move |e| (p * 2, e, e % 4)))
        .map(|(p, e, h)| r.host(&format!("h{p}_{e}_{h}")))
        .collect();
    assert_eq!(r.check_pairs(None, Some(&sample)), 128 * 12 - 12);
    assert_eq!(r.check_pairs(Some(&sample), None), 12 * 127);
}

#[test]
fn rail_optimised_joins_every_pair() {
    let mut r = Running::new("rail:2,4,4,os=2", Tuning::default());
    assert_eq!(r.check_pairs(None, None), 32 * 31);
    // The same NIC of two servers of a unit: one switch apart.
    let trip = r.check_walk(r.host("h1_1_3"), r.host("h1_4_3"), 49152, 1);
    assert_eq!(r.path_names(&trip), ["leaf1_3:1>4"]);
    // Another rail, or another unit: through a spine.
    assert_eq!(
        r.check_walk(r.host("h1_1_3"), r.host("h1_1_2"), 49152, 1)
            .hops
            .len(),
        3
    );
    assert_eq!(
        r.check_walk(r.host("h1_1_3"), r.host("h2_1_3"), 49152, 1)
            .hops
            .len(),
        3
    );
}

/// 64 flows between hosts in different pods take every uplink of every switch they climb
/// through; under e-ecmp so do 64 QPs of one 5-tuple, which under ecmp all take one path.
#[test]
fn ecmp_spreads_flows_over_every_uplink_of_every_tier() {
    let mut r = Running::new("fat-tree:8", Tuning::default());
    let pairs = [
        (r.host("h0_0_0"), r.host("h5_3_1")),
        (r.host("h3_2_1"), r.host("h3_0_0")),
    ];
    let used = r.uplinks_used(&pairs, 64, false);
    for (s, ports) in &used {
        assert_eq!(ports, &r.all_uplinks(*s), "{}", r.fabric.switch(*s).name);
    }
    // The two sources' edges and pod 0's four aggregation switches (pod 3's are passed going down).
    assert_eq!(used.len(), 2 + 4, "{used:?}");
    let one = r.uplinks_used(&pairs[..1], 64, true);
    assert!(
        one.values().all(|ports| ports.len() == 1),
        "ecmp moved QPs: {one:?}"
    );

    let mut e = Running::new(
        "fat-tree:8",
        Tuning {
            policy: Policy::EEcmp,
            ..Tuning::default()
        },
    );
    let used = e.uplinks_used(&pairs[..1], 64, true);
    let edge = e.switch("e0_0");
    assert_eq!(used[&edge], e.all_uplinks(edge), "e-ecmp kept QPs together");
    assert!(
        used.values().filter(|p| p.len() > 1).count() >= 4,
        "{used:?}"
    );

    let mut rail = Running::new("rail:1,8,2,os=2", Tuning::default());
    let used = rail.uplinks_used(&[(rail.host("h1_1_1"), rail.host("h1_2_2"))], 64, false);
    let leaf = rail.switch("leaf1_1");
    assert_eq!(used[&leaf], rail.all_uplinks(leaf));
}

#[test]
fn leaf_spine_routes_around_a_failed_uplink_and_spine() {
    let mut r = Running::new("leaf-spine:3,3,2", Tuning::default());
    let link = r.fabric.link_named("leaf2:3").unwrap();
    r.fail(Failures::of_links([link]));
    assert_eq!(r.check_pairs(None, None), 30);
    let spine = r.switch("spine2");
    r.fail(Failures::of_switches([spine]));
    assert_eq!(r.check_pairs(None, None), 30);
    // Back to intact: the changes lead back to the first entries.
    r.fail(Failures::none());
    assert_eq!(r.check_pairs(None, None), 30);
}

#[test]
fn fat_tree_routes_around_failed_links_and_switches() {
    let mut r = Running::new("fat-tree:4", Tuning::default());
    // An edge-aggregation link, an aggregation-core link, a host's link.
    let edge_agg = r.fabric.link_named("a1_0:2").unwrap();
    let agg_core = r.fabric.link_named("a2_1:3").unwrap();
    let host = r.fabric.host(r.host("h3_1_0")).link;
    r.fail(Failures::of_links([edge_agg, agg_core, host]));
    assert_eq!(r.check_pairs(None, None), 15 * 14);
    // A core and an aggregation switch.
    let (core, agg) = (r.switch("c0_1"), r.switch("a0_1"));
    r.fail(Failures::of_switches([core, agg]));
    assert_eq!(r.check_pairs(None, None), 16 * 15);
    // Every path out of pod 0 is gone with both its aggregation switches: pod 0 keeps to
    // itself, edge by edge.
    let both = [r.switch("a0_0"), r.switch("a0_1")];
    r.fail(Failures::of_switches(both));
    let walked = r.check_pairs(None, None);
    assert_eq!(
        walked,
        16 * 15 - 4 * 12 * 2 - 4 * 2,
        "pod 0's hosts reach only their edge mates"
    );
}

#[test]
fn rail_routes_around_a_failed_uplink() {
    let mut r = Running::new("rail:2,4,2,os=2", Tuning::default());
    let link = r.fabric.link_named("leaf2_1:5").unwrap();
    r.fail(Failures::of_links([link]));
    assert_eq!(r.check_pairs(None, None), 16 * 15);
}

/// A frame to an address that is nobody's — a host missing from a subnet, a subnet missing
/// from an area, an area missing from the fabric — goes up, or down towards where it would be,
/// and is dropped without coming back up: no loop, no valley.
#[test]
fn addresses_of_no_host_are_dropped_without_a_loop() {
    for (spec, from, nowhere) in [
        (
            "fat-tree:4",
            "h0_0_0",
            ["10.3.1.99", "10.3.7.1", "10.9.0.1", "10.0.0.99"],
        ),
        (
            "leaf-spine:2,3,2",
            "h11",
            ["10.0.3.99", "10.0.9.1", "10.9.0.1", "10.0.1.99"],
        ),
        (
            "rail:2,2,2",
            "h1_1_1",
            ["10.2.2.99", "10.2.9.1", "10.9.1.1", "10.1.1.99"],
        ),
    ] {
        let mut r = Running::new(spec, Tuning::default());
        for ip in nowhere {
            let trip = r.send(r.host(from), ip.parse().unwrap(), 49152, 1);
            assert!(trip.arrived.is_none(), "{spec}: {ip} reached a host");
            assert!(
                r.up_then_down(&trip),
                "{spec}: {ip} came back up: {:?}",
                r.path_names(&trip)
            );
        }
    }
}
