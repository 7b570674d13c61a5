//! The fabric a spec builds: switches in tiers, hosts (NIC endpoints) and the servers they
//! belong to, and links with a rate, a propagation delay and an MTU. Every index is dense and
//! stable: switch `i` is `switches[i]`, its port `p` is `ports[p - 1]` (ports are numbered from
//! 1, as v1model's are), host `h` is `hosts[h]`, link `l` is `links[l]`, server `s` is
//! `servers[s]`. A link's `a` end is the lower one (a host, or a switch of the lower tier).

use std::net::Ipv4Addr;

use wire::ethernet::Address;

use crate::{spec::Spec, Error};

/// The longest node or link name looked up.
pub const MAX_NAME_BYTES: usize = 256;

/// Propagation delay per metre of cable, picoseconds: 5 ns/m, the usual engineering figure
/// for both fibre (a group index of about 1.47 gives 4.9 ns/m) and twinax copper (a velocity
/// factor of about 0.7 gives 4.8 ns/m), rounded up so a cable is never faster than light in it.
pub const PROPAGATION_PS_PER_METRE: u64 = 5_000;

/// A switch's index in [`Fabric::switches`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SwitchId(pub usize);

/// A host's index in [`Fabric::hosts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub usize);

/// A link's index in [`Fabric::links`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// A server's index in [`Fabric::servers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(pub usize);

/// A fabric.
#[derive(Clone, Debug)]
pub struct Fabric {
    /// What it was built from.
    pub spec: Spec,
    /// Switches, tier by tier from the hosts up.
    pub switches: Vec<Switch>,
    /// Hosts: one per NIC.
    pub hosts: Vec<Host>,
    /// Servers: the hosts (NICs) of one machine; one host each but in rail-optimised fabrics.
    pub servers: Vec<Server>,
    /// Links.
    pub links: Vec<Link>,
}

/// A switch.
#[derive(Clone, Debug)]
pub struct Switch {
    /// Its name (`leaf1`, `e0_1`).
    pub name: String,
    /// Its tier: 1 for the switches hosts attach to, 2 above them, 3 above those.
    pub tier: u8,
    /// Its packet buffer, bytes.
    pub buffer_bytes: u64,
    /// Its ports; port `p` is `ports[p - 1]`.
    pub ports: Vec<Port>,
    /// The /24 of its hosts' addresses, for a first-tier switch.
    pub subnet: Option<Ipv4Addr>,
}

/// A switch port.
#[derive(Clone, Copy, Debug)]
pub struct Port {
    /// Its number, from 1.
    pub number: u16,
    /// Its MAC address.
    pub mac: Address,
    /// Its link.
    pub link: LinkId,
    /// What is at the other end.
    pub peer: End,
}

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum End {
    /// A host's NIC.
    Host(HostId),
    /// A switch port.
    Switch(SwitchId, u16),
}

/// A host: one NIC with its own address, as RoCE NICs each have.
#[derive(Clone, Debug)]
pub struct Host {
    /// Its name (`h11`, `h0_1_2`).
    pub name: String,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// The length of its subnet's prefix (24).
    pub prefix_len: u8,
    /// Its MAC address.
    pub mac: Address,
    /// Its default gateway.
    pub gateway: Ipv4Addr,
    /// The MAC of the switch port it is attached to: the gateway's.
    pub gateway_mac: Address,
    /// The server it is a NIC of.
    pub server: ServerId,
    /// Which NIC of its server it is (the rail, in a rail-optimised fabric), from 0.
    pub nic: u16,
    /// Its link.
    pub link: LinkId,
    /// The switch and port it is attached to.
    pub attachment: (SwitchId, u16),
}

/// A server: a machine with one or more NICs.
#[derive(Clone, Debug)]
pub struct Server {
    /// Its name.
    pub name: String,
    /// Its NICs, by NIC number.
    pub nics: Vec<HostId>,
}

