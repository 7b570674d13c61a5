//! Simulated time: integer picoseconds, fine enough for 800 Gb/s (a bit is 1.25 ps), wide
//! enough for 213 days.

/// A time or a duration, picoseconds.
pub type Ps = u64;

/// Picoseconds in a nanosecond.
pub const NS: Ps = 1_000;
/// Picoseconds in a microsecond.
pub const US: Ps = 1_000_000;
/// Picoseconds in a millisecond.
pub const MS: Ps = 1_000_000_000;
/// Picoseconds in a second.
pub const SECOND: Ps = 1_000_000_000_000;

/// Bytes a frame takes on the wire beyond the frame itself (without FCS): FCS 4, preamble and
/// start delimiter 8, inter-frame gap 12.
pub const WIRE_OVERHEAD_BYTES: u64 = 24;

/// How long `bits` take at `rate_bps`, rounded up to a picosecond.
pub fn bits_ps(bits: u64, rate_bps: u64) -> Ps {
    let ps = (u128::from(bits) * u128::from(SECOND)).div_ceil(u128::from(rate_bps.max(1)));
    Ps::try_from(ps).unwrap_or(Ps::MAX)
}

/// How long a frame of `frame_bytes` (without FCS) holds a link of `rate_bps`, with its FCS,
/// preamble and gap.
pub fn frame_ps(frame_bytes: u64, rate_bps: u64) -> Ps {
    bits_ps((frame_bytes + WIRE_OVERHEAD_BYTES) * 8, rate_bps)
}

/// `ps` as a `Duration` (nanoseconds, rounded down).
pub fn duration(ps: Ps) -> std::time::Duration {
    std::time::Duration::from_nanos(ps / NS)
}

/// `ps` in whole microseconds, the unit of v1model's timestamps.
pub fn whole_us(ps: Ps) -> u64 {
    ps / US
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_at_800g_is_exact_to_the_picosecond() {
        // 4,096 + 24 bytes at 800 Gb/s: 32,960 bits x 1.25 ps.
        assert_eq!(frame_ps(4096, 800_000_000_000), 41_200);
        // 1 bit at 3 b/s rounds up.
        assert_eq!(bits_ps(1, 3), 333_333_333_334);
        assert_eq!(whole_us(2 * US + 999_999), 2);
    }
}
