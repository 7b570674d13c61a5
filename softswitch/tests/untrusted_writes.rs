//! Hostile writes over P4Runtime to a running `softswitch run --state-budget` (the binary, on
//! 127.0.0.1 without ports): a client that fills a large table with entries carrying as much
//! metadata as they may, then with as many small entries as fit, is refused with
//! RESOURCE_EXHAUSTED past the budget, metadata past its limit is refused whatever the budget,
//! deletes still go through when the budget is spent, and the switch's resident memory stays
//! within a small multiple of the budget. A Write of thousands of refused updates writes a few
//! error lines to the switch's log, not one per update.

mod running;
mod writes;

use p4runtime::p4::v1 as p4v1;
use p4v1::set_forwarding_pipeline_config_request::Action;
use p4v1::update::Type as UpdateType;
use running::{p4info, Controller, Switch};
use softswitch_server::entities::MAX_METADATA_BYTES;
use tonic::Code;

/// The budget the switch runs with.
const BUDGET: usize = 16 << 20;

/// A table far larger than the budget lets a client fill.
const PROGRAM: &str = "#include <core.p4>
#include <v1model.p4>
header h_t { bit<32> k; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m x, inout standard_metadata_t s) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout hs h, inout m x) { apply { } }
control I(inout hs h, inout m x, inout standard_metadata_t s) {
    action set(bit<32> v) { h.h.k = v; }
    table big {
        key = { h.h.k: exact; }
        actions = { set; NoAction; }
        size = 4194304;
    }
    apply { big.apply(); }
}
control E(inout hs h, inout m x, inout standard_metadata_t s) { apply { } }
control C(inout hs h, inout m x) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
";

/// An update of `kind` of the entry of `big` (`ids`: its table and action `set`) with key
/// `key`, keeping `metadata`.
fn entry(ids: (u32, u32), kind: UpdateType, key: u32, metadata: Vec<u8>) -> p4v1::Update {
    let key = p4v1::field_match::FieldMatchType::Exact(p4v1::field_match::Exact {
        value: softswitch_server::bytes::encode(u128::from(key)),
    });
    writes::entry_update(kind, ids.0, key, (ids.1, vec![1]), metadata)
}

/// A switch started with `options` and running [`PROGRAM`], its primary controller, and the
/// ids of `big` and its action `set`.
async fn loaded(options: &[&str]) -> (Switch, Controller, (u32, u32)) {
    let switch = Switch::start_with(options);
    let mut controller = Controller::connect(&switch).await;
    let info = p4info(PROGRAM);
    controller
        .set(Action::VerifyAndCommit, PROGRAM, info.clone())
        .await
        .unwrap();
    let ids = (writes::id(&info, "big"), writes::id(&info, "set"));
    (switch, controller, ids)
}

/// Small entries per Write: fewer than `status::REPORTED_UPDATES`, so that each update's status
/// comes back and there is room left for the first messages.
const BATCH: u32 = 100;

