//! Run-time tables: entries and the lookup structure their match kinds call for — a hash map
//! for exact keys, per-prefix-length hash maps (longest first) for one lpm key with exact
//! keys, per-mask hash maps (tuple space search) for ternary and optional keys, and a
//! priority-ordered list for range keys.
//!
//! The hash maps hold their keys inline: a key's values packed by their widths into 64-bit
//! words ([`PackedKey`]), up to [`KEY_WORDS`] words in the map's own buckets (an IPv4 5-tuple takes
//! two, an IPv6 address two), so a lookup neither allocates nor follows a pointer to its key.
//! What a hit reads and writes of its entry — the action, its data, the last hit — sits by slot
//! in one vector of words ([`HotWords`]), apart from the entry's record the control plane reads
//! back: a hit on a table of a million entries touches the index's bucket and one slot's words.
//!
//! A table checks every control-plane write against its rules ([`TableState::check_entry`],
//! [`TableState::check_action`], [`TableState::check_default`]): the runtime interface and the
//! front doors above it only translate what a client sends, or refuse what their own protocol
//! does not allow.
//!
//! Entries live in slots that are reused: a deleted entry's slot goes to the next insert (the
//! lowest free slot first), so a controller that inserts and deletes all day keeps the table at
//! the size of what it holds. An entry's handle is BMv2's: its slot in the low 24 bits and the
//! slot's version in the 8 above, bumped at each delete, so a handle kept past its entry's
//! delete names no entry rather than the slot's next one.

use crate::budget;
use crate::ir::{self, ActionCall, Entry, FieldMatch, MatchKind};
use smallvec::SmallVec;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;
use thiserror::Error;

/// Why a control-plane change to a table was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TableError {
    /// The entry's key count differs from the table's.
    #[error("table {table} has {want} keys, the entry gives {got}")]
    KeyCount {
        /// The table's name.
        table: String,
        /// The table's key count.
        want: usize,
        /// The entry's.
        got: usize,
    },
    /// A key's match does not fit its match kind.
    #[error("key {key} of table {table} is {kind:?}: this match cannot be used")]
    BadMatch {
        /// The table's name.
        table: String,
        /// The key's name.
        key: String,
        /// The key's match kind.
        kind: MatchKind,
    },
    /// An entry with the same key exists.
    #[error("table {0} already has an entry with this key")]
    Duplicate(String),
    /// The table holds `size` entries.
    #[error("table {0} is full")]
    Full(String),
    /// The handle names no entry.
    #[error("table {0} has no entry with handle {1}")]
    NoEntry(String, usize),
    /// No entry has the key (and priority) given.
    #[error("table {0} has no entry with this key")]
    NoKey(String),
    /// The action is not one of the table's.
    #[error("action {action} is not an action of table {table}")]
    BadAction {
        /// The table's name.
        table: String,
        /// The action's name.
        action: String,
    },
    /// The action data does not fit the action's parameters.
    #[error("action {action} takes {want} arguments, {got} given")]
    ArgCount {
        /// The action's name.
        action: String,
        /// Its parameter count.
        want: usize,
        /// The arguments given.
        got: usize,
    },
    /// The table has no action profile or selector.
    #[error("table {0} has no action profile or selector")]
    NoProfile(String),
    /// No member or group with this id in the profile.
    #[error("the action profile has no {0} {1}")]
    NoMember(&'static str, u32),
    /// The table's entries or default action are `const`.
    #[error("table {0} is const: its {1} cannot change")]
    Const(String, &'static str),
    /// The table has no key: it has only its default entry (the P4 specification's empty
    /// lookup table).
    #[error("table {0} has no key: only its default entry can be written")]
    Keyless(String),
}

/// A change of an installed entry (P4Runtime's MODIFY, BMv2's `mt_modify_entry`): what is
/// `None` stays as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryChange {
    /// Its new action.
    pub action: Option<ActionCall>,
    /// What the controller keeps with it from now on (`Some(None)`: nothing).
    pub data: Option<Option<ControllerData>>,
    /// Its direct counter's new value.
    pub counter: Option<CounterCell>,
    /// Its idle timeout from now on (`Some(None)`: none); a timeout that changes counts from
    /// now, the same one keeps counting (as PI does).
    pub idle_timeout: Option<Option<Duration>>,
}

/// The direct counter of an entry or a cell of an indirect counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterCell {
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted.
    pub bytes: u64,
}

/// The members (actions with their data) and groups (lists of members) of an action profile
/// or selector.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Members by id.
    pub members: HashMap<u32, ActionCall>,
    /// Groups by id: their members, in the order added.
    pub groups: HashMap<u32, Vec<u32>>,
}

/// Entries one table holds at most: BMv2's entry handle has 24 bits for the slot.
pub const MAX_ENTRIES: usize = 1 << SLOT_BITS;

/// Bits of a handle that name the slot; the 8 above are the slot's version.
const SLOT_BITS: u32 = 24;

/// What a controller keeps with an entry (or a table's default entry) and reads back, opaque to
/// the switch: P4Runtime's `controller_metadata` and `metadata`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerData {
    /// A 64-bit cookie (`controller_metadata`).
    pub cookie: u64,
    /// Bytes (`metadata`).
    pub bytes: Vec<u8>,
}

impl ControllerData {
    /// What it is charged against the switch's state budget.
    pub fn footprint(data: Option<&ControllerData>) -> usize {
        data.map_or(0, |d| std::mem::size_of::<ControllerData>() + d.bytes.len())
    }
}

/// An installed entry, its direct counter and the data its controller keeps with it (when
/// packets last matched it is [`TableState::last_hit_us`]).
#[derive(Clone, Debug)]
pub struct Installed {
    /// The entry.
    pub entry: Entry,
    /// Its direct counter.
    pub counter: CounterCell,
    /// What the controller keeps with it, if anything.
    pub data: Option<Box<ControllerData>>,
    /// Its idle timeout, if it has one.
    pub idle_timeout: Option<IdleTimeout>,
    /// When it was installed, in the table's order of inserts: the earlier of two entries of
    /// equal priority wins.
    seq: u64,
}

impl Installed {
    /// What an entry with `data` is charged against the switch's state budget (an estimate of
    /// the memory it takes, [`crate::budget`]).
    pub fn footprint_of(entry: &Entry, data: Option<&ControllerData>) -> usize {
        budget::ENTRY_BYTES
            + entry.matches.len() * budget::MATCH_BYTES
            + entry.action.args.len() * budget::ARG_BYTES
            + ControllerData::footprint(data)
    }

    /// What this entry is charged against the switch's state budget.
    pub fn footprint(&self) -> usize {
        Self::footprint_of(&self.entry, self.data.as_deref())
    }
}

/// An entry's idle timeout (BMv2's entry TTL, P4Runtime's `idle_timeout_ns`): how long it may
/// go without a hit before it is reported idle, counted from its last hit or, if later, from
/// when the timeout was set or the entry last reported (so an entry that stays idle is
/// reported once per timeout, as P4Runtime asks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleTimeout {
    /// The timeout.
    pub ttl: Duration,
    /// When the timeout was set or the entry last reported idle (µs of the switch's clock).
    pub since_us: u64,
}

impl IdleTimeout {
    /// Whether an entry last hit at `last_hit_us` is idle at `now_us`.
    fn expired(&self, last_hit_us: u64, now_us: u64) -> bool {
        let idle_us = now_us.saturating_sub(last_hit_us.max(self.since_us));
        u128::from(idle_us) * 1000 >= self.ttl.as_nanos()
    }
}

