//! What one rank runs of an expanded workload: the QPs it sends and receives on, each with
//! its flows in the order both ends post them, and when each flow it sends may start, in terms
//! this rank can see (a receive delivered, a send acknowledged). QP numbers and UDP source
//! ports are derived from the expansion's connection and QP, alike on every rank.

use std::collections::HashMap;

use crate::error::{Result, TrafficError};
use wire::bth::MASK_24;
use workload::limits::MAX_QPS;
use workload::{Flow, FlowId, Flows, On, Start};

/// Destination QP number of connection 0's QP 0.
pub const QP_BASE: u32 = 0x100;
/// UDP source ports of the QPs count from here.
pub const SPORT_BASE: u16 = 49152;
/// ... and wrap after this many.
pub const SPORT_SPAN: u32 = 16384;

/// Why a workload with other parts than a collective is refused.
pub(super) const ONLY_COLLECTIVES: &str =
    "traffic collective runs collectives (allreduce, alltoall); \
     other parts run in lossless sim and lossless net experiment";

/// When a flow of this rank may start.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum LocalStart {
    /// This long after the rank started, ns.
    At(u64),
    /// `needed` of these flows done here, then `delay_ns`.
    After {
        deps: Vec<FlowId>,
        needed: usize,
        delay_ns: u64,
    },
}

/// A QP of this rank and its flows in order.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct QpPlan {
    /// The other end's rank.
    pub(super) peer: u32,
    /// Destination QP number.
    pub(super) qpn: u32,
    /// Its flows, in the order both ends post them.
    pub(super) flows: Vec<FlowId>,
}

/// What this rank runs of an expanded workload.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Plan {
    /// QPs this rank sends on.
    pub(super) sends: Vec<QpPlan>,
    /// QPs this rank receives on.
    pub(super) receives: Vec<QpPlan>,
    /// Start of each flow this rank sends, by flow id.
    pub(super) starts: HashMap<FlowId, LocalStart>,
}

/// Destination QP number of `flow`'s QP.
fn qpn(flow: &Flow) -> Result<u32> {
    let n =
        u64::from(QP_BASE) + u64::from(flow.connection) * u64::from(MAX_QPS) + u64::from(flow.qp);
    u32::try_from(n)
        .ok()
        .filter(|&n| n <= MASK_24)
        .ok_or_else(|| {
            TrafficError::Config(format!(
                "connection {} has no 24-bit QP number: fewer ranks or collectives are needed",
                flow.connection
            ))
        })
}

/// UDP source port of QP number `qpn`.
pub(super) fn source_port(qpn: u32) -> u16 {
    SPORT_BASE + (qpn % SPORT_SPAN) as u16
}

impl Plan {
    /// The flows of `flows` rank `rank` sends or receives: every one of a collective, and every
    /// start a condition this rank can see.
    pub(super) fn new(flows: &Flows, rank: u32) -> Result<Plan> {
        let mut sends: Vec<QpPlan> = Vec::new();
        let mut receives: Vec<QpPlan> = Vec::new();
        let mut by_qpn: HashMap<(bool, u32), usize> = HashMap::new();
        let mut starts = HashMap::new();
        for f in &flows.flows {
            if f.step.is_none() {
                return Err(TrafficError::Config(ONLY_COLLECTIVES.into()));
            }
            let (list, peer, sending) = if f.src == rank {
                (&mut sends, f.dst, true)
            } else if f.dst == rank {
                (&mut receives, f.src, false)
            } else {
                continue;
            };
            let n = qpn(f)?;
            let index = *by_qpn.entry((sending, n)).or_insert_with(|| {
                list.push(QpPlan {
                    peer,
                    qpn: n,
                    flows: Vec::new(),
                });
                list.len() - 1
            });
            list[index].flows.push(f.id);
            if sending {
                starts.insert(f.id, local_start(flows, f, rank)?);
            }
        }
        Ok(Plan {
            sends,
            receives,
            starts,
        })
    }
}

