//! What a workload expands into: flows between endpoints, when each starts, the connections and
//! QPs they use, and the collectives they belong to. This is the whole interface a simulator or
//! traffic tool reads.

use crate::collective::Collective;
use crate::Ps;

/// The index of a flow in [`Flows::flows`] (also its [`Flow::id`]).
pub type FlowId = u32;

/// The endpoints a workload is expanded onto: hosts (or NICs) numbered `0..count`, each with the
/// same line rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// How many endpoints there are (at most [`crate::limits::MAX_ENDPOINTS`]).
    pub count: u32,
    /// Each endpoint's line rate in bits per second; a size-CDF part offers its load against it.
    pub rate_bps: u64,
}

/// A workload expanded: every flow, in the order of the workload's parts, with the connections
/// they use and the collectives they make up. Flow `i` is `flows[i]` and has id `i`; every
/// dependency names an earlier flow or a later one, never a missing one, and there is no cycle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flows {
    /// The flows; `flows[i].id == i`.
    pub flows: Vec<Flow>,
    /// The connections; `Flow::connection` indexes this.
    pub connections: Vec<Connection>,
    /// The collectives; `Step::collective` indexes this.
    pub collectives: Vec<Collective>,
    /// Links an htsim connection matrix marks as failed (its `failure` lines), which the
    /// simulator fails from the start or refuses, as htsim does for its fat-tree.
    pub link_failures: Vec<LinkFailure>,
}

/// One message: `bytes` from endpoint `src` to endpoint `dst` on QP `qp` of a connection,
/// started at a time or when other flows have progressed far enough.
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    /// Its index in [`Flows::flows`].
    pub id: FlowId,
    /// The sending endpoint.
    pub src: u32,
    /// The receiving endpoint (never `src`).
    pub dst: u32,
    /// Payload bytes, at least one.
    pub bytes: u64,
    /// When it starts.
    pub start: Start,
    /// The connection it is sent on (an index into [`Flows::connections`]): a set of QPs between
    /// `src` and `dst` that one application opened. Flows of a collective between the same two
    /// ranks share one; every other flow has its own, as each is its own QP in HPCC's and
    /// htsim's simulators.
    pub connection: u32,
    /// The QP of the connection it uses, `0..Connection::qps`. The simulator turns the
    /// connection and the QP into a BTH destination QP and a UDP source port, so the QPs of one
    /// connection take different ECMP paths where the hash covers them.
    pub qp: u16,
    /// The workload part it comes from (its index among the parts), so a report can keep the
    /// background flows apart from an incast.
    pub part: u16,
    /// The collective, iteration and step it belongs to, if any.
    pub step: Option<Step>,
}

/// When a flow starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// At this time (picoseconds from the start of the run).
    At(Ps),
    /// When enough of other flows have reached a point, plus a delay.
    After(After),
}

/// A start that waits for other flows: `needed` of the `deps` met, then `delay`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct After {
    /// The flows and events waited for (never empty).
    pub deps: Vec<Dependency>,
    /// How many of `deps` must be met, `1..=deps.len()`: all of them, except for the targets of
    /// htsim's `multishot` and `barrier` triggers, which fire on a count of events from any of
    /// their setters (docs/workloads.md).
    pub needed: u32,
    /// Time from the moment `needed` dependencies are met to the start, picoseconds.
    pub delay: Ps,
}

/// One flow reaching one point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// The flow waited for.
    pub flow: FlowId,
    /// What of it is waited for.
    pub on: On,
}

/// The point in a flow's life a dependency waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum On {
    /// The sender is done with the flow: its last byte has been sent and acknowledged. This is
    /// htsim's `send_done_trigger`, which its RoCE, NDP and HPCC senders fire on the ACK that
    /// covers the flow's last byte.
    Sent,
    /// The receiver holds the flow's last byte (htsim's `recv_done_trigger`); a ring
    /// collective's next step waits for this.
    Delivered,
}

/// A set of QPs from one endpoint to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connection {
    /// The sending endpoint.
    pub src: u32,
    /// The receiving endpoint.
    pub dst: u32,
    /// How many QPs it has (`Flow::qp` is below this).
    pub qps: u16,
}

/// Where a flow sits in a collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// The collective (an index into [`Flows::collectives`]).
    pub collective: u16,
    /// The iteration (repetition), from 0.
    pub iteration: u32,
    /// The step within the iteration, from 0 (below `Collective::steps`).
    pub step: u32,
}

/// A link htsim's matrix fails: link `link` of switch `switch` of tier `tier` (htsim numbers
/// them in its fat-tree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFailure {
    /// The switch's tier.
    pub tier: Tier,
    /// The switch within its tier.
    pub switch: u32,
    /// The link (uplink port) within the switch.
    pub link: u32,
}

