//! A RoCE Reliable Connection's sequence logic, as a RoCE NIC runs it, without frames and
//! without a clock: one place for what `lossless traffic collective` (over real frames, on a
//! real clock) and the simulator's hosts (`lossless sim`) both do.
//!
//! The [`Requester`] sends each posted message as RC SEND packets (First, Middle, Last, or
//! Only) of at most its payload, at most its window of packets unacknowledged, asking for an
//! acknowledge (BTH AckReq) every [`ACK_EVERY`] packets of a message, on its last and on the
//! last the window allows. An ACK acknowledges every packet up to its PSN; a NAK (PSN sequence
//! error) acknowledges those before its PSN and sends again from it (go-back-N); a
//! retransmission timeout, which the caller keeps on its clock, goes back to the oldest
//! unacknowledged packet ([`Requester::go_back`]). The [`Responder`] takes packets in PSN
//! order only: it acknowledges what asked for it, answers the first packet past a gap with one
//! NAK carrying the PSN it expects, and acknowledges a duplicate again when it asks, so that a
//! requester whose ACK was lost moves on.
//!
//! PSNs are 24 bits on the wire; inside, packets are numbered by a 64-bit sequence that never
//! wraps, and a PSN read off the wire is placed by its distance from what is expected
//! ([`distance`]).
#![forbid(unsafe_code)]

use std::collections::VecDeque;

use wire::bth::{Opcode, MASK_24};

/// A requester asks for an acknowledge every this many packets of a message, and on its last.
pub const ACK_EVERY: u64 = 16;

/// Half the PSN space: a PSN this far or farther ahead of the expected one is behind it.
const HALF_PSN_SPACE: u32 = 1 << 23;

/// The wire PSN of sequence number `seq`.
pub fn psn(seq: u64) -> u32 {
    (seq & u64::from(MASK_24)) as u32
}

/// How far `psn` is ahead of `base`'s PSN, in packets (negative: behind it), in 24-bit space.
pub fn distance(psn: u32, base: u64) -> i64 {
    let d = psn.wrapping_sub(self::psn(base)) & MASK_24;
    if d < HALF_PSN_SPACE {
        i64::from(d)
    } else {
        i64::from(d) - i64::from(MASK_24) - 1
    }
}

/// One packet a requester puts on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Its PSN.
    pub psn: u32,
    /// RC SEND First, Middle, Last or Only.
    pub opcode: Opcode,
    /// Payload bytes.
    pub payload_len: usize,
    /// BTH AckReq.
    pub ack_req: bool,
    /// Whether it was sent before (a go-back-N or a timeout resends it).
    pub resent: bool,
}

/// A message posted to a requester, tagged `F` (the caller's flow).
#[derive(Clone, Copy, Debug)]
struct Posted<F> {
    flow: F,
    bytes: u64,
    /// Sequence number of its first packet.
    first: u64,
    packets: u64,
}

/// A message wholly acknowledged: its flow and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done<F> {
    /// The flow it was posted as.
    pub flow: F,
    /// Its payload bytes.
    pub bytes: u64,
}

/// The requester side of a QP: messages posted as flows `F`, in order.
#[derive(Debug)]
pub struct Requester<F> {
    payload: u64,
    window: u64,
    /// Posted and not yet wholly acknowledged, oldest first.
    messages: VecDeque<Posted<F>>,
    /// Next sequence number to send.
    next: u64,
    /// Oldest unacknowledged sequence number.
    una: u64,
    /// One past the last posted packet.
    end: u64,
    /// One past the highest sequence number ever sent.
    high: u64,
}

impl<F: Copy> Requester<F> {
    /// A requester sending `payload` bytes per packet at most, with at most `window` packets
    /// unacknowledged (`u64::MAX`: no window).
    pub fn new(payload: u64, window: u64) -> Self {
        Requester {
            payload: payload.max(1),
            window: window.max(1),
            messages: VecDeque::new(),
            next: 0,
            una: 0,
            end: 0,
            high: 0,
        }
    }

    /// The requester with its first packet numbered `seq` (a QP's initial PSN, which the two
    /// ends agree on when they connect), before anything is posted.
    pub fn starting_at(mut self, seq: u64) -> Self {
        debug_assert!(self.messages.is_empty(), "nothing is posted yet");
        (self.next, self.una, self.end, self.high) = (seq, seq, seq, seq);
        self
    }

    /// Posts `flow`, a message of `bytes` (at least one packet), behind those posted before.
    pub fn post(&mut self, flow: F, bytes: u64) {
        let packets = bytes.div_ceil(self.payload).max(1);
        self.messages.push_back(Posted {
            flow,
            bytes,
            first: self.end,
            packets,
        });
        self.end += packets;
    }

