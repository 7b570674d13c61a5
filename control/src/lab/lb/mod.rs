//! The load-balancing lab (`lossless lab lb`): k senders → a balancing host (the XDP load
//! balancer on each of its downlinks) with M uplinks → M spines, each shaping its path to the
//! leaf → a collecting leaf → a receiver. The same workload (the same flows, from one seed)
//! runs under each policy in turn, switched live with the balancer's `lb.policy` key; each run
//! is judged by the uplinks' byte counters (imbalance, Jain's index), the receiver's PSN
//! order (reordering), the flows' completion times and what the closed loop (`closed_loop`:
//! ECN, CNPs, DCQCN, PFC relayed by the balancer) did to deliver them whole. Prints a table;
//! writes summary.json and a plot (lb.svg).

mod closed_loop;
mod metrics;
mod report;
mod topology;
mod workload;

use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::PathBuf,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use dataplane_common::lb::Policy;
use dcqcn::{Dcqcn, DcqcnParams};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use self::{
    closed_loop::{LoopArgs, LoopCounts, LoopMaps},
    metrics::{reordered_fraction, Balance, Completion},
    topology::{Port, Shape, Topology, OWNED_PREFIX, RECEIVER},
    workload::{Flow, Schedule, WorkloadArg, WorkloadParams},
};
use super::harness::{self, LabPorts, Sending};
use host::{lb::stats::LbStats, pinned_maps::PinnedMaps};
use hostconfig::{
    attachment::Attachment,
    config::{HostConfig, Setting},
    lb::{parse_policy, LbSetting, NextHop, FLOWLET_TIMEOUT},
};
use traffic::{
    pacing::wire_bits, Interval, RateController, Receiver, RecvConfig, RecvSummary, SendConfig,
    SendSummary, Sender, StopFlag,
};
use units::{parse_duration, parse_rate_bps, serialize_micros, serialize_seconds, DurationLimits};
use wire::{ethernet::Address, roce::RoceFrame};

/// When frames were lost, the receiver stops once every sender has finished and no frame has
/// arrived for this long (it stops at once when every frame arrived): longer than a full
/// shaper queue takes to drain. Flows may start long after the last one ended (a light load,
/// long gaps between messages), so the receiver does not judge silence by itself.
const IDLE_AFTER_LOSS: Duration = Duration::from_secs(2);

/// How often the progress bar moves.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// The UDP source port of a sender's first flow; flow j uses this + j.
const SPORT_BASE: u16 = 49152;

/// `--collective-size`: 64 KB to 1 GB.
const COLLECTIVE_SIZE: units::ByteLimits = units::ByteLimits {
    min: 64_000,
    max: 1_000_000_000,
};

/// `--secs`: 1 ms to 10 minutes.
const WINDOW: DurationLimits =
    DurationLimits::seconds(Duration::from_millis(1)).up_to(Duration::from_secs(600));

