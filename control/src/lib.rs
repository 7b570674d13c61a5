//! The lossless control plane: loads the data planes, configures them and reads their counters.

pub mod traffic;
pub mod wire;
