//! The network files `lossless net` and the simulator read, parsed from their text to one
//! [`Topology`] within written limits, with errors that name the key at fault: the P4
//! tutorials' `topology.json` ([`tutorial`]) and p4-utils' `p4app.json` ([`p4app`]). A pure
//! library, no I/O: the files a topology names for its switches stay as written ([`Switch`]),
//! and a link's delay, jitter and loss are kept as values ([`Link`]); what a reader cannot
//! emulate is its own to refuse. `lossless net` finds the files, reads the programs and brings
//! the network up with Mininet (docs/mininet.md); `sim::tutorial` builds a simulation of it
//! (docs/sim.md). Being pure, the parsers are fuzzed (the fuzz crate's `topology_json` and
//! `p4app_json`).
#![forbid(unsafe_code)]

pub mod model;
pub mod p4app;
pub mod tutorial;

pub use model::{
    check_sizes, parse_cidr, parse_mac, End, Host, Link, Named, Switch, Topology, MAX_BYTES,
    MAX_COMMAND, MAX_DELAY, MAX_LINKS, MAX_NAME, MAX_NODES, MAX_PORT, MAX_RATE_MBPS,
};
