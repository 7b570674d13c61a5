//! The v1model switch: parser → verify checksum → ingress → traffic manager (unicast, the
//! packet replication engine's multicast groups, I2E/E2E clone sessions, resubmit, drop on port
//! 511) → egress → compute checksum → deparser, with recirculation. The control-plane
//! operations on tables, registers, counters, meters, sessions, groups and queues are the
//! switch's runtime interface, in [`runtime`].

use crate::budget::Budget;
use crate::compiled::{self, CompiledProgram, Fallback};
use crate::externs::Effects;
use crate::interp::Exec;
use crate::ir::{self, block, Program, Slot};
use crate::mirroring::MirroringSessions;
use crate::pre::ReplicationEngine;
use crate::spares::{Buffers, Shared, Slots};
use crate::state::State;
use crate::tm::{Dequeued, Refusal, TrafficManager};
use crate::trace::{Level, PacketId, PacketTrace, TraceSink, Tracer};

/// Sends a line about packet `$id` to the switch's trace, formatting it only when there is one
/// that takes lines at `$level`.
macro_rules! packet_line {
    ($switch:expr, $level:expr, $id:expr, $($fmt:tt)+) => {
        if let Some(t) = &mut $switch.tracer {
            if t.wants($level) {
                t.packet($level, $id, format_args!($($fmt)+));
            }
        }
    };
}
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

pub mod runtime;

/// The port that drops.
pub const DROP_PORT: u128 = 511;

/// Resubmissions, recirculations and E2E clones one received packet may cause before the
/// switch drops the loop (BMv2 has no limit and would loop for ever).
pub const MAX_PASSES: u32 = 1000;

/// Pipeline runs (ingress or egress) one received packet may cause, with every copy made of it:
/// clones, replicas, recirculations and resubmissions together. Past it the copies are dropped
/// and logged: a program that clones and recirculates every copy doubles them at each pass, and
/// [`MAX_PASSES`] alone would let one packet keep the switch busy for hours.
pub const MAX_PACKET_WORK: u32 = 1 << 16;

pub use crate::state::{DigestSent, MAX_LOG_LINES};

/// What a received packet and every copy made of it share.
#[derive(Debug, Default)]
struct Lineage {
    /// The pipeline runs they have taken so far.
    work: std::cell::Cell<u32>,
    /// The received packet's number (the trace's packet id).
    id: u64,
    /// The copies made so far (the last copy number given).
    copies: std::cell::Cell<u64>,
}

impl Lineage {
    /// The next copy's id.
    fn next_copy(&self) -> u64 {
        let copy = self.copies.get() + 1;
        self.copies.set(copy);
        copy
    }
}

/// A packet's lineage, shared by the packet and its copies.
type Work = Rc<Lineage>;

/// A packet's bytes, shared by the packet and its copies.
type Frame = Rc<Vec<u8>>;

/// How a packet instance came to be: `standard_metadata.instance_type`, with BMv2's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceType {
    /// A packet from a port.
    Normal = 0,
    /// An ingress-to-egress clone.
    IngressClone = 1,
    /// An egress-to-egress clone.
    EgressClone = 2,
    /// A recirculated packet.
    Recirc = 4,
    /// A multicast replica.
    Replication = 5,
    /// A resubmitted packet.
    Resubmit = 6,
}

impl InstanceType {
    /// The value the program reads in `standard_metadata.instance_type`.
    pub fn value(self) -> u128 {
        self as u128
    }
}

/// A packet the switch sent out of a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Egress port.
    pub port: u16,
    /// Bytes.
    pub data: Vec<u8>,
}

/// A packet a port's transmitter took ([`Switch::transmit`]): its bytes, and the bytes past
/// them that are counted but not stored ([`Switch::receive_sized`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmitted {
    /// The stored bytes: the headers as the deparser wrote them, and what followed them.
    pub data: Vec<u8>,
    /// Bytes after `data` that the packet has on the wire but nobody stored.
    pub unstored: u32,
    /// The queue (priority) it left from.
    pub priority: u8,
}

/// What a port's transmitter got from [`Switch::transmit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// A frame to send.
    Frame(Transmitted),
    /// Egress sent the packet round again (recirculation): nothing to send now, but the port's
    /// queues may hold more once the pass is done.
    Recirculated,
    /// No eligible queue of the port holds a packet.
    Idle,
}

