//! The load-balancing lab's workloads: which flows start when, how large they are and how fast
//! each is sent. A flow is one QP with its own PSNs; in web search and elephants also its own
//! UDP source port (ECMP entropy), while the QPs of a collective's connection share theirs.
//! Workloads are drawn from a seeded generator, so every policy runs the very same flows.

use std::time::Duration;

use rand::{rngs::StdRng, Rng as _, SeedableRng as _};
use serde::Serialize;
use workload::{Collective, CollectiveKind};

/// The web-search flow-size distribution (DCTCP's measurement, as the HPCC and pFabric
/// simulators ship it): (flow size in bytes, cumulative probability), linear in between.
/// Heavy-tailed: most flows are short, most bytes are in the few long ones.
const WEB_SEARCH_CDF: [(f64, f64); 12] = [
    (0.0, 0.0),
    (10_000.0, 0.15),
    (20_000.0, 0.20),
    (30_000.0, 0.30),
    (50_000.0, 0.40),
    (80_000.0, 0.53),
    (200_000.0, 0.60),
    (1_000_000.0, 0.70),
    (2_000_000.0, 0.80),
    (5_000_000.0, 0.90),
    (10_000_000.0, 0.97),
    (30_000_000.0, 1.00),
];

/// A workload of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Poisson arrivals of flows with web-search sizes, each at the flow rate.
    Websearch,
    /// A few long flows that start together and share the load, each a train of messages
    /// separated by idle gaps.
    Elephants,
    /// The cross-fabric half of a ring AllReduce: each sender is a rank whose ring neighbour
    /// sits behind the fabric, with one connection of several QPs that share its UDP source
    /// port; the steps run one after the other, each once the previous one's data arrived.
    Allreduce,
}

impl WorkloadKind {
    /// Its name on the command line and in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Websearch => "websearch",
            WorkloadKind::Elephants => "elephants",
            WorkloadKind::Allreduce => "allreduce",
        }
    }
}

/// What shapes a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadParams {
    /// Offered load, bits per second on the wire, averaged over `window`.
    pub offered_bps: f64,
    /// Flows arrive during this window (web search); elephants last about this long.
    pub window: Duration,
    /// Web-search flow sizes are multiplied by this (the distribution is for 10–100 Gb/s
    /// links; the lab's links are slower).
    pub size_scale: f64,
    /// The rate of every web-search flow, bits per second on the wire.
    pub flow_rate_bps: u64,
    /// Number of elephants.
    pub elephants: u32,
    /// The idle gap between an elephant's messages.
    pub message_gap: Duration,
    /// The AllReduce: its ranks (twice the senders: each sender's neighbour is across the
    /// fabric), buffer size per rank and steps.
    pub collective: Collective,
    /// The senders (the ranks on this side of the fabric).
    pub senders: u32,
    /// QPs per connection of the AllReduce.
    pub qps_per_conn: u32,
    /// Payload bytes one frame carries.
    pub payload_per_frame: u64,
    /// Bits one frame occupies on the wire.
    pub wire_bits_per_frame: u64,
    /// Seed of the generator.
    pub seed: u64,
}

/// One flow: when it starts, how many frames it sends and how fast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The sender that sends it (from 0).
    pub sender: u32,
    /// Start, since the workload began.
    pub start: Duration,
    /// Frames (at least one).
    pub frames: u64,
    /// Rate on the wire while it sends.
    pub rate_bps: u64,
    /// Without messages the flow sends without a pause; with them it pauses between messages.
    pub messages: Option<Messages>,
}

/// A flow's frames grouped into messages, with an idle gap after each (as an application
/// that computes between transfers): a gap longer than the flowlet timeout starts a flowlet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Messages {
    /// Frames of one message.
    pub frames: u64,
    /// Idle time after each.
    pub gap: Duration,
}

/// How a workload runs: its flows once, or, for a collective, its flows once per step, each
/// step after every frame of the previous one arrived (a ring step waits for its neighbour's
/// data).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The workload's name in the outputs.
    pub name: String,
    /// The flows (of one step, for a collective), ordered by start.
    pub flows: Vec<Flow>,
    /// How many times they run.
    pub steps: u32,
    /// QPs of one sender that share a UDP source port: 1, or a collective's QPs per
    /// connection.
    pub qps_per_port: u32,
    /// The collective, if the workload is one.
    pub collective: Option<Collective>,
}

