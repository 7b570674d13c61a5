//! `lossless check` as CI runs it: every topology dataplane-p4 ships passes (exit 0, no
//! error); a seeded misconfiguration (a spine route sent back down to a leaf that sends it up
//! again: a buffer-dependency cycle) exits 1 with the finding in `--json`, as do the shipped
//! ring and mis-mapped DSCP (their fixed twins pass); `--fix` writes corrected copies of runtime
//! JSON and of hosts' configs that check clean; a malformed or huge file, or a network
//! that is not up, exits 2 with a message that names it.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;
use testkit::{workspace_root, TempDir};

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lossless"))
        .arg("check")
        .args(args)
        .output()
        .expect("running lossless check")
}

fn topologies() -> PathBuf {
    workspace_root().join("dataplane-p4/topologies")
}

/// The JSON report of a check that found errors (exit 1).
fn failed(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(out)
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn every_shipped_topology_has_no_error() {
    let fabrics = [
        topologies().join("leaf-spine/topology.json"),
        topologies().join("two-hosts/s1-runtime.json"),
    ];
    for fabric in &fabrics {
        let out = check(&[fabric.to_str().unwrap(), "--json"]);
        let report = json(&out);
        assert_eq!(report["errors"], 0, "{}: {report:#}", fabric.display());
        assert!(out.status.success(), "{}: {}", fabric.display(), out.status);
    }
    // Every folder of topologies/ is one of them.
    let folders = std::fs::read_dir(topologies())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(['_', '.'])
        })
        .count();
    assert_eq!(folders, fabrics.len());
    // The generated fabrics, after every single link failure too.
    let out = check(&["leaf-spine:2,3,2", "--failures", "1", "--json"]);
    let report = json(&out);
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["failures_checked"], 12);
}

/// The errors `lossless check` finds in the misconfigured fabric `name` dataplane-p4 ships
/// (`dataplane-p4/misconfigured/NAME`, exit 1), with its whole report; its fixed twin
/// (`fixed/`) checks with no error.
fn misconfigured_errors(name: &str) -> (Vec<Value>, Value) {
    let dir = workspace_root()
        .join("dataplane-p4/misconfigured")
        .join(name);
    let out = check(&[dir.join("fixed/topology.json").to_str().unwrap(), "--json"]);
    assert_eq!(json(&out)["errors"], 0, "{name}'s fixed twin");
    assert!(out.status.success(), "{name}'s fixed twin");
    let report = failed(&check(&[
        dir.join("topology.json").to_str().unwrap(),
        "--json",
    ]));
    let errors = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .cloned()
        .collect();
    (errors, report)
}

/// The ring dataplane-p4 ships as misconfigured on purpose, whose deadlock the simulator shows
/// on the same files (sim/tests/tutorial_fabric.rs,
/// `routes_around_a_ring_freeze_it_under_pauses_held_forever_and_the_fixed_routes_run_clean`:
/// the ports named here stay paused and nothing moves): the check names the cycle and the
/// routes that close it, and finds no error in its fixed twin, which runs clean there.
#[test]
fn the_deadlocking_ring_is_found_and_its_fix_is_clean() {
    let (errors, report) = misconfigured_errors("cbd-ring");
    assert_eq!(errors.len(), 1, "{report:#}");
    assert_eq!(errors[0]["rule"], "buffer-cycle", "{report:#}");
    let text = errors[0].to_string();
    for queue in ["s1:2", "s2:2", "s3:2"] {
        assert!(text.contains(queue), "{queue} in the cycle: {text}");
    }
}

/// The star dataplane-p4 ships with a mis-mapped DSCP (s2 queues DSCP 26 in priority 0, without
/// PFC; tests/tests/check_net.rs shows it dropping on Mininet): the check names s2's map, and
/// finds no error in its fixed twin.
#[test]
fn the_mis_mapped_dscp_is_found_and_its_fix_is_clean() {
    let (errors, report) = misconfigured_errors("dscp-mismatch");
    let mismapped: Vec<&Value> = errors
        .iter()
        .filter(|f| f["rule"] == "dscp-map-disagrees")
        .collect();
    assert_eq!(mismapped.len(), 1, "{report:#}");
    assert_eq!(mismapped[0]["where"]["switch"], "s2", "{report:#}");
    assert!(
        mismapped[0]["why"].as_str().unwrap().contains("DSCP 26"),
        "{report:#}"
    );
}

