//! The engine: one thread that owns the running pipeline and the ports, both sides. It reads
//! the ports' receive rings itself ([`Receive`]) and runs a controller's requests (the gRPC
//! services hand it closures over a channel, and wake it with an eventfd) between two
//! batches of frames. So the packet path never waits on the controller, a request sees and
//! changes the pipeline between two packets, and no frame changes threads on its way through
//! the switch. The engine knows the controller only through [`Controller`]: what it keeps
//! beside the switch is its own [`Controller::Pipeline`].
//!
//! The engine takes up to a batch of frames ([`MAX_FRAMES`]) from each port's ring in turn,
//! each copied once, into a buffer the core sent out before (kept in `spare`); the core
//! deparses into the buffer an earlier frame arrived in and reuses the rest of a packet's
//! state, so the loop allocates nothing per packet once warm (the core's `alloc_per_packet`
//! test counts it), and the ports' transmit sides are flushed (one system call each) once per
//! batch, not per frame. When no ring holds a frame and no request waits, it sleeps in one
//! ppoll(2) on the rings' descriptors and the eventfd, until the switch's next timer.
//!
//! A port whose interface cannot take frames as fast as they come (a rate-limiting qdisc, as
//! Mininet's `bw` links have) pushes back: after each flush the engine gives the switch each
//! port's [`Transmit::room`] as its budget, so a port that takes nothing more leaves its
//! packets in the traffic manager's queues — where the program's `enq_qdepth` sees them, as in
//! BMv2, whose egress blocks on the send — and the engine tries it again
//! [`BLOCKED_PORT_RETRY`] later.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use softswitch_core::switch::{Clock, DigestSent, Execution, Output, Switch};

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

/// Most frames the engine takes from one port's ring before it turns to the next port (and
/// flushes what they produced).
pub const MAX_FRAMES: usize = 64;

/// The receive side of a port, read by the engine thread.
pub trait Receive: Send {
    /// The descriptor ppoll(2) watches for frames, and for the errors of the port's interface.
    fn fd(&self) -> RawFd;

    /// Hands each frame received so far, at most [`MAX_FRAMES`], to `each`, and returns how
    /// many it read (frames dropped on the way, as too long, included). Does not wait.
    fn receive(&mut self, each: &mut dyn FnMut(&[u8])) -> usize;

    /// Looks at the port after ppoll(2) reported an error in `revents` on its descriptor, and
    /// every [`LOOK_AT_PORTS`] whatever it reported: whether its interface is gone (it says
    /// why in the log). A link that only goes down is not gone.
    fn gone(&mut self, revents: i16) -> bool;
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
    /// A frame to run through the pipeline as received on a port (PacketOut injects this way).
    Frame {
        /// The port it came in on.
        port: u16,
        /// The frame.
        data: Vec<u8>,
    },
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
    /// The ports' receive sides, in port order.
    receivers: Vec<(u16, Box<dyn Receive>)>,
    /// What the engine sleeps on: the wake-up eventfd, then each receiver's descriptor.
    polled: Vec<libc::pollfd>,
    /// When every port was last asked whether its interface is gone.
    looked_at_ports: Instant,
    /// Rounds of the loop in which frames came or events were left, since the clock was
    /// last read for [`LOOK_AT_PORTS`].
    busy_rounds: u32,
    /// Times the engine went to sleep (tests read it).
    #[cfg(test)]
    sleeps: usize,
    /// What wakes the engine when an event is sent.
    wake: Arc<Wake>,
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

    /// Starts reading port `port`'s frames from `rx` (its transmit side was given at
    /// [`EngineHandle::start`]).
    pub fn attach(&mut self, port: u16, rx: Box<dyn Receive>) {
        self.receivers.retain(|(p, _)| *p != port);
        self.receivers.push((port, rx));
        self.receivers.sort_by_key(|(p, _)| *p);
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

    /// Takes up to [`MAX_FRAMES`] frames from each port's ring in turn, runs them through the
    /// pipeline and sends what they produced (one flush per port's batch); returns how many
    /// frames there were.
    fn read_ports(&mut self) -> usize {
        let mut receivers = std::mem::take(&mut self.receivers);
        let mut read = 0;
        for (port, rx) in &mut receivers {
            let n = rx.receive(&mut |frame| {
                let mut data = self
                    .spare
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(BUFFER_BYTES));
                data.clear();
                data.extend_from_slice(frame);
                self.ingress(*port, data);
            });
            if n > 0 {
                read += n;
                self.flush();
                self.transmit();
            }
        }
        self.receivers = receivers;
        read
    }

