//! The runtime-JSON files of the P4 tutorials (`s1-runtime.json`): table entries, default
//! actions, multicast groups and clone sessions, by name, with values in the forms of
//! [`crate::value`]. Read as the tutorials' `simple_controller.py` reads them; a key that file
//! format does not have is an error that names it. `lossless p4 entries apply` sends them over
//! P4Runtime; the simulator applies them to its switches directly.

use std::{collections::BTreeMap, io::Read as _, path::Path};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a runtime-JSON file could not be read; the message names the file.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// The file is longer than [`MAX_RUNTIME_JSON_BYTES`].
    #[error(
        "{path} is longer than {MAX_RUNTIME_JSON_BYTES} bytes, the most a runtime JSON may be"
    )]
    TooLong {
        /// The file.
        path: String,
    },
    /// The file is not runtime JSON (the message gives line and column).
    #[error("in {path}: {error}")]
    Json {
        /// The file.
        path: String,
        /// Why.
        error: serde_json::Error,
    },
}

/// The largest runtime-JSON file read, in bytes (the tutorials' files are a few kilobytes; a
/// hundred thousand entries take about 20 MB).
pub const MAX_RUNTIME_JSON_BYTES: usize = 64 << 20;

/// One runtime-JSON file.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// The target the tutorials' controller connects to (`bmv2`); not used here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The P4Info file, relative to the JSON file; `entries apply` resolves names against the
    /// switch's own P4Info instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p4info: Option<String>,
    /// BMv2's compiled program, relative to the JSON file; not used by `entries apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmv2_json: Option<String>,
    /// Table entries, default actions included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table_entries: Vec<TableEntrySpec>,
    /// Multicast groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub multicast_group_entries: Vec<MulticastGroupSpec>,
    /// Clone (mirror) sessions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clone_session_entries: Vec<CloneSessionSpec>,
}

/// A table entry or a table's default action, by name.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TableEntrySpec {
    /// The table: its fully qualified name (`MyIngress.ipv4_lpm`) or a unique suffix.
    pub table: String,
    /// Match field name → value: a value for exact and optional, `[value, prefix_len]` for
    /// lpm, `[value, mask]` for ternary, `[low, high]` for range.
    #[serde(rename = "match", default, skip_serializing_if = "BTreeMap::is_empty")]
    pub matches: BTreeMap<String, Value>,
    /// This sets the table's default action (no match allowed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default_action: bool,
    /// The action: fully qualified or a unique suffix.
    pub action_name: String,
    /// Parameter name → value.
    #[serde(default)]
    pub action_params: BTreeMap<String, Value>,
    /// Priority, required (non-zero) when the table has a ternary, range or optional key; the
    /// larger wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// A multicast group of the packet replication engine.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MulticastGroupSpec {
    /// The group id (`standard_metadata.mcast_grp`).
    pub multicast_group_id: u32,
    /// Its copies.
    pub replicas: Vec<ReplicaSpec>,
}

/// A clone session of the packet replication engine.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CloneSessionSpec {
    /// The session id the program's `clone` calls use.
    pub clone_session_id: u32,
    /// Its copies.
    pub replicas: Vec<ReplicaSpec>,
    /// Clones are cut to this many bytes; 0 (the default) keeps them whole.
    #[serde(default)]
    pub packet_length_bytes: i32,
}

/// One copy made by a multicast group or clone session.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSpec {
    /// The port the copy leaves by.
    pub egress_port: u32,
    /// Its instance (`egress_rid` for multicast); 0 when absent.
    #[serde(default)]
    pub instance: u32,
}

impl RuntimeConfig {
    /// Reads a runtime-JSON file of at most [`MAX_RUNTIME_JSON_BYTES`]; errors name the file,
    /// line and column.
    pub fn from_file(path: &Path) -> Result<Self, FileError> {
        let shown = || path.display().to_string();
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| {
                f.take(MAX_RUNTIME_JSON_BYTES as u64 + 1)
                    .read_to_string(&mut text)
            })
            .map_err(|error| FileError::Read {
                path: shown(),
                error,
            })?;
        if text.len() > MAX_RUNTIME_JSON_BYTES {
            return Err(FileError::TooLong { path: shown() });
        }
        Self::parse(&text).map_err(|error| FileError::Json {
            path: shown(),
            error,
        })
    }

    /// Parses runtime JSON text.
    pub fn parse(text: &str) -> serde_json::Result<Self> {
        serde_json::from_str(text)
    }
}

impl TableEntrySpec {
    /// One line in the tutorials' style: `MyIngress.ipv4_lpm: hdr.ipv4.dstAddr=["10.0.1.1",32]
    /// => MyIngress.ipv4_forward(dstAddr="08:00:00:00:01:11", port=1)`.
    pub fn describe(&self) -> String {
        let matches = if self.default_action {
            "(default action)".to_owned()
        } else if self.matches.is_empty() {
            "(any)".to_owned()
        } else {
            join_pairs(&self.matches)
        };
        format!(
            "{}: {matches} => {}({})",
            self.table,
            self.action_name,
            join_pairs(&self.action_params)
        )
    }
}