/// Options of `lossless lab lb`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct LbLab {
    /// Policies to compare, run in this order: ecmp, flowlet, dlb, spray, wcmp, e-ecmp.
    #[arg(long, value_delimiter = ',', default_value = "ecmp,flowlet,dlb,spray", value_parser = parse_policy)]
    #[serde(serialize_with = "policy_names")]
    policies: Vec<Policy>,
    /// Workloads, each run under every policy: the lab's own (websearch, elephants,
    /// allreduce; a comma list), or, repeated, workloads of the one format that send from the
    /// senders to the receiver (incast:..., microburst:..., or a TOML file).
    #[arg(
        long = "workload",
        default_value = "websearch,elephants",
        value_parser = workload::parse_workload_arg
    )]
    workloads: Vec<WorkloadArg>,
    /// Senders, each in its own namespace on its own downlink of the balancer (each downlink
    /// keeps its own dlb load estimate, so one sender gives dlb the whole picture).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    senders: u8,
    /// Uplinks of the balancer, one spine behind each.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(2..=8))]
    uplinks: u8,
    /// Capacity of each path through a spine (the spine shapes its link to the leaf).
    #[arg(long, default_value = "50mbit", value_parser = parse_rate_bps)]
    uplink_rate: u64,
    /// Capacity of the last uplink's path: a slower path makes the fabric asymmetric. Give the
    /// same as --uplink-rate for a symmetric fabric.
    #[arg(long, default_value = "25mbit", value_parser = parse_rate_bps)]
    slow_uplink_rate: u64,
    /// Offered load, as a fraction of the summed path capacities.
    #[arg(long, default_value_t = 0.7)]
    load: f64,
    /// Seconds over which web-search flows arrive; how long elephants last at their rate
    /// (1 ms to 600 s).
    #[arg(long, default_value = "3", value_parser = |s: &str| parse_duration(s, &WINDOW))]
    #[serde(serialize_with = "serialize_seconds")]
    secs: Duration,
    /// Web-search flow sizes are multiplied by this (the published distribution is for
    /// 10–100 Gb/s links).
    #[arg(long, default_value_t = 0.1)]
    size_scale: f64,
    /// Rate of each web-search flow [default: --uplink-rate].
    #[arg(long, value_parser = parse_rate_bps)]
    flow_rate: Option<u64>,
    /// Number of elephants (they share the offered load).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    elephants: u32,
    /// The allreduce workload's buffer per rank (nccl-tests' size), 64 KB to 1 GB: each of its
    /// 2(n − 1) steps sends S / n bytes over every connection.
    #[arg(long, default_value = "8MB", value_parser = |s: &str| units::parse_bytes(s, &COLLECTIVE_SIZE))]
    collective_size: u64,
    /// The allreduce workload's QPs per connection (1..64), sharing its UDP source port: only
    /// e-ecmp, which hashes the destination QP too, spreads them.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    qps_per_conn: u32,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// The balancer's flowlet timeout (flowlet and dlb), microseconds: far longer than
    /// data-centre settings, as the lab's paths are 100 times slower and their queues hold tens
    /// of milliseconds (the P4 tutorials use 50–200 ms on BMv2 for the same reason). Elephants
    /// pause twice this long between messages.
    #[arg(long, default_value = "50000", value_parser = |s: &str| parse_duration(s, &FLOWLET_TIMEOUT))]
    #[serde(serialize_with = "serialize_micros")]
    flowlet_timeout_us: Duration,
    /// Bytes each spine queues toward the leaf before it drops. Its delay (buffer / rate, 80 ms
    /// on a 25 Mb/s path) stays below the elephants' gaps, so a flow that waited a gap can
    /// change path without overtaking its own frames.
    #[arg(long, default_value_t = 250_000)]
    buffer: u64,
    /// Seed of the workload: the same seed, the same flows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// ECN, PFC and DCQCN, or none of them.
    #[command(flatten)]
    #[serde(flatten)]
    closed_loop: LoopArgs,
    /// Directory for summary.json and lb.svg.
    #[arg(long, default_value = "lab-output/lb")]
    out: PathBuf,
}

fn policy_names<S: serde::Serializer>(policies: &[Policy], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(policies.iter().map(|p| p.name()))
}

impl LbLab {
    fn validate(&self) -> anyhow::Result<()> {
        if self.policies.is_empty() || self.workloads.is_empty() {
            bail!("--policies and --workload need at least one entry each");
        }
        if !(self.load > 0.0 && self.load <= 2.0) {
            bail!("--load {} is not in (0, 2]", self.load);
        }
        if !(self.size_scale > 0.0 && self.size_scale <= 1.0) {
            bail!("--size-scale {} is not in (0, 1]", self.size_scale);
        }
        if self.uplink_rate == 0 || self.slow_uplink_rate == 0 || self.flow_rate == Some(0) {
            bail!("rates must be above zero");
        }
        self.closed_loop.validate(self.buffer)
    }

    /// Each path's capacity: the last one at the slow rate.
    fn path_rates_bps(&self) -> Vec<u64> {
        let mut rates = vec![self.uplink_rate; usize::from(self.uplinks)];
        *rates.last_mut().expect("two uplinks at least") = self.slow_uplink_rate;
        rates
    }