/// A link: full duplex, the same in both directions.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// The lower end.
    pub a: End,
    /// The upper end (always a switch port).
    pub b: End,
    /// Rate, bits per second.
    pub rate_bps: u64,
    /// Cable length, millimetres.
    pub cable_mm: u64,
    /// Propagation delay, picoseconds ([`PROPAGATION_PS_PER_METRE`] times the length).
    pub delay_ps: u64,
    /// MTU, bytes (the largest IPv4 packet it carries).
    pub mtu: u32,
    /// Its tier: 1 for the hosts' links, 2 up to the second switch tier, 3 to the third.
    pub tier: u8,
}

impl Fabric {
    /// The switch called `name`.
    pub fn switch_named(&self, name: &str) -> Option<SwitchId> {
        self.switches
            .iter()
            .position(|s| s.name == name)
            .map(SwitchId)
    }

    /// The host called `name`.
    pub fn host_named(&self, name: &str) -> Option<HostId> {
        self.hosts.iter().position(|h| h.name == name).map(HostId)
    }

    /// The switch `id`.
    pub fn switch(&self, id: SwitchId) -> &Switch {
        &self.switches[id.0]
    }

    /// The host `id`.
    pub fn host(&self, id: HostId) -> &Host {
        &self.hosts[id.0]
    }

    /// The link `id`.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0]
    }

    /// The link a user names, as [`Fabric::describe_link`] and failure specs write them:
    /// `SWITCH:PORT` (the link on that port), or `A-B`, two nodes (hosts or switches) that one
    /// link joins, either way round; at most [`MAX_NAME_BYTES`].
    pub fn link_named(&self, text: &str) -> Result<LinkId, Error> {
        let invalid =
            |why: String| Error::Invalid(format!("link '{}': {why}", text.escape_debug()));
        if text.len() > MAX_NAME_BYTES {
            return Err(invalid(format!("at most {MAX_NAME_BYTES} bytes")));
        }
        let switch = |name: &str| {
            self.switch_named(name)
                .ok_or_else(|| invalid(format!("no switch '{}'", name.escape_debug())))
        };
        if let Some((name, port)) = text.split_once(':') {
            let s = self.switch(switch(name)?);
            let number: u16 = port
                .parse()
                .map_err(|_| invalid(format!("'{}' is not a port", port.escape_debug())))?;
            return s
                .port(number)
                .map(|p| p.link)
                .ok_or_else(|| invalid(format!("{} has ports 1..={}", s.name, s.ports.len())));
        }
        let (a, b) = text
            .split_once('-')
            .ok_or_else(|| invalid("expected SWITCH:PORT or A-B".into()))?;
        let ends = |name: &str| -> Result<Vec<(End, LinkId)>, Error> {
            if let Some(h) = self.host_named(name) {
                let host = self.host(h);
                return Ok(vec![(
                    End::Switch(host.attachment.0, host.attachment.1),
                    host.link,
                )]);
            }
            let s = switch(name)?;
            Ok(self
                .switch(s)
                .ports
                .iter()
                .map(|p| (p.peer, p.link))
                .collect())
        };
        let names_b = |end: &End| match *end {
            End::Host(h) => self.host(h).name == b,
            End::Switch(s, _) => self.switch(s).name == b,
        };
        let joined: Vec<LinkId> = ends(a)?
            .into_iter()
            .filter(|(peer, _)| names_b(peer))
            .map(|(_, link)| link)
            .collect();
        match joined[..] {
            [link] => Ok(link),
            [] => Err(invalid(format!("no link joins {a} and {b}"))),
            _ => Err(invalid(format!(
                "{} links join {a} and {b}: name one by SWITCH:PORT",
                joined.len()
            ))),
        }
    }

    /// The name of what is at `end` (`leaf1:3`, `h11`).
    pub fn describe(&self, end: End) -> String {
        match end {
            End::Host(h) => self.host(h).name.clone(),
            End::Switch(s, p) => format!("{}:{p}", self.switch(s).name),
        }
    }

    /// The name of a link (`h11-leaf1:1`, `leaf1:3-spine1:1`).
    pub fn describe_link(&self, link: LinkId) -> String {
        let l = self.link(link);
        format!("{}-{}", self.describe(l.a), self.describe(l.b))
    }
}

