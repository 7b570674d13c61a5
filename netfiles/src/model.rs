//! What a network file describes, whatever its format: hosts (address, MAC, gateway, static
//! neighbours, commands), switches with the files named for them, links between numbered
//! ports with their rate, delay, jitter and loss as the file gives them (what a reader can
//! emulate is the reader's to say: `lossless net` emulates rates only, the simulator rates and
//! delays); and the checks every reader shares (names, ports, sizes, values), linear in the
//! size of the network. The limits here bound the parse (a file's size, the counts and name
//! lengths that bound its memory) and the values (v1model's ports, rates, delays); what one
//! reader cannot build is its own to refuse (`lossless net`'s Mininet limits are in its
//! `net::model`), so the simulator reads data-centre-sized fabrics.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::Ipv4Addr,
    time::Duration,
};

use anyhow::{bail, Context as _};
use serde::Serialize;

/// The largest network file read, in bytes.
pub const MAX_BYTES: usize = 16 << 20;
/// The most nodes a network may have (a bound on the parse's memory, beyond the simulator's
/// largest fabric).
pub const MAX_NODES: usize = 1 << 17;
/// The most links a network may have (a bound on the parse's memory).
pub const MAX_LINKS: usize = 1 << 18;
/// The highest switch port (v1model's port 511 drops).
pub const MAX_PORT: u16 = 510;
/// The longest node name, in bytes (a bound on the parse's memory and its messages).
pub const MAX_NAME: usize = 64;
/// The highest link rate, in Mb/s (ten terabits a second is beyond any link these files
/// describe).
pub const MAX_RATE_MBPS: f64 = 10_000_000.0;
/// The longest host command, in bytes.
pub const MAX_COMMAND: usize = 4096;
/// The longest link delay or jitter (netem's are counted in microseconds; ten seconds is
/// beyond any network these files describe).
pub const MAX_DELAY: Duration = Duration::from_secs(10);

/// A network as its file describes it, with its switches as `S`: as the file names them
/// ([`Switch`]), or as a reader makes them (`lossless net`'s, with their programs found).
#[derive(Debug)]
pub struct Topology<S = Switch> {
    /// Hosts, in the file's order.
    pub hosts: Vec<Host>,
    /// Switches, in the file's order.
    pub switches: Vec<S>,
    /// Links.
    pub links: Vec<Link>,
    /// The CPU port of the switches that have one (the tutorials' `cpu_port`, BMv2's
    /// `--cpu-port`): where frames leave for the controller as PacketIn and PacketOut enters.
    pub cpu_ports: BTreeMap<String, u16>,
}

impl<S> Default for Topology<S> {
    fn default() -> Self {
        Topology {
            hosts: Vec::new(),
            switches: Vec::new(),
            links: Vec::new(),
            cpu_ports: BTreeMap::new(),
        }
    }
}

/// A switch of a [`Topology`], whatever else it carries: its name.
pub trait Named {
    /// Its name (`s1`).
    fn name(&self) -> &str;
}

impl Named for Switch {
    fn name(&self) -> &str {
        &self.name
    }
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
    /// The MAC of the switch port the host sends to, if the file says (the simulator's
    /// `gateway_mac` in a tutorials' topology; p4-utils' gateway port). Mininet needs none: the
    /// host's commands or neighbours set it.
    #[serde(skip)]
    pub gateway_mac: Option<String>,
}

/// A switch, with the files its topology names for it as written there (relative or not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Switch {
    /// Its name (`s1`).
    pub name: String,
    /// Its runtime JSON (P4Runtime entries).
    pub runtime_json: Option<String>,
    /// Its simple_switch_CLI commands.
    pub cli_input: Option<String>,
    /// Its program: P4 source or p4c's BMv2 JSON.
    pub program: Option<String>,
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
    /// One-way delay, each way (the tutorials' latency, p4-utils' `delay`); zero if none.
    pub delay: Duration,
    /// Delay variation (p4-utils' `jitter`); zero if none.
    pub jitter: Duration,
    /// Frames lost, percent (p4-utils' `loss`); zero if none.
    pub loss_percent: f64,
    /// Where in the input file it came from, for messages (`links[3]`).
    pub origin: String,
}

