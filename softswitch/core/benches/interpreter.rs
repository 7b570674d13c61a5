//! Interpreter and compiled-path throughput, one core, no I/O: frames per CPU second of the
//! thread (and ns of CPU per frame) for IPv4 LPM forwarding with 1,000 routes (corpus
//! `basic.p4`), for ECN marking with ECMP (corpus `ecn_ecmp.p4`), for `tests/p4/ipv4_forward.p4`
//! (the port benchmark's program) and for `dataplane-p4/lossless.p4` routing a RoCEv2 frame;
//! each program on a switch running it interpreted and on one running it compiled
//! (`softswitch_core::compiled`), in rounds alternating which runs first, each checking that
//! both forwarded the same packets; the median of each with its range (ns per frame, fastest
//! to slowest round) and the ratio compiled / interpreted with the range the rounds allow.
//! Run with `cargo bench -p softswitch-core --bench interpreter` (append a name, e.g. `-- lpm`,
//! to run one). With `LOSSLESS_BENCH_RESULTS` set to a file, each program's figures are also
//! appended to it, one line each (see [`record`]), for `cargo xtask bench softswitch` to print
//! with issue 34's aims.
#![forbid(unsafe_code)]

use softswitch_core::ir::{ActionCall, Entry, FieldMatch};
use softswitch_core::switch::{Clock, Execution, Switch};
use softswitch_core::table::prefix_mask;
use std::hint::black_box;
use std::path::Path;

const PACKETS: usize = 400_000;
/// Rounds of each path, alternating which goes first; the median is reported, with the
/// fastest and slowest round.
const ROUNDS: usize = 3;

fn load(path: &str) -> Switch {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let compiled = softswitch_frontend::compile_file(&path).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(compiled.program, Clock::Virtual(0))
}

fn corpus(name: &str) -> Switch {
    load(&format!("../tests/corpus/{name}"))
}

/// The CPU time this thread has used, in ns (the scheduler's own count, which time spent
/// waiting for a core does not inflate).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat (Linux)")
}

/// The ids of table `table` and of its action `action`.
fn table_and_action(switch: &Switch, table: &str, action: &str) -> (usize, usize) {
    let table = switch.table_id(table).expect("the table");
    let action = switch.action_id(table, action).expect("the action");
    (table, action)
}

/// An entry of a one-key table matching `value` under `mask` (exact: the key's whole mask),
/// running `action` with `args`.
fn masked(value: u128, mask: u128, action: usize, args: Vec<u128>) -> Entry {
    Entry {
        matches: vec![FieldMatch::Masked { value, mask }],
        priority: 0,
        action: ActionCall { action, args },
    }
}

/// A deterministic pseudo-random sequence (xorshift32).
fn next(state: &mut u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    *state
}

fn ipv4_udp(dst: u32, src_port: u16) -> Vec<u8> {
    let mut p = Vec::with_capacity(64);
    p.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00]);
    p.extend_from_slice(&[0x45, 0x02, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 1, 0, 1]);
    p.extend_from_slice(&dst.to_be_bytes());
    p.extend_from_slice(&src_port.to_be_bytes());
    p.extend_from_slice(&4791u16.to_be_bytes());
    p.resize(64, 0xab);
    p
}

/// CPU ns per packet of `switch` over `packets`, after a warm-up; how many it forwarded.
fn cpu_per_packet(switch: &mut Switch, packets: &[Vec<u8>]) -> (f64, usize) {
    for p in packets.iter().take(10_000) {
        switch.receive(1, p.clone());
        black_box(switch.drain_outputs().count());
    }
    let start = cpu_ns();
    let mut sent = 0usize;
    for i in 0..PACKETS {
        switch.receive(1, packets[i % packets.len()].clone());
        sent += switch.drain_outputs().count();
    }
    ((cpu_ns() - start) as f64 / PACKETS as f64, sent)
}

/// Measures `switch` (set up, interpreted) against a copy of its set-up that runs compiled,
/// in rounds that alternate which goes first; both must forward the same packets each round.
fn measure(name: &str, setup: impl Fn() -> Switch, packets: &[Vec<u8>]) {
    let mut interpreted = setup();
    let mut compiled = setup();
    compiled.set_execution(Execution::Compiled);
    assert!(
        compiled.compile_fallbacks().is_empty(),
        "{:?}",
        compiled.compile_fallbacks()
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut sent = 0;
    for round in 0..ROUNDS {
        let ((ns_a, sent_a), (ns_b, sent_b)) = if round % 2 == 0 {
            let first = cpu_per_packet(&mut interpreted, packets);
            (first, cpu_per_packet(&mut compiled, packets))
        } else {
            let first = cpu_per_packet(&mut compiled, packets);
            (cpu_per_packet(&mut interpreted, packets), first)
        };
        assert!(
            sent_a == sent_b && sent_a > 0,
            "{name}: interpreted forwarded {sent_a}, compiled {sent_b} of {PACKETS}"
        );
        a.push(ns_a);
        b.push(ns_b);
        sent = sent_a;
    }
    assert!(compiled.compiled_block_runs() > 0 && interpreted.compiled_block_runs() == 0);
    let spread = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2], v[v.len() - 1])
    };
    let ((a_min, a, a_max), (b_min, b, b_max)) = (spread(a), spread(b));
    record(name, [a_min, a, a_max, b_min, b, b_max]);
    println!(
        "{name}: interpreted {:.0} packets/CPU-s ({a:.0} ns, {a_min:.0}-{a_max:.0}), compiled \
         {:.0} packets/CPU-s ({b:.0} ns, {b_min:.0}-{b_max:.0}), compiled / interpreted {:.2} \
         ({:.2}-{:.2}) ({sent} of {PACKETS} forwarded by each)",
        1e9 / a,
        1e9 / b,
        a / b,
        a_min / b_max,
        a_max / b_min,
    );
}

