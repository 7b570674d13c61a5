//! A flag that asks a running sender or receiver to finish early and report
//! what it did, set from another thread or from a signal handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A shared stop request; clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag not set.
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// Asks every holder to stop (async-signal-safe: one atomic store).
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was asked for.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let flag = StopFlag::new();
        let other = flag.clone();
        assert!(!other.is_stopped());
        flag.stop();
        assert!(other.is_stopped());
    }
}
