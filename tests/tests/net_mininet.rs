//! `lossless net` with Mininet: a generated 2-spine, 2-leaf fabric with 2 hosts per leaf, on
//! softswitch and on BMv2's simple_switch_grpc, programmed with lossless.p4's computed entries:
//! Mininet's pingAll loses nothing; a live policy change (ecmp → spray, over P4Runtime) moves a
//! flow's packets from one spine to both, read off the spines' own port counters; the tutorials'
//! two-host topology.json with dataplane-p4's runtime JSON comes up unchanged from one command;
//! SIGINT mid-run leaves no namespace, process, state or pin behind; the incast experiment loses
//! nothing in the lossless class and counts pauses and marks; the lb experiment compares the
//! policies without loss, and its link-failure variant moves traffic to the surviving spine; the
//! collective experiment completes every rank of an AllReduce under each policy and QP count,
//! on both switches, without a drop.
//! Tests use distinct network names, so they run in parallel.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use lossless_tests::{
    bed::lossless_bin,
    net::{assert_nothing_left, bmv2, mininet, net, runs, scratch, STATE_ROOT},
    on_both_switches,
    switch::dataplane_p4,
};
use serde_json::Value;

/// Asserts that `net up ... --test pingall` (`out`) succeeded with no ping lost; its stdout
/// and stderr.
fn pinged_all(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains("pingall: 0% dropped"),
        "{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// Runs `net up leaf-spine:2,2,2 --test pingall` and asserts that every ping came back.
fn pingall(name: &str, switch: &str) {
    let out = net(
        name,
        &[
            "up",
            "leaf-spine:2,2,2",
            "--switch",
            switch,
            "--test",
            "pingall",
        ],
    )
    .output()
    .unwrap();
    pinged_all(&out);
    assert!(!Path::new(STATE_ROOT).join(name).exists());
}

on_both_switches!(
    pingall, "ping":
    fabric_on_softswitch_pings_all,
    fabric_on_bmv2_pings_all
);

/// A script run inside the network: one ping flow h11 → h21 under ecmp, then under spray after
/// a live policy change, reading the requests each spine received from leaf1 (port 1) before
/// and after each.
const POLICY_SCRIPT: &str = r#"set -e
l="$LOSSLESS_BIN"
rx() { "$l" p4 --switch "$1" counters read LosslessIngress.port_rx --index 1 --json; }
snap() { echo "{\"s1\": $(rx spine1), \"s2\": $(rx spine2)}" > "$OUT/$1.json"; }
"$l" net status --json > "$OUT/status.json"
snap a
"$l" net exec h11 -- ping -q -c 40 -i 0.01 -W 2 10.0.2.1
snap b
"$l" net policy spray
"$l" net exec h11 -- ping -q -c 40 -i 0.01 -W 2 10.0.2.1
snap c
"#;

fn packets(snap: &Value, spine: &str) -> u64 {
    snap[spine][0]["packets"]
        .as_u64()
        .unwrap_or_else(|| panic!("no packets in {snap}"))
}

/// Writes `text` as the `--run` script `script.sh` in `dir`; returns its path.
fn run_script(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("script.sh");
    std::fs::write(&path, text).unwrap();
    path
}

fn policy_change_moves_traffic(name: &str, switch: &str) {
    let dir = scratch(name);
    let script = run_script(&dir, POLICY_SCRIPT);
    testkit::output_of(
        net(
            name,
            &["up", "leaf-spine:2,2,2", "--switch", switch, "--run"],
        )
        .arg(script)
        .env("OUT", &dir)
        .env("LOSSLESS_BIN", lossless_bin()),
    );
    let read = |n: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{n}.json"))).unwrap())
            .unwrap()
    };
    let (a, b, c) = (read("a"), read("b"), read("c"));
    let delta = |x: &Value, y: &Value, s: &str| packets(y, s) - packets(x, s);
    let ecmp = (delta(&a, &b, "s1"), delta(&a, &b, "s2"));
    let spray = (delta(&b, &c, "s1"), delta(&b, &c, "s2"));
    // ecmp: the flow hashes to one spine (the other sees only the hosts' own stray frames,
    // IPv6 neighbour discovery and MLD, a few whose number depends on timing: at most an eighth
    // of the flow, where a split would be half); spray: its packets take both in turn.
    assert!(
        ecmp.0.max(ecmp.1) >= 40 && ecmp.0.min(ecmp.1) * 8 <= ecmp.0.max(ecmp.1),
        "ecmp {ecmp:?}"
    );
    assert!(
        spray.0 >= 15 && spray.1 >= 15,
        "spray {spray:?} after ecmp {ecmp:?}"
    );
    let status = read("status");
    let switches: Vec<_> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "switch")
        .collect();
    assert_eq!(switches.len(), 4);
    assert!(switches
        .iter()
        .all(|s| s["grpc"].as_str().unwrap().starts_with("127.0.0.1:")));
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_switches!(
    policy_change_moves_traffic, "pol":
    live_policy_change_moves_traffic_across_spines_on_softswitch,
    live_policy_change_moves_traffic_across_spines_on_bmv2
);

