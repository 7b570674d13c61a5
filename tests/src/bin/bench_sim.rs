//! `cargo xtask bench sim`: the same scenarios on `lossless sim` (lossless.p4 in every switch)
//! and on htsim's `htsim_roce` (found by `LOSSLESS_HTSIM`, else `PATH`), in one run: a
//! permutation of 2 MB flows and a ring AllReduce, on fat-trees of 128 and 1,024 hosts at 100
//! Gb/s. Both read the same connection matrix, written by htsim's own generators
//! (`gen_permutation.py`, `gen_allreduce.py`), and are configured alike from one description
//! (`lossless_tests::htsim::SideBySide`: links, cables, MTU, PFC thresholds, buffers, ECMP,
//! no congestion control; docs/sim.md says what could not be made alike).
//!
//! Each simulator runs as a child process of this one and is measured the same way, by the
//! kernel's accounting of the child (`wait4`): CPU seconds (user and system) and peak resident
//! memory. Packet-hops are frames sent on links, one per hop: ours counts its own; htsim
//! prints no count, so its are computed from the matrix (each data packet and the ACK htsim
//! sends for it, times the links of the flow's path). A run counts only if both simulators
//! finished every flow of the matrix, ours lost nothing and htsim never overflowed a lossless
//! queue; otherwise the benchmark fails. A simulator is not a load generator: nothing here can
//! be bound by one. Ratios are ours over htsim's, from the same run.
//!
//! htsim gets at most [`HTSIM_CPU_FACTOR`] times the CPU seconds ours took on the same case
//! (and at least [`HTSIM_MIN_CPU_SECONDS`]), as a CPU-time limit the kernel enforces
//! (`RLIMIT_CPU`): past it htsim is stopped, its row says so, and the CPU ratio is a bound
//! (ours is under 1/[`HTSIM_CPU_FACTOR`] of htsim's). Without it a 1,024-host AllReduce keeps
//! htsim busy for hours, and the aim (ours within 2× of htsim's CPU time) is decided anyway.
//!
//! First, before htsim: the same scenario on our simulator with lossless.p4 compiled and
//! interpreted (`lossless sim run --execution`), [`EXECUTION_ROUNDS`] rounds alternating which
//! runs first, each a child process; packet-hops per CPU second of the simulation (the run's
//! own thread CPU time, without building the fabric) of each, and the factor compiled /
//! interpreted. Both must move the same packet-hops and events (the simulator is
//! deterministic). `cargo xtask bench sim` runs softswitch's own compiled / interpreted factor
//! on lossless.p4 (the `interpreter` bench) just before, in the same run: the simulator's
//! factor is to be read beside it.
//!
//! `--hosts 128` runs only the fabrics of that many hosts; `--execution-only` stops after the
//! compiled / interpreted comparison (no htsim needed).

use std::io::{BufReader, Read as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

use anyhow::Context as _;
use lossless::sim::output::Record;
use lossless_tests::htsim::{self, Htsim, HtsimRun, SideBySide, HTSIM_MTU};

/// Bytes of each permutation flow.
const PERMUTATION_BYTES: u64 = 2_000_000;
/// The AllReduce's buffer per rank (nccl-tests' size): each of its flows carries a share,
/// this over the ranks.
const ALLREDUCE_BYTES: u64 = 8 << 20;
/// The generators' seed.
const SEED: u64 = 1;
/// Simulated time limit, µs.
const END_US: u64 = 1_000_000;
/// htsim's CPU-time limit on a case, in multiples of ours on it.
const HTSIM_CPU_FACTOR: u64 = 2;
/// htsim's CPU-time limit is never below this, seconds.
const HTSIM_MIN_CPU_SECONDS: u64 = 60;
/// The compiled / interpreted comparison's scenario: a permutation of 2 MB flows on a 128-host
/// fat-tree at 100 Gb/s, DCQCN (a few seconds of CPU each way).
const EXECUTION_TOPOLOGY: &str = "fat-tree:8,speed=100G";
const EXECUTION_WORKLOAD: &str = "permutation:size=2MB";
/// Rounds of the compiled / interpreted comparison, each running both.
const EXECUTION_ROUNDS: usize = 3;

/// One scenario of the benchmark.
struct Case {
    name: String,
    hosts: u32,
    /// The generator and its arguments after the output file.
    generator: &'static str,
    args: Vec<String>,
}

fn cases(hosts: &[u32]) -> Vec<Case> {
    let mut cases = Vec::new();
    for &n in hosts {
        cases.push(Case {
            name: format!("permutation {n}"),
            hosts: n,
            generator: "gen_permutation.py",
            // nodes, conns, flowsize, extrastarttime, randseed
            args: vec![
                n.to_string(),
                n.to_string(),
                PERMUTATION_BYTES.to_string(),
                "0".into(),
                SEED.to_string(),
            ],
        });
        cases.push(Case {
            name: format!("allreduce {n}"),
            hosts: n,
            generator: "gen_allreduce.py",
            // nodes, conns, groupsize (one ring of every host), flowsize, locality (ranks
            // placed at random), randseed
            args: vec![
                n.to_string(),
                n.to_string(),
                n.to_string(),
                (ALLREDUCE_BYTES / u64::from(n)).to_string(),
                "0".into(),
                SEED.to_string(),
            ],
        });
    }
    cases
}

/// What the kernel accounted for a child process.
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    /// User and system CPU time, seconds.
    cpu_seconds: f64,
    /// Peak resident memory, bytes.
    peak_bytes: u64,
    /// Wall-clock time, seconds.
    wall_seconds: f64,
}

