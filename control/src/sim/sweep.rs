//! Sweeps: a grid of scenarios (every combination of the values given per key) written as
//! `DIR/sweep.json`, each point run by `lossless sim point DIR INDEX` into
//! `DIR/points/INDEX/run/`. Here the points run as processes, as many at once as the cores and
//! the memory allow; `--slurm` writes them as a Slurm job array (`DIR/sweep.sbatch`), `--k8s`
//! as a Kubernetes Indexed Job (`DIR/sweep-job.yaml`): the same binary and the same point
//! command on engines users already have, each task's memory from the run's own estimate.
//! `lossless sim report DIR` merges what the points wrote into one table, CSV, JSON and plot.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};
use sim::scenario::Scenario;
use sim::simulation::Execution;
use sim::simulation::RunEnd;

use super::cli::{set_key, PointArgs, SweepArgs};
use super::output::Record;
use super::run::{memory_limit, program, run_one};
use crate::{
    net::state::read_bounded,
    output::{draw_panels, write_file, write_text, Line, Panel},
};
use traffic::StopFlag;

/// The most points a sweep may have.
pub const MAX_POINTS: usize = 10_000;
/// The most values one key of a grid may take.
pub const MAX_VALUES: usize = 1_000;
/// The longest sweep file read, bytes.
pub const MAX_SWEEP_BYTES: u64 = 64 << 20;
/// The longest summary of a point read, bytes.
const MAX_SUMMARY_BYTES: u64 = 16 << 20;
/// Slurm's default `MaxArraySize`: array indices above it are refused unless the cluster
/// raised it.
const SLURM_MAX_ARRAY_SIZE: usize = 1001;
/// What a point's process takes beside its run's estimate (the binary, the compiled program,
/// allocator slack), bytes.
const PROCESS_BYTES: u64 = 256 << 20;
/// How often a local sweep looks at its points' processes and the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// Where Kubernetes pods mount the sweep's directory.
const K8S_MOUNT: &str = "/sweep";

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Its index.
    pub index: usize,
    /// The grid's value of each key at this point.
    pub values: BTreeMap<String, String>,
    /// Its scenario.
    pub scenario: Scenario,
    /// The memory its run takes by the simulator's estimate, bytes.
    pub estimated_bytes: u64,
}

/// A sweep, `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// The grid's keys, in the order given.
    pub keys: Vec<String>,
    /// The P4 program's file, if not lossless.p4 (relative: to `workdir`).
    pub program: Option<PathBuf>,
    /// The directory the points run in, where the scenarios' relative file names are found:
    /// the one the sweep was written from; none: the sweep's own directory (as Kubernetes
    /// pods see it).
    pub workdir: Option<PathBuf>,
    /// The points.
    pub points: Vec<Point>,
}