/// How a packet's egress ended.
enum EgressEnd {
    /// It leaves: its stored bytes and the unstored bytes after them.
    Leaves(Vec<u8>, u32),
    /// It went back to ingress.
    Recirculated,
    /// Dropped (by the program or a limit).
    Dropped,
}

/// How queued packets leave the traffic manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving {
    /// As soon as their queue's rate allows, whatever the port: BMv2's way, and the default.
    Continuous,
    /// One at a time when the port's transmitter asks ([`Switch::transmit`]), as a switch
    /// whose ports send at their link's rate: queues build where the program sees them.
    OnTransmit,
}

/// How the switch runs the program's blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Execution {
    /// The interpreter walks the IR: the reference, and the default.
    #[default]
    Interpreted,
    /// Each block runs compiled into closures ([`crate::compiled`]) where it compiles,
    /// interpreted where it does not ([`Switch::compile_fallbacks`]).
    Compiled,
}

/// Packets the switch dropped, by why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// Dropped by the program (egress port 511 at the end of ingress or egress).
    pub program: u64,
    /// Refused by a queue that held its depth.
    pub queue_full: u64,
    /// Refused by a full shared buffer.
    pub buffer_full: u64,
    /// Dropped for looping or copying past the switch's limits ([`MAX_PASSES`],
    /// [`MAX_PACKET_WORK`]), or cloned to a session that does not exist.
    pub loops: u64,
}

impl Drops {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.program + self.queue_full + self.buffer_full + self.loops
    }
}

/// Where time comes from.
#[derive(Clone, Copy, Debug)]
pub enum Clock {
    /// A virtual clock at the given microsecond, advanced only by [`Switch::advance`].
    Virtual(u64),
    /// The wall clock since the switch started.
    Wall(Instant),
}

#[derive(Clone, Debug)]
struct IngressPacket {
    port: u16,
    data: Frame,
    /// Bytes of the packet past `data`, counted but not stored.
    unstored: u32,
    instance_type: InstanceType,
    preserved: Vec<(Slot, u128)>,
    /// Resubmissions, recirculations and E2E clones behind this packet.
    passes: u32,
    work: Work,
    /// Its copy number in its lineage.
    copy: u64,
}

impl IngressPacket {
    fn id(&self) -> PacketId {
        PacketId {
            id: self.work.id,
            copy: self.copy,
        }
    }
}

/// A packet between ingress and egress: its slots and its bytes (the payload starts at `payload`).
#[derive(Clone, Debug)]
pub(crate) struct Queued {
    slots: Vec<u128>,
    data: Frame,
    /// Bytes of the packet past `data`, counted but not stored.
    unstored: u32,
    payload: usize,
    passes: u32,
    work: Work,
    /// Its copy number in its lineage.
    copy: u64,
}

/// A running v1model switch. Its fields are its own: the data path is [`Switch::receive`],
/// [`Switch::advance`] and [`Switch::drain_outputs`]; every control operation goes through its
/// runtime interface ([`runtime`]).
pub struct Switch {
    /// The program, shared by every switch that runs it (a simulated fabric has hundreds).
    program: Arc<Program>,
    /// The program's compiled blocks, when it runs compiled ([`Execution::Compiled`]).
    compiled: Option<Arc<CompiledProgram>>,
    /// Tables, registers, counters, meters.
    state: State,
    /// The traffic manager.
    tm: TrafficManager<Queued>,
    clock: Clock,
    mirroring: MirroringSessions,
    pre: ReplicationEngine,
    pending: VecDeque<IngressPacket>,
    /// What the packet path reuses rather than allocating ([`crate::spares`]): slots, the
    /// shared bytes and lineages of packets, the buffers frames arrive in (the deparser's
    /// next outputs).
    spare_slots: Slots,
    /// The slots each packet starts with zeroed ([`Program::packet_state`]).
    packet_state: Vec<std::ops::Range<usize>>,
    spare_frames: Shared<Vec<u8>>,
    spare_lineages: Shared<Lineage>,
    spare_buffers: Buffers<u8>,
    outputs: Vec<Output>,
    /// Packets dropped, by why.
    drops: Drops,
    /// How queued packets leave.
    serving: Serving,
    /// The priority clones are queued at, if not their own (0 after BMv2's metadata reset).
    clone_priority: Option<u8>,
    /// Where the trace goes, if anywhere.
    tracer: Option<Tracer>,
    /// The id the next packet received takes.
    next_packet: u64,
    /// What the control plane's writes take, and may take.
    budget: Budget,
}

