//! softswitch-core: what runs a lowered P4_16 v1model program, as BMv2's `bm_sim` does.
//!
//! The [`ir`] is what the front end lowers a program to (with its own operators, [`ops`]); a
//! [`switch::Switch`] runs it: `interp` executes one packet's blocks over its slots (or, where [`compiled`] lowered them
//! into closures at load, runs them compiled) (the
//! externs, one module each behind a trait, are in [`externs`]; what P4 code reads and writes
//! is the switch's `state`), [`table`]
//! holds the match structures, [`meter`] and [`hash`] the externs' arithmetic, [`tm`] the
//! queues, the packet replication engine (`pre`) and the mirroring sessions (`mirroring`)
//! the copies (what a packet used is kept for the next ones, `spares`); every control operation goes through the switch's one runtime interface,
//! [`runtime`] (its refusals are [`runtime::RuntimeError`]s), within a [`budget`] of memory;
//! what it does to each packet and
//! each table write can be traced as BMv2's log shows it ([`trace`]). No I/O,
//! no async, no gRPC: the device drives it on real ports, the STF runner and the simulator
//! in-process.
#![forbid(unsafe_code)]

pub mod bits;
pub mod budget;
pub mod compiled;
pub mod externs;
pub mod hash;
pub(crate) mod interp;
pub mod ir;
pub mod limbs;
pub mod meter;
pub(crate) mod mirroring;
pub mod ops;
pub(crate) mod pre;
pub(crate) mod spares;
pub(crate) mod state;
pub mod switch;
pub mod table;
pub mod tm;
pub mod trace;

pub use switch::runtime;

/// What the unit tests share.
#[cfg(test)]
mod test_support {
    /// A deterministic pseudo-random sequence (xorshift64) from `seed`.
    pub fn xorshift64(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }
}
