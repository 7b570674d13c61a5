//! The incast lab (`lossless lab incast`): N senders, each in its own namespace, send through a
//! forwarding namespace to one receiver. The receiver's interface runs XDP ECN marking (the
//! phantom queue of the shared link, drained below the senders' summed line rates) and the
//! kernel CNP fast path, so every mark earns a CNP from the kernel; the CNPs travel back through
//! the forwarding namespace to the senders, whose DCQCN reaction points (one per QP) cut and
//! recover. Prints a live table; writes the per-QP rate timelines (SVG plot, CSV, JSON) and a
//! summary that shows whether the rates converged to the fair share.

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use dataplane_common::Hook;
use serde::Serialize;

use super::harness::{self, jain_index, Bed, LabPorts, Port, Ran, Sending, Shape, PRIORITY};
use crate::output::{self, Line, Panel};
use dcqcn::{Dcqcn, DcqcnParams, RateEvent, RateTimeline};
use host::pinned_maps::PinnedMaps;
use hostconfig::{
    attachment::Attachment,
    config::{HostConfig, Setting, CNP_INTERVAL},
};
use traffic::{RateController, RecvSummary, SendSummary, StopFlag};
use units::{
    self, parse_duration, parse_rate_bps, parse_run_time, DurationLimits, TimeUnit, ONE_DAY,
};

/// `--stagger`: 0 (every sender starts at once) to one day.
const STAGGER: DurationLimits = DurationLimits {
    unit: TimeUnit::Seconds,
    min: Duration::ZERO,
    max: ONE_DAY,
};

/// How often the live table gets a row.
const TICK: Duration = Duration::from_millis(500);

/// The window at the end of the run over which convergence is judged.
const LAST: Duration = Duration::from_secs(1);

/// QP numbers of sender `i` (from 0) start at `(i + 1) * QP_STRIDE`, so a QP names its sender.
const QP_STRIDE: u32 = 256;

/// Points per QP in the plot (the timelines are sampled, the CSV and JSON keep every point).
const PLOT_POINTS: u32 = 2000;

/// Options of `lossless lab incast`.
#[derive(Debug, clap::Args)]
pub struct IncastLab {
    /// Number of senders, each in its own namespace.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=16))]
    senders: u32,
    /// QPs per sender, each with its own DCQCN reaction point.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    qps: u32,
    /// Line rate of each sender (split over its QPs): where DCQCN starts and its ceiling.
    #[arg(long, default_value = "200mbit", value_parser = parse_rate_bps)]
    line_rate: u64,
    /// Drain rate of the shared bottleneck's phantom queue (below the summed line rates).
    #[arg(long, default_value = "200mbit", value_parser = parse_rate_bps)]
    drain: u64,
    /// Seconds the lab runs (1 ms to 1 day): the first sender sends from start to end.
    #[arg(long, default_value = "10", value_parser = parse_run_time)]
    secs: Duration,
    /// Seconds between the starts of consecutive senders (0 to 1 day; all end together), so
    /// a newcomer shows how the rates converge from an unfair start.
    #[arg(long, default_value = "1", value_parser = |s: &str| parse_duration(s, &STAGGER))]
    stagger: Duration,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// RED Kmin in bytes.
    #[arg(long, default_value_t = 10_000)]
    kmin: u32,
    /// RED Kmax in bytes.
    #[arg(long, default_value_t = 100_000)]
    kmax: u32,
    /// RED Pmax.
    #[arg(long, default_value_t = 0.2)]
    pmax: f64,
    /// At most one CNP per QP per this many microseconds (0 to 60 s), from the receiver's
    /// kernel.
    #[arg(long, default_value = "50", value_parser = |s: &str| parse_duration(s, &CNP_INTERVAL))]
    cnp_interval_us: Duration,
    /// DCQCN gain g.
    #[arg(long, default_value_t = 1.0 / 16.0)]
    dcqcn_g: f64,
    /// DCQCN alpha update period, microseconds (1 µs to 1 s).
    #[arg(long, default_value = "1000", value_parser = |s: &str| parse_duration(s, &units::DCQCN_TIMERS))]
    dcqcn_alpha_us: Duration,
    /// DCQCN rate-increase timer, microseconds (1 µs to 1 s).
    #[arg(long, default_value = "1000", value_parser = |s: &str| parse_duration(s, &units::DCQCN_TIMERS))]
    dcqcn_timer_us: Duration,
    /// DCQCN byte counter, bytes.
    #[arg(long, default_value_t = 1_000_000)]
    dcqcn_byte_counter: u64,
    /// DCQCN additive increase step.
    #[arg(long, default_value = "1mbit", value_parser = parse_rate_bps)]
    dcqcn_rai: u64,
    /// DCQCN hyper increase step.
    #[arg(long, default_value = "5mbit", value_parser = parse_rate_bps)]
    dcqcn_rhai: u64,
    /// DCQCN minimum rate.
    #[arg(long, default_value = "1mbit", value_parser = parse_rate_bps)]
    dcqcn_min_rate: u64,
    /// Directory for the plot (rates.svg), the timelines (rates.csv, rates.json) and
    /// summary.json.
    #[arg(long, default_value = "lab-output/incast")]
    out: PathBuf,
}

