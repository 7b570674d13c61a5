//! lossless.p4's entries for every switch of a fabric, as p4values' runtime-JSON configs (what
//! `lossless p4 entries apply` sends and the in-process switches apply): classification (DSCP to
//! priority), PFC (the pause quantum of each port from its link's rate, a lossless profile per
//! port and lossless priority), RED per port and lossless priority, the CNP fast path, the clone
//! session PAUSE, resume and CNP frames leave port P through (100 + P), a next hop per port (its
//! MACs), the routes of [`crate::routing`] and their ECMP groups (policy, members, DLB ports).
//!
//! Next hop N is port N. A route over one port down (or to a host) names its next hop; a route
//! up, or down over several ports, names an ECMP group: every distinct set of ports a switch
//! routes over is one group, numbered from 1, the widest first (so a first-tier switch's group
//! over all its uplinks is group 1), its members 0.. the ports in order, its DLB ports the first
//! eight. A switch of tier t hashes with [`hash_offset`] 4(t − 1), against hash polarization.
//! [`changes`] turns two configs of a switch into the writes that lead from one to the
//! other, for a failure applied while traffic runs.

use std::collections::{BTreeMap, BTreeSet};

use p4values::runtime_json::{CloneSessionSpec, ReplicaSpec, RuntimeConfig, TableEntrySpec};
use serde_json::{json, Value};

use crate::{
    fabric::{End, Fabric, SwitchId},
    routing::{self, Action, Failures, Route},
    tuning::{quantum_q10, Policy, Tuning},
    Error,
};

/// lossless.p4's ingress control.
pub const INGRESS: &str = "LosslessIngress";
/// lossless.p4's egress control.
pub const EGRESS: &str = "LosslessEgress";
/// PAUSE, resume and CNP frames back out of port P leave through clone session this + P.
pub const REVERSE_SESSION_BASE: u32 = 100;
/// The members DLB compares (`set_dlb_ports`' ports).
pub const DLB_PORTS: usize = 8;

/// lossless.p4's table sizes: a switch's entries must fit.
const CAPACITY: [(&str, usize); 8] = [
    ("ipv4_lpm", 1024),
    ("nexthop", 1024),
    ("ecmp_group", 1024),
    ("ecmp_member", 4096),
    ("dlb_members", 1024),
    ("pfc_profile", 4096),
    ("ecn_profile", 4096),
    ("pfc_rx_port", 512),
];

/// The entries of every switch of the intact `fabric`, in [`Fabric::switches`]' order.
pub fn compute(fabric: &Fabric, tuning: &Tuning) -> Result<Vec<RuntimeConfig>, Error> {
    compute_with_failures(fabric, tuning, &Failures::none())
}

/// The entries of every switch of `fabric` with `failures`: routes that avoid them (a failed
/// switch keeps everything but its routes and groups). The difference from the intact
/// fabric's, per switch ([`changes`]), is what a running fabric applies when they happen.
pub fn compute_with_failures(
    fabric: &Fabric,
    tuning: &Tuning,
    failures: &Failures,
) -> Result<Vec<RuntimeConfig>, Error> {
    tuning.check()?;
    let routes = routing::routes(fabric, failures);
    fabric
        .switches
        .iter()
        .enumerate()
        .map(|(i, _)| switch_entries(fabric, tuning, SwitchId(i), &routes[i]))
        .collect()
}

