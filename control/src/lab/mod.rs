//! Labs: topologies of namespaces that run a workload through the data planes and report.

pub mod cli;
pub mod ecn;
pub mod harness;
pub mod incast;
pub mod lb;
pub mod pfc;