impl IncastLab {
    /// The reaction-point parameters of every QP.
    fn dcqcn_params(&self) -> DcqcnParams {
        DcqcnParams {
            g: self.dcqcn_g,
            alpha_period: self.dcqcn_alpha_us,
            increase_period: self.dcqcn_timer_us,
            byte_counter_bytes: self.dcqcn_byte_counter,
            rate_ai_bps: self.dcqcn_rai,
            rate_hai_bps: self.dcqcn_rhai,
            min_rate_bps: self.dcqcn_min_rate,
            ..DcqcnParams::default()
        }
    }

    /// When sender `i` (from 0) starts, since the lab's start.
    fn start_of(&self, i: usize) -> Duration {
        self.stagger * i as u32
    }

    /// Each sender's share of the bottleneck when all are fair.
    fn fair_share_bps(&self) -> f64 {
        (self.drain as f64 / f64::from(self.senders)).min(self.line_rate as f64)
    }
}

/// What the live table reads of one QP while its sender runs.
#[derive(Default)]
struct Live {
    rate_bps: AtomicU64,
    sent_bits: AtomicU64,
    cnps: AtomicU64,
}

/// A QP's DCQCN reaction point that publishes its rate, bits sent and CNPs to a [`Live`].
struct Observed {
    dcqcn: Dcqcn,
    live: Arc<Live>,
}

impl RateController for Observed {
    fn rate_bps(&self) -> u64 {
        self.dcqcn.rate_bps()
    }

    fn on_sent(&mut self, now: Duration, wire_bits: u64) {
        self.dcqcn.on_sent(now, wire_bits);
        self.live.sent_bits.fetch_add(wire_bits, Ordering::Relaxed);
        self.live
            .rate_bps
            .store(self.dcqcn.rate_bps(), Ordering::Relaxed);
    }

    fn on_cnp(&mut self, now: Duration) {
        self.dcqcn.on_cnp(now);
        self.live.cnps.fetch_add(1, Ordering::Relaxed);
        self.live
            .rate_bps
            .store(self.dcqcn.rate_bps(), Ordering::Relaxed);
    }
}

/// Sender i is 10.32.(i+1).2 behind the router's 10.32.(i+1).1; the receiver is 10.32.100.2
/// behind 10.32.100.1.
fn shape(senders: u32) -> Shape {
    Shape {
        net: 32,
        sender: "isnd",
        senders,
        router: Some("irtr"),
        receiver: "ircv",
    }
}

/// One row's worth of readings, to difference against the next.
struct Sample {
    at: Instant,
    sent_bits: Vec<u64>,
    ect: u64,
    marked: u64,
}

/// The live readings of every sender's QPs and of the receiver's pinned maps.
struct Monitor<'a> {
    live: &'a [Vec<Arc<Live>>],
    maps: &'a PinnedMaps,
    start: Instant,
}

