//! Runs every program of `tests/corpus`: each must pass `check`, and each `NAME.stf` beside a
//! `NAME.p4` must pass against it, and each STF written by a generator in
//! `tests/corpus/generators` must still be what that generator prints. The corpus is the
//! specification of what softswitch supports. The STF tests of the programs BMv2 runs pass on
//! BMv2 too, but for those that need softswitch's virtual clock.

use softswitch_core::switch::{Clock, Switch};
use softswitch_frontend::source::SourceMap;
use std::path::{Path, PathBuf};

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    testkit::files_with_extension(&dir, "p4")
}

fn run_one(program: &Path) -> Result<(), String> {
    let mut map = SourceMap::new();
    let text = std::fs::read_to_string(program).map_err(|e| e.to_string())?;
    let file = map.add(program.display().to_string(), text);
    let compiled = softswitch_frontend::compile(&mut map, file).map_err(|d| d.render(&map))?;
    let stf_path = program.with_extension("stf");
    if !stf_path.exists() {
        return Ok(());
    }
    let stf = map.add(
        stf_path.display().to_string(),
        std::fs::read_to_string(&stf_path).map_err(|e| e.to_string())?,
    );
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    let report = softswitch_stf::run(&map, stf, &mut switch).map_err(|d| d.render(&map))?;
    if report.passed() {
        Ok(())
    } else {
        Err(report.failures.join("\n"))
    }
}

#[test]
fn every_corpus_program_checks_and_passes_its_stf() {
    let programs = corpus();
    assert!(programs.len() >= 2, "the corpus is missing");
    let failures: Vec<String> = programs
        .iter()
        .filter_map(|p| run_one(p).err().map(|e| format!("{}:\n{e}", p.display())))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_generated_stf_is_what_its_generator_prints() {
    testkit::assert_stfs_match_generators(
        "every_generated_stf_is_what_its_generator_prints",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus"),
    );
}

#[test]
fn a_failed_assert_fails_the_stf_run() {
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/arith.p4");
    let mut map = SourceMap::new();
    let file = map.add(
        program.display().to_string(),
        std::fs::read_to_string(&program).unwrap(),
    );
    let compiled = softswitch_frontend::compile(&mut map, file)
        .map_err(|d| d.render(&map))
        .unwrap();
    let stf = map.add("assert.stf", "packet 0 01 02 03 ee\nexpect 1\n");
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    let report = softswitch_stf::run(&map, stf, &mut switch).unwrap();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert!(
        report.failures[0].contains("assert or assume failed 1 times"),
        "{}",
        report.failures[0]
    );
}

/// Corpus STF tests that need softswitch's virtual clock, each with the reason: BMv2 runs in
/// real time. Every other STF test of a program BMv2 runs passes on BMv2 as on softswitch.
const VIRTUAL_CLOCK_ONLY: &[(&str, &str)] = &[
    (
        "clock.stf",
        "it checks timestamps and queueing delays in exact microseconds of the virtual clock",
    ),
    (
        "queues.stf",
        "it checks deq_timedelta in exact microseconds, and a tail drop (BMv2 does not log one, \
         so a run cannot tell it from a packet still queued)",
    ),
    (
        "recirculated.stf",
        "it checks ingress_global_timestamp values of the virtual clock",
    ),
    (
        "ecn_ecmp.stf",
        "its burst has the first packet leave at once; BMv2 paces a queue from the moment its \
         rate was set, so that packet waits a packet time and every depth, and mark, shifts",
    ),
];

#[test]
fn every_corpus_stf_passes_on_bmv2() {
    let test = "every_corpus_stf_passes_on_bmv2";
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip(test) else {
        return;
    };
    let tools = softswitch_stf::bmv2::Bmv2Tools::from(toolchain);
    let mut runs = Vec::new();
    for program in testkit::bmv2::bmv2_programs() {
        let test = program.with_extension("stf");
        let clock_only = VIRTUAL_CLOCK_ONLY
            .iter()
            .any(|(name, _)| test.ends_with(name));
        if !corpus().contains(&program) || !test.exists() || clock_only {
            continue;
        }
        let compiled =
            testkit::bmv2::compiled(toolchain, &program).unwrap_or_else(|e| panic!("{e}"));
        runs.push(softswitch_stf::bmv2::StfRun {
            program,
            json: compiled.json,
            test,
        });
    }
    assert!(
        runs.len() >= 5,
        "the corpus STF tests are missing: {runs:?}"
    );
    let failures = softswitch_stf::bmv2::run_stf_files(&tools, &runs);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
