//! Runs every program of `tests/corpus`: each must pass `check`, and each `NAME.stf` beside a
//! `NAME.p4` must pass against it, and each STF written by a generator in
//! `tests/corpus/generators` must still be what that generator prints. The corpus is the
//! specification of what softswitch supports.

use softswitch::source::SourceMap;
use softswitch::switch::{Clock, Switch};
use std::path::{Path, PathBuf};

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut programs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the corpus directory exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "p4"))
        .collect();
    programs.sort();
    programs
}

fn run_one(program: &Path) -> Result<(), String> {
    let mut map = SourceMap::new();
    let text = std::fs::read_to_string(program).map_err(|e| e.to_string())?;
    let file = map.add(program.display().to_string(), text);
    let compiled = softswitch::compile(&mut map, file).map_err(|d| d.render(&map))?;
    let stf_path = program.with_extension("stf");
    if !stf_path.exists() {
        return Ok(());
    }
    let stf = map.add(
        stf_path.display().to_string(),
        std::fs::read_to_string(&stf_path).map_err(|e| e.to_string())?,
    );
    let mut switch = Switch::new(compiled, Clock::Virtual(0));
    let report = softswitch::stf::run(&map, stf, &mut switch).map_err(|d| d.render(&map))?;
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
    let compiled = softswitch::compile(&mut map, file)
        .map_err(|d| d.render(&map))
        .unwrap();
    let stf = map.add("assert.stf", "packet 0 01 02 03 ee\nexpect 1\n");
    let mut switch = Switch::new(compiled, Clock::Virtual(0));
    let report = softswitch::stf::run(&map, stf, &mut switch).unwrap();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert!(
        report.failures[0].contains("assert or assume failed 1 times"),
        "{}",
        report.failures[0]
    );
}
