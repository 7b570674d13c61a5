//! The lossless control plane: loads the data planes, configures them and reads their counters.

pub mod agent;
pub mod host;
pub mod lab;
pub mod net;
pub mod netlink;
pub mod netns;
pub mod p4;
pub mod terminal;
pub mod traffic;
/// Rates and durations: the `units` crate, kept at `crate::units` for the modules that parse them.
pub use units;
