//! `lossless traffic collective`: the options of one rank, nccl-tests' habits where they fit
//! (`-b`-like `--size`, `-n`-like `--iters`, `-w`-like `--warmup`), and its tables.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};

use crate::collective::{Rank, RankConfig, RankSummary};
use crate::frame_class::FrameClassArgs;
use crate::stop::stop_on_interrupt;
use units::{parse_duration, DurationLimits};

/// `--rto`: 100 µs to 10 s, a bare number in milliseconds.
pub const RTO: DurationLimits =
    DurationLimits::millis(Duration::from_micros(100), Duration::from_secs(10));

/// `--timeout`: 1 ms to a day, a bare number in seconds.
const TIMEOUT: DurationLimits = DurationLimits::seconds(Duration::from_millis(1));

/// The collectives a rank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CollectiveArg {
    /// Ring AllReduce: a reduce-scatter and an all-gather of n − 1 steps each.
    Allreduce,
    /// All-to-all: each rank sends size/n bytes to every other, all at once.
    Alltoall,
}

impl CollectiveArg {
    /// Its name on the command line and in the workload format.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveArg::Allreduce => "allreduce",
            CollectiveArg::Alltoall => "alltoall",
        }
    }
}

/// How a connection's messages use its QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QpUseArg {
    /// Whole messages in turn, one QP after the other (as Meta's training fabric does).
    RoundRobin,
    /// Every message split in equal pieces, one on each QP.
    Split,
}

impl QpUseArg {
    /// Its name on the command line and in the workload format.
    pub fn name(self) -> &'static str {
        match self {
            QpUseArg::RoundRobin => "round-robin",
            QpUseArg::Split => "split",
        }
    }
}

