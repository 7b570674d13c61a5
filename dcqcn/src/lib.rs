//! DCQCN's reaction point (Zhu et al., "Congestion Control for Large-Scale RDMA
//! Deployments", SIGCOMM 2015): the per-QP rate a sender keeps in reaction to
//! Congestion Notification Packets.
//!
//! [`Dcqcn`] is pure logic: time is passed in as the [`Duration`] since the
//! sender started, never read from a clock, so the same calls always give the
//! same rates, on a real clock (`lossless traffic send`) or a virtual one (the
//! simulator, `lossless sim`). A sender asks [`Dcqcn::rate_bps`] before each packet of
//! the QP and reports each packet with [`Dcqcn::on_sent`] (which runs the timers
//! up to that time and advances the byte counter); a received CNP for the QP
//! goes to [`Dcqcn::on_cnp`].
//!
//! The algorithm, with `R_C` the current rate and `R_T` the target rate:
//! - On a CNP: `R_T = R_C`, `R_C = R_C (1 - alpha/2)`, `alpha = (1-g) alpha + g`;
//!   the alpha timer, the rate-increase timer, the byte counter and both
//!   increase stages restart.
//! - Every alpha period without a CNP: `alpha = (1-g) alpha`.
//! - A rate-increase event happens each time the increase timer expires and
//!   each time the byte counter has counted `B` more bytes; each adds one to its
//!   own stage (timer stage `T`, byte stage `BC`). Then, as in the paper:
//!   while `max(T, BC) <= F` it is *fast recovery* (`R_T` unchanged); when both
//!   are past `F` it is *hyper increase* (`R_T += i R_HAI` with
//!   `i = min(T, BC) - F`); otherwise *additive increase* (`R_T += R_AI`). In
//!   every case `R_C = (R_T + R_C) / 2` afterwards.
//! - `R_T` and `R_C` stay within [minimum rate, line rate]; `R_C <= R_T`.
//!
//! The timers start with the first CNP (as in the ns-3 DCQCN models): before
//! it the QP runs at line rate and alpha keeps its initial value, so the first
//! CNP cuts with the initial alpha.
//!
//! [`RateTimeline`] records the rate over time when enabled with
//! [`Dcqcn::record`], and writes it as CSV or JSON.
#![forbid(unsafe_code)]

use std::io::{self, Write};
use std::time::Duration;

use serde::Serialize;

/// DCQCN reaction-point parameters. [`Default`] gives the published defaults
/// named on each field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnParams {
    /// Gain `g` of the alpha moving average, in (0, 1]. Default 1/256 (the
    /// DCQCN paper; PROTOCOLS.md).
    pub g: f64,
    /// Alpha update period `K`: alpha decays once per period without a CNP.
    /// Default 55 µs (the DCQCN paper; ns-3 `AlphaResumInterval`).
    pub alpha_period: Duration,
    /// Rate-increase timer `T`. Default 55 µs (the DCQCN paper's timer;
    /// PROTOCOLS.md "55 us in some simulators").
    pub increase_period: Duration,
    /// Byte counter `B`: a rate-increase event every `B` bytes sent on the
    /// wire. Default 10 MB = 10,000,000 bytes (the DCQCN paper; PROTOCOLS.md).
    pub byte_counter_bytes: u64,
    /// Fast recovery steps `F`. Default 5 (the DCQCN paper; ns-3
    /// `FastRecoveryTimes`).
    pub fast_recovery_steps: u32,
    /// Additive increase step `R_AI`, bits per second. Default 5 Mbit/s (ns-3
    /// `RdmaHw` `RateAI`, the HPCC simulator's DCQCN).
    pub rate_ai_bps: u64,
    /// Hyper increase step `R_HAI`, bits per second. Default 50 Mbit/s (ns-3
    /// `RdmaHw` `RateHAI`).
    pub rate_hai_bps: u64,
    /// The rate is never cut below this, bits per second; must be positive.
    /// Default 100 Mbit/s (ns-3 `RdmaHw` `MinRate`).
    pub min_rate_bps: u64,
    /// Alpha before the first CNP, in [0, 1]. Default 1 (the DCQCN paper;
    /// ns-3 sets alpha to 1 on the first CNP).
    pub initial_alpha: f64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        DcqcnParams {
            g: 1.0 / 256.0,
            alpha_period: Duration::from_micros(55),
            increase_period: Duration::from_micros(55),
            byte_counter_bytes: 10_000_000,
            fast_recovery_steps: 5,
            rate_ai_bps: 5_000_000,
            rate_hai_bps: 50_000_000,
            min_rate_bps: 100_000_000,
            initial_alpha: 1.0,
        }
    }
}

