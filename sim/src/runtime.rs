//! Runtime entries in the P4 tutorials' runtime-JSON files (p4values' `runtime_json`, the
//! reader `lossless p4 entries apply` uses too), applied to a [`Switch`] through its runtime
//! interface (`softswitch_core::runtime`): a stand-in for a P4Runtime client, for the
//! simulator's switches (which take the entries the control plane computes, in that format).
//!
//! Values take the forms of p4values' `value` (the tutorials' `convert.encode`): integers, MAC,
//! IPv4 and IPv6 addresses, one-element lists, other strings as raw bytes of the field's length.
//! Match values: a value (exact, optional), `[value, prefix length]` (lpm), `[value, mask]`
//! (ternary), `[low, high]` (range). Clone sessions send to their first replica, whole
//! (softswitch has no truncation: `packet_length_bytes` is not applied).

use p4values::bytestring;
use p4values::runtime_json::FileError;
pub use p4values::runtime_json::{RuntimeConfig, TableEntrySpec, MAX_RUNTIME_JSON_BYTES};
use p4values::value;
use softswitch_core::ir::{mask, ActionCall, Entry, FieldMatch, MatchKind};
use softswitch_core::switch::Switch;
use std::path::Path;

/// What went wrong applying a runtime file; every message names the entry.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The file could not be read, or is not runtime JSON.
    #[error(transparent)]
    File(#[from] FileError),
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

/// Reads a runtime-JSON file of at most [`MAX_RUNTIME_JSON_BYTES`].
pub fn load(path: &Path) -> Result<RuntimeConfig, RuntimeError> {
    Ok(RuntimeConfig::from_file(path)?)
}

/// Applies every entry, session and group of `config` to `switch`, stopping at the first error.
pub fn apply(config: &RuntimeConfig, switch: &mut Switch) -> Result<(), RuntimeError> {
    for (index, e) in config.table_entries.iter().enumerate() {
        apply_entry(switch, e).map_err(|message| RuntimeError::Entry {
            index,
            table: e.table.clone(),
            message,
        })?;
    }
    for s in &config.clone_session_entries {
        let session = s.clone_session_id;
        let replica = s.replicas.first().ok_or_else(|| {
            RuntimeError::Replication(format!("clone session {session} has no replica"))
        })?;
        let port = port_of(replica.egress_port, || format!("clone session {session}"))?;
        switch
            .set_clone_session(session, port)
            .map_err(|e| RuntimeError::Replication(format!("clone session {session}: {e}")))?;
    }
    for g in &config.multicast_group_entries {
        let id = g.multicast_group_id;
        let group = u16::try_from(id).map_err(|_| {
            RuntimeError::Replication(format!("multicast group {id} is above 65535"))
        })?;
        switch
            .create_multicast_group(group)
            .map_err(|e| RuntimeError::Replication(format!("multicast group {id}: {e}")))?;
        for r in &g.replicas {
            let port = port_of(r.egress_port, || format!("multicast group {id}"))?;
            let rid = u16::try_from(r.instance).map_err(|_| {
                RuntimeError::Replication(format!(
                    "multicast group {id}: instance {} is above 65535",
                    r.instance
                ))
            })?;
            let node = switch
                .create_multicast_node(rid, vec![port])
                .map_err(|e| RuntimeError::Replication(format!("multicast group {id}: {e}")))?;
            switch
                .associate_node(group, node)
                .expect("the group and the node were just made");
        }
    }
    Ok(())
}

/// A replica's egress port as softswitch's 16-bit port number; `owner` names the group or
/// session in the error.
fn port_of(port: u32, owner: impl Fn() -> String) -> Result<u16, RuntimeError> {
    u16::try_from(port).map_err(|_| {
        RuntimeError::Replication(format!("{}: egress port {port} is above 65535", owner()))
    })
}

/// Adds one entry (or sets a default action).
pub fn apply_entry(switch: &mut Switch, e: &TableEntrySpec) -> Result<(), String> {
    let table = switch
        .table_id(&e.table)
        .ok_or_else(|| format!("no table '{}'", e.table))?;
    let action = switch
        .action_id(table, &e.action_name)
        .ok_or_else(|| format!("'{}' is not an action of this table", e.action_name))?;
    let program = switch.program();
    let params: Vec<(String, u16)> = program
        .action_data(action)
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
        priority: e.priority.map_or(0, i64::from),
        action: call,
    };
    switch
        .add_entry(table, entry)
        .map(|_| ())
        .map_err(|err| err.to_string())
}

fn field_match(v: &serde_json::Value, width: u16, kind: MatchKind) -> Result<FieldMatch, String> {
    let full = mask(width);
    let pair = |second_width: u16| -> Result<(u128, u128), String> {
        match v.as_array().map(Vec::as_slice) {
            Some([a, b]) => Ok((number(a, width)?, number(b, second_width)?)),
            _ => Err("expected a pair [a, b]".into()),
        }
    };
    Ok(match kind {
        MatchKind::Exact | MatchKind::Optional | MatchKind::Selector => FieldMatch::Masked {
            value: number(v, width)?,
            mask: full,
        },
        MatchKind::Lpm => {
            let (value, len) = pair(128)?;
            if len > u128::from(width) {
                return Err(format!("prefix length {len} exceeds {width} bits"));
            }
            let mask = if len == 0 { 0 } else { full & !(full >> len) };
            FieldMatch::Masked { value, mask }
        }
        MatchKind::Ternary => {
            let (value, mask) = pair(width)?;
            FieldMatch::Masked { value, mask }
        }
        MatchKind::Range => {
            let (lo, hi) = pair(width)?;
            FieldMatch::Range { lo, hi }
        }
    })
}

/// A value for a `width`-bit field, in p4values' forms. A string that is none of them is named
/// as unreadable.
fn number(v: &serde_json::Value, width: u16) -> Result<u128, String> {
    let bytes = value::encode(v, u32::from(width)).map_err(|e| match v {
        serde_json::Value::String(s) => format!("cannot read '{s}'"),
        _ => e.to_string(),
    })?;
    bytestring::to_u128(&bytes).ok_or_else(|| format!("{v} is wider than 128 bits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_limit_is_refused_without_reading_it_all() {
        let err = load(Path::new("/dev/zero")).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("longer than {MAX_RUNTIME_JSON_BYTES} bytes")),
            "{err}"
        );
    }

    #[test]
    fn values_in_every_spelling() {
        assert_eq!(number(&serde_json::json!("10.0.1.2"), 32), Ok(0x0a00_0102));
        assert_eq!(
            number(&serde_json::json!("08:00:00:00:01:0a"), 48),
            Ok(0x0800_0000_010a)
        );
        assert_eq!(number(&serde_json::json!("0x1f"), 8), Ok(31));
        assert_eq!(number(&serde_json::json!("42"), 8), Ok(42));
        assert_eq!(
            number(&serde_json::json!("10.0.1"), 32),
            Err("cannot read '10.0.1'".into())
        );
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
