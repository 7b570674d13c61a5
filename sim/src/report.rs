//! What a run measured, as this field reads it: flow-completion slowdown (the FCT over the FCT
//! of the same flow alone on an idle path, HPCC's analysis) by flow-size bucket at p50, p95 and
//! p99; each collective's iteration times with nccl-tests' algorithm and bus bandwidth; the
//! uplinks' utilisation and imbalance per tier; PFC pauses and time paused; ECN marks; CNPs;
//! drops by cause; queue-depth percentiles; each switch queue's sojourn times, occupancy,
//! microbursts and time paused (as its traffic manager measured them); and checks that lossless.p4's own counters agree
//! with the simulator's accounting. [`summarise`] makes the [`Summary`] (serialisable: it is
//! `summary.json`); the CLI prints and plots it.

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use softswitch_core::runtime::CellIndex;
use softswitch_core::table::CounterCell;
use softswitch_core::tm::PRIORITIES;
use topology::fabric::End as FabricEnd;

use crate::event::NodeId;
use crate::frame::IP_OVERHEAD;
use crate::scenario::Built;
use crate::simulation::{Node, RunEnd, Simulation};
use crate::switch::QUEUE_FIGURES;
use crate::time::{frame_ps, Ps, US};

/// Flow-size buckets of the slowdown table: upper bounds, bytes (the last is open).
pub const SIZE_BUCKETS: [(u64, &str); 5] = [
    (10_000, "<10KB"),
    (100_000, "10KB-100KB"),
    (1_000_000, "100KB-1MB"),
    (10_000_000, "1MB-10MB"),
    (u64::MAX, ">=10MB"),
];

/// Percentiles of a set of values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// How many values.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    /// Of `values` (sorted here; nearest rank).
    pub fn of(values: &mut [f64]) -> Percentiles {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_by(f64::total_cmp);
        let at =
            |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        Percentiles {
            count: values.len() as u64,
            p50: at(0.50),
            p95: at(0.95),
            p99: at(0.99),
            max: values[values.len() - 1],
        }
    }
}

/// Slowdown of the flows of one size bucket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Its name (`10KB-100KB`).
    pub sizes: String,
    /// Slowdown percentiles of its completed flows.
    pub slowdown: Percentiles,
}

/// The flows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    /// Flows in the workload.
    pub total: u64,
    /// Flows that started.
    pub started: u64,
    /// Flows delivered whole.
    pub completed: u64,
    /// Slowdown of every completed flow.
    pub slowdown: Percentiles,
    /// Slowdown per size bucket.
    pub buckets: Vec<Bucket>,
    /// Flow-completion times, µs.
    pub fct_us: Percentiles,
    /// Completed flows whose slowdown was below 1 (the ideal is a lower bound: never, unless
    /// the model is wrong).
    pub faster_than_ideal: u64,
}

/// One collective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveReport {
    /// `allreduce` or `alltoall`.
    pub kind: String,
    /// Ranks.
    pub ranks: u32,
    /// Buffer per rank, bytes (nccl-tests' size).
    pub bytes: u64,
    /// Iterations that completed.
    pub completed: u32,
    /// Iterations asked for.
    pub iterations: u32,
    /// Each completed iteration's time, µs: from its first flow's start to its last flow's
    /// delivery.
    pub iteration_us: Vec<f64>,
    /// Mean iteration time, µs.
    pub mean_us: f64,
    /// nccl-tests' algorithm bandwidth of the mean iteration, GB/s (10^9 bytes/s).
    pub algbw_gbps: f64,
    /// nccl-tests' bus bandwidth of the mean iteration, GB/s.
    pub busbw_gbps: f64,
    /// Mean time of each step over the completed iterations, µs.
    pub step_us: Vec<f64>,
}

/// The upward links of one tier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierReport {
    /// The tier (1: hosts' links; 2: the first switch tier's uplinks; ...).
    pub tier: u8,
    /// Upward link directions.
    pub links: u64,
    /// Mean utilisation over the run, 0..1.
    pub mean_utilisation: f64,
    /// Highest utilisation.
    pub max_utilisation: f64,
    /// Bytes on the busiest link over the mean (1 is even).
    pub imbalance: f64,
}

