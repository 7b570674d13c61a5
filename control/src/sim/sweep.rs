//! Sweeps: a grid of scenarios (every combination of the values given per key) written as
//! `DIR/sweep.json`, each point run by `lossless sim point DIR INDEX` into `DIR/points/INDEX/`.
//! Here the points run as processes, as many at once as asked; `--slurm` writes them as a
//! Slurm job array (`DIR/sweep.sbatch`), `--k8s` as a Kubernetes Indexed Job
//! (`DIR/sweep-job.yaml`): the same binary and the same point command on engines users already
//! have. `lossless sim report DIR` merges what the points wrote into one table and plot.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context as _};
use clap::Args;
use serde::{Deserialize, Serialize};
use sim::scenario::Scenario;

use super::cli::{set_key, ScenarioArgs};
use super::run::{memory_limit, program, run_one, Record};
use crate::lab::output::{draw_panels, write_file, Line, Panel};
use crate::traffic::StopFlag;

/// The most points a sweep may have.
pub const MAX_POINTS: usize = 10_000;
/// The most values one key of a grid may take.
pub const MAX_VALUES: usize = 1_000;
/// The longest sweep file read, bytes.
pub const MAX_SWEEP_BYTES: u64 = 64 << 20;

/// `lossless sim sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The scenario every point starts from.
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// A dimension of the grid, `KEY=V1,V2,...`: `policy`, `seed`, `load` (every cdf part's
    /// load), `time`, or a tuning key (`ecn.kmin_packets`); the sweep runs every combination.
    #[arg(long = "grid", value_name = "KEY=VALUES", required = true)]
    pub grid: Vec<String>,
    /// The P4 program of every switch (default: lossless.p4, built in).
    #[arg(long, value_name = "FILE")]
    pub program: Option<PathBuf>,
    /// The sweep's directory.
    #[arg(long, default_value = "sim-sweep")]
    pub out: PathBuf,
    /// Points run at once here (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Write a Slurm job array (DIR/sweep.sbatch) for `sbatch` instead of running here.
    #[arg(long, conflicts_with = "k8s")]
    pub slurm: bool,
    /// Write a Kubernetes Indexed Job (DIR/sweep-job.yaml) instead of running here.
    #[arg(long)]
    pub k8s: bool,
    /// The container image of the Kubernetes job (it must hold `lossless` on its PATH).
    #[arg(long, default_value = "lossless:latest")]
    pub image: String,
    /// The PersistentVolumeClaim holding the sweep's directory, mounted at /sweep in the
    /// Kubernetes job's pods.
    #[arg(long, default_value = "lossless-sweep")]
    pub claim: String,
    /// The memory one point may take (`8GB`; default: 80% of what is available here).
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,
}

/// `lossless sim point`.
#[derive(Debug, Args)]
pub struct PointArgs {
    /// The sweep's directory.
    pub dir: PathBuf,
    /// The point; default: `SLURM_ARRAY_TASK_ID` or `JOB_COMPLETION_INDEX` (Kubernetes).
    pub index: Option<usize>,
    /// The memory the point may take.
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,
}

/// `lossless sim report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A sweep's directory (or a run's `--out`).
    pub dir: PathBuf,
    /// Print the merged records as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One point of a sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// Its index.
    pub index: usize,
    /// The grid's value of each key at this point.
    pub values: BTreeMap<String, String>,
    /// Its scenario.
    pub scenario: Scenario,
}

/// A sweep, `sweep.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sweep {
    /// The grid's keys, in the order given.
    pub keys: Vec<String>,
    /// The P4 program's file, if not lossless.p4.
    pub program: Option<PathBuf>,
    /// The points.
    pub points: Vec<Point>,
}

