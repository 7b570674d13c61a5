//! The ECN lab (`cargo xtask demo`): sender → bottleneck → receiver in namespaces, XDP ECN
//! marking on the bottleneck's ingress with a drain rate below the offered load at the top of
//! a ramp. Prints offered rate, phantom-queue depth and marked fraction against the RED curve,
//! and writes them, sampled every 50 ms, as ecn.csv and ecn.svg with a summary.json.

use std::{
    net::{IpAddr, Ipv4Addr},
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

use super::{
    output::{self, Line, Panel, Series, SAMPLE, SAMPLES_PER_ROW},
    shared::{enable_forwarding, Detach, PRIORITY},
};
use crate::{
    host::{
        attach::{self, AttachRequest, Mode},
        attachment::Attachment,
        config::HostConfig,
        pinned_maps::PinnedMaps,
    },
    netns::{veth_pair, Endpoint, Namespace},
    traffic::{RateController, Receiver, RecvConfig, SendConfig, Sender, StopFlag},
    units::{parse_rate_bps, parse_run_time},
};
use wire::ethernet::Address;

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

/// sender ns —veth— bottleneck ns (forwards) —veth— receiver ns.
struct Topology {
    sender_ns: Namespace,
    bottleneck_ns: Namespace,
    receiver_ns: Namespace,
    sender: Endpoint,
    ingress: Endpoint,
    receiver: Endpoint,
}

impl Topology {
    fn build() -> anyhow::Result<Self> {
        let sender_ns = Namespace::create("esnd")?;
        let bottleneck_ns = Namespace::create("ebot")?;
        let receiver_ns = Namespace::create("ercv")?;
        let (sender, ingress) = veth_pair(
            &sender_ns,
            Ipv4Addr::new(10, 31, 1, 2),
            &bottleneck_ns,
            Ipv4Addr::new(10, 31, 1, 1),
        )?;
        let (_egress, receiver) = veth_pair(
            &bottleneck_ns,
            Ipv4Addr::new(10, 31, 2, 1),
            &receiver_ns,
            Ipv4Addr::new(10, 31, 2, 2),
        )?;
        enable_forwarding(&bottleneck_ns)?;
        sender_ns.ip(&["route", "add", "10.31.2.0/24", "via", "10.31.1.1"])?;
        receiver_ns.ip(&["route", "add", "10.31.1.0/24", "via", "10.31.2.1"])?;
        Ok(Topology {
            sender_ns,
            bottleneck_ns,
            receiver_ns,
            sender,
            ingress,
            receiver,
        })
    }
}

/// Runs the lab until its last step or until `stop` is set.
pub fn run(args: &EcnLab, stop: &StopFlag) -> anyhow::Result<()> {
    if args.steps.is_empty() || args.steps.len() > MAX_STEPS {
        bail!("--steps takes 1 to {MAX_STEPS} fractions");
    }
    if let Some(bad) = args.steps.iter().find(|s| !(**s > 0.0 && **s <= MAX_STEP)) {
        bail!("--steps: {bad} is not a fraction of the drain rate in (0, {MAX_STEP}]");
    }
    let topology = Topology::build().context("building the namespace test bed")?;
    let mut config = HostConfig::default();
    config.apply_assignments(&[
        format!("ecn.prio{PRIORITY}.rate_bps={}", args.drain),
        format!("ecn.prio{PRIORITY}.kmin_bytes={}", args.kmin),
        format!("ecn.prio{PRIORITY}.kmax_bytes={}", args.kmax),
        format!("ecn.prio{PRIORITY}.pmax={}", args.pmax),
    ])?;
    let profile = config.profiles[PRIORITY];
    let request = AttachRequest {
        interface: topology.ingress.ifname.clone(),
        mode: Mode::Native,
        attachments: vec![Attachment::Xdp],
        config,
    };
    let attached = topology.bottleneck_ns.run(|| attach::attach(&request))??;
    let _detach = Detach(attached.dir.clone());
    let maps = PinnedMaps::at(attached.dir);

    let total = args.step_secs * args.steps.len() as u32;
    let first_step = args.steps.first().copied().unwrap_or(1.0);
    let offered = Arc::new(AtomicU64::new(per_qp_rate(args, first_step)));
    let per_qp = SharedRate(offered.clone());
    let mut send = SendConfig::new(
        topology.sender.ifname.clone(),
        IpAddr::V4(topology.receiver.ipv4),
    );
    send.dst_mac = Some(Address(topology.ingress.mac));
    send.size = args.size;
    send.qps = args.qps;
    send.duration = Some(total);
    let receive = RecvConfig {
        iface: topology.receiver.ifname.clone(),
        duration: None,
        count: None,
        idle_timeout: Some(Duration::from_secs(2)),
        cnp: None,
    };

    println!(
        "ECN lab: sender -> {} (XDP, drain {} Mb/s, Kmin {} B, Kmax {} B, Pmax {}) -> receiver",
        topology.ingress.ifname,
        args.drain / 1_000_000,
        args.kmin,
        args.kmax,
        args.pmax
    );
    println!(
        "{:>6} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "time_s", "offered_Mbps", "seen_Mbps", "vq_bytes", "marked_%", "red_%"
    );
    // Sockets are opened inside their namespaces and stay bound there; the threads that
    // run them need not be.
    let mut sender = topology.sender_ns.run(|| Sender::open(send))??;
    let mut receiver = topology.receiver_ns.run(|| Receiver::open(receive))??;
    let (sender_stop, receiver_stop) = (sender.stop_flag(), receiver.stop_flag());
    let (completed, sent, received) = std::thread::scope(|scope| {
        let receiving = scope.spawn(move || receiver.run());
        let sending = scope.spawn(move || sender.run(&mut vec![per_qp; args.qps as usize]));
        let completed = ramp(args, &maps, &profile, &offered, stop);
        if !matches!(completed, Ok(Some(_))) {
            sender_stop.stop();
            receiver_stop.stop();
        }
        let sent = sending.join().expect("sender thread");
        let received = receiving.join().expect("receiver thread");
        (completed, sent, received)
    });
    let Some(ramped) = completed? else {
        return Ok(());
    };
    let (sent, received) = (sent?, received?);
    let stats = maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
    println!(
        "sent {} frames; bottleneck marked {} of {} ECT frames; receiver counted {} CE of {} RoCEv2 frames ({} PSN gaps)",
        sent.packets, stats.ecn_marked, stats.ect_packets, received.ce, received.packets, received.psn_gaps
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
        received_frames: received.packets,
        received_ce: received.ce,
        psn_gaps: received.psn_gaps,
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
    output::write_file(&args.out, "ecn.csv", |f| Ok(series.write_csv(f)?))?;
    output::write_summary(&args.out, summary)?;
    let x = 0.0..series.rows.last().map_or(0.0, |r| r[0]);
    let time = "time (s)".to_owned();
    let queue = Panel {
        caption: format!(
            "phantom queue at the bottleneck (drain {} Mb/s)",
            args.drain / 1_000_000
        ),
        x_desc: time.clone(),
        y_desc: "bytes".into(),
        x: x.clone(),
        y: 0.0..(series.max("vq_bytes").max(f64::from(args.kmax)) * 1.1),
        lines: vec![
            Line::solid("vq_bytes", series.points("vq_bytes")),
            Line::level("Kmin", f64::from(args.kmin), &x),
            Line::level("Kmax", f64::from(args.kmax), &x),
        ],
    };
    let marks = Panel {
        caption: "marked fraction against RED's probability at that depth".into(),
        x_desc: time.clone(),
        y_desc: "%".into(),
        x: x.clone(),
        y: 0.0..(series.max("marked_%").max(series.max("red_%")).max(1.0) * 1.1),
        lines: vec![
            Line::solid("marked % (measured)", series.points("marked_%")),
            Line::solid("RED % at the depth", series.points("red_%")),
        ],
    };
    let rates = Panel {
        caption: "offered load and the rate the bottleneck sees".into(),
        x_desc: time,
        y_desc: "Mb/s".into(),
        x: x.clone(),
        y: 0.0..(series.max("offered_Mbps").max(series.max("seen_Mbps")) * 1.1),
        lines: vec![
            Line::solid("offered (wire)", series.points("offered_Mbps")),
            Line::solid("seen (frame bytes)", series.points("seen_Mbps")),
            Line::level("drain", args.drain as f64 / 1e6, &x),
        ],
    };
    output::draw_panels(
        &args.out.join("ecn.svg"),
        (1000, 360),
        &[queue, marks, rates],
    )?;
    println!(
        "wrote ecn.svg, ecn.csv and summary.json to {}",
        args.out.display()
    );
    Ok(())
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

/// Steps the offered load, samples the bottleneck every [`SAMPLE`] and prints a row every
/// [`SAMPLES_PER_ROW`] samples; `None` if stopped early.
fn ramp(
    args: &EcnLab,
    maps: &PinnedMaps,
    profile: &EcnProfile,
    offered: &AtomicU64,
    stop: &StopFlag,
) -> anyhow::Result<Option<Ramp>> {
    let start = Instant::now();
    let read = || -> anyhow::Result<(PrioCounters, u64)> {
        let counters = maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
        Ok((
            counters,
            maps.read_queues(Hook::Xdp)?[PRIORITY].backlog_bytes,
        ))
    };
    let mut series = Series::new(&COLUMNS);
    let mut steps = Vec::new();
    let (first, _) = read()?;
    let (mut sample_before, mut sample_at) = (first, Instant::now());
    let (mut row_before, mut row_at) = (first, Instant::now());
    let mut samples = 0u32;
    for step in &args.steps {
        let rate = (args.drain as f64 * step) as u64;
        offered.store(per_qp_rate(args, *step), Ordering::Relaxed);
        let (step_before, step_at) = (sample_before, Instant::now());
        let mut vq_bytes_max = 0;
        let step_end = Instant::now() + args.step_secs;
        while Instant::now() < step_end {
            if stop.is_stopped() {
                return Ok(None);
            }
            std::thread::sleep(SAMPLE.min(step_end.saturating_duration_since(Instant::now())));
            let (now, backlog) = read()?;
            let t = start.elapsed().as_secs_f64();
            vq_bytes_max = vq_bytes_max.max(backlog);
            let elapsed = sample_at.elapsed().as_secs_f64();
            series.push(reading(
                profile,
                t,
                rate,
                (&sample_before, &now),
                elapsed,
                backlog,
            ));
            (sample_before, sample_at) = (now, Instant::now());
            samples += 1;
            if samples.is_multiple_of(SAMPLES_PER_ROW) {
                let elapsed = row_at.elapsed().as_secs_f64();
                let row = reading(profile, t, rate, (&row_before, &now), elapsed, backlog);
                println!(
                    "{:>6.1} {:>12.0} {:>12.1} {:>12} {:>10.2} {:>10.2}",
                    row[0], row[1], row[2], backlog, row[4], row[5]
                );
                (row_before, row_at) = (now, Instant::now());
            }
        }
        let ect = sample_before.ect_packets - step_before.ect_packets;
        steps.push(StepSummary {
            load: *step,
            offered_bps: rate,
            seen_bps: (sample_before.rx_bytes - step_before.rx_bytes) as f64 * 8.0
                / step_at.elapsed().as_secs_f64(),
            vq_bytes_max,
            marked_fraction: if ect == 0 {
                0.0
            } else {
                (sample_before.ecn_marked - step_before.ecn_marked) as f64 / ect as f64
            },
        });
    }
    Ok(Some(Ramp { series, steps }))
}
