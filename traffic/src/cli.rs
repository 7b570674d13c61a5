//! `lossless traffic send|recv`: the command line of the RoCEv2 traffic tool.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::collective_cli::{collective, CollectiveArgs};
use crate::counters::{FrameCounts, Interval, RecvSummary};
use crate::frame_class::FrameClassArgs;
use crate::notify::CnpConfig;
use crate::rate::{FixedRate, RateController};
use crate::receiver::{Receiver, RecvConfig};
use crate::sender::{PfcHonour, SendConfig, SendSummary, Sender};
use crate::stop::stop_on_interrupt;
use crate::transmit::Engine;
use dcqcn::{Dcqcn, DcqcnParams, RateTimeline};
use hostconfig::config::CNP_INTERVAL;
use sysutil::terminal;
use units::{self, parse_duration, parse_rate_bps, parse_run_time as run_time, DurationLimits};
use wire::bth::MASK_24;
use wire::ethernet::Address;

/// Without `--count` or `--duration`, a sender runs this long.
const DEFAULT_SEND_TIME: Duration = Duration::from_secs(10);

/// Without any stop condition, a receiver stops after this long without RoCEv2 frames.
const DEFAULT_IDLE_TIME: Duration = Duration::from_secs(5);

/// `--max-burst-us`: no make-up burst at all, up to one second of lateness.
const MAX_BURST: DurationLimits = DurationLimits::micros(Duration::ZERO, Duration::from_secs(1));

/// RoCEv2 traffic: send paced RoCEv2 frames, or count them per QP.
#[derive(Debug, Subcommand)]
pub enum TrafficCommand {
    /// Send RoCEv2 frames over one or more QPs at a rate.
    Send(Box<SendArgs>),
    /// Count RoCEv2 frames per QP: packets, bytes, ECN, PSN gaps, reordering, goodput.
    Recv(RecvArgs),
    /// Run one rank of a collective (ring AllReduce, all-to-all) over RC SENDs, each step
    /// waiting for the data it depends on; nccl-tests' algorithm and bus bandwidth.
    Collective(Box<CollectiveArgs>),
}

