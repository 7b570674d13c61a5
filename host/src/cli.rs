//! `lossless host ...`: the command line of the host data plane.

use std::{path::PathBuf, time::Duration};

use anyhow::{bail, Context as _};
use clap::Subcommand;

use units::{parse_duration, WATCH_INTERVAL};

use crate::{
    attach::{self, AttachRequest},
    lb, metrics,
    mirror::{self, MirrorAction},
    pinned_maps::PinnedMaps,
    stats::Stats,
    status::{self, Entry, InterfaceStatus},
};
use hostconfig::{
    attachment::{Attachment, Mode},
    config::HostConfig,
    lb::LbConfig,
};
use sysutil::namespace::NetnsId;

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
        /// What to attach: xdp (ECN and PFC receive on ingress), tc (ECN on egress), cnp (the
        /// CNP fast path), pfc (PFC generation), lb (the load balancer; instead of xdp), mirror
        /// (ERSPAN mirroring, set with `mirror`); any combination.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "xdp")]
        hooks: Vec<Attachment>,
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
    /// Print the counters of IFACE (of every interface attached in this network namespace when
    /// none is named).
    Stats {
        /// The interfaces.
        ifaces: Vec<String>,
        /// Print one JSON object per interface (the same as --format json).
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// text, json (one object per line) or prometheus (the text exposition format, for the
        /// node exporter's textfile collector).
        #[arg(long, value_enum)]
        format: Option<StatsFormat>,
        /// Refresh every SECS seconds (0.1 s to 1 day; units ms, s, m, h accepted), with
        /// rates, until interrupted.
        #[arg(long, value_name = "SECS", value_parser = |s: &str| parse_duration(s, &WATCH_INTERVAL))]
        watch: Option<Duration>,
    },
    /// Change configuration live: KEY=VALUE... (all or nothing).
    Set {
        /// The interface.
        iface: String,
        /// Assignments such as ecn.prio3.kmin_bytes=20000 or lb.policy=e-ecmp (the balancer's
        /// policies: ecmp, flowlet, dlb, spray, wcmp, e-ecmp; docs/host-lb.md).
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
    },
    /// The receiver QP → sender QP map the kernel's CNPs use (DestQP of the CNP).
    QpMap {
        /// The interface.
        iface: String,
        /// What to do.
        #[command(subcommand)]
        action: QpMapAction,
    },
    /// ERSPAN mirroring of the CNPs, NAKs or priorities IFACE sends and receives to a collector
    /// (needs the mirror hook; docs/telemetry.md).
    Mirror {
        /// The interface.
        iface: String,
        /// What to do.
        #[command(subcommand)]
        action: MirrorAction,
    },
    /// Keep the load balancer's live uplinks in step with their carrier (runs until stopped).
    Watch {
        /// The interface the `lb` hook is attached to.
        iface: String,
    },
    /// Stream the programs' logs (turn them on with `set IFACE log.errors=true log.marks=true`).
    Logs {
        /// The interface.
        iface: String,
    },
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
            let mut attachments = hooks;
            attachments.sort();
            attachments.dedup();
            let request = AttachRequest {
                interface: iface.clone(),
                mode,
                attachments,
                config,
            };
            let attached = attach::attach(&request)?;
            for recovered in &attached.recovered {
                println!("{iface}: {}", recovered.describe());
            }
            print!("{}", InterfaceStatus::read(&iface)?.summary());
        }
        HostCommand::Detach { iface } => {
            let recovered = attach::detach(&iface)?;
            for recovered in &recovered {
                println!("{iface}: {}", recovered.describe());
            }
            println!("{iface}: detached");
        }
        HostCommand::Status { json } => {
            let all = status::all()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else {
                print!("{}", status_text(&all));
            }
        }
        HostCommand::Stats {
            ifaces,
            json,
            format,
            watch,
        } => {
            let format = format.unwrap_or(if json {
                StatsFormat::Json
            } else {
                StatsFormat::Text
            });
            let ifaces = if ifaces.is_empty() {
                status::attached_here()?
            } else {
                ifaces
            };
            // An empty exposition is a valid answer for a textfile collector; a table is not.
            if ifaces.is_empty() && format != StatsFormat::Prometheus {
                bail!("no interface attached in this network namespace");
            }
            let maps = ifaces
                .iter()
                .map(|iface| PinnedMaps::open(iface))
                .collect::<anyhow::Result<Vec<_>>>()?;
            match watch {
                None => {
                    let stats = read_stats(&maps)?;
                    print_stats(&stats, &[], format)?
                }
                Some(interval) => watch_stats(&maps, interval, format).await?,
            }
        }
        HostCommand::Set { iface, assignments } => {
            let maps = PinnedMaps::open(&iface)?;
            let hooks = maps.read_attach_info()?.hooks;
            if hooks & Attachment::Lb.bit() == 0 {
                if let Some(key) = assignments.iter().find(|a| LbConfig::owns(a)) {
                    bail!("{iface}: '{key}' needs the lb hook (attach with --hooks lb)");
                }
            }
            let mut config = maps.read_config()?;
            config
                .apply_assignments(&assignments)
                .with_context(|| format!("{iface}: nothing changed"))?;
            maps.write_config(&config)?;
            println!("{iface}: {}", assignments.join(" "));
        }
        HostCommand::QpMap { iface, action } => qp_map(&iface, action)?,
        HostCommand::Mirror { iface, action } => mirror::run(&iface, action)?,
        HostCommand::Logs { iface } => stream_logs(&iface).await?,
        HostCommand::Watch { iface } => {
            let maps = PinnedMaps::open(&iface)?;
            if maps.read_attach_info()?.hooks & Attachment::Lb.bit() == 0 {
                bail!("{iface}: the lb hook is not attached (attach with --hooks lb)");
            }
            let watcher = tokio::task::spawn_blocking(move || lb::watch::watch(&maps));
            tokio::select! {
                result = watcher => result??,
                _ = tokio::signal::ctrl_c() => {}
            }
        }
    }
    Ok(())
}

