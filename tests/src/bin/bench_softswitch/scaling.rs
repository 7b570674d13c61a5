//! Scaling of softswitch, no I/O: the interpreter's rate against the size of one table (10 to
//! 1,000,000 entries, exact, lpm and ternary, installed through the runtime interface), against
//! the number of ports and against the frame size. Prints tables and draws them into one SVG
//! (the labs' plotting code). The simulator's speed on whole fabrics is `cargo xtask bench sim`.
//!
//! Rates are per second of this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not of the
//! wall clock: on a machine shared with other work the thread is off its core for much of
//! the wall-clock time, and only its own time measures what it does.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use lossless::output::{draw_panels, Line, Panel};
use softswitch_core::{
    ir::{ActionCall, Entry, FieldMatch, Program},
    switch::{Clock, Switch},
    table::prefix_mask,
};
use softswitch_frontend::source::SourceMap;

/// Table sizes measured.
pub const TABLE_SIZES: [usize; 6] = [10, 100, 1_000, 10_000, 100_000, 1_000_000];
/// Port counts measured (the table routes to every one, and frames arrive on every one).
const PORT_COUNTS: [u16; 5] = [2, 4, 16, 64, 256];
/// Frame sizes measured, bytes.
const FRAME_SIZES: [usize; 5] = [64, 256, 512, 1024, 1500];
/// Routes of the port and frame-size runs.
const ROUTES: usize = 1_000;
/// Frames timed per measurement.
const PACKETS: usize = 300_000;
/// Distinct frames cycled through (each to an installed entry).
const DISTINCT: usize = 4096;
/// A table's match kind, as the P4 source spells it.
#[derive(Clone, Copy)]
enum Kind {
    Exact,
    Lpm,
    Ternary,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Exact, Kind::Lpm, Kind::Ternary];

    fn name(self) -> &'static str {
        match self {
            Kind::Exact => "exact",
            Kind::Lpm => "lpm",
            Kind::Ternary => "ternary",
        }
    }
}

/// A v1model program with one table on the IPv4 destination, of `kind`, sending to the port
/// its entry names.
fn source(kind: Kind) -> String {
    format!(
        r#"#include <core.p4>
#include <v1model.p4>
header ethernet_t {{ bit<48> dst; bit<48> src; bit<16> ether_type; }}
header ipv4_t {{
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len; bit<16> id; bit<3> flags;
    bit<13> frag; bit<8> ttl; bit<8> protocol; bit<16> checksum; bit<32> src; bit<32> dst;
}}
struct headers_t {{ ethernet_t ethernet; ipv4_t ipv4; }}
struct meta_t {{ }}
parser MyParser(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t s) {{
    state start {{ p.extract(h.ethernet); transition select(h.ethernet.ether_type) {{ 0x0800: ipv4; default: accept; }} }}
    state ipv4 {{ p.extract(h.ipv4); transition accept; }}
}}
control MyVerify(inout headers_t h, inout meta_t m) {{ apply {{ }} }}
control MyIngress(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {{
    action forward(bit<9> port) {{ s.egress_spec = port; h.ipv4.ttl = h.ipv4.ttl - 1; }}
    action drop() {{ mark_to_drop(s); }}
    table routes {{
        key = {{ h.ipv4.dst: {kind}; }}
        actions = {{ forward; drop; }}
        size = 1100000;
        default_action = drop();
    }}
    apply {{ if (h.ipv4.isValid()) {{ routes.apply(); }} }}
}}
control MyEgress(inout headers_t h, inout meta_t m, inout standard_metadata_t s) {{ apply {{ }} }}
control MyCompute(inout headers_t h, inout meta_t m) {{ apply {{ }} }}
control MyDeparser(packet_out p, in headers_t h) {{ apply {{ p.emit(h.ethernet); p.emit(h.ipv4); }} }}
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
"#,
        kind = kind.name()
    )
}

fn compile(name: &str, text: String) -> anyhow::Result<Program> {
    let mut map = SourceMap::new();
    let file = map.add(name.to_owned(), text);
    let compiled = softswitch_frontend::compile(&mut map, file)
        .map_err(|d| anyhow::anyhow!(d.render(&map)))?;
    Ok(compiled.program)
}

/// A deterministic pseudo-random sequence (xorshift32).
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

/// Ternary masks of the ternary runs: ACL-like shapes, several per table.
const TERNARY_MASKS: [u32; 8] = [
    0xffff_ffff,
    0xffff_ff00,
    0xffff_0000,
    0xff00_ff00,
    0xffff_fff0,
    0x00ff_ffff,
    0xfff0_0000,
    0xff0f_f0ff,
];

/// A switch running a `kind` table with `entries` entries, installed through the runtime
/// interface, sending to ports 1..=`ports`; and the destination addresses of frames that hit
/// installed entries.
fn loaded(
    program: &Program,
    kind: Kind,
    entries: usize,
    ports: u16,
) -> anyhow::Result<(Switch, Vec<u32>)> {
    let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
    let table = switch
        .table_id("MyIngress.routes")
        .context("the routes table")?;
    let action = switch
        .action_id(table, "MyIngress.forward")
        .context("the forward action")?;
    let mut rng = Rng(0x1234_5678);
    let mut hits = Vec::with_capacity(DISTINCT);
    let mut installed = 0;
    for attempt in 0.. {
        if installed == entries {
            break;
        }
        if attempt > 20 * entries {
            bail!("{entries} distinct {} entries not found", kind.name());
        }
        let (value, mask, priority) = match kind {
            Kind::Exact => (rng.next(), u32::MAX, 0),
            Kind::Lpm => {
                // Lengths from /8 to /32, as a routing table has them (the short ones fill up).
                let len = 8 + (rng.next() % 25) as u16;
                let mask = prefix_mask(32, len) as u32;
                (rng.next() & mask, mask, 0)
            }
            Kind::Ternary => {
                let mask = TERNARY_MASKS[installed % TERNARY_MASKS.len()];
                (rng.next() & mask, mask, installed as i64 + 1)
            }
        };
        let port = 1 + (rng.next() % u32::from(ports)) as u128;
        let entry = Entry {
            matches: vec![FieldMatch::Masked {
                value: u128::from(value),
                mask: u128::from(mask),
            }],
            priority,
            action: ActionCall {
                action,
                args: vec![port],
            },
        };
        if switch.add_entry(table, entry).is_ok() {
            installed += 1;
            if hits.len() < DISTINCT || rng.next().is_multiple_of(8) {
                let address = value | (rng.next() & !mask);
                if hits.len() < DISTINCT {
                    hits.push(address);
                } else {
                    let i = rng.next() as usize % DISTINCT;
                    hits[i] = address;
                }
            }
        }
    }
    Ok((switch, hits))
}

/// An IPv4/UDP frame of `size` bytes to `dst`.
fn frame(dst: u32, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size);
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([10, 0, 1, 9], dst.to_be_bytes(), 64)
        .udp(4000, 4791)
        .write(&mut out, &vec![0u8; size.saturating_sub(42)])
        .expect("writing to a Vec");
    out
}

