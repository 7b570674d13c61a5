//! The host data plane's configuration, parsed with written limits and no eBPF build (so every
//! parser here is fuzzed on its own): the host TOML file and `key=value` settings ([`config`]),
//! the load balancer's `lb.*` keys ([`lb`]), the hooks and the XDP mode an interface is attached
//! with ([`attachment`]), the agent's TOML file ([`agent`]), and keys written into those files with the rest kept
//! ([`edit`]).

#![forbid(unsafe_code)]

pub mod agent;
pub mod attachment;
pub mod config;
pub mod edit;
pub mod lb;