impl Switch {
    /// Port `number`, if it has one.
    pub fn port(&self, number: u16) -> Option<&Port> {
        let index = usize::from(number).checked_sub(1)?;
        self.ports.get(index)
    }

    /// Its ports towards the tier above.
    pub fn uplinks<'a>(&'a self, fabric: &'a Fabric) -> impl Iterator<Item = &'a Port> + 'a {
        self.ports.iter().filter(move |p| match p.peer {
            End::Switch(s, _) => fabric.switch(s).tier > self.tier,
            End::Host(_) => false,
        })
    }
}

/// The properties of a link to add.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LinkSpec {
    pub rate_bps: u64,
    pub cable_mm: u64,
    pub mtu: u32,
    pub tier: u8,
}

/// Builds a fabric: switches and hosts first, then links between numbered ports, each switch's
/// ports added in order from 1.
pub(crate) struct Builder {
    fabric: Fabric,
}

impl Builder {
    pub fn new(spec: &Spec) -> Builder {
        Builder {
            fabric: Fabric {
                spec: spec.clone(),
                switches: Vec::new(),
                hosts: Vec::new(),
                servers: Vec::new(),
                links: Vec::new(),
            },
        }
    }

    /// The link properties of tier `tier` (1 for the hosts' links).
    pub fn link_spec(&self, tier: u8) -> LinkSpec {
        let o = &self.fabric.spec.options;
        let t = o.links[usize::from(tier - 1)];
        LinkSpec {
            rate_bps: t.rate_bps,
            cable_mm: t.cable_mm,
            mtu: o.mtu,
            tier,
        }
    }

    /// Adds a switch of `tier` with `subnet` (first tier only).
    pub fn switch(&mut self, name: String, tier: u8, subnet: Option<Ipv4Addr>) -> SwitchId {
        let buffer_bytes = self.fabric.spec.options.buffers[usize::from(tier - 1)];
        self.fabric.switches.push(Switch {
            name,
            tier,
            buffer_bytes,
            ports: Vec::new(),
            subnet,
        });
        SwitchId(self.fabric.switches.len() - 1)
    }

    /// Adds a server.
    pub fn server(&mut self, name: String) -> ServerId {
        self.fabric.servers.push(Server {
            name,
            nics: Vec::new(),
        });
        ServerId(self.fabric.servers.len() - 1)
    }

    /// Adds a host, a server of its own, on the next port of `switch` (see [`Builder::nic`]).
    pub fn host(
        &mut self,
        name: String,
        ip: Ipv4Addr,
        gateway: Ipv4Addr,
        attachment: (SwitchId, u16, Address),
    ) -> HostId {
        let server = self.server(name.clone());
        self.nic(name, ip, gateway, server, attachment)
    }

    /// Adds a host, the next NIC of `server`, with address `ip` (its MAC from it, see
    /// [`host_mac`]) and gateway `gateway`, on the next port of `switch`, which must be port
    /// `port`, of MAC `port_mac`.
    pub fn nic(
        &mut self,
        name: String,
        ip: Ipv4Addr,
        gateway: Ipv4Addr,
        server: ServerId,
        (switch, port, port_mac): (SwitchId, u16, Address),
    ) -> HostId {
        let id = HostId(self.fabric.hosts.len());
        let link = self.add_link(End::Host(id), End::Switch(switch, port), self.link_spec(1));
        self.push_port(switch, port, port_mac, link, End::Host(id));
        let nics = &mut self.fabric.servers[server.0].nics;
        let nic = u16::try_from(nics.len()).expect("at most 16 NICs a server");
        nics.push(id);
        self.fabric.hosts.push(Host {
            name,
            ip,
            prefix_len: 24,
            mac: host_mac(ip),
            gateway,
            gateway_mac: port_mac,
            server,
            nic,
            link,
            attachment: (switch, port),
        });
        id
    }