/// Options of `traffic send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Interface to send on.
    #[arg(long)]
    pub iface: String,
    /// Destination IP address.
    #[arg(long)]
    pub dst_ip: IpAddr,
    /// Source IP address [default: the interface's].
    #[arg(long)]
    pub src_ip: Option<IpAddr>,
    /// Destination MAC address [default: from the neighbour table].
    #[arg(long, value_parser = parse_mac)]
    pub dst_mac: Option<Address>,
    /// Total rate on the wire over all QPs, e.g. 1gbit, 500mbit, 10g.
    #[arg(long, default_value = "1gbit", value_parser = parse_rate_bps)]
    pub rate: u64,
    /// Frame size in bytes without FCS (headers, payload, ICRC).
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Stop after this many frames (at least 1).
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Stop after this many seconds (1 ms to 1 day; units ms, s, m, h accepted) [default: 10
    /// without --count].
    #[arg(long, value_parser = run_time)]
    pub duration: Option<Duration>,
    /// Number of QPs, sent round-robin, each with its own UDP source port.
    #[arg(long, default_value_t = 1)]
    pub qps: u32,
    /// Destination QP number of the first QP.
    #[arg(long, default_value_t = 256)]
    pub qp_base: u32,
    /// UDP source port of the first QP.
    #[arg(long, default_value_t = 49152)]
    pub sport_base: u16,
    /// Consecutive QPs that share one UDP source port, as the QPs of one connection do (a
    /// hash without the destination QP cannot tell them apart; E-ECMP can).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub qps_per_port: u32,
    /// The frames' class.
    #[command(flatten)]
    pub class: FrameClassArgs,
    /// Lateness (microseconds) a QP makes up with a burst after the sender was
    /// descheduled; beyond it, time is lost and the achieved rate drops.
    #[arg(long, default_value = "1000", value_parser = |s: &str| parse_duration(s, &MAX_BURST))]
    pub max_burst_us: Duration,
    /// Send regardless of PFC pauses of the frames' priority (by default a sender on an
    /// interface attached with `lossless host attach` holds its frames while paused).
    #[arg(long)]
    pub ignore_pfc: bool,
    /// Run DCQCN's reaction point per QP, starting at the QP's share of --rate (the most it
    /// sends); without it every QP sends at its fixed share.
    #[arg(long)]
    pub dcqcn: bool,
    /// DCQCN gain g of the alpha average [default: 1/256 = 0.00390625].
    #[arg(long, requires = "dcqcn")]
    pub dcqcn_g: Option<f64>,
    /// DCQCN additive increase step R_AI, a rate [default: 5mbit].
    #[arg(long, requires = "dcqcn", value_parser = parse_rate_bps)]
    pub dcqcn_rai: Option<u64>,
    /// DCQCN hyper increase step R_HAI, a rate [default: 50mbit].
    #[arg(long, requires = "dcqcn", value_parser = parse_rate_bps)]
    pub dcqcn_rhai: Option<u64>,
    /// DCQCN minimum rate: no CNP cuts below it [default: 100mbit].
    #[arg(long, requires = "dcqcn", value_parser = parse_rate_bps)]
    pub dcqcn_min_rate: Option<u64>,
    /// DCQCN byte counter B in bytes: a rate increase every B bytes [default: 10000000].
    #[arg(long, requires = "dcqcn")]
    pub dcqcn_byte_counter: Option<u64>,
    /// DCQCN rate-increase timer T in microseconds (1 µs to 1 s) [default: 55].
    #[arg(long, requires = "dcqcn", value_parser = |s: &str| parse_duration(s, &units::DCQCN_TIMERS))]
    pub dcqcn_timer_us: Option<Duration>,
    /// DCQCN alpha update period K in microseconds (1 µs to 1 s) [default: 55].
    #[arg(long, requires = "dcqcn", value_parser = |s: &str| parse_duration(s, &units::DCQCN_TIMERS))]
    pub dcqcn_alpha_us: Option<Duration>,
    /// DCQCN fast recovery steps F [default: 5].
    #[arg(long, requires = "dcqcn")]
    pub dcqcn_fast_recovery: Option<u32>,
    /// DCQCN alpha before the first CNP [default: 1].
    #[arg(long, requires = "dcqcn")]
    pub dcqcn_initial_alpha: Option<f64>,
    /// Write each QP's DCQCN rate timeline to this file: CSV if it ends in .csv, JSON if in .json.
    #[arg(long, requires = "dcqcn")]
    pub rate_log: Option<PathBuf>,
    /// The socket the frames leave by: af-packet (sendmmsg) or afxdp (AF_XDP, batched on a
    /// ring, zero-copy where the driver offers it; falls back to af-packet, saying why,
    /// where AF_XDP cannot be had).
    #[arg(long, value_enum, default_value = "af-packet")]
    pub engine: Engine,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

impl SendArgs {
    /// The DCQCN parameters: each flag given, else the default.
    pub fn dcqcn_params(&self) -> DcqcnParams {
        let d = DcqcnParams::default();
        DcqcnParams {
            g: self.dcqcn_g.unwrap_or(d.g),
            alpha_period: self.dcqcn_alpha_us.unwrap_or(d.alpha_period),
            increase_period: self.dcqcn_timer_us.unwrap_or(d.increase_period),
            byte_counter_bytes: self.dcqcn_byte_counter.unwrap_or(d.byte_counter_bytes),
            fast_recovery_steps: self.dcqcn_fast_recovery.unwrap_or(d.fast_recovery_steps),
            rate_ai_bps: self.dcqcn_rai.unwrap_or(d.rate_ai_bps),
            rate_hai_bps: self.dcqcn_rhai.unwrap_or(d.rate_hai_bps),
            min_rate_bps: self.dcqcn_min_rate.unwrap_or(d.min_rate_bps),
            initial_alpha: self.dcqcn_initial_alpha.unwrap_or(d.initial_alpha),
        }
    }
}

/// Options of `traffic recv`.
#[derive(Debug, Args)]
pub struct RecvArgs {
    /// Interface to listen on.
    #[arg(long)]
    pub iface: String,
    /// Stop after this many seconds (1 ms to 1 day; units ms, s, m, h accepted).
    #[arg(long, value_parser = run_time)]
    pub duration: Option<Duration>,
    /// Stop after this many RoCEv2 frames (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Stop after this many seconds without RoCEv2 frames (1 ms to 1 day) [default: 5 without
    /// --duration or --count].
    #[arg(long, value_parser = run_time)]
    pub idle_timeout: Option<Duration>,
    /// Every this many seconds (1 ms to 1 day), report each QP's goodput, CE marks and CNPs
    /// of the interval (live lines; with --json, an `intervals` array).
    #[arg(long, value_parser = run_time)]
    pub interval: Option<Duration>,
    /// Answer each CE-marked RoCEv2 data frame with a CNP to its sender (a user-space
    /// notification point), at most one per QP per --cnp-interval-us.
    #[arg(long)]
    pub cnp: bool,
    /// Least time between two CNPs of one QP, in microseconds (0 to 60 s).
    #[arg(long, default_value = "50", requires = "cnp", value_parser = |s: &str| parse_duration(s, &CNP_INTERVAL))]
    pub cnp_interval_us: Duration,
    /// DSCP of the CNPs.
    #[arg(long, default_value_t = 48, requires = "cnp", value_parser = clap::value_parser!(u8).range(0..=63))]
    pub cnp_dscp: u8,
    /// DestQP of the CNPs by data QP: RX_QP=TX_QP,... (other QPs: the data frame's DestQP).
    #[arg(long, requires = "cnp", value_parser = parse_qp_map)]
    pub qp_map: Option<BTreeMap<u32, u32>>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Parses a MAC address for clap.
fn parse_mac(text: &str) -> anyhow::Result<Address> {
    text.parse()
        .with_context(|| format!("'{text}' is not a MAC address (e.g. 02:00:00:00:00:01)"))
}

/// Parses `RX_QP=TX_QP,...` (decimal or 0x hexadecimal QP numbers) for clap.
fn parse_qp_map(text: &str) -> anyhow::Result<BTreeMap<u32, u32>> {
    let qp = |s: &str| -> anyhow::Result<u32> {
        let s = s.trim();
        let n = match s.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => s.parse(),
        }
        .with_context(|| format!("'{s}' is not a QP number"))?;
        if n > MASK_24 {
            bail!("QP {n} does not fit in 24 bits");
        }
        Ok(n)
    };
    text.split(',')
        .map(|pair| {
            let (rx, tx) = pair
                .split_once('=')
                .with_context(|| format!("'{pair}' is not RX_QP=TX_QP"))?;
            Ok((qp(rx)?, qp(tx)?))
        })
        .collect()
}

/// Runs `lossless traffic send|recv`; Ctrl-C ends either early with its summary.
pub fn run(cmd: TrafficCommand) -> anyhow::Result<()> {
    match cmd {
        TrafficCommand::Send(args) => send(*args),
        TrafficCommand::Recv(args) => recv(args),
        TrafficCommand::Collective(args) => collective(*args),
    }
}

fn send(args: SendArgs) -> anyhow::Result<()> {
    let duration = match args.count {
        Some(_) => None,
        None => Some(args.duration.unwrap_or(DEFAULT_SEND_TIME)),
    };
    if let Some(path) = &args.rate_log {
        LogFormat::of(path)?;
    }
    let config = SendConfig {
        src_ip: args.src_ip,
        dst_mac: args.dst_mac,
        size: args.size,
        count: args.count,
        duration,
        qps: args.qps,
        qp_base: args.qp_base,
        sport_base: args.sport_base,
        qps_per_port: args.qps_per_port,
        dscp: args.class.dscp,
        pcp: args.class.pcp,
        ecn: args.class.ecn.into(),
        max_burst: args.max_burst_us,
        honour_pfc: !args.ignore_pfc,
        engine: args.engine,
        ..SendConfig::new(&args.iface, args.dst_ip)
    };
    let mut sender =
        Sender::open(config).with_context(|| format!("preparing to send on {}", args.iface))?;
    if let Some(reason) = sender.engine_fallback() {
        eprintln!("lossless: sending with AF_PACKET: {reason}");
    }
    let progress = default_run_progress(&args, terminal::redraws(&std::io::stderr()));
    let shares = FixedRate::split(args.rate, sender.frames().len());
    let summary = if args.dcqcn {
        let params = args.dcqcn_params();
        let mut rates = shares
            .iter()
            .zip(sender.frames())
            .map(|(share, frame)| Ok(Dcqcn::new(share.bps, params)?.record(frame.bth.dest_qp)))
            .collect::<anyhow::Result<Vec<Dcqcn>>>()
            .context("--dcqcn")?;
        let summary = run_sender(&mut sender, &mut rates, &args.iface)?;
        if let Some(path) = &args.rate_log {
            write_rate_log(path, rates.iter().filter_map(Dcqcn::timeline))?;
        }
        summary
    } else {
        run_sender(&mut sender, &mut shares.clone(), &args.iface)?
    };
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", send_table(&summary));
    }
    Ok(())
}