/// Appends `name` and its CPU ns per frame (interpreted fastest, median, slowest round, then
/// compiled the same) as one line of space-separated fields to the file
/// `LOSSLESS_BENCH_RESULTS` names, if set (the port benchmark, `bench-softswitch`, reads it).
fn record(name: &str, ns: [f64; 6]) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os("LOSSLESS_BENCH_RESULTS") else {
        return;
    };
    let line = ns
        .iter()
        .fold(name.to_owned(), |line, n| format!("{line} {n:.1}"));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.to_string_lossy()));
}

fn lpm_1000_routes() {
    let mut switch = corpus("basic.p4");
    let (table, action) = table_and_action(&switch, "MyIngress.ipv4_lpm", "MyIngress.ipv4_forward");
    let mut rng = 0x1234_5678;
    let mut prefixes = Vec::new();
    let mut entries = Vec::new();
    while prefixes.len() < 1000 {
        let len = [16u16, 20, 24, 28][prefixes.len() % 4];
        let value = next(&mut rng) & prefix_mask(32, len) as u32;
        let args = vec![0x0000_0000_0a0a, u128::from(next(&mut rng) % 8)];
        let entry = masked(u128::from(value), prefix_mask(32, len), action, args);
        if switch.add_entry(table, entry.clone()).is_ok() {
            prefixes.push((value, len));
            entries.push(entry);
        }
    }
    let packets: Vec<Vec<u8>> = (0..4096)
        .map(|i| {
            let (value, len) = prefixes[i % prefixes.len()];
            let host = next(&mut rng) & !(prefix_mask(32, len) as u32);
            ipv4_udp(value | host, i as u16)
        })
        .collect();
    let setup = || {
        let mut switch = corpus("basic.p4");
        for e in &entries {
            switch.add_entry(table, e.clone()).expect("a route");
        }
        switch
    };
    measure("ipv4_lpm_1000_routes", setup, &packets);
}

fn ecn_ecmp_switch() -> Switch {
    let mut switch = corpus("ecn_ecmp.p4");
    let (group, select) =
        table_and_action(&switch, "MyIngress.ecmp_group", "MyIngress.set_ecmp_select");
    let (nhop, set_nhop) = table_and_action(&switch, "MyIngress.ecmp_nhop", "MyIngress.set_nhop");
    let entry = masked(0x0a00_0000, prefix_mask(32, 8), select, vec![0, 2]);
    switch.add_entry(group, entry).expect("a route");
    for sel in 0..2u128 {
        let args = vec![0x0a0a_0a0a_0a00 + sel, 0xc0a8_0000 + sel, 2 + sel];
        let entry = masked(sel, 0x3fff, set_nhop, args);
        switch.add_entry(nhop, entry).expect("a next hop");
    }
    switch
}

fn ecn_ecmp() {
    let mut rng = 0x9abc_def0;
    let packets: Vec<Vec<u8>> = (0..4096)
        .map(|_| {
            ipv4_udp(
                0x0a00_0000 | (next(&mut rng) & 0xff_ffff),
                next(&mut rng) as u16,
            )
        })
        .collect();
    measure("ecn_ecmp", ecn_ecmp_switch, &packets);
}

/// The port benchmark's program (its routes are `const entries`) on a frame it routes.
fn ipv4_forward() {
    let packets = vec![ipv4_udp(0x0a00_0209, 4791)];
    measure(
        "ipv4_forward",
        || load("../../tests/p4/ipv4_forward.p4"),
        &packets,
    );
}

/// lossless.p4 routing a RoCEv2 frame (dataplane-p4/tests/forwarding.stf's first) to port 2.
fn lossless() {
    let setup = || {
        let mut switch = load("../../dataplane-p4/lossless.p4");
        let (lpm, set_nexthop) = table_and_action(
            &switch,
            "LosslessIngress.ipv4_lpm",
            "LosslessIngress.set_nexthop",
        );
        let (nexthop, forward) = table_and_action(
            &switch,
            "LosslessIngress.nexthop",
            "LosslessIngress.forward",
        );
        let route = masked(0x0a00_0202, prefix_mask(32, 32), set_nexthop, vec![2]);
        switch.add_entry(lpm, route).expect("a route");
        let args = vec![2, 0xaa_0000_0002, 0x800_0000_0002];
        let hop = masked(2, 0xffff, forward, args);
        switch.add_entry(nexthop, hop).expect("a next hop");
        switch
    };
    let frame =
        "00aa000000010800000000010800456a004c00014000401123340a0001010a000202c00012b7003800\
                 000400ffff0000002100000007000102030405060708090a0b0c0d0e0f101112131415161718191a\
                 1b1c1d1e1f8415647b";
    let bytes = (0..frame.len() / 2)
        .map(|i| u8::from_str_radix(&frame[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    measure("lossless", setup, &[bytes]);
}

fn main() {
    // `cargo bench -p softswitch --bench interpreter -- lpm` runs only the benchmarks whose
    // names contain "lpm" (arguments starting with `-`, such as `--bench`, are cargo's).
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    if wanted("ipv4_lpm_1000_routes") {
        lpm_1000_routes();
    }
    if wanted("ecn_ecmp") {
        ecn_ecmp();
    }
    if wanted("ipv4_forward") {
        ipv4_forward();
    }
    if wanted("lossless") {
        lossless();
    }
}
