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
///
/// What the peer *requests* (a run of PAUSE frames, each arriving before the last one
/// expired) is kept apart from what is *honoured*, so the watchdog can see a storm — a run
/// longer than its limit — and, if told to, stop honouring it until the run breaks.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcState {
    /// Monotonic time (ns) until which the priority is paused (honoured); in the past when not.
    pub paused_until_ns: u64,
    /// When the current (or last) honoured pause interval began.
    pub pause_started_ns: u64,
    /// Honoured pause time of every interval before the current (or last) one, in ns.
    pub paused_before_ns: u64,
    /// When the current run of pause requests began.
    pub requested_since_ns: u64,
    /// Until when the peer's latest request asks to pause.
    pub requested_until_ns: u64,
    /// 1 while the current run of requests is a storm (longer than the watchdog limit).
    pub storm: u64,
}

/// The PFC watchdog's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watchdog {
    /// A run of pause requests longer than this is a storm.
    pub limit_ns: u64,
    /// Stop honouring a priority's pauses while it storms.
    pub ignore_storms: bool,
}

/// What a PAUSE frame did to one priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseOutcome {
    /// The pause is honoured.
    Honoured,
    /// This PAUSE made the run a storm (count and log it once).
    StormStarted,
    /// A storm goes on.
    Storming,
}

impl PfcState {
    /// A PAUSE of `pause_ns` received at `now_ns`. A new PAUSE replaces the time left, as
    /// 802.1Qbb says; the watchdog decides whether it is honoured.
    #[inline(always)]
    pub fn pause(&mut self, now_ns: u64, pause_ns: u64, watchdog: Watchdog) -> PauseOutcome {
        if now_ns >= self.requested_until_ns {
            // A break in the requests: a new run, and the end of any storm.
            self.requested_since_ns = now_ns;
            self.storm = 0;
        }
        self.requested_until_ns = now_ns + pause_ns;
        let outcome = if now_ns - self.requested_since_ns < watchdog.limit_ns {
            PauseOutcome::Honoured
        } else if self.storm == 0 {
            self.storm = 1;
            PauseOutcome::StormStarted
        } else {
            PauseOutcome::Storming
        };
        if outcome != PauseOutcome::Honoured && watchdog.ignore_storms {
            self.resume(now_ns);
        } else {
            self.honour_until(now_ns, now_ns + pause_ns);
        }
        outcome
    }

    #[inline(always)]
    fn honour_until(&mut self, now_ns: u64, until_ns: u64) {
        if !self.is_paused(now_ns) {
            // The last interval ended by itself: fold it into the total and start anew.
            self.paused_before_ns += self.paused_until_ns.saturating_sub(self.pause_started_ns);
            self.pause_started_ns = now_ns;
        }
        self.paused_until_ns = until_ns;
    }

    /// A zero-time PAUSE (XON) received at `now_ns`: the pause and the run of requests end.
    #[inline(always)]
    pub fn xon(&mut self, now_ns: u64) {
        self.requested_until_ns = now_ns;
        self.storm = 0;
        self.resume(now_ns);
    }

    /// Ends the honoured pause now.
    #[inline(always)]
    fn resume(&mut self, now_ns: u64) {
        if self.is_paused(now_ns) {
            self.paused_until_ns = now_ns;
        }
    }

    /// Whether the priority is paused (honoured) at `now_ns`.
    #[inline(always)]
    pub fn is_paused(&self, now_ns: u64) -> bool {
        now_ns < self.paused_until_ns
    }

    /// Total honoured pause time up to `now_ns`.
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

    const NO_WATCHDOG: Watchdog = Watchdog {
        limit_ns: u64::MAX,
        ignore_storms: false,
    };

    #[test]
    fn pause_expires_by_itself() {
        let mut s = PfcState::default();
        s.pause(1_000, 500, NO_WATCHDOG);
        assert!(s.is_paused(1_499));
        assert!(!s.is_paused(1_500));
        assert_eq!(s.paused_ns(1_200), 200);
        assert_eq!(s.paused_ns(10_000), 500);
    }

    #[test]
    fn refresh_replaces_the_time_left() {
        let mut s = PfcState::default();
        s.pause(1_000, 500, NO_WATCHDOG);
        s.pause(1_400, 500, NO_WATCHDOG);
        assert!(s.is_paused(1_899));
        assert_eq!(s.paused_ns(5_000), 900);
    }

    #[test]
    fn resume_ends_the_interval_and_intervals_add_up() {
        let mut s = PfcState::default();
        s.pause(1_000, 10_000, NO_WATCHDOG);
        s.xon(1_300);
        assert!(!s.is_paused(1_300));
        assert_eq!(s.paused_ns(2_000), 300);
        s.pause(3_000, 100, NO_WATCHDOG);
        assert_eq!(s.paused_ns(3_050), 350);
        assert_eq!(s.paused_ns(9_000), 400);
        // An XON while not paused changes nothing.
        s.xon(9_000);
        assert_eq!(s.paused_ns(9_500), 400);
    }

    #[test]
    fn a_long_run_of_refreshes_is_a_storm_once() {
        let watchdog = Watchdog {
            limit_ns: 1_000,
            ignore_storms: false,
        };
        let mut s = PfcState::default();
        let outcomes: [PauseOutcome; 8] =
            core::array::from_fn(|i| s.pause(10_000 + 400 * i as u64, 500, watchdog));
        use PauseOutcome::*;
        assert_eq!(
            outcomes,
            [
                Honoured,
                Honoured,
                Honoured,
                StormStarted,
                Storming,
                Storming,
                Storming,
                Storming
            ]
        );
        // Counted, still honoured: paused the whole time.
        assert!(s.is_paused(12_900));
        // A break ends the storm; the next run starts fresh.
        assert_eq!(s.pause(20_000, 500, watchdog), Honoured);
        assert_eq!(s.storm, 0);
    }

    #[test]
    fn an_ignoring_watchdog_stops_honouring_a_storm_until_it_breaks() {
        let watchdog = Watchdog {
            limit_ns: 1_000,
            ignore_storms: true,
        };
        let mut s = PfcState::default();
        for t in (0..=1_200).step_by(400) {
            s.pause(t, 500, watchdog);
        }
        assert!(!s.is_paused(1_250), "a storm is not honoured");
        assert_eq!(s.pause(1_600, 500, watchdog), PauseOutcome::Storming);
        assert!(!s.is_paused(1_700));
        s.xon(1_800);
        assert_eq!(s.pause(1_900, 500, watchdog), PauseOutcome::Honoured);
        assert!(s.is_paused(2_000));
    }
}