    /// Whether everything posted has been acknowledged.
    pub fn idle(&self) -> bool {
        self.una == self.end
    }

    /// The oldest sequence number not yet acknowledged: every packet before it is (the count
    /// of packets acknowledged, for a QP started at 0).
    pub fn acknowledged(&self) -> u64 {
        self.una
    }

    /// Whether packets sent are unacknowledged and have not been gone back over: what a
    /// retransmission timer waits for.
    pub fn in_flight(&self) -> bool {
        self.una < self.next
    }

    /// Whether a packet ever sent is unacknowledged.
    pub fn unacknowledged(&self) -> bool {
        self.una < self.high
    }

    /// Whether a packet is left to send now: posted, not sent since the last go-back, and
    /// within the window.
    pub fn can_send(&self) -> bool {
        self.next < self.end && self.next < self.una.saturating_add(self.window)
    }

    /// The next packet to send, if the window and the posted messages allow one.
    pub fn next_packet(&mut self) -> Option<Packet> {
        if !self.can_send() {
            return None;
        }
        let seq = self.next;
        let m = self
            .messages
            .iter()
            .find(|m| seq < m.first + m.packets)
            .expect("every unacknowledged packet belongs to a posted message");
        let offset = seq - m.first;
        let last = offset + 1 == m.packets;
        let opcode = match (offset == 0, last) {
            (true, true) => Opcode::RcSendOnly,
            (true, false) => Opcode::RcSendFirst,
            (false, true) => Opcode::RcSendLast,
            (false, false) => Opcode::RcSendMiddle,
        };
        let payload_len = if last {
            m.bytes - offset * self.payload
        } else {
            self.payload
        };
        let resent = seq < self.high;
        self.next += 1;
        self.high = self.high.max(self.next);
        Some(Packet {
            psn: psn(seq),
            opcode,
            payload_len: payload_len as usize,
            // The window's last packet asks too, or a window below ACK_EVERY would wait forever.
            ack_req: last
                || (offset + 1).is_multiple_of(ACK_EVERY)
                || seq + 1 == self.una.saturating_add(self.window),
            resent,
        })
    }

    /// An acknowledge of every packet up to `psn`: the messages it completes, oldest first;
    /// `None` for a stale or impossible PSN (not among the packets sent), which changes
    /// nothing.
    pub fn on_ack(&mut self, psn: u32) -> Option<Vec<Done<F>>> {
        let d = u64::try_from(distance(psn, self.una)).ok()?;
        if self.una + d >= self.high {
            return None;
        }
        Some(self.acknowledge(self.una + d + 1))
    }

    /// A NAK (PSN sequence error) expecting `psn`: everything before it is acknowledged, and
    /// sending goes back to it. The messages completed; `None` for a stale or impossible PSN.
    pub fn on_nak(&mut self, psn: u32) -> Option<Vec<Done<F>>> {
        let d = u64::try_from(distance(psn, self.una)).ok()?;
        if self.una + d > self.high {
            return None;
        }
        let expected = self.una + d;
        let done = self.acknowledge(expected);
        self.next = expected;
        Some(done)
    }

    /// Goes back to the oldest unacknowledged packet (a retransmission timeout).
    pub fn go_back(&mut self) {
        self.next = self.una;
    }

    /// Everything before sequence number `upto` is acknowledged.
    fn acknowledge(&mut self, upto: u64) -> Vec<Done<F>> {
        let mut done = Vec::new();
        if upto <= self.una {
            return done;
        }
        self.una = upto;
        self.next = self.next.max(upto);
        while let Some(m) = self.messages.front() {
            if m.first + m.packets > upto {
                break;
            }
            done.push(Done {
                flow: m.flow,
                bytes: m.bytes,
            });
            self.messages.pop_front();
        }
        done
    }
}

/// Where a packet's PSN puts it, for a responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The packet expected: take it, and acknowledge its PSN if it asked.
    InOrder,
    /// Past a gap: drop it; the first past the gap answers with a NAK expecting this PSN.
    Ahead(Option<u32>),
    /// Already taken: drop it; if it asked, acknowledge this PSN again (the last taken).
    Duplicate(Option<u32>),
}

/// The responder side of a QP: the PSN it expects next.
#[derive(Debug, Default)]
pub struct Responder {
    /// Next sequence number expected.
    next: u64,
    /// A NAK was sent for `next` and nothing in order came since: no second one.
    nak_sent: bool,
}

impl Responder {
    /// A responder expecting sequence number `seq` first (the QP's initial PSN).
    pub fn starting_at(seq: u64) -> Self {
        Responder {
            next: seq,
            nak_sent: false,
        }
    }

    /// Whether `psn` is the PSN expected next (what [`Responder::arrive`] would take).
    pub fn expects(&self, psn: u32) -> bool {
        distance(psn, self.next) == 0
    }