/// PFC.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PfcReport {
    /// PAUSE frames (pause time above 0) the switches' program sent.
    pub pauses_sent: u64,
    /// Resumes (pause time 0) the switches' program sent.
    pub resumes_sent: u64,
    /// PAUSE frames the switches' MACs re-sent to keep a pause of the program's in force
    /// until its resume (absent from summaries written before there were any: 0).
    #[serde(default)]
    pub pauses_refreshed: u64,
    /// PAUSE frames that paused a switch port's priority (seen by its MAC).
    pub pauses_received_by_switches: u64,
    /// PAUSE frames that paused a host.
    pub pauses_received_by_hosts: u64,
    /// Time ports' and hosts' priorities were paused, summed, µs.
    pub paused_us_total: f64,
    /// The longest time one port's priority was paused, µs, and where.
    pub paused_us_max: f64,
    /// Where that was (`spine1:3 priority 3`).
    pub paused_most: String,
    /// Held packets' recirculations in the switches (lossless.p4's hold).
    pub hold_passes: u64,
}

/// ECN and CNPs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EcnReport {
    /// Packets the switches' program marked CE.
    pub marked: u64,
    /// Data packets hosts received marked CE.
    pub ce_received: u64,
    /// CNPs the switches' program sent.
    pub cnps_from_switches: u64,
    /// CNPs hosts sent.
    pub cnps_from_hosts: u64,
    /// CNPs hosts received.
    pub cnps_received: u64,
}

/// Drops, by cause.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DropReport {
    /// Refused by a full switch buffer.
    pub buffer_full: u64,
    /// Refused by a full queue.
    pub queue_full: u64,
    /// Dropped by the program (no route, TTL, not IPv4; PFC frames, which the program consumes,
    /// are not counted).
    pub program: u64,
    /// Lost on a failed link.
    pub link_down: u64,
    /// Sent to a port with no cable.
    pub unconnected: u64,
    /// Packets the program's loops and copies limits dropped.
    pub loops: u64,
}

impl DropReport {
    /// Every drop, whatever its cause.
    pub fn total(&self) -> u64 {
        self.buffer_full
            + self.queue_full
            + self.program
            + self.link_down
            + self.unconnected
            + self.loops
    }
}

/// The hosts' transport.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TransportReport {
    /// Data packets sent.
    pub data_packets: u64,
    /// Of which sent again (go-back-N).
    pub retransmitted: u64,
    /// NAKs sent.
    pub naks: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Packets received out of order and dropped.
    pub out_of_order: u64,
}

/// One switch queue (a port's priority), as the switch's traffic manager measured it on the
/// simulated clock (whole µs), with the time its MAC held it paused.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueReport {
    /// The switch.
    pub switch: String,
    /// The egress port.
    pub port: u16,
    /// The priority.
    pub priority: u8,
    /// Packets that left it.
    pub packets: u64,
    /// Sojourn times: bucket 0 under 1 µs, bucket i [2^(i−1), 2^i) µs (as softswitch's
    /// GetQueues).
    pub sojourn_us_buckets: Vec<u64>,
    /// Sojourn percentiles (tops of their buckets) and the longest, µs.
    pub sojourn_p50_us: u64,
    /// 99th percentile.
    pub sojourn_p99_us: u64,
    /// The longest.
    pub sojourn_max_us: u64,
    /// Packets arriving packets found ahead of them: median, 99th percentile, most.
    pub occupancy_p50_packets: u64,
    /// 99th percentile.
    pub occupancy_p99_packets: u64,
    /// The most.
    pub occupancy_max_packets: u64,
    /// Microbursts (back to half the threshold within the window) by the default rule.
    pub microbursts: u64,
    /// Episodes over the threshold longer than the window.
    pub bursts_over_window: u64,
    /// The last microburst's highest occupancy, packets.
    pub last_burst_peak_packets: u32,
    /// The last microburst's duration, µs.
    pub last_burst_duration_us: u64,
    /// Time a received PFC pause held the priority on this port, µs.
    pub paused_us: f64,
}

/// A check that the program's counters agree with the simulator's accounting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What is compared.
    pub what: String,
    /// The program's count.
    pub program: u64,
    /// The simulator's.
    pub simulator: u64,
    /// Whether they agree.
    pub agrees: bool,
}

