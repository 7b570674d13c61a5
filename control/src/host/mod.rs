//! The host data plane: attach the eBPF programs to an interface, configure them, read them.
//!
//! Everything `attach` creates is pinned under `/sys/fs/bpf/lossless/netns-INODE/IFACE/`, so
//! every other command (and a restarted control plane) finds the live state there, like
//! xdp-loader.

pub mod attach;
pub mod attachment;
pub mod cli;
pub mod config;
pub mod interface_programs;
pub mod lb;
pub mod lifecycle;
pub mod metrics;
pub mod namespace;
pub mod pinned_maps;
pub mod pins;
pub mod stats;
pub mod status;
