//! A flag that asks a running sender or receiver to finish early and report
//! what it did, set from another thread or from a signal handler; [`stop_on_interrupt`] sets
//! it on SIGINT and SIGTERM.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

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

/// Set by SIGINT and SIGTERM while a traffic command runs.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// How often an interrupt is looked for.
const INTERRUPT_POLL: Duration = Duration::from_millis(20);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Runs `work` with SIGINT and SIGTERM turned into a stop request on `flag`
/// (so the command ends early with its summary); the previous handlers come back after.
pub(crate) fn stop_on_interrupt<T>(flag: StopFlag, work: impl FnOnce() -> T) -> anyhow::Result<T> {
    INTERRUPTED.store(false, Ordering::Relaxed);
    let mut previous = Vec::new();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        let old = unsafe { libc::signal(signal, on_interrupt as *const () as libc::sighandler_t) };
        if old == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error()).context("installing the Ctrl-C handler");
        }
        previous.push((signal, old));
    }
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if INTERRUPTED.load(Ordering::Relaxed) {
                    flag.stop();
                    return;
                }
                std::thread::sleep(INTERRUPT_POLL);
            }
        });
        let result = work();
        done.store(true, Ordering::Relaxed);
        result
    });
    for (signal, old) in previous {
        // SAFETY: puts back the handler that was there before.
        unsafe { libc::signal(signal, old) };
    }
    Ok(result)
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
