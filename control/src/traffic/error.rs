//! Why sending or receiving traffic failed.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

/// An error of the traffic tool's engine.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    /// A system call failed; `what` says which and on which interface.
    #[error("{what}: {source}")]
    Io {
        /// The operation and its object, e.g. "bind packet socket to veth0".
        what: String,
        /// The system's error.
        source: io::Error,
    },
    /// The interface does not exist in the calling thread's network namespace.
    #[error("no interface named {0:?}")]
    NoInterface(String),
    /// The interface has no address of the destination's family.
    #[error("interface {iface} has no {family} address: pass a source IP")]
    NoAddress {
        /// The interface.
        iface: String,
        /// "IPv4" or "IPv6".
        family: &'static str,
    },
    /// The MAC address of the next hop did not appear in the neighbour table in time.
    #[error(
        "no neighbour entry for {ip}{} on {iface} after {timeout:?}: it did not answer ARP or \
         neighbour discovery (traffic send skips this with --dst-mac)",
        gateway_to.map(|dst| format!(" (the gateway to {dst})")).unwrap_or_default()
    )]
    Unresolved {
        /// The next hop: the destination, or the gateway of its route.
        ip: IpAddr,
        /// The destination, when `ip` is the gateway to it.
        gateway_to: Option<IpAddr>,
        /// The interface.
        iface: String,
        /// How long resolution was waited for.
        timeout: Duration,
    },
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
    /// Says, in an unresolved next hop, that it was the gateway to `dst` (if it was not `dst`).
    pub(crate) fn for_destination(self, dst: IpAddr) -> TrafficError {
        match self {
            TrafficError::Unresolved {
                ip, iface, timeout, ..
            } if ip != dst => TrafficError::Unresolved {
                ip,
                gateway_to: Some(dst),
                iface,
                timeout,
            },
            other => other,
        }
    }

    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> TrafficError {
        let what = what.into();
        move |source| TrafficError::Io { what, source }
    }
}

/// The result of a traffic operation.
pub type Result<T> = std::result::Result<T, TrafficError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unresolved_gateway_says_whose_gateway_it_is() {
        let unresolved = |ip: &str| TrafficError::Unresolved {
            ip: ip.parse().unwrap(),
            gateway_to: None,
            iface: "tx0".into(),
            timeout: Duration::from_secs(3),
        };
        let dst: IpAddr = "10.0.2.2".parse().unwrap();
        assert_eq!(
            unresolved("10.0.1.1").for_destination(dst).to_string(),
            "no neighbour entry for 10.0.1.1 (the gateway to 10.0.2.2) on tx0 after 3s: it did not answer ARP or neighbour discovery (traffic send skips this with --dst-mac)"
        );
        assert_eq!(
            unresolved("10.0.2.2").for_destination(dst).to_string(),
            "no neighbour entry for 10.0.2.2 on tx0 after 3s: it did not answer ARP or neighbour discovery (traffic send skips this with --dst-mac)"
        );
    }
}
