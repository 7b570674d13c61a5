//! A workload as its user writes it: parts read from a TOML file (`[[part]]` tables) or from
//! short forms on the command line (`allreduce:ranks=16,size=64MB,qps=4`), both through one
//! reader of a part's keys, checked against the limits that do not depend on the endpoints.

use std::fmt;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use crate::cdf::{SizeCdf, DISTRIBUTIONS};
use crate::error::{token, within, Origin, Result, WorkloadError};
use crate::keys::Keys;
use crate::limits::{
    MAX_BYTES, MAX_ENDPOINTS, MAX_PARTS, MAX_QPS, MAX_REPS, MAX_WORKLOAD_FILE_BYTES,
};
use crate::matrix::Matrix;
use crate::text::read_text;
use crate::{Ps, DISTRIBUTIONS_VAR};

/// Where named things are found: the directory of the published size CDFs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// The directory holding the published distributions' files ([`DISTRIBUTIONS`]), if any.
    pub distributions: Option<PathBuf>,
}

impl Sources {
    /// The directories the environment names: [`DISTRIBUTIONS_VAR`] for the distributions.
    pub fn from_env() -> Sources {
        Sources {
            distributions: std::env::var_os(DISTRIBUTIONS_VAR).map(PathBuf::from),
        }
    }
}

/// A workload: its parts, which run together (a background of web-search flows and an
/// incast, say).
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    parts: Vec<Part>,
}

/// One part of a workload: a kind with its settings, the endpoints it runs on and when.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// Where it was read.
    pub(crate) origin: Origin,
    /// What it sends.
    pub(crate) kind: Kind,
    /// Which endpoints its ranks (or nodes, or hosts) are.
    pub(crate) hosts: Hosts,
    /// When its first flows start, picoseconds.
    pub(crate) start: Ps,
}

/// What a part sends.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// Flows with sizes from a distribution at a load.
    Cdf {
        /// The distribution.
        cdf: SizeCdf,
        /// Its name or path, as given.
        name: String,
        /// The fraction of each host's line rate offered.
        load: f64,
        /// When the flows stop.
        stop: Stop,
    },
    /// An htsim connection matrix.
    Matrix(Matrix),
    /// Every host sends `bytes` to another, all to distinct hosts.
    Permutation {
        /// Bytes per flow.
        bytes: u64,
    },
    /// Ring AllReduce.
    AllReduce(Collective),
    /// All-to-all, at once or one peer after the other.
    AllToAll {
        /// Its size, QPs and repetitions.
        collective: Collective,
        /// One peer after the other, as htsim's `gen_serial_alltoall.py`.
        serial: bool,
    },
    /// `senders` hosts send `bytes` each to one.
    Incast {
        /// How many send.
        senders: u32,
        /// Bytes per sender and round.
        bytes: u64,
        /// Time between rounds, if repeated.
        every: Option<Ps>,
        /// Rounds.
        reps: u32,
    },
    /// `senders` hosts send bursts of `burst` bytes to one, every `every`, for `time`.
    Microburst {
        /// How many send.
        senders: u32,
        /// Bytes per sender and burst.
        burst: u64,
        /// Time between bursts.
        every: Ps,
        /// How long bursts go on.
        time: Ps,
    },
}

/// When a size-CDF part stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// No flow starts this long after the part's start.
    Time(Ps),
    /// After this many flows.
    Flows(u64),
}

/// A collective's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Collective {
    /// Ranks; all the hosts of the part if not given.
    pub(crate) ranks: Option<u32>,
    /// Buffer size per rank, nccl-tests' `size`.
    pub(crate) bytes: u64,
    /// QPs per connection.
    pub(crate) qps: u32,
    /// How a message uses them.
    pub(crate) qp_use: QpUse,
    /// Iterations.
    pub(crate) reps: u32,
    /// Time between a rank's end of one iteration and its start of the next.
    pub(crate) gap: Ps,
}

/// How a collective's messages use the QPs of their connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpUse {
    /// Whole messages, the connection's QPs in turn (Meta's choice).
    RoundRobin,
    /// Every message cut into one piece per QP.
    Split,
}

