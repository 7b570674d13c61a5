//! CLOCK_MONOTONIC in nanoseconds: the clock of the data path's pause state and timestamps,
//! which every process reads alike.

/// Now on CLOCK_MONOTONIC, in nanoseconds: the clock of the data path's pause state.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists (vDSO, no system call).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `instant` (of this process's clock, which is CLOCK_MONOTONIC) in monotonic ns, the clock
/// other processes read too.
pub fn monotonic_ns_at(instant: std::time::Instant) -> u64 {
    let now = std::time::Instant::now();
    let ns = monotonic_ns();
    match now.checked_duration_since(instant) {
        Some(ago) => ns.saturating_sub(ago.as_nanos() as u64),
        None => ns + instant.duration_since(now).as_nanos() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward() {
        let a = monotonic_ns();
        assert!(monotonic_ns() >= a && a > 0);
    }
}
