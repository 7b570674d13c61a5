//! The one place a workload becomes flows. Each part is first planned against the endpoints
//! (which endpoints it uses, how many flows and dependencies it will make), every count is
//! checked against the limits, and only then are the flows made, deterministically for a seed.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::Exp1;

use crate::cdf::SizeCdf;
use crate::collective::{Collective as CollectiveRecord, CollectiveKind};
use crate::error::{within, Origin, Result, WorkloadError};
use crate::flows::{
    check_plan, After, Connection, Dependency, Endpoints, Flow, FlowId, Flows, On, Start, Step,
};
use crate::limits::{MAX_DEPENDENCIES, MAX_ENDPOINTS, MAX_FLOWS, MAX_TIME};
use crate::spec::{show_time, Collective, Hosts, Kind, Part, QpUse, Stop, Workload};
use crate::{Ps, PS_PER_SECOND};

/// Expands `workload` onto `endpoints`: the same workload, endpoints and `seed` give the same
/// flows. Each part draws its random numbers (size-CDF arrivals, sizes and destinations, the
/// permutation) from its own stream of a ChaCha8 generator seeded with `seed`, so adding a part
/// does not change the others. Refused, before anything is allocated, when a part needs more
/// endpoints than it has or the flows or dependencies would be more than the limits.
pub fn expand(workload: &Workload, endpoints: &Endpoints, seed: u64) -> Result<Flows> {
    if endpoints.count == 0 || endpoints.count > MAX_ENDPOINTS {
        return Err(WorkloadError::input(
            &Origin::Workload,
            format!(
                "{} endpoints: a workload runs on 1 to {MAX_ENDPOINTS}",
                endpoints.count
            ),
        ));
    }
    let mut plans = Vec::new();
    let (mut flows, mut dependencies) = (0u64, 0u64);
    for part in workload.parts() {
        let plan = Plan::new(part, endpoints)?;
        within(&part.origin, plan.flows_what(part), plan.flows, MAX_FLOWS)?;
        within(
            &part.origin,
            "dependencies",
            plan.dependencies,
            MAX_DEPENDENCIES,
        )?;
        flows = flows.saturating_add(plan.flows);
        dependencies = dependencies.saturating_add(plan.dependencies);
        plans.push(plan);
    }
    within(&Origin::Workload, "flows", flows, MAX_FLOWS)?;
    within(
        &Origin::Workload,
        "dependencies",
        dependencies,
        MAX_DEPENDENCIES,
    )?;
    let mut out = Flows::default();
    out.flows.reserve(flows as usize);
    for (index, (part, plan)) in workload.parts().iter().zip(&plans).enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(index as u64);
        let mut builder = Builder {
            out: &mut out,
            part: index as u16,
            at: &part.origin,
            rate_bps: endpoints.rate_bps,
        };
        builder.part(part, plan, &mut rng)?;
    }
    let all = &out.flows;
    check_plan(all.len(), |i| match &all[i].start {
        Start::After(a) => Some(a),
        Start::At(_) => None,
    })
    .map_err(|e| {
        let flow = &all[e.flow()];
        let at = &workload.parts()[usize::from(flow.part)].origin;
        WorkloadError::input(at, format!("flow {}: {e}", flow.id))
    })?;
    Ok(out)
}

/// A part planned against the endpoints.
struct Plan {
    /// The endpoints of its ranks (nodes, hosts), in rank order.
    hosts: Vec<u32>,
    /// The flows it will make (for a size-CDF part over a time, the expected number).
    flows: u64,
    /// The dependencies they will have.
    dependencies: u64,
}

/// `a × b × ...`, saturating.
fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1, |p: u64, &f| p.saturating_mul(f))
}