/// Which endpoints a part's ranks are, in rank order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Hosts {
    /// These endpoints.
    List(Vec<u32>),
    /// `first`, `first + stride`, ... up to the last endpoint.
    Stride {
        /// Rank 0's endpoint.
        first: u32,
        /// The step between ranks' endpoints.
        stride: u32,
    },
}

/// The kinds, by the name a part gives in `kind`.
const KINDS: [&str; 7] = [
    "cdf",
    "matrix",
    "permutation",
    "allreduce",
    "alltoall",
    "incast",
    "microburst",
];

impl Workload {
    /// Reads workload arguments as a command line gives them: each a short form
    /// (`KIND:...`, see docs/workloads.md) or the path of a TOML workload file; their parts
    /// run together.
    pub fn parse_args<S: AsRef<str>>(args: &[S], sources: &Sources) -> Result<Workload> {
        let mut parts = Vec::new();
        for arg in args {
            let arg = arg.as_ref();
            let workload = match arg.split_once(':') {
                Some((kind, _)) if KINDS.contains(&kind) => Workload::parse_short(arg, sources)?,
                // A short form of a kind that does not exist, rather than a missing file.
                Some((kind, _))
                    if !Path::new(arg).exists()
                        && !kind.is_empty()
                        && kind
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    return Err(WorkloadError::input(
                        &Origin::Arg(arg.to_owned()),
                        format!(
                            "kind {} is not one of {}, and no workload file has this name",
                            token(kind),
                            KINDS.join(", ")
                        ),
                    ));
                }
                _ => Workload::read_toml(Path::new(arg), sources)?,
            };
            parts.extend(workload.parts);
            check_part_count(parts.len())?;
        }
        Ok(Workload { parts })
    }

    /// Reads the TOML workload file `path`; files it names are found relative to its
    /// directory.
    pub fn read_toml(path: &Path, sources: &Sources) -> Result<Workload> {
        let text = read_text(path, MAX_WORKLOAD_FILE_BYTES, "a workload file")?;
        Workload::parse_toml(&text, path, sources)
    }

    /// Parses `text`, a TOML workload read from `path` (named in messages; files it names are
    /// found relative to its directory).
    pub fn parse_toml(text: &str, path: &Path, sources: &Sources) -> Result<Workload> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            part: Vec<toml::Spanned<Table>>,
        }
        let file: File = toml::from_str(text).map_err(|e| {
            // The message only: toml's own display quotes the line, and a file that is not a
            // workload must not be quoted.
            let line = e.span().map_or(1, |s| line_of(text, s.start));
            WorkloadError::input(&Origin::line(path, line), e.message().trim_end())
        })?;
        check_part_count(file.part.len())?;
        let dir = path.parent().unwrap_or(Path::new(""));
        let parts = file
            .part
            .into_iter()
            .map(|spanned| {
                let at = Origin::line(path, line_of(text, spanned.span().start));
                Part::read(spanned.into_inner(), at, dir, sources)
            })
            .collect::<Result<_>>()?;
        Ok(Workload { parts })
    }

    /// Parses one short form, `KIND:KEY=VALUE,...` (a cdf's distribution and a matrix's file
    /// first, without a key; a bare key is `true`): one part; files it names are found
    /// relative to the working directory.
    pub fn parse_short(text: &str, sources: &Sources) -> Result<Workload> {
        let at = Origin::Arg(text.to_owned());
        let (kind, rest) = text.split_once(':').unwrap_or((text, ""));
        let mut table = Table::new();
        table.insert("kind".into(), Value::String(kind.into()));
        for (i, item) in rest
            .split(',')
            .enumerate()
            .filter(|(_, item)| !item.is_empty())
        {
            let (key, value) = match item.split_once('=') {
                Some((key, value)) => (key, Value::String(value.into())),
                None if i == 0 && kind == "cdf" => ("distribution", Value::String(item.into())),
                None if i == 0 && kind == "matrix" => ("file", Value::String(item.into())),
                None => (item, Value::Boolean(true)),
            };
            if table.insert(key.into(), value).is_some() {
                return Err(WorkloadError::input(
                    &at,
                    format!("{} given twice", token(key)),
                ));
            }
        }
        let part = Part::read(table, at, Path::new(""), sources)?;
        Ok(Workload { parts: vec![part] })
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }
}

