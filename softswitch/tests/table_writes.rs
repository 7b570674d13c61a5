//! A P4Runtime Write goes down once — the server's handling of each update, the switch's
//! runtime interface, the table — and copies no table on the way: a Write of inserts, modifies
//! and deletes (with counter values and metadata), and a change of the default entry, leave
//! every entry in the table store as written, while `ir::Table`'s copy count stays where it was
//! (the server once copied the whole `ir::Table` per update, three copies a cycle here).

mod writes;

use p4runtime::p4::v1 as p4v1;
use p4v1::update::Type as UpdateType;
use softswitch_core::ir::{FieldMatch, Table};
use softswitch_core::table::CounterCell;
use softswitch_server::entities;

/// Entries written (and changed, and deleted).
const N: u8 = 100;

#[test]
fn a_write_reaches_the_table_store_without_copying_the_table() {
    let (mut p, info) = writes::pipeline();
    let (route_id, forward_id) = (writes::id(&info, "route"), writes::id(&info, "forward"));
    let table = p.switch.table_id("route").unwrap();
    let forward = p.switch.action_id(table, "forward").unwrap();
    let update = |kind, n: u8, port: u8| {
        let key = p4v1::field_match::FieldMatchType::Lpm(p4v1::field_match::Lpm {
            value: vec![10, n, 0, 0],
            prefix_len: 16,
        });
        let mut u = writes::entry_update(kind, route_id, key, (forward_id, vec![port]), vec![n]);
        if let Some(p4v1::entity::Entity::TableEntry(te)) =
            u.entity.as_mut().and_then(|e| e.entity.as_mut())
        {
            te.counter_data = (kind != UpdateType::Delete).then_some(p4v1::CounterData {
                packet_count: i64::from(n),
                byte_count: i64::from(port),
            });
        }
        u
    };
    let default = p4v1::Update {
        r#type: UpdateType::Modify as i32,
        entity: Some(p4v1::Entity {
            entity: Some(p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
                table_id: route_id,
                is_default_action: true,
                action: update(UpdateType::Insert, 0, 7)
                    .entity
                    .and_then(|e| match e.entity {
                        Some(p4v1::entity::Entity::TableEntry(te)) => te.action,
                        _ => None,
                    }),
                ..Default::default()
            })),
        }),
    };
    // The count counts: a copy of the table shows.
    let copies = Table::copies_on_this_thread();
    let copy = p.switch.program().tables[table].clone();
    assert_eq!(Table::copies_on_this_thread() - copies, 1);
    drop(copy);
    let copies = Table::copies_on_this_thread();

    for n in 0..N {
        entities::write(&mut p, &update(UpdateType::Insert, n, 1)).unwrap();
    }
    let entries: Vec<_> = p.switch.entries(table).unwrap().collect();
    assert_eq!(entries.len(), usize::from(N));
    for (_, i) in &entries {
        let FieldMatch::Masked { value, .. } = i.entry.matches[0] else {
            panic!("an lpm match is masked");
        };
        let n = (value >> 16) & 0xff;
        assert_eq!(i.entry.action.action, forward);
        assert_eq!(i.entry.action.args, [1]);
        assert_eq!(i.data.as_ref().unwrap().bytes, [n as u8]);
        assert_eq!(
            i.counter,
            CounterCell {
                packets: n as u64,
                bytes: 1
            }
        );
    }

    for n in 0..N {
        entities::write(&mut p, &update(UpdateType::Modify, n, 2)).unwrap();
    }
    assert!(p
        .switch
        .entries(table)
        .unwrap()
        .all(|(_, i)| i.entry.action.args == [2] && i.counter.bytes == 2));
    entities::write(&mut p, &default).unwrap();
    assert_eq!(p.switch.default_action(table).unwrap().args, [7]);

    for n in 0..N {
        entities::write(&mut p, &update(UpdateType::Delete, n, 0)).unwrap();
    }
    assert_eq!(p.switch.entries(table).unwrap().count(), 0);

    assert_eq!(
        Table::copies_on_this_thread() - copies,
        0,
        "tables copied by {} updates",
        3 * u32::from(N) + 1
    );
}