/// A progress bar for a run the user gave no end (the default duration), on a terminal only:
/// the time gone of the run's seconds, moved on by a thread until the bar is finished.
/// `on_terminal` says whether stderr, where the bar goes, is a terminal.
fn default_run_progress(args: &SendArgs, on_terminal: bool) -> Option<ProgressBar> {
    if args.count.is_some() || args.duration.is_some() || !on_terminal {
        return None;
    }
    let total = DEFAULT_SEND_TIME;
    let bar = ProgressBar::new(total.as_millis() as u64).with_style(
        ProgressStyle::with_template(
            "sending on {prefix} for {len} ms, the default (--duration, --count or Ctrl-C end it) [{bar:30}] {pos} ms",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(args.iface.clone());
    let ticking = bar.clone();
    let started = Instant::now();
    std::thread::spawn(move || {
        while !ticking.is_finished() {
            ticking.set_position(started.elapsed().min(total).as_millis() as u64);
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    Some(bar)
}

/// Runs `sender` with `rates` until it ends or Ctrl-C.
fn run_sender<R: RateController>(
    sender: &mut Sender,
    rates: &mut [R],
    iface: &str,
) -> anyhow::Result<SendSummary> {
    let stop = sender.stop_flag();
    stop_on_interrupt(stop, || sender.run(rates))?.with_context(|| format!("sending on {iface}"))
}

/// The format of a rate log, from its file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    Csv,
    Json,
}

impl LogFormat {
    fn of(path: &Path) -> anyhow::Result<LogFormat> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => Ok(LogFormat::Csv),
            Some("json") => Ok(LogFormat::Json),
            _ => bail!(
                "--rate-log {}: the name must end in .csv or .json",
                path.display()
            ),
        }
    }
}

/// Writes the rate timelines to `path`, as CSV or JSON by its extension.
fn write_rate_log<'a>(
    path: &Path,
    timelines: impl IntoIterator<Item = &'a RateTimeline>,
) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    match LogFormat::of(path)? {
        LogFormat::Csv => RateTimeline::write_csv(timelines, &mut out),
        LogFormat::Json => RateTimeline::write_json(timelines, &mut out),
    }
    .and_then(|()| out.flush())
    .with_context(|| format!("writing {}", path.display()))
}