/// The tutorials' basic exercise as a user has it, in `dir`: topology.json, s1-runtime.json
/// naming build/lossless.p4.p4info.txtpb, the program beside them; h1 runs `h1_commands`
/// after its gateway's. Returns the topology file.
fn two_hosts(dir: &Path, h1_commands: &[&str]) -> PathBuf {
    std::fs::copy(dataplane_p4("lossless.p4"), dir.join("lossless.p4")).unwrap();
    std::fs::copy(
        dataplane_p4("topologies/two-hosts/s1-runtime.json"),
        dir.join("s1-runtime.json"),
    )
    .unwrap();
    let mut h1 = vec![
        "route add default gw 10.0.1.10 dev eth0".to_string(),
        "arp -i eth0 -s 10.0.1.10 08:00:00:00:01:00".to_string(),
    ];
    h1.extend(h1_commands.iter().map(|c| c.to_string()));
    let topology = serde_json::json!({
        "hosts": {
            "h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11", "commands": h1},
            "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22",
                   "commands": ["route add default gw 10.0.2.20 dev eth0",
                                "arp -i eth0 -s 10.0.2.20 08:00:00:00:02:00"]}
        },
        "switches": {"s1": {"runtime_json": "s1-runtime.json"}},
        "links": [["h1", "s1-p1"], ["h2", "s1-p2"]]
    });
    let path = dir.join("topology.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&topology).unwrap()).unwrap();
    path
}

