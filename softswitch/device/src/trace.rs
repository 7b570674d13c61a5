//! The switch's trace (`softswitch_core::trace`: BMv2's `--log-console` lines) as `tracing`
//! events of this module's target, `softswitch_device::trace`, at BMv2's levels: the log
//! filter (`--log-level`, `SOFTSWITCH_LOG`) decides which lines are written, and with none of
//! them enabled the switch gets no sink at all and formats nothing. Its errors and warnings
//! are lines a client (a refused write, each update of a Write) or a sender (a packet that does
//! not parse) causes at will: at most [`WARNINGS_PER_PERIOD`] of them are written a period
//! ([`crate::throttle`]); the others are counted, and the next one written says how many.

use crate::throttle::{HeldBack, Throttle, PERIOD};
use softswitch_core::trace::{Level, PacketId, TraceSink};
use std::fmt;
use std::time::Instant;

/// Error and warning lines of the trace written each [`PERIOD`].
pub const WARNINGS_PER_PERIOD: u32 = 10;

/// Writes trace lines as `tracing` events, its errors and warnings throttled.
struct TracingSink {
    warnings: Throttle,
}

impl TracingSink {
    /// Writes `line` at `level`, unless it is an error or warning held back.
    fn event(&self, level: Level, line: fmt::Arguments<'_>) {
        if matches!(level, Level::Error | Level::Warn) {
            match self.warnings.admit(Instant::now()) {
                None => return,
                Some(0) => {}
                Some(held) => return event(level, format_args!("{line}{}", HeldBack(held))),
            }
        }
        event(level, line);
    }
}

impl TraceSink for TracingSink {
    fn packet(&mut self, level: Level, packet: PacketId, line: fmt::Arguments<'_>) {
        self.event(level, format_args!("{packet} {line}"));
    }

    fn switch(&mut self, level: Level, line: fmt::Arguments<'_>) {
        self.event(level, line);
    }
}

/// One `tracing` event of this module at `level`.
fn event(level: Level, line: fmt::Arguments<'_>) {
    match level {
        Level::Error => tracing::error!("{line}"),
        Level::Warn => tracing::warn!("{line}"),
        Level::Info => tracing::info!("{line}"),
        Level::Debug => tracing::debug!("{line}"),
        Level::Trace => tracing::trace!("{line}"),
    }
}

/// The sink a switch gets under the current log filter, with the most verbose level the filter
/// lets through for this module; `None` when it lets nothing through.
pub fn sink() -> Option<(Box<dyn TraceSink>, Level)> {
    let level = if tracing::enabled!(tracing::Level::TRACE) {
        Level::Trace
    } else if tracing::enabled!(tracing::Level::DEBUG) {
        Level::Debug
    } else if tracing::enabled!(tracing::Level::INFO) {
        Level::Info
    } else if tracing::enabled!(tracing::Level::WARN) {
        Level::Warn
    } else if tracing::enabled!(tracing::Level::ERROR) {
        Level::Error
    } else {
        return None;
    };
    let sink = TracingSink {
        warnings: Throttle::new(PERIOD, WARNINGS_PER_PERIOD),
    };
    Some((Box::new(sink), level))
}