impl Sweep {
    /// `point`'s grid values as `key=value,...`, in the grid's order.
    fn label(&self, point: &Point) -> String {
        self.keys
            .iter()
            .map(|k| format!("{k}={}", point.values.get(k).map_or("", String::as_str)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Where a sweep's points run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    /// Processes on this machine.
    Here,
    /// A Slurm job array.
    Slurm,
    /// A Kubernetes Indexed Job.
    Kubernetes,
}

/// `scenario` with `key` set to `value`.
fn with(scenario: &Scenario, key: &str, value: &str) -> anyhow::Result<Scenario> {
    let mut s = scenario.clone();
    match key {
        "policy" => s.tuning.policy = topology::tuning::parse_policy(value)?,
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

/// Every combination of `grid` over `base`, in order (the last key varying fastest), each
/// with its estimate still to be made (0).
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
            estimated_bytes: 0,
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
            .filter(|(key, _)| !key.is_empty())
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
    let path = dir.join("sweep.json");
    let text = read_bounded(&path, MAX_SWEEP_BYTES)?;
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: line {}: {}", path.display(), e.line(), e))
}

/// The folder of point `index` in the sweep `dir`.
fn point_dir(dir: &Path, index: usize) -> PathBuf {
    dir.join("points").join(index.to_string())
}

/// The memory a point's task asks its engine for: its estimate with room for the process,
/// bytes, a whole number of MiB.
fn task_bytes(estimated: u64) -> u64 {
    let bytes = estimated
        .saturating_add(estimated / 4)
        .saturating_add(PROCESS_BYTES);
    bytes.div_ceil(1 << 20).saturating_mul(1 << 20)
}

/// Runs `lossless sim sweep`.
pub fn sweep(args: &SweepArgs, stop: &StopFlag) -> anyhow::Result<()> {
    let engine = match (args.slurm, args.k8s) {
        (true, _) => Engine::Slurm,
        (_, true) => Engine::Kubernetes,
        _ => Engine::Here,
    };
    if engine != Engine::Here {
        check_dns_label("--name", &args.name)?;
    }
    let asked_memory = args
        .memory
        .as_deref()
        .map(|m| memory_limit(Some(m)))
        .transpose()?;
    let base = args.scenario.scenario()?;
    let grid = grid(&args.grid)?;
    let mut points = points(&base, &grid)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let dir = std::path::absolute(&args.out)?;
    let program_file = args.program.as_ref().map(std::path::absolute).transpose()?;
    let compiled = program(program_file.as_deref())?;
    // Kubernetes pods see the claim alone, mounted as the sweep's directory: there, files are
    // found relative to it, and so they are when the sweep is checked here.
    let (workdir, program_file) = if engine == Engine::Kubernetes {
        let relative = program_file
            .map(|p| {
                p.strip_prefix(&dir).map(Path::to_path_buf).map_err(|_| {
                    anyhow::anyhow!(
                        "--program {}: with --k8s the program must be inside the sweep's \
                         directory {} (the pods see only its claim)",
                        p.display(),
                        dir.display()
                    )
                })
            })
            .transpose()?;
        std::env::set_current_dir(&dir).with_context(|| format!("entering {}", dir.display()))?;
        (None, relative)
    } else {
        (Some(std::env::current_dir()?), program_file)
    };
    let sources = workload::Sources::from_env();
    for p in &mut points {
        p.estimated_bytes = sim::scenario::estimate(&p.scenario, &compiled, &sources)
            .with_context(|| {
                let mut m = format!("point {}", p.index);
                if engine == Engine::Kubernetes {
                    m.push_str(" (with --k8s, files are found relative to the sweep's directory)");
                }
                m
            })?;
        if let Some(limit) = asked_memory.filter(|&l| p.estimated_bytes > l) {
            bail!(
                "point {}: its run would take about {} MB, more than --memory {} MB",
                p.index,
                p.estimated_bytes >> 20,
                limit >> 20
            );
        }
    }
    let sweep = Sweep {
        keys: grid.iter().map(|(k, _)| k.clone()).collect(),
        program: program_file,
        workdir,
        points,
    };
    let done = write_sweep(&dir, &sweep)?;
    let n = sweep.points.len();
    let largest = sweep
        .points
        .iter()
        .map(|p| p.estimated_bytes)
        .max()
        .unwrap_or(0);
    let task_memory = asked_memory.unwrap_or_else(|| task_bytes(largest));
    let exe = std::env::current_exe().context("finding this program's path for the jobs")?;
    match engine {
        Engine::Slurm => {
            let script = slurm_script(&exe, &dir, &sweep, &args.name, args.jobs, task_memory)?;
            write_text(&dir, "sweep.sbatch", &script)?;
            println!(
                "wrote {n} points ({} MiB each) to {}; on a node that shares this directory:\n  \
                 sbatch {}\nthen, when they are done: lossless sim report {}",
                task_memory >> 20,
                dir.display(),
                dir.join("sweep.sbatch").display(),
                dir.display()
            );
            if n > SLURM_MAX_ARRAY_SIZE {
                eprintln!(
                    "note: the array has {n} tasks; Slurm's default MaxArraySize takes {SLURM_MAX_ARRAY_SIZE}"
                );
            }
            Ok(())
        }
        Engine::Kubernetes => {
            let job = k8s_job(
                &args.name,
                &args.image,
                &args.claim,
                n,
                args.jobs,
                task_memory,
            )?;
            write_text(&dir, "sweep-job.yaml", &job)?;
            println!(
                "wrote {n} points ({} MiB each) to {dir}; copy {dir} into the claim {claim}, then:\n  \
                 kubectl apply -f {yaml}\n  kubectl wait --for=condition=complete --timeout=24h job/{name}\n\
                 copy the claim's points/ back into {dir} and: lossless sim report {dir}",
                task_memory >> 20,
                dir = dir.display(),
                claim = args.claim,
                yaml = dir.join("sweep-job.yaml").display(),
                name = args.name,
            );
            Ok(())
        }
        Engine::Here => {
            let todo: Vec<usize> = (0..n).filter(|i| !done.contains(i)).collect();
            if !done.is_empty() {
                eprintln!(
                    "sweep: {} of {n} points already have results in {}; running the other {}",
                    done.len(),
                    dir.display(),
                    todo.len()
                );
            }
            let available = memory_limit(None)?;
            let per_point = asked_memory.unwrap_or_else(|| task_bytes(largest));
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let fit = usize::try_from(available / per_point.max(1)).unwrap_or(usize::MAX);
            let jobs = args.jobs.unwrap_or(cores).min(fit).max(1);
            // Each point may take its share of what is here, at least what it was given.
            let memory = asked_memory
                .unwrap_or(available / jobs as u64)
                .max(per_point);
            let outcome = run_here(&exe, &dir, &sweep, &todo, jobs, memory, stop)?;
            report(&dir, false)?;
            if !outcome.failed.is_empty() {
                bail!(
                    "points {} failed; their logs: {}/points/N/log.txt",
                    ranges(&outcome.failed),
                    dir.display()
                );
            }
            if outcome.interrupted > 0 {
                bail!(
                    "interrupted: {} points have no result; the same command runs them",
                    outcome.interrupted
                );
            }
            Ok(())
        }
    }
}

/// Writes `sweep` as `dir/sweep.json` with a folder per point, and returns the points that
/// already have results: the directory may hold this same sweep, run in part, but no other.
fn write_sweep(dir: &Path, sweep: &Sweep) -> anyhow::Result<Vec<usize>> {
    if dir.join("sweep.json").exists() {
        let old = read_sweep(dir)?;
        if old != *sweep {
            bail!(
                "{} holds another sweep (its grid, scenario, program or engine differ): give \
                 another --out, or remove it",
                dir.display()
            );
        }
    } else {
        write_file(dir, "sweep.json", |f| {
            serde_json::to_writer_pretty(&mut *f, sweep)?;
            Ok(writeln!(f)?)
        })?;
    }
    // Slurm opens a task's output file before the task runs, in a folder that must exist.
    for p in &sweep.points {
        let d = point_dir(dir, p.index);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    Ok(results(dir, sweep)
        .into_iter()
        .filter_map(|(p, r)| r.ok().flatten().map(|_| p.index))
        .collect())
}

/// What a local sweep left: points that failed, points not run or stopped.
struct Outcome {
    failed: Vec<usize>,
    interrupted: usize,
}

/// Runs the points `todo` as `jobs` processes at a time, each allowed `memory` bytes, in
/// process groups of their own; Ctrl-C (the stop flag) passes SIGINT to the ones running (each
/// ends and keeps its partial outputs, not counted as a result) and starts no more. A point
/// whose parent dies gets SIGINT too.
fn run_here(
    exe: &Path,
    dir: &Path,
    sweep: &Sweep,
    todo: &[usize],
    jobs: usize,
    memory: u64,
    stop: &StopFlag,
) -> anyhow::Result<Outcome> {
    let n = sweep.points.len();
    let mut running: Vec<(usize, Child, Instant)> = Vec::new();
    let mut queue = todo.iter().copied();
    let mut failed = Vec::new();
    let mut finished = 0;
    let mut interrupted = false;
    eprintln!(
        "sweep: {} points, {jobs} at a time, {} MiB each",
        todo.len(),
        memory >> 20
    );
    loop {
        if stop.is_stopped() && !interrupted {
            interrupted = true;
            for (_, child, _) in &running {
                // SAFETY: kill(2) on a child not yet reaped (try_wait below reaps on this
                // thread only), so its pid is still its own.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            }
        }
        while running.len() < jobs && !interrupted {
            let Some(index) = queue.next() else { break };
            let log_path = point_dir(dir, index).join("log.txt");
            let log = std::fs::File::create(&log_path)
                .with_context(|| format!("creating {}", log_path.display()))?;
            let mut cmd = Command::new(exe);
            cmd.args(["sim", "point"])
                .arg(dir)
                .arg(index.to_string())
                .arg("--memory")
                .arg(format!("{}MiB", memory >> 20))
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .process_group(0);
            // SAFETY: prctl is async-signal-safe and touches only the child's own state.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = cmd
                .spawn()
                .with_context(|| format!("starting point {index}"))?;
            running.push((index, child, Instant::now()));
        }
        if running.is_empty() {
            break;
        }
        let mut i = 0;
        while i < running.len() {
            let status = running[i]
                .1
                .try_wait()
                .with_context(|| format!("waiting for point {}", running[i].0))?;
            let Some(status) = status else {
                i += 1;
                continue;
            };
            let (index, _, started) = running.swap_remove(i);
            finished += 1;
            let label = sweep.label(&sweep.points[index]);
            let took = started.elapsed().as_secs_f64();
            if status.success() {
                eprintln!(
                    "sweep: [{finished}/{}] point {index} ({label}) done in {took:.1} s",
                    todo.len()
                );
            } else if !interrupted {
                eprintln!(
                    "sweep: [{finished}/{}] point {index} ({label}) failed ({status}): {}",
                    todo.len(),
                    point_dir(dir, index).join("log.txt").display()
                );
                failed.push(index);
            }
        }
        std::thread::sleep(POLL);
    }
    failed.sort_unstable();
    let with_results = results(dir, sweep)
        .into_iter()
        .filter(|(_, r)| matches!(r, Ok(Some(_))))
        .count();
    Ok(Outcome {
        interrupted: n - with_results - failed.len(),
        failed,
    })
}

/// `text` if it can stand in a `#SBATCH` line and a shell command unquoted by Slurm: no
/// white space, quotes, `%` (Slurm's file name patterns), `\`, `$` or control characters.
fn plain<'a>(what: &str, text: &'a str) -> anyhow::Result<&'a str> {
    let bad = |c: char| {
        c.is_whitespace() || c.is_control() || matches!(c, '%' | '"' | '\'' | '\\' | '$' | '`')
    };
    if text.is_empty() || text.chars().any(bad) {
        bail!(
            "{what} {}: Slurm's script cannot hold a path with white space, quotes, %, \\, $ or `",
            units::escaped(text)
        );
    }
    Ok(text)
}

/// `path` as text for [`plain`].
fn plain_path<'a>(what: &str, path: &'a Path) -> anyhow::Result<&'a str> {
    let text = path
        .to_str()
        .with_context(|| format!("{what} {}: not UTF-8", path.display()))?;
    plain(what, text)
}

/// Refuses `text` unless it is a DNS label (RFC 1123: at most 63 lowercase letters, digits
/// and `-`, a letter or digit at each end), as Kubernetes names objects.
fn check_dns_label(what: &str, text: &str) -> anyhow::Result<()> {
    let ok = !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-');
    if !ok {
        bail!(
            "{what} {}: at most 63 lowercase letters, digits and -, beginning and ending with \
             a letter or digit",
            units::escaped(text)
        );
    }
    Ok(())
}

/// Refuses `text` unless it is a DNS subdomain (RFC 1123: at most 253 characters, DNS labels
/// joined by `.`), as a PersistentVolumeClaim's name is.
fn check_dns_subdomain(what: &str, text: &str) -> anyhow::Result<()> {
    if text.len() > 253 || text.split('.').any(|l| check_dns_label(what, l).is_err()) {
        bail!(
            "{what} {}: DNS labels (lowercase letters, digits, -) joined by .",
            units::escaped(text)
        );
    }
    Ok(())
}

/// The Slurm job array of `sweep` in `dir`: one task per point, each `exe sim point DIR
/// $SLURM_ARRAY_TASK_ID` in the sweep's working directory with `memory` bytes, its output in
/// the point's folder; `jobs` at a time if given. `sbatch` options given on its command line
/// (`--partition`, `--time`, `--account`) override these.
pub fn slurm_script(
    exe: &Path,
    dir: &Path,
    sweep: &Sweep,
    name: &str,
    jobs: Option<usize>,
    memory: u64,
) -> anyhow::Result<String> {
    let exe = plain_path("this program's path", exe)?;
    let dir_text = plain_path("the sweep's directory", dir)?;
    let workdir = sweep.workdir.as_deref().unwrap_or(dir);
    let workdir = plain_path("the working directory", workdir)?;
    let mib = (memory >> 20).max(1);
    let throttle = jobs.map_or(String::new(), |j| format!("%{}", j.max(1)));
    Ok(format!(
        "#!/bin/sh\n\
         # lossless sim sweep: {n} points, one array task each (docs/sim.md, \"Sweeps\").\n\
         # Submit: sbatch {dir_text}/sweep.sbatch   (sbatch's own options override these)\n\
         # Report: lossless sim report {dir_text}\n\
         #SBATCH --job-name={name}\n\
         #SBATCH --array=0-{last}{throttle}\n\
         #SBATCH --ntasks=1\n\
         #SBATCH --cpus-per-task=1\n\
         #SBATCH --mem={mib}M\n\
         #SBATCH --chdir={workdir}\n\
         #SBATCH --output={dir_text}/points/%a/slurm-%A_%a.out\n\
         exec '{exe}' sim point '{dir_text}' \"$SLURM_ARRAY_TASK_ID\" --memory {mib}MiB\n",
        n = sweep.points.len(),
        last = sweep.points.len().saturating_sub(1),
    ))
}

/// The Kubernetes Indexed Job `name` of `n` points: pod `i` runs `lossless sim point /sweep`
/// (Kubernetes sets `JOB_COMPLETION_INDEX` to `i`) in the sweep's directory, the claim `claim`
/// mounted at /sweep, with `memory` bytes; `jobs` pods at a time (default: every point). A
/// point that fails is retried once, and fails alone.
pub fn k8s_job(
    name: &str,
    image: &str,
    claim: &str,
    n: usize,
    jobs: Option<usize>,
    memory: u64,
) -> anyhow::Result<String> {
    check_dns_label("--name", name)?;
    check_dns_subdomain("--claim", claim)?;
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        bail!("--image {}: an image reference", units::escaped(image));
    }
    let mib = (memory >> 20).max(1);
    let parallelism = jobs.unwrap_or(n).clamp(1, n.max(1));
    // JSON strings are YAML's double-quoted scalars.
    let quoted = |s: &str| serde_json::to_string(s).expect("a string serialises");
    Ok(format!(
        "# lossless sim sweep: {n} points as a Kubernetes Indexed Job (docs/sim.md, \"Sweeps\").\n\
         # The claim {claim} holds the sweep's directory; pod i runs point i into points/i/run/.\n\
         apiVersion: batch/v1\n\
         kind: Job\n\
         metadata:\n\
         \x20 name: {name}\n\
         \x20 labels:\n\
         \x20   app.kubernetes.io/name: lossless-sim\n\
         spec:\n\
         \x20 completionMode: Indexed\n\
         \x20 completions: {n}\n\
         \x20 parallelism: {parallelism}\n\
         \x20 backoffLimitPerIndex: 1\n\
         \x20 template:\n\
         \x20   metadata:\n\
         \x20     labels:\n\
         \x20       app.kubernetes.io/name: lossless-sim\n\
         \x20   spec:\n\
         \x20     restartPolicy: Never\n\
         \x20     containers:\n\
         \x20       - name: point\n\
         \x20         image: {image}\n\
         \x20         command: [\"lossless\", \"sim\", \"point\", \"{K8S_MOUNT}\", \"--memory\", \"{mib}MiB\"]\n\
         \x20         workingDir: {K8S_MOUNT}\n\
         \x20         resources:\n\
         \x20           requests:\n\
         \x20             cpu: \"1\"\n\
         \x20             memory: {mib}Mi\n\
         \x20           limits:\n\
         \x20             memory: {mib}Mi\n\
         \x20         volumeMounts:\n\
         \x20           - name: sweep\n\
         \x20             mountPath: {K8S_MOUNT}\n\
         \x20     volumes:\n\
         \x20       - name: sweep\n\
         \x20         persistentVolumeClaim:\n\
         \x20           claimName: {claim_quoted}\n",
        image = quoted(image),
        claim_quoted = quoted(claim),
    ))
}

/// Runs `lossless sim point`: the point into `points/INDEX/run.partial/`, moved to
/// `points/INDEX/run/` when it ended by itself (a report never reads half a point); stopped
/// (SIGINT, SIGTERM), it keeps its partial outputs and fails.
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
    let dir = std::path::absolute(&args.dir)?;
    let sweep = read_sweep(&dir)?;
    let point = sweep.points.get(index).with_context(|| {
        format!(
            "the sweep has {} points, not {}",
            sweep.points.len(),
            index + 1
        )
    })?;
    let workdir = sweep.workdir.as_deref().unwrap_or(&dir);
    std::env::set_current_dir(workdir).with_context(|| {
        format!(
            "entering the sweep's working directory {}",
            workdir.display()
        )
    })?;
    let program = program(sweep.program.as_deref())?;
    let memory = memory_limit(args.memory.as_deref())?;
    let label = sweep.label(point);
    let done = point_dir(&dir, index);
    let partial = done.join("run.partial");
    let _ = std::fs::remove_dir_all(&partial);
    // A sweep's points run the program compiled, `lossless sim run`'s default.
    let record = run_one(
        &point.scenario,
        &program,
        Execution::Compiled,
        memory,
        &partial,
        stop,
        &label,
    )?;
    if record.summary.end == RunEnd::Stopped {
        bail!(
            "point {index} ({label}) stopped before its end; what it had is in {}, not counted",
            partial.display()
        );
    }
    let _ = std::fs::remove_dir_all(done.join("run"));
    std::fs::rename(&partial, done.join("run"))
        .with_context(|| format!("moving point {index} into place"))?;
    println!(
        "point {index} ({label}): {:?}, {} of {} flows",
        record.summary.end, record.summary.flows.completed, record.summary.flows.total
    );
    Ok(())
}

