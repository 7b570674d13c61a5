//! Real ports: Linux interfaces attached with AF_PACKET mmap rings ([`ring`]), promiscuous
//! (the default), or with `--port-io afxdp` AF_XDP sockets ([`afxdp`]: the kernel's XDP
//! program steers every frame the interface receives to the switch; copy mode on veth,
//! zero-copy where the driver offers it), with the rings where AF_XDP cannot be had. Each port has a
//! receive thread that hands frames to the engine in batches; the engine transmits through the
//! port's transmit side, one system call per burst. An interface that disappears takes its
//! port down (the engine stops sending to it, its thread ends); the switch goes on with the
//! other ports. A link that only goes down (and up again) keeps its port.

pub mod ring;

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::batch::{BatchPool, FrameBatch};
use crate::engine::{Controller, EngineHandle, Event, Refused, Transmit};
use ring::{Received, Ring};

/// Batches a port owns: frames the engine may hold from one port before the port stops
/// reading (and frames wait in the kernel's ring).
const BATCHES_PER_PORT: usize = 64;

/// How long a receive thread waits for a frame, or for a batch back, before it looks at
/// whether the switch is stopping.
const WAKE_MS: i32 = 100;
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

/// What sees each frame a port receives, on the port's thread (`--pcap`).
pub type Tap = Box<dyn FnMut(&[u8]) + Send>;

/// An attached port: its receive side, for its thread, and its transmit side, for the engine.
pub struct Port {
    spec: PortSpec,
    rx: PortRx,
    tx: Option<Box<dyn Transmit>>,
    io: String,
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

    /// Starts the receive thread, which runs while `running` is set; `tap`, if any, sees each
    /// frame received before the engine does (a pcap of what came in).
    pub fn spawn_receiver<C: Controller>(
        self,
        engine: EngineHandle<C>,
        running: Arc<AtomicBool>,
        tap: Option<Tap>,
    ) -> JoinHandle<()> {
        let name = format!("port-{}", self.spec.port);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let mut receiving = Receiving {
                    spec: self.spec,
                    engine,
                    tap,
                    overflow: 0,
                    too_long: 0,
                    kernel_drops: 0,
                };
                match self.rx {
                    PortRx::Ring(ring) => receiving.read_ring(&ring, &running),
                    PortRx::Xdp(mut rx) => {
                        receiving.read_xdp(&mut rx, &running);
                        if let Ok(dropped) = rx.kernel_drops() {
                            receiving.kernel_drops = dropped;
                        }
                    }
                }
                receiving.report();
            })
            .expect("a port thread starts")
    }
}

/// A port's receive thread: batches of frames to the engine, and what it had to drop.
struct Receiving<C: Controller> {
    spec: PortSpec,
    engine: EngineHandle<C>,
    tap: Option<Tap>,
    /// Frames dropped because the engine's queue was full.
    overflow: u64,
    /// Frames dropped for being longer than [`ring::MAX_FRAME`].
    too_long: u64,
    /// Frames an AF_XDP socket's kernel side dropped (longer than its frames, or its ring
    /// full).
    kernel_drops: u64,
}

impl<C: Controller> Receiving<C> {
    /// An empty batch; `None` while the engine holds them all, or once the switch stops.
    fn batch(&self, pool: &BatchPool, running: &AtomicBool) -> Option<FrameBatch> {
        while running.load(Ordering::Relaxed) {
            if let Some(batch) = pool.take(Duration::from_millis(WAKE_MS as u64)) {
                return Some(batch);
            }
        }
        None
    }

    /// Hands a batch to the engine (a tap sees its frames first); false once the engine has
    /// stopped.
    fn offer(&mut self, batch: FrameBatch) -> bool {
        if let Some(tap) = &mut self.tap {
            for frame in batch.frames() {
                tap(frame);
            }
        }
        let frames = batch.len() as u64;
        match self.engine.offer(self.spec.port, batch) {
            Ok(()) => true,
            Err(Refused::Full) => {
                self.overflow += frames;
                true
            }
            Err(Refused::Stopped) => false,
        }
    }