/// `flow`'s start as rank `rank` sees it: each dependency is a flow this rank sends (done when
/// acknowledged: the receiver holds it) or receives (done when delivered).
fn local_start(flows: &Flows, flow: &Flow, rank: u32) -> Result<LocalStart> {
    match &flow.start {
        Start::At(ps) => Ok(LocalStart::At(ps / 1000)),
        Start::After(after) => {
            let mut deps = Vec::with_capacity(after.deps.len());
            for d in &after.deps {
                let dep = &flows.flows[d.flow as usize];
                let seen = match d.on {
                    On::Delivered => dep.dst == rank || dep.src == rank,
                    On::Sent => dep.src == rank,
                };
                if !seen {
                    return Err(TrafficError::Config(format!(
                        "flow {} waits for flow {} between ranks {} and {}, which rank {rank} \
                         cannot see",
                        flow.id, d.flow, dep.src, dep.dst
                    )));
                }
                deps.push(d.flow);
            }
            Ok(LocalStart::After {
                deps,
                needed: after.needed as usize,
                delay_ns: after.delay / 1000,
            })
        }
    }
}

/// Whether a flow that starts at `start` may start at `now`, with `done` the times flows
/// finished here.
pub(super) fn may_start(start: &LocalStart, done: &[Option<u64>], now: u64) -> bool {
    match start {
        LocalStart::At(at) => now >= *at,
        LocalStart::After {
            deps,
            needed,
            delay_ns,
        } => {
            let mut met: Vec<u64> = deps.iter().filter_map(|&d| done[d as usize]).collect();
            if met.len() < *needed {
                return false;
            }
            met.sort_unstable();
            now >= met[*needed - 1] + delay_ns
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(spec: &str, ranks: u32) -> Flows {
        let w = workload::Workload::parse_args(&[spec], &workload::Sources::default()).unwrap();
        workload::expand(
            &w,
            &workload::Endpoints {
                count: ranks,
                rate_bps: 100_000_000_000,
            },
            0,
        )
        .unwrap()
    }

    #[test]
    fn a_ring_rank_sends_to_its_successor_and_waits_on_its_predecessor() {
        let flows = expanded("allreduce:ranks=4,size=4000,qps=2,reps=2", 4);
        let plan = Plan::new(&flows, 1).unwrap();
        assert_eq!(plan.sends.len(), 2);
        assert!(plan.sends.iter().all(|q| q.peer == 2));
        assert!(plan.receives.iter().all(|q| q.peer == 0));
        // Round-robin of whole messages: 2 iterations × 6 steps over 2 QPs.
        assert!(plan.sends.iter().all(|q| q.flows.len() == 6));
        // The QP numbers are the same on both ends.
        let theirs = Plan::new(&flows, 2).unwrap();
        let mut a: Vec<u32> = plan.sends.iter().map(|q| q.qpn).collect();
        let mut b: Vec<u32> = theirs.receives.iter().map(|q| q.qpn).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        // Every step after the first waits for something this rank sees.
        for f in plan.sends.iter().flat_map(|q| &q.flows) {
            match &plan.starts[f] {
                LocalStart::At(_) => assert_eq!(flows.flows[*f as usize].step.unwrap().step, 0),
                LocalStart::After { deps, .. } => assert!(deps.iter().all(|&d| {
                    let dep = &flows.flows[d as usize];
                    dep.src == 1 || dep.dst == 1
                })),
            }
        }
    }

    #[test]
    fn only_collectives_run() {
        let flows = expanded("incast:senders=3,size=1MB", 4);
        let e = Plan::new(&flows, 0).unwrap_err().to_string();
        assert!(e.contains("runs collectives"), "{e}");
    }

    #[test]
    fn a_start_waits_for_the_needed_dependencies_and_the_delay() {
        let start = LocalStart::After {
            deps: vec![0, 1],
            needed: 2,
            delay_ns: 10,
        };
        assert!(!may_start(&start, &[Some(5), None], 100));
        assert!(!may_start(&start, &[Some(5), Some(95)], 100));
        assert!(may_start(&start, &[Some(5), Some(90)], 100));
    }
}
