//! A Reliable Connection's transport, as a RoCE NIC runs it, without the frames: what a QP's
//! requester sends next and what its responder answers, for [`super::collective`] to put on
//! the wire.
//!
//! The requester ([`SendQp`]) sends each message as RC SEND packets (First, Middle, Last, or
//! Only), at most [`SendQp::new`]'s window of packets unacknowledged, asking for an
//! acknowledge (BTH AckReq) every [`ACK_EVERY`] packets, on each message's last and on the
//! last the window allows. The
//! responder ([`RecvQp`]) takes packets in PSN order only: it acknowledges what asked for it,
//! answers the first packet past a gap with one NAK (PSN sequence error, carrying the PSN it
//! expects) and re-acknowledges duplicates, so that a requester whose ACK was lost moves on.
//! On a NAK the requester goes back N (resends from the PSN the NAK names); with nothing
//! acknowledged for a retransmission timeout it resends from the oldest unacknowledged packet,
//! which also covers a lost tail and a peer that is not up yet.
//!
//! The sequence logic (PSNs, packets of a message, ACK, NAK, go-back-N) is the `roce-rc`
//! crate's, which the simulator's hosts run too; here are the clock, the counts and the
//! responder's check that the messages are the ones planned.

use std::collections::VecDeque;

use roce_rc::{Arrival, Requester};
use wire::bth::Opcode;
use workload::FlowId;

pub use roce_rc::{Packet, ACK_EVERY};

/// What a requester did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SendCounts {
    /// Packets sent, resent ones included.
    pub packets: u64,
    /// Payload bytes acknowledged.
    pub bytes: u64,
    /// Packets sent again (go-back-N and timeouts).
    pub resent: u64,
    /// NAKs received.
    pub naks: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
}

/// The requester side of a QP: [`roce_rc::Requester`] with its retransmission timer and
/// counts.
#[derive(Debug)]
pub struct SendQp {
    requester: Requester<FlowId>,
    rto_ns: u64,
    /// When the requester last saw progress (an acknowledge of new packets, or a post onto an
    /// idle QP), ns.
    progress_ns: u64,
    counts: SendCounts,
}

impl SendQp {
    /// A requester sending `payload` bytes per packet at most, with at most `window` packets
    /// unacknowledged, going back to the oldest after `rto_ns` without progress.
    pub fn new(payload: u64, window: u64, rto_ns: u64) -> Self {
        SendQp {
            requester: Requester::new(payload, window),
            rto_ns,
            progress_ns: 0,
            counts: SendCounts::default(),
        }
    }

    /// Posts `flow`, a message of `bytes` (at least one packet), behind those posted before.
    pub fn post(&mut self, flow: FlowId, bytes: u64, now_ns: u64) {
        if self.requester.idle() {
            self.progress_ns = now_ns;
        }
        self.requester.post(flow, bytes);
    }

    /// Whether everything posted has been acknowledged.
    pub fn idle(&self) -> bool {
        self.requester.idle()
    }

    /// What it did so far.
    pub fn counts(&self) -> SendCounts {
        self.counts
    }

    /// The next packet to send, if the window and the posted messages allow one.
    pub fn next_packet(&mut self) -> Option<Packet> {
        let packet = self.requester.next_packet()?;
        self.counts.packets += 1;
        self.counts.resent += u64::from(packet.resent);
        Some(packet)
    }

    /// An acknowledge of every packet up to `psn`: returns the messages it completes, oldest
    /// first. A stale or impossible PSN (not among the packets sent) changes nothing.
    pub fn on_ack(&mut self, psn: u32, now_ns: u64) -> Vec<FlowId> {
        let Some(done) = self.requester.on_ack(psn) else {
            return Vec::new();
        };
        // An acknowledge that is not stale always acknowledges a packet more.
        self.progress_ns = now_ns;
        self.completed(done)
    }

    /// A NAK (PSN sequence error) expecting `psn`: everything before it is acknowledged, and
    /// sending goes back to it. Returns the messages completed.
    pub fn on_nak(&mut self, psn: u32, now_ns: u64) -> Vec<FlowId> {
        let before = self.requester.acknowledged();
        let Some(done) = self.requester.on_nak(psn) else {
            return Vec::new();
        };
        self.counts.naks += 1;
        if self.requester.acknowledged() > before {
            self.progress_ns = now_ns;
        }
        self.completed(done)
    }

    /// Counts the messages `done` completed.
    fn completed(&mut self, done: Vec<roce_rc::Done<FlowId>>) -> Vec<FlowId> {
        done.into_iter()
            .map(|d| {
                self.counts.bytes += d.bytes;
                d.flow
            })
            .collect()
    }

    /// Goes back to the oldest unacknowledged packet if nothing was acknowledged for the
    /// retransmission timeout; returns whether it did.
    pub fn on_timer(&mut self, now_ns: u64) -> bool {
        if !self.requester.in_flight() || now_ns < self.progress_ns + self.rto_ns {
            return false;
        }
        self.counts.timeouts += 1;
        self.requester.go_back();
        self.progress_ns = now_ns;
        true
    }

