//! Real ports: Linux interfaces attached with AF_PACKET mmap rings ([`ring`]), promiscuous
//! (the default), or with `--port-io afxdp` AF_XDP sockets ([`afxdp`]: the kernel's XDP
//! program steers every frame the interface receives to the switch; copy mode on veth,
//! zero-copy where the driver offers it), with the rings where AF_XDP cannot be had. The engine
//! thread reads each port's receive ring itself ([`Port::receiver`]) and transmits through its
//! transmit side, one system call per burst. An interface that disappears takes its port down
//! (the engine stops reading and sending to it); the switch goes on with the other ports. A
//! link that only goes down (and up again) keeps its port.

pub mod ring;

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use crate::engine::{Receive, Transmit, MAX_FRAMES};
use ring::{Received, Ring};

// An AF_XDP receive call reads at most afxdp::BATCH frames: no more than a port's turn.
const _: () = assert!(afxdp::BATCH <= MAX_FRAMES);

/// A port given on the command line: `1@veth1` is port 1 on interface veth1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    /// The switch's port number (0..510).
    pub port: u16,
    /// The interface.
    pub iface: String,
}

impl std::str::FromStr for PortSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (port, iface) = s
            .split_once('@')
            .ok_or_else(|| format!("'{s}': expected PORT@INTERFACE, as 1@veth1"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p < 511)
            .ok_or_else(|| format!("'{s}': the port must be a number from 0 to 510"))?;
        if iface.is_empty() {
            return Err(format!("'{s}': the interface name is missing"));
        }
        Ok(PortSpec {
            port,
            iface: iface.to_string(),
        })
    }
}

/// How ports exchange frames with the kernel (`--port-io`). AF_PACKET is the default: on veth
/// (copy mode) the AF_XDP ports forward less than the rings here (docs/softswitch.md,
/// "Performance").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortIo {
    /// AF_XDP, and AF_PACKET where AF_XDP cannot be had (the reason is logged).
    Afxdp,
    /// AF_PACKET mmap rings.
    #[default]
    AfPacket,
}

impl std::str::FromStr for PortIo {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "afxdp" => Ok(PortIo::Afxdp),
            "af-packet" => Ok(PortIo::AfPacket),
            _ => Err(format!("'{s}': expected afxdp or af-packet")),
        }
    }
}

/// What sees each frame a port receives, before the pipeline does (`--pcap`).
pub type Tap = Box<dyn FnMut(&[u8]) + Send>;

/// An attached port: its receive side and its transmit side, both for the engine.
pub struct Port {
    spec: PortSpec,
    rx: PortRx,
    tx: Option<Box<dyn Transmit>>,
    io: String,
    /// The index of the interface its socket is bound to.
    ifindex: u32,
}

/// A port's receive side.
enum PortRx {
    Ring(Arc<Ring>),
    Xdp(Box<afxdp::RxHalf>),
}

impl Port {
    /// Attaches `spec`'s interface with `io` (falling back from AF_XDP to AF_PACKET, saying
    /// why in the log).
    pub fn open(spec: &PortSpec, io: PortIo) -> io::Result<Port> {
        if io == PortIo::Afxdp {
            match afxdp::Xsk::open(&spec.iface, true) {
                Ok(xsk) => {
                    let rx = xsk.rx.expect("opened to receive");
                    return Ok(Port {
                        spec: spec.clone(),
                        rx: PortRx::Xdp(Box::new(rx)),
                        tx: Some(Box::new(XdpTx(xsk.tx))),
                        io: format!("afxdp ({} mode)", xsk.mode),
                        ifindex: xsk.ifindex,
                    });
                }
                Err(e) => tracing::warn!(
                    port = spec.port,
                    iface = spec.iface,
                    "AF_PACKET instead of AF_XDP: {e}"
                ),
            }
        }
        let ring = Arc::new(Ring::open(&spec.iface).map_err(|e| {
            io::Error::new(e.kind(), format!("port {}@{}: {e}", spec.port, spec.iface))
        })?);
        Ok(Port {
            spec: spec.clone(),
            ifindex: ring.ifindex(),
            rx: PortRx::Ring(ring.clone()),
            tx: Some(Box::new(PortTx { ring, next: 0 })),
            io: "af-packet".into(),
        })
    }

