//! Units on command lines and in files: rates, durations and byte sizes, each parsed by one
//! function with written limits, so every option and key refuses the same bad values with the
//! same kind of message (`inf`, `NaN`, `-0`, `1e300`, `2^64` alike). No I/O: used by the control
//! plane's options and config files and by the workload format.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

/// A value that is not a rate, duration or size, or one outside its limits. The message quotes
/// the text it was given (escaped and shortened, so a control character or a long paste stays
/// one short line) and the accepted range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a number with a known rate suffix.
    #[error("'{}' is not a rate (e.g. 10g, 800mbit)", escaped(.0))]
    NotARate(String),
    /// Zero, negative, infinite or NaN.
    #[error("'{}' is not a positive rate", escaped(.0))]
    RateNotPositive(String),
    /// Above [`MAX_RATE_BPS`].
    #[error("'{}' is above the highest rate accepted, 10t ({MAX_RATE_BPS} b/s)", escaped(.0))]
    RateTooHigh(String),
    /// Not a number with an optional time unit.
    #[error("'{}' is not a duration (a number with an optional unit: 2, 0.5, 250ms)", escaped(.0))]
    NotADuration(String),
    /// A number followed by letters that are no time unit.
    #[error("'{}': unknown unit '{}' (ns, us, ms, s, m or h)", escaped(.text), escaped(.unit))]
    UnknownTimeUnit {
        /// The whole text.
        text: String,
        /// The letters after the number.
        unit: String,
    },
    /// Shorter than the option accepts.
    #[error("'{}' is too short: durations here are {range}", escaped(.shown))]
    TooShort {
        /// The text, or the duration in the limits' unit.
        shown: String,
        /// The accepted range, in the limits' unit.
        range: String,
    },
    /// Longer than the option accepts.
    #[error("'{}' is too long: durations here are {range}", escaped(.shown))]
    TooLong {
        /// The text, or the duration in the limits' unit.
        shown: String,
        /// The accepted range, in the limits' unit.
        range: String,
    },
    /// Not a number with an optional size unit.
    #[error(
        "'{}' is not a size in bytes (a number with an optional unit: 1500, 64KB, 2MiB)",
        escaped(.0)
    )]
    NotASize(String),
    /// A number followed by letters that are no size unit.
    #[error(
        "'{}': unknown unit '{}' (B, KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024)",
        escaped(.text),
        escaped(.unit)
    )]
    UnknownSizeUnit {
        /// The whole text.
        text: String,
        /// The letters after the number.
        unit: String,
    },
    /// A size that is not a whole number of bytes (`1.5B`, `0.1KiB`).
    #[error("'{}' is not a whole number of bytes", escaped(.0))]
    FractionalBytes(String),
    /// A size outside the limits.
    #[error("'{}' is outside the sizes accepted here, {min} to {max} bytes", escaped(.text))]
    SizeOutOfRange {
        /// The text.
        text: String,
        /// The smallest size accepted.
        min: u64,
        /// The largest size accepted.
        max: u64,
    },
}

/// The longest quote of a value in a message, in characters.
const MAX_SHOWN_CHARS: usize = 64;

/// `text` as a message quotes it: control characters and quotes escaped, cut after
/// [`MAX_SHOWN_CHARS`] characters with `...`.
pub fn escaped(text: &str) -> String {
    escape(text, MAX_SHOWN_CHARS, |c| c == '\'' || c == '\\')
}

/// `text` as a message shows it whole (a path, a parser's own message): control characters
/// escaped.
pub fn control_escaped(text: &str) -> String {
    escape(text, usize::MAX, |_| false)
}

/// `text` with its control characters and those `also` picks escaped as Rust escapes them, cut
/// after `max_chars` characters with `...`.
fn escape(text: &str, max_chars: usize, also: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push_str("...");
            break;
        }
        if c.is_control() || also(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The highest rate anything accepts: 10 Tb/s, above every Ethernet link speed.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// Parses a rate in bits per second: a number with an optional k/m/g/t suffix (powers of
/// 1000), optionally followed by `bit` or `bps`, e.g. `10g`, `2.5gbit`, `800mbps`; from 1 b/s
/// to [`MAX_RATE_BPS`].
pub fn parse_rate_bps(text: &str) -> Result<u64, UnitError> {
    let lower = text.trim().to_ascii_lowercase();
    let number = lower.trim_end_matches("bps").trim_end_matches("bit");
    let (digits, scale) = match number.chars().last() {
        Some('k') => (&number[..number.len() - 1], 1e3),
        Some('m') => (&number[..number.len() - 1], 1e6),
        Some('g') => (&number[..number.len() - 1], 1e9),
        Some('t') => (&number[..number.len() - 1], 1e12),
        _ => (number, 1.0),
    };
    let value: f64 = digits
        .parse()
        .map_err(|_| UnitError::NotARate(text.to_owned()))?;
    let bps = value * scale;
    if !bps.is_finite() || bps < 1.0 {
        return Err(UnitError::RateNotPositive(text.to_owned()));
    }
    if bps > MAX_RATE_BPS as f64 {
        return Err(UnitError::RateTooHigh(text.to_owned()));
    }
    Ok(bps.round() as u64)
}

/// The unit of a bare number in a duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Microseconds (options and keys named `...-us`, `..._us`).
    Micros,
    /// Milliseconds (keys named `..._ms`).
    Millis,
    /// Seconds.
    Seconds,
}

