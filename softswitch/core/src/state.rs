//! The mutable state that P4 code reads and writes (tables, registers, counters, meters, value
//! sets, profiles, digests, the log), apart from the switch that owns it, so that the
//! interpreter which runs P4 code over it and the switch which drives the interpreter both
//! import it and neither imports the other.

use crate::externs::{counter, meter, register};
use crate::ir::{FieldMatch, Program};
use crate::table::{Profile, TableState};

/// Log lines a switch holds (`log_msg` and its own notes).
pub const MAX_LOG_LINES: usize = 100_000;

/// The mutable state that P4 code reads and writes: tables, registers, counters, meters. Only
/// the core sees it: everything outside goes through the switch's runtime interface
/// ([`crate::runtime`]).
#[derive(Debug)]
pub(crate) struct State {
    /// Tables, by program index.
    pub(crate) tables: Vec<TableState>,
    /// Register cells (`externs/register.rs`).
    pub(crate) registers: register::Registers,
    /// Indirect counter cells (`externs/counter.rs`).
    pub(crate) counters: counter::Counters,
    /// Meter and direct meter cells (`externs/meter.rs`).
    pub(crate) meters: meter::Meters,
    /// Members of each parser value set, by instance index.
    pub(crate) value_sets: Vec<Vec<FieldMatch>>,
    /// Members and groups of each action profile or selector, by instance index.
    pub(crate) profiles: Vec<Profile>,
    /// Digests sent.
    pub(crate) digests: Vec<DigestSent>,
    /// `log_msg` output and the switch's own notes, at most [`MAX_LOG_LINES`] of them.
    pub(crate) log: Vec<String>,
    /// Lines not kept in `log` because it was full.
    pub(crate) log_dropped: u64,
    /// A buffer reused by every checksum and hash computation.
    pub(crate) field_buffer: Vec<u8>,
    /// A buffer for the key values of a lookup or a parser `select`, reused.
    pub(crate) key_buffer: Vec<u128>,
    /// Failed `assert`/`assume` calls.
    pub(crate) assertion_failures: u64,
    /// Blocks (controls, parsers, action and function bodies) entered in their compiled form
    /// ([`crate::compiled`]): what shows that the compiled path runs.
    pub(crate) compiled_block_runs: u64,
    rng: u64,
}

impl State {
    /// Adds a line to the log, or counts it when the log holds [`MAX_LOG_LINES`] (a running
    /// switch empties it after every packet; an STF run keeps it to the end).
    pub(crate) fn log(&mut self, line: String) {
        if self.log.len() < MAX_LOG_LINES {
            self.log.push(line);
        } else {
            self.log_dropped += 1;
        }
    }

    pub(crate) fn new(p: &Program) -> Self {
        State {
            tables: p
                .tables
                .iter()
                .map(|t| TableState::new(t, &p.actions, &p.bodies))
                .collect(),
            registers: register::cells(p),
            counters: counter::cells(p),
            meters: meter::Meters::new(p),
            value_sets: vec![Vec::new(); p.instances.len()],
            profiles: vec![Profile::default(); p.instances.len()],
            digests: Vec::new(),
            log: Vec::new(),
            log_dropped: 0,
            field_buffer: Vec::new(),
            key_buffer: Vec::new(),
            assertion_failures: 0,
            compiled_block_runs: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// The next pseudo-random number (xorshift64*; deterministic per switch).
    pub(crate) fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A digest the program sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestSent {
    /// The receiver argument.
    pub receiver: u32,
    /// Which digest (index into `CpInfo::digests`).
    pub digest: usize,
    /// The data's fields, flattened.
    pub values: Vec<u128>,
}
