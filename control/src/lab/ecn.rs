//! The ECN lab (`cargo xtask demo`): sender → bottleneck → receiver in namespaces, XDP ECN
//! marking on the bottleneck's ingress with a drain rate below the offered load at the top of
//! a ramp. Prints offered rate, phantom-queue depth and marked fraction against the RED curve,
//! and writes them, sampled every 50 ms, as ecn.csv and ecn.svg with a summary.json.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use dataplane_common::{config::EcnProfile, counters::PrioCounters, red, Hook};
use serde::Serialize;

use super::harness::{self, Bed, LabPorts, Port, Sampler, Sending, Shape, PRIORITY};
use crate::output::{self, Panel, Series};
use host::pinned_maps::PinnedMaps;
use hostconfig::{attachment::Attachment, config::HostConfig};
use traffic::{RateController, StopFlag};
use units::{parse_rate_bps, parse_run_time};

/// Options of `lossless lab ecn`.
#[derive(Debug, clap::Args)]
pub struct EcnLab {
    /// Drain rate of the bottleneck's phantom queue.
    #[arg(long, default_value = "100mbit", value_parser = parse_rate_bps)]
    drain: u64,
    /// Offered load at each step, as fractions of the drain rate: by default it rises past
    /// the drain rate (the queue builds and marks follow RED) and falls back (it drains).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.5,0.8,1.05,1.1,0.6,0.3"
    )]
    steps: Vec<f64>,
    /// Seconds per step (1 ms to 1 day).
    #[arg(long, default_value = "2", value_parser = parse_run_time)]
    step_secs: Duration,
    /// RED Kmin in bytes.
    #[arg(long, default_value_t = 20_000)]
    kmin: u32,
    /// RED Kmax in bytes.
    #[arg(long, default_value_t = 200_000)]
    kmax: u32,
    /// RED Pmax.
    #[arg(long, default_value_t = 0.2)]
    pmax: f64,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// Number of QPs.
    #[arg(long, default_value_t = 4)]
    qps: u32,
    /// Directory for the plot (ecn.svg), the samples (ecn.csv) and summary.json.
    #[arg(long, default_value = "lab-output/ecn")]
    out: PathBuf,
}

/// Most steps a ramp may have.
const MAX_STEPS: usize = 1000;
/// Highest offered load of a step, as a fraction of the drain rate.
const MAX_STEP: f64 = 100.0;

/// A rate the lab changes while the sender runs.
#[derive(Clone)]
struct SharedRate(Arc<AtomicU64>);

