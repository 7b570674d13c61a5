//! Two-rate three-colour meters (RFC 2698), as BMv2's `meter` and `direct_meter`: an
//! unconfigured meter marks every packet green.

/// The colours v1model's meters return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    /// 0.
    Green = 0,
    /// 1.
    Yellow = 1,
    /// 2.
    Red = 2,
}

/// Rates in units (packets or bytes) per microsecond and burst sizes in units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeterConfig {
    /// Committed information rate.
    pub cir: f64,
    /// Committed burst size.
    pub cbs: f64,
    /// Peak information rate.
    pub pir: f64,
    /// Peak burst size.
    pub pbs: f64,
}

/// One meter cell.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    config: Option<MeterConfig>,
    committed: f64,
    peak: f64,
    last_us: u64,
}

impl Meter {
    /// Configures the meter; its buckets start full.
    pub fn configure(&mut self, config: MeterConfig, now_us: u64) {
        self.config = Some(config);
        self.committed = config.cbs;
        self.peak = config.pbs;
        self.last_us = now_us;
    }

    /// Its rates, `None` while unconfigured.
    pub fn config(&self) -> Option<MeterConfig> {
        self.config
    }

    /// Marks `amount` units arriving at `now_us`.
    pub fn execute(&mut self, amount: f64, now_us: u64) -> Color {
        let Some(c) = self.config else {
            return Color::Green;
        };
        let dt = now_us.saturating_sub(self.last_us) as f64;
        self.last_us = now_us.max(self.last_us);
        self.committed = (self.committed + c.cir * dt).min(c.cbs);
        self.peak = (self.peak + c.pir * dt).min(c.pbs);
        if self.peak < amount {
            Color::Red
        } else if self.committed < amount {
            self.peak -= amount;
            Color::Yellow
        } else {
            self.peak -= amount;
            self.committed -= amount;
            Color::Green
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_follow_the_buckets() {
        let mut m = Meter::default();
        assert_eq!(m.execute(1.0, 0), Color::Green);
        m.configure(
            MeterConfig {
                cir: 0.0,
                cbs: 1.0,
                pir: 0.0,
                pbs: 2.0,
            },
            0,
        );
        assert_eq!(m.execute(1.0, 0), Color::Green);
        assert_eq!(m.execute(1.0, 0), Color::Yellow);
        assert_eq!(m.execute(1.0, 0), Color::Red);
    }
}
