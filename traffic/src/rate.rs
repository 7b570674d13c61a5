//! Per-QP sending rates. The sender asks each QP's [`RateController`] for its
//! current rate before scheduling the QP's next packet, so a controller that
//! reacts to congestion (DCQCN's reaction point, [`Dcqcn`] of the `dcqcn` crate)
//! changes a QP's rate while it sends. [`FixedRate`] is the one that never
//! changes.

use std::time::Duration;

use dcqcn::Dcqcn;

/// Decides one QP's sending rate.
pub trait RateController {
    /// The QP's current rate in bits per second on the wire.
    fn rate_bps(&self) -> u64;

    /// Tells the controller that a frame of `wire_bits` left at `now` (time since
    /// the sender started); byte counters and timers advance here.
    fn on_sent(&mut self, now: Duration, wire_bits: u64);

    /// Tells the controller that a CNP for the QP arrived at `now` (time since
    /// the sender started).
    fn on_cnp(&mut self, now: Duration);

    /// When the QP's first frame may leave (time since the sender started): a flow that
    /// arrives later than the others. By default at once.
    fn start(&self) -> Duration {
        Duration::ZERO
    }
}

/// Boxed controllers drive QPs too, so one sender can mix kinds.
impl<R: RateController + ?Sized> RateController for Box<R> {
    fn rate_bps(&self) -> u64 {
        (**self).rate_bps()
    }

    fn on_sent(&mut self, now: Duration, wire_bits: u64) {
        (**self).on_sent(now, wire_bits)
    }

    fn on_cnp(&mut self, now: Duration) {
        (**self).on_cnp(now)
    }

    fn start(&self) -> Duration {
        (**self).start()
    }
}

/// DCQCN's reaction point drives a QP: rates, byte counter and timers are the model's own.
impl RateController for Dcqcn {
    fn rate_bps(&self) -> u64 {
        Dcqcn::rate_bps(self)
    }

    fn on_sent(&mut self, now: Duration, wire_bits: u64) {
        Dcqcn::on_sent(self, now, wire_bits)
    }

    fn on_cnp(&mut self, now: Duration) {
        Dcqcn::on_cnp(self, now)
    }
}

/// A rate that never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedRate {
    /// Bits per second on the wire.
    pub bps: u64,
}

impl FixedRate {
    /// `total_bps` split evenly over `qps` QPs, the remainder to the first ones.
    pub fn split(total_bps: u64, qps: usize) -> Vec<FixedRate> {
        let qps_u64 = qps.max(1) as u64;
        (0..qps as u64)
            .map(|i| FixedRate {
                bps: total_bps / qps_u64 + u64::from(i < total_bps % qps_u64),
            })
            .collect()
    }
}

impl RateController for FixedRate {
    fn rate_bps(&self) -> u64 {
        self.bps
    }

    fn on_sent(&mut self, _now: Duration, _wire_bits: u64) {}

    /// A fixed rate ignores congestion notifications.
    fn on_cnp(&mut self, _now: Duration) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_the_total() {
        let rates = FixedRate::split(1_000_000_001, 4);
        assert_eq!(
            rates.iter().map(|r| r.bps).collect::<Vec<_>>(),
            [250_000_001, 250_000_000, 250_000_000, 250_000_000]
        );
        assert_eq!(
            rates.iter().map(RateController::rate_bps).sum::<u64>(),
            1_000_000_001
        );
        assert!(FixedRate::split(1, 0).is_empty());
    }

    #[test]
    fn boxed_controllers_mix() {
        let mut rates: Vec<Box<dyn RateController>> = vec![Box::new(FixedRate { bps: 5 })];
        rates[0].on_sent(Duration::ZERO, 100);
        assert_eq!(rates[0].rate_bps(), 5);
    }
}
