//! `lossless lab lb` end to end, through the binary: every policy runs both workloads through
//! the XDP balancer, the uplink counters agree with the kernel's own counters at the spines,
//! the closed loop (ECN, CNPs, DCQCN, PFC relayed by the balancer) delivers every flow whole
//! where the open loop loses, the numbers order the policies as the literature does (spray the
//! most balanced and, with a slow path, the most reordered; ecmp the least balanced on
//! elephants), the JSON and the plot are written, and nothing is left behind — after a full run
//! and after Ctrl-C.

use std::{fs, path::Path};

use lossless_tests::{
    bed::{exclusive, succeeded},
    lab::{alone_with_out_dir, interrupted, lab, out_dir, run_to_end, summary_json},
};
use serde_json::Value;

/// The namespace prefixes of the lab (see control/src/lab/lb/topology.rs).
const NAMESPACE_PREFIXES: [&str; 5] = ["lbal", "lleaf", "lrcv", "lspn", "lsnd"];

/// The run of `policy` on `workload` in summary.json.
fn run<'a>(runs: &'a [Value], workload: &str, policy: &str) -> &'a Value {
    runs.iter()
        .find(|r| r["workload"] == workload && r["policy"] == policy)
        .unwrap_or_else(|| panic!("no {workload}/{policy} run"))
}

fn number(run: &Value, key: &str) -> f64 {
    run[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in {run}"))
}

#[test]
fn lb_lab_orders_the_policies_as_the_literature_does() {
    let Some((_alone, out)) = alone_with_out_dir(
        "lb_lab_orders_the_policies_as_the_literature_does",
        "lab-lb",
    ) else {
        return;
    };
    // The default workloads: elephants need their 3 s for enough flowlets to average out.
    let stdout = run_to_end("lb", &out, &[], &NAMESPACE_PREFIXES);
    for expected in [
        "imbalance",
        "websearch  spray",
        "elephants  ecmp",
        "most reordered",
    ] {
        assert!(stdout.contains(expected), "no '{expected}' in:\n{stdout}");
    }

    let summary = summary_json(&out);
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8, "2 workloads x 4 policies");
    assert_eq!(summary["stopped_early"], false);
    for r in runs {
        // The spine behind each uplink received what the balancer sent it (the kernel's own
        // count, which also counts the few ARP and IPv6 neighbour frames the balancer's
        // kernel sends on the uplink).
        let uplinks = r["uplinks"].as_array().unwrap();
        assert_eq!(uplinks.len(), 4);
        let forwarded: u64 = uplinks
            .iter()
            .map(|u| u["tx_packets"].as_u64().unwrap())
            .sum();
        // Every RoCEv2 frame crossed the balancer once, to one uplink. So did a few ICMP
        // messages: a sender's kernel answers the CNPs (UDP to port 4791, where no socket
        // listens: the traffic tool reads them from a packet socket) with port unreachable,
        // at most about one a second.
        let sent = r["packets_sent"].as_u64().unwrap();
        assert!((sent..=sent + 32).contains(&forwarded), "{r}");
        for u in uplinks {
            let extra = u["spine_rx_packets"].as_u64().unwrap() - u["tx_packets"].as_u64().unwrap();
            assert!(extra <= 16, "{u}");
        }
        // The closed loop loses nothing: every frame arrived, and every flow is whole unless
        // the receiver itself fell behind (its socket's drops, counted by the kernel).
        let received = r["packets_received"].as_u64().unwrap();
        let receiver_drops = r["receiver_drops"].as_u64().unwrap();
        assert_eq!(received + receiver_drops, sent, "{r}");
        if receiver_drops == 0 {
            assert_eq!(r["fct"]["flows"], r["flows"], "{r}");
        }
        assert!(
            number(&r["fct"], "p99_ms") >= number(&r["fct"], "p50_ms"),
            "{r}"
        );
    }
    // The spines marked and the receiver's kernel answered every mark with a CNP (at most
    // one per QP per 50 µs: a frame of these flows takes 160 µs or more).
    let total = |key: &str| -> u64 {
        runs.iter()
            .map(|r| r["closed_loop"][key].as_u64().unwrap())
            .sum()
    };
    assert!(total("ecn_marked") > 100, "{summary}");
    assert!(
        total("cnps_sent") * 100 >= total("ecn_marked") * 95,
        "{summary}"
    );
    for workload in ["websearch", "elephants"] {
        let of: Vec<&Value> = runs.iter().filter(|r| r["workload"] == workload).collect();
        // Per-packet round robin splits the bytes evenly, better than any other policy.
        let spray = run(runs, workload, "spray");
        assert!(number(spray, "imbalance") < 1.01, "{spray}");
        for r in &of {
            assert!(number(r, "imbalance") >= number(spray, "imbalance"), "{r}");
        }
        // ecmp keeps each flow on one path: nothing reordered.
        assert_eq!(
            number(run(runs, workload, "ecmp"), "reordered_fraction"),
            0.0
        );
    }
    // Elephants: ecmp's hash puts several on one path; spray puts a quarter of every flow
    // on the slow path, whose queue delays it behind the rest.
    let elephants: Vec<&Value> = runs
        .iter()
        .filter(|r| r["workload"] == "elephants")
        .collect();
    let ecmp = run(runs, "elephants", "ecmp");
    let spray = run(runs, "elephants", "spray");
    assert!(number(spray, "reordered_fraction") > 0.05, "{spray}");
    for r in &elephants {
        assert!(number(r, "imbalance") <= number(ecmp, "imbalance"), "{r}");
        assert!(
            number(r, "reordered_fraction") <= number(spray, "reordered_fraction"),
            "{r}"
        );
    }

    let svg = fs::read_to_string(out.join("lb.svg")).unwrap();
    assert!(svg.contains("<svg"), "lb.svg is no SVG");
    for policy in ["ecmp", "flowlet", "dlb", "spray"] {
        assert!(svg.contains(policy), "the plot does not name {policy}");
    }
    fs::remove_dir_all(&out).unwrap();
}

