//! `cargo xtask`: the only build orchestration of the workspace.
//!
//! `setup` installs what is missing (idempotent, quick when nothing is), `test` runs setup and
//! every test, `demo` runs the ECN demo, `bench` the benchmarks, `codegen` regenerates the
//! kernel definitions.

mod codegen;
mod run;
mod setup;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install what is missing: apt packages, nightly + rust-src, bpf-linker, the Python venv.
    Setup,
    /// Setup, build once, run every test. Under CI=true a skipped privileged test fails.
    Test,
    /// Setup, build, and run the ECN demo on a namespace test bed.
    Demo,
    /// Setup, build in release, and run a benchmark.
    Bench {
        /// What to measure.
        #[arg(value_enum)]
        target: BenchTarget,
    },
    /// Regenerate kernel UAPI definitions (bindgen) and the P4Runtime descriptors (output committed).
    Codegen,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum BenchTarget {
    /// Packets/s through a veth pair: no program, XDP_PASS, the ECN program.
    Host,
    /// The softswitch interpreter alone, then forwarding between veths: bridge vs softswitch vs
    /// interpreter.
    Softswitch,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Setup => setup::setup(),
        Command::Test => {
            setup::setup()?;
            run::test()
        }
        Command::Demo => {
            setup::setup()?;
            run::demo()
        }
        Command::Bench { target } => {
            setup::setup()?;
            match target {
                BenchTarget::Host => run::bench_host(),
                BenchTarget::Softswitch => run::bench_softswitch(),
            }
        }
        Command::Codegen => codegen::codegen(),
    }
}
