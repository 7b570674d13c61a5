//! The rules, one function each: every one reads the [`Fabric`] and returns its findings.
//! docs/check.md gives each rule's reasoning and source.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use topology::{
    entries::{EGRESS, INGRESS},
    tuning::quantum_q10,
};

use crate::{
    fabric::{Fabric, Nic},
    finding::{Edit, Finding, HostSetting, Place, Severity},
    headroom::{self, Need},
    paths, Assumptions,
};

/// The longest PFC watchdog detection time accepted by default, ms: SONiC's default
/// detection time (200 ms), which the host agent's default matches.
pub const MAX_WATCHDOG_MS: u64 = 200;

/// Findings of one kind on several ports of a switch and priority, as one finding whose
/// detail lists the ports.
struct ByQueue {
    found: BTreeMap<(usize, u8, String), (Finding, Vec<u16>)>,
}

impl ByQueue {
    fn new() -> ByQueue {
        ByQueue {
            found: BTreeMap::new(),
        }
    }

    /// Adds `finding` (its place a switch `s` and priority) on `port`.
    fn add(&mut self, s: usize, port: u16, finding: Finding) {
        let priority = finding.place.priority.unwrap_or(0);
        let key = (s, priority, format!("{}{}", finding.rule, finding.why));
        let edits = finding.edits.clone();
        let (kept, ports) = self
            .found
            .entry(key)
            .or_insert_with(|| (finding.edits(Vec::new()), Vec::new()));
        kept.edits.extend(edits);
        ports.push(port);
    }

    fn finish(self) -> Vec<Finding> {
        self.found
            .into_values()
            .map(|(mut f, ports)| {
                f.place.port = (ports.len() == 1).then_some(ports[0]);
                if ports.len() > 1 {
                    let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                    let ports = format!("ports {}", list.join(", "));
                    f.detail = Some(match f.detail.take() {
                        Some(d) => format!("{ports}; {d}"),
                        None => ports,
                    });
                }
                f
            })
            .collect()
    }
}

/// The edit of parameter `param` of switch `s`'s entry of lossless.p4's `table` (a queue's:
/// matched on `port_field` = `port` and the priority, or, without a priority, on `port_field`
/// alone).
fn edit(
    s: usize,
    table: String,
    (port_field, port): (&str, u16),
    priority: Option<u8>,
    param: &'static str,
    value: u64,
) -> Edit {
    let mut matches = std::collections::BTreeMap::new();
    matches.insert(port_field.to_owned(), json!(port));
    if let Some(p) = priority {
        matches.insert("standard_metadata.priority".to_owned(), json!(p));
    }
    Edit {
        switch: s,
        table,
        matches,
        param,
        value,
    }
}

/// The host setting `key` = `value` on host `h`'s `nic`.
fn setting(h: usize, nic: &Nic, key: &str, value: impl ToString) -> HostSetting {
    HostSetting {
        host: h,
        interface: nic.interface.clone(),
        key: key.to_owned(),
        value: value.to_string(),
    }
}

/// Every host NIC with its host's index and name (`h11/eth0`).
fn nics(fabric: &Fabric) -> impl Iterator<Item = (usize, String, &Nic)> {
    fabric.hosts.iter().enumerate().flat_map(|(i, h)| {
        h.nics
            .iter()
            .map(move |n| (i, format!("{}/{}", h.name, n.interface), n))
    })
}

/// Switches whose entries are not lossless.p4's: the other rules cannot see them.
pub fn not_lossless_p4(fabric: &Fabric) -> Vec<Finding> {
    fabric
        .switches
        .iter()
        .filter(|s| s.tables.entries == 0)
        .map(|s| {
            Finding::new(
                "not-lossless-p4",
                Severity::Note,
                Place::switch(&s.name),
                "it has no lossless.p4 entries, so its PFC, ECN, DSCP map and routes are not \
                 checked"
                    .into(),
                "give it lossless.p4's runtime JSON (as `lossless net` computes it)".into(),
            )
        })
        .collect()
}

