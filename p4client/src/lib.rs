//! `lossless p4`: the P4Runtime client of the control plane. It drives any P4Runtime switch —
//! softswitch, or BMv2's `simple_switch_grpc` given p4c's P4Info — through standard P4Runtime
//! only, except `queue set`, which speaks softswitch's own queue service.

#![forbid(unsafe_code)]

pub mod cells;
pub mod cli;
pub mod client;
pub mod commands;
pub mod entries;
pub mod mirror;
pub mod names;
pub mod p4info;
pub mod render;
pub mod script;