/// The schedule of workload `kind`. Flows of web search and elephants go to the senders in
/// turn, in order of start.
pub fn schedule(kind: WorkloadKind, params: &WorkloadParams) -> Schedule {
    let mut rng = StdRng::seed_from_u64(params.seed);
    let once = |mut flows: Vec<Flow>| {
        for (i, flow) in flows.iter_mut().enumerate() {
            flow.sender = (i % params.senders.max(1) as usize) as u32;
        }
        Schedule {
            name: kind.name().to_owned(),
            flows,
            steps: 1,
            qps_per_port: 1,
            collective: None,
        }
    };
    match kind {
        WorkloadKind::Websearch => once(web_search(params, &mut rng)),
        WorkloadKind::Elephants => once(elephants(params, &mut rng)),
        WorkloadKind::Allreduce => Schedule {
            name: kind.name().to_owned(),
            flows: allreduce_step(params),
            steps: params.collective.steps,
            qps_per_port: params.qps_per_conn,
            collective: Some(params.collective),
        },
    }
}

/// The ring AllReduce of `senders` ranks and as many across the fabric, `bytes` per rank,
/// once: `2(n − 1)` steps.
pub fn allreduce(senders: u32, bytes: u64) -> Collective {
    let ranks = 2 * senders;
    Collective {
        kind: CollectiveKind::AllReduce,
        ranks,
        bytes,
        iterations: 1,
        steps: 2 * (ranks - 1),
        part: 0,
    }
}

/// A `--workload` argument: some of the lab's own kinds (`websearch,elephants`), or one
/// workload of the format every tool reads (a short form such as `incast:senders=4,size=1MB`,
/// or a TOML file; docs/workloads.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum WorkloadArg {
    /// The lab's kinds.
    Kinds(Vec<WorkloadKind>),
    /// A workload of the one format, as given.
    Format(String),
}

/// Reads a `--workload` argument: a comma list made only of the lab's kind names is those
/// kinds; anything else is one workload of the one format (read when the lab starts).
pub fn parse_workload_arg(text: &str) -> anyhow::Result<WorkloadArg> {
    use clap::ValueEnum as _;
    let kinds: Option<Vec<WorkloadKind>> = text
        .split(',')
        .map(|name| WorkloadKind::from_str(name.trim(), false).ok())
        .collect();
    match kinds {
        Some(kinds) => Ok(WorkloadArg::Kinds(kinds)),
        None if text.trim().is_empty() => anyhow::bail!("an empty workload"),
        None => Ok(WorkloadArg::Format(text.to_owned())),
    }
}