/// A fast non-cryptographic hasher for keys (rustc's Fx: rotate, xor, multiply per word).
#[derive(Clone, Copy, Debug, Default)]
struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }

    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    fn finish(&self) -> u64 {
        // The multiply mixes each word's low bits into the high bits only, and the hash table
        // indexes by the low bits: keys that differ only in their high bits (masked lpm and
        // ternary keys, whose low bits are zero) would share a few buckets, a lookup would walk
        // thousands of them. Rotating the well-mixed high bits down fixes that (as rustc-hash
        // 2 does).
        self.0.rotate_left(26)
    }
}

/// 64-bit words of a key held inline; a wider key (more than 256 bits of key values) spills to
/// the heap.
const KEY_WORDS: usize = 4;

/// A table key's values packed by their widths into 64-bit words (see [`pack_key`]).
type PackedKey = SmallVec<[u64; KEY_WORDS]>;

/// Key values to an entry's slot (or to what `V` says).
type KeyMap<V = usize> = HashMap<PackedKey, V, BuildHasherDefault<KeyHasher>>;

/// Packs `values`, one per key of `kinds` and each cut to its key's width, into `out`: the
/// bits of each value follow the previous one's, from the low bit of the first word up.
fn pack_key(kinds: &[(MatchKind, u16)], values: impl Iterator<Item = u128>, out: &mut PackedKey) {
    out.clear();
    let mut word = 0u64;
    let mut filled = 0u32;
    for (value, &(_, width)) in values.zip(kinds) {
        let mut left = u32::from(width.min(128));
        let mut rest = value & ir::mask(width.min(128));
        while left > 0 {
            let take = left.min(64 - filled);
            word |= ((rest as u64) & (u64::MAX >> (64 - take))) << filled;
            rest = rest.checked_shr(take).unwrap_or(0);
            left -= take;
            filled += take;
            if filled == 64 {
                out.push(word);
                word = 0;
                filled = 0;
            }
        }
    }
    if filled > 0 {
        out.push(word);
    }
}

#[derive(Clone, Debug)]
enum Index {
    Exact(KeyMap),
    /// Per prefix length (longest first): masked key to slot. `lpm` is the lpm key's position;
    /// `longer` says which of the lengths to probe.
    Lpm {
        lpm: usize,
        width: u16,
        by_len: Vec<(u16, KeyMap)>,
        longer: LongerLengths,
    },
    /// Tables with ternary or optional keys and no range key: one group per combination of
    /// masks, groups in descending order of their highest priority.
    Masked(Vec<MaskGroup>),
    /// Slots, highest priority first.
    Ordered(Vec<usize>),
}

/// Bits of an lpm key's value (its most significant) that [`LongerLengths`] sorts prefixes by.
const TOP_BITS: u16 = 16;

/// Which prefix lengths an lpm lookup need probe: per value of the lpm key's top
/// [`TOP_BITS`] bits (all of a narrower key's), the lengths longer than those bits that some
/// entry's prefix starting with them has. A lookup probes the hash maps of those lengths and
/// of the shorter ones only, rather than of every length the table holds.
#[derive(Clone, Debug)]
struct LongerLengths {
    /// The key's width.
    width: u16,
    /// How many top bits sort prefixes (`TOP_BITS`, or the width if less).
    top: u16,
    /// Per value of the top bits: bit `len - top - 1` set while an entry has a prefix of
    /// length `len` starting with them. Empty while no entry's prefix is longer than `top`.
    bits: Vec<u128>,
    /// Entries per (top bits, length longer than `top`), so a bit goes with its last entry.
    counts: HashMap<(usize, u16), u32>,
}

impl LongerLengths {
    fn new(width: u16) -> Self {
        let width = width.min(128);
        LongerLengths {
            width,
            top: width.min(TOP_BITS),
            bits: Vec::new(),
            counts: HashMap::new(),
        }
    }

    /// The top bits of a value of the key, and the bit of length `len`.
    fn place(&self, value: u128, len: u16) -> (usize, u128) {
        let top = (value & ir::mask(self.width)) >> (self.width - self.top);
        let bit = 1u128 << len.saturating_sub(self.top + 1);
        (top as usize, bit)
    }

    /// Counts an entry with a prefix of length `len` and value `value`.
    fn add(&mut self, value: u128, len: u16) {
        if len <= self.top {
            return;
        }
        if self.bits.is_empty() {
            self.bits = vec![0; 1 << self.top];
        }
        let (top, bit) = self.place(value, len);
        self.bits[top] |= bit;
        *self.counts.entry((top, len)).or_default() += 1;
    }

    /// Forgets an entry [`LongerLengths::add`] counted.
    fn remove(&mut self, value: u128, len: u16) {
        if len <= self.top {
            return;
        }
        let (top, bit) = self.place(value, len);
        let Some(count) = self.counts.get_mut(&(top, len)) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.counts.remove(&(top, len));
            self.bits[top] &= !bit;
            if self.counts.is_empty() {
                self.bits = Vec::new();
            }
        }
    }

    /// Whether an entry with a prefix of length `len` may match a key of value `value`.
    fn may_match(&self, value: u128, len: u16) -> bool {
        if len <= self.top {
            return true;
        }
        let (top, bit) = self.place(value, len);
        self.bits.get(top).is_some_and(|b| b & bit != 0)
    }
}

/// The entries of a masked table that share one mask per key: their masked key values to their
/// slots, highest priority first (the earlier entry first among equal priorities).
#[derive(Clone, Debug)]
struct MaskGroup {
    masks: Vec<u128>,
    /// At least the highest priority of its entries (not lowered when entries go, so it stays
    /// an upper bound).
    top: i64,
    keys: KeyMap<Vec<usize>>,
}

impl MaskGroup {
    /// Moves group `g`, whose `top` rose, ahead of the groups with a lower one.
    fn raise(groups: &mut [MaskGroup], mut g: usize) {
        while g > 0 && groups[g - 1].top < groups[g].top {
            groups.swap(g - 1, g);
            g -= 1;
        }
    }
}

/// An action with its data, as a table's lookup gives it: borrowed from the table's words for
/// its entries, from an action profile's member or from the default action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionRef<'a> {
    /// The action's index in the program.
    pub action: usize,
    /// Its action data.
    pub args: &'a [u128],
}

impl<'a> From<&'a ActionCall> for ActionRef<'a> {
    fn from(call: &'a ActionCall) -> Self {
        ActionRef {
            action: call.action,
            args: &call.args,
        }
    }
}

/// What a lookup reads and writes of each entry, by slot, side by side in one vector of words
/// (a hit touches one place in memory, not the entry's record and the heap behind it): a
/// header word (the action's index in its low 64 bits, its data count in the next 32, the top
/// bit set while the slot holds an entry), the entry's last hit (µs of the switch's clock),
/// then its action data, as many words as the table's actions take at most.
#[derive(Clone, Debug, Default)]
struct HotWords {
    /// Words per slot.
    stride: usize,
    words: Vec<u128>,
}

/// The header word's bit of a slot that holds an entry.
const LIVE: u128 = 1 << 127;

impl HotWords {
    /// Words for entries whose actions take at most `data` values each.
    fn new(data: usize) -> Self {
        HotWords {
            stride: 2 + data,
            words: Vec::new(),
        }
    }

    /// How many action data values a slot holds.
    fn room(&self) -> usize {
        self.stride - 2
    }

    /// Whether slot `slot` holds an entry.
    fn live(&self, slot: usize) -> bool {
        self.words
            .get(slot * self.stride)
            .is_some_and(|w| w & LIVE != 0)
    }

