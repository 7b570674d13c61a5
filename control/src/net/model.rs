//! The network `lossless net up` builds, whatever file it came from: hosts (address, MAC,
//! gateway, static neighbours, commands), P4 switches (program, entries), links between
//! numbered ports, with a rate where the kernel can emulate one. Its checks (names, ports,
//! sizes) are the ones every reader shares.

use std::{collections::BTreeSet, net::Ipv4Addr, path::PathBuf};

use anyhow::{bail, Context as _};
use serde::Serialize;

use p4values::runtime_json::RuntimeConfig;

/// The most nodes a network may have (Mininet is happy with a few hundred on one machine).
pub const MAX_NODES: usize = 512;
/// The most links a network may have.
pub const MAX_LINKS: usize = 4096;
/// The highest switch port (v1model's port 511 drops).
pub const MAX_PORT: u16 = 510;
/// The longest node name: its interfaces are called NAME-ethPORT, at most 15 bytes.
pub const MAX_NAME: usize = 8;

/// A network to bring up.
#[derive(Debug, Default)]
pub struct Network {
    /// Hosts, in the order given.
    pub hosts: Vec<Host>,
    /// Switches, in the order given; the index is the device id.
    pub switches: Vec<Switch>,
    /// Links.
    pub links: Vec<Link>,
}

/// A host.
#[derive(Clone, Debug, Serialize)]
pub struct Host {
    /// Its name (`h1`).
    pub name: String,
    /// Address with prefix length (`10.0.1.1/24`).
    pub ip: String,
    /// MAC address.
    pub mac: String,
    /// Default gateway, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Ipv4Addr>,
    /// Static neighbours: (address, MAC).
    pub neighbours: Vec<(Ipv4Addr, String)>,
    /// Shell commands run in the host once it is up (the tutorials' `commands`).
    pub commands: Vec<String>,
}

/// A P4 switch.
#[derive(Clone, Debug)]
pub struct Switch {
    /// Its name (`s1`, `leaf1`).
    pub name: String,
    /// Its own program, if the topology names one (else the network's).
    pub program: Option<PathBuf>,
    /// The entries to write once the pipeline is set.
    pub entries: Entries,
}

/// What a switch is programmed with.
#[derive(Clone, Debug)]
pub enum Entries {
    /// Nothing.
    None,
    /// A runtime-JSON file (the tutorials' `runtime_json`).
    File(PathBuf),
    /// Entries computed by the control plane.
    Computed(Box<RuntimeConfig>),
}

/// One end of a link: a node and, for a switch, its port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    /// The node's name.
    pub node: String,
    /// The switch port (hosts have one interface, port 0).
    pub port: u16,
    /// The interface's MAC, if the topology says (else Mininet picks one).
    pub mac: Option<String>,
}

/// A link.
#[derive(Clone, Debug)]
pub struct Link {
    /// One end.
    pub a: End,
    /// The other.
    pub b: End,
    /// Rate in Mb/s (an HTB qdisc on both ends), if limited.
    pub bw_mbps: Option<f64>,
    /// Where in the input file it came from, for messages (`links[3]`).
    pub origin: String,
}

impl Network {
    /// Whether `name` is a host.
    pub fn is_host(&self, name: &str) -> bool {
        self.hosts.iter().any(|h| h.name == name)
    }

    /// Checks names, sizes, ports (each used once) and that every link joins known nodes.
    pub fn check(&self) -> anyhow::Result<()> {
        let nodes = self.hosts.len() + self.switches.len();
        if nodes > MAX_NODES {
            bail!("{nodes} nodes: at most {MAX_NODES}");
        }
        if self.links.len() > MAX_LINKS {
            bail!("{} links: at most {MAX_LINKS}", self.links.len());
        }
        let mut names = BTreeSet::new();
        let all = self.hosts.iter().map(|h| &h.name);
        for name in all.chain(self.switches.iter().map(|s| &s.name)) {
            check_name(name)?;
            if !names.insert(name.as_str()) {
                bail!("two nodes are called {name}");
            }
        }
        for host in &self.hosts {
            check_host(host).with_context(|| format!("host {}", host.name))?;
        }
        let mut used = BTreeSet::new();
        for link in &self.links {
            for end in [&link.a, &link.b] {
                if !names.contains(end.node.as_str()) {
                    bail!("{}: no node called {}", link.origin, end.node);
                }
                let host = self.is_host(&end.node);
                if !host && !(1..=MAX_PORT).contains(&end.port) {
                    bail!(
                        "{}: port {} of {}: ports are 1..={MAX_PORT}",
                        link.origin,
                        end.port,
                        end.node
                    );
                }
                if !used.insert((end.node.clone(), end.port)) {
                    bail!(
                        "{}: {} already has a link{}",
                        link.origin,
                        end.node,
                        if host {
                            String::new()
                        } else {
                            format!(" on port {}", end.port)
                        }
                    );
                }
            }
            if let Some(bw) = link.bw_mbps {
                if !(bw > 0.0 && bw <= 100_000.0) {
                    bail!("{}: bw {bw} Mb/s: from more than 0 to 100000", link.origin);
                }
            }
        }
        Ok(())
    }

