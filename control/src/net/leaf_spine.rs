//! `lossless net`'s generated fabrics: `leaf-spine:S,L,H` (S spines, L leaves, H hosts per
//! leaf), built by the topology crate with the lossless.p4 entries it computes for every switch
//! (docs/topologies.md), turned into the [`Network`] Mininet brings up. The crate names,
//! addresses and wires it: leaf L's ports 1..=H to its hosts `h<L><H>` at 10.0.L.H/24, H+S' to
//! spine S', spine S's port L to leaf L. The links are veths at no set rate: the switches and
//! the hosts read PAUSE times at [`PAUSE_RATE_BPS`], so the crate computes the entries of a
//! fabric of that speed, and a spec's speed, cable, buffer and MTU options are refused here
//! (they are `lossless sim`'s). Also here: the leaves' uplink group as `lossless net policy` and
//! the experiments rewrite it live.

use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::builder::{PossibleValuesParser, TypedValueParser};

use super::model::{refuse_unemulable, End, Entries, Host, Link, Network, Switch};
use p4values::runtime_json::TableEntrySpec;
use topology::{
    entries,
    fabric::{self, Fabric},
    spec::{self, Spec},
};

pub use topology::shapes::leaf_spine::host_name;
/// The size of a generated fabric.
pub use topology::spec::LeafSpine as Shape;
pub use topology::tuning::{Policy, Tuning, PRIORITY_DATA};

/// The ECMP group of every leaf's uplinks (the widest of a leaf's groups: the crate numbers
/// them so).
pub const UPLINK_GROUP: u16 = 1;

/// The link rate the fabric's pause quanta stand for, and hosts read the switches' PAUSE times
/// at (`pfc.link_speed_bps`): 1 Gb/s.
pub const PAUSE_RATE_BPS: u64 = 1_000_000_000;

/// Reads TOPO when it is a generated fabric (`NAME:...` with a shape name of the topology
/// crate); `None` when it is not one (a file).
pub fn parse(topo: &str) -> Option<anyhow::Result<Shape>> {
    let (name, _) = topo.split_once(':')?;
    if !spec::shape_names().any(|n| n == name.trim()) {
        return None;
    }
    Some(read(topo).with_context(|| format!("'{topo}'")))
}

fn read(topo: &str) -> anyhow::Result<Shape> {
    let spec = Spec::parse(topo)?;
    let spec::Shape::LeafSpine(shape) = spec.shape else {
        bail!(
            "lossless net builds leaf-spine:SPINES,LEAVES,HOSTS fabrics; {} is lossless sim's",
            spec.shape.name()
        );
    };
    if topo.contains('=') {
        bail!(
            "lossless net's links are veths with no set rate, delay or MTU, and its switches' \
             buffers are softswitch's: speed, cable, buffer and mtu are lossless sim's options"
        );
    }
    Ok(shape)
}

/// The fabric of `shape` at [`PAUSE_RATE_BPS`].
fn fabric(shape: Shape) -> Fabric {
    let mut spec = Spec::new(spec::Shape::LeafSpine(shape));
    for tier in &mut spec.options.links {
        tier.rate_bps = PAUSE_RATE_BPS;
    }
    topology::build(&spec)
}

/// The network of `shape`, every switch carrying its computed entries, within the limits of
/// what Mininet brings up ([`Network::check`]).
pub fn network(shape: Shape, tuning: &Tuning) -> anyhow::Result<Network> {
    let fabric = fabric(shape);
    let configs = entries::compute(&fabric, tuning)?;
    let end = |e: fabric::End| match e {
        fabric::End::Host(h) => End {
            node: fabric.host(h).name.clone(),
            port: 0,
            mac: Some(fabric.host(h).mac.to_string()),
        },
        fabric::End::Switch(s, p) => End {
            node: fabric.switch(s).name.clone(),
            port: p,
            mac: fabric.switch(s).port(p).map(|p| p.mac.to_string()),
        },
    };
    let links = fabric
        .links
        .iter()
        .map(|l| {
            let (a, b) = (end(l.a), end(l.b));
            Link {
                origin: format!("{}-{}", a.node, b.node),
                a,
                b,
                bw_mbps: None,
                delay: Duration::ZERO,
                jitter: Duration::ZERO,
                loss_percent: 0.0,
            }
        })
        .collect();
    // The leaves route IPv4 only (no ARP): the gateway and the other hosts of a host's /24
    // are static neighbours.
    let hosts = fabric
        .hosts
        .iter()
        .map(|h| {
            let mut neighbours = vec![(h.gateway, h.gateway_mac.to_string())];
            neighbours.extend(
                fabric
                    .hosts
                    .iter()
                    .filter(|o| o.attachment.0 == h.attachment.0 && o.ip != h.ip)
                    .map(|o| (o.ip, o.mac.to_string())),
            );
            Host {
                name: h.name.clone(),
                ip: format!("{}/{}", h.ip, h.prefix_len),
                mac: h.mac.to_string(),
                gateway: Some(h.gateway),
                neighbours,
                commands: vec![],
                gateway_mac: None,
            }
        })
        .collect();
    let switches = fabric
        .switches
        .iter()
        .zip(configs)
        .map(|(s, config)| Switch {
            name: s.name.clone(),
            program: None,
            entries: Entries::Computed(Box::new(config)),
        })
        .collect();
    let net = Network {
        hosts,
        switches,
        links,
        cpu_ports: Default::default(),
    };
    net.check()?;
    refuse_unemulable(&net)?;
    Ok(net)
}

