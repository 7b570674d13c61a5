//! The compiled execution path (`softswitch_core::compiled`) against the interpreter, its
//! reference: every program softswitch's tests run — the corpus (`tests/corpus`, each with its
//! STF test), `dataplane-p4/lossless.p4` with every STF test of `dataplane-p4/tests`, the
//! programs of `tests/p4` with the entries of their runtime JSON, and the programs of
//! `tests/compiled-p4` written for this test (shapes of the packet I/O the compiled path packs,
//! such as checksum lists, each with a `NAME.packets` of packets that reach them) — and, with
//! p4c, those BMv2 runs loaded from p4c's BMv2 JSON, runs on two switches, one interpreted and
//! one compiled. Each STF test runs on both (both must give
//! the same report), then random packets (the STF's packets mutated, and random bytes) go
//! through both, and what they did is compared: the frames out (port, bytes, order) and the
//! digests sent by each packet, the trace at its most verbose level (every condition, table,
//! action, extract and emit, per packet), the log, the drops, the failed assertions, every
//! register and counter cell, the direct counters of every entry. Each packet must enter at
//! least one compiled block on the compiled side and none on the interpreted side
//! (`Switch::compiled_block_runs`), so that the test fails if the compiled path is not wired in.
//!
//! No block of those programs may fall back to the interpreter. `cargo xtask test` runs a
//! few packets per test from a fixed seed; `cargo xtask fuzz-diff` many more
//! (`LOSSLESS_FUZZ_CASES` cases of [`PACKETS_PER_CASE`] packets, from `LOSSLESS_FUZZ_SEED`).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use sim::frame::{send_only, Addresses};
use sim::runtime::RuntimeConfig;
use softswitch_core::ir::Program;
use softswitch_core::runtime::CellIndex;
use softswitch_core::switch::{Clock, DigestSent, Execution, Output, Switch};
use softswitch_core::table::CounterCell;
use softswitch_core::trace::{Level, PacketId, TraceSink};
use softswitch_frontend::source::SourceMap;
use wire::ip::Ecn;

/// Random packets per case; cases per STF test and first seed unless the environment says.
const PACKETS_PER_CASE: usize = 40;
const CASES: u64 = 2;
const SEED: u64 = 1;

/// A program, the STF tests to run on it (none: random packets only) and the runtime JSON
/// its tables are filled from first (`NAME-runtime.json` beside it, the P4 tutorials' form),
/// so that the actions its entries run are compared too, and the packets that seed its random
/// ones besides its STF tests' (`NAME.packets` beside it, `packet PORT HEX` lines).
struct Subject {
    program: PathBuf,
    stfs: Vec<PathBuf>,
    runtime: Option<PathBuf>,
    packets: Vec<(u16, Vec<u8>)>,
}

fn subjects() -> Vec<Subject> {
    let root = testkit::workspace_root();
    let mut all: Vec<Subject> =
        testkit::files_with_extension(&root.join("softswitch/tests/corpus"), "p4")
            .into_iter()
            .chain(testkit::files_with_extension(&root.join("tests/p4"), "p4"))
            .chain(testkit::files_with_extension(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compiled-p4"),
                "p4",
            ))
            .map(|program| {
                let own = program.with_extension("stf");
                let stfs = if own.exists() { vec![own] } else { Vec::new() };
                let stem = program
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default();
                let runtime = program.with_file_name(format!("{stem}-runtime.json"));
                let runtime = runtime.exists().then_some(runtime);
                let packets = std::fs::read_to_string(program.with_extension("packets"))
                    .map(|text| stf_packets(&text))
                    .unwrap_or_default();
                Subject {
                    program,
                    stfs,
                    runtime,
                    packets,
                }
            })
            .collect();
    all.push(Subject {
        program: root.join("dataplane-p4/lossless.p4"),
        stfs: testkit::files_with_extension(&root.join("dataplane-p4/tests"), "stf"),
        runtime: None,
        packets: Vec::new(),
    });
    all
}

/// The trace lines a switch sent, with their level and packet.
#[derive(Clone, Default)]
struct Recorder(Rc<RefCell<Vec<String>>>);

