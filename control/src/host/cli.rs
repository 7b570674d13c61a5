//! `lossless host ...`: the command line of the host data plane.

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::Subcommand;
use dataplane_common::Hook;

use super::{
    attach::{self, AttachRequest, Mode},
    config::HostConfig,
    pinned_maps::PinnedMaps,
    stats::Stats,
    status::InterfaceStatus,
};

/// The `host` subcommands.
#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// Load the programs on IFACE, configure them, pin maps and links, and exit.
    Attach {
        /// The interface.
        iface: String,
        /// XDP mode.
        #[arg(long, value_enum, default_value = "auto")]
        mode: Mode,
        /// A TOML configuration file (keys as for `set`; see docs/host-ecn.md).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Hooks to attach: xdp (ingress), tc (egress), or both.
        #[arg(long, value_delimiter = ',', default_value = "xdp", value_parser = parse_hook)]
        hooks: Vec<Hook>,
    },
    /// Remove everything `attach` made on IFACE.
    Detach {
        /// The interface.
        iface: String,
    },
    /// List attached interfaces, their modes, program ids and configuration.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the counters of IFACE.
    Stats {
        /// The interface.
        iface: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Refresh every SECS seconds, with rates, until interrupted.
        #[arg(long, value_name = "SECS")]
        watch: Option<f64>,
    },
    /// Change configuration live: KEY=VALUE... (all or nothing).
    Set {
        /// The interface.
        iface: String,
        /// Assignments such as ecn.prio3.kmin_bytes=20000.
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
    },
    /// Stream the programs' logs (turn them on with `set IFACE log.errors=true log.marks=true`).
    Logs {
        /// The interface.
        iface: String,
    },
}

fn parse_hook(text: &str) -> Result<Hook, String> {
    Hook::ALL
        .into_iter()
        .find(|h| h.name() == text)
        .ok_or_else(|| format!("unknown hook '{text}' (expected xdp or tc)"))
}

/// Runs one `host` subcommand.
pub async fn run(command: HostCommand) -> anyhow::Result<()> {
    match command {
        HostCommand::Attach {
            iface,
            mode,
            config,
            hooks,
        } => {
            let config = match config {
                Some(path) => HostConfig::from_file(&path)?,
                None => HostConfig::default(),
            };
            let mut hooks = hooks;
            hooks.sort_by_key(|hook| *hook as u32);
            hooks.dedup();
            let request = AttachRequest {
                interface: iface.clone(),
                mode,
                hooks,
                config,
            };
            attach::attach(&request)?;
            print!("{}", InterfaceStatus::read(&iface)?.summary());
        }
        HostCommand::Detach { iface } => {
            attach::detach(&iface)?;
            println!("{iface}: detached");
        }
        HostCommand::Status { json } => {
            let all = InterfaceStatus::all()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else if all.is_empty() {
                println!("no interface attached");
            } else {
                all.iter().for_each(|s| print!("{}", s.summary()));
            }
        }
        HostCommand::Stats { iface, json, watch } => {
            let maps = PinnedMaps::open(&iface)?;
            match watch {
                None => print_stats(&Stats::read(&maps)?, None, json)?,
                Some(secs) => {
                    watch_stats(&maps, Duration::from_secs_f64(secs.max(0.1)), json).await?
                }
            }
        }
        HostCommand::Set { iface, assignments } => {
            let maps = PinnedMaps::open(&iface)?;
            let mut config = maps.read_config()?;
            config
                .apply_assignments(&assignments)
                .with_context(|| format!("{iface}: nothing changed"))?;
            maps.write_config(&config)?;
            println!("{iface}: {}", assignments.join(" "));
        }
        HostCommand::Logs { iface } => stream_logs(&iface).await?,
    }
    Ok(())
}

fn print_stats(
    stats: &Stats,
    previous: Option<(&Stats, Duration)>,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(stats)?);
    } else {
        print!("{}", stats.table(previous));
    }
    Ok(())
}

async fn watch_stats(maps: &PinnedMaps, interval: Duration, json: bool) -> anyhow::Result<()> {
    let mut ticker = tokio::time::interval(interval);
    let mut previous: Option<(Stats, std::time::Instant)> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        let now = std::time::Instant::now();
        let stats = Stats::read(maps)?;
        if !json {
            print!("\x1b[2J\x1b[H");
        }
        let before = previous.as_ref().map(|(s, at)| (s, now - *at));
        print_stats(&stats, before, json)?;
        previous = Some((stats, now));
    }
}

async fn stream_logs(iface: &str) -> anyhow::Result<()> {
    let status = InterfaceStatus::read(iface)?;
    let config = &status.config;
    if !config.log_marks && !config.log_errors {
        eprintln!("{iface}: logging is off; turn it on with `lossless host set {iface} log.errors=true log.marks=true`");
    }
    let mut readers = Vec::new();
    if let Some(hook) = status.hooks.first() {
        let logger = aya_log::EbpfLogger::init_from_id(hook.program_id)
            .with_context(|| format!("opening the log ring of program {}", hook.program_id))?;
        // SAFETY: the logger owns its ring buffer's fd for as long as the AsyncFd lives.
        readers.push(
            unsafe { tokio::io::unix::AsyncFd::register(logger) }.map_err(std::io::Error::from)?,
        );
    }
    // All programs of one object share one log ring: reading the first reads them all.
    let Some(mut reader) = readers.into_iter().next() else {
        anyhow::bail!("{iface}: no program attached");
    };
    loop {
        tokio::select! {
            guard = reader.readable_mut() => {
                let mut guard = guard?;
                guard.get_inner_mut().flush();
                guard.clear_ready();
            }
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}