/// Why a [`Dcqcn`] could not be built from its parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DcqcnError {
    /// A parameter is out of its range.
    #[error("invalid DCQCN parameter {name}: {reason}")]
    Param {
        /// The parameter's field name in [`DcqcnParams`], or `line_rate_bps`.
        name: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl DcqcnParams {
    /// Parameters for a link of `link_rate_bps` carrying `frame_bytes`-byte frames that runs
    /// a thousand times slower than a data centre's (the labs' and Mininet's megabit links,
    /// where a frame takes a millisecond): the increase steps and the floor as fractions of
    /// the link rate (1/100, 1/20, 1/100), the byte counter 50 frames, both timers 5 ms, gain
    /// 1/16. The defaults' microsecond timers would recover the rate faster than a queue
    /// there can build.
    pub fn scaled_to(link_rate_bps: u64, frame_bytes: usize) -> DcqcnParams {
        DcqcnParams {
            g: 1.0 / 16.0,
            alpha_period: Duration::from_millis(5),
            increase_period: Duration::from_millis(5),
            byte_counter_bytes: frame_bytes as u64 * 50,
            rate_ai_bps: (link_rate_bps / 100).max(1),
            rate_hai_bps: (link_rate_bps / 20).max(1),
            min_rate_bps: (link_rate_bps / 100).max(1),
            ..DcqcnParams::default()
        }
    }

    /// Checks every parameter against a QP whose line rate is `line_rate_bps`.
    pub fn validate(&self, line_rate_bps: u64) -> Result<(), DcqcnError> {
        let fail = |name, reason| Err(DcqcnError::Param { name, reason });
        if !(self.g > 0.0 && self.g <= 1.0) {
            return fail("g", "must be in (0, 1]");
        }
        if self.alpha_period.is_zero() {
            return fail("alpha_period", "must be positive");
        }
        if self.increase_period.is_zero() {
            return fail("increase_period", "must be positive");
        }
        if self.byte_counter_bytes == 0 {
            return fail("byte_counter_bytes", "must be positive");
        }
        if self.byte_counter_bytes.checked_mul(8).is_none() {
            return fail("byte_counter_bytes", "too large to count in bits");
        }
        if !(0.0..=1.0).contains(&self.initial_alpha) {
            return fail("initial_alpha", "must be in [0, 1]");
        }
        if line_rate_bps == 0 {
            return fail("line_rate_bps", "must be positive");
        }
        if self.min_rate_bps == 0 {
            return fail("min_rate_bps", "must be positive");
        }
        if self.min_rate_bps > line_rate_bps {
            return fail("min_rate_bps", "must not exceed the line rate");
        }
        Ok(())
    }
}

/// What produced a point of a [`RateTimeline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateEvent {
    /// The state when recording started.
    Start,
    /// A CNP cut the rate.
    Cnp,
    /// Fast recovery: the rate halved its distance to the target.
    FastRecovery,
    /// Additive increase: the target grew by `R_AI`.
    AdditiveIncrease,
    /// Hyper increase: the target grew by `i R_HAI`.
    HyperIncrease,
}

impl RateEvent {
    /// The event's name in CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            RateEvent::Start => "start",
            RateEvent::Cnp => "cnp",
            RateEvent::FastRecovery => "fast_recovery",
            RateEvent::AdditiveIncrease => "additive_increase",
            RateEvent::HyperIncrease => "hyper_increase",
        }
    }
}

/// Which counter caused a rate-increase event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IncreaseTrigger {
    /// The rate-increase timer expired.
    Timer,
    /// The byte counter reached `B` bytes.
    Bytes,
}

impl IncreaseTrigger {
    /// The trigger's name in CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            IncreaseTrigger::Timer => "timer",
            IncreaseTrigger::Bytes => "bytes",
        }
    }
}

/// One point of a [`RateTimeline`]: the state right after an event.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatePoint {
    /// Nanoseconds since the sender started.
    pub time_ns: u64,
    /// Current rate, bits per second (rounded).
    pub rate_bps: u64,
    /// Target rate, bits per second (rounded).
    pub target_bps: u64,
    /// Alpha.
    pub alpha: f64,
    /// What happened.
    pub event: RateEvent,
    /// For rate increases, which counter fired.
    pub trigger: Option<IncreaseTrigger>,
}

/// The rate of one QP over time: a point per CNP and per rate increase that
/// changed the rate or the target (alpha decays and increases that change
/// nothing, as at line rate, add no point).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateTimeline {
    /// The QP the timeline belongs to.
    pub qp: u32,
    /// The points, in time order.
    pub points: Vec<RatePoint>,
}

