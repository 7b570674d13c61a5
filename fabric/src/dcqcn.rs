//! A compact DCQCN reaction point (Zhu et al., SIGCOMM 2015) for the fabric's senders, on the
//! fabric's µs clock. On a CNP: target = current, current = current (1 - alpha/2), alpha =
//! (1-g) alpha + g. Every alpha period without a CNP: alpha = (1-g) alpha. Every increase
//! period: five steps of fast recovery (current = (target + current) / 2), then additive
//! increase (target grows by R_AI first). The byte counter and hyper increase of the full model
//! (control's `traffic::dcqcn`, which the fabric does not link) are left out: the fabric's flows
//! are short.

/// Parameters; [`Default`] gives the paper's values scaled to a 1 Gb/s fabric.
#[derive(Clone, Copy, Debug)]
pub struct DcqcnParams {
    /// Alpha gain g.
    pub g: f64,
    /// Alpha decay period, µs.
    pub alpha_period_us: u64,
    /// Rate increase period, µs.
    pub increase_period_us: u64,
    /// Fast recovery steps.
    pub fast_recovery_steps: u32,
    /// Additive increase, bits/s.
    pub additive_bps: f64,
    /// The lowest rate, bits/s.
    pub min_bps: f64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        DcqcnParams {
            g: 1.0 / 256.0,
            alpha_period_us: 55,
            increase_period_us: 55,
            fast_recovery_steps: 5,
            additive_bps: 5e6,
            min_bps: 1e6,
        }
    }
}

/// One QP's reaction point.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    params: DcqcnParams,
    line_bps: f64,
    current: f64,
    target: f64,
    alpha: f64,
    /// When the alpha and increase timers last fired (or were reset by a CNP); `None` before
    /// the first CNP.
    timers: Option<(u64, u64)>,
    steps: u32,
    /// CNPs received.
    pub cnps: u64,
}

impl Dcqcn {
    /// A QP starting at line rate.
    ///
    /// # Panics
    ///
    /// If either timer period is 0: the timers would never catch up with the clock.
    pub fn new(params: DcqcnParams, line_bps: f64) -> Self {
        assert!(
            params.alpha_period_us > 0 && params.increase_period_us > 0,
            "DcqcnParams: alpha_period_us and increase_period_us must be at least 1 µs, got {} and {}",
            params.alpha_period_us,
            params.increase_period_us
        );
        Dcqcn {
            params,
            line_bps,
            current: line_bps,
            target: line_bps,
            alpha: 1.0,
            timers: None,
            steps: 0,
            cnps: 0,
        }
    }

    /// The current rate at `now_us`, after running the timers up to it.
    pub fn rate_bps(&mut self, now_us: u64) -> f64 {
        let p = self.params;
        if let Some((alpha_at, increase_at)) = &mut self.timers {
            while now_us >= *alpha_at + p.alpha_period_us {
                *alpha_at += p.alpha_period_us;
                self.alpha *= 1.0 - p.g;
            }
            while now_us >= *increase_at + p.increase_period_us {
                *increase_at += p.increase_period_us;
                self.steps += 1;
                if self.steps > p.fast_recovery_steps {
                    self.target = (self.target + p.additive_bps).min(self.line_bps);
                }
                self.current = (self.target + self.current) / 2.0;
            }
        }
        self.current
    }

    /// A CNP arrived at `now_us`.
    pub fn on_cnp(&mut self, now_us: u64) {
        self.rate_bps(now_us);
        let p = self.params;
        self.cnps += 1;
        self.target = self.current;
        self.current = (self.current * (1.0 - self.alpha / 2.0)).max(p.min_bps);
        self.alpha = (1.0 - p.g) * self.alpha + p.g;
        self.timers = Some((now_us, now_us));
        self.steps = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "increase_period_us must be at least 1")]
    fn a_zero_timer_period_is_refused() {
        let params = DcqcnParams {
            increase_period_us: 0,
            ..DcqcnParams::default()
        };
        Dcqcn::new(params, 1e9);
    }

    #[test]
    fn cut_on_cnp_then_recover_toward_line_rate() {
        let mut rp = Dcqcn::new(DcqcnParams::default(), 1e9);
        assert_eq!(rp.rate_bps(0), 1e9);
        rp.on_cnp(100);
        assert_eq!(
            rp.rate_bps(100),
            0.5e9,
            "alpha starts at 1: the first cut halves"
        );
        // Fast recovery halves the distance to the target at each of 5 increase periods.
        assert!((rp.rate_bps(100 + 55) - 0.75e9).abs() < 1.0);
        assert!((rp.rate_bps(100 + 5 * 55) - (1e9 - 0.5e9 / 32.0)).abs() < 1.0);
        rp.on_cnp(1000);
        assert!(rp.rate_bps(1000) < 0.6e9);
        assert_eq!(rp.cnps, 2);
    }
}