/// Reads a delay or jitter at `origin`: a number of milliseconds (the tutorials' and p4-utils'
/// unit), a string with tc's unit (`2us`, `1.5ms`, `1s`), or null or `"0"` for none; from 0 to
/// [`MAX_DELAY`].
pub(crate) fn parse_delay(origin: &str, value: &serde_json::Value) -> anyhow::Result<Duration> {
    let bad = || {
        anyhow::anyhow!(
            "{origin}: {value}: a number of ms or a string with a unit (s, ms, us), from 0 to \
             {MAX_DELAY:?}"
        )
    };
    let (number, unit_ns) = match value {
        serde_json::Value::Null => return Ok(Duration::ZERO),
        serde_json::Value::Number(n) => (n.as_f64().ok_or_else(bad)?, 1e6),
        serde_json::Value::String(s) => {
            let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            let number: f64 = digits.trim().parse().map_err(|_| bad())?;
            let unit_ns = match &s[digits.len()..] {
                "s" => 1e9,
                "ms" => 1e6,
                "us" => 1e3,
                // tc would read microseconds, the tutorials' numbers are milliseconds: only
                // zero means the same to both.
                "" if number == 0.0 => 1.0,
                _ => return Err(bad()),
            };
            (number, unit_ns)
        }
        _ => return Err(bad()),
    };
    let ns = number * unit_ns;
    if !(number >= 0.0 && ns <= MAX_DELAY.as_nanos() as f64) {
        return Err(bad());
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// Reads a loss at `origin`: a percentage from 0 to 100 (Mininet's and p4-utils'), or null for
/// none.
pub(crate) fn parse_loss(origin: &str, value: &serde_json::Value) -> anyhow::Result<f64> {
    match value {
        serde_json::Value::Null => Ok(0.0),
        _ => value
            .as_f64()
            .filter(|p| (0.0..=100.0).contains(p))
            .with_context(|| format!("{origin}: {value}: a percentage from 0 to 100")),
    }
}

impl<S: Named> Topology<S> {
    /// The names of its nodes: hosts, then switches.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        let hosts = self.hosts.iter().map(|h| h.name.as_str());
        hosts.chain(self.switches.iter().map(Named::name))
    }

    /// Checks names, sizes, ports (each used once) and that every link joins known nodes; in
    /// time linear in the size of the network.
    pub fn check(&self) -> anyhow::Result<()> {
        check_sizes(self.hosts.len() + self.switches.len(), self.links.len())?;
        // Name → whether it is a host.
        let mut nodes: HashMap<&str, bool> = HashMap::new();
        for (i, name) in self.node_names().enumerate() {
            check_name(name)?;
            if nodes.insert(name, i < self.hosts.len()).is_some() {
                bail!("two nodes are called {name}");
            }
        }
        for host in &self.hosts {
            check_host(host).with_context(|| format!("host {}", host.name))?;
        }
        for (name, port) in &self.cpu_ports {
            if nodes.get(name.as_str()) != Some(&false) {
                bail!("cpu_port of {name}: no switch is called so");
            }
            if !(1..=MAX_PORT).contains(port) {
                bail!("cpu_port {port} of {name}: ports are 1..={MAX_PORT}");
            }
        }
        let mut used = HashSet::new();
        for link in &self.links {
            for end in [&link.a, &link.b] {
                let Some(&host) = nodes.get(end.node.as_str()) else {
                    bail!("{}: no node called {}", link.origin, end.node);
                };
                if !host && !(1..=MAX_PORT).contains(&end.port) {
                    bail!(
                        "{}: port {} of {}: ports are 1..={MAX_PORT}",
                        link.origin,
                        end.port,
                        end.node
                    );
                }
                if self.cpu_ports.get(&end.node) == Some(&end.port) {
                    bail!(
                        "{}: port {} of {} is its CPU port, which no link may use",
                        link.origin,
                        end.port,
                        end.node
                    );
                }
                if !used.insert((end.node.as_str(), end.port)) {
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
                if !(bw > 0.0 && bw <= MAX_RATE_MBPS) {
                    bail!(
                        "{}: bw {bw} Mb/s: from more than 0 to {MAX_RATE_MBPS}",
                        link.origin
                    );
                }
            }
        }
        Ok(())
    }
}

/// Refuses a network of more than [`MAX_NODES`] nodes or [`MAX_LINKS`] links; the readers
/// call it on a file's counts before they look at any node or link.
pub fn check_sizes(nodes: usize, links: usize) -> anyhow::Result<()> {
    if nodes > MAX_NODES {
        bail!("{nodes} nodes: at most {MAX_NODES}");
    }
    if links > MAX_LINKS {
        bail!("{links} links: at most {MAX_LINKS}");
    }
    Ok(())
}

/// Refuses a file of more than [`MAX_BYTES`] bytes.
pub(crate) fn check_length(text: &str) -> anyhow::Result<()> {
    if text.len() > MAX_BYTES {
        bail!("{} bytes: at most {MAX_BYTES}", text.len());
    }
    Ok(())
}

/// A node name: a letter, then letters, digits or `_`, at most [`MAX_NAME`] bytes.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        bail!(
            "node name '{}': a letter, then letters, digits or _, at most {MAX_NAME} bytes",
            name.escape_debug()
        );
    }
    Ok(())
}

fn check_host(host: &Host) -> anyhow::Result<()> {
    parse_cidr(&host.ip)?;
    parse_mac(&host.mac)?;
    if let Some(mac) = &host.gateway_mac {
        parse_mac(mac).context("gateway_mac")?;
    }
    for (_, mac) in &host.neighbours {
        parse_mac(mac)?;
    }
    for command in &host.commands {
        // The glue runs each command in the host's shell as one line, as Mininet's `h1 CMD`.
        if command.len() > MAX_COMMAND || command.chars().any(char::is_control) {
            bail!(
                "command '{}': one line of at most {MAX_COMMAND} bytes, without control \
                 characters",
                command.chars().take(80).collect::<String>().escape_debug()
            );
        }
    }
    Ok(())
}

