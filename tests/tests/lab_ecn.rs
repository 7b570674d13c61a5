//! `lossless lab ecn` (the demo's first lab) through the binary: below the drain rate nothing
//! is marked, above it the phantom queue builds and marks follow; the receiver counts as CE
//! exactly what the bottleneck marked; ecn.csv, ecn.svg and summary.json say the same.

use std::fs;

use lossless_tests::{
    bed::privileged,
    lab::{out_dir, run_to_end, samples, summary_json},
};

#[test]
fn marks_follow_the_load_and_land_in_the_outputs() {
    if !privileged("marks_follow_the_load_and_land_in_the_outputs") {
        return;
    }
    let out = out_dir("ecn");
    let stdout = run_to_end(
        "ecn",
        &out,
        &[
            "--drain",
            "20mbit",
            "--steps",
            "0.5,2",
            "--step-secs",
            "1.5",
        ],
        &["esnd", "ebot", "ercv"],
    );
    assert!(
        stdout.contains("wrote ecn.svg, ecn.csv and summary.json"),
        "{stdout}"
    );

    let json = summary_json(&out);
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{json}");
    assert_eq!(
        steps[0]["marked_fraction"], 0.0,
        "marks below the drain rate: {json}"
    );
    assert!(
        steps[1]["marked_fraction"].as_f64().unwrap() > 0.0,
        "{json}"
    );
    assert!(
        steps[1]["vq_bytes_max"].as_u64().unwrap() > 20_000,
        "{json}"
    );
    // The receiver's decoder saw every mark the bottleneck counted.
    assert_eq!(json["marked_frames"], json["received_ce"], "{json}");
    assert_eq!(json["sent_frames"], json["received_frames"], "{json}");

    let (csv, rows) = samples(
        &out.join("ecn.csv"),
        "time_s,offered_Mbps,seen_Mbps,vq_bytes,marked_%,red_%",
    );
    assert!((50..=61).contains(&rows.len()), "{} samples", rows.len());
    assert!(
        rows.windows(2).all(|w| w[1][0] > w[0][0]),
        "time goes on: {csv}"
    );
    assert!(rows.iter().any(|r| r[4] > 0.0), "no marks: {csv}");
    let svg = fs::read_to_string(out.join("ecn.svg")).unwrap();
    assert!(
        svg.contains("Kmax\n</text>") && svg.contains("marked % (measured)\n</text>"),
        "{svg}"
    );
    fs::remove_dir_all(&out).unwrap();
}