    /// What the port was attached as.
    pub fn spec(&self) -> &PortSpec {
        &self.spec
    }

    /// How it exchanges frames: `afxdp (copy mode)`, `afxdp (zero-copy mode)` or `af-packet`.
    pub fn io(&self) -> &str {
        &self.io
    }

    /// The transmit side, for the engine (once: later calls give `None`).
    pub fn transmitter(&mut self) -> Option<Box<dyn Transmit>> {
        self.tx.take()
    }

    /// The receive side, for the engine; `tap`, if any, sees each frame received before the
    /// pipeline does (a pcap of what came in).
    pub fn receiver(self, tap: Option<Tap>) -> Box<dyn Receive> {
        Box::new(Receiver {
            spec: self.spec,
            rx: self.rx,
            ifindex: self.ifindex,
            tap,
            next: 0,
            scratch: Vec::with_capacity(ring::MAX_FRAME),
            too_long: 0,
        })
    }
}

/// A port's receive side as the engine reads it, and what it had to drop (logged when the
/// engine lets it go).
struct Receiver {
    spec: PortSpec,
    rx: PortRx,
    /// The index of the interface its socket is bound to.
    ifindex: u32,
    tap: Option<Tap>,
    /// The receive ring's next slot (AF_PACKET).
    next: usize,
    /// A frame put together with the VLAN tag the kernel took off (AF_PACKET).
    scratch: Vec<u8>,
    /// Frames dropped for being longer than [`ring::MAX_FRAME`].
    too_long: u64,
}

impl Receiver {
    /// Counts `count` frames longer than [`ring::MAX_FRAME`], the last of them `len` bytes
    /// long; the first time, says why with that length.
    fn too_long(&mut self, count: u64, len: usize) {
        if count == 0 {
            return;
        }
        self.too_long += count;
        if self.too_long == count {
            let PortSpec { port, iface } = &self.spec;
            tracing::warn!(
                port,
                iface,
                len,
                "dropped a frame of {len} bytes, longer than {} (turn GRO/LRO off on {iface})",
                ring::MAX_FRAME
            );
        }
    }

    /// Whether `error`, which the socket reported, means the interface is gone.
    fn gone_by(&self, error: &io::Error) -> bool {
        let PortSpec { port, iface } = &self.spec;
        if ring::ifindex(iface) == self.ifindex {
            tracing::info!(port, iface, "link event: {error}");
            return false;
        }
        tracing::warn!(
            port,
            iface,
            "interface is gone: port {port} is down ({error})"
        );
        true
    }
}

impl Receive for Receiver {
    fn fd(&self) -> RawFd {
        match &self.rx {
            PortRx::Ring(ring) => ring.raw_fd(),
            PortRx::Xdp(rx) => rx.raw_fd(),
        }
    }

    fn receive(&mut self, each: &mut dyn FnMut(&[u8])) -> usize {
        let tap = &mut self.tap;
        let mut seen = |frame: &[u8]| {
            if let Some(tap) = tap {
                tap(frame);
            }
            each(frame);
        };
        // Frames too long, and the last one's length.
        let (mut too_long, mut len) = (0, 0);
        let mut read = 0;
        match &mut self.rx {
            PortRx::Ring(ring) => {
                while read < MAX_FRAMES {
                    match ring.receive(self.next, &mut seen, &mut self.scratch) {
                        Received::Frame => {}
                        Received::TooLong(n) => (too_long, len) = (too_long + 1, n),
                        Received::Empty => break,
                    }
                    self.next = (self.next + 1) % ring::RX_SLOTS;
                    read += 1;
                }
            }
            PortRx::Xdp(rx) => {
                read = rx.receive(|frame| {
                    if frame.len() > ring::MAX_FRAME {
                        (too_long, len) = (too_long + 1, frame.len());
                    } else {
                        seen(frame);
                    }
                });
            }
        }
        self.too_long(too_long, len);
        read
    }

