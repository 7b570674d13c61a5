//! The engine: one thread that owns the running pipeline and the ports' transmit sides. Ports
//! hand it received frames and a controller (the gRPC services) hands it closures, over one
//! channel; it runs them in arrival order. So the packet path never waits on the controller,
//! and a request sees and changes the pipeline between two packets. The engine knows the
//! controller only through [`Controller`]: what it keeps beside the switch is its own
//! [`Controller::Pipeline`].
//!
//! Ports hand over frames in batches ([`FrameBatch`]), one event each, and get the batch back
//! empty; a frame's buffer for the core is one the core sent out before (kept in `spare`), and
//! the core deparses into the buffer an earlier frame arrived in and reuses the rest of a
//! packet's state, so the loop allocates nothing per packet once warm (the core's
//! `alloc_per_packet` test counts it), and the ports' transmit sides are
//! flushed (one system call each) once per event — a batch of up to 64 frames — not per frame.
//!
//! A port whose interface cannot take frames as fast as they come (a rate-limiting qdisc, as
//! Mininet's `bw` links have) pushes back: after each flush the engine gives the switch each
//! port's [`Transmit::room`] as its budget, so a port that takes nothing more leaves its
//! packets in the traffic manager's queues — where the program's `enq_qdepth` sees them, as in
//! BMv2, whose egress blocks on the send — and the engine tries it again
//! [`BLOCKED_PORT_RETRY`] later.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use softswitch_core::switch::{Clock, DigestSent, Execution, Output, Switch};

use crate::batch::FrameBatch;

/// The transmit side of a port.
pub trait Transmit: Send {
    /// Queues one frame; an error means the frame is lost (the port may be gone).
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()>;

    /// Lets the frames queued so far leave (one system call for a burst).
    fn flush(&mut self) {}

    /// After a [`Transmit::flush`]: how many more frames the port takes now without holding
    /// them where the program cannot see them (0 while its interface takes nothing more), or
    /// `None` if it takes any number.
    fn room(&mut self) -> Option<u32> {
        None
    }
}

/// How long the engine waits before trying a port that took nothing more again.
pub const BLOCKED_PORT_RETRY: Duration = Duration::from_micros(250);

/// Events handled one after the other without waiting on the channel.
const BURST: usize = 256;

/// Frame buffers the engine keeps for reuse (a burst's worth of frames).
const SPARE_BUFFERS: usize = 1024;

/// Bytes a new frame buffer reserves: a 1500-byte MTU frame and room for headers a program
/// adds.
const BUFFER_BYTES: usize = 2048;

/// A running pipeline as the engine sees it: a switch, with whatever its controller keeps
/// beside it. It is built and lives on the engine thread, so it need not be `Send`.
pub trait Pipeline: 'static {
    /// The switch running the program.
    fn switch(&self) -> &Switch;
    /// The switch running the program, to run packets through.
    fn switch_mut(&mut self) -> &mut Switch;
    /// When the controller next wants [`Controller::notify`] called even if no digest was sent
    /// (a buffered digest list falls due, idle table entries are to be looked for), if ever.
    fn next_deadline(&self) -> Option<Instant>;
}

/// Where frames for the CPU port, digests and the pipeline's timed notifications go: the
/// P4Runtime primary controller.
pub trait Controller: Send + Sync + 'static {
    /// The pipeline the engine runs for this controller.
    type Pipeline: Pipeline;
    /// A frame the pipeline sent to the CPU port.
    fn packet_in(&self, pipeline: &Self::Pipeline, frame: Vec<u8>);
    /// The digests the pipeline sent since the last call (none when only the timers of
    /// [`Pipeline::next_deadline`] may be due), and whatever those timers have for it. Runs on
    /// the engine thread, between packets.
    fn notify(&self, pipeline: &mut Self::Pipeline, sent: Vec<DigestSent>);
}

/// A closure run on the engine thread.
pub type Call<C> = Box<dyn FnOnce(&mut Engine<C>) + Send>;

/// What the engine thread is asked to do.
pub enum Event<C: Controller> {
    /// A frame received on a port.
    Frame {
        /// The port it came in on.
        port: u16,
        /// The frame.
        data: Vec<u8>,
    },
    /// Frames received on a port.
    Frames {
        /// The port they came in on.
        port: u16,
        /// The frames.
        batch: FrameBatch,
    },
    /// The port's interface is gone: stop sending to it.
    PortDown(u16),
    /// Run a closure on the engine.
    Call(Call<C>),
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
pub struct Engine<C: Controller> {
    /// The running pipeline, if one was loaded.
    pub pipeline: Option<C::Pipeline>,
    ports: BTreeMap<u16, Box<dyn Transmit>>,
    cpu_port: Option<u16>,
    controller: Arc<C>,
    /// Packet counts.
    pub counts: Counts,
    /// The state budget of every switch loaded (`softswitch_core::budget`).
    state_budget: usize,
    /// How every switch loaded runs its program.
    execution: Execution,
    started: Instant,
    /// The switch's outputs being sent (kept for its allocation).
    outputs: Vec<Output>,
    /// Buffers of frames sent, for frames to come.
    spare: Vec<Vec<u8>>,
    /// Whether a port took nothing more at the last look (its packets wait in the switch).
    blocked: bool,
}

impl<C: Controller> Engine<C> {
    /// The CPU port (`--cpu-port`), if any.
    pub fn cpu_port(&self) -> Option<u16> {
        self.cpu_port
    }

