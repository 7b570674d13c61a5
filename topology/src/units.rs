//! The quantities a topology is written in — link rates, byte sizes, cable lengths — each read
//! by one function, so a short form and a TOML table refuse the same bad values with the same
//! message. Ranges are the caller's ([`crate::spec`] names the option and its limits); these
//! only read the text. Rates read as control's `units::parse_rate_bps` does.

/// Splits `text` into its number and the unit after it (lower case), refusing what is not a
/// finite, non-negative decimal number (`inf`, `NaN`, `-1`, `1e400`).
fn number_and_unit(text: &str, what: &str) -> Result<(f64, String), String> {
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e')
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let value: f64 = digits
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("'{}' is not {what}", text.escape_debug()))?;
    Ok((value, unit.trim().to_string()))
}

/// Reads a rate in bits per second: a number with an optional `k`, `m`, `g` or `t` (powers of
/// 1000), optionally followed by `bit` or `bps`, in either case: `100G`, `2.5gbit`, `800mbps`.
pub fn parse_rate_bps(text: &str) -> Result<u64, String> {
    let what = "a rate (e.g. 100G, 25gbit)";
    let (value, unit) = number_and_unit(text, what)?;
    let scale = match unit.trim_end_matches("bps").trim_end_matches("bit") {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return Err(format!("'{}' is not {what}", text.escape_debug())),
    };
    whole(value * scale, text, what)
}

/// Reads a size in bytes: a number with an optional unit, in either case: `b`; `k`/`kb`, `m`/`mb`,
/// `g`/`gb` (powers of 1000); `kib`, `mib`, `gib` (powers of 1024): `32MB`, `64MiB`, `9000`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let what = "a size in bytes (e.g. 32MB, 64MiB)";
    let (value, unit) = number_and_unit(text, what)?;
    let scale = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("'{}' is not {what}", text.escape_debug())),
    };
    whole(value * scale, text, what)
}

/// Reads a length in millimetres: a number with `mm`, `cm`, `m` or `km` (a bare number is in
/// metres): `2m`, `0.5m`, `1.5km`.
pub fn parse_length_mm(text: &str) -> Result<u64, String> {
    let what = "a length (e.g. 2m, 150cm, 1km)";
    let (value, unit) = number_and_unit(text, what)?;
    let scale = match unit.as_str() {
        "mm" => 1.0,
        "cm" => 10.0,
        "" | "m" => 1e3,
        "km" => 1e6,
        _ => return Err(format!("'{}' is not {what}", text.escape_debug())),
    };
    whole(value * scale, text, what)
}

/// `value` rounded to a whole number, or an error when it is past what a `u64` holds.
fn whole(value: f64, text: &str, what: &str) -> Result<u64, String> {
    // 2^63: far past every limit, and exactly representable.
    if value >= 2f64.powi(63) {
        return Err(format!("'{}' is too large for {what}", text.escape_debug()));
    }
    Ok(value.round() as u64)
}

/// A rate as the short form writes it: `100G`, `2.5G`, `400M`, `1500` (b/s).
pub fn format_rate(bps: u64) -> String {
    format_scaled(
        bps,
        &[
            (1_000_000_000_000, "T"),
            (1_000_000_000, "G"),
            (1_000_000, "M"),
            (1_000, "K"),
        ],
        "",
    )
}

/// A size as the short form writes it: `32MiB`, `4MB`, `9000B`.
pub fn format_bytes(bytes: u64) -> String {
    let units = [
        (1 << 30, "GiB"),
        (1_000_000_000, "GB"),
        (1 << 20, "MiB"),
        (1_000_000, "MB"),
        (1 << 10, "KiB"),
        (1_000, "KB"),
    ];
    format_scaled(bytes, &units, "B")
}

/// A length as the short form writes it: `2m`, `0.5m`, `1.25km`.
pub fn format_length(mm: u64) -> String {
    if mm >= 1_000_000 && mm.is_multiple_of(1_000) {
        return format!("{}km", mm as f64 / 1e6);
    }
    format!("{}m", mm as f64 / 1e3)
}

/// `value` in the first unit of `units` (largest first) it is a whole multiple of, else the
/// first it reaches with at most three decimals, which read back exactly, else bare with `plain`.
fn format_scaled(value: u64, units: &[(u64, &str)], plain: &str) -> String {
    if let Some((scale, unit)) = units
        .iter()
        .find(|(s, _)| value >= *s && value.is_multiple_of(*s))
    {
        return format!("{}{unit}", value / scale);
    }
    if let Some((scale, unit)) = units
        .iter()
        .find(|(s, _)| value >= *s && value.checked_mul(1000).is_some_and(|v| v % s == 0))
    {
        return format!("{}{unit}", value as f64 / *scale as f64);
    }
    format!("{value}{plain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_control_reads_them() {
        assert_eq!(parse_rate_bps("100G"), Ok(100_000_000_000));
        assert_eq!(parse_rate_bps("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(parse_rate_bps("800mbps"), Ok(800_000_000));
        assert_eq!(parse_rate_bps("1000"), Ok(1000));
        for bad in [
            "", "G", "fast", "-1G", "inf", "NaN", "1e400G", "10x", "1e19t",
        ] {
            assert!(parse_rate_bps(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_in_both_kinds_of_unit() {
        assert_eq!(parse_bytes("32MB"), Ok(32_000_000));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("1.5kib"), Ok(1536));
        assert_eq!(parse_bytes("9000"), Ok(9000));
        assert_eq!(parse_bytes("9000b"), Ok(9000));
        for bad in ["MB", "3 parsecs", "-2MB", "nan", "2^64"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lengths_in_metres_by_default() {
        assert_eq!(parse_length_mm("2m"), Ok(2000));
        assert_eq!(parse_length_mm("2"), Ok(2000));
        assert_eq!(parse_length_mm("0.5m"), Ok(500));
        assert_eq!(parse_length_mm("150cm"), Ok(1500));
        assert_eq!(parse_length_mm("1.5km"), Ok(1_500_000));
        assert!(parse_length_mm("2 miles").is_err());
        assert!(parse_length_mm("-3m").is_err());
    }

    #[test]
    fn formats_read_back() {
        for bps in [
            100_000_000_000,
            2_500_000_000,
            25_000_000_000,
            1_000_000_000,
            1234,
        ] {
            assert_eq!(
                parse_rate_bps(&format_rate(bps)),
                Ok(bps),
                "{}",
                format_rate(bps)
            );
        }
        for bytes in [32 << 20, 32_000_000, 9000, 1536, 12_345_678] {
            assert_eq!(
                parse_bytes(&format_bytes(bytes)),
                Ok(bytes),
                "{}",
                format_bytes(bytes)
            );
        }
        for mm in [2000, 500, 1_500_000, 1] {
            assert_eq!(
                parse_length_mm(&format_length(mm)),
                Ok(mm),
                "{}",
                format_length(mm)
            );
        }
        assert_eq!(format_rate(100_000_000_000), "100G");
        assert_eq!(format_bytes(32 << 20), "32MiB");
        assert_eq!(format_length(2000), "2m");
    }
}
