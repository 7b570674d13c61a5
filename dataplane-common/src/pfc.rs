//! 802.1Qbb priority flow control, as a receiver honours it: per priority, paused until a
//! time that a PAUSE frame sets (quanta × 512 bit times at the link speed, `wire::pfc`) and a
//! zero-time frame (XON) ends; and how long the priority has been paused in all. As a sender:
//! when this host's ingress buffer asks for a PAUSE or a resume, and the frame, built by
//! `wire::pfc`.

use wire::ethernet::Address;
use wire::pfc::{self, FRAME_LEN};

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

/// `skb->mark` of a clone the TC ingress program sends to egress to become a PFC frame:
/// this base, plus 8 for XON, plus the priority.
pub const PFC_MARK_BASE: u32 = 0x4c4c_5000;

/// The `skb->mark` that asks the egress program for a PAUSE (or, with `xon`, a resume) of
/// `priority`.
#[inline(always)]
pub const fn pfc_mark(priority: usize, xon: bool) -> u32 {
    PFC_MARK_BASE | (if xon { 8 } else { 0 }) | (priority as u32 & 7)
}

/// The priority and XON bit a mark from [`pfc_mark`] carries, if it is one.
#[inline(always)]
pub const fn parse_pfc_mark(mark: u32) -> Option<(usize, bool)> {
    if mark & !0xf != PFC_MARK_BASE {
        return None;
    }
    Some(((mark & 7) as usize, mark & 8 != 0))
}

/// An 802.1Qbb frame from `source` pausing `priority` for `quanta` (0: resume).
#[inline(always)]
pub fn build_pfc_frame(source: &[u8; 6], priority: usize, quanta: u16) -> [u8; FRAME_LEN] {
    let mut frame = [0u8; FRAME_LEN];
    // A buffer of FRAME_LEN bytes always holds the frame: this cannot fail.
    let _ = pfc::Repr::new(1 << (priority & 7), quanta).emit_frame(Address(*source), &mut frame);
    frame
}

/// When to send PFC frames for one priority of this host's ingress buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcProfile {
    /// 1 when this host generates PAUSE frames for the priority.
    pub enabled: u32,
    /// Pause time asked for, in quanta.
    pub quanta: u32,
    /// At or above this buffer occupancy a PAUSE goes out.
    pub xoff_bytes: u32,
    /// Below this occupancy (after a PAUSE) a resume goes out.
    pub xon_bytes: u32,
    /// How fast this host consumes the priority's traffic: the buffer's drain rate.
    pub drain_bytes_per_sec: u64,
}

impl PfcProfile {
    /// The default: off; when turned on, XOFF 100 KB, XON 50 KB, the longest pause, 10 Gb/s.
    pub const DEFAULT: PfcProfile = PfcProfile {
        enabled: 0,
        quanta: 0xffff,
        xoff_bytes: 100_000,
        xon_bytes: 50_000,
        drain_bytes_per_sec: 10_000_000_000 / 8,
    };
}

/// The most interfaces a received PAUSE is relayed to (`pfc.relay`).
pub const MAX_RELAY_PORTS: usize = 8;

/// PFC frames this host sent, by priority (per CPU in the map).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcTxCounters {
    /// PAUSE frames sent (first ones and refreshes).
    pub pause_tx: [u64; crate::PRIORITIES],
    /// Resume (XON) frames sent.
    pub resume_tx: [u64; crate::PRIORITIES],
    /// PAUSE frames received and handed to the relay's redirect (`pfc.relay`), counted once per
    /// frame whatever the number of interfaces (the kernel drops a frame whose listed
    /// interfaces are all gone).
    pub relayed: [u64; crate::PRIORITIES],
}

impl PfcTxCounters {
    /// Adds `other` into `self` (to sum the per-CPU copies).
    pub fn accumulate(&mut self, other: &PfcTxCounters) {
        for p in 0..crate::PRIORITIES {
            self.pause_tx[p] += other.pause_tx[p];
            self.resume_tx[p] += other.resume_tx[p];
            self.relayed[p] += other.relayed[p];
        }
    }
}

/// A PFC frame the ingress buffer asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfcSignal {
    /// Pause the peer (XOFF), or refresh a pause before it runs out.
    Pause,
    /// Let the peer send again (XON).
    Resume,
}

