//! What a rank reports: the time of each iteration and step at this rank, nccl-tests'
//! algorithm and bus bandwidths of the mean timed iteration ([`workload::Collective`]), and each
//! QP's figures, from the times the run loop recorded.

use serde::Serialize;

use super::plan::source_port;
use crate::rc::{RecvCounts, SendCounts};
use workload::{Flow, FlowId, Flows};

/// What happened to the flows at this rank.
pub(super) struct Timeline<'a> {
    /// The expanded workload.
    pub(super) flows: &'a Flows,
    /// This rank.
    pub(super) rank: u32,
    /// Iterations not timed, from the first.
    pub(super) warmup: u32,
    /// When each flow this rank sends was posted, ns, by flow id.
    pub(super) posted: &'a [Option<u64>],
    /// When each flow was done here (sent: acknowledged; received: delivered), ns.
    pub(super) done: &'a [Option<u64>],
}

/// One QP as the run loop leaves it.
pub(super) struct QpRecord<'a> {
    /// Destination QP number.
    pub(super) qpn: u32,
    /// The other end's rank.
    pub(super) peer: u32,
    /// Its flows.
    pub(super) flows: &'a [FlowId],
    /// Its first post (send) or first packet (recv), ns.
    pub(super) first_ns: Option<u64>,
    /// What its requester or responder counted.
    pub(super) counts: QpCounts,
}

/// A requester's or a responder's counts.
pub(super) enum QpCounts {
    /// This rank sends on the QP.
    Sent(SendCounts),
    /// This rank receives on it.
    Received(RecvCounts),
}

/// What the run loop counted besides the QPs.
pub(super) struct Counts {
    /// CNPs received.
    pub(super) cnps: u64,
    /// Frames ignored.
    pub(super) ignored: u64,
    /// Turns the send loop held data for a pause.
    pub(super) pfc_holds: u64,
    /// Whether the interface is attached.
    pub(super) pfc_honoured: bool,
}

/// One step of the collective at this rank, over the timed iterations.
#[derive(Clone, Debug, Serialize)]
pub struct StepTime {
    /// The step, from 0.
    pub step: u32,
    /// Mean time, µs.
    pub mean_us: f64,
    /// Longest, µs.
    pub max_us: f64,
}

/// One iteration at this rank.
#[derive(Clone, Debug, Serialize)]
pub struct IterationTime {
    /// The iteration, from 0.
    pub iteration: u32,
    /// Its time, µs.
    pub time_us: f64,
    /// Whether it is a warm-up iteration (not in the means).
    pub warmup: bool,
}

/// One QP's figures.
#[derive(Clone, Debug, Serialize)]
pub struct QpTime {
    /// Destination QP number.
    pub qpn: u32,
    /// UDP source port.
    pub sport: u16,
    /// The peer's rank.
    pub peer: u32,
    /// `send` or `recv`.
    pub direction: &'static str,
    /// Payload bytes acknowledged (send) or delivered (recv).
    pub bytes: u64,
    /// Payload rate from its first post (send) or its first packet (recv) to its last
    /// completion, Gb/s.
    pub gbps: f64,
    /// The requester's counts (send).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<SendCounts>,
    /// The responder's counts (recv).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<RecvCounts>,
}

/// What one rank did.
#[derive(Clone, Debug, Serialize)]
pub struct RankSummary {
    /// This rank.
    pub rank: u32,
    /// Ranks in all.
    pub ranks: u32,
    /// `allreduce` or `alltoall`.
    pub collective: &'static str,
    /// nccl-tests' size: bytes per rank.
    pub size_bytes: u64,
    /// QPs per connection.
    pub qps_per_conn: u16,
    /// Every iteration's time.
    pub iterations: Vec<IterationTime>,
    /// Each step's time over the timed iterations.
    pub steps: Vec<StepTime>,
    /// Mean timed iteration, µs.
    pub time_us: f64,
    /// nccl-tests' algorithm bandwidth of the mean timed iteration, GB/s (10^9 bytes/s).
    pub algbw_gbps: f64,
    /// nccl-tests' bus bandwidth, GB/s.
    pub busbw_gbps: f64,
    /// From the first post to the last completion, µs.
    pub total_us: f64,
    /// Per QP.
    pub qps: Vec<QpTime>,
    /// CNPs received.
    pub cnps: u64,
    /// Whether the interface is attached (`lossless host attach`), so data waited out the
    /// pauses of its priority.
    pub pfc_honoured: bool,
    /// Turns of the send loop that held data because the priority was paused.
    pub pfc_holds: u64,
    /// Frames this rank took no part in (other traffic), ignored.
    pub ignored_frames: u64,
}

