//! Why sending or receiving traffic failed.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use sysutil::NetError;

/// An error of the traffic tool's engine.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    /// A system call, an interface or a neighbour lookup failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The configuration cannot work (sizes, counts, address families).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The pinned maps of an attached interface could not be read.
    #[error("pinned maps of {iface}: {message}")]
    PinnedMaps {
        /// The interface.
        iface: String,
        /// What failed, with its causes.
        message: String,
    },
    /// A frame could not be built.
    #[error("building a frame: {0}")]
    Wire(#[from] wire::Error),
    /// The workload cannot be read or expanded.
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    /// A peer of a collective sent what the plan both were given does not hold.
    #[error("{peer} does not follow the collective's plan: {message}")]
    Peer {
        /// The peer.
        peer: IpAddr,
        /// What it did.
        message: String,
    },
    /// A collective was stopped (Ctrl-C, SIGTERM) before it finished.
    #[error("stopped before the collective finished: {waiting}")]
    Interrupted {
        /// What this rank was still waiting for.
        waiting: String,
    },
    /// A collective did not finish in its time limit.
    #[error("the collective did not finish in {limit:?}: {waiting}")]
    Stalled {
        /// The limit.
        limit: Duration,
        /// What this rank was still waiting for.
        waiting: String,
    },
}

impl TrafficError {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> TrafficError {
        let wrap = NetError::io(what);
        move |source| TrafficError::Net(wrap(source))
    }
}

/// The result of a traffic operation.
pub type Result<T> = std::result::Result<T, TrafficError>;
