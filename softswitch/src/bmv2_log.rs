//! BMv2's log line, for softswitch standing in for `simple_switch`: `[HH:MM:SS.mmm] [bmv2] [D]
//! [thread N] message`, so that the switch's trace (`softswitch_core::trace`, whose messages
//! carry BMv2's `[id.copy] [cxt 0]` prefix and wording) reads as BMv2's `--log-console` does.
//! The time is UTC.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::{format, FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The `tracing_subscriber` event format of BMv2's log lines.
pub struct Bmv2Format;

impl<S, N> FormatEvent<S, N> for Bmv2Format
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: format::Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let day = now.as_secs() % 86_400;
        let level = match *event.metadata().level() {
            Level::TRACE => 'T',
            Level::DEBUG => 'D',
            Level::INFO => 'I',
            Level::WARN => 'W',
            Level::ERROR => 'E',
        };
        // SAFETY: gettid(2) has no preconditions and cannot fail.
        let thread = unsafe { libc::gettid() };
        write!(
            writer,
            "[{:02}:{:02}:{:02}.{:03}] [bmv2] [{level}] [thread {thread}] ",
            day / 3600,
            day / 60 % 60,
            day % 60,
            now.subsec_millis()
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
