//! The benchmarks' load generator: the traffic tool's sender on the engine the benchmark asks
//! for (AF_XDP, the fastest, in every forwarding run), falling back to AF_PACKET with the reason
//! printed, on a core of its own at real-time priority where the process may have one. On a
//! machine shared with builds an ordinary sender measures its share of a core, not its own
//! rate nor the rate of what it feeds.

use anyhow::Context as _;
use sysutil::netns::Namespace;
use traffic::{Engine, FixedRate, SendConfig, SendSummary, Sender};

/// The engine a run's frames left by, from its summary (`afxdp (copy mode)`, `af-packet`, ...).
pub fn engine_used(summary: &SendSummary) -> Engine {
    if summary.engine.starts_with("afxdp") {
        Engine::Afxdp
    } else {
        Engine::AfPacket
    }
}

/// Runs a sender with `config`, QP i at `rates[i]`, on a thread in `ns`, pinned to the core it
/// starts on and scheduled before every ordinary task there (see [`own_current_cpu`]; where the
/// kernel refuses that, at normal priority with the reason on stderr). Where `config` asks for
/// AF_XDP and the interface cannot give it, the sender uses AF_PACKET and the reason goes to
/// stderr; the summary's `engine` says which engine sent.
pub fn send(
    ns: &Namespace,
    config: SendConfig,
    mut rates: Vec<FixedRate>,
) -> anyhow::Result<SendSummary> {
    ns.run(move || {
        if let Err(reason) = own_current_cpu() {
            eprintln!("load: the sender runs at normal priority: {reason:#}");
        }
        let mut sender = Sender::open(config)?;
        if let Some(reason) = sender.engine_fallback() {
            eprintln!("load: sending with AF_PACKET: {reason}");
        }
        Ok(sender.run(&mut rates)?)
    })?
}

/// Pins the calling thread to the CPU it is running on and runs it at the lowest real-time
/// priority (SCHED_FIFO 1), so that the builds and tests sharing the machine do not take the
/// core from it (the kernel's real-time throttling still leaves the other tasks 5% of the core).
/// Needs CAP_SYS_NICE (root has it) and a real-time budget for the caller's cgroup; refused
/// where the kernel's real-time throttling is off, so that a sender never takes a core whole.
pub fn own_current_cpu() -> anyhow::Result<()> {
    let runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .context("reading kernel.sched_rt_runtime_us")?;
    anyhow::ensure!(
        runtime.trim() != "-1",
        "real-time throttling is off (kernel.sched_rt_runtime_us = -1): a real-time sender \
         could keep every other task off its core"
    );
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    anyhow::ensure!(
        cpu >= 0,
        "sched_getcpu: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is a CPU number the kernel gave, within the set; the set is valid.
    let rc = unsafe {
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set)
    };
    anyhow::ensure!(
        rc == 0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: a valid sched_param for the calling thread (0).
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    anyhow::ensure!(
        rc == 0,
        "sched_setscheduler(SCHED_FIFO 1): {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}
