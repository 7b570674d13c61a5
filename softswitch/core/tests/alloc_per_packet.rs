//! The per-packet path allocates nothing once warm: a counting global allocator counts the
//! allocations of [`Switch::receive`] and [`Switch::drain_outputs`] over frames of two programs
//! (the corpus's `basic.p4`, IPv4 LPM forwarding as the P4 tutorials' `basic`, and dataplane-p4's
//! `lossless.p4` through an ECMP group, ECN marking and its other per-packet tables), fed as the
//! device engine feeds it: each frame in a buffer a frame the switch sent out before; each
//! program interpreted and compiled.
//!
//! Compiling a program for the compiled path takes memory bounded by the program's size, not by
//! how often it extracts and emits a wide header: the same allocator adds up the bytes
//! [`Switch::set_execution`] allocates for a small hostile program.
//!
//! A test binary of its own: the allocator is global, and one test at a time runs in it.

use softswitch_core::ir::{ActionCall, Entry, FieldMatch};
use softswitch_core::switch::{Clock, Execution, Switch};
use softswitch_core::table::prefix_mask;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The system allocator, counting allocations (and reallocations) made by a thread while its
/// `COUNTING` is set: only the test's own thread, never libtest's or another test's.
struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted (const, no destructor: readable from the
    /// allocator at any time, allocating nothing).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// The bytes of those allocations (a reallocation's new size).
static BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is the system allocator's with the caller's arguments; counting touches
// only atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.get() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation is).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.get() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size, Ordering::Relaxed);
        }
        // SAFETY: as `dealloc`, and the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Tests of this binary one at a time: the count is global.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Frames run to warm the switch before counting.
const WARM: usize = 64;
/// Frames counted.
const COUNTED: usize = 1000;

fn load(path: &Path) -> Switch {
    let compiled = softswitch_frontend::compile_file(path).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(compiled.program, Clock::Virtual(0))
}

fn here(relative: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Entry `args` of action `action` of table `table`, keyed by `matches`.
fn add(switch: &mut Switch, table: &str, action: &str, matches: Vec<FieldMatch>, args: Vec<u128>) {
    let t = switch.table_id(table).expect(table);
    let a = switch.action_id(t, action).expect(action);
    let entry = Entry {
        matches,
        priority: 0,
        action: ActionCall { action: a, args },
    };
    switch.add_entry(t, entry).expect("the entry");
}

/// An exact match of a 16-bit key.
fn exact(value: u128) -> FieldMatch {
    FieldMatch::Masked {
        value,
        mask: softswitch_core::ir::mask(16),
    }
}

fn lpm(value: u32, len: u16) -> FieldMatch {
    FieldMatch::Masked {
        value: u128::from(value),
        mask: prefix_mask(32, len),
    }
}

/// A 64-byte Ethernet/IPv4/UDP frame to `dst` (RoCEv2's port when `roce`, with a BTH).
fn frame(into: &mut Vec<u8>, dst: u32, src_port: u16, roce: bool) {
    into.clear();
    into.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00]);
    // ECN-capable (ECT(0)) so that a marking program has something to mark.
    into.extend_from_slice(&[0x45, 0x02, 0, 50, 0, 1, 0, 0, 64, 17, 0, 0, 10, 1, 0, 1]);
    into.extend_from_slice(&dst.to_be_bytes());
    into.extend_from_slice(&src_port.to_be_bytes());
    let port: u16 = if roce { 4791 } else { 9 };
    into.extend_from_slice(&port.to_be_bytes());
    into.extend_from_slice(&[0, 16, 0, 0]);
    // BTH: opcode RC SEND only, pkey, destination QP 0x12, PSN.
    into.extend_from_slice(&[0x04, 0, 0xff, 0xff, 0, 0, 0, 0x12, 0, 0, 0, 1]);
    into.resize(64, 0xab);
}

/// Runs `WARM` frames, then counts the allocations of the next `COUNTED`; each frame is written
/// into the buffer of an output, as the device engine does. Returns the count and how many
/// frames left.
fn count(switch: &mut Switch, roce: bool) -> (usize, usize) {
    let mut spare: Vec<Vec<u8>> = Vec::with_capacity(16);
    let mut sent = 0;
    let mut counted = 0;
    for i in 0..WARM + COUNTED {
        let mut buffer = spare.pop().unwrap_or_else(|| Vec::with_capacity(2048));
        frame(&mut buffer, 0x0a00_0000 | (i as u32 & 0xff), i as u16, roce);
        if i == WARM {
            ALLOCATIONS.store(0, Ordering::SeqCst);
            COUNTING.set(true);
        }
        switch.receive(1, buffer);
        for out in switch.drain_outputs() {
            sent += usize::from(i >= WARM);
            if spare.len() < spare.capacity() {
                spare.push(out.data);
            }
        }
        if i + 1 == WARM + COUNTED {
            COUNTING.set(false);
            counted = ALLOCATIONS.load(Ordering::SeqCst);
        }
    }
    (counted, sent)
}