    fn gone(&mut self, revents: i16) -> bool {
        let trouble = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;
        let error = match &self.rx {
            PortRx::Ring(ring) if revents & trouble != 0 => ring.error(),
            // A socket whose interface goes away may only stop receiving (AF_XDP), or report
            // the link going down before the name is gone (AF_PACKET): the name's index
            // tells.
            _ if ring::ifindex(&self.spec.iface) != self.ifindex => {
                io::Error::new(io::ErrorKind::NotFound, "the interface is gone")
            }
            _ if revents & trouble != 0 => io::Error::other("the socket reports an error"),
            _ => return false,
        };
        self.gone_by(&error)
    }
}

impl Drop for Receiver {
    /// Logs what the port dropped.
    fn drop(&mut self) {
        let PortSpec { port, iface } = &self.spec;
        if self.too_long > 0 {
            tracing::warn!(
                port,
                iface,
                too_long = self.too_long,
                "frames dropped for being longer than {} bytes",
                ring::MAX_FRAME
            );
        }
        let (kernel_drops, why) = match &self.rx {
            PortRx::Ring(ring) => (ring.drops(), "the receive ring full".to_string()),
            PortRx::Xdp(rx) => (
                rx.kernel_drops(),
                format!(
                    "the AF_XDP socket's: longer than {} bytes, or its ring full",
                    afxdp::FRAME_ROOM
                ),
            ),
        };
        if let Ok(dropped @ 1..) = kernel_drops {
            tracing::warn!(
                port,
                iface,
                kernel_drops = dropped,
                "frames the kernel dropped before the switch read them ({why})"
            );
        }
    }
}

/// An AF_PACKET port's transmit side: the next slot of its ring.
struct PortTx {
    ring: Arc<Ring>,
    next: usize,
}

impl Transmit for PortTx {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.ring.transmit(self.next, frame)?;
        self.next = (self.next + 1) % ring::TX_SLOTS;
        Ok(())
    }

    fn flush(&mut self) {
        // An interface that is gone is noticed (and its port taken down) where the engine reads it.
        let _ = self.ring.kick();
    }

    fn room(&mut self) -> Option<u32> {
        // The kernel takes the ring's frames in order: if it left the last one queued, its
        // send buffer is full and the port takes nothing more until it has sent some.
        let last = (self.next + ring::TX_SLOTS - 1) % ring::TX_SLOTS;
        Some(if self.ring.waiting(last) {
            0
        } else {
            TX_WINDOW
        })
    }
}

/// Frames an AF_PACKET port is given at a time (between two kicks, one per batch of frames
/// the engine read from a port, which holds at most as many) while its kernel queue takes all
/// it is sent: at most this many wait in its ring, unseen by the program, beyond what the
/// socket's send buffer lets the interface's qdisc hold (as for BMv2's socket).
const TX_WINDOW: u32 = MAX_FRAMES as u32;

/// An AF_XDP port's transmit side.
struct XdpTx(afxdp::TxHalf);

impl Transmit for XdpTx {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if frame.len() > ring::MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a frame of {} bytes is longer than {}",
                    frame.len(),
                    ring::MAX_FRAME
                ),
            ));
        }
        self.0.send(frame)
    }

    fn flush(&mut self) {
        // As for a ring: a port whose interface is gone is taken down where the engine reads it.
        let _ = self.0.flush();
    }
}

/// Attaches every port with `io`; fails on the first that cannot be attached, and before any
/// when a port number or an interface is given twice.
pub fn open_all(specs: &[PortSpec], io: PortIo) -> io::Result<Vec<Port>> {
    let mut ports = BTreeMap::new();
    let mut interfaces = BTreeMap::new();
    for s in specs {
        if let Some(other) = ports.insert(s.port, &s.iface) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("port {} is given twice ({other} and {})", s.port, s.iface),
            ));
        }
        // Two ports on one interface would each receive every frame it brings.
        if let Some(other) = interfaces.insert(&s.iface, s.port) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "interface {} is given twice (ports {other} and {}): an interface is one port",
                    s.iface, s.port
                ),
            ));
        }
    }
    specs.iter().map(|s| Port::open(s, io)).collect()
}
