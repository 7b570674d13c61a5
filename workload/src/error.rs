//! The errors of reading and expanding a workload, each naming where: the file and line, or
//! the short form, and the token at fault, escaped. A file that does not look like the format
//! it should be from its first line on is refused without quoting it, so naming a file that is
//! not a workload (`/etc/shadow`) prints nothing of its content.

use std::fmt;
use std::path::{Path, PathBuf};

use units::{control_escaped, escaped};

/// Where a piece of a workload was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Line `line` (from 1) of a file.
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
    },
    /// A short form given on the command line.
    Arg(String),
    /// The workload as a whole.
    Workload,
}

impl Origin {
    /// Line `line` of `path`.
    pub(crate) fn line(path: &Path, line: usize) -> Origin {
        Origin::Line {
            path: path.to_owned(),
            line,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Line { path, line } => write!(f, "{}:{line}", shown_path(path)),
            Origin::Arg(text) => write!(f, "'{}'", escaped(text)),
            Origin::Workload => f.write_str("the workload"),
        }
    }
}

/// `path` as messages show it: whole, with control characters escaped.
pub(crate) fn shown_path(path: &Path) -> String {
    control_escaped(&path.to_string_lossy())
}

/// `token` as messages quote it: in backquotes, escaped and shortened.
pub(crate) fn token(token: &str) -> String {
    format!("`{}`", escaped(token))
}

/// Why a workload could not be read or expanded.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A file could not be opened or read.
    #[error("cannot read {}: {error}", shown_path(.path))]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (said in the message, so not also given as the error's source: a chain
        /// printed whole says it once).
        error: std::io::Error,
    },
    /// A file is longer than the limit for its kind; it was read no further.
    #[error("{} is longer than {limit} bytes, the limit for {what}", shown_path(.path))]
    FileTooLong {
        /// The file.
        path: PathBuf,
        /// What kind of file it was read as.
        what: &'static str,
        /// The limit in bytes.
        limit: u64,
    },
    /// The input is wrong at `at`.
    #[error("{at}: {message}")]
    Input {
        /// Where.
        at: Origin,
        /// What is wrong, quoting the token at fault.
        message: String,
    },
    /// The workload would be more of something than a limit allows (checked before it is
    /// allocated).
    #[error("{at}: this would be {count} {what}, the limit is {limit}")]
    Limit {
        /// The part (or the whole workload) that is too large.
        at: Origin,
        /// What is counted: flows, dependencies, ...
        what: &'static str,
        /// How many it would be.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// A named distribution was asked for and no directory of distributions was given.
    #[error(
        "{at}: the distribution '{name}' is read from the directory ${var} names, which is not \
         set: set it, or give the path of a size-CDF file",
        var = crate::DISTRIBUTIONS_VAR
    )]
    NoDistributions {
        /// Where it was named.
        at: Origin,
        /// The name.
        name: &'static str,
    },
}

impl WorkloadError {
    /// An error in the input at `at`.
    pub(crate) fn input(at: &Origin, message: impl Into<String>) -> WorkloadError {
        WorkloadError::Input {
            at: at.clone(),
            message: message.into(),
        }
    }
}

/// Refuses `count` of `what` at `at` past `limit`, naming both.
pub(crate) fn within(at: &Origin, what: &'static str, count: u64, limit: u64) -> Result<()> {
    if count > limit {
        return Err(WorkloadError::Limit {
            at: at.clone(),
            what,
            count,
            limit,
        });
    }
    Ok(())
}

/// A result of this crate.
pub type Result<T, E = WorkloadError> = std::result::Result<T, E>;

/// Asserts that `error`, the refusal of a file that is not the format it was read as, says
/// `said` and quotes none of `contents`: the file is named, what it holds is not shown.
#[cfg(test)]
pub(crate) fn assert_unquoted(error: &str, said: &str, contents: &[&str]) {
    assert!(error.contains(said), "{error}");
    assert!(!contents.iter().any(|c| error.contains(c)), "{error}");
}