impl Switch {
    /// A switch running `program` on `clock`.
    pub fn new(program: impl Into<Arc<Program>>, clock: Clock) -> Self {
        let program = program.into();
        let state = State::new(&program);
        let packet_state = program.packet_state();
        Switch {
            program,
            compiled: None,
            state,
            tm: TrafficManager::default(),
            clock,
            mirroring: MirroringSessions::default(),
            pre: ReplicationEngine::default(),
            pending: VecDeque::new(),
            spare_slots: Slots::default(),
            packet_state,
            spare_frames: Shared::default(),
            spare_lineages: Shared::default(),
            spare_buffers: Buffers::default(),
            outputs: Vec::new(),
            drops: Drops::default(),
            serving: Serving::Continuous,
            clone_priority: None,
            tracer: None,
            next_packet: 0,
            budget: Budget::default(),
        }
        .charging_const_entries()
    }

    /// Charges the entries the program installs itself (its `const entries`) to the budget, so
    /// that what is in use counts every entry.
    fn charging_const_entries(mut self) -> Self {
        let used: usize = self
            .state
            .tables
            .iter()
            .flat_map(|t| t.installed())
            .map(|(_, i)| i.footprint())
            .sum();
        self.budget.adjust(0, used);
        self
    }

    /// Sends the trace (BMv2's `--log-console` lines, [`crate::trace`]) to `sink`, lines up to
    /// `level`; `None` stops it. Without a sink, or with a level below [`Level::Debug`], the
    /// interpreter formats nothing per packet.
    pub fn set_trace(&mut self, sink: Option<(Box<dyn TraceSink>, Level)>) {
        self.tracer = sink.map(|(sink, level)| Tracer { sink, level });
    }

    /// Chooses how the program runs. [`Execution::Compiled`] compiles it (once: a switch that
    /// runs compiled already keeps its compiled form); the blocks that run interpreted
    /// instead, with why, are [`Switch::compile_fallbacks`] (the device's engine logs them).
    pub fn set_execution(&mut self, execution: Execution) {
        self.set_execution_within(execution, compiled::MAX_BLOCK_NODES);
    }

    /// [`Switch::set_execution`], compiling only the blocks of at most `max_block_nodes` IR
    /// nodes (a test's way to run a program partly compiled); a switch compiled within
    /// another limit compiles again.
    pub fn set_execution_within(&mut self, execution: Execution, max_block_nodes: usize) {
        match execution {
            Execution::Interpreted => self.compiled = None,
            Execution::Compiled
                if self
                    .compiled
                    .as_ref()
                    .is_some_and(|c| c.max_block_nodes() == max_block_nodes) => {}
            Execution::Compiled => {
                self.compiled = Some(Arc::new(compiled::compile(&self.program, max_block_nodes)));
            }
        }
    }

    /// Runs the program as `other` does. When both run the same program (the same `Arc`: a
    /// simulated fabric's switches), a compiled `other` shares its compiled form rather than
    /// compiling it again; otherwise this is [`Switch::set_execution`] with `other`'s.
    pub fn set_execution_as(&mut self, other: &Switch) {
        if Arc::ptr_eq(&self.program, &other.program) {
            self.compiled.clone_from(&other.compiled);
        } else {
            self.set_execution(other.execution());
        }
    }

    /// How the program runs.
    pub fn execution(&self) -> Execution {
        match self.compiled {
            Some(_) => Execution::Compiled,
            None => Execution::Interpreted,
        }
    }

    /// The blocks that run interpreted although the switch runs the program compiled, with
    /// why (none when it runs interpreted).
    pub fn compile_fallbacks(&self) -> &[Fallback] {
        self.compiled.as_deref().map_or(&[], |c| c.fallbacks())
    }

    /// Sends a line about the switch to the trace, if it takes lines at `level`.
    pub(crate) fn trace_switch(&mut self, level: Level, line: std::fmt::Arguments<'_>) {
        if let Some(t) = &mut self.tracer {
            if t.wants(level) {
                t.sink.switch(level, line);
            }
        }
    }

    /// Whether the trace takes lines at `level` (so that they are worth formatting).
    pub(crate) fn traces(&self, level: Level) -> bool {
        self.tracer.as_ref().is_some_and(|t| t.wants(level))
    }

    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The current time in microseconds.
    pub fn now_us(&self) -> u64 {
        match self.clock {
            Clock::Virtual(t) => t,
            Clock::Wall(start) => start.elapsed().as_micros() as u64,
        }
    }

