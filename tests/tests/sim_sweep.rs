//! `lossless sim sweep` on the engines it writes for: a Slurm job array submitted to a
//! single-node Slurm that the test starts, its points merged by `lossless sim report`; and the
//! Kubernetes Indexed Job checked against the API's schema by kubernetes-validate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use lossless_tests::bed::{lossless_bin, privileged};
use lossless_tests::slurm::{missing_program, wait_until, Cluster};
use serde_json::Value;
use sysutil::netns::unique_name;

/// The grid of both tests: two policies by two seeds on a 16-host fat-tree.
const SWEEP: &[&str] = &[
    "sim",
    "sweep",
    "--topo",
    "fat-tree:4",
    "--workload",
    "permutation:size=64KB",
    "--grid",
    "policy=ecmp,e-ecmp",
    "--grid",
    "seed=1,2",
];
/// The points that grid makes, in order: (policy, seed).
const POINTS: [(&str, &str); 4] = [
    ("ecmp", "1"),
    ("ecmp", "2"),
    ("e-ecmp", "1"),
    ("e-ecmp", "2"),
];
/// How long the array's tasks may take.
const JOBS: Duration = Duration::from_secs(90);

/// A folder of the test's own, removed when the test passes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(unique_name(name));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for a look", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `lossless ARGS` in `dir`, which must succeed.
fn lossless(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(lossless_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running lossless");
    assert!(
        out.status.success(),
        "lossless {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_sweep_runs_as_a_slurm_job_array() {
    let test = "a_sweep_runs_as_a_slurm_job_array";
    if !privileged(test) {
        return;
    }
    if let Some(program) = missing_program() {
        testkit::skip(
            test,
            &format!("needs {program} (Debian's slurm-wlm and munge: cargo xtask setup)"),
        );
        return;
    }
    let scratch = Scratch::new("llslurm");
    let cluster = Cluster::start(&scratch.0.join("slurm")).unwrap();

    let sweep = scratch.0.join("sweep");
    let mut args = SWEEP.to_vec();
    args.extend(["--slurm", "--name", "lossless-test", "--out", "sweep"]);
    let written = lossless(&scratch.0, &args);
    let script = sweep.join("sweep.sbatch");
    assert!(
        String::from_utf8_lossy(&written.stdout).contains(&format!("sbatch {}", script.display())),
        "{}",
        String::from_utf8_lossy(&written.stdout)
    );

    // Slurm's own check of the script: it would schedule it on this node.
    let checked = cluster
        .run("sbatch", &["--test-only", script.to_str().unwrap()])
        .unwrap();
    assert!(
        String::from_utf8_lossy(&checked.stderr).contains("to start at"),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let submitted = cluster
        .run("sbatch", &["--parsable", script.to_str().unwrap()])
        .unwrap();
    let job = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    assert!(
        job.parse::<u64>().is_ok(),
        "sbatch --parsable printed {job:?}"
    );

    // Slurm's view of a task: four of them, each with the memory of the largest estimate.
    let largest_mib = json(&sweep.join("sweep.json"))["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["estimated_bytes"].as_u64().unwrap() >> 20)
        .max()
        .unwrap();
    let shown = cluster.run("scontrol", &["show", "job", &job]).unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).to_string();
    let asked_mib: u64 = shown
        .split_whitespace()
        .find_map(|f| f.strip_prefix("MinMemoryNode="))
        .and_then(|m| m.strip_suffix('M'))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("no MinMemoryNode in {shown}"));
    assert!(
        asked_mib > largest_mib,
        "{asked_mib} MiB for a run of {largest_mib} MiB"
    );

    let summaries: Vec<PathBuf> = (0..POINTS.len())
        .map(|i| sweep.join(format!("points/{i}/run/summary.json")))
        .collect();
    wait_until("the array's tasks", JOBS, || {
        let queue = cluster.queue()?;
        let completed = cluster.completions().lines().count();
        Ok(queue.is_empty() && completed == POINTS.len())
    })
    .unwrap_or_else(|e| panic!("{e}\nqueue: {:?}\n{}", cluster.queue(), cluster.logs()));
    // Slurm's record of each task: a task of the array, completed, exit code 0.
    let completions = cluster.completions();
    let mut tasks: Vec<usize> = completions
        .lines()
        .map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or_else(|| panic!("no {name} in {line}"))
            };
            assert_eq!(field("ArrayJobId="), job, "{line}");
            assert_eq!(field("JobState="), "COMPLETED", "{line}");
            assert_eq!(field("ExitCode="), "0:0", "{line}");
            field("ArrayTaskId=").parse().unwrap()
        })
        .collect();
    tasks.sort_unstable();
    assert_eq!(tasks, [0, 1, 2, 3]);
    for (i, summary) in summaries.iter().enumerate() {
        assert!(summary.exists(), "no {}", summary.display());
        let log = std::fs::read_to_string(sweep.join(format!("points/{i}/slurm-{job}_{i}.out")))
            .unwrap_or_else(|e| panic!("point {i}'s Slurm output: {e}"));
        assert!(log.contains(&format!("point {i} (")), "{log}");
    }
    drop(cluster);

    let report = lossless(&scratch.0, &["sim", "report", "sweep"]);
    let table = String::from_utf8_lossy(&report.stdout);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), POINTS.len(), "{table}");
    for (i, ((policy, seed), row)) in POINTS.iter().zip(&rows).enumerate() {
        // point, policy, seed, flows, completed, ...
        assert_eq!(row[..3], [i.to_string().as_str(), policy, seed], "{table}");
        assert_eq!(row[3], "16", "a permutation of 16 hosts: {table}");
        assert_eq!(row[4], "16", "every flow completes: {table}");
    }
    // The CSV holds what each point's own summary says.
    let csv = std::fs::read_to_string(sweep.join("report.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let records: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(records.len(), POINTS.len(), "{csv}");
    for (i, record) in records.iter().enumerate() {
        let summary = &json(&summaries[i])["summary"];
        assert_eq!(
            json(&summaries[i])["scenario"]["seed"]
                .as_u64()
                .unwrap()
                .to_string(),
            POINTS[i].1
        );
        for (name, key) in [("slowdown_p50", "p50"), ("slowdown_p99", "p99")] {
            let reported: f64 = record[column(name)].parse().unwrap();
            let own = summary["flows"]["slowdown"][key].as_f64().unwrap();
            assert!(
                (reported - own).abs() < 1e-3,
                "point {i} {name}: {reported} vs {own}"
            );
            assert!(own >= 1.0, "point {i} {name}: {own}");
        }
    }
    let plot = std::fs::read_to_string(sweep.join("report.svg")).unwrap();
    for policy in ["ecmp", "e-ecmp"] {
        assert!(
            plot.lines().any(|l| l.trim() == policy),
            "no line for {policy} in the plot's legend"
        );
    }
}

#[test]
fn the_kubernetes_job_is_valid_for_the_api() {
    let test = "the_kubernetes_job_is_valid_for_the_api";
    let Some(python) = testkit::venv_python_or_skip(test) else {
        return;
    };
    if !python.with_file_name("kubernetes-validate").exists() {
        testkit::skip(
            test,
            "needs kubernetes-validate in the venv (cargo xtask setup)",
        );
        return;
    }
    let scratch = Scratch::new("llk8s");
    let mut args = SWEEP.to_vec();
    args.extend([
        "--k8s",
        "--name",
        "policies-1",
        "--image",
        "registry.example/lossless:0.1",
        "--claim",
        "sweeps",
        "--jobs",
        "3",
        "--out",
        "sweep",
    ]);
    lossless(&scratch.0, &args);
    let manifest = scratch.0.join("sweep/sweep-job.yaml");
    // Strictly (no field the API does not know), for the oldest Kubernetes docs/sim.md names
    // (backoffLimitPerIndex is on by default from 1.29) and the newest the validator ships.
    let validator = python.with_file_name("kubernetes-validate");
    for version in [&["-k", "1.29.0"][..], &[]] {
        let out = Command::new(&validator)
            .arg("--strict")
            .args(version)
            .arg(&manifest)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubernetes-validate {version:?}: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&manifest).unwrap()
        );
    }
    let text = std::fs::read_to_string(&manifest).unwrap();
    for line in [
        "completions: 4\n",
        "parallelism: 3\n",
        "completionMode: Indexed\n",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
}
