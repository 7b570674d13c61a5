//! Values the host CLI refuses, and how: each bad duration, rate or count of `host stats
//! --watch`, `host set`, `traffic`, `lab` and `p4` ends the command at once with a message
//! that names the limit, never a panic or a silent clamp; `set` names each key's type.

use std::{
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use lossless_tests::bed::{lossless_bin, Link, TIMEOUT};

/// Runs `lossless ARGS` (in `ns`, if given) and returns its output, failing the test if it is
/// still running after [`TIMEOUT`] (a bad value silently accepted starts a watch loop).
fn run(ns: Option<&sysutil::netns::Namespace>, args: &[&str]) -> Output {
    let mut command = match ns {
        Some(ns) => ns.command(lossless_bin()),
        None => Command::new(lossless_bin()),
    };
    let mut child = command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("lossless {} still runs after {TIMEOUT:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Asserts that `output` is a refusal whose message contains `needle`, not a panic.
fn refused(args: &[&str], output: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{args:?} accepted:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: no '{needle}' in:\n{stderr}"
    );
}

/// For a test that can run (`test`): on a fresh link whose rx end is attached, `lossless host
/// VERB RX_IFACE ARG` is refused for each (ARG, what the refusal says) of `cases`.
fn host_refuses<A: AsRef<str>>(test: &str, verb: &str, cases: &[(A, &str)]) {
    let Some(link) = Link::for_test(test) else {
        return;
    };
    let _attached = link.attach_rx(&["--mode", "skb"]);
    for (arg, needle) in cases {
        let args = ["host", verb, &link.rx.ifname, arg.as_ref()];
        refused(&args, &run(Some(&link.rx_ns), &args), needle);
    }
}

/// `host stats --watch` on an attached interface: inf, 1e300 and 2^64 used to panic, 0,
/// NaN and -0 to run silently.
#[test]
fn host_stats_watch_refuses_bad_intervals() {
    let cases = [
        ("inf", "is not a duration"),
        ("1e300", "is too long: durations here are 0.1 s to 86400 s"),
        ("2^64", "is not a duration"),
        ("18446744073709551616", "is too long"),
        ("0", "is too short: durations here are 0.1 s to 86400 s"),
        ("NaN", "is not a duration"),
        ("-0", "is too short"),
    ]
    // `--watch=-0`: a value that starts with '-' only reaches the parser with '='.
    .map(|(bad, needle)| (format!("--watch={bad}"), needle));
    host_refuses("host_stats_watch_refuses_bad_intervals", "stats", &cases);
}

/// `host set` says what each key holds when a value does not fit it.
#[test]
fn host_set_names_each_keys_type() {
    let cases = [
        (
            "dscp.10.prio=-1",
            "dscp.10.prio: '-1' is not a priority (a whole number 0..7)",
        ),
        (
            "cnp.dscp=99",
            "cnp.dscp: '99' is not a DSCP value (a whole number 0..63)",
        ),
        ("ecn.prio3.kmin_bytes=1.5", "is not a number of bytes"),
        (
            "pfc.watchdog_ms=inf",
            "pfc.watchdog_ms: 'inf' is not a duration",
        ),
        (
            "cnp.interval_us=1e300",
            "cnp.interval_us: '1e300' is too long",
        ),
        (
            "ecn.prio3.rate_bps=1e300",
            "above the highest rate accepted",
        ),
    ];
    host_refuses("host_set_names_each_keys_type", "set", &cases);
}

/// The same parser bounds every other duration of the CLI (refused before anything runs, so
/// no root is needed).
#[test]
fn every_cli_duration_is_bounded() {
    let send = ["traffic", "send", "--iface", "lo", "--dst-ip", "127.0.0.1"];
    let recv = ["traffic", "recv", "--iface", "lo"];
    let p4_watch = ["p4", "watch"];
    // (command, its options, what the refusal says)
    let cases: &[(&[&str], &[&str], &str)] = &[
        (&send, &["--duration", "inf"], "is not a duration"),
        (&send, &["--duration", "0"], "is too short"),
        (&send, &["--count", "0"], "0 is not in 1.."),
        (&send, &["--rate", "1e300"], "above the highest rate"),
        (&send, &["--max-burst-us", "2s"], "is too long"),
        (
            &send,
            &["--dcqcn", "--dcqcn-timer-us", "NaN"],
            "is not a duration",
        ),
        (&recv, &["--idle-timeout=-0"], "is too short"),
        (&recv, &["--interval", "1e300"], "is too long"),
        (&recv, &["--duration", "2^64"], "is not a duration"),
        (
            &recv,
            &["--cnp", "--cnp-interval-us", "inf"],
            "is not a duration",
        ),
        (&p4_watch, &["--interval", "0"], "is too short"),
        (&p4_watch, &["--interval", "inf"], "is not a duration"),
        (&["lab", "pfc"], &["--secs", "inf"], "is not a duration"),
        (&["lab", "ecn"], &["--step-secs", "0"], "is too short"),
        (&["lab", "incast"], &["--stagger=-1"], "is too short"),
        (&["lab", "lb"], &["--secs", "601"], "is too long"),
        (
            &["lab", "lb"],
            &["--flowlet-timeout-us", "0"],
            "is too short",
        ),
    ];
    for (command, options, needle) in cases {
        let args = [*command, *options].concat();
        refused(&args, &run(None, &args), needle);
    }
}