/// PFC on a priority that carries no lossless traffic: on priority 0, where every DSCP no
/// class names goes (all best-effort traffic becomes lossless and its pauses block RDMA's
/// neighbours), or on one no DSCP maps to; and on hosts, PFC on a priority the switches do
/// not make lossless.
pub fn pfc_without_lossless_traffic(fabric: &Fabric) -> Vec<Finding> {
    let mut by = ByQueue::new();
    for (i, s) in fabric.switches.iter().enumerate() {
        for &(port, p) in s.tables.pfc.keys() {
            let mapped = s.tables.dscp_priority.values().any(|&q| q == p);
            let finding = if p == 0 {
                Finding::new(
                    "pfc-unused-priority",
                    Severity::Error,
                    Place::switch(&s.name).priority(0),
                    "PFC on priority 0, where every unclassified DSCP goes, makes all \
                     best-effort traffic lossless, and its pauses block every flow that shares \
                     a port with it"
                        .into(),
                    "remove priority 0's pfc_profile entries (tuning `lossless`: only the RDMA \
                     priorities)"
                        .into(),
                )
            } else if !mapped {
                Finding::new(
                    "pfc-unused-priority",
                    Severity::Warning,
                    Place::switch(&s.name).priority(p),
                    format!(
                        "PFC is on for priority {p}, which no DSCP maps to, so it protects \
                         nothing and any traffic that lands there can pause the fabric"
                    ),
                    format!(
                        "remove priority {p}'s pfc_profile entries, or map the RDMA DSCP to it"
                    ),
                )
            } else {
                continue;
            };
            by.add(i, port, finding);
        }
    }
    let lossless = fabric.lossless_priorities();
    let mut found = by.finish();
    for (_, name, nic) in nics(fabric) {
        for (p, profile) in nic.config.pfc_profiles.iter().enumerate() {
            let p = p as u8;
            if profile.enabled != 0 && !lossless.contains(&p) {
                found.push(Finding::new(
                    "pfc-unused-priority",
                    Severity::Warning,
                    Place::host(&name).priority(p),
                    format!(
                        "the host sends PAUSE for priority {p}, which no switch treats as \
                         lossless, so its pauses stop traffic the fabric would drop anyway"
                    ),
                    format!("pfc.prio{p}.enabled=false"),
                ));
            }
        }
    }
    found
}

/// Lossless traffic (a DSCP some switch maps to a lossless priority) that meets, on some hop
/// of its path, a queue without PFC: it is dropped there when the queue fills.
pub fn lossless_traffic_without_pfc(fabric: &Fabric) -> Vec<Finding> {
    let dscps = fabric.lossless_dscps();
    // Per queue (switch, port, priority): the DSCPs and the destinations that meet it.
    type Queue = (usize, u16, u8);
    let mut missing: BTreeMap<Queue, (BTreeSet<u8>, BTreeSet<String>)> = BTreeMap::new();
    for dst in 0..fabric.hosts.len() {
        let walk = paths::walk(fabric, dst);
        for &(s, port) in &walk.ports {
            let tables = &fabric.switches[s].tables;
            if tables.entries == 0 {
                continue;
            }
            for &d in &dscps {
                let q = tables.priority_of(d);
                if !tables.pfc.contains_key(&(port, q)) {
                    let entry = missing.entry((s, port, q)).or_default();
                    entry.0.insert(d);
                    entry.1.insert(fabric.hosts[dst].name.clone());
                }
            }
        }
    }
    missing
        .into_iter()
        .map(|((s, port, q), (dscps, dsts))| {
            let dscps: Vec<String> = dscps.iter().map(u8::to_string).collect();
            let dsts: Vec<String> = dsts.into_iter().collect();
            Finding::new(
                "lossless-without-pfc",
                Severity::Error,
                Place::switch(&fabric.switches[s].name)
                    .port(port)
                    .priority(q),
                format!(
                    "lossless traffic (DSCP {}) leaves by a queue without PFC, where it is \
                     dropped when the queue fills",
                    dscps.join(", ")
                ),
                format!("add a pfc_profile entry for port {port}, priority {q}"),
            )
            .detail(format!("on the way to {}", dsts.join(", ")))
        })
        .collect()
}