/// The star dataplane-p4 ships with PFC on priority 0 (tests/tests/check_net.rs shows a victim
/// flow paused with an incast of ordinary traffic on Mininet): the check names priority 0 at
/// every switch and nothing else, and finds no error in its fixed twin.
#[test]
fn pfc_on_priority_0_is_found_and_its_fix_is_clean() {
    let (errors, report) = misconfigured_errors("pfc-on-lossy");
    let found: Vec<(&Value, &Value)> = errors
        .iter()
        .map(|f| (&f["rule"], &f["where"]["switch"]))
        .collect();
    let expected: Vec<(Value, Value)> = ["s1", "s2", "s3"]
        .iter()
        .map(|s| ("pfc-unused-priority".into(), (*s).into()))
        .collect();
    let expected: Vec<(&Value, &Value)> = expected.iter().map(|(r, s)| (r, s)).collect();
    assert_eq!(found, expected, "{report:#}");
}

/// `--net NAME` of no running network exits 2 saying so; with a FABRIC too it is refused.
#[test]
fn a_network_that_is_not_up_is_named() {
    let out = check(&["--net", "t-check-absent"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no network called t-check-absent is up"),
        "{err}"
    );
    let out = check(&["--net", "t-check-absent", "leaf-spine:2,2,1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
        "{out:?}"
    );
}

/// A copy of the leaf-spine example in a folder of its own, with spine1's route to leaf2's
/// hosts sent down to leaf1 instead.
fn seeded(dir: &TempDir) -> PathBuf {
    dir.copy_files(&topologies().join("leaf-spine"));
    let spine = dir.0.join("spine1-runtime.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&spine).unwrap()).unwrap();
    let route = config["table_entries"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| {
            e["table"] == "LosslessIngress.ipv4_lpm"
                && e["match"]["hdr.ipv4.dstAddr"][0] == "10.0.2.0"
        })
        .expect("spine1 routes leaf2's subnet");
    route["action_params"]["nexthop"] = 1.into();
    std::fs::write(&spine, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    dir.0.join("topology.json")
}

#[test]
fn a_seeded_cycle_fails_with_the_finding() {
    let dir = TempDir::new("lossless-check", "seeded");
    let topology = seeded(&dir);
    let out = check(&[topology.to_str().unwrap(), "--json"]);
    let report = failed(&out);
    let cycles: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "buffer-cycle")
        .collect();
    assert_eq!(cycles.len(), 1, "{report:#}");
    assert_eq!(cycles[0]["severity"], "error");
    assert_eq!(cycles[0]["where"]["priority"], 3);
    let why = cycles[0]["why"].as_str().unwrap();
    assert!(
        why.contains("spine1:1 → leaf1:3") && why.contains("leaf1:3 → spine1:1"),
        "{why}"
    );
    // The table says the same to people.
    let out = check(&[topology.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("error   buffer-cycle"), "{table}");
}

#[test]
fn bad_input_is_named() {
    let dir = TempDir::new("lossless-check", "bad");
    let run = |path: &Path, extra: &[&str]| {
        let mut args = vec![path.to_str().unwrap()];
        args.extend(extra);
        let out = check(&args);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let broken = dir.file("topology.json", "{\"hosts\": {");
    assert!(run(&broken, &[]).contains("is not JSON"));
    let huge = dir.0.join("huge.json");
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(netfiles::MAX_BYTES as u64 + 1).unwrap();
    assert!(run(&huge, &[]).contains("longer than"));
    let entry = dir.file(
        "s1-runtime.json",
        r#"{"table_entries": [{"table": "LosslessIngress.dscp_priority",
            "match": {"hdr.ipv4.dscp": 26}, "action_name": "LosslessIngress.set_priority",
            "action_params": {"priority": "three"}}]}"#,
    );
    let err = run(&entry, &[]);
    assert!(
        err.contains("table_entries[0]") && err.contains("priority"),
        "{err}"
    );
    let host = dir.file("host.toml", "[pfc]\nlink_speed_bps = \"fast\"\n");
    let spec = Path::new("leaf-spine:2,2,1");
    let err = run(spec, &["--host-config", host.to_str().unwrap()]);
    assert!(
        err.contains("host.toml") && err.contains("link_speed_bps"),
        "{err}"
    );
    assert!(run(spec, &["--host-config", "h99=/dev/null"]).contains("no host h99"));
}

/// `--suggest` writes a tuning that `--tuning` takes back, and with it the fabric whose
/// defaults are short of headroom passes.
#[test]
fn a_suggested_tuning_is_taken_back() {
    let dir = TempDir::new("lossless-check", "suggest");
    let fabric = "leaf-spine:2,2,1,spine-cable=300m";
    let short = dir.file("short.toml", "[pfc]\nxoff_packets = 60\n");
    let out = check(&[
        fabric,
        "--tuning",
        short.to_str().unwrap(),
        "--suggest",
        "--json",
    ]);
    let report = failed(&out);
    let tuning = report["suggestion"]["tuning"].as_str().unwrap();
    assert!(tuning.contains("xoff_packets = 56"), "{tuning}");
    assert_eq!(
        report["suggestion"]["hosts"]["h11"][0],
        "pfc.link_speed_bps=100000000000"
    );
    let suggested = dir.file("suggested.toml", tuning);
    let out = check(&[fabric, "--tuning", suggested.to_str().unwrap(), "--json"]);
    let report = json(&out);
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["warnings"], 0, "{report:#}");
}

/// `--fix` writes corrected copies beside the originals and leaves these as they were: the
/// leaf-spine example with a wrong pause quantum on leaf2 (an error) and its Kmax above XOFF
/// (a warning everywhere) comes out clean.
#[test]
fn fix_writes_corrected_copies_beside_the_originals() {
    let dir = TempDir::new("lossless-check", "fix");
    let topology = seeded(&dir);
    // Undo the seeded cycle (--fix does not reroute), and give leaf2's port 1 a 10 Gb/s
    // quantum on its 1 Gb/s link.
    let spine = dir.0.join("spine1-runtime.json");
    std::fs::copy(topologies().join("leaf-spine/spine1-runtime.json"), &spine).unwrap();
    let leaf = dir.0.join("leaf2-runtime.json");
    let text = std::fs::read_to_string(&leaf).unwrap();
    let quantum = "\"quantum_q10\": 524";
    assert!(text.contains(quantum));
    let text = text.replacen(quantum, "\"quantum_q10\": 52", 1);
    std::fs::write(&leaf, &text).unwrap();
    let out = check(&[topology.to_str().unwrap(), "--fix", "--json"]);
    let report = failed(&out);
    assert_eq!(report["errors"], 1, "{report:#}");
    assert_eq!(report["fixed"]["errors_left"], 0);
    assert_eq!(report["fixed"]["written"].as_array().unwrap().len(), 6);
    assert_eq!(std::fs::read_to_string(&leaf).unwrap(), text);
    let fixed = dir.0.join("topology.fixed.json");
    let out = check(&[fixed.to_str().unwrap(), "--json"]);
    let report = json(&out);
    assert!(out.status.success());
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["warnings"], 0, "{report:#}");
    // A generated fabric has no files to fix.
    assert_eq!(check(&["leaf-spine:2,2,1", "--fix"]).status.code(), Some(2));
}

