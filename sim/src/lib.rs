//! `lossless sim`'s engine: a discrete-event simulator of a lossless RoCEv2 fabric whose
//! switches run a P4 program (by default `dataplane-p4/lossless.p4`) through softswitch's core
//! and whose hosts are RoCEv2 endpoints with DCQCN.
//!
//! Time is an integer count of picoseconds ([`time`]); events come out of one queue in time
//! order ([`event`]), so nothing scans the fabric; [`link`]s serialise frames at their rate
//! and deliver them after their propagation delay; a [`switch`] is softswitch's core with its
//! traffic manager served as each port's link frees and a MAC that honours PFC; a [`host`] is
//! a NIC with QPs, DCQCN's reaction and notification points, PFC, ACKs, NAKs and go-back-N.
//! [`flows`] are the messages and their dependencies, [`simulation`] holds it all and runs it,
//! [`runtime`] writes runtime-JSON entries into a switch, [`frame`] builds and reads frames
//! with `wire`. A [`scenario`] (a fabric from `topology`, a workload from `workload`, the
//! tuning, the hosts' settings, failures) builds a simulation with the entries the control
//! plane computes, running the [`program`] (lossless.p4 unless told otherwise); [`report`]
//! reads what it measured. [`tutorial`] builds one from a P4 tutorials' topology.json instead
//! (parsed by `netfiles`, as `lossless net` parses it). The same inputs give the same run: ties
//! between events go in the order they were scheduled, and every random choice comes from a
//! seeded generator.
#![forbid(unsafe_code)]

pub mod event;
pub mod flows;
pub mod frame;
pub mod host;
pub mod link;
pub mod program;
pub mod report;
pub mod runtime;
pub mod scenario;
pub mod simulation;
pub mod switch;
pub mod time;
pub mod tutorial;