/// From the first post of a flow `rank` sends among `flows` to the last completion among them
/// (sends acknowledged, receives delivered), ns.
fn span_ns(flows: &[&Flow], rank: u32, posted: &[Option<u64>], done: &[Option<u64>]) -> u64 {
    let first = flows
        .iter()
        .filter(|f| f.src == rank)
        .filter_map(|f| posted[f.id as usize])
        .min();
    let last = flows.iter().filter_map(|f| done[f.id as usize]).max();
    match (first, last) {
        (Some(first), Some(last)) => last.saturating_sub(first),
        _ => 0,
    }
}

/// The summary of a finished run.
pub(super) fn summarise(t: &Timeline, records: &[QpRecord], counts: Counts) -> RankSummary {
    let c = t.flows.collectives[0];
    let us = |ns: u64| ns as f64 / 1000.0;
    let rank = t.rank;
    let mine = |f: &&Flow| f.src == rank || f.dst == rank;
    let span = |flows: Vec<&Flow>| us(span_ns(&flows, rank, t.posted, t.done));
    let of = |keep: &dyn Fn(&Flow) -> bool| -> Vec<&Flow> {
        t.flows
            .flows
            .iter()
            .filter(mine)
            .filter(|f| keep(f))
            .collect()
    };
    let iterations: Vec<IterationTime> = (0..c.iterations)
        .map(|it| IterationTime {
            iteration: it,
            time_us: span(of(&|f| f.step.is_some_and(|s| s.iteration == it))),
            warmup: it < t.warmup,
        })
        .collect();
    let timed: Vec<f64> = iterations
        .iter()
        .filter(|i| !i.warmup)
        .map(|i| i.time_us)
        .collect();
    let time_us = timed.iter().sum::<f64>() / timed.len() as f64;
    let steps = (0..c.steps)
        .map(|k| {
            let times: Vec<f64> = (t.warmup..c.iterations)
                .map(|it| {
                    span(of(&|f| {
                        f.step.is_some_and(|s| s.iteration == it && s.step == k)
                    }))
                })
                .collect();
            StepTime {
                step: k,
                mean_us: times.iter().sum::<f64>() / times.len() as f64,
                max_us: times.iter().copied().fold(0.0, f64::max),
            }
        })
        .collect();
    let seconds = time_us / 1e6;
    let qps = records
        .iter()
        .map(|r| {
            let (direction, bytes, sent, received) = match r.counts {
                QpCounts::Sent(s) => ("send", s.bytes, Some(s), None),
                QpCounts::Received(c) => ("recv", c.bytes, None, Some(c)),
            };
            let last = r.flows.iter().filter_map(|&f| t.done[f as usize]).max();
            let gbps = match (r.first_ns, last) {
                (Some(first), Some(last)) if last > first => {
                    bytes as f64 * 8.0 / (last - first) as f64
                }
                _ => 0.0,
            };
            QpTime {
                qpn: r.qpn,
                sport: source_port(r.qpn),
                peer: r.peer,
                direction,
                bytes,
                gbps,
                sent,
                received,
            }
        })
        .collect();
    RankSummary {
        rank,
        ranks: c.ranks,
        collective: c.kind.name(),
        size_bytes: c.bytes,
        qps_per_conn: t.flows.connections.first().map_or(1, |k| k.qps),
        iterations,
        steps,
        time_us,
        algbw_gbps: c.algbw(seconds) / 1e9,
        busbw_gbps: c.busbw(seconds) / 1e9,
        total_us: span(of(&|_| true)),
        qps,
        cnps: counts.cnps,
        pfc_honoured: counts.pfc_honoured,
        pfc_holds: counts.pfc_holds,
        ignored_frames: counts.ignored,
    }
}