#[test]
fn ipv4_forwarding_allocates_nothing_per_packet_once_warm() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut switch = load(&here("../tests/corpus/basic.p4"));
    add(
        &mut switch,
        "MyIngress.ipv4_lpm",
        "MyIngress.ipv4_forward",
        vec![lpm(0x0a00_0000, 8)],
        vec![0x0000_0000_0a0a, 2],
    );
    assert_none_on_either_path(&mut switch, false);
}

#[test]
fn lossless_p4_allocates_nothing_per_packet_once_warm() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut switch = load(&here("../../dataplane-p4/lossless.p4"));
    let ingress = "LosslessIngress";
    let t = |name: &str| format!("{ingress}.{name}");
    add(
        &mut switch,
        &t("ipv4_lpm"),
        &t("set_ecmp_group"),
        vec![lpm(0x0a00_0000, 8)],
        vec![1],
    );
    // Group 1: 5-tuple hash over two members, next hops 1 and 2.
    add(
        &mut switch,
        &t("ecmp_group"),
        &t("set_group"),
        vec![exact(1)],
        vec![0, 2, 0],
    );
    for member in 0..2 {
        add(
            &mut switch,
            &t("ecmp_member"),
            &t("set_nexthop"),
            vec![exact(1), exact(member)],
            vec![member + 1],
        );
        add(
            &mut switch,
            &t("nexthop"),
            &t("forward"),
            vec![exact(member + 1)],
            vec![member + 2, 0x0000_0000_0a0a, 0x0000_0000_0b0b],
        );
    }
    assert_none_on_either_path(&mut switch, true);
}

/// Asserts that `switch` forwards every frame and allocates for none, interpreted and then
/// compiled.
fn assert_none_on_either_path(switch: &mut Switch, roce: bool) {
    for execution in [Execution::Interpreted, Execution::Compiled] {
        switch.set_execution(execution);
        let (allocations, sent) = count(switch, roce);
        assert_eq!(sent, COUNTED, "{execution:?}: every frame is forwarded");
        assert_eq!(
            allocations, 0,
            "{execution:?}: allocations over {COUNTED} frames"
        );
    }
}

/// A header of 1000 one-bit fields, extracted 2000 times and emitted 2000 times: a 100 KB
/// program whose `extract`s and `emit`s, each packed into words of its own, would take
/// 2 x 2000 x 1000 fields x 24 bytes (96 MB) to compile. Its layout's words are packed once
/// and shared, so compiling it allocates a small multiple of its size; and it compiles whole.
#[test]
fn compiling_wide_headers_extracted_and_emitted_often_takes_little_memory() {
    const FIELDS: usize = 1000;
    const TIMES: usize = 2000;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut p4 = String::from("#include <core.p4>\n#include <v1model.p4>\nheader wide_t {\n");
    for i in 0..FIELDS {
        p4.push_str(&format!("bit<1> f{i};\n"));
    }
    p4.push_str(
        "}\nstruct headers { wide_t h; }\nstruct meta_t { }\n\
         parser P(packet_in packet, out headers hdr, inout meta_t meta, \
         inout standard_metadata_t sm) {\nstate start {\n",
    );
    p4.push_str(&"packet.extract(hdr.h);\n".repeat(TIMES));
    p4.push_str(
        "transition accept; } }\n\
         control V(inout headers hdr, inout meta_t meta) { apply { } }\n\
         control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) \
         { apply { sm.egress_spec = 1; } }\n\
         control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) \
         { apply { } }\n\
         control C(inout headers hdr, inout meta_t meta) { apply { } }\n\
         control D(packet_out packet, in headers hdr) { apply {\n",
    );
    p4.push_str(&"packet.emit(hdr.h);\n".repeat(TIMES));
    p4.push_str("} }\nV1Switch(P(), V(), I(), E(), C(), D()) main;\n");
    let mut map = softswitch_frontend::source::SourceMap::new();
    let file = map.add("wide.p4".to_string(), p4.clone());
    let compiled = softswitch_frontend::compile(&mut map, file)
        .unwrap_or_else(|d| panic!("{}", d.render(&map)));
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    BYTES.store(0, Ordering::SeqCst);
    COUNTING.set(true);
    switch.set_execution(Execution::Compiled);
    COUNTING.set(false);
    let bytes = BYTES.load(Ordering::SeqCst);
    assert_eq!(switch.compile_fallbacks(), &[], "every block compiles");
    assert!(
        bytes < 20 * p4.len(),
        "compiling a {} B program allocated {bytes} B",
        p4.len()
    );
}