    /// Fills slot `slot` (growing the words to it) with an entry running `call` (with at most
    /// [`HotWords::room`] values), last hit at `now_us`.
    fn fill(&mut self, slot: usize, call: &ActionCall, now_us: u64) {
        let end = (slot + 1) * self.stride;
        if self.words.len() < end {
            self.words.resize(end, 0);
        }
        self.set_action(slot, call);
        self.words[slot * self.stride + 1] = u128::from(now_us);
    }

    /// Makes slot `slot`'s entry run `call`.
    fn set_action(&mut self, slot: usize, call: &ActionCall) {
        let at = slot * self.stride;
        self.words[at] = LIVE | (call.args.len() as u128) << 64 | call.action as u128;
        self.words[at + 2..at + 2 + call.args.len()].copy_from_slice(&call.args);
    }

    /// Empties slot `slot`.
    fn empty(&mut self, slot: usize) {
        self.words[slot * self.stride] = 0;
    }

    /// Keeps the first `slots` slots.
    fn truncate(&mut self, slots: usize) {
        self.words.truncate(slots * self.stride);
        trim_vec(&mut self.words);
    }

    /// The action of slot `slot`'s entry.
    fn action(&self, slot: usize) -> ActionRef<'_> {
        let at = slot * self.stride;
        let header = self.words[at];
        let count = (header >> 64) as u32 as usize;
        ActionRef {
            action: header as u64 as usize,
            args: &self.words[at + 2..at + 2 + count],
        }
    }

    /// When slot `slot`'s entry was last hit.
    fn last_hit_us(&self, slot: usize) -> u64 {
        self.words[slot * self.stride + 1] as u64
    }

    /// Records a hit of slot `slot`'s entry at `now_us`.
    fn hit(&mut self, slot: usize, now_us: u64) {
        self.words[slot * self.stride + 1] = u128::from(now_us);
    }
}

/// An action a table may run: its program index, its name and how many action data values it
/// takes.
#[derive(Clone, Debug)]
struct TableAction {
    action: usize,
    name: String,
    data: usize,
}

/// A table's run-time state.
#[derive(Clone, Debug)]
pub(crate) struct TableState {
    name: String,
    kinds: Vec<(MatchKind, u16)>,
    /// The keys' names, for errors.
    key_names: Vec<String>,
    /// The actions it may run.
    actions: Vec<TableAction>,
    /// Whether its entries are `const`.
    const_entries: bool,
    /// Whether its default action is `const`.
    const_default: bool,
    size: usize,
    /// The entries by slot; the index structures hold slot numbers.
    entries: Vec<Option<Installed>>,
    /// What lookups read and write of the entries, by slot.
    hot: HotWords,
    /// Empty slots below the last one.
    free: BTreeSet<usize>,
    /// The version of each slot ever used (a byte each, kept when the table shrinks, so that a
    /// handle of an entry deleted does not name the next entry in its slot).
    versions: Vec<u8>,
    /// The order of the next insert.
    next_seq: u64,
    count: usize,
    /// How many entries have an idle timeout.
    timed: usize,
    index: Index,
    /// The packed key of a lookup, kept for the next one.
    scratch: PackedKey,
    /// Entries pointing to a group of the table's action selector: slot to group.
    groups: HashMap<usize, u32>,
    /// The action run on a miss.
    pub default_action: ActionCall,
    /// What the controller keeps with the default entry.
    pub default_data: Option<Box<ControllerData>>,
}