/// `lossless lab lb` with `args` run to the end into `out`: what it printed, and the runs of
/// its summary.json.
fn run_lb(out: &Path, args: &[&str]) -> (String, Vec<Value>) {
    let stdout = run_to_end("lb", out, args, &NAMESPACE_PREFIXES);
    let runs = summary_json(out)["runs"].as_array().unwrap().clone();
    (stdout, runs)
}

/// Frames lost and flows whole in the run of `policy` on elephants.
fn lost_and_whole(out: &Path, policy: &str) -> (u64, u64) {
    let summary = summary_json(out);
    let r = run(summary["runs"].as_array().unwrap(), "elephants", policy);
    let lost = r["packets_sent"].as_u64().unwrap() - r["packets_received"].as_u64().unwrap();
    (lost, r["fct"]["flows"].as_u64().unwrap())
}

/// ECN set to mark only just below XOFF, so the spines' queues reach it: the slow spine
/// pauses, the balancer relays every pause to the sender, which holds its frames, and nothing
/// is lost. The same elephants without flow control (`--open-loop`) overflow the slow path.
#[test]
fn lb_lab_pauses_hold_the_senders_and_the_open_loop_loses() {
    let Some(_alone) = exclusive("lb_lab_pauses_hold_the_senders_and_the_open_loop_loses") else {
        return;
    };
    let common = [
        "--workload",
        "elephants",
        "--policies",
        "ecmp",
        "--secs",
        "1",
    ];
    let out = out_dir("lab-lb-pfc");
    let pfc = [
        "--kmin", "79000", "--kmax", "80000", "--xoff", "80000", "--xon", "40000",
    ];
    let args: Vec<&str> = common.iter().chain(&pfc).copied().collect();
    let (stdout, runs) = run_lb(&out, &args);
    let ecmp = run(&runs, "elephants", "ecmp");
    let counts = &ecmp["closed_loop"];
    let paused = counts["pauses_sent"].as_u64().unwrap();
    assert!(paused > 0, "no spine paused:\n{stdout}");
    // One downlink: each PAUSE relayed once, and the sender held its frames.
    assert_eq!(counts["pauses_relayed"].as_u64(), Some(paused), "{counts}");
    assert!(number(counts, "paused_ms") > 0.0, "{counts}");
    assert_eq!(lost_and_whole(&out, "ecmp"), (0, 8), "{stdout}");
    fs::remove_dir_all(&out).unwrap();

    let out = out_dir("lab-lb-open");
    let args: Vec<&str> = common.iter().chain(&["--open-loop"]).copied().collect();
    let stdout = run_to_end("lb", &out, &args, &NAMESPACE_PREFIXES);
    assert!(stdout.contains("open loop"), "{stdout}");
    let (lost, whole) = lost_and_whole(&out, "ecmp");
    assert!(
        lost > 0 && whole < 8,
        "lost {lost}, {whole} whole:\n{stdout}"
    );
    assert!(summary_json(&out)["runs"][0]["closed_loop"].is_null());
    fs::remove_dir_all(&out).unwrap();
}

