//! Data-centre fabrics and the lossless.p4 entries their switches need, for `lossless net`
//! (Mininet) and `lossless sim` alike: a [`spec`] says what to build (`leaf-spine:S,L,H`,
//! `fat-tree:K`, `rail:G,S,R` with options per tier), a generator in [`shapes`] builds the
//! [`fabric`] (switches, hosts, servers, links with rate, delay and MTU), [`routing`] computes
//! up-down routes with aggregated prefixes, intact or with failed links and switches, and
//! [`entries`] turns them and a [`tuning`] into every switch's table entries. A pure library:
//! no I/O. docs/topologies.md is the reference.
#![forbid(unsafe_code)]

pub mod entries;
pub mod fabric;
pub mod quantity;
pub mod routing;
pub mod shapes;
pub mod spec;
pub mod tuning;

pub use fabric::Fabric;
pub use routing::Failures;
pub use shapes::build;
pub use spec::{Shape, Spec};
pub use tuning::{Policy, Tuning};

/// Why a topology, a tuning or their entries were refused; the message names the value and
/// its limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A spec, option or tuning value out of its limits, or unreadable.
    #[error("{0}")]
    Invalid(String),
    /// A switch's entries do not fit lossless.p4's tables.
    #[error("{0}")]
    Capacity(String),
}
