//! The `lossless` command line's own commands, over the crates that do the work: `host`
//! (the eBPF data plane), `traffic`, `p4client` (P4Runtime), `hostconfig` and `sysutil`.
//! [`net`] (Mininet), [`lab`] (namespace labs), [`agent`] (the host daemon), [`sim`] (the
//! simulator's command line) and [`check`] (the fabric's configuration checked) are modules here, thin over those crates; [`output`] is the
//! figures and files they write.

pub mod agent;
pub mod check;
pub mod lab;
pub mod net;
pub mod output;
pub mod sim;
pub mod telemetry;
