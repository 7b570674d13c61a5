//! The control-plane operations refuse what the program does not allow, with a reason.

use softswitch_core::ir::{ActionCall, Entry, FieldMatch};
use softswitch_core::runtime::RuntimeError;
use softswitch_core::switch::{Clock, Switch};
use softswitch_core::table::TableError;
use softswitch_frontend::source::SourceMap;
use std::path::Path;

fn basic() -> Switch {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/basic.p4");
    let mut map = SourceMap::new();
    let file = map.add(
        path.display().to_string(),
        std::fs::read_to_string(&path).unwrap(),
    );
    Switch::new(
        softswitch_frontend::compile(&mut map, file)
            .unwrap()
            .program,
        Clock::Virtual(0),
    )
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