/// How a measured child process ended.
enum Ended<T> {
    /// It exited successfully; what `read` made of its output.
    Finished(T),
    /// The kernel stopped it at its CPU-time limit.
    AtCpuLimit,
}

/// Runs `command` with its standard output given to `read`, and its usage as the kernel
/// accounts it once it has exited; with `cpu_limit` (seconds) the kernel stops it there
/// (SIGXCPU, then SIGKILL a second later). Fails if it fails otherwise.
fn measured<T>(
    mut command: Command,
    cpu_limit: Option<u64>,
    read: impl FnOnce(std::process::ChildStdout) -> anyhow::Result<T>,
) -> anyhow::Result<(Ended<T>, Usage)> {
    if let Some(seconds) = cpu_limit {
        let limit = libc::rlimit {
            rlim_cur: seconds,
            rlim_max: seconds + 1,
        };
        // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits;
        // `limit` is copied into the closure.
        unsafe {
            command.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_CPU, &limit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    let started = Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let out = child.stdout.take().expect("stdout is piped");
    let read = read(out);
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 writes into the two locals, which
    // live for the call, and reaps the child this process started (std's Child is not
    // waited on after this).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: as above: both out-parameters are whole locals, and the pid is our own child's.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    anyhow::ensure!(
        waited == pid,
        "waiting for {command:?}: {}",
        std::io::Error::last_os_error()
    );
    let wall_seconds = started.elapsed().as_secs_f64();
    let errors = errors.join().unwrap_or_default();
    let status = ExitStatus::from_raw(status);
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let usage = Usage {
        cpu_seconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        // Linux gives ru_maxrss in kilobytes.
        peak_bytes: usage.ru_maxrss as u64 * 1024,
        wall_seconds,
    };
    // SIGXCPU at the soft limit; SIGKILL at the hard one, a second later.
    let at_limit = match status.signal() {
        Some(libc::SIGXCPU) => true,
        Some(libc::SIGKILL) => cpu_limit.is_some_and(|limit| usage.cpu_seconds >= limit as f64),
        _ => false,
    };
    if cpu_limit.is_some() && at_limit {
        return Ok((Ended::AtCpuLimit, usage));
    }
    anyhow::ensure!(
        status.success(),
        "{command:?}: {status}\n{}",
        errors.trim_end()
    );
    Ok((Ended::Finished(read?), usage))
}

/// Writes the case's matrix into `dir` with htsim's generator.
fn generate(htsim: &Htsim, case: &Case, dir: &Path) -> anyhow::Result<PathBuf> {
    let file = dir.join(format!("{}.cm", case.name.replace(' ', "-")));
    let out = Command::new("python3")
        .arg(htsim.matrices.join(case.generator))
        .arg(&file)
        .args(&case.args)
        .output()
        .with_context(|| format!("running python3 {}", case.generator))?;
    anyhow::ensure!(
        out.status.success() && file.is_file(),
        "{} {:?}: {}\n{}",
        case.generator,
        case.args,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(file)
}

/// One simulator's figures for one case.
#[derive(Clone, Debug)]
struct Figures {
    usage: Usage,
    /// CPU seconds of the simulation alone (ours reports it; htsim's setup is small).
    run_cpu_seconds: Option<f64>,
    packet_hops: u64,
    flows: u64,
}

/// Our simulator on `side`, as `lossless sim run` in a child process.
fn ours(lossless: &Path, side: &SideBySide, dir: &Path) -> anyhow::Result<Figures> {
    let scenario = side.scenario()?;
    let file = dir.join("scenario.toml");
    std::fs::write(&file, toml::to_string(&scenario)?)
        .with_context(|| format!("writing {}", file.display()))?;
    let (record, usage) = sim_run(
        lossless,
        &file,
        &["--memory", "16GB"],
        &dir.join("ours"),
        "ours",
    )?;
    let s = &record.summary;
    let lost = s.drops.buffer_full + s.drops.queue_full + s.drops.link_down + s.drops.program;
    anyhow::ensure!(lost == 0, "ours lost {lost} frames: {:?}", s.drops);
    Ok(Figures {
        usage,
        run_cpu_seconds: Some(record.cpu_seconds),
        packet_hops: s.packet_hops,
        flows: s.flows.completed,
    })
}

/// Links between hosts `a` and `b` of htsim's 3-tier fat-tree of radix `k`: 2 under one edge
/// switch, 4 in one pod, 6 across pods.
fn hops(k: u32, a: u32, b: u32) -> u64 {
    let (edge, pod) = (|h: u32| h / (k / 2), |h: u32| h / (k * k / 4));
    if edge(a) == edge(b) {
        2
    } else if pod(a) == pod(b) {
        4
    } else {
        6
    }
}

/// htsim on `side`, in a child process working in `dir`, stopped at `cpu_limit` seconds:
/// its figures, or its usage when it was stopped.
fn theirs(
    htsim: &Htsim,
    side: &SideBySide,
    dir: &Path,
    cpu_limit: u64,
) -> anyhow::Result<Result<Figures, Usage>> {
    let (ended, usage) = measured(side.htsim_command(htsim, dir)?, Some(cpu_limit), |out| {
        htsim::read_output(BufReader::new(out), false)
    })?;
    let run: HtsimRun = match ended {
        Ended::Finished(run) => run,
        Ended::AtCpuLimit => return Ok(Err(usage)),
    };
    anyhow::ensure!(
        run.completed && run.finished_count == run.connections,
        "htsim finished {} of {} flows (ran to its end: {})",
        run.finished_count,
        run.connections,
        run.completed
    );
    anyhow::ensure!(
        run.overflows == 0,
        "htsim overflowed a lossless queue {} times",
        run.overflows
    );
    anyhow::ensure!(
        run.retransmitted_bytes == 0,
        "htsim went back {} bytes after NAKs",
        run.retransmitted_bytes
    );
    // Its packets: each flow's data (full packets of its MTU) and the ACK htsim sends for
    // each, over the flow's links.
    let k = side.radix()?;
    let mss = u64::from(HTSIM_MTU);
    let packet_hops: u64 = matrix_flows(side)?
        .iter()
        .map(|f| 2 * f.bytes.div_ceil(mss) * hops(k, f.src, f.dst))
        .sum();
    Ok(Ok(Figures {
        usage,
        run_cpu_seconds: None,
        packet_hops,
        flows: run.finished_count,
    }))
}

/// The matrix's flows, as our workload reader reads them.
fn matrix_flows(side: &SideBySide) -> anyhow::Result<Vec<workload::Flow>> {
    let w = workload::Workload::parse_args(
        &[format!("matrix:{}", side.matrix.display())],
        &workload::Sources::default(),
    )?;
    let endpoints = workload::Endpoints {
        count: side.hosts,
        rate_bps: htsim::LINK_GBPS * 1_000_000_000,
    };
    Ok(workload::expand(&w, &endpoints, side.seed)?.flows)
}

/// `lossless sim run scenario --json --out out` with the options `options`, which must report
/// one run whose flows all completed (else an error that begins with `who`): its record and
/// its process's usage.
fn sim_run(
    lossless: &Path,
    scenario: &Path,
    options: &[&str],
    out: &Path,
    who: &str,
) -> anyhow::Result<(Record, Usage)> {
    let mut command = Command::new(lossless);
    command
        .args(["sim", "run"])
        .arg(scenario)
        .args(options)
        .args(["--json", "--out"])
        .arg(out);
    let (Ended::Finished(mut records), usage) = measured(command, None, |out| {
        let records: Vec<Record> =
            serde_json::from_reader(BufReader::new(out)).context("lossless sim run's JSON")?;
        Ok(records)
    })?
    else {
        unreachable!("ours runs without a CPU-time limit");
    };
    anyhow::ensure!(
        records.len() == 1,
        "lossless sim run reported {} runs, not one",
        records.len()
    );
    let record = records.remove(0);
    let s = &record.summary;
    anyhow::ensure!(
        s.end == sim::simulation::RunEnd::Idle && s.flows.completed == s.flows.total,
        "{who}: finished {} of {} flows (the run ended {:?})",
        s.flows.completed,
        s.flows.total,
        s.end
    );
    Ok((record, usage))
}

/// Our simulator with lossless.p4 compiled against interpreted, on one scenario in
/// [`EXECUTION_ROUNDS`] rounds alternating which goes first: packet-hops per CPU second of the
/// run (median, slowest and fastest round) of each, and the factor.
fn execution(lossless: &Path, dir: &Path) -> anyhow::Result<()> {
    let scenario = sim::scenario::Scenario {
        topology: EXECUTION_TOPOLOGY.into(),
        workload: vec![EXECUTION_WORKLOAD.into()],
        tuning: Default::default(),
        hosts: Default::default(),
        failures: Vec::new(),
        seed: SEED,
        time: "1s".into(),
    };
    let file = dir.join("execution.toml");
    std::fs::write(&file, toml::to_string(&scenario)?)
        .with_context(|| format!("writing {}", file.display()))?;
    println!(
        "lossless sim, {EXECUTION_TOPOLOGY} {EXECUTION_WORKLOAD}, lossless.p4 compiled and \
         interpreted, {EXECUTION_ROUNDS} rounds alternating which runs first:"
    );
    println!(
        "{:<6} {:<12} {:>9} {:>9} {:>13} {:>13}",
        "round", "execution", "CPU s", "run s", "packet-hops", "hops/CPU s"
    );
    let sides = ["interpreted", "compiled"];
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut seen: Option<(u64, u64)> = None;
    for round in 0..EXECUTION_ROUNDS {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let (record, usage) = sim_run(
                lossless,
                &file,
                &["--execution", sides[side]],
                &dir.join(sides[side]),
                sides[side],
            )?;
            let s = &record.summary;
            let moved = (s.packet_hops, s.events);
            anyhow::ensure!(
                seen.is_none_or(|m| m == moved),
                "{}: {} packet-hops and {} events, not {:?} as before: the runs differ",
                sides[side],
                s.packet_hops,
                s.events,
                seen
            );
            seen = Some(moved);
            let rate = s.packet_hops as f64 / record.cpu_seconds;
            rates[side].push(rate);
            println!(
                "{:<6} {:<12} {:>9.2} {:>9.2} {:>13} {:>13.0}",
                round + 1,
                sides[side],
                usage.cpu_seconds,
                record.cpu_seconds,
                s.packet_hops,
                rate
            );
        }
    }
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2], v[v.len() - 1])
    };
    let (i_min, i, i_max) = spread(&mut rates[0]);
    let (c_min, c, c_max) = spread(&mut rates[1]);
    println!(
        "hops/CPU s: interpreted {i:.0} ({i_min:.0}-{i_max:.0}), compiled {c:.0} \
         ({c_min:.0}-{c_max:.0}); compiled / interpreted {:.2} ({:.2}-{:.2}), beside \
         softswitch's own on lossless.p4 (the interpreter bench, above)",
        c / i,
        c_min / i_max,
        c_max / i_min
    );
    Ok(())
}

