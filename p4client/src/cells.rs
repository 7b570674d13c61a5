//! Counter and register cells: the Read entities that ask for them, the cells the answers hold,
//! and the Write update of a register cell.

use anyhow::{bail, Context as _};
use p4runtime::p4::{
    config::v1::{P4Info, Register},
    v1::{
        entity, p4_data, update, CounterEntry, DirectCounterEntry, Entity, Index, P4Data,
        RegisterEntry, TableEntry, Update,
    },
};
use serde_json::Value;

use crate::{
    entries::{describe, Labelled},
    p4info::{register_bitwidth, AnyCounter, Named},
    render::{CounterCell, RegisterCell},
};
use p4values::value;

/// The Read entity for one counter: every cell, or the cell at `index` of a counter array.
pub fn counter_entity(counter: AnyCounter<'_>, index: Option<i64>) -> anyhow::Result<Entity> {
    let entity = match counter {
        AnyCounter::Indirect(c) => {
            if let Some(index) = index {
                if index < 0 || index >= c.size {
                    bail!(
                        "{} has {} cells: index {index} is not in 0..{}",
                        c.name(),
                        c.size,
                        c.size
                    );
                }
            }
            entity::Entity::CounterEntry(CounterEntry {
                counter_id: c.id(),
                index: index.map(|index| Index { index }),
                data: None,
            })
        }
        AnyCounter::Direct(c) => {
            if index.is_some() {
                bail!(
                    "{} is a direct counter: its cells are the entries of its table, not indices",
                    c.name()
                );
            }
            entity::Entity::DirectCounterEntry(DirectCounterEntry {
                table_entry: Some(TableEntry {
                    table_id: c.direct_table_id,
                    ..Default::default()
                }),
                data: None,
            })
        }
    };
    Ok(Entity {
        entity: Some(entity),
    })
}

/// The counter cells among `entities` read from a switch, sorted by counter and index.
pub fn counter_cells(entities: &[Entity], p4info: &P4Info) -> Vec<CounterCell> {
    let mut cells: Vec<CounterCell> = entities
        .iter()
        .filter_map(|e| match e.entity.as_ref()? {
            entity::Entity::CounterEntry(c) => {
                let data = c.data.unwrap_or_default();
                Some(CounterCell {
                    counter: name_or_id(p4info.counters.iter(), c.counter_id),
                    index: Some(c.index.map_or(0, |i| i.index)),
                    entry: None,
                    packets: data.packet_count,
                    bytes: data.byte_count,
                })
            }
            entity::Entity::DirectCounterEntry(c) => {
                let entry = c.table_entry.clone().unwrap_or_default();
                let counter = p4info
                    .direct_counters
                    .iter()
                    .find(|d| d.direct_table_id == entry.table_id)
                    .map_or_else(|| format!("#{}", entry.table_id), |d| d.name().to_owned());
                let data = c.data.unwrap_or_default();
                Some(CounterCell {
                    counter,
                    index: None,
                    entry: Some(describe(&entry, p4info)),
                    packets: data.packet_count,
                    bytes: data.byte_count,
                })
            }
            _ => None,
        })
        .collect();
    cells.sort_by(|a, b| (&a.counter, a.index).cmp(&(&b.counter, b.index)));
    cells
}

/// `name`, or `#id` when P4Info has no entity with that id.
fn name_or_id<'a, T: Named + 'a>(mut items: impl Iterator<Item = &'a T>, id: u32) -> String {
    items
        .find(|item| item.id() == id)
        .map_or_else(|| format!("#{id}"), |item| item.name().to_owned())
}

/// The Read entity for a register: every cell, or the one at `index`.
pub fn register_entity(register: &Register, index: Option<i64>) -> anyhow::Result<Entity> {
    if let Some(index) = index {
        check_index(register, index)?;
    }
    Ok(Entity {
        entity: Some(entity::Entity::RegisterEntry(RegisterEntry {
            register_id: register.id(),
            index: index.map(|index| Index { index }),
            data: None,
        })),
    })
}

/// Checks that the indices `start..end` (end excluded) are cells of `register`.
pub fn check_range(register: &Register, start: i64, end: i64) -> anyhow::Result<()> {
    check_index(register, start)?;
    check_index(register, end - 1)
}

fn check_index(register: &Register, index: i64) -> anyhow::Result<()> {
    if index < 0 || index >= i64::from(register.size) {
        bail!(
            "{} has {} cells: index {index} is not in 0..{}",
            register.name(),
            register.size,
            register.size
        );
    }
    Ok(())
}

/// The register cells among `entities` read from a switch, sorted by register and index.
pub fn register_cells(entities: &[Entity], p4info: &P4Info) -> Vec<RegisterCell> {
    let mut cells: Vec<RegisterCell> = entities
        .iter()
        .filter_map(|e| match e.entity.as_ref()? {
            entity::Entity::RegisterEntry(r) => {
                let register = p4info.registers.iter().find(|x| x.id() == r.register_id);
                let name =
                    register.map_or_else(|| format!("#{}", r.register_id), |x| x.name().to_owned());
                let bitwidth = register.and_then(register_bitwidth).unwrap_or(0);
                let (value, zero) = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
                    Some(p4_data::Data::Bitstring(bytes)) => (
                        value::display(bytes, bitwidth, &name),
                        bytes.iter().all(|b| *b == 0),
                    ),
                    Some(p4_data::Data::Bool(b)) => (Value::Bool(*b), !*b),
                    Some(other) => (Value::String(format!("{other:?}")), false),
                    None => (Value::Null, false),
                };
                Some(RegisterCell {
                    register: name,
                    index: r.index.map_or(0, |i| i.index),
                    value,
                    zero,
                })
            }
            _ => None,
        })
        .collect();
    cells.sort_by(|a, b| (&a.register, a.index).cmp(&(&b.register, b.index)));
    cells
}