/// DSCP → priority maps that disagree: between switches (a packet changes queue on its way,
/// lossless at one hop and lossy at the next), and between a host and its switch (the host
/// honours pauses and marks in one priority, the switch queues in another).
pub fn dscp_maps_disagree(fabric: &Fabric) -> Vec<Finding> {
    let mut found = Vec::new();
    let classified: Vec<(usize, &crate::fabric::Switch)> = fabric
        .switches
        .iter()
        .enumerate()
        .filter(|(_, s)| s.tables.entries > 0)
        .collect();
    let dscps: BTreeSet<u8> = classified
        .iter()
        .flat_map(|(_, s)| s.tables.dscp_priority.keys().copied())
        .collect();
    for &d in &dscps {
        let mut count: BTreeMap<u8, usize> = BTreeMap::new();
        for (_, s) in &classified {
            *count.entry(s.tables.priority_of(d)).or_default() += 1;
        }
        let Some((&usual, _)) = count.iter().max_by_key(|(_, n)| **n) else {
            continue;
        };
        for &(i, s) in &classified {
            let q = s.tables.priority_of(d);
            if q != usual {
                found.push(
                    Finding::new(
                        "dscp-map-disagrees",
                        Severity::Error,
                        Place::switch(&s.name).priority(q),
                        format!(
                            "DSCP {d} goes to priority {q} here and to {usual} on {} other \
                         switches, so its packets change queue (and losslessness) on the way",
                            count[&usual]
                        ),
                        format!("map DSCP {d} to priority {usual} (dscp_priority)"),
                    )
                    .edits(vec![edit(
                        i,
                        format!("{INGRESS}.dscp_priority"),
                        ("hdr.ipv4.dscp", d.into()),
                        None,
                        "priority",
                        usual.into(),
                    )]),
                );
            }
        }
    }
    let watched: BTreeSet<u8> = fabric
        .lossless_dscps()
        .into_iter()
        .chain(
            fabric
                .switches
                .iter()
                .flat_map(|s| s.tables.cnp.values().map(|c| c.dscp)),
        )
        .collect();
    for (h, name, nic) in nics(fabric) {
        let Some((s, _, _)) = fabric.attachment(h) else {
            continue;
        };
        let switch = &fabric.switches[s];
        if switch.tables.entries == 0 {
            continue;
        }
        let mut dscps = watched.clone();
        dscps.insert(nic.config.settings.cnp_dscp as u8);
        for d in dscps {
            let host = nic.config.dscp_priority[usize::from(d)];
            let there = switch.tables.priority_of(d);
            if host != u32::from(there) {
                found.push(
                    Finding::new(
                        "dscp-map-disagrees",
                        Severity::Error,
                        Place::host(&name).priority(there),
                        format!(
                            "the host puts DSCP {d} in priority {host} and its switch {} in \
                             {there}, so the host's PFC and ECN act on another queue than the \
                             switch's",
                            switch.name
                        ),
                        String::new(),
                    )
                    .setting(setting(h, nic, &format!("dscp.{d}.prio"), there)),
                );
            }
        }
    }
    found
}

/// CNPs in a priority that is not above the lossless data they answer: they queue behind the
/// congestion they report (and, in a lossless priority, are paused with it).
pub fn cnp_not_above_data(fabric: &Fabric) -> Vec<Finding> {
    let mut found = Vec::new();
    let not_above = |switch: &crate::fabric::Switch, dscp: u8, data: u8, place: Place| {
        let q = switch.tables.priority_of(dscp);
        (q <= data).then(|| {
            Finding::new(
                "cnp-not-above-data",
                Severity::Error,
                place.priority(q),
                format!(
                    "CNPs (DSCP {dscp}) travel in priority {q}, not above the data they \
                     answer (priority {data}), so they wait behind the congestion they report"
                ),
                format!(
                    "map DSCP {dscp} to a priority above {data} (6 by convention), served \
                     first"
                ),
            )
        })
    };
    for s in &fabric.switches {
        for (&data, cnp) in &s.tables.cnp {
            found.extend(not_above(s, cnp.dscp, data, Place::switch(&s.name)));
        }
    }
    for (h, name, nic) in nics(fabric) {
        let Some((s, _, _)) = fabric.attachment(h) else {
            continue;
        };
        let switch = &fabric.switches[s];
        let dscp = nic.config.settings.cnp_dscp as u8;
        let data = switch.tables.lossless_priorities().into_iter().max();
        if let Some(data) = data {
            found.extend(not_above(switch, dscp, data, Place::host(&name)));
        }
    }
    found
}

