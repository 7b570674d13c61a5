//! Why looking up an interface, its addresses or a neighbour failed.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

/// An error of an interface or neighbour lookup.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A system call failed; `what` says which and on which interface.
    #[error("{what}: {error}")]
    Io {
        /// The operation and its object, e.g. "bind packet socket to veth0".
        what: String,
        /// The system's error (said in the message, so not also given as the source: a chain
        /// printed whole says it once).
        error: io::Error,
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
}

impl NetError {
    /// Says, in an unresolved next hop, that it was the gateway to `dst` (if it was not `dst`).
    pub fn for_destination(self, dst: IpAddr) -> NetError {
        match self {
            NetError::Unresolved {
                ip, iface, timeout, ..
            } if ip != dst => NetError::Unresolved {
                ip,
                gateway_to: Some(dst),
                iface,
                timeout,
            },
            other => other,
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> NetError {
        let what = what.into();
        move |error| NetError::Io { what, error }
    }
}

/// The result of an interface or neighbour lookup.
pub type Result<T> = std::result::Result<T, NetError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unresolved_gateway_says_whose_gateway_it_is() {
        let unresolved = |ip: &str| NetError::Unresolved {
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