/// The durations an option accepts: the unit of a bare number, and the shortest and longest.
#[derive(Clone, Copy, Debug)]
pub struct DurationLimits {
    /// Unit of a number without a suffix.
    pub unit: TimeUnit,
    /// Shortest accepted.
    pub min: Duration,
    /// Longest accepted.
    pub max: Duration,
}

/// One day: the longest any run, timeout or interval of the CLI may be.
pub const ONE_DAY: Duration = Duration::from_secs(86_400);

impl DurationLimits {
    /// Seconds, from `min` to one day.
    pub const fn seconds(min: Duration) -> Self {
        DurationLimits {
            unit: TimeUnit::Seconds,
            min,
            max: ONE_DAY,
        }
    }

    /// The same with `max` as the longest.
    pub const fn up_to(self, max: Duration) -> Self {
        DurationLimits { max, ..self }
    }

    /// Microseconds, from `min` to `max`.
    pub const fn micros(min: Duration, max: Duration) -> Self {
        DurationLimits {
            unit: TimeUnit::Micros,
            min,
            max,
        }
    }

    /// Milliseconds, from `min` to `max`.
    pub const fn millis(min: Duration, max: Duration) -> Self {
        DurationLimits {
            unit: TimeUnit::Millis,
            min,
            max,
        }
    }

    /// `duration` if it is within the limits, else an error that names it as `shown` (the
    /// text it was parsed from, or the duration in the limits' unit).
    pub fn check(
        &self,
        duration: Duration,
        shown: &dyn fmt::Display,
    ) -> Result<Duration, UnitError> {
        if duration < self.min {
            return Err(UnitError::TooShort {
                shown: shown.to_string(),
                range: self.range(),
            });
        }
        if duration > self.max {
            return Err(UnitError::TooLong {
                shown: shown.to_string(),
                range: self.range(),
            });
        }
        Ok(duration)
    }

    /// `duration` in the limits' unit, for messages.
    pub fn show(&self, duration: Duration) -> String {
        show(duration, self.unit)
    }

    /// The accepted range, for messages.
    fn range(&self) -> String {
        format!(
            "{} to {}",
            show(self.min, self.unit),
            show(self.max, self.unit)
        )
    }
}

/// Refresh intervals of watch loops (`host stats --watch`, `p4 watch --interval`): 0.1 s to
/// one day.
pub const WATCH_INTERVAL: DurationLimits = DurationLimits::seconds(Duration::from_millis(100));
/// Run lengths, timeouts and report intervals: 1 ms to one day.
pub const RUN_TIME: DurationLimits = DurationLimits::seconds(Duration::from_millis(1));
/// DCQCN's timers (the alpha period K and the rate-increase timer T): 1 µs to 1 s.
pub const DCQCN_TIMERS: DurationLimits =
    DurationLimits::micros(Duration::from_micros(1), Duration::from_secs(1));

/// A decimal number (finite: `inf` and `NaN` are not numbers here) and the letters after it,
/// or `None` when `text` does not begin with one.
fn number_and_unit(text: &str) -> Option<(f64, &str)> {
    let unit_start = text
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphabetic())
        .last()
        .map_or(text.len(), |(i, _)| i);
    let (digits, unit) = text.split_at(unit_start);
    let value = digits.trim_end().parse::<f64>().ok()?;
    value.is_finite().then_some((value, unit))
}