/// Refuses more than [`MAX_PARTS`] parts.
fn check_part_count(count: usize) -> Result<()> {
    within(&Origin::Workload, "parts", count as u64, MAX_PARTS as u64)
}

/// The line (from 1) of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

impl Part {
    /// Where it was read.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Reads a part from its keys, read at `at`; relative file names are found in `dir`.
    fn read(mut table: Table, at: Origin, dir: &Path, sources: &Sources) -> Result<Part> {
        let kind = match table.remove("kind") {
            Some(Value::String(kind)) => kind,
            Some(other) => {
                return Err(WorkloadError::input(
                    &at,
                    format!("kind {} is not text", token(&other.to_string())),
                ))
            }
            None => {
                return Err(WorkloadError::input(
                    &at,
                    format!("no kind ({})", KINDS.join(", ")),
                ))
            }
        };
        let Some(&name) = KINDS.iter().find(|&&k| k == kind) else {
            return Err(WorkloadError::input(
                &at,
                format!("kind {} is not one of {}", token(&kind), KINDS.join(", ")),
            ));
        };
        let mut keys = Keys::new(table, &at, name);
        let endpoint = 0..=u64::from(MAX_ENDPOINTS - 1);
        let hosts = match (
            keys.list("hosts", endpoint.clone())?,
            keys.count("first", endpoint.clone())?,
            keys.count("stride", 1..=u64::from(MAX_ENDPOINTS))?,
        ) {
            (Some(list), None, None) => {
                let list: Vec<u32> = list.into_iter().map(|h| h as u32).collect();
                let mut sorted = list.clone();
                sorted.sort_unstable();
                if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                    return Err(keys.error("hosts", format!("endpoint {} is listed twice", w[0])));
                }
                Hosts::List(list)
            }
            (Some(_), _, _) => {
                return Err(keys.error("hosts", "give either hosts or first and stride"))
            }
            (None, first, stride) => Hosts::Stride {
                first: first.unwrap_or(0) as u32,
                stride: stride.unwrap_or(1) as u32,
            },
        };
        let start = keys.time("start", false)?.unwrap_or(0);
        let kind = match name {
            "cdf" => read_cdf(&mut keys, dir, sources)?,
            "matrix" => {
                let file = keys.text("file")?;
                Kind::Matrix(Matrix::read(&dir.join(keys.required("file", file)?))?)
            }
            "permutation" => {
                let bytes = keys.size("size", 1, MAX_BYTES)?;
                Kind::Permutation {
                    bytes: keys.required("size", bytes)?,
                }
            }
            "allreduce" => Kind::AllReduce(read_collective(&mut keys)?),
            "alltoall" => Kind::AllToAll {
                collective: read_collective(&mut keys)?,
                serial: keys.flag("serial")?.unwrap_or(false),
            },
            "incast" => read_incast(&mut keys)?,
            _ => read_microburst(&mut keys)?,
        };
        keys.finish()?;
        Ok(Part {
            origin: at,
            kind,
            hosts,
            start,
        })
    }
}

/// The keys of a size-CDF part.
fn read_cdf(keys: &mut Keys, dir: &Path, sources: &Sources) -> Result<Kind> {
    let name = keys.text("distribution")?;
    let name = keys.required("distribution", name)?;
    let load = keys.fraction("load")?;
    let load = keys.required("load", load)?;
    let stop = match (
        keys.time("time", true)?,
        keys.count("flows", 1..=crate::limits::MAX_FLOWS)?,
    ) {
        (Some(time), None) => Stop::Time(time),
        (None, Some(flows)) => Stop::Flows(flows),
        _ => return Err(keys.error("time", "give either time or flows")),
    };
    let path = match DISTRIBUTIONS.iter().find(|(n, _)| *n == name) {
        Some((named, file)) => match &sources.distributions {
            Some(dir) => dir.join(file),
            None => {
                return Err(WorkloadError::NoDistributions {
                    at: keys.at().clone(),
                    name: named,
                })
            }
        },
        None => dir.join(&name),
    };
    Ok(Kind::Cdf {
        cdf: SizeCdf::read(&path)?,
        name,
        load,
        stop,
    })
}