    /// The balancer's configuration: every uplink with its next hop (the spine, resolved by
    /// the kernel), its path rate (dlb's drain rate) and a wcmp weight in proportion to it.
    fn balancer_config(&self, topology: &Topology) -> anyhow::Result<HostConfig> {
        let names: Vec<String> = topology
            .uplinks
            .iter()
            .map(|u| u.uplink.ifname.clone())
            .collect();
        let rates: Vec<u64> = topology.uplinks.iter().map(|u| u.rate_bps).collect();
        let weights = names.iter().cloned().zip(wcmp_weights(&rates)).collect();
        let mut settings = vec![
            LbSetting::Uplinks(names),
            LbSetting::Prefixes(vec![OWNED_PREFIX.parse()?]),
            LbSetting::FlowletTimeout(self.flowlet_timeout_us),
            LbSetting::Weights(weights),
        ];
        for path in &topology.uplinks {
            let name = &path.uplink.ifname;
            let spine = IpAddr::V4(path.spine_end.ipv4);
            settings.push(LbSetting::NextHop(name.clone(), NextHop::Ip(spine)));
            settings.push(LbSetting::Rate(name.clone(), path.rate_bps));
        }
        let mut config = HostConfig::default();
        config.set_all(settings.into_iter().map(Setting::Lb))?;
        Ok(config)
    }
}

/// Weights in proportion to `rates`, reduced by their greatest common divisor and scaled into
/// 1..=256 (`lb.weights`' range).
fn wcmp_weights(rates: &[u64]) -> Vec<u32> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let divisor = rates.iter().copied().fold(0, gcd).max(1);
    let reduced: Vec<u64> = rates.iter().map(|r| r / divisor).collect();
    let top = reduced.iter().copied().max().unwrap_or(1);
    reduced
        .iter()
        .map(|&r| {
            let scaled = if top > 256 { r * 256 / top } else { r };
            scaled.clamp(1, 256) as u32
        })
        .collect()
}

/// A flow as one QP of the sender: its rate while a message is under way (capped by its
/// DCQCN reaction point in the closed loop), a pause between messages, nothing once its
/// frames are sent.
struct FlowRate {
    flow: Flow,
    left: u64,
    /// Frames of the current message sent so far.
    in_message: u64,
    /// Wire bits of the last frame, to turn the gap into a rate for one frame time.
    last_bits: u64,
    /// The flow's reaction point, starting at its rate; none in the open loop.
    dcqcn: Option<Dcqcn>,
}

impl FlowRate {
    fn new(flow: Flow, dcqcn: Option<DcqcnParams>) -> anyhow::Result<FlowRate> {
        Ok(FlowRate {
            flow,
            left: flow.frames,
            in_message: 0,
            last_bits: 0,
            // The floor never above the flow's own rate (a QP of a connection split many ways).
            dcqcn: dcqcn
                .map(|params| {
                    let min_rate_bps = params.min_rate_bps.min(flow.rate_bps);
                    Dcqcn::new(
                        flow.rate_bps,
                        DcqcnParams {
                            min_rate_bps,
                            ..params
                        },
                    )
                })
                .transpose()
                .context("DCQCN parameters")?,
        })
    }
}

impl RateController for FlowRate {
    fn rate_bps(&self) -> u64 {
        match self.flow.messages {
            _ if self.left == 0 => 0,
            // The message is done: the next frame leaves one gap later.
            Some(m) if self.in_message == m.frames => {
                let gap_ns = m.gap.as_nanos().max(1);
                (u128::from(self.last_bits) * 1_000_000_000 / gap_ns).max(1) as u64
            }
            _ => self
                .dcqcn
                .as_ref()
                .map_or(self.flow.rate_bps, |d| d.rate_bps().min(self.flow.rate_bps)),
        }
    }

    fn on_sent(&mut self, now: Duration, wire_bits: u64) {
        if let Some(dcqcn) = &mut self.dcqcn {
            dcqcn.on_sent(now, wire_bits);
        }
        self.left = self.left.saturating_sub(1);
        self.last_bits = wire_bits;
        self.in_message = match self.flow.messages {
            Some(m) if self.in_message == m.frames => 1,
            _ => self.in_message + 1,
        };
    }

    /// Cuts the flow's rate (open-loop flows get no CNPs: nothing marks).
    fn on_cnp(&mut self, now: Duration) {
        if let Some(dcqcn) = &mut self.dcqcn {
            dcqcn.on_cnp(now);
        }
    }