impl Plan {
    /// Plans `part` on `endpoints`.
    fn new(part: &Part, endpoints: &Endpoints) -> Result<Plan> {
        let at = &part.origin;
        let reachable = match &part.hosts {
            Hosts::List(list) => {
                if let Some(h) = list.iter().find(|&&h| h >= endpoints.count) {
                    return Err(WorkloadError::input(
                        at,
                        format!(
                            "hosts: endpoint {h} is not below the {} endpoints",
                            endpoints.count
                        ),
                    ));
                }
                list.clone()
            }
            Hosts::Stride { first, stride } => (*first..endpoints.count)
                .step_by(*stride as usize)
                .collect(),
        };
        let needed = match &part.kind {
            Kind::Cdf { .. } | Kind::Permutation { .. } => reachable.len().max(2) as u64,
            Kind::Matrix(m) => u64::from(m.nodes),
            Kind::AllReduce(c) | Kind::AllToAll { collective: c, .. } => {
                c.ranks.map_or(reachable.len().max(2) as u64, u64::from)
            }
            Kind::Incast { senders, .. } | Kind::Microburst { senders, .. } => {
                u64::from(*senders) + 1
            }
        };
        if (reachable.len() as u64) < needed {
            return Err(WorkloadError::input(
                at,
                format!(
                    "needs {needed} endpoints, and its hosts reach {} of the {}",
                    reachable.len(),
                    endpoints.count
                ),
            ));
        }
        if let Kind::AllReduce(c) | Kind::AllToAll { collective: c, .. } = &part.kind {
            if c.bytes < needed * pieces(c) {
                return Err(WorkloadError::input(
                    at,
                    format!(
                        "size {} is less than a byte per rank and QP piece ({needed} ranks)",
                        c.bytes
                    ),
                ));
            }
        }
        let hosts = reachable[..needed as usize].to_vec();
        let n = needed;
        let (flows, dependencies) = match &part.kind {
            Kind::Cdf { .. } if endpoints.rate_bps == 0 => {
                return Err(WorkloadError::input(
                    at,
                    "offers a load of the endpoints' line rate, and their rate is 0",
                ))
            }
            Kind::Cdf {
                cdf, load, stop, ..
            } => match stop {
                Stop::Flows(count) => (*count, 0),
                Stop::Time(time) => {
                    latest(at, part.start, *time)?;
                    let per_second = arrivals_per_second(cdf, *load, endpoints.rate_bps);
                    let expected = n as f64 * per_second * (*time as f64 / PS_PER_SECOND as f64);
                    (expected.ceil().min(u64::MAX as f64) as u64, 0)
                }
            },
            Kind::Matrix(m) => (m.flow_count(), m.dependency_count()),
            Kind::Permutation { .. } => (n, 0),
            Kind::AllReduce(c) => {
                let (p, reps, r) = (pieces(c), u64::from(c.reps), n);
                // Steps 1.. wait for their predecessor's previous step; step 0 of a later
                // iteration for the rank's sends and last receive of the one before.
                let chained = product(&[reps, r, 2 * r - 3, p, p]);
                let barriers = product(&[reps - 1, r, p, (2 * r - 1) * p]);
                (
                    product(&[reps, r, 2 * (r - 1), p]),
                    chained.saturating_add(barriers),
                )
            }
            Kind::AllToAll {
                collective: c,
                serial,
            } => {
                let (p, reps, r) = (pieces(c), u64::from(c.reps), n);
                // A later iteration's first step waits for the rank's sends and receives of
                // the one before; a serial step for the rank's previous step.
                let first_step = if *serial { 1 } else { r - 1 };
                let barriers = product(&[reps - 1, r, first_step, p, 2 * (r - 1) * p]);
                let chained = if *serial {
                    product(&[reps, r, r - 2, p, p])
                } else {
                    0
                };
                (
                    product(&[reps, r, r - 1, p]),
                    chained.saturating_add(barriers),
                )
            }
            Kind::Incast {
                senders,
                every,
                reps,
                ..
            } => {
                latest(
                    at,
                    part.start,
                    every.unwrap_or(0).saturating_mul(u64::from(*reps) - 1),
                )?;
                (product(&[u64::from(*senders), u64::from(*reps)]), 0)
            }
            Kind::Microburst {
                senders,
                every,
                time,
                ..
            } => {
                latest(at, part.start, *time)?;
                (product(&[u64::from(*senders), time.div_ceil(*every)]), 0)
            }
        };
        Ok(Plan {
            hosts,
            flows,
            dependencies,
        })
    }

    /// What its flow count counts: an expectation for a size-CDF part over a time.
    fn flows_what(&self, part: &Part) -> &'static str {
        match &part.kind {
            Kind::Cdf {
                stop: Stop::Time(_),
                ..
            } => "flows (expected)",
            _ => "flows",
        }
    }
}

/// The flows per second a host starts for a size-CDF part: `load × rate / mean size` (HPCC's
/// traffic_gen).
fn arrivals_per_second(cdf: &SizeCdf, load: f64, rate_bps: u64) -> f64 {
    load * rate_bps as f64 / (8.0 * cdf.mean())
}

/// Refuses a part whose flows would start past [`MAX_TIME`]: `start + span`.
fn latest(at: &Origin, start: Ps, span: Ps) -> Result<()> {
    if start.saturating_add(span) > MAX_TIME {
        return Err(WorkloadError::input(
            at,
            format!(
                "its flows would start until {}, past the limit of {}",
                show_time(start.saturating_add(span)),
                show_time(MAX_TIME)
            ),
        ));
    }
    Ok(())
}

/// How many flows a collective's message is sent as: one per QP when split, else one.
fn pieces(c: &Collective) -> u64 {
    match c.qp_use {
        QpUse::Split => u64::from(c.qps),
        QpUse::RoundRobin => 1,
    }
}

/// `total` bytes cut into `count` shares that differ by at most one byte, the larger first:
/// share `i` of them.
fn share(total: u64, count: u64, i: u64) -> u64 {
    total / count + u64::from(i < total % count)
}

/// Flows being added to a [`Flows`] for one part.
struct Builder<'a> {
    out: &'a mut Flows,
    /// The part's index.
    part: u16,
    /// Where the part was read.
    at: &'a Origin,
    /// The endpoints' line rate.
    rate_bps: u64,
}

/// A message of a collective: who sends what to whom, on which connection, in which step.
struct Message {
    src: u32,
    dst: u32,
    bytes: u64,
    connection: u32,
    /// The message's number on its connection, from 0 (round-robin picks its QP by it).
    sequence: u64,
    step: Step,
}