/// Each point of `sweep` with its record: none if it has no result yet, an error if its result
/// cannot be read or belongs to another scenario.
fn results<'a>(dir: &Path, sweep: &'a Sweep) -> Vec<(&'a Point, anyhow::Result<Option<Record>>)> {
    sweep
        .points
        .iter()
        .map(|p| {
            let path = point_dir(dir, p.index).join("run/summary.json");
            if !path.exists() {
                return (p, Ok(None));
            }
            let record = read_bounded(&path, MAX_SUMMARY_BYTES).and_then(|text| {
                let record: Record = serde_json::from_str(&text)
                    .with_context(|| format!("reading {}", path.display()))?;
                if record.scenario != p.scenario {
                    bail!("{} is the result of another scenario", path.display());
                }
                Ok(Some(record))
            });
            (p, record)
        })
        .collect()
}

/// `indices` (sorted) as Slurm writes an array: `0-3,7,9-10`.
fn ranges(indices: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        while i + 1 < indices.len() && indices[i + 1] == indices[i] + 1 {
            i += 1;
        }
        out.push(if indices[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", indices[i])
        });
        i += 1;
    }
    out.join(",")
}

/// One row of a report: a point and what it measured.
struct Row<'a> {
    point: &'a Point,
    record: Record,
}

impl Row<'_> {
    /// The columns of the table and CSV after the grid's keys: name, value, and the width and
    /// decimals of the table's cell (a count has none; CSV's other values have four).
    fn measures(&self) -> [(&'static str, Option<f64>, usize, usize); 9] {
        let s = &self.record.summary;
        let c = s.collectives.first();
        let drops = s.drops.total();
        [
            ("flows", Some(s.flows.total as f64), 7, 0),
            ("completed", Some(s.flows.completed as f64), 9, 0),
            ("slowdown_p50", Some(s.flows.slowdown.p50), 12, 2),
            ("slowdown_p99", Some(s.flows.slowdown.p99), 12, 2),
            ("collective_us", c.map(|c| c.mean_us), 13, 1),
            ("busbw_gbps", c.map(|c| c.busbw_gbps), 10, 2),
            ("pauses", Some(s.pfc.pauses_sent as f64), 8, 0),
            ("ecn_marks", Some(s.ecn.marked as f64), 9, 0),
            ("drops", Some(drops as f64), 7, 0),
        ]
    }
}

