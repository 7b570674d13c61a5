//! Flows (messages, in RDMA's terms): who sends how many bytes to whom on which QP, when they
//! start — at a time, or once other flows have been sent or delivered (the chains of a
//! collective, htsim's triggers) — and when they were sent and delivered.

use crate::event::{Event, EventQueue, FlowId, NodeId};
use crate::time::Ps;

/// Which moment of a flow another waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum On {
    /// The sender is done with it: its last byte was sent and acknowledged (htsim's
    /// send-done trigger).
    Sent,
    /// Its last byte reached the receiver, all before it in order (htsim's recv-done).
    Delivered,
}

/// A flow's start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// At a time.
    At(Ps),
    /// When `needed` of the dependencies have happened, plus a delay.
    After {
        /// The flows and moments it waits for (any flow of the run but itself).
        deps: Vec<(FlowId, On)>,
        /// How many of them must happen, `1..=deps.len()`.
        needed: u32,
        /// Then this long.
        delay: Ps,
    },
}

/// A flow to simulate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// The sending host.
    pub src: NodeId,
    /// The receiving host.
    pub dst: NodeId,
    /// Bytes of payload (at least 1).
    pub bytes: u64,
    /// When it starts.
    pub start: Start,
    /// The connection it belongs to (between its two hosts): QPs of one connection share a
    /// UDP source port unless hosts give each QP its own.
    pub connection: u32,
    /// Its QP within the connection: flows of one QP go in order, one after the other.
    pub qp: u16,
}

/// When a flow started, was sent and was delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowTimes {
    /// It started (was posted to its QP).
    pub start: Option<Ps>,
    /// Its last byte was acknowledged to the sender.
    pub sent: Option<Ps>,
    /// Its last byte was delivered in order.
    pub delivered: Option<Ps>,
}

/// Why a flow was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FlowError {
    /// Zero bytes.
    #[error("flow {0} has no bytes")]
    Empty(FlowId),
    /// A dependency on a flow that does not exist, or on itself.
    #[error("flow {flow} waits for flow {on}, which is not another flow of the run")]
    Dependency {
        /// The flow.
        flow: FlowId,
        /// What it names.
        on: FlowId,
    },
    /// A count of dependencies that cannot be met.
    #[error("flow {0} waits for more dependencies than it names, or none")]
    Needed(FlowId),
    /// Past the limit.
    #[error("more than {0} flows")]
    TooMany(usize),
}

/// The most flows one run holds (QP numbers are 24 bits; flows share QPs, but a bound is
/// needed before the run allocates).
pub const MAX_FLOWS: usize = 1 << 24;

/// Every flow of a run.
#[derive(Debug, Default)]
pub struct Flows {
    specs: Vec<FlowSpec>,
    times: Vec<FlowTimes>,
    /// Dependencies still needed, per flow.
    waiting: Vec<u32>,
    /// Who waits for each flow's sent and delivered moments (built by [`Flows::schedule`]).
    dependents: Vec<Vec<(FlowId, On)>>,
}

impl Flows {
    /// Adds a flow; what it waits for is checked when the run starts ([`Flows::schedule`]),
    /// so it may name flows added after it.
    pub fn add(&mut self, spec: FlowSpec) -> Result<FlowId, FlowError> {
        if self.specs.len() >= MAX_FLOWS {
            return Err(FlowError::TooMany(MAX_FLOWS));
        }
        let id = self.specs.len() as FlowId;
        if spec.bytes == 0 {
            return Err(FlowError::Empty(id));
        }
        let waiting = match &spec.start {
            Start::At(_) => 0,
            Start::After { deps, needed, .. } => {
                if *needed == 0 || *needed as usize > deps.len() {
                    return Err(FlowError::Needed(id));
                }
                *needed
            }
        };
        self.specs.push(spec);
        self.times.push(FlowTimes::default());
        self.waiting.push(waiting);
        Ok(id)
    }

    /// Links every flow to those it waits for and schedules the flows that start at a time;
    /// refuses a dependency on a flow that does not exist or on the flow itself. A cycle of
    /// dependencies is not refused: its flows never start, and the report says so.
    pub(crate) fn schedule(&mut self, events: &mut EventQueue) -> Result<(), FlowError> {
        self.dependents = vec![Vec::new(); self.specs.len()];
        for (id, spec) in self.specs.iter().enumerate() {
            match &spec.start {
                Start::At(at) => events.at(*at, Event::FlowStart(id as FlowId)),
                Start::After { deps, .. } => {
                    for &(on, moment) in deps {
                        if on as usize == id || on as usize >= self.specs.len() {
                            return Err(FlowError::Dependency {
                                flow: id as FlowId,
                                on,
                            });
                        }
                        self.dependents[on as usize].push((id as FlowId, moment));
                    }
                }
            }
        }
        Ok(())
    }

