//! Every program the project says BMv2 runs (`testkit::bmv2::bmv2_programs`), compiled by
//! p4c-bm2-ss and loaded from its BMv2 JSON by softswitch-bmv2json, passes the same STF tests
//! as from source: corpus programs their `NAME.stf`, dataplane-p4's `lossless.p4` its
//! `dataplane-p4/tests/*.stf`; programs without a test must load. The programs that do not yet
//! are listed in [`KNOWN_GAPS`] with the reason, and the test fails if one of them starts
//! passing (so the list stays true).
//!
//! Needs p4c (`LOSSLESS_P4REF` or PATH): skipped without it outside CI, a failure under CI.
//! The JSONs are compiled once per program text and shared with the other tests
//! (`testkit::bmv2::compiled`).

use std::path::{Path, PathBuf};

use softswitch_core::switch::{Clock, Switch};
use softswitch_frontend::source::SourceMap;

/// Programs that do not pass from JSON yet, each with the reason.
const KNOWN_GAPS: &[(&str, &str)] = &[];

/// The STF tests of `program`.
fn stf_tests(program: &Path) -> Vec<PathBuf> {
    let own = program.with_extension("stf");
    if own.exists() {
        return vec![own];
    }
    let tests = program.with_file_name("tests");
    if program.ends_with("dataplane-p4/lossless.p4") {
        return testkit::files_with_extension(&tests, "stf");
    }
    Vec::new()
}

/// Loads `json` and runs every STF test of `program` on it.
fn run_from_json(program: &Path, json: &Path) -> Result<usize, String> {
    let bytes = std::fs::read(json).map_err(|e| format!("{}: {e}", json.display()))?;
    let loaded = softswitch_bmv2json::load(&bytes).map_err(|e| e.to_string())?;
    let mut passed = 0;
    for stf in stf_tests(program) {
        let mut map = SourceMap::new();
        let text = std::fs::read_to_string(&stf).map_err(|e| e.to_string())?;
        let file = map.add(stf.display().to_string(), text);
        let mut switch = Switch::new(loaded.program.clone(), Clock::Virtual(0));
        let report = softswitch_stf::run(&map, file, &mut switch).map_err(|d| d.render(&map))?;
        if !report.passed() {
            return Err(format!(
                "{}:\n{}",
                stf.display(),
                report.failures.join("\n")
            ));
        }
        passed += 1;
    }
    Ok(passed)
}

#[test]
fn every_bmv2_program_passes_its_stf_tests_from_its_bmv2_json() {
    let test = "every_bmv2_program_passes_its_stf_tests_from_its_bmv2_json";
    let Some((toolchain, programs)) = testkit::bmv2::toolchain_and_programs_or_skip(test) else {
        return;
    };
    let mut failures = Vec::new();
    let mut passing = 0;
    let mut stfs = 0;
    for program in &programs {
        let json = testkit::bmv2::compiled(toolchain, program)
            .unwrap_or_else(|e| panic!("{e}"))
            .json;
        let gap = KNOWN_GAPS
            .iter()
            .find(|(p, _)| program.ends_with(Path::new(p)));
        match (run_from_json(program, &json), gap) {
            (Ok(n), None) => {
                passing += 1;
                stfs += n;
            }
            (Ok(_), Some((p, _))) => failures.push(format!(
                "{p} passes from JSON now: take it out of KNOWN_GAPS"
            )),
            (Err(e), None) => failures.push(format!("{}:\n{e}", program.display())),
            (Err(_), Some(_)) => {}
        }
    }
    println!(
        "{passing} of {} programs pass {stfs} STF tests from BMv2 JSON; {} known gaps",
        programs.len(),
        KNOWN_GAPS.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Corpus programs p4c compiles but simple_switch cannot run (`testkit::bmv2::SOFTSWITCH_ONLY`),
/// whose p4c JSON softswitch loads and passes the STF tests of all the same.
const JSON_BUT_NOT_SIMPLE_SWITCH: &[&str] = &["softswitch/tests/corpus/stack_bounds.p4"];

#[test]
fn programs_simple_switch_refuses_pass_their_stf_tests_from_p4c_json() {
    let test = "programs_simple_switch_refuses_pass_their_stf_tests_from_p4c_json";
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip(test) else {
        return;
    };
    for program in JSON_BUT_NOT_SIMPLE_SWITCH {
        let program = testkit::workspace_root().join(program);
        let json = testkit::bmv2::compiled(toolchain, &program)
            .unwrap_or_else(|e| panic!("{e}"))
            .json;
        match run_from_json(&program, &json) {
            Ok(n) => assert!(n >= 1, "{}: no STF test ran", program.display()),
            Err(e) => panic!("{}:\n{e}", program.display()),
        }
    }
}

/// With a BMv2 JSON device config the controller's P4Info is used as sent, so an entity in it
/// without a preamble (it has no name and no id) must not stop the pipeline: it is left out of
/// the index, and every entity with a preamble is still indexed.
#[test]
fn a_controller_p4info_with_entities_lacking_a_preamble_is_indexed_without_them() {
    let test = "a_controller_p4info_with_entities_lacking_a_preamble_is_indexed_without_them";
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip(test) else {
        return;
    };
    let program = testkit::bmv2::bmv2_programs()
        .into_iter()
        .find(|p| p.ends_with("dataplane-p4/lossless.p4"))
        .expect("lossless.p4 is one of the BMv2 programs");
    let json = testkit::bmv2::compiled(toolchain, &program)
        .unwrap_or_else(|e| panic!("{e}"))
        .json;
    let json = std::fs::read(&json).expect("the JSON");
    let derived = softswitch_server::pipeline::Compiled::from_bmv2_json(json.clone(), None, 0)
        .expect("lossless.p4's JSON loads")
        .info;
    assert!(
        derived.tables.len() >= 2 && !derived.counters.is_empty() && !derived.registers.is_empty(),
        "lossless.p4 has tables, counters and registers"
    );
    let mut sent = derived.clone();
    sent.tables[0].preamble = None;
    sent.actions[0].preamble = None;
    sent.counters[0].preamble = None;
    sent.registers[0].preamble = None;

    let compiled = softswitch_server::pipeline::Compiled::from_bmv2_json(json, Some(&sent), 0)
        .expect("a P4Info whose named entities are the JSON's is accepted");
    let pipeline = softswitch_server::pipeline::Pipeline::new(compiled, Clock::Virtual(0));

    let id = |p: &Option<p4runtime::p4::config::v1::Preamble>| p.as_ref().expect("derived").id;
    let index = &pipeline.index;
    assert!(!index.tables.contains_key(&id(&derived.tables[0].preamble)));
    assert!(index.tables.contains_key(&id(&derived.tables[1].preamble)));
    assert!(!index
        .actions
        .contains_key(&id(&derived.actions[0].preamble)));
    assert!(!index
        .instances
        .contains_key(&id(&derived.counters[0].preamble)));
    assert!(!index
        .instances
        .contains_key(&id(&derived.registers[0].preamble)));
    assert_eq!(
        index.instances.len(),
        p4runtime::p4info::instance_preambles(&derived).count() - 2,
        "every other extern instance is indexed"
    );
}
