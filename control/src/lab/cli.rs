//! `lossless lab ...`: the command line of the labs.

use clap::Subcommand;

use traffic::StopFlag;

use super::{
    ecn::{self, EcnLab},
    incast::{self, IncastLab},
    lb::{self, LbLab},
    pfc::{self, PfcLab},
};

/// The `lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// ECN marking at a bottleneck: offered load rises past the drain rate, marks follow RED.
    Ecn(EcnLab),
    /// Incast: N DCQCN senders into one bottleneck; marks become kernel CNPs, rates converge.
    Incast(IncastLab),
    /// PFC: a receiver slower than its sender pauses it (XOFF) and lets it go (XON); no loss.
    Pfc(PfcLab),
    /// Load balancing: one workload under each policy of the XDP balancer; imbalance,
    /// reordering and flow completion times compared.
    Lb(LbLab),
}

/// Runs one `lab` subcommand; Ctrl-C stops it early and it still cleans up.
pub async fn run(command: LabCommand) -> anyhow::Result<()> {
    let stop = StopFlag::new();
    let lab_stop = stop.clone();
    let mut lab = tokio::task::spawn_blocking(move || match command {
        LabCommand::Ecn(args) => ecn::run(&args, &lab_stop),
        LabCommand::Incast(args) => incast::run(&args, &lab_stop),
        LabCommand::Pfc(args) => pfc::run(&args, &lab_stop),
        LabCommand::Lb(args) => lb::run(&args, &lab_stop),
    });
    tokio::select! {
        result = &mut lab => result?,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("interrupted: cleaning up");
            stop.stop();
            lab.await?
        }
    }
}