    /// When [`SendQp::on_timer`] would next go back, if packets are out.
    pub fn deadline_ns(&self) -> Option<u64> {
        self.requester
            .in_flight()
            .then_some(self.progress_ns + self.rto_ns)
    }
}

/// What a responder answers a packet with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// An acknowledge of every packet up to this PSN.
    Ack(u32),
    /// A NAK, PSN sequence error: this PSN is the one expected.
    Nak(u32),
}

/// What a responder made of one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// The message it completed, if any.
    pub delivered: Option<FlowId>,
    /// The answer to send, if any.
    pub reply: Option<Reply>,
}

/// Why a responder refuses a packet in sequence: the peer does not follow the plan both
/// sides were given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// A message arrived when none was expected.
    #[error("a message arrived when none more was expected")]
    Unexpected,
    /// A message ended with another size than expected.
    #[error("flow {flow}: a message of {got} bytes where {expected} were expected")]
    Size {
        /// The flow expected.
        flow: FlowId,
        /// Its bytes.
        expected: u64,
        /// The bytes that came.
        got: u64,
    },
}

/// What a responder did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecvCounts {
    /// Packets taken in order.
    pub packets: u64,
    /// Payload bytes of the messages delivered.
    pub bytes: u64,
    /// Packets past a gap, dropped.
    pub out_of_order: u64,
    /// Packets already taken, dropped.
    pub duplicates: u64,
    /// NAKs sent.
    pub naks: u64,
}

/// The responder side of a QP: [`roce_rc::Responder`], with the messages it expects, in
/// order, and its counts.
#[derive(Debug, Default)]
pub struct RecvQp {
    expected: VecDeque<(FlowId, u64)>,
    responder: roce_rc::Responder,
    /// Bytes of the message under way.
    partial: u64,
    counts: RecvCounts,
}

impl RecvQp {
    /// Expects `flow`, a message of `bytes`, after those expected before.
    pub fn expect(&mut self, flow: FlowId, bytes: u64) {
        self.expected.push_back((flow, bytes));
    }

    /// Whether every message expected has come.
    pub fn idle(&self) -> bool {
        self.expected.is_empty()
    }

    /// What it did so far.
    pub fn counts(&self) -> RecvCounts {
        self.counts
    }

    /// Takes a data packet (`opcode` RC SEND First/Middle/Last/Only, `payload_len` bytes).
    pub fn on_data(
        &mut self,
        psn: u32,
        opcode: Opcode,
        payload_len: usize,
        ack_req: bool,
    ) -> Result<Received, RecvError> {
        // A packet in order with no message expected is refused before it is taken.
        if self.responder.expects(psn) && self.expected.is_empty() {
            return Err(RecvError::Unexpected);
        }
        let (delivered, reply) = match self.responder.arrive(psn, ack_req) {
            Arrival::Ahead(nak) => {
                self.counts.out_of_order += 1;
                self.counts.naks += u64::from(nak.is_some());
                (None, nak.map(Reply::Nak))
            }
            Arrival::Duplicate(ack) => {
                self.counts.duplicates += 1;
                (None, ack.map(Reply::Ack))
            }
            Arrival::InOrder => (
                self.take(opcode, payload_len)?,
                ack_req.then_some(Reply::Ack(psn)),
            ),
        };
        Ok(Received { delivered, reply })
    }