    /// Places a packet of `psn` (`ack_req` its BTH AckReq); an in-order one is taken.
    pub fn arrive(&mut self, psn: u32, ack_req: bool) -> Arrival {
        let d = distance(psn, self.next);
        if d > 0 {
            let nak = (!self.nak_sent).then(|| {
                self.nak_sent = true;
                self::psn(self.next)
            });
            return Arrival::Ahead(nak);
        }
        if d < 0 {
            let ack = (ack_req && self.next > 0).then(|| self::psn(self.next - 1));
            return Arrival::Duplicate(ack);
        }
        self.next += 1;
        self.nak_sent = false;
        Arrival::InOrder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(qp: &mut Requester<u32>) -> Vec<Packet> {
        std::iter::from_fn(|| qp.next_packet()).collect()
    }

    #[test]
    fn psns_are_placed_by_their_distance_in_24_bits() {
        assert_eq!(psn(MASK_24 as u64 + 2), 1);
        assert_eq!(distance(1, MASK_24 as u64), 2);
        assert_eq!(distance(MASK_24, 1), -2);
        assert_eq!(distance(5, 5), 0);
    }

    #[test]
    fn a_message_goes_as_first_middles_and_last_within_the_window() {
        let mut qp = Requester::new(1000, 3);
        qp.post(7, 3500);
        let sent = drain(&mut qp);
        let opcodes: Vec<Opcode> = sent.iter().map(|p| p.opcode).collect();
        assert_eq!(
            opcodes,
            [
                Opcode::RcSendFirst,
                Opcode::RcSendMiddle,
                Opcode::RcSendMiddle
            ]
        );
        // The window's last asks for an acknowledge.
        assert!(sent[2].ack_req && !sent[0].ack_req);
        assert_eq!(qp.on_ack(0), Some(vec![]));
        let last = drain(&mut qp);
        assert_eq!(last[0].opcode, Opcode::RcSendLast);
        assert_eq!(last[0].payload_len, 500);
        assert_eq!(
            qp.on_ack(3),
            Some(vec![Done {
                flow: 7,
                bytes: 3500
            }])
        );
        assert!(qp.idle());
        // Acknowledges of what was never sent, or long ago, change nothing.
        assert_eq!(qp.on_ack(9), None);
        assert_eq!(qp.on_ack(2), None);
    }

    #[test]
    fn a_nak_goes_back_and_a_timeout_goes_back_to_the_oldest() {
        let mut qp = Requester::new(100, u64::MAX);
        qp.post(1, 100);
        qp.post(2, 300);
        assert_eq!(drain(&mut qp).len(), 4);
        let mut rx = Responder::default();
        assert_eq!(rx.arrive(0, true), Arrival::InOrder);
        // Packet 1 lost: 2 and 3 are past the gap, NAKed once.
        assert_eq!(rx.arrive(2, false), Arrival::Ahead(Some(1)));
        assert_eq!(rx.arrive(3, true), Arrival::Ahead(None));
        assert_eq!(
            qp.on_nak(1),
            Some(vec![Done {
                flow: 1,
                bytes: 100
            }])
        );
        let resent = drain(&mut qp);
        assert_eq!(resent.len(), 3);
        assert!(resent.iter().all(|p| p.resent));
        assert_eq!(rx.arrive(1, false), Arrival::InOrder);
        assert_eq!(rx.arrive(1, true), Arrival::Duplicate(Some(1)));
        assert!(qp.in_flight() && qp.unacknowledged());
        qp.go_back();
        assert!(!qp.in_flight() && qp.can_send());
        assert_eq!(
            qp.on_ack(3),
            Some(vec![Done {
                flow: 2,
                bytes: 300
            }])
        );
        assert!(qp.idle() && !qp.unacknowledged());
    }

    #[test]
    fn psns_wrap_at_24_bits() {
        // Both sides start a few packets before the wrap.
        let start = u64::from(MASK_24) - 3;
        let mut qp = Requester::new(1, 64).starting_at(start);
        let mut rx = Responder::starting_at(start);
        qp.post(0, 40);
        let mut psns = Vec::new();
        let mut done = Vec::new();
        while let Some(p) = qp.next_packet() {
            psns.push(p.psn);
            assert_eq!(rx.arrive(p.psn, p.ack_req), Arrival::InOrder);
            if p.ack_req {
                done.extend(qp.on_ack(p.psn).unwrap());
            }
        }
        assert_eq!(
            psns[..5],
            [MASK_24 - 3, MASK_24 - 2, MASK_24 - 1, MASK_24, 0]
        );
        assert_eq!(done, [Done { flow: 0, bytes: 40 }]);
        assert!(qp.idle());
    }
}
