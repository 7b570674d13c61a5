//! `lossless sim run`: builds the scenario once per policy compared, runs it with a progress
//! line on a terminal and Ctrl-C ending it early with what it has, and reports each run.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sim::program::Program;
use sim::report::summarise;
use sim::scenario::{build, Scenario};
use sim::simulation::Execution;
use topology::Policy;

use super::cli::RunArgs;
use super::output::{self, Record};
use sysutil::terminal;
use traffic::StopFlag;

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// This thread's CPU time.
pub fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `t`, which lives for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The process' peak resident set (VmHWM), bytes; 0 if the kernel does not say.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The memory a run may take: `asked` (a size), else 80% of MemAvailable, else 2 GB.
pub fn memory_limit(asked: Option<&str>) -> anyhow::Result<u64> {
    if let Some(text) = asked {
        let limits = units::ByteLimits {
            min: 1 << 20,
            max: 1 << 50,
        };
        return Ok(units::parse_bytes(text, &limits)?);
    }
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    Ok(available.map_or(2 << 30, |kb| kb * 1024 / 10 * 8))
}

/// The program of `args`: its file, compiled, or lossless.p4.
pub fn program(file: Option<&Path>) -> anyhow::Result<Program> {
    match file {
        Some(path) => sim::program::compile_file(path).map_err(|e| anyhow::anyhow!("{e}")),
        None => Ok(sim::program::lossless()),
    }
}

/// Runs `scenario` with `program`, run as `execution` says, writes its outputs into `out`, and
/// returns its record; `label` names it on the progress line. The blocks of the program that
/// run interpreted although it runs compiled are named on standard error.
pub fn run_one(
    scenario: &Scenario,
    program: &Program,
    execution: Execution,
    memory: u64,
    out: &Path,
    stop: &StopFlag,
    label: &str,
) -> anyhow::Result<Record> {
    let sources = workload::Sources::from_env();
    let mut built = build(scenario, program, &sources, memory, execution)?;
    for fallback in built.sim.compile_fallbacks() {
        eprintln!("{label}: {fallback}");
    }
    let progress = terminal::redraws(&std::io::stderr());
    let (wall, cpu) = (Instant::now(), thread_cpu_time());
    let mut last = Instant::now();
    let flows = built.sim.flows().len();
    let end = built.sim.run(built.time_limit, |sim| {
        if progress && last.elapsed() >= PROGRESS_EVERY {
            last = Instant::now();
            let done = sim
                .flows()
                .iter()
                .filter(|(_, _, t)| t.delivered.is_some())
                .count();
            let rate = sim.events_handled() as f64 / wall.elapsed().as_secs_f64().max(1e-9);
            eprint!(
                "\r{label}: {:.3} ms simulated, {:.1} M events ({:.2} M/s), {done}/{flows} flows  ",
                sim.now() as f64 / sim::time::MS as f64,
                sim.events_handled() as f64 / 1e6,
                rate / 1e6
            );
            let _ = std::io::stderr().flush();
        }
        !stop.is_stopped()
    })?;
    let cpu_seconds = (thread_cpu_time() - cpu).as_secs_f64().max(1e-9);
    if progress {
        eprintln!();
    }
    let (summary, flows) = summarise(&built, end);
    let record = Record {
        scenario: scenario.clone(),
        cpu_seconds,
        wall_seconds: wall.elapsed().as_secs_f64(),
        events_per_cpu_second: summary.events as f64 / cpu_seconds,
        hops_per_cpu_second: summary.packet_hops as f64 / cpu_seconds,
        peak_rss_bytes: peak_rss_bytes(),
        estimated_bytes: built.estimated_bytes,
        summary,
    };
    output::write_run(out, &built, &record, &flows)?;
    Ok(record)
}

/// Runs `lossless sim run`.
pub fn run(args: &RunArgs, stop: &StopFlag) -> anyhow::Result<()> {
    let scenario = args.scenario.scenario()?;
    let program = program(args.program.as_deref())?;
    let memory = memory_limit(args.memory.as_deref())?;
    let policies: Vec<Policy> = if args.policy.is_empty() {
        vec![scenario.tuning.policy]
    } else {
        args.policy
            .iter()
            .map(|p| topology::tuning::parse_policy(p))
            .collect::<Result<_, _>>()?
    };
    let mut records = Vec::new();
    for policy in &policies {
        let mut s = scenario.clone();
        s.tuning.policy = *policy;
        let out = if policies.len() > 1 {
            args.out.join(policy.name())
        } else {
            args.out.clone()
        };
        let execution = args.execution.execution();
        let record = run_one(&s, &program, execution, memory, &out, stop, policy.name())
            .with_context(|| format!("policy {policy}"))?;
        records.push(record);
        if stop.is_stopped() {
            eprintln!("interrupted: reporting what ran");
            break;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&records)?);
    } else {
        output::print(&records);
    }
    if records.len() > 1 {
        output::write_comparison(&args.out, &records)?;
    }
    Ok(())
}