/// `--fix` writes hosts' configs too: h11's host config with the watchdog only counting storms
/// and pause quanta read at 10 Gb/s on its 1 Gb/s link, and an agent's TOML for the other
/// hosts whose profile takes 5 s to call a storm (and reads quanta at the default 100 Gb/s),
/// come out as NAME.fixed.toml copies (their comments kept) that check clean with the
/// switches' fixed copies, the originals untouched.
#[test]
fn fix_writes_hosts_configs_beside_the_originals() {
    let dir = TempDir::new("lossless-check", "fix-hosts");
    dir.copy_files(&topologies().join("leaf-spine"));
    let topology = dir.0.join("topology.json");
    let host = dir.0.join("h11.toml");
    let host_text = "# h11's NIC\npfc.watchdog_ignore = false # count storms only\n\
                     pfc.link_speed_bps = \"10g\"\n\n[ecn]\nroce_only = true\n";
    std::fs::write(&host, host_text).unwrap();
    let agent = dir.0.join("agent.toml");
    let agent_text = "detach_on_exit = false\n\n[profiles.roce]\npfc.watchdog_ms = 5000\n\n\
                      [[interfaces]]\nname = \"eth0\"\nhooks = [\"xdp\", \"pfc\"]\n\
                      profile = \"roce\"\n";
    std::fs::write(&agent, agent_text).unwrap();
    let h11 = format!("h11={}", host.display());
    let args = |topology: &Path, host: &str, agent: &Path| {
        vec![
            topology.to_str().unwrap().to_owned(),
            "--host-config".to_owned(),
            agent.to_str().unwrap().to_owned(),
            "--host-config".to_owned(),
            host.to_owned(),
            "--json".to_owned(),
        ]
    };
    let run = |args: &[String], extra: &[&str]| {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(extra);
        check(&all)
    };
    let report = failed(&run(&args(&topology, &h11, &agent), &["--fix"]));
    let rules: Vec<(&str, &str)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap(),
                f["where"]["host"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(rules.contains(&("watchdog", "h11/h11.toml")), "{report:#}");
    assert!(
        rules.contains(&("pause-quanta", "h11/h11.toml")),
        "{report:#}"
    );
    assert!(rules.contains(&("watchdog", "h12/eth0")), "{report:#}");
    let fixed_host = dir.0.join("h11.fixed.toml");
    let fixed_agent = dir.0.join("agent.fixed.toml");
    let written: Vec<&str> = report["fixed"]["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        written[written.len() - 2..],
        [fixed_agent.to_str().unwrap(), fixed_host.to_str().unwrap()],
        "{report:#}"
    );
    assert_eq!(report["fixed"]["errors_left"], 0, "{report:#}");
    assert_eq!(report["fixed"]["warnings_left"], 0, "{report:#}");
    assert_eq!(std::fs::read_to_string(&host).unwrap(), host_text);
    assert_eq!(std::fs::read_to_string(&agent).unwrap(), agent_text);
    let fixed = std::fs::read_to_string(&fixed_host).unwrap();
    assert!(
        fixed.starts_with("# h11's NIC\npfc.watchdog_ignore = true # count storms only\n")
            && fixed.contains("pfc.link_speed_bps = 1000000000\n")
            && fixed.contains("[ecn]\nroce_only = true\n"),
        "{fixed}"
    );
    let fixed_h11 = format!("h11={}", fixed_host.display());
    let fixed_topology = dir.0.join("topology.fixed.json");
    let out = run(&args(&fixed_topology, &fixed_h11, &fixed_agent), &[]);
    let report = json(&out);
    assert!(out.status.success(), "{report:#}");
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["warnings"], 0, "{report:#}");
}