impl TraceSink for Recorder {
    fn packet(&mut self, level: Level, packet: PacketId, line: std::fmt::Arguments<'_>) {
        self.0
            .borrow_mut()
            .push(format!("{level:?} {packet:?} {line}"));
    }

    fn switch(&mut self, level: Level, line: std::fmt::Arguments<'_>) {
        self.0.borrow_mut().push(format!("{level:?} switch {line}"));
    }
}

/// What a packet made a switch send.
#[derive(Debug, Default, PartialEq)]
struct Sent {
    frames: Vec<Output>,
    digests: Vec<DigestSent>,
}

/// One switch of the pair, with its trace.
struct Side {
    switch: Switch,
    trace: Recorder,
}

impl Side {
    fn new(
        program: &Program,
        runtime: Option<&RuntimeConfig>,
        execution: Execution,
        max_block_nodes: usize,
    ) -> Side {
        let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
        switch.set_execution_within(execution, max_block_nodes);
        if let Some(r) = runtime {
            sim::runtime::apply(r, &mut switch).unwrap_or_else(|e| panic!("{e}"));
        }
        let trace = Recorder::default();
        switch.set_trace(Some((Box::new(trace.clone()), Level::Trace)));
        Side { switch, trace }
    }

    /// Sends a packet, lets every queue empty; what left (frames and digests), and how many
    /// blocks ran compiled meanwhile.
    fn send(&mut self, port: u16, bytes: &[u8]) -> (Sent, u64) {
        let before = self.switch.compiled_block_runs();
        self.switch.receive(port, bytes.to_vec());
        self.switch.drain();
        let sent = Sent {
            frames: self.switch.drain_outputs().collect(),
            digests: self.switch.take_digests(),
        };
        (sent, self.switch.compiled_block_runs() - before)
    }

    fn take_trace(&self) -> Vec<String> {
        std::mem::take(&mut self.trace.0.borrow_mut())
    }

    /// Every cell the program's externs hold, the drops and the log, as text.
    fn state(&self) -> String {
        let s = &self.switch;
        let p = s.program();
        let mut out = String::new();
        for (i, instance) in p.instances.iter().enumerate() {
            for n in 0..s.cell_count(i).unwrap_or(0) {
                let at = CellIndex::Index(n);
                if let Ok(v) = s.read_cell::<u128>(i, at) {
                    let _ = write!(out, "{}[{n}]={v} ", instance.name);
                } else if let Ok(c) = s.read_cell::<CounterCell>(i, at) {
                    let _ = write!(out, "{}[{n}]={c:?} ", instance.name);
                }
            }
        }
        for (t, table) in p.tables.iter().enumerate() {
            let Some(counter) = table.direct_counter else {
                continue;
            };
            let handles: Vec<usize> = s.entries(t).into_iter().flatten().map(|(h, _)| h).collect();
            for h in handles {
                let c = s.read_cell::<CounterCell>(counter, CellIndex::Entry(h));
                let _ = write!(out, "{}#{h}={c:?} ", table.name);
            }
        }
        let (log, dropped) = s.log();
        let _ = write!(
            out,
            "\ndrops {:?}\nassertion failures {}\ndigests {:?}\nlog ({dropped} dropped):\n{}",
            s.drop_counts(),
            s.assertion_failures(),
            s.digests(),
            log.join("\n")
        );
        out
    }
}

/// The first line where `a` and `b` differ, with a little context.
fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    let i = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    Some(format!(
        "line {i}:\n  interpreted: {:?}\n  compiled:    {:?}",
        a.get(i),
        b.get(i)
    ))
}

/// The `packet PORT HEX` lines of an STF test.
fn stf_packets(text: &str) -> Vec<(u16, Vec<u8>)> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            if words.next()? != "packet" {
                return None;
            }
            let port = words.next()?.parse().ok()?;
            let hex: String = words.collect::<String>().replace(['*', '$'], "");
            let bytes = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .ok()?;
            Some((port, bytes))
        })
        .collect()
}