/// RED against PFC on the same queue: Kmin or Kmax at or above XOFF (the queue pauses before,
/// or before it has marked fully: DCQCN's signal comes after PFC's), Kmax not above Kmin,
/// Pmax 0 (never marks below Kmax). On hosts, the same in bytes where the host sends PAUSE.
pub fn ecn_against_pfc(fabric: &Fabric) -> Vec<Finding> {
    let mut by = ByQueue::new();
    for (i, s) in fabric.switches.iter().enumerate() {
        for (&(port, p), red) in &s.tables.red {
            let place = || Place::switch(&s.name).priority(p);
            let red_edit = |param, value| {
                vec![edit(
                    i,
                    format!("{EGRESS}.ecn_profile"),
                    ("standard_metadata.egress_port", port),
                    Some(p),
                    param,
                    value,
                )]
            };
            let broken = [
                (
                    red.kmax_packets <= red.kmin_packets,
                    format!(
                        "Kmax ({}) is not above Kmin ({}), so marking jumps from none to all \
                         at one depth and DCQCN oscillates",
                        red.kmax_packets, red.kmin_packets
                    ),
                    "set kmax_packets above kmin_packets",
                    // Kmin a quarter of Kmax, when Kmax leaves room for one.
                    if red.kmax_packets >= 4 {
                        red_edit("kmin_packets", u64::from(red.kmax_packets / 4))
                    } else {
                        Vec::new()
                    },
                ),
                (
                    red.pmax_q16 == 0,
                    "Pmax is 0, so nothing is marked below Kmax and senders learn of congestion \
                     only when the queue is already deep"
                        .into(),
                    "set pmax (DCQCN's starting point: 0.2)",
                    red_edit("pmax_q16", 13_107),
                ),
            ];
            for (_, why, fix, edits) in broken.into_iter().filter(|(is, ..)| *is) {
                by.add(
                    i,
                    port,
                    Finding::new("ecn-thresholds", Severity::Error, place(), why, fix.into())
                        .edits(edits),
                );
            }
            let Some(pause) = s.tables.pfc.get(&(port, p)) else {
                continue;
            };
            // Below XOFF: Kmax just below it, Kmin a quarter of that.
            let below = pause.xoff_packets.saturating_sub(1);
            for (name, k, severity, fixed) in [
                (
                    "Kmin",
                    red.kmin_packets,
                    Severity::Error,
                    (below / 4).max(1),
                ),
                ("Kmax", red.kmax_packets, Severity::Warning, below),
            ] {
                if k >= pause.xoff_packets {
                    by.add(
                        i,
                        port,
                        Finding::new(
                            "ecn-above-xoff",
                            severity,
                            place(),
                            format!(
                                "{name} ({k} packets) is at or above XOFF ({} packets), so \
                                 the queue pauses its upstream before ECN has slowed the \
                                 senders",
                                pause.xoff_packets
                            ),
                            format!(
                                "set {}_packets below {}",
                                name.to_lowercase(),
                                pause.xoff_packets
                            ),
                        )
                        .edits(if below > 0 {
                            red_edit(
                                if name == "Kmin" {
                                    "kmin_packets"
                                } else {
                                    "kmax_packets"
                                },
                                fixed.into(),
                            )
                        } else {
                            Vec::new()
                        }),
                    );
                }
            }
        }
    }
    let mut found = by.finish();
    for (_, name, nic) in nics(fabric) {
        for (p, (ecn, pfc)) in nic
            .config
            .profiles
            .iter()
            .zip(&nic.config.pfc_profiles)
            .enumerate()
        {
            if ecn.enabled == 0 || pfc.enabled == 0 {
                continue;
            }
            for (key, k) in [("kmin", ecn.kmin_bytes), ("kmax", ecn.kmax_bytes)] {
                if k >= pfc.xoff_bytes {
                    found.push(Finding::new(
                        "ecn-above-xoff",
                        if key == "kmin" {
                            Severity::Error
                        } else {
                            Severity::Warning
                        },
                        Place::host(&name).priority(p as u8),
                        format!(
                            "ECN {key} ({k} B) is at or above the host's PFC XOFF ({} B), so \
                             it pauses before ECN has slowed the senders",
                            pfc.xoff_bytes
                        ),
                        format!("ecn.prio{p}.{key}_bytes below {}", pfc.xoff_bytes),
                    ));
                }
            }
        }
    }
    found
}

/// PFC headroom below what the links need: after XOFF a lossless queue still takes what is
/// in flight from its upstream ([`Need`]); lossless.p4's queue holds `queue_packets`, so
/// `queue_packets − XOFF` must cover the worst link of the switch.
pub fn headroom_short(fabric: &Fabric, assumptions: &Assumptions) -> Vec<Finding> {
    let mut by = ByQueue::new();
    for (i, s) in fabric.switches.iter().enumerate() {
        let worst = s
            .tables
            .pfc
            .keys()
            .filter_map(|&(port, _)| fabric.peer(i, port))
            .map(|(link, _)| Need::of(link, assumptions.pause_response_ns))
            .max_by_key(Need::packets);
        let Some(need) = worst else {
            continue;
        };
        for (&(port, p), pause) in &s.tables.pfc {
            let room = u64::from(s.queue_packets.saturating_sub(pause.xoff_packets));
            if room < need.packets() {
                let xoff = u64::from(s.queue_packets).saturating_sub(need.packets());
                let pfc_edit = |param, value| {
                    edit(
                        i,
                        format!("{INGRESS}.pfc_profile"),
                        ("standard_metadata.egress_spec", port),
                        Some(p),
                        param,
                        value,
                    )
                };
                let edits = if xoff >= 2 {
                    vec![
                        pfc_edit("xoff_packets", xoff),
                        pfc_edit(
                            "xon_packets",
                            u64::from(pause.xon_packets).min(xoff / 4).max(1),
                        ),
                    ]
                } else {
                    Vec::new()
                };
                by.add(
                    i,
                    port,
                    Finding::new(
                        "headroom",
                        Severity::Error,
                        Place::switch(&s.name).priority(p),
                        format!(
                            "a queue of {} packets with XOFF at {} leaves {room} packets of \
                             headroom, and {} packets still arrive after the PAUSE, so the \
                             lossless queue drops",
                            s.queue_packets,
                            pause.xoff_packets,
                            need.packets()
                        ),
                        format!("set xoff_packets at most {xoff} (or deepen the queue)"),
                    )
                    .detail(need.to_string())
                    .edits(edits),
                );
            }
        }
    }
    by.finish()
}

