//! Differential testing of softswitch against BMv2: for every program BMv2 runs (but those
//! left out in `profile.rs`, with their reasons), random cases — a seed test's set-up, random
//! table entries within the program's P4Info, then seed, mutated and random packets — run on
//! softswitch and on BMv2's simple_switch (p4c's JSON), and everything compared: whether each
//! entry is accepted, the packets each input packet makes (port, bytes, order per port), every
//! register cell (but those holding times), counter cells (every cell softswitch counted in,
//! the first eight and four at random; BMv2's CLI reads counters one cell at a time), and the
//! direct counter of every random entry.
//!
//! `cargo xtask test` runs a few cases per program from a fixed seed; `cargo xtask fuzz-diff`
//! many more (`LOSSLESS_FUZZ_CASES`, from seed `LOSSLESS_FUZZ_SEED`). A difference fails the
//! test, saying where, and leaves the case as an STF file under `target/fuzz-diff/`, with what
//! softswitch sent as its expectations: `softswitch stf --target bmv2 PROGRAM FILE` replays it.
//! Needs p4c and BMv2: skipped without them outside CI, a failure under CI.

mod case;
mod profile;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::IndexedRandom as _;
use rand::{Rng as _, SeedableRng as _};
use softswitch_core::ir::{CounterKind, Entry, FieldMatch, MatchKind, Program};
use softswitch_core::runtime::CellIndex;
use softswitch_core::switch::{Clock, Switch};
use softswitch_core::table::CounterCell;
use softswitch_frontend::source::SourceMap;
use softswitch_stf::bmv2::{Bmv2Target, Bmv2Tools};
use softswitch_stf::{Sent, Target};

use case::Seeds;
use profile::Profile;

/// Cases per program, and the first case's seed, unless the environment says otherwise.
const CASES: u64 = 3;
const SEED: u64 = 1;
/// Random entries at most, and packets, per case.
const ENTRIES: usize = 12;
const PACKETS: usize = 30;
/// Programs run at once (each on a switch of its own).
const AT_ONCE: usize = 2;

#[test]
fn softswitch_and_bmv2_agree_on_random_cases() {
    let test = "softswitch_and_bmv2_agree_on_random_cases";
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip(test) else {
        return;
    };
    let tools = Bmv2Tools::from(toolchain);
    let (cases, seed) = testkit::fuzz_cases_and_seed(CASES, SEED);
    let profiles = profile::profiles(&testkit::workspace_root());
    assert!(profiles.len() >= 8, "the programs are missing");
    let mut differences = Vec::new();
    for group in profiles.chunks(AT_ONCE) {
        std::thread::scope(|scope| {
            let running: Vec<_> = group
                .iter()
                .map(|profile| {
                    let tools = &tools;
                    scope.spawn(move || {
                        let json = testkit::bmv2::compiled(toolchain, &profile.program)
                            .unwrap_or_else(|e| panic!("{e}"))
                            .json;
                        program_cases(profile, tools, &json, cases, seed)
                    })
                })
                .collect();
            for run in running {
                differences.extend(run.join().expect("no panic"));
            }
        });
    }
    eprintln!(
        "differential: {} programs, {cases} cases each from seed {seed}",
        profiles.len()
    );
    assert!(
        differences.is_empty(),
        "softswitch and BMv2 differ:\n\n{}",
        differences.join("\n\n")
    );
}

