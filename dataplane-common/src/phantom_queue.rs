//! A phantom (virtual) queue: a byte counter drained at a configured rate.
//!
//! It models the egress queue of a link slower than the real one: on each packet it drains by
//! elapsed time × rate, then adds the packet's length. No packet is ever held or dropped.

/// Idle gaps at least this long empty the queue whatever the rate (about 16.8 s); it keeps the
/// drain arithmetic inside 64 bits for rates up to 2^39 bytes/s (4.4 Tb/s).
pub const MAX_ELAPSED_NS: u64 = (1 << 24) * 1000;

/// State of one phantom queue, kept in a shared (not per-CPU) map entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhantomQueue {
    /// Bytes in the queue after the last packet.
    pub backlog_bytes: u64,
    /// Time (ns, monotonic) up to which the drain has been accounted.
    pub last_ns: u64,
    /// Largest backlog seen since attach.
    pub high_water_bytes: u64,
}

/// Bytes a link at `rate_bytes_per_sec` sends in `elapsed_ns` (rounded down), or `u64::MAX`
/// when the gap is [`MAX_ELAPSED_NS`] or more.
#[inline(always)]
pub fn drained_bytes(elapsed_ns: u64, rate_bytes_per_sec: u64) -> u64 {
    if elapsed_ns >= MAX_ELAPSED_NS {
        return u64::MAX;
    }
    let micros = elapsed_ns / 1000;
    let nanos = elapsed_ns % 1000;
    micros * rate_bytes_per_sec / 1_000_000 + nanos * rate_bytes_per_sec / 1_000_000_000
}

impl PhantomQueue {
    /// Drains the queue up to `now_ns`, adds a packet of `len` bytes, and returns the backlog
    /// the packet sees (including itself).
    ///
    /// Time is only consumed when it drains at least one byte, so packets closer together than
    /// one byte-time do not lose the drain between them.
    #[inline(always)]
    pub fn enqueue(&mut self, now_ns: u64, len: u64, rate_bytes_per_sec: u64) -> u64 {
        let elapsed = now_ns.saturating_sub(self.last_ns);
        let drained = drained_bytes(elapsed, rate_bytes_per_sec);
        if drained >= self.backlog_bytes {
            self.backlog_bytes = 0;
            self.last_ns = now_ns;
        } else if drained > 0 {
            self.backlog_bytes -= drained;
            self.last_ns = now_ns;
        }
        self.backlog_bytes += len;
        if self.backlog_bytes > self.high_water_bytes {
            self.high_water_bytes = self.backlog_bytes;
        }
        self.backlog_bytes
    }
}

// SAFETY: a plain `#[repr(C)]` record of integers without padding.
pod!(PhantomQueue);

#[cfg(test)]
mod tests {
    use super::*;

    const GBPS: u64 = 1_000_000_000 / 8;

    #[test]
    fn drain_is_rate_times_time() {
        assert_eq!(drained_bytes(1_000_000, GBPS), 125_000);
        assert_eq!(drained_bytes(1, 8 * GBPS), 1);
        assert_eq!(drained_bytes(999, GBPS), 124);
        assert_eq!(drained_bytes(MAX_ELAPSED_NS, 1), u64::MAX);
        // The largest supported rate over the longest gap does not overflow.
        assert!(drained_bytes(MAX_ELAPSED_NS - 1, 1 << 39) > 0);
    }

    #[test]
    fn arrivals_above_the_rate_build_a_queue() {
        let mut q = PhantomQueue::default();
        // 1000-byte packets every 4 µs (2 Gb/s) into a 1 Gb/s queue: +500 bytes per packet.
        let mut now = 1_000_000;
        q.enqueue(now, 1000, GBPS);
        for _ in 0..10 {
            now += 4000;
            q.enqueue(now, 1000, GBPS);
        }
        assert_eq!(q.backlog_bytes, 1000 + 10 * 500);
        assert_eq!(q.high_water_bytes, q.backlog_bytes);
    }

    #[test]
    fn arrivals_below_the_rate_keep_it_empty() {
        let mut q = PhantomQueue::default();
        let mut now = 0;
        for _ in 0..100 {
            now += 16_000; // 1000 bytes every 16 µs = 0.5 Gb/s
            assert_eq!(q.enqueue(now, 1000, GBPS), 1000);
        }
    }

    #[test]
    fn sub_byte_gaps_accumulate() {
        let mut q = PhantomQueue::default();
        q.enqueue(0, 100, 1_000_000); // 1 byte per µs
                                      // Arrivals every 500 ns drain half a byte each: the drain must still be counted.
        for i in 1..=10 {
            q.enqueue(i * 500, 0, 1_000_000);
        }
        assert_eq!(q.backlog_bytes, 95);
    }

    #[test]
    fn high_water_survives_drain() {
        let mut q = PhantomQueue::default();
        q.enqueue(0, 5000, GBPS);
        q.enqueue(1_000_000_000, 10, GBPS);
        assert_eq!(q.backlog_bytes, 10);
        assert_eq!(q.high_water_bytes, 5000);
    }
}
