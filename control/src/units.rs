//! Units on the command line and in config files.

use anyhow::{bail, Context as _};

/// Parses a rate in bits per second: a number with an optional k/m/g/t suffix (powers of
/// 1000), optionally followed by `bit` or `bps`, e.g. `10g`, `2.5gbit`, `800mbps`.
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
    Ok(bps.round() as u64)
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
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("-1g").is_err());
    }
}
