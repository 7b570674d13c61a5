//! Interpreter throughput, one core, no I/O: packets/s and ns/packet for IPv4 LPM forwarding
//! with 1,000 routes (corpus `basic.p4`) and for ECN marking with ECMP (corpus `ecn_ecmp.p4`).
//! Run with `cargo bench -p softswitch-core --bench interpreter`.
#![forbid(unsafe_code)]

use softswitch_core::ir::{ActionCall, Entry, FieldMatch};
use softswitch_core::switch::{Clock, Switch};
use softswitch_core::table::prefix_mask;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

const PACKETS: usize = 400_000;

fn load(name: &str) -> Switch {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(name);
    let compiled = softswitch_frontend::compile_file(&path).unwrap_or_else(|e| panic!("{e}"));
    Switch::new(compiled.program, Clock::Virtual(0))
}

/// The ids of table `table` and of its action `action`.
fn table_and_action(switch: &Switch, table: &str, action: &str) -> (usize, usize) {
    let table = switch.table_id(table).expect("the table");
    let action = switch.action_id(table, action).expect("the action");
    (table, action)
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

fn measure(name: &str, switch: &mut Switch, packets: &[Vec<u8>]) {
    // Warm up, then time.
    for p in packets.iter().take(10_000) {
        switch.receive(1, p.clone());
        black_box(switch.drain_outputs().count());
    }
    let start = Instant::now();
    let mut sent = 0usize;
    for i in 0..PACKETS {
        switch.receive(1, packets[i % packets.len()].clone());
        sent += switch.drain_outputs().count();
    }
    let elapsed = start.elapsed();
    let ns = elapsed.as_nanos() as f64 / PACKETS as f64;
    println!(
        "{name}: {:.0} packets/s, {ns:.0} ns/packet ({sent} of {PACKETS} forwarded)",
        1e9 / ns
    );
}

fn lpm_1000_routes() {
    let mut switch = load("basic.p4");
    let (table, action) = table_and_action(&switch, "MyIngress.ipv4_lpm", "MyIngress.ipv4_forward");
    let mut rng = 0x1234_5678;
    let mut prefixes = Vec::new();
    while prefixes.len() < 1000 {
        let len = [16u16, 20, 24, 28][prefixes.len() % 4];
        let value = next(&mut rng) & prefix_mask(32, len) as u32;
        let entry = Entry {
            matches: vec![FieldMatch::Masked {
                value: u128::from(value),
                mask: prefix_mask(32, len),
            }],
            priority: 0,
            action: ActionCall {
                action,
                args: vec![0x0000_0000_0a0a, u128::from(next(&mut rng) % 8)],
            },
        };
        if switch.add_entry(table, entry).is_ok() {
            prefixes.push((value, len));
        }
    }
    let packets: Vec<Vec<u8>> = (0..4096)
        .map(|i| {
            let (value, len) = prefixes[i % prefixes.len()];
            let host = next(&mut rng) & !(prefix_mask(32, len) as u32);
            ipv4_udp(value | host, i as u16)
        })
        .collect();
    measure("ipv4_lpm_1000_routes", &mut switch, &packets);
}

fn ecn_ecmp() {
    let mut switch = load("ecn_ecmp.p4");
    let (group, select) =
        table_and_action(&switch, "MyIngress.ecmp_group", "MyIngress.set_ecmp_select");
    let (nhop, set_nhop) = table_and_action(&switch, "MyIngress.ecmp_nhop", "MyIngress.set_nhop");
    let lpm = |v: u32, len: u16| FieldMatch::Masked {
        value: u128::from(v),
        mask: prefix_mask(32, len),
    };
    let entry = Entry {
        matches: vec![lpm(0x0a00_0000, 8)],
        priority: 0,
        action: ActionCall {
            action: select,
            args: vec![0, 2],
        },
    };
    switch.add_entry(group, entry).expect("a route");
    for sel in 0..2u128 {
        let args = vec![0x0a0a_0a0a_0a00 + sel, 0xc0a8_0000 + sel, 2 + sel];
        let entry = Entry {
            matches: vec![FieldMatch::Masked {
                value: sel,
                mask: 0x3fff,
            }],
            priority: 0,
            action: ActionCall {
                action: set_nhop,
                args,
            },
        };
        switch.add_entry(nhop, entry).expect("a next hop");
    }
    let mut rng = 0x9abc_def0;
    let packets: Vec<Vec<u8>> = (0..4096)
        .map(|_| {
            ipv4_udp(
                0x0a00_0000 | (next(&mut rng) & 0xff_ffff),
                next(&mut rng) as u16,
            )
        })
        .collect();
    measure("ecn_ecmp", &mut switch, &packets);
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
}