/// `a=1, b="x"`.
fn join_pairs(pairs: &BTreeMap<String, Value>) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nesting_past_serde_jsons_limit_is_an_error() {
        let deep = format!(
            "{{\"table_entries\": [{{\"table\": \"t\", \"match\": {{\"k\": {}1{}}}}}]}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        let err = RuntimeConfig::parse(&deep).unwrap_err();
        assert!(
            err.to_string().contains("recursion limit exceeded"),
            "{err}"
        );
    }

    #[test]
    fn a_file_past_the_limit_is_refused_without_reading_it_all() {
        let err = RuntimeConfig::from_file(Path::new("/dev/zero")).unwrap_err();
        assert!(
            format!("{err:#}").contains(&format!("longer than {MAX_RUNTIME_JSON_BYTES} bytes")),
            "{err:#}"
        );
    }

    /// The shape of the tutorials' `basic` and `acl_with_counters` exercises' `s1-runtime.json`.
    const TUTORIAL: &str = r#"{
      "target": "bmv2",
      "p4info": "build/basic.p4.p4info.txtpb",
      "bmv2_json": "build/basic.json",
      "table_entries": [
        {
          "table": "MyIngress.ipv4_lpm",
          "default_action": true,
          "action_name": "MyIngress.drop",
          "action_params": { }
        },
        {
          "table": "MyIngress.ipv4_lpm",
          "match": {
            "hdr.ipv4.dstAddr": ["10.0.1.1", 32]
          },
          "action_name": "MyIngress.ipv4_forward",
          "action_params": {
            "dstAddr": "08:00:00:00:01:11",
            "port": 1
          }
        },
        {
          "table": "MyIngress.acl",
          "match": { "hdr.ipv4.srcAddr": ["10.0.3.3", "255.255.255.255"] },
          "priority": 10,
          "action_name": "MyIngress.acl_drop",
          "action_params": { "index": 3 }
        }
      ],
      "multicast_group_entries": [
        {
          "multicast_group_id": 1,
          "replicas": [
            { "egress_port": 1, "instance": 1 },
            { "egress_port": 2, "instance": 1 }
          ]
        }
      ],
      "clone_session_entries": [
        {
          "clone_session_id": 100,
          "replicas": [ { "egress_port": 3, "instance": 0 } ],
          "packet_length_bytes": 64
        }
      ]
    }"#;

    #[test]
    fn reads_the_tutorials_shape() {
        let config = RuntimeConfig::parse(TUTORIAL).unwrap();
        assert_eq!(config.target.as_deref(), Some("bmv2"));
        assert_eq!(config.table_entries.len(), 3);
        let default = &config.table_entries[0];
        assert!(default.default_action && default.matches.is_empty());
        let route = &config.table_entries[1];
        assert_eq!(route.matches["hdr.ipv4.dstAddr"], json!(["10.0.1.1", 32]));
        assert_eq!(route.action_params["port"], json!(1));
        assert_eq!(route.priority, None);
        assert_eq!(config.table_entries[2].priority, Some(10));
        let group = &config.multicast_group_entries[0];
        assert_eq!(group.multicast_group_id, 1);
        assert_eq!(
            group.replicas[1],
            ReplicaSpec {
                egress_port: 2,
                instance: 1
            }
        );
        let session = &config.clone_session_entries[0];
        assert_eq!(
            (session.clone_session_id, session.packet_length_bytes),
            (100, 64)
        );
    }

    #[test]
    fn optional_parts_default() {
        let config = RuntimeConfig::parse(
            r#"{"table_entries": [{"table": "t", "action_name": "a"}],
                "clone_session_entries": [{"clone_session_id": 5, "replicas": [{"egress_port": 1}]}]}"#,
        )
        .unwrap();
        let entry = &config.table_entries[0];
        assert!(entry.action_params.is_empty() && !entry.default_action);
        assert_eq!(config.clone_session_entries[0].packet_length_bytes, 0);
        assert_eq!(config.clone_session_entries[0].replicas[0].instance, 0);
        assert_eq!(
            RuntimeConfig::parse("{}").unwrap(),
            RuntimeConfig::default()
        );
    }

    #[test]
    fn unknown_keys_are_named_with_their_place() {
        let error = RuntimeConfig::parse(
            "{\"table_entries\": [\n {\"table\": \"t\", \"action_name\": \"a\", \"priorty\": 1}]}",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("unknown field `priorty`"), "{error}");
        assert!(error.contains("line 2"), "{error}");
        let error = RuntimeConfig::parse(r#"{"table_entry": []}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `table_entry`"), "{error}");
    }

    #[test]
    fn a_missing_action_is_named() {
        let error = RuntimeConfig::parse(r#"{"table_entries": [{"table": "t"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing field `action_name`"), "{error}");
    }

    #[test]
    fn describes_entries_like_the_tutorials() {
        let config = RuntimeConfig::parse(TUTORIAL).unwrap();
        assert_eq!(
            config.table_entries[0].describe(),
            "MyIngress.ipv4_lpm: (default action) => MyIngress.drop()"
        );
        assert_eq!(
            config.table_entries[1].describe(),
            r#"MyIngress.ipv4_lpm: hdr.ipv4.dstAddr=["10.0.1.1",32] => MyIngress.ipv4_forward(dstAddr="08:00:00:00:01:11", port=1)"#
        );
    }

    #[test]
    fn serializes_back_to_the_same_shape() {
        let config = RuntimeConfig::parse(TUTORIAL).unwrap();
        let again = RuntimeConfig::parse(&serde_json::to_string(&config).unwrap()).unwrap();
        assert_eq!(again, config);
    }
}
