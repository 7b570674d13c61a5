//! Generated leaf/spine fabrics (`leaf-spine:S,L,H`: S spines, L leaves, H hosts per leaf) and
//! the lossless.p4 entries each switch needs, computed from the fabric: routes (a host route per
//! local host, an ECMP group over the spines for every other leaf's /24, a /24 per leaf on the
//! spines), the group's policy and DLB members, PFC (pause quantum per port, a lossless profile
//! per egress port for the data priority), ECN (a RED profile per egress port), CNP and the
//! clone sessions PAUSE, resume and CNP frames leave through.
//!
//! Leaf L: ports 1..=H to its hosts, H+S' to spine S'. Spine S: port L to leaf L. Host h<L><H>
//! (h<L>x<H> past 9): 10.0.L.H/24, MAC 08:00:00:00:LL:HH, gateway 10.0.L.254 at its leaf port's
//! MAC. Switch port MACs 00:aa:<switch id>:00:00:<port>, spines S, leaves 0x10 + L. Priority 3
//! (DSCP 26) is lossless and ECN-marked; CNPs (DSCP 48) travel in priority 6.

use std::{collections::BTreeMap, net::Ipv4Addr};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use super::model::{End, Entries, Host, Link, Network, Switch};
use p4values::runtime_json::{CloneSessionSpec, ReplicaSpec, RuntimeConfig, TableEntrySpec};

/// The most spines (a DLB group has at most 4 members).
pub const MAX_SPINES: u16 = 4;
/// The most leaves.
pub const MAX_LEAVES: u16 = 32;
/// The most hosts per leaf.
pub const MAX_HOSTS_PER_LEAF: u16 = 32;

/// The priority of RoCEv2 data (DSCP 26): lossless, ECN-marked, CNP-generating.
pub const PRIORITY_DATA: u8 = 3;
/// The priority CNPs (DSCP 48) travel in.
pub const PRIORITY_CNP: u8 = 6;
/// The ECMP group every leaf's uplinks form.
pub const UPLINK_GROUP: u16 = 1;

/// Load-balancing policies of lossless.p4's `ecmp_group` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// 5-tuple hash.
    Ecmp,
    /// A new member only after an idle gap.
    Flowlet,
    /// The least-loaded member at a flowlet boundary.
    Dlb,
    /// Each packet of a flow to the next member.
    Spray,
    /// 5-tuple and RoCEv2 destination QP hash (Meta's enhanced ECMP).
    #[serde(rename = "e-ecmp")]
    EEcmp,
}

impl Policy {
    /// Its code in `set_group(policy, ...)`.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Tuning of the computed entries.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// The uplink group's policy.
    pub policy: Policy,
    /// Flowlet idle gap, µs.
    pub flowlet_timeout_us: u64,
    /// DLB: a port load older than this counts as 0, µs.
    pub dlb_load_age_us: u64,
    /// Pause quantum: 512 bit times in 1/1024 µs (524 at 1 Gb/s).
    pub quantum_q10: u32,
}

impl Tuning {
    /// The link speed the pause quantum stands for (512 bit times of it), which hosts must
    /// read the switches' PAUSE times at (`pfc.link_speed_bps`).
    pub fn pause_link_speed_bps(&self) -> u64 {
        512 * 1024 * 1_000_000 / u64::from(self.quantum_q10.max(1))
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            policy: Policy::Ecmp,
            flowlet_timeout_us: 100,
            dlb_load_age_us: 500,
            quantum_q10: 524,
        }
    }
}

/// The shape `leaf-spine:S,L,H`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Spines.
    pub spines: u16,
    /// Leaves.
    pub leaves: u16,
    /// Hosts per leaf.
    pub hosts: u16,
}

impl Shape {
    /// Parses `leaf-spine:S,L,H`; `None` when `text` is no such name.
    pub fn parse(text: &str) -> Option<anyhow::Result<Shape>> {
        let rest = text.strip_prefix("leaf-spine:")?;
        Some(Self::parse_numbers(rest).with_context(|| format!("'{text}'")))
    }

    fn parse_numbers(rest: &str) -> anyhow::Result<Shape> {
        let numbers: Vec<u16> = rest
            .split(',')
            .map(|n| {
                n.trim()
                    .parse::<u16>()
                    .context("expected leaf-spine:SPINES,LEAVES,HOSTS")
            })
            .collect::<anyhow::Result<_>>()?;
        let [spines, leaves, hosts] = numbers[..] else {
            bail!("expected leaf-spine:SPINES,LEAVES,HOSTS");
        };
        for (what, n, max) in [
            ("spines", spines, MAX_SPINES),
            ("leaves", leaves, MAX_LEAVES),
            ("hosts per leaf", hosts, MAX_HOSTS_PER_LEAF),
        ] {
            if n == 0 || n > max {
                bail!("{n} {what}: 1..={max}");
            }
        }
        Ok(Shape {
            spines,
            leaves,
            hosts,
        })
    }
}