/// The CSV header [`RateTimeline::write_csv`] writes.
pub const CSV_HEADER: &str = "qp,time_ns,rate_bps,target_bps,alpha,event,trigger";

impl RateTimeline {
    /// Writes the timelines as CSV: [`CSV_HEADER`], then one line per point,
    /// timeline after timeline; `trigger` is empty for CNPs and the start.
    pub fn write_csv<'a>(
        timelines: impl IntoIterator<Item = &'a RateTimeline>,
        out: &mut impl Write,
    ) -> io::Result<()> {
        writeln!(out, "{CSV_HEADER}")?;
        for timeline in timelines {
            for p in &timeline.points {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    timeline.qp,
                    p.time_ns,
                    p.rate_bps,
                    p.target_bps,
                    p.alpha,
                    p.event.name(),
                    p.trigger.map_or("", IncreaseTrigger::name)
                )?;
            }
        }
        Ok(())
    }

    /// Writes the timelines as a JSON array of `{"qp": .., "points": [..]}`,
    /// each point an object with the fields of [`RatePoint`] (`trigger` null
    /// for CNPs and the start).
    pub fn write_json<'a>(
        timelines: impl IntoIterator<Item = &'a RateTimeline>,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let timelines: Vec<&RateTimeline> = timelines.into_iter().collect();
        serde_json::to_writer(&mut *out, &timelines)?;
        writeln!(out)
    }
}

/// The timers and counters that run from the first CNP on.
#[derive(Debug, Clone, Copy)]
struct Counters {
    /// When alpha next decays.
    alpha_due: Duration,
    /// When the rate-increase timer next expires.
    increase_due: Duration,
    /// Bits sent since the byte counter last fired.
    bits: u64,
    /// Timer expirations since the last CNP.
    timer_stage: u32,
    /// Byte-counter events since the last CNP.
    byte_stage: u32,
}

/// DCQCN's reaction point for one QP: starts at line rate, cuts on CNPs,
/// recovers by timer and byte counter. See the [module](self) for the rules.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    params: DcqcnParams,
    line_rate: f64,
    current: f64,
    target: f64,
    alpha: f64,
    counters: Option<Counters>,
    timeline: Option<RateTimeline>,
}

impl Dcqcn {
    /// A reaction point at `line_rate_bps` (its initial and highest rate).
    pub fn new(line_rate_bps: u64, params: DcqcnParams) -> Result<Dcqcn, DcqcnError> {
        params.validate(line_rate_bps)?;
        let line_rate = line_rate_bps as f64;
        Ok(Dcqcn {
            params,
            line_rate,
            current: line_rate,
            target: line_rate,
            alpha: params.initial_alpha,
            counters: None,
            timeline: None,
        })
    }

    /// Records a [`RateTimeline`] labelled `qp`, starting with a
    /// [`RateEvent::Start`] point at time 0.
    pub fn record(mut self, qp: u32) -> Dcqcn {
        let mut timeline = RateTimeline {
            qp,
            points: Vec::new(),
        };
        timeline
            .points
            .push(self.point(Duration::ZERO, RateEvent::Start, None));
        self.timeline = Some(timeline);
        self
    }

    /// The parameters.
    pub fn params(&self) -> &DcqcnParams {
        &self.params
    }

    /// The target rate, bits per second (rounded).
    pub fn target_bps(&self) -> u64 {
        self.target.round() as u64
    }

    /// Alpha, the estimate of the fraction of marked packets.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The recorded timeline, if [`Dcqcn::record`] enabled it.
    pub fn timeline(&self) -> Option<&RateTimeline> {
        self.timeline.as_ref()
    }

    /// Reacts to a CNP received at `now`: runs the timers up to `now`, then
    /// cuts the rate and restarts the timers, the byte counter and the stages.
    pub fn on_cnp(&mut self, now: Duration) {
        self.advance(now);
        self.target = self.current;
        self.current = (self.current * (1.0 - self.alpha / 2.0)).max(self.min_rate());
        self.alpha = (1.0 - self.params.g) * self.alpha + self.params.g;
        self.counters = Some(Counters {
            alpha_due: now + self.params.alpha_period,
            increase_due: now + self.params.increase_period,
            bits: 0,
            timer_stage: 0,
            byte_stage: 0,
        });
        self.push(now, RateEvent::Cnp, None);
    }

