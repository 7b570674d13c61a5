//! The engine: one thread that owns the running pipeline and the ports' transmit sides. Ports
//! hand it received frames and the gRPC services hand it closures, over one channel; it runs
//! them in arrival order. So the packet path never waits on the async runtime, and a request
//! sees and changes the pipeline between two packets.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::switch::Output;

use super::pipeline::Pipeline;

/// The transmit side of a port.
pub trait Transmit: Send {
    /// Queues one frame; an error means the frame is lost (the port may be gone).
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()>;

    /// Lets the frames queued so far leave (one system call for a burst).
    fn flush(&mut self) {}
}

/// Events handled before the ports' queued frames are flushed.
const BURST: usize = 256;

/// Where frames for the CPU port and digests go: the P4Runtime primary controller.
pub trait Controller: Send + Sync {
    /// A frame the pipeline sent to the CPU port.
    fn packet_in(&self, pipeline: &Pipeline, frame: Vec<u8>);
    /// Digests the pipeline sent since the last call (none when only buffered lists may be
    /// due).
    fn digests(&self, pipeline: &mut Pipeline, sent: Vec<crate::switch::DigestSent>);
}

/// What the engine thread is asked to do.
pub enum Event {
    /// A frame received on a port.
    Frame { port: u16, data: Vec<u8> },
    /// The port's interface is gone: stop sending to it.
    PortDown(u16),
    /// Run a closure on the engine.
    Call(Box<dyn FnOnce(&mut Engine) + Send>),
    /// Leave the loop.
    Stop,
}

/// Packet counts of the engine, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames received from ports (or PacketOut).
    pub received: u64,
    /// Frames sent out of ports.
    pub sent: u64,
    /// Frames received while no pipeline was loaded.
    pub no_pipeline: u64,
    /// Frames the pipeline sent to a port that does not exist or failed to send.
    pub lost: u64,
    /// Frames sent to the controller.
    pub to_cpu: u64,
}

/// The state the engine thread owns.
pub struct Engine {
    /// The running pipeline, if one was loaded.
    pub pipeline: Option<Pipeline>,
    ports: BTreeMap<u16, Box<dyn Transmit>>,
    cpu_port: Option<u16>,
    controller: Arc<dyn Controller>,
    /// Packet counts.
    pub counts: Counts,
    started: Instant,
}

impl Engine {
    /// The CPU port (`--cpu-port`), if any.
    pub fn cpu_port(&self) -> Option<u16> {
        self.cpu_port
    }

    /// The ports that are up.
    pub fn ports(&self) -> Vec<u16> {
        self.ports.keys().copied().collect()
    }

    /// Replaces the running pipeline (or loads the first) with `compiled`, on this engine's
    /// wall clock; tables, counters, registers, queues and replication start empty.
    pub fn load(&mut self, compiled: super::pipeline::Compiled) {
        tracing::debug!(
            tables = compiled.info.tables.len(),
            actions = compiled.info.actions.len(),
            counters = compiled.info.counters.len(),
            registers = compiled.info.registers.len(),
            cookie = compiled.cookie,
            "pipeline loaded (state reset)"
        );
        self.pipeline = Some(Pipeline::new(
            compiled,
            crate::switch::Clock::Wall(self.started),
        ));
    }

    /// Runs a frame through the pipeline as if received on `port` (PacketOut injects this way).
    pub fn receive(&mut self, port: u16, data: Vec<u8>) {
        self.counts.received += 1;
        let Some(p) = self.pipeline.as_mut() else {
            tracing::trace!(port, bytes = data.len(), "frame in, dropped: no pipeline");
            self.counts.no_pipeline += 1;
            return;
        };
        tracing::trace!(port, bytes = data.len(), "frame in");
        p.switch.receive(port, data);
        self.flush();
    }

    /// Sends what the switch produced: frames to ports or the controller, digests to the
    /// controller.
    fn flush(&mut self) {
        let Some(p) = self.pipeline.as_mut() else {
            return;
        };
        let outputs: Vec<Output> = p.switch.drain_outputs().collect();
        let digests = std::mem::take(&mut p.switch.state.digests);
        // Log lines would grow without bound on a running switch.
        p.switch.state.log.clear();
        for out in outputs {
            if Some(out.port) == self.cpu_port {
                tracing::trace!(bytes = out.data.len(), "frame to the controller (PacketIn)");
                self.counts.to_cpu += 1;
                self.controller.packet_in(p, out.data);
                continue;
            }
            let sent = match self.ports.get_mut(&out.port) {
                Some(tx) => tx.send(&out.data).is_ok(),
                None => false,
            };
            if sent {
                tracing::trace!(port = out.port, bytes = out.data.len(), "frame out");
                self.counts.sent += 1;
            } else {
                tracing::trace!(port = out.port, "frame lost: the port is down or missing");
                self.counts.lost += 1;
            }
        }
        if !digests.is_empty() || p.digests.next_deadline().is_some() {
            self.controller.digests(p, digests);
        }
    }