/// The update that writes `text` into a register cell: a decimal or `0x` integer, or an
/// address ([`value::encode_text`]).
pub fn register_write(register: &Register, index: i64, text: &str) -> anyhow::Result<Labelled> {
    check_index(register, index)?;
    let bitwidth = register_bitwidth(register)
        .with_context(|| format!("{} does not hold bitstrings", register.name()))?;
    let bytes = value::encode_text(text, bitwidth)
        .with_context(|| format!("{}[{index}]", register.name()))?;
    Ok(Labelled {
        label: format!("{}[{index}] = {text}", register.name()),
        update: Update {
            r#type: update::Type::Modify as i32,
            entity: Some(Entity {
                entity: Some(entity::Entity::RegisterEntry(RegisterEntry {
                    register_id: register.id(),
                    index: Some(Index { index }),
                    data: Some(P4Data {
                        data: Some(p4_data::Data::Bitstring(bytes)),
                    }),
                })),
            }),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{entries, p4info::counter, p4info::tests::sample};
    use p4runtime::p4::v1::CounterData;
    use serde_json::json;

    #[test]
    fn counter_entities_by_kind() {
        let p4info = sample();
        let all = counter_entity(counter(&p4info, "port_packets").unwrap(), None).unwrap();
        let Some(entity::Entity::CounterEntry(c)) = all.entity else {
            panic!()
        };
        assert_eq!((c.counter_id, c.index), (302000001, None));
        let one = counter_entity(counter(&p4info, "port_packets").unwrap(), Some(3)).unwrap();
        let Some(entity::Entity::CounterEntry(c)) = one.entity else {
            panic!()
        };
        assert_eq!(c.index, Some(Index { index: 3 }));
        let error = counter_entity(counter(&p4info, "port_packets").unwrap(), Some(512))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "MyIngress.port_packets has 512 cells: index 512 is not in 0..512"
        );
        let direct = counter_entity(counter(&p4info, "route_hits").unwrap(), None).unwrap();
        let Some(entity::Entity::DirectCounterEntry(d)) = direct.entity else {
            panic!()
        };
        assert_eq!(d.table_entry.unwrap().table_id, 37375156);
        assert!(counter_entity(counter(&p4info, "route_hits").unwrap(), Some(1)).is_err());
    }

    #[test]
    fn counter_cells_from_answers() {
        let p4info = sample();
        let indirect = |index, packets, bytes| Entity {
            entity: Some(entity::Entity::CounterEntry(CounterEntry {
                counter_id: 302000001,
                index: Some(Index { index }),
                data: Some(CounterData {
                    byte_count: bytes,
                    packet_count: packets,
                }),
            })),
        };
        let route = entries::table_entry(
            &serde_json::from_value(json!({"table": "ipv4_lpm",
                "match": {"hdr.ipv4.dstAddr": ["10.0.2.2", 32]},
                "action_name": "drop"}))
            .unwrap(),
            &p4info,
        )
        .unwrap();
        let direct = Entity {
            entity: Some(entity::Entity::DirectCounterEntry(DirectCounterEntry {
                table_entry: Some(route),
                data: Some(CounterData {
                    byte_count: 0,
                    packet_count: 4,
                }),
            })),
        };
        let cells = counter_cells(&[indirect(2, 5, 500), direct, indirect(1, 7, 700)], &p4info);
        let summary: Vec<(&str, Option<i64>, i64)> = cells
            .iter()
            .map(|c| (c.counter.as_str(), c.index, c.packets))
            .collect();
        assert_eq!(
            summary,
            [
                ("MyIngress.port_packets", Some(1), 7),
                ("MyIngress.port_packets", Some(2), 5),
                ("MyIngress.route_hits", None, 4)
            ]
        );
        let entry = cells[2].entry.as_ref().unwrap();
        assert_eq!(entry.matches["hdr.ipv4.dstAddr"], json!(["10.0.2.2", 32]));
    }

    #[test]
    fn register_cells_and_writes() {
        let p4info = sample();
        let register = &p4info.registers[0];
        let update = register_write(register, 3, "1500").unwrap();
        let Some(entity::Entity::RegisterEntry(written)) = update.update.entity.unwrap().entity
        else {
            panic!()
        };
        assert_eq!(update.update.r#type, update::Type::Modify as i32);
        assert_eq!(
            written.data.clone().unwrap().data,
            Some(p4_data::Data::Bitstring(vec![0x05, 0xdc]))
        );
        let cells = register_cells(
            &[Entity {
                entity: Some(entity::Entity::RegisterEntry(written)),
            }],
            &p4info,
        );
        assert_eq!(
            cells,
            [RegisterCell {
                register: "MyIngress.last_len".into(),
                index: 3,
                value: json!(1500),
                zero: false,
            }]
        );
        let error = format!("{:#}", register_write(register, 3, "70000").unwrap_err());
        assert_eq!(
            error,
            "MyIngress.last_len[3]: 70000 does not fit in 16 bits"
        );
        assert!(register_write(register, 8, "1").is_err());
        assert!(register_entity(register, Some(-1)).is_err());
        // No raw strings on the command line.
        assert!(register_write(register, 0, "ab").is_err());
        assert!(register_write(register, 0, "0x10").is_ok());
    }
}
