//! Flow-size distributions: "size CDF" files, one point a line, `SIZE CUMULATIVE_PERCENT`,
//! linear between points, as published with the HPCC simulator (`traffic_gen/`) and used by
//! the DCQCN and HPCC papers; and the four published ones by name.

use std::io::Read;
use std::path::Path;

use crate::error::{token, within, Origin, Result, WorkloadError};
use crate::limits::{MAX_BYTES, MAX_CDF_FILE_BYTES, MAX_CDF_POINTS};
use crate::text::{for_each_line, open};

/// The published distributions by name, and their files in the directory
/// [`crate::DISTRIBUTIONS_VAR`] names (HPCC's `traffic_gen/` names).
pub const DISTRIBUTIONS: [(&str, &str); 4] = [
    // Web search (DCTCP's measurement), used by the DCQCN and HPCC papers.
    ("websearch", "WebSearch_distribution.txt"),
    // Facebook's Hadoop cluster, used by the HPCC paper.
    ("hadoop", "FbHdp_distribution.txt"),
    // Alibaba's distributed storage, 2019.
    ("alistorage", "AliStorage2019.txt"),
    // Google's RPC sizes before 2008.
    ("googlerpc", "GoogleRPC2008.txt"),
];

/// What this kind of file is called in messages.
const WHAT: &str = "a size CDF (lines of `SIZE CUMULATIVE_PERCENT`)";

/// A flow-size distribution: a cumulative distribution function through points
/// `(size, percent)`, linear between them. Sizes and percents never decrease, the last percent
/// is 100, and no size below one byte has a chance: `P(size ≤ s)` is the first point's percent
/// at its size (a step there if it is above 0) and linear up to each next point.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeCdf {
    /// `(size in bytes, cumulative percent)`, in order.
    points: Vec<(f64, f64)>,
}

impl SizeCdf {
    /// Reads and checks the size-CDF file `path`. Blank lines and lines starting with `#` are
    /// skipped. A file whose first point is not two numbers is refused without quoting it.
    pub fn read(path: &Path) -> Result<SizeCdf> {
        SizeCdf::from_reader(open(path)?, path)
    }

    /// Reads and checks a size CDF from `input`, read from `path` (named in messages).
    pub fn from_reader(input: impl Read, path: &Path) -> Result<SizeCdf> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for_each_line(input, path, MAX_CDF_FILE_BYTES, WHAT, |number, line| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return Ok(());
            }
            let at = Origin::line(path, number);
            let tokens: Vec<&str> = line.split_whitespace().collect();
            let parsed = match tokens[..] {
                [size, percent] => size.parse::<f64>().ok().zip(percent.parse::<f64>().ok()),
                _ => None,
            };
            // Until the file has shown itself a CDF, nothing of it is quoted.
            let Some((size, percent)) = parsed else {
                if points.is_empty() {
                    return Err(WorkloadError::input(&at, format!("not {WHAT}")));
                }
                return Err(WorkloadError::input(
                    &at,
                    format!(
                        "expected `SIZE CUMULATIVE_PERCENT`, two numbers, found {}",
                        tokens
                            .iter()
                            .map(|t| token(t))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                ));
            };
            within(
                &at,
                "points",
                points.len() as u64 + 1,
                MAX_CDF_POINTS as u64,
            )?;
            check_point(&at, (size, percent), points.last().copied(), &tokens)?;
            points.push((size, percent));
            Ok(())
        })?;
        match points.last() {
            None => Err(WorkloadError::input(
                &Origin::line(path, 1),
                format!("not {WHAT}: no point"),
            )),
            Some(&(_, last)) if last != 100.0 => Err(WorkloadError::input(
                &Origin::line(path, 1),
                format!("the CDF ends at {last} percent, not 100"),
            )),
            Some(_) => Ok(SizeCdf { points }),
        }
    }

    /// The mean flow size in bytes (the first point's step, then the middle of each segment
    /// weighted by its percent, as HPCC's `traffic_gen` computes it).
    pub fn mean(&self) -> f64 {
        let (s0, p0) = self.points[0];
        let steps = self.points.windows(2).map(|w| {
            let ((s1, p1), (s2, p2)) = (w[0], w[1]);
            (s1 + s2) / 2.0 * (p2 - p1)
        });
        (s0 * p0 + steps.sum::<f64>()) / 100.0
    }

    /// The flow size at cumulative probability `u` in `[0, 1)`: the CDF inverted, rounded down
    /// to whole bytes, at least one (HPCC's `traffic_gen` does the same).
    pub fn size_at(&self, u: f64) -> u64 {
        let y = u * 100.0;
        let (s0, p0) = self.points[0];
        let size = if y < p0 {
            s0
        } else {
            // The first point above y: there is one (the last is 100 > y) and it is not the
            // first (whose percent is at most y).
            let i = self
                .points
                .partition_point(|&(_, p)| p <= y)
                .clamp(1, self.points.len() - 1);
            let ((s1, p1), (s2, p2)) = (self.points[i - 1], self.points[i]);
            s1 + (s2 - s1) * (y - p1) / (p2 - p1)
        };
        (size.floor() as u64).clamp(1, MAX_BYTES)
    }
}