/// Inserts batches of `per_batch` entries (at most [`BATCH`]) from key `*next` on, each with `metadata` bytes of metadata,
/// until an update is refused; returns the keys of the entries accepted. Every refusal must be
/// the budget's (the first says so; the messages of the later ones may be left out).
async fn fill(
    controller: &mut Controller,
    ids: (u32, u32),
    next: &mut u32,
    per_batch: u32,
    metadata: usize,
) -> Vec<u32> {
    let mut accepted = Vec::new();
    loop {
        let keys = *next..*next + per_batch;
        *next += per_batch;
        let updates = keys
            .clone()
            .map(|k| entry(ids, UpdateType::Insert, k, vec![0x5a; metadata]))
            .collect();
        match controller.write(updates).await {
            Ok(()) => accepted.extend(keys),
            Err(status) => {
                let errors = p4runtime::status::update_errors(&status);
                assert_eq!(errors.len(), per_batch as usize, "{status:?}");
                let mut said = false;
                for (e, key) in errors.iter().zip(keys) {
                    match Code::from(e.canonical_code) {
                        Code::Ok => accepted.push(key),
                        Code::ResourceExhausted if e.message.contains("state budget") => {
                            said = true
                        }
                        Code::ResourceExhausted if said && e.message.is_empty() => {}
                        other => panic!("{other:?}: {} in {status:?}", e.message),
                    }
                }
                return accepted;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_filling_tables_is_refused_past_the_budget_and_memory_stays_bounded() {
    let (switch, mut controller, ids) = loaded(&["--state-budget", &BUDGET.to_string()]).await;
    let baseline = switch.rss_kib();

    // Metadata past the limit is refused, whatever room the budget has.
    let refused = controller
        .write(vec![entry(
            ids,
            UpdateType::Insert,
            0,
            vec![1; MAX_METADATA_BYTES + 1],
        )])
        .await
        .unwrap_err();
    let errors = p4runtime::status::update_errors(&refused);
    assert_eq!(errors[0].canonical_code, Code::ResourceExhausted as i32);
    assert!(
        errors[0].message.contains("MAX_METADATA_BYTES"),
        "{}",
        errors[0].message
    );

    // Entries carrying the most metadata each may: about the budget's worth, then refused.
    let mut next = 0;
    let big = fill(&mut controller, ids, &mut next, 50, MAX_METADATA_BYTES).await;
    let kept = big.len() * MAX_METADATA_BYTES;
    assert!(
        kept <= BUDGET && kept > BUDGET * 9 / 10,
        "{} entries of {MAX_METADATA_BYTES} bytes of metadata in a budget of {BUDGET}",
        big.len()
    );
    // The room left takes a few small entries, then nothing more; deletes go through.
    let rest = fill(&mut controller, ids, &mut next, BATCH, 0).await;
    assert!(fill(&mut controller, ids, &mut next, 1, 0).await.is_empty());
    let deletes = big
        .iter()
        .chain(&rest)
        .map(|&k| entry(ids, UpdateType::Delete, k, Vec::new()))
        .collect();
    controller.write(deletes).await.unwrap();

    // As many small entries as fit: refused past the budget too.
    let small = fill(&mut controller, ids, &mut next, BATCH, 0).await.len();
    assert!(
        small > BUDGET / 400,
        "only {small} small entries in a budget of {BUDGET}"
    );
    // Writing on changes nothing.
    for _ in 0..3 {
        assert!(fill(&mut controller, ids, &mut next, BATCH, 0)
            .await
            .is_empty());
    }
    assert!(controller.alive().await);
    let grown = switch.peak_kib().saturating_sub(baseline) as usize * 1024;
    eprintln!(
        "{} entries with metadata, then {small} small entries; the peak resident memory \
         grew {} KiB over a budget of {} KiB",
        big.len(),
        grown >> 10,
        BUDGET >> 10
    );
    // What the estimates leave out (allocation headers, hash tables' spare room, the requests
    // being decoded) is within a small multiple of the budget.
    assert!(
        grown < 4 * BUDGET + (32 << 20),
        "the switch grew {} KiB with a budget of {} KiB",
        grown >> 10,
        BUDGET >> 10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_thousands_of_refused_updates_logs_a_few_lines() {
    let (switch, mut controller, ids) = loaded(&[]).await;
    // The same key 5000 times: the first is added, every other refused by the switch.
    let updates = (0..5000)
        .map(|_| entry(ids, UpdateType::Insert, 7, Vec::new()))
        .collect();
    let status = controller.write(updates).await.unwrap_err();
    assert!(status.message().starts_with("4999 of 5000"), "{status:?}");
    // Stopped with its controller still connected: it does not wait for it.
    let log = switch.stop();
    drop(controller);
    assert!(
        log.iter().any(|l| l.contains("clients still connected")),
        "{log:#?}"
    );
    let errors: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("Error when trying to add entry"))
        .collect();
    assert!(
        !errors.is_empty()
            && errors.len() <= softswitch_device::trace::WARNINGS_PER_PERIOD as usize,
        "{} error lines: {errors:#?}",
        errors.len()
    );
}
