//! The event queue: every scheduled event in time order, ties in the order they were
//! scheduled, so that a run is the same every time. Nothing scans the fabric: a link, a port or
//! a host is touched only when one of its own events comes due.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::time::Ps;

/// Index of a link direction.
pub type LinkId = u32;
/// Index of a node (switch or host).
pub type NodeId = u32;
/// Index of a flow.
pub type FlowId = u32;

/// Something that happens at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The first frame in flight on the link reaches its far end.
    Arrive(LinkId),
    /// The link's transmitter has sent its frame: the node behind it may send the next.
    TxDone(LinkId),
    /// A node may be able to send on a port again (a pause ended, a pacing gap passed).
    Wake(NodeId, u16),
    /// A host's retransmission timer for one of its QPs (index, generation).
    Retransmit(NodeId, u32, u32),
    /// A flow starts.
    FlowStart(FlowId),
    /// Failure number N of the scenario happens.
    Fail(u32),
    /// The control plane has reacted to failure number N: new entries go in.
    Reroute(u32),
}

#[derive(Debug)]
struct Scheduled {
    at: Ps,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Events in time order.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    /// Events taken so far.
    pub taken: u64,
}

impl EventQueue {
    /// Schedules `event` at `at`.
    pub fn at(&mut self, at: Ps, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// Takes the next event, if any, with its time.
    pub fn pop(&mut self) -> Option<(Ps, Event)> {
        let Reverse(s) = self.heap.pop()?;
        self.taken += 1;
        Some((s.at, s.event))
    }

    /// When the next event is due.
    pub fn peek_time(&self) -> Option<Ps> {
        self.heap.peek().map(|Reverse(s)| s.at)
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_schedule_order() {
        let mut q = EventQueue::default();
        q.at(20, Event::FlowStart(1));
        q.at(10, Event::FlowStart(2));
        q.at(20, Event::FlowStart(3));
        q.at(10, Event::FlowStart(4));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [
                (10, Event::FlowStart(2)),
                (10, Event::FlowStart(4)),
                (20, Event::FlowStart(1)),
                (20, Event::FlowStart(3))
            ]
        );
        assert_eq!(q.taken, 4);
    }
}
