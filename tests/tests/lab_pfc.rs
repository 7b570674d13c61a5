//! `lossless lab pfc`: a receiver slower than its sender pauses it through generated PFC
//! frames; the run reports pauses and resumes, no frame is lost, and nothing is left behind.

use std::process::Command;

use lossless_tests::bed::{assert_nothing_left, lossless_bin, privileged, succeeded};

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
    let child = Command::new(lossless_bin())
        .args(["lab", "pfc", "--secs", "2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stdout = succeeded(child.wait_with_output().unwrap());
    let summary = stdout.lines().last().unwrap_or_default();
    let sent = number_before(summary, " frames sent");
    let received = number_before(summary, " RoCEv2 frames");
    assert!(sent > 0 && sent == received, "lost frames: {summary}");
    assert!(number_before(summary, " PAUSE and") > 0, "{summary}");
    assert!(number_before(summary, " resume frames") > 0, "{summary}");
    assert!(
        number_before(summary, " frames held") > 0,
        "the sender never held a frame: {summary}"
    );
    assert_nothing_left(&["psnd", "prcv"], pid);
}