/// Parses a duration within `limits`: a decimal number with an optional unit (`ns`, `us`,
/// `ms`, `s`, `m`, `h`; without one, `limits.unit`), e.g. `2`, `0.5`, `250ms`. Infinite, NaN,
/// negative (`-0` too) and out-of-range values are refused with the limits in the message.
pub fn parse_duration(text: &str, limits: &DurationLimits) -> Result<Duration, UnitError> {
    let trimmed = text.trim();
    let (value, unit) =
        number_and_unit(trimmed).ok_or_else(|| UnitError::NotADuration(text.to_owned()))?;
    let seconds_per_unit = match (unit, limits.unit) {
        ("", TimeUnit::Micros) | ("us" | "µs", _) => 1e-6,
        ("", TimeUnit::Millis) | ("ms", _) => 1e-3,
        ("", TimeUnit::Seconds) | ("s", _) => 1.0,
        ("ns", _) => 1e-9,
        ("m", _) => 60.0,
        ("h", _) => 3600.0,
        _ => {
            return Err(UnitError::UnknownTimeUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            })
        }
    };
    if value.is_sign_negative() {
        return Err(UnitError::TooShort {
            shown: text.to_owned(),
            range: limits.range(),
        });
    }
    // Finite and not negative: only a value past any limit overflows a Duration.
    let duration =
        Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| UnitError::TooLong {
            shown: text.to_owned(),
            range: limits.range(),
        })?;
    limits.check(duration, &text)
}

/// Parses a run length, timeout or report interval within [`RUN_TIME`], for clap.
pub fn parse_run_time(text: &str) -> Result<Duration, UnitError> {
    parse_duration(text, &RUN_TIME)
}

/// Serializes a duration as seconds (a JSON number), as the options that hold it are given.
pub fn serialize_seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Serializes a duration as whole microseconds, as the `...-us` options that hold it are given.
pub fn serialize_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `duration` in `unit`, for messages.
fn show(duration: Duration, unit: TimeUnit) -> String {
    match unit {
        TimeUnit::Micros => format!("{} µs", duration.as_micros()),
        TimeUnit::Millis => format!("{} ms", duration.as_millis()),
        TimeUnit::Seconds => format!("{} s", duration.as_secs_f64()),
    }
}

/// The byte sizes an option or key accepts, inclusive.
#[derive(Clone, Copy, Debug)]
pub struct ByteLimits {
    /// Smallest accepted.
    pub min: u64,
    /// Largest accepted.
    pub max: u64,
}