/// A RoCEv2 frame on port 1 to each IPv4 destination a runtime entry matches
/// (`hdr.ipv4.dstAddr`, exact or a prefix), so that random packets mutated from them hit the
/// routes of programs without an STF test.
fn frames_to_routes(runtime: &RuntimeConfig) -> Vec<(u16, Vec<u8>)> {
    runtime
        .table_entries
        .iter()
        .filter_map(|e| e.matches.get("hdr.ipv4.dstAddr"))
        .filter_map(|v| v.get(0).unwrap_or(v).as_str()?.parse::<Ipv4Addr>().ok())
        .map(|dst_ip| {
            let hosts = Addresses {
                src_mac: [0, 0, 0, 0, 0, 1],
                dst_mac: [0, 0, 0, 0, 0, 2],
                src_ip: Ipv4Addr::new(10, 0, 1, 1),
                dst_ip,
            };
            (1, send_only(&hosts, 0, Ecn::Ect0, 1, 1, 16))
        })
        .collect()
}

/// A random packet: a seed's mutated (bytes changed, cut or lengthened), or random bytes.
fn random_packet(rng: &mut StdRng, seeds: &[(u16, Vec<u8>)]) -> (u16, Vec<u8>) {
    if seeds.is_empty() || rng.random_ratio(1, 5) {
        let len = rng.random_range(0..200);
        let bytes = (0..len).map(|_| rng.random()).collect();
        return (rng.random_range(0..8), bytes);
    }
    let (port, mut bytes) = seeds[rng.random_range(0..seeds.len())].clone();
    for _ in 0..rng.random_range(0..4) {
        if bytes.is_empty() {
            break;
        }
        let i = rng.random_range(0..bytes.len());
        bytes[i] = rng.random();
    }
    match rng.random_range(0..6) {
        0 => bytes.truncate(rng.random_range(0..=bytes.len())),
        1 => bytes.extend((0..rng.random_range(1..40)).map(|_| rng.random::<u8>())),
        _ => {}
    }
    (port, bytes)
}

/// Checks that `what` entered no compiled block on the interpreted side and, where
/// `compiled` is given, some on the compiled side: that each path is the one it claims.
fn compiled_only(what: &str, interpreted: u64, compiled: Option<u64>) -> Result<(), String> {
    if interpreted == 0 && compiled != Some(0) {
        return Ok(());
    }
    Err(format!(
        "{what}: {interpreted} blocks ran compiled on the interpreted side, {compiled:?} on \
         the compiled side"
    ))
}

