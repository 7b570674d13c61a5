//! `lossless lab incast` end to end, through the binary: the receiver's kernel answers the
//! bottleneck's marks with CNPs, every DCQCN sender receives them and cuts its rate, the plot
//! and the timelines are written, and nothing is left behind — after a full run and after
//! Ctrl-C.

use std::{fs, path::Path};

use lossless_tests::lab::{alone_with_out_dir, interrupted, run_to_end, summary_json};

/// The namespace prefixes of the lab (see control/src/lab/incast.rs).
const NAMESPACE_PREFIXES: [&str; 3] = ["irtr", "ircv", "isnd"];

/// Asserts that `path` exists and is not empty; returns its text.
fn non_empty(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!text.trim().is_empty(), "{} is empty", path.display());
    text
}

#[test]
fn incast_marks_become_kernel_cnps_and_every_sender_cuts() {
    let Some((_alone, out)) = alone_with_out_dir(
        "incast_marks_become_kernel_cnps_and_every_sender_cuts",
        "incast",
    ) else {
        return;
    };
    let stdout = run_to_end(
        "incast",
        &out,
        &["--senders", "2", "--secs", "4"],
        &NAMESPACE_PREFIXES,
    );
    assert!(stdout.contains("Jain's index"), "no summary in:\n{stdout}");

    let summary = summary_json(&out);
    let cnp_sent = summary["cnp_sent"].as_u64().unwrap();
    assert!(cnp_sent > 0, "the kernel sent no CNP: {summary}");
    assert!(summary["ecn_marked"].as_u64().unwrap() > 0, "{summary}");
    let senders = summary["senders"].as_array().unwrap();
    assert_eq!(senders.len(), 2);
    let mut received = 0;
    for sender in senders {
        let cnps = sender["cnp_received"].as_u64().unwrap();
        assert!(cnps > 0, "a sender received no CNP: {sender}");
        received += cnps;
    }
    // Every CNP a sender received was sent by the receiver's kernel (no one else sends any).
    assert!(
        received <= cnp_sent,
        "{received} received > {cnp_sent} sent"
    );

    // rates.csv: qp,time_ns,rate_bps,target_bps,alpha,event,trigger; sender i has QPs
    // from (i + 1) * 256.
    let csv = non_empty(&out.join("rates.csv"));
    for sender in 1..=2u64 {
        let cut = csv.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            fields[0].parse::<u64>().unwrap() / 256 == sender && fields[5] == "cnp"
        });
        assert!(cut, "sender {sender}'s timeline shows no cut");
    }
    let svg = non_empty(&out.join("rates.svg"));
    assert!(svg.contains("<svg"), "rates.svg is no SVG");
    non_empty(&out.join("rates.json"));
    fs::remove_dir_all(&out).unwrap();
}

#[test]
fn incast_cleans_up_on_ctrl_c() {
    let Some((_alone, out)) = alone_with_out_dir("incast_cleans_up_on_ctrl_c", "incast-ctrl-c")
    else {
        return;
    };
    // Under way once it prints rows (its first row after the header).
    let stdout = interrupted(
        "incast",
        &out,
        &["--secs", "60"],
        |line| line.trim_start().starts_with(|c: char| c.is_ascii_digit()),
        &NAMESPACE_PREFIXES,
    );
    assert!(stdout.contains("time_s"), "no table in:\n{stdout}");
    let _ = fs::remove_dir_all(&out);
}