    /// Takes port `port` down: frames for it are lost from now on, as to a missing port.
    fn port_down(&mut self, port: u16) {
        self.ports.remove(&port);
        self.receivers.retain(|(p, _)| *p != port);
        if let Some(p) = self.pipeline.as_mut() {
            p.switch_mut().set_port_budget(port, None);
        }
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
            Event::Call(f) => {
                f(self);
                self.flush();
            }
            Event::Stop => return false,
        }
        true
    }

    /// Runs the events already queued, up to [`BURST`] of them.
    fn run_events(&mut self, events: &mpsc::Receiver<Event<C>>) -> Events {
        for _ in 0..BURST {
            match events.try_recv() {
                Ok(event) => {
                    if !self.handle(event) {
                        return Events::Stop;
                    }
                    self.transmit();
                }
                Err(mpsc::TryRecvError::Empty) => return Events::Drained,
                Err(mpsc::TryRecvError::Disconnected) => return Events::Stop,
            }
        }
        Events::More
    }

    /// Sleeps until a port's ring has a frame, an event is sent, a port reports an error, or
    /// the switch's next timer (then runs it); at most [`LOOK_AT_PORTS`].
    fn sleep(&mut self) {
        #[cfg(test)]
        {
            self.sleeps += 1;
        }
        let wait = self.next_wakeup();
        let timeout = wait.unwrap_or(LOOK_AT_PORTS).min(LOOK_AT_PORTS);
        let ready = self.poll(timeout);
        if ready > 0 && self.polled[0].revents != 0 {
            self.wake.clear();
        }
        self.take_down_ports_gone(false);
        if ready == 0 && wait.is_some_and(|w| w <= timeout) {
            if let Some(p) = self.pipeline.as_mut() {
                p.switch_mut().advance(0);
            }
            self.flush();
            self.transmit();
        }
    }

    /// ppoll(2) on the eventfd and every port's descriptor for up to `timeout`; leaves what
    /// each reported in `polled` (the eventfd first, then the ports in order) and returns how
    /// many reported something.
    fn poll(&mut self, timeout: Duration) -> libc::c_int {
        self.polled.clear();
        let ports = self.receivers.iter().map(|(_, rx)| rx.fd());
        for fd in std::iter::once(self.wake.fd.as_raw_fd()).chain(ports) {
            self.polled.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `polled` is a valid array of pollfds of the length given; no signal mask.
        unsafe {
            libc::ppoll(
                self.polled.as_mut_ptr(),
                self.polled.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        }
    }

    /// Takes down the ports whose descriptor reported an error at the last [`Engine::poll`]
    /// and, every [`LOOK_AT_PORTS`] (or when `now`), asks the others whether their interface
    /// is gone (an AF_XDP socket whose interface goes only stops receiving).
    fn take_down_ports_gone(&mut self, now: bool) {
        let look_at_all = now || self.looked_at_ports.elapsed() >= LOOK_AT_PORTS;
        if look_at_all {
            self.looked_at_ports = Instant::now();
        }
        let trouble = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;
        let mut gone = Vec::new();
        for (i, (port, rx)) in self.receivers.iter_mut().enumerate() {
            let revents = self.polled.get(i + 1).map_or(0, |p| p.revents);
            if (revents & trouble != 0 || look_at_all) && rx.gone(revents) {
                gone.push(*port);
            }
        }
        for port in gone {
            self.port_down(port);
        }
    }

    fn run(mut self, events: mpsc::Receiver<Event<C>>) {
        loop {
            let events_left = match self.run_events(&events) {
                Events::Stop => return,
                Events::More => true,
                Events::Drained => false,
            };
            let received = self.read_ports();
            if received == 0 && !events_left {
                self.sleep();
                continue;
            }
            // Busy: the ports are looked at all the same, one that went quiet among them; the
            // clock is read for it once in BUSY_ROUNDS rounds, not for every batch.
            self.busy_rounds += 1;
            if self.busy_rounds >= BUSY_ROUNDS {
                self.busy_rounds = 0;
                if self.looked_at_ports.elapsed() >= LOOK_AT_PORTS {
                    self.poll(Duration::ZERO);
                    self.take_down_ports_gone(true);
                }
            }
        }
    }
}

/// What [`Engine::run_events`] left in the channel.
enum Events {
    /// Nothing: every event sent so far has run.
    Drained,
    /// Events beyond a burst, to run after the ports had their turn.
    More,
    /// Told to stop, or every handle is gone.
    Stop,
}

/// How often the engine asks every port whether its interface is gone (an AF_XDP socket whose
/// interface goes only stops receiving), busy or asleep.
const LOOK_AT_PORTS: Duration = Duration::from_millis(100);

/// Busy rounds of the engine's loop between two readings of the clock for [`LOOK_AT_PORTS`].
const BUSY_ROUNDS: u32 = 64;

/// The eventfd that wakes the engine when an event is sent: its count stays readable until
/// the engine, woken, resets it, so an event sent just before the engine goes to sleep still
/// wakes it.
struct Wake {
    fd: OwnedFd,
}

impl Wake {
    fn new() -> io::Result<Wake> {
        // SAFETY: plain eventfd(2); the fd is owned below.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Wake {
            // SAFETY: a fresh, valid fd.
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
        })
    }

    /// Wakes the engine (after an event was sent).
    fn wake(&self) {
        let one = 1u64;
        // SAFETY: writing 8 bytes from a u64 to an eventfd. It fails only when the count is
        // at its maximum, which keeps it readable as well.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Resets the count, once the engine is awake.
    fn clear(&self) {
        let mut count = 0u64;
        // SAFETY: reading 8 bytes into a u64 from a non-blocking eventfd.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }
}

/// Events the engine's channel holds before a sender waits: bounded memory when controllers
/// send faster than the engine runs their requests.
pub const EVENT_QUEUE: usize = 8192;

/// A cheap, clonable way to reach the engine thread.
pub struct EngineHandle<C: Controller> {
    events: mpsc::SyncSender<Event<C>>,
    wake: Arc<Wake>,
}

impl<C: Controller> Clone for EngineHandle<C> {
    fn clone(&self) -> Self {
        EngineHandle {
            events: self.events.clone(),
            wake: self.wake.clone(),
        }
    }
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
        let wake = Arc::new(Wake::new().expect("an eventfd for the engine"));
        let engine_wake = wake.clone();
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
                    receivers: Vec::new(),
                    polled: Vec::new(),
                    looked_at_ports: Instant::now(),
                    busy_rounds: 0,
                    #[cfg(test)]
                    sleeps: 0,
                    wake: engine_wake,
                }
                .run(rx)
            })
            .expect("the engine thread starts");
        (EngineHandle { events: tx, wake }, thread)
    }

    /// Hands an event to the engine, waiting while its queue is full.
    pub fn send(&self, event: Event<C>) -> Result<(), Stopped> {
        self.events.send(event).map_err(|_| Stopped)?;
        self.wake.wake();
        Ok(())
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
        let _ = self.send(Event::Stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::{AtomicBool, Ordering};

    /// A pipeline type for an engine that never loads one: frames count as `no_pipeline`.
    struct Unloaded(Switch);

    impl Pipeline for Unloaded {
        fn switch(&self) -> &Switch {
            &self.0
        }
        fn switch_mut(&mut self) -> &mut Switch {
            &mut self.0
        }
        fn next_deadline(&self) -> Option<Instant> {
            None
        }
    }

    struct NoController;

    impl Controller for NoController {
        type Pipeline = Unloaded;
        fn packet_in(&self, _: &Unloaded, _: Vec<u8>) {}
        fn notify(&self, _: &mut Unloaded, _: Vec<DigestSent>) {}
    }

    /// A port's receive side on one end of a pipe: `flood` hands over a frame at every call
    /// (its descriptor, an eventfd, always readable); otherwise it receives nothing. Its
    /// interface is gone once `gone` is set or its pipe's other end is closed (POLLHUP); it
    /// says on `told` when the engine finds that out.
    struct FakePort {
        fd: OwnedFd,
        flood: bool,
        gone: Arc<AtomicBool>,
        told: mpsc::Sender<u16>,
        port: u16,
    }

    impl Receive for FakePort {
        fn fd(&self) -> RawFd {
            self.fd.as_raw_fd()
        }

        fn receive(&mut self, each: &mut dyn FnMut(&[u8])) -> usize {
            if self.flood {
                each(&[0; 60]);
                1
            } else {
                0
            }
        }

        fn gone(&mut self, revents: i16) -> bool {
            let gone = self.gone.load(Ordering::Relaxed) || revents & libc::POLLHUP != 0;
            if gone {
                let _ = self.told.send(self.port);
            }
            gone
        }
    }

    /// The two ends of a pipe.
    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) into an array of two fds, owned at once.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both are fresh, valid fds.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    struct NoTx;

    impl Transmit for NoTx {
        fn send(&mut self, _: &[u8]) -> io::Result<()> {
            Ok(())
        }
    }

    fn engine(ports: &[u16]) -> (EngineHandle<NoController>, std::thread::JoinHandle<()>) {
        let tx = ports
            .iter()
            .map(|&p| (p, Box::new(NoTx) as Box<dyn Transmit>))
            .collect();
        EngineHandle::start(tx, None, Arc::new(NoController))
    }

    fn attach(engine: &EngineHandle<NoController>, port: u16, rx: FakePort) {
        engine
            .call_blocking(move |e| e.attach(port, Box::new(rx)))
            .unwrap();
    }

    const DEADLINE: Duration = Duration::from_secs(10);

    #[test]
    fn a_port_whose_descriptor_hangs_up_is_taken_down_and_the_others_stay() {
        let (engine, thread) = engine(&[1, 2]);
        let (told, taken_down) = mpsc::channel();
        let (read1, write1) = pipe();
        let (read2, _write2) = pipe();
        for (port, fd) in [(1, read1), (2, read2)] {
            let gone = Arc::default();
            let told = told.clone();
            attach(
                &engine,
                port,
                FakePort {
                    fd,
                    flood: false,
                    gone,
                    told,
                    port,
                },
            );
        }
        // The periodic look, which would find the hang-up too, does not come during the test:
        // only the descriptor's POLLHUP can take the port down.
        let later = Instant::now() + Duration::from_secs(3600);
        let ports = engine
            .call_blocking(move |e| {
                e.looked_at_ports = later;
                e.ports()
            })
            .unwrap();
        assert_eq!(ports, [1, 2]);
        drop(write1);
        assert_eq!(taken_down.recv_timeout(DEADLINE), Ok(1));
        assert_eq!(engine.call_blocking(|e| e.ports()).unwrap(), [2]);
        engine.stop();
        thread.join().unwrap();
    }

    #[test]
    fn a_quiet_port_whose_interface_goes_is_taken_down_while_another_floods() {
        let (engine, thread) = engine(&[1, 2]);
        let (told, taken_down) = mpsc::channel();
        // SAFETY: plain eventfd(2), its count 1 so that it is always readable (never read).
        let raw = unsafe { libc::eventfd(1, libc::EFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: a fresh, valid fd, owned at once.
        let always = unsafe { OwnedFd::from_raw_fd(raw) };
        let flooding = FakePort {
            fd: always,
            flood: true,
            gone: Arc::default(),
            told: told.clone(),
            port: 1,
        };
        let (read, _write) = pipe();
        let quiet_gone = Arc::new(AtomicBool::new(false));
        let quiet = FakePort {
            fd: read,
            flood: false,
            gone: quiet_gone.clone(),
            told,
            port: 2,
        };
        attach(&engine, 1, flooding);
        attach(&engine, 2, quiet);
        // The flood runs: frames arrive while no pipeline is loaded.
        let flooded = |at_least: u64| {
            let deadline = Instant::now() + DEADLINE;
            while engine.call_blocking(|e| e.counts.no_pipeline).unwrap() < at_least {
                assert!(
                    Instant::now() < deadline,
                    "the flood never reached the engine"
                );
                std::thread::yield_now();
            }
        };
        flooded(1000);
        quiet_gone.store(true, Ordering::Relaxed);
        assert_eq!(taken_down.recv_timeout(DEADLINE), Ok(2));
        assert_eq!(engine.call_blocking(|e| e.ports()).unwrap(), [1]);
        // The flood still reaches the engine.
        let before = engine.call_blocking(|e| e.counts.no_pipeline).unwrap();
        flooded(before + 1000);
        engine.stop();
        thread.join().unwrap();
    }

    #[test]
    fn events_past_a_burst_run_before_the_engine_sleeps() {
        let (engine, thread) = engine(&[]);
        // The engine waits inside the first call while the others queue up behind it.
        let (open, gate) = mpsc::channel::<()>();
        let (slept_tx, slept) = mpsc::channel();
        let first = slept_tx.clone();
        engine
            .send(Event::Call(Box::new(move |e| {
                let _ = first.send(e.sleeps);
                let _ = gate.recv();
            })))
            .unwrap();
        let before = slept.recv_timeout(DEADLINE).unwrap();
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..2 * BURST {
            let ran = ran.clone();
            engine
                .send(Event::Call(Box::new(move |_| {
                    ran.fetch_add(1, Ordering::Relaxed);
                })))
                .unwrap();
        }
        engine
            .send(Event::Call(Box::new(move |e| {
                let _ = slept_tx.send(e.sleeps);
            })))
            .unwrap();
        drop(open);
        let after = slept.recv_timeout(DEADLINE).unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 2 * BURST);
        assert_eq!(after, before, "the engine slept with events queued");
        engine.stop();
        thread.join().unwrap();
    }
}
