//! `lossless lab pfc`: a receiver slower than its sender pauses it through generated PFC
//! frames; the run reports pauses and resumes, no frame is lost, and nothing is left behind;
//! its samples (pfc.csv), plot (pfc.svg) and summary.json agree with what it printed.

use std::fs;

use lossless_tests::{
    bed::privileged,
    lab::{out_dir, run_to_end, samples, summary_json},
};

/// The number after `label` in `text` (e.g. "19560 frames sent" with label " frames sent").
fn number_before(text: &str, label: &str) -> u64 {
    let end = text
        .find(label)
        .unwrap_or_else(|| panic!("no '{label}' in:\n{text}"));
    let start = text[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    text[start..end]
        .parse()
        .unwrap_or_else(|_| panic!("no number before '{label}' in:\n{text}"))
}

#[test]
fn a_slow_receiver_pauses_its_sender_without_loss() {
    if !privileged("a_slow_receiver_pauses_its_sender_without_loss") {
        return;
    }
    let out = out_dir("pfc");
    let stdout = run_to_end("pfc", &out, &["--secs", "2"], &["psnd", "prcv"]);
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("sender: "))
        .unwrap_or_default();
    let sent = number_before(summary, " frames sent");
    let received = number_before(summary, " RoCEv2 frames");
    assert!(sent > 0 && sent == received, "lost frames: {summary}");
    assert!(number_before(summary, " PAUSE and") > 0, "{summary}");
    assert!(number_before(summary, " resume frames") > 0, "{summary}");
    assert!(
        number_before(summary, " frames held") > 0,
        "the sender never held a frame: {summary}"
    );

    let json = summary_json(&out);
    assert_eq!(json["sent_frames"], sent, "{json}");
    assert_eq!(json["received_frames"], received, "{json}");
    assert_eq!(json["lossless"], true, "{json}");
    assert_eq!(
        json["pause_tx"],
        number_before(summary, " PAUSE and"),
        "{json}"
    );
    // A sample every 50 ms over 2 s; the buffer climbs to XOFF (60000 B by default) and PAUSE
    // frames are counted as they go.
    let (csv, rows) = samples(
        &out.join("pfc.csv"),
        "time_s,rx_Mbps,buffer_bytes,pause_tx,resume_tx,pause_rx,sender_paused,paused_ms",
    );
    assert!((30..=41).contains(&rows.len()), "{} samples", rows.len());
    assert!(
        rows.iter().any(|r| r[2] >= 30_000.0),
        "the buffer never passed XON: {csv}"
    );
    assert!(
        rows.windows(2).all(|w| w[1][3] >= w[0][3]),
        "pause_tx went down: {csv}"
    );
    assert!(rows.iter().any(|r| r[6] == 1.0), "never paused: {csv}");
    let svg = fs::read_to_string(out.join("pfc.svg")).unwrap();
    assert!(
        svg.contains("XOFF\n</text>") && svg.contains("PAUSE sent\n</text>"),
        "{svg}"
    );
    fs::remove_dir_all(&out).unwrap();
}
