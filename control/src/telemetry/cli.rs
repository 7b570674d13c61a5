//! `lossless telemetry ...`: the command line of the collector.

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use traffic::StopFlag;
use units::{parse_duration, parse_run_time, DurationLimits};

use super::collect::{collect, create_output, table_csv, CollectConfig, Collected};

/// The shortest and longest time bucket of the table.
const BUCKET: DurationLimits =
    DurationLimits::seconds(Duration::from_millis(1)).up_to(Duration::from_secs(24 * 3600));
/// The most rows `--max-rows` allows (each a few dozen bytes).
const MAX_ROWS: usize = 10_000_000;

/// `lossless telemetry` subcommands.
#[derive(Debug, Subcommand)]
pub enum TelemetryCommand {
    /// Receive ERSPAN (type II or III over GRE) on an interface: write the frames to a pcap
    /// file and count the mirrored CNPs and NAKs per time bucket and QP, until --count,
    /// --duration or Ctrl-C.
    Collect(CollectArgs),
}

/// `lossless telemetry collect`'s options.
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// The interface the ERSPAN frames arrive on (in this network namespace).
    #[arg(long)]
    pub interface: String,
    /// Write the ERSPAN frames, as they arrived, to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Write the table as CSV (bucket_start_s,destination,qp,cnps,naks) to this file.
    #[arg(long, value_name = "FILE")]
    pub table: Option<PathBuf>,
    /// Width of a time bucket of the table (1 ms to 1 day; units ms, s, m, h).
    #[arg(long, default_value = "1s", value_parser = |s: &str| parse_duration(s, &BUCKET))]
    pub bucket: Duration,
    /// Stop after this many ERSPAN frames.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Stop after this long (units ms, s, m, h).
    #[arg(long, value_parser = parse_run_time)]
    pub duration: Option<Duration>,
    /// Most rows of the table (CNPs and NAKs past it are counted, not tabled; at most
    /// 10000000).
    #[arg(long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_ROWS as u64))]
    pub max_rows: u64,
    /// Most bytes of the pcap file (frames past it are counted, not written).
    #[arg(long, default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_pcap_bytes: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs one `telemetry` subcommand; `stop` ends it early (Ctrl-C), with its report.
pub fn run(command: TelemetryCommand, stop: &StopFlag) -> anyhow::Result<()> {
    let TelemetryCommand::Collect(args) = command;
    let config = CollectConfig {
        interface: args.interface.clone(),
        pcap: args.pcap.clone(),
        bucket: args.bucket,
        count: args.count,
        duration: args.duration,
        max_rows: usize::try_from(args.max_rows).unwrap_or(MAX_ROWS),
        max_pcap_bytes: args.max_pcap_bytes,
    };
    // Made before collecting, so a path it refuses (a symbolic link) fails at once.
    let table = args.table.as_deref().map(create_output).transpose()?;
    let collected = collect(&config, stop)?;
    if let (Some(mut file), Some(path)) = (table, &args.table) {
        std::io::Write::write_all(&mut file, table_csv(&collected.table).as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&collected)?);
    } else {
        print!("{}", report(&collected, &args));
    }
    Ok(())
}

/// The text report: totals, then the table.
fn report(c: &Collected, args: &CollectArgs) -> String {
    let mut out = format!(
        "{} ERSPAN frames in {:.1} s on {}: {} CNPs, {} NAKs, {} other; {} other IPv4 frames, \
         {} too long, {} dropped by the kernel\n",
        c.erspan_frames,
        c.seconds,
        args.interface,
        c.cnps,
        c.naks,
        c.other_mirrored,
        c.other_frames,
        c.truncated_frames,
        c.kernel_drops
    );
    for (session, frames) in &c.sessions {
        out.push_str(&format!("session {session}: {frames} frames\n"));
    }
    if let Some(path) = &args.pcap {
        out.push_str(&format!(
            "pcap {}: {} frames written, {} past --max-pcap-bytes\n",
            path.display(),
            c.pcap_frames,
            c.pcap_skipped
        ));
    }
    if c.untabled > 0 {
        out.push_str(&format!(
            "{} CNPs/NAKs past --max-rows not tabled\n",
            c.untabled
        ));
    }
    out.push_str(&format!(
        "{:>10}  {:<15}  {:>8}  {:>8}  {:>8}\n",
        "bucket_s", "destination", "qp", "cnps", "naks"
    ));
    for row in &c.table {
        out.push_str(&format!(
            "{:>10.3}  {:<15}  {:>8}  {:>8}  {:>8}\n",
            row.bucket_start_s,
            row.destination.to_string(),
            row.qp,
            row.cnps,
            row.naks
        ));
    }
    out
}