/// Parses a size in bytes within `limits`: a decimal number with an optional unit, e.g. `1500`,
/// `64KB`, `2.5MB`, `4MiB`. `B`, `KB`, `MB`, `GB`, `TB` (or `K`, `M`, `G`, `T`) are powers of
/// 1000 as in SI; `KiB`, `MiB`, `GiB`, `TiB` (or `Ki`, `Mi`, `Gi`, `Ti`) powers of 1024 as in
/// IEC 80000-13. Units are case-insensitive and `b` is a byte (sizes are never bits). The result
/// must be a whole number of bytes (`1.5B` is refused, `1.5KB` is 1500).
pub fn parse_bytes(text: &str, limits: &ByteLimits) -> Result<u64, UnitError> {
    let trimmed = text.trim();
    let (value, unit) =
        number_and_unit(trimmed).ok_or_else(|| UnitError::NotASize(text.to_owned()))?;
    let lower = unit.to_ascii_lowercase();
    let prefix = lower.strip_suffix('b').unwrap_or(&lower);
    let scale: f64 = match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(UnitError::UnknownSizeUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            })
        }
    };
    let out_of_range = || UnitError::SizeOutOfRange {
        text: text.to_owned(),
        min: limits.min,
        max: limits.max,
    };
    let bytes = value * scale;
    if value.is_sign_negative() || bytes > limits.max as f64 {
        return Err(out_of_range());
    }
    // Exact for every whole number below 2^53, far above any limit given here.
    if bytes.fract() != 0.0 {
        return Err(UnitError::FractionalBytes(text.to_owned()));
    }
    let bytes = bytes as u64;
    if bytes < limits.min || bytes > limits.max {
        return Err(out_of_range());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_with_suffixes() {
        assert_eq!(parse_rate_bps("10g").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate_bps("2.5Gbit").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate_bps("800mbps").unwrap(), 800_000_000);
        assert_eq!(parse_rate_bps("1500").unwrap(), 1500);
        assert_eq!(parse_rate_bps("10t").unwrap(), MAX_RATE_BPS);
        for bad in [
            "fast", "-1g", "inf", "NaN", "-0", "0", "1e300", "10.1t", "2^64",
        ] {
            assert!(parse_rate_bps(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_with_units_and_limits() {
        let secs = |t| parse_duration(t, &WATCH_INTERVAL);
        assert_eq!(secs("2").unwrap(), Duration::from_secs(2));
        assert_eq!(secs("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(secs("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(secs("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(secs("24h").unwrap(), ONE_DAY);
        for (bad, needle) in [
            ("inf", "not a duration"),
            ("NaN", "not a duration"),
            ("1e300", "too long"),
            ("2^64", "not a duration"),
            ("18446744073709551616", "too long"),
            ("0", "too short"),
            ("-0", "too short"),
            ("-1", "too short"),
            ("0.05", "too short: durations here are 0.1 s to 86400 s"),
            ("25h", "too long"),
            ("5d", "unknown unit"),
            ("", "not a duration"),
            ("ms", "not a duration"),
        ] {
            let error = secs(bad).unwrap_err().to_string();
            assert!(error.contains(needle), "{bad}: {error}");
        }
        let micros = DurationLimits::micros(Duration::from_micros(1), Duration::from_secs(1));
        assert_eq!(
            parse_duration("50", &micros).unwrap(),
            Duration::from_micros(50)
        );
        assert_eq!(
            parse_duration("2ms", &micros).unwrap(),
            Duration::from_millis(2)
        );
        assert_eq!(
            parse_duration("1500ns", &micros).unwrap(),
            Duration::from_nanos(1500)
        );
        let error = parse_duration("2s", &micros).unwrap_err().to_string();
        assert!(error.contains("1 µs to 1000000 µs"), "{error}");
    }

    #[test]
    fn decimal_durations_are_exact_to_the_nanosecond() {
        let any = DurationLimits::micros(Duration::ZERO, ONE_DAY);
        for (text, nanos) in [
            ("100us", 100_000),
            ("0.1ms", 100_000),
            ("2.5ms", 2_500_000),
            ("7us", 7_000),
            ("3ns", 3),
            ("0.3s", 300_000_000),
        ] {
            assert_eq!(
                parse_duration(text, &any).unwrap(),
                Duration::from_nanos(nanos),
                "{text}"
            );
        }
    }

    #[test]
    fn sizes_decimal_and_binary() {
        let any = ByteLimits {
            min: 0,
            max: 1 << 50,
        };
        for (text, bytes) in [
            ("1500", 1500),
            ("1500B", 1500),
            ("64KB", 64_000),
            ("64kb", 64_000),
            ("64K", 64_000),
            ("2MB", 2_000_000),
            ("2.5MB", 2_500_000),
            ("1GB", 1_000_000_000),
            ("1TB", 1_000_000_000_000),
            ("64KiB", 65_536),
            ("2MiB", 2_097_152),
            ("2Mi", 2_097_152),
            ("0.5KiB", 512),
            ("1GiB", 1 << 30),
            ("1TiB", 1 << 40),
            (" 8 MB ", 8_000_000),
        ] {
            assert_eq!(parse_bytes(text, &any).unwrap(), bytes, "{text}");
        }
        for (bad, needle) in [
            ("", "not a size"),
            ("MB", "not a size"),
            ("inf", "not a size"),
            ("NaN", "not a size"),
            ("2^20", "not a size"),
            ("1.5", "not a whole number of bytes"),
            ("0.1KiB", "not a whole number of bytes"),
            ("5PB", "unknown unit 'PB'"),
            ("5 bits", "unknown unit"),
            ("-1", "outside the sizes accepted here, 0 to"),
            ("-0", "outside"),
            ("1e300", "outside"),
            ("2PiB", "unknown unit"),
            ("1025TiB", "outside"),
        ] {
            let error = parse_bytes(bad, &any).unwrap_err().to_string();
            assert!(error.contains(needle), "{bad}: {error}");
        }
        let small = ByteLimits { min: 1, max: 100 };
        assert!(parse_bytes("0", &small)
            .unwrap_err()
            .to_string()
            .contains("1 to 100 bytes"));
        assert!(parse_bytes("101", &small).is_err());
        assert_eq!(parse_bytes("100B", &small).unwrap(), 100);
    }

    #[test]
    fn messages_quote_values_escaped_and_short() {
        let error = parse_bytes("1\u{1b}[31m\nx", &ByteLimits { min: 0, max: 1 })
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains('\u{1b}') && !error.contains('\n'),
            "{error}"
        );
        let long = "9".repeat(10_000) + "q";
        let error = parse_rate_bps(&long).unwrap_err().to_string();
        assert!(error.len() < 200, "{error}");
        assert!(error.contains("..."), "{error}");
    }

    #[test]
    fn a_whole_text_escapes_its_control_characters_only() {
        let long = "a'\\".repeat(100);
        assert_eq!(control_escaped(&long), long);
        assert_eq!(control_escaped("a\u{1b}[2J\nb"), "a\\u{1b}[2J\\nb");
    }
}