impl Builder<'_> {
    /// A new connection of `qps` QPs.
    fn connection(&mut self, src: u32, dst: u32, qps: u32) -> u32 {
        self.out.connections.push(Connection {
            src,
            dst,
            qps: qps as u16,
        });
        (self.out.connections.len() - 1) as u32
    }

    /// Adds a flow; refuses one past [`MAX_FLOWS`] (a size-CDF part may draw more than
    /// expected).
    #[allow(clippy::too_many_arguments)]
    fn flow(
        &mut self,
        src: u32,
        dst: u32,
        bytes: u64,
        start: Start,
        connection: u32,
        qp: u32,
        step: Option<Step>,
    ) -> Result<FlowId> {
        let id = self.out.flows.len() as u64;
        within(self.at, "flows", id + 1, MAX_FLOWS)?;
        self.out.flows.push(Flow {
            id: id as FlowId,
            src,
            dst,
            bytes,
            start,
            connection,
            qp: qp as u16,
            part: self.part,
            step,
        });
        Ok(id as FlowId)
    }

    /// A flow on a connection of its own, with one QP.
    fn single(&mut self, src: u32, dst: u32, bytes: u64, start: Ps) -> Result<FlowId> {
        let connection = self.connection(src, dst, 1);
        self.flow(src, dst, bytes, Start::At(start), connection, 0, None)
    }

    /// Adds the flows of `part`.
    fn part(&mut self, part: &Part, plan: &Plan, rng: &mut ChaCha8Rng) -> Result<()> {
        let hosts = &plan.hosts;
        match &part.kind {
            Kind::Cdf {
                cdf, load, stop, ..
            } => {
                // HPCC's traffic_gen: per host, Poisson arrivals at load × rate / mean size,
                // each to a host drawn uniformly among the others, with a size from the CDF.
                let mean_gap =
                    PS_PER_SECOND as f64 / arrivals_per_second(cdf, *load, self.rate_bps);
                let gap =
                    |rng: &mut ChaCha8Rng| (rng.sample::<f64, _>(Exp1) * mean_gap).round() as u64;
                let end = match stop {
                    Stop::Time(time) => part.start + time,
                    Stop::Flows(_) => MAX_TIME,
                };
                let mut wanted = match stop {
                    Stop::Flows(n) => *n,
                    Stop::Time(_) => u64::MAX,
                };
                // Next arrival per host, as a min-heap of (time, host index).
                let mut next: std::collections::BinaryHeap<std::cmp::Reverse<(Ps, usize)>> = (0
                    ..hosts.len())
                    .map(|i| std::cmp::Reverse((part.start.saturating_add(gap(rng)), i)))
                    .collect();
                while wanted > 0 {
                    let Some(std::cmp::Reverse((t, i))) = next.pop() else {
                        break;
                    };
                    if t >= end {
                        if let Stop::Flows(n) = stop {
                            return Err(WorkloadError::input(
                                self.at,
                                format!(
                                    "{n} flows would start past the limit of {}",
                                    show_time(MAX_TIME)
                                ),
                            ));
                        }
                        continue;
                    }
                    let other = rng.random_range(0..hosts.len() - 1);
                    let dst = hosts[other + usize::from(other >= i)];
                    let bytes = cdf.size_at(rng.random::<f64>());
                    self.single(hosts[i], dst, bytes, t)?;
                    wanted -= 1;
                    next.push(std::cmp::Reverse((t.saturating_add(gap(rng)), i)));
                }
            }
            Kind::Matrix(m) => {
                let base = self.out.flows.len() as FlowId;
                self.out.link_failures.extend_from_slice(&m.failures);
                for f in &m.flows {
                    let start = match &f.start {
                        Start::At(t) => {
                            latest(self.at, part.start, *t)?;
                            Start::At(part.start + t)
                        }
                        Start::After(a) => Start::After(After {
                            deps: a
                                .deps
                                .iter()
                                .map(|d| Dependency {
                                    flow: base + d.flow,
                                    on: d.on,
                                })
                                .collect(),
                            ..*a
                        }),
                    };
                    let (src, dst) = (hosts[f.src as usize], hosts[f.dst as usize]);
                    let connection = self.connection(src, dst, 1);
                    self.flow(src, dst, f.bytes, start, connection, 0, None)?;
                }
            }
            Kind::Permutation { bytes } => {
                // htsim's gen_permutation.py: destinations shuffled, and a host that drew
                // itself swaps with the next.
                let mut dsts = hosts.clone();
                dsts.shuffle(rng);
                for n in 0..dsts.len() {
                    if dsts[n] == hosts[n] {
                        dsts.swap(n, (n + 1) % hosts.len());
                    }
                }
                for (&src, &dst) in hosts.iter().zip(&dsts) {
                    self.single(src, dst, *bytes, part.start)?;
                }
            }
            Kind::AllReduce(c) => self.ring_allreduce(part, c, hosts)?,
            Kind::AllToAll { collective, serial } => {
                self.alltoall(part, collective, *serial, hosts)?
            }
            Kind::Incast {
                bytes, every, reps, ..
            } => {
                let every = every.unwrap_or(0);
                let starts = (0..u64::from(*reps)).map(|r| part.start + every * r);
                self.rounds(hosts, *bytes, starts)?;
            }
            Kind::Microburst {
                burst, every, time, ..
            } => {
                let starts = (0..time.div_ceil(*every)).map(|k| part.start + every * k);
                self.rounds(hosts, *burst, starts)?;
            }
        }
        Ok(())
    }

    /// Rounds of an incast or microburst: rank 0 of `hosts` receives, the others each send
    /// `bytes` at each of `starts`, each on one connection of its own for all its rounds.
    fn rounds(
        &mut self,
        hosts: &[u32],
        bytes: u64,
        starts: impl Iterator<Item = Ps>,
    ) -> Result<()> {
        let [receiver, senders @ ..] = hosts else {
            return Ok(());
        };
        let connections: Vec<u32> = senders
            .iter()
            .map(|&s| self.connection(s, *receiver, 1))
            .collect();
        for t in starts {
            for (&s, &c) in senders.iter().zip(&connections) {
                self.flow(s, *receiver, bytes, Start::At(t), c, 0, None)?;
            }
        }
        Ok(())
    }

    /// Records a collective and gives its index.
    fn collective(
        &mut self,
        kind: CollectiveKind,
        ranks: usize,
        c: &Collective,
        steps: u32,
    ) -> u16 {
        self.out.collectives.push(CollectiveRecord {
            kind,
            ranks: ranks as u32,
            bytes: c.bytes,
            iterations: c.reps,
            steps,
            part: self.part,
        });
        (self.out.collectives.len() - 1) as u16
    }

    /// Adds a message of a collective as one flow on the connection's QP in turn, or as one
    /// flow per QP; gives the flows' ids.
    fn message(&mut self, c: &Collective, m: &Message, start: &Start) -> Result<Vec<FlowId>> {
        match c.qp_use {
            QpUse::RoundRobin => {
                let qp = (m.sequence % u64::from(c.qps)) as u32;
                Ok(vec![self.flow(
                    m.src,
                    m.dst,
                    m.bytes,
                    start.clone(),
                    m.connection,
                    qp,
                    Some(m.step),
                )?])
            }
            QpUse::Split => (0..c.qps)
                .map(|qp| {
                    let bytes = share(m.bytes, u64::from(c.qps), u64::from(qp));
                    self.flow(
                        m.src,
                        m.dst,
                        bytes,
                        start.clone(),
                        m.connection,
                        qp,
                        Some(m.step),
                    )
                })
                .collect(),
        }
    }

    /// Ring AllReduce over `hosts`: per iteration, `2(n−1)` steps in which rank `i` sends a
    /// share of `S/n` bytes to rank `i+1` (reduce-scatter, then all-gather: share `i−k` at step
    /// `k`, then `i+1−k'`); each step waits for the delivery of the previous step's data from
    /// the predecessor; a rank's next iteration for all it sent and its last receive.
    fn ring_allreduce(&mut self, part: &Part, c: &Collective, hosts: &[u32]) -> Result<()> {
        let r = hosts.len();
        let steps = 2 * (r - 1);
        let collective = self.collective(CollectiveKind::AllReduce, r, c, steps as u32);
        let connections: Vec<u32> = (0..r)
            .map(|i| self.connection(hosts[i], hosts[(i + 1) % r], c.qps))
            .collect();
        // The flows of the step before, per rank (sender); and of the iteration before.
        let mut previous: Vec<Vec<FlowId>> = vec![Vec::new(); r];
        let mut sent_before: Vec<Vec<FlowId>> = vec![Vec::new(); r];
        for iteration in 0..c.reps {
            let mut sent: Vec<Vec<FlowId>> = vec![Vec::new(); r];
            for k in 0..steps {
                let mut this: Vec<Vec<FlowId>> = vec![Vec::new(); r];
                for i in 0..r {
                    let predecessor = (i + r - 1) % r;
                    let start = if k > 0 {
                        after(&previous[predecessor], On::Delivered, 0)
                    } else if iteration > 0 {
                        let mut waited = sent_before[i].clone();
                        waited.extend(&previous[predecessor]);
                        after(&waited, On::Delivered, c.gap)
                    } else {
                        Start::At(part.start)
                    };
                    // Reduce-scatter step k sends share i − k; all-gather step k' = k − (n−1)
                    // share i + 1 − k', which is the same share i − k.
                    let index = (i + 2 * r - k) % r;
                    let message = Message {
                        src: hosts[i],
                        dst: hosts[(i + 1) % r],
                        bytes: share(c.bytes, r as u64, index as u64),
                        connection: connections[i],
                        sequence: u64::from(iteration) * steps as u64 + k as u64,
                        step: Step {
                            collective,
                            iteration,
                            step: k as u32,
                        },
                    };
                    this[i] = self.message(c, &message, &start)?;
                    sent[i].extend(&this[i]);
                }
                previous = this;
            }
            sent_before = sent;
        }
        Ok(())
    }

    /// All-to-all over `hosts`: rank `i` sends share `j` of `S/n` bytes to each rank `j ≠ i`
    /// on a connection of its own, to all at once, or (serial) to `i+1`, `i+2`, ... each when
    /// the previous is sent (htsim's gen_serial_alltoall.py); a rank's next iteration waits for
    /// all it sent and received in the one before.
    fn alltoall(&mut self, part: &Part, c: &Collective, serial: bool, hosts: &[u32]) -> Result<()> {
        let r = hosts.len();
        let steps = if serial { r - 1 } else { 1 };
        let collective = self.collective(CollectiveKind::AllToAll, r, c, steps as u32);
        // connections[i][d - 1]: rank i to rank i + d.
        let connections: Vec<Vec<u32>> = (0..r)
            .map(|i| {
                (1..r)
                    .map(|d| self.connection(hosts[i], hosts[(i + d) % r], c.qps))
                    .collect()
            })
            .collect();
        let mut done_before: Vec<Vec<FlowId>> = vec![Vec::new(); r];
        for iteration in 0..c.reps {
            let mut done: Vec<Vec<FlowId>> = vec![Vec::new(); r];
            for i in 0..r {
                let mut previous: Vec<FlowId> = Vec::new();
                for d in 1..r {
                    let j = (i + d) % r;
                    let start = if serial && d > 1 {
                        after(&previous, On::Sent, 0)
                    } else if iteration > 0 {
                        after(&done_before[i], On::Delivered, c.gap)
                    } else {
                        Start::At(part.start)
                    };
                    let message = Message {
                        src: hosts[i],
                        dst: hosts[j],
                        bytes: share(c.bytes, r as u64, j as u64),
                        connection: connections[i][d - 1],
                        sequence: u64::from(iteration),
                        step: Step {
                            collective,
                            iteration,
                            step: if serial { d as u32 - 1 } else { 0 },
                        },
                    };
                    previous = self.message(c, &message, &start)?;
                    done[i].extend(&previous);
                    done[j].extend(&previous);
                }
            }
            done_before = done;
        }
        Ok(())
    }
}

