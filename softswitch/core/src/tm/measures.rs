//! What each queue of the traffic manager measures of its own traffic, in constant memory and
//! without allocating per packet: the sojourn time of each packet (dequeue time minus enqueue
//! time) in fixed power-of-two buckets, the occupancy each arriving packet finds (a log-linear
//! histogram, for percentiles), and microbursts: episodes where the queue's occupancy reaches a
//! threshold and falls back to half of it within a window.
//!
//! Occupancy has one meaning throughout: the packets in the queue, not counting the one
//! arriving or leaving — what an arriving packet finds ahead of it (its `enq_qdepth`), what a
//! leaving one leaves behind (its `deq_qdepth`). The histogram, the burst threshold and a
//! burst's peak all count it so: a burst's peak is the most packets an arriving packet found
//! ahead of it during the burst, at most the occupancy's maximum.
//!
//! Times are the traffic manager's own timestamps, in microseconds of the switch's clock (the
//! monotonic wall clock of a running switch, the simulated time of a simulator's); a sojourn
//! under a microsecond reads 0.

/// Buckets of a sojourn-time histogram: bucket 0 counts sojourns under 1 µs, bucket `i` (1 to
/// 30) those in [2^(i−1), 2^i) µs, the last (31) those of 2^30 µs (about 18 minutes) or more.
pub const SOJOURN_BUCKETS: usize = 32;
/// Buckets of an occupancy histogram: occupancies 0 to 15 exactly, then each power of two up to
/// [`super::MAX_DEPTH`] cut into 8 equal buckets (at most 12.5% wide).
const OCCUPANCY_BUCKETS: usize = 136;

/// The occupancy (packets) at or over which a queue is in a burst, when not set otherwise.
pub const DEFAULT_BURST_THRESHOLD: u32 = 16;
/// The longest a burst lasts to count as a microburst, µs, when not set otherwise (1 ms): a
/// longer one is counted as congestion instead.
pub const DEFAULT_BURST_WINDOW_US: u64 = 1_000;
/// The longest window that may be set, µs (one minute).
pub const MAX_BURST_WINDOW_US: u64 = 60_000_000;

/// A histogram of `N` buckets over `u64` values: values under 2^(S+1) each have a bucket; above,
/// each power of two is cut into 2^S equal buckets; values past the last bucket count in it.
#[derive(Clone, Debug)]
pub struct LogHistogram<const S: u32, const N: usize> {
    counts: [u64; N],
    total: u64,
    max: u64,
}

impl<const S: u32, const N: usize> Default for LogHistogram<S, N> {
    fn default() -> Self {
        LogHistogram {
            counts: [0; N],
            total: 0,
            max: 0,
        }
    }
}

impl<const S: u32, const N: usize> LogHistogram<S, N> {
    /// The bucket of `value`.
    pub fn bucket(value: u64) -> usize {
        let exact = 2u64 << S;
        let index = if value < exact {
            value as usize
        } else {
            let octave = 63 - value.leading_zeros();
            let sub = (value >> (octave - S)) - (1 << S);
            exact as usize + ((octave - S - 1) as usize) * (1 << S) + sub as usize
        };
        index.min(N - 1)
    }

    /// The smallest value bucket `index` holds.
    pub fn lower_bound(index: usize) -> u64 {
        let exact = 2usize << S;
        if index < exact {
            return index as u64;
        }
        let j = index - exact;
        let octave = (j >> S) as u32 + S + 1;
        let sub = (j & ((1 << S) - 1)) as u64;
        ((1u64 << S) + sub) << (octave - S)
    }

    /// Counts `value`.
    pub fn record(&mut self, value: u64) {
        self.counts[Self::bucket(value)] += 1;
        self.total += 1;
        self.max = self.max.max(value);
    }

    /// The count of each bucket.
    pub fn counts(&self) -> &[u64; N] {
        &self.counts
    }

    /// Values counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The largest value counted (0 if none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q` quantile (0 to 1) as the largest value its bucket holds, at most the largest
    /// value counted: no value under it is past the quantile. 0 when nothing was counted.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let top = if i + 1 < N {
                    Self::lower_bound(i + 1) - 1
                } else {
                    u64::MAX
                };
                return top.min(self.max);
            }
        }
        self.max
    }
}

/// Sojourn times (µs) in power-of-two buckets ([`SOJOURN_BUCKETS`]).
pub type SojournHistogram = LogHistogram<0, SOJOURN_BUCKETS>;
/// Occupancies (packets) in log-linear buckets.
pub type OccupancyHistogram = LogHistogram<3, OCCUPANCY_BUCKETS>;

