//! A topology in the P4 tutorials' `topology.json` shape: `hosts` (name -> `ip` with prefix,
//! `mac`), `switches` (name -> `runtime_json`), `links` (`[a, b, latency, bandwidth Mb/s]`,
//! where an end is a host name or `switch-pPORT`). One addition: a host's `gateway_mac`, the
//! MAC of the switch port it sends to (the tutorials set it with an `arp -s` command).
//! [`load`] builds a simulation of it: every switch runs one program with its runtime file.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use softswitch_core::ir::Program;

use crate::event::NodeId;
use crate::host::HostConfig;
use crate::link::End as Port;
use crate::runtime;
use crate::simulation::Simulation;
use crate::time::US;

/// The longest topology file read, bytes.
pub const MAX_TOPOLOGY_BYTES: u64 = 4 << 20;

/// A parsed topology file.
#[derive(Debug, Deserialize)]
pub struct TopologyFile {
    /// Hosts by name.
    pub hosts: BTreeMap<String, HostSpec>,
    /// Switches by name.
    pub switches: BTreeMap<String, SwitchSpec>,
    /// Links: `[a, b]`, `[a, b, latency]` or `[a, b, latency, bandwidth]`.
    pub links: Vec<Vec<serde_json::Value>>,
}

/// A host of the topology file.
#[derive(Debug, Deserialize)]
pub struct HostSpec {
    /// Address with prefix length, `10.0.1.1/24`.
    pub ip: String,
    /// MAC address.
    pub mac: String,
    /// The MAC address of the switch port the host sends to.
    pub gateway_mac: String,
}

/// A switch of the topology file.
#[derive(Debug, Deserialize)]
pub struct SwitchSpec {
    /// Its runtime-JSON file, relative to the topology file.
    pub runtime_json: String,
}

/// One end of a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// A host (it has one port).
    Host(String),
    /// A switch port.
    Switch(String, u16),
}

/// A link between two ends, the same rate and latency both ways.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// One end.
    pub a: End,
    /// The other.
    pub b: End,
    /// One-way propagation delay, µs.
    pub latency_us: u64,
    /// Rate, bits per second.
    pub rate_bps: u64,
}

/// What is wrong with a topology file; messages name the key.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// Unreadable or not JSON of this shape.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// A bad value.
    #[error("{key}: {message}")]
    Value {
        /// Where (`links[3][2]`, `hosts.h1.ip`).
        key: String,
        /// Why.
        message: String,
    },
}

/// Default link values when a link gives none: the tutorials' 0 ms and no limit are replaced by
/// 1 Gb/s, since a fabric link needs a rate.
pub const DEFAULT_RATE_BPS: u64 = 1_000_000_000;

impl TopologyFile {
    /// Reads `path`; relative runtime files are found beside it.
    pub fn load(path: &Path) -> Result<(Self, PathBuf), TopologyError> {
        let file_err = |message: String| TopologyError::File {
            path: path.display().to_string(),
            message,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_TOPOLOGY_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| file_err(e.to_string()))?;
        if text.len() as u64 > MAX_TOPOLOGY_BYTES {
            return Err(file_err(format!("longer than {MAX_TOPOLOGY_BYTES} bytes")));
        }
        let topo = serde_json::from_str(&text).map_err(|e| file_err(e.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        Ok((topo, dir))
    }

    /// The links, with their ends resolved and checked against the hosts and switches.
    pub fn link_specs(&self) -> Result<Vec<LinkSpec>, TopologyError> {
        self.links
            .iter()
            .enumerate()
            .map(|(i, l)| self.link_spec(i, l))
            .collect()
    }

    fn link_spec(&self, i: usize, l: &[serde_json::Value]) -> Result<LinkSpec, TopologyError> {
        let err = |j: usize, message: String| TopologyError::Value {
            key: format!("links[{i}][{j}]"),
            message,
        };
        if !(2..=4).contains(&l.len()) {
            return Err(TopologyError::Value {
                key: format!("links[{i}]"),
                message: "expected [a, b, latency?, bandwidth?]".into(),
            });
        }
        let end = |j: usize| -> Result<End, TopologyError> {
            let s = l[j]
                .as_str()
                .ok_or_else(|| err(j, "expected a name".into()))?;
            if self.hosts.contains_key(s) {
                return Ok(End::Host(s.to_string()));
            }
            let (sw, port) = s
                .rsplit_once("-p")
                .and_then(|(sw, p)| Some((sw, p.parse::<u16>().ok()?)))
                .ok_or_else(|| err(j, format!("'{s}' is neither a host nor SWITCH-pPORT")))?;
            if !self.switches.contains_key(sw) {
                return Err(err(j, format!("no switch '{sw}'")));
            }
            Ok(End::Switch(sw.to_string(), port))
        };
        let latency_us = match l.get(2) {
            None => 0,
            Some(v) => latency(v).map_err(|m| err(2, m))?,
        };
        let rate_bps = match l.get(3) {
            None => DEFAULT_RATE_BPS,
            Some(v) => v
                .as_f64()
                .filter(|m| *m > 0.0)
                .map(|mbps| (mbps * 1e6) as u64)
                .ok_or_else(|| err(3, "expected a bandwidth in Mb/s above 0".into()))?,
        };
        Ok(LinkSpec {
            a: end(0)?,
            b: end(1)?,
            latency_us,
            rate_bps,
        })
    }
}

/// A latency: a number of milliseconds (the tutorials' unit) or a string `5us`, `2ms`, `0`.
fn latency(v: &serde_json::Value) -> Result<u64, String> {
    if let Some(ms) = v.as_f64() {
        return Ok((ms * 1000.0).round() as u64);
    }
    let s = v
        .as_str()
        .ok_or("expected a latency such as \"2us\" or \"1ms\"")?;
    let (digits, scale) = if let Some(d) = s.strip_suffix("us") {
        (d, 1.0)
    } else if let Some(d) = s.strip_suffix("ms") {
        (d, 1000.0)
    } else {
        (s, 1000.0)
    };
    digits
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|x| *x >= 0.0)
        .map(|x| (x * scale).round() as u64)
        .ok_or_else(|| format!("cannot read latency '{s}'"))
}

/// Parses `a.b.c.d` (an optional `/len` is ignored), as runtime JSON's values are read
/// (p4values' `parse_ipv4`).
pub fn parse_ipv4(s: &str) -> Option<u32> {
    p4values::value::parse_ipv4(s.split('/').next()?).map(u32::from)
}

/// Parses `aa:bb:cc:dd:ee:ff` (wire's `Address`).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    s.parse::<wire::ethernet::Address>().ok().map(|mac| mac.0)
}