impl RateController for SharedRate {
    fn rate_bps(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn on_sent(&mut self, _now: Duration, _wire_bits: u64) {}

    /// The lab's offered load is open loop: it ignores congestion notifications.
    fn on_cnp(&mut self, _now: Duration) {}
}

/// sender ns —veth— bottleneck ns (forwards) —veth— receiver ns; marking on the bottleneck's
/// ingress from the sender.
const SHAPE: Shape = Shape {
    net: 31,
    sender: "esnd",
    senders: 1,
    router: Some("ebot"),
    receiver: "ercv",
};

/// Runs the lab until its last step or until `stop` is set.
pub fn run(args: &EcnLab, stop: &StopFlag) -> anyhow::Result<()> {
    if args.steps.is_empty() || args.steps.len() > MAX_STEPS {
        bail!("--steps takes 1 to {MAX_STEPS} fractions");
    }
    if let Some(bad) = args.steps.iter().find(|s| !(**s > 0.0 && **s <= MAX_STEP)) {
        bail!("--steps: {bad} is not a fraction of the drain rate in (0, {MAX_STEP}]");
    }
    let bed = Bed::build(&SHAPE).context("building the namespace test bed")?;
    let mut config = HostConfig::default();
    config.set_all(harness::ecn_marking(
        args.drain, args.kmin, args.kmax, args.pmax,
    ))?;
    let profile = config.profiles[PRIORITY];
    let maps = bed.attach(Port::RouterFrom(0), vec![Attachment::Xdp], config)?;

    let first_step = args.steps.first().copied().unwrap_or(1.0);
    let offered = Arc::new(AtomicU64::new(per_qp_rate(args, first_step)));
    let mut send = bed.send_config(0);
    send.size = args.size;
    send.qps = args.qps;
    send.duration = Some(args.step_secs * args.steps.len() as u32);

    println!(
        "ECN lab: sender -> {} (XDP, drain {} Mb/s, Kmin {} B, Kmax {} B, Pmax {}) -> receiver",
        bed.port(Port::RouterFrom(0))?.1.ifname,
        args.drain / 1_000_000,
        args.kmin,
        args.kmax,
        args.pmax
    );
    println!(
        "{}",
        output::table_header(&COLUMNS, &[6, 12, 12, 12, 10, 10])
    );
    let sending = Sending {
        sender: bed.open_sender(0, send)?,
        rates: vec![SharedRate(offered.clone()); args.qps as usize],
        start: Duration::ZERO,
    };
    let receiver = bed.open_receiver()?;
    let Some(ran) = harness::run(vec![sending], receiver, None, stop, |running| {
        ramp(args, &maps, &profile, &offered, running.start, stop)
    })?
    else {
        return Ok(());
    };
    let (sent, received, ramped) = (&ran.sent[0].0, &ran.received, ran.watched);
    let stats = maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
    println!(
        "sent {} frames; bottleneck marked {} of {} ECT frames; receiver counted {} CE of {} RoCEv2 frames ({} PSN gaps)",
        sent.packets, stats.ecn_marked, stats.ect_packets, received.frames.ce, received.frames.packets, received.frames.psn_gaps
    );
    let summary = EcnSummary {
        drain_bps: args.drain,
        kmin_bytes: args.kmin,
        kmax_bytes: args.kmax,
        pmax: args.pmax,
        step_secs: args.step_secs.as_secs_f64(),
        steps: ramped.steps,
        sent_frames: sent.packets,
        ect_frames: stats.ect_packets,
        marked_frames: stats.ecn_marked,
        received_frames: received.frames.packets,
        received_ce: received.frames.ce,
        psn_gaps: received.frames.psn_gaps,
    };
    write_outputs(args, &ramped.series, &summary)
}

/// One step of the ramp, in summary.json.
#[derive(Debug, Serialize)]
struct StepSummary {
    /// The offered load as a fraction of the drain rate.
    load: f64,
    /// The offered rate on the wire, b/s.
    offered_bps: u64,
    /// The rate the bottleneck saw (frame bytes), b/s.
    seen_bps: f64,
    /// The deepest the phantom queue was at a sample, bytes.
    vq_bytes_max: u64,
    /// Marked over ECT frames during the step.
    marked_fraction: f64,
}

/// summary.json of the ECN lab.
#[derive(Debug, Serialize)]
struct EcnSummary {
    drain_bps: u64,
    kmin_bytes: u32,
    kmax_bytes: u32,
    pmax: f64,
    step_secs: f64,
    steps: Vec<StepSummary>,
    sent_frames: u64,
    ect_frames: u64,
    marked_frames: u64,
    received_frames: u64,
    received_ce: u64,
    psn_gaps: u64,
}

/// What the ramp measured: the samples and each step's figures.
struct Ramp {
    series: Series,
    steps: Vec<StepSummary>,
}

/// The columns of ecn.csv, as the table prints them.
const COLUMNS: [&str; 6] = [
    "time_s",
    "offered_Mbps",
    "seen_Mbps",
    "vq_bytes",
    "marked_%",
    "red_%",
];

/// Writes ecn.csv, ecn.svg and summary.json into `--out`.
fn write_outputs(args: &EcnLab, series: &Series, summary: &EcnSummary) -> anyhow::Result<()> {
    let kmin = f64::from(args.kmin);
    let kmax = f64::from(args.kmax);
    let queue = Panel::bytes_between(
        format!(
            "phantom queue at the bottleneck (drain {} Mb/s)",
            args.drain / 1_000_000
        ),
        series,
        "vq_bytes",
        [("Kmin", kmin), ("Kmax", kmax)],
    );
    let marks = Panel::of_columns(
        "marked fraction against RED's probability at that depth",
        "%",
        series,
        &[
            ("marked % (measured)", "marked_%"),
            ("RED % at the depth", "red_%"),
        ],
        &[],
    );
    let rates = Panel::of_columns(
        "offered load and the rate the bottleneck sees",
        "Mb/s",
        series,
        &[
            ("offered (wire)", "offered_Mbps"),
            ("seen (frame bytes)", "seen_Mbps"),
        ],
        &[("drain", args.drain as f64 / 1e6)],
    );
    output::write_sampled(&args.out, "ecn", series, summary, &[queue, marks, rates])
}

/// The rate of each QP when the offered load is `step` × the drain rate.
fn per_qp_rate(args: &EcnLab, step: f64) -> u64 {
    ((args.drain as f64 * step) as u64 / args.qps.max(1) as u64).max(1)
}

/// One reading of the bottleneck over an interval, as a row of the table and of ecn.csv.
fn reading(
    profile: &EcnProfile,
    t: f64,
    offered_bps: u64,
    (before, now): (&PrioCounters, &PrioCounters),
    elapsed: f64,
    backlog: u64,
) -> Vec<f64> {
    let ect = now.ect_packets - before.ect_packets;
    let marked = now.ecn_marked - before.ecn_marked;
    vec![
        t,
        offered_bps as f64 / 1e6,
        (now.rx_bytes - before.rx_bytes) as f64 * 8.0 / elapsed / 1e6,
        backlog as f64,
        if ect == 0 {
            0.0
        } else {
            100.0 * marked as f64 / ect as f64
        },
        100.0 * red::mark_probability(profile, backlog),
    ]
}

/// Steps the offered load, samples the bottleneck every [`output::SAMPLE`] and prints a row
/// every [`output::SAMPLES_PER_ROW`] samples; `None` if stopped early.
fn ramp(
    args: &EcnLab,
    maps: &PinnedMaps,
    profile: &EcnProfile,
    offered: &AtomicU64,
    start: Instant,
    stop: &StopFlag,
) -> anyhow::Result<Option<Ramp>> {
    let read = || -> anyhow::Result<(PrioCounters, u64)> {
        let counters = maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
        Ok((
            counters,
            maps.read_queues(Hook::Xdp)?[PRIORITY].backlog_bytes,
        ))
    };
    let mut series = Series::new(&COLUMNS);
    let mut steps = Vec::new();
    let mut sampler = Sampler::new(read()?);
    for step in &args.steps {
        let rate = (args.drain as f64 * step) as u64;
        offered.store(per_qp_rate(args, *step), Ordering::Relaxed);
        let (step_before, step_at) = (sampler.last().0, Instant::now());
        let mut vq_bytes_max = 0;
        let step_end = Instant::now() + args.step_secs;
        let completed = sampler.until(step_end, stop, read, |r| {
            let ((now, backlog), t) = (r.now, start.elapsed().as_secs_f64());
            vq_bytes_max = vq_bytes_max.max(*backlog);
            let (before, elapsed) = r.since_sample;
            series.push(reading(
                profile,
                t,
                rate,
                (&before.0, now),
                elapsed,
                *backlog,
            ));
            if let Some((before, elapsed)) = r.since_row {
                let row = reading(profile, t, rate, (&before.0, now), elapsed, *backlog);
                println!(
                    "{:>6.1} {:>12.0} {:>12.1} {:>12} {:>10.2} {:>10.2}",
                    row[0], row[1], row[2], backlog, row[4], row[5]
                );
            }
            Ok(())
        })?;
        if !completed {
            return Ok(None);
        }
        let step_last = sampler.last().0;
        let ect = step_last.ect_packets - step_before.ect_packets;
        steps.push(StepSummary {
            load: *step,
            offered_bps: rate,
            seen_bps: (step_last.rx_bytes - step_before.rx_bytes) as f64 * 8.0
                / step_at.elapsed().as_secs_f64(),
            vq_bytes_max,
            marked_fraction: if ect == 0 {
                0.0
            } else {
                (step_last.ecn_marked - step_before.ecn_marked) as f64 / ect as f64
            },
        });
    }
    Ok(Some(Ramp { series, steps }))
}
