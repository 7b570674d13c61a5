//! Table churn: a controller that inserts and deletes the same entries all day must not grow
//! the switch. A million insert/delete cycles through the switch's runtime interface, and a
//! hundred thousand through the P4Runtime server's handling of Write updates (in process,
//! without gRPC: what each update does to the pipeline; a million of those take about 80 s in a
//! debug build), leave the table at the size of what it holds — the store's own measures (the
//! handle's slot, the state budget's bytes in use) back where they were — and the process's
//! resident memory (`VmRSS`) where it was after a warm-up.
//!
//! One test per binary, run alone: the resident memory is the process's.

mod writes;

use p4runtime::p4::v1 as p4v1;
use softswitch_core::ir::{ActionCall, Entry, FieldMatch};
use softswitch_core::switch::{Clock, Switch};
use softswitch_core::table::MAX_ENTRIES;
use softswitch_server::entities;

/// Insert/delete cycles through the runtime interface.
const CYCLES: usize = 1_000_000;

/// Insert/delete cycles through the P4Runtime server's Write handling.
const WRITE_CYCLES: usize = 100_000;

/// Cycles before the resident memory is first read: the allocator's pools, the table's slot and
/// index are made by then.
const WARM_UP: usize = 10_000;

/// How much the resident memory may grow over the cycles after the warm-up: the leak this test
/// catches (about 80 bytes a cycle) would be 8 MB over the fewest cycles; what the allocator
/// keeps around is well under this.
const RSS_SLACK_KIB: u64 = 2 << 10;

/// The process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Runs `cycle` on `store` `cycles` times; after the warm-up and at the end, `measure` reads
/// the store's own measure. Both measures and the resident memory must end where they were
/// after the warm-up.
fn churn<S, M: PartialEq + std::fmt::Debug>(
    what: &str,
    cycles: usize,
    store: &mut S,
    mut cycle: impl FnMut(&mut S, usize),
    measure: impl Fn(&S) -> M,
) {
    for i in 0..WARM_UP {
        cycle(store, i);
    }
    let (warm, rss) = (measure(store), rss_kib());
    let started = std::time::Instant::now();
    for i in WARM_UP..cycles {
        cycle(store, i);
    }
    eprintln!(
        "{what}: {} cycles in {:?}, resident {rss} KiB after the warm-up, {} KiB at the end",
        cycles - WARM_UP,
        started.elapsed(),
        rss_kib()
    );
    assert_eq!(measure(store), warm, "{what}: the store grew");
    let grown = rss_kib().saturating_sub(rss);
    assert!(
        grown < RSS_SLACK_KIB,
        "{what}: resident memory grew {grown} KiB over the cycles"
    );
}

#[test]
fn a_million_insert_delete_cycles_leave_the_switch_at_its_size() {
    let (mut p, info) = writes::pipeline();
    let (route_id, forward_id) = (writes::id(&info, "route"), writes::id(&info, "forward"));

    // Through the runtime interface: an entry kept, and one inserted and deleted.
    let mut switch = Switch::new(p.switch.program().clone(), Clock::Virtual(0));
    let table = switch.table_id("route").unwrap();
    let forward = switch.action_id(table, "forward").unwrap();
    let route = |dst: u128, port: u128| Entry {
        matches: vec![FieldMatch::Masked {
            value: dst,
            mask: 0xffff_ff00,
        }],
        priority: 0,
        action: ActionCall {
            action: forward,
            args: vec![port],
        },
    };
    switch.add_entry(table, route(0x0a00_0000, 1)).unwrap();
    let mut slot = None;
    churn(
        "runtime interface",
        CYCLES,
        &mut switch,
        |switch, i| {
            let h = switch
                .add_entry(table, route(0x0b00_0000, i as u128 % 512))
                .unwrap();
            // Every cycle's entry takes the same slot, under a new handle.
            let at = h & (MAX_ENTRIES - 1);
            assert_eq!(*slot.get_or_insert(at), at);
            switch.remove_entry(table, h).unwrap();
        },
        |switch| {
            let entries = switch.entries(table).unwrap().count();
            (switch.state_budget().used(), entries)
        },
    );

    // Through the P4Runtime server's Write handling: an entry with metadata, inserted and
    // deleted by key.
    let update = |kind, metadata| {
        let key = p4v1::field_match::FieldMatchType::Lpm(p4v1::field_match::Lpm {
            value: vec![11, 0, 0, 0],
            prefix_len: 8,
        });
        writes::entry_update(kind, route_id, key, (forward_id, vec![2]), metadata)
    };
    let delete = update(p4v1::update::Type::Delete, Vec::new());
    churn(
        "P4Runtime writes",
        WRITE_CYCLES,
        &mut p,
        |p, i| {
            let insert = update(
                p4v1::update::Type::Insert,
                (i as u32).to_le_bytes().to_vec(),
            );
            entities::write(p, &insert).unwrap();
            entities::write(p, &delete).unwrap();
        },
        |p| {
            let entries = p.switch.entries(table).unwrap().count();
            (p.switch.state_budget().used(), entries)
        },
    );
}
