//! Seeded misconfigurations of a generated fabric, each shown twice (issue 37, part 4):
//! `lossless check FABRIC --tuning FILE` reports it as its one rule, and `lossless sim run` of
//! the same fabric and tuning shows what it does to traffic, by the report's counters. The
//! fixed tuning is clean of both: no finding, no symptom. The PFC deadlock of a buffer cycle is
//! shown on a tutorial fabric instead (sim/tests/tutorial_fabric.rs and check_cli.rs).

use std::process::Command;

use serde_json::Value;
use testkit::{output_of, TempDir};

/// The binary under test, both commands.
fn lossless() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lossless"))
}

/// A fabric, a workload and a tuning (the TOML of `--tuning`, which is also `lossless sim`'s
/// `[tuning]` table) in a directory of its own.
struct Case {
    dir: TempDir,
    fabric: &'static str,
    workload: String,
}

impl Case {
    /// The case `name`: `fabric` and `workload`, in a fresh directory.
    fn new(name: &str, fabric: &'static str, workload: &str) -> Case {
        Case {
            dir: TempDir::new("lossless-misconfigured", name),
            fabric,
            workload: workload.to_owned(),
        }
    }

    /// Writes the workload file `file` (`text`) into the case's directory and makes it the
    /// workload.
    fn write_workload(&mut self, file: &str, text: &str) {
        let path = self.dir.file(file, text);
        self.workload = path.to_str().expect("a UTF-8 temporary path").to_owned();
    }

    /// The rules of every finding `lossless check` reports with `tuning`, and its exit status.
    fn check(&self, name: &str, tuning: &str) -> (Vec<String>, Option<i32>) {
        let file = self.dir.file(&format!("{name}.toml"), tuning);
        let out = lossless()
            .args(["check", self.fabric, "--json", "--tuning"])
            .arg(&file)
            .output()
            .expect("running lossless check");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
        });
        let rules = report["findings"]
            .as_array()
            .expect("the report's findings")
            .iter()
            .map(|f| f["rule"].as_str().expect("a finding's rule").to_string())
            .collect();
        (rules, out.status.code())
    }

    /// The summary of `lossless sim run` with `tuning`, which must end on its own with every
    /// flow complete.
    fn simulate(&self, name: &str, tuning: &str) -> Value {
        let scenario = self.dir.file(
            &format!("{name}-scenario.toml"),
            &format!(
                "topology = \"{}\"\nworkload = [\"{}\"]\nseed = 1\ntime = \"100ms\"\n\n[tuning]\n{tuning}",
                self.fabric, self.workload
            ),
        );
        let out = output_of(
            lossless()
                .args(["sim", "run", "--json", "--out"])
                .arg(self.dir.0.join(name))
                .arg(&scenario),
        );
        let records: Value = serde_json::from_slice(&out.stdout).expect("sim run's JSON");
        let summary = records[0]["summary"].clone();
        assert_eq!(summary["end"], "idle", "{name}: {summary:#}");
        assert_eq!(
            summary["flows"]["completed"], summary["flows"]["total"],
            "{name}: every flow completes: {summary:#}"
        );
        summary
    }

    /// Checks `seeded`, which must be reported as errors of `rule` and nothing else, and
    /// `fixed`, which must be reported clean; the summaries of both runs.
    fn run(&self, rule: &str, seeded: &str, fixed: &str) -> (Value, Value) {
        let (rules, status) = self.check("seeded", seeded);
        assert_eq!(
            status,
            Some(1),
            "the seeded tuning fails the check: {rules:?}"
        );
        assert!(
            !rules.is_empty() && rules.iter().all(|r| r == rule),
            "only {rule} is found: {rules:?}"
        );
        let (rules, status) = self.check("fixed", fixed);
        assert_eq!(
            (rules.as_slice(), status),
            (&[][..], Some(0)),
            "the fixed tuning is clean"
        );
        (
            self.simulate("seeded", seeded),
            self.simulate("fixed", fixed),
        )
    }
}

/// The counter at `path` (dot-separated) of a summary.
fn counter(summary: &Value, path: &str) -> u64 {
    path.split('.')
        .fold(summary, |v, key| &v[key])
        .as_u64()
        .unwrap_or_else(|| panic!("{path} in {summary:#}"))
}