    /// Receives a packet on `port`: runs ingress (and any resubmissions) and serves the queues.
    pub fn receive(&mut self, port: u16, data: Vec<u8>) {
        self.receive_sized(port, data, 0);
    }

    /// Receives a packet on `port` whose `unstored` bytes after `data` are counted but not
    /// stored (a simulator's payloads: the program sees them in `packet_length` and as
    /// `truncate` cuts them, never as bytes; a parser that reads past `data` finds the packet
    /// too short). Only [`Switch::transmit`] gives them back: continuous serving sends the
    /// stored bytes alone.
    pub fn receive_sized(&mut self, port: u16, data: Vec<u8>, unstored: u32) {
        let id = self.next_packet;
        self.next_packet += 1;
        let (data, buffer) = self.spare_frames.wrap(data);
        // The buffer a packet before this one arrived in: the deparser's next output.
        self.spare_buffers.keep(buffer);
        let (work, _) = self.spare_lineages.wrap(Lineage {
            id,
            ..Lineage::default()
        });
        self.pending.push_back(IngressPacket {
            port,
            data,
            unstored,
            instance_type: InstanceType::Normal,
            preserved: Vec::new(),
            passes: 0,
            work,
            copy: 0,
        });
        self.serve();
    }

    /// Advances the virtual clock by `us` microseconds, serving the queues on the way.
    pub fn advance(&mut self, us: u64) {
        let Clock::Virtual(now) = self.clock else {
            self.serve();
            return;
        };
        let end = now.saturating_add(us);
        while let Some(t) = self.tm.next_ready().filter(|&t| t <= end) {
            self.clock = Clock::Virtual(t.max(now));
            self.serve();
        }
        self.clock = Clock::Virtual(end);
        self.serve();
    }

    /// Sets how queued packets leave the traffic manager (before the first packet).
    pub fn set_serving(&mut self, serving: Serving) {
        self.serving = serving;
    }

    /// Queues clones (ingress and egress) at `priority` instead of the priority their reset
    /// metadata gives (0, as BMv2): a simulator sends the frames a switch makes itself (PAUSE,
    /// CNP) ahead of data, as a switch's MAC sends control frames. `None`: BMv2's way.
    pub fn set_clone_priority(&mut self, priority: Option<u8>) {
        self.clone_priority = priority;
    }

    /// Bounds the traffic manager's shared buffer to `bytes` (`None`: packets only,
    /// [`crate::tm::BUFFER_PACKETS`]).
    pub fn set_buffer_bytes(&mut self, bytes: Option<u64>) {
        self.tm.set_buffer_bytes(bytes);
    }

    /// Moves the virtual clock to `us` (never back), without serving the queues: with
    /// [`Serving::OnTransmit`] the transmitters do.
    pub fn set_time_us(&mut self, us: u64) {
        if let Clock::Virtual(now) = self.clock {
            self.clock = Clock::Virtual(now.max(us));
        }
    }

    /// With [`Serving::OnTransmit`]: takes the next packet of `port` from its highest-priority
    /// queue among `eligible` (bit `p` for priority `p`: a paused priority is not eligible) and
    /// runs egress on it: what leaves is the port's frame; a packet egress drops is passed over
    /// for the next one; one it recirculates goes through ingress (and back to a queue) and
    /// ends the call, as a pass through the pipeline takes the time of one.
    pub fn transmit(&mut self, port: u16, eligible: u8) -> Transmit {
        loop {
            let now = self.now_us();
            let Some(d) = self.tm.dequeue_port(port, eligible, now) else {
                return Transmit::Idle;
            };
            let priority = d.priority;
            let end = self.egress(d, now);
            self.serve();
            match end {
                EgressEnd::Leaves(data, unstored) => {
                    return Transmit::Frame(Transmitted {
                        data,
                        unstored,
                        priority,
                    })
                }
                EgressEnd::Recirculated => return Transmit::Recirculated,
                EgressEnd::Dropped => {}
            }
        }
    }

    /// Moves into `into` the ports whose queues went from empty to holding a packet since the
    /// last call: with [`Serving::OnTransmit`], the transmitters to wake.
    pub fn take_backlogged(&mut self, into: &mut Vec<u16>) {
        self.tm.take_backlogged(into);
    }

    /// The bytes in `port`'s queue `priority`.
    pub fn queue_bytes(&self, port: u16, priority: u8) -> u64 {
        self.tm.occupancy_bytes(port, priority)
    }

    /// The bytes in every queue together: the shared buffer's occupancy.
    pub fn buffered_bytes(&self) -> u64 {
        self.tm.buffered_bytes()
    }

