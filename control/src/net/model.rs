//! The network `lossless net up` builds, whatever file it came from: hosts (address, MAC,
//! gateway, static neighbours, commands), P4 switches (program, entries), links between
//! numbered ports, with a rate where the kernel can emulate one. Its checks (names, ports,
//! sizes) are the ones every reader shares, linear in the size of the network, and so is the
//! rule by which the readers find the files a topology names ([`resolve`]).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::Ipv4Addr,
    path::{Path, PathBuf},
};

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
/// The longest host command, in bytes.
pub const MAX_COMMAND: usize = 4096;

/// A network to bring up.
#[derive(Debug, Default)]
pub struct Network {
    /// Hosts, in the order given.
    pub hosts: Vec<Host>,
    /// Switches, in the order given; the index is the device id.
    pub switches: Vec<Switch>,
    /// Links.
    pub links: Vec<Link>,
    /// The CPU port of the switches that have one (the tutorials' `cpu_port`, BMv2's
    /// `--cpu-port`): where frames leave for the controller as PacketIn and PacketOut enters.
    pub cpu_ports: BTreeMap<String, u16>,
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
    /// Its program: the topology's for it until `net::program::settle` gives every switch
    /// its own (none: it starts without a pipeline, for a controller to set).
    pub program: Option<Program>,
    /// The entries to write once the pipeline is set.
    pub entries: Entries,
}

/// A program file, as a switch loads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// P4_16 source: softswitch runs it, BMv2 gets it compiled by p4c.
    Source(PathBuf),
    /// p4c-bm2-ss's BMv2 JSON with its P4Info, loaded as they are by both switches.
    Bmv2Json {
        /// The JSON.
        json: PathBuf,
        /// Its P4Info (p4c's `--p4runtime-files` output).
        p4info: PathBuf,
    },
}

/// What a switch is programmed with.
#[derive(Clone, Debug)]
pub enum Entries {
    /// Nothing.
    None,
    /// Files: runtime JSON written over P4Runtime (the tutorials' `runtime_json`), then
    /// simple_switch_CLI commands over Thrift (`cli_input`, p4-utils' and the tutorials').
    Files {
        /// The runtime-JSON file.
        runtime_json: Option<PathBuf>,
        /// The simple_switch_CLI command file.
        cli_input: Option<PathBuf>,
    },
    /// Entries computed by the control plane.
    Computed(Box<RuntimeConfig>),
}

impl Entries {
    /// The entries of a topology's switch: its runtime JSON and CLI command files, if any.
    pub fn files(runtime_json: Option<PathBuf>, cli_input: Option<PathBuf>) -> Entries {
        if runtime_json.is_none() && cli_input.is_none() {
            return Entries::None;
        }
        Entries::Files {
            runtime_json,
            cli_input,
        }
    }

    /// The runtime-JSON file, if the entries come from one.
    pub fn runtime_json(&self) -> Option<&Path> {
        match self {
            Entries::Files {
                runtime_json: Some(file),
                ..
            } => Some(file),
            _ => None,
        }
    }

    /// The simple_switch_CLI command file, if there is one.
    pub fn cli_input(&self) -> Option<&Path> {
        match self {
            Entries::Files {
                cli_input: Some(file),
                ..
            } => Some(file),
            _ => None,
        }
    }
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

    /// Checks names, sizes, ports (each used once) and that every link joins known nodes; in
    /// time linear in the size of the network.
    pub fn check(&self) -> anyhow::Result<()> {
        check_sizes(self.hosts.len() + self.switches.len(), self.links.len())?;
        // Name → whether it is a host.
        let mut nodes: HashMap<&str, bool> = HashMap::new();
        let all = self.hosts.iter().map(|h| (&h.name, true));
        for (name, host) in all.chain(self.switches.iter().map(|s| (&s.name, false))) {
            check_name(name)?;
            if nodes.insert(name, host).is_some() {
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
                if !(bw > 0.0 && bw <= 100_000.0) {
                    bail!("{}: bw {bw} Mb/s: from more than 0 to 100000", link.origin);
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

/// Where a file a topology names is: an absolute path as it is; a relative one, as the P4
/// tutorials take it, from the current directory (where `make run` runs: the exercise folder),
/// else beside `file`, the topology (or runtime JSON) that names it, where lossless's own
/// topologies keep theirs. When both exist and are different files, the current directory's
/// is taken, and a note says so. Neither: an error that names both places.
pub fn resolve(relative: &str, file: &Path) -> anyhow::Result<PathBuf> {
    let path = Path::new(relative);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let beside = file.parent().unwrap_or(Path::new("")).join(path);
    match (path.exists(), beside.exists()) {
        (true, true) => {
            if !same_file(path, &beside) {
                eprintln!(
                    "lossless net: {relative} (named in {}) is taken from the current \
                     directory, as the P4 tutorials do, not beside the file ({})",
                    file.display(),
                    beside.display()
                );
            }
            Ok(path.to_path_buf())
        }
        (true, false) => Ok(path.to_path_buf()),
        (false, true) => Ok(beside),
        (false, false) => bail!(
            "{relative} (named in {}) is neither in the current directory, where the P4 \
             tutorials take it from (run from the exercise folder, as `make run` does), nor \
             beside the file ({})",
            file.display(),
            beside.display()
        ),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
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
            ..Network::default()
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
        net.hosts[1].name = "h2".into();
        net.cpu_ports.insert("s1".into(), 2);
        assert!(net
            .check()
            .unwrap_err()
            .to_string()
            .contains("port 2 of s1 is its CPU port"));
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
    fn relative_files_are_taken_from_the_current_directory_then_beside_the_topology() {
        let dir = std::env::temp_dir().join(format!("lossless-resolve-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("topo")).unwrap();
        std::fs::write(dir.join("topo/s1-runtime.json"), "{}").unwrap();
        let topology = dir.join("topo/topology.json");
        // Not in the current directory (the crate's): beside the topology.
        assert_eq!(
            resolve("s1-runtime.json", &topology).unwrap(),
            dir.join("topo/s1-runtime.json")
        );
        // In the current directory: taken from there, as the tutorials do.
        assert_eq!(
            resolve("Cargo.toml", &topology).unwrap(),
            Path::new("Cargo.toml")
        );
        assert_eq!(resolve("/abs/x", &topology).unwrap(), Path::new("/abs/x"));
        let err = resolve("pod-topo/s9-runtime.json", &topology)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("current directory") && err.contains("topo/pod-topo/s9-runtime.json"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
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