/// Kmin and Kmax above XOFF: under a 6-to-1 incast the switches pause instead of marking, so
/// PFC, not DCQCN, holds the senders back. With Kmax below XOFF the queue marks first: many
/// times the marks and CNPs, a fraction of the PAUSEs.
#[test]
fn ecn_above_xoff_pauses_instead_of_marking_and_the_fix_marks_first() {
    let case = Case::new("ecn", "leaf-spine:1,2,4", "incast:senders=6,size=2MB");
    // XOFF is the default 16 packets in both.
    let (seeded, fixed) = case.run(
        "ecn-above-xoff",
        "ecn.kmin_packets = 20\necn.kmax_packets = 40\n",
        "ecn.kmin_packets = 3\necn.kmax_packets = 12\n",
    );
    let [marks, cnps, pauses] = ["ecn.marked", "ecn.cnps_received", "pfc.pauses_sent"]
        .map(|c| (counter(&seeded, c), counter(&fixed, c)));
    assert!(
        marks.0 * 10 < marks.1 && cnps.0 * 3 < cnps.1,
        "the seeded queues barely mark (marks, CNPs: seeded {:?}, fixed {:?})",
        (marks.0, cnps.0),
        (marks.1, cnps.1)
    );
    assert!(
        pauses.0 > 3 * pauses.1,
        "the seeded queues pause far more: PAUSEs seeded {}, fixed {}",
        pauses.0,
        pauses.1
    );
    for summary in [&seeded, &fixed] {
        assert_eq!(
            counter(summary, "drops.buffer_full"),
            0,
            "PFC keeps it lossless"
        );
    }
}

/// XOFF too close to the queue's depth for a 1 km host cable at 100 Gb/s: what is on its way
/// when the PAUSE leaves overflows the queue, and lossless traffic is dropped despite PFC. The
/// simulator bounds a switch's queues by one shared buffer (docs/sim.md), so the leaves get a
/// buffer of the check's queue, 64 frames of the 9000-byte MTU (9018 bytes with Ethernet's
/// header and FCS): one host sends to the other through a 25 Gb/s spine, and only the sending
/// leaf's uplink queue fills. The fix lowers XOFF by the headroom `--suggest` computes.
#[test]
fn headroom_short_drops_lossless_frames_and_the_lower_xoff_loses_none() {
    let case = Case::new(
        "headroom",
        "leaf-spine:1,2,1,spine-speed=25G,host-cable=1km,leaf-buffer=577152B",
        "incast:senders=1,size=2MB",
    );
    // Kmax below either XOFF, so that only the headroom differs.
    let ecn = "ecn.kmin_packets = 11\necn.kmax_packets = 45\n";
    let (seeded, fixed) = case.run(
        "headroom",
        &format!("pfc.xoff_packets = 56\npfc.xon_packets = 14\n{ecn}"),
        &format!("pfc.xoff_packets = 46\npfc.xon_packets = 11\n{ecn}"),
    );
    for summary in [&seeded, &fixed] {
        assert!(
            counter(summary, "pfc.pauses_sent") > 0,
            "PFC paused: {summary:#}"
        );
    }
    assert!(
        counter(&seeded, "drops.buffer_full") > 0
            && counter(&seeded, "transport.retransmitted") > 0,
        "the seeded queue overflows: {:#}",
        seeded["drops"]
    );
    assert_eq!(
        (
            counter(&fixed, "drops.buffer_full"),
            counter(&fixed, "transport.retransmitted")
        ),
        (0, 0),
        "the fixed XOFF loses nothing"
    );
}

/// CNPs mapped to the data's priority: two 3-to-1 incasts cross the same 10 Gb/s spine in
/// opposite directions, so the CNPs of each go back through the other's congested (and paused)
/// uplink queue. In the data's priority they wait behind that queue's data and its pauses, and
/// DCQCN acts on old congestion: the fabric pauses more and the flows take several times as
/// long as with CNPs in priority 6 (the default class), served first. The report has no CNP
/// latency; PAUSEs and completion times are what shows it.
#[test]
fn cnps_in_the_data_priority_slow_dcqcn_and_the_strict_priority_fix_does_not() {
    // The workload is a file of the case's directory.
    let mut case = Case::new("cnp", "leaf-spine:1,2,4,spine-speed=10G", "");
    // Endpoints 0-3 are leaf1's hosts, 4-7 leaf2's.
    case.write_workload(
        "crossing-incasts.toml",
        "[[part]]\nkind = \"incast\"\nsenders = 3\nsize = \"2MB\"\nhosts = [0, 4, 5, 6]\n\n\
         [[part]]\nkind = \"incast\"\nsenders = 3\nsize = \"2MB\"\nhosts = [7, 1, 2, 3]\n",
    );
    // Kmax below XOFF in both, so that only the CNPs' class differs.
    let ecn = "ecn.kmin_packets = 3\necn.kmax_packets = 12\n";
    let (seeded, fixed) = case.run(
        "cnp-not-above-data",
        &format!("{ecn}classes = [{{ dscp = 26, priority = 3 }}, {{ dscp = 48, priority = 3 }}]\n"),
        ecn,
    );
    let pauses = [&seeded, &fixed].map(|s| counter(s, "pfc.pauses_sent"));
    assert!(
        pauses[0] * 10 > pauses[1] * 14,
        "the seeded fabric pauses more: PAUSEs seeded {}, fixed {}",
        pauses[0],
        pauses[1]
    );
    let fct = [&seeded, &fixed].map(|s| s["flows"]["fct_us"]["p50"].as_f64().unwrap());
    assert!(
        fct[0] > 2.0 * fct[1],
        "the seeded flows take longer: median FCT seeded {} µs, fixed {} µs",
        fct[0],
        fct[1]
    );
}
