//! `lossless lab lb` end to end, through the binary: every policy runs both workloads through
//! the XDP balancer, the uplink counters agree with the kernel's own counters at the spines,
//! the numbers order the policies as the literature does (spray the most balanced and, with a
//! slow path, the most reordered; ecmp the least balanced on elephants), the JSON and the plot
//! are written, and nothing is left behind — after a full run and after Ctrl-C.

use std::{fs, path::Path};

use lossless_tests::{
    bed::{exclusive, succeeded},
    lab::{interrupted, lab, out_dir, run_to_end, summary_json},
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
    // One lab at a time: each keeps the machine's cores busy.
    let Some(_alone) = exclusive("lb_lab_orders_the_policies_as_the_literature_does") else {
        return;
    };
    let out = out_dir("lab-lb");
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
        // Every frame crossed the balancer once, to one uplink, and the spine behind it
        // received it (the kernel's own count, which also counts the few ARP and IPv6
        // neighbour frames the balancer's kernel sends on the uplink).
        let uplinks = r["uplinks"].as_array().unwrap();
        assert_eq!(uplinks.len(), 4);
        let forwarded: u64 = uplinks
            .iter()
            .map(|u| u["tx_packets"].as_u64().unwrap())
            .sum();
        assert_eq!(forwarded, r["packets_sent"].as_u64().unwrap(), "{r}");
        for u in uplinks {
            let extra = u["spine_rx_packets"].as_u64().unwrap() - u["tx_packets"].as_u64().unwrap();
            assert!(extra <= 16, "{u}");
        }
        assert!(r["packets_received"].as_u64().unwrap() <= forwarded, "{r}");
        assert!(r["fct"]["flows"].as_u64().unwrap() <= r["flows"].as_u64().unwrap());
        // No flow whole, no completion figure (null, not 0).
        assert_eq!(
            r["fct"]["flows"] == 0,
            r["fct"]["p50_ms"].is_null() && r["fct"]["p99_ms"].is_null(),
            "{r}"
        );
    }
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

#[test]
fn lb_lab_refuses_bad_options_by_name() {
    for (args, expected) in [
        (
            &["--policies", "ecmp,roundrobin"][..],
            "'roundrobin' is not a policy (ecmp, flowlet, dlb, spray, wcmp, e-ecmp)",
        ),
        (&["--load", "0"][..], "--load 0"),
        (&["--size", "40"][..], "--size 40"),
    ] {
        let output = lab("lb", Path::new("unused"), args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn lb_lab_cleans_up_on_ctrl_c() {
    let Some(_alone) = exclusive("lb_lab_cleans_up_on_ctrl_c") else {
        return;
    };
    let out = out_dir("lab-lb-ctrl-c");
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
    let Some(_alone) = exclusive("lb_lab_counts_flows_that_start_after_an_idle_gap") else {
        return;
    };
    let out = out_dir("lab-lb-idle-gap");
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