fn switch_id(name: &str) -> u8 {
    let (kind, n) = name.split_at(name.trim_end_matches(|c: char| c.is_ascii_digit()).len());
    let n: u8 = n.parse().expect("generated names end in their number");
    if kind == "spine" {
        n
    } else {
        0x10 + n
    }
}

/// The MAC of `switch`'s port `port`.
pub fn port_mac(switch: &str, port: u16) -> String {
    format!("00:aa:{:02x}:00:00:{:02x}", switch_id(switch), port)
}

/// The name of host `h` of leaf `l`.
pub fn host_name(l: u16, h: u16) -> String {
    if l < 10 && h < 10 {
        format!("h{l}{h}")
    } else {
        format!("h{l}x{h}")
    }
}

/// Host `h` of leaf `l`'s address.
pub fn host_ip(l: u16, h: u16) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, l as u8, h as u8)
}

fn host_mac(l: u16, h: u16) -> String {
    format!("08:00:00:00:{l:02x}:{h:02x}")
}

/// The fabric, its switches carrying their computed entries.
pub fn network(shape: Shape, tuning: &Tuning) -> Network {
    let mut net = Network::default();
    let mut link = |a: End, b: End| {
        let origin = format!("{}-{}", a.node, b.node);
        net.links.push(Link {
            a,
            b,
            bw_mbps: None,
            origin,
        });
    };
    for l in 1..=shape.leaves {
        let leaf = format!("leaf{l}");
        for h in 1..=shape.hosts {
            link(
                End {
                    node: host_name(l, h),
                    port: 0,
                    mac: Some(host_mac(l, h)),
                },
                End {
                    node: leaf.clone(),
                    port: h,
                    mac: Some(port_mac(&leaf, h)),
                },
            );
        }
        for s in 1..=shape.spines {
            let spine = format!("spine{s}");
            let up = shape.hosts + s;
            link(
                End {
                    node: leaf.clone(),
                    port: up,
                    mac: Some(port_mac(&leaf, up)),
                },
                End {
                    node: spine.clone(),
                    port: l,
                    mac: Some(port_mac(&spine, l)),
                },
            );
        }
    }
    for l in 1..=shape.leaves {
        let gateway = Ipv4Addr::new(10, 0, l as u8, 254);
        for h in 1..=shape.hosts {
            // The leaf routes IPv4 only (no ARP): the gateway and the leaf's other hosts, in
            // the same /24, are static neighbours.
            let mut neighbours = vec![(gateway, port_mac(&format!("leaf{l}"), h))];
            neighbours.extend(
                (1..=shape.hosts)
                    .filter(|o| *o != h)
                    .map(|o| (host_ip(l, o), host_mac(l, o))),
            );
            net.hosts.push(Host {
                name: host_name(l, h),
                ip: format!("{}/24", host_ip(l, h)),
                mac: host_mac(l, h),
                gateway: Some(gateway),
                neighbours,
                commands: vec![],
            });
        }
    }
    for s in 1..=shape.spines {
        let name = format!("spine{s}");
        let entries = spine_entries(shape, s, tuning);
        net.switches.push(Switch {
            name,
            program: None,
            entries: Entries::Computed(Box::new(entries)),
        });
    }
    for l in 1..=shape.leaves {
        let name = format!("leaf{l}");
        let entries = leaf_entries(shape, l, tuning);
        net.switches.push(Switch {
            name,
            program: None,
            entries: Entries::Computed(Box::new(entries)),
        });
    }
    net
}

const I: &str = "LosslessIngress";
const E: &str = "LosslessEgress";

fn entry(table: &str, action: &str, params: Value, matches: Option<Value>) -> TableEntrySpec {
    let object = |v: Value| -> BTreeMap<String, Value> {
        v.as_object()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .collect()
    };
    TableEntrySpec {
        table: table.into(),
        default_action: matches.is_none(),
        matches: matches.map(object).unwrap_or_default(),
        action_name: action.into(),
        action_params: object(params),
        priority: None,
    }
}