/// Runs `cases` cases of one program from seed `seed` on; its differences.
fn program_cases(
    profile: &Profile,
    tools: &Bmv2Tools,
    json: &Path,
    cases: u64,
    seed: u64,
) -> Vec<String> {
    let mut map = SourceMap::new();
    let text = std::fs::read_to_string(&profile.program).expect("the program");
    let file = map.add(profile.program.display().to_string(), text);
    let softswitch_frontend::Compiled {
        program,
        control_plane,
        ..
    } = softswitch_frontend::compile(&mut map, file)
        .unwrap_or_else(|d| panic!("{}", d.render(&map)));
    let seeds = Seeds::read(profile, &program);
    let mut bmv2 = match Bmv2Target::start(tools, json, program.clone()) {
        Ok(b) => b,
        Err(e) => return vec![format!("{}: {e}", profile.program.display())],
    };
    let mut differences = Vec::new();
    let mut tally = Tally::default();
    for n in seed..seed + cases {
        let mut case = Case {
            profile,
            program: &program,
            control_plane: &control_plane,
            seeds: &seeds,
            rng: StdRng::seed_from_u64(n),
            softswitch: Switch::new(program.clone(), Clock::Virtual(0)),
            transcript: Vec::new(),
            direct: Vec::new(),
            tally: &mut tally,
        };
        let outcome = bmv2.reset().and_then(|()| case.run(&mut bmv2));
        if let Err(what) = outcome {
            // What the failed case left on the switch may not be undone: the next one gets a
            // switch of its own.
            match Bmv2Target::start(tools, json, program.clone()) {
                Ok(fresh) => bmv2 = fresh,
                Err(e) => return vec![format!("{}: {e}", profile.program.display())],
            }
            let file = case.save(n);
            differences.push(format!(
                "{} (seed {n}): {what}\nthe case: {}",
                profile.program.display(),
                file.display()
            ));
        }
    }
    eprintln!(
        "differential: {}: {cases} cases, {} entries accepted and {} refused by both, {} of {} \
         packets sent something",
        profile.program.display(),
        tally.accepted,
        tally.refused,
        tally.forwarded,
        tally.packets
    );
    differences
}

/// What a program's cases did, to show how much they reached.
#[derive(Debug, Default)]
struct Tally {
    accepted: usize,
    refused: usize,
    packets: usize,
    forwarded: usize,
}

/// One case under way.
struct Case<'a> {
    profile: &'a Profile,
    program: &'a Program,
    control_plane: &'a softswitch_frontend::cpinfo::CpInfo,
    seeds: &'a Seeds,
    rng: StdRng,
    softswitch: Switch,
    /// The case so far, as STF lines.
    transcript: Vec<String>,
    /// Random entries of tables with a direct counter: (counter, table, softswitch's handle,
    /// BMv2's handle).
    direct: Vec<(usize, usize, usize, usize)>,
    tally: &'a mut Tally,
}

