//! `lossless`: the command line of the lossless control plane.

use clap::{Parser, Subcommand};
use lossless::{
    agent::AgentArgs, host::cli::HostCommand, lab::cli::LabCommand, net::cli::NetArgs,
    p4::cli::P4Args, traffic::TrafficCommand,
};
use tracing_subscriber::EnvFilter;

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
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Like other command-line tools, end quietly when the reader of stdout goes away
    // (`lossless host status --json | head`) instead of panicking on EPIPE.
    // SAFETY: sets the process-wide disposition of one signal; nothing here relies on SIGPIPE
    // being ignored.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    tracing_subscriber::fmt()
        .with_ansi(lossless::terminal::colour(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_env("LOSSLESS_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Host(command) => lossless::host::cli::run(command).await,
        Command::P4(args) => lossless::net::cli::p4(args).await,
        Command::Net(args) => match lossless::net::cli::run(args).await {
            Ok(code) => return code,
            Err(error) => Err(error),
        },
        Command::Traffic(command) => {
            tokio::task::spawn_blocking(move || lossless::traffic::run(command))
                .await
                .unwrap_or_else(|e| Err(e.into()))
        }
        Command::Lab(command) => lossless::lab::cli::run(command).await,
        Command::Agent(args) => lossless::agent::run(args).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