fn entry(table: &str, action: &str, params: Value, matches: Option<Value>) -> TableEntrySpec {
    let object = |v: Value| -> BTreeMap<String, Value> {
        match v {
            Value::Object(map) => map.into_iter().collect(),
            _ => BTreeMap::new(),
        }
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

fn switch_entries(
    fabric: &Fabric,
    tuning: &Tuning,
    id: SwitchId,
    routes: &[Route],
) -> Result<RuntimeConfig, Error> {
    let me = fabric.switch(id);
    let mut config = common(fabric, tuning, id)?;
    let t = &mut config.table_entries;
    for port in &me.ports {
        let peer_mac = match port.peer {
            End::Host(h) => fabric.host(h).mac,
            End::Switch(s, p) => fabric.switch(s).port(p).expect("links join ports").mac,
        };
        t.push(entry(
            &format!("{INGRESS}.nexthop"),
            &format!("{INGRESS}.forward"),
            json!({"port": port.number, "src_mac": port.mac.to_string(), "dst_mac": peer_mac.to_string()}),
            Some(json!({"meta.nexthop": port.number})),
        ));
    }
    t.push(entry(
        &format!("{INGRESS}.ecmp_hash"),
        &format!("{INGRESS}.set_hash_offset"),
        json!({"offset": hash_offset(me.tier)}),
        None,
    ));
    let mut sets: BTreeSet<&Vec<u16>> = BTreeSet::new();
    for r in routes {
        match &r.action {
            Action::Up(ports) => {
                sets.insert(ports);
            }
            Action::Down(ports) if ports.len() > 1 => {
                sets.insert(ports);
            }
            _ => {}
        }
    }
    let mut groups: Vec<&Vec<u16>> = sets.into_iter().collect();
    groups.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    let group_of = |ports: &Vec<u16>| groups.iter().position(|g| *g == ports).map(|i| i + 1);
    for r in routes {
        let (action, params) = match &r.action {
            Action::Host(p) => ("set_nexthop", json!({"nexthop": p})),
            Action::Down(ports) if ports.len() == 1 => {
                ("set_nexthop", json!({"nexthop": ports[0]}))
            }
            Action::Down(ports) | Action::Up(ports) => (
                "set_ecmp_group",
                json!({"group": group_of(ports).expect("every set is a group")}),
            ),
            Action::Drop => ("drop", json!({})),
        };
        t.push(entry(
            &format!("{INGRESS}.ipv4_lpm"),
            &format!("{INGRESS}.{action}"),
            params,
            Some(json!({"hdr.ipv4.dstAddr": [r.prefix.to_string(), r.len]})),
        ));
    }
    for (i, ports) in groups.iter().enumerate() {
        // Past u16, the group count is far past ecmp_group's size, which the check refuses.
        let group = u16::try_from(i + 1).unwrap_or(u16::MAX);
        t.extend(group_entries(
            group,
            ports,
            ports.len(),
            tuning.policy,
            tuning,
        )?);
    }
    check_capacity(&me.name, t)?;
    Ok(config)
}

/// Refuses entries of switch `name` past a table's size.
fn check_capacity(name: &str, entries: &[TableEntrySpec]) -> Result<(), Error> {
    for (table, size) in CAPACITY {
        let ingress = format!("{INGRESS}.{table}");
        let egress = format!("{EGRESS}.{table}");
        let n = entries
            .iter()
            .filter(|e| !e.default_action && (e.table == ingress || e.table == egress))
            .count();
        if n > size {
            return Err(Error::Capacity(format!(
                "{name} needs {n} entries in {table}, which holds {size}"
            )));
        }
    }
    Ok(())
}

/// The ECMP hash offset of a switch of tier `tier`: 0, 4, 8. A group picks its member with the
/// hash's bits from the offset up, so a switch picks with other bits than the switches below
/// it, whose choice decided which of its flows it gets (with the same bits, each upper switch
/// would send all it gets from one lower switch up one uplink). Four bits a tier keep groups of
/// up to 16 members of successive tiers independent.
pub fn hash_offset(tier: u8) -> u8 {
    4 * tier.saturating_sub(1)
}

/// The entries of ECMP group `group` over `ports` (at least one) with `members` member entries
/// (at least as many as ports; members past the ports repeat them, so a group whose ports
/// change keeps every member entry and is rewritten by modifying each): the group's entry
/// (`policy`, size = the ports, the flowlet timeout) first, then its members, then its DLB
/// ports (the first eight; 0 past them). A group without ports, with fewer members than
/// ports, or of a policy lossless.p4 does not run (wcmp) is refused.
pub fn group_entries(
    group: u16,
    ports: &[u16],
    members: usize,
    policy: Policy,
    tuning: &Tuning,
) -> Result<Vec<TableEntrySpec>, Error> {
    if ports.is_empty() || members < ports.len() {
        return Err(Error::Invalid(format!(
            "group {group}: {} ports and {members} members; a group has at least one port \
             and a member per port",
            ports.len()
        )));
    }
    let p4_code = policy.p4_code().ok_or_else(|| {
        Error::Invalid(format!(
            "group {group}: lossless.p4 does not run {} (its policies: {})",
            policy.name(),
            Policy::P4.map(Policy::name).join(", ")
        ))
    })?;
    let mut t = vec![entry(
        &format!("{INGRESS}.ecmp_group"),
        &format!("{INGRESS}.set_group"),
        json!({"policy": p4_code, "size": ports.len(), "flowlet_timeout_us": tuning.flowlet_timeout_us}),
        Some(json!({"meta.group": group})),
    )];
    for member in 0..members {
        t.push(entry(
            &format!("{INGRESS}.ecmp_member"),
            &format!("{INGRESS}.set_nexthop"),
            json!({"nexthop": ports[member % ports.len()]}),
            Some(json!({"meta.group": group, "meta.member": member})),
        ));
    }
    let mut dlb: serde_json::Map<String, Value> = (0..DLB_PORTS)
        .map(|i| {
            (
                format!("port{i}"),
                json!(ports.get(i).copied().unwrap_or(0)),
            )
        })
        .collect();
    dlb.insert("load_age_us".into(), json!(tuning.dlb_load_age_us));
    t.push(entry(
        &format!("{INGRESS}.dlb_members"),
        &format!("{INGRESS}.set_dlb_ports"),
        Value::Object(dlb),
        Some(json!({"meta.group": group})),
    ));
    Ok(t)
}

/// Classification, PFC, ECN, CNP and clone sessions of switch `id`.
fn common(fabric: &Fabric, tuning: &Tuning, id: SwitchId) -> Result<RuntimeConfig, Error> {
    let me = fabric.switch(id);
    let rate = |port: &crate::fabric::Port| fabric.link(port.link).rate_bps;
    let fastest = me.ports.iter().map(rate).max().unwrap_or(1);
    let shortest_q10 = me
        .ports
        .iter()
        .map(|p| quantum_q10(rate(p)))
        .min()
        .unwrap_or(1);
    let pause = tuning.switch_pause(&me.name, fastest, shortest_q10)?;
    let mut t: Vec<TableEntrySpec> = tuning
        .classes
        .iter()
        .map(|c| {
            entry(
                &format!("{INGRESS}.dscp_priority"),
                &format!("{INGRESS}.set_priority"),
                json!({"priority": c.priority}),
                Some(json!({"hdr.ipv4.dscp": c.dscp})),
            )
        })
        .collect();
    for &priority in &tuning.cnp.priorities {
        t.push(entry(
            &format!("{EGRESS}.cnp_config"),
            &format!("{EGRESS}.cnp"),
            json!({"interval_us": tuning.cnp.interval_us, "dscp": tuning.cnp.dscp}),
            Some(json!({"standard_metadata.priority": priority})),
        ));
    }
    let p = &tuning.pfc;
    let e = &tuning.ecn;
    for port in &me.ports {
        let n = port.number;
        t.push(entry(
            &format!("{INGRESS}.pfc_rx_port"),
            &format!("{INGRESS}.set_pause_quantum"),
            json!({"quantum_q10": quantum_q10(rate(port))}),
            Some(json!({"standard_metadata.ingress_port": n})),
        ));
        for &priority in &tuning.lossless {
            t.push(entry(
                &format!("{INGRESS}.pfc_profile"),
                &format!("{INGRESS}.lossless"),
                json!({"xoff_packets": p.xoff_packets, "xon_packets": p.xon_packets,
                       "quanta": pause.quanta, "refresh_us": pause.refresh_us,
                       "limit": p.hold_limit, "stall_us": p.stall_us}),
                Some(json!({"standard_metadata.egress_spec": n, "standard_metadata.priority": priority})),
            ));
            t.push(entry(
                &format!("{EGRESS}.ecn_profile"),
                &format!("{EGRESS}.red"),
                json!({"kmin_packets": e.kmin_packets, "kmax_packets": e.kmax_packets,
                       "pmax_q16": e.pmax_q16()}),
                Some(json!({"standard_metadata.egress_port": n, "standard_metadata.priority": priority})),
            ));
        }
    }
    Ok(RuntimeConfig {
        table_entries: t,
        clone_session_entries: me
            .ports
            .iter()
            .map(|p| CloneSessionSpec {
                clone_session_id: REVERSE_SESSION_BASE + u32::from(p.number),
                replicas: vec![ReplicaSpec {
                    egress_port: u32::from(p.number),
                    instance: 1,
                }],
                packet_length_bytes: 0,
            })
            .collect(),
        ..RuntimeConfig::default()
    })
}

/// The writes that turn one switch's entries into another's: entries to add, to modify (same
/// table and match, other action or parameters) and to remove. Applied in that order (each list
/// ordered for it: additions of groups, members and next hops before the routes that use them,
/// removals of routes before their groups'), no packet meets a route whose group is missing.
/// Clone sessions are a fabric's ports' and do not change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Changes {
    /// New entries.
    pub add: Vec<TableEntrySpec>,
    /// Entries whose action changes.
    pub modify: Vec<TableEntrySpec>,
    /// Entries that go (with their old action).
    pub remove: Vec<TableEntrySpec>,
}

impl Changes {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.modify.is_empty() && self.remove.is_empty()
    }
}

