//! P4Runtime table entry updates as a controller writes them, P4Info ids by name, and the
//! server tests' program as the server runs it: shared by the tests that write entries by the
//! thousand (`churn.rs` and `table_writes.rs` in process, `untrusted_writes.rs` over gRPC).

#![allow(dead_code)] // Each test file uses some of them.

use p4runtime::p4::config::v1::P4Info;
use p4runtime::p4::v1 as p4v1;
use softswitch_core::switch::Clock;
use softswitch_frontend::source::SourceMap;
use softswitch_server::pipeline;

const SWITCH_P4: &str = include_str!("../server/switch.p4");

/// `switch.p4` as the P4Runtime server runs it after SetForwardingPipelineConfig, with its
/// P4Info.
pub fn pipeline() -> (pipeline::Pipeline, P4Info) {
    let mut map = SourceMap::new();
    let file = map.add("switch.p4", SWITCH_P4);
    let compiled = softswitch_frontend::compile(&mut map, file).unwrap();
    let info = softswitch_server::p4info::p4info(&compiled, &map).unwrap();
    let compiled = pipeline::Compiled {
        program: compiled.program,
        control_plane: compiled.control_plane,
        given_info: info.clone(),
        info: info.clone(),
        device_config: SWITCH_P4.as_bytes().to_vec(),
        cookie: 0,
    };
    (pipeline::Pipeline::new(compiled, Clock::Virtual(0)), info)
}

/// The id of the table or action of `info` whose name ends with `name`.
pub fn id(info: &P4Info, name: &str) -> u32 {
    info.tables
        .iter()
        .map(|t| t.preamble.as_ref().unwrap())
        .chain(info.actions.iter().map(|a| a.preamble.as_ref().unwrap()))
        .find(|p| p.name.ends_with(name))
        .unwrap_or_else(|| panic!("no table or action {name}"))
        .id
}

/// An update of `kind` of the entry of `table` keyed by `key` (field 1), running `action` with
/// its first parameter `param` (none for a delete), keeping `metadata`.
pub fn entry_update(
    kind: p4v1::update::Type,
    table: u32,
    key: p4v1::field_match::FieldMatchType,
    (action, param): (u32, Vec<u8>),
    metadata: Vec<u8>,
) -> p4v1::Update {
    p4v1::Update {
        r#type: kind as i32,
        entity: Some(p4v1::Entity {
            entity: Some(p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
                table_id: table,
                r#match: vec![p4v1::FieldMatch {
                    field_id: 1,
                    field_match_type: Some(key),
                }],
                action: (kind != p4v1::update::Type::Delete).then(|| p4v1::TableAction {
                    r#type: Some(p4v1::table_action::Type::Action(p4v1::Action {
                        action_id: action,
                        params: vec![p4v1::action::Param {
                            param_id: 1,
                            value: param,
                        }],
                    })),
                }),
                metadata,
                ..Default::default()
            })),
        }),
    }
}