    /// Counts a frame longer than [`ring::MAX_FRAME`]; the first one says why.
    fn too_long(&mut self, len: usize) {
        self.too_long += 1;
        if self.too_long == 1 {
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

    /// Whether a receive error means the interface is gone (then the engine is told).
    fn gone(&self, ifindex: u32, error: &io::Error) -> bool {
        let PortSpec { port, iface } = &self.spec;
        if ring::ifindex(iface) == ifindex {
            tracing::info!(port, iface, "link event: {error}");
            return false;
        }
        tracing::warn!(
            port,
            iface,
            "interface is gone: port {port} is down ({error})"
        );
        let _ = self.engine.send(Event::PortDown(*port));
        true
    }

    fn read_ring(&mut self, ring: &Ring, running: &AtomicBool) {
        let pool = BatchPool::new(BATCHES_PER_PORT);
        let mut next = 0;
        while let Some(mut batch) = self.batch(&pool, running) {
            let mut empty = false;
            while !batch.is_full() {
                match ring.receive(next, &mut batch) {
                    Received::Frame => next = (next + 1) % ring::RX_SLOTS,
                    Received::TooLong(len) => {
                        next = (next + 1) % ring::RX_SLOTS;
                        self.too_long(len);
                    }
                    Received::Empty => {
                        empty = true;
                        break;
                    }
                }
            }
            if !batch.is_empty() {
                if !self.offer(batch) {
                    return;
                }
            } else {
                batch.recycle();
            }
            if empty {
                // Wake up now and then to see `running`.
                if let Err(e) = ring.wait(WAKE_MS) {
                    if self.gone(ring.ifindex(), &e) {
                        return;
                    }
                }
            }
        }
    }

    fn read_xdp(&mut self, rx: &mut afxdp::RxHalf, running: &AtomicBool) {
        let pool = BatchPool::new(BATCHES_PER_PORT);
        let ifindex = ring::ifindex(&self.spec.iface);
        while let Some(mut batch) = self.batch(&pool, running) {
            let mut too_long = Vec::new();
            let read = rx.receive(|frame| {
                if frame.len() > ring::MAX_FRAME {
                    too_long.push(frame.len());
                } else {
                    batch.push(&[frame]);
                }
            });
            for len in too_long {
                self.too_long(len);
            }
            if !batch.is_empty() {
                if !self.offer(batch) {
                    return;
                }
            } else {
                batch.recycle();
            }
            if read == 0 {
                // An AF_XDP socket whose interface goes away only stops receiving: when a
                // wait ends with nothing (not after each frame: that is system calls per
                // frame), look at the name's index too.
                let error = match rx.wait(WAKE_MS) {
                    Err(e) => Some(e),
                    Ok(false) if ring::ifindex(&self.spec.iface) != ifindex => Some(
                        io::Error::new(io::ErrorKind::NotFound, "the interface is gone"),
                    ),
                    Ok(_) => None,
                };
                if error.is_some_and(|e| self.gone(ifindex, &e)) {
                    return;
                }
            }
        }
    }

    /// Logs what the port dropped, when it stops.
    fn report(&self) {
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
        if self.overflow > 0 {
            tracing::warn!(
                port,
                iface,
                overflow = self.overflow,
                "frames dropped while the engine was behind"
            );
        }
        if self.kernel_drops > 0 {
            tracing::warn!(
                port,
                iface,
                kernel_drops = self.kernel_drops,
                "frames the kernel dropped before the AF_XDP socket (longer than {} bytes, or \
                 its ring full)",
                afxdp::FRAME_ROOM
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
        // An interface that is gone is noticed (and its port taken down) by its receive thread.
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

/// Frames an AF_PACKET port is given at a time (between two kicks, one per event: a received
/// batch holds at most as many) while its kernel queue takes all it is sent: at most this many
/// wait in its ring, unseen by the program, beyond what the socket's send buffer lets the
/// interface's qdisc hold (as for BMv2's socket).
const TX_WINDOW: u32 = crate::batch::MAX_FRAMES as u32;

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
        // As for a ring: a port whose interface is gone is taken down by its receive thread.
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
