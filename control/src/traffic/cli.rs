//! `lossless traffic send|recv`: the command line of the RoCEv2 traffic tool.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand, ValueEnum};

use super::counters::{Interval, RecvSummary};
use super::rate::FixedRate;
use super::receiver::{Receiver, RecvConfig};
use super::sender::{SendConfig, SendSummary, Sender};
use super::stop::StopFlag;
use crate::units::parse_rate_bps;
use crate::wire::ethernet::Address;
use crate::wire::ip::Ecn;

/// Without `--count` or `--duration`, a sender runs this long.
const DEFAULT_SEND_SECS: f64 = 10.0;

/// Without any stop condition, a receiver stops after this long without RoCEv2 frames.
const DEFAULT_IDLE_SECS: f64 = 5.0;

/// RoCEv2 traffic: send paced RoCEv2 frames, or count them per QP.
#[derive(Debug, Subcommand)]
pub enum TrafficCommand {
    /// Send RoCEv2 frames over one or more QPs at a rate.
    Send(SendArgs),
    /// Count RoCEv2 frames per QP: packets, bytes, ECN, PSN gaps, reordering, goodput.
    Recv(RecvArgs),
}

/// The ECN codepoint of sent frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EcnArg {
    /// ECT(0).
    Ect0,
    /// ECT(1).
    Ect1,
    /// Not ECN-capable.
    NotEct,
}

impl From<EcnArg> for Ecn {
    fn from(arg: EcnArg) -> Ecn {
        match arg {
            EcnArg::Ect0 => Ecn::Ect0,
            EcnArg::Ect1 => Ecn::Ect1,
            EcnArg::NotEct => Ecn::NotEct,
        }
    }
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
    /// Stop after this many frames.
    #[arg(long, conflicts_with = "duration")]
    pub count: Option<u64>,
    /// Stop after this many seconds [default: 10 without --count].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Number of QPs, sent round-robin, each with its own UDP source port.
    #[arg(long, default_value_t = 1)]
    pub qps: u32,
    /// Destination QP number of the first QP.
    #[arg(long, default_value_t = 256)]
    pub qp_base: u32,
    /// UDP source port of the first QP.
    #[arg(long, default_value_t = 49152)]
    pub sport_base: u16,
    /// DSCP of the frames.
    #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: u8,
    /// 802.1p priority: adds an 802.1Q tag (VLAN 0) with this PCP.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub pcp: Option<u8>,
    /// ECN codepoint of the frames.
    #[arg(long, value_enum, default_value = "ect0")]
    pub ecn: EcnArg,
    /// Lateness (microseconds) a QP makes up with a burst after the sender was
    /// descheduled; beyond it, time is lost and the achieved rate drops.
    #[arg(long, default_value_t = 1000)]
    pub max_burst_us: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options of `traffic recv`.
#[derive(Debug, Args)]
pub struct RecvArgs {
    /// Interface to listen on.
    #[arg(long)]
    pub iface: String,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many RoCEv2 frames.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds without RoCEv2 frames [default: 5 without --duration or --count].
    #[arg(long)]
    pub idle_timeout: Option<f64>,
    /// Every this many seconds, report each QP's goodput, CE marks and CNPs
    /// of the interval (live lines; with --json, an `intervals` array).
    #[arg(long)]
    pub interval: Option<f64>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Parses a MAC address for clap.
fn parse_mac(text: &str) -> anyhow::Result<Address> {
    text.parse()
        .with_context(|| format!("'{text}' is not a MAC address (e.g. 02:00:00:00:00:01)"))
}

/// Seconds from the command line as a duration.
fn seconds(option: &str, secs: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(secs)
        .with_context(|| format!("--{option} {secs} is not a number of seconds"))
}

/// Set by SIGINT and SIGTERM while a traffic command runs.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// How often an interrupt is looked for.
const INTERRUPT_POLL: Duration = Duration::from_millis(20);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Runs `work` with SIGINT and SIGTERM turned into a stop request on `flag`
/// (so the command ends early with its summary); the previous handlers come back after.
fn stop_on_interrupt<T>(flag: StopFlag, work: impl FnOnce() -> T) -> anyhow::Result<T> {
    INTERRUPTED.store(false, Ordering::Relaxed);
    let mut previous = Vec::new();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        let old = unsafe { libc::signal(signal, on_interrupt as *const () as libc::sighandler_t) };
        if old == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error()).context("installing the Ctrl-C handler");
        }
        previous.push((signal, old));
    }
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if INTERRUPTED.load(Ordering::Relaxed) {
                    flag.stop();
                    return;
                }
                std::thread::sleep(INTERRUPT_POLL);
            }
        });
        let result = work();
        done.store(true, Ordering::Relaxed);
        result
    });
    for (signal, old) in previous {
        // SAFETY: puts back the handler that was there before.
        unsafe { libc::signal(signal, old) };
    }
    Ok(result)
}

/// Runs `lossless traffic send|recv`; Ctrl-C ends either early with its summary.
pub fn run(cmd: TrafficCommand) -> anyhow::Result<()> {
    match cmd {
        TrafficCommand::Send(args) => send(args),
        TrafficCommand::Recv(args) => recv(args),
    }
}

