//! The switch's runtime interface: control-plane operations refuse what the program does not
//! allow, with a typed reason, and what they write reads back and reaches the packets.

use softswitch_core::ir::{ActionCall, Entry, FieldMatch};
use softswitch_core::runtime::{CellIndex, RuntimeError};
use softswitch_core::switch::{Clock, Switch};
use softswitch_core::table::{CounterCell, TableError};
use std::path::Path;

fn basic() -> Switch {
    corpus("basic.p4")
}

fn corpus(program: &str) -> Switch {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(program);
    let compiled = softswitch_frontend::compile_file(&path).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(compiled.program, Clock::Virtual(0))
}

#[test]
fn entries_are_checked_against_the_table() {
    let mut sw = basic();
    let t = sw.table_id("ipv4_lpm").unwrap();
    let fwd = sw.action_id(t, "ipv4_forward").unwrap();
    let route = |len_mask: u128, args: Vec<u128>| Entry {
        matches: vec![FieldMatch::Masked {
            value: 0x0a00_0000,
            mask: len_mask,
        }],
        priority: 0,
        action: ActionCall { action: fwd, args },
    };
    assert!(matches!(
        sw.add_entry(t, route(0xff00_0000, vec![1])),
        Err(RuntimeError::Table(TableError::ArgCount {
            want: 2,
            got: 1,
            ..
        }))
    ));
    assert!(matches!(
        sw.add_entry(t, route(0x00ff_0000, vec![1, 2])),
        Err(RuntimeError::Table(TableError::BadMatch { .. }))
    ));
    let two_keys = Entry {
        matches: vec![FieldMatch::Masked { value: 0, mask: 0 }; 2],
        ..route(0, vec![1, 2])
    };
    assert!(matches!(
        sw.add_entry(t, two_keys),
        Err(RuntimeError::Table(TableError::KeyCount {
            want: 1,
            got: 2,
            ..
        }))
    ));
    sw.add_entry(t, route(0xff00_0000, vec![1, 2])).unwrap();
    assert_eq!(
        sw.add_entry(t, route(0xff00_0000, vec![3, 4])),
        Err(RuntimeError::Table(TableError::Duplicate(
            "MyIngress.ipv4_lpm".into()
        )))
    );
}

#[test]
fn unknown_names_are_not_found() {
    let sw = basic();
    assert_eq!(sw.table_id("nope"), None);
    let t = sw.table_id("MyIngress.ipv4_lpm").unwrap();
    assert_eq!(sw.action_id(t, "nope"), None);
    assert!(sw.action_id(t, "NoAction").is_some());
}

#[test]
fn the_runtime_interface_reads_back_what_it_writes_and_refuses_by_kind() {
    let mut sw = corpus("stateful.p4");
    let classify = sw.table_id("classify").unwrap();
    let seen = sw.instance_id("seen_per_port").unwrap();
    let port_counter = sw.instance_id("port_counter").unwrap();
    let to_port = sw.action_id(classify, "to_port").unwrap();
    let drop = sw.action_id(classify, "drop").unwrap();
    // Registers and counters: written, read back, and past their size a typed refusal.
    sw.write_cell(seen, CellIndex::Index(15), 7u128).unwrap();
    assert_eq!(sw.read_cell(seen, CellIndex::Index(15)), Ok(7u128));
    assert_eq!(sw.cell_count(seen), Ok(16));
    assert_eq!(
        sw.write_cell(seen, CellIndex::Index(16), 1u128),
        Err(RuntimeError::Index {
            kind: "register",
            index: 16,
            size: 16
        })
    );
    assert!(matches!(
        sw.read_cell::<CounterCell>(seen, CellIndex::Index(0)),
        Err(RuntimeError::WrongKind {
            want: "counter",
            ..
        })
    ));
    assert_eq!(
        sw.read_cell::<CounterCell>(99, CellIndex::Index(0)),
        Err(RuntimeError::NoInstance(99))
    );
    assert_eq!(sw.remove_entry(99, 0), Err(RuntimeError::NoTable(99)));
    // An entry: found by its key, modified, its direct counter written and read back.
    let key = vec![FieldMatch::Masked {
        value: 0x0000_0000_0002,
        mask: 0xffff_ffff_ffff,
    }];
    let handle = sw
        .add_entry(
            classify,
            Entry {
                matches: key.clone(),
                priority: 1,
                action: ActionCall {
                    action: drop,
                    args: vec![],
                },
            },
        )
        .unwrap();
    assert_eq!(sw.entry_by_key(classify, &key, Some(1)), Ok(Some(handle)));
    assert_eq!(sw.entry_by_key(classify, &key, Some(2)), Ok(None));
    let forward = ActionCall {
        action: to_port,
        args: vec![3],
    };
    sw.modify_entry(classify, handle, forward.clone()).unwrap();
    assert_eq!(sw.entry(classify, handle).unwrap().entry.action, forward);
    let cell = CounterCell {
        packets: 5,
        bytes: 0,
    };
    let direct = sw.program().tables[classify].direct_counter.unwrap();
    sw.write_cell(direct, CellIndex::Entry(handle), cell)
        .unwrap();
    assert_eq!(sw.read_cell(direct, CellIndex::Entry(handle)), Ok(cell));
    // A packet to that address counts in the entry's direct counter, its port's counter cell
    // and register cell, and leaves by the port the modified entry names.
    let mut frame = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x88, 0xb5];
    frame.resize(64, 0);
    sw.receive(1, frame);
    sw.drain();
    let ports: Vec<u16> = sw.drain_outputs().map(|o| o.port).collect();
    assert_eq!(ports, [3]);
    let counted = |sw: &Switch, instance, at| sw.read_cell::<CounterCell>(instance, at).unwrap();
    assert_eq!(counted(&sw, direct, CellIndex::Entry(handle)).packets, 6);
    assert_eq!(counted(&sw, port_counter, CellIndex::Index(1)).packets, 1);
    assert_eq!(sw.read_cell(seen, CellIndex::Index(1)), Ok(1u128));
    sw.remove_entry(classify, handle).unwrap();
    assert!(matches!(
        sw.read_cell::<CounterCell>(direct, CellIndex::Entry(handle)),
        Err(RuntimeError::Table(TableError::NoEntry(..)))
    ));
}