/// `qp-map` actions.
#[derive(Debug, Subcommand)]
pub enum QpMapAction {
    /// Answer CE packets for RX_QP with CNPs addressed to TX_QP.
    Add {
        /// The receiver's QP (the data packets' DestQP), decimal or 0x-hex.
        #[arg(value_parser = parse_qp)]
        rx_qp: u32,
        /// The sender's QP, decimal or 0x-hex.
        #[arg(value_parser = parse_qp)]
        tx_qp: u32,
    },
    /// Remove RX_QP's entry (its CNPs fall back to the data packets' DestQP).
    Del {
        /// The receiver's QP.
        #[arg(value_parser = parse_qp)]
        rx_qp: u32,
    },
    /// Print every entry.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Parses a 24-bit QP number, decimal or 0x-hex.
fn parse_qp(text: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    match parsed {
        Ok(qp) if qp <= 0x00ff_ffff => Ok(qp),
        _ => Err(format!(
            "'{text}' is not a QP number (24 bits: 0..16777215)"
        )),
    }
}

fn qp_map(iface: &str, action: QpMapAction) -> anyhow::Result<()> {
    let maps = PinnedMaps::open(iface)?;
    let mut map = maps.qp_map()?;
    match action {
        QpMapAction::Add { rx_qp, tx_qp } => {
            map.insert(rx_qp, tx_qp, 0)
                .with_context(|| format!("{iface}: qp-map full?"))?;
            println!("{iface}: CNPs for QP {rx_qp} go to QP {tx_qp}");
        }
        QpMapAction::Del { rx_qp } => {
            map.remove(&rx_qp)
                .with_context(|| format!("{iface}: no qp-map entry for QP {rx_qp}"))?;
            println!("{iface}: QP {rx_qp} removed");
        }
        QpMapAction::List { json } => {
            let mut entries = map.iter().collect::<Result<Vec<(u32, u32)>, _>>()?;
            entries.sort();
            if json {
                let objects: Vec<_> = entries
                    .iter()
                    .map(|(rx, tx)| serde_json::json!({"rx_qp": rx, "tx_qp": tx}))
                    .collect();
                println!("{}", serde_json::to_string(&objects)?);
            } else {
                entries.iter().for_each(|(rx, tx)| println!("{rx} -> {tx}"));
            }
        }
    }
    Ok(())
}

/// `status` as text: the calling thread's namespace first (or a line saying it has nothing),
/// then the other namespaces' interfaces and leftovers.
fn status_text(all: &[Entry]) -> String {
    let here = all
        .iter()
        .take_while(|e| e.netns().is_some_and(|n| n.current));
    let mut out: String = here.clone().map(Entry::summary).collect();
    if out.is_empty() {
        let netns = NetnsId::current()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        out += &format!("no interface attached in this network namespace{netns}\n");
    }
    let elsewhere = &all[here.count()..];
    if !elsewhere.is_empty() {
        out += "in other network namespaces:\n";
        out.extend(elsewhere.iter().map(Entry::summary));
    }
    out
}

/// How `host stats` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StatsFormat {
    /// Aligned tables.
    Text,
    /// One JSON object per interface and line.
    Json,
    /// The Prometheus text exposition format (docs/agent.md lists the metrics).
    Prometheus,
}