/// `--fix` refuses, before it writes anything, host configs whose copies would be ambiguous or
/// land on an input: one file given for two hosts, a file whose copy is another given file,
/// two files whose copies are one (`h11.toml` and `h11.conf`).
#[test]
fn fix_refuses_host_copies_that_collide_and_writes_nothing() {
    let dir = TempDir::new("lossless-check", "fix-collide");
    dir.copy_files(&topologies().join("leaf-spine"));
    let topology = dir.0.join("topology.json");
    let slow = "pfc.watchdog_ignore = false\npfc.link_speed_bps = \"1g\"\n";
    for name in ["h.toml", "h.fixed.toml", "h11.toml", "h11.conf"] {
        std::fs::write(dir.0.join(name), slow).unwrap();
    }
    let given = |pairs: &[(&str, &str)]| -> Vec<String> {
        pairs
            .iter()
            .flat_map(|(host, file)| {
                [
                    "--host-config".to_owned(),
                    format!("{host}={}", dir.0.join(file).display()),
                ]
            })
            .collect()
    };
    for (pairs, says) in [
        (
            &[("h11", "h.toml"), ("h12", "h.toml")][..],
            "given for several hosts",
        ),
        (
            &[("h12", "h.toml"), ("h11", "h.fixed.toml")][..],
            "which is given too",
        ),
        (
            &[("h11", "h11.toml"), ("h12", "h11.conf")][..],
            "to one file",
        ),
    ] {
        let before: Vec<_> = std::fs::read_dir(&dir.0).unwrap().collect();
        let mut args = vec![topology.to_str().unwrap().to_owned(), "--fix".to_owned()];
        args.extend(given(pairs));
        let out = check(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{pairs:?}: {stderr}");
        assert!(stderr.contains(says), "{pairs:?}: {stderr}");
        let after: Vec<_> = std::fs::read_dir(&dir.0).unwrap().collect();
        assert_eq!(after.len(), before.len(), "{pairs:?}: nothing written");
    }
}
