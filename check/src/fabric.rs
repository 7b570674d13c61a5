//! The fabric the rules look at: switches with their lossless.p4 entries and queue depth,
//! hosts with their address and NIC configurations, links with rate, cable length and MTU.
//! Built from a generated fabric and the entries the control plane computes for it
//! ([`Fabric::generated`]), or from a topology file's network and the switches' runtime JSON
//! ([`Fabric::from_topology`]), with what the file does not say from [`LinkDefaults`].

use std::{collections::BTreeMap, net::Ipv4Addr};

use anyhow::{anyhow, Context as _};
use hostconfig::config::HostConfig;
use p4values::runtime_json::RuntimeConfig;
use topology::fabric::PROPAGATION_PS_PER_METRE;

use crate::tables::Tables;

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum End {
    /// Host `hosts[i]`.
    Host(usize),
    /// Port `p` of switch `switches[i]`.
    Switch(usize, u16),
}

/// A switch.
#[derive(Clone, Debug)]
pub struct Switch {
    /// Its name.
    pub name: String,
    /// What its entries configure.
    pub tables: Tables,
    /// The depth of each of its egress queues, packets.
    pub queue_packets: u32,
}

/// One NIC's host configuration: an interface of an agent file, or a host config file.
#[derive(Clone, Debug)]
pub struct Nic {
    /// The interface (`eth0`), or the file's name for a host config file.
    pub interface: String,
    /// Its configuration.
    pub config: HostConfig,
}

/// A host.
#[derive(Clone, Debug)]
pub struct Host {
    /// Its name.
    pub name: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its NICs' configurations (none given: the hosts are not checked).
    pub nics: Vec<Nic>,
}

/// A link.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// One end.
    pub a: End,
    /// The other.
    pub b: End,
    /// Rate, bits per second.
    pub rate_bps: u64,
    /// Cable length, millimetres.
    pub cable_mm: u64,
    /// MTU, bytes.
    pub mtu: u32,
}

/// What a topology file does not say about its links and switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkDefaults {
    /// A link's rate when the file gives none.
    pub rate_bps: u64,
    /// A link's cable when the file gives no delay.
    pub cable_mm: u64,
    /// Every link's MTU.
    pub mtu: u32,
    /// Every egress queue's depth, packets.
    pub queue_packets: u32,
}

/// A fabric to check.
#[derive(Clone, Debug, Default)]
pub struct Fabric {
    /// Switches.
    pub switches: Vec<Switch>,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Links.
    pub links: Vec<Link>,
    /// (switch, port) → its link.
    ports: BTreeMap<(usize, u16), usize>,
}

impl Fabric {
    /// A fabric of `switches`, `hosts` and `links`.
    pub fn new(switches: Vec<Switch>, hosts: Vec<Host>, links: Vec<Link>) -> Fabric {
        let mut ports = BTreeMap::new();
        for (i, l) in links.iter().enumerate() {
            for end in [l.a, l.b] {
                if let End::Switch(s, p) = end {
                    ports.insert((s, p), i);
                }
            }
        }
        Fabric {
            switches,
            hosts,
            links,
            ports,
        }
    }