/// Everything a run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How it ended.
    pub end: RunEnd,
    /// Simulated time, µs.
    pub simulated_us: f64,
    /// When the last frame arrived, µs: the traffic's span, over which utilisation is counted.
    pub active_us: f64,
    /// Events handled.
    pub events: u64,
    /// Frames sent on links (one per hop).
    pub packet_hops: u64,
    /// Switches and hosts.
    pub switches: u64,
    /// Hosts.
    pub hosts: u64,
    /// The flows.
    pub flows: FlowReport,
    /// The collectives.
    pub collectives: Vec<CollectiveReport>,
    /// The uplinks, per tier.
    pub tiers: Vec<TierReport>,
    /// PFC.
    pub pfc: PfcReport,
    /// ECN and CNPs.
    pub ecn: EcnReport,
    /// Drops.
    pub drops: DropReport,
    /// Transport.
    pub transport: TransportReport,
    /// Bytes queued in a port's priority as each data packet left, percentiles.
    pub queue_bytes: Percentiles,
    /// Every switch queue a packet left or a pause held, by switch, port and priority (absent
    /// from summaries written before there were any).
    #[serde(default)]
    pub queues: Vec<QueueReport>,
    /// Counter checks.
    pub checks: Vec<Check>,
}

/// A flow's path, for its ideal completion time: each hop's rate and delay.
type Path = Vec<(u64, Ps)>;

/// Shortest paths from host `src` of `built`'s fabric to every host: breadth first over the
/// fabric's links (every shortest path of a Clos has the same rates per tier).
fn paths_from(built: &Built, src: usize) -> Vec<Option<Path>> {
    let fabric = &built.fabric;
    let n_switches = fabric.switches.len();
    let index = |e: FabricEnd| match e {
        FabricEnd::Switch(s, _) => s.0,
        FabricEnd::Host(h) => n_switches + h.0,
    };
    let nodes = n_switches + fabric.hosts.len();
    let mut adjacency: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nodes];
    for (l, link) in fabric.links.iter().enumerate() {
        let (a, b) = (index(link.a), index(link.b));
        adjacency[a].push((b, l));
        adjacency[b].push((a, l));
    }
    let start = n_switches + src;
    let mut parent: Vec<Option<(usize, usize)>> = vec![None; nodes];
    let mut seen = vec![false; nodes];
    seen[start] = true;
    let mut queue = VecDeque::from([start]);
    while let Some(u) = queue.pop_front() {
        // Hosts forward nothing.
        if u >= n_switches && u != start {
            continue;
        }
        for &(v, l) in &adjacency[u] {
            if !seen[v] {
                seen[v] = true;
                parent[v] = Some((u, l));
                queue.push_back(v);
            }
        }
    }
    (0..fabric.hosts.len())
        .map(|h| {
            let mut at = n_switches + h;
            let mut path = Vec::new();
            while at != start {
                let (p, l) = parent[at]?;
                let link = &fabric.links[l];
                path.push((link.rate_bps, link.delay_ps));
                at = p;
            }
            path.reverse();
            Some(path)
        })
        .collect()
}

/// The time `bytes` take from start to delivery alone on an idle `path`, store and forward,
/// in packets of `payload` bytes: the first packet to the slowest hop, every packet through it,
/// the last packet on from it.
pub fn ideal_fct(path: &[(u64, Ps)], bytes: u64, payload: u64) -> Ps {
    let packets = bytes.div_ceil(payload).max(1);
    let frame = |p: u64| (wire::ethernet::HEADER_LEN as u64 + u64::from(IP_OVERHEAD) + p).max(60);
    let full = frame(payload.min(bytes));
    let last = frame(bytes - (packets - 1) * payload);
    let Some(slowest) = (0..path.len()).min_by_key(|&i| path[i].0) else {
        return 0;
    };
    let before: Ps = path[..slowest]
        .iter()
        .map(|&(r, d)| frame_ps(full, r) + d)
        .sum();
    let (rate, delay) = path[slowest];
    let through = (packets - 1) * frame_ps(full, rate) + frame_ps(last, rate) + delay;
    let after: Ps = path[slowest + 1..]
        .iter()
        .map(|&(r, d)| frame_ps(last, r) + d)
        .sum();
    before + through + after
}

