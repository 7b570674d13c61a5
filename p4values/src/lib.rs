//! P4 control-plane values, once for the workspace: P4Runtime's canonical bytestrings
//! ([`bytestring`]), the value forms of the P4 tutorials' runtime JSON and of command lines
//! ([`value`]: integers, MAC, IPv4 and IPv6 addresses, to bytestrings and back) and the
//! runtime-JSON files themselves ([`runtime_json`]).
//!
//! `lossless p4` (control) turns runtime JSON into P4Runtime entities with it, softswitch's
//! P4Runtime server reads and writes bytestrings with it, and the simulator applies
//! runtime JSON to its switches with it, so one file means one thing to all three. No gRPC and
//! no async here: the simulator links this crate without linking a P4Runtime stack.
#![forbid(unsafe_code)]

pub mod bytestring;
pub mod runtime_json;
pub mod value;