impl Monitor<'_> {
    fn sample(&self) -> anyhow::Result<Sample> {
        let stats = self.maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
        Ok(Sample {
            at: Instant::now(),
            sent_bits: self
                .live
                .iter()
                .map(|qps| {
                    qps.iter()
                        .map(|q| q.sent_bits.load(Ordering::Relaxed))
                        .sum()
                })
                .collect(),
            ect: stats.ect_packets,
            marked: stats.ecn_marked,
        })
    }

    /// Prints the row for the time since `before`.
    fn row(&self, before: &Sample, now: &Sample) -> anyhow::Result<()> {
        let secs = now.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let mut line = format!("{:>6.1}", self.start.elapsed().as_secs_f64());
        for (i, qps) in self.live.iter().enumerate() {
            let rate: u64 = qps.iter().map(|q| q.rate_bps.load(Ordering::Relaxed)).sum();
            let cnps: u64 = qps.iter().map(|q| q.cnps.load(Ordering::Relaxed)).sum();
            let sent = (now.sent_bits[i] - before.sent_bits[i]) as f64 / secs;
            line += &format!(
                " | {:>9.1} {:>9.1} {:>7}",
                rate as f64 / 1e6,
                sent / 1e6,
                cnps
            );
        }
        let backlog = self.maps.read_queues(Hook::Xdp)?[PRIORITY].backlog_bytes;
        let ect = now.ect - before.ect;
        let marked = if ect == 0 {
            0.0
        } else {
            100.0 * (now.marked - before.marked) as f64 / ect as f64
        };
        let cnp_sent = self.maps.read_cnp_counters()?.cnp_sent;
        line += &format!(" | {backlog:>9} {marked:>8.2} | {cnp_sent:>9}");
        println!("{line}");
        Ok(())
    }
}

/// The live table's header, for `senders` senders.
fn print_header(senders: usize) {
    let mut line = format!("{:>6}", "time_s");
    for i in 1..=senders {
        line += &format!(
            " | {:>9} {:>9} {:>7}",
            format!("s{i}_rate"),
            format!("s{i}_sent"),
            format!("s{i}_cnp")
        );
    }
    line += &format!(" | {:>9} {:>8} | {:>9}", "vq_bytes", "marked_%", "cnp_sent");
    println!("{line}");
    println!(
        "{:>6} | rates in Mb/s (DCQCN rate now, sent in the last row's interval)",
        ""
    );
}

/// One sender's outcome, in summary.json.
#[derive(Debug, Serialize)]
struct SenderOutcome {
    /// 1-based.
    sender: u32,
    qps: Vec<u32>,
    packets: u64,
    cnp_received: u64,
    /// CNP events in its QPs' timelines (rate cuts).
    cuts: usize,
    /// When it started, seconds after the first.
    start_s: f64,
    /// Time-weighted mean of its DCQCN rate (summed over QPs) over the last second.
    last_second_rate_bps: f64,
    /// What it sent over the last second, measured.
    last_second_sent_bps: f64,
    /// Its frames the receiver counted (no drops: as many as it sent).
    received_packets: u64,
}

/// summary.json.
#[derive(Debug, Serialize)]
struct Outcome {
    senders: Vec<SenderOutcome>,
    drain_bps: u64,
    fair_share_bps: f64,
    /// Jain's fairness index of the senders' last-second DCQCN rates.
    jain_index: f64,
    /// Jain's fairness index of what the senders sent in the last second.
    jain_index_sent: f64,
    ect_packets: u64,
    ecn_marked: u64,
    cnp_sent: u64,
    cnp_suppressed: u64,
    stopped_early: bool,
}