    /// How long until a rate-limited queue may release a packet or a digest list is due, if
    /// either waits.
    fn next_wakeup(&self) -> Option<Duration> {
        let p = self.pipeline.as_ref()?;
        let queue = p
            .switch
            .tm
            .next_ready()
            .map(|at| Duration::from_micros(at.saturating_sub(p.switch.now_us())));
        let digest = p
            .digests
            .next_deadline()
            .map(|at| at.saturating_duration_since(Instant::now()));
        queue.into_iter().chain(digest).min()
    }

    fn handle(&mut self, event: Event) -> bool {
        match event {
            Event::Frame { port, data } => self.receive(port, data),
            Event::PortDown(port) => {
                self.ports.remove(&port);
            }
            Event::Call(f) => {
                f(self);
                self.flush();
            }
            Event::Stop => return false,
        }
        true
    }

    fn run(mut self, events: mpsc::Receiver<Event>) {
        loop {
            let event = match self.next_wakeup() {
                None => events.recv().ok(),
                Some(wait) => match events.recv_timeout(wait) {
                    Ok(e) => Some(e),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Some(p) = self.pipeline.as_mut() {
                            p.switch.advance(0);
                        }
                        self.flush();
                        for tx in self.ports.values_mut() {
                            tx.flush();
                        }
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => None,
                },
            };
            let Some(event) = event else { return };
            if !self.handle(event) {
                return;
            }
            // What else is already queued, then one flush for the burst.
            for _ in 1..BURST {
                match events.try_recv() {
                    Ok(event) => {
                        if !self.handle(event) {
                            return;
                        }
                    }
                    Err(mpsc::TryRecvError::Disconnected) => return,
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            for tx in self.ports.values_mut() {
                tx.flush();
            }
        }
    }
}

/// Events the engine's channel holds before a port has to drop frames (as a NIC whose receive
/// ring is full): a few milliseconds of traffic, bounded memory under overload.
pub const EVENT_QUEUE: usize = 8192;

/// A cheap, clonable way to reach the engine thread.
#[derive(Clone)]
pub struct EngineHandle {
    events: mpsc::SyncSender<Event>,
}

/// Why a frame was not handed to the engine.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The engine is behind: the frame is dropped.
    Full,
    /// The engine has stopped.
    Stopped,
}

/// The engine thread stopped.
#[derive(Debug, thiserror::Error)]
#[error("the switch engine has stopped")]
pub struct Stopped;

impl EngineHandle {
    /// Starts the engine thread with its ports and controller; `pipeline` builds the first
    /// pipeline on that thread, if a program was given.
    pub fn start(
        ports: BTreeMap<u16, Box<dyn Transmit>>,
        cpu_port: Option<u16>,
        controller: Arc<dyn Controller>,
    ) -> (EngineHandle, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::sync_channel(EVENT_QUEUE);
        let thread = std::thread::Builder::new()
            .name("softswitch-engine".into())
            .spawn(move || {
                Engine {
                    pipeline: None,
                    ports,
                    cpu_port,
                    controller,
                    counts: Counts::default(),
                    started: Instant::now(),
                }
                .run(rx)
            })
            .expect("the engine thread starts");
        (EngineHandle { events: tx }, thread)
    }

    /// Hands an event to the engine, waiting while its queue is full.
    pub fn send(&self, event: Event) -> Result<(), Stopped> {
        self.events.send(event).map_err(|_| Stopped)
    }

    /// Hands a received frame to the engine unless its queue is full.
    pub fn offer(&self, port: u16, data: Vec<u8>) -> Result<(), Refused> {
        self.events
            .try_send(Event::Frame { port, data })
            .map_err(|e| match e {
                mpsc::TrySendError::Full(_) => Refused::Full,
                mpsc::TrySendError::Disconnected(_) => Refused::Stopped,
            })
    }

    /// Runs `f` on the engine thread and returns its result.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Event::Call(Box::new(move |engine| {
            let _ = tx.send(f(engine));
        })))?;
        rx.await.map_err(|_| Stopped)
    }

    /// Runs `f` on the engine thread from a thread that is not async, and waits for it.
    pub fn call_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (tx, rx) = mpsc::channel();
        self.send(Event::Call(Box::new(move |engine| {
            let _ = tx.send(f(engine));
        })))?;
        rx.recv().map_err(|_| Stopped)
    }

    /// Asks the engine to stop (it finishes the events before this one).
    pub fn stop(&self) {
        let _ = self.events.send(Event::Stop);
    }
}
