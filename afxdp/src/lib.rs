//! afxdp: an AF_XDP socket on one queue of one interface, for whole Ethernet frames in and out,
//! in batches, with the kernel's copy of each frame made straight into memory shared with it
//! (the UMEM) — or no copy at all where the driver offers zero-copy. The socket is opened with
//! the kernel's own interface through libc (`setsockopt` XDP_UMEM_REG and the ring sizes,
//! `getsockopt` XDP_MMAP_OFFSETS, `mmap` of the four rings, `bind`): the rings' protocol is in
//! `ring`, the socket, its UMEM split between a receive and a transmit half that two threads
//! can each own, and the need-wakeup protocol in `socket`, and the XDP program that steers the
//! queue's received frames to the socket in [`redirect`].
//!
//! Why our own rings: the AF_XDP crates of the registry are either copyleft (xdpilone,
//! EUPL-1.2, against the project's MIT OR Apache-2.0) or bindings to libxdp/libbpf built from C
//! (xsk-rs over libxdp-sys, afxdp over an old libbpf-sys), which need a C toolchain, libelf and
//! zlib on every machine that builds softswitch; the kernel's interface is four socket options
//! and four shared rings, which this crate implements in about 250 lines as libbpf's `xsk.h`
//! does.
//!
//! Both `lossless traffic send --engine afxdp` (transmit only) and softswitch's AF_XDP ports
//! (both halves) use it; each falls back to AF_PACKET when [`Xsk::open`] fails, printing the
//! [`Error`] as the reason.

pub mod redirect;
mod ring;
mod socket;

pub use socket::{Mode, RxHalf, TxHalf, Xsk, BATCH, FRAME_ROOM};

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
