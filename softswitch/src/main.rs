//! The `softswitch` command line: `check` a program, run an `stf` test.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use softswitch::source::SourceMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A P4_16 v1model software switch.
#[derive(Parser)]
#[command(name = "softswitch", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a P4 program: exits non-zero and prints file:line:col on the first error.
    Check {
        /// The P4_16 program.
        program: PathBuf,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("softswitch: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Check { program } => {
            let mut map = SourceMap::new();
            let file = read_source(&mut map, &program)?;
            match softswitch::compile(&mut map, file) {
                Ok(_) => {
                    println!("{}: ok", program.display());
                    Ok(ExitCode::SUCCESS)
                }
                Err(d) => {
                    eprintln!("{}", d.render(&map));
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

fn read_source(map: &mut SourceMap, path: &Path) -> Result<u32> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(map.add(path.display().to_string(), text))
}