impl TableState {
    /// An empty table for `t`, holding its constant entries; `actions` and `bodies` are its
    /// program's (for its actions' names and data).
    pub fn new(t: &ir::Table, actions: &[ir::Action], bodies: &[ir::Body]) -> Self {
        let kinds: Vec<(MatchKind, u16)> = t.keys.iter().map(|k| (k.kind, k.width)).collect();
        let lpm: Vec<usize> = kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| k.0 == MatchKind::Lpm)
            .map(|(i, _)| i)
            .collect();
        let all_exact_or_lpm = kinds
            .iter()
            .all(|k| matches!(k.0, MatchKind::Exact | MatchKind::Lpm));
        let any_range = kinds.iter().any(|k| k.0 == MatchKind::Range);
        let index = match lpm.as_slice() {
            [] if all_exact_or_lpm => Index::Exact(KeyMap::default()),
            [i] if all_exact_or_lpm => Index::Lpm {
                lpm: *i,
                width: kinds[*i].1,
                by_len: Vec::new(),
                longer: LongerLengths::new(kinds[*i].1),
            },
            _ if !any_range => Index::Masked(Vec::new()),
            _ => Index::Ordered(Vec::new()),
        };
        let actions: Vec<TableAction> = t
            .actions
            .iter()
            .filter_map(|&action| {
                let a = actions.get(action)?;
                let params = &bodies.get(a.body)?.params;
                Some(TableAction {
                    action,
                    name: a.name.clone(),
                    data: params.iter().filter(|p| p.action_data).count(),
                })
            })
            .collect();
        // Room for the most data any of its actions takes (and its constant entries and its
        // default action, an action profile's entries' placeholder, give).
        let room = actions
            .iter()
            .map(|a| a.data)
            .chain(t.const_entries.iter().map(|e| e.action.args.len()))
            .chain([t.default_action.args.len()])
            .max()
            .unwrap_or(0);
        let mut s = TableState {
            name: t.name.clone(),
            kinds,
            key_names: t.keys.iter().map(|k| k.name.clone()).collect(),
            hot: HotWords::new(room),
            actions,
            const_entries: t.const_entries_fixed,
            const_default: t.const_default,
            size: t.size.max(t.const_entries.len()).min(MAX_ENTRIES),
            entries: Vec::new(),
            free: BTreeSet::new(),
            versions: Vec::new(),
            next_seq: 0,
            count: 0,
            timed: 0,
            index,
            scratch: PackedKey::new(),
            groups: HashMap::new(),
            default_action: t.default_action.clone(),
            default_data: None,
        };
        for e in &t.const_entries {
            // Constant entries were checked by the checker; a duplicate is a program error p4c reports too.
            let _ = s.place(e.clone(), None, 0);
        }
        s
    }

    /// The handle of the entry in slot `slot`.
    fn handle(&self, slot: usize) -> usize {
        (usize::from(self.versions[slot]) << SLOT_BITS) | slot
    }

    /// The slot of the entry with handle `handle`, if it names one.
    fn slot(&self, handle: usize) -> Option<usize> {
        let slot = handle & (MAX_ENTRIES - 1);
        let version = u8::try_from(handle >> SLOT_BITS).ok()?;
        (self.hot.live(slot) && self.versions[slot] == version).then_some(slot)
    }

    /// Checks that the control plane may change the table's entries (they are not `const`).
    pub fn check_entries_change(&self) -> Result<(), TableError> {
        if self.const_entries {
            return Err(TableError::Const(self.name.clone(), "entries"));
        }
        Ok(())
    }

    /// Checks an entry the control plane writes against the table's rules: its entries are not
    /// `const`, it has a key, the entry has a match per key and each fits its key's match kind
    /// ([`TableState::check_match`]), and its action is one of the table's with its data
    /// ([`TableState::check_action`]). Whether its key is taken and whether the table is full
    /// are [`TableState::insert`]'s to say.
    pub fn check_entry(&self, entry: &Entry) -> Result<(), TableError> {
        self.check_entries_change()?;
        if self.kinds.is_empty() {
            return Err(TableError::Keyless(self.name.clone()));
        }
        if entry.matches.len() != self.kinds.len() {
            return Err(TableError::KeyCount {
                table: self.name.clone(),
                want: self.kinds.len(),
                got: entry.matches.len(),
            });
        }
        for (key, m) in entry.matches.iter().enumerate() {
            self.check_match(key, m)?;
        }
        self.check_action(&entry.action)
    }

    /// Checks that `call` may run as an entry's (or a member's) action: it is one of the
    /// table's, with as many action data values as the action takes.
    pub fn check_action(&self, call: &ActionCall) -> Result<(), TableError> {
        let Some(a) = self.actions.iter().find(|a| a.action == call.action) else {
            return Err(TableError::BadAction {
                table: self.name.clone(),
                action: format!("#{}", call.action),
            });
        };
        if call.args.len() != a.data {
            return Err(TableError::ArgCount {
                action: a.name.clone(),
                want: a.data,
                got: call.args.len(),
            });
        }
        Ok(())
    }

    /// Checks that the control plane may make `call` the default action: the default action
    /// is not `const` and `call` is one of the table's actions with its data.
    pub fn check_default(&self, call: &ActionCall) -> Result<(), TableError> {
        if self.const_default {
            return Err(TableError::Const(self.name.clone(), "default action"));
        }
        self.check_action(call)
    }

    /// Checks `change` of an entry against the table's rules (its entries are not `const`, a
    /// new action is one of its).
    pub fn check_change(&self, change: &EntryChange) -> Result<(), TableError> {
        self.check_entries_change()?;
        change
            .action
            .as_ref()
            .map_or(Ok(()), |call| self.check_action(call))
    }

    /// Whether the table's entries have a priority ([`MatchKind::needs_priority`]).
    pub fn has_priority(&self) -> bool {
        self.kinds.iter().any(|(kind, _)| kind.needs_priority())
    }

    /// Installs an entry the control plane writes at `now_us`, with the data its controller
    /// keeps with it, if the table's rules allow it ([`TableState::check_entry`]); returns its
    /// handle.
    #[cfg(test)]
    pub fn insert(
        &mut self,
        entry: Entry,
        data: Option<ControllerData>,
        now_us: u64,
    ) -> Result<usize, TableError> {
        self.check_entry(&entry)?;
        self.place(entry, data, now_us)
    }

    /// Installs an entry that has passed [`TableState::check_entry`] (or is one of the
    /// program's own), unless its key is taken or the table is full; returns its handle.
    pub fn place(
        &mut self,
        entry: Entry,
        data: Option<ControllerData>,
        now_us: u64,
    ) -> Result<usize, TableError> {
        if self.count >= self.size {
            return Err(TableError::Full(self.name.clone()));
        }
        if entry.action.args.len() > self.hot.room() {
            return Err(TableError::ArgCount {
                action: format!("#{}", entry.action.action),
                want: self.hot.room(),
                got: entry.action.args.len(),
            });
        }
        let slot = self.free.first().copied().unwrap_or(self.entries.len());
        let mut entry = entry;
        let entries = &self.entries;
        let installed = |h: usize| entries[h].as_ref();
        let mut key = PackedKey::new();
        pack_key(&self.kinds, entry.matches.iter().map(value_of), &mut key);
        match &mut self.index {
            Index::Exact(map) => {
                if map.contains_key(&key) {
                    return Err(TableError::Duplicate(self.name.clone()));
                }
                map.insert(key, slot);
            }
            Index::Lpm {
                lpm,
                by_len,
                longer,
                ..
            } => {
                let len = prefix_len(&entry.matches[*lpm]);
                entry.priority = i64::from(len);
                let pos = match by_len.iter().position(|(l, _)| *l <= len) {
                    Some(p) if by_len[p].0 == len => p,
                    Some(p) => {
                        by_len.insert(p, (len, KeyMap::default()));
                        p
                    }
                    None => {
                        by_len.push((len, KeyMap::default()));
                        by_len.len() - 1
                    }
                };
                if by_len[pos].1.contains_key(&key) {
                    return Err(TableError::Duplicate(self.name.clone()));
                }
                by_len[pos].1.insert(key, slot);
                longer.add(value_of(&entry.matches[*lpm]), len);
            }
            Index::Masked(groups) => {
                let Some(masks) = masks_of(&entry.matches) else {
                    return Err(range_refused(&self.name, &self.kinds, &entry));
                };
                let g = match groups.iter().position(|g| g.masks == masks) {
                    Some(g) => g,
                    None => {
                        groups.push(MaskGroup {
                            masks,
                            top: entry.priority,
                            keys: KeyMap::default(),
                        });
                        groups.len() - 1
                    }
                };
                let priority = |h: usize| installed(h).map_or(i64::MIN, |i| i.entry.priority);
                let bucket = groups[g].keys.entry(key).or_default();
                if bucket.iter().any(|&h| {
                    installed(h).is_some_and(|i| {
                        i.entry.matches == entry.matches && i.entry.priority == entry.priority
                    })
                }) {
                    return Err(TableError::Duplicate(self.name.clone()));
                }
                let pos = bucket.partition_point(|&h| priority(h) >= entry.priority);
                bucket.insert(pos, slot);
                groups[g].top = groups[g].top.max(entry.priority);
                MaskGroup::raise(groups, g);
            }
            Index::Ordered(order) => {
                if order.iter().any(|&h| {
                    installed(h).is_some_and(|i| {
                        i.entry.matches == entry.matches && i.entry.priority == entry.priority
                    })
                }) {
                    return Err(TableError::Duplicate(self.name.clone()));
                }
                let pos = order.partition_point(|&h| {
                    installed(h).is_some_and(|i| i.entry.priority >= entry.priority)
                });
                order.insert(pos, slot);
            }
        }
        self.hot.fill(slot, &entry.action, now_us);
        // Equal priorities keep insertion order (the earlier entry wins).
        let installed = Some(Installed {
            entry,
            counter: CounterCell::default(),
            data: data.map(Box::new),
            idle_timeout: None,
            seq: self.next_seq,
        });
        self.next_seq += 1;
        if slot == self.entries.len() {
            self.entries.push(installed);
            if self.versions.len() < self.entries.len() {
                self.versions.push(0);
            }
        } else {
            self.free.remove(&slot);
            self.entries[slot] = installed;
        }
        self.count += 1;
        Ok(self.handle(slot))
    }

    /// Removes the entry `handle` unless the table's entries are `const`; returns it.
    pub fn remove(&mut self, handle: usize) -> Result<Installed, TableError> {
        self.check_entries_change()?;
        self.take(handle)
    }

    /// Removes the entry `handle`; returns it.
    fn take(&mut self, handle: usize) -> Result<Installed, TableError> {
        let Some(slot) = self.slot(handle) else {
            return Err(TableError::NoEntry(self.name.clone(), handle));
        };
        let Some(installed) = self.entries[slot].take() else {
            return Err(TableError::NoEntry(self.name.clone(), handle));
        };
        self.hot.empty(slot);
        let mut key = PackedKey::new();
        pack_key(
            &self.kinds,
            installed.entry.matches.iter().map(value_of),
            &mut key,
        );
        match &mut self.index {
            Index::Exact(map) => {
                map.remove(&key);
                trim_map(map);
            }
            Index::Lpm {
                lpm,
                by_len,
                longer,
                ..
            } => {
                let m = &installed.entry.matches[*lpm];
                let len = prefix_len(m);
                for (_, map) in by_len.iter_mut().filter(|(l, _)| *l == len) {
                    if map.get(&key) == Some(&slot) {
                        map.remove(&key);
                        trim_map(map);
                        longer.remove(value_of(m), len);
                    }
                }
            }
            Index::Masked(groups) => {
                if let Some(masks) = masks_of(&installed.entry.matches) {
                    if let Some(g) = groups.iter().position(|g| g.masks == masks) {
                        if let Some(bucket) = groups[g].keys.get_mut(&key) {
                            bucket.retain(|&h| h != slot);
                            if bucket.is_empty() {
                                groups[g].keys.remove(&key);
                                trim_map(&mut groups[g].keys);
                            }
                        }
                        if groups[g].keys.is_empty() {
                            groups.remove(g);
                        }
                    }
                }
            }
            Index::Ordered(order) => {
                order.retain(|&h| h != slot);
                trim_vec(order);
            }
        }
        self.groups.remove(&slot);
        self.count -= 1;
        self.versions[slot] = self.versions[slot].wrapping_add(1);
        self.free.insert(slot);
        // Slots at the end go, so a table that empties holds nothing.
        while self
            .free
            .last()
            .is_some_and(|&s| s + 1 == self.entries.len())
        {
            self.free.pop_last();
            self.entries.pop();
        }
        trim_vec(&mut self.entries);
        self.hot.truncate(self.entries.len());
        if installed.idle_timeout.is_some() {
            self.timed -= 1;
        }
        Ok(installed)
    }

    /// Makes entry `handle` point to group `group` of the table's action selector.
    pub fn set_group(&mut self, handle: usize, group: u32) {
        if let Some(slot) = self.slot(handle) {
            self.groups.insert(slot, group);
        }
    }

    /// The group entry `handle` points to, if it points to one.
    pub fn group_of(&self, handle: usize) -> Option<u32> {
        if self.groups.is_empty() {
            return None;
        }
        self.groups.get(&(handle & (MAX_ENTRIES - 1))).copied()
    }

    /// Removes every entry unless they are `const`; returns them with their handles.
    pub fn clear(&mut self) -> Result<Vec<(usize, Installed)>, TableError> {
        self.check_entries_change()?;
        let handles: Vec<usize> = self.installed().map(|(h, _)| h).collect();
        Ok(handles
            .into_iter()
            .filter_map(|h| self.take(h).ok().map(|i| (h, i)))
            .collect())
    }

    /// Applies `change`, checked by [`TableState::check_change`], to entry `handle` at
    /// `now_us`.
    pub fn apply_change(
        &mut self,
        handle: usize,
        change: EntryChange,
        now_us: u64,
    ) -> Result<(), TableError> {
        let name = self.name.clone();
        let slot = self.slot(handle).ok_or(TableError::NoEntry(name, handle))?;
        let Some(i) = self.entries[slot].as_mut() else {
            return Err(TableError::NoEntry(self.name.clone(), handle));
        };
        if let Some(call) = change.action {
            if call.args.len() > self.hot.room() {
                return Err(TableError::ArgCount {
                    action: format!("#{}", call.action),
                    want: self.hot.room(),
                    got: call.args.len(),
                });
            }
            self.hot.set_action(slot, &call);
            i.entry.action = call;
        }
        if let Some(data) = change.data {
            i.data = data.map(Box::new);
        }
        if let Some(counter) = change.counter {
            i.counter = counter;
        }
        if let Some(ttl) = change.idle_timeout {
            if i.idle_timeout.map(|t| t.ttl) != ttl {
                self.set_idle_timeout(handle, ttl, now_us)?;
            }
        }
        Ok(())
    }

    /// The entry with handle `handle`.
    pub fn entry(&self, handle: usize) -> Option<&Installed> {
        self.slot(handle).and_then(|s| self.entries[s].as_ref())
    }

    /// The entry with handle `handle`, to change its direct counter or its data (its action
    /// changes through [`TableState::apply_change`]).
    pub fn entry_mut(&mut self, handle: usize) -> Option<&mut Installed> {
        let slot = self.slot(handle)?;
        self.entries[slot].as_mut()
    }

    /// Every installed entry with its handle, in the order of their slots (BMv2's order).
    pub fn installed(&self) -> impl Iterator<Item = (usize, &Installed)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(slot, e)| e.as_ref().map(|e| (slot, e)))
            .map(|(slot, e)| (self.handle(slot), e))
    }

    /// The handle of the entry with key `matches` and, if given, priority `priority`, found
    /// through the table's index (the lowest slot, where a key without its priority names
    /// several).
    pub fn find(&self, matches: &[FieldMatch], priority: Option<i64>) -> Option<usize> {
        let is = |slot: &usize| {
            self.entries
                .get(*slot)
                .and_then(Option::as_ref)
                .is_some_and(|i| {
                    i.entry.matches == matches && priority.is_none_or(|p| i.entry.priority == p)
                })
        };
        let mut key = PackedKey::new();
        pack_key(&self.kinds, matches.iter().map(value_of), &mut key);
        let slot = match &self.index {
            Index::Exact(map) => map.get(&key).copied().filter(is),
            Index::Lpm { by_len, .. } => by_len
                .iter()
                .find_map(|(_, map)| map.get(&key).copied().filter(is)),
            Index::Masked(groups) => {
                let masks = masks_of(matches)?;
                let group = groups.iter().find(|g| g.masks == masks)?;
                group.keys.get(&key)?.iter().copied().filter(is).min()
            }
            Index::Ordered(order) => order.iter().copied().filter(is).min(),
        };
        slot.map(|s| self.handle(s))
    }

    /// How many slots the table keeps, full or empty (what its memory grows with).
    #[cfg(test)]
    pub fn slots(&self) -> usize {
        self.entries.len()
    }

    /// The handle of the entry matching `key`, if any.
    pub fn lookup(&mut self, key: &[u128]) -> Option<usize> {
        let scratch = &mut self.scratch;
        let slot = match &self.index {
            Index::Exact(map) => {
                pack_key(&self.kinds, key.iter().copied(), scratch);
                map.get(scratch).copied()
            }
            Index::Lpm {
                lpm,
                width,
                by_len,
                longer,
            } => by_len.iter().find_map(|(len, map)| {
                if !longer.may_match(key[*lpm], *len) {
                    return None;
                }
                let mask = prefix_mask(*width, *len);
                let masked = key
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| if i == *lpm { v & mask } else { v });
                pack_key(&self.kinds, masked, scratch);
                map.get(scratch).copied()
            }),
            Index::Masked(groups) => {
                let rank = |h: usize| {
                    self.entries[h]
                        .as_ref()
                        .map_or((i64::MIN, u64::MAX), |i| (i.entry.priority, i.seq))
                };
                // The best so far: priority, order of insert, slot.
                let mut best: Option<(i64, u64, usize)> = None;
                for group in groups {
                    if best.is_some_and(|(p, _, _)| group.top < p) {
                        break;
                    }
                    let masked = key.iter().zip(&group.masks).map(|(v, m)| v & m);
                    pack_key(&self.kinds, masked, scratch);
                    let Some(&h) = group.keys.get(scratch).and_then(|bucket| bucket.first()) else {
                        continue;
                    };
                    let (p, seq) = rank(h);
                    if best.is_none_or(|(bp, bseq, _)| p > bp || (p == bp && seq < bseq)) {
                        best = Some((p, seq, h));
                    }
                }
                best.map(|(_, _, h)| h)
            }
            Index::Ordered(order) => order.iter().copied().find(|&h| {
                self.entries[h]
                    .as_ref()
                    .is_some_and(|i| i.entry.matches.iter().zip(key).all(|(m, &v)| m.matches(v)))
            }),
        };
        slot.map(|s| self.handle(s))
    }

    /// Records a packet of `bytes` matching entry `handle` at `now_us`: its last hit, and its
    /// direct counter if `bytes` is given.
    pub fn record_hit(&mut self, handle: usize, now_us: u64, bytes: Option<u64>) {
        let Some(slot) = self.slot(handle) else {
            return;
        };
        self.hot.hit(slot, now_us);
        if let Some(bytes) = bytes {
            if let Some(i) = self.entries[slot].as_mut() {
                i.counter.packets += 1;
                i.counter.bytes += bytes;
            }
        }
    }

    /// The action entry `handle` runs, read where lookups read it.
    pub fn action_of(&self, handle: usize) -> Option<ActionRef<'_>> {
        self.slot(handle).map(|slot| self.hot.action(slot))
    }

    /// When a packet last matched entry `handle` or, until one does, when it was installed (µs
    /// of the switch's clock).
    pub fn last_hit_us(&self, handle: usize) -> Option<u64> {
        self.slot(handle).map(|slot| self.hot.last_hit_us(slot))
    }

    /// Gives entry `handle` an idle timeout of `ttl` counted from `now_us`, or none.
    pub fn set_idle_timeout(
        &mut self,
        handle: usize,
        ttl: Option<Duration>,
        now_us: u64,
    ) -> Result<(), TableError> {
        let name = self.name.clone();
        let Some(i) = self.entry_mut(handle) else {
            return Err(TableError::NoEntry(name, handle));
        };
        let timeout = ttl.map(|ttl| IdleTimeout {
            ttl,
            since_us: now_us,
        });
        let had = std::mem::replace(&mut i.idle_timeout, timeout).is_some();
        match (had, timeout.is_some()) {
            (false, true) => self.timed += 1,
            (true, false) => self.timed -= 1,
            _ => {}
        }
        Ok(())
    }

    /// Whether some entry has an idle timeout.
    pub fn has_idle_timeouts(&self) -> bool {
        self.timed > 0
    }

    /// The handles of the entries idle at `now_us` past their timeout, in the order of their
    /// slots; each one's count starts again from `now_us`.
    pub fn sweep_idle(&mut self, now_us: u64) -> Vec<usize> {
        if self.timed == 0 {
            return Vec::new();
        }
        let mut idle = Vec::new();
        for (slot, i) in self.entries.iter_mut().enumerate() {
            let Some(i) = i else { continue };
            if let Some(timeout) = &mut i.idle_timeout {
                if timeout.expired(self.hot.last_hit_us(slot), now_us) {
                    timeout.since_us = now_us;
                    idle.push(slot);
                }
            }
        }
        idle.into_iter().map(|slot| self.handle(slot)).collect()
    }

    /// Checks that a match fits the match kind of key `key`.
    fn check_match(&self, key: usize, m: &FieldMatch) -> Result<(), TableError> {
        let (kind, width) = self.kinds[key];
        let full = ir::mask(width);
        let ok = match (kind, m) {
            (MatchKind::Exact, FieldMatch::Masked { mask, .. }) => *mask == full,
            (MatchKind::Lpm, FieldMatch::Masked { mask, .. }) => {
                *mask == prefix_mask(width, mask.count_ones() as u16)
            }
            (MatchKind::Optional, FieldMatch::Masked { mask, .. }) => *mask == 0 || *mask == full,
            (MatchKind::Ternary, FieldMatch::Masked { .. }) | (MatchKind::Range, _) => true,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(TableError::BadMatch {
                table: self.name.clone(),
                key: self.key_names[key].clone(),
                kind,
            })
        }
    }
}