    /// Runs the alpha timer and the rate-increase timer up to `now`, each
    /// expiry in time order. [`Dcqcn::on_cnp`] and [`Dcqcn::on_sent`] do this
    /// themselves; a sender calls it before [`Dcqcn::rate_bps`] when the QP sent
    /// nothing for a while (paused, idle), so the rate it reads is up to date.
    pub fn advance(&mut self, now: Duration) {
        while let Some(c) = self.counters.as_mut() {
            let due = c.alpha_due.min(c.increase_due);
            if due > now {
                break;
            }
            if c.alpha_due == due {
                c.alpha_due += self.params.alpha_period;
                self.alpha *= 1.0 - self.params.g;
            } else {
                c.timer_stage = c.timer_stage.saturating_add(1);
                c.increase_due += self.params.increase_period;
                let stages = (c.timer_stage, c.byte_stage);
                self.increase(due, IncreaseTrigger::Timer, stages);
            }
        }
    }

    /// The current rate, bits per second on the wire (rounded).
    pub fn rate_bps(&self) -> u64 {
        self.current.round() as u64
    }

    /// Runs the timers up to `now`, then counts `wire_bits` towards the byte
    /// counter; each `B` bytes is a rate-increase event at `now`.
    pub fn on_sent(&mut self, now: Duration, wire_bits: u64) {
        self.advance(now);
        let period_bits = self.params.byte_counter_bytes * 8;
        let Some(c) = self.counters.as_mut() else {
            return;
        };
        c.bits = c.bits.saturating_add(wire_bits);
        while let Some(c) = self.counters.as_mut().filter(|c| c.bits >= period_bits) {
            c.bits -= period_bits;
            c.byte_stage = c.byte_stage.saturating_add(1);
            let stages = (c.timer_stage, c.byte_stage);
            self.increase(now, IncreaseTrigger::Bytes, stages);
        }
    }

    fn min_rate(&self) -> f64 {
        self.params.min_rate_bps as f64
    }

    /// One rate-increase event at `at`; `(timer_stage, byte_stage)` already
    /// count it.
    fn increase(&mut self, at: Duration, trigger: IncreaseTrigger, stages: (u32, u32)) {
        let (timer_stage, byte_stage) = stages;
        let before = (self.rate_bps(), self.target_bps());
        let f = self.params.fast_recovery_steps;
        let event = if timer_stage.max(byte_stage) <= f {
            RateEvent::FastRecovery
        } else if timer_stage.min(byte_stage) > f {
            let i = timer_stage.min(byte_stage) - f;
            self.target += f64::from(i) * self.params.rate_hai_bps as f64;
            RateEvent::HyperIncrease
        } else {
            self.target += self.params.rate_ai_bps as f64;
            RateEvent::AdditiveIncrease
        };
        self.target = self.target.min(self.line_rate);
        self.current = ((self.current + self.target) / 2.0).clamp(self.min_rate(), self.target);
        if (self.rate_bps(), self.target_bps()) != before {
            self.push(at, event, Some(trigger));
        }
    }

    fn point(&self, at: Duration, event: RateEvent, trigger: Option<IncreaseTrigger>) -> RatePoint {
        RatePoint {
            time_ns: u64::try_from(at.as_nanos()).unwrap_or(u64::MAX),
            rate_bps: self.rate_bps(),
            target_bps: self.target_bps(),
            alpha: self.alpha,
            event,
            trigger,
        }
    }