/// A counter of the program summed over every cell of every switch, if the program has it.
fn program_counter(sim: &Simulation, nodes: &[NodeId], name: &str) -> Option<u64> {
    let mut total = 0;
    for &n in nodes {
        let s = sim.switch(n).ok()?;
        let id = s.core.instance_id(name)?;
        let mut i = 0;
        while let Ok(cell) = s.core.read_cell::<CounterCell>(id, CellIndex::Index(i)) {
            total += cell.packets;
            i += 1;
        }
    }
    Some(total)
}

/// One completed flow's times.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowRow {
    /// The flow.
    pub flow: u32,
    /// Its completion time, µs.
    pub fct_us: f64,
    /// Its completion time alone on an idle path, µs.
    pub ideal_us: f64,
    /// `fct_us / ideal_us`.
    pub slowdown: f64,
}

/// The summary of `built`'s run, which ended with `end`, and every completed flow's times.
pub fn summarise(built: &Built, end: RunEnd) -> (Summary, Vec<FlowRow>) {
    let sim = &built.sim;
    let now = sim.last_frame().max(1);
    let payload_of = |n: NodeId| sim.host(n).map_or(1, |h| h.payload_per_packet());
    // Flows.
    let mut paths: Vec<Option<Vec<Option<Path>>>> = vec![None; built.host_nodes.len()];
    let (mut slowdowns, mut fcts) = (Vec::new(), Vec::new());
    let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); SIZE_BUCKETS.len()];
    let (mut started, mut completed, mut faster) = (0, 0, 0);
    let mut rows = Vec::new();
    for (i, f) in built.flows.flows.iter().enumerate() {
        let t = sim.flows().times(i as u32);
        let Some(start) = t.start else { continue };
        started += 1;
        let Some(delivered) = t.delivered else {
            continue;
        };
        completed += 1;
        let fct = delivered - start;
        let from = paths[f.src as usize].get_or_insert_with(|| paths_from(built, f.src as usize));
        let Some(path) = &from[f.dst as usize] else {
            continue;
        };
        let ideal = ideal_fct(path, f.bytes, payload_of(built.host_nodes[f.src as usize]));
        let slowdown = fct as f64 / ideal.max(1) as f64;
        rows.push(FlowRow {
            flow: i as u32,
            fct_us: fct as f64 / US as f64,
            ideal_us: ideal as f64 / US as f64,
            slowdown,
        });
        if slowdown < 1.0 {
            faster += 1;
        }
        slowdowns.push(slowdown);
        fcts.push(fct as f64 / US as f64);
        let b = SIZE_BUCKETS
            .iter()
            .position(|(upper, _)| f.bytes < *upper)
            .unwrap_or(SIZE_BUCKETS.len() - 1);
        buckets[b].push(slowdown);
    }
    let flows = FlowReport {
        total: built.flows.flows.len() as u64,
        started,
        completed,
        slowdown: Percentiles::of(&mut slowdowns),
        buckets: SIZE_BUCKETS
            .iter()
            .zip(&mut buckets)
            .filter(|(_, v)| !v.is_empty())
            .map(|((_, name), v)| Bucket {
                sizes: name.to_string(),
                slowdown: Percentiles::of(v),
            })
            .collect(),
        fct_us: Percentiles::of(&mut fcts),
        faster_than_ideal: faster,
    };
    let summary = Summary {
        end,
        simulated_us: sim.now() as f64 / US as f64,
        active_us: sim.last_frame() as f64 / US as f64,
        events: sim.events_handled(),
        packet_hops: sim.links().iter().map(|l| l.stats.frames).sum(),
        switches: built.switch_nodes.len() as u64,
        hosts: built.host_nodes.len() as u64,
        flows,
        collectives: collectives(built),
        tiers: tiers(built, now),
        pfc: pfc(built, now),
        ecn: ecn(built),
        drops: drops(built),
        transport: transport(built),
        queue_bytes: queue_bytes(built),
        queues: queues(built, now),
        checks: checks(built),
    };
    (summary, rows)
}

