//! Runtime-JSON entries to P4Runtime updates, and table entries read back to runtime JSON.
//!
//! Everything a file asks for is resolved and encoded before anything is written, so a file
//! with a bad name or value writes nothing. Updates are as the tutorials' controller sends
//! them: INSERT for entries, multicast groups and clone sessions, MODIFY for a default action
//! (P4Runtime has no INSERT of a default entry).

use std::collections::BTreeMap;

use anyhow::{bail, Context as _};
use p4runtime::p4::{
    config::v1::{match_field::MatchType, P4Info, Table},
    v1::{
        entity, field_match, packet_replication_engine_entry, replica, table_action, update,
        Action, CloneSessionEntry, Entity, FieldMatch, MulticastGroupEntry,
        PacketReplicationEngineEntry, Replica, TableAction, TableEntry, Update,
    },
};
use p4values::{
    runtime_json::{ReplicaSpec, RuntimeConfig, TableEntrySpec},
    value::{self, display},
};
use serde_json::Value;

use crate::p4info::{self, by_id, by_name, Named};

/// An update with a description of where it came from, for per-update errors.
#[derive(Clone, Debug)]
pub struct Labelled {
    /// `table_entries[2] (MyIngress.ipv4_lpm: ...)`.
    pub label: String,
    /// The update.
    pub update: Update,
}

/// Every update a runtime-JSON file asks for, in file order: table entries, multicast groups,
/// clone sessions.
pub fn updates(config: &RuntimeConfig, p4info: &P4Info) -> anyhow::Result<Vec<Labelled>> {
    let mut updates = Vec::new();
    for (i, spec) in config.table_entries.iter().enumerate() {
        let label = format!("table_entries[{i}] ({})", spec.describe());
        let entry = table_entry(spec, p4info).with_context(|| label.clone())?;
        let kind = if entry.is_default_action {
            update::Type::Modify
        } else {
            update::Type::Insert
        };
        updates.push(Labelled {
            label,
            update: new_update(kind, entity::Entity::TableEntry(entry)),
        });
    }
    for (i, group) in config.multicast_group_entries.iter().enumerate() {
        let entry =
            packet_replication_engine_entry::Type::MulticastGroupEntry(MulticastGroupEntry {
                multicast_group_id: group.multicast_group_id,
                replicas: replicas(&group.replicas),
                metadata: Vec::new(),
            });
        updates.push(Labelled {
            label: format!(
                "multicast_group_entries[{i}] (group {})",
                group.multicast_group_id
            ),
            update: pre_update(update::Type::Insert, entry),
        });
    }
    for (i, session) in config.clone_session_entries.iter().enumerate() {
        let entry = packet_replication_engine_entry::Type::CloneSessionEntry(CloneSessionEntry {
            session_id: session.clone_session_id,
            replicas: replicas(&session.replicas),
            class_of_service: 0,
            packet_length_bytes: session.packet_length_bytes,
        });
        updates.push(Labelled {
            label: format!(
                "clone_session_entries[{i}] (session {})",
                session.clone_session_id
            ),
            update: pre_update(update::Type::Insert, entry),
        });
    }
    Ok(updates)
}

/// An update of `kind` writing `entity`.
pub fn new_update(kind: update::Type, entity: entity::Entity) -> Update {
    Update {
        r#type: kind as i32,
        entity: Some(Entity {
            entity: Some(entity),
        }),
    }
}

/// An update of `kind` writing a packet replication engine entry.
pub fn pre_update(kind: update::Type, entry: packet_replication_engine_entry::Type) -> Update {
    new_update(
        kind,
        entity::Entity::PacketReplicationEngineEntry(PacketReplicationEngineEntry {
            r#type: Some(entry),
        }),
    )
}

/// Replicas by egress port number, the field the tutorials (and BMv2 builds of every age) use.
#[allow(deprecated)]
pub fn replicas(specs: &[ReplicaSpec]) -> Vec<Replica> {
    specs
        .iter()
        .map(|r| Replica {
            instance: r.instance,
            backup_replicas: Vec::new(),
            port_kind: Some(replica::PortKind::EgressPort(r.egress_port)),
        })
        .collect()
}