/// The keys of a collective.
fn read_collective(keys: &mut Keys) -> Result<Collective> {
    let ranks = keys.count("ranks", 2..=u64::from(MAX_ENDPOINTS))?;
    let bytes = keys.size("size", 1, MAX_BYTES)?;
    let qp_use = match keys.text("qp_use")?.as_deref() {
        None | Some("round-robin") => QpUse::RoundRobin,
        Some("split") => QpUse::Split,
        Some(other) => {
            return Err(keys.error(
                "qp_use",
                format!("{} is not round-robin or split", token(other)),
            ))
        }
    };
    Ok(Collective {
        ranks: ranks.map(|r| r as u32),
        bytes: keys.required("size", bytes)?,
        qps: keys.count("qps", 1..=u64::from(MAX_QPS))?.unwrap_or(1) as u32,
        qp_use,
        reps: keys.count("reps", 1..=u64::from(MAX_REPS))?.unwrap_or(1) as u32,
        gap: keys.time("gap", false)?.unwrap_or(0),
    })
}

/// The keys of an incast.
fn read_incast(keys: &mut Keys) -> Result<Kind> {
    let senders = keys.count("senders", 1..=u64::from(MAX_ENDPOINTS - 1))?;
    let bytes = keys.size("size", 1, MAX_BYTES)?;
    let every = keys.time("every", true)?;
    let reps = keys.count("reps", 1..=u64::from(MAX_REPS))?.unwrap_or(1) as u32;
    if reps > 1 && every.is_none() {
        return Err(keys.error("reps", "repeated rounds need `every`"));
    }
    Ok(Kind::Incast {
        senders: keys.required("senders", senders)? as u32,
        bytes: keys.required("size", bytes)?,
        every,
        reps,
    })
}

/// The keys of a microburst.
fn read_microburst(keys: &mut Keys) -> Result<Kind> {
    let senders = keys.count("senders", 1..=u64::from(MAX_ENDPOINTS - 1))?;
    let burst = keys.size("burst", 1, MAX_BYTES)?;
    let every = keys.time("every", true)?;
    let time = keys.time("time", true)?;
    Ok(Kind::Microburst {
        senders: keys.required("senders", senders)? as u32,
        burst: keys.required("burst", burst)?,
        every: keys.required("every", every)?,
        time: keys.required("time", time)?,
    })
}

/// `ps` as the workload format writes a time: in the largest unit that holds it whole.
pub(crate) fn show_time(ps: Ps) -> String {
    let ns = ps / 1000;
    match ns {
        0 if ps > 0 => format!("{ps}ps"),
        _ if ns.is_multiple_of(1_000_000_000) && ns > 0 => format!("{}s", ns / 1_000_000_000),
        _ if ns.is_multiple_of(1_000_000) && ns > 0 => format!("{}ms", ns / 1_000_000),
        _ if ns.is_multiple_of(1000) => format!("{}us", ns / 1000),
        _ => format!("{ns}ns"),
    }
}

