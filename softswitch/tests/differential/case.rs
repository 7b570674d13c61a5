//! Random cases from a program's control-plane view and its seeds: the table entries,
//! sessions and groups of one of its STF tests (durations brought into range, queue settings
//! and checks left out), then random entries within its tables' keys, actions and parameter
//! widths, then packets — seeds as they are, mutated, or random bytes — on random ports.

use std::collections::HashSet;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom as _;
use rand::Rng as _;
use softswitch_core::externs;
use softswitch_core::ir::{
    mask, ActionCall, Entry, ExternArg, ExternCall, FieldMatch, MatchKind, Program, Stmt,
};
use softswitch_frontend::cpinfo::CpInfo;

use crate::profile::Profile;

/// STF commands a case keeps from a seed test: what sets the switch up. Packets, checks,
/// waits, time and queue settings are left out (queues stay unlimited and 64 deep, so every
/// packet finds an empty queue on both switches).
const SETUP_COMMANDS: &[&str] = &[
    "add",
    "setdefault",
    "mirroring_add",
    "mc_mgrp_create",
    "mc_node_create",
    "mc_node_associate",
    "member_add",
    "group_create",
    "group_add_member",
    "pvs_add",
    "register_write",
];

/// Packets and set-ups taken from STF tests.
#[derive(Debug, Default)]
pub struct Seeds {
    /// Every `packet` line: (port, bytes).
    pub packets: Vec<(u16, Vec<u8>)>,
    /// Per test, its set-up commands as STF text.
    pub setups: Vec<String>,
}