/// What turns `old` into `new` (see [`Changes`]).
pub fn changes(old: &RuntimeConfig, new: &RuntimeConfig) -> Changes {
    let key = |e: &TableEntrySpec| {
        (
            e.table.clone(),
            e.default_action,
            serde_json::to_string(&e.matches).expect("JSON values serialize"),
            e.priority,
        )
    };
    let before: BTreeMap<_, &TableEntrySpec> =
        old.table_entries.iter().map(|e| (key(e), e)).collect();
    let after: BTreeMap<_, &TableEntrySpec> =
        new.table_entries.iter().map(|e| (key(e), e)).collect();
    let mut c = Changes::default();
    for (k, e) in &after {
        match before.get(k) {
            None => c.add.push((*e).clone()),
            Some(o) if o.action_name != e.action_name || o.action_params != e.action_params => {
                c.modify.push((*e).clone())
            }
            Some(_) => {}
        }
    }
    c.remove = before
        .iter()
        .filter(|(k, _)| !after.contains_key(*k))
        .map(|(_, e)| (*e).clone())
        .collect();
    let is_route = |e: &TableEntrySpec| e.table == format!("{INGRESS}.ipv4_lpm");
    c.add.sort_by_key(is_route);
    c.remove.sort_by_key(|e| !is_route(e));
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn as_json(config: &RuntimeConfig) -> Value {
        let mut v = serde_json::to_value(config).unwrap();
        let o = v.as_object_mut().unwrap();
        for key in ["target", "p4info", "bmv2_json"] {
            o.remove(key);
        }
        o["table_entries"]
            .as_array_mut()
            .unwrap()
            .sort_by_key(|e| e.to_string());
        v
    }

    #[test]
    fn a_group_lossless_p4_cannot_run_is_refused() {
        let tuning = Tuning::default();
        let wcmp = group_entries(1, &[1, 2], 2, Policy::Wcmp, &tuning).unwrap_err();
        assert!(wcmp.to_string().contains("does not run wcmp"), "{wcmp}");
        assert!(group_entries(1, &[], 2, Policy::Ecmp, &tuning).is_err());
        assert!(group_entries(1, &[1, 2], 1, Policy::Ecmp, &tuning).is_err());
        assert_eq!(
            group_entries(1, &[1, 2], 2, Policy::Ecmp, &tuning)
                .unwrap()
                .len(),
            4
        );
    }

    /// The entries of the 2-spine, 3-leaf, 2-host fabric at 1 Gb/s are those of the hand-kept
    /// example in dataplane-p4/topologies/leaf-spine (written by its make.py), entry for entry.
    #[test]
    fn computes_the_hand_kept_example() {
        let spec = Spec::parse("leaf-spine:2,3,2,speed=1G").unwrap();
        let fabric = crate::build(&spec);
        let configs = compute(&fabric, &Tuning::default()).unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../dataplane-p4/topologies/leaf-spine");
        for (switch, config) in fabric.switches.iter().zip(&configs) {
            let file = RuntimeConfig::from_file(&dir.join(format!("{}-runtime.json", switch.name)))
                .unwrap();
            assert_eq!(as_json(config), as_json(&file), "{}", switch.name);
        }
    }

    #[test]
    fn every_distinct_set_of_ports_is_a_group_the_widest_first() {
        let fabric = crate::build(&Spec::parse("fat-tree:4").unwrap());
        let configs = compute(&fabric, &Tuning::default()).unwrap();
        let edge = fabric.switch_named("e0_0").unwrap();
        let groups: Vec<&TableEntrySpec> = configs[edge.0]
            .table_entries
            .iter()
            .filter(|e| e.table.ends_with("ecmp_group"))
            .collect();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].action_params["size"], 2);
        // Each port's pause quantum from its link: 100 Gb/s is 5.12 ns, 5 in 1/1024 µs.
        assert!(configs[edge.0]
            .table_entries
            .iter()
            .filter(|e| e.table.ends_with("pfc_rx_port"))
            .all(|e| e.action_params["quantum_q10"] == 5));
    }

    #[test]
    fn entries_past_a_table_are_refused() {
        let route = |i: u32| {
            entry(
                &format!("{INGRESS}.ipv4_lpm"),
                &format!("{INGRESS}.drop"),
                json!({}),
                Some(json!({"hdr.ipv4.dstAddr": [std::net::Ipv4Addr::from(i).to_string(), 32]})),
            )
        };
        let mut t: Vec<TableEntrySpec> = (0..1024).map(route).collect();
        check_capacity("s1", &t).unwrap();
        t.push(route(1024));
        assert_eq!(
            check_capacity("s1", &t).unwrap_err().to_string(),
            "s1 needs 1025 entries in ipv4_lpm, which holds 1024"
        );
    }

    /// The fabrics with the most routes a switch fit lossless.p4's tables: the largest
    /// fat-tree, and a rail-optimised fabric of 510 leaves (a spine's most ports), whose
    /// spines route every leaf's /24 (a leaf-spine's spines route at most 128).
    #[test]
    fn the_largest_fabrics_fit() {
        for text in ["fat-tree:32", "rail:34,15,15"] {
            let fabric = crate::build(&Spec::parse(text).unwrap());
            compute(&fabric, &Tuning::default()).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    #[test]
    fn changes_lead_from_one_config_to_the_other() {
        let fabric = crate::build(&Spec::parse("leaf-spine:2,2,1").unwrap());
        let tuning = Tuning::default();
        let intact = compute(&fabric, &tuning).unwrap();
        let leaf1 = fabric.switch_named("leaf1").unwrap();
        let uplink = fabric.switch(leaf1).port(2).unwrap().link;
        let failures = Failures::of_links([uplink]);
        let failed = compute_with_failures(&fabric, &tuning, &failures).unwrap();
        let c = changes(&intact[leaf1.0], &failed[leaf1.0]);
        // leaf1 goes up over spine2 alone: its group shrinks to one member.
        assert!(c.add.is_empty());
        assert_eq!(c.modify.len(), 3, "{c:?}");
        assert_eq!(c.remove.len(), 1);
        assert_eq!(c.remove[0].table, "LosslessIngress.ecmp_member");
        let mut applied = intact[leaf1.0].clone();
        applied.table_entries.retain(|e| !c.remove.contains(e));
        for m in &c.modify {
            let e = applied
                .table_entries
                .iter_mut()
                .find(|e| e.table == m.table && e.matches == m.matches)
                .unwrap();
            *e = m.clone();
        }
        applied.table_entries.extend(c.add.iter().cloned());
        assert_eq!(as_json(&applied), as_json(&failed[leaf1.0]));
        assert!(changes(&intact[leaf1.0], &intact[leaf1.0]).is_empty());
    }
}
