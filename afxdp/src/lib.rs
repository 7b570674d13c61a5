//! afxdp: an AF_XDP socket on one queue of one interface, for whole Ethernet frames in and out,
//! in batches, with the kernel's copy of each frame made straight into memory shared with it
//! (the UMEM) — or no copy at all where the driver offers zero-copy. The socket, UMEM and rings
//! are [xdpilone]'s; this crate sizes them, splits the UMEM between the receive and transmit
//! halves so that two threads can each own one, handles the need-wakeup protocol, and, for
//! receiving, loads the XDP program that steers the queue's frames to the socket
//! ([`redirect`]).
//!
//! Both `lossless traffic send --engine afxdp` (transmit only) and softswitch's AF_XDP ports
//! (both halves) use it; each falls back to AF_PACKET when [`Xsk::open`] fails, printing the
//! [`Error`] as the reason.

pub mod redirect;
mod socket;

pub use socket::{Mode, RxHalf, TxHalf, Xsk, FRAME_ROOM};

/// Why an AF_XDP socket could not be had on an interface (the caller falls back and says why).
#[derive(Debug, thiserror::Error)]
#[error("AF_XDP on {iface}: {what}: {source}")]
pub struct Error {
    /// The interface.
    pub iface: String,
    /// The step that failed.
    pub what: String,
    /// What the kernel said.
    #[source]
    pub source: std::io::Error,
}

impl Error {
    fn new(iface: &str, what: impl Into<String>, source: std::io::Error) -> Error {
        Error {
            iface: iface.to_string(),
            what: what.into(),
            source,
        }
    }
}

/// An xdpilone error as an `io::Error` (it keeps errno, sometimes negated).
fn os(e: xdpilone::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.get_raw().abs())
}