    fn start(&self) -> Duration {
        self.flow.start
    }
}

/// One uplink's share of a run.
#[derive(Clone, Debug, Serialize)]
pub struct UplinkLoad {
    /// The balancer's interface.
    pub ifname: String,
    /// The capacity of its path.
    pub rate_bps: u64,
    /// Frames the balancer sent to it during the run, over every downlink.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Flowlets started on it.
    pub flowlets: u64,
    /// Flowlets that moved onto it (flows sharing a flowlet entry count once).
    pub path_changes: u64,
    /// Frames the spine's end of the uplink received, by the kernel's interface counters: an
    /// independent count of `tx_packets`.
    pub spine_rx_packets: u64,
}

/// The outcome of one workload under one policy.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyRun {
    /// The workload's name.
    pub workload: String,
    /// The policy's name.
    pub policy: &'static str,
    /// Per uplink.
    pub uplinks: Vec<UplinkLoad>,
    /// How evenly the uplinks carried the bytes.
    #[serde(flatten)]
    pub balance: Balance,
    /// Frames that arrived after a later frame of their flow, over frames received.
    pub reordered_fraction: f64,
    /// Frames the senders sent.
    pub packets_sent: u64,
    /// Frames the receiver counted.
    pub packets_received: u64,
    /// Frames that reached the receiver's host but not its count: its socket buffer was full
    /// (the receiver fell behind on a busy machine). Not lost by the network.
    pub receiver_drops: u64,
    /// Flows in the workload.
    pub flows: usize,
    /// Completion times of the flows that arrived whole (from the flow's start at its sender
    /// to its last frame at the receiver).
    pub fct: Completion,
    /// Times a sender could not keep its schedule (the machine lacked CPU).
    pub sender_stalls: u64,
    /// What the closed loop did during the run (none in the open loop).
    pub closed_loop: Option<LoopCounts>,
    /// The collective's figures, for a collective workload.
    pub collective: Option<CollectiveRun>,
}

/// A collective workload's run, as nccl-tests reports one iteration.
#[derive(Clone, Debug, Serialize)]
pub struct CollectiveRun {
    /// Ranks of the ring (the senders and as many across the fabric).
    pub ranks: u32,
    /// Buffer size per rank, bytes.
    pub bytes: u64,
    /// Steps run (`2(n − 1)` unless stopped early).
    pub steps: u32,
    /// QPs per connection.
    pub qps_per_conn: u32,
    /// The steps' times added: each from its first sender's start to its last frame's arrival.
    pub time_ms: f64,
    /// nccl-tests' algorithm bandwidth, bits per second.
    pub algbw_bps: f64,
    /// nccl-tests' bus bandwidth, bits per second.
    pub busbw_bps: f64,
}

impl PolicyRun {
    /// Frames the network lost: sent, and neither counted by the receiver nor dropped at its
    /// socket.
    pub fn lost(&self) -> u64 {
        self.packets_sent
            .saturating_sub(self.packets_received + self.receiver_drops)
    }
}

/// summary.json.
#[derive(Debug, Serialize)]
struct Summary<'a> {
    options: &'a LbLab,
    path_rates_bps: Vec<u64>,
    runs: &'a [PolicyRun],
    stopped_early: bool,
}