/// This host's ingress buffer of one priority and what it last asked of the peer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IngressBuffer {
    /// The buffer: bytes received of the priority, drained at the profile's rate.
    pub queue: crate::phantom_queue::PhantomQueue,
    /// 1 while this host asks the peer to pause.
    pub asserted: u64,
    /// When to refresh the PAUSE (half its time after it was sent).
    pub refresh_at_ns: u64,
}

impl IngressBuffer {
    /// Adds a packet of `len` bytes at `now_ns` and returns the PFC frame to send, if any:
    /// a PAUSE on crossing XOFF, refreshed at half its `pause_ns` while at or above XON;
    /// a resume on falling below XON. Packets are never dropped.
    #[inline(always)]
    pub fn on_packet(
        &mut self,
        now_ns: u64,
        len: u64,
        profile: &PfcProfile,
        pause_ns: u64,
    ) -> Option<PfcSignal> {
        let backlog = self.queue.enqueue(now_ns, len, profile.drain_bytes_per_sec);
        let above_xon = backlog >= profile.xon_bytes as u64;
        if backlog >= profile.xoff_bytes as u64 || (self.asserted != 0 && above_xon) {
            if self.asserted != 0 && now_ns < self.refresh_at_ns {
                return None;
            }
            self.asserted = 1;
            self.refresh_at_ns = now_ns + pause_ns / 2;
            return Some(PfcSignal::Pause);
        }
        if self.asserted != 0 {
            self.asserted = 0;
            return Some(PfcSignal::Resume);
        }
        None
    }
}

// SAFETY: plain `#[repr(C)]` records of integers without padding.
pod!(PfcState, PfcProfile, IngressBuffer, PfcTxCounters);

#[cfg(test)]
mod tests {
    use super::*;

    const NO_WATCHDOG: Watchdog = Watchdog {
        limit_ns: u64::MAX,
        ignore_storms: false,
    };

    /// A watchdog that sees a storm in a run of pauses longer than 1 µs, and honours it or not.
    fn storms_after_1us(ignore_storms: bool) -> Watchdog {
        Watchdog {
            limit_ns: 1_000,
            ignore_storms,
        }
    }

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
        let watchdog = storms_after_1us(false);
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
        let watchdog = storms_after_1us(true);
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

    #[test]
    fn pfc_frame_layout() {
        let frame = build_pfc_frame(&[2, 0, 0, 0, 0, 9], 3, 0xabcd);
        assert_eq!(&frame[0..6], &pfc::DST_ADDR.0);
        assert_eq!(&frame[12..18], &[0x88, 0x08, 0x01, 0x01, 0x00, 0x08]);
        assert_eq!(&frame[24..26], &[0xab, 0xcd]);
        assert!(frame[26..].iter().all(|b| *b == 0));
        let read = pfc::Repr::parse_frame(&frame).unwrap();
        assert_eq!(read, pfc::Repr::new(0b1000, 0xabcd));
        assert_eq!(parse_pfc_mark(pfc_mark(5, true)), Some((5, true)));
        assert_eq!(parse_pfc_mark(pfc_mark(2, false)), Some((2, false)));
        assert_eq!(parse_pfc_mark(0x4c4c_434e), None);
    }

    #[test]
    fn xoff_refresh_and_xon() {
        let profile = PfcProfile {
            enabled: 1,
            quanta: 100,
            xoff_bytes: 1000,
            xon_bytes: 500,
            drain_bytes_per_sec: 1_000_000,
        };
        let mut buffer = IngressBuffer::default();
        let pause_ns = 10_000;
        // 400-byte packets every 100 ns fill a 1 byte/µs buffer: XOFF at the third.
        assert_eq!(buffer.on_packet(0, 400, &profile, pause_ns), None);
        assert_eq!(buffer.on_packet(100, 400, &profile, pause_ns), None);
        assert_eq!(
            buffer.on_packet(200, 400, &profile, pause_ns),
            Some(PfcSignal::Pause)
        );
        // No refresh before half the pause time, one after.
        assert_eq!(buffer.on_packet(300, 100, &profile, pause_ns), None);
        assert_eq!(
            buffer.on_packet(5_200, 100, &profile, pause_ns),
            Some(PfcSignal::Pause)
        );
        // Drained below XON (1 byte/µs over 1 ms): resume, once.
        assert_eq!(
            buffer.on_packet(1_005_200, 10, &profile, pause_ns),
            Some(PfcSignal::Resume)
        );
        assert_eq!(buffer.on_packet(1_005_300, 10, &profile, pause_ns), None);
    }
}