    /// A generated fabric with the entries computed for it (`configs` in its switches' order),
    /// its egress queues `queue_packets` deep.
    pub fn generated(
        fabric: &topology::Fabric,
        configs: &[RuntimeConfig],
        queue_packets: u32,
    ) -> anyhow::Result<Fabric> {
        let switches = fabric
            .switches
            .iter()
            .zip(configs)
            .map(|(s, c)| {
                Ok(Switch {
                    name: s.name.clone(),
                    tables: Tables::read(c).with_context(|| s.name.clone())?,
                    queue_packets,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let hosts = fabric
            .hosts
            .iter()
            .map(|h| Host {
                name: h.name.clone(),
                ip: h.ip,
                nics: Vec::new(),
            })
            .collect();
        let end = |e: topology::fabric::End| match e {
            topology::fabric::End::Host(h) => End::Host(h.0),
            topology::fabric::End::Switch(s, p) => End::Switch(s.0, p),
        };
        let links = fabric
            .links
            .iter()
            .map(|l| Link {
                a: end(l.a),
                b: end(l.b),
                rate_bps: l.rate_bps,
                cable_mm: l.cable_mm,
                mtu: l.mtu,
            })
            .collect();
        Ok(Fabric::new(switches, hosts, links))
    }

    /// The network of a topology file with each switch's entries (`entries`, in its switches'
    /// order; `None` for a switch without runtime JSON). A link's cable is its delay at
    /// [`PROPAGATION_PS_PER_METRE`], its rate its `bw`; else `defaults`'.
    pub fn from_topology<S: netfiles::Named>(
        topology: &netfiles::Topology<S>,
        entries: &[Option<RuntimeConfig>],
        defaults: LinkDefaults,
    ) -> anyhow::Result<Fabric> {
        let switches: Vec<Switch> = topology
            .switches
            .iter()
            .zip(entries)
            .map(|(s, config)| {
                let tables = match config {
                    Some(c) => Tables::read(c).with_context(|| s.name().to_owned())?,
                    None => Tables::default(),
                };
                Ok(Switch {
                    name: s.name().to_owned(),
                    tables,
                    queue_packets: defaults.queue_packets,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let hosts: Vec<Host> = topology
            .hosts
            .iter()
            .map(|h| {
                let (ip, _) =
                    netfiles::parse_cidr(&h.ip).with_context(|| format!("host {}", h.name))?;
                Ok(Host {
                    name: h.name.clone(),
                    ip,
                    nics: Vec::new(),
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let end = |e: &netfiles::End| {
            if let Some(h) = hosts.iter().position(|h| h.name == e.node) {
                return Ok(End::Host(h));
            }
            switches
                .iter()
                .position(|s| s.name == e.node)
                .map(|s| End::Switch(s, e.port))
                .ok_or_else(|| anyhow!("link end {}: no such node", e.node))
        };
        let links = topology
            .links
            .iter()
            .map(|l| {
                let delay_ps = l.delay.as_nanos().saturating_mul(1000);
                Ok(Link {
                    a: end(&l.a)?,
                    b: end(&l.b)?,
                    rate_bps: l
                        .bw_mbps
                        .map_or(defaults.rate_bps, |mbps| (mbps * 1e6) as u64),
                    cable_mm: if delay_ps == 0 {
                        defaults.cable_mm
                    } else {
                        u64::try_from(delay_ps * 1000 / u128::from(PROPAGATION_PS_PER_METRE))
                            .unwrap_or(u64::MAX)
                    },
                    mtu: defaults.mtu,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Fabric::new(switches, hosts, links))
    }

    /// The link on port `port` of switch `switch`, and what is at its other end.
    pub fn peer(&self, switch: usize, port: u16) -> Option<(&Link, End)> {
        let link = &self.links[*self.ports.get(&(switch, port))?];
        let other = if link.a == End::Switch(switch, port) {
            link.b
        } else {
            link.a
        };
        Some((link, other))
    }

    /// The switch and port host `host` is attached to, and its link.
    pub fn attachment(&self, host: usize) -> Option<(usize, u16, &Link)> {
        self.links.iter().find_map(|l| match (l.a, l.b) {
            (End::Host(h), End::Switch(s, p)) | (End::Switch(s, p), End::Host(h)) if h == host => {
                Some((s, p, l))
            }
            _ => None,
        })
    }

    /// The name of what is at `end` (`leaf1:3`, `h11`).
    pub fn describe(&self, end: End) -> String {
        match end {
            End::Host(h) => self.hosts[h].name.clone(),
            End::Switch(s, p) => format!("{}:{p}", self.switches[s].name),
        }
    }

    /// The priorities with PFC on some switch port: the fabric's lossless priorities.
    pub fn lossless_priorities(&self) -> std::collections::BTreeSet<u8> {
        self.switches
            .iter()
            .flat_map(|s| s.tables.lossless_priorities())
            .collect()
    }

    /// The DSCPs of lossless traffic: those some switch maps to a lossless priority.
    pub fn lossless_dscps(&self) -> std::collections::BTreeSet<u8> {
        let lossless = self.lossless_priorities();
        self.switches
            .iter()
            .flat_map(|s| s.tables.dscp_priority.iter())
            .filter(|(_, p)| lossless.contains(p))
            .map(|(&d, _)| d)
            .collect()
    }
}
