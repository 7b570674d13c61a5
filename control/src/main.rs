//! `lossless`: the command line of the lossless control plane.

use clap::{Parser, Subcommand};
use lossless::host::cli::HostCommand;
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
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("LOSSLESS_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Host(command) => lossless::host::cli::run(command).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