/// Runs the lab for `--secs` or until `stop` is set; cleans up either way.
pub fn run(args: &IncastLab, stop: &StopFlag) -> anyhow::Result<()> {
    let last_start = args.stagger * (args.senders - 1);
    if last_start >= args.secs {
        anyhow::bail!(
            "--secs {:?} with --stagger {:?} leaves the last sender no time to send",
            args.secs,
            args.stagger
        );
    }
    let bed = Bed::build(&shape(args.senders)).context("building the namespace test bed")?;
    let mut config = HostConfig::default();
    config.set_all(harness::ecn_marking(
        args.drain, args.kmin, args.kmax, args.pmax,
    ))?;
    config.set(Setting::CnpInterval(args.cnp_interval_us))?;
    let maps = bed.attach(
        Port::Receiver,
        vec![Attachment::Xdp, Attachment::Cnp],
        config,
    )?;

    let params = args.dcqcn_params();
    let per_qp_line = args.line_rate / u64::from(args.qps);
    let mut sendings = Vec::new();
    let mut live = Vec::new();
    for i in 0..bed.senders.len() {
        let mut send = bed.send_config(i);
        send.size = args.size;
        send.qps = args.qps;
        send.qp_base = (i as u32 + 1) * QP_STRIDE;
        send.duration = Some(args.secs - args.start_of(i));
        let sender = bed.open_sender(i, send)?;
        let mut qps = Vec::new();
        let mut observed = Vec::new();
        for frame in sender.frames() {
            let dcqcn = Dcqcn::new(per_qp_line, params)
                .context("DCQCN parameters")?
                .record(frame.bth.dest_qp);
            let shared = Arc::new(Live::default());
            qps.push(shared.clone());
            observed.push(Observed {
                dcqcn,
                live: shared,
            });
        }
        sendings.push(Sending {
            sender,
            rates: observed,
            start: args.start_of(i),
        });
        live.push(qps);
    }
    let receiver = bed.open_receiver()?;

    println!(
        "incast lab: {} senders x {} QP(s) at {} Mb/s each -> router -> {} (XDP ECN, drain {} Mb/s; \
         kernel CNPs every {} us per QP at most) -> receiver; fair share {:.1} Mb/s per sender",
        args.senders,
        args.qps,
        args.line_rate / 1_000_000,
        bed.receiver.ifname,
        args.drain / 1_000_000,
        args.cnp_interval_us.as_micros(),
        args.fair_share_bps() / 1e6
    );
    print_header(live.len());
    let ran = harness::run(sendings, receiver, None, stop, |running| {
        let monitor = Monitor {
            live: &live,
            maps: &maps,
            start: running.start,
        };
        watch(&monitor, stop, &|| running.senders_finished()).map(Some)
    })?;
    let Some(Ran {
        watched: samples,
        sent,
        received,
    }) = ran
    else {
        return Ok(());
    };
    let mut summaries = Vec::new();
    let mut timelines = Vec::new();
    for (i, (summary, rates)) in sent.into_iter().enumerate() {
        summaries.push(summary);
        // On the lab's clock: since the first sender started.
        let offset = u64::try_from(args.start_of(i).as_nanos())?;
        let mut qps: Vec<RateTimeline> = rates
            .iter()
            .filter_map(|r| r.dcqcn.timeline().cloned())
            .collect();
        qps.iter_mut()
            .flat_map(|t| &mut t.points)
            .for_each(|p| p.time_ns += offset);
        timelines.push(qps);
    }
    let outcome = outcome(
        args,
        &maps,
        stop.is_stopped(),
        (&summaries, &timelines),
        &received,
        &samples,
    )?;
    print_outcome(args, &outcome);
    write_outputs(args, &timelines, &outcome)
}

/// Prints a row every [`TICK`] until `finished` or a stop; returns the samples, one per row.
fn watch(
    monitor: &Monitor<'_>,
    stop: &StopFlag,
    finished: &dyn Fn() -> bool,
) -> anyhow::Result<Vec<Sample>> {
    let mut samples = vec![monitor.sample()?];
    let mut next = Instant::now() + TICK;
    while !finished() && !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(20));
        if Instant::now() >= next {
            next += TICK;
            let sample = monitor.sample()?;
            monitor.row(samples.last().expect("a first sample"), &sample)?;
            samples.push(sample);
        }
    }
    samples.push(monitor.sample()?);
    Ok(samples)
}

/// The time-weighted mean of a timeline's rate between `from` and `to` (ns since its start).
fn mean_rate(timeline: &RateTimeline, from: u64, to: u64) -> f64 {
    if to <= from {
        return rate_at(timeline, to) as f64;
    }
    let mut at = from;
    let mut rate = rate_at(timeline, from) as f64;
    let mut area = 0.0;
    for point in timeline
        .points
        .iter()
        .filter(|p| p.time_ns > from && p.time_ns < to)
    {
        area += rate * (point.time_ns - at) as f64;
        at = point.time_ns;
        rate = point.rate_bps as f64;
    }
    area += rate * (to - at) as f64;
    area / (to - from) as f64
}