/// Gives back what a vector holds beyond four times what it uses (a table that shrank), and no
/// more often: one that grows and shrinks around a size keeps its memory.
fn trim_vec<T>(v: &mut Vec<T>) {
    if v.capacity() > 64 && v.len() * 4 < v.capacity() {
        v.shrink_to(v.len() * 2);
    }
}

/// [`trim_vec`] for a key map.
fn trim_map<V>(m: &mut KeyMap<V>) {
    if m.capacity() > 64 && m.len() * 4 < m.capacity() {
        m.shrink_to(m.len() * 2);
    }
}

/// The error for a range match in a table without range keys.
fn range_refused(table: &str, kinds: &[(MatchKind, u16)], entry: &Entry) -> TableError {
    let key = entry
        .matches
        .iter()
        .position(|m| matches!(m, FieldMatch::Range { .. }))
        .unwrap_or(0);
    TableError::BadMatch {
        table: table.to_owned(),
        key: key.to_string(),
        kind: kinds[key].0,
    }
}

/// The masks of `matches`, or `None` if one is a range.
fn masks_of(matches: &[FieldMatch]) -> Option<Vec<u128>> {
    matches
        .iter()
        .map(|m| match *m {
            FieldMatch::Masked { mask, .. } => Some(mask),
            FieldMatch::Range { .. } => None,
        })
        .collect()
}