/// A tier of htsim's fat-tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Top-of-rack (edge) switches.
    Tor,
    /// Aggregation switches.
    Agg,
    /// Core switches.
    Core,
}

/// Why a list of flows' dependencies is not a plan that can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlanError {
    /// Flow `flow` waits for a flow that does not exist.
    #[error("this flow waits for flow {missing}, which does not exist")]
    Unknown { flow: usize, missing: FlowId },
    /// Flow `flow` needs more (or fewer than one) of its dependencies than it has.
    #[error("this flow needs more of its dependencies than it has, or none")]
    Needed { flow: usize },
    /// Flow `flow` waits, through others, for itself.
    #[error("this flow waits, through other flows, for itself")]
    Cycle { flow: usize },
}

impl PlanError {
    /// The flow at fault.
    pub(crate) fn flow(self) -> usize {
        match self {
            PlanError::Unknown { flow, .. }
            | PlanError::Needed { flow }
            | PlanError::Cycle { flow } => flow,
        }
    }
}

/// Checks that the flows `0..count`, whose start conditions `after(i)` gives, can all start:
/// every dependency names one of them, each needs between one and all of its dependencies, and
/// no flow waits for itself through others (Kahn's algorithm over the dependency graph).
pub(crate) fn check_plan<'a>(
    count: usize,
    after: impl Fn(usize) -> Option<&'a After>,
) -> Result<(), PlanError> {
    // Who waits for each flow, in compressed rows: dependents[first[f]..first[f + 1]].
    let mut waits = vec![0u32; count];
    let mut first = vec![0usize; count + 1];
    for (flow, waiting) in waits.iter_mut().enumerate() {
        let Some(a) = after(flow) else { continue };
        if a.needed == 0 || a.needed as usize > a.deps.len() {
            return Err(PlanError::Needed { flow });
        }
        for d in &a.deps {
            if d.flow as usize >= count {
                return Err(PlanError::Unknown {
                    flow,
                    missing: d.flow,
                });
            }
            first[d.flow as usize + 1] += 1;
        }
        *waiting = a.deps.len() as u32;
    }
    for f in 0..count {
        first[f + 1] += first[f];
    }
    let mut filled = first.clone();
    let mut dependents = vec![0u32; first[count]];
    for flow in 0..count {
        for d in after(flow).map_or(&[][..], |a| &a.deps) {
            dependents[filled[d.flow as usize]] = flow as u32;
            filled[d.flow as usize] += 1;
        }
    }
    // A flow can run once all of its dependencies have (the count of `needed` does not matter
    // for a cycle: each dependency must itself be able to start).
    let mut ready: Vec<usize> = (0..count).filter(|&f| waits[f] == 0).collect();
    let mut done = 0;
    while let Some(flow) = ready.pop() {
        done += 1;
        for &next in &dependents[first[flow]..first[flow + 1]] {
            waits[next as usize] -= 1;
            if waits[next as usize] == 0 {
                ready.push(next as usize);
            }
        }
    }
    if done < count {
        let flow = (0..count).find(|&f| waits[f] > 0).unwrap_or(0);
        return Err(PlanError::Cycle { flow });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(deps: &[u32]) -> Option<After> {
        (!deps.is_empty()).then(|| After {
            deps: deps
                .iter()
                .map(|&flow| Dependency {
                    flow,
                    on: On::Delivered,
                })
                .collect(),
            needed: deps.len() as u32,
            delay: 0,
        })
    }

    fn check(graph: &[&[u32]]) -> Result<(), PlanError> {
        let starts: Vec<_> = graph.iter().map(|d| after(d)).collect();
        check_plan(starts.len(), |i| starts[i].as_ref())
    }

    #[test]
    fn chains_and_diamonds_pass() {
        assert_eq!(check(&[&[], &[0], &[1], &[0, 2]]), Ok(()));
        assert_eq!(check(&[&[2], &[], &[1]]), Ok(()));
        assert_eq!(check(&[]), Ok(()));
    }

    #[test]
    fn unknown_flows_cycles_and_bad_counts_are_found() {
        assert_eq!(
            check(&[&[], &[5]]),
            Err(PlanError::Unknown {
                flow: 1,
                missing: 5
            })
        );
        assert_eq!(check(&[&[0]]), Err(PlanError::Cycle { flow: 0 }));
        assert_eq!(
            check(&[&[], &[2], &[3], &[1]]),
            Err(PlanError::Cycle { flow: 1 })
        );
        let mut starts = [None, after(&[0])];
        if let Some(a) = starts[1].as_mut() {
            a.needed = 2;
        }
        assert_eq!(
            check_plan(2, |i| starts[i].as_ref()),
            Err(PlanError::Needed { flow: 1 })
        );
    }
}