/// When a queue is in a burst and how short a burst must be to be a microburst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstRule {
    /// The occupancy (packets an arriving packet finds ahead of it) at or over which the queue
    /// is in a burst.
    pub threshold_packets: u32,
    /// The longest a burst may last to be a microburst, µs.
    pub window_us: u64,
}

impl BurstRule {
    /// The occupancy at or under which an episode ends: half the threshold. A queue that dips
    /// just under the threshold and climbs back (a sender descheduled for a moment in the
    /// middle of its burst, a queue hovering at the level) stays in one episode, as a
    /// comparator with hysteresis would have it.
    pub fn clear_packets(&self) -> u32 {
        self.threshold_packets / 2
    }
}

impl Default for BurstRule {
    fn default() -> Self {
        BurstRule {
            threshold_packets: DEFAULT_BURST_THRESHOLD,
            window_us: DEFAULT_BURST_WINDOW_US,
        }
    }
}

/// The bursts a queue has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bursts {
    /// Microbursts: episodes at or over the threshold that ended within the window.
    pub microbursts: u64,
    /// Episodes at or over the threshold that lasted longer than the window (congestion).
    pub longer: u64,
    /// The highest occupancy of the last microburst (the most packets an arriving packet found
    /// ahead of it), packets.
    pub last_peak_packets: u32,
    /// How long the last microburst lasted, µs.
    pub last_duration_us: u64,
    /// When the episode under way began (`None`: none under way).
    since_us: Option<u64>,
    /// The highest occupancy of the episode under way.
    peak: u32,
}

impl Bursts {
    /// Whether the queue is in an episode now.
    pub fn in_burst(&self) -> bool {
        self.since_us.is_some()
    }

    /// The episode under way, if any: when it began (µs) and its highest occupancy so far.
    pub fn open(&self) -> Option<(u64, u32)> {
        self.since_us.map(|since| (since, self.peak))
    }

    /// The queue's occupancy is `occupancy` packets at `now_us` (found by an arriving packet,
    /// or left behind by a leaving one).
    fn occupancy(&mut self, occupancy: u32, rule: BurstRule, now_us: u64) {
        match self.since_us {
            None if occupancy >= rule.threshold_packets => {
                self.since_us = Some(now_us);
                self.peak = occupancy;
            }
            Some(since) if occupancy <= rule.clear_packets() => {
                self.since_us = None;
                let lasted = now_us.saturating_sub(since);
                if lasted <= rule.window_us {
                    self.microbursts += 1;
                    self.last_peak_packets = self.peak;
                    self.last_duration_us = lasted;
                } else {
                    self.longer += 1;
                }
            }
            Some(_) => self.peak = self.peak.max(occupancy),
            None => {}
        }
    }
}

/// What one queue measures.
#[derive(Clone, Debug, Default)]
pub struct QueueMeasures {
    /// Each packet's sojourn time, µs.
    pub sojourn_us: SojournHistogram,
    /// The occupancy (packets ahead of it in its queue) each arriving packet found, as
    /// `enq_qdepth`; tail-dropped packets are not counted.
    pub occupancy: OccupancyHistogram,
    /// Its bursts.
    pub bursts: Bursts,
    /// Its burst rule.
    pub rule: BurstRule,
}

impl QueueMeasures {
    /// Measures under `rule`.
    pub fn new(rule: BurstRule) -> Self {
        QueueMeasures {
            rule,
            ..QueueMeasures::default()
        }
    }

    /// A packet arrived at `now_us` and found `ahead` packets in the queue.
    pub(crate) fn arrived(&mut self, ahead: usize, now_us: u64) {
        self.occupancy.record(ahead as u64);
        let ahead = u32::try_from(ahead).unwrap_or(u32::MAX);
        self.bursts.occupancy(ahead, self.rule, now_us);
    }

    /// A packet enqueued at `enq_us` left at `now_us`, leaving `behind` packets.
    pub(crate) fn left(&mut self, enq_us: u64, behind: usize, now_us: u64) {
        self.sojourn_us.record(now_us.saturating_sub(enq_us));
        let behind = u32::try_from(behind).unwrap_or(u32::MAX);
        self.bursts.occupancy(behind, self.rule, now_us);
    }

    /// A packet went through the queue without waiting: an empty queue's arrival and departure.
    pub(crate) fn passed(&mut self, now_us: u64) {
        self.arrived(0, now_us);
        self.left(now_us, 0, now_us);
    }

