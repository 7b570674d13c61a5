//! The one rate limit of the switch's log, for lines a client or a sender can cause at will (a
//! refused write, a malformed packet, a connection refused): a [`Throttle`] lets a few lines
//! through each period, counts the others, and the next line said tells how many were held
//! back ([`HeldBack`]). The switch's trace ([`crate::trace`]) and the server's Thrift services
//! both use it.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The period of every throttle of the switch's log.
pub const PERIOD: Duration = Duration::from_secs(10);

/// At most a number of lines a period, with the number held back since the last one said.
#[derive(Debug)]
pub struct Throttle {
    period: Duration,
    burst: u32,
    window: Mutex<Window>,
}

/// The current period of a throttle.
#[derive(Debug)]
struct Window {
    /// When it began (none before the first line).
    start: Option<Instant>,
    /// Lines said in it.
    said: u32,
    /// Lines held back since the last one said.
    held: u64,
}

impl Throttle {
    /// At most `burst` lines every `period`.
    pub const fn new(period: Duration, burst: u32) -> Throttle {
        Throttle {
            period,
            burst,
            window: Mutex::new(Window {
                start: None,
                said: 0,
                held: 0,
            }),
        }
    }

    /// Whether a line may be said at `now`: `Some(n)` with the `n` held back since the last one
    /// said, or `None` (this one is held back and counted).
    pub fn admit(&self, now: Instant) -> Option<u64> {
        // A thread that panicked holding the lock left a consistent window: every change is
        // one assignment.
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        match w.start {
            Some(start) if now.saturating_duration_since(start) < self.period => {
                if w.said >= self.burst {
                    w.held += 1;
                    return None;
                }
                w.said += 1;
            }
            _ => {
                w.start = Some(now);
                w.said = 1;
            }
        }
        Some(std::mem::take(&mut w.held))
    }

    /// The lines held back since the last one said, now said to be (counted from zero again).
    pub fn take_held(&self) -> u64 {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut w.held)
    }
}

/// How a line said after others were held back ends: ` (N like it held back ...)`, nothing
/// when none were.
#[derive(Clone, Copy, Debug)]
pub struct HeldBack(pub u64);

impl fmt::Display for HeldBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(
                f,
                " ({n} more held back since the last line said; at most a few a {}s)",
                PERIOD.as_secs()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_period_and_the_rest_counted() {
        let throttle = Throttle::new(Duration::from_secs(10), 1);
        let t0 = Instant::now();
        assert_eq!(throttle.admit(t0), Some(0));
        assert_eq!(throttle.admit(t0 + Duration::from_secs(1)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(9)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(throttle.admit(t0 + Duration::from_secs(11)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(25)), Some(1));
    }

    #[test]
    fn a_burst_a_period_then_the_count_with_the_next_line() {
        let throttle = Throttle::new(Duration::from_secs(10), 3);
        let t0 = Instant::now();
        let said: Vec<Option<u64>> = (0..5000).map(|_| throttle.admit(t0)).collect();
        assert_eq!(said.iter().filter(|s| s.is_some()).count(), 3);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(10)), Some(4997));
        assert_eq!(HeldBack(0).to_string(), "");
        assert!(HeldBack(4997).to_string().contains("4997 more held back"));
    }
}
