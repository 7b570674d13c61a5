//! The switch's trace (`softswitch_core::trace`: BMv2's `--log-console` lines) as `tracing`
//! events of this module's target, `softswitch_device::trace`, at BMv2's levels: the log
//! filter (`--log-level`, `SOFTSWITCH_LOG`) decides which lines are written, and with none of
//! them enabled the switch gets no sink at all and formats nothing.

use softswitch_core::trace::{Level, PacketId, TraceSink};
use std::fmt;

/// Writes trace lines as `tracing` events.
struct TracingSink;

impl TraceSink for TracingSink {
    fn packet(&mut self, level: Level, packet: PacketId, line: fmt::Arguments<'_>) {
        event(level, format_args!("{packet} {line}"));
    }

    fn switch(&mut self, level: Level, line: fmt::Arguments<'_>) {
        event(level, line);
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
    Some((Box::new(TracingSink), level))
}