fn recv(args: RecvArgs) -> anyhow::Result<()> {
    let mut idle = args.idle_timeout;
    if idle.is_none() && args.duration.is_none() && args.count.is_none() {
        idle = Some(DEFAULT_IDLE_TIME);
    }
    let config = RecvConfig {
        iface: args.iface.clone(),
        duration: args.duration,
        count: args.count,
        idle_timeout: idle,
        cnp: args.cnp.then(|| CnpConfig {
            interval: args.cnp_interval_us,
            dscp: args.cnp_dscp,
            qp_map: args.qp_map.clone().unwrap_or_default(),
        }),
    };
    let mut receiver = Receiver::open(config)
        .with_context(|| format!("preparing to receive on {}", args.iface))?;
    let interval = args.interval;
    let live = !args.json;
    let stop = receiver.stop_flag();
    let summary = stop_on_interrupt(stop, || match interval {
        Some(every) => receiver.run_every(every, |report| {
            if live {
                println!("{}", interval_line(report));
            }
        }),
        None => receiver.run(),
    })?
    .with_context(|| format!("receiving on {}", args.iface))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", recv_table(&summary));
    }
    Ok(())
}

/// A rate in bits per second with a unit, e.g. `943.21 Mbit/s`.
fn human_rate(bps: f64) -> String {
    let (value, unit) = match bps {
        b if b >= 1e9 => (b / 1e9, "Gbit/s"),
        b if b >= 1e6 => (b / 1e6, "Mbit/s"),
        b if b >= 1e3 => (b / 1e3, "kbit/s"),
        b => (b, "bit/s"),
    };
    format!("{value:.2} {unit}")
}

