//! A switch's lossless.p4 entries read for what they configure: DSCP → priority, PFC and RED
//! per (egress port, priority), the CNP fast path, each port's pause quantum, and forwarding
//! (LPM routes to next hops and ECMP groups). The entries are p4values' runtime JSON, the
//! tutorials' shape `lossless net`, `lossless p4 entries apply` and the simulator take; names
//! are lossless.p4's (topology::entries writes them). Entries of other tables are not read.

use std::{collections::BTreeMap, net::Ipv4Addr};

use anyhow::{anyhow, bail, Context as _};
use p4values::runtime_json::{RuntimeConfig, TableEntrySpec};
use serde_json::Value;
use topology::entries::{EGRESS, INGRESS};

/// A lossless queue's PFC profile (`pfc_profile`'s `lossless` action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// PAUSE the upstream when this many packets are ahead.
    pub xoff_packets: u32,
    /// Resume it at this many.
    pub xon_packets: u32,
    /// Quanta of the PAUSE frames.
    pub quanta: u32,
    /// Passes a held packet makes before it goes while still paused.
    pub hold_limit: u32,
}

/// A queue's RED profile (`ecn_profile`'s `red` action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Red {
    /// Kmin, packets.
    pub kmin_packets: u32,
    /// Kmax, packets.
    pub kmax_packets: u32,
    /// Pmax, in 1/65536.
    pub pmax_q16: u32,
}

/// The CNP fast path of one data priority (`cnp_config`'s `cnp` action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cnp {
    /// The DSCP the switch's CNPs carry.
    pub dscp: u8,
}

/// Where an LPM route sends a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Next hop N.
    Hop(u16),
    /// ECMP group G.
    Group(u16),
    /// Dropped.
    Drop,
}

/// An LPM route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The prefix.
    pub prefix: Ipv4Addr,
    /// Its length.
    pub len: u8,
    /// Where it sends packets.
    pub next: Next,
}

/// What a switch's lossless.p4 entries configure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tables {
    /// Entries read from lossless.p4's tables (none: not lossless.p4's entries).
    pub entries: usize,
    /// DSCP → priority (`dscp_priority`); other DSCPs go to priority 0.
    pub dscp_priority: BTreeMap<u8, u8>,
    /// PFC per (egress port, priority): the lossless queues.
    pub pfc: BTreeMap<(u16, u8), Pause>,
    /// RED per (egress port, priority).
    pub red: BTreeMap<(u16, u8), Red>,
    /// The CNP fast path per data priority.
    pub cnp: BTreeMap<u8, Cnp>,
    /// Each port's pause quantum, 1/1024 µs (`pfc_rx_port`).
    pub quantum_q10: BTreeMap<u16, u32>,
    /// Routes.
    pub routes: Vec<Route>,
    /// Next hop → port.
    pub nexthops: BTreeMap<u16, u16>,
    /// ECMP group → its size (members 0..size are used).
    pub groups: BTreeMap<u16, u16>,
    /// (group, member) → next hop.
    pub members: BTreeMap<(u16, u16), u16>,
}

/// A whole number in a runtime-JSON value: a JSON number, or a string in decimal or `0x` hex
/// (as the tutorials write them).
fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        },
        _ => None,
    }
}

fn field<T: TryFrom<u64>>(map: &BTreeMap<String, Value>, key: &str) -> anyhow::Result<T> {
    let v = map.get(key).ok_or_else(|| anyhow!("no {key}"))?;
    number(v)
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| anyhow!("{key} {v} is not a number in range"))
}

impl Tables {
    /// Reads lossless.p4's entries of `config`; an entry of a known table whose fields are not
    /// what the program takes is an error naming it.
    pub fn read(config: &RuntimeConfig) -> anyhow::Result<Tables> {
        let mut t = Tables::default();
        for (i, e) in config.table_entries.iter().enumerate() {
            if e.default_action {
                continue;
            }
            t.entry(e)
                .with_context(|| format!("table_entries[{i}] ({})", e.table))?;
        }
        Ok(t)
    }