/// The rate of a timeline at `t`: that of its last point at or before `t`, 0 before its start.
fn rate_at(timeline: &RateTimeline, t: u64) -> u64 {
    match timeline.points.partition_point(|p| p.time_ns <= t) {
        0 => 0,
        after => timeline.points[after - 1].rate_bps,
    }
}

/// What the run did: per sender and at the bottleneck and the receiver.
fn outcome(
    args: &IncastLab,
    maps: &PinnedMaps,
    stopped_early: bool,
    (summaries, timelines): (&[SendSummary], &[Vec<RateTimeline>]),
    received: &RecvSummary,
    samples: &[Sample],
) -> anyhow::Result<Outcome> {
    let end = samples.last().expect("a last sample");
    let window_start = end.at.checked_sub(LAST).unwrap_or(end.at);
    let from = samples
        .iter()
        .rev()
        .find(|s| s.at <= window_start)
        .unwrap_or(&samples[0]);
    let window = end.at.duration_since(from.at).as_secs_f64();
    let mut senders = Vec::new();
    for (i, (summary, qps)) in summaries.iter().zip(timelines).enumerate() {
        let ran = args.start_of(i) + Duration::from_secs_f64(summary.duration_s);
        let to = u64::try_from(ran.as_nanos())?;
        let last_from = to.saturating_sub(u64::try_from(LAST.as_nanos())?);
        let received_packets = received
            .qps
            .iter()
            .filter(|q| q.src == summary.src_ip)
            .map(|q| q.frames.packets)
            .sum();
        senders.push(SenderOutcome {
            sender: i as u32 + 1,
            start_s: args.start_of(i).as_secs_f64(),
            qps: summary.qps.iter().map(|q| q.qp).collect(),
            packets: summary.packets,
            cnp_received: summary.cnp_received,
            cuts: qps
                .iter()
                .flat_map(|t| &t.points)
                .filter(|p| p.event == RateEvent::Cnp)
                .count(),
            last_second_rate_bps: qps.iter().map(|t| mean_rate(t, last_from, to)).sum(),
            last_second_sent_bps: if window > 0.0 {
                (end.sent_bits[i] - from.sent_bits[i]) as f64 / window
            } else {
                0.0
            },
            received_packets,
        });
    }
    let rates: Vec<f64> = senders.iter().map(|s| s.last_second_rate_bps).collect();
    let sent: Vec<f64> = senders.iter().map(|s| s.last_second_sent_bps).collect();
    let cnp = maps.read_cnp_counters()?;
    Ok(Outcome {
        jain_index: jain_index(&rates),
        jain_index_sent: jain_index(&sent),
        senders,
        drain_bps: args.drain,
        fair_share_bps: args.fair_share_bps(),
        ect_packets: end.ect,
        ecn_marked: end.marked,
        cnp_sent: cnp.cnp_sent,
        cnp_suppressed: cnp.cnp_suppressed,
        stopped_early,
    })
}

fn print_outcome(args: &IncastLab, outcome: &Outcome) {
    println!(
        "bottleneck marked {} of {} ECT frames; the receiver's kernel sent {} CNPs ({} suppressed)",
        outcome.ecn_marked, outcome.ect_packets, outcome.cnp_sent, outcome.cnp_suppressed
    );
    println!(
        "{:>6} {:>7} {:>8} {:>6} {:>14} {:>14} {:>9} {:>9} {:>8}",
        "sender",
        "start_s",
        "cnp_rx",
        "cuts",
        "last_1s_Mbps",
        "sent_1s_Mbps",
        "sent",
        "received",
        "vs_fair"
    );
    for s in &outcome.senders {
        println!(
            "{:>6} {:>7.1} {:>8} {:>6} {:>14.1} {:>14.1} {:>9} {:>9} {:>7.2}x",
            s.sender,
            s.start_s,
            s.cnp_received,
            s.cuts,
            s.last_second_rate_bps / 1e6,
            s.last_second_sent_bps / 1e6,
            s.packets,
            s.received_packets,
            s.last_second_rate_bps / outcome.fair_share_bps
        );
    }
    let sum: f64 = outcome.senders.iter().map(|s| s.last_second_rate_bps).sum();
    let sent: f64 = outcome.senders.iter().map(|s| s.last_second_sent_bps).sum();
    println!(
        "fair share {:.1} Mb/s per sender; last second: DCQCN rates sum to {:.1} Mb/s, sent {:.1} \
         Mb/s, against a drain of {} Mb/s; Jain's index {:.3} of the rates, {:.3} of what was \
         sent ({})",
        outcome.fair_share_bps / 1e6,
        sum / 1e6,
        sent / 1e6,
        args.drain / 1_000_000,
        outcome.jain_index,
        outcome.jain_index_sent,
        if outcome.jain_index.min(outcome.jain_index_sent) >= 0.9 {
            "converged"
        } else {
            "not converged"
        }
    );
}