/// The prefix length of an lpm key's match.
fn prefix_len(m: &FieldMatch) -> u16 {
    match *m {
        FieldMatch::Masked { mask, .. } => mask.count_ones() as u16,
        FieldMatch::Range { .. } => 0,
    }
}

fn value_of(m: &FieldMatch) -> u128 {
    match *m {
        FieldMatch::Masked { value, mask } => value & mask,
        FieldMatch::Range { lo, .. } => lo,
    }
}

/// The mask of the `len` most significant bits of a `width`-bit value.
pub fn prefix_mask(width: u16, len: u16) -> u128 {
    let len = len.min(width);
    ir::mask(width) ^ ir::mask(width - len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Key, Table};

    fn table(kinds: &[MatchKind]) -> TableState {
        let keys = kinds
            .iter()
            .map(|&kind| Key {
                name: "k".into(),
                expr: ir::Expr::Const(0),
                width: 32,
                kind,
            })
            .collect();
        let actions = [ir::Action {
            name: "a".into(),
            body: 0,
        }];
        let bodies = [ir::Body {
            name: "a".into(),
            params: vec![ir::Param {
                name: "x".into(),
                slot: 0,
                width: 32,
                action_data: true,
            }],
            stmts: vec![],
        }];
        TableState::new(
            &Table {
                name: "t".into(),
                keys,
                actions: vec![0],
                bindings: vec![],
                default_action: ActionCall {
                    action: 0,
                    args: vec![],
                },
                const_default: false,
                const_entries: vec![],
                const_entries_fixed: false,
                size: 16,
                direct_counter: None,
                direct_meter: None,
                profile: None,
                selector: vec![],
                copies: Default::default(),
            },
            &actions,
            &bodies,
        )
    }

    fn entry(matches: Vec<FieldMatch>, priority: i64, arg: u128) -> Entry {
        Entry {
            matches,
            priority,
            action: ActionCall {
                action: 0,
                args: vec![arg],
            },
        }
    }

    /// An entry of a one-key exact table matching `value`.
    fn exact(value: u128) -> Entry {
        entry(
            vec![FieldMatch::Masked {
                value,
                mask: ir::mask(32),
            }],
            0,
            1,
        )
    }

    fn lpm(v: u128, len: u16) -> FieldMatch {
        FieldMatch::Masked {
            value: v,
            mask: prefix_mask(32, len),
        }
    }

    #[test]
    fn longest_prefix_wins_regardless_of_insertion_order() {
        let mut t = table(&[MatchKind::Lpm]);
        let short = t
            .insert(entry(vec![lpm(0x0a00_0000, 8)], 0, 1), None, 0)
            .unwrap();
        let long = t
            .insert(entry(vec![lpm(0x0a01_0000, 16)], 0, 2), None, 0)
            .unwrap();
        assert_eq!(t.lookup(&[0x0a01_0203]), Some(long));
        assert_eq!(t.lookup(&[0x0a02_0203]), Some(short));
        assert_eq!(t.lookup(&[0x0b00_0000]), None);
        t.remove(long).unwrap();
        assert_eq!(t.lookup(&[0x0a01_0203]), Some(short));
    }

    #[test]
    fn ternary_highest_priority_wins() {
        let mut t = table(&[MatchKind::Ternary]);
        let low = t
            .insert(
                entry(vec![FieldMatch::Masked { value: 0, mask: 0 }], 1, 1),
                None,
                0,
            )
            .unwrap();
        let high = t
            .insert(
                entry(
                    vec![FieldMatch::Masked {
                        value: 0x10,
                        mask: 0xf0,
                    }],
                    5,
                    2,
                ),
                None,
                0,
            )
            .unwrap();
        assert_eq!(t.lookup(&[0x13]), Some(high));
        assert_eq!(t.lookup(&[0x23]), Some(low));
    }

    /// `find` through each kind of index gives what a scan of the entries gives.
    #[test]
    fn find_by_key_agrees_with_a_scan() {
        let ternary = |value, mask| FieldMatch::Masked { value, mask };
        let range = |lo, hi| FieldMatch::Range { lo, hi };
        let tables: [(MatchKind, Vec<(FieldMatch, i64)>); 4] = [
            (MatchKind::Exact, vec![(lpm(7, 32), 0), (lpm(9, 32), 0)]),
            (
                MatchKind::Lpm,
                vec![(lpm(0x0a00_0000, 8), 0), (lpm(0x0a01_0000, 16), 0)],
            ),
            (
                MatchKind::Ternary,
                vec![
                    (ternary(0x10, 0xf0), 5),
                    (ternary(0x10, 0xf0), 3),
                    (ternary(1, 1), 1),
                ],
            ),
            (
                MatchKind::Range,
                vec![(range(1, 5), 2), (range(1, 5), 4), (range(6, 9), 1)],
            ),
        ];
        for (kind, entries) in tables {
            let mut t = table(&[kind]);
            for (m, p) in &entries {
                t.insert(entry(vec![*m], *p, 1), None, 0).unwrap();
            }
            let first = t.installed().next().map(|(h, _)| h);
            t.remove(first.unwrap()).unwrap();
            let mut probes = entries.clone();
            probes.push((ternary(0x20, 0xf0), 5));
            probes.push((range(2, 5), 2));
            for (m, p) in probes {
                for priority in [None, Some(p), Some(p + 1)] {
                    let scan = t
                        .installed()
                        .find(|(_, i)| {
                            i.entry.matches == [m] && priority.is_none_or(|q| i.entry.priority == q)
                        })
                        .map(|(h, _)| h);
                    assert_eq!(t.find(&[m], priority), scan, "{kind:?} {m:?} {priority:?}");
                }
            }
        }
    }

    #[test]
    fn exact_duplicates_and_capacity_are_refused() {
        let mut t = table(&[MatchKind::Exact]);
        t.insert(exact(7), None, 0).unwrap();
        assert_eq!(
            t.insert(exact(7), None, 0),
            Err(TableError::Duplicate("t".into()))
        );
        for v in 8..23 {
            t.insert(exact(v), None, 0).unwrap();
        }
        assert_eq!(
            t.insert(exact(99), None, 0),
            Err(TableError::Full("t".into()))
        );
    }

    /// An entry is reported idle once its timeout passed since its last hit (or the timeout was
    /// set), then once per timeout while it stays idle; a hit, or no timeout, keeps it quiet.
    #[test]
    fn idle_entries_are_reported_once_per_timeout_until_hit() {
        let mut t = table(&[MatchKind::Exact]);
        let timed = t.insert(exact(1), None, 1_000).unwrap();
        let untimed = t.insert(exact(2), None, 1_000).unwrap();
        assert!(!t.has_idle_timeouts());
        t.set_idle_timeout(timed, Some(Duration::from_millis(3)), 2_000)
            .unwrap();
        assert!(t.has_idle_timeouts());
        assert_eq!(t.sweep_idle(4_999), Vec::<usize>::new());
        assert_eq!(t.sweep_idle(5_000), vec![timed]);
        // Reported: quiet for another timeout.
        assert_eq!(t.sweep_idle(7_999), Vec::<usize>::new());
        assert_eq!(t.sweep_idle(8_000), vec![timed]);
        // Hit: quiet until a timeout after the hit.
        t.record_hit(timed, 9_000, None);
        t.record_hit(untimed, 9_000, Some(64));
        assert_eq!(t.entry(untimed).unwrap().counter.bytes, 64);
        assert_eq!(t.entry(timed).unwrap().counter.packets, 0);
        assert_eq!(t.sweep_idle(11_999), Vec::<usize>::new());
        assert_eq!(t.sweep_idle(12_000), vec![timed]);
        t.set_idle_timeout(timed, None, 12_000).unwrap();
        assert!(!t.has_idle_timeouts());
        assert_eq!(t.sweep_idle(100_000), Vec::<usize>::new());
        t.set_idle_timeout(untimed, Some(Duration::from_nanos(1)), 100_000)
            .unwrap();
        t.remove(untimed).unwrap();
        assert!(!t.has_idle_timeouts());
        assert_eq!(
            t.set_idle_timeout(untimed, None, 0),
            Err(TableError::NoEntry("t".into(), untimed))
        );
    }

    /// A deterministic pseudo-random sequence (xorshift32) from `seed`.
    fn xorshift(mut seed: u32) -> impl FnMut() -> u32 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        }
    }

    /// Of the entries `live`, the one matching `key` that ranks highest, found by a scan.
    fn best_by_scan<R: Ord>(
        t: &TableState,
        live: &[usize],
        key: &[u128],
        rank: impl Fn(&Installed) -> R,
    ) -> Option<usize> {
        live.iter()
            .copied()
            .filter(|&h| {
                let e = &t.entry(h).unwrap().entry;
                e.matches.iter().zip(key).all(|(m, &v)| m.matches(v))
            })
            .max_by_key(|&h| rank(t.entry(h).unwrap()))
    }

    /// The masked index (tuple space search) answers as a linear scan in priority order does,
    /// earlier entries winning ties, through inserts and removals.
    #[test]
    fn masked_lookup_matches_a_priority_scan() {
        let mut t = table(&[MatchKind::Ternary, MatchKind::Exact]);
        t.size = 1000;
        let mut next = xorshift(0x2545_f491u32);
        let masks = [0xffu128, 0xf0, 0x0f, 0];
        let mut live = Vec::new();
        for i in 0..300 {
            let mask = masks[next() as usize % masks.len()];
            let e = entry(
                vec![
                    FieldMatch::Masked {
                        value: u128::from(next() & 0xff),
                        mask,
                    },
                    FieldMatch::Masked {
                        value: u128::from(next() % 2),
                        mask: ir::mask(32),
                    },
                ],
                i64::from(next() % 8),
                i,
            );
            if let Ok(h) = t.insert(e, None, 0) {
                live.push(h);
            }
            if i % 5 == 4 {
                let h = live.swap_remove(next() as usize % live.len());
                t.remove(h).unwrap();
            }
        }
        for a in 0..=0xffu128 {
            for b in 0..2u128 {
                let key = [a, b];
                let scan = best_by_scan(&t, &live, &key, |i| {
                    (i.entry.priority, std::cmp::Reverse(i.seq))
                });
                assert_eq!(t.lookup(&key), scan, "key {key:?}");
            }
        }
        let first = t.entry(live[0]).unwrap().entry.clone();
        assert_eq!(
            t.insert(first, None, 0),
            Err(TableError::Duplicate("t".into()))
        );
    }

    /// The lpm index (only the lengths that may match probed) answers as a scan for the
    /// longest matching prefix does, through inserts and removals, with an exact key beside.
    #[test]
    fn lpm_lookup_matches_a_longest_prefix_scan() {
        let mut t = table(&[MatchKind::Lpm, MatchKind::Exact]);
        t.size = 1000;
        let mut next = xorshift(0x9e37_79b9u32);
        // Addresses under two /12s, so prefixes share top bits and differ below them.
        let address = |r: u32| 0x0a00_0000 | (r & 0x001f_ffff);
        let mut live = Vec::new();
        for i in 0..400 {
            let len = [0, 8, 12, 16, 17, 20, 24, 28, 31, 32][next() as usize % 10];
            let mask = prefix_mask(32, len);
            let e = entry(
                vec![
                    FieldMatch::Masked {
                        value: u128::from(address(next())) & mask,
                        mask,
                    },
                    FieldMatch::Masked {
                        value: u128::from(next() % 2),
                        mask: ir::mask(32),
                    },
                ],
                0,
                i,
            );
            if let Ok(h) = t.insert(e, None, 0) {
                live.push(h);
            }
            if i % 3 == 2 {
                let h = live.swap_remove(next() as usize % live.len());
                t.remove(h).unwrap();
            }
        }
        for _ in 0..20_000 {
            let key = [u128::from(address(next())), u128::from(next() % 2)];
            let scan = best_by_scan(&t, &live, &key, |i| i.entry.priority);
            assert_eq!(t.lookup(&key), scan, "key {key:x?}");
        }
    }

    /// A deleted entry's slot is the next insert's, under a new handle: insert and delete,
    /// repeated, keep the table at one slot, and a handle kept past its delete names nothing.
    #[test]
    fn churn_reuses_slots_and_stale_handles_name_no_entry() {
        for kinds in [
            &[MatchKind::Exact][..],
            &[MatchKind::Lpm],
            &[MatchKind::Ternary],
            &[MatchKind::Range],
        ] {
            let mut t = table(kinds);
            let key = FieldMatch::Masked {
                value: 7,
                mask: ir::mask(32),
            };
            let kept = t.insert(entry(vec![key], 1, 1), None, 0).unwrap();
            let mut handles = std::collections::BTreeSet::new();
            let mut stale = None;
            for i in 0..1000u128 {
                let key = FieldMatch::Masked {
                    value: 8,
                    mask: ir::mask(32),
                };
                let h = t.insert(entry(vec![key], 1, i), None, 0).unwrap();
                assert_eq!(t.lookup(&[8]), Some(h), "{kinds:?}");
                handles.insert(h);
                t.remove(h).unwrap();
                assert_eq!(t.lookup(&[8]), None);
                assert_eq!(t.slots(), 1, "{kinds:?}: the slot is given back");
                stale.get_or_insert(h);
            }
            // 256 versions of slot 1, then the same handles again.
            assert_eq!(handles.len(), 256, "{kinds:?}");
            assert!(handles.iter().all(|h| h & (MAX_ENTRIES - 1) == 1));
            let fresh = t
                .insert(
                    entry(
                        vec![FieldMatch::Masked {
                            value: 9,
                            mask: ir::mask(32),
                        }],
                        1,
                        0,
                    ),
                    None,
                    0,
                )
                .unwrap();
            let stale = stale.unwrap();
            assert_ne!(fresh, stale);
            assert!(t.entry(stale).is_none());
            assert_eq!(
                t.remove(stale).unwrap_err(),
                TableError::NoEntry("t".into(), stale)
            );
            assert!(t.entry(fresh).is_some() && t.entry(kept).is_some());
            // A table emptied holds no slot.
            t.clear().unwrap();
            assert_eq!((t.slots(), t.installed().count()), (0, 0));
        }
    }

    /// The table's rules, checked for every write: no entry of a const table changes, a
    /// keyless table takes no entry, a key per key of the table and of its kind, one of the
    /// table's actions with its data; a const default action stays.
    #[test]
    fn writes_follow_the_tables_rules() {
        let mut t = table(&[MatchKind::Lpm]);
        let e = entry(vec![lpm(0x0a00_0000, 8)], 0, 1);
        let h = t.insert(e.clone(), None, 0).unwrap();
        let bad_lpm = entry(
            vec![FieldMatch::Masked {
                value: 0,
                mask: 0xff00_ff00,
            }],
            0,
            1,
        );
        assert!(matches!(
            t.insert(bad_lpm, None, 0),
            Err(TableError::BadMatch { .. })
        ));
        assert!(matches!(
            t.insert(entry(vec![], 0, 1), None, 0),
            Err(TableError::KeyCount {
                want: 1,
                got: 0,
                ..
            })
        ));
        let mut no_data = e.clone();
        no_data.action.args.clear();
        assert!(matches!(
            t.insert(no_data, None, 0),
            Err(TableError::ArgCount {
                want: 1,
                got: 0,
                ..
            })
        ));
        let mut foreign = e.clone();
        foreign.action.action = 9;
        assert!(matches!(
            t.insert(foreign, None, 0),
            Err(TableError::BadAction { .. })
        ));
        t.const_entries = true;
        let change = EntryChange::default();
        let refused = Err(TableError::Const("t".into(), "entries"));
        assert_eq!(t.insert(e, None, 0).map(|_| ()), refused);
        assert_eq!(t.check_change(&change), refused);
        assert_eq!(t.remove(h).map(|_| ()), refused);
        assert_eq!(t.clear().map(|_| ()), refused);
        t.const_default = true;
        assert_eq!(
            t.check_default(&t.default_action),
            Err(TableError::Const("t".into(), "default action"))
        );
        let mut keyless = table(&[]);
        assert_eq!(
            keyless.insert(entry(vec![], 0, 1), None, 0),
            Err(TableError::Keyless("t".into()))
        );
    }

    /// Packed keys keep every bit of every value up to its key's width and nothing above it,
    /// inline up to four words and spilled beyond.
    #[test]
    fn packed_keys_keep_each_value_at_its_width() {
        let kinds = |widths: &[u16]| -> Vec<(MatchKind, u16)> {
            widths.iter().map(|&w| (MatchKind::Exact, w)).collect()
        };
        let mut key = PackedKey::new();
        let mac_vlan = kinds(&[48, 12, 48]);
        pack_key(
            &mac_vlan,
            [0xaabb_ccdd_eeff, 0xfff, 1].into_iter(),
            &mut key,
        );
        assert_eq!(key.as_slice(), [0x1fff_aabb_ccdd_eeff, 0]);
        let wide = kinds(&[128, 128, 128]);
        let values = [u128::MAX, 1, 1 << 127];
        pack_key(&wide, values.into_iter(), &mut key);
        assert!(key.spilled());
        assert_eq!(key.as_slice(), [u64::MAX, u64::MAX, 1, 0, 0, 1 << 63]);
        pack_key(&kinds(&[8]), [0x1ff].into_iter(), &mut key);
        assert_eq!(key.as_slice(), [0xff], "bits above the width are cut");
    }

    /// Among entries of equal priority the earlier insert wins, also when the later one took
    /// an earlier entry's slot (a lower handle).
    #[test]
    fn equal_priorities_go_by_insert_order_not_by_slot() {
        let mut t = table(&[MatchKind::Ternary]);
        let any = FieldMatch::Masked { value: 0, mask: 0 };
        let exact = FieldMatch::Masked {
            value: 5,
            mask: 0xff,
        };
        let placeholder = t.insert(entry(vec![exact], 3, 0), None, 0).unwrap();
        let first = t.insert(entry(vec![any], 3, 1), None, 0).unwrap();
        t.remove(placeholder).unwrap();
        let second = t.insert(entry(vec![exact], 3, 2), None, 0).unwrap();
        assert_eq!(second & (MAX_ENTRIES - 1), 0, "the later entry took slot 0");
        assert_eq!(t.lookup(&[5]), Some(first));
    }
}