/// Runs one STF test (or none) on both paths, then random cases on the same pair, seeded by
/// the STF test's packets, `packets` and frames to the runtime's routes; the first difference.
fn compare(
    program: &Program,
    runtime: Option<&RuntimeConfig>,
    stf: Option<&Path>,
    packets: &[(u16, Vec<u8>)],
    max_block_nodes: usize,
) -> Result<(), String> {
    let (cases, seed) = testkit::fuzz_cases_and_seed(CASES, SEED);
    let text = stf.map(|p| std::fs::read_to_string(p).expect("the STF test"));
    let mut seeds = text.as_deref().map(stf_packets).unwrap_or_default();
    seeds.extend(runtime.map(frames_to_routes).unwrap_or_default());
    seeds.extend_from_slice(packets);
    let mut interp = Side::new(program, runtime, Execution::Interpreted, max_block_nodes);
    let mut compiled = Side::new(program, runtime, Execution::Compiled, max_block_nodes);
    if let Some(text) = &text {
        let mut reports = [&mut interp, &mut compiled].map(|side| {
            let (map, file) = SourceMap::of("test.stf", text.clone());
            softswitch_stf::run(&map, file, &mut side.switch)
                .map(|r| r.failures)
                .map_err(|d| d.render(&map))
        });
        let [a, b] = &mut reports;
        if a != b {
            let mut what = format!("the STF test's reports differ:\n{a:?}\n{b:?}");
            what.truncate(what.floor_char_boundary(4000));
            return Err(what);
        }
    }
    let runs = |side: &Side| side.switch.compiled_block_runs();
    let ran = text.as_deref().is_some_and(|t| !stf_packets(t).is_empty());
    compiled_only(
        "the STF test",
        runs(&interp),
        ran.then_some(runs(&compiled)),
    )?;
    if let Some(d) = first_difference(&interp.take_trace(), &compiled.take_trace()) {
        return Err(format!("the STF test: traces differ at {d}"));
    }
    // The cases follow one another on the same pair, from the state the STF test left (the
    // STF test is deterministic: running it again per case would repeat the same work).
    for case in seed..seed + cases {
        let mut rng = StdRng::seed_from_u64(case);
        for n in 1..=PACKETS_PER_CASE {
            let (port, bytes) = random_packet(&mut rng, &seeds);
            let (ours, runs_interpreted) = interp.send(port, &bytes);
            let (theirs, runs_compiled) = compiled.send(port, &bytes);
            let what = format!("case {case}, packet {n}");
            compiled_only(&what, runs_interpreted, Some(runs_compiled))?;
            if ours != theirs {
                return Err(format!("{what}: outputs differ:\n{ours:?}\n{theirs:?}"));
            }
            if let Some(d) = first_difference(&interp.take_trace(), &compiled.take_trace()) {
                return Err(format!("{what}: traces differ at {d}"));
            }
        }
        let (a, b) = (interp.state(), compiled.state());
        if a != b {
            let d = first_difference(
                &a.lines().map(str::to_string).collect::<Vec<_>>(),
                &b.lines().map(str::to_string).collect::<Vec<_>>(),
            );
            return Err(format!(
                "case {case}: state differs at {}",
                d.unwrap_or_default()
            ));
        }
    }
    Ok(())
}

fn from_source(program: &Path) -> Program {
    softswitch_frontend::compile_file(program)
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
        .program
}

