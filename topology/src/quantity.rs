//! The quantities of a short form as text: cable lengths read (rates and byte sizes are read by
//! the `units` crate, as every option of the workspace), and rates, sizes and lengths written
//! back the way the short form reads them. Ranges are the caller's ([`crate::spec`] names the
//! option and its limits).

/// Reads a length in millimetres: a decimal number with `mm`, `cm`, `m` or `km` (a bare number
/// is in metres), in either case: `2m`, `0.5m`, `1.5km`; refusing what is not a finite,
/// non-negative number of at most 2^63 mm (`inf`, `NaN`, `-1m`, `1e400m`).
pub fn parse_length_mm(text: &str) -> Result<u64, String> {
    let refused = || {
        format!(
            "'{}' is not a length (e.g. 2m, 150cm, 1km)",
            text.escape_debug()
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e')
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let scale = match unit.trim() {
        "mm" => 1.0,
        "cm" => 10.0,
        "" | "m" => 1e3,
        "km" => 1e6,
        _ => return Err(refused()),
    };
    let mm = digits.trim().parse::<f64>().map_err(|_| refused())? * scale;
    // Below 2^63: far past every limit, and exactly representable.
    if !(mm.is_finite() && (0.0..2f64.powi(63)).contains(&mm)) {
        return Err(refused());
    }
    Ok(mm.round() as u64)
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
    fn lengths_in_metres_by_default() {
        assert_eq!(parse_length_mm("2m"), Ok(2000));
        assert_eq!(parse_length_mm("2"), Ok(2000));
        assert_eq!(parse_length_mm("0.5m"), Ok(500));
        assert_eq!(parse_length_mm("150cm"), Ok(1500));
        assert_eq!(parse_length_mm("1.5km"), Ok(1_500_000));
        for bad in ["2 miles", "-3m", "inf", "NaN", "1e400m", "m", "2^3m"] {
            assert!(parse_length_mm(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_read_back() {
        let any = units::ByteLimits {
            min: 0,
            max: u64::MAX,
        };
        for bps in [
            100_000_000_000,
            2_500_000_000,
            25_000_000_000,
            1_000_000_000,
            1234,
        ] {
            let text = format_rate(bps);
            assert_eq!(units::parse_rate_bps(&text).unwrap(), bps, "{text}");
        }
        for bytes in [32 << 20, 32_000_000, 9000, 1536, 12_345_678] {
            let text = format_bytes(bytes);
            assert_eq!(units::parse_bytes(&text, &any).unwrap(), bytes, "{text}");
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
