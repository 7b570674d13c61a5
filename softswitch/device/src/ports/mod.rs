//! Real ports: Linux interfaces attached with AF_PACKET mmap rings ([`ring`]), promiscuous.
//! Each port has a receive thread that hands frames to the engine; the engine transmits
//! through the port's ring. An interface that disappears takes its port down (the engine stops
//! sending to it, its thread ends); the switch goes on with the other ports. A link that only
//! goes down (and up again) keeps its port.

pub mod ring;

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::engine::{Controller, EngineHandle, Event, Refused, Transmit};
use ring::{Received, Ring};

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

/// What sees each frame a port receives, on the port's thread (`--pcap`).
pub type Tap = Box<dyn FnMut(&[u8]) + Send>;

/// An attached port: its ring, shared by the receive thread and the engine's transmit side.
pub struct Port {
    spec: PortSpec,
    ring: Arc<Ring>,
}

impl Port {
    /// Attaches `spec`'s interface.
    pub fn open(spec: &PortSpec) -> io::Result<Port> {
        let ring = Ring::open(&spec.iface).map_err(|e| {
            io::Error::new(e.kind(), format!("port {}@{}: {e}", spec.port, spec.iface))
        })?;
        Ok(Port {
            spec: spec.clone(),
            ring: Arc::new(ring),
        })
    }

    /// What the port was attached as.
    pub fn spec(&self) -> &PortSpec {
        &self.spec
    }

    /// The transmit side, for the engine.
    pub fn transmitter(&self) -> Box<dyn Transmit> {
        Box::new(PortTx {
            ring: self.ring.clone(),
            next: 0,
        })
    }

    /// Starts the receive thread, which runs while `running` is set; `tap`, if any, sees each
    /// frame received before the engine does (a pcap of what came in).
    pub fn spawn_receiver<C: Controller>(
        self,
        engine: EngineHandle<C>,
        running: Arc<AtomicBool>,
        mut tap: Option<Tap>,
    ) -> JoinHandle<()> {
        let name = format!("port-{}", self.spec.port);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || self.receive_loop(&engine, &running, &mut tap))
            .expect("a port thread starts")
    }

    fn receive_loop<C: Controller>(
        self,
        engine: &EngineHandle<C>,
        running: &AtomicBool,
        tap: &mut Option<Tap>,
    ) {
        let PortSpec { port, iface } = &self.spec;
        let mut next = 0;
        let mut overflow = 0u64;
        let mut too_long = 0u64;
        while running.load(Ordering::Relaxed) {
            match self.ring.receive(next) {
                Received::Frame(data) => {
                    next = (next + 1) % ring::RX_SLOTS;
                    if let Some(tap) = tap {
                        tap(&data);
                    }
                    match engine.offer(*port, data) {
                        Ok(()) => {}
                        Err(Refused::Full) => overflow += 1,
                        Err(Refused::Stopped) => break,
                    }
                }
                Received::TooLong(len) => {
                    next = (next + 1) % ring::RX_SLOTS;
                    too_long += 1;
                    // The first one says why; the count comes when the port stops.
                    if too_long > 1 {
                        continue;
                    }
                    tracing::warn!(
                        port,
                        iface,
                        len,
                        "dropped a frame of {len} bytes, longer than {} (turn GRO/LRO off on {iface})",
                        ring::MAX_FRAME
                    );
                }
                Received::Empty => {
                    // Wake up now and then to see `running`.
                    if let Err(e) = self.ring.wait(100) {
                        if ring::ifindex(iface) != self.ring.ifindex() {
                            tracing::warn!(
                                port,
                                iface,
                                "interface is gone: port {port} is down ({e})"
                            );
                            let _ = engine.send(Event::PortDown(*port));
                            break;
                        }
                        tracing::info!(port, iface, "link event: {e}");
                    }
                }
            }
        }
        if too_long > 0 {
            tracing::warn!(
                port,
                iface,
                too_long,
                "frames dropped for being longer than {} bytes",
                ring::MAX_FRAME
            );
        }
        if overflow > 0 {
            tracing::warn!(
                port,
                iface,
                overflow,
                "frames dropped while the engine was behind"
            );
        }
    }
}

/// A port's transmit side: the next slot of its ring.
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
}

/// Attaches every port; fails on the first that cannot be attached.
pub fn open_all(specs: &[PortSpec]) -> io::Result<Vec<Port>> {
    let mut seen = BTreeMap::new();
    for s in specs {
        if let Some(other) = seen.insert(s.port, &s.iface) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("port {} is given twice ({other} and {})", s.port, s.iface),
            ));
        }
    }
    specs.iter().map(Port::open).collect()
}
