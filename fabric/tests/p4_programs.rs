//! dataplane-p4's programs: every `.p4` passes softswitch's checker (what `softswitch check`
//! runs), every STF test in dataplane-p4/tests passes against lossless.p4 (expected packets
//! written by the scapy generators beside them), every runtime file of the example topology
//! applies, and RED marks with the probability its profile gives.

mod common;

use common::{compile, dataplane_p4, lossless};
use fabric::runtime::RuntimeConfig;
use softswitch::switch::{Clock, Switch};
use std::path::PathBuf;

fn files(dir: PathBuf, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

#[test]
fn every_program_passes_the_checker() {
    let programs = files(dataplane_p4(), "p4");
    assert!(!programs.is_empty());
    for p in programs {
        if let Err(e) = compile(&p) {
            panic!("{e}");
        }
    }
}

#[test]
fn every_stf_test_passes() {
    let tests = files(dataplane_p4().join("tests"), "stf");
    assert!(tests.len() >= 6, "the STF tests are missing");
    let program = dataplane_p4().join("lossless.p4");
    let mut failures = Vec::new();
    for t in &tests {
        let (compiled, mut map) = compile(&program).unwrap_or_else(|e| panic!("{e}"));
        let stf = map.add(
            t.display().to_string(),
            std::fs::read_to_string(t).expect("the STF file"),
        );
        let mut switch = Switch::new(compiled, Clock::Virtual(0));
        match softswitch::stf::run(&map, stf, &mut switch) {
            Ok(r) if r.passed() => {}
            Ok(r) => failures.push(format!("{}:\n{}", t.display(), r.failures.join("\n"))),
            Err(d) => failures.push(d.render(&map)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_runtime_file_of_the_example_applies() {
    let dir = dataplane_p4().join("topologies/leaf-spine");
    let runtimes: Vec<PathBuf> = files(dir, "json")
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with("-runtime.json"))
        .collect();
    assert_eq!(runtimes.len(), 5, "two spines and three leaves");
    let program = lossless();
    for path in runtimes {
        let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
        let rt = RuntimeConfig::load(&path).unwrap_or_else(|e| panic!("{e}"));
        rt.apply(&mut switch)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let table = switch.table_id("LosslessIngress.pfc_profile").unwrap();
        assert!(
            switch.state.tables[table].entry(0).is_some(),
            "{}",
            path.display()
        );
    }
}

#[test]
fn a_bad_runtime_entry_is_named() {
    let mut switch = Switch::new(lossless(), Clock::Virtual(0));
    let rt: RuntimeConfig = serde_json::from_str(
        r#"{"table_entries": [
            {"table": "LosslessIngress.nexthop", "match": {"meta.nexthop": 1},
             "action_name": "LosslessIngress.forward",
             "action_params": {"port": 1, "src_mac": "00:aa:00:00:00:01", "dst_mac": "zz"}}]}"#,
    )
    .unwrap();
    let err = rt.apply(&mut switch).unwrap_err().to_string();
    assert_eq!(
        err,
        "table_entries[0] (LosslessIngress.nexthop): action_params.dst_mac: cannot read 'zz'"
    );
}