/// The sender's summary as text.
fn send_table(s: &SendSummary) -> String {
    let mut out = format!(
        "sent {} frames of {} bytes ({} bytes) in {:.3} s on {} ({}): {} on the wire, {:.0} frames/s\n\
         {} {} -> {} {}{}; {} send retries, {} stalls (sender fell behind its schedule)\n\
         {} CNPs received ({} for no QP of this sender); {}\n",
        s.packets,
        s.frame_len,
        s.bytes,
        s.duration_s,
        s.iface,
        s.engine,
        human_rate(s.wire_rate_bps),
        s.pps,
        s.src_ip,
        s.src_mac,
        s.dst_ip,
        s.dst_mac,
        s.gateway
            .map(|gw| format!(" (via gateway {gw})"))
            .unwrap_or_default(),
        s.retries,
        s.stalls,
        s.cnp_received,
        s.cnp_unmatched,
        pfc_clause(s)
    );
    out += &format!(
        "{:>8} {:>6} {:>12} {:>9} {:>8}\n",
        "QP", "SPORT", "PACKETS", "NEXT_PSN", "CNPS"
    );
    for qp in &s.qps {
        out += &format!(
            "{:>8} {:>6} {:>12} {:>9} {:>8}\n",
            qp.qp, qp.sport, qp.packets, qp.next_psn, qp.cnp_received
        );
    }
    out
}

/// What the sender did about PFC, in a few words: the pause figures when it honoured them,
/// and otherwise the one reason it could not.
fn pfc_clause(s: &SendSummary) -> String {
    match s.pfc {
        PfcHonour::Honoured => format!(
            "PFC priority {}: honoured, paused {:.3} ms, {} frames held",
            s.pfc_priority,
            s.pfc_paused_ns as f64 / 1e6,
            s.pfc_holds
        ),
        PfcHonour::Ignored => format!("PFC priority {}: ignored (--ignore-pfc)", s.pfc_priority),
        PfcHonour::NotAttached => format!("PFC: no pauses to honour ({} not attached)", s.iface),
    }
}

/// One interval report as a line: time, then each QP's goodput, CE and CNPs.
fn interval_line(report: &Interval) -> String {
    let mut line = format!("{:>8.3} s", report.t_s);
    for q in &report.qps {
        line += &format!(
            "  qp {} {} ce {} cnp {}",
            q.qp,
            human_rate(q.goodput_bps),
            q.ce,
            q.cnps
        );
    }
    line
}

/// One line of the receiver's table.
fn recv_row(c: [&dyn std::fmt::Display; 10]) -> String {
    format!(
        "{:>8} {:>15} {:>12} {:>14} {:>10} {:>10} {:>9} {:>9} {:>7} {:>15}\n",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]
    )
}