/// The schedule of a workload of the one format, expanded onto the lab's endpoints: endpoint 0
/// is the receiver, endpoints 1..=senders the senders (so an incast's or a microburst's rank
/// 0, its receiver, is the lab's). Every flow must go from a sender to the receiver and start
/// at a time: the lab carries traffic one way, and its runs have no dependencies between
/// flows (its own `allreduce` is the collective it runs). Each flow is its own QP at the flow
/// rate; rounds a format sender sends on one connection are separate QPs here.
pub fn from_format(text: &str, params: &WorkloadParams) -> anyhow::Result<Schedule> {
    let spec = workload::Workload::parse_args(&[text], &workload::Sources::from_env())?;
    let endpoints = workload::Endpoints {
        count: params.senders + 1,
        rate_bps: params.flow_rate_bps,
    };
    let expanded = workload::expand(&spec, &endpoints, params.seed)?;
    let starts = expanded
        .flows
        .iter()
        .map(|f| match f.start {
            workload::Start::At(ps) => Ok(ps),
            workload::Start::After(_) => Err(f.id),
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|id| {
            anyhow::anyhow!(
                "workload {text}: flow {id} waits for other flows, which the lab does not run \
                 (its own allreduce workload is the collective it runs)"
            )
        })?;
    let mut flows = Vec::with_capacity(expanded.flows.len());
    for (flow, ps) in expanded.flows.iter().zip(starts) {
        if flow.dst != 0 || flow.src == 0 {
            anyhow::bail!(
                "workload {text}: a flow from endpoint {} to endpoint {}, but the lab carries \
                 traffic from its senders (endpoints 1..={}) to its one receiver (endpoint 0); \
                 an incast or a microburst fits it, lossless sim and lossless net run the rest",
                flow.src,
                flow.dst,
                params.senders
            );
        }
        flows.push(Flow {
            sender: flow.src - 1,
            start: Duration::from_nanos(ps / 1000),
            frames: flow.bytes.div_ceil(params.payload_per_frame).max(1),
            rate_bps: params.flow_rate_bps,
            messages: None,
        });
    }
    flows.sort_by_key(|f| f.start);
    let name = match text.split_once(':') {
        Some((kind, _)) => kind.to_owned(),
        None => std::path::Path::new(text)
            .file_stem()
            .map_or_else(|| text.to_owned(), |s| s.to_string_lossy().into_owned()),
    };
    Ok(Schedule {
        name,
        flows,
        steps: 1,
        qps_per_port: 1,
        collective: None,
    })
}

/// One step of the AllReduce: every sender sends its neighbour a chunk of `S / n` bytes,
/// split evenly over its connection's QPs, which share the connection's rate (the flow rate).
/// Flow `q × senders + s` is QP `q` of sender `s`.
fn allreduce_step(params: &WorkloadParams) -> Vec<Flow> {
    let c = &params.collective;
    let qps = u64::from(params.qps_per_conn.max(1));
    let chunk = c.bytes / u64::from(c.ranks.max(1));
    let frames = chunk
        .div_ceil(qps)
        .div_ceil(params.payload_per_frame)
        .max(1);
    let senders = params.senders.max(1);
    (0..qps * u64::from(senders))
        .map(|i| Flow {
            sender: (i % u64::from(senders)) as u32,
            start: Duration::ZERO,
            frames,
            rate_bps: (params.flow_rate_bps / qps).max(1),
            messages: None,
        })
        .collect()
}

/// Poisson arrivals over the window at the rate that offers `offered_bps` with the mean size.
fn web_search(params: &WorkloadParams, rng: &mut StdRng) -> Vec<Flow> {
    let mean_bits = mean_size_bytes(params.size_scale) / params.payload_per_frame as f64
        * params.wire_bits_per_frame as f64;
    let arrivals_per_s = params.offered_bps / mean_bits;
    let mut flows = Vec::new();
    let mut at = 0.0;
    loop {
        // Exponential inter-arrival times; 1 - u keeps the logarithm finite.
        at += -(1.0 - rng.random::<f64>()).ln() / arrivals_per_s;
        if at >= params.window.as_secs_f64() {
            return flows;
        }
        let bytes = sample_size(rng.random(), params.size_scale);
        flows.push(Flow {
            sender: 0,
            start: Duration::from_secs_f64(at),
            frames: (bytes / params.payload_per_frame as f64).ceil().max(1.0) as u64,
            rate_bps: params.flow_rate_bps,
            messages: None,
        });
    }
}

/// `elephants` flows that together offer `offered_bps` on average for the window. Their
/// average rates differ (uniformly within ±20% of the mean, then scaled to the total), as real
/// elephants do. Each sends messages separated by idle gaps of `message_gap`; a message lasts
/// 0.5 to 1.5 gaps (per flow), sent fast enough to keep the flow's average, and each flow
/// starts at a random point of its first message-and-gap cycle, so the flows' messages do not
/// all start and stop together.
fn elephants(params: &WorkloadParams, rng: &mut StdRng) -> Vec<Flow> {
    let n = params.elephants.max(1);
    let weights: Vec<f64> = (0..n).map(|_| rng.random_range(0.8..1.2)).collect();
    let total: f64 = weights.iter().sum();
    let bits = params.wire_bits_per_frame as f64;
    let gap_s = params.message_gap.as_secs_f64();
    let mut flows: Vec<Flow> = weights
        .iter()
        .map(|w| {
            let average_bps = params.offered_bps * w / total;
            let message_s = gap_s * rng.random_range(0.5..1.5);
            let rate_bps = average_bps * (message_s + gap_s) / message_s;
            Flow {
                sender: 0,
                start: Duration::from_secs_f64(rng.random_range(0.0..message_s + gap_s)),
                frames: (average_bps * params.window.as_secs_f64() / bits).max(1.0) as u64,
                rate_bps: rate_bps as u64,
                messages: Some(Messages {
                    frames: (rate_bps * message_s / bits).max(1.0) as u64,
                    gap: params.message_gap,
                }),
            }
        })
        .collect();
    flows.sort_by_key(|f| f.start);
    flows
}

/// The size (bytes) at cumulative probability `u` of the scaled web-search distribution.
fn sample_size(u: f64, scale: f64) -> f64 {
    let i = WEB_SEARCH_CDF
        .iter()
        .position(|&(_, p)| p >= u)
        .unwrap_or(WEB_SEARCH_CDF.len() - 1)
        .max(1);
    let ((s0, p0), (s1, p1)) = (WEB_SEARCH_CDF[i - 1], WEB_SEARCH_CDF[i]);
    let size = s0 + (s1 - s0) * (u - p0) / (p1 - p0);
    size * scale
}

/// The mean size (bytes) of the scaled web-search distribution.
fn mean_size_bytes(scale: f64) -> f64 {
    WEB_SEARCH_CDF
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0)
        .sum::<f64>()
        * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> WorkloadParams {
        WorkloadParams {
            offered_bps: 200e6,
            window: Duration::from_secs(20),
            size_scale: 0.1,
            flow_rate_bps: 100_000_000,
            elephants: 8,
            message_gap: Duration::from_millis(100),
            collective: Collective {
                kind: CollectiveKind::AllReduce,
                ranks: 4,
                bytes: 8_000_000,
                iterations: 1,
                steps: 6,
                part: 0,
            },
            senders: 2,
            qps_per_conn: 4,
            payload_per_frame: 1000,
            wire_bits_per_frame: 8384,
            seed: 7,
        }
    }

    fn schedule_flows(kind: WorkloadKind, p: &WorkloadParams) -> Vec<Flow> {
        schedule(kind, p).flows
    }

    #[test]
    fn an_allreduce_step_is_a_chunk_per_connection_over_its_qps() {
        let s = schedule(WorkloadKind::Allreduce, &params());
        assert_eq!((s.steps, s.qps_per_port), (6, 4));
        // 2 senders x 4 QPs; a chunk of 8 MB / 4 ranks, a quarter on each QP at a quarter of
        // the flow rate.
        assert_eq!(s.flows.len(), 8);
        assert!(s
            .flows
            .iter()
            .all(|f| f.frames == 500 && f.rate_bps == 25_000_000));
        assert_eq!(s.collective.unwrap().ranks, 4);
        assert_eq!(schedule(WorkloadKind::Elephants, &params()).steps, 1);
    }

    #[test]
    fn a_workload_argument_is_lab_kinds_or_the_one_format() {
        assert_eq!(
            parse_workload_arg("websearch,elephants").unwrap(),
            WorkloadArg::Kinds(vec![WorkloadKind::Websearch, WorkloadKind::Elephants])
        );
        assert_eq!(
            parse_workload_arg("incast:senders=2,size=10KB").unwrap(),
            WorkloadArg::Format("incast:senders=2,size=10KB".into())
        );
        assert!(parse_workload_arg(" ").is_err());
    }

    #[test]
    fn an_incast_of_the_one_format_goes_from_the_senders_to_the_receiver() {
        let s = from_format("incast:senders=2,size=10KB,every=1ms,reps=2", &params()).unwrap();
        assert_eq!(s.name, "incast");
        let placed: Vec<(u32, Duration, u64)> = s
            .flows
            .iter()
            .map(|f| (f.sender, f.start, f.frames))
            .collect();
        let ms = Duration::from_millis(1);
        assert_eq!(
            placed,
            [
                (0, Duration::ZERO, 10),
                (1, Duration::ZERO, 10),
                (0, ms, 10),
                (1, ms, 10)
            ]
        );
    }

    #[test]
    fn workloads_the_lab_cannot_carry_are_refused_by_name() {
        // Every endpoint sends to another: flows toward the senders.
        let e = from_format("permutation:size=1KB", &params()).unwrap_err();
        assert!(
            format!("{e:#}").contains("to its one receiver (endpoint 0)"),
            "{e:#}"
        );
        // More senders than the lab has (2 senders and the receiver: 3 endpoints).
        let e = from_format("incast:senders=5,size=1KB", &params()).unwrap_err();
        assert!(format!("{e:#}").contains("6"), "{e:#}");
        // A ring: its later steps wait for the earlier ones.
        let e = from_format("allreduce:ranks=3,size=3KB", &params()).unwrap_err();
        assert!(format!("{e:#}").contains("waits for other flows"), "{e:#}");
    }

    #[test]
    fn web_search_sizes_follow_the_distribution() {
        assert_eq!(sample_size(0.0, 1.0), 0.0);
        assert_eq!(sample_size(0.15, 1.0), 10_000.0);
        assert!((sample_size(0.65, 1.0) - 600_000.0).abs() < 1e-6);
        assert_eq!(sample_size(1.0, 0.1), 3_000_000.0);
        // About 1.7 MB: the distribution's mean.
        assert!((mean_size_bytes(1.0) - 1_711_250.0).abs() < 1e-6);
    }

    #[test]
    fn web_search_offers_the_load() {
        let p = params();
        let flows = schedule_flows(WorkloadKind::Websearch, &p);
        let bits: u64 = flows.iter().map(|f| f.frames * p.wire_bits_per_frame).sum();
        let offered = bits as f64 / p.window.as_secs_f64();
        // Heavy tails: a 20 s sample is within 25% of the mean.
        assert!((offered / p.offered_bps - 1.0).abs() < 0.25, "{offered}");
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        assert!(flows.iter().all(|f| f.frames >= 1 && f.start < p.window));
        // Most flows are short, most bytes are in long flows.
        let short = flows.iter().filter(|f| f.frames <= 100).count();
        assert!(short * 2 > flows.len());
    }

    #[test]
    fn same_seed_same_flows() {
        let p = params();
        assert_eq!(
            schedule_flows(WorkloadKind::Websearch, &p),
            schedule_flows(WorkloadKind::Websearch, &p)
        );
        let other = WorkloadParams {
            seed: 8,
            ..p.clone()
        };
        assert_ne!(
            schedule_flows(WorkloadKind::Websearch, &p),
            schedule_flows(WorkloadKind::Websearch, &other)
        );
    }

    #[test]
    fn elephants_share_the_load_in_messages() {
        let p = params();
        let flows = schedule_flows(WorkloadKind::Elephants, &p);
        assert_eq!(flows.len(), 8);
        assert!(flows.windows(2).any(|w| w[0].rate_bps != w[1].rate_bps));
        let gap = p.message_gap.as_secs_f64();
        let mut average = 0.0;
        for f in &flows {
            let m = f.messages.unwrap();
            assert_eq!(m.gap, p.message_gap);
            // A message lasts half a gap to one and a half.
            let message = (m.frames * p.wire_bits_per_frame) as f64 / f.rate_bps as f64;
            assert!(
                (0.5 * gap - 1e-3..1.5 * gap + 1e-3).contains(&message),
                "{message}"
            );
            // The flow starts within its first cycle.
            assert!(f.start.as_secs_f64() < message + gap);
            // Sending and pausing, it keeps its average over the window.
            let bits = (f.frames * p.wire_bits_per_frame) as f64;
            let duty = message / (message + gap);
            average += bits / p.window.as_secs_f64();
            assert!(f.rate_bps as f64 * duty > 18e6 && f.rate_bps as f64 * duty < 32e6);
        }
        assert!((average - 200e6).abs() < 1e4, "{average}");
        // Different phases: not every flow starts in the same millisecond.
        assert!(flows.last().unwrap().start - flows[0].start > Duration::from_millis(10));
    }
}