    /// Packets dropped so far, by why.
    pub fn drop_counts(&self) -> Drops {
        self.drops
    }

    /// Sets how many more frames `port` may be given before its owner says again (`None`: any
    /// number, the default), and serves the queues. A device whose port cannot take frames as
    /// fast as they come says so here, as BMv2's egress blocks on a send: the port's packets
    /// wait in its queues, where `enq_qdepth` and `deq_qdepth` count them.
    pub fn set_port_budget(&mut self, port: u16, frames: Option<u32>) {
        self.tm.set_budget(port, frames);
        self.serve();
    }

    /// Advances the virtual clock until every queue is empty.
    pub fn drain(&mut self) {
        self.serve();
        while let Some(t) = self.tm.next_ready() {
            let now = self.now_us();
            self.advance(t.saturating_sub(now));
        }
    }

    /// Takes the packets sent so far, in the order they left (the buffer is kept for reuse).
    pub fn drain_outputs(&mut self) -> std::vec::Drain<'_, Output> {
        self.outputs.drain(..)
    }

    /// The time (µs) at which a rate-limited queue may next release a packet, if one waits.
    pub fn next_ready_us(&self) -> Option<u64> {
        self.tm.next_ready()
    }

    /// The digests the program sent so far, in order.
    pub fn digests(&self) -> &[DigestSent] {
        &self.state.digests
    }

    /// Takes the digests the program sent so far, in order.
    pub fn take_digests(&mut self) -> Vec<DigestSent> {
        std::mem::take(&mut self.state.digests)
    }

    /// The `log_msg` output and the switch's own notes so far, at most [`MAX_LOG_LINES`], and
    /// the number of lines past them that were not kept.
    pub fn log(&self) -> (&[String], u64) {
        (&self.state.log, self.state.log_dropped)
    }

    /// Forgets the log lines kept so far (a running switch does after every packet).
    pub fn clear_log(&mut self) {
        self.state.log.clear();
    }

    /// Runs pending ingress packets and egress for every packet ready now (the clock is read
    /// only while a packet is queued: a packet that skipped the queues has left already).
    fn serve(&mut self) {
        loop {
            if let Some(p) = self.pending.pop_front() {
                self.ingress(p);
                continue;
            }
            if self.serving == Serving::OnTransmit || self.tm.is_empty() {
                break;
            }
            let now = self.now_us();
            match self.tm.dequeue(now) {
                Some(d) => {
                    let port = d.port;
                    if let EgressEnd::Leaves(data, _) = self.egress(d, now) {
                        self.outputs.push(Output { port, data });
                    }
                }
                None => break,
            }
        }
    }

    fn preserved(&self, slots: &[u128], list: Option<usize>) -> Vec<(Slot, u128)> {
        let Some(id) = list else { return Vec::new() };
        self.program.field_lists[id]
            .iter()
            .map(|&slot| (slot, slots[slot as usize]))
            .collect()
    }

    /// Zeroes all user and standard metadata of a copy but its `preserved` fields, and sets its
    /// instance type, as BMv2 does to a clone.
    fn reset_metadata(
        &self,
        slots: &mut [u128],
        preserved: &[(Slot, u128)],
        instance: InstanceType,
    ) {
        let sm = self.program.std_meta;
        let (meta, len) = self.program.user_meta;
        slots[meta as usize..(meta + len) as usize].fill(0);
        for s in sm.all() {
            slots[s as usize] = 0;
        }
        for &(s, v) in preserved {
            slots[s as usize] = v;
        }
        slots[sm.instance_type as usize] = instance.value();
    }

    /// Parser, verify checksum and ingress for one packet; returns its slots, payload offset and effects.
    fn run_ingress(
        &mut self,
        p: &IngressPacket,
        run_controls: bool,
    ) -> (Vec<u128>, usize, Effects) {
        let now = self.now_us();
        let sm = self.program.std_meta;
        let mut slots = self
            .spare_slots
            .take(self.program.slots as usize, &self.packet_state);
        // BMv2 sets the ingress port and timestamp when a packet arrives from a port; it resets
        // all metadata of a resubmitted or recirculated packet, which so starts with 0 in both.
        // An I2E clone is parsed again with the ingress port (behavioral-model#1175).
        let fresh = p.instance_type == InstanceType::Normal;
        if fresh || p.instance_type == InstanceType::IngressClone {
            slots[sm.ingress_port as usize] = u128::from(p.port);
        }
        if fresh {
            slots[sm.ingress_global_timestamp as usize] = u128::from(now) & ir::mask(48);
        }
        slots[sm.packet_length as usize] = p.data.len() as u128 + u128::from(p.unstored);
        slots[sm.instance_type as usize] = p.instance_type.value();
        for &(s, v) in &p.preserved {
            slots[s as usize] = v;
        }
        let mut effects = Effects::default();
        let mut exec = self.exec(&mut slots, &p.data, 0, &mut effects, now, p.id());
        if let Err(code) = exec.parse() {
            exec.slots[sm.parser_error as usize] = code;
        }
        if run_controls {
            exec.control(block::VERIFY);
            exec.control(block::INGRESS);
        }
        let cursor = exec.cursor;
        (slots, cursor.div_ceil(8), effects)
    }

    /// The interpreter of the program over one packet: its `slots`, its `data` parsed from bit
    /// `cursor` on, the `effects` it asks for, at `now` µs; traced as `packet`.
    fn exec<'a>(
        &'a mut self,
        slots: &'a mut [u128],
        data: &'a [u8],
        cursor: usize,
        effects: &'a mut Effects,
        now: u64,
        packet: PacketId,
    ) -> Exec<'a> {
        let trace = self
            .tracer
            .as_mut()
            .filter(|t| t.wants(Level::Debug))
            .map(|tracer| PacketTrace { tracer, packet });
        let mut exec = Exec::new(
            &self.program,
            &mut self.state,
            slots,
            data,
            cursor,
            effects,
            now,
        )
        .with_compiled(self.compiled.as_deref());
        exec.trace = trace;
        exec
    }

    fn ingress(&mut self, p: IngressPacket) {
        if !self.within_work_limit(&p.work) {
            return;
        }
        let sm = self.program.std_meta;
        let id = p.id();
        packet_line!(
            self,
            Level::Debug,
            id,
            "Processing packet received on port {}",
            p.port
        );
        let (slots, payload, effects) = self.run_ingress(&p, true);
        if let Some((false, session, list)) = effects.clone {
            packet_line!(self, Level::Debug, id, "Cloning packet at ingress");
            if let Some(port) = self.mirroring.port(session) {
                let preserved = self.preserved(&slots, list);
                let copy = IngressPacket {
                    instance_type: InstanceType::IngressClone,
                    preserved,
                    copy: p.work.next_copy(),
                    ..p.clone()
                };
                let (mut cslots, cpayload, _) = self.run_ingress(&copy, false);
                // After that parse BMv2 resets all metadata but the preserved fields.
                self.reset_metadata(&mut cslots, &copy.preserved, InstanceType::IngressClone);
                let clone = Queued {
                    slots: cslots,
                    data: p.data.clone(),
                    unstored: p.unstored,
                    payload: cpayload,
                    passes: p.passes,
                    work: p.work.clone(),
                    copy: copy.copy,
                };
                self.enqueue_clone(port, id, clone);
            }
        }
        if let Some(list) = effects.resubmit {
            packet_line!(self, Level::Debug, id, "Resubmitting packet");
            if self.within_pass_limit(p.passes) {
                let preserved = self.preserved(&slots, list);
                let copy = p.work.next_copy();
                self.pending.push_back(IngressPacket {
                    instance_type: InstanceType::Resubmit,
                    preserved,
                    passes: p.passes + 1,
                    copy,
                    ..p
                });
            }
            return;
        }
        let group = slots[sm.mcast_grp as usize] as u16;
        if group != 0 {
            packet_line!(self, Level::Debug, id, "Multicast requested for packet");
            self.replicate(group, &slots, payload, &p);
            self.recycle(slots);
            self.retire(p.data, p.work);
            return;
        }
        let spec = slots[sm.egress_spec as usize];
        packet_line!(self, Level::Debug, id, "Egress port is {spec}");
        if spec == DROP_PORT {
            packet_line!(
                self,
                Level::Debug,
                id,
                "Dropping packet at the end of ingress"
            );
            self.drops.program += 1;
            self.recycle(slots);
            self.retire(p.data, p.work);
            return;
        }
        let port = spec as u16;
        let mut slots = slots;
        slots[sm.egress_port as usize] = spec;
        let queued = Queued {
            slots,
            data: p.data,
            unstored: p.unstored,
            payload,
            passes: p.passes,
            work: p.work,
            copy: p.copy,
        };
        let priority = queued.slots[sm.priority as usize] as u8;
        let now = self.now_us();
        if self.serving == Serving::Continuous
            && self.pending.is_empty()
            && self.tm.pass_through(port, priority, now)
        {
            // It would be dequeued at once, with empty queues behind it: skip the queue. Queued
            // and dequeued at the same instant, its egress starts then too.
            let d = Dequeued {
                item: queued,
                port,
                enq_us: now,
                enq_qdepth: 0,
                deq_qdepth: 0,
                deq_timedelta: 0,
                priority,
            };
            if let EgressEnd::Leaves(data, _) = self.egress(d, now) {
                self.outputs.push(Output { port, data });
            }
        } else {
            self.enqueue(port, queued, None, now);
        }
    }

    /// Queues a replica of packet `p` (after ingress: its `slots`, its payload at `payload`)
    /// for each port of multicast group `group`.
    fn replicate(&mut self, group: u16, slots: &[u128], payload: usize, p: &IngressPacket) {
        let sm = self.program.std_meta;
        for (port, rid) in self.pre.replicas(group) {
            packet_line!(
                self,
                Level::Debug,
                p.id(),
                "Replicating packet on port {port}"
            );
            let mut copy = slots.to_vec();
            copy[sm.egress_rid as usize] = u128::from(rid);
            copy[sm.instance_type as usize] = InstanceType::Replication.value();
            let replica = Queued {
                slots: copy,
                data: p.data.clone(),
                unstored: p.unstored,
                payload,
                passes: p.passes,
                work: p.work.clone(),
                copy: p.work.next_copy(),
            };
            self.enqueue_copy(port, replica, None);
        }
    }

    /// Whether a packet whose lineage has taken `work` pipeline runs may take one more (and
    /// counts it); counts a drop if not, and logs the lineage's first.
    fn within_work_limit(&mut self, work: &Work) -> bool {
        let done = work.work.get();
        work.work.set(done.saturating_add(1));
        if done < MAX_PACKET_WORK {
            return true;
        }
        self.drops.loops += 1;
        if done == MAX_PACKET_WORK {
            self.state.log(format!(
                "dropped the copies of a packet past {MAX_PACKET_WORK} pipeline runs (clones, replicas, recirculations)"
            ));
        }
        false
    }

    /// Whether a packet behind `passes` loops may loop once more; counts and logs a drop if not.
    fn within_pass_limit(&mut self, passes: u32) -> bool {
        if passes < MAX_PASSES {
            return true;
        }
        self.drops.loops += 1;
        self.state.log(format!(
            "dropped a packet looping {MAX_PASSES} times (resubmit, recirculate or E2E clone)"
        ));
        false
    }

    /// Queues `clone`, a clone of packet `id`, for `port`, as [`Switch::enqueue_copy`], at the
    /// clone priority if one is set ([`Switch::set_clone_priority`]).
    fn enqueue_clone(&mut self, port: u16, id: PacketId, clone: Queued) {
        packet_line!(
            self,
            Level::Debug,
            id,
            "Cloning packet to egress port {port}"
        );
        self.enqueue_copy(port, clone, self.clone_priority);
    }

    /// Queues a copy of a packet for `port` (its `egress_port` is set to `port`), at `priority`
    /// if given, else its own.
    fn enqueue_copy(&mut self, port: u16, mut copy: Queued, priority: Option<u8>) {
        copy.slots[self.program.std_meta.egress_port as usize] = u128::from(port);
        let now = self.now_us();
        self.enqueue(port, copy, priority, now);
    }

    /// Queues `q` for `port` at `now` µs, at `priority` if given, else at its
    /// `standard_metadata.priority`.
    fn enqueue(&mut self, port: u16, q: Queued, priority: Option<u8>, now: u64) {
        let priority = priority.unwrap_or(q.slots[self.program.std_meta.priority as usize] as u8);
        let bytes = u32::try_from(q.data.len())
            .unwrap_or(u32::MAX)
            .saturating_add(q.unstored);
        match self.tm.enqueue(port, priority, q, bytes, now) {
            Ok(()) => {}
            Err((_, Refusal::QueueFull)) => self.drops.queue_full += 1,
            Err((_, Refusal::BufferFull)) => self.drops.buffer_full += 1,
        }
    }

    /// Egress, compute checksum and deparser for a packet dequeued at `now` µs (its
    /// `egress_global_timestamp`: the clock is not read again).
    fn egress(&mut self, d: Dequeued<Queued>, now: u64) -> EgressEnd {
        let sm = self.program.std_meta;
        let Queued {
            mut slots,
            data,
            unstored,
            payload,
            passes,
            work,
            copy,
        } = d.item;
        if !self.within_work_limit(&work) {
            return EgressEnd::Dropped;
        }
        let id = PacketId { id: work.id, copy };
        slots[sm.egress_port as usize] = u128::from(d.port);
        slots[sm.enq_timestamp as usize] = u128::from(d.enq_us) & ir::mask(32);
        slots[sm.enq_qdepth as usize] = u128::from(d.enq_qdepth) & ir::mask(19);
        slots[sm.deq_timedelta as usize] = u128::from(d.deq_timedelta) & ir::mask(32);
        slots[sm.deq_qdepth as usize] = u128::from(d.deq_qdepth) & ir::mask(19);
        slots[sm.egress_global_timestamp as usize] = u128::from(now) & ir::mask(48);
        let mut effects = Effects::default();
        let mut exec = self.exec(&mut slots, &data, payload * 8, &mut effects, now, id);
        exec.control(block::EGRESS);
        drop(exec);
        if let Some((true, session, list)) = effects.clone {
            packet_line!(self, Level::Debug, id, "Cloning packet at egress");
            let port = self
                .mirroring
                .port(session)
                .filter(|_| self.within_pass_limit(passes));
            if let Some(port) = port {
                // BMv2 copies the headers and resets all metadata (user and standard).
                let mut clone = slots.clone();
                let preserved = self.preserved(&slots, list);
                self.reset_metadata(&mut clone, &preserved, InstanceType::EgressClone);
                let clone = Queued {
                    slots: clone,
                    data: data.clone(),
                    unstored,
                    payload,
                    passes: passes + 1,
                    work: work.clone(),
                    copy: work.next_copy(),
                };
                self.enqueue_clone(port, id, clone);
            }
        }
        if slots[sm.egress_spec as usize] == DROP_PORT {
            packet_line!(
                self,
                Level::Debug,
                id,
                "Dropping packet at the end of egress"
            );
            self.drops.program += 1;
            self.recycle(slots);
            self.retire(data, work);
            return EgressEnd::Dropped;
        }
        let buffer = self.spare_buffers.take();
        let mut exec = self.exec(&mut slots, &data, payload * 8, &mut effects, now, id);
        exec.control(block::COMPUTE);
        let mut out = exec.deparse(buffer);
        drop(exec);
        out.extend(&data[payload.min(data.len())..]);
        let mut bytes = out.into_bytes();
        let mut unstored = unstored;
        if let Some(n) = effects.truncate {
            // Cut to n bytes on the wire: the unstored bytes first go past the cut.
            let n = n as usize;
            unstored = u32::try_from(n.saturating_sub(bytes.len()))
                .unwrap_or(u32::MAX)
                .min(unstored);
            bytes.truncate(n);
        }
        if let Some(list) = effects.recirculate {
            packet_line!(self, Level::Debug, id, "Recirculating packet");
            if self.within_pass_limit(passes) {
                let preserved = self.preserved(&slots, list);
                let copy = work.next_copy();
                let port = slots[sm.ingress_port as usize] as u16;
                self.recycle(slots);
                self.spare_frames.keep(data);
                let (bytes, buffer) = self.spare_frames.wrap(bytes);
                self.spare_buffers.keep(buffer);
                self.pending.push_back(IngressPacket {
                    // Not seen by the program: BMv2 resets a recirculated packet's metadata.
                    port,
                    data: bytes,
                    unstored,
                    instance_type: InstanceType::Recirc,
                    preserved,
                    passes: passes + 1,
                    work,
                    copy,
                });
                return EgressEnd::Recirculated;
            }
            return EgressEnd::Dropped;
        }
        packet_line!(
            self,
            Level::Debug,
            id,
            "Transmitting packet of size {} out of port {}",
            bytes.len() + unstored as usize,
            d.port
        );
        self.recycle(slots);
        self.retire(data, work);
        EgressEnd::Leaves(bytes, unstored)
    }

    /// Keeps a finished packet's slots for the next packet (saves an allocation per packet).
    fn recycle(&mut self, slots: Vec<u128>) {
        self.spare_slots.keep(slots);
    }

    /// Keeps the bytes and lineage of a packet that has left (or been dropped) for the next
    /// packets, unless a copy of it still holds them.
    fn retire(&mut self, data: Frame, work: Work) {
        self.spare_frames.keep(data);
        self.spare_lineages.keep(work);
    }
}
