//! 802.1Qbb priority flow control, as a receiver honours it: per priority, paused until a
//! time that a PAUSE frame sets (quanta × 512 bit times at the link speed) and a zero-time
//! frame (XON) ends; and how long the priority has been paused in all.

/// EtherType of MAC control frames.
pub const ETHERTYPE_MAC_CONTROL: u16 = crate::uapi::ETH_P_PAUSE as u16;
/// MAC control opcode of a priority-based (802.1Qbb) PAUSE.
pub const OPCODE_PFC: u16 = 0x0101;
/// Bytes of a PFC frame's MAC control payload: opcode, class-enable vector, 8 pause times.
pub const PAYLOAD_LEN: usize = 2 + 2 + 8 * 2;
/// Bit times in one pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;

/// The time `quanta` pause quanta last on a link of `link_speed_bps`, in ns.
#[inline(always)]
pub fn quanta_to_ns(quanta: u16, link_speed_bps: u64) -> u64 {
    // quanta × 512 × 10^9 < 2^56: no overflow.
    (quanta as u64 * BITS_PER_QUANTUM * 1_000_000_000) / link_speed_bps.max(1)
}

/// Pause state of one priority, shared by the data path (which writes it on each PFC frame)
/// and user space (the traffic tool honours it; `stats` reports it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcState {
    /// Monotonic time (ns) until which the priority is paused; in the past when not paused.
    pub paused_until_ns: u64,
    /// When the current (or last) pause interval began.
    pub pause_started_ns: u64,
    /// Paused time of every interval before the current (or last) one, in ns.
    pub paused_before_ns: u64,
}

impl PfcState {
    /// A PAUSE of `pause_ns` received at `now_ns`: the priority is paused until
    /// `now_ns + pause_ns` (a new PAUSE replaces the time left, as 802.1Qbb says).
    #[inline(always)]
    pub fn pause(&mut self, now_ns: u64, pause_ns: u64) {
        if !self.is_paused(now_ns) {
            // The last interval ended by itself: fold it into the total and start anew.
            self.paused_before_ns += self.paused_until_ns.saturating_sub(self.pause_started_ns);
            self.pause_started_ns = now_ns;
        }
        self.paused_until_ns = now_ns + pause_ns;
    }

    /// A zero-time PAUSE (XON) received at `now_ns`: the pause ends now.
    #[inline(always)]
    pub fn resume(&mut self, now_ns: u64) {
        if self.is_paused(now_ns) {
            self.paused_until_ns = now_ns;
        }
    }

    /// Whether the priority is paused at `now_ns`.
    #[inline(always)]
    pub fn is_paused(&self, now_ns: u64) -> bool {
        now_ns < self.paused_until_ns
    }

    /// Total time paused up to `now_ns`.
    pub fn paused_ns(&self, now_ns: u64) -> u64 {
        let current_end = self.paused_until_ns.min(now_ns);
        self.paused_before_ns + current_end.saturating_sub(self.pause_started_ns)
    }
}

#[cfg(feature = "user")]
// SAFETY: a plain `#[repr(C)]` record of integers without padding.
unsafe impl aya::Pod for PfcState {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_at_link_speeds() {
        // One quantum at 100 Gb/s is 5.12 ns; 0xffff quanta at 1 Gb/s about 33.55 ms.
        assert_eq!(quanta_to_ns(100, 100_000_000_000), 512);
        assert_eq!(quanta_to_ns(0xffff, 1_000_000_000), 33_553_920);
        assert_eq!(quanta_to_ns(0, 1_000_000_000), 0);
    }

    #[test]
    fn pause_expires_by_itself() {
        let mut s = PfcState::default();
        s.pause(1_000, 500);
        assert!(s.is_paused(1_499));
        assert!(!s.is_paused(1_500));
        assert_eq!(s.paused_ns(1_200), 200);
        assert_eq!(s.paused_ns(10_000), 500);
    }

    #[test]
    fn refresh_replaces_the_time_left() {
        let mut s = PfcState::default();
        s.pause(1_000, 500);
        s.pause(1_400, 500);
        assert!(s.is_paused(1_899));
        assert_eq!(s.paused_ns(5_000), 900);
    }

    #[test]
    fn resume_ends_the_interval_and_intervals_add_up() {
        let mut s = PfcState::default();
        s.pause(1_000, 10_000);
        s.resume(1_300);
        assert!(!s.is_paused(1_300));
        assert_eq!(s.paused_ns(2_000), 300);
        s.pause(3_000, 100);
        assert_eq!(s.paused_ns(3_050), 350);
        assert_eq!(s.paused_ns(9_000), 400);
        // A resume while not paused changes nothing.
        s.resume(9_000);
        assert_eq!(s.paused_ns(9_500), 400);
    }
}