/// Classification, the ECMP hash offset, PFC, ECN, CNP and clone sessions for a switch with
/// ports `ports`.
fn common(
    ports: impl Iterator<Item = u16> + Clone,
    hash_offset: u8,
    tuning: &Tuning,
) -> RuntimeConfig {
    let mut t = vec![
        entry(
            &format!("{I}.ecmp_hash"),
            &format!("{I}.set_hash_offset"),
            json!({"offset": hash_offset}),
            None,
        ),
        entry(
            &format!("{I}.dscp_priority"),
            &format!("{I}.set_priority"),
            json!({"priority": PRIORITY_DATA}),
            Some(json!({"hdr.ipv4.dscp": 26})),
        ),
        entry(
            &format!("{I}.dscp_priority"),
            &format!("{I}.set_priority"),
            json!({"priority": PRIORITY_CNP}),
            Some(json!({"hdr.ipv4.dscp": 48})),
        ),
        entry(
            &format!("{E}.cnp_config"),
            &format!("{E}.cnp"),
            json!({"interval_us": 50, "dscp": 48}),
            Some(json!({"standard_metadata.priority": PRIORITY_DATA})),
        ),
    ];
    for p in ports.clone() {
        t.push(entry(
            &format!("{I}.pfc_rx_port"),
            &format!("{I}.set_pause_quantum"),
            json!({"quantum_q10": tuning.quantum_q10}),
            Some(json!({"standard_metadata.ingress_port": p})),
        ));
        t.push(entry(&format!("{I}.pfc_profile"), &format!("{I}.lossless"),
            json!({"xoff_packets": 16, "xon_packets": 4, "quanta": 977, "refresh_us": 100, "limit": 500, "stall_us": 2000}),
            Some(json!({"standard_metadata.egress_spec": p, "standard_metadata.priority": PRIORITY_DATA}))));
        t.push(entry(&format!("{E}.ecn_profile"), &format!("{E}.red"),
            json!({"kmin_packets": 5, "kmax_packets": 20, "pmax_q16": 13107}),
            Some(json!({"standard_metadata.egress_port": p, "standard_metadata.priority": PRIORITY_DATA}))));
    }
    RuntimeConfig {
        table_entries: t,
        clone_session_entries: ports
            .map(|p| CloneSessionSpec {
                clone_session_id: 100 + u32::from(p),
                replicas: vec![ReplicaSpec {
                    egress_port: u32::from(p),
                    instance: 1,
                }],
                packet_length_bytes: 0,
            })
            .collect(),
        ..Default::default()
    }
}

/// A leaf's uplink group over the spines `live` (at least one; a subset of the fabric's, in
/// order): the group's entry (policy, size = live spines), one member per spine of the fabric
/// (members past the live ones repeat them, so every member entry always exists and a change
/// is a Modify of each; the group's size keeps traffic off them), and DLB's ports (the live
/// uplinks, the rest 0 and past the group's size). The group entry comes first.
pub fn uplink_group(
    shape: Shape,
    tuning: &Tuning,
    policy: Policy,
    live: &[u16],
) -> Vec<TableEntrySpec> {
    assert!(!live.is_empty(), "a group needs a live member");
    let mut t = vec![entry(
        &format!("{I}.ecmp_group"),
        &format!("{I}.set_group"),
        json!({"policy": policy.code(), "size": live.len(), "flowlet_timeout_us": tuning.flowlet_timeout_us}),
        Some(json!({"meta.group": UPLINK_GROUP})),
    )];
    let uplink = |i: usize| shape.hosts + live[i % live.len()];
    for member in 0..shape.spines {
        t.push(entry(
            &format!("{I}.ecmp_member"),
            &format!("{I}.set_nexthop"),
            json!({"nexthop": uplink(usize::from(member))}),
            Some(json!({"meta.group": UPLINK_GROUP, "meta.member": member})),
        ));
    }
    let mut ports: Vec<u16> = (0..live.len()).map(uplink).collect();
    ports.resize(8, 0);
    let mut dlb: serde_json::Map<String, Value> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| (format!("port{i}"), json!(port)))
        .collect();
    dlb.insert("load_age_us".into(), json!(tuning.dlb_load_age_us));
    t.push(entry(
        &format!("{I}.dlb_members"),
        &format!("{I}.set_dlb_ports"),
        Value::Object(dlb),
        Some(json!({"meta.group": UPLINK_GROUP})),
    ));
    t
}