/// Writes rates.svg, rates.csv, rates.json and summary.json into `--out`.
fn write_outputs(
    args: &IncastLab,
    timelines: &[Vec<RateTimeline>],
    outcome: &Outcome,
) -> anyhow::Result<()> {
    let all = || timelines.iter().flatten();
    output::write_file(&args.out, "rates.csv", |f| {
        Ok(RateTimeline::write_csv(all(), f)?)
    })?;
    output::write_file(&args.out, "rates.json", |f| {
        Ok(RateTimeline::write_json(all(), f)?)
    })?;
    output::write_summary(&args.out, outcome)?;
    draw(&args.out.join("rates.svg"), args, timelines)?;
    println!(
        "wrote rates.svg, rates.csv, rates.json and summary.json to {}",
        args.out.display()
    );
    Ok(())
}

/// Plots every QP's rate over time, with the fair share per QP as a dashed line.
fn draw(path: &Path, args: &IncastLab, timelines: &[Vec<RateTimeline>]) -> anyhow::Result<()> {
    let end_ns = timelines
        .iter()
        .flatten()
        .filter_map(|t| t.points.last())
        .map(|p| p.time_ns)
        .max()
        .unwrap_or(0)
        .max(u64::try_from(args.secs.as_nanos())?);
    let x = 0.0..end_ns as f64 / 1e9;
    let mut lines: Vec<Line> = timelines
        .iter()
        .flatten()
        .map(|timeline| {
            let points = (0..=PLOT_POINTS)
                .map(|k| {
                    let t = end_ns / u64::from(PLOT_POINTS) * u64::from(k);
                    (t as f64 / 1e9, rate_at(timeline, t) as f64 / 1e6)
                })
                .collect();
            let sender = timeline.qp / QP_STRIDE;
            Line::solid(format!("sender {sender} QP {}", timeline.qp), points)
        })
        .collect();
    let fair = args.fair_share_bps() / f64::from(args.qps) / 1e6;
    lines.push(Line::level("fair share per QP", fair, &x));
    let panel = Panel {
        caption: format!(
            "DCQCN rate per QP: {} senders x {} QP(s) into a {} Mb/s bottleneck",
            args.senders,
            args.qps,
            args.drain / 1_000_000
        ),
        x_desc: "time since the first sender started (s)".into(),
        y_desc: "rate (Mb/s)".into(),
        x,
        y: 0.0..args.line_rate as f64 / f64::from(args.qps) / 1e6 * 1.05,
        lines,
    };
    output::draw_panels(path, (1000, 560), &[panel])
}

#[cfg(test)]
mod tests {
    use super::*;
    use dcqcn::RatePoint;

    fn point(time_ns: u64, rate_bps: u64) -> RatePoint {
        RatePoint {
            time_ns,
            rate_bps,
            target_bps: rate_bps,
            alpha: 1.0,
            event: RateEvent::Cnp,
            trigger: None,
        }
    }

    #[test]
    fn mean_rate_weighs_by_time() {
        let timeline = RateTimeline {
            qp: 256,
            points: vec![point(0, 100), point(10, 50), point(30, 100)],
        };
        assert_eq!(rate_at(&timeline, 9), 100);
        let late = RateTimeline {
            qp: 512,
            points: vec![point(10, 100)],
        };
        assert_eq!(rate_at(&late, 9), 0);
        assert_eq!(rate_at(&timeline, 10), 50);
        // 0..10 at 100, 10..30 at 50, 30..40 at 100.
        assert_eq!(mean_rate(&timeline, 0, 40), 75.0);
        assert_eq!(mean_rate(&timeline, 20, 30), 50.0);
    }
}