/// Runs `lossless sim report`: the table of every point that has a result, and `report.json`,
/// `report.csv` and `report.svg` in DIR; says which points have none and how to run them.
pub fn report(dir: &Path, json: bool) -> anyhow::Result<()> {
    let sweep = read_sweep(dir)?;
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for (point, record) in results(dir, &sweep) {
        match record {
            Ok(Some(record)) => rows.push(Row { point, record }),
            Ok(None) => missing.push(point.index),
            Err(e) => {
                eprintln!("point {}: {e:#}", point.index);
                missing.push(point.index);
            }
        }
    }
    let widths: Vec<usize> = sweep.keys.iter().map(|k| k.len().max(8)).collect();
    if json {
        let records: Vec<&Record> = rows.iter().map(|r| &r.record).collect();
        println!("{}", serde_json::to_string_pretty(&records)?);
    } else if let Some(first) = rows.first() {
        print!("{:>5}", "point");
        for (k, w) in sweep.keys.iter().zip(&widths) {
            print!(" {k:>w$}");
        }
        for (name, _, w, _) in first.measures() {
            print!(" {name:>w$}");
        }
        println!();
        for row in &rows {
            print!("{:>5}", row.point.index);
            for (k, w) in sweep.keys.iter().zip(&widths) {
                print!(
                    " {:>w$}",
                    row.point.values.get(k).map_or("", String::as_str)
                );
            }
            for (_, value, w, decimals) in row.measures() {
                match value {
                    Some(v) => print!(" {v:>w$.decimals$}"),
                    None => print!(" {:>w$}", "-"),
                }
            }
            println!();
        }
    }
    write_file(dir, "report.csv", |f| {
        write!(f, "point")?;
        for k in &sweep.keys {
            write!(f, ",{k}")?;
        }
        if let Some(first) = rows.first() {
            for (name, ..) in first.measures() {
                write!(f, ",{name}")?;
            }
        }
        writeln!(f)?;
        for row in &rows {
            write!(f, "{}", row.point.index)?;
            for k in &sweep.keys {
                write!(f, ",{}", row.point.values.get(k).map_or("", String::as_str))?;
            }
            for (_, value, _, decimals) in row.measures() {
                match value {
                    Some(v) if decimals == 0 => write!(f, ",{v}")?,
                    Some(v) => write!(f, ",{v:.4}")?,
                    None => write!(f, ",")?,
                }
            }
            writeln!(f)?;
        }
        Ok(())
    })?;
    write_file(dir, "report.json", |f| {
        let merged: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"point": r.point.index, "values": r.point.values, "record": r.record})
            })
            .collect();
        serde_json::to_writer_pretty(&mut *f, &merged)?;
        Ok(writeln!(f)?)
    })?;
    draw_panels(
        &dir.join("report.svg"),
        (1000, 360),
        &comparison(&sweep, &rows),
    )?;
    eprintln!(
        "{} of {} points reported; wrote report.json, report.csv and report.svg to {}",
        rows.len(),
        sweep.points.len(),
        dir.display()
    );
    if !missing.is_empty() {
        let which = ranges(&missing);
        eprintln!("points without a result yet: {which}");
        if dir.join("sweep.sbatch").exists() {
            eprintln!(
                "  run them with: sbatch --array={which} {}",
                dir.join("sweep.sbatch").display()
            );
        }
    }
    Ok(())
}

