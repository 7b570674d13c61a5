//! Departure times computed from rates: each QP's next frame leaves one frame
//! time (at the QP's current rate) after its previous one; the sender always
//! serves the QP whose frame is due first, so QPs of equal rate take turns.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use wire::ethernet::MIN_FRAME_LEN;

/// Bytes a frame costs on the wire beyond its bytes without FCS: FCS (4),
/// preamble and start delimiter (8), inter-frame gap (12).
pub const WIRE_OVERHEAD: usize = 4 + 8 + 12;

/// Picoseconds per second.
const PS_PER_S: u128 = 1_000_000_000_000;

/// Bits a frame of `frame_len` bytes (without FCS) occupies on the wire.
pub fn wire_bits(frame_len: usize) -> u64 {
    (frame_len.max(MIN_FRAME_LEN) + WIRE_OVERHEAD) as u64 * 8
}

/// Time in picoseconds that `bits` take at `rate_bps` (a zero rate counts as 1 bit/s).
pub fn transmit_ps(bits: u64, rate_bps: u64) -> u64 {
    (u128::from(bits) * PS_PER_S / u128::from(rate_bps.max(1))) as u64
}

/// The departure schedule of a set of QPs, in picoseconds since the start:
/// a min-heap of (departure, QP), so picking the next QP costs O(log N).
#[derive(Debug, Clone)]
pub struct Schedule {
    due: BinaryHeap<Reverse<(u64, usize)>>,
    max_burst_ps: u64,
}

impl Schedule {
    /// A schedule whose QP `i` is first due at `starts_ps[i]`. A QP that falls
    /// behind its schedule catches up by at most `max_burst_ps` worth of frames;
    /// beyond that, the lost time is forgotten rather than sent as a burst.
    pub fn new(starts_ps: impl IntoIterator<Item = u64>, max_burst_ps: u64) -> Schedule {
        Schedule {
            due: starts_ps
                .into_iter()
                .enumerate()
                .map(|(qp, start)| Reverse((start, qp)))
                .collect(),
            max_burst_ps,
        }
    }

    /// The QP due first and its departure time (ties go to the lowest index).
    pub fn next(&self) -> Option<(usize, u64)> {
        self.due.peek().map(|&Reverse((due, qp))| (qp, due))
    }

    /// Records that the QP `next` returned sent `bits` at `now_ps` at
    /// `rate_bps`: its next frame is due one frame time after the previous
    /// departure. Returns whether the QP was later than the burst allowance, so
    /// that time was given up.
    pub fn advance(&mut self, bits: u64, rate_bps: u64, now_ps: u64) -> bool {
        let Some(mut top) = self.due.peek_mut() else {
            return false;
        };
        let Reverse((due, qp)) = *top;
        let earliest = now_ps.saturating_sub(self.max_burst_ps);
        *top = Reverse((due.max(earliest) + transmit_ps(bits, rate_bps), qp));
        due < earliest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_costs() {
        // A 1024-byte frame is 1048 bytes on the wire: 8384 ns at 1 Gb/s.
        assert_eq!(wire_bits(1024), 8384);
        assert_eq!(transmit_ps(wire_bits(1024), 1_000_000_000), 8_384_000);
        // Short frames are padded to 60 bytes: 84 bytes on the wire.
        assert_eq!(wire_bits(42), 672);
    }

    #[test]
    fn equal_rates_take_turns() {
        let mut schedule = Schedule::new([0; 3], 0);
        let mut order = Vec::new();
        for _ in 0..7 {
            let (qp, due) = schedule.next().unwrap();
            order.push((qp, due));
            schedule.advance(1000, 1_000_000_000, due);
        }
        // 1000 bits at 1 Gb/s: 1 us per frame per QP.
        assert_eq!(
            order,
            [
                (0, 0),
                (1, 0),
                (2, 0),
                (0, 1_000_000),
                (1, 1_000_000),
                (2, 1_000_000),
                (0, 2_000_000)
            ]
        );
    }

    #[test]
    fn rates_set_shares() {
        // QP 0 at twice QP 1's rate sends twice as many frames.
        let mut schedule = Schedule::new([0; 2], 0);
        let rates = [2_000_000_000, 1_000_000_000];
        let mut sent = [0; 2];
        for _ in 0..300 {
            let (qp, due) = schedule.next().unwrap();
            sent[qp] += 1;
            schedule.advance(1000, rates[qp], due);
        }
        assert_eq!(sent, [200, 100]);
    }

    #[test]
    fn schedule_is_exact_over_time() {
        // 1e6 frames of 8384 bits at 3 Gb/s end at exactly 8384/3 s * 1e-3: no drift.
        let mut schedule = Schedule::new([0], 0);
        for _ in 0..1_000_000 {
            let (_, due) = schedule.next().unwrap();
            schedule.advance(8384, 3_000_000_000, due);
        }
        let expected = (8384u128 * 1_000_000 * 1_000_000_000_000 / 3_000_000_000) as u64;
        let end = schedule.next().unwrap().1;
        assert!(end.abs_diff(expected) <= 1_000_000, "{end} vs {expected}");
    }

    #[test]
    fn late_starters_wait_for_their_start() {
        let mut schedule = Schedule::new([5_000_000, 0], 0);
        assert_eq!(schedule.next(), Some((1, 0)));
        schedule.advance(1000, 1_000_000_000, 0);
        // QP 1 sends every microsecond until QP 0's start.
        for t in 1..5 {
            assert_eq!(schedule.next(), Some((1, t * 1_000_000)));
            schedule.advance(1000, 1_000_000_000, t * 1_000_000);
        }
        assert_eq!(schedule.next(), Some((0, 5_000_000)));
    }

    #[test]
    fn lateness_catches_up_only_a_burst() {
        let mut schedule = Schedule::new([0], 5_000_000);
        // Sent 100 us late: the next frame is due 1 us after (now - 5 us).
        assert!(schedule.advance(1000, 1_000_000_000, 100_000_000));
        assert_eq!(schedule.next(), Some((0, 96_000_000)));
        // On time: no catch-up needed.
        assert!(!schedule.advance(1000, 1_000_000_000, 96_000_000));
        assert_eq!(schedule.next(), Some((0, 97_000_000)));
    }
}