    /// The switch port `host` is linked to.
    pub fn attachment(&self, host: &str) -> Option<&End> {
        self.links.iter().find_map(|l| {
            if l.a.node == host {
                Some(&l.b)
            } else if l.b.node == host {
                Some(&l.a)
            } else {
                None
            }
        })
    }
}

/// A node name: a letter, then letters, digits or `_`, at most [`MAX_NAME`] bytes.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        bail!(
            "node name '{}': a letter, then letters, digits or _, at most {MAX_NAME} bytes \
             (its interfaces are NAME-ethPORT, and Linux allows 15)",
            name.escape_debug()
        );
    }
    Ok(())
}

fn check_host(host: &Host) -> anyhow::Result<()> {
    parse_cidr(&host.ip)?;
    parse_mac(&host.mac)?;
    for (_, mac) in &host.neighbours {
        parse_mac(mac)?;
    }
    Ok(())
}

/// `A.B.C.D/N`.
pub fn parse_cidr(text: &str) -> anyhow::Result<(Ipv4Addr, u8)> {
    let (ip, len) = text
        .split_once('/')
        .with_context(|| format!("address '{text}': expected A.B.C.D/N"))?;
    let ip: Ipv4Addr = ip.parse().with_context(|| format!("address '{text}'"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .with_context(|| format!("address '{text}': the prefix length is 0..=32"))?;
    Ok((ip, len))
}

/// `aa:bb:cc:dd:ee:ff`, returned in lower case.
pub fn parse_mac(text: &str) -> anyhow::Result<String> {
    let parts: Vec<_> = text.split(':').collect();
    if parts.len() != 6
        || parts
            .iter()
            .any(|p| p.len() != 2 || u8::from_str_radix(p, 16).is_err())
    {
        bail!(
            "MAC '{}': expected six hex bytes, aa:bb:cc:dd:ee:ff",
            text.escape_debug()
        );
    }
    Ok(text.to_ascii_lowercase())
}

/// Refuses a link delay other than zero: Mininet emulates delay and loss with netem, and this
/// kernel has no netem (`sch_netem`); without it `tc` fails and Mininet only logs the error.
pub fn refuse_delay(origin: &str, value: &serde_json::Value) -> anyhow::Result<()> {
    let zero = match value {
        serde_json::Value::Null => true,
        serde_json::Value::Number(n) => n.as_f64() == Some(0.0),
        serde_json::Value::String(s) => {
            let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            digits.parse::<f64>().is_ok_and(|v| v == 0.0)
        }
        _ => false,
    };
    if zero {
        return Ok(());
    }
    if netem_available() {
        bail!("{origin}: delay {value}: lossless net emulates rates only, not delay");
    }
    bail!(
        "{origin}: delay {value}: Mininet emulates delay and loss with netem, and this kernel has \
         no netem (sch_netem is not loaded or built in); remove the delay, or run on a kernel \
         with netem"
    )
}

/// Whether the running kernel has netem (the module is loaded or built in).
fn netem_available() -> bool {
    std::path::Path::new("/sys/module/sch_netem").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str) -> Host {
        Host {
            name: name.into(),
            ip: "10.0.0.1/24".into(),
            mac: "08:00:00:00:00:01".into(),
            gateway: None,
            neighbours: vec![],
            commands: vec![],
        }
    }

    fn switch(name: &str) -> Switch {
        Switch {
            name: name.into(),
            program: None,
            entries: Entries::None,
        }
    }

    fn link(a: (&str, u16), b: (&str, u16)) -> Link {
        Link {
            a: End {
                node: a.0.into(),
                port: a.1,
                mac: None,
            },
            b: End {
                node: b.0.into(),
                port: b.1,
                mac: None,
            },
            bw_mbps: None,
            origin: "links[0]".into(),
        }
    }

    #[test]
    fn a_port_is_used_once_and_names_are_checked() {
        let mut net = Network {
            hosts: vec![host("h1"), host("h2")],
            switches: vec![switch("s1")],
            links: vec![link(("h1", 0), ("s1", 1)), link(("h2", 0), ("s1", 1))],
        };
        let err = net.check().unwrap_err().to_string();
        assert!(err.contains("s1 already has a link on port 1"), "{err}");
        net.links[1].b.port = 2;
        net.check().unwrap();
        net.links[1].b.port = 511;
        assert!(net
            .check()
            .unwrap_err()
            .to_string()
            .contains("ports are 1..=510"));
        net.links[1].b.port = 2;
        net.hosts[1].name = "a-very-long-name".into();
        assert!(net
            .check()
            .unwrap_err()
            .to_string()
            .contains("at most 8 bytes"));
    }

    #[test]
    fn addresses_parse_within_limits() {
        assert_eq!(
            parse_cidr("10.0.1.1/24").unwrap(),
            (Ipv4Addr::new(10, 0, 1, 1), 24)
        );
        assert!(parse_cidr("10.0.1.1/33").is_err());
        assert!(parse_cidr("10.0.1.1").is_err());
        assert_eq!(parse_mac("08:00:00:00:01:AA").unwrap(), "08:00:00:00:01:aa");
        assert!(parse_mac("08:00:00:00:01").is_err());
    }
}