/// A start after all of `flows` reach `on`, then `delay`.
fn after(flows: &[FlowId], on: On, delay: Ps) -> Start {
    Start::After(After {
        deps: flows.iter().map(|&flow| Dependency { flow, on }).collect(),
        needed: flows.len() as u32,
        delay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Sources;
    use std::path::Path;

    const GBPS_100: u64 = 100_000_000_000;

    fn endpoints(count: u32) -> Endpoints {
        Endpoints {
            count,
            rate_bps: GBPS_100,
        }
    }

    /// The workload of `forms`, expanded on `count` endpoints at 100 Gb/s with `seed`.
    fn expanded(forms: &[&str], count: u32, seed: u64) -> Result<Flows> {
        let workload = Workload::parse_args(forms, &Sources::default())?;
        expand(&workload, &endpoints(count), seed)
    }

    fn flows(form: &str, count: u32) -> Flows {
        expanded(&[form], count, 1).unwrap_or_else(|e| panic!("{form}: {e}"))
    }

    fn refused(forms: &[&str], count: u32) -> String {
        match expanded(forms, count, 1) {
            Ok(out) => panic!("{forms:?} made {} flows", out.flows.len()),
            Err(e) => e.to_string(),
        }
    }

    fn waits(flows: &[FlowId], on: On, delay: Ps) -> Start {
        after(flows, on, delay)
    }

    /// The number of dependencies of all of `flows`.
    fn dependency_count(flows: &Flows) -> u64 {
        flows
            .flows
            .iter()
            .map(|f| match &f.start {
                Start::After(a) => a.deps.len() as u64,
                Start::At(_) => 0,
            })
            .sum()
    }

    #[test]
    fn ring_allreduce_of_4_ranks_by_hand() {
        let out = flows("allreduce:ranks=4,size=4002", 6);
        assert_eq!(
            out.collectives,
            [CollectiveRecord {
                kind: CollectiveKind::AllReduce,
                ranks: 4,
                bytes: 4002,
                iterations: 1,
                steps: 6,
                part: 0,
            }]
        );
        // 6 steps of the 4 ranks; rank i sends to i + 1 on connection i.
        assert_eq!(out.flows.len(), 24);
        assert_eq!(out.connections.len(), 4);
        assert_eq!(
            out.connections[3],
            Connection {
                src: 3,
                dst: 0,
                qps: 1
            }
        );
        // Shares of 4002 bytes: 1001, 1001, 1000, 1000; step k, rank i sends share i − k.
        let bytes: Vec<u64> = out.flows.iter().map(|f| f.bytes).collect();
        assert_eq!(
            &bytes[..8],
            [1001, 1001, 1000, 1000, 1000, 1001, 1001, 1000]
        );
        assert_eq!(bytes.iter().sum::<u64>(), 6 * 4002);
        for (id, f) in out.flows.iter().enumerate() {
            let (k, i) = (id / 4, id % 4);
            assert_eq!(
                (f.id as usize, f.src as usize, f.dst as usize),
                (id, i, (i + 1) % 4)
            );
            assert_eq!((f.connection as usize, f.qp, f.part), (i, 0, 0));
            assert_eq!(
                f.step,
                Some(Step {
                    collective: 0,
                    iteration: 0,
                    step: k as u32
                })
            );
            // Step k waits for the delivery of step k − 1 from the predecessor.
            let expected = if k == 0 {
                Start::At(0)
            } else {
                waits(&[((k - 1) * 4 + (i + 3) % 4) as FlowId], On::Delivered, 0)
            };
            assert_eq!(f.start, expected, "flow {id}");
        }
    }

    #[test]
    fn allreduce_repetitions_and_qps_in_turn() {
        let out = flows(
            "allreduce:ranks=4,size=4000,qps=4,reps=2,gap=1us,start=5us",
            4,
        );
        assert_eq!(out.flows.len(), 48);
        assert!(out.connections.iter().all(|c| c.qps == 4));
        for f in &out.flows {
            let step = f.step.unwrap();
            // Messages take the connection's QPs in turn, across iterations.
            assert_eq!(u32::from(f.qp), (step.iteration * 6 + step.step) % 4);
        }
        assert_eq!(out.flows[0].start, Start::At(5_000_000));
        // Rank 1's first step of iteration 1 waits for all 6 it sent in iteration 0 and the
        // last it received, then the gap.
        let first = &out.flows[24 + 1];
        assert_eq!(
            first.step,
            Some(Step {
                collective: 0,
                iteration: 1,
                step: 0
            })
        );
        assert_eq!(
            first.start,
            waits(&[1, 5, 9, 13, 17, 21, 20], On::Delivered, 1_000_000)
        );
    }

    #[test]
    fn allreduce_split_sends_a_piece_on_every_qp() {
        let out = flows("allreduce:ranks=3,size=3001,qps=2,qp_use=split", 3);
        // 4 steps × 3 ranks × 2 pieces.
        assert_eq!(out.flows.len(), 24);
        // Rank 0's step 0: share 0 (1001 bytes) in pieces of 501 and 500 on QPs 0 and 1.
        assert_eq!((out.flows[0].bytes, out.flows[0].qp), (501, 0));
        assert_eq!((out.flows[1].bytes, out.flows[1].qp), (500, 1));
        assert_eq!(out.flows[0].connection, out.flows[1].connection);
        // Rank 0's step 1 waits for both pieces of rank 2's step 0.
        assert_eq!(out.flows[6].start, waits(&[4, 5], On::Delivered, 0));
    }

    #[test]
    fn all_to_all_at_once_and_serial_by_hand() {
        let out = flows("alltoall:ranks=4,size=4000", 4);
        assert_eq!((out.flows.len(), out.connections.len()), (12, 12));
        assert!(out
            .flows
            .iter()
            .all(|f| f.bytes == 1000 && f.start == Start::At(0)));
        let pairs: Vec<(u32, u32)> = out.flows.iter().map(|f| (f.src, f.dst)).collect();
        assert_eq!(&pairs[..4], [(0, 1), (0, 2), (0, 3), (1, 2)]);
        assert_eq!(out.collectives[0].steps, 1);
        // Serial: rank 0 sends to 1 at once, to 2 when that is sent, then to 3.
        let out = flows("alltoall:ranks=4,size=4000,serial", 4);
        assert_eq!(out.flows[0].start, Start::At(0));
        assert_eq!(out.flows[1].start, waits(&[0], On::Sent, 0));
        assert_eq!(out.flows[2].start, waits(&[1], On::Sent, 0));
        assert_eq!(out.flows[3].start, Start::At(0));
        let steps: Vec<u32> = out.flows.iter().map(|f| f.step.unwrap().step).collect();
        assert_eq!(&steps[..6], [0, 1, 2, 0, 1, 2]);
        assert_eq!(out.collectives[0].steps, 3);
        // A second iteration: rank 0's flows wait for the 3 it sent and the 3 it received.
        let out = flows("alltoall:ranks=4,size=4000,reps=2", 4);
        assert_eq!(
            out.flows[12].start,
            waits(&[0, 1, 2, 5, 7, 9], On::Delivered, 0)
        );
        assert_eq!(
            (out.flows[12].src, out.flows[12].dst, out.flows[12].qp),
            (0, 1, 0)
        );
    }

    #[test]
    fn counts_planned_are_the_counts_made() {
        for form in [
            "allreduce:ranks=5,size=1MB,reps=3",
            "allreduce:ranks=4,size=1MB,qps=3,qp_use=split,reps=2",
            "allreduce:ranks=2,size=1MB,qps=2,reps=4",
            "alltoall:ranks=5,size=1MB,reps=3",
            "alltoall:ranks=4,size=1MB,qps=2,qp_use=split,reps=2",
            "alltoall:ranks=5,size=1MB,serial,reps=3",
            "alltoall:ranks=4,size=1MB,serial,qps=3,qp_use=split,reps=2",
            "alltoall:ranks=2,size=1MB,serial,reps=2",
            "incast:senders=5,size=1KB,every=1ms,reps=3",
            "microburst:senders=3,burst=1KB,every=100us,time=1ms",
            "microburst:senders=3,burst=1KB,every=300us,time=1ms",
            "permutation:size=1KB",
        ] {
            let workload = Workload::parse_args(&[form], &Sources::default()).unwrap();
            let plan = Plan::new(&workload.parts()[0], &endpoints(7)).unwrap();
            let out = expand(&workload, &endpoints(7), 1).unwrap();
            assert_eq!(
                (plan.flows, plan.dependencies),
                (out.flows.len() as u64, dependency_count(&out)),
                "{form}"
            );
        }
    }

    #[test]
    fn incast_and_microbursts_by_hand() {
        let out = flows("incast:senders=3,size=1KB,every=1ms,reps=2", 4);
        let shown: Vec<(u32, u32, Start, u32)> = out
            .flows
            .iter()
            .map(|f| (f.src, f.dst, f.start.clone(), f.connection))
            .collect();
        let ms = 1_000_000_000;
        assert_eq!(
            shown,
            [
                (1, 0, Start::At(0), 0),
                (2, 0, Start::At(0), 1),
                (3, 0, Start::At(0), 2),
                (1, 0, Start::At(ms), 0),
                (2, 0, Start::At(ms), 1),
                (3, 0, Start::At(ms), 2),
            ]
        );
        // Rank 0 receives; with first and stride the ranks are 4, 6, 8, 10.
        let out = flows("incast:senders=3,size=1KB,first=4,stride=2", 16);
        let ends: Vec<(u32, u32)> = out.flows.iter().map(|f| (f.src, f.dst)).collect();
        assert_eq!(ends, [(6, 4), (8, 4), (10, 4)]);
        // Bursts at 0, 100 and 200 µs of a 250 µs run.
        let out = flows("microburst:senders=2,burst=64KB,every=100us,time=250us", 3);
        let starts: Vec<Start> = out.flows.iter().map(|f| f.start.clone()).collect();
        let us = 1_000_000;
        assert_eq!(
            starts,
            [0, 0, 100, 100, 200, 200].map(|t| Start::At(t * us))
        );
        assert!(out.flows.iter().all(|f| f.bytes == 64_000 && f.dst == 0));
    }

    #[test]
    fn permutations_send_to_distinct_other_hosts() {
        let out = flows("permutation:size=2MB", 64);
        assert_eq!(out.flows.len(), 64);
        let mut dsts: Vec<u32> = out.flows.iter().map(|f| f.dst).collect();
        assert!(out
            .flows
            .iter()
            .enumerate()
            .all(|(i, f)| f.src == i as u32 && f.dst != f.src));
        dsts.sort_unstable();
        assert_eq!(dsts, (0..64).collect::<Vec<_>>());
        let again = expanded(&["permutation:size=2MB"], 64, 1).unwrap();
        let other = expanded(&["permutation:size=2MB"], 64, 2).unwrap();
        assert_eq!(again, out);
        assert_ne!(other, out);
        // With two hosts the only permutation swaps them.
        let two = flows("permutation:size=1KB", 2);
        assert_eq!((two.flows[0].dst, two.flows[1].dst), (1, 0));
    }

    /// A size CDF of mean 1250 bytes (0..1000 half the time, 1000..3000 the other half).
    fn cdf_file(dir: &Path) -> String {
        let path = dir.join("sizes.txt");
        std::fs::write(&path, "0 0\n1000 50\n3000 100\n").unwrap();
        path.display().to_string()
    }

    #[test]
    fn size_cdf_flows_offer_the_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = cdf_file(dir.path());
        // 16 hosts at 10 Gb/s, load 0.5, mean 1250 bytes: 500,000 flows per second per host,
        // 8,000 in 1 ms (a standard deviation of about 90).
        let workload = Workload::parse_args(
            &[format!("cdf:{file},load=0.5,time=1ms")],
            &Sources::default(),
        )
        .unwrap();
        let ten_g = Endpoints {
            count: 16,
            rate_bps: 10_000_000_000,
        };
        let out = expand(&workload, &ten_g, 7).unwrap();
        let n = out.flows.len() as f64;
        assert!((n - 8000.0).abs() < 450.0, "{n} flows");
        let bytes: u64 = out.flows.iter().map(|f| f.bytes).sum();
        let offered = bytes as f64 * 8.0 / (16.0 * 10e9 * 1e-3);
        assert!((offered - 0.5).abs() < 0.03, "load {offered}");
        let mut to = [0u32; 16];
        for f in &out.flows {
            assert!(f.src != f.dst && (1..=3000).contains(&f.bytes));
            let Start::At(t) = f.start else {
                panic!("{:?}", f.start)
            };
            assert!(t < 1_000_000_000);
            to[f.dst as usize] += 1;
        }
        // Destinations uniform: each host about 500.
        assert!(to.iter().all(|&c| (400..600).contains(&c)), "{to:?}");
        assert_eq!(out.connections.len(), out.flows.len());
        // A number of flows, in the order they start.
        let workload = Workload::parse_args(
            &[format!("cdf:{file},load=0.5,flows=100")],
            &Sources::default(),
        )
        .unwrap();
        let out = expand(&workload, &ten_g, 7).unwrap();
        assert_eq!(out.flows.len(), 100);
        let starts: Vec<Ps> = out
            .flows
            .iter()
            .map(|f| match f.start {
                Start::At(t) => t,
                Start::After(_) => panic!(),
            })
            .collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn the_same_seed_gives_the_same_flows_and_parts_draw_apart() {
        let dir = tempfile::tempdir().unwrap();
        let file = cdf_file(dir.path());
        let cdf = format!("cdf:{file},load=0.3,time=100us");
        let forms = [
            cdf.as_str(),
            "permutation:size=1MB",
            "allreduce:ranks=8,size=1MB",
        ];
        let a = expanded(&forms, 32, 42).unwrap();
        assert_eq!(a, expanded(&forms, 32, 42).unwrap());
        assert_ne!(a, expanded(&forms, 32, 43).unwrap());
        // A part added at the end leaves the others' flows as they were.
        let more = expanded(
            &[forms[0], forms[1], forms[2], "permutation:size=5KB"],
            32,
            42,
        )
        .unwrap();
        assert_eq!(more.flows[..a.flows.len()], a.flows[..]);
        assert_eq!(more.flows.last().unwrap().part, 3);
    }

    #[test]
    fn matrices_map_their_nodes_and_keep_their_triggers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.cm");
        std::fs::write(
            &path,
            "Nodes 3\nConnections 3\nTriggers 1\n0->1 start 1000 size 5 send_done_trigger 1\n\
             1->2 trigger 1 size 7\n2->0 start 0 size 9\ntrigger id 1 oneshot\n",
        )
        .unwrap();
        let form = format!("matrix:{},first=1,start=1us", path.display());
        // After a permutation, so the matrix's dependencies are renumbered.
        let out = expanded(&["permutation:size=1KB", &form], 4, 1).unwrap();
        let m = &out.flows[4..];
        assert_eq!(
            (m[0].src, m[0].dst, m[0].start.clone()),
            (1, 2, Start::At(1_001_000))
        );
        assert_eq!(
            (m[1].src, m[1].dst, m[1].start.clone()),
            (2, 3, waits(&[4], On::Sent, 0))
        );
        assert_eq!((m[2].src, m[2].dst, m[2].bytes), (3, 1, 9));
        assert!(m.iter().all(|f| f.part == 1));
        let error = refused(&[&form], 3);
        assert!(
            error.ends_with("needs 3 endpoints, and its hosts reach 2 of the 3"),
            "{error}"
        );
    }

    #[test]
    fn workloads_past_the_limits_are_refused_before_they_are_made() {
        // Every one of these would take gigabytes; each is refused at once.
        let flows_of = |r: u64| r * 2 * (r - 1);
        assert_eq!(
            refused(&["allreduce:size=1GB"], 65_536),
            format!(
                "'allreduce:size=1GB': this would be {} flows, the limit is 4194304",
                flows_of(65_536)
            )
        );
        assert_eq!(
            refused(&["alltoall:ranks=512,size=1GB,reps=2"], 512),
            format!(
                "'alltoall:ranks=512,size=1GB,reps=2': this would be {} dependencies, the limit is 16777216",
                512 * 511 * 2 * 511
            )
        );
        let dir = tempfile::tempdir().unwrap();
        let file = cdf_file(dir.path());
        let error = refused(&[&format!("cdf:{file},load=1,time=1h")], 1024);
        assert!(
            error.contains("flows (expected), the limit is 4194304"),
            "{error}"
        );
        let error = refused(
            &[
                "incast:senders=1000,size=1KB,every=1us,reps=3000",
                "incast:senders=1000,size=1KB,every=1us,reps=3000",
            ],
            1001,
        );
        assert_eq!(
            error,
            "the workload: this would be 6000000 flows, the limit is 4194304"
        );
        for (forms, count, needle) in [
            (
                &["allreduce:ranks=16,size=1MB"][..],
                8,
                "needs 16 endpoints, and its hosts reach 8 of the 8",
            ),
            (
                &["allreduce:ranks=4,size=1MB,first=6"],
                8,
                "needs 4 endpoints, and its hosts reach 2 of the 8",
            ),
            (
                &["permutation:size=1KB"],
                1,
                "needs 2 endpoints, and its hosts reach 1 of the 1",
            ),
            (
                &["allreduce:ranks=4,size=3"],
                8,
                "size 3 is less than a byte per rank and QP piece (4 ranks)",
            ),
            (
                &["alltoall:ranks=4,size=7,qps=2,qp_use=split"],
                8,
                "size 7 is less than a byte per rank and QP piece (4 ranks)",
            ),
            (
                &["incast:senders=2,size=1KB,every=1s,reps=3602"],
                8,
                "its flows would start until 3601s, past the limit of 3600s",
            ),
            (
                &["incast:senders=2,size=1KB,every=1s,reps=3600,start=2s"],
                8,
                "its flows would start until 3601s, past the limit of 3600s",
            ),
            (
                &["permutation:size=1KB"],
                0,
                "the workload: 0 endpoints: a workload runs on 1 to 65536",
            ),
            (&["permutation:size=1KB"], 65_537, "65537 endpoints"),
        ] {
            let error = refused(forms, count);
            assert!(error.contains(needle), "{forms:?}:\n{error}");
        }
        let no_rate = Endpoints {
            count: 8,
            rate_bps: 0,
        };
        let workload =
            Workload::parse_args(&[format!("cdf:{file},load=1,flows=1")], &Sources::default())
                .unwrap();
        let error = expand(&workload, &no_rate, 1).unwrap_err().to_string();
        assert!(
            error.ends_with("offers a load of the endpoints' line rate, and their rate is 0"),
            "{error}"
        );
        let toml = dir.path().join("w.toml");
        std::fs::write(
            &toml,
            "[[part]]\nkind = \"incast\"\nsenders = 2\nsize = 1\nhosts = [0, 9, 1]\n",
        )
        .unwrap();
        let error = refused(&[toml.to_str().unwrap()], 8);
        assert!(
            error.ends_with("w.toml:1: hosts: endpoint 9 is not below the 8 endpoints"),
            "{error}"
        );
    }
}