/// `scenario` with `key` set to `value`.
fn with(scenario: &Scenario, key: &str, value: &str) -> anyhow::Result<Scenario> {
    let mut s = scenario.clone();
    match key {
        "policy" => s.tuning.policy = value.parse()?,
        "seed" => {
            s.seed = value
                .parse()
                .with_context(|| format!("seed {}", units::escaped(value)))?
        }
        "time" => s.time = value.to_string(),
        "load" => {
            let mut changed = false;
            for w in &mut s.workload {
                if let Some(rest) = w.strip_prefix("cdf:") {
                    let items: Vec<String> = rest
                        .split(',')
                        .filter(|i| !i.starts_with("load="))
                        .map(str::to_string)
                        .chain([format!("load={value}")])
                        .collect();
                    *w = format!("cdf:{}", items.join(","));
                    changed = true;
                }
            }
            if !changed {
                bail!("grid key load: the workload has no cdf part given as a short form");
            }
        }
        _ => s.tuning = set_key(&s.tuning, key, value)?,
    }
    Ok(s)
}

/// Every combination of `grid` over `base`, in order (the last key varying fastest).
pub fn points(base: &Scenario, grid: &[(String, Vec<String>)]) -> anyhow::Result<Vec<Point>> {
    let total = grid.iter().try_fold(1usize, |n, (_, v)| {
        n.checked_mul(v.len()).filter(|&n| n <= MAX_POINTS)
    });
    let Some(total) = total else {
        bail!("the grid has more than {MAX_POINTS} points");
    };
    let mut out = Vec::with_capacity(total);
    for index in 0..total {
        let mut rest = index;
        let mut values = BTreeMap::new();
        let mut scenario = base.clone();
        for (key, options) in grid.iter().rev() {
            let value = &options[rest % options.len()];
            rest /= options.len();
            scenario = with(&scenario, key, value)?;
            values.insert(key.clone(), value.clone());
        }
        out.push(Point {
            index,
            values,
            scenario,
        });
    }
    Ok(out)
}

/// Reads `--grid KEY=V1,V2` arguments.
fn grid(args: &[String]) -> anyhow::Result<Vec<(String, Vec<String>)>> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for a in args {
        let (key, values) = a
            .split_once('=')
            .with_context(|| format!("--grid {}: expected KEY=V1,V2,...", units::escaped(a)))?;
        let values: Vec<String> = values
            .split(',')
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        if values.is_empty() || values.len() > MAX_VALUES {
            bail!("--grid {}: 1 to {MAX_VALUES} values", units::escaped(key));
        }
        if out.iter().any(|(k, _)| k == key) {
            bail!("--grid {} given twice", units::escaped(key));
        }
        out.push((key.to_string(), values));
    }
    Ok(out)
}

/// Reads `DIR/sweep.json`.
pub fn read_sweep(dir: &Path) -> anyhow::Result<Sweep> {
    use std::io::Read as _;
    let path = dir.join("sweep.json");
    let mut text = String::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_SWEEP_BYTES + 1).read_to_string(&mut text))
        .with_context(|| format!("reading {}", path.display()))?;
    if text.len() as u64 > MAX_SWEEP_BYTES {
        bail!("{}: longer than {MAX_SWEEP_BYTES} bytes", path.display());
    }
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: line {}: {}", path.display(), e.line(), e))
}