fn leaf_entries(shape: Shape, l: u16, tuning: &Tuning) -> RuntimeConfig {
    let name = format!("leaf{l}");
    let mut config = common(1..=shape.hosts + shape.spines, 0, tuning);
    let t = &mut config.table_entries;
    for h in 1..=shape.hosts {
        t.push(entry(
            &format!("{I}.ipv4_lpm"),
            &format!("{I}.set_nexthop"),
            json!({"nexthop": h}),
            Some(json!({"hdr.ipv4.dstAddr": [host_ip(l, h).to_string(), 32]})),
        ));
        t.push(entry(
            &format!("{I}.nexthop"),
            &format!("{I}.forward"),
            json!({"port": h, "src_mac": port_mac(&name, h), "dst_mac": host_mac(l, h)}),
            Some(json!({"meta.nexthop": h})),
        ));
    }
    for s in 1..=shape.spines {
        let port = shape.hosts + s;
        t.push(entry(&format!("{I}.nexthop"), &format!("{I}.forward"), json!({"port": port, "src_mac": port_mac(&name, port), "dst_mac": port_mac(&format!("spine{s}"), l)}), Some(json!({"meta.nexthop": port}))));
    }
    for other in (1..=shape.leaves).filter(|o| *o != l) {
        t.push(entry(
            &format!("{I}.ipv4_lpm"),
            &format!("{I}.set_ecmp_group"),
            json!({"group": UPLINK_GROUP}),
            Some(
                json!({"hdr.ipv4.dstAddr": [Ipv4Addr::new(10, 0, other as u8, 0).to_string(), 24]}),
            ),
        ));
    }
    let spines: Vec<u16> = (1..=shape.spines).collect();
    t.extend(uplink_group(shape, tuning, tuning.policy, &spines));
    config
}

fn spine_entries(shape: Shape, s: u16, tuning: &Tuning) -> RuntimeConfig {
    let name = format!("spine{s}");
    let mut config = common(1..=shape.leaves, 4, tuning);
    for l in 1..=shape.leaves {
        config.table_entries.push(entry(
            &format!("{I}.ipv4_lpm"),
            &format!("{I}.set_nexthop"),
            json!({"nexthop": l}),
            Some(json!({"hdr.ipv4.dstAddr": [Ipv4Addr::new(10, 0, l as u8, 0).to_string(), 24]})),
        ));
        config.table_entries.push(entry(&format!("{I}.nexthop"), &format!("{I}.forward"), json!({"port": l, "src_mac": port_mac(&name, l), "dst_mac": port_mac(&format!("leaf{l}"), shape.hosts + s)}), Some(json!({"meta.nexthop": l}))));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_json(config: &RuntimeConfig) -> Value {
        serde_json::to_value(config).unwrap()
    }

    /// The computed entries of the 2-spine, 3-leaf, 2-host fabric are those of the hand-kept
    /// example in dataplane-p4/topologies/leaf-spine (written by its make.py), entry for entry.
    #[test]
    fn computes_the_hand_kept_example() {
        let shape = Shape::parse("leaf-spine:2,3,2").unwrap().unwrap();
        let net = network(shape, &Tuning::default());
        net.check().unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../dataplane-p4/topologies/leaf-spine");
        for switch in &net.switches {
            let Entries::Computed(config) = &switch.entries else {
                panic!("computed")
            };
            let file = RuntimeConfig::from_file(&dir.join(format!("{}-runtime.json", switch.name)))
                .unwrap();
            let mut want = as_json(&file);
            let mut got = as_json(config);
            for v in [&mut want, &mut got] {
                let o = v.as_object_mut().unwrap();
                for key in ["target", "p4info", "bmv2_json"] {
                    o.remove(key);
                }
                o["table_entries"]
                    .as_array_mut()
                    .unwrap()
                    .sort_by_key(|e| e.to_string());
            }
            assert_eq!(got, want, "{}", switch.name);
        }
        assert_eq!(net.hosts.len(), 6);
        assert_eq!(net.hosts[0].neighbours[0].1, "00:aa:11:00:00:01");
    }

    /// Without spine 1, a leaf's group has one member and every member entry and DLB's first
    /// port lead to spine 2's uplink.
    #[test]
    fn a_group_without_a_spine_leads_only_to_the_others() {
        let shape = Shape::parse("leaf-spine:2,2,2").unwrap().unwrap();
        let entries = uplink_group(shape, &Tuning::default(), Policy::Dlb, &[2]);
        let json: Vec<Value> = entries
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        assert_eq!(json[0]["action_params"]["size"], 1);
        assert_eq!(json[0]["action_params"]["policy"], Policy::Dlb.code());
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
    fn shapes_are_bounded() {
        assert!(Shape::parse("two-hosts").is_none());
        assert!(Shape::parse("leaf-spine:5,2,2").unwrap().is_err());
        assert!(Shape::parse("leaf-spine:2,2").unwrap().is_err());
        assert!(Shape::parse("leaf-spine:2,0,2").unwrap().is_err());
        assert_eq!(
            Shape::parse("leaf-spine:2,2,2").unwrap().unwrap(),
            Shape {
                spines: 2,
                leaves: 2,
                hosts: 2
            }
        );
    }
}