/// The receiver's summary as a per-QP table.
fn recv_table(s: &RecvSummary) -> String {
    let mut out = recv_row([
        &"QP",
        &"SRC",
        &"PACKETS",
        &"BYTES",
        &"CE",
        &"ECT",
        &"PSN_GAPS",
        &"REORDERED",
        &"CNPS",
        &"GOODPUT",
    ]);
    let row = |qp: &dyn std::fmt::Display,
               src: &dyn std::fmt::Display,
               f: &FrameCounts,
               goodput_bps: f64| {
        recv_row([
            qp,
            src,
            &f.packets,
            &f.bytes,
            &f.ce,
            &f.ect,
            &f.psn_gaps,
            &f.reordered,
            &f.cnps,
            &human_rate(goodput_bps),
        ])
    };
    for q in &s.qps {
        out += &row(&q.qp, &q.src, &q.frames, q.goodput_bps);
    }
    out += &row(&"total", &"", &s.frames, s.goodput_bps);
    out += &format!(
        "{:.3} s; {} frames with a bad checksum or ICRC, {} other frames ignored\n",
        s.duration_s, s.bad_frames, s.other_frames
    );
    if s.socket_drops > 0 {
        out += &format!(
            "{} frames dropped by this receiver's socket: it fell behind (a busy machine), so \
             they are missing from the counts above though the network delivered them\n",
            s.socket_drops
        );
    }
    if s.frames.cnp_sent + s.frames.cnp_suppressed > 0 {
        out += &format!(
            "CNPs sent {}, CE marks left unanswered by the rate limit {}\n",
            s.frames.cnp_sent, s.frames.cnp_suppressed
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame_class::EcnArg;
    use crate::IntervalQp;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        traffic: TrafficCommand,
    }

    #[test]
    fn send_options() {
        let cli = Cli::try_parse_from([
            "traffic",
            "send",
            "--iface",
            "veth0",
            "--dst-ip",
            "10.0.0.2",
            "--dst-mac",
            "02:00:00:00:00:02",
            "--rate",
            "500mbit",
            "--size",
            "256",
            "--count",
            "1000",
            "--qps",
            "4",
            "--dscp",
            "46",
            "--pcp",
            "3",
            "--ecn",
            "not-ect",
        ])
        .unwrap();
        let TrafficCommand::Send(args) = cli.traffic else {
            panic!("not send")
        };
        assert_eq!(args.rate, 500_000_000);
        assert_eq!(args.dst_mac, Some(Address([2, 0, 0, 0, 0, 2])));
        assert_eq!(
            (
                args.size,
                args.count,
                args.qps,
                args.class.dscp,
                args.class.pcp
            ),
            (256, Some(1000), 4, 46, Some(3))
        );
        assert_eq!(args.class.ecn, EcnArg::NotEct);
        assert_eq!(send_with(&[]).unwrap().engine, Engine::AfPacket);
        assert_eq!(
            send_with(&["--engine", "afxdp"]).unwrap().engine,
            Engine::Afxdp
        );
        for refused in [
            &["--count", "1", "--duration", "1"][..],
            &["--dscp", "64"],
            &["--dst-mac", "nope"],
            &["--engine", "dpdk"],
        ] {
            assert!(send_with(refused).is_err(), "{refused:?} was accepted");
        }
    }

    /// `traffic send` with the minimal options and `extra`.
    fn send_with(extra: &[&str]) -> Result<SendArgs, clap::Error> {
        let mut args = vec!["traffic", "send", "--iface", "a", "--dst-ip", "10.0.0.2"];
        args.extend_from_slice(extra);
        match Cli::try_parse_from(args)?.traffic {
            TrafficCommand::Send(args) => Ok(*args),
            TrafficCommand::Recv(_) | TrafficCommand::Collective(_) => panic!("not send"),
        }
    }

    #[test]
    fn dcqcn_options() {
        let args = send_with(&["--dcqcn"]).unwrap();
        assert!(args.dcqcn && !args.ignore_pfc);
        assert_eq!(args.dcqcn_params(), DcqcnParams::default());
        let args = send_with(&[
            "--dcqcn",
            "--dcqcn-g",
            "0.5",
            "--dcqcn-rai",
            "10mbit",
            "--dcqcn-rhai",
            "1gbit",
            "--dcqcn-min-rate",
            "1mbit",
            "--dcqcn-byte-counter",
            "1000",
            "--dcqcn-timer-us",
            "7",
            "--dcqcn-alpha-us",
            "9",
            "--dcqcn-fast-recovery",
            "2",
            "--dcqcn-initial-alpha",
            "0.25",
            "--rate-log",
            "r.csv",
            "--ignore-pfc",
            "--ecn",
            "ce",
        ])
        .unwrap();
        assert_eq!(
            args.dcqcn_params(),
            DcqcnParams {
                g: 0.5,
                alpha_period: Duration::from_micros(9),
                increase_period: Duration::from_micros(7),
                byte_counter_bytes: 1000,
                fast_recovery_steps: 2,
                rate_ai_bps: 10_000_000,
                rate_hai_bps: 1_000_000_000,
                min_rate_bps: 1_000_000,
                initial_alpha: 0.25,
            }
        );
        assert!(args.ignore_pfc);
        assert_eq!(args.class.ecn, EcnArg::Ce);
        // DCQCN parameters and the rate log mean nothing without --dcqcn.
        assert!(send_with(&["--dcqcn-g", "0.5"]).is_err());
        assert!(send_with(&["--rate-log", "r.csv"]).is_err());
    }

    #[test]
    fn rate_log_formats() {
        assert_eq!(LogFormat::of(Path::new("a/r.csv")).unwrap(), LogFormat::Csv);
        assert_eq!(LogFormat::of(Path::new("r.json")).unwrap(), LogFormat::Json);
        assert!(LogFormat::of(Path::new("r.txt")).is_err());
        assert!(LogFormat::of(Path::new("r")).is_err());
    }

    #[test]
    fn cnp_options() {
        let cli = Cli::try_parse_from([
            "traffic",
            "recv",
            "--iface",
            "b",
            "--cnp",
            "--cnp-interval-us",
            "100",
            "--cnp-dscp",
            "46",
            "--qp-map",
            "256=0x1001, 257=4098",
        ])
        .unwrap();
        let TrafficCommand::Recv(args) = cli.traffic else {
            panic!("not recv")
        };
        assert!(args.cnp);
        assert_eq!(
            (args.cnp_interval_us, args.cnp_dscp),
            (Duration::from_micros(100), 46)
        );
        assert_eq!(
            args.qp_map,
            Some(BTreeMap::from([(256, 0x1001), (257, 4098)]))
        );
        for bad in ["256", "256=x", "256=0x1000000", ""] {
            assert!(parse_qp_map(bad).is_err(), "{bad:?}");
        }
        // The CNP options need --cnp.
        assert!(
            Cli::try_parse_from(["traffic", "recv", "--iface", "b", "--cnp-dscp", "46"]).is_err()
        );
    }

    #[test]
    fn recv_options() {
        let cli = Cli::try_parse_from([
            "traffic",
            "recv",
            "--iface",
            "veth1",
            "--idle-timeout",
            "0.5",
            "--json",
        ])
        .unwrap();
        let TrafficCommand::Recv(args) = cli.traffic else {
            panic!("not recv")
        };
        assert_eq!(
            (args.idle_timeout, args.json, args.duration),
            (Some(Duration::from_millis(500)), true, None)
        );
    }

    #[test]
    fn progress_only_for_the_default_run_on_a_terminal() {
        let send = |extra: &[&str]| {
            let base = ["traffic", "send", "--iface", "a", "--dst-ip", "10.0.0.2"];
            let cli = Cli::try_parse_from(base.iter().chain(extra)).unwrap();
            let TrafficCommand::Send(args) = cli.traffic else {
                panic!("not send")
            };
            args
        };
        assert!(default_run_progress(&send(&[]), false).is_none());
        let bar = default_run_progress(&send(&[]), true).expect("a bar");
        assert_eq!(bar.length(), Some(10_000));
        bar.finish_and_clear();
        assert!(default_run_progress(&send(&["--count", "5"]), true).is_none());
        assert!(default_run_progress(&send(&["--duration", "1"]), true).is_none());
    }

    #[test]
    fn receiver_table() {
        let summary = RecvSummary {
            duration_s: 1.0,
            frames: FrameCounts {
                packets: 2,
                bytes: 2048,
                ce: 1,
                ect: 1,
                ..FrameCounts::default()
            },
            goodput_bps: 8e6,
            bad_frames: 0,
            other_frames: 0,
            socket_drops: 0,
            qps: vec![],
            intervals: vec![],
            started: std::time::Instant::now(),
        };
        let table = recv_table(&summary);
        assert!(table.starts_with("      QP             SRC"), "{table}");
        assert!(table.contains("   total "), "{table}");
        assert!(table.contains("8.00 Mbit/s"), "{table}");
    }

    #[test]
    fn sender_summary_says_the_gateway_and_pfc_once() {
        let mut summary = SendSummary {
            iface: "tx0".into(),
            src_mac: "02:00:00:00:00:01".into(),
            dst_mac: "02:00:00:00:00:fe".into(),
            src_ip: "10.0.1.2".parse().unwrap(),
            dst_ip: "10.0.2.2".parse().unwrap(),
            gateway: Some("10.0.1.1".parse().unwrap()),
            frame_len: 1024,
            packets: 10,
            bytes: 10240,
            duration_s: 1.0,
            wire_rate_bps: 83_000.0,
            pps: 10.0,
            retries: 0,
            stalls: 0,
            cnp_received: 0,
            cnp_unmatched: 0,
            pfc_priority: 3,
            pfc_honoured: false,
            pfc: PfcHonour::NotAttached,
            pfc_paused_ns: 0,
            pfc_holds: 0,
            engine: "af-packet".into(),
            engine_fallback: None,
            qps: vec![],
            started: std::time::Instant::now(),
            started_monotonic_ns: 0,
        };
        let text = send_table(&summary);
        assert!(text.contains("on tx0 (af-packet):"), "{text}");
        assert!(
            text.contains("10.0.2.2 02:00:00:00:00:fe (via gateway 10.0.1.1);"),
            "{text}"
        );
        assert!(
            text.contains("; PFC: no pauses to honour (tx0 not attached)\n"),
            "{text}"
        );
        assert!(!text.contains("--ignore-pfc"), "{text}");
        summary.gateway = None;
        summary.pfc = PfcHonour::Ignored;
        let text = send_table(&summary);
        assert!(text.contains("02:00:00:00:00:fe; 0 send retries"), "{text}");
        assert!(
            text.contains("PFC priority 3: ignored (--ignore-pfc)"),
            "{text}"
        );
        summary.pfc = PfcHonour::Honoured;
        summary.pfc_paused_ns = 1_500_000;
        summary.pfc_holds = 7;
        let text = send_table(&summary);
        assert!(
            text.contains("PFC priority 3: honoured, paused 1.500 ms, 7 frames held"),
            "{text}"
        );
    }

    #[test]
    fn interval_lines() {
        let report = Interval {
            t_s: 1.5,
            qps: vec![IntervalQp {
                qp: 256,
                src: "10.0.0.1".parse().unwrap(),
                packets: 10,
                ce: 2,
                cnps: 1,
                goodput_bps: 2e6,
            }],
        };
        assert_eq!(
            interval_line(&report),
            "   1.500 s  qp 256 2.00 Mbit/s ce 2 cnp 1"
        );
    }

    #[test]
    fn rates_read_well() {
        assert_eq!(human_rate(943_210_000.0), "943.21 Mbit/s");
        assert_eq!(human_rate(25e9), "25.00 Gbit/s");
        assert_eq!(human_rate(0.0), "0.00 bit/s");
    }
}