/// `lossless net up topology.json --test pingall` of the two hosts.
#[test]
fn tutorials_two_hosts_come_up_unchanged() {
    if !mininet("tutorials_two_hosts_come_up_unchanged") {
        return;
    }
    let dir = scratch("tut");
    let topology = two_hosts(&dir, &[]);
    let out = net(
        "t-tut",
        &["up", topology.to_str().unwrap(), "--test", "pingall"],
    )
    .output()
    .unwrap();
    pinged_all(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A p4-utils app as its examples are (tests/p4app: p4app.json, l2 addresses, forwarding.p4,
/// a cli_input file of simple_switch_CLI commands per switch and nothing else to program them
/// with), brought up from its folder as `p4run` runs: pingall passes only if the commands went
/// in over Thrift.
fn p4app_with_cli_input(test: &str, name: &str, switch: &str) {
    // simple_switch_CLI applies the commands (and, for softswitch, p4c makes the program's
    // BMv2 JSON that the CLI reads from the switch).
    if !mininet(test) || testkit::bmv2::toolchain_or_skip(test).is_none() {
        return;
    }
    if switch == "bmv2" && !bmv2(test) {
        return;
    }
    let out = net(
        name,
        &["up", "p4app.json", "--switch", switch, "--test", "pingall"],
    )
    .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("p4app"))
    .output()
    .unwrap();
    pinged_all(&out);
    assert!(!Path::new(STATE_ROOT).join(name).exists());
}

#[test]
fn p4app_with_cli_input_comes_up_on_softswitch() {
    p4app_with_cli_input(
        "p4app_with_cli_input_comes_up_on_softswitch",
        "t-sw-app",
        "softswitch",
    );
}

#[test]
fn p4app_with_cli_input_comes_up_on_bmv2() {
    p4app_with_cli_input("p4app_with_cli_input_comes_up_on_bmv2", "t-bm-app", "bmv2");
}

/// The pids of the processes whose command line is `args` (`sleep N` with an N of the test's
/// own).
fn processes_running(args: &[&str]) -> Vec<u64> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .filter(|pid| runs(*pid))
        .collect()
}

/// A host command that fails, one that ends in a comment and one that never returns: the
/// first is logged and the network goes on, as Mininet goes on; the comment is the command's;
/// the third is interrupted after --command-timeout, logged, and the next command runs.
#[test]
fn failing_and_hanging_host_commands_are_logged_and_the_network_goes_on() {
    if !mininet("failing_and_hanging_host_commands_are_logged_and_the_network_goes_on") {
        return;
    }
    let dir = scratch("cmds");
    let marker = dir.join("after-the-hang");
    let last = format!("touch {}", marker.display());
    let topology = two_hosts(
        &dir,
        &[
            // The connected route is there already: "RTNETLINK answers: File exists".
            "ip route add 10.0.1.0/24 dev eth0",
            "arp -i eth0 -s 10.0.1.10 08:00:00:00:01:00 # the gateway, again",
            "sleep 86401",
            &last,
        ],
    );
    let out = net(
        "t-cmds",
        &[
            "up",
            topology.to_str().unwrap(),
            "--command-timeout",
            "2s",
            "--test",
            "pingall",
        ],
    )
    .output()
    .unwrap();
    let (_, stderr) = pinged_all(&out);
    assert!(
        stderr.contains("h1: `ip route add 10.0.1.0/24 dev eth0` failed (exit status 2)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("h1: `sleep 86401` did not finish in 2 s; interrupted"),
        "{stderr}"
    );
    assert!(!stderr.contains("the gateway, again` failed"), "{stderr}");
    assert!(marker.exists(), "the command after the hang did not run");
    assert!(processes_running(&["sleep", "86401"]).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The JSON file `file` of the records of running network `name`.
fn record(name: &str, file: &str) -> Value {
    let path = Path::new(STATE_ROOT).join(name).join(file);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The namespace of running network `name`, as its records (up.json) say.
fn recorded_netns(name: &str) -> String {
    record(name, "up.json")["netns"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The pids a network recorded: its glue's (up.json) and every process the glue started
/// (processes.json), read while it runs.
fn recorded_pids(name: &str) -> Vec<u64> {
    let mut pids = vec![record(name, "up.json")["glue"]["pid"].as_u64().unwrap()];
    pids.extend(
        record(name, "processes.json")
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap()),
    );
    pids
}

/// Where the `sleep` of a [`Sleeping`] network runs.
enum SleepIn {
    /// In h1, from a `net exec` of the `--run` script.
    Script,
    /// As h1's host command (the network is still coming up).
    HostCommand,
}

/// A two-host network `net up` is running, with a `sleep` in h1 that never ends by itself.
struct Sleeping {
    name: &'static str,
    dir: PathBuf,
    /// The `sleep`'s argument, unique to the test.
    seconds: &'static str,
    up: std::process::Child,
    /// The pids the network recorded.
    recorded: Vec<u64>,
    /// Its namespace.
    netns: String,
}

impl Sleeping {
    /// Starts `net up` of network `name` with `sleep SECONDS` run as `sleep_in`, and waits
    /// until the sleep runs.
    fn up(name: &'static str, seconds: &'static str, sleep_in: SleepIn) -> Sleeping {
        let dir = scratch(name);
        let sleep = format!("sleep {seconds}");
        let (topology, script) = match sleep_in {
            SleepIn::Script => (
                two_hosts(&dir, &[]),
                Some(run_script(
                    &dir,
                    &format!("\"$LOSSLESS_BIN\" net exec h1 -- {sleep}\n"),
                )),
            ),
            SleepIn::HostCommand => (two_hosts(&dir, &[&sleep]), None),
        };
        let mut up = net(name, &["up", topology.to_str().unwrap()]);
        if let Some(script) = &script {
            up.arg("--run").arg(script);
        }
        let mut up = up
            .env("LOSSLESS_BIN", lossless_bin())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while processes_running(&["sleep", seconds]).is_empty() {
            assert!(Instant::now() < deadline, "{sleep} never ran");
            assert!(up.try_wait().unwrap().is_none(), "net up ended early");
            std::thread::sleep(Duration::from_millis(50));
        }
        Sleeping {
            name,
            dir,
            seconds,
            up,
            recorded: recorded_pids(name),
            netns: recorded_netns(name),
        }
    }

    /// `lossless net down`, which must succeed and leave nothing: no state, no namespace, none
    /// of the recorded processes, no `sleep`.
    fn down_leaves_nothing(&self) {
        let out = net(self.name, &["down"]).output().unwrap();
        assert!(
            out.status.success(),
            "net down: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_nothing_left(self.name, &self.netns);
        for pid in &self.recorded {
            assert!(!runs(*pid), "recorded process {pid} still runs");
        }
        assert!(processes_running(&["sleep", self.seconds]).is_empty());
    }
}

impl Drop for Sleeping {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `kill -9` of `lossless net up` while its script has a process in a host: `net down` takes
/// the network down all the same, by its records.
#[test]
fn net_down_cleans_up_after_kill_9_of_net_up() {
    if !mininet("net_down_cleans_up_after_kill_9_of_net_up") {
        return;
    }
    let mut network = Sleeping::up("t-kill9", "86402", SleepIn::Script);
    network.up.kill().unwrap();
    network.up.wait().unwrap();
    network.down_leaves_nothing();
}

/// `net down` while a host command hangs (`net up` is still bringing the network up): the
/// switches already started go too.
#[test]
fn net_down_while_a_host_command_hangs_leaves_nothing() {
    if !mininet("net_down_while_a_host_command_hangs_leaves_nothing") {
        return;
    }
    let mut network = Sleeping::up("t-hang", "86403", SleepIn::HostCommand);
    network.down_leaves_nothing();
    let status = network.up.wait().unwrap();
    assert!(!status.success(), "net up was stopped, yet exited 0");
}

/// SIGINT to `lossless net up` while its script runs: the network goes, with everything in it.
#[test]
fn sigint_mid_run_leaves_nothing_behind() {
    if !mininet("sigint_mid_run_leaves_nothing_behind") {
        return;
    }
    let name = "t-sigint";
    let dir = scratch(name);
    // The script records h11's hooks, then runs a ping that never ends by itself.
    let script = run_script(
        &dir,
        "\"$LOSSLESS_BIN\" net exec h11 -- \"$LOSSLESS_BIN\" host status > \"$OUT/hooks.txt\"\n\
         \"$LOSSLESS_BIN\" net exec h11 -- ping -q 10.0.2.1\n",
    );
    let mut up = net(
        name,
        &["up", "leaf-spine:2,2,2", "--host-hooks", "ecn", "--run"],
    )
    .arg(script)
    .env("LOSSLESS_BIN", lossless_bin())
    .env("OUT", &dir)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let state = Path::new(STATE_ROOT).join(name);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Up once the glue reported the nodes and the script's ping runs in h11.
    let (status, netns) = loop {
        assert!(Instant::now() < deadline, "the network never came up");
        assert!(up.try_wait().unwrap().is_none(), "net up ended early");
        let status: Option<Value> = std::fs::read_to_string(state.join("status.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let pinging = Command::new("pgrep")
            .args(["-f", "ping -q 10.0.2.1"])
            .output()
            .unwrap()
            .status
            .success();
        if let (Some(status), true) = (status, pinging) {
            break (status, recorded_netns(name));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(up.id() as i32, libc::SIGINT) };
    let exit = up.wait_with_output().unwrap();
    // --host-hooks ecn attached the TC egress program to h11's eth0 (its own /sys/fs/bpf).
    let hooks = std::fs::read_to_string(dir.join("hooks.txt")).unwrap();
    assert!(
        hooks.contains("eth0") && hooks.contains("tc   program id"),
        "{hooks}"
    );
    assert!(
        !exit.status.success(),
        "net up was interrupted, yet exited 0"
    );
    assert_nothing_left(name, &netns);
    for node in status["nodes"].as_array().unwrap() {
        let pid = node["pid"].as_u64().unwrap();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{} (pid {pid}) still runs",
            node["name"]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lossless net experiment incast` on the 2x2x2 fabric: three DCQCN senders into h22. Every
/// frame sent arrives (the receiver's count against each sender's), the switches paused (their
/// PAUSEs counted where sent and where received, and a sender held its frames for them), marked
/// and sent CNPs that reached the senders; the summary, table and plot are written.
fn incast(name: &str, switch: &str) {
    let (summary, stdout, dir) = experiment(name, "incast", &["--switch", switch, "--secs", "2"]);
    let senders = summary["senders"].as_array().unwrap();
    assert_eq!(senders.len(), 3, "{summary}");
    for s in senders {
        assert!(count(&s["sent"]) > 100, "{stdout}");
        assert_eq!(count(&s["received"]), count(&s["sent"]), "{stdout}");
    }
    assert_eq!(count(&summary["lossless_drops"]), 0, "{stdout}");
    assert_eq!(count(&summary["switch_drops"]), 0, "{stdout}");
    let switches = summary["switches"].as_array().unwrap();
    let leaf2 = switches.iter().find(|s| s["name"] == "leaf2").unwrap();
    assert!(
        count(&leaf2["pause_tx"]) > 0 && count(&leaf2["ecn_marked"]) > 0,
        "{stdout}"
    );
    let pfc_rx: u64 = switches.iter().map(|s| count(&s["pfc_rx"])).sum();
    let paused_ms: f64 = senders
        .iter()
        .map(|s| s["paused_ms"].as_f64().unwrap())
        .sum();
    assert!(
        pfc_rx > 0 || paused_ms > 0.0,
        "PAUSEs sent, none received: {stdout}"
    );
    assert!(count(&summary["cnp_received"]) > 0, "{stdout}");
    let svg = std::fs::read_to_string(dir.join("incast.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("PAUSE"),
        "{svg:.200}"
    );
    assert!(std::fs::read_to_string(dir.join("table.txt"))
        .unwrap()
        .contains("lost in the lossless class"));
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_switches!(
    incast, "inc":
    incast_on_softswitch_loses_nothing_and_pauses,
    incast_on_bmv2_loses_nothing_and_pauses
);

/// `lossless net experiment EXPERIMENT --out DIR ARGS` on the 2x2x2 fabric, checked to have
/// succeeded and left no network behind: its summary, its stdout and DIR.
fn experiment(name: &str, experiment: &str, args: &[&str]) -> (Value, String, PathBuf) {
    let dir = scratch(name);
    let out = net(name, &["experiment", experiment, "--out"])
        .arg(&dir)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert!(!Path::new(STATE_ROOT).join(name).exists());
    (summary, stdout, dir)
}

/// An lb or link-failure experiment on softswitch, checked to have written its table (a row per
/// policy) and its plot: its summary and its stdout.
fn lb_experiment(name: &str, which: &str, args: &[&str]) -> (Value, String) {
    let (summary, stdout, dir) = experiment(name, which, args);
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    let svg = std::fs::read_to_string(dir.join(format!("{which}.svg"))).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("completion"),
        "{svg:.200}"
    );
    for policy in summary["policies"].as_array().unwrap() {
        let row = format!("| {} |", policy["policy"].as_str().unwrap());
        assert!(table.contains(&row), "{row} not in\n{table}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    (summary, stdout)
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every flow of a policy's run: what its receiver counted against what its sender sent.
fn flows(policy: &Value) -> impl Iterator<Item = &Value> {
    policy["long_flows"]
        .as_array()
        .unwrap()
        .iter()
        .chain(policy["short_flows"].as_array().unwrap())
}

/// `lossless net experiment lb`, short: every policy ran on the live fabric; every frame of
/// the lossless class arrived (each receiver's count against its sender's) and the switches'
/// program dropped none; spray spread the bytes over both spines (the spines' own port
/// counters), more evenly than ecmp; short flows completed.
#[test]
fn lb_experiment_compares_the_policies_without_loss() {
    if !mininet("lb_experiment_compares_the_policies_without_loss") {
        return;
    }
    let (summary, stdout) = lb_experiment("t-sw-lb", "lb", &["--secs", "2", "--short-flows", "4"]);
    let policies = summary["policies"].as_array().unwrap();
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ecmp", "flowlet", "dlb", "spray"], "{stdout}");
    for p in policies {
        for flow in flows(p) {
            assert!(count(&flow["sent"]) > 0, "{stdout}");
            assert_eq!(count(&flow["received"]), count(&flow["sent"]), "{stdout}");
        }
        assert_eq!(count(&p["lossless_drops"]), 0, "{stdout}");
        assert_eq!(count(&p["switch_drops"]), 0, "{stdout}");
        assert_eq!(count(&p["short_completed"]), 4, "{stdout}");
    }
    let policy = |name: &str| policies.iter().find(|p| p["policy"] == name).unwrap();
    let spray: Vec<u64> = policy("spray")["spine_bytes"]
        .as_object()
        .unwrap()
        .values()
        .map(count)
        .collect();
    let total: u64 = spray.iter().sum();
    assert!(
        spray.len() == 2 && spray.iter().all(|b| *b * 4 > total),
        "spray {spray:?}: {stdout}"
    );
    // ecmp keeps each long flow on the spine its 5-tuple hashes to: these two flows' hashes
    // share a spine, so ecmp is the less even of the two.
    let imbalance = |name: &str| policy(name)["imbalance"].as_f64().unwrap();
    assert!(imbalance("spray") < imbalance("ecmp"), "{stdout}");
}

/// `lossless net experiment link-failure`, short: leaf1's busiest uplink goes down a third into
/// each run; the control plane saw it and rewrote the leaves' groups; after that the surviving
/// spine carried the traffic and the dead one next to nothing (their own port counters), the
/// receivers got it, and the run went on to the next policy over the restored link.
#[test]
fn link_failure_moves_traffic_to_the_surviving_spine() {
    if !mininet("link_failure_moves_traffic_to_the_surviving_spine") {
        return;
    }
    let (summary, stdout) = lb_experiment(
        "t-sw-lf",
        "link-failure",
        &[
            "--secs",
            "3",
            "--policies",
            "ecmp,spray",
            "--short-flows",
            "2",
        ],
    );
    let policies = summary["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 2, "{stdout}");
    for p in policies {
        let r = &p["recovery"];
        // The sending leaf's busiest uplink failed; its spine is the dead one.
        let dead = r["link"].as_str().unwrap().strip_prefix("leaf1-").unwrap();
        let survivor = if dead == "spine1" { "spine2" } else { "spine1" };
        let rerouted = r["rerouted_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(r["detected_ms"].as_f64().unwrap() <= rerouted, "{stdout}");
        // After the reroute: the surviving spine carried the traffic (more than 50 frames'
        // worth), the dead one less than 1 % of that, and the receivers got it.
        let surviving = count(&r["surviving_spine_bytes_after"]);
        let dead_after = count(&r["dead_spine_bytes_after"]);
        assert!(
            surviving > 50 * 1000 && dead_after * 100 < surviving,
            "{dead} got {dead_after} bytes after the reroute, {survivor} {surviving}: {stdout}"
        );
        assert!(r["goodput_after_bps"].as_f64().unwrap() > 0.0, "{stdout}");
        let received: u64 = flows(p).map(|f| count(&f["received"])).sum();
        assert!(received > 0, "{stdout}");
    }
}

/// `lossless net experiment collective`, small: a 4-rank ring AllReduce of 64 KiB (one warm-up
/// and one timed iteration), once under ecmp and once under spray, each with 1 and with 4 QPs
/// per connection. Every run completed on every rank (each rank's own summary: its iterations,
/// its times, its QPs, PFC honoured); the run's time is the slowest rank's and nccl-tests' bus
/// bandwidth is what the size and that time make it (recomputed here); the spines' own port
/// counters saw at least the payload the ring sends across the leaves in both iterations; the
/// switches dropped nothing in the lossless class; the table has a row per run.
fn collective(name: &str, switch: &str) {
    let (summary, stdout, dir) = experiment(
        name,
        "collective",
        &[
            "--switch",
            switch,
            "--size",
            "64KiB",
            "--iters",
            "1",
            "--policies",
            "ecmp,spray",
            "--qps-per-conn",
            "1,4",
        ],
    );
    let size = count(&summary["size_bytes"]);
    assert_eq!(size, 65536, "{stdout}");
    let hosts: Vec<&str> = summary["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["h11", "h12", "h21", "h22"], "{stdout}");
    let n = hosts.len() as f64;
    let runs = summary["runs"].as_array().unwrap();
    let done: Vec<(&str, u64)> = runs
        .iter()
        .map(|r| (r["policy"].as_str().unwrap(), count(&r["qps_per_conn"])))
        .collect();
    assert_eq!(
        done,
        [("ecmp", 1), ("ecmp", 4), ("spray", 1), ("spray", 4)],
        "{stdout}"
    );
    let table = std::fs::read_to_string(dir.join("table.md")).unwrap();
    for r in runs {
        let qps = count(&r["qps_per_conn"]);
        let ranks = r["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), hosts.len(), "{stdout}");
        let mut slowest: f64 = 0.0;
        let mut longest_total: f64 = 0.0;
        for (i, rank) in ranks.iter().enumerate() {
            assert_eq!(rank["host"], hosts[i], "{stdout}");
            assert_eq!(count(&rank["rank"]), i as u64, "{stdout}");
            assert_eq!(count(&rank["iterations"]), 2, "{stdout}");
            // A ring: one connection out and one in, each of `qps` QPs.
            assert_eq!(count(&rank["qps"]), 2 * qps, "{stdout}");
            assert_eq!(rank["pfc_honoured"], true, "{stdout}");
            let (time, total) = (
                rank["time_us"].as_f64().unwrap(),
                rank["total_us"].as_f64().unwrap(),
            );
            assert!(time > 0.0 && total >= time, "{stdout}");
            slowest = slowest.max(time);
            longest_total = longest_total.max(total);
        }
        let time = r["time_us"].as_f64().unwrap();
        assert_eq!(time, slowest, "{stdout}");
        assert_eq!(r["total_us"].as_f64().unwrap(), longest_total, "{stdout}");
        // nccl-tests: busbw = S / t × 2(n−1)/n for AllReduce, GB/s.
        let busbw = size as f64 / (time / 1e6) * 2.0 * (n - 1.0) / n / 1e9;
        let reported = r["busbw_gbps"].as_f64().unwrap();
        assert!(
            reported > 0.0 && (reported - busbw).abs() <= busbw * 1e-9,
            "busbw {reported}, from the size and time {busbw}: {stdout}"
        );
        // Two of the ring's connections (h12 → h21, h22 → h11) cross the spines, each with
        // 2(n−1)/n × S bytes of payload per iteration, two iterations.
        let spines: u64 = r["spine_bytes"]
            .as_object()
            .unwrap()
            .values()
            .map(count)
            .sum();
        let across = (2.0 * 2.0 * 2.0 * (n - 1.0) / n * size as f64) as u64;
        assert!(
            spines >= across,
            "spines got {spines} bytes of {across}: {stdout}"
        );
        assert_eq!(count(&r["switch_drops"]), 0, "{stdout}");
        for s in r["switches"].as_array().unwrap() {
            assert_eq!(count(&s["dropped"]), 0, "{stdout}");
        }
        let row = format!("| {} | {qps} |", r["policy"].as_str().unwrap());
        assert!(table.contains(&row), "{row} not in\n{table}");
    }
    assert!(
        stdout.contains("4 runs of 4 ranks, 0 packets dropped in the lossless class"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_switches!(
    collective, "coll":
    collective_experiment_on_softswitch_completes_every_rank_without_loss,
    collective_experiment_on_bmv2_completes_every_rank_without_loss
);

/// `lossless net experiment microburst` on softswitch, three times on the 2x2x2 fabric: h21
/// sends 4 bursts of 32 frames to h22, 300 ms apart, through leaf2's queue toward h22, which
/// drains at the link rate; the verdict passes (exit 0): the switches detect exactly 4
/// microbursts there (none longer than the window, none under way at the read), the last one
/// peaking at no more than the 31 frames a frame of the burst can find ahead nor than the
/// occupancy's maximum, lasting at least about the 27 frame-times a queue draining at the link
/// rate takes back to half the threshold, and the longest sojourn is at least about what 31
/// frames ahead take to leave and under the bursts' spacing. The same 128 frames sent evenly
/// at a quarter of the link rate: no burst anywhere, the verdict passes. With a window shorter than a burst the
/// bursts are congestion, not microbursts: the verdict fails and the experiment exits non-zero.
#[test]
fn microburst_experiment_detects_the_bursts_it_was_given_and_none_without() {
    if !mininet("microburst_experiment_detects_the_bursts_it_was_given_and_none_without") {
        return;
    }
    let args = [
        "--switch",
        "softswitch",
        "--bursts",
        "4",
        "--burst-frames",
        "32",
    ];
    let (summary, stdout, dir) = experiment("t-sw-mb", "microburst", &args);
    assert_eq!(summary["pass"], true, "{stdout}");
    assert_eq!(count(&summary["open_bursts"]), 0, "{stdout}");
    assert_eq!(count(&summary["sent"]["frames"]), 4 * 32, "{stdout}");
    assert_eq!(count(&summary["received"]), 4 * 32, "{stdout}");
    assert_eq!(count(&summary["detected"]), 4, "{stdout}");
    assert_eq!(count(&summary["over_window"]), 0, "{stdout}");
    let queues = summary["queues"].as_array().unwrap();
    let bursty: Vec<&Value> = queues
        .iter()
        .filter(|q| count(&q["microbursts"]) > 0)
        .collect();
    assert_eq!(bursty.len(), 1, "one queue held the bursts: {stdout}");
    let q = bursty[0];
    assert_eq!(q["switch"], "leaf2", "{stdout}");
    // One definition: a peak counts what the occupancy's maximum counts, packets found ahead,
    // so no burst peaks over 31 or over the occupancy's maximum; most of the burst queued
    // (frames leave while a sender the machine descheduled is still sending its burst).
    let peak = count(&q["last_burst_peak_packets"]);
    let threshold = count(&summary["threshold_packets"]);
    assert_eq!(count(&summary["expected"]["peak_packets"]), 31, "{stdout}");
    assert!(
        (threshold + 1..=count(&q["occupancy_max_packets"])).contains(&peak),
        "peak {peak}: {stdout}"
    );
    assert!(count(&q["occupancy_max_packets"]) <= 31, "{stdout}");
    // Back to half the threshold no sooner than the departures from the peak down to it take
    // at the link rate (departures never go faster; a loaded machine makes them slower, which
    // the verdict's window bounds), less one for the microsecond clock.
    let frame_us = 1e6 / summary["link_pps"].as_f64().unwrap();
    let lasted = count(&q["last_burst_duration_us"]) as f64;
    let drained = (peak - threshold / 2) as f64;
    assert!(
        lasted >= (drained - 1.0) * frame_us,
        "lasted {lasted} us from a peak of {peak}: {stdout}"
    );
    // At least about what 31 frames ahead take to leave at the link rate (the switch's own
    // time to take the burst in adds to it), and under the spacing: each burst drained before
    // the next.
    let expected = summary["expected"]["max_sojourn_us"].as_f64().unwrap();
    let longest = count(&q["sojourn_max_us"]) as f64;
    assert!(
        longest > expected / 2.0 && longest < 300_000.0,
        "longest sojourn {longest} us, {expected} expected: {stdout}"
    );
    let buckets: u64 = q["sojourn_us_buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(count)
        .sum();
    assert!(buckets >= 4 * 32, "{stdout}");
    let table = std::fs::read_to_string(dir.join("table.txt")).unwrap();
    assert!(
        table.contains("detected 4 microbursts") && table.contains("PASS"),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    let (summary, stdout, dir) = experiment(
        "t-sw-mb0",
        "microburst",
        &[&args[..], &["--no-bursts"]].concat(),
    );
    assert_eq!(count(&summary["received"]), 4 * 32, "{stdout}");
    assert_eq!(count(&summary["detected"]), 0, "{stdout}");
    assert_eq!(count(&summary["over_window"]), 0, "{stdout}");
    assert_eq!(summary["pass"], true, "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);

    // A window of 5 ms: each burst stays over the threshold for about 27 ms.
    let name = "t-sw-mb5";
    let dir = scratch(name);
    let out = net(name, &["experiment", "microburst", "--out"])
        .arg(&dir)
        .args(args)
        .args(["--window-us", "5000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{stdout}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["pass"], false, "{stdout}");
    assert_eq!(
        (count(&summary["detected"]), count(&summary["over_window"])),
        (0, 4),
        "{stdout}"
    );
    assert!(!Path::new(STATE_ROOT).join(name).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lossless net experiment mixed` on softswitch, on the 2x2x2 fabric, 2 s a run: h12 sends bulk
/// to h11 in priorities 1 and 0 (DWRR 3:1) beside RoCEv2 from h22 (strict), and CNPs reach h11
/// through the same port of leaf1 (h11 and h21 send RoCEv2 with DCQCN into h22's congested
/// port). The verdict passes (the experiment exits 0), the two lossy classes took 3:1 of their
/// bytes within 5% while both queues held frames, and CNPs crossed the port in both runs.
#[test]
fn mixed_experiment_holds_the_weights_and_cnps_do_not_wait_behind_the_bulk() {
    if !mininet("mixed_experiment_holds_the_weights_and_cnps_do_not_wait_behind_the_bulk") {
        return;
    }
    let (summary, stdout, dir) = experiment(
        "t-sw-mix",
        "mixed",
        &[
            "--switch",
            "softswitch",
            "--secs",
            "4",
            "--link-rate",
            "2mbit",
        ],
    );
    assert_eq!(summary["pass"], true, "{stdout}");
    assert_eq!(
        (&summary["switch"], count(&summary["port"])),
        (&"leaf1".into(), 1)
    );
    let shares = summary["bulk"]["shares"].as_array().unwrap();
    let of = |priority: u64| {
        let s = shares
            .iter()
            .find(|s| count(&s["priority"]) == priority)
            .unwrap();
        assert!(count(&s["packets"]) > 30, "{stdout}");
        for held in s["occupancy"].as_array().unwrap() {
            assert!(
                count(held) > 0,
                "priority {priority} not backlogged: {stdout}"
            );
        }
        count(&s["bytes"]) as f64
    };
    let ratio = of(1) / of(0);
    assert!(
        (ratio - 3.0).abs() <= 0.15,
        "3:1 within 5%: {ratio}\n{stdout}"
    );
    for run in ["control", "bulk"] {
        assert!(count(&summary[run]["cnps"]) > 0, "{run}: {stdout}");
    }
    let table = std::fs::read_to_string(dir.join("table.txt")).unwrap();
    assert!(table.contains("PASS"), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}