    /// The flow's spec.
    pub fn spec(&self, flow: FlowId) -> &FlowSpec {
        &self.specs[flow as usize]
    }

    /// The flow's times.
    pub fn times(&self, flow: FlowId) -> FlowTimes {
        self.times[flow as usize]
    }

    /// Every flow with its times.
    pub fn iter(&self) -> impl Iterator<Item = (FlowId, &FlowSpec, FlowTimes)> {
        self.specs
            .iter()
            .zip(&self.times)
            .enumerate()
            .map(|(i, (s, t))| (i as FlowId, s, *t))
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    pub(crate) fn started(&mut self, flow: FlowId, now: Ps) {
        self.times[flow as usize].start = Some(now);
    }

    /// The flow's last byte was acknowledged to its sender at `now`.
    pub(crate) fn sent(&mut self, flow: FlowId, now: Ps, events: &mut EventQueue) {
        let t = &mut self.times[flow as usize];
        if t.sent.is_none() {
            t.sent = Some(now);
            self.release(flow, On::Sent, now, events);
        }
    }

    /// The flow's last byte was delivered at `now`.
    pub(crate) fn delivered(&mut self, flow: FlowId, now: Ps, events: &mut EventQueue) {
        let t = &mut self.times[flow as usize];
        if t.delivered.is_none() {
            t.delivered = Some(now);
            self.release(flow, On::Delivered, now, events);
        }
    }

    fn release(&mut self, flow: FlowId, moment: On, now: Ps, events: &mut EventQueue) {
        for i in 0..self.dependents[flow as usize].len() {
            let (next, on) = self.dependents[flow as usize][i];
            if on != moment {
                continue;
            }
            let left = &mut self.waiting[next as usize];
            if *left == 0 {
                continue; // already started on enough others
            }
            *left -= 1;
            if *left == 0 {
                let delay = match &self.specs[next as usize].start {
                    Start::After { delay, .. } => *delay,
                    Start::At(_) => 0,
                };
                events.at(now + delay, Event::FlowStart(next));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(start: Start) -> FlowSpec {
        FlowSpec {
            src: 0,
            dst: 1,
            bytes: 10,
            start,
            connection: 0,
            qp: 0,
        }
    }

    #[test]
    fn a_flow_starts_when_enough_of_what_it_waits_for_has_happened() {
        let mut flows = Flows::default();
        // Flow 0 waits for a later flow; flow 3 for any one of two.
        let c = flows
            .add(flow(Start::After {
                deps: vec![(1, On::Sent), (2, On::Delivered)],
                needed: 2,
                delay: 3,
            }))
            .unwrap();
        let a = flows.add(flow(Start::At(5))).unwrap();
        let b = flows.add(flow(Start::At(7))).unwrap();
        let d = flows
            .add(flow(Start::After {
                deps: vec![(a, On::Delivered), (b, On::Delivered)],
                needed: 1,
                delay: 0,
            }))
            .unwrap();
        let mut events = EventQueue::default();
        flows.schedule(&mut events).unwrap();
        assert_eq!(events.len(), 2);
        flows.sent(a, 10, &mut events);
        flows.delivered(a, 11, &mut events);
        flows.sent(b, 12, &mut events);
        assert_eq!(
            events.len(),
            3,
            "d starts on a alone; c still waits for b's delivery"
        );
        flows.delivered(b, 20, &mut events);
        let all: Vec<_> = std::iter::from_fn(|| events.pop()).collect();
        assert!(all.contains(&(23, Event::FlowStart(c))));
        assert_eq!(all.iter().filter(|e| e.1 == Event::FlowStart(d)).count(), 1);
    }

    #[test]
    fn dependencies_name_other_flows() {
        let mut flows = Flows::default();
        flows
            .add(flow(Start::After {
                deps: vec![(0, On::Sent)],
                needed: 1,
                delay: 0,
            }))
            .unwrap();
        let mut events = EventQueue::default();
        assert_eq!(
            flows.schedule(&mut events),
            Err(FlowError::Dependency { flow: 0, on: 0 })
        );
        assert_eq!(
            flows.add(FlowSpec {
                bytes: 0,
                ..flow(Start::At(0))
            }),
            Err(FlowError::Empty(1))
        );
        let two = Start::After {
            deps: vec![(0, On::Sent)],
            needed: 2,
            delay: 0,
        };
        assert_eq!(flows.add(flow(two)), Err(FlowError::Needed(1)));
    }
}