/// The comparison plot's axes: the x axis is the first key other than `policy` and `seed`
/// that takes several values (else `seed`, else `policy`); a line per combination of the other
/// keys, `policy` first; seeds, when not on the x axis, averaged.
struct Layout {
    /// The key on the x axis, with its values in the grid's order.
    x: Option<(String, Vec<String>)>,
    /// The keys that tell lines apart.
    lines: Vec<String>,
    /// How many seeds each point of a line is the mean of.
    seeds_averaged: usize,
}

impl Layout {
    fn of(sweep: &Sweep) -> Layout {
        let values = |key: &str| {
            let mut v: Vec<String> = Vec::new();
            for p in &sweep.points {
                if let Some(value) = p.values.get(key).filter(|value| !v.contains(value)) {
                    v.push(value.clone());
                }
            }
            v
        };
        let several = |k: &String| values(k).len() > 1;
        let x = sweep
            .keys
            .iter()
            .find(|k| k.as_str() != "policy" && k.as_str() != "seed" && several(k))
            .or_else(|| {
                sweep
                    .keys
                    .iter()
                    .find(|k| k.as_str() == "seed" && several(k))
            })
            .or_else(|| sweep.keys.iter().find(|k| k.as_str() == "policy"))
            .map(|k| (k.clone(), values(k)));
        let on_x = |k: &str| x.as_ref().is_some_and(|(xk, _)| xk == k);
        let mut lines: Vec<String> = sweep
            .keys
            .iter()
            .filter(|k| k.as_str() != "seed" && !on_x(k))
            .cloned()
            .collect();
        lines.sort_by_key(|k| k.as_str() != "policy");
        let seeds_averaged = if on_x("seed") {
            1
        } else {
            values("seed").len().max(1)
        };
        Layout {
            x,
            lines,
            seeds_averaged,
        }
    }