fn collectives(built: &Built) -> Vec<CollectiveReport> {
    let sim = &built.sim;
    built
        .flows
        .collectives
        .iter()
        .enumerate()
        .map(|(c, coll)| {
            let iterations = coll.iterations as usize;
            let steps = coll.steps as usize;
            // Per iteration: first start, last delivery, flows left; per step likewise.
            let mut first = vec![Ps::MAX; iterations];
            let mut last = vec![0; iterations];
            let mut missing = vec![false; iterations];
            let mut step_first = vec![vec![Ps::MAX; steps]; iterations];
            let mut step_last = vec![vec![0; steps]; iterations];
            for (i, f) in built.flows.flows.iter().enumerate() {
                let Some(step) = f.step.filter(|s| usize::from(s.collective) == c) else {
                    continue;
                };
                let (it, st) = (step.iteration as usize, step.step as usize);
                let t = sim.flows().times(i as u32);
                match (t.start, t.delivered) {
                    (Some(s), Some(d)) => {
                        first[it] = first[it].min(s);
                        last[it] = last[it].max(d);
                        step_first[it][st] = step_first[it][st].min(s);
                        step_last[it][st] = step_last[it][st].max(d);
                    }
                    _ => missing[it] = true,
                }
            }
            let done: Vec<usize> = (0..iterations)
                .filter(|&i| !missing[i] && first[i] != Ps::MAX)
                .collect();
            let iteration_us: Vec<f64> = done
                .iter()
                .map(|&i| (last[i] - first[i]) as f64 / US as f64)
                .collect();
            let mean_us = if iteration_us.is_empty() {
                0.0
            } else {
                iteration_us.iter().sum::<f64>() / iteration_us.len() as f64
            };
            let seconds = mean_us / 1e6;
            let step_us = (0..steps)
                .map(|s| {
                    let times: Vec<f64> = done
                        .iter()
                        .filter(|&&i| step_first[i][s] != Ps::MAX)
                        .map(|&i| (step_last[i][s] - step_first[i][s]) as f64 / US as f64)
                        .collect();
                    if times.is_empty() {
                        0.0
                    } else {
                        times.iter().sum::<f64>() / times.len() as f64
                    }
                })
                .collect();
            let (algbw, busbw) = if seconds > 0.0 {
                (coll.algbw(seconds), coll.busbw(seconds))
            } else {
                (0.0, 0.0)
            };
            CollectiveReport {
                kind: coll.kind.name().to_string(),
                ranks: coll.ranks,
                bytes: coll.bytes,
                completed: done.len() as u32,
                iterations: coll.iterations,
                iteration_us,
                mean_us,
                algbw_gbps: algbw / 1e9,
                busbw_gbps: busbw / 1e9,
                step_us,
            }
        })
        .collect()
}

fn tiers(built: &Built, now: Ps) -> Vec<TierReport> {
    let fabric = &built.fabric;
    let sim = &built.sim;
    let mut by_tier: std::collections::BTreeMap<u8, Vec<(f64, u64)>> = Default::default();
    for link in &fabric.links {
        // The upward direction: from the lower end to the upper one.
        let from = match link.a {
            FabricEnd::Host(h) => crate::link::End {
                node: built.host_nodes[h.0],
                port: 0,
            },
            FabricEnd::Switch(s, p) => crate::link::End {
                node: built.switch_nodes[s.0],
                port: p,
            },
        };
        let Some(id) = sim.link_from(from) else {
            continue;
        };
        let l = &sim.links()[id as usize];
        by_tier
            .entry(link.tier)
            .or_default()
            .push((l.stats.busy_ps as f64 / now as f64, l.stats.bytes));
    }
    by_tier
        .into_iter()
        .map(|(tier, links)| {
            let n = links.len() as f64;
            let mean_bytes = links.iter().map(|l| l.1 as f64).sum::<f64>() / n;
            let max_bytes = links.iter().map(|l| l.1).max().unwrap_or(0) as f64;
            TierReport {
                tier,
                links: links.len() as u64,
                mean_utilisation: links.iter().map(|l| l.0).sum::<f64>() / n,
                max_utilisation: links.iter().map(|l| l.0).fold(0.0, f64::max),
                imbalance: if mean_bytes > 0.0 {
                    max_bytes / mean_bytes
                } else {
                    0.0
                },
            }
        })
        .collect()
}