/// Runs every workload under every policy, or until `stop` is set; cleans up either way.
pub fn run(args: &LbLab, stop: &StopFlag) -> anyhow::Result<()> {
    args.validate()?;
    let payload = payload_per_frame(args.size, IpAddr::V4(RECEIVER))?;
    let rates = args.path_rates_bps();
    let frame_len = args.size;
    let params = WorkloadParams {
        offered_bps: args.load * rates.iter().sum::<u64>() as f64,
        window: args.secs,
        size_scale: args.size_scale,
        flow_rate_bps: args.flow_rate.unwrap_or(args.uplink_rate),
        elephants: args.elephants,
        message_gap: 2 * args.flowlet_timeout_us,
        collective: workload::allreduce(u32::from(args.senders), args.collective_size),
        senders: u32::from(args.senders),
        qps_per_conn: args.qps_per_conn,
        payload_per_frame: payload,
        wire_bits_per_frame: wire_bits(frame_len),
        seed: args.seed,
    };
    let mut workloads: Vec<Schedule> = Vec::new();
    for arg in &args.workloads {
        match arg {
            WorkloadArg::Kinds(kinds) => {
                workloads.extend(kinds.iter().map(|&kind| workload::schedule(kind, &params)))
            }
            WorkloadArg::Format(text) => workloads.push(workload::from_format(text, &params)?),
        }
    }
    // Two workloads of one name (two incasts, say) are told apart in the outputs: #2, #3, ...
    for i in 1..workloads.len() {
        let same = workloads[..i]
            .iter()
            .filter(|w| w.name.split('#').next() == Some(&workloads[i].name))
            .count();
        if same > 0 {
            workloads[i].name = format!("{}#{}", workloads[i].name, same + 1);
        }
    }
    for schedule in &workloads {
        let busiest = (0..u32::from(args.senders))
            .map(|s| schedule.flows.iter().filter(|f| f.sender == s).count())
            .max()
            .unwrap_or(0);
        if busiest > usize::from(u16::MAX - SPORT_BASE) {
            bail!(
                "the {} workload has {busiest} flows for one sender, more than the {} source \
                 ports above {SPORT_BASE}: lower --secs or --load, or raise --size-scale",
                schedule.name,
                u16::MAX - SPORT_BASE
            );
        }
    }

    let topology = Topology::build(&Shape {
        senders: args.senders,
        uplink_rates_bps: rates.clone(),
        buffer_bytes: args.buffer,
    })
    .context("building the namespace test bed")?;
    let config = args.balancer_config(&topology)?;
    let maps = (0..topology.senders.len())
        .map(|i| topology.attach(Port::Downlink(i), vec![Attachment::Lb], config.clone()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let loop_maps = (!args.closed_loop.open_loop)
        .then(|| closed_loop::attach(&topology, &args.closed_loop))
        .transpose()?;
    let dcqcn = loop_maps
        .is_some()
        .then(|| DcqcnParams::scaled_to(args.uplink_rate, args.size));

    report::print_header(args, &topology);
    let total_frames: u64 = workloads
        .iter()
        .map(|s| s.flows.iter().map(|f| f.frames).sum::<u64>() * u64::from(s.steps))
        .sum::<u64>()
        * args.policies.len() as u64;
    let progress = ProgressBar::new(total_frames).with_style(
        ProgressStyle::with_template(
            "{msg:20} [{bar:40}] {human_pos}/{human_len} frames, {elapsed} elapsed, ~{eta} left",
        )?
        .progress_chars("=> "),
    );
    let mut runs = Vec::new();
    'all: for schedule in &workloads {
        for &policy in &args.policies {
            if stop.is_stopped() {
                break 'all;
            }
            progress.set_message(format!("{} {}", schedule.name, policy.name()));
            set_policy(&topology, &maps, policy)?;
            let before = uplink_loads(&maps, &topology)?;
            let loop_before = loop_counts(loop_maps.as_ref())?;
            let mut steps = Vec::new();
            for _ in 0..schedule.steps {
                if stop.is_stopped() {
                    break;
                }
                steps.push(run_flows(
                    &topology,
                    schedule,
                    (frame_len, dcqcn),
                    &progress,
                    stop,
                )?);
            }
            let after = uplink_loads(&maps, &topology)?;
            let mut run = judge(policy, schedule, (&before, &after), &steps);
            run.closed_loop = loop_counts(loop_maps.as_ref())?
                .zip(loop_before)
                .map(|(after, before)| after.since(&before));
            progress.suspend(|| report::print_row(&run));
            runs.push(run);
        }
    }
    progress.finish_and_clear();
    let summary = Summary {
        options: args,
        path_rates_bps: rates,
        runs: &runs,
        stopped_early: stop.is_stopped(),
    };
    report::print_verdict(&runs);
    report::write(&args.out, &summary, &runs)
}

/// The closed loop's counters now, if it runs.
fn loop_counts(maps: Option<&LoopMaps>) -> anyhow::Result<Option<LoopCounts>> {
    maps.map(LoopMaps::read).transpose()
}

/// Payload bytes an untagged RoCEv2 frame of `size` bytes to `dst_ip` carries.
fn payload_per_frame(size: usize, dst_ip: IpAddr) -> anyhow::Result<u64> {
    let overhead = RoceFrame::untagged_overhead(dst_ip);
    match size.checked_sub(overhead) {
        Some(payload) if payload > 0 => Ok(payload as u64),
        _ => bail!(
            "--size {size} leaves no payload after a RoCEv2 frame's {overhead} bytes of headers"
        ),
    }
}

/// Switches every downlink's balancer to `policy`, live.
fn set_policy(topology: &Topology, maps: &[PinnedMaps], policy: Policy) -> anyhow::Result<()> {
    for m in maps {
        let mut config = m.read_config()?;
        config.set(Setting::Lb(LbSetting::Policy(policy)))?;
        // Writing resolves the next hops, in the balancer's namespace.
        topology.balancer.run(|| m.write_config(&config))??;
    }
    Ok(())
}

/// Every uplink's counters now, summed over the downlinks, in the topology's order.
fn uplink_loads(maps: &[PinnedMaps], topology: &Topology) -> anyhow::Result<Vec<UplinkLoad>> {
    let mut by_name: BTreeMap<String, UplinkLoad> = BTreeMap::new();
    for m in maps {
        let (_, uplinks) = LbStats::read(m)?;
        for u in uplinks {
            let load = by_name.entry(u.ifname.clone()).or_insert(UplinkLoad {
                ifname: u.ifname.clone(),
                rate_bps: 0,
                tx_packets: 0,
                tx_bytes: 0,
                flowlets: 0,
                path_changes: 0,
                spine_rx_packets: 0,
            });
            load.tx_packets += u.counters.tx_packets;
            load.tx_bytes += u.counters.tx_bytes;
            load.flowlets += u.counters.flowlets;
            load.path_changes += u.counters.path_changes;
        }
    }
    topology
        .uplinks
        .iter()
        .map(|path| {
            let mut load = by_name
                .remove(&path.uplink.ifname)
                .with_context(|| format!("no counters for uplink {}", path.uplink.ifname))?;
            load.rate_bps = path.rate_bps;
            load.spine_rx_packets = path.spine_rx_packets()?;
            Ok(load)
        })
        .collect()
}

/// Each flow's sender and its QP's index among that sender's QPs (flows in order).
fn placement(flows: &[Flow]) -> Vec<(usize, usize)> {
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    flows
        .iter()
        .map(|f| {
            let index = count.entry(f.sender).or_default();
            *index += 1;
            (f.sender as usize, *index - 1)
        })
        .collect()
}

/// QP numbers of sender `s` (from 0) start at `(s + 1) << 16`.
fn qp_base(sender: usize) -> u32 {
    (sender as u32 + 1) << 16
}

/// What the senders (by their index in the lab) and the receiver saw of one run of a
/// schedule's flows.
struct Step {
    sent: BTreeMap<usize, SendSummary>,
    received: RecvSummary,
}

impl Step {
    /// From the first sender's start to the last frame's arrival.
    fn duration(&self) -> Duration {
        let Some(started) = self.sent.values().map(|s| s.started).min() else {
            return Duration::ZERO;
        };
        let last_ns = self
            .received
            .qps
            .iter()
            .map(|q| q.last_ns)
            .max()
            .unwrap_or(0);
        (self.received.started + Duration::from_nanos(last_ns)).saturating_duration_since(started)
    }
}

/// Sends the flows of `schedule` (once) from the senders and counts them at the receiver;
/// returns what each sender and the receiver saw. The receiver stops when every frame
/// arrived, or, when some were lost, [`IDLE_AFTER_LOSS`] after the senders finished and the
/// last frame arrived.
fn run_flows(
    topology: &Topology,
    schedule: &Schedule,
    (frame_len, dcqcn): (usize, Option<DcqcnParams>),
    progress: &ProgressBar,
    stop: &StopFlag,
) -> anyhow::Result<Step> {
    let flows = &schedule.flows;
    let k = topology.senders.len();
    let mut per_sender: Vec<Vec<FlowRate>> = (0..k).map(|_| Vec::new()).collect();
    for flow in flows {
        per_sender
            .get_mut(flow.sender as usize)
            .context("a flow for a sender the lab does not have")?
            .push(FlowRate::new(*flow, dcqcn)?);
    }
    let mut senders = Vec::new();
    let mut sender_ids = Vec::new();
    for (s, (link, rates)) in topology.senders.iter().zip(per_sender).enumerate() {
        if rates.is_empty() {
            continue;
        }
        sender_ids.push(s);
        let mut config = SendConfig::new(
            link.sender.ifname.clone(),
            IpAddr::V4(topology.receiver.ipv4),
        );
        config.dst_mac = Some(Address(link.downlink.mac));
        config.size = frame_len;
        config.qps = u32::try_from(rates.len())?;
        config.qp_base = qp_base(s);
        config.sport_base = SPORT_BASE;
        config.qps_per_port = schedule.qps_per_port;
        config.count = Some(rates.iter().map(|r| r.flow.frames).sum());
        config.duration = None;
        senders.push(Sending {
            sender: link.ns.run(|| Sender::open(config))??,
            rates,
            // Each flow starts at its own time (`RateController::start`).
            start: Duration::ZERO,
        });
    }
    let expected: u64 = flows.iter().map(|f| f.frames).sum();
    let receive = RecvConfig {
        iface: topology.receiver.ifname.clone(),
        duration: None,
        count: Some(expected),
        idle_timeout: None,
        cnp: None,
    };
    let receiver = topology.receiver_ns.run(|| Receiver::open(receive))??;
    let receiver_stop = receiver.stop_flag();
    let arrived = AtomicU64::new(0);
    let count_arrivals = |interval: &Interval| {
        let packets = interval.qps.iter().map(|q| q.packets).sum();
        arrived.fetch_add(packets, Ordering::Relaxed);
        progress.inc(packets);
    };
    // Ctrl-C: the harness stops everyone; otherwise the senders end with their flows, the
    // receiver when every frame arrived or, after a loss, when the senders are done and the
    // path has been silent for IDLE_AFTER_LOSS.
    let ran = harness::run(
        senders,
        receiver,
        Some((PROGRESS_EVERY, &count_arrivals)),
        stop,
        |running| {
            let (mut last_arrived, mut last_activity) = (0, Instant::now());
            while !running.receiver_finished() && !stop.is_stopped() {
                let now = arrived.load(Ordering::Relaxed);
                if now != last_arrived || !running.senders_finished() {
                    (last_arrived, last_activity) = (now, Instant::now());
                } else if last_activity.elapsed() >= IDLE_AFTER_LOSS {
                    receiver_stop.stop();
                }
                std::thread::sleep(PROGRESS_EVERY);
            }
            Ok(Some(()))
        },
    )?
    .expect("the watch always returns Some");
    Ok(Step {
        sent: sender_ids
            .into_iter()
            .zip(ran.sent.into_iter().map(|(summary, _)| summary))
            .collect(),
        received: ran.received,
    })
}

/// Judges one run from the uplink counters before and after, and what the senders sent and
/// the receiver counted in each of its steps.
fn judge(
    policy: Policy,
    schedule: &Schedule,
    (before, after): (&[UplinkLoad], &[UplinkLoad]),
    steps: &[Step],
) -> PolicyRun {
    let uplinks: Vec<UplinkLoad> = before
        .iter()
        .zip(after)
        .map(|(b, a)| UplinkLoad {
            ifname: a.ifname.clone(),
            rate_bps: a.rate_bps,
            tx_packets: a.tx_packets - b.tx_packets,
            tx_bytes: a.tx_bytes - b.tx_bytes,
            flowlets: a.flowlets - b.flowlets,
            path_changes: a.path_changes - b.path_changes,
            spine_rx_packets: a.spine_rx_packets - b.spine_rx_packets,
        })
        .collect();
    let bytes: Vec<u64> = uplinks.iter().map(|u| u.tx_bytes).collect();
    let fct_ms: Vec<f64> = steps
        .iter()
        .flat_map(|step| completion_ms(&schedule.flows, step))
        .collect();
    let sum = |of: fn(&Step) -> u64| steps.iter().map(of).sum::<u64>();
    let packets_received = sum(|s| s.received.frames.packets);
    let collective = schedule.collective.map(|c| {
        let time = steps.iter().map(Step::duration).sum::<Duration>();
        let seconds = time.as_secs_f64().max(f64::MIN_POSITIVE);
        CollectiveRun {
            ranks: c.ranks,
            bytes: c.bytes,
            steps: u32::try_from(steps.len()).unwrap_or(u32::MAX),
            qps_per_conn: schedule.qps_per_port,
            time_ms: time.as_secs_f64() * 1e3,
            algbw_bps: c.algbw(seconds) * 8.0,
            busbw_bps: c.busbw(seconds) * 8.0,
        }
    });
    PolicyRun {
        workload: schedule.name.clone(),
        policy: policy.name(),
        balance: Balance::of(&bytes),
        uplinks,
        reordered_fraction: reordered_fraction(
            sum(|s| s.received.frames.reordered),
            packets_received,
        ),
        packets_sent: sum(|s| s.sent.values().map(|s| s.packets).sum()),
        packets_received,
        receiver_drops: sum(|s| s.received.socket_drops),
        flows: schedule.flows.len() * steps.len(),
        fct: Completion::of(fct_ms),
        sender_stalls: sum(|s| s.sent.values().map(|s| s.stalls).sum()),
        closed_loop: None,
        collective,
    }
}

/// Completion times (ms) of the flows of `step` that arrived whole: from the flow's start at
/// its sender to its last frame at the receiver.
fn completion_ms(flows: &[Flow], step: &Step) -> Vec<f64> {
    let arrivals: BTreeMap<(IpAddr, u32), (u64, u64)> = step
        .received
        .qps
        .iter()
        .map(|q| ((q.src, q.qp), (q.frames.packets, q.last_ns)))
        .collect();
    flows
        .iter()
        .zip(placement(flows))
        .filter_map(|(flow, (s, index))| {
            let summary = step.sent.get(&s)?;
            let qp = qp_base(s) + index as u32;
            let &(packets, last_ns) = arrivals.get(&(summary.src_ip, qp))?;
            (packets == flow.frames).then(|| {
                let started = summary.started + flow.start;
                let finished = step.received.started + Duration::from_nanos(last_ns);
                finished.saturating_duration_since(started).as_secs_f64() * 1e3
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{workload::Messages, *};

    #[test]
    fn weights_follow_rates() {
        assert_eq!(
            wcmp_weights(&[100_000_000, 100_000_000, 50_000_000]),
            [2, 2, 1]
        );
        assert_eq!(wcmp_weights(&[7, 7]), [1, 1]);
        // 1000:1 does not fit 1..=256: scaled, the small one kept at 1.
        assert_eq!(wcmp_weights(&[1000, 1]), [256, 1]);
    }

    #[test]
    fn each_sender_numbers_its_own_qps() {
        let flow = |sender| Flow {
            sender,
            start: Duration::ZERO,
            frames: 1,
            rate_bps: 1,
            messages: None,
        };
        let flows = [flow(0), flow(1), flow(1), flow(0), flow(1)];
        assert_eq!(placement(&flows), [(0, 0), (1, 0), (1, 1), (0, 1), (1, 2)]);
        assert_eq!(qp_base(1), 2 << 16);
    }

    #[test]
    fn a_flow_pauses_between_messages_and_stops_after_its_frames() {
        let mut rate = FlowRate::new(
            Flow {
                sender: 0,
                start: Duration::from_millis(3),
                frames: 5,
                rate_bps: 1000,
                messages: Some(Messages {
                    frames: 2,
                    gap: Duration::from_millis(100),
                }),
            },
            None,
        )
        .unwrap();
        assert_eq!(rate.start(), Duration::from_millis(3));
        let mut rates = Vec::new();
        for _ in 0..5 {
            rate.on_sent(Duration::ZERO, 8000);
            rates.push(rate.rate_bps());
        }
        // 8000 bits spaced by 100 ms: 80 kb/s for the frame after each message.
        assert_eq!(rates, [1000, 80_000, 1000, 80_000, 0]);
    }
}