/// One table entry (or default action) from its runtime-JSON form.
pub fn table_entry(spec: &TableEntrySpec, p4info: &P4Info) -> anyhow::Result<TableEntry> {
    let table = by_name("table", &p4info.tables, &spec.table)?;
    if spec.default_action && !spec.matches.is_empty() {
        bail!("a default action matches nothing: remove its \"match\"");
    }
    Ok(TableEntry {
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(action(spec, p4info)?)),
        }),
        is_default_action: spec.default_action,
        ..entry_key(table, &spec.matches, spec.priority)?
    })
}

/// The entry of `table` that `matches` and `priority` name, without an action: what a delete
/// sends, and the key of every other entry.
pub fn entry_key(
    table: &Table,
    matches: &BTreeMap<String, Value>,
    priority: Option<i32>,
) -> anyhow::Result<TableEntry> {
    let mut encoded = Vec::new();
    let mut needs_priority = false;
    for (name, value) in matches {
        let field = p4info::match_field(table, name)?;
        let kind = p4info::match_kind(field)
            .with_context(|| format!("match field {}: kind not supported", field.name))?;
        needs_priority |= needs_priority_kind(kind);
        let bitwidth = width(field.bitwidth, &field.name)?;
        let field_match = encode_match(kind, value, bitwidth)
            .with_context(|| format!("match field {}", field.name))?;
        if let Some(field_match_type) = field_match {
            encoded.push(FieldMatch {
                field_id: field.id,
                field_match_type: Some(field_match_type),
            });
        }
    }
    let priority = priority.unwrap_or(0);
    if needs_priority && priority == 0 {
        bail!(
            "a non-zero \"priority\" is required for entries of {}, which has a ternary, range or optional key",
            table.name()
        );
    }
    Ok(TableEntry {
        table_id: table.id(),
        r#match: encoded,
        priority,
        ..Default::default()
    })
}

/// Whether entries of a table with a key of this kind need a priority.
pub fn needs_priority_kind(kind: MatchType) -> bool {
    matches!(
        kind,
        MatchType::Ternary | MatchType::Range | MatchType::Optional
    )
}

/// A bit width from P4Info, which must be positive.
fn width(bitwidth: i32, name: &str) -> anyhow::Result<u32> {
    u32::try_from(bitwidth)
        .ok()
        .filter(|w| *w > 0)
        .with_context(|| format!("{name} has no bit width in P4Info (a translated type?)"))
}

/// One key's match in P4Runtime's form; `None` for a don't-care (lpm `/0`, ternary mask 0, the
/// full range), which P4Runtime wants left out.
fn encode_match(
    kind: MatchType,
    value: &Value,
    bitwidth: u32,
) -> anyhow::Result<Option<field_match::FieldMatchType>> {
    use field_match::FieldMatchType as M;
    let pair = || -> anyhow::Result<(&Value, &Value)> {
        match value {
            Value::Array(items) if items.len() == 2 => Ok((&items[0], &items[1])),
            _ => bail!("{value} is not a pair [a, b]"),
        }
    };
    let encode = |v: &Value| value::encode(v, bitwidth);
    Ok(match kind {
        MatchType::Exact => Some(M::Exact(field_match::Exact {
            value: encode(value)?,
        })),
        MatchType::Optional => Some(M::Optional(field_match::Optional {
            value: encode(value)?,
        })),
        MatchType::Lpm => {
            let (prefix, length) = pair().context("an lpm key is [value, prefix_len]")?;
            let prefix_len = length
                .as_u64()
                .filter(|l| *l <= u64::from(bitwidth))
                .with_context(|| format!("prefix length {length} is not in 0..={bitwidth}"))?;
            let value = encode(prefix)?;
            (prefix_len > 0).then_some(M::Lpm(field_match::Lpm {
                value,
                prefix_len: prefix_len as i32,
            }))
        }
        MatchType::Ternary => {
            let (v, m) = pair().context("a ternary key is [value, mask]")?;
            let (value, mask) = (encode(v)?, encode(m)?);
            (mask != [0]).then_some(M::Ternary(field_match::Ternary { value, mask }))
        }
        MatchType::Range => {
            let (lo, hi) = pair().context("a range key is [low, high]")?;
            let (low, high) = (encode(lo)?, encode(hi)?);
            (low != [0] || high != value::all_ones(bitwidth))
                .then_some(M::Range(field_match::Range { low, high }))
        }
        MatchType::Unspecified => bail!("the match kind is unspecified in P4Info"),
    })
}