fn pfc(built: &Built, now: Ps) -> PfcReport {
    let sim = &built.sim;
    let nodes = &built.switch_nodes;
    let mut r = PfcReport {
        pauses_sent: program_counter(sim, nodes, "LosslessIngress.pfc_pause_tx").unwrap_or(0),
        resumes_sent: program_counter(sim, nodes, "LosslessEgress.pfc_resume_tx").unwrap_or(0),
        hold_passes: program_counter(sim, nodes, "LosslessEgress.pfc_hold").unwrap_or(0),
        ..PfcReport::default()
    };
    let mut most = (0, String::new());
    for node in sim.nodes() {
        match node {
            Node::Switch(s) => {
                r.pauses_received_by_switches +=
                    s.stats.pauses_received.iter().flatten().sum::<u64>();
                r.pauses_refreshed += s.stats.pauses_refreshed;
                for (port, prios) in s.paused_ps(now).iter().enumerate() {
                    for (p, &ps) in prios.iter().enumerate() {
                        r.paused_us_total += ps as f64 / US as f64;
                        if ps > most.0 {
                            most = (ps, format!("{}:{port} priority {p}", s.name));
                        }
                    }
                }
            }
            Node::Host(h) => {
                r.pauses_received_by_hosts += h.stats.pauses_received;
                let ps = h.paused_ps(now);
                r.paused_us_total += ps as f64 / US as f64;
                if ps > most.0 {
                    most = (
                        ps,
                        format!("{} priority {}", h.config.name, h.config.data_class.1),
                    );
                }
            }
        }
    }
    r.paused_us_max = most.0 as f64 / US as f64;
    r.paused_most = most.1;
    r
}

fn host_total(sim: &Simulation, f: impl Fn(&crate::host::HostStats) -> u64) -> u64 {
    sim.nodes()
        .iter()
        .filter_map(|n| match n {
            Node::Host(h) => Some(f(&h.stats)),
            Node::Switch(_) => None,
        })
        .sum()
}

fn ecn(built: &Built) -> EcnReport {
    let sim = &built.sim;
    let nodes = &built.switch_nodes;
    EcnReport {
        marked: program_counter(sim, nodes, "LosslessEgress.ecn_marked").unwrap_or(0),
        ce_received: host_total(sim, |s| s.ce_received),
        cnps_from_switches: program_counter(sim, nodes, "LosslessEgress.cnp_sent").unwrap_or(0),
        cnps_from_hosts: host_total(sim, |s| s.cnps_sent),
        cnps_received: host_total(sim, |s| s.cnps_received),
    }
}

fn drops(built: &Built) -> DropReport {
    let sim = &built.sim;
    let mut r = DropReport {
        program: program_counter(sim, &built.switch_nodes, "LosslessIngress.dropped").unwrap_or(0),
        link_down: sim.links().iter().map(|l| l.stats.lost).sum(),
        ..DropReport::default()
    };
    for node in sim.nodes() {
        if let Node::Switch(s) = node {
            let d = s.core.drop_counts();
            r.buffer_full += d.buffer_full;
            r.queue_full += d.queue_full;
            r.loops += d.loops;
            r.unconnected += s.stats.unconnected;
        }
    }
    r
}

fn transport(built: &Built) -> TransportReport {
    let sim = &built.sim;
    TransportReport {
        data_packets: host_total(sim, |s| s.data_packets),
        retransmitted: host_total(sim, |s| s.retransmitted),
        naks: host_total(sim, |s| s.naks_sent),
        timeouts: host_total(sim, |s| s.timeouts),
        out_of_order: host_total(sim, |s| s.out_of_order),
    }
}

fn queue_bytes(built: &Built) -> Percentiles {
    let mut all: Histogram<u64> =
        Histogram::new(QUEUE_FIGURES).expect("2 significant figures are valid");
    for node in built.sim.nodes() {
        if let Node::Switch(s) = node {
            // Same precision, auto-resizing: adding cannot fail.
            let _ = all.add(&s.stats.queue_bytes);
        }
    }
    if all.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        count: all.len(),
        p50: all.value_at_quantile(0.50) as f64,
        p95: all.value_at_quantile(0.95) as f64,
        p99: all.value_at_quantile(0.99) as f64,
        max: all.max() as f64,
    }
}