impl fmt::Display for Part {
    /// The part as a short form (a `hosts` list as `hosts=[...]`, which only a file can give).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Cdf {
                name, load, stop, ..
            } => {
                write!(f, "cdf:{name},load={load}")?;
                match stop {
                    Stop::Time(t) => write!(f, ",time={}", show_time(*t))?,
                    Stop::Flows(n) => write!(f, ",flows={n}")?,
                }
            }
            Kind::Matrix(m) => write!(f, "matrix:{}", m.path.display())?,
            Kind::Permutation { bytes } => write!(f, "permutation:size={bytes}")?,
            Kind::AllReduce(c) => write!(f, "allreduce:{c}")?,
            Kind::AllToAll { collective, serial } => {
                write!(f, "alltoall:{collective}")?;
                if *serial {
                    f.write_str(",serial")?;
                }
            }
            Kind::Incast {
                senders,
                bytes,
                every,
                reps,
            } => {
                write!(f, "incast:senders={senders},size={bytes}")?;
                if let Some(every) = every {
                    write!(f, ",every={},reps={reps}", show_time(*every))?;
                }
            }
            Kind::Microburst {
                senders,
                burst,
                every,
                time,
            } => write!(
                f,
                "microburst:senders={senders},burst={burst},every={},time={}",
                show_time(*every),
                show_time(*time)
            )?,
        }
        match &self.hosts {
            Hosts::List(list) => write!(f, ",hosts={list:?}")?,
            Hosts::Stride {
                first: 0,
                stride: 1,
            } => {}
            Hosts::Stride { first, stride } => write!(f, ",first={first},stride={stride}")?,
        }
        if self.start > 0 {
            write!(f, ",start={}", show_time(self.start))?;
        }
        Ok(())
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ranks) = self.ranks {
            write!(f, "ranks={ranks},")?;
        }
        let qp_use = match self.qp_use {
            QpUse::RoundRobin => "round-robin",
            QpUse::Split => "split",
        };
        write!(
            f,
            "size={},qps={},qp_use={qp_use},reps={}",
            self.bytes, self.qps, self.reps
        )?;
        if self.gap > 0 {
            write!(f, ",gap={}", show_time(self.gap))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A directory with a size CDF named as the web-search file, a matrix and a workload file.
    fn files() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("WebSearch_distribution.txt"),
            "0 0\n1000 50\n3000 100\n",
        )
        .unwrap();
        fs::write(dir.path().join("sizes.txt"), "0 0\n1000 100\n").unwrap();
        fs::write(
            dir.path().join("two.cm"),
            "Nodes 3\nConnections 2\n0->1 start 0 size 5\n1->2 start 1000000 size 7\n",
        )
        .unwrap();
        dir
    }

    fn sources(dir: &Path) -> Sources {
        Sources {
            distributions: Some(dir.to_owned()),
        }
    }

    /// `args` read, or the message of the error.
    fn parse(args: &[&str], dir: &Path) -> std::result::Result<Workload, String> {
        Workload::parse_args(args, &sources(dir)).map_err(|e| e.to_string())
    }

    #[test]
    fn short_forms_read_and_show_themselves_whole() {
        let dir = files();
        let d = dir.path().display();
        for (form, shown) in [
            (
                "allreduce:ranks=16,size=64MB,qps=4,reps=2".to_owned(),
                "allreduce:ranks=16,size=64000000,qps=4,qp_use=round-robin,reps=2".to_owned(),
            ),
            (
                "alltoall:ranks=8,size=8MiB,qp_use=split,qps=2,serial,gap=1500ns".into(),
                "alltoall:ranks=8,size=8388608,qps=2,qp_use=split,reps=1,gap=1500ns,serial".into(),
            ),
            (
                "cdf:websearch,load=0.5,flows=2000".into(),
                "cdf:websearch,load=0.5,flows=2000".into(),
            ),
            (
                format!("cdf:{d}/sizes.txt,load=0.3,time=10ms"),
                format!("cdf:{d}/sizes.txt,load=0.3,time=10ms"),
            ),
            (
                format!("matrix:{d}/two.cm,start=1s"),
                format!("matrix:{d}/two.cm,start=1s"),
            ),
            (
                "permutation:size=2MB".into(),
                "permutation:size=2000000".into(),
            ),
            (
                "incast:senders=8,size=1MB".into(),
                "incast:senders=8,size=1000000".into(),
            ),
            (
                "incast:senders=8,size=1MB,every=1ms,reps=3,first=8,stride=2".into(),
                "incast:senders=8,size=1000000,every=1ms,reps=3,first=8,stride=2".into(),
            ),
            (
                "microburst:senders=4,burst=64KB,every=100us,time=2ms".into(),
                "microburst:senders=4,burst=64000,every=100us,time=2ms".into(),
            ),
        ] {
            let workload = parse(&[&form], dir.path()).unwrap_or_else(|e| panic!("{form}: {e}"));
            let part = &workload.parts()[0];
            assert_eq!(part.to_string(), shown);
            assert_eq!(part.origin(), &Origin::Arg(form.clone()));
            // What it shows reads back as the same part.
            let again = parse(&[&shown], dir.path()).unwrap();
            assert_eq!(again.parts()[0].kind, part.kind, "{shown}");
        }
    }

    #[test]
    fn a_workload_file_holds_several_parts_and_names_files_beside_it() {
        let dir = files();
        let path = dir.path().join("w.toml");
        fs::write(
            &path,
            "# background and a collective\n\
             [[part]]\nkind = \"cdf\"\ndistribution = \"sizes.txt\"\nload = 0.25\ntime = \"1ms\"\n\n\
             [[part]]\nkind = \"allreduce\"\nsize = 4096\nqps = 2\nhosts = [4, 0, 2]\nstart = \"10us\"\n\n\
             [[part]]\nkind = \"matrix\"\nfile = \"two.cm\"\n",
        )
        .unwrap();
        let w = Workload::read_toml(&path, &Sources::default()).unwrap();
        let shown: Vec<String> = w.parts().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            shown,
            [
                "cdf:sizes.txt,load=0.25,time=1ms".to_owned(),
                "allreduce:size=4096,qps=2,qp_use=round-robin,reps=1,hosts=[4, 0, 2],start=10us"
                    .into(),
                format!("matrix:{}/two.cm", dir.path().display()),
            ]
        );
        let lines: Vec<usize> = w
            .parts()
            .iter()
            .map(|p| match p.origin() {
                Origin::Line { line, .. } => *line,
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(lines, [2, 8, 15]);
        // A file and short forms together.
        let both = Workload::parse_args(
            &[path.to_str().unwrap(), "incast:senders=2,size=1KB"],
            &Sources::default(),
        )
        .unwrap();
        assert_eq!(both.parts().len(), 4);
    }

    #[test]
    fn bad_values_are_refused_naming_the_part_and_key() {
        let dir = files();
        for (form, needle) in [
            ("allreduce:ranks=1,size=1MB", "'allreduce:ranks=1,size=1MB': allreduce ranks: `1` is not a whole number from 2 to 65536"),
            ("allreduce:size=1MB,qps=0", "allreduce qps: `0` is not a whole number from 1 to 256"),
            ("allreduce:size=1MB,qps=257", "from 1 to 256"),
            ("allreduce:size=1MB,reps=1000001", "allreduce reps: `1000001`"),
            ("allreduce:ranks=4", "allreduce size: missing"),
            ("allreduce:ranks=4,size=64XB", "allreduce size: '64XB': unknown unit 'XB'"),
            ("allreduce:ranks=4,size=2TiB", "'2TiB' is outside the sizes accepted here, 1 to 1099511627776 bytes"),
            ("allreduce:ranks=4,size=0", "outside the sizes accepted here"),
            ("allreduce:ranks=4,size=1MB,qp_use=spray", "allreduce qp_use: `spray` is not round-robin or split"),
            ("allreduce:ranks=4,size=1MB,colour=red", "allreduce: unknown key `colour` (its keys: kind, hosts, first, stride, start, ranks, size, qp_use, qps, reps, gap)"),
            ("allreduce:ranks=4,size=1MB,gap=5", "allreduce gap: `5` needs a unit (ns, us, ms, s)"),
            ("allreduce:ranks=4,size=1MB,gap=2h", "'2h' is too long: durations here are 0 s to 3600 s"),
            ("allreduce:ranks=4,ranks=5", "`ranks` given twice"),
            ("allreduce:ranks=4,size=1MB,serial", "allreduce: unknown key `serial`"),
            ("alltoall:ranks=4,size=1MB,serial=maybe", "alltoall serial: `maybe` is not true or false"),
            ("cdf:websearch,load=0.5", "cdf time: give either time or flows"),
            ("cdf:websearch,load=0.5,time=1ms,flows=3", "give either time or flows"),
            ("cdf:websearch,load=1.5,flows=3", "cdf load: `1.5` is not a number in (0, 1]"),
            ("cdf:websearch,load=0,flows=3", "cdf load: `0` is not a number in (0, 1]"),
            ("cdf:websearch,flows=3", "cdf load: missing"),
            ("cdf:websearch,load=0.5,flows=0", "cdf flows: `0` is not a whole number from 1 to 4194304"),
            ("cdf:/nonexistent/sizes.txt,load=0.5,flows=3", "cannot read /nonexistent/sizes.txt: "),
            ("matrix:", "matrix file: missing"),
            ("incast:senders=3,size=1MB,reps=3", "incast reps: repeated rounds need `every`"),
            ("incast:senders=0,size=1MB", "incast senders: `0` is not a whole number from 1 to 65535"),
            ("incast:senders=3,size=1MB,hosts=1", "incast hosts: a list, given in a workload file"),
            ("incast:senders=3,size=1MB,start=-1ms", "incast start: '-1ms' is too short"),
            ("incast:senders=3,size=1MB,first=65536", "incast first: `65536` is not a whole number from 0 to 65535"),
            ("incast:senders=3,size=1MB,stride=0", "incast stride: `0`"),
            ("microburst:senders=3,burst=1KB,every=0us,time=1ms", "microburst every: `0us` is not above zero"),
            ("microburst:senders=3,burst=1KB,time=1ms", "microburst every: missing"),
            ("microburst:senders=3,burst=1KB,every=1fortnight,time=1ms", "unknown unit 'fortnight'"),
            ("allreduc:ranks=4", "'allreduc:ranks=4': kind `allreduc` is not one of cdf, matrix, permutation, allreduce, alltoall, incast, microburst, and no workload file has this name"),
            ("allreduce:size=\u{1b}[2J", "'\\u{1b}[2J'"),
        ] {
            let error = parse(&[form], dir.path()).unwrap_err();
            assert!(error.contains(needle), "{form}:\n{error}");
        }
        let error = Workload::parse_args(&["cdf:websearch,load=0.5,flows=3"], &Sources::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "'cdf:websearch,load=0.5,flows=3': the distribution 'websearch' is read from the \
             directory $LOSSLESS_WORKLOADS names, which is not set: set it, or give the path of a \
             size-CDF file"
        );
    }

    #[test]
    fn workload_files_are_refused_with_the_line_and_never_quoted() {
        let dir = files();
        let path = dir.path().join("w.toml");
        let refused = |text: &str| {
            fs::write(&path, text).unwrap();
            Workload::read_toml(&path, &Sources::default())
                .unwrap_err()
                .to_string()
        };
        let at = |line| format!("{}:{line}: ", path.display());
        for (text, line, needle) in [
            (
                "[[part]]\nkind = \"allreduce\"\nranks = \"x\"\n",
                1,
                "allreduce ranks: `x` is not a whole number",
            ),
            ("\n[[part]]\nkind = 7\n", 2, "kind `7` is not text"),
            ("[[part]]\nranks = 4\n", 1, "no kind (cdf, matrix"),
            (
                "[[part]]\nkind = \"allreduce\"\nsize = true\n",
                1,
                "allreduce size: `true` is not a size in bytes",
            ),
            (
                "[[part]]\nkind = \"allreduce\"\nsize = 1\nhosts = [1, 2, 1]\n",
                1,
                "allreduce hosts: endpoint 1 is listed twice",
            ),
            (
                "[[part]]\nkind = \"allreduce\"\nsize = 1\nhosts = [1, -2]\n",
                1,
                "allreduce hosts: `-2` is not a whole number from 0 to 65535",
            ),
            (
                "[[part]]\nkind = \"allreduce\"\nsize = 1\nhosts = [1]\nstride = 2\n",
                1,
                "give either hosts or first and stride",
            ),
            (
                "[[part]]\nkind = \"allreduce\"\nsize = 1\ngap = 5\n",
                1,
                "allreduce gap: `5` is not a time with a unit",
            ),
            ("seed = 3\n", 1, "unknown field `seed`, expected `part`"),
            (
                "[[part]]\nkind = \"incast\"\n\nsenders = 2 2\n",
                4,
                "expected newline, `#`",
            ),
        ] {
            let error = refused(text);
            assert!(
                error.starts_with(&at(line)) && error.contains(needle),
                "{text:?}:\n{error}"
            );
        }
        // A file that is not a workload: the position only, none of its content.
        let secret = "root:$y$j9T$secret:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n";
        let error = refused(secret);
        assert!(error.starts_with(&at(1)), "{error}");
        assert!(
            !error.contains("secret") && !error.contains("root") && !error.contains("19000"),
            "{error}"
        );
        let error = Workload::read_toml(Path::new("/dev/zero"), &Sources::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "/dev/zero is longer than 1048576 bytes, the limit for a workload file"
        );
        let many = "[[part]]\nkind = \"permutation\"\nsize = 1\n".repeat(MAX_PARTS + 1);
        assert_eq!(
            refused(&many),
            "the workload: this would be 65 parts, the limit is 64"
        );
    }
}
