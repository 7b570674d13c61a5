//! Issue 34's aims, each with the ratio this run measured and whether it is met: softswitch on
//! veth ports over the Linux bridge and over BMv2's `simple_switch_nolog` (the port part), a
//! frame's CPU time with a million entries over ten (the scaling part), and the compiled path
//! over the interpreter in frames per CPU second (softswitch-core's `interpreter` bench, whose
//! figures `cargo xtask bench softswitch` passes on in the file `LOSSLESS_BENCH_RESULTS`).

/// A ratio measured in this run: the median, and the range the rounds allow (none for a
/// single measurement).
pub struct Ratio {
    /// The ratio of the medians.
    pub median: f64,
    /// The smallest and largest ratio the rounds allow.
    pub range: Option<(f64, f64)>,
}

impl Ratio {
    /// `num` / `den` over rounds of both: the ratio of the medians, ranging from the smallest
    /// numerator over the largest denominator to the largest over the smallest.
    pub fn of_rounds(num: &[f64], den: &[f64]) -> Ratio {
        let (n_min, n, n_max) = spread(num);
        let (d_min, d, d_max) = spread(den);
        Ratio {
            median: n / d,
            range: Some((n_min / d_max, n_max / d_min)),
        }
    }

    /// The ratio with its range.
    pub fn show(&self) -> String {
        match self.range {
            Some((lo, hi)) => format!("{:.3} ({lo:.3}-{hi:.3})", self.median),
            None => format!("{:.3} (one measurement)", self.median),
        }
    }

    /// One measurement of each.
    pub fn single(num: f64, den: f64) -> Ratio {
        Ratio {
            median: num / den,
            range: None,
        }
    }
}

/// The smallest, median and largest of `v` (not empty).
pub fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// What an aim asks of its ratio.
#[derive(Clone, Copy)]
pub enum Bound {
    /// The ratio must be this or more.
    AtLeast(f64),
    /// The ratio must be this or less.
    AtMost(f64),
}

impl Bound {
    /// Whether `ratio` meets the bound.
    fn holds(self, ratio: f64) -> bool {
        match self {
            Bound::AtLeast(b) => ratio >= b,
            Bound::AtMost(b) => ratio <= b,
        }
    }
}

/// One of the aims: what is measured, and its ratio in this run (`None`: this run did
/// not measure it, and why).
pub struct Aim {
    /// What is measured.
    pub what: String,
    /// What the issue asks of the ratio.
    pub bound: Bound,
    /// The ratio this run measured, or why it did not.
    pub ratio: Result<Ratio, String>,
}

impl Aim {
    /// The aim's line: the ratio with its range, the bound, and the verdict: met when the whole
    /// range meets the bound (the median alone when there is one measurement), not met when none
    /// of it does, undecided when the range straddles the bound; a ratio that is not a finite
    /// number (a zero measured) is no verdict.
    fn line(&self) -> String {
        let bound = match self.bound {
            Bound::AtLeast(b) => format!("aim: at least {b}"),
            Bound::AtMost(b) => format!("aim: at most {b}"),
        };
        let ratio = match &self.ratio {
            Err(why) => {
                return format!(
                    "  {}: not measured in this run ({why}) ({bound})",
                    self.what
                )
            }
            Ok(r) => r,
        };
        let (lo, hi) = ratio.range.unwrap_or((ratio.median, ratio.median));
        let verdict = if ![ratio.median, lo, hi].iter().all(|r| r.is_finite()) {
            "no verdict: a measurement was zero"
        } else {
            match (self.bound.holds(lo), self.bound.holds(hi)) {
                (true, true) => "met",
                (false, false) => "not met",
                _ => "undecided: the range straddles the aim",
            }
        };
        format!("  {}: {} ({bound}): {verdict}", self.what, ratio.show())
    }
}

/// Prints the aims.
pub fn report(aims: &[Aim]) {
    println!(
        "\nissue 34's aims, ratios measured in this run (median, with the range the rounds \
         allow), met when the whole range is:"
    );
    for aim in aims {
        println!("{}", aim.line());
    }
}

/// The programs of the `interpreter` bench whose compiled / interpreted ratio is an aim.
const COMPILED_PROGRAMS: [&str; 2] = ["ipv4_forward", "lossless"];

/// The compiled path's aims (frames per CPU second, compiled / interpreted, at least 3) from the
/// `interpreter` bench's results file: lines of a program's name and six CPU ns per frame,
/// interpreted fastest, median and slowest round, then compiled the same.
pub fn compiled() -> Vec<Aim> {
    let results = std::env::var_os("LOSSLESS_BENCH_RESULTS")
        .ok_or_else(|| "run by `cargo xtask bench softswitch`, which measures it".to_owned())
        .and_then(|path| {
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.to_string_lossy()))
        });
    COMPILED_PROGRAMS
        .iter()
        .map(|&program| Aim {
            what: format!("compiled / interpreted, frames per CPU second, {program}"),
            bound: Bound::AtLeast(3.0),
            ratio: results
                .clone()
                .and_then(|text| compiled_ratio(&text, program)),
        })
        .collect()
}

/// Compiled / interpreted frames per CPU second of `program` in the results `text`.
fn compiled_ratio(text: &str, program: &str) -> Result<Ratio, String> {
    let line = text
        .lines()
        .find(|l| l.split(' ').next() == Some(program))
        .ok_or_else(|| format!("the interpreter bench did not run {program}"))?;
    let ns: Vec<f64> = line
        .split(' ')
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the interpreter bench's line {line:?}: {e}"))?;
    let [i_min, i, i_max, c_min, c, c_max] = ns[..] else {
        return Err(format!(
            "the interpreter bench's line {line:?}: not six figures"
        ));
    };
    // Frames per CPU second are the inverse of ns per frame.
    Ok(Ratio {
        median: i / c,
        range: Some((i_min / c_max, i_max / c_min)),
    })
}

/// The match kinds whose million-entry cost is an aim.
const TABLE_KINDS: [&str; 2] = ["exact", "lpm"];

/// The tables' aims (a frame's CPU time with a million entries over ten, at most 1.5) from the
/// scaling part, if this run measured it.
pub fn tables(scaling: Option<&crate::scaling::Scaling>) -> Vec<Aim> {
    TABLE_KINDS
        .iter()
        .map(|&kind| {
            let rows = scaling
                .ok_or_else(|| "--ports-only".to_owned())
                .and_then(|s| {
                    s.tables
                        .iter()
                        .find(|(k, _)| *k == kind)
                        .map(|(_, rows)| rows)
                        .ok_or_else(|| format!("no {kind} table measured"))
                });
            let ratio = rows.and_then(|rows| {
                let row = |entries| {
                    rows.iter()
                        .find(|r| r.0 == entries)
                        .ok_or_else(|| format!("no {kind} table of {entries} entries measured"))
                };
                // Frames per CPU second are the inverse of CPU time per frame.
                Ok(Ratio::single(row(10)?.1, row(1_000_000)?.1))
            });
            Aim {
                what: format!("a million entries / ten, CPU time per frame, {kind}"),
                bound: Bound::AtMost(1.5),
                ratio,
            }
        })
        .collect()
}
