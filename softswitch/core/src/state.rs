//! The mutable state that P4 code reads and writes (tables, registers, counters, meters, value
//! sets, profiles, digests, the log), apart from the switch that owns it, so that the
//! interpreter which runs P4 code over it and the switch which drives the interpreter both
//! import it and neither imports the other.

use crate::ir::{FieldMatch, InstanceKind, Program};
use crate::meter::Meter;
use crate::table::{CounterCell, Profile, TableState};
use std::collections::HashMap;

/// Log lines a switch holds (`log_msg` and its own notes).
pub const MAX_LOG_LINES: usize = 100_000;

/// The mutable state that P4 code reads and writes: tables, registers, counters, meters. Only
/// the core sees it: everything outside goes through the switch's runtime interface
/// ([`crate::runtime`]).
#[derive(Debug)]
pub(crate) struct State {
    /// Tables, by program index.
    pub(crate) tables: Vec<TableState>,
    /// Register cells, by instance index (empty for other instances).
    pub(crate) registers: Vec<Vec<u128>>,
    /// Indirect counter cells, by instance index.
    pub(crate) counters: Vec<Vec<CounterCell>>,
    /// Indirect meter cells, by instance index.
    pub(crate) meters: Vec<Vec<Meter>>,
    direct_meters: HashMap<(usize, usize), Meter>,
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
    rng: u64,
}

/// One vector of `init` cells per extern instance of `p`: as many as `size_of` says for the
/// instance's kind, none for the other kinds.
fn cells<T: Clone>(p: &Program, size_of: fn(&InstanceKind) -> Option<u32>, init: T) -> Vec<Vec<T>> {
    p.instances
        .iter()
        .map(|i| vec![init.clone(); size_of(&i.kind).map_or(0, |n| n as usize)])
        .collect()
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
            registers: cells(
                p,
                |k| match k {
                    InstanceKind::Register { size, .. } => Some(*size),
                    _ => None,
                },
                0,
            ),
            counters: cells(
                p,
                |k| match k {
                    InstanceKind::Counter { size, .. } => Some(*size),
                    _ => None,
                },
                CounterCell::default(),
            ),
            meters: cells(
                p,
                |k| match k {
                    InstanceKind::Meter { size, .. } => Some(*size),
                    _ => None,
                },
                Meter::default(),
            ),
            direct_meters: HashMap::new(),
            value_sets: vec![Vec::new(); p.instances.len()],
            profiles: vec![Profile::default(); p.instances.len()],
            digests: Vec::new(),
            log: Vec::new(),
            log_dropped: 0,
            field_buffer: Vec::new(),
            key_buffer: Vec::new(),
            assertion_failures: 0,
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

    /// The direct meter cell of entry `handle` of the table owning meter `instance`.
    pub(crate) fn direct_meter(&mut self, instance: usize, handle: usize) -> &mut Meter {
        self.direct_meters.entry((instance, handle)).or_default()
    }

    /// Forgets the direct meter cell of entry `handle` (removed) of the table owning `instance`.
    pub(crate) fn forget_direct_meter(&mut self, instance: usize, handle: usize) {
        self.direct_meters.remove(&(instance, handle));
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