/// Runs every subject's tests on both paths (`program` loads it); the differences.
fn differences(load: impl Fn(&Subject) -> Option<Program>, max_block_nodes: usize) -> Vec<String> {
    let mut differences = Vec::new();
    let subjects = subjects();
    assert!(subjects.len() >= 40, "the programs are missing");
    for subject in subjects {
        let Some(program) = load(&subject) else {
            continue;
        };
        let stfs: Vec<Option<&Path>> = if subject.stfs.is_empty() {
            vec![None]
        } else {
            subject.stfs.iter().map(|p| Some(p.as_path())).collect()
        };
        let runtime = subject
            .runtime
            .as_deref()
            .map(|p| sim::runtime::load(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
        for stf in stfs {
            if let Err(e) = compare(
                &program,
                runtime.as_ref(),
                stf,
                &subject.packets,
                max_block_nodes,
            ) {
                differences.push(format!("{} {stf:?}: {e}", subject.program.display()));
            }
        }
    }
    differences
}

#[test]
fn compiled_and_interpreted_agree_on_every_program() {
    let d = differences(
        |s| Some(from_source(&s.program)),
        softswitch_core::compiled::MAX_BLOCK_NODES,
    );
    assert!(d.is_empty(), "{}", d.join("\n\n"));
}

#[test]
fn no_block_falls_back_to_the_interpreter() {
    let mut fallbacks = Vec::new();
    for subject in subjects() {
        let mut switch = Switch::new(from_source(&subject.program), Clock::Virtual(0));
        switch.set_execution(Execution::Compiled);
        assert_eq!(switch.execution(), Execution::Compiled);
        fallbacks.extend(
            switch
                .compile_fallbacks()
                .iter()
                .map(|f| format!("{}: {f}", subject.program.display())),
        );
    }
    assert!(fallbacks.is_empty(), "{}", fallbacks.join("\n"));
}

/// A program partly compiled (blocks past a small limit fall back) runs as the interpreter
/// does; each fallback is listed with its reason, and none goes into the program's log.
#[test]
fn blocks_that_fall_back_are_listed_and_run_as_the_interpreter_does() {
    let lossless = testkit::workspace_root().join("dataplane-p4/lossless.p4");
    let program = from_source(&lossless);
    let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
    switch.set_execution_within(Execution::Compiled, 40);
    let fallbacks = switch.compile_fallbacks().to_vec();
    assert!(
        fallbacks.iter().any(|f| f.block.starts_with("control ")),
        "a control of lossless.p4 has more than 40 nodes: {fallbacks:?}"
    );
    assert!(
        fallbacks.len() < program.bodies.len() + 5,
        "some blocks of lossless.p4 compile within 40 nodes"
    );
    for f in &fallbacks {
        assert!(f.to_string().contains("more than 40 IR nodes"), "{f}");
    }
    assert!(switch.log().0.is_empty(), "{:?}", switch.log());
    // Compiling again within the same limit keeps the compiled form; within another, compiles
    // anew.
    switch.set_execution_within(Execution::Compiled, 40);
    assert_eq!(switch.compile_fallbacks(), fallbacks.as_slice());
    switch.set_execution(Execution::Compiled);
    assert!(switch.compile_fallbacks().is_empty());
    let subject = Subject {
        program: lossless.clone(),
        stfs: Vec::new(),
        runtime: None,
        packets: Vec::new(),
    };
    let d = differences(
        |s| (s.program == subject.program).then(|| program.clone()),
        40,
    );
    assert!(d.is_empty(), "{}", d.join("\n\n"));
}

/// Each program p4c compiles for BMv2, loaded from its JSON, runs alike on both paths.
#[test]
fn compiled_and_interpreted_agree_on_p4c_json_programs() {
    let test = "compiled_and_interpreted_agree_on_p4c_json_programs";
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip(test) else {
        return;
    };
    let bmv2: Vec<PathBuf> = testkit::bmv2::bmv2_programs();
    let loaded = std::cell::Cell::new(0);
    let d = differences(
        |s| {
            if !bmv2.contains(&s.program) {
                return None;
            }
            loaded.set(loaded.get() + 1);
            let json = testkit::bmv2::compiled(toolchain, &s.program)
                .unwrap_or_else(|e| panic!("{e}"))
                .json;
            let bytes = std::fs::read(&json).expect("the JSON");
            let loaded = softswitch_bmv2json::load(&bytes)
                .unwrap_or_else(|e| panic!("{}: {e}", json.display()));
            Some(loaded.program)
        },
        softswitch_core::compiled::MAX_BLOCK_NODES,
    );
    assert!(
        loaded.get() >= 10,
        "only {} programs from p4c's JSON",
        loaded.get()
    );
    assert!(d.is_empty(), "{}", d.join("\n\n"));
}

/// A packet's slots start zeroed but for the program's locals, which it zeroes where it
/// declares them, however the last packet left the slot buffer the switch reuses: a header the
/// parser did not extract, a metadata field, a local of the control and one of its `apply`,
/// each read before it is written (`tests/compiled-p4/slot_reuse.p4`), on both paths.
#[test]
fn each_packet_starts_from_zeroed_slots_on_both_paths() {
    let program =
        from_source(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compiled-p4/slot_reuse.p4"));
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
            .collect()
    };
    let tagged = hex("ffffffffffffffffffffffff1234aabbccdd");
    let plain = hex("ffffffffffffffffffffffff0800aabbccdd");
    // dst: seen ++ the tag's value's low half; src: the local ++ the control's local's low half.
    let tagged_out = hex("00000001ccddaabbccdeccde1234aabbccdd");
    let plain_out = hex("0000000100000000000100010800aabbccdd");
    for execution in [Execution::Interpreted, Execution::Compiled] {
        let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
        switch.set_execution(execution);
        for (input, expected) in [(&tagged, &tagged_out), (&plain, &plain_out)].repeat(2) {
            switch.receive(0, input.clone());
            switch.drain();
            let out: Vec<Output> = switch.drain_outputs().collect();
            assert_eq!(out.len(), 1, "{execution:?}");
            assert_eq!(
                (out[0].port, &out[0].data),
                (1, expected),
                "{execution:?}: after {input:02x?}"
            );
        }
    }
}