/// The hosts' PFC watchdog: one that only counts storms (still honouring every pause), or
/// detects them later than [`Assumptions::max_watchdog_ms`], lets a stuck receiver's pauses
/// spread through the fabric.
pub fn watchdog(fabric: &Fabric, assumptions: &Assumptions) -> Vec<Finding> {
    let mut found = Vec::new();
    for (h, name, nic) in nics(fabric) {
        let w = nic.config.settings.watchdog();
        let ms = w.limit_ns / 1_000_000;
        if !w.ignore_storms {
            found.push(
                Finding::new(
                    "watchdog",
                    Severity::Warning,
                    Place::host(&name),
                    "the PFC watchdog counts pause storms but keeps honouring them, so a storm \
                     still stops this host and spreads upstream"
                        .into(),
                    String::new(),
                )
                .setting(setting(h, nic, "pfc.watchdog_ignore", true)),
            );
        }
        if ms > assumptions.max_watchdog_ms {
            found.push(
                Finding::new(
                    "watchdog",
                    Severity::Warning,
                    Place::host(&name),
                    format!(
                        "the PFC watchdog takes {ms} ms to call a storm, longer than {} ms, \
                         while the pauses spread",
                        assumptions.max_watchdog_ms
                    ),
                    String::new(),
                )
                .setting(setting(
                    h,
                    nic,
                    "pfc.watchdog_ms",
                    assumptions.max_watchdog_ms,
                )),
            );
        }
    }
    found
}

/// Pause quanta read at another speed than the link's: a switch port's `pfc_rx_port` quantum
/// or a host's `pfc.link_speed_bps` that does not match its link makes every pause it
/// honours shorter or longer than was asked.
pub fn pause_quanta(fabric: &Fabric) -> Vec<Finding> {
    let mut found = Vec::new();
    for (i, s) in fabric.switches.iter().enumerate() {
        if s.tables.entries == 0 {
            continue;
        }
        for (&port, &q10) in &s.tables.quantum_q10 {
            let Some((link, _)) = fabric.peer(i, port) else {
                continue;
            };
            let want = quantum_q10(link.rate_bps);
            if q10 != want {
                found.push(
                    Finding::new(
                        "pause-quanta",
                        Severity::Error,
                        Place::switch(&s.name).port(port),
                        format!(
                            "the port reads a pause quantum of {q10}/1024 µs, and its {} link's \
                         is {want}/1024 µs, so the pauses it honours last {} the time asked",
                            headroom::rate(link.rate_bps),
                            if q10 < want { "less than" } else { "more than" }
                        ),
                        format!("set_pause_quantum quantum_q10={want} on pfc_rx_port {port}"),
                    )
                    .edits(vec![edit(
                        i,
                        format!("{INGRESS}.pfc_rx_port"),
                        ("standard_metadata.ingress_port", port),
                        None,
                        "quantum_q10",
                        want.into(),
                    )]),
                );
            }
        }
    }
    for (h, name, nic) in nics(fabric) {
        let Some((_, _, link)) = fabric.attachment(h) else {
            continue;
        };
        let speed = nic.config.settings.link_speed_bps;
        if speed != link.rate_bps {
            found.push(
                Finding::new(
                    "pause-quanta",
                    Severity::Error,
                    Place::host(&name),
                    format!(
                        "the host reads pause quanta at {} and its link runs at {}, so the pauses \
                     it honours last {} the time asked",
                        headroom::rate(speed),
                        headroom::rate(link.rate_bps),
                        if speed > link.rate_bps {
                            "less than"
                        } else {
                            "more than"
                        }
                    ),
                    String::new(),
                )
                .setting(setting(h, nic, "pfc.link_speed_bps", link.rate_bps)),
            );
        }
    }
    found
}