    /// The ports that are up.
    pub fn ports(&self) -> Vec<u16> {
        self.ports.keys().copied().collect()
    }

    /// The clock a switch loaded on this engine reads: the wall clock since the engine started.
    pub fn clock(&self) -> Clock {
        Clock::Wall(self.started)
    }

    /// Replaces the running pipeline (or loads the first) with `pipeline`, built on
    /// [`Engine::clock`]; its switch traces into the log as the log filter asks
    /// ([`crate::trace`]).
    pub fn load(&mut self, mut pipeline: C::Pipeline) {
        pipeline.switch_mut().set_trace(crate::trace::sink());
        pipeline.switch_mut().set_state_budget(self.state_budget);
        Self::run_as(pipeline.switch_mut(), self.execution);
        self.pipeline = Some(pipeline);
        self.pace();
    }

    /// Sets the state budget, in bytes, of the running switch and of every switch loaded
    /// after it.
    pub fn set_state_budget(&mut self, bytes: usize) {
        self.state_budget = bytes;
        if let Some(p) = &mut self.pipeline {
            p.switch_mut().set_state_budget(bytes);
        }
    }

    /// Sets how the running switch and every switch loaded after it run their program.
    pub fn set_execution(&mut self, execution: Execution) {
        self.execution = execution;
        if let Some(p) = &mut self.pipeline {
            Self::run_as(p.switch_mut(), execution);
        }
    }

    /// Makes `switch` run its program as `execution` says, logging each block that runs
    /// interpreted although it runs compiled.
    fn run_as(switch: &mut Switch, execution: Execution) {
        switch.set_execution(execution);
        for fallback in switch.compile_fallbacks() {
            tracing::warn!("{fallback}");
        }
    }

    /// Runs a frame through the pipeline as if received on `port` (PacketOut injects this way).
    pub fn receive(&mut self, port: u16, data: Vec<u8>) {
        self.ingress(port, data);
        self.flush();
    }

    /// Runs a frame through the pipeline as received on `port`, leaving its outputs in the
    /// switch for the next [`Engine::flush`].
    fn ingress(&mut self, port: u16, data: Vec<u8>) {
        self.counts.received += 1;
        let Some(p) = self.pipeline.as_mut() else {
            tracing::trace!(port, bytes = data.len(), "frame in, dropped: no pipeline");
            self.counts.no_pipeline += 1;
            return;
        };
        tracing::trace!(port, bytes = data.len(), "frame in");
        p.switch_mut().receive(port, data);
    }

    /// Runs each frame of `batch` through the pipeline as received on `port`, sends their
    /// outputs (one flush for the batch, not one per frame), then gives the batch back to its
    /// port.
    fn receive_batch(&mut self, port: u16, batch: FrameBatch) {
        for frame in batch.frames() {
            let mut data = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(BUFFER_BYTES));
            data.clear();
            data.extend_from_slice(frame);
            self.ingress(port, data);
        }
        batch.recycle();
        self.flush();
    }

    /// Lets what the ports hold leave, gives the switch each port's room, and sends what that
    /// released, until the switch releases nothing more (its queues are empty, or wait for
    /// their rate or for ports that take nothing more).
    fn transmit(&mut self) {
        loop {
            for tx in self.ports.values_mut() {
                tx.flush();
            }
            self.pace();
            if self.flush() == 0 {
                return;
            }
        }
    }

    /// Gives the switch each port's room as its budget (serving its queues).
    fn pace(&mut self) {
        let Some(p) = self.pipeline.as_mut() else {
            return;
        };
        self.blocked = false;
        for (&port, tx) in self.ports.iter_mut() {
            let room = tx.room();
            self.blocked |= room == Some(0);
            p.switch_mut().set_port_budget(port, room);
        }
    }

    /// Sends what the switch produced: frames to ports or the controller, digests to the
    /// controller. Returns the number of frames given to ports.
    fn flush(&mut self) -> usize {
        let Some(p) = self.pipeline.as_mut() else {
            return 0;
        };
        let mut given = 0;
        let switch = p.switch_mut();
        let mut outputs = std::mem::take(&mut self.outputs);
        outputs.extend(switch.drain_outputs());
        let digests = switch.take_digests();
        // Log lines would grow without bound on a running switch.
        switch.clear_log();
        for out in outputs.drain(..) {
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
            given += 1;
            if sent {
                tracing::trace!(port = out.port, bytes = out.data.len(), "frame out");
                self.counts.sent += 1;
            } else {
                tracing::trace!(port = out.port, "frame lost: the port is down or missing");
                self.counts.lost += 1;
            }
            if self.spare.len() < SPARE_BUFFERS {
                self.spare.push(out.data);
            }
        }
        self.outputs = outputs;
        if !digests.is_empty() || p.next_deadline().is_some() {
            self.controller.notify(p, digests);
        }
        given
    }