    /// Takes the payload of the packet in order: the flow whose message it completes, if it
    /// does.
    fn take(&mut self, opcode: Opcode, payload_len: usize) -> Result<Option<FlowId>, RecvError> {
        let &(flow, bytes) = self.expected.front().ok_or(RecvError::Unexpected)?;
        self.counts.packets += 1;
        self.partial += payload_len as u64;
        if !matches!(opcode, Opcode::RcSendLast | Opcode::RcSendOnly) {
            return Ok(None);
        }
        let got = std::mem::take(&mut self.partial);
        if got != bytes {
            return Err(RecvError::Size {
                flow,
                expected: bytes,
                got,
            });
        }
        self.expected.pop_front();
        self.counts.bytes += bytes;
        Ok(Some(flow))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every packet the requester has to send now.
    fn drain(qp: &mut SendQp) -> Vec<Packet> {
        std::iter::from_fn(|| qp.next_packet()).collect()
    }

    /// A requester of 100-byte packets, `window` packets and a timeout of `rto_ns`, and its
    /// responder, both with message `flow` of `bytes` posted at 0; and what the requester sends
    /// first.
    fn posted(window: u64, rto_ns: u64, flow: FlowId, bytes: u64) -> (SendQp, RecvQp, Vec<Packet>) {
        let mut tx = SendQp::new(100, window, rto_ns);
        let mut rx = RecvQp::default();
        tx.post(flow, bytes, 0);
        rx.expect(flow, bytes);
        let sent = drain(&mut tx);
        (tx, rx, sent)
    }

    /// Packet `p` arriving at the responder.
    fn arrive(rx: &mut RecvQp, p: &Packet) -> Received {
        rx.on_data(p.psn, p.opcode, p.payload_len, p.ack_req)
            .unwrap()
    }

    #[test]
    fn a_message_goes_as_first_middles_and_last_and_asks_for_acks() {
        let mut qp = SendQp::new(1000, 100, 1_000);
        qp.post(7, 17_500, 0);
        let sent = drain(&mut qp);
        assert_eq!(sent.len(), 18);
        assert_eq!(sent[0].opcode, Opcode::RcSendFirst);
        assert!(sent[1..17].iter().all(|p| p.opcode == Opcode::RcSendMiddle));
        assert_eq!(
            (sent[17].opcode, sent[17].payload_len),
            (Opcode::RcSendLast, 500)
        );
        let asks: Vec<u32> = sent.iter().filter(|p| p.ack_req).map(|p| p.psn).collect();
        assert_eq!(asks, [15, 17]);
        assert_eq!(qp.on_ack(15, 1), Vec::<FlowId>::new());
        assert_eq!(qp.on_ack(17, 2), vec![7]);
        assert!(qp.idle());
        assert_eq!(qp.counts().bytes, 17_500);
    }

    #[test]
    fn a_lost_packet_is_naked_once_and_resent_from_there() {
        let (mut tx, mut rx, sent) = posted(8, 1_000_000, 1, 500);
        assert_eq!(sent.len(), 5);
        let mut replies = Vec::new();
        // Packet 1 is lost.
        for p in sent.iter().filter(|p| p.psn != 1) {
            let r = arrive(&mut rx, p);
            assert_eq!(r.delivered, None);
            replies.extend(r.reply);
        }
        assert_eq!(replies, [Reply::Nak(1)]);
        assert_eq!(tx.on_nak(1, 10), Vec::<FlowId>::new());
        let again = drain(&mut tx);
        assert_eq!(
            again.iter().map(|p| p.psn).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert!(again.iter().all(|p| p.resent));
        let mut delivered = None;
        for p in &again {
            let r = arrive(&mut rx, p);
            delivered = delivered.or(r.delivered);
            if let Some(Reply::Ack(psn)) = r.reply {
                assert_eq!(tx.on_ack(psn, 20), vec![1]);
            }
        }
        assert_eq!(delivered, Some(1));
        assert!(tx.idle() && rx.idle());
        assert_eq!((tx.counts().resent, tx.counts().naks), (4, 1));
        assert_eq!((rx.counts().out_of_order, rx.counts().naks), (3, 1));
    }

    #[test]
    fn a_lost_tail_is_resent_after_the_timeout_and_a_duplicate_is_acked_again() {
        let (mut tx, mut rx, sent) = posted(8, 1_000, 3, 200);
        // The last packet arrives, its ACK is lost.
        for p in &sent {
            arrive(&mut rx, p);
        }
        assert!(rx.idle());
        assert_eq!(tx.deadline_ns(), Some(1_000));
        assert!(!tx.on_timer(999));
        assert!(tx.on_timer(1_000));
        let again = drain(&mut tx);
        assert_eq!(again.len(), 2);
        let r = rx
            .on_data(again[1].psn, again[1].opcode, again[1].payload_len, true)
            .unwrap();
        assert_eq!(
            r,
            Received {
                delivered: None,
                reply: Some(Reply::Ack(1))
            }
        );
        assert_eq!(tx.on_ack(1, 1_500), vec![3]);
        assert_eq!(tx.counts().timeouts, 1);
        assert_eq!(rx.counts().duplicates, 1);
    }

    #[test]
    fn the_window_holds_packets_back_until_acked() {
        let mut tx = SendQp::new(10, 4, 1_000);
        tx.post(0, 100, 0);
        assert_eq!(drain(&mut tx).len(), 4);
        tx.on_ack(1, 5);
        assert_eq!(drain(&mut tx).len(), 2);
        // An ACK for a packet never sent changes nothing.
        assert!(tx.on_ack(9, 6).is_empty());
        assert_eq!(drain(&mut tx).len(), 0);
    }

    #[test]
    fn a_window_below_the_ack_interval_asks_for_an_ack_when_full() {
        let mut tx = SendQp::new(10, 4, 1_000);
        let mut rx = RecvQp::default();
        tx.post(0, 200, 0);
        rx.expect(0, 200);
        let mut done = Vec::new();
        while done.is_empty() {
            let sent = drain(&mut tx);
            assert!(!sent.is_empty(), "stalled at {:?}", tx.counts());
            assert!(sent.last().unwrap().ack_req);
            for p in sent {
                let r = arrive(&mut rx, &p);
                if let Some(Reply::Ack(psn)) = r.reply {
                    done.extend(tx.on_ack(psn, 1));
                }
            }
        }
        assert_eq!(done, [0]);
    }

    #[test]
    fn a_peer_off_plan_is_refused() {
        let mut rx = RecvQp::default();
        assert_eq!(
            rx.on_data(0, Opcode::RcSendOnly, 10, true),
            Err(RecvError::Unexpected)
        );
        rx.expect(4, 20);
        assert_eq!(
            rx.on_data(0, Opcode::RcSendOnly, 10, true),
            Err(RecvError::Size {
                flow: 4,
                expected: 20,
                got: 10
            })
        );
    }
}