fn read_stats(maps: &[PinnedMaps]) -> anyhow::Result<Vec<Stats>> {
    maps.iter().map(Stats::read).collect()
}

/// Prints `stats`; as text with rates when `previous` holds the readings `interval` ago.
fn print_stats(
    stats: &[Stats],
    previous: &[(Stats, Duration)],
    format: StatsFormat,
) -> anyhow::Result<()> {
    match format {
        StatsFormat::Json => {
            for stats in stats {
                println!("{}", serde_json::to_string(stats)?);
            }
        }
        StatsFormat::Prometheus => print!("{}", metrics::encode_stats(stats)?),
        StatsFormat::Text => {
            for (i, stats) in stats.iter().enumerate() {
                let before = previous.get(i).map(|(s, interval)| (s, *interval));
                print!("{}", stats.table(before));
            }
        }
    }
    Ok(())
}

async fn watch_stats(
    maps: &[PinnedMaps],
    interval: Duration,
    format: StatsFormat,
) -> anyhow::Result<()> {
    let mut ticker = tokio::time::interval(interval);
    let mut previous: Option<(Vec<Stats>, std::time::Instant)> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        let now = std::time::Instant::now();
        let stats = read_stats(maps)?;
        if format == StatsFormat::Text {
            let stdout = std::io::stdout();
            print!(
                "{}",
                sysutil::terminal::refresh_prefix(&stdout, previous.is_none())
            );
        }
        let before: Vec<(Stats, Duration)> = previous
            .map(|(all, at)| all.into_iter().map(|s| (s, now - at)).collect())
            .unwrap_or_default();
        print_stats(&stats, &before, format)?;
        previous = Some((stats, now));
    }
}

async fn stream_logs(iface: &str) -> anyhow::Result<()> {
    let status = InterfaceStatus::read(iface)?;
    let config = &status.config;
    if !config.log_marks && !config.log_errors {
        eprintln!("{iface}: logging is off; turn it on with `lossless host set {iface} log.errors=true log.marks=true`");
    }
    // The programs of one object share one log ring, but only those that log hold it: the
    // xdp and tc programs do; cnp's and pfc's (ingress, emit) and lb's do not.
    let logger = status
        .hooks
        .iter()
        .find_map(|hook| aya_log::EbpfLogger::init_from_id(hook.program_id).ok())
        .with_context(|| {
            format!(
                "{iface}: none of its programs ({}) writes logs; the xdp and tc hooks do \
                 (attach with --hooks xdp or tc beside the others)",
                status
                    .hooks
                    .iter()
                    .map(|h| h.hook)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    // SAFETY: the logger owns its ring buffer's fd for as long as the AsyncFd lives.
    let mut reader =
        unsafe { tokio::io::unix::AsyncFd::register(logger) }.map_err(std::io::Error::from)?;
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