/// The allreduce workload: one connection of 4 QPs that share a UDP source port. ecmp hashes
/// them as one flow, so one uplink carries all of it; e-ecmp adds the destination QP and
/// spreads them. Both complete every step whole, and report nccl-tests' bandwidths.
#[test]
fn lb_lab_allreduce_spreads_a_connections_qps_only_with_e_ecmp() {
    let Some((_alone, out)) = alone_with_out_dir(
        "lb_lab_allreduce_spreads_a_connections_qps_only_with_e_ecmp",
        "lab-lb-allreduce",
    ) else {
        return;
    };
    let args = [
        "--workload",
        "allreduce",
        "--policies",
        "ecmp,e-ecmp",
        "--collective-size",
        "1MB",
    ];
    let (stdout, runs) = run_lb(&out, &args);
    assert!(
        stdout.contains("allreduce: 2 ranks, 1000000 B per rank, 4 QPs per connection, 2 steps"),
        "{stdout}"
    );
    let carrying = |r: &Value| {
        r["uplinks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["tx_bytes"].as_u64().unwrap() > 0)
            .count()
    };
    let ecmp = run(&runs, "allreduce", "ecmp");
    let e_ecmp = run(&runs, "allreduce", "e-ecmp");
    assert_eq!(carrying(ecmp), 1, "{ecmp}");
    assert!(carrying(e_ecmp) > 1, "{e_ecmp}");
    for r in [ecmp, e_ecmp] {
        // 2 steps x 4 QPs, every frame delivered.
        assert_eq!(r["flows"], 8, "{r}");
        assert_eq!(r["fct"]["flows"], 8, "{r}");
        assert_eq!(r["packets_received"], r["packets_sent"], "{r}");
        let c = &r["collective"];
        assert_eq!(
            (c["ranks"].as_u64(), c["steps"].as_u64()),
            (Some(2), Some(2)),
            "{c}"
        );
        // nccl-tests: algbw = S / t; busbw = algbw x 2(n-1)/n, which is 1 for two ranks.
        let seconds = number(c, "time_ms") / 1e3;
        let algbw = 1e6 * 8.0 / seconds;
        assert!((number(c, "algbw_bps") / algbw - 1.0).abs() < 1e-9, "{c}");
        assert!((number(c, "busbw_bps") / algbw - 1.0).abs() < 1e-9, "{c}");
        // Every step's flows finish within the collective's time.
        assert!(number(&r["fct"], "p99_ms") <= number(c, "time_ms"), "{r}");
    }
    fs::remove_dir_all(&out).unwrap();
}

/// A workload of the one format (docs/workloads.md) in the lab: an incast from both senders,
/// twice, every flow delivered whole under each policy.
#[test]
fn lb_lab_runs_an_incast_of_the_one_workload_format() {
    let Some((_alone, out)) = alone_with_out_dir(
        "lb_lab_runs_an_incast_of_the_one_workload_format",
        "lab-lb-incast",
    ) else {
        return;
    };
    let args = [
        "--senders",
        "2",
        "--workload",
        "incast:senders=2,size=200KB,every=50ms,reps=2",
        "--policies",
        "ecmp,spray",
    ];
    let (stdout, runs) = run_lb(&out, &args);
    for policy in ["ecmp", "spray"] {
        let r = run(&runs, "incast", policy);
        // 2 senders x 2 rounds, 200 KB each.
        assert_eq!(
            (r["flows"].as_u64(), r["fct"]["flows"].as_u64()),
            (Some(4), Some(4)),
            "{stdout}"
        );
        assert_eq!(r["packets_received"], r["packets_sent"], "{r}");
        assert!(r["packets_sent"].as_u64().unwrap() >= 4 * 200, "{r}");
    }
    fs::remove_dir_all(&out).unwrap();
}

#[test]
fn lb_lab_refuses_bad_options_by_name() {
    for (args, expected) in [
        (
            &["--policies", "ecmp,roundrobin"][..],
            "'roundrobin' is not a policy (ecmp, flowlet, dlb, spray, wcmp, e-ecmp)",
        ),
        (&["--load", "0"][..], "--load 0"),
        (&["--size", "40"][..], "--size 40"),
        (
            &["--xoff", "300000"][..],
            "--xon 75000 < --xoff 300000 < --buffer 250000",
        ),
        (&["--kmax", "130000"][..], "ECN must mark before PFC pauses"),
        (&["--collective-size", "1KB"][..], "--collective-size"),
        (&["--qps-per-conn", "0"][..], "--qps-per-conn"),
        (
            &["--workload", "permutation:size=1KB"][..],
            "to its one receiver (endpoint 0)",
        ),
        (
            &["--workload", "nosuch:x=1"][..],
            "kind `nosuch` is not one of",
        ),
    ] {
        let output = lab("lb", Path::new("unused"), args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn lb_lab_cleans_up_on_ctrl_c() {
    let Some((_alone, out)) = alone_with_out_dir("lb_lab_cleans_up_on_ctrl_c", "lab-lb-ctrl-c")
    else {
        return;
    };
    // Under way once it has built its test bed: it prints the table's header then.
    interrupted(
        "lb",
        &out,
        &["--secs", "60", "--workload", "elephants"],
        |line| line.starts_with("workload"),
        &NAMESPACE_PREFIXES,
    );
    assert_eq!(summary_json(&out)["stopped_early"], true);
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn lb_lab_counts_flows_that_start_after_an_idle_gap() {
    let Some((_alone, out)) = alone_with_out_dir(
        "lb_lab_counts_flows_that_start_after_an_idle_gap",
        "lab-lb-idle-gap",
    ) else {
        return;
    };
    // One light elephant whose messages are 2.4 s apart (twice the flowlet timeout), and
    // which may start seconds into the run: silences longer than the receiver's wait after
    // a loss. The run must still count every frame of every message.
    let args = [
        "--workload",
        "elephants",
        "--elephants",
        "1",
        "--policies",
        "ecmp",
        "--load",
        "0.03",
        "--flowlet-timeout-us",
        "1200000",
        "--secs",
        "12",
    ];
    let stdout = succeeded(lab("lb", &out, &args).output().unwrap());
    let summary = summary_json(&out);
    let ecmp = run(summary["runs"].as_array().unwrap(), "elephants", "ecmp");
    let sent = ecmp["packets_sent"].as_u64().unwrap();
    assert!(sent > 0, "{ecmp}");
    assert_eq!(ecmp["packets_received"].as_u64().unwrap(), sent, "{stdout}");
    assert_eq!(ecmp["fct"]["flows"].as_u64(), Some(1), "{ecmp}");
    fs::remove_dir_all(&out).unwrap();
}
