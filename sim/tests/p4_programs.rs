//! dataplane-p4's programs: every `.p4` passes softswitch's checker (what `softswitch check`
//! runs), every STF test in dataplane-p4/tests passes against lossless.p4 (expected packets
//! written by the scapy generators beside them, and still what those generators print), on
//! softswitch and, but for those that need softswitch's virtual clock, on BMv2; every runtime
//! file of the example topologies applies, and RED marks with the probability its profile
//! gives.
#![forbid(unsafe_code)]

mod common;

use common::{compile, dataplane_p4, lossless};
use sim::frame::{send_only, Addresses};
use sim::runtime::{self, RuntimeConfig};
use softswitch_core::switch::{Clock, Switch};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use wire::ip::Ecn;

#[test]
fn every_program_passes_the_checker() {
    let programs = testkit::files_with_extension(&dataplane_p4(), "p4");
    assert!(!programs.is_empty());
    for p in programs {
        if let Err(e) = compile(&p) {
            panic!("{e}");
        }
    }
}

#[test]
fn every_stf_test_passes() {
    let tests = testkit::files_with_extension(&dataplane_p4().join("tests"), "stf");
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
        match softswitch_stf::run(&map, stf, &mut switch) {
            Ok(r) if r.passed() => {}
            Ok(r) => failures.push(format!("{}:\n{}", t.display(), r.failures.join("\n"))),
            Err(d) => failures.push(d.render(&map)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// dataplane-p4 STF tests that need softswitch's virtual clock, each with the reason: BMv2
/// runs in real time, on threads that race, and cannot keep microsecond timings. What of each
/// both switches keep, with margins of hundreds of milliseconds, is in its `*_realtime.stf`
/// twin, which runs on both.
const VIRTUAL_CLOCK_ONLY: &[(&str, &str)] = &[
    (
        "cnp.stf",
        "CNP intervals of 25 us and a queue of 100,000 packets/s: which marks get a CNP depends \
         on microseconds (cnp_realtime.stf runs on both)",
    ),
    (
        "lb.stf",
        "flowlet gaps of exactly 100 and 101 us and DLB load estimates that age in \
         microseconds (lb_realtime.stf runs on both)",
    ),
    (
        "pfc_pause.stf",
        "PAUSE refreshes every 25 us and queues of 100,000 packets/s, predicted to the \
         microsecond (pfc_realtime.stf runs on both)",
    ),
    (
        "pfc_hold.stf",
        "pause times of 10 to 80 us and paused-until registers checked to the microsecond \
         (pfc_realtime.stf runs on both)",
    ),
];

#[test]
fn every_stf_test_passes_on_bmv2() {
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip("every_stf_test_passes_on_bmv2") else {
        return;
    };
    let program = dataplane_p4().join("lossless.p4");
    let compiled = testkit::bmv2::compiled(toolchain, &program).unwrap_or_else(|e| panic!("{e}"));
    let runs: Vec<softswitch_stf::bmv2::StfRun> =
        testkit::files_with_extension(&dataplane_p4().join("tests"), "stf")
            .into_iter()
            .filter(|t| !VIRTUAL_CLOCK_ONLY.iter().any(|(name, _)| t.ends_with(name)))
            .map(|test| softswitch_stf::bmv2::StfRun {
                program: program.clone(),
                json: compiled.json.clone(),
                test,
            })
            .collect();
    assert!(runs.len() >= 5, "the STF tests are missing");
    let tools = softswitch_stf::bmv2::Bmv2Tools::from(toolchain);
    let failures = softswitch_stf::bmv2::run_stf_files(&tools, &runs);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_stf_test_is_what_its_generator_prints() {
    testkit::assert_stfs_match_generators(
        "every_stf_test_is_what_its_generator_prints",
        &dataplane_p4().join("tests"),
    );
}

#[test]
fn every_runtime_file_of_the_examples_applies() {
    let topologies = dataplane_p4().join("topologies");
    let runtimes: Vec<PathBuf> = ["leaf-spine", "two-hosts"]
        .iter()
        .flat_map(|example| testkit::files_with_extension(&topologies.join(example), "json"))
        .filter(|p| p.to_string_lossy().ends_with("-runtime.json"))
        .collect();
    assert_eq!(
        runtimes.len(),
        6,
        "two spines, three leaves, and the two hosts' switch"
    );
    let program = lossless();
    for path in runtimes {
        let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
        let rt = runtime::load(&path).unwrap_or_else(|e| panic!("{e}"));
        runtime::apply(&rt, &mut switch).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let table = switch.table_id("LosslessIngress.pfc_profile").unwrap();
        assert!(switch.entry(table, 0).is_ok(), "{}", path.display());
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
    let err = runtime::apply(&rt, &mut switch).unwrap_err().to_string();
    assert_eq!(
        err,
        "table_entries[0] (LosslessIngress.nexthop): action_params.dst_mac: cannot read 'zz'"
    );
}

#[test]
fn red_marks_with_the_profile_probability_between_kmin_and_kmax() {
    // Kmin 2, Kmax 10, Pmax 0.5: p(q) = 0.5 (q - 2) / 8 for 2 < q < 10, 1 from 10 on.
    let (kmin, kmax, pmax) = (2u32, 10u32, 0.5);
    let mut switch = Switch::new(lossless(), Clock::Virtual(0));
    let rt: RuntimeConfig = serde_json::from_value(serde_json::json!({"table_entries": [
        {"table": "LosslessIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.2.2", 32]},
         "action_name": "LosslessIngress.set_nexthop", "action_params": {"nexthop": 2}},
        {"table": "LosslessIngress.nexthop", "match": {"meta.nexthop": 2},
         "action_name": "LosslessIngress.forward",
         "action_params": {"port": 2, "src_mac": 1, "dst_mac": 2}},
        {"table": "LosslessEgress.ecn_profile",
         "match": {"standard_metadata.egress_port": 2, "standard_metadata.priority": 0},
         "action_name": "LosslessEgress.red",
         "action_params": {"kmin_packets": kmin, "kmax_packets": kmax, "pmax_q16": 32768}}
    ]}))
    .unwrap();
    runtime::apply(&rt, &mut switch).unwrap();
    switch.set_queue_rate(Some(2), None, Some(1000)).unwrap();
    let hosts = Addresses {
        src_mac: [0, 0, 0, 0, 0, 1],
        dst_mac: [0, 0, 0, 0, 0, 2],
        src_ip: Ipv4Addr::new(10, 0, 1, 1),
        dst_ip: Ipv4Addr::new(10, 0, 2, 2),
    };
    let frame = send_only(&hosts, 0, Ecn::Ect0, 1, 1, 100 - 62);
    // Bursts of 10: packet i finds max(i - 1, 0) ahead, so q runs 0, 0, 1, ..., 8.
    let bursts = 2000;
    let mut expected = 0.0;
    let mut marked = 0u64;
    for _ in 0..bursts {
        for i in 0..10u32 {
            switch.receive(1, frame.clone());
            let q = i.saturating_sub(1);
            expected += match q {
                q if q <= kmin => 0.0,
                q if q >= kmax => 1.0,
                q => pmax * f64::from(q - kmin) / f64::from(kmax - kmin),
            };
        }
        switch.drain();
        switch.advance(10_000);
        marked += switch
            .drain_outputs()
            .filter(|o| o.data[15] & 3 == 3)
            .count() as u64;
    }
    // Marks are a sum of independent Bernoulli draws: allow four standard deviations.
    let sd = expected.sqrt();
    assert!(
        (marked as f64 - expected).abs() < 4.0 * sd,
        "marked {marked}, expected {expected:.0} ± {:.0}",
        4.0 * sd
    );
}