    fn push(&mut self, at: Duration, event: RateEvent, trigger: Option<IncreaseTrigger>) {
        let point = self.point(at, event, trigger);
        if let Some(timeline) = self.timeline.as_mut() {
            timeline.points.push(point);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBIT: u64 = 1_000_000_000;
    const MBIT: u64 = 1_000_000;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// Default parameters on a 10 Gbit/s line, recording QP 7.
    fn dcqcn(params: DcqcnParams) -> Dcqcn {
        Dcqcn::new(10 * GBIT, params).unwrap().record(7)
    }

    /// The event, trigger and time of the last point of `d`'s timeline.
    fn last_event(d: &Dcqcn) -> (RateEvent, Option<IncreaseTrigger>, u64) {
        let last = d.timeline().unwrap().points.last().unwrap();
        (last.event, last.trigger, last.time_ns)
    }

    fn events(d: &Dcqcn) -> Vec<(RateEvent, Option<IncreaseTrigger>)> {
        d.timeline()
            .unwrap()
            .points
            .iter()
            .map(|p| (p.event, p.trigger))
            .collect()
    }

    /// Drives `d` like the sender does: frames of `frame_bits` back to back at
    /// the QP's current rate from `from` to `until`, CNPs at the given times.
    fn run(d: &mut Dcqcn, from: Duration, until: Duration, frame_bits: u64, cnps: &[Duration]) {
        let mut next_frame = from;
        let mut cnps = cnps.iter().copied().peekable();
        loop {
            if let Some(cnp) = cnps.next_if(|&c| c <= next_frame && c < until) {
                d.on_cnp(cnp);
            } else if next_frame < until {
                d.on_sent(next_frame, frame_bits);
                next_frame += Duration::from_nanos(frame_bits * GBIT / d.rate_bps());
            } else {
                break;
            }
        }
    }

    #[test]
    fn defaults_are_the_published_ones() {
        let p = DcqcnParams::default();
        assert_eq!(p.g, 1.0 / 256.0);
        assert_eq!(p.alpha_period, us(55));
        assert_eq!(p.increase_period, us(55));
        assert_eq!(p.byte_counter_bytes, 10_000_000);
        assert_eq!(p.fast_recovery_steps, 5);
        assert_eq!(
            (p.rate_ai_bps, p.rate_hai_bps, p.min_rate_bps),
            (5 * MBIT, 50 * MBIT, 100 * MBIT)
        );
        assert_eq!(p.initial_alpha, 1.0);
    }

    #[test]
    fn starts_at_line_rate_and_timers_wait_for_the_first_cnp() {
        let mut d = dcqcn(DcqcnParams::default());
        d.on_sent(Duration::from_secs(1), 100 * 10_000_000 * 8);
        assert_eq!(
            (d.rate_bps(), d.target_bps(), d.alpha()),
            (10 * GBIT, 10 * GBIT, 1.0)
        );
        assert_eq!(events(&d), [(RateEvent::Start, None)]);
    }

    #[test]
    fn cnp_cuts_with_the_exact_numbers() {
        let mut d = dcqcn(DcqcnParams::default());
        d.on_cnp(us(10));
        // R_T = 10G, R_C = 10G (1 - 1/2), alpha = (255/256) 1 + 1/256 = 1.
        assert_eq!(
            (d.rate_bps(), d.target_bps(), d.alpha()),
            (5 * GBIT, 10 * GBIT, 1.0)
        );
        d.on_cnp(us(20));
        assert_eq!((d.rate_bps(), d.target_bps()), (2_500_000_000, 5 * GBIT));
        // With a smaller alpha the cut is smaller.
        let mut d = dcqcn(DcqcnParams {
            initial_alpha: 0.5,
            ..DcqcnParams::default()
        });
        d.on_cnp(us(0));
        assert_eq!((d.rate_bps(), d.target_bps()), (7_500_000_000, 10 * GBIT));
        assert_eq!(d.alpha(), 255.0 / 256.0 * 0.5 + 1.0 / 256.0);
        let last = *d.timeline().unwrap().points.last().unwrap();
        assert_eq!(
            last,
            RatePoint {
                time_ns: 0,
                rate_bps: 7_500_000_000,
                target_bps: 10 * GBIT,
                alpha: d.alpha(),
                event: RateEvent::Cnp,
                trigger: None,
            }
        );
    }

    #[test]
    fn alpha_decays_once_per_period_without_cnp_and_restarts_on_cnp() {
        let mut d = dcqcn(DcqcnParams {
            increase_period: Duration::from_secs(1),
            ..DcqcnParams::default()
        });
        let decay = 255.0 / 256.0;
        d.on_cnp(us(100));
        d.advance(us(154));
        assert_eq!(d.alpha(), 1.0);
        d.advance(us(155));
        assert_eq!(d.alpha(), decay);
        d.advance(us(100 + 3 * 55 + 54));
        assert_eq!(d.alpha(), decay * decay * decay);
        // A CNP raises alpha and restarts its period from the CNP.
        d.on_cnp(us(300));
        let raised = decay * decay * decay * decay + 1.0 / 256.0;
        assert_eq!(d.alpha(), raised);
        d.advance(us(354));
        assert_eq!(d.alpha(), raised);
        d.advance(us(355));
        assert_eq!(d.alpha(), raised * decay);
    }

    #[test]
    fn fast_recovery_halves_the_distance_to_target_f_times() {
        let mut d = dcqcn(DcqcnParams::default());
        d.on_cnp(us(0));
        d.on_cnp(us(0));
        assert_eq!((d.rate_bps(), d.target_bps()), (2_500_000_000, 5 * GBIT));
        let mut expected = 2_500_000_000u64;
        for k in 1..=5 {
            d.advance(us(55 * k) - Duration::from_nanos(1));
            assert_eq!(d.rate_bps(), expected, "before event {k}");
            d.advance(us(55 * k));
            expected = (expected + 5 * GBIT) / 2;
            assert_eq!((d.rate_bps(), d.target_bps()), (expected, 5 * GBIT));
        }
        assert_eq!(expected, 4_921_875_000);
        let points = &d.timeline().unwrap().points;
        assert!(points[3..].iter().all(
            |p| (p.event, p.trigger) == (RateEvent::FastRecovery, Some(IncreaseTrigger::Timer))
        ));
        assert_eq!(points.last().unwrap().time_ns, 275_000);
    }

    #[test]
    fn additive_increase_after_f_timer_events() {
        let mut d = dcqcn(DcqcnParams::default());
        d.on_cnp(us(0));
        d.on_cnp(us(0));
        d.advance(us(5 * 55));
        assert_eq!(d.rate_bps(), 4_921_875_000);
        d.advance(us(6 * 55));
        // Timer stage 6 > F, byte stage 0: R_T += R_AI.
        assert_eq!(
            (d.rate_bps(), d.target_bps()),
            (4_963_437_500, 5_005_000_000)
        );
        d.advance(us(7 * 55));
        assert_eq!(
            (d.rate_bps(), d.target_bps()),
            (4_986_718_750, 5_010_000_000)
        );
        assert_eq!(
            last_event(&d),
            (
                RateEvent::AdditiveIncrease,
                Some(IncreaseTrigger::Timer),
                385_000
            )
        );
    }

    #[test]
    fn hyper_increase_when_both_counters_are_past_f() {
        let mut d = dcqcn(DcqcnParams {
            byte_counter_bytes: 1000,
            ..DcqcnParams::default()
        });
        d.on_cnp(us(0));
        d.on_cnp(us(0));
        // Each call runs one timer event, then one byte-counter event.
        for k in 1..=7 {
            d.on_sent(us(55 * k), 8000);
        }
        let points = &d.timeline().unwrap().points[3..];
        let steps: Vec<_> = points
            .iter()
            .map(|p| (p.event, p.trigger, p.target_bps))
            .collect();
        use IncreaseTrigger::{Bytes, Timer};
        use RateEvent::{AdditiveIncrease as Ai, FastRecovery as Fr, HyperIncrease as Hi};
        let mut expected = vec![];
        for _ in 0..5 {
            expected.push((Fr, Some(Timer), 5 * GBIT));
            expected.push((Fr, Some(Bytes), 5 * GBIT));
        }
        expected.extend([
            // (6, 5): additive; (6, 6): hyper, i = 1.
            (Ai, Some(Timer), 5_005_000_000),
            (Hi, Some(Bytes), 5_055_000_000),
            // (7, 6): hyper, i = 1; (7, 7): hyper, i = 2.
            (Hi, Some(Timer), 5_105_000_000),
            (Hi, Some(Bytes), 5_205_000_000),
        ]);
        assert_eq!(steps, expected);
        assert!(points.iter().all(|p| p.rate_bps <= p.target_bps));
    }

    #[test]
    fn byte_counter_drives_increases_alone() {
        let mut d = dcqcn(DcqcnParams {
            increase_period: Duration::from_secs(10),
            ..DcqcnParams::default()
        });
        d.on_cnp(us(0));
        let frame_bits = 1000 * 8;
        // 9,999 frames of 1000 bytes: one byte short of B.
        for i in 1..10_000 {
            d.on_sent(us(i), frame_bits);
        }
        assert_eq!(d.rate_bps(), 5 * GBIT);
        d.on_sent(us(10_000), frame_bits);
        assert_eq!(d.rate_bps(), 7_500_000_000);
        assert_eq!(
            last_event(&d),
            (
                RateEvent::FastRecovery,
                Some(IncreaseTrigger::Bytes),
                10_000_000
            )
        );
        // A frame worth two B at once is two events.
        d.on_sent(us(10_001), 2 * 10_000_000 * 8);
        assert_eq!(d.rate_bps(), 9_375_000_000);
    }

    #[test]
    fn rate_stays_between_minimum_and_line_rate() {
        let params = DcqcnParams {
            min_rate_bps: 300 * MBIT,
            rate_hai_bps: 3 * GBIT,
            byte_counter_bytes: 1000,
            ..DcqcnParams::default()
        };
        let mut d = dcqcn(params);
        for k in 0..40 {
            d.on_cnp(us(k));
        }
        assert_eq!(d.rate_bps(), 300 * MBIT);
        assert_eq!(d.target_bps(), 300 * MBIT);
        for k in 1..200 {
            d.on_sent(us(40 + k * 55), 8000);
            assert!(d.target_bps() <= 10 * GBIT);
        }
        assert_eq!((d.rate_bps(), d.target_bps()), (10 * GBIT, 10 * GBIT));
    }

    /// A small deterministic generator (xorshift64) for property-style checks.
    struct XorShift(u64);

    impl XorShift {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    #[test]
    fn invariants_hold_under_random_cnps_and_sends() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for case in 0..50 {
            let line = (1 + rng.below(100)) * GBIT;
            let params = DcqcnParams {
                g: 1.0 / (1 + rng.below(512)) as f64,
                alpha_period: us(1 + rng.below(100)),
                increase_period: us(1 + rng.below(300)),
                byte_counter_bytes: 1 + rng.below(1_000_000),
                fast_recovery_steps: rng.below(8) as u32,
                rate_ai_bps: rng.below(100 * MBIT),
                rate_hai_bps: rng.below(GBIT),
                min_rate_bps: 1 + rng.below(line),
                initial_alpha: rng.below(1001) as f64 / 1000.0,
            };
            let mut d = Dcqcn::new(line, params).unwrap().record(case);
            let mut now = Duration::ZERO;
            for _ in 0..2000 {
                now += Duration::from_nanos(rng.below(20_000));
                if rng.below(10) == 0 {
                    d.on_cnp(now);
                } else {
                    d.on_sent(now, 8 * (64 + rng.below(9000)));
                }
                let (rate, target, alpha) = (d.rate_bps(), d.target_bps(), d.alpha());
                assert!(
                    params.min_rate_bps <= rate,
                    "case {case}: {rate} below minimum"
                );
                assert!(
                    rate <= target,
                    "case {case}: rate {rate} above target {target}"
                );
                assert!(
                    target <= line,
                    "case {case}: target {target} above line rate"
                );
                assert!((0.0..=1.0).contains(&alpha), "case {case}: alpha {alpha}");
            }
            let points = &d.timeline().unwrap().points;
            assert!(points.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        }
    }

    #[test]
    fn repeated_cnps_drive_the_rate_down_and_it_recovers_without_them() {
        let line = GBIT;
        let mut d = Dcqcn::new(line, DcqcnParams::default()).unwrap().record(3);
        // A CNP every 50 µs for 2 ms while sending 1500-byte frames.
        let cnps: Vec<Duration> = (0..40).map(|k| us(50 * k)).collect();
        let frame_bits = 1524 * 8;
        run(&mut d, Duration::ZERO, us(2000), frame_bits, &cnps);
        let low = d.rate_bps();
        // Alpha stays near 1 (no alpha period passes between CNPs): each CNP
        // about halves the rate, down to the minimum.
        assert_eq!(low, 100 * MBIT);
        // Then no CNP for 200 ms.
        run(
            &mut d,
            us(2000),
            Duration::from_millis(200),
            frame_bits,
            &[],
        );
        assert_eq!(d.rate_bps(), line);

        let points = &d.timeline().unwrap().points;
        let cnp_points: Vec<&RatePoint> = points
            .iter()
            .filter(|p| p.event == RateEvent::Cnp)
            .collect();
        assert_eq!(cnp_points.len(), 40);
        // CNPs 50 µs apart leave no increase timer (55 µs) expire: the rate
        // after each CNP is no higher than after the one before.
        assert!(cnp_points
            .windows(2)
            .all(|w| w[1].rate_bps <= w[0].rate_bps));
        let lowest = points.iter().map(|p| p.rate_bps).min().unwrap();
        assert_eq!(lowest, cnp_points.last().unwrap().rate_bps);
        // After the last CNP only increases, rate and target never falling.
        let after: Vec<&RatePoint> = points
            .iter()
            .skip_while(|p| p.time_ns < 1_950_000)
            .skip(1)
            .collect();
        assert!(after.iter().all(|p| p.event != RateEvent::Cnp));
        assert!(after
            .windows(2)
            .all(|w| w[0].rate_bps <= w[1].rate_bps && w[0].target_bps <= w[1].target_bps));
        assert!(after.iter().any(|p| p.event == RateEvent::AdditiveIncrease));
        let last = points.last().unwrap();
        assert_eq!((last.rate_bps, last.target_bps), (line, line));
        assert!(last.time_ns < 200_000_000);
        // Alpha decayed meanwhile.
        assert!(last.alpha < 0.5);
    }

    /// The simulator's case (its first fabric ran a compact copy of this model): a 1 Gbit/s
    /// QP on a µs clock halves on its first CNP, recovers by fast recovery, and
    /// cuts again on the next CNP.
    #[test]
    fn cut_on_cnp_then_recover_toward_line_rate() {
        let mut rp = Dcqcn::new(GBIT, DcqcnParams::default()).unwrap().record(1);
        assert_eq!(rp.rate_bps(), GBIT);
        rp.on_cnp(us(100));
        assert_eq!(
            rp.rate_bps(),
            GBIT / 2,
            "alpha starts at 1: the first cut halves"
        );
        // Fast recovery halves the distance to the target at each of 5 increase periods.
        rp.advance(us(100 + 55));
        assert_eq!(rp.rate_bps(), 750 * MBIT);
        rp.advance(us(100 + 5 * 55));
        assert_eq!(rp.rate_bps(), GBIT - GBIT / 2 / 32);
        rp.on_cnp(us(1000));
        assert!(rp.rate_bps() < 600 * MBIT);
        let cnps = rp.timeline().unwrap().points.iter();
        assert_eq!(cnps.filter(|p| p.event == RateEvent::Cnp).count(), 2);
    }

    #[test]
    fn invalid_parameters_are_rejected() {
        let check = |params: DcqcnParams, line: u64, name: &str| match Dcqcn::new(line, params) {
            Err(DcqcnError::Param { name: got, .. }) => assert_eq!(got, name),
            Ok(_) => panic!("{name} accepted"),
        };
        let p = DcqcnParams::default();
        check(DcqcnParams { g: 0.0, ..p }, GBIT, "g");
        check(DcqcnParams { g: f64::NAN, ..p }, GBIT, "g");
        check(
            DcqcnParams {
                alpha_period: Duration::ZERO,
                ..p
            },
            GBIT,
            "alpha_period",
        );
        check(
            DcqcnParams {
                increase_period: Duration::ZERO,
                ..p
            },
            GBIT,
            "increase_period",
        );
        check(
            DcqcnParams {
                byte_counter_bytes: 0,
                ..p
            },
            GBIT,
            "byte_counter_bytes",
        );
        check(
            DcqcnParams {
                byte_counter_bytes: u64::MAX,
                ..p
            },
            GBIT,
            "byte_counter_bytes",
        );
        check(
            DcqcnParams {
                initial_alpha: 1.5,
                ..p
            },
            GBIT,
            "initial_alpha",
        );
        check(p, 0, "line_rate_bps");
        check(
            DcqcnParams {
                min_rate_bps: 0,
                ..p
            },
            GBIT,
            "min_rate_bps",
        );
        check(p, 50 * MBIT, "min_rate_bps");
        let err = Dcqcn::new(0, p).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid DCQCN parameter line_rate_bps: must be positive"
        );
    }

    fn two_timelines() -> Vec<RateTimeline> {
        let mut a = dcqcn(DcqcnParams::default());
        a.on_cnp(us(1));
        a.advance(us(56));
        let b = Dcqcn::new(GBIT, DcqcnParams::default()).unwrap().record(8);
        vec![a.timeline().unwrap().clone(), b.timeline().unwrap().clone()]
    }

    #[test]
    fn csv_has_a_header_and_a_line_per_point() {
        let mut out = Vec::new();
        RateTimeline::write_csv(&two_timelines(), &mut out).unwrap();
        let alpha = 255.0 / 256.0;
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "{CSV_HEADER}\n\
                 7,0,10000000000,10000000000,1,start,\n\
                 7,1000,5000000000,10000000000,1,cnp,\n\
                 7,56000,7500000000,10000000000,{alpha},fast_recovery,timer\n\
                 8,0,1000000000,1000000000,1,start,\n"
            )
        );
    }

    #[test]
    fn json_is_an_array_of_timelines() {
        let mut out = Vec::new();
        RateTimeline::write_json(&two_timelines(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with('\n'));
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let timelines = value.as_array().unwrap();
        assert_eq!(timelines.len(), 2);
        assert_eq!(timelines[0]["qp"], 7);
        assert_eq!(timelines[1]["points"].as_array().unwrap().len(), 1);
        assert_eq!(
            timelines[0]["points"][2],
            serde_json::json!({
                "time_ns": 56000,
                "rate_bps": 7_500_000_000u64,
                "target_bps": 10_000_000_000u64,
                "alpha": 255.0 / 256.0,
                "event": "fast_recovery",
                "trigger": "timer",
            })
        );
        assert_eq!(
            timelines[0]["points"][1]["trigger"],
            serde_json::Value::Null
        );
        assert_eq!(timelines[0]["points"][1]["event"], "cnp");
    }
}