/// The action call of an entry.
fn action(spec: &TableEntrySpec, p4info: &P4Info) -> anyhow::Result<Action> {
    let action = by_name("action", &p4info.actions, &spec.action_name)?;
    let mut params = Vec::new();
    for (name, value) in &spec.action_params {
        let param = p4info::param(action, name)?;
        let bitwidth = width(param.bitwidth, &param.name)?;
        let encoded = value::encode(value, bitwidth)
            .with_context(|| format!("parameter {} of {}", param.name, action.name()))?;
        params.push(p4runtime::p4::v1::action::Param {
            param_id: param.id,
            value: encoded,
        });
    }
    Ok(Action {
        action_id: action.id(),
        params,
    })
}

/// The read request's entities for every entry of `table`, its default entry included.
pub fn read_all(table: &Table) -> Vec<Entity> {
    [false, true]
        .map(|is_default_action| Entity {
            entity: Some(entity::Entity::TableEntry(TableEntry {
                table_id: table.id(),
                is_default_action,
                ..Default::default()
            })),
        })
        .to_vec()
}

/// A table entry read from a switch, in runtime-JSON form (which `entries apply` takes back).
/// Ids P4Info does not know are shown as `#ID`; an action profile member or group as
/// `member N` / `group N`.
pub fn describe(entry: &TableEntry, p4info: &P4Info) -> TableEntrySpec {
    let table = by_id(&p4info.tables, entry.table_id);
    let matches = entry
        .r#match
        .iter()
        .map(|m| {
            let field = table.and_then(|t| t.match_fields.iter().find(|f| f.id == m.field_id));
            let (name, bitwidth) = field.map_or((format!("#{}", m.field_id), 0), |f| {
                (f.name.clone(), u32::try_from(f.bitwidth).unwrap_or(0))
            });
            let shown = |bytes: &[u8]| display(bytes, bitwidth, &name);
            use field_match::FieldMatchType as M;
            let value = match &m.field_match_type {
                Some(M::Exact(e)) => shown(&e.value),
                Some(M::Optional(o)) => shown(&o.value),
                Some(M::Lpm(l)) => Value::from(vec![shown(&l.value), l.prefix_len.into()]),
                Some(M::Ternary(t)) => Value::from(vec![shown(&t.value), shown(&t.mask)]),
                Some(M::Range(r)) => Value::from(vec![shown(&r.low), shown(&r.high)]),
                Some(M::Other(any)) => Value::from(format!("({})", any.type_url)),
                None => Value::Null,
            };
            (name, value)
        })
        .collect();
    let (action_name, action_params) = match entry.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(table_action::Type::Action(call)) => {
            let action = by_id(&p4info.actions, call.action_id);
            let params = call
                .params
                .iter()
                .map(|p| {
                    let param = action.and_then(|a| a.params.iter().find(|q| q.id == p.param_id));
                    let (name, bitwidth) = param.map_or((format!("#{}", p.param_id), 0), |q| {
                        (q.name.clone(), u32::try_from(q.bitwidth).unwrap_or(0))
                    });
                    let value = display(&p.value, bitwidth, &name);
                    (name, value)
                })
                .collect();
            let name = action.map_or(format!("#{}", call.action_id), |a| a.name().to_owned());
            (name, params)
        }
        Some(table_action::Type::ActionProfileMemberId(id)) => {
            (format!("member {id}"), Default::default())
        }
        Some(table_action::Type::ActionProfileGroupId(id)) => {
            (format!("group {id}"), Default::default())
        }
        Some(table_action::Type::ActionProfileActionSet(_)) => {
            ("(action set)".to_owned(), Default::default())
        }
        None => ("(none)".to_owned(), Default::default()),
    };
    TableEntrySpec {
        table: table.map_or(format!("#{}", entry.table_id), |t| t.name().to_owned()),
        matches,
        default_action: entry.is_default_action,
        action_name,
        action_params,
        priority: (entry.priority != 0).then_some(entry.priority),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p4info::tests::sample;
    use serde_json::json;

    fn spec(json: Value) -> TableEntrySpec {
        serde_json::from_value(json).unwrap()
    }

    fn error(json: Value) -> String {
        format!("{:#}", table_entry(&spec(json), &sample()).unwrap_err())
    }

    #[test]
    fn a_tutorial_route_becomes_an_insert_with_canonical_values() {
        let config = RuntimeConfig::parse(
            r#"{"table_entries": [{
                "table": "MyIngress.ipv4_lpm",
                "match": {"hdr.ipv4.dstAddr": ["10.0.2.2", 32]},
                "action_name": "MyIngress.ipv4_forward",
                "action_params": {"dstAddr": "08:00:00:00:02:22", "port": 2}
            }]}"#,
        )
        .unwrap();
        let updates = updates(&config, &sample()).unwrap();
        assert_eq!(updates.len(), 1);
        assert!(updates[0]
            .label
            .starts_with("table_entries[0] (MyIngress.ipv4_lpm: "));
        let update = &updates[0].update;
        assert_eq!(update.r#type, update::Type::Insert as i32);
        let Some(entity::Entity::TableEntry(entry)) = update.entity.clone().unwrap().entity else {
            panic!("not a table entry");
        };
        assert_eq!(entry.table_id, 37375156);
        assert_eq!(
            entry.r#match,
            [FieldMatch {
                field_id: 1,
                field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                    value: vec![10, 0, 2, 2],
                    prefix_len: 32
                }))
            }]
        );
        let Some(table_action::Type::Action(action)) = entry.action.unwrap().r#type else {
            panic!("no action");
        };
        assert_eq!(action.action_id, 28792405);
        let params: Vec<(u32, Vec<u8>)> = action
            .params
            .into_iter()
            .map(|p| (p.param_id, p.value))
            .collect();
        assert_eq!(params, [(1, vec![8, 0, 0, 0, 2, 0x22]), (2, vec![2])]);
        assert_eq!(entry.priority, 0);
        assert!(!entry.is_default_action);
    }

    #[test]
    fn a_default_action_is_a_modify_without_match() {
        let config = RuntimeConfig::parse(
            r#"{"table_entries": [{"table": "ipv4_lpm", "default_action": true,
                "action_name": "drop", "action_params": {}}]}"#,
        )
        .unwrap();
        let update = &updates(&config, &sample()).unwrap()[0].update;
        assert_eq!(update.r#type, update::Type::Modify as i32);
        let Some(entity::Entity::TableEntry(entry)) = update.entity.clone().unwrap().entity else {
            panic!("not a table entry");
        };
        assert!(entry.is_default_action && entry.r#match.is_empty());
        assert!(error(json!({"table": "ipv4_lpm", "default_action": true,
            "match": {"hdr.ipv4.dstAddr": ["10.0.0.0", 8]}, "action_name": "drop"}))
        .contains("a default action matches nothing"));
    }

    #[test]
    fn every_match_kind() {
        let entry = table_entry(
            &spec(json!({
                "table": "MyIngress.acl",
                "match": {
                    "hdr.ipv4.srcAddr": ["10.0.0.0", "255.0.0.0"],
                    "hdr.udp.dstPort": [4791, 4792],
                    "standard_metadata.ingress_port": 3,
                    "hdr.ipv4.protocol": 17
                },
                "priority": 10,
                "action_name": "deny",
                "action_params": {"index": 7}
            })),
            &sample(),
        )
        .unwrap();
        use field_match::FieldMatchType as M;
        let by_id: Vec<(u32, M)> = entry
            .r#match
            .into_iter()
            .map(|m| (m.field_id, m.field_match_type.unwrap()))
            .collect();
        // Sorted by name, as the JSON object is read.
        assert_eq!(
            by_id,
            [
                (4, M::Optional(field_match::Optional { value: vec![17] })),
                (
                    1,
                    M::Ternary(field_match::Ternary {
                        value: vec![10, 0, 0, 0],
                        mask: vec![255, 0, 0, 0]
                    })
                ),
                (
                    2,
                    M::Range(field_match::Range {
                        low: vec![0x12, 0xb7],
                        high: vec![0x12, 0xb8]
                    })
                ),
                (3, M::Exact(field_match::Exact { value: vec![3] })),
            ]
        );
        assert_eq!(entry.priority, 10);
    }

    #[test]
    fn dont_care_matches_are_left_out() {
        let entry = table_entry(
            &spec(
                json!({"table": "ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["0.0.0.0", 0]},
                "action_name": "drop"}),
            ),
            &sample(),
        )
        .unwrap();
        assert!(entry.r#match.is_empty());
        let entry = table_entry(
            &spec(json!({"table": "acl", "priority": 1,
                "match": {"hdr.ipv4.srcAddr": ["0.0.0.0", "0.0.0.0"]}, "action_name": "deny",
                "action_params": {"index": 1}})),
            &sample(),
        )
        .unwrap();
        assert!(entry.r#match.is_empty());
        // The full range of a 16-bit field.
        let entry = table_entry(
            &spec(json!({"table": "acl", "priority": 1,
                "match": {"hdr.udp.dstPort": [0, 65535]}, "action_name": "deny",
                "action_params": {"index": 1}})),
            &sample(),
        )
        .unwrap();
        assert!(entry.r#match.is_empty());
    }

    #[test]
    fn ternary_range_and_optional_keys_need_a_priority() {
        let message = error(json!({"table": "acl", "match": {"hdr.udp.dstPort": [1, 2]},
            "action_name": "deny", "action_params": {"index": 1}}));
        assert!(
            message.contains("a non-zero \"priority\" is required for entries of MyIngress.acl"),
            "{message}"
        );
    }

    #[test]
    fn bad_names_and_values_are_errors_that_say_where() {
        // Each entry's error begins with, or (after the entry's place) contains, its text.
        let starts = |message: &str, text: &str| message.starts_with(text);
        let contains = |message: &str, text: &str| message.contains(text);
        for (entry, says, text) in [
            (
                json!({"table": "MyIngress.ipv4_lmp", "action_name": "drop"}),
                starts as fn(&str, &str) -> bool,
                "unknown table 'MyIngress.ipv4_lmp' (known: MyIngress.ipv4_lpm, MyIngress.acl)",
            ),
            (
                json!({"table": "ipv4_lpm", "action_name": "forward"}),
                starts,
                "unknown action 'forward'",
            ),
            (
                json!({"table": "ipv4_lpm", "match": {"dst": ["10.0.0.1", 32]},
                    "action_name": "drop"}),
                starts,
                "unknown match field of MyIngress.ipv4_lpm 'dst'",
            ),
            (
                json!({"table": "ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.0.1", 33]},
                    "action_name": "drop"}),
                contains,
                "prefix length 33 is not in 0..=32",
            ),
            (
                json!({"table": "ipv4_lpm", "match": {"hdr.ipv4.dstAddr": "10.0.0.1"},
                    "action_name": "drop"}),
                contains,
                "an lpm key is [value, prefix_len]",
            ),
            (
                json!({"table": "ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.0.1", 32]},
                    "action_name": "ipv4_forward",
                    "action_params": {"port": 512, "dstAddr": "08:00:00:00:02:22"}}),
                contains,
                "parameter port of MyIngress.ipv4_forward: 512 does not fit in 9 bits",
            ),
            (
                json!({"table": "ipv4_lpm", "action_name": "ipv4_forward",
                    "action_params": {"prt": 1}}),
                contains,
                "unknown parameter of MyIngress.ipv4_forward 'prt' (known: dstAddr, port)",
            ),
        ] {
            let message = error(entry);
            assert!(says(&message, text), "{message}");
        }
    }

    #[test]
    fn a_bad_entry_anywhere_writes_nothing_and_is_labelled() {
        let config = RuntimeConfig::parse(
            r#"{"table_entries": [
                {"table": "ipv4_lpm", "default_action": true, "action_name": "drop"},
                {"table": "nosuch", "action_name": "drop"}]}"#,
        )
        .unwrap();
        let message = format!("{:#}", updates(&config, &sample()).unwrap_err());
        assert!(
            message
                .starts_with("table_entries[1] (nosuch: (any) => drop()): unknown table 'nosuch'"),
            "{message}"
        );
    }

    #[test]
    fn multicast_groups_and_clone_sessions() {
        let config = RuntimeConfig::parse(
            r#"{"multicast_group_entries": [{"multicast_group_id": 1,
                    "replicas": [{"egress_port": 1, "instance": 1}, {"egress_port": 2, "instance": 1}]}],
                "clone_session_entries": [{"clone_session_id": 100,
                    "replicas": [{"egress_port": 3, "instance": 0}], "packet_length_bytes": 64}]}"#,
        )
        .unwrap();
        let updates = updates(&config, &sample()).unwrap();
        assert_eq!(updates[0].label, "multicast_group_entries[0] (group 1)");
        assert_eq!(updates[1].label, "clone_session_entries[0] (session 100)");
        let pre = |u: &Update| match u.entity.clone().unwrap().entity {
            Some(entity::Entity::PacketReplicationEngineEntry(e)) => e.r#type.unwrap(),
            other => panic!("{other:?}"),
        };
        let packet_replication_engine_entry::Type::MulticastGroupEntry(group) =
            pre(&updates[0].update)
        else {
            panic!("not a group");
        };
        assert_eq!(group.multicast_group_id, 1);
        #[allow(deprecated)]
        let ports: Vec<_> = group
            .replicas
            .iter()
            .map(|r| (r.port_kind.clone(), r.instance))
            .collect();
        #[allow(deprecated)]
        let expected = [
            (Some(replica::PortKind::EgressPort(1)), 1),
            (Some(replica::PortKind::EgressPort(2)), 1),
        ];
        assert_eq!(ports, expected);
        let packet_replication_engine_entry::Type::CloneSessionEntry(session) =
            pre(&updates[1].update)
        else {
            panic!("not a session");
        };
        assert_eq!((session.session_id, session.packet_length_bytes), (100, 64));
        assert!(updates
            .iter()
            .all(|u| u.update.r#type == update::Type::Insert as i32));
    }

    #[test]
    fn entries_read_back_are_runtime_json_that_encodes_the_same() {
        let p4info = sample();
        for json in [
            json!({"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.2.2", 32]},
                "action_name": "MyIngress.ipv4_forward",
                "action_params": {"dstAddr": "08:00:00:00:02:22", "port": 2}}),
            json!({"table": "MyIngress.acl", "priority": 5,
                "match": {"hdr.ipv4.srcAddr": ["10.0.0.0", "255.0.0.0"], "hdr.udp.dstPort": [1, 100],
                    "standard_metadata.ingress_port": 3, "hdr.ipv4.protocol": 17},
                "action_name": "MyIngress.deny", "action_params": {"index": 7}}),
            json!({"table": "MyIngress.ipv4_lpm", "default_action": true,
                "action_name": "MyIngress.drop", "action_params": {}}),
        ] {
            let original = spec(json);
            let entry = table_entry(&original, &p4info).unwrap();
            let described = describe(&entry, &p4info);
            assert_eq!(described, original);
            assert_eq!(table_entry(&described, &p4info).unwrap(), entry);
        }
    }

    #[test]
    fn unknown_ids_are_shown_as_ids() {
        let entry = TableEntry {
            table_id: 99,
            r#match: vec![FieldMatch {
                field_id: 4,
                field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
                    value: vec![0, 5],
                })),
            }],
            action: Some(TableAction {
                r#type: Some(table_action::Type::ActionProfileMemberId(3)),
            }),
            ..Default::default()
        };
        let described = describe(&entry, &sample());
        assert_eq!(described.table, "#99");
        assert_eq!(described.matches["#4"], json!(5));
        assert_eq!(described.action_name, "member 3");
    }

    #[test]
    fn reading_a_table_asks_for_its_default_entry_too() {
        let entities = read_all(&sample().tables[0]);
        let defaults: Vec<bool> = entities
            .iter()
            .map(|e| match &e.entity {
                Some(entity::Entity::TableEntry(t)) => {
                    assert_eq!(t.table_id, 37375156);
                    t.is_default_action
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(defaults, [false, true]);
    }
}
