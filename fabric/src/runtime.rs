//! Runtime entries in the P4 tutorials' runtime-JSON shape (`table_entries` with `table`,
//! `match`, `action_name`, `action_params`, `priority`, `default_action`;
//! `multicast_group_entries`; `clone_session_entries`), applied to a [`Switch`] through its
//! control-plane API. A stand-in for a P4Runtime client, for the fabric and its tests.
//!
//! Values are integers, strings of decimal or `0x` hex digits, dotted IPv4 addresses or
//! colon-separated MAC addresses. Match values: a value (exact, optional), `[value, prefix
//! length]` (lpm), `[value, mask]` (ternary), `[low, high]` (range).

use serde::Deserialize;
use softswitch_core::ir::{mask, ActionCall, Entry, FieldMatch, MatchKind};
use softswitch_core::switch::Switch;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

/// The largest runtime-JSON file read, in bytes (the tutorials' files are a few kilobytes; a
/// hundred thousand entries take about 20 MB).
pub const MAX_RUNTIME_JSON_BYTES: usize = 64 << 20;

/// A runtime-JSON file.
#[derive(Debug, Default, Deserialize)]
pub struct RuntimeConfig {
    /// `"bmv2"` in the tutorials' files; not used here.
    #[serde(default)]
    pub target: Option<String>,
    /// Table entries and default actions, applied in order.
    #[serde(default)]
    pub table_entries: Vec<TableEntry>,
    /// Multicast groups.
    #[serde(default)]
    pub multicast_group_entries: Vec<GroupEntry>,
    /// Clone sessions.
    #[serde(default)]
    pub clone_session_entries: Vec<CloneSessionEntry>,
}

/// One element of `table_entries`.
#[derive(Debug, Deserialize)]
pub struct TableEntry {
    /// Table name (`LosslessIngress.ipv4_lpm`).
    pub table: String,
    /// Key name -> value.
    #[serde(default, rename = "match")]
    pub matches: BTreeMap<String, serde_json::Value>,
    /// Action name.
    pub action_name: String,
    /// Action data by parameter name.
    #[serde(default)]
    pub action_params: BTreeMap<String, serde_json::Value>,
    /// Priority (ternary, range and optional keys).
    #[serde(default)]
    pub priority: Option<i64>,
    /// Whether this sets the table's default action instead of adding an entry.
    #[serde(default)]
    pub default_action: bool,
}

/// One element of `multicast_group_entries`.
#[derive(Debug, Deserialize)]
pub struct GroupEntry {
    /// Group id.
    pub multicast_group_id: u16,
    /// Its replicas.
    pub replicas: Vec<Replica>,
}

/// One element of `clone_session_entries`.
#[derive(Debug, Deserialize)]
pub struct CloneSessionEntry {
    /// Session id.
    pub clone_session_id: u32,
    /// Its replicas: softswitch, like one BMv2 mirroring session, sends to the first.
    pub replicas: Vec<Replica>,
}

/// A replica of a group or a session.
#[derive(Debug, Deserialize)]
pub struct Replica {
    /// Egress port.
    pub egress_port: u16,
    /// Replica instance (egress_rid).
    #[serde(default)]
    pub instance: u16,
}

/// What went wrong applying a runtime file; every message names the entry.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not runtime JSON.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: String,
        /// Why.
        source: serde_json::Error,
    },
    /// An entry is wrong.
    #[error("table_entries[{index}] ({table}): {message}")]
    Entry {
        /// Its position in `table_entries`.
        index: usize,
        /// Its table.
        table: String,
        /// What is wrong.
        message: String,
    },
    /// A clone session or group is wrong.
    #[error("{0}")]
    Replication(String),
}

impl RuntimeConfig {
    /// Reads a runtime-JSON file of at most [`MAX_RUNTIME_JSON_BYTES`].
    pub fn load(path: &Path) -> Result<Self, RuntimeError> {
        let read = |source| RuntimeError::Read {
            path: path.display().to_string(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| {
                f.take(MAX_RUNTIME_JSON_BYTES as u64 + 1)
                    .read_to_string(&mut text)
            })
            .map_err(read)?;
        if text.len() > MAX_RUNTIME_JSON_BYTES {
            return Err(read(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "longer than {MAX_RUNTIME_JSON_BYTES} bytes, the most a runtime JSON may be"
                ),
            )));
        }
        Self::parse(&text).map_err(|source| RuntimeError::Json {
            path: path.display().to_string(),
            source,
        })
    }

    /// Parses runtime-JSON text.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Applies every entry, session and group to `switch`, stopping at the first error.
    pub fn apply(&self, switch: &mut Switch) -> Result<(), RuntimeError> {
        for (index, e) in self.table_entries.iter().enumerate() {
            apply_entry(switch, e).map_err(|message| RuntimeError::Entry {
                index,
                table: e.table.clone(),
                message,
            })?;
        }
        for s in &self.clone_session_entries {
            let replica = s.replicas.first().ok_or_else(|| {
                RuntimeError::Replication(format!(
                    "clone session {} has no replica",
                    s.clone_session_id
                ))
            })?;
            switch.set_clone_session(s.clone_session_id, replica.egress_port);
        }
        for g in &self.multicast_group_entries {
            switch.create_group(g.multicast_group_id);
            for r in &g.replicas {
                let node = switch.create_node(r.instance, vec![r.egress_port]);
                switch.associate_node(g.multicast_group_id, node);
            }
        }
        Ok(())
    }
}

