//! `lossless net`: Mininet networks of P4 switches (softswitch, BMv2's simple_switch_grpc) and
//! hosts, described by the P4 tutorials' `topology.json`, p4-utils' `p4app.json` or a generated
//! leaf/spine fabric whose lossless.p4 entries are computed here ([`leaf_spine`]). The Rust side
//! plans the network, programs the switches over P4Runtime and runs experiments; the Python
//! package in `mininet/` is only the Mininet glue ([`up`] runs it). docs/mininet.md.

pub mod cleanup;
pub mod cli;
pub mod experiment;
pub mod leaf_spine;
pub mod model;
pub mod p4app;
pub mod program;
pub mod state;
pub mod tutorial;
pub mod up;
pub mod uplinks;