    /// How long until a rate-limited queue may release a packet, the controller's next deadline
    /// (a digest list, a sweep for idle entries), or a port that took nothing more is to be
    /// tried again, if any of them waits.
    fn next_wakeup(&self) -> Option<Duration> {
        let p = self.pipeline.as_ref()?;
        let switch = p.switch();
        let queue = switch
            .next_ready_us()
            .map(|at| Duration::from_micros(at.saturating_sub(switch.now_us())));
        let deadline = p
            .next_deadline()
            .map(|at| at.saturating_duration_since(Instant::now()));
        let blocked = self.blocked.then_some(BLOCKED_PORT_RETRY);
        queue.into_iter().chain(deadline).chain(blocked).min()
    }

    fn handle(&mut self, event: Event<C>) -> bool {
        match event {
            Event::Frame { port, data } => self.receive(port, data),
            Event::Frames { port, batch } => self.receive_batch(port, batch),
            Event::PortDown(port) => {
                self.ports.remove(&port);
                if let Some(p) = self.pipeline.as_mut() {
                    // Frames for it are lost from now on, as to a missing port.
                    p.switch_mut().set_port_budget(port, None);
                }
            }
            Event::Call(f) => {
                f(self);
                self.flush();
            }
            Event::Stop => return false,
        }
        true
    }

    fn run(mut self, events: mpsc::Receiver<Event<C>>) {
        loop {
            let event = match self.next_wakeup() {
                None => events.recv().ok(),
                Some(wait) => match events.recv_timeout(wait) {
                    Ok(e) => Some(e),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Some(p) = self.pipeline.as_mut() {
                            p.switch_mut().advance(0);
                        }
                        self.flush();
                        self.transmit();
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => None,
                },
            };
            let Some(event) = event else { return };
            if !self.handle(event) {
                return;
            }
            self.transmit();
            // What else is already queued, without waiting.
            for _ in 1..BURST {
                match events.try_recv() {
                    Ok(event) => {
                        if !self.handle(event) {
                            return;
                        }
                        self.transmit();
                    }
                    Err(mpsc::TryRecvError::Disconnected) => return,
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
        }
    }
}

/// Events the engine's channel holds before a port has to drop frames (as a NIC whose receive
/// ring is full): a few milliseconds of traffic, bounded memory under overload.
pub const EVENT_QUEUE: usize = 8192;

/// A cheap, clonable way to reach the engine thread.
pub struct EngineHandle<C: Controller> {
    events: mpsc::SyncSender<Event<C>>,
}

impl<C: Controller> Clone for EngineHandle<C> {
    fn clone(&self) -> Self {
        EngineHandle {
            events: self.events.clone(),
        }
    }
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

impl<C: Controller> EngineHandle<C> {
    /// Starts the engine thread with its ports and controller, and no pipeline.
    pub fn start(
        ports: BTreeMap<u16, Box<dyn Transmit>>,
        cpu_port: Option<u16>,
        controller: Arc<C>,
    ) -> (EngineHandle<C>, std::thread::JoinHandle<()>) {
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
                    state_budget: softswitch_core::budget::DEFAULT_STATE_BUDGET,
                    execution: Execution::default(),
                    started: Instant::now(),
                    outputs: Vec::new(),
                    spare: Vec::new(),
                    blocked: false,
                }
                .run(rx)
            })
            .expect("the engine thread starts");
        (EngineHandle { events: tx }, thread)
    }

    /// Hands an event to the engine, waiting while its queue is full.
    pub fn send(&self, event: Event<C>) -> Result<(), Stopped> {
        self.events.send(event).map_err(|_| Stopped)
    }

    /// Hands frames received on `port` to the engine unless its queue is full; refused, the
    /// frames are dropped and the batch goes back to its port.
    pub fn offer(&self, port: u16, batch: FrameBatch) -> Result<(), Refused> {
        let (refused, event) = match self.events.try_send(Event::Frames { port, batch }) {
            Ok(()) => return Ok(()),
            Err(mpsc::TrySendError::Full(event)) => (Refused::Full, event),
            Err(mpsc::TrySendError::Disconnected(event)) => (Refused::Stopped, event),
        };
        if let Event::Frames { batch, .. } = event {
            batch.recycle();
        }
        Err(refused)
    }

    /// Runs `f` on the engine thread from a thread that is not async, and waits for it.
    pub fn call_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine<C>) -> R + Send + 'static,
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