fn queues(built: &Built, now: Ps) -> Vec<QueueReport> {
    let mut rows = Vec::new();
    for node in built.sim.nodes() {
        let Node::Switch(s) = node else { continue };
        let paused = s.paused_ps(now);
        let mut ports: Vec<u16> = s.core.queue_ports().collect();
        ports.extend((0..paused.len()).filter_map(|p| u16::try_from(p).ok()));
        ports.sort_unstable();
        ports.dedup();
        for port in ports {
            for priority in 0..PRIORITIES as u8 {
                let paused_ps = paused
                    .get(usize::from(port))
                    .map_or(0, |p| p[usize::from(priority)]);
                let m = s.core.queue_measures(port, priority);
                let packets = m.map_or(0, |m| m.sojourn_us.total());
                if packets == 0 && paused_ps == 0 {
                    continue;
                }
                let mut row = QueueReport {
                    switch: s.name.clone(),
                    port,
                    priority,
                    packets,
                    paused_us: paused_ps as f64 / US as f64,
                    ..QueueReport::default()
                };
                if let Some(m) = m {
                    let (soj, occ, b) = (&m.sojourn_us, &m.occupancy, &m.bursts);
                    row.sojourn_us_buckets = soj.counts().to_vec();
                    row.sojourn_p50_us = soj.quantile(0.5);
                    row.sojourn_p99_us = soj.quantile(0.99);
                    row.sojourn_max_us = soj.max();
                    row.occupancy_p50_packets = occ.quantile(0.5);
                    row.occupancy_p99_packets = occ.quantile(0.99);
                    row.occupancy_max_packets = occ.max();
                    row.microbursts = b.microbursts;
                    row.bursts_over_window = b.longer;
                    row.last_burst_peak_packets = b.last_peak_packets;
                    row.last_burst_duration_us = b.last_duration_us;
                }
                rows.push(row);
            }
        }
    }
    rows
}

fn checks(built: &Built) -> Vec<Check> {
    let sim = &built.sim;
    let nodes = &built.switch_nodes;
    let lost: u64 = sim.links().iter().map(|l| l.stats.lost).sum();
    let in_flight: u64 = sim.links().iter().map(|l| l.in_flight() as u64).sum();
    let mut checks = Vec::new();
    let mut check =
        |what: &str, program: Option<u64>, simulator: u64, agrees: &dyn Fn(u64, u64) -> bool| {
            if let Some(program) = program {
                checks.push(Check {
                    what: what.to_string(),
                    program,
                    simulator,
                    agrees: agrees(program, simulator),
                });
            }
        };
    let exact = |a: u64, b: u64| a == b;
    // Frames that reached the switches' ports: the program counts them in port_rx.
    let into_switches: u64 = sim
        .links()
        .iter()
        .filter(|l| matches!(sim.nodes()[l.to.node as usize], Node::Switch(_)))
        .map(|l| l.stats.frames - l.stats.lost - l.in_flight() as u64)
        .sum();
    check(
        "frames into switch ports (port_rx)",
        program_counter(sim, nodes, "LosslessIngress.port_rx"),
        into_switches,
        &exact,
    );
    let pauses_seen = host_total(sim, |s| s.pauses_received)
        + sim
            .nodes()
            .iter()
            .filter_map(|n| match n {
                Node::Switch(s) => Some(s.stats.pauses_received.iter().flatten().sum::<u64>()),
                Node::Host(_) => None,
            })
            .sum::<u64>();
    let clean = lost == 0 && in_flight == 0;
    let delivered_if_clean = move |a: u64, b: u64| if clean { a == b } else { b <= a };
    let refreshed: u64 = sim
        .nodes()
        .iter()
        .filter_map(|n| match n {
            Node::Switch(s) => Some(s.stats.pauses_refreshed),
            Node::Host(_) => None,
        })
        .sum();
    check(
        "PAUSE frames sent (the program's and the MACs' refreshes) and received",
        program_counter(sim, nodes, "LosslessIngress.pfc_pause_tx").map(|p| p + refreshed),
        pauses_seen,
        &delivered_if_clean,
    );
    let cnps_sent = program_counter(sim, nodes, "LosslessEgress.cnp_sent")
        .map(|c| c + host_total(sim, |s| s.cnps_sent));
    check(
        "CNPs sent and received",
        cnps_sent,
        host_total(sim, |s| s.cnps_received),
        &delivered_if_clean,
    );
    check(
        "CE marks made and seen",
        program_counter(sim, nodes, "LosslessEgress.ecn_marked"),
        host_total(sim, |s| s.ce_received),
        &|a, b| b <= a,
    );
    checks
}