/// Adds one entry (or sets a default action).
pub fn apply_entry(switch: &mut Switch, e: &TableEntry) -> Result<(), String> {
    let table = switch
        .table_id(&e.table)
        .ok_or_else(|| format!("no table '{}'", e.table))?;
    let action = switch
        .action_id(table, &e.action_name)
        .ok_or_else(|| format!("'{}' is not an action of this table", e.action_name))?;
    let program = switch.program();
    let params: Vec<(String, u16)> = program.bodies[program.actions[action].body]
        .params
        .iter()
        .filter(|p| p.action_data)
        .map(|p| (p.name.clone(), p.width))
        .collect();
    let mut args = Vec::new();
    for (name, width) in &params {
        let v = e
            .action_params
            .get(name)
            .ok_or_else(|| format!("action_params: missing '{name}'"))?;
        args.push(number(v, *width).map_err(|m| format!("action_params.{name}: {m}"))?);
    }
    if let Some(extra) = e
        .action_params
        .keys()
        .find(|k| !params.iter().any(|(p, _)| p == *k))
    {
        return Err(format!(
            "action_params: '{extra}' is not a parameter of {}",
            e.action_name
        ));
    }
    let call = ActionCall { action, args };
    if e.default_action {
        return switch
            .set_default(table, call)
            .map_err(|err| err.to_string());
    }
    let keys = switch.program().tables[table].keys.clone();
    let mut matches = Vec::new();
    for key in &keys {
        let m = match e.matches.get(&key.name) {
            Some(v) => field_match(v, key.width, key.kind)
                .map_err(|m| format!("match.{}: {m}", key.name))?,
            None if key.kind == MatchKind::Exact => {
                return Err(format!("match: missing exact key '{}'", key.name))
            }
            None => FieldMatch::Masked { value: 0, mask: 0 },
        };
        matches.push(m);
    }
    if let Some(extra) = e
        .matches
        .keys()
        .find(|k| !keys.iter().any(|key| &key.name == *k))
    {
        return Err(format!("match: '{extra}' is not a key of this table"));
    }
    let entry = Entry {
        matches,
        priority: e.priority.unwrap_or(0),
        action: call,
    };
    switch
        .add_entry(table, entry)
        .map(|_| ())
        .map_err(|err| err.to_string())
}

fn field_match(v: &serde_json::Value, width: u16, kind: MatchKind) -> Result<FieldMatch, String> {
    let full = mask(width);
    let pair = |v: &serde_json::Value| -> Result<(u128, u128), String> {
        match v.as_array().map(Vec::as_slice) {
            Some([a, b]) => Ok((number(a, width)?, number(b, 128)?)),
            _ => Err("expected a pair [a, b]".into()),
        }
    };
    Ok(match kind {
        MatchKind::Exact | MatchKind::Optional | MatchKind::Selector => FieldMatch::Masked {
            value: number(v, width)?,
            mask: full,
        },
        MatchKind::Lpm => {
            let (value, len) = pair(v)?;
            if len > u128::from(width) {
                return Err(format!("prefix length {len} exceeds {width} bits"));
            }
            let mask = if len == 0 { 0 } else { full & !(full >> len) };
            FieldMatch::Masked { value, mask }
        }
        MatchKind::Ternary => {
            let (value, mask) = pair(v)?;
            FieldMatch::Masked { value, mask }
        }
        MatchKind::Range => {
            let (lo, hi) = pair(v)?;
            FieldMatch::Range { lo, hi }
        }
    })
}

/// A value: an integer, or a string of digits (`0x` hex), an IPv4 address or a MAC address.
fn number(v: &serde_json::Value, width: u16) -> Result<u128, String> {
    let n = match v {
        serde_json::Value::Number(n) => n
            .as_u64()
            .map(u128::from)
            .ok_or_else(|| format!("{n} is not a non-negative integer"))?,
        serde_json::Value::String(s) => {
            parse_text(s).ok_or_else(|| format!("cannot read '{s}'"))?
        }
        other => return Err(format!("expected a number or a string, found {other}")),
    };
    if n > mask(width) {
        return Err(format!("{n:#x} does not fit in {width} bits"));
    }
    Ok(n)
}

fn parse_text(s: &str) -> Option<u128> {
    let octets = |sep: char, radix: u32, count: usize| -> Option<u128> {
        let parts: Vec<&str> = s.split(sep).collect();
        if parts.len() != count {
            return None;
        }
        parts.iter().try_fold(0u128, |acc, p| {
            u8::from_str_radix(p, radix)
                .ok()
                .map(|b| (acc << 8) | u128::from(b))
        })
    };
    if s.contains(':') {
        octets(':', 16, 6)
    } else if s.contains('.') {
        octets('.', 10, 4)
    } else if let Some(hex) = s.strip_prefix("0x") {
        u128::from_str_radix(hex, 16).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_limit_is_refused_without_reading_it_all() {
        let err = RuntimeConfig::load(Path::new("/dev/zero")).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("longer than {MAX_RUNTIME_JSON_BYTES} bytes")),
            "{err}"
        );
    }

    #[test]
    fn values_in_every_spelling() {
        assert_eq!(parse_text("10.0.1.2"), Some(0x0a00_0102));
        assert_eq!(parse_text("08:00:00:00:01:0a"), Some(0x0800_0000_010a));
        assert_eq!(parse_text("0x1f"), Some(31));
        assert_eq!(parse_text("42"), Some(42));
        assert_eq!(parse_text("10.0.1"), None);
        assert!(number(&serde_json::json!(256), 8).is_err());
    }

    #[test]
    fn lpm_pairs_become_masks() {
        let m = field_match(&serde_json::json!(["10.0.0.0", 8]), 32, MatchKind::Lpm).unwrap();
        assert_eq!(
            m,
            FieldMatch::Masked {
                value: 0x0a00_0000,
                mask: 0xff00_0000
            }
        );
        assert!(field_match(&serde_json::json!(["10.0.0.0", 33]), 32, MatchKind::Lpm).is_err());
    }
}
