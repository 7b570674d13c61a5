//! A simulation of a topology in the P4 tutorials' `topology.json` shape, as
//! `netfiles::tutorial` reads it (its limits, its messages naming the key): every switch runs
//! one program with its runtime file, every host sends to its `gateway_mac` (the simulator's
//! addition to the shape: the MAC of the switch port it is cabled to), and every link keeps its
//! latency each way and its bandwidth, 1 Gb/s where it gives none ([`DEFAULT_RATE_BPS`]). What
//! the simulator has no use for is not read: the hosts' commands, the switches' `program`,
//! `cli_input` and `cpu_port`.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use softswitch_core::ir::Program;

use crate::event::NodeId;
use crate::host::HostConfig;
use crate::link::End as Port;
use crate::runtime;
use crate::simulation::Simulation;
use crate::time::NS;

/// What is wrong with a topology file; messages name the key.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// Unreadable, or refused by `netfiles` (not JSON of this shape, or past its limits).
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// A value the simulator needs and the file lacks, or cannot build.
    #[error("{key}: {message}")]
    Value {
        /// Where (`switches.s1.runtime_json`, `hosts.h1.gateway_mac`, `links[3]`).
        key: String,
        /// Why.
        message: String,
    },
}

/// The rate of a link that gives no bandwidth: the tutorials' "no limit" cannot be simulated,
/// since a fabric link serialises at a rate.
pub const DEFAULT_RATE_BPS: u64 = 1_000_000_000;

/// Reads and parses the topology file at `path` (at most `netfiles::MAX_BYTES`).
fn read(path: &Path) -> Result<netfiles::Topology, TopologyError> {
    let file_err = |message: String| TopologyError::File {
        path: path.display().to_string(),
        message,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(netfiles::MAX_BYTES as u64 + 1)
                .read_to_string(&mut text)
        })
        .map_err(|e| file_err(e.to_string()))?;
    netfiles::tutorial::parse(&text).map_err(|e| file_err(format!("{e:#}")))
}

/// A MAC `netfiles` checked, as bytes.
fn mac(key: String, text: &str) -> Result<[u8; 6], TopologyError> {
    text.parse::<wire::ethernet::Address>()
        .map(|mac| mac.0)
        .map_err(|e| TopologyError::Value {
            key,
            message: e.to_string(),
        })
}

/// Builds a simulation of the topology at `path`: every switch runs `program` with its runtime
/// file (relative to the topology file) and a shared buffer of `buffer_bytes`, every host is
/// `host` with the file's name, address and MACs. Returns it with the node of each name.
pub fn load(
    path: &Path,
    program: &Program,
    host: &HostConfig,
    buffer_bytes: Option<u64>,
) -> Result<(Simulation, BTreeMap<String, NodeId>), TopologyError> {
    let topology = read(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut sim = Simulation::new();
    let mut nodes = BTreeMap::new();
    let program = std::sync::Arc::new(program.clone());
    for switch in &topology.switches {
        let name = &switch.name;
        let key = format!("switches.{name}.runtime_json");
        let value = |message: String| TopologyError::Value {
            key: key.clone(),
            message,
        };
        let file = switch.runtime_json.as_deref().ok_or_else(|| {
            value("the simulator needs one: every switch runs the program with its entries".into())
        })?;
        let id = sim.add_switch(name.clone(), program.clone(), buffer_bytes);
        let config = runtime::load(&dir.join(file)).map_err(|e| value(e.to_string()))?;
        sim.apply_entries(id, &config)
            .map_err(|e| value(e.to_string()))?;
        nodes.insert(name.clone(), id);
    }
    for h in &topology.hosts {
        let key = |key: &str| format!("hosts.{}.{key}", h.name);
        let gateway_mac = h
            .gateway_mac
            .as_deref()
            .ok_or_else(|| TopologyError::Value {
                key: key("gateway_mac"),
                message: "the simulator needs the MAC of the switch port the host sends to".into(),
            })?;
        let (ip, _) = netfiles::parse_cidr(&h.ip).map_err(|e| TopologyError::Value {
            key: key("ip"),
            message: e.to_string(),
        })?;
        let config = HostConfig {
            name: h.name.clone(),
            ip,
            mac: mac(key("mac"), &h.mac)?,
            gateway_mac: mac(key("gateway_mac"), gateway_mac)?,
            ..host.clone()
        };
        nodes.insert(h.name.clone(), sim.add_host(config));
    }
    for link in &topology.links {
        // netfiles checked that every end is a node of the file.
        let port = |end: &netfiles::End| Port {
            node: nodes[&end.node],
            port: end.port,
        };
        let rate_bps = link
            .bw_mbps
            .map_or(DEFAULT_RATE_BPS, |mbps| (mbps * 1e6).round() as u64);
        // At most netfiles' MAX_DELAY, ten seconds: 10^13 ps.
        let delay = link.delay.as_nanos() as u64 * NS;
        sim.connect(port(&link.a), port(&link.b), rate_bps, delay)
            .map_err(|e| TopologyError::Value {
                key: link.origin.clone(),
                message: e.to_string(),
            })?;
    }
    Ok((sim, nodes))
}