/// Runs `lossless sim sweep`.
pub fn sweep(args: &SweepArgs, stop: &StopFlag) -> anyhow::Result<()> {
    let base = args.scenario.scenario()?;
    let grid = grid(&args.grid)?;
    let points = points(&base, &grid)?;
    let program = args
        .program
        .as_ref()
        .map(|p| std::path::absolute(p))
        .transpose()?;
    let sweep = Sweep {
        keys: grid.iter().map(|(k, _)| k.clone()).collect(),
        program,
        points,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let dir = std::path::absolute(&args.out)?;
    write_file(&dir, "sweep.json", |f| {
        serde_json::to_writer_pretty(&mut *f, &sweep)?;
        Ok(writeln!(f)?)
    })?;
    let memory = memory_limit(args.memory.as_deref())?;
    let exe = std::env::current_exe().context("finding this program's path for the jobs")?;
    let n = sweep.points.len();
    if args.slurm {
        write_file(&dir, "sweep.sbatch", |f| {
            Ok(f.write_all(slurm_script(&exe, &dir, n, memory).as_bytes())?)
        })?;
        println!(
            "wrote {n} points to {}; submit them with: sbatch {}",
            dir.display(),
            dir.join("sweep.sbatch").display()
        );
        return Ok(());
    }
    if args.k8s {
        write_file(&dir, "sweep-job.yaml", |f| {
            Ok(f.write_all(k8s_job(&args.image, &args.claim, n, memory).as_bytes())?)
        })?;
        println!(
            "wrote {n} points to {}; copy it into the claim {} and apply {}",
            dir.display(),
            args.claim,
            dir.join("sweep-job.yaml").display()
        );
        return Ok(());
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    run_locally(&exe, &dir, n, jobs, args.memory.as_deref(), stop)?;
    report(&dir, false)
}

/// Runs the points as `jobs` processes at a time; Ctrl-C stops the ones running (each writes
/// what it has) and starts no more.
fn run_locally(
    exe: &Path,
    dir: &Path,
    n: usize,
    jobs: usize,
    memory: Option<&str>,
    stop: &StopFlag,
) -> anyhow::Result<()> {
    let mut running: Vec<(usize, Child)> = Vec::new();
    let mut next = 0;
    let mut failed = Vec::new();
    while next < n || !running.is_empty() {
        while next < n && running.len() < jobs && !stop.is_stopped() {
            let point_dir = dir.join("points").join(next.to_string());
            std::fs::create_dir_all(&point_dir)?;
            let log = std::fs::File::create(point_dir.join("log.txt"))?;
            let mut cmd = Command::new(exe);
            cmd.args(["sim", "point"]).arg(dir).arg(next.to_string());
            if let Some(m) = memory {
                cmd.args(["--memory", m]);
            }
            let child = cmd
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .with_context(|| format!("starting point {next}"))?;
            eprintln!("sweep: point {next} of {n} started");
            running.push((next, child));
            next += 1;
        }
        if stop.is_stopped() {
            next = n;
            for (_, child) in &mut running {
                // SAFETY: kill(2) on our own child's pid; SIGINT lets it write what it has.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            }
        }
        // Wait for any child: the first to end.
        let mut status = 0;
        // SAFETY: waitpid on any child of ours; `status` lives for the call.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid < 0 {
            break;
        }
        if let Some(pos) = running
            .iter()
            .position(|(_, c)| c.id() as libc::pid_t == pid)
        {
            let (index, _) = running.remove(pos);
            let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            eprintln!(
                "sweep: point {index} {}",
                if ok {
                    "done"
                } else {
                    "failed (see its log.txt)"
                }
            );
            if !ok {
                failed.push(index);
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "points {failed:?} failed; their logs are in {}/points/N/log.txt",
            dir.display()
        );
    }
    Ok(())
}

/// The Slurm job array of `n` points: one task per point, each the same binary's `sim point`.
pub fn slurm_script(exe: &Path, dir: &Path, n: usize, memory: u64) -> String {
    format!(
        "#!/bin/sh\n\
         # lossless sim sweep: one array task per point (docs/sim.md, \"Sweeps\").\n\
         #SBATCH --job-name=lossless-sweep\n\
         #SBATCH --array=0-{last}\n\
         #SBATCH --ntasks=1\n\
         #SBATCH --cpus-per-task=1\n\
         #SBATCH --mem={mb}M\n\
         #SBATCH --output={dir}/points/%a.out\n\
         exec {exe} sim point {dir} \"$SLURM_ARRAY_TASK_ID\" --memory {mb}MiB\n",
        last = n.saturating_sub(1),
        mb = (memory >> 20).max(1),
        dir = dir.display(),
        exe = exe.display(),
    )
}

/// The Kubernetes Indexed Job of `n` points: pod `i` runs `lossless sim point /sweep i`
/// (Kubernetes sets JOB_COMPLETION_INDEX) with the sweep's directory from `claim`.
pub fn k8s_job(image: &str, claim: &str, n: usize, memory: u64) -> String {
    let mb = (memory >> 20).max(1);
    format!(
        "# lossless sim sweep as a Kubernetes Indexed Job (docs/sim.md, \"Sweeps\").\n\
         apiVersion: batch/v1\n\
         kind: Job\n\
         metadata:\n\
         \x20 name: lossless-sweep\n\
         \x20 labels:\n\
         \x20   app.kubernetes.io/name: lossless-sim\n\
         spec:\n\
         \x20 completionMode: Indexed\n\
         \x20 completions: {n}\n\
         \x20 parallelism: {n}\n\
         \x20 backoffLimit: 0\n\
         \x20 template:\n\
         \x20   metadata:\n\
         \x20     labels:\n\
         \x20       app.kubernetes.io/name: lossless-sim\n\
         \x20   spec:\n\
         \x20     restartPolicy: Never\n\
         \x20     containers:\n\
         \x20       - name: point\n\
         \x20         image: {image:?}\n\
         \x20         command: [\"lossless\", \"sim\", \"point\", \"/sweep\", \"--memory\", \"{mb}MiB\"]\n\
         \x20         resources:\n\
         \x20           requests:\n\
         \x20             cpu: \"1\"\n\
         \x20             memory: {mb}Mi\n\
         \x20           limits:\n\
         \x20             memory: {mb}Mi\n\
         \x20         volumeMounts:\n\
         \x20           - name: sweep\n\
         \x20             mountPath: /sweep\n\
         \x20     volumes:\n\
         \x20       - name: sweep\n\
         \x20         persistentVolumeClaim:\n\
         \x20           claimName: {claim:?}\n"
    )
}

/// Runs `lossless sim point`.
pub fn point(args: &PointArgs, stop: &StopFlag) -> anyhow::Result<()> {
    let index = match args.index {
        Some(i) => i,
        None => ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"]
            .iter()
            .find_map(|v| std::env::var(v).ok())
            .context("no point index: give it, or run under Slurm (SLURM_ARRAY_TASK_ID) or a Kubernetes Indexed Job")?
            .trim()
            .parse()
            .context("the point index is not a number")?,
    };
    let sweep = read_sweep(&args.dir)?;
    let point = sweep.points.get(index).with_context(|| {
        format!(
            "the sweep has {} points, not {}",
            sweep.points.len(),
            index + 1
        )
    })?;
    let program = program(sweep.program.as_deref())?;
    let memory = memory_limit(args.memory.as_deref())?;
    let label = point
        .values
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    // Into a folder of its own, moved into place when whole: a report never reads half a point.
    let done = args.dir.join("points").join(index.to_string());
    let partial = args.dir.join("points").join(format!(".{index}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    let record = run_one(&point.scenario, &program, memory, &partial, stop, &label)?;
    let _ = std::fs::remove_dir_all(done.join("run"));
    std::fs::create_dir_all(&done)?;
    std::fs::rename(&partial, done.join("run"))
        .with_context(|| format!("moving point {index} into place"))?;
    println!(
        "point {index} ({label}): {:?}, {} of {} flows",
        record.summary.end, record.summary.flows.completed, record.summary.flows.total
    );
    Ok(())
}

/// Runs `lossless sim report`: the table of every point that finished, and `report.json`,
/// `report.csv` and `report.svg` in DIR.
pub fn report(dir: &Path, json: bool) -> anyhow::Result<()> {
    let sweep = read_sweep(dir)?;
    let mut rows: Vec<(&Point, Record)> = Vec::new();
    let mut missing = Vec::new();
    for p in &sweep.points {
        let path = dir
            .join("points")
            .join(p.index.to_string())
            .join("run/summary.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => rows.push((
                p,
                read_record(&text).with_context(|| format!("reading {}", path.display()))?,
            )),
            Err(_) => missing.push(p.index),
        }
    }
    if json {
        let records: Vec<&Record> = rows.iter().map(|(_, r)| r).collect();
        println!("{}", serde_json::to_string_pretty(&records)?);
    } else {
        print!("{:<6}", "point");
        for k in &sweep.keys {
            print!(" {k:>14}");
        }
        println!(
            " {:>11} {:>8} {:>8} {:>11} {:>10} {:>9} {:>10} {:>8}",
            "flows", "sd_p50", "sd_p99", "coll_us", "busbw_GB/s", "pauses", "marks", "drops"
        );
        for (p, r) in &rows {
            let s = &r.summary;
            print!("{:<6}", p.index);
            for k in &sweep.keys {
                print!(" {:>14}", p.values.get(k).map_or("", String::as_str));
            }
            let c = s.collectives.first();
            println!(
                " {:>11} {:>8.2} {:>8.2} {:>11} {:>10} {:>9} {:>10} {:>8}",
                format!("{}/{}", s.flows.completed, s.flows.total),
                s.flows.slowdown.p50,
                s.flows.slowdown.p99,
                c.map_or("-".into(), |c| format!("{:.1}", c.mean_us)),
                c.map_or("-".into(), |c| format!("{:.2}", c.busbw_gbps)),
                s.pfc.pauses_sent,
                s.ecn.marked,
                s.drops.buffer_full + s.drops.queue_full + s.drops.link_down
            );
        }
    }
    if !missing.is_empty() {
        eprintln!(
            "{} of {} points have no result yet: {missing:?}",
            missing.len(),
            sweep.points.len()
        );
    }
    write_file(dir, "report.csv", |f| {
        write!(f, "point")?;
        for k in &sweep.keys {
            write!(f, ",{k}")?;
        }
        writeln!(f, ",flows,completed,slowdown_p50,slowdown_p99,collective_us,busbw_gbps,pauses,marks,drops")?;
        for (p, r) in &rows {
            let s = &r.summary;
            write!(f, "{}", p.index)?;
            for k in &sweep.keys {
                write!(f, ",{}", p.values.get(k).map_or("", String::as_str))?;
            }
            let c = s.collectives.first();
            writeln!(
                f,
                ",{},{},{:.4},{:.4},{},{},{},{},{}",
                s.flows.total,
                s.flows.completed,
                s.flows.slowdown.p50,
                s.flows.slowdown.p99,
                c.map_or(String::new(), |c| format!("{:.3}", c.mean_us)),
                c.map_or(String::new(), |c| format!("{:.3}", c.busbw_gbps)),
                s.pfc.pauses_sent,
                s.ecn.marked,
                s.drops.buffer_full + s.drops.queue_full + s.drops.link_down
            )?;
        }
        Ok(())
    })?;
    write_file(dir, "report.json", |f| {
        let merged: Vec<serde_json::Value> = rows
            .iter()
            .map(|(p, r)| serde_json::json!({"point": p.index, "values": p.values, "record": r}))
            .collect();
        serde_json::to_writer_pretty(&mut *f, &merged)?;
        Ok(writeln!(f)?)
    })?;
    let lines: Vec<Line> = vec![
        Line::solid(
            "slowdown p99",
            rows.iter()
                .map(|(p, r)| (p.index as f64, r.summary.flows.slowdown.p99))
                .collect(),
        ),
        Line::solid(
            "slowdown p50",
            rows.iter()
                .map(|(p, r)| (p.index as f64, r.summary.flows.slowdown.p50))
                .collect(),
        ),
    ];
    let top = rows
        .iter()
        .map(|(_, r)| r.summary.flows.slowdown.p99)
        .fold(1.0, f64::max);
    draw_panels(
        &dir.join("report.svg"),
        (1000, 360),
        &[Panel {
            caption: format!("FCT slowdown per point ({})", sweep.keys.join(" x ")),
            x_desc: "point".into(),
            y_desc: "slowdown".into(),
            x: 0.0..sweep.points.len().saturating_sub(1).max(1) as f64,
            y: 0.0..top * 1.1,
            lines,
        }],
    )?;
    println!(
        "wrote report.json, report.csv and report.svg to {}",
        dir.display()
    );
    Ok(())
}

/// A point's `summary.json`, as far as a report reads it.
fn read_record(text: &str) -> anyhow::Result<Record> {
    Ok(serde_json::from_str(text)?)
}