impl Case<'_> {
    /// Runs the case on both switches; the first difference, described.
    fn run(&mut self, bmv2: &mut Bmv2Target) -> Result<(), String> {
        self.setup(bmv2)?;
        self.entries(bmv2)?;
        for i in 0..PACKETS {
            let (port, bytes) = self.packet();
            self.transcript
                .push(format!("packet {port} {}", hex(&bytes)));
            let ours = outputs(&mut self.softswitch, port, &bytes)?;
            let theirs = outputs(bmv2, port, &bytes)?;
            self.tally.packets += 1;
            self.tally.forwarded += usize::from(!ours.is_empty());
            for (port, data) in ours
                .iter()
                .flat_map(|(p, all)| all.iter().map(move |d| (p, d)))
            {
                self.transcript
                    .push(format!("expect {port} {} $", hex(data)));
            }
            if ours != theirs {
                return Err(format!(
                    "packet {i} ({} bytes on port {port}: {})\n  softswitch sent {}\n  BMv2 sent {}",
                    bytes.len(),
                    hex(&bytes),
                    shown(&ours),
                    shown(&theirs)
                ));
            }
            self.transcript.push("wait".into());
        }
        self.state(bmv2)
    }

    /// A random packet the program gives a defined outcome.
    fn packet(&mut self) -> (u16, Vec<u8>) {
        loop {
            let (port, bytes) = case::packet(&mut self.rng, self.seeds, self.profile.min_packet);
            if self.profile.defined.is_none_or(|defined| defined(&bytes)) {
                return (port, bytes);
            }
        }
    }

    /// A seed test's set-up, through the STF runner on both switches.
    fn setup(&mut self, bmv2: &mut Bmv2Target) -> Result<(), String> {
        let Some(text) = self.seeds.setups.choose(&mut self.rng).cloned() else {
            return Ok(());
        };
        self.transcript.push(text.trim_end().to_owned());
        let mut map = SourceMap::new();
        let file = map.add("set-up", text);
        let targets: [(&str, &mut dyn Target); 2] =
            [("softswitch", &mut self.softswitch), ("BMv2", bmv2)];
        for (name, target) in targets {
            match softswitch_stf::run_on(&map, file, target) {
                Ok(report) if report.passed() => {}
                Ok(report) => {
                    return Err(format!("{name} failed the set-up: {:?}", report.failures))
                }
                Err(d) => return Err(format!("{name} refused the set-up: {}", d.render(&map))),
            }
        }
        Ok(())
    }

    /// Random entries and default actions; both switches must accept or refuse each alike.
    fn entries(&mut self, bmv2: &mut Bmv2Target) -> Result<(), String> {
        let tables = case::writable_tables(self.program);
        if tables.is_empty() {
            return Ok(());
        }
        for _ in 0..self.rng.random_range(0..=ENTRIES) {
            let table = *tables.choose(&mut self.rng).expect("not empty");
            let t = &self.program.tables[table];
            if self.rng.random_range(0..6) == 0 && !t.const_default {
                let Some(call) = case::action_call(
                    &mut self.rng,
                    self.program,
                    self.control_plane,
                    table,
                    true,
                    self.profile,
                    self.seeds,
                ) else {
                    continue;
                };
                self.transcript
                    .push(format!("setdefault {} {}", t.name, self.call_text(&call)));
                let ours = self.softswitch.set_default(table, call.clone());
                let theirs = Target::set_default(bmv2, table, call);
                agree(
                    "the default action",
                    ours.map_err(|e| e.to_string()),
                    theirs,
                )?;
                continue;
            }
            let Some(entry) = case::entry(
                &mut self.rng,
                self.program,
                self.control_plane,
                table,
                self.profile,
                self.seeds,
            ) else {
                continue;
            };
            let line = self.entry_text(table, &entry);
            let ours = self.softswitch.add_entry(table, entry.clone());
            let theirs = Target::add_entry(bmv2, table, entry);
            let both = agree("the entry", ours.map_err(|e| e.to_string()), theirs);
            self.record(line, &both);
            if let (Some(counter), Some((a, b))) = (t.direct_counter, both?) {
                self.direct.push((counter, table, a, b));
            }
        }
        Ok(())
    }

    /// Registers (but those holding times), counters and the random entries' direct
    /// counters, compared.
    fn state(&mut self, bmv2: &mut Bmv2Target) -> Result<(), String> {
        for (i, instance) in self.program.instances.iter().enumerate() {
            let timed = self
                .profile
                .time_registers
                .iter()
                .any(|r| instance.name == *r);
            match instance.kind.type_name() {
                "register" if !timed => {
                    let ours = Target::register_cells(&mut self.softswitch, i)?;
                    let theirs = bmv2.register_cells(i)?;
                    if let Some(at) =
                        (0..ours.len().max(theirs.len())).find(|&c| ours.get(c) != theirs.get(c))
                    {
                        return Err(format!(
                            "register {}[{at}]: softswitch {:?}, BMv2 {:?}",
                            instance.name,
                            ours.get(at),
                            theirs.get(at)
                        ));
                    }
                }
                "counter" => {
                    let size = instance.kind.cells().unwrap_or(0);
                    let kind = instance
                        .kind
                        .counter_kind()
                        .unwrap_or(CounterKind::PacketsAndBytes);
                    let mut cells: Vec<usize> = (0..size as usize)
                        .filter(|&n| {
                            let c = self.softswitch.read_cell(i, CellIndex::Index(n));
                            let c: CounterCell = c.expect("a counter cell");
                            c.packets != 0 || c.bytes != 0
                        })
                        .collect();
                    cells.extend(0..(size as usize).min(8));
                    cells.extend((0..4).map(|_| self.rng.random_range(0..size as usize)));
                    cells.sort_unstable();
                    cells.dedup();
                    for cell in cells {
                        let ours = self.softswitch.counter(i, CellIndex::Index(cell))?;
                        let theirs = bmv2.counter(i, CellIndex::Index(cell))?;
                        if counted(kind, ours) != counted(kind, theirs) {
                            return Err(format!(
                                "counter {}[{cell}]: softswitch {ours:?}, BMv2 {theirs:?}",
                                instance.name
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        for &(counter, table, a, b) in &self.direct {
            let ours = self.softswitch.counter(counter, CellIndex::Entry(a))?;
            let theirs = bmv2.counter(counter, CellIndex::Entry(b))?;
            let kind = self.program.instances[counter]
                .kind
                .counter_kind()
                .unwrap_or(CounterKind::PacketsAndBytes);
            if counted(kind, ours) != counted(kind, theirs) {
                return Err(format!(
                    "direct counter {} of an entry of {}: softswitch {ours:?}, BMv2 {theirs:?}",
                    self.program.instances[counter].name, self.program.tables[table].name
                ));
            }
        }
        Ok(())
    }

    /// Adds a control-plane line to the transcript, commented out if both switches refused it.
    fn record<T>(&mut self, line: String, outcome: &Result<Option<T>, String>) {
        match outcome {
            Ok(None) => {
                self.tally.refused += 1;
                self.transcript.push(format!("# refused by both: {line}"));
            }
            _ => {
                self.tally.accepted += 1;
                self.transcript.push(line);
            }
        }
    }

    /// `name(param:value, ...)` as STF writes a call.
    fn call_text(&self, call: &softswitch_core::ir::ActionCall) -> String {
        let action = &self.program.actions[call.action];
        let args: Vec<String> = self
            .program
            .action_data(call.action)
            .zip(&call.args)
            .map(|(p, v)| format!("{}:{v:#x}", p.name))
            .collect();
        format!("{}({})", action.name, args.join(", "))
    }

    /// An `add` line for `entry` of `table`.
    fn entry_text(&self, table: usize, entry: &Entry) -> String {
        let t = &self.program.tables[table];
        let mut words = vec!["add".to_owned(), t.name.clone()];
        if entry.priority != 0 {
            words.push(entry.priority.to_string());
        }
        for (key, m) in t.keys.iter().zip(&entry.matches) {
            let value = match (key.kind, *m) {
                (MatchKind::Lpm, FieldMatch::Masked { value, mask }) => {
                    format!("{value:#x}/{}", mask.count_ones())
                }
                (MatchKind::Exact, FieldMatch::Masked { value, .. }) => format!("{value:#x}"),
                (_, FieldMatch::Masked { value, mask }) => format!("{value:#x}&&&{mask:#x}"),
                (_, FieldMatch::Range { lo, hi }) => format!("{lo:#x}..{hi:#x}"),
            };
            words.push(format!("{}:{value}", key.name));
        }
        words.push(self.call_text(&entry.action));
        words.join(" ")
    }

    /// Writes the case as an STF file under `target/fuzz-diff/`; its path.
    fn save(&self, seed: u64) -> PathBuf {
        let dir = testkit::bmv2::target_dir().join("fuzz-diff");
        let stem = self
            .profile
            .program
            .file_stem()
            .map_or("program".into(), |s| s.to_string_lossy());
        let file = dir.join(format!("{stem}-{seed}.stf"));
        let text = format!(
            "# A differential case of {} (seed {seed}); the expectations are softswitch's.\n{}\n",
            self.profile.program.display(),
            self.transcript.join("\n")
        );
        let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, text));
        if let Err(e) = written {
            eprintln!("writing {}: {e}", file.display());
        }
        file
    }
}

/// What `target` sends for `bytes` on `port`, once it is done with them: per port, in order.
fn outputs(
    target: &mut dyn Target,
    port: u16,
    bytes: &[u8],
) -> Result<BTreeMap<u16, Vec<Vec<u8>>>, String> {
    target.send(port, bytes.to_vec())?;
    target.wait()?;
    let mut by_port: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
    for Sent { port, data, .. } in target.take_outputs()? {
        by_port.entry(port).or_default().push(data);
    }
    Ok(by_port)
}

/// Both switches accepted (what each gave back), or both refused (`None`).
fn agree<A, B>(
    what: &str,
    ours: Result<A, String>,
    theirs: Result<B, String>,
) -> Result<Option<(A, B)>, String> {
    match (ours, theirs) {
        (Ok(a), Ok(b)) => Ok(Some((a, b))),
        (Err(_), Err(_)) => Ok(None),
        (Ok(_), Err(e)) => Err(format!("softswitch accepted {what}, BMv2 refused it: {e}")),
        (Err(e), Ok(_)) => Err(format!("BMv2 accepted {what}, softswitch refused it: {e}")),
    }
}

/// What a counter of `kind` counts of a cell.
fn counted(kind: CounterKind, cell: CounterCell) -> (u64, u64) {
    match kind {
        CounterKind::Packets => (cell.packets, 0),
        CounterKind::Bytes => (0, cell.bytes),
        CounterKind::PacketsAndBytes => (cell.packets, cell.bytes),
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn shown(outputs: &BTreeMap<u16, Vec<Vec<u8>>>) -> String {
    if outputs.is_empty() {
        return "nothing".into();
    }
    outputs
        .iter()
        .flat_map(|(port, all)| {
            all.iter()
                .map(move |d| format!("\n    port {port}: {}", hex(d)))
        })
        .collect()
}
