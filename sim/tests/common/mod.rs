//! Shared by the simulator's tests: lossless.p4 compiled, hosts' settings, the example
//! leaf/spine topology of dataplane-p4, and counters read off a switch.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use sim::event::NodeId;
use sim::host::HostConfig;
use sim::scenario::FailureSpec;
use sim::simulation::Simulation;
use sim::time::{MS, US};
use softswitch_core::ir::Program;
use softswitch_core::runtime::CellIndex;
use softswitch_core::table::CounterCell;
use softswitch_frontend::source::SourceMap;

/// The dataplane-p4 folder.
pub fn dataplane_p4() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataplane-p4")
}

/// Compiles a program as `softswitch check` does; the rendered diagnostic on error.
pub fn compile(path: &Path) -> Result<(Program, SourceMap), String> {
    let mut map = SourceMap::new();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = map.add(path.display().to_string(), text);
    let program = softswitch_frontend::compile(&mut map, file).map_err(|d| d.render(&map))?;
    Ok((program.program, map))
}

/// lossless.p4, compiled.
pub fn lossless() -> Program {
    compile(&dataplane_p4().join("lossless.p4"))
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

/// A host's settings: MTU `mtu`, data in DSCP 26 / priority 3, CNPs in DSCP 48 / priority 6,
/// no congestion control, no CNPs from the receiver, a 1 ms retransmission timeout.
pub fn host(mtu: u32) -> HostConfig {
    HostConfig {
        name: String::new(),
        ip: Ipv4Addr::UNSPECIFIED,
        mac: [0; 6],
        gateway_mac: [0; 6],
        mtu,
        data_class: (26, 3),
        cnp_class: (48, 6),
        dcqcn: None,
        cnp_interval: None,
        rto: 4 * MS,
    }
}

/// The example leaf/spine fabric (two spines, three leaves, two hosts each, 1 Gb/s, 2 µs
/// links) with its runtime files, switches with a shared buffer of `buffer` bytes.
pub fn leaf_spine(
    host: &HostConfig,
    buffer: Option<u64>,
) -> (Simulation, BTreeMap<String, NodeId>) {
    sim::tutorial::load(
        &dataplane_p4().join("topologies/leaf-spine/topology.json"),
        &lossless(),
        host,
        buffer,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Counter `name` of switch `node`, cell `index`, in packets.
pub fn counter(sim: &Simulation, node: NodeId, name: &str, index: usize) -> u64 {
    let s = sim.switch(node).unwrap();
    let id = s
        .core
        .instance_id(name)
        .unwrap_or_else(|| panic!("no counter {name}"));
    let cell: CounterCell = s.core.read_cell(id, CellIndex::Index(index)).unwrap();
    cell.packets
}

/// A counter's cell of (port, priority) in lossless.p4.
pub fn queue(port: u16, priority: u8) -> usize {
    (usize::from(port) << 3) | usize::from(priority)
}

/// Until 1 s of simulated time, or idle.
pub const LONG: u64 = 1_000 * MS;

/// 2 µs.
pub const HOP: u64 = 2 * US;

/// A scenario's failure of link `link` (`SWITCH:PORT`) at `at`, the routes moved off it
/// `reroute_after` later (never with `None`).
pub fn link_failure(at: &str, link: &str, reroute_after: Option<&str>) -> FailureSpec {
    FailureSpec {
        at: at.into(),
        link: Some(link.into()),
        switch: None,
        reroute_after: reroute_after.map(Into::into),
    }
}
