//! Units on the command line and in config files: rates and durations, each parsed by one
//! function with written limits, so every option refuses the same bad values with the same
//! kind of message (`inf`, `NaN`, `-0`, `1e300`, `2^64` alike).

use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

/// The highest rate anything accepts: 10 Tb/s, above every Ethernet link speed.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// Parses a rate in bits per second: a number with an optional k/m/g/t suffix (powers of
/// 1000), optionally followed by `bit` or `bps`, e.g. `10g`, `2.5gbit`, `800mbps`; from 1 b/s
/// to [`MAX_RATE_BPS`].
pub fn parse_rate_bps(text: &str) -> anyhow::Result<u64> {
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
        .with_context(|| format!("'{text}' is not a rate (e.g. 10g, 800mbit)"))?;
    let bps = value * scale;
    if !bps.is_finite() || bps < 1.0 {
        bail!("'{text}' is not a positive rate");
    }
    if bps > MAX_RATE_BPS as f64 {
        bail!("'{text}' is above the highest rate accepted, 10t ({MAX_RATE_BPS} b/s)");
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
}

/// Refresh intervals of watch loops (`host stats --watch`, `p4 watch --interval`): 0.1 s to
/// one day.
pub const WATCH_INTERVAL: DurationLimits = DurationLimits::seconds(Duration::from_millis(100));
/// Run lengths, timeouts and report intervals: 1 ms to one day.
pub const RUN_TIME: DurationLimits = DurationLimits::seconds(Duration::from_millis(1));
/// DCQCN's timers (the alpha period K and the rate-increase timer T): 1 µs to 1 s.
pub const DCQCN_TIMERS: DurationLimits =
    DurationLimits::micros(Duration::from_micros(1), Duration::from_secs(1));

/// Parses a duration within `limits`: a decimal number with an optional unit (`us`, `ms`,
/// `s`, `m`, `h`; without one, `limits.unit`), e.g. `2`, `0.5`, `250ms`. Infinite, NaN,
/// negative (`-0` too) and out-of-range values are refused with the limits in the message.
pub fn parse_duration(text: &str, limits: &DurationLimits) -> anyhow::Result<Duration> {
    let trimmed = text.trim();
    let not_a_duration =
        || anyhow!("'{text}' is not a duration (a number with an optional unit: 2, 0.5, 250ms)");
    let number = |digits: &str| digits.parse::<f64>().ok().filter(|v| v.is_finite());
    // The longest suffix first: "ms" before "s".
    let suffixed = ["µs", "us", "ms", "s", "m", "h"].iter().find_map(|unit| {
        let value = number(trimmed.strip_suffix(unit)?)?;
        Some((value, *unit))
    });
    let (value, unit) = match suffixed {
        Some(found) => found,
        None => {
            let value = number(trimmed).map(|v| (v, ""));
            let letters = trimmed.trim_end_matches(|c: char| c.is_alphabetic());
            match value {
                Some(found) => found,
                None if letters.len() < trimmed.len() && number(letters).is_some() => bail!(
                    "'{text}': unknown unit '{}' (us, ms, s, m or h)",
                    &trimmed[letters.len()..]
                ),
                None => return Err(not_a_duration()),
            }
        }
    };
    let seconds_per_unit = match (unit, limits.unit) {
        ("", TimeUnit::Micros) | ("us" | "µs", _) => 1e-6,
        ("", TimeUnit::Millis) | ("ms", _) => 1e-3,
        ("", TimeUnit::Seconds) | ("s", _) => 1.0,
        ("m", _) => 60.0,
        _ => 3600.0, // "h"
    };
    let range = || {
        format!(
            "{} to {}",
            show(limits.min, limits.unit),
            show(limits.max, limits.unit)
        )
    };
    let seconds = value * seconds_per_unit;
    if value.is_sign_negative() || seconds < limits.min.as_secs_f64() {
        bail!("'{text}' is too short: durations here are {}", range());
    }
    if seconds > limits.max.as_secs_f64() {
        bail!("'{text}' is too long: durations here are {}", range());
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a run length, timeout or report interval within [`RUN_TIME`], for clap.
pub fn parse_run_time(text: &str) -> anyhow::Result<Duration> {
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
        let error = parse_duration("2s", &micros).unwrap_err().to_string();
        assert!(error.contains("1 µs to 1000000 µs"), "{error}");
    }
}