/// `A.B.C.D/N`.
pub fn parse_cidr(text: &str) -> anyhow::Result<(Ipv4Addr, u8)> {
    let (ip, len) = text
        .split_once('/')
        .with_context(|| format!("address '{}': expected A.B.C.D/N", text.escape_debug()))?;
    let ip: Ipv4Addr = ip
        .parse()
        .with_context(|| format!("address '{}'", text.escape_debug()))?;
    let len: u8 = len.parse().ok().filter(|l| *l <= 32).with_context(|| {
        format!(
            "address '{}': the prefix length is 0..=32",
            text.escape_debug()
        )
    })?;
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
            gateway_mac: None,
        }
    }

    fn switch(name: &str) -> Switch {
        Switch {
            name: name.into(),
            ..Switch::default()
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
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss_percent: 0.0,
            origin: "links[0]".into(),
        }
    }

    #[test]
    fn a_port_is_used_once_and_names_are_checked() {
        let mut net = Topology {
            hosts: vec![host("h1"), host("h2")],
            switches: vec![switch("s1")],
            links: vec![link(("h1", 0), ("s1", 1)), link(("h2", 0), ("s1", 1))],
            ..Topology::default()
        };
        let refused = |net: &Topology| net.check().unwrap_err().to_string();
        let err = refused(&net);
        assert!(err.contains("s1 already has a link on port 1"), "{err}");
        net.links[1].b.port = 2;
        net.check().unwrap();
        net.links[1].b.port = 511;
        assert!(refused(&net).contains("ports are 1..=510"));
        net.links[1].b.port = 2;
        net.hosts[1].name = "a-name".into();
        assert!(refused(&net).contains("a letter, then letters, digits or _, at most 64 bytes"));
        // Longer than an interface name may be (lossless net's limit, not the file's).
        net.hosts[1].name = "host_of_rack_12".into();
        net.links[1].a.node = "host_of_rack_12".into();
        net.check().unwrap();
        net.hosts[1].name = "h".repeat(MAX_NAME + 1);
        assert!(refused(&net).contains("at most 64 bytes"));
        net.hosts[1].name = "h2".into();
        net.links[1].a.node = "h2".into();
        net.cpu_ports.insert("s1".into(), 2);
        assert!(refused(&net).contains("port 2 of s1 is its CPU port"));
        net.cpu_ports.insert("s1".into(), 510);
        net.check().unwrap();
        net.hosts[0].commands = vec!["ip route add 10.0.0.0/24 dev eth0 # a comment".into()];
        net.check().unwrap();
        net.hosts[0].commands = vec!["true\nreboot".into()];
        let err = format!("{:#}", net.check().unwrap_err());
        assert!(
            err.contains("host h1: command 'true\\nreboot': one line"),
            "{err}"
        );
    }

    #[test]
    fn sizes_are_refused_before_anything_is_looked_at() {
        let err = check_sizes(2, MAX_LINKS + 1).unwrap_err().to_string();
        assert_eq!(err, format!("{} links: at most {MAX_LINKS}", MAX_LINKS + 1));
        assert!(check_sizes(MAX_NODES + 1, 0).is_err());
        check_sizes(MAX_NODES, MAX_LINKS).unwrap();
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

    #[test]
    fn delays_read_in_the_tutorials_and_tc_units_within_limits() {
        let delay = |json: &str| parse_delay("links[0][2]", &serde_json::from_str(json).unwrap());
        for (json, want) in [
            ("null", Duration::ZERO),
            ("0", Duration::ZERO),
            (r#""0""#, Duration::ZERO),
            (r#""0ms""#, Duration::ZERO),
            (r#""2us""#, Duration::from_micros(2)),
            (r#""1.5ms""#, Duration::from_micros(1500)),
            (r#""1s""#, Duration::from_secs(1)),
            // A number is milliseconds, as the tutorials' run_exercise.py writes it for tc.
            ("0.5", Duration::from_micros(500)),
            ("5", Duration::from_millis(5)),
            ("10000", MAX_DELAY),
        ] {
            assert_eq!(delay(json).unwrap(), want, "{json}");
        }
        for bad in [
            r#""5""#,
            r#""5 parsecs""#,
            r#""fast""#,
            "-1",
            r#""-1ms""#,
            "10000.001",
            r#""11s""#,
            "1e300",
            r#""NaNms""#,
            "true",
        ] {
            let err = delay(bad).unwrap_err().to_string();
            assert!(
                err.starts_with("links[0][2]: ") && err.contains("from 0 to 10s"),
                "{bad}: {err}"
            );
        }
        let loss = |json: &str| parse_loss("x.loss", &serde_json::from_str(json).unwrap());
        assert_eq!(loss("null").unwrap(), 0.0);
        assert_eq!(loss("2.5").unwrap(), 2.5);
        assert_eq!(loss("100").unwrap(), 100.0);
        assert!(loss("101").is_err());
        assert!(loss("-1").is_err());
        assert!(loss(r#""1%""#)
            .unwrap_err()
            .to_string()
            .contains("from 0 to 100"));
    }
}