    /// Links port `lower.1` of `lower.0` (MAC `lower.2`) with port `upper.1` of `upper.0`, each
    /// the next port of its switch, with the properties of `tier`.
    pub fn connect(
        &mut self,
        lower: (SwitchId, u16, Address),
        upper: (SwitchId, u16, Address),
        tier: u8,
    ) {
        let a = End::Switch(lower.0, lower.1);
        let b = End::Switch(upper.0, upper.1);
        let link = self.add_link(a, b, self.link_spec(tier));
        self.push_port(lower.0, lower.1, lower.2, link, b);
        self.push_port(upper.0, upper.1, upper.2, link, a);
    }

    fn add_link(&mut self, a: End, b: End, spec: LinkSpec) -> LinkId {
        self.fabric.links.push(Link {
            a,
            b,
            rate_bps: spec.rate_bps,
            cable_mm: spec.cable_mm,
            delay_ps: spec.cable_mm * PROPAGATION_PS_PER_METRE / 1000,
            mtu: spec.mtu,
            tier: spec.tier,
        });
        LinkId(self.fabric.links.len() - 1)
    }

    fn push_port(&mut self, switch: SwitchId, number: u16, mac: Address, link: LinkId, peer: End) {
        let ports = &mut self.fabric.switches[switch.0].ports;
        assert_eq!(
            usize::from(number),
            ports.len() + 1,
            "a generator adds each switch's ports in order"
        );
        ports.push(Port {
            number,
            mac,
            link,
            peer,
        });
    }

    pub fn finish(self) -> Fabric {
        self.fabric
    }
}

/// The MAC of a host: 08:00:00 and the last three bytes of its address (every host address is
/// in 10.0.0.0/8), as the P4 tutorials number theirs (`08:00:00:00:01:11`).
fn host_mac(ip: Ipv4Addr) -> Address {
    let [_, b, c, d] = ip.octets();
    Address([0x08, 0, 0, b, c, d])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_by_name() {
        let fabric = crate::build(&Spec::parse("leaf-spine:2,2,2").unwrap());
        let uplink = fabric.link_named("leaf1:3").unwrap();
        assert_eq!(fabric.describe_link(uplink), "leaf1:3-spine1:1");
        assert_eq!(fabric.link_named("spine1-leaf1"), Ok(uplink));
        assert_eq!(fabric.link_named("leaf1-spine1"), Ok(uplink));
        let host = fabric.link_named("h12-leaf1").unwrap();
        assert_eq!(fabric.describe_link(host), "h12-leaf1:2");
        assert_eq!(fabric.link_named("leaf1-h12"), Ok(host));
        for (text, says) in [
            ("leaf9:1", "no switch 'leaf9'"),
            ("leaf1:9", "leaf1 has ports 1..=4"),
            ("leaf1:x", "'x' is not a port"),
            ("leaf1-leaf2", "no link joins leaf1 and leaf2"),
            ("leaf1", "expected SWITCH:PORT or A-B"),
        ] {
            let err = fabric.link_named(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(fabric.link_named(&long).is_err());
    }

    #[test]
    fn a_cable_delays_five_nanoseconds_a_metre() {
        let spec = Spec::parse("leaf-spine:1,1,1,host-cable=2m,spine-cable=0.5m").unwrap();
        let fabric = crate::build(&spec);
        let delays: Vec<u64> = fabric.links.iter().map(|l| l.delay_ps).collect();
        assert_eq!(delays, [10_000, 2_500]);
        assert_eq!(
            host_mac(Ipv4Addr::new(10, 3, 2, 1)).to_string(),
            "08:00:00:03:02:01"
        );
    }
}