/// Options of `traffic collective`.
#[derive(Debug, Args)]
pub struct CollectiveArgs {
    /// The collective; or give --workload.
    #[arg(required_unless_present = "workload", conflicts_with = "workload")]
    pub collective: Option<CollectiveArg>,
    /// Interface to send and receive on.
    #[arg(long)]
    pub iface: String,
    /// This rank: its position in --hosts, from 0.
    #[arg(long)]
    pub rank: u32,
    /// Every rank's IP address, rank 0 first, comma-separated; the same on every rank.
    #[arg(long, value_delimiter = ',', required = true)]
    pub hosts: Vec<IpAddr>,
    /// Bytes per rank, nccl-tests' size (units B, KB, MB, KiB, MiB, ...).
    #[arg(long, default_value = "1MiB", value_parser = size_text)]
    pub size: String,
    /// QPs per connection.
    #[arg(long, default_value_t = 1)]
    pub qps_per_conn: u32,
    /// How a connection's messages use its QPs.
    #[arg(long, value_enum, default_value = "round-robin")]
    pub qp_use: QpUseArg,
    /// Timed iterations.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: u32,
    /// Iterations before the timed ones (the first includes the ranks' meeting).
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Instead of a collective and its options: a workload (a short form or a TOML file, as
    /// `lossless sim` reads them) holding one collective; its first --warmup reps are not
    /// timed.
    #[arg(long, conflicts_with_all = ["size", "qps_per_conn", "qp_use", "iters"])]
    pub workload: Option<String>,
    /// Payload bytes per packet (the RoCE path MTU); frames must fit the interface's MTU.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=9000))]
    pub payload: u32,
    /// Packets a QP may have unacknowledged.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub window: u32,
    /// Retransmission timeout: with nothing acknowledged this long, a QP goes back to its
    /// oldest unacknowledged packet (bare number: milliseconds).
    #[arg(long, default_value = "10ms", value_parser = |s: &str| parse_duration(s, &RTO))]
    pub rto: Duration,
    /// Give up if the collective has not finished after this long (bare number: seconds).
    #[arg(long, default_value = "60s", value_parser = |s: &str| parse_duration(s, &TIMEOUT))]
    pub timeout: Duration,
    /// The frames' class (ACKs and NAKs go Not-ECT).
    #[command(flatten)]
    pub class: FrameClassArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

impl CollectiveArgs {
    /// The workload, in the short form the one workload parser reads.
    fn workload(&self) -> String {
        match &self.workload {
            Some(w) => w.clone(),
            None => short_form(
                self.collective.unwrap_or(CollectiveArg::Allreduce),
                &self.size,
                self.qps_per_conn,
                self.qp_use,
                u64::from(self.iters) + u64::from(self.warmup),
            ),
        }
    }
}

/// `--size`: a size in bytes (1 B to the workload format's limit) with its unit, kept as
/// text for the workload's short form; anything else (a comma would add keys to the short
/// form) is refused here.
pub fn size_text(text: &str) -> anyhow::Result<String> {
    let limits = units::ByteLimits {
        min: 1,
        max: workload::limits::MAX_BYTES,
    };
    units::parse_bytes(text, &limits)?;
    Ok(text.trim().to_owned())
}

/// A collective of `size` bytes per rank (a size with its unit, as the workload format reads
/// it), `qps` QPs per connection used as `qp_use` says, `reps` times, in the short form of the
/// one workload parser.
pub fn short_form(
    kind: CollectiveArg,
    size: &str,
    qps: u32,
    qp_use: QpUseArg,
    reps: u64,
) -> String {
    format!(
        "{}:size={size},qps={qps},qp_use={},reps={reps}",
        kind.name(),
        qp_use.name()
    )
}

/// Runs one rank; Ctrl-C stops it with an error that says what it waited for.
pub fn collective(args: CollectiveArgs) -> anyhow::Result<()> {
    let config = RankConfig {
        iface: args.iface.clone(),
        rank: args.rank,
        hosts: args.hosts.clone(),
        workload: vec![args.workload()],
        payload: args.payload,
        window: args.window,
        rto: args.rto,
        warmup: args.warmup,
        timeout: args.timeout,
        dscp: args.class.dscp,
        pcp: args.class.pcp,
        ecn: args.class.ecn.into(),
        resolve_timeout: Duration::from_secs(3),
    };
    let mut rank = Rank::open(config)
        .with_context(|| format!("preparing rank {} on {}", args.rank, args.iface))?;
    let stop = rank.stop_flag();
    let summary = stop_on_interrupt(stop, || rank.run())?
        .with_context(|| format!("rank {} on {}", args.rank, args.iface))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", table(&summary));
    }
    Ok(())
}

/// The human summary: nccl-tests' line, the steps, the QPs.
fn table(s: &RankSummary) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let timed = s.iterations.iter().filter(|i| !i.warmup).count();
    let _ = writeln!(
        out,
        "# rank {} of {}: {} of {} bytes per rank, {} QP(s) per connection, {} timed iteration(s)",
        s.rank, s.ranks, s.collective, s.size_bytes, s.qps_per_conn, timed
    );
    let _ = writeln!(
        out,
        "#{:>14} {:>12} {:>12} {:>12}",
        "size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)"
    );
    let _ = writeln!(
        out,
        " {:>14} {:>12.1} {:>12.3} {:>12.3}",
        s.size_bytes, s.time_us, s.algbw_gbps, s.busbw_gbps
    );
    let _ = writeln!(
        out,
        "# algbw = size / time; busbw = algbw x {} (nccl-tests: 2(n-1)/n for allreduce, (n-1)/n for alltoall)",
        if s.collective == "allreduce" {
            "2(n-1)/n"
        } else {
            "(n-1)/n"
        }
    );
    let _ = writeln!(
        out,
        "\n{:>6} {:>12} {:>12}",
        "step", "mean (us)", "max (us)"
    );
    for step in &s.steps {
        let _ = writeln!(
            out,
            "{:>6} {:>12.1} {:>12.1}",
            step.step, step.mean_us, step.max_us
        );
    }
    let _ = writeln!(
        out,
        "\n{:>8} {:>6} {:>5} {:>5} {:>12} {:>9} {:>8} {:>6} {:>6} {:>8}",
        "qp", "sport", "dir", "peer", "bytes", "Gb/s", "resent", "naks", "rto", "ooo"
    );
    for q in &s.qps {
        let (resent, naks, timeouts, ooo) = match (q.sent, q.received) {
            (Some(c), _) => (c.resent, c.naks, c.timeouts, 0),
            (_, Some(c)) => (0, c.naks, 0, c.out_of_order),
            _ => (0, 0, 0, 0),
        };
        let _ = writeln!(
            out,
            "{:>#8x} {:>6} {:>5} {:>5} {:>12} {:>9.3} {:>8} {:>6} {:>6} {:>8}",
            q.qpn, q.sport, q.direction, q.peer, q.bytes, q.gbps, resent, naks, timeouts, ooo
        );
    }
    let _ = writeln!(
        out,
        "\ntotal {:.1} us from the first post to the last completion; {} CNPs received",
        s.total_us, s.cnps
    );
    out
}