/// Checks point `(size, percent)` after `previous`, quoting its tokens when it is wrong.
fn check_point(
    at: &Origin,
    (size, percent): (f64, f64),
    previous: Option<(f64, f64)>,
    tokens: &[&str],
) -> Result<()> {
    let fail = |message: String| Err(WorkloadError::input(at, message));
    if !(size.is_finite() && (0.0..=MAX_BYTES as f64).contains(&size)) {
        return fail(format!(
            "size {} is not a number of bytes from 0 to {MAX_BYTES}",
            token(tokens[0])
        ));
    }
    if !(percent.is_finite() && (0.0..=100.0).contains(&percent)) {
        return fail(format!(
            "percent {} is not a number from 0 to 100",
            token(tokens[1])
        ));
    }
    if size < 1.0 && percent > 0.0 {
        return fail(format!(
            "size {} has a chance of {}: flows are at least one byte",
            token(tokens[0]),
            token(tokens[1])
        ));
    }
    if let Some((previous_size, previous_percent)) = previous {
        if size < previous_size {
            return fail(format!(
                "size {} is below the previous point's {previous_size}: a CDF's sizes do not decrease",
                token(tokens[0])
            ));
        }
        if percent < previous_percent {
            return fail(format!(
                "percent {} is below the previous point's {previous_percent}: a CDF does not decrease",
                token(tokens[1])
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` written as a file in `dir`, read as a size CDF.
    fn cdf(dir: &Path, text: &str) -> Result<SizeCdf> {
        let path = dir.join("sizes.cdf");
        std::fs::write(&path, text).unwrap();
        SizeCdf::read(&path)
    }

    #[test]
    fn sizes_are_the_inverse_of_the_linear_cdf() {
        let dir = tempfile::tempdir().unwrap();
        // 0..1000 bytes for the first half, 1000..3000 for the second.
        let c = cdf(dir.path(), "# comment\n0 0\n\n1000 50\n3000 100\n").unwrap();
        assert_eq!(c.size_at(0.0), 1); // size 0 is never drawn
        assert_eq!(c.size_at(0.25), 500);
        assert_eq!(c.size_at(0.5), 1000);
        assert_eq!(c.size_at(0.75), 2000);
        assert_eq!(c.size_at(0.999_999), 2999);
        // Mean: 500 × 0.5 + 2000 × 0.5.
        assert_eq!(c.mean(), 1250.0);
    }

    #[test]
    fn a_first_point_above_zero_percent_is_a_step() {
        let dir = tempfile::tempdir().unwrap();
        // 40% of flows are exactly 100 bytes, the rest 100..200; a flat segment has no chance.
        let c = cdf(dir.path(), "100 40\n150 40\n200 100\n").unwrap();
        assert_eq!(c.size_at(0.0), 100);
        assert_eq!(c.size_at(0.399), 100);
        assert_eq!(c.size_at(0.4), 150);
        assert_eq!(c.size_at(0.7), 175);
        assert_eq!(c.mean(), 100.0 * 0.4 + 175.0 * 0.6);
    }

    #[test]
    fn the_published_distributions_read_and_have_their_means() {
        let test = "the_published_distributions_read_and_have_their_means";
        let Some(dir) = testkit::reference_dir_or_skip(test, crate::DISTRIBUTIONS_VAR) else {
            return;
        };
        let read = |file: &str| SizeCdf::read(&dir.join(file)).unwrap();
        // Web search, by hand from its 12 points: the segments' middles times their percents,
        // 171,125,000 in all, over 100.
        assert_eq!(read("WebSearch_distribution.txt").mean(), 1_711_250.0);
        for (_, file) in DISTRIBUTIONS {
            let cdf = read(file);
            assert!(cdf.mean() >= 1.0, "{file}");
            assert!(
                cdf.size_at(0.0) >= 1 && cdf.size_at(0.999_999) <= 30_000_000,
                "{file}"
            );
        }
    }

    #[test]
    fn malformed_cdfs_are_refused_with_the_line_and_token() {
        let dir = tempfile::tempdir().unwrap();
        for (text, needle) in [
            (
                "",
                "sizes.cdf:1: not a size CDF (lines of `SIZE CUMULATIVE_PERCENT`): no point",
            ),
            (
                "0 0\n100 50\n",
                "sizes.cdf:1: the CDF ends at 50 percent, not 100",
            ),
            (
                "0 0\n100 50\n50 100\n",
                ":3: size `50` is below the previous point's 100",
            ),
            (
                "0 0\n100 50\n200 40\n300 100",
                ":3: percent `40` is below the previous point's 50",
            ),
            (
                "0 0\n100 x\n",
                ":2: expected `SIZE CUMULATIVE_PERCENT`, two numbers, found `100` `x`",
            ),
            ("0 0\n100 50 7\n", "found `100` `50` `7`"),
            (
                "0 0\n100 150\n",
                ":2: percent `150` is not a number from 0 to 100",
            ),
            ("0 0\ninf 100\n", ":2: size `inf` is not a number of bytes"),
            (
                "0 0\n1e13 100\n",
                ":2: size `1e13` is not a number of bytes from 0 to 1099511627776",
            ),
            ("0 0\n-5 100\n", "size `-5`"),
            ("0 10\n100 100\n", ":1: size `0` has a chance of `10`"),
            ("0 0\n100 NaN\n", "percent `NaN`"),
            ("0 0\n100 \u{1b}[2J\n", "found `100` `\\u{1b}[2J`"),
        ] {
            let error = cdf(dir.path(), text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text:?}: {error}");
        }
        let long: String = (1..=MAX_CDF_POINTS + 1)
            .map(|i| format!("{i} 0\n"))
            .collect();
        let error = cdf(dir.path(), &long).unwrap_err().to_string();
        assert!(
            error.ends_with(":10001: this would be 10001 points, the limit is 10000"),
            "{error}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_cdf_is_not_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "root:$y$j9T$secret:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n";
        let error = cdf(dir.path(), secret).unwrap_err().to_string();
        crate::error::assert_unquoted(
            &error,
            "sizes.cdf:1: not a size CDF (lines of `SIZE CUMULATIVE_PERCENT`)",
            &["root", "secret"],
        );
        let error = cdf(dir.path(), "\u{0}\u{1}binary\n")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("binary"), "{error}");
    }
}