/// A leaf's uplink group over the spines `live` (at least one; a subset of the fabric's, in
/// order), as every leaf has it: the group's entry (policy, size = live spines), one member per
/// spine of the fabric (members past the live ones repeat them, so every member entry always
/// exists and a change is a Modify of each; the group's size keeps traffic off them), and DLB's
/// ports (the live uplinks, the rest 0). The group entry comes first. No live spine, or a
/// policy lossless.p4 does not run, is refused.
pub fn uplink_group(
    shape: Shape,
    tuning: &Tuning,
    policy: Policy,
    live: &[u16],
) -> anyhow::Result<Vec<TableEntrySpec>> {
    let ports: Vec<u16> = live.iter().map(|s| shape.hosts + s).collect();
    Ok(entries::group_entries(
        UPLINK_GROUP,
        &ports,
        usize::from(shape.spines),
        policy,
        tuning,
    )?)
}

/// clap's reader of a policy (its names listed in `--help`).
pub fn policy_parser() -> impl TypedValueParser<Value = Policy> {
    PossibleValuesParser::new(Policy::P4.map(Policy::name))
        .map(|name| Policy::from_name(&name).expect("one of the names listed"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn shape(topo: &str) -> Shape {
        parse(topo).unwrap().unwrap()
    }

    /// The network Mininet brings up: the crate's fabric, names, MACs and ports as they always
    /// were, and the entries of the hand-kept example (which the crate's own test compares
    /// with dataplane-p4/topologies/leaf-spine).
    #[test]
    fn the_fabric_as_mininet_gets_it() {
        let net = network(shape("leaf-spine:2,3,2"), &Tuning::default()).unwrap();
        let names: Vec<&str> = net.switches.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["spine1", "spine2", "leaf1", "leaf2", "leaf3"]);
        assert_eq!(net.hosts.len(), 6);
        let h12 = &net.hosts[1];
        assert_eq!(
            (h12.name.as_str(), h12.ip.as_str(), h12.mac.as_str()),
            ("h12", "10.0.1.2/24", "08:00:00:00:01:02")
        );
        assert_eq!(h12.gateway, Some("10.0.1.254".parse().unwrap()));
        assert_eq!(
            h12.neighbours,
            [
                (
                    "10.0.1.254".parse().unwrap(),
                    "00:aa:11:00:00:02".to_string()
                ),
                ("10.0.1.1".parse().unwrap(), "08:00:00:00:01:01".to_string())
            ]
        );
        let uplink = net
            .links
            .iter()
            .find(|l| l.a.node == "leaf2" && l.b.node == "spine1")
            .unwrap();
        assert_eq!((uplink.a.port, uplink.b.port), (3, 2));
        assert_eq!(uplink.a.mac.as_deref(), Some("00:aa:12:00:00:03"));
        assert_eq!(uplink.b.mac.as_deref(), Some("00:aa:01:00:00:02"));
        let Entries::Computed(leaf1) = &net.switches[2].entries else {
            panic!("computed entries")
        };
        let quantum = leaf1
            .table_entries
            .iter()
            .find(|e| e.table == "LosslessIngress.pfc_rx_port")
            .unwrap();
        assert_eq!(quantum.action_params["quantum_q10"], 524);
    }

    /// Without spine 1, a leaf's group has one member and every member entry and DLB's first
    /// port lead to spine 2's uplink.
    #[test]
    fn a_group_without_a_spine_leads_only_to_the_others() {
        let entries = uplink_group(
            shape("leaf-spine:2,2,2"),
            &Tuning::default(),
            Policy::Dlb,
            &[2],
        )
        .unwrap();
        let json: Vec<Value> = entries
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        assert_eq!(json[0]["action_params"]["size"], 1);
        assert_eq!(
            json[0]["action_params"]["policy"],
            Policy::Dlb.p4_code().unwrap()
        );
        let members: Vec<&Value> = json
            .iter()
            .filter(|e| e["table"] == "LosslessIngress.ecmp_member")
            .map(|e| &e["action_params"]["nexthop"])
            .collect();
        assert_eq!(members, [&json!(4), &json!(4)]);
        let dlb = json.last().unwrap();
        assert_eq!(dlb["action_params"]["port0"], 4);
        assert_eq!(dlb["action_params"]["port1"], 0);
    }

    #[test]
    fn topologies_are_read_within_limits() {
        assert!(parse("two-hosts").is_none());
        assert!(parse("topologies/leaf-spine/topology.json").is_none());
        let err = |topo: &str| format!("{:#}", parse(topo).unwrap().unwrap_err());
        assert!(err("leaf-spine:17,2,2").contains("spines '17': a whole number 1..=16"));
        assert!(err("leaf-spine:2,2").contains("expected 3 numbers"));
        assert!(err("leaf-spine:2,0,2").contains("leaves '0'"));
        assert!(err("fat-tree:4").contains("fat-tree is lossless sim's"));
        assert!(err("leaf-spine:2,2,2,speed=100G").contains("lossless sim's options"));
        assert_eq!(
            shape("leaf-spine:2,2,2"),
            Shape {
                spines: 2,
                leaves: 2,
                hosts: 2
            }
        );
        // Mininet's limit on nodes.
        let too_many = network(shape("leaf-spine:4,32,32"), &Tuning::default()).unwrap_err();
        assert!(
            too_many.to_string().contains("nodes: at most 512"),
            "{too_many}"
        );
    }
}
