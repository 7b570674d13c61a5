//! Links: one direction of a cable between two ports, with a rate and a propagation delay. A
//! frame holds the transmitter for its serialisation time (frame, FCS, preamble and gap at the
//! link's rate) and reaches the far end a propagation delay after its last bit left. Frames in
//! flight keep their order; only the first one has an arrival event scheduled.

use std::collections::{BTreeMap, VecDeque};

use crate::event::{Event, EventQueue, LinkId, NodeId};
use crate::frame::Frame;
use crate::time::{frame_ps, Ps};

/// One end of a link: a node and its port (a host's one port is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct End {
    /// The node.
    pub node: NodeId,
    /// Its port.
    pub port: u16,
}

/// What a node acts on when one of its events comes due: every link direction (indexed by
/// [`LinkId`]), which it sends on and reads the rate of, and the queue its frames' arrivals
/// and its own wake-ups go on.
pub struct Wires<'a> {
    /// Every link direction.
    pub links: &'a mut [Link],
    /// The simulation's events.
    pub events: &'a mut EventQueue,
}

/// What a link direction carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames sent.
    pub frames: u64,
    /// Bytes of the frames sent (without FCS, preamble, gap).
    pub bytes: u64,
    /// Time the transmitter was busy, picoseconds.
    pub busy_ps: Ps,
    /// Frames lost because the link was down (in flight when it failed, or sent after).
    pub lost: u64,
}

/// One direction of a link.
#[derive(Debug)]
pub struct Link {
    /// Where frames leave.
    pub from: End,
    /// Where they arrive.
    pub to: End,
    /// Rate, bits per second.
    pub rate_bps: u64,
    /// Propagation delay, picoseconds.
    pub delay_ps: Ps,
    /// Whether it carries frames.
    pub up: bool,
    in_flight: VecDeque<(Ps, Frame)>,
    /// What it carried.
    pub stats: LinkStats,
    /// RoCEv2 frames carried per destination QP, when asked for ([`Link::count_qps`]).
    pub qps: Option<BTreeMap<u32, u64>>,
}

impl Link {
    /// A link from `from` to `to`.
    pub fn new(from: End, to: End, rate_bps: u64, delay_ps: Ps) -> Self {
        Link {
            from,
            to,
            rate_bps,
            delay_ps,
            up: true,
            in_flight: VecDeque::new(),
            stats: LinkStats::default(),
            qps: None,
        }
    }

    /// Counts the RoCEv2 frames it carries per destination QP from now on (which path each QP
    /// took: a cost per frame, so only where asked).
    pub fn count_qps(&mut self) {
        self.qps.get_or_insert_with(BTreeMap::new);
    }

    /// How long `frame` holds the transmitter.
    pub fn serialisation_ps(&self, frame: &Frame) -> Ps {
        frame_ps(frame.len(), self.rate_bps)
    }

    /// Starts sending `frame` at `now` on link `id`: schedules its arrival (and the end of its
    /// serialisation, [`Event::TxDone`]); returns when the transmitter is free. On a link that
    /// is down the frame is lost.
    pub fn send(&mut self, id: LinkId, now: Ps, frame: Frame, events: &mut EventQueue) -> Ps {
        let done = now + self.serialisation_ps(&frame);
        self.stats.frames += 1;
        self.stats.bytes += frame.len();
        self.stats.busy_ps += done - now;
        if let Some(qps) = &mut self.qps {
            if let crate::frame::Received::Roce(h) = crate::frame::read(&frame.data) {
                *qps.entry(h.qp).or_default() += 1;
            }
        }
        events.at(done, Event::TxDone(id));
        if !self.up {
            self.stats.lost += 1;
            return done;
        }
        let arrival = done + self.delay_ps;
        if self.in_flight.is_empty() {
            events.at(arrival, Event::Arrive(id));
        }
        self.in_flight.push_back((arrival, frame));
        done
    }

    /// Takes the frame arriving now (the first in flight), scheduling the next one's arrival.
    pub fn arrive(&mut self, id: LinkId, events: &mut EventQueue) -> Option<Frame> {
        let (_, frame) = self.in_flight.pop_front()?;
        if let Some(&(next, _)) = self.in_flight.front() {
            events.at(next, Event::Arrive(id));
        }
        Some(frame)
    }

    /// Takes the link down: what is in flight is lost.
    pub fn fail(&mut self) {
        self.up = false;
        self.stats.lost += self.in_flight.len() as u64;
        self.in_flight.clear();
    }

    /// Frames in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS;

    fn frame(len: usize) -> Frame {
        Frame {
            data: vec![0; len],
            unstored: 0,
        }
    }

    #[test]
    fn frames_serialise_then_propagate_in_order() {
        let mut events = EventQueue::default();
        let end = |node| End { node, port: 1 };
        // 100 Gb/s, 1 µs: a 976-byte frame (1000 on the wire) takes 80 ns.
        let mut link = Link::new(end(0), end(1), 100_000_000_000, 1_000 * NS);
        assert_eq!(link.send(7, 0, frame(976), &mut events), 80 * NS);
        assert_eq!(link.send(7, 80 * NS, frame(976), &mut events), 160 * NS);
        let mut order = Vec::new();
        while let Some((t, e)) = events.pop() {
            order.push((t, e));
            if e == Event::Arrive(7) {
                assert!(link.arrive(7, &mut events).is_some());
            }
        }
        assert_eq!(
            order,
            [
                (80 * NS, Event::TxDone(7)),
                (160 * NS, Event::TxDone(7)),
                (1_080 * NS, Event::Arrive(7)),
                (1_160 * NS, Event::Arrive(7)),
            ]
        );
        assert_eq!((link.stats.frames, link.stats.busy_ps), (2, 160 * NS));
    }

    #[test]
    fn a_failed_link_loses_what_it_carries() {
        let mut events = EventQueue::default();
        let end = |node| End { node, port: 1 };
        let mut link = Link::new(end(0), end(1), 1_000_000_000, 0);
        link.send(0, 0, frame(100), &mut events);
        link.fail();
        link.send(0, 0, frame(100), &mut events);
        assert_eq!((link.stats.lost, link.in_flight()), (2, 0));
    }
}
