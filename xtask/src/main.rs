//! `cargo xtask`: the only build orchestration of the workspace.
//!
//! `setup` installs what is missing (idempotent, quick when nothing is), `test` runs setup, the
//! format check, clippy and every test, `demo` runs the labs (ECN, incast, PFC, load balancing), `bench` the benchmarks,
//! `fuzz-diff` a long differential run of softswitch against BMv2 and of softswitch's compiled
//! path against its interpreter, `codegen` regenerates the
//! kernel definitions.
//!
//! p4c and BMv2 come from the bundle `LOSSLESS_P4REF` names, else from PATH (the
//! `p4toolchain` crate).

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
    /// Install what is missing: apt packages, rustfmt + clippy, nightly + rust-src, bpf-linker,
    /// the Python venv.
    Setup,
    /// Setup, `cargo fmt --check`, clippy with `-D warnings`, build once, run every test. Under
    /// CI=true a skipped privileged test fails.
    Test,
    /// Setup, build, and run the labs (ECN, incast, PFC, load balancing) on namespace test beds.
    Demo,
    /// Setup, build in release, and run a benchmark.
    Bench {
        /// What to measure.
        #[arg(value_enum)]
        target: BenchTarget,
    },
    /// Setup, then the differential tests (softswitch against BMv2, softswitch's compiled path
    /// against its interpreter) with many more cases than `test` runs.
    FuzzDiff {
        /// Random cases per program (each: random table entries, then random and mutated
        /// packets).
        #[arg(long, default_value_t = 200)]
        cases: u32,
        /// The first case's seed (cases use consecutive seeds); default: from the clock.
        #[arg(long)]
        seed: Option<u64>,
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
    /// `lossless sim` and htsim on the same scenarios: CPU seconds, packet-hops per CPU
    /// second, peak memory, and their ratios.
    Sim,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
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
                BenchTarget::Sim => run::bench_sim(),
            }
        }
        Command::FuzzDiff { cases, seed } => {
            setup::setup()?;
            run::fuzz_diff(cases, seed)
        }
        Command::Codegen => codegen::codegen(),
    }
}