/// The CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid pointer to a timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID is always there on Linux");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Frames per CPU second through `switch`, frames arriving on ports 1..=`ports` in turn.
fn rate(switch: &mut Switch, frames: &[Vec<u8>], ports: u16) -> anyhow::Result<f64> {
    // Sends `count` frames; returns how many came out.
    let run = |count: usize, switch: &mut Switch| {
        let mut forwarded = 0usize;
        for i in 0..count {
            let port = (i % usize::from(ports)) as u16 + 1;
            switch.receive(port, frames[i % frames.len()].clone());
            if i % 64 == 63 {
                forwarded += switch.drain_outputs().count();
            }
        }
        forwarded + switch.drain_outputs().count()
    };
    run(PACKETS / 10, switch);
    let start = thread_cpu_time();
    let forwarded = run(PACKETS, switch);
    let elapsed = (thread_cpu_time() - start).as_secs_f64();
    if forwarded * 10 < PACKETS * 9 {
        bail!("only {forwarded} of {PACKETS} frames were forwarded: the entries are not hit");
    }
    Ok(PACKETS as f64 / elapsed)
}

/// One table size's figures: (entries, frames per CPU s, install wall s).
pub type TableRow = (usize, f64, f64);

/// The figures of a scaling run.
pub struct Scaling {
    /// (kind, one row per table size).
    pub tables: Vec<(&'static str, Vec<TableRow>)>,
    /// (ports, frames per CPU s).
    pub ports: Vec<(u16, f64)>,
    /// (frame bytes, frames per CPU s).
    pub sizes: Vec<(usize, f64)>,
}

/// Measures everything (single rounds: the figures span orders of magnitude).
pub fn measure() -> anyhow::Result<Scaling> {
    let mut tables = Vec::new();
    for kind in Kind::ALL {
        let program = compile(&format!("{}.p4", kind.name()), source(kind))?;
        let mut rows = Vec::new();
        for entries in TABLE_SIZES {
            let start = Instant::now();
            let (mut switch, hits) = loaded(&program, kind, entries, 4)?;
            let install = start.elapsed().as_secs_f64();
            let frames: Vec<Vec<u8>> = hits.iter().map(|&dst| frame(dst, 64)).collect();
            let pps = rate(&mut switch, &frames, 4)?;
            eprintln!(
                "scaling: {} table, {entries} entries: {pps:.0} frames/s (installed in {install:.2} s)",
                kind.name()
            );
            rows.push((entries, pps, install));
        }
        tables.push((kind.name(), rows));
    }
    let lpm = compile("lpm.p4", source(Kind::Lpm))?;
    let mut ports = Vec::new();
    for count in PORT_COUNTS {
        let (mut switch, hits) = loaded(&lpm, Kind::Lpm, ROUTES, count)?;
        let frames: Vec<Vec<u8>> = hits.iter().map(|&dst| frame(dst, 64)).collect();
        let pps = rate(&mut switch, &frames, count)?;
        eprintln!("scaling: {count} ports: {pps:.0} frames/s");
        ports.push((count, pps));
    }
    let mut sizes = Vec::new();
    for size in FRAME_SIZES {
        let (mut switch, hits) = loaded(&lpm, Kind::Lpm, ROUTES, 4)?;
        let frames: Vec<Vec<u8>> = hits.iter().map(|&dst| frame(dst, size)).collect();
        let pps = rate(&mut switch, &frames, 4)?;
        eprintln!("scaling: {size}-byte frames: {pps:.0} frames/s");
        sizes.push((size, pps));
    }
    Ok(Scaling {
        tables,
        ports,
        sizes,
    })
}

/// Prints the tables and draws the plot into `svg`.
pub fn report(scaling: &Scaling, svg: &Path) -> anyhow::Result<()> {
    println!(
        "\nscaling: the interpreter alone, 64-byte frames over 4 ports, one table on the IPv4 \
         destination; frames per second of the thread's CPU time (install: wall seconds)"
    );
    println!(
        "{:<10} {:>10} {:>14} {:>12}",
        "kind", "entries", "frames/s", "install s"
    );
    for (kind, rows) in &scaling.tables {
        for (entries, pps, install) in rows {
            println!("{kind:<10} {entries:>10} {pps:>14.0} {install:>12.2}");
        }
    }
    println!(
        "ratios, measured in this run: a frame's CPU time with the most entries / with the fewest \
         (the issue's aim: at most 1.5 for exact and lpm)"
    );
    for (kind, rows) in &scaling.tables {
        if let (Some(few), Some(most)) = (rows.first(), rows.last()) {
            println!(
                "  {kind:<8} {} entries / {}: {:.2}",
                most.0,
                few.0,
                few.1 / most.1
            );
        }
    }
    println!("\nscaling: ports (lpm, {ROUTES} routes, 64-byte frames in on every port, out to every port)");
    println!("{:<10} {:>14}", "ports", "frames/s");
    for (ports, pps) in &scaling.ports {
        println!("{ports:<10} {pps:>14.0}");
    }
    println!("\nscaling: frame size (lpm, {ROUTES} routes, 4 ports)");
    println!("{:<10} {:>14} {:>10}", "bytes", "frames/s", "Gb/s");
    for (size, pps) in &scaling.sizes {
        println!(
            "{size:<10} {pps:>14.0} {:>10.2}",
            pps * *size as f64 * 8.0 / 1e9
        );
    }
    let log = |n: f64| n.log10();
    let top = |values: &mut dyn Iterator<Item = f64>| values.fold(0.0f64, f64::max) * 1.1;
    let table_lines: Vec<Line> = scaling
        .tables
        .iter()
        .map(|(kind, rows)| {
            Line::solid(
                *kind,
                rows.iter()
                    .map(|&(n, pps, _)| (log(n as f64), pps / 1e6))
                    .collect(),
            )
        })
        .collect();
    let tables_top = top(&mut scaling
        .tables
        .iter()
        .flat_map(|(_, r)| r.iter().map(|r| r.1 / 1e6)));
    let panels = [
        Panel {
            caption: "interpreter rate against table size".into(),
            x_desc: "log10(entries)".into(),
            y_desc: "million frames per CPU second".into(),
            x: 1.0..6.0,
            y: 0.0..tables_top,
            lines: table_lines,
        },
        Panel {
            caption: "interpreter rate against ports and frame size (lpm, 1,000 routes)".into(),
            x_desc: "log2(ports), log2(frame bytes / 64)".into(),
            y_desc: "million frames per CPU second".into(),
            x: 0.0..8.0,
            y: 0.0..top(&mut scaling
                .ports
                .iter()
                .map(|p| p.1 / 1e6)
                .chain(scaling.sizes.iter().map(|s| s.1 / 1e6))),
            lines: vec![
                Line::solid(
                    "ports",
                    scaling
                        .ports
                        .iter()
                        .map(|&(p, pps)| (f64::from(p).log2(), pps / 1e6))
                        .collect(),
                ),
                Line::solid(
                    "frame size",
                    scaling
                        .sizes
                        .iter()
                        .map(|&(s, pps)| ((s as f64 / 64.0).log2(), pps / 1e6))
                        .collect(),
                ),
            ],
        },
    ];
    if let Some(dir) = svg.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    draw_panels(svg, (1000, 360), &panels)?;
    println!("\nscaling plot: {}", svg.display());
    Ok(())
}