fn print_header() {
    println!(
        "{:<18} {:<6} {:>9} {:>9} {:>13} {:>13} {:>9} {:>9} {:>8}",
        "scenario",
        "sim",
        "CPU s",
        "run s",
        "packet-hops",
        "hops/CPU s",
        "peak MB",
        "flows",
        "wall s"
    );
}

fn print_row(case: &str, sim: &str, f: &Figures) {
    let run = f
        .run_cpu_seconds
        .map_or_else(|| "-".to_string(), |s| format!("{s:.2}"));
    println!(
        "{:<18} {:<6} {:>9.2} {:>9} {:>13} {:>13.0} {:>9.0} {:>9} {:>8.1}",
        case,
        sim,
        f.usage.cpu_seconds,
        run,
        f.packet_hops,
        f.packet_hops as f64 / f.usage.cpu_seconds,
        f.usage.peak_bytes as f64 / 1e6,
        f.flows,
        f.usage.wall_seconds
    );
}

fn print_ratio(case: &str, ours: &Figures, theirs: &Figures) {
    let rate = |f: &Figures| f.packet_hops as f64 / f.usage.cpu_seconds;
    println!(
        "{:<18} {:<6} {:>9.2} {:>9} {:>13} {:>13.3} {:>9.2}",
        case,
        "ratio",
        ours.usage.cpu_seconds / theirs.usage.cpu_seconds,
        "",
        "",
        rate(ours) / rate(theirs),
        ours.usage.peak_bytes as f64 / theirs.usage.peak_bytes as f64,
    );
}

