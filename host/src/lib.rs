//! The host data plane: attach the eBPF programs (which this crate's build script builds and
//! embeds) to an interface, configure them, read them. The configuration files are
//! `hostconfig`'s, the pin layout `sysutil`'s; [`lifecycle`] is at the bottom: every command
//! that changes pins goes through it.
//!
//! Everything `attach` creates is pinned under `/sys/fs/bpf/lossless/netns-INODE/IFACE/`, so
//! every other command (and a restarted control plane) finds the live state there, like
//! xdp-loader.

pub mod attach;
pub mod cli;
pub mod interface_programs;
pub mod lb;
pub mod lifecycle;
pub mod metrics;
pub mod mirror;
pub mod pinned_maps;
pub mod stats;
pub mod status;
