//! `lossless`: the command line of the lossless control plane.

use clap::{Parser, Subcommand};
use host::cli::HostCommand;
use lossless::{
    agent::AgentArgs, check::cli::CheckArgs, lab::cli::LabCommand, net::cli::NetArgs,
    sim::cli::SimCommand, telemetry::cli::TelemetryCommand,
};
use p4client::cli::P4Args;
use tracing_subscriber::EnvFilter;
use traffic::TrafficCommand;

/// Programmable data planes for RoCEv2-style lossless Ethernet.
#[derive(Debug, Parser)]
#[command(name = "lossless", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The host data plane (eBPF): attach, detach, status, stats, set, logs.
    #[command(subcommand)]
    Host(HostCommand),
    /// P4 switches over P4Runtime: pipeline, entries, counters, registers, queues, watch.
    P4(P4Args),
    /// Mininet networks of P4 switches and hosts: up, status, exec, down, policy.
    Net(NetArgs),
    /// RoCEv2 traffic: a paced sender and a counting receiver.
    #[command(subcommand)]
    Traffic(TrafficCommand),
    /// Labs: namespace topologies that run a workload through the data planes.
    #[command(subcommand)]
    Lab(LabCommand),
    /// The host daemon: keeps interfaces attached as a file says, serves /metrics.
    Agent(AgentArgs),
    /// The fabric simulated at data-centre scale, lossless.p4 in every switch: run, sweep,
    /// point, report.
    #[command(subcommand)]
    Sim(SimCommand),
    /// A fabric's configuration checked against the misconfigurations that break lossless
    /// fabrics (PFC, ECN, DSCP, CNP, headroom, watchdog, buffer-dependency cycles): exits 1
    /// when it finds an error.
    Check(CheckArgs),
    /// What the data planes send a collector: collect (ERSPAN mirrors of CNPs and NAKs to pcap
    /// and a per-QP table).
    #[command(subcommand)]
    Telemetry(TelemetryCommand),
}

/// The crates the `lossless` command is made of besides its own: `lossless=LEVEL` in
/// `LOSSLESS_LOG` stands for all of them, as it did when they were one crate.
const TOOL_CRATES: &[&str] = &["host", "hostconfig", "traffic", "p4client", "sysutil"];

/// `LOSSLESS_LOG`'s filter with each `lossless=LEVEL` directive widened to [`TOOL_CRATES`].
fn log_filter(text: &str) -> String {
    let mut directives = vec![text.to_owned()];
    for directive in text.split(',') {
        if let Some(level) = directive.trim().strip_prefix("lossless=") {
            directives.extend(TOOL_CRATES.iter().map(|c| format!("{c}={level}")));
        }
    }
    directives.join(",")
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Like other command-line tools, end quietly when the reader of stdout goes away
    // (`lossless host status --json | head`). Not by SIGPIPE's default action: the gRPC and
    // HTTP clients write to sockets with writev, which raises SIGPIPE when the peer has closed
    // (a TLS server refusing a plain client), and the process would die without a word.
    // SIGPIPE stays ignored (Rust's default); printing to a closed stdout panics with EPIPE,
    // which this hook turns into the quiet exit a shell expects (128 + SIGPIPE).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("os error 32") {
            std::process::exit(128 + libc::SIGPIPE);
        }
        default_hook(info);
    }));
    tracing_subscriber::fmt()
        .with_ansi(sysutil::terminal::colour(&std::io::stderr()))
        .with_env_filter(
            std::env::var("LOSSLESS_LOG")
                .ok()
                .and_then(|text| EnvFilter::try_new(log_filter(&text)).ok())
                .unwrap_or_else(|| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Host(command) => host::cli::run(command).await,
        Command::P4(args) => lossless::net::cli::p4(args).await,
        Command::Net(args) => match lossless::net::cli::run(args).await {
            Ok(code) => return code,
            Err(error) => Err(error),
        },
        Command::Traffic(command) => tokio::task::spawn_blocking(move || traffic::run(command))
            .await
            .unwrap_or_else(|e| Err(e.into())),
        Command::Lab(command) => lossless::lab::cli::run(command).await,
        Command::Agent(args) => lossless::agent::run(args).await,
        Command::Sim(command) => run_sim(command).await,
        Command::Telemetry(command) => {
            until_interrupted("collecting", move |stop| {
                lossless::telemetry::cli::run(command, stop)
            })
            .await
        }
        Command::Check(args) => {
            return tokio::task::spawn_blocking(move || lossless::check::cli::run(&args))
                .await
                .unwrap_or(std::process::ExitCode::from(2))
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs one `sim` subcommand on a blocking thread; Ctrl-C, or SIGTERM (how Slurm and
/// Kubernetes stop a task), asks it to stop and report what it has.
async fn run_sim(command: SimCommand) -> anyhow::Result<()> {
    use lossless::sim::{run, sweep};
    until_interrupted("writing what ran", move |stop| match command {
        SimCommand::Run(args) => run::run(&args, stop),
        SimCommand::Sweep(args) => sweep::sweep(&args, stop),
        SimCommand::Point(args) => sweep::point(&args, stop),
        SimCommand::Report(args) => sweep::report(&args.dir, args.json),
    })
    .await
}

/// Runs `work` on a blocking thread; Ctrl-C or SIGTERM sets its stop flag (saying `doing` on
/// stderr) and it ends with what it has.
async fn until_interrupted(
    doing: &str,
    work: impl FnOnce(&traffic::StopFlag) -> anyhow::Result<()> + Send + 'static,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    let stop = traffic::StopFlag::new();
    let work_stop = stop.clone();
    let mut work = tokio::task::spawn_blocking(move || work(&work_stop));
    let interrupted = async {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    };
    tokio::select! {
        result = &mut work => result?,
        () = interrupted => {
            eprintln!("interrupted: {doing}");
            stop.stop();
            work.await?
        }
    }
}