    /// Forgets what was measured; an episode under way starts again at `now_us` with the queue's
    /// `occupancy` (packets) as its peak.
    pub(crate) fn reset(&mut self, occupancy: usize, now_us: u64) {
        *self = QueueMeasures::new(self.rule);
        self.bursts.occupancy(
            u32::try_from(occupancy).unwrap_or(u32::MAX),
            self.rule,
            now_us,
        );
    }

    /// Sets the burst rule; an episode under way is judged by the new one when it ends.
    pub(crate) fn set_rule(&mut self, rule: BurstRule) {
        self.rule = rule;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sojourn_buckets_are_powers_of_two_of_microseconds() {
        let b = SojournHistogram::bucket;
        assert_eq!(
            [b(0), b(1), b(2), b(3), b(4), b(7), b(8)],
            [0, 1, 2, 2, 3, 3, 4]
        );
        assert_eq!(b(1 << 29), 30);
        assert_eq!(b((1 << 30) - 1), 30);
        assert_eq!(b(1 << 30), 31);
        assert_eq!(b(u64::MAX), 31);
        for i in 1..SOJOURN_BUCKETS {
            assert_eq!(SojournHistogram::lower_bound(i), 1 << (i - 1));
        }
    }

    #[test]
    fn occupancy_buckets_are_at_most_an_eighth_wide_and_cover_the_deepest_queue() {
        let b = OccupancyHistogram::bucket;
        for v in 0..16 {
            assert_eq!(b(v), v as usize);
        }
        let mut last = 15;
        for v in 16..=super::super::MAX_DEPTH as u64 {
            let i = b(v);
            assert!(i == last || i == last + 1, "{v}");
            let lower = OccupancyHistogram::lower_bound(i);
            assert!(
                lower <= v && v - lower <= lower / 8,
                "{v} in bucket from {lower}"
            );
            last = i;
        }
        assert_eq!(last, OCCUPANCY_BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_the_tops_of_their_buckets_capped_at_the_maximum() {
        let mut h = OccupancyHistogram::default();
        assert_eq!(h.quantile(0.5), 0);
        for v in 0..100 {
            h.record(v);
        }
        // The median, 49, is in the bucket 48..=51.
        assert_eq!(h.quantile(0.5), 51);
        // 98 and 99 share the bucket 96..=103: its top, capped at the largest value.
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!((h.max(), h.total()), (99, 100));
    }

    #[test]
    fn a_short_episode_over_the_threshold_is_a_microburst_and_a_long_one_is_not() {
        let mut m = QueueMeasures::new(BurstRule {
            threshold_packets: 3,
            window_us: 100,
        });
        // From t=13, when an arriving packet finds 3 ahead, up to 4 found ahead; 2 left behind
        // at t=60 and 2 found at t=65 (one episode still: it ends at half the threshold), down
        // to 1 at t=90.
        for (ahead, t) in [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14)] {
            m.arrived(ahead, t);
        }
        assert!(m.bursts.in_burst());
        for (behind, t) in [(4, 20), (3, 30), (2, 60)] {
            m.left(10, behind, t);
        }
        m.arrived(2, 65);
        for (behind, t) in [(2, 70), (1, 90), (0, 100)] {
            m.left(10, behind, t);
        }
        assert_eq!(
            (
                m.bursts.microbursts,
                m.bursts.last_peak_packets,
                m.bursts.last_duration_us
            ),
            (1, 4, 77)
        );
        // Over the threshold for 200 µs: congestion, not a microburst.
        for (ahead, t) in [(0, 1000), (1, 1000), (2, 1000), (3, 1000)] {
            m.arrived(ahead, t);
        }
        m.left(1000, 3, 1200);
        m.left(1000, 2, 1200);
        assert_eq!(m.bursts.longer, 0, "2 is over half the threshold");
        m.left(1000, 1, 1200);
        assert_eq!((m.bursts.microbursts, m.bursts.longer), (1, 1));
        assert_eq!(m.sojourn_us.max(), 200);
    }

    #[test]
    fn a_reset_forgets_and_restarts_an_episode_under_way() {
        let mut m = QueueMeasures::new(BurstRule {
            threshold_packets: 2,
            window_us: 50,
        });
        m.arrived(0, 0);
        m.arrived(1, 0);
        m.reset(2, 100);
        assert_eq!((m.occupancy.total(), m.bursts.microbursts), (0, 0));
        m.left(0, 1, 120);
        assert_eq!((m.bursts.microbursts, m.bursts.last_duration_us), (1, 20));
    }
}