    /// Where `point` lies on the x axis: its value if every value of the key is a number, else
    /// the value's place among the key's values; the point's index without such a key.
    fn x_of(&self, point: &Point) -> f64 {
        let Some((key, values)) = &self.x else {
            return point.index as f64;
        };
        let value = point.values.get(key).map_or("", String::as_str);
        if values.iter().all(|v| v.parse::<f64>().is_ok()) {
            value.parse().unwrap_or(0.0)
        } else {
            values.iter().position(|v| v == value).unwrap_or(0) as f64
        }
    }

    /// The x axis' description.
    fn x_desc(&self) -> String {
        match &self.x {
            None => "point".into(),
            Some((key, values)) if values.iter().all(|v| v.parse::<f64>().is_ok()) => key.clone(),
            Some((key, values)) => {
                let named: Vec<String> = values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| format!("{i}: {v}"))
                    .collect();
                format!("{key} ({})", named.join(", "))
            }
        }
    }

    /// The label of `point`'s line.
    fn line_of(&self, point: &Point) -> String {
        let value = |k: &String| point.values.get(k).map_or("", String::as_str);
        match &self.lines[..] {
            [] => "all".into(),
            [only] if only == "policy" => value(only).to_string(),
            keys => keys
                .iter()
                .map(|k| format!("{k}={}", value(k)))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// What a panel of the plot shows of a point's record, if the point measured it.
type Measure = fn(&Record) -> Option<f64>;

/// The report's plot: a panel per measure (slowdown p99 and p50; a collective's time when the
/// points ran one), a line per [`Layout`] line, seeds averaged.
fn comparison(sweep: &Sweep, rows: &[Row<'_>]) -> Vec<Panel> {
    let layout = Layout::of(sweep);
    let measures: [(&str, &str, Measure); 3] = [
        ("FCT slowdown p99", "slowdown", |r| {
            Some(r.summary.flows.slowdown.p99)
        }),
        ("FCT slowdown p50", "slowdown", |r| {
            Some(r.summary.flows.slowdown.p50)
        }),
        ("collective time", "time (us)", |r| {
            r.summary.collectives.first().map(|c| c.mean_us)
        }),
    ];
    let x_values: Vec<f64> = sweep.points.iter().map(|p| layout.x_of(p)).collect();
    let x_range = x_values.iter().copied().fold(f64::INFINITY, f64::min)
        ..x_values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let x_range = if x_range.start.is_finite() {
        x_range
    } else {
        0.0..1.0
    };
    let averaged = if layout.seeds_averaged > 1 {
        format!(", mean of {} seeds", layout.seeds_averaged)
    } else {
        String::new()
    };
    let mut panels = Vec::new();
    for (caption, y_desc, measure) in measures {
        // Line label -> x -> (sum, count).
        let mut lines: BTreeMap<String, BTreeMap<u64, (f64, f64, usize)>> = BTreeMap::new();
        for row in rows {
            let Some(y) = measure(&row.record) else {
                continue;
            };
            let x = layout.x_of(row.point);
            let cell = lines
                .entry(layout.line_of(row.point))
                .or_default()
                .entry(x.to_bits())
                .or_insert((x, 0.0, 0));
            cell.1 += y;
            cell.2 += 1;
        }
        if lines.is_empty() {
            continue;
        }
        let lines: Vec<Line> = lines
            .into_iter()
            .map(|(label, cells)| {
                let mut points: Vec<(f64, f64)> = cells
                    .into_values()
                    .map(|(x, sum, count)| (x, sum / count as f64))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Line::solid(label, points)
            })
            .collect();
        let top = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .fold(1.0, f64::max);
        panels.push(Panel {
            caption: format!("{caption}{averaged}"),
            x_desc: layout.x_desc(),
            y_desc: y_desc.into(),
            x: x_range.clone(),
            y: 0.0..top * 1.1,
            lines,
        });
    }
    panels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::cli::ScenarioArgs;

    fn base() -> Scenario {
        ScenarioArgs {
            scenario: None,
            topology: Some("fat-tree:4".into()),
            workload: vec!["permutation:size=64KB".into()],
            set: Vec::new(),
            cc: None,
            cnp: None,
            source_ports: None,
            seed: None,
            time: None,
            fail: Vec::new(),
        }
        .scenario()
        .unwrap()
    }

    fn sweep_of(grid_args: &[&str]) -> Sweep {
        let grid = grid(&grid_args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        Sweep {
            keys: grid.iter().map(|(k, _)| k.clone()).collect(),
            program: None,
            workdir: None,
            points: points(&base(), &grid).unwrap(),
        }
    }

    #[test]
    fn the_grid_is_every_combination_last_key_fastest() {
        let s = sweep_of(&["policy=ecmp,e-ecmp", "seed=1,2,3"]);
        assert_eq!(s.points.len(), 6);
        assert_eq!(s.label(&s.points[4]), "policy=e-ecmp,seed=2");
        assert_eq!(s.points[4].scenario.seed, 2);
        assert_eq!(s.points[4].scenario.tuning.policy, topology::Policy::EEcmp);
        assert!(grid(&["policy=ecmp".into(), "policy=dlb".into()]).is_err());
        assert!(grid(&["=1,2".into()]).is_err());
        assert!(grid(&["seed=".into()]).is_err());
        let many: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|k| format!("{k}={}", ["1"; 11].join(",")))
            .collect();
        assert!(points(&base(), &grid(&many).unwrap()).is_err());
    }

    #[test]
    fn arrays_are_written_as_slurm_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(ranges(&[5]), "5");
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn task_memory_is_the_estimate_with_room_for_the_process() {
        assert_eq!(task_bytes(0), PROCESS_BYTES);
        assert_eq!(task_bytes(400 << 20), (500 << 20) + PROCESS_BYTES);
        assert_eq!(task_bytes(1) % (1 << 20), 0);
        assert!(task_bytes(1) > PROCESS_BYTES);
    }

    #[test]
    fn the_slurm_script_runs_each_point_in_its_array_task() {
        let mut s = sweep_of(&["policy=ecmp,dlb", "seed=1,2"]);
        s.workdir = Some("/home/u/work".into());
        let script = slurm_script(
            Path::new("/opt/bin/lossless"),
            Path::new("/scratch/s1"),
            &s,
            "lossless-sweep",
            Some(2),
            300 << 20,
        )
        .unwrap();
        for line in [
            "#!/bin/sh\n",
            "#SBATCH --array=0-3%2\n",
            "#SBATCH --mem=300M\n",
            "#SBATCH --chdir=/home/u/work\n",
            "#SBATCH --output=/scratch/s1/points/%a/slurm-%A_%a.out\n",
            "exec '/opt/bin/lossless' sim point '/scratch/s1' \"$SLURM_ARRAY_TASK_ID\" --memory 300MiB\n",
        ] {
            assert!(script.contains(line), "{line:?} not in\n{script}");
        }
        for bad in [
            "/scratch/my sweep",
            "/scratch/100%",
            "/scratch/a'b",
            "/x/$HOME",
        ] {
            assert!(
                slurm_script(Path::new("/l"), Path::new(bad), &s, "x", None, 1 << 20).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_kubernetes_job_names_are_checked_and_strings_quoted() {
        let job = k8s_job(
            "sweep-1",
            "reg.example/lossless:1.0",
            "results",
            8,
            Some(3),
            512 << 20,
        )
        .unwrap();
        for line in [
            "  completionMode: Indexed\n",
            "  completions: 8\n",
            "  parallelism: 3\n",
            "          image: \"reg.example/lossless:1.0\"\n",
            "              memory: 512Mi\n",
            "            claimName: \"results\"\n",
        ] {
            assert!(job.contains(line), "{line:?} not in\n{job}");
        }
        assert!(k8s_job("Sweep", "i", "c", 1, None, 1 << 20).is_err());
        assert!(k8s_job("s", "i", "bad_claim", 1, None, 1 << 20).is_err());
        assert!(k8s_job("s", "an image", "c", 1, None, 1 << 20).is_err());
        assert!(k8s_job("s", "i", "c", 4, Some(100), 1 << 20)
            .unwrap()
            .contains("parallelism: 4\n"));
    }

    #[test]
    fn the_plot_draws_a_line_per_policy_over_the_other_key_seeds_averaged() {
        let s = sweep_of(&[
            "policy=ecmp,flowlet",
            "ecn.kmin_packets=5,10,20",
            "seed=1,2",
        ]);
        let layout = Layout::of(&s);
        assert_eq!(
            layout.x.as_ref().map(|(k, _)| k.as_str()),
            Some("ecn.kmin_packets")
        );
        assert_eq!(layout.lines, ["policy"]);
        assert_eq!(layout.seeds_averaged, 2);
        assert_eq!(layout.x_of(&s.points[2]), 10.0);
        assert_eq!(layout.line_of(&s.points[7]), "flowlet");

        let s = sweep_of(&["seed=1,2", "policy=ecmp,e-ecmp"]);
        let layout = Layout::of(&s);
        assert_eq!(layout.x.as_ref().map(|(k, _)| k.as_str()), Some("seed"));
        assert_eq!(layout.lines, ["policy"]);
        assert_eq!(layout.seeds_averaged, 1);

        let s = sweep_of(&["policy=ecmp,dlb,spray"]);
        let layout = Layout::of(&s);
        assert_eq!(layout.x_of(&s.points[2]), 2.0);
        assert_eq!(layout.x_desc(), "policy (0: ecmp, 1: dlb, 2: spray)");
        assert_eq!(layout.line_of(&s.points[0]), "all");
    }
}