fn send(args: SendArgs) -> anyhow::Result<()> {
    let duration = match (args.count, args.duration) {
        (Some(_), _) => None,
        (None, secs) => Some(seconds("duration", secs.unwrap_or(DEFAULT_SEND_SECS))?),
    };
    let config = SendConfig {
        src_ip: args.src_ip,
        dst_mac: args.dst_mac,
        size: args.size,
        count: args.count,
        duration,
        qps: args.qps,
        qp_base: args.qp_base,
        sport_base: args.sport_base,
        dscp: args.dscp,
        pcp: args.pcp,
        ecn: args.ecn.into(),
        max_burst: Duration::from_micros(args.max_burst_us),
        ..SendConfig::new(&args.iface, args.dst_ip)
    };
    let mut sender =
        Sender::open(config).with_context(|| format!("preparing to send on {}", args.iface))?;
    let mut rates = FixedRate::split(args.rate, sender.frames().len());
    let summary = stop_on_interrupt(sender.stop_flag(), || sender.run(&mut rates))?
        .with_context(|| format!("sending on {}", args.iface))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", send_table(&summary));
    }
    Ok(())
}

fn recv(args: RecvArgs) -> anyhow::Result<()> {
    let mut idle = args.idle_timeout;
    if idle.is_none() && args.duration.is_none() && args.count.is_none() {
        idle = Some(DEFAULT_IDLE_SECS);
    }
    let config = RecvConfig {
        iface: args.iface.clone(),
        duration: args.duration.map(|s| seconds("duration", s)).transpose()?,
        count: args.count,
        idle_timeout: idle.map(|s| seconds("idle-timeout", s)).transpose()?,
    };
    if config.count == Some(0) {
        bail!("--count 0 would stop before the first frame");
    }
    let mut receiver = Receiver::open(config)
        .with_context(|| format!("preparing to receive on {}", args.iface))?;
    let interval = args.interval.map(|s| seconds("interval", s)).transpose()?;
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
        "sent {} frames of {} bytes ({} bytes) in {:.3} s on {}: {} on the wire, {:.0} frames/s\n\
         {} {} -> {} {}; {} send retries, {} stalls (sender fell behind its schedule)\n",
        s.packets,
        s.frame_len,
        s.bytes,
        s.duration_s,
        s.iface,
        human_rate(s.wire_rate_bps),
        s.pps,
        s.src_ip,
        s.src_mac,
        s.dst_ip,
        s.dst_mac,
        s.retries,
        s.stalls
    );
    out += &format!(
        "{:>8} {:>6} {:>12} {:>9}\n",
        "QP", "SPORT", "PACKETS", "NEXT_PSN"
    );
    for qp in &s.qps {
        out += &format!(
            "{:>8} {:>6} {:>12} {:>9}\n",
            qp.qp, qp.sport, qp.packets, qp.next_psn
        );
    }
    out
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
    for q in &s.qps {
        let goodput = human_rate(q.goodput_bps);
        out += &recv_row([
            &q.qp,
            &q.src,
            &q.packets,
            &q.bytes,
            &q.ce,
            &q.ect,
            &q.psn_gaps,
            &q.reordered,
            &q.cnps,
            &goodput,
        ]);
    }
    let goodput = human_rate(s.goodput_bps);
    out += &recv_row([
        &"total",
        &"",
        &s.packets,
        &s.bytes,
        &s.ce,
        &s.ect,
        &s.psn_gaps,
        &s.reordered,
        &s.cnps,
        &goodput,
    ]);
    out += &format!(
        "{:.3} s; {} frames with a bad checksum or ICRC, {} other frames ignored\n",
        s.duration_s, s.bad_frames, s.other_frames
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::IntervalQp;
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
            (args.size, args.count, args.qps, args.dscp, args.pcp),
            (256, Some(1000), 4, 46, Some(3))
        );
        assert_eq!(args.ecn, EcnArg::NotEct);
        assert!(Cli::try_parse_from([
            "traffic",
            "send",
            "--iface",
            "a",
            "--dst-ip",
            "10.0.0.2",
            "--count",
            "1",
            "--duration",
            "1"
        ])
        .is_err());
        assert!(Cli::try_parse_from([
            "traffic", "send", "--iface", "a", "--dst-ip", "10.0.0.2", "--dscp", "64"
        ])
        .is_err());
        assert!(Cli::try_parse_from([
            "traffic",
            "send",
            "--iface",
            "a",
            "--dst-ip",
            "10.0.0.2",
            "--dst-mac",
            "nope"
        ])
        .is_err());
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
            (Some(0.5), true, None)
        );
    }

    #[test]
    fn receiver_table() {
        let summary = RecvSummary {
            duration_s: 1.0,
            packets: 2,
            bytes: 2048,
            ce: 1,
            ect: 1,
            psn_gaps: 0,
            reordered: 0,
            cnps: 0,
            goodput_bps: 8e6,
            bad_frames: 0,
            other_frames: 0,
            qps: vec![],
            intervals: vec![],
        };
        let table = recv_table(&summary);
        assert!(table.starts_with("      QP             SRC"), "{table}");
        assert!(table.contains("   total "), "{table}");
        assert!(table.contains("8.00 Mbit/s"), "{table}");
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
