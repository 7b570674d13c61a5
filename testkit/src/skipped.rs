//! The record of skipped tests: outside CI a test that cannot run here passes after printing
//! `SKIPPED`, a line libtest captures and `cargo test` reports as `ok`. So that a run does not
//! hide what did not run, the skip rule also appends a line to the file [`RECORD_ENV`] names,
//! and `cargo xtask test` (which names one under `target/`) reads them back at the end and
//! says how many were skipped, why, and where to get what they needed.

use std::io::Write as _;
use std::path::Path;

/// The variable naming the file skipped tests are recorded in (unset: they are not).
pub const RECORD_ENV: &str = "LOSSLESS_SKIPPED_RECORD";

/// One skipped test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The test's name.
    pub test: String,
    /// Why it did not run.
    pub reason: String,
}

/// Appends `test` and `reason` to the record, if [`RECORD_ENV`] names one. A record that
/// cannot be written is said on stderr; the test goes on.
pub(crate) fn record(test: &str, reason: &str) {
    if let Some(path) = std::env::var_os(RECORD_ENV) {
        record_in(Path::new(&path), test, reason);
    }
}

/// Appends `test` and `reason` to the record `path`.
fn record_in(path: &Path, test: &str, reason: &str) {
    // One line per test, written at once (tests of several processes append at the same time).
    let line = format!("{}\t{}\n", one_line(test), one_line(reason));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "the skip of {test} was not recorded in {}: {e}",
            path.display()
        );
    }
}

/// `text` on one line, without the record's separator.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

/// The tests recorded in `path` (none if there is no such file).
pub fn read(path: &Path) -> std::io::Result<Vec<Skipped>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(test, reason)| Skipped {
            test: test.to_string(),
            reason: reason.to_string(),
        })
        .collect())
}

/// What a run says about the tests it skipped: how many, by reason (the most frequent first,
/// with the tests), and where to get p4c and BMv2 when tests needed them. Empty when none was
/// skipped.
pub fn summary(skipped: &[Skipped]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in skipped {
        match reasons.iter_mut().find(|(r, _)| *r == s.reason) {
            Some((_, tests)) => tests.push(&s.test),
            None => reasons.push((&s.reason, vec![&s.test])),
        }
    }
    reasons.sort_by_key(|(_, tests)| std::cmp::Reverse(tests.len()));
    let mut out = format!(
        "{} tests were skipped: cargo reported them as ok, but they did not run (under CI=true \
         a skip fails):\n",
        skipped.len()
    );
    for (reason, tests) in &reasons {
        out += &format!("  {:>4}  {reason}\n", tests.len());
        const SHOWN: usize = 5;
        let more = tests.len().saturating_sub(SHOWN);
        let names = tests[..tests.len().min(SHOWN)].join(", ");
        out += &match more {
            0 => format!("        {names}\n"),
            n => format!("        {names} and {n} more\n"),
        };
    }
    if reasons
        .iter()
        .any(|(r, _)| r.contains("p4c") || r.contains("BMv2"))
    {
        out += "p4c and BMv2 are in no package registry: build them from source \
                (github.com/p4lang/p4c, github.com/p4lang/behavioral-model, with \
                simple_switch_grpc) and set LOSSLESS_P4REF to the directory they are installed \
                in (its bin/, lib/, share/), or put p4c-bm2-ss and simple_switch on PATH: \
                docs/softswitch.md, \"BMv2 in the loop\".\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_back_and_summed_up_by_reason() {
        let dir = crate::TempDir::new("testkit", "skipped");
        let path = dir.0.join("skipped");
        assert_eq!(read(&path).unwrap(), []);
        record_in(&path, "a", "needs root");
        record_in(&path, "b", "needs p4c and BMv2: p4c-bm2-ss\nnot found");
        record_in(&path, "c", "needs p4c and BMv2: p4c-bm2-ss\nnot found");
        let skipped = read(&path).unwrap();
        assert_eq!(skipped.len(), 3);
        assert_eq!(
            skipped[1].reason,
            "needs p4c and BMv2: p4c-bm2-ss not found"
        );
        let text = summary(&skipped);
        assert!(text.starts_with("3 tests were skipped"), "{text}");
        let first = text.lines().nth(1).unwrap();
        assert!(first.contains("2  needs p4c and BMv2"), "{text}");
        assert!(text.contains("        b, c\n"), "{text}");
        assert!(text.contains("LOSSLESS_P4REF"), "{text}");
        assert_eq!(summary(&[]), "");
    }
}