    fn entry(&mut self, e: &TableEntrySpec) -> anyhow::Result<()> {
        let (m, p) = (&e.matches, &e.action_params);
        let table = e.table.as_str();
        let action = e.action_name.rsplit('.').next().unwrap_or_default();
        let ingress = |name: &str| table == format!("{INGRESS}.{name}");
        let egress = |name: &str| table == format!("{EGRESS}.{name}");
        if ingress("dscp_priority") {
            let priority: u8 = field(p, "priority")?;
            if priority > 7 {
                bail!("priority {priority}: 0..=7");
            }
            self.dscp_priority
                .insert(field(m, "hdr.ipv4.dscp")?, priority);
        } else if ingress("pfc_profile") && action == "lossless" {
            let key = (
                field(m, "standard_metadata.egress_spec")?,
                field(m, "standard_metadata.priority")?,
            );
            self.pfc.insert(
                key,
                Pause {
                    xoff_packets: field(p, "xoff_packets")?,
                    xon_packets: field(p, "xon_packets")?,
                    quanta: field(p, "quanta")?,
                    hold_limit: field(p, "limit")?,
                },
            );
        } else if egress("ecn_profile") && action == "red" {
            let key = (
                field(m, "standard_metadata.egress_port")?,
                field(m, "standard_metadata.priority")?,
            );
            self.red.insert(
                key,
                Red {
                    kmin_packets: field(p, "kmin_packets")?,
                    kmax_packets: field(p, "kmax_packets")?,
                    pmax_q16: field(p, "pmax_q16")?,
                },
            );
        } else if egress("cnp_config") && action == "cnp" {
            self.cnp.insert(
                field(m, "standard_metadata.priority")?,
                Cnp {
                    dscp: field(p, "dscp")?,
                },
            );
        } else if ingress("pfc_rx_port") {
            self.quantum_q10.insert(
                field(m, "standard_metadata.ingress_port")?,
                field(p, "quantum_q10")?,
            );
        } else if ingress("ipv4_lpm") {
            // An entry read back over P4Runtime leaves a /0 key out (a don't-care): an entry
            // with no match key at all is one; a key under another name is a mistake.
            let (prefix, len) = match m.get("hdr.ipv4.dstAddr") {
                None if m.is_empty() => (Ipv4Addr::UNSPECIFIED, 0),
                None => bail!("no hdr.ipv4.dstAddr in match"),
                Some(key) => {
                    let key = key
                        .as_array()
                        .filter(|a| a.len() == 2)
                        .ok_or_else(|| anyhow!("hdr.ipv4.dstAddr is not [address, length]"))?;
                    let prefix: Ipv4Addr = key[0]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| anyhow!("{} is not an IPv4 address", key[0]))?;
                    let len = number(&key[1])
                        .filter(|l| *l <= 32)
                        .ok_or_else(|| anyhow!("{} is not a prefix length", key[1]))?;
                    (prefix, len as u8)
                }
            };
            let next = match action {
                "set_nexthop" => Next::Hop(field(p, "nexthop")?),
                "set_ecmp_group" => Next::Group(field(p, "group")?),
                _ => Next::Drop,
            };
            self.routes.push(Route { prefix, len, next });
        } else if ingress("nexthop") {
            self.nexthops
                .insert(field(m, "meta.nexthop")?, field(p, "port")?);
        } else if ingress("ecmp_group") {
            self.groups
                .insert(field(m, "meta.group")?, field(p, "size")?);
        } else if ingress("ecmp_member") {
            self.members.insert(
                (field(m, "meta.group")?, field(m, "meta.member")?),
                field(p, "nexthop")?,
            );
        } else if !(table.starts_with(INGRESS) || table.starts_with(EGRESS)) {
            return Ok(());
        }
        self.entries += 1;
        Ok(())
    }

    /// The priority a packet of `dscp` is queued in.
    pub fn priority_of(&self, dscp: u8) -> u8 {
        self.dscp_priority.get(&dscp).copied().unwrap_or(0)
    }

    /// The ports a packet to `ip` may leave by (several for an ECMP group; none when it is
    /// dropped or no route matches).
    pub fn ports_to(&self, ip: Ipv4Addr) -> Vec<u16> {
        let matches = |r: &&Route| {
            let mask = u32::MAX.checked_shl(32 - u32::from(r.len)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(r.prefix) & mask
        };
        let Some(route) = self.routes.iter().filter(matches).max_by_key(|r| r.len) else {
            return Vec::new();
        };
        let hops: Vec<u16> = match route.next {
            Next::Hop(n) => vec![n],
            Next::Group(g) => {
                let size = self.groups.get(&g).copied().unwrap_or(0);
                (0..size)
                    .filter_map(|m| self.members.get(&(g, m)).copied())
                    .collect()
            }
            Next::Drop => Vec::new(),
        };
        let mut ports: Vec<u16> = hops
            .iter()
            .filter_map(|n| self.nexthops.get(n).copied())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// The priorities with PFC on some port.
    pub fn lossless_priorities(&self) -> std::collections::BTreeSet<u8> {
        self.pfc.keys().map(|&(_, p)| p).collect()
    }
}