/// The words of an STF line (an action call with spaces inside is one word), without its
/// comment.
fn words(line: &str) -> Vec<String> {
    let code = line.split('#').next().unwrap_or("");
    let mut out = Vec::new();
    let (mut word, mut depth) = (String::new(), 0);
    for c in code.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            c if c.is_whitespace() && depth == 0 => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                continue;
            }
            _ => {}
        }
        word.push(c);
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn number(text: &str) -> Option<u128> {
    match text.strip_prefix("0x") {
        Some(hex) => u128::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

impl Seeds {
    /// The seeds of `profile`'s STF tests; set-ups are for `program` (its lowering).
    pub fn read(profile: &Profile, program: &Program) -> Seeds {
        let mut seeds = Seeds::default();
        for file in &profile.seeds {
            let text =
                std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            seeds.packets.extend(packets(&text));
            if profile.own_seeds {
                seeds.setups.push(setup(&text, profile, program));
            }
        }
        seeds
    }
}

/// The `packet` lines of an STF text.
pub fn packets(text: &str) -> Vec<(u16, Vec<u8>)> {
    text.lines()
        .filter_map(|line| {
            let w = words(line);
            if w.first().map(String::as_str) != Some("packet") || w.len() < 2 {
                return None;
            }
            let port = w[1].parse().ok()?;
            let hex: String = w[2..].concat();
            let bytes = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            Some((port, bytes))
        })
        .collect()
}

/// The set-up commands of an STF text: an entry added again after a `remove` is left out
/// (the first one stays), and durations get the profile's values.
fn setup(text: &str, profile: &Profile, program: &Program) -> String {
    let mut out = Vec::new();
    let mut added = HashSet::new();
    for line in text.lines() {
        let mut w = words(line);
        let Some(command) = w.first().map(|c| c.to_ascii_lowercase()) else {
            continue;
        };
        if !SETUP_COMMANDS.contains(&command.as_str()) {
            continue;
        }
        if command == "add" {
            let mut key: Vec<&String> = w[1..]
                .iter()
                .filter(|x| x.contains(':') && !x.contains('('))
                .collect();
            key.sort();
            let signature = format!("{} {key:?}", w.get(1).map_or("", |t| t.as_str()));
            if !added.insert(signature) {
                continue;
            }
        }
        if matches!(command.as_str(), "add" | "setdefault" | "member_add") && w.len() > 2 {
            let table = softswitch_core::runtime::table_id(program, &w[1]);
            let at = w
                .iter()
                .position(|x| x.contains('('))
                .unwrap_or(w.len() - 1);
            if let Some(table) = table {
                w[at] = clamp_call(&w[at], table, profile, program);
            }
        }
        out.push(w.join(" "));
    }
    out.join("\n") + "\n"
}

/// An action call `name(k:v, ...)` with the profile's parameters brought into their values.
fn clamp_call(call: &str, table: usize, profile: &Profile, program: &Program) -> String {
    let Some((name, rest)) = call.split_once('(') else {
        return call.to_owned();
    };
    let Some(action) = softswitch_core::runtime::action_id(program, table, name) else {
        return call.to_owned();
    };
    let params = &program.bodies[program.actions[action].body].params;
    let args: Vec<String> = rest
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|arg| {
            let Some((k, v)) = arg.split_once(':') else {
                return arg.to_owned();
            };
            let (k, v) = (k.trim(), v.trim());
            let rule = profile.params.iter().find(|(p, _)| *p == k);
            let width = params.iter().find(|p| p.name == k).map(|p| p.width);
            match (rule, width, number(v)) {
                (Some((_, values)), Some(width), Some(n)) => {
                    format!("{k}:{}", values.clamp(n, mask(width)))
                }
                _ => format!("{k}:{v}"),
            }
        })
        .collect();
    format!("{name}({})", args.join(", "))
}

/// A random value of `width` bits: random bits, a small or an all-ones value, or bits taken
/// from a seed packet (where real field values are).
pub fn value(rng: &mut StdRng, width: u16, seeds: &Seeds) -> u128 {
    let full = mask(width);
    match rng.random_range(0..10) {
        0..=3 => rng.random::<u128>() & full,
        4 | 5 => rng.random_range(0..4u128) & full,
        6 => full,
        _ => match seeds.packets.choose(rng) {
            Some((_, bytes)) if !bytes.is_empty() => {
                let start = rng.random_range(0..bytes.len());
                let v = bytes[start..]
                    .iter()
                    .take(16)
                    .fold(0u128, |v, b| (v << 8) | u128::from(*b));
                v & full
            }
            _ => rng.random::<u128>() & full,
        },
    }
}

/// A random match for a key of `kind` and `width` bits.
fn field_match(rng: &mut StdRng, kind: MatchKind, width: u16, seeds: &Seeds) -> FieldMatch {
    let full = mask(width);
    let v = value(rng, width, seeds);
    match kind {
        MatchKind::Exact => FieldMatch::Masked {
            value: v,
            mask: full,
        },
        MatchKind::Lpm => {
            let len = rng.random_range(0..=width);
            let m = full ^ mask(width - len);
            FieldMatch::Masked {
                value: v & m,
                mask: m,
            }
        }
        MatchKind::Ternary | MatchKind::Optional => {
            let m = match rng.random_range(0..4) {
                0 if kind == MatchKind::Ternary => rng.random::<u128>() & full,
                0 | 1 => 0,
                _ => full,
            };
            FieldMatch::Masked {
                value: v & m,
                mask: m,
            }
        }
        MatchKind::Range | MatchKind::Selector => {
            let w = value(rng, width, seeds);
            FieldMatch::Range {
                lo: v.min(w),
                hi: v.max(w),
            }
        }
    }
}

/// Tables a random entry may go to: without entries the program gives, and not behind an
/// action profile. (The specification lets the control plane change a table's entries that
/// are not `const`, and softswitch does; BMv2 refuses any change to a table whose entries the
/// program gives, IMMUTABLE_TABLE_ENTRIES.)
pub fn writable_tables(program: &Program) -> Vec<usize> {
    (0..program.tables.len())
        .filter(|&t| {
            let table = &program.tables[t];
            !table.const_entries_fixed
                && table.const_entries.is_empty()
                && table.profile.is_none()
                && !table.keys.is_empty()
        })
        .collect()
}

/// A random call of one of `table`'s actions, with data within its widths and the profile's
/// values; `default` picks among the actions allowed as a default, else among those allowed
/// in entries.
pub fn action_call(
    rng: &mut StdRng,
    program: &Program,
    control_plane: &CpInfo,
    table: usize,
    default: bool,
    profile: &Profile,
    seeds: &Seeds,
) -> Option<ActionCall> {
    let refs = &control_plane.tables[table].action_refs;
    let direct_meter = program.tables[table].direct_meter;
    let allowed: Vec<usize> = program.tables[table]
        .actions
        .iter()
        .zip(refs)
        .filter(|(_, annotations)| {
            let scope = if default { "tableonly" } else { "defaultonly" };
            !softswitch_frontend::cpinfo::has(annotations, scope)
        })
        .map(|(&a, _)| a)
        // BMv2 executes a direct meter on every hit and writes its colour wherever the program
        // reads it, whatever the action; softswitch when the action reads it (a difference
        // listed in docs/softswitch.md): entries run actions that read it.
        .filter(|&a| direct_meter.is_none_or(|m| !default && reads_meter(program, a, m)))
        .collect();
    let &action = allowed.choose(rng)?;
    let args = program
        .action_data(action)
        .map(|p| {
            let v = value(rng, p.width, seeds);
            match profile.params.iter().find(|(name, _)| *name == p.name) {
                Some((_, values)) => values.clamp(v, mask(p.width)),
                None => v,
            }
        })
        .collect();
    Some(ActionCall { action, args })
}

/// Whether action `action` reads direct meter `meter`.
fn reads_meter(program: &Program, action: usize, meter: usize) -> bool {
    program.bodies[program.actions[action].body]
        .stmts
        .iter()
        .any(|s| {
            matches!(s, Stmt::Extern(call) if matches!(&**call, ExternCall::Call { ext, args }
                if Some(*ext) == externs::by_method("direct_meter", "read")
                    && args.first() == Some(&ExternArg::Instance(meter))))
        })
}

/// A random entry of `table`.
pub fn entry(
    rng: &mut StdRng,
    program: &Program,
    control_plane: &CpInfo,
    table: usize,
    profile: &Profile,
    seeds: &Seeds,
) -> Option<Entry> {
    let keys = &program.tables[table].keys;
    let matches = keys
        .iter()
        .map(|k| field_match(rng, k.kind, k.width, seeds))
        .collect();
    let prioritized = keys.iter().any(|k| {
        matches!(
            k.kind,
            MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
        )
    });
    Some(Entry {
        matches,
        priority: if prioritized {
            rng.random_range(1..8)
        } else {
            0
        },
        action: action_call(rng, program, control_plane, table, false, profile, seeds)?,
    })
}

/// A packet of at least `min_len` bytes: a seed as it is, a seed mutated, or random bytes; on a
/// seed's port or a random one.
pub fn packet(rng: &mut StdRng, seeds: &Seeds, min_len: usize) -> (u16, Vec<u8>) {
    let random_bytes =
        |rng: &mut StdRng, n: usize| (0..n).map(|_| rng.random()).collect::<Vec<u8>>();
    let (port, mut bytes) = match (rng.random_range(0..20), seeds.packets.choose(rng)) {
        (0..=16, Some(seed)) => seed.clone(),
        _ => {
            let n = rng.random_range(1..=128);
            (rng.random_range(0..8), random_bytes(rng, n))
        }
    };
    if rng.random_range(0..20) >= 8 {
        for _ in 0..rng.random_range(1..=3) {
            mutate(rng, &mut bytes, seeds);
        }
    }
    while bytes.len() < min_len.max(1) {
        bytes.push(rng.random());
    }
    let port = if rng.random_range(0..8) == 0 {
        rng.random_range(0..8)
    } else {
        port
    };
    (port, bytes)
}

/// One mutation: a bit flipped, a byte set, the packet cut or lengthened, or a window of it
/// replaced by the same bytes of another seed.
fn mutate(rng: &mut StdRng, bytes: &mut Vec<u8>, seeds: &Seeds) {
    let len = bytes.len();
    match rng.random_range(0..5) {
        0 if len > 0 => {
            let at = rng.random_range(0..len);
            bytes[at] ^= 1 << rng.random_range(0..8);
        }
        1 if len > 0 => {
            let at = rng.random_range(0..len);
            bytes[at] = rng.random();
        }
        2 if len > 1 => bytes.truncate(rng.random_range(1..len)),
        3 => {
            let extra = rng.random_range(1..=32);
            bytes.extend((0..extra).map(|_| rng.random::<u8>()));
        }
        _ => {
            if let Some((_, other)) = seeds.packets.choose(rng) {
                let end = other.len().min(len);
                if end > 0 {
                    let start = rng.random_range(0..end);
                    let stop = rng.random_range(start..=end);
                    bytes[start..stop].copy_from_slice(&other[start..stop]);
                }
            }
        }
    }
}