/// The rows of a case htsim did not finish within its CPU-time limit: its usage when stopped,
/// and ours over it as bounds.
fn print_stopped(case: &str, ours: &Figures, theirs: &Usage) {
    println!(
        "{:<18} {:<6} {:>9} {:>9} {:>13} {:>13} {:>9.0} {:>9} {:>8.1}  stopped at its CPU limit",
        case,
        "htsim",
        format!(">{:.2}", theirs.cpu_seconds),
        "-",
        "-",
        "-",
        theirs.peak_bytes as f64 / 1e6,
        "-",
        theirs.wall_seconds
    );
    println!(
        "{:<18} {:<6} {:>9} {:>9} {:>13} {:>13} {:>9}",
        case,
        "ratio",
        format!("<{:.2}", ours.usage.cpu_seconds / theirs.cpu_seconds),
        "",
        "",
        "-",
        "-",
    );
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: bench-sim [--hosts N | --execution-only]";
    let hosts: Option<Vec<u32>> = match args.as_slice() {
        [] => Some(vec![128, 1024]),
        [flag, n] if flag == "--hosts" => Some(vec![n.parse().context("--hosts N")?]),
        [flag] if flag == "--execution-only" => None,
        _ => anyhow::bail!("{usage}"),
    };
    let lossless = lossless_tests::bed::lossless_bin();
    let dir = std::env::temp_dir().join(format!("lossless-bench-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = execution(&lossless, &dir).and_then(|()| match hosts {
        Some(hosts) => {
            let htsim = htsim::find().map_err(|e| anyhow::anyhow!("{e}"))?;
            bench(&htsim, &lossless, &dir, &hosts)
        }
        None => Ok(()),
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn bench(htsim: &Htsim, lossless: &Path, dir: &Path, hosts: &[u32]) -> anyhow::Result<()> {
    println!(
        "htsim: {}; ours: {} (lossless.p4 in every switch); CPU s and peak MB of each \
         process, as the kernel accounts them",
        htsim.roce.display(),
        lossless.display()
    );
    print_header();
    for case in cases(hosts) {
        let case_dir = dir.join(case.name.replace(' ', "-"));
        std::fs::create_dir_all(&case_dir)?;
        let matrix = generate(htsim, &case, &case_dir)?;
        let side = SideBySide {
            hosts: case.hosts,
            tiers: 3,
            matrix,
            end_us: END_US,
            seed: SEED,
        };
        let o = ours(lossless, &side, &case_dir).with_context(|| format!("{}: ours", case.name))?;
        print_row(&case.name, "ours", &o);
        let limit =
            (o.usage.cpu_seconds.ceil() as u64 * HTSIM_CPU_FACTOR).max(HTSIM_MIN_CPU_SECONDS);
        let t = match theirs(htsim, &side, &case_dir, limit)
            .with_context(|| format!("{}: htsim", case.name))?
        {
            Ok(t) => t,
            Err(stopped) => {
                print_stopped(&case.name, &o, &stopped);
                continue;
            }
        };
        print_row(&case.name, "htsim", &t);
        anyhow::ensure!(
            o.flows == t.flows,
            "{}: ours finished {} flows, htsim {}",
            case.name,
            o.flows,
            t.flows
        );
        print_ratio(&case.name, &o, &t);
    }
    println!("ratios are ours / htsim's: CPU s, packet-hops per CPU s, peak memory");
    Ok(())
}
