//! An in-process fabric for P4 programs: softswitch instances and RoCEv2 host endpoints wired
//! by links with a rate and a propagation delay, all on one virtual clock, deterministic and
//! fast. Built from a P4 tutorials-style `topology.json` and runtime-JSON files
//! (dataplane-p4/topologies), it tests multi-hop behaviour of dataplane-p4's programs: PFC
//! pausing an upstream switch, switch CNPs reaching senders, flowlets and DLB across spines.
//!
//! Modules: [`topology`] and [`runtime`] read the files, [`sim`] runs the fabric, [`host`] is
//! the endpoint (with the `dcqcn` crate's reaction point, the one `lossless traffic` runs),
//! [`frame`] its wire formats.

pub mod frame;
pub mod host;
pub mod sim;
/// Moved to the simulator; the fabric goes once its tests have moved too.
pub use ::sim::runtime;
pub use ::sim::tutorial as topology;
