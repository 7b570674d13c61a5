//! The project's one workload format (docs/workloads.md): what `lossless sim`, `lossless net
//! experiment` and `lossless lab lb` send. A workload is one or more parts, each one kind:
//!
//! - `cdf`: flows with sizes from a size CDF (a file, or the published `websearch`, `hadoop`,
//!   `alistorage`, `googlerpc`) at a target load, Poisson per host, as HPCC's traffic_gen;
//! - `matrix`: an htsim connection matrix, unchanged, triggers included;
//! - `permutation`: every host sends to a distinct other, as htsim's gen_permutation.py;
//! - `allreduce` (ring) and `alltoall`: collectives over ranks with nccl-tests' sizes, several
//!   QPs per connection, repetitions;
//! - `incast` and `microburst`: N senders to one receiver, once, in rounds, or in bursts.
//!
//! Parts come from a TOML file (`[[part]]` tables) or short forms on the command line
//! ([`Workload::parse_args`]), both read by one reader with written limits ([`limits`]).
//! [`expand`] turns a workload into [`Flows`] for a set of [`Endpoints`], checking the counts
//! against the limits before it allocates them. A pure library: it reads the files it is
//! given and nothing else; no clock, no network, no threads.
#![forbid(unsafe_code)]

pub mod cdf;
mod collective;
mod error;
mod expand;
mod flows;
mod keys;
pub mod limits;
mod matrix;
mod spec;
mod text;

pub use collective::{Collective, CollectiveKind};
pub use error::{Origin, Result, WorkloadError};
pub use expand::expand;
pub use flows::{
    After, Connection, Dependency, Endpoints, Flow, FlowId, Flows, LinkFailure, On, Start, Step,
    Tier,
};
pub use matrix::Matrix;
pub use spec::{Part, Sources, Workload};

/// Time in picoseconds: fine enough for one bit at 800 Gb/s (1.25 ps), 213 days in a `u64`.
pub type Ps = u64;

/// Picoseconds in a second.
pub const PS_PER_SECOND: Ps = 1_000_000_000_000;

/// The environment variable naming the directory of the published size CDFs
/// ([`cdf::DISTRIBUTIONS`]); `.ci/run` sets it to the shared reference folder.
pub const DISTRIBUTIONS_VAR: &str = "LOSSLESS_WORKLOADS";