/// Builds a simulation of the topology at `path`: every switch runs `program` with its runtime
/// file and a shared buffer of `buffer_bytes`, every host is `host` with the file's name,
/// address and MACs. Returns it with the node of each name.
pub fn load(
    path: &Path,
    program: &Program,
    host: &HostConfig,
    buffer_bytes: Option<u64>,
) -> Result<(Simulation, BTreeMap<String, NodeId>), TopologyError> {
    let (topo, dir) = TopologyFile::load(path)?;
    let mut sim = Simulation::new();
    let mut nodes = BTreeMap::new();
    let program = std::sync::Arc::new(program.clone());
    for (name, spec) in &topo.switches {
        let id = sim.add_switch(name.clone(), program.clone(), buffer_bytes);
        let key = format!("switches.{name}.runtime_json");
        let config =
            runtime::load(&dir.join(&spec.runtime_json)).map_err(|e| TopologyError::Value {
                key: key.clone(),
                message: e.to_string(),
            })?;
        sim.apply_entries(id, &config)
            .map_err(|e| TopologyError::Value {
                key,
                message: e.to_string(),
            })?;
        nodes.insert(name.clone(), id);
    }
    for (name, h) in &topo.hosts {
        let value = |key: &str| TopologyError::Value {
            key: format!("hosts.{name}.{key}"),
            message: "cannot read it".into(),
        };
        let config = HostConfig {
            name: name.clone(),
            ip: parse_ipv4(&h.ip).ok_or_else(|| value("ip"))?.into(),
            mac: parse_mac(&h.mac).ok_or_else(|| value("mac"))?,
            gateway_mac: parse_mac(&h.gateway_mac).ok_or_else(|| value("gateway_mac"))?,
            ..host.clone()
        };
        nodes.insert(name.clone(), sim.add_host(config));
    }
    for (i, l) in topo.link_specs()?.iter().enumerate() {
        let port = |end: &End| match end {
            End::Host(name) => Port {
                node: nodes[name],
                port: 0,
            },
            End::Switch(name, port) => Port {
                node: nodes[name],
                port: *port,
            },
        };
        sim.connect(port(&l.a), port(&l.b), l.rate_bps, l.latency_us * US)
            .map_err(|e| TopologyError::Value {
                key: format!("links[{i}]"),
                message: e.to_string(),
            })?;
    }
    Ok((sim, nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_in_tutorial_and_explicit_units() {
        assert_eq!(latency(&serde_json::json!("2us")), Ok(2));
        assert_eq!(latency(&serde_json::json!("1ms")), Ok(1000));
        assert_eq!(latency(&serde_json::json!(0.5)), Ok(500));
        assert!(latency(&serde_json::json!("fast")).is_err());
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_ipv4("10.0.1.2/24"), Some(0x0a00_0102));
        assert_eq!(parse_mac("08:00:00:00:01:02"), Some([8, 0, 0, 0, 1, 2]));
        assert_eq!(parse_mac("08:00"), None);
    }
}
