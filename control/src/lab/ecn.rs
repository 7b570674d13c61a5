//! The ECN lab (`cargo xtask demo`): sender → bottleneck → receiver in namespaces, XDP ECN
//! marking on the bottleneck's ingress with a drain rate below the offered load at the top of
//! a ramp. Prints offered rate, phantom-queue depth and marked fraction against the RED curve.

use std::{
    net::{IpAddr, Ipv4Addr},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use dataplane_common::{red, Hook};

use super::shared::{enable_forwarding, Detach, PRIORITY};
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
    wire::ethernet::Address,
};

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
        if !matches!(completed, Ok(true)) {
            sender_stop.stop();
            receiver_stop.stop();
        }
        let sent = sending.join().expect("sender thread");
        let received = receiving.join().expect("receiver thread");
        (completed, sent, received)
    });
    if !completed? {
        return Ok(());
    }
    let (sent, received) = (sent?, received?);
    let stats = maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
    println!(
        "sent {} frames; bottleneck marked {} of {} ECT frames; receiver counted {} CE of {} RoCEv2 frames ({} PSN gaps)",
        sent.packets, stats.ecn_marked, stats.ect_packets, received.ce, received.packets, received.psn_gaps
    );
    Ok(())
}

/// The rate of each QP when the offered load is `step` × the drain rate.
fn per_qp_rate(args: &EcnLab, step: f64) -> u64 {
    ((args.drain as f64 * step) as u64 / args.qps.max(1) as u64).max(1)
}

/// Steps the offered load and prints a row every half second; false if stopped early.
fn ramp(
    args: &EcnLab,
    maps: &PinnedMaps,
    profile: &dataplane_common::config::EcnProfile,
    offered: &AtomicU64,
    stop: &StopFlag,
) -> anyhow::Result<bool> {
    let start = Instant::now();
    let tick = Duration::from_millis(500);
    let mut before = maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
    let mut last = Instant::now();
    for step in &args.steps {
        let rate = (args.drain as f64 * step) as u64;
        offered.store(per_qp_rate(args, *step), Ordering::Relaxed);
        let step_end = Instant::now() + args.step_secs;
        while Instant::now() < step_end {
            if stop.is_stopped() {
                return Ok(false);
            }
            std::thread::sleep(tick.min(step_end.saturating_duration_since(Instant::now())));
            let now = maps.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
            let backlog = maps.read_queues(Hook::Xdp)?[PRIORITY].backlog_bytes;
            let elapsed = last.elapsed().as_secs_f64();
            last = Instant::now();
            let ect = now.ect_packets - before.ect_packets;
            let marked = now.ecn_marked - before.ecn_marked;
            println!(
                "{:>6.1} {:>12.0} {:>12.1} {:>12} {:>10.2} {:>10.2}",
                start.elapsed().as_secs_f64(),
                rate as f64 / 1e6,
                (now.rx_bytes - before.rx_bytes) as f64 * 8.0 / elapsed / 1e6,
                backlog,
                if ect == 0 {
                    0.0
                } else {
                    100.0 * marked as f64 / ect as f64
                },
                100.0 * red::mark_probability(profile, backlog),
            );
            before = now;
        }
    }
    Ok(true)
}
