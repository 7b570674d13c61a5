//! The traffic manager: per egress port up to 8 FIFO queues, one per priority, each with a depth
//! limit in packets (default 64, tail drop) and an optional rate in packets per second (a
//! shaper: a queue waits for its next departure time before it may be served). Each port has a
//! [`Scheduling`]: the priorities in its strict set are served first, highest first; the others
//! share what the strict ones leave by deficit weighted round robin (Shreedhar and Varghese's
//! DRR, each queue's quantum its weight times the port's base quantum in bytes). By default
//! every priority is strict, BMv2's discipline: priority 7 first, 0 last. Depths are per queue: `enq_qdepth` is the number of packets
//! already in the packet's own (port, priority) queue when it arrives, `deq_qdepth` the number
//! left behind in it when it leaves; `deq_timedelta` is the time it spent queued, in
//! microseconds. That is BMv2's reading with one queue per port; BMv2 with `--priority-queues`
//! reports the sum over all the port's queues instead (docs/p4-programs.md).
//!
//! Two ways out: [`TrafficManager::dequeue`] releases whatever is ready on any port (a switch
//! that sends as fast as its queue rates allow), [`TrafficManager::dequeue_port`] one packet of
//! one port when that port's transmitter asks for it (a switch whose ports send at their links'
//! rate: the simulator's). Besides the per-queue depths, an optional shared buffer in bytes
//! bounds all queues together, as a switch's packet memory does.
//!
//! A port may also push back: its owner gives it a budget of frames it can take now
//! ([`TrafficManager::set_budget`]); at zero its packets wait in their queues, as in BMv2 when
//! its egress blocks on a send the interface cannot take yet, so queue depths show the real
//! bottleneck.
//!
//! Each queue also measures its traffic ([`measures`]): sojourn times, the occupancy arriving
//! packets find, microbursts by a [`BurstRule`] set like its depth.

pub mod measures;

use std::collections::{BTreeMap, VecDeque};

pub use measures::{BurstRule, QueueMeasures};

/// Priorities (queues) per port.
pub const PRIORITIES: usize = 8;
/// BMv2's default queue depth, in packets.
pub const DEFAULT_DEPTH: usize = 64;
/// The deepest a queue may be set, in packets: `enq_qdepth` and `deq_qdepth` are 19 bits.
pub const MAX_DEPTH: usize = (1 << 19) - 1;
/// Packets the traffic manager holds in all its queues together, as a switch's shared buffer:
/// past it an arriving packet is tail-dropped whatever its queue's depth. It bounds the
/// memory queues take (about 600 MB of 2016-byte frames at most) whatever depths are set.
pub const BUFFER_PACKETS: usize = 1 << 18;

/// The heaviest DWRR weight a queue may be given.
pub const MAX_WEIGHT: u32 = 100;
/// The smallest base quantum of a port, in bytes: a minimum Ethernet frame.
pub const MIN_QUANTUM: u32 = 64;
/// The largest base quantum of a port, in bytes (1 MiB).
pub const MAX_QUANTUM: u32 = 1 << 20;
/// The base quantum of a port not set otherwise, in bytes: one full frame of a 1500-byte MTU
/// with its Ethernet header, so that a weight-1 queue sends at least one full frame a round
/// (Linux's `sch_drr` defaults to the device's MTU plus its link header, 1514 on Ethernet).
pub const DEFAULT_QUANTUM: u32 = 1514;

/// A queue setting refused by [`depth`], [`rate`], [`priority`], [`weight`] or [`quantum`]: the
/// rules every front door (the Queues service, STF) applies.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueueSettingError {
    /// A depth out of 1..=MAX_DEPTH.
    #[error("a queue holds 1 to {MAX_DEPTH} packets (enq_qdepth is 19 bits), not {0}")]
    Depth(u128),
    /// A rate past u64.
    #[error("a queue rate is 0 (unlimited) to {max} packets per second, not {0}", max = u64::MAX)]
    Rate(u128),
    /// A priority out of 0..PRIORITIES.
    #[error("a priority is 0 to {max}, not {0}", max = PRIORITIES - 1)]
    Priority(u128),
    /// A DWRR weight out of 1..=MAX_WEIGHT.
    #[error("a DWRR weight is 1 to {MAX_WEIGHT}, not {0}")]
    Weight(u128),
    /// A base quantum out of MIN_QUANTUM..=MAX_QUANTUM.
    #[error("a port's base quantum is {MIN_QUANTUM} to {MAX_QUANTUM} bytes, not {0}")]
    Quantum(u128),
    /// A burst threshold out of 1..=MAX_DEPTH.
    #[error("a burst threshold is 1 to {MAX_DEPTH} packets, not {0}")]
    BurstThreshold(u128),
    /// A burst window out of 1..=MAX_BURST_WINDOW_US.
    #[error("a burst window is 1 to {max} µs, not {0}", max = measures::MAX_BURST_WINDOW_US)]
    BurstWindow(u128),
}

/// A queue depth as asked for (packets), checked.
pub fn depth(packets: u128) -> Result<usize, QueueSettingError> {
    usize::try_from(packets)
        .ok()
        .filter(|d| (1..=MAX_DEPTH).contains(d))
        .ok_or(QueueSettingError::Depth(packets))
}

/// A queue rate as asked for (packets per second, 0 for unlimited), checked: `None` is
/// unlimited.
pub fn rate(pps: u128) -> Result<Option<u64>, QueueSettingError> {
    let pps = u64::try_from(pps).map_err(|_| QueueSettingError::Rate(pps))?;
    Ok(Some(pps).filter(|&r| r > 0))
}

/// A queue priority as asked for, checked.
pub fn priority(priority: u128) -> Result<u8, QueueSettingError> {
    u8::try_from(priority)
        .ok()
        .filter(|&p| usize::from(p) < PRIORITIES)
        .ok_or(QueueSettingError::Priority(priority))
}

/// A DWRR weight as asked for, checked.
pub fn weight(weight: u128) -> Result<u32, QueueSettingError> {
    u32::try_from(weight)
        .ok()
        .filter(|w| (1..=MAX_WEIGHT).contains(w))
        .ok_or(QueueSettingError::Weight(weight))
}

/// A port's base quantum as asked for (bytes), checked.
pub fn quantum(bytes: u128) -> Result<u32, QueueSettingError> {
    u32::try_from(bytes)
        .ok()
        .filter(|b| (MIN_QUANTUM..=MAX_QUANTUM).contains(b))
        .ok_or(QueueSettingError::Quantum(bytes))
}

/// A burst threshold as asked for (packets), checked.
pub fn burst_threshold(packets: u128) -> Result<u32, QueueSettingError> {
    u32::try_from(packets)
        .ok()
        .filter(|&p| p >= 1 && p as usize <= MAX_DEPTH)
        .ok_or(QueueSettingError::BurstThreshold(packets))
}

/// A burst window as asked for (µs), checked.
pub fn burst_window(us: u128) -> Result<u64, QueueSettingError> {
    u64::try_from(us)
        .ok()
        .filter(|w| (1..=measures::MAX_BURST_WINDOW_US).contains(w))
        .ok_or(QueueSettingError::BurstWindow(us))
}

/// How a port's queues share it: the priorities in `strict` are served first, highest first;
/// the others by deficit weighted round robin, each given `weights[p] × quantum` bytes a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduling {
    /// Bit `p` set: priority `p` is strict.
    pub strict: u8,
    /// The DWRR weight of each priority (used while it is not strict), 1..=[`MAX_WEIGHT`].
    pub weights: [u32; PRIORITIES],
    /// The base quantum, bytes ([`MIN_QUANTUM`]..=[`MAX_QUANTUM`]).
    pub quantum: u32,
}

impl Default for Scheduling {
    /// BMv2's: every priority strict (weights 1, quantum [`DEFAULT_QUANTUM`] once one is not).
    fn default() -> Self {
        Scheduling {
            strict: u8::MAX,
            weights: [1; PRIORITIES],
            quantum: DEFAULT_QUANTUM,
        }
    }
}

impl Scheduling {
    fn is_strict(&self, priority: usize) -> bool {
        self.strict & (1 << priority) != 0
    }

    /// Bytes priority `priority` is given each DWRR round.
    fn quantum_of(&self, priority: usize) -> u64 {
        (u64::from(self.weights[priority]) * u64::from(self.quantum)).max(1)
    }
}

/// The bits of the priorities `priority` names (all when `None`).
fn priority_mask(priority: Option<u8>) -> u8 {
    priority.map_or(u8::MAX, |p| 1 << p.min(PRIORITIES as u8 - 1))
}

/// A packet leaving the traffic manager, with its queueing metadata.
#[derive(Debug)]
pub struct Dequeued<T> {
    /// The item.
    pub item: T,
    /// Egress port.
    pub port: u16,
    /// When it was enqueued (µs).
    pub enq_us: u64,
    /// Packets ahead of it when it was enqueued.
    pub enq_qdepth: u32,
    /// Packets behind it when it left.
    pub deq_qdepth: u32,
    /// Microseconds it spent queued.
    pub deq_timedelta: u64,
    /// The queue it left: its priority.
    pub priority: u8,
}

/// A queued packet: the item, its size (bytes), when it came (µs) and how many were ahead.
#[derive(Debug)]
struct Waiting<T> {
    item: T,
    bytes: u32,
    enq_us: u64,
    ahead: u32,
}

#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<Waiting<T>>,
    depth: usize,
    rate_pps: Option<u64>,
    /// When it may send its next packet under its rate.
    pacer: Pacer,
    /// Bytes of the packets in it.
    bytes: u64,
    /// What it measured.
    measures: QueueMeasures,
}

impl<T> Queue<T> {
    fn new(depth: usize, rate_pps: Option<u64>, rule: BurstRule) -> Self {
        Queue {
            items: VecDeque::new(),
            depth,
            rate_pps,
            pacer: Pacer::default(),
            bytes: 0,
            measures: QueueMeasures::new(rule),
        }
    }

    fn ready_at(&self) -> Option<u64> {
        self.items
            .front()
            .map(|w| w.enq_us.max(self.pacer.ready_at_us()))
    }
}

/// When a rate-limited queue or port may send its next packet, kept in nanoseconds so that a
/// rate that does not divide a second in whole microseconds (say 700,000 pps) keeps its
/// average, and one over 1,000,000 pps is not unlimited.
#[derive(Debug, Default)]
struct Pacer {
    next_ns: u64,
}

impl Pacer {
    /// The first whole microsecond at which it may send.
    fn ready_at_us(&self) -> u64 {
        self.next_ns.div_ceil(1000)
    }

    /// A packet left at `now_us` under `rate_pps` (not 0): the next may leave one interval
    /// after it, or after the last one's slot if that is later.
    fn sent(&mut self, now_us: u64, rate_pps: u64) {
        self.next_ns = now_us.saturating_mul(1000).max(self.next_ns) + 1_000_000_000 / rate_pps;
    }
}

/// The DRR state of a port's non-strict queues.
#[derive(Debug, Default)]
struct Deficits {
    /// Bytes each queue may still send in its turn.
    bytes: [u64; PRIORITIES],
    /// The queue whose turn it is.
    turn: usize,
    /// Whether that queue has been given its quantum for this turn.
    given: bool,
}

impl Deficits {
    /// Ends the current queue's turn.
    fn next_turn(&mut self) {
        self.turn = (self.turn + 1) % PRIORITIES;
        self.given = false;
    }
}

/// One egress port: its queues and how they share it.
#[derive(Debug)]
struct Port<T> {
    queues: Vec<Queue<T>>,
    scheduling: Scheduling,
    deficits: Deficits,
    /// The port's own rate in packets per second (`None`: unlimited), a link's: every queue of
    /// the port together, the scheduler choosing which queue sends each departure.
    rate_pps: Option<u64>,
    /// When the port may send its next packet under its rate.
    pacer: Pacer,
}

impl<T> Port<T> {
    /// The queue to serve next among those `ready` accepts (priority, queue): the highest ready
    /// strict one, else the one whose DRR turn it is once its deficit covers its head packet.
    fn select(&mut self, ready: impl Fn(usize, &Queue<T>) -> bool) -> Option<usize> {
        let s = self.scheduling;
        let queues = &self.queues;
        if let Some(p) = (0..PRIORITIES)
            .rev()
            .find(|&p| s.is_strict(p) && ready(p, &queues[p]))
        {
            return Some(p);
        }
        let shared = |p: usize| !s.is_strict(p) && ready(p, &queues[p]);
        if !(0..PRIORITIES).any(shared) {
            return None;
        }
        let head = |p: usize| u64::from(queues[p].items.front().map_or(0, |w| w.bytes));
        let d = &mut self.deficits;
        // At most two rounds: one gives every ready queue its quantum, after which the rounds
        // no queue could send in are skipped at once (a quantum may be far smaller than a frame).
        for step in 0..3 * PRIORITIES {
            if step == PRIORITIES {
                let rounds = (0..PRIORITIES)
                    .filter(|&p| shared(p))
                    .map(|p| (head(p).saturating_sub(d.bytes[p])).div_ceil(s.quantum_of(p)))
                    .min()
                    .unwrap_or(0);
                for p in (0..PRIORITIES).filter(|&p| shared(p)) {
                    d.bytes[p] += rounds.saturating_sub(1) * s.quantum_of(p);
                }
            }
            let p = d.turn;
            if shared(p) {
                // A quantum only to a deficit that does not cover the head frame (as Linux's
                // sch_drr): a queue passed over while held (its rate, a pause) banks no more
                // than one quantum past its head, so it cannot burst past its weight later.
                if !d.given {
                    if head(p) > d.bytes[p] {
                        d.bytes[p] += s.quantum_of(p);
                    }
                    d.given = true;
                }
                if head(p) <= d.bytes[p] {
                    return Some(p);
                }
            } else if queues[p].items.is_empty() {
                d.bytes[p] = 0;
            }
            d.next_turn();
        }
        unreachable!("a ready queue's deficit covers its head within two rounds")
    }

    /// Applies `change` to the scheduling; a queue that moves between the strict set and DWRR
    /// starts DWRR afresh, with no deficit left from before.
    fn reschedule(&mut self, change: impl Fn(&mut Scheduling)) {
        let before = self.scheduling.strict;
        change(&mut self.scheduling);
        let moved = before ^ self.scheduling.strict;
        for p in (0..PRIORITIES).filter(|p| moved & (1 << p) != 0) {
            self.deficits.bytes[p] = 0;
            if self.deficits.turn == p {
                self.deficits.given = false;
            }
        }
    }

    /// Charges a packet of `bytes` sent from queue `priority` to its deficit; an emptied
    /// queue's deficit is reset and its turn ends, as in DRR.
    fn sent(&mut self, priority: usize, bytes: u32) {
        if self.scheduling.is_strict(priority) {
            return;
        }
        let d = &mut self.deficits;
        d.bytes[priority] = d.bytes[priority].saturating_sub(u64::from(bytes));
        if self.queues[priority].items.is_empty() {
            d.bytes[priority] = 0;
            if d.turn == priority {
                d.next_turn();
            }
        }
    }
}

/// Why the traffic manager refused a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its queue held its depth in packets.
    QueueFull,
    /// The shared buffer (packets or bytes) was full.
    BufferFull,
}

/// Per-port priority queues.
#[derive(Debug)]
pub(crate) struct TrafficManager<T> {
    ports: BTreeMap<u16, Port<T>>,
    /// Packets queued per port, for ports with any.
    busy: BTreeMap<u16, usize>,
    default_depth: usize,
    default_rate: Option<u64>,
    default_scheduling: Scheduling,
    default_burst_rule: BurstRule,
    default_port_rate: Option<u64>,
    queued: usize,
    /// Bytes in all queues.
    queued_bytes: u64,
    /// The shared buffer in bytes, if bounded in bytes.
    buffer_bytes: Option<u64>,
    /// Tail drops per (port, priority), for ports with any.
    dropped: BTreeMap<(u16, u8), u64>,
    /// Ports whose queues went from empty to holding a packet since they were last taken.
    backlogged: Vec<u16>,
    /// Frames each port that pushes back may still be given; other ports take any number.
    budgets: BTreeMap<u16, u32>,
}

impl<T> Default for TrafficManager<T> {
    fn default() -> Self {
        TrafficManager {
            ports: BTreeMap::new(),
            busy: BTreeMap::new(),
            default_depth: DEFAULT_DEPTH,
            default_rate: None,
            default_scheduling: Scheduling::default(),
            default_burst_rule: BurstRule::default(),
            default_port_rate: None,
            queued: 0,
            queued_bytes: 0,
            buffer_bytes: None,
            dropped: BTreeMap::new(),
            backlogged: Vec::new(),
            budgets: BTreeMap::new(),
        }
    }
}

impl<T> TrafficManager<T> {
    fn port(&mut self, port: u16) -> &mut Port<T> {
        let (depth, rate) = (self.default_depth, self.default_rate);
        let (scheduling, rule) = (self.default_scheduling, self.default_burst_rule);
        let port_rate = self.default_port_rate;
        self.ports.entry(port).or_insert_with(|| Port {
            queues: (0..PRIORITIES)
                .map(|_| Queue::new(depth, rate, rule))
                .collect(),
            scheduling,
            deficits: Deficits::default(),
            rate_pps: port_rate,
            pacer: Pacer::default(),
        })
    }

    fn queues(&mut self, port: Option<u16>, priority: Option<u8>) -> Vec<&mut Queue<T>> {
        let ports: Vec<u16> = match port {
            Some(p) => {
                self.port(p);
                vec![p]
            }
            None => self.ports.keys().copied().collect(),
        };
        self.ports
            .iter_mut()
            .filter(|(p, _)| ports.contains(p))
            .flat_map(|(_, p)| p.queues.iter_mut().enumerate())
            .filter(|(i, _)| priority.is_none_or(|pr| usize::from(pr) == *i))
            .map(|(_, q)| q)
            .collect()
    }

    /// Sets the depth (packets) of one port's queue, of all its queues, or of every port
    /// (including ports not seen yet) when `port` is `None`.
    pub fn set_depth(&mut self, port: Option<u16>, priority: Option<u8>, depth: usize) {
        if port.is_none() {
            self.default_depth = depth;
        }
        for q in self.queues(port, priority) {
            q.depth = depth;
        }
    }

    /// Sets the rate (packets per second; `None` unlimited) like [`Self::set_depth`].
    pub fn set_rate(&mut self, port: Option<u16>, priority: Option<u8>, rate_pps: Option<u64>) {
        if port.is_none() {
            self.default_rate = rate_pps;
        }
        for q in self.queues(port, priority) {
            q.rate_pps = rate_pps.filter(|&r| r > 0);
            q.pacer = Pacer::default();
        }
    }

    /// Sets the rate (packets per second; `None` unlimited) of `port` as a whole, or of every
    /// port (including ports not seen yet) when `port` is `None`: a link's rate, shared by the
    /// port's queues as its [`Scheduling`] says (each queue's own rate still applies).
    pub fn set_port_rate(&mut self, port: Option<u16>, rate_pps: Option<u64>) {
        let rate_pps = rate_pps.filter(|&r| r > 0);
        match port {
            Some(p) => {
                let p = self.port(p);
                p.rate_pps = rate_pps;
                p.pacer = Pacer::default();
            }
            None => {
                self.default_port_rate = rate_pps;
                for p in self.ports.values_mut() {
                    p.rate_pps = rate_pps;
                    p.pacer = Pacer::default();
                }
            }
        }
    }

    /// The rate of `port` as a whole (`None`: unlimited); a port not seen yet has the default.
    pub fn port_rate(&self, port: u16) -> Option<u64> {
        self.ports
            .get(&port)
            .map_or(self.default_port_rate, |p| p.rate_pps)
    }

    /// Sets the burst threshold (packets) and/or window (µs) of the queues chosen as by
    /// [`Self::set_depth`]; `None` leaves one unchanged.
    pub fn set_burst_rule(
        &mut self,
        port: Option<u16>,
        priority: Option<u8>,
        threshold_packets: Option<u32>,
        window_us: Option<u64>,
    ) {
        let change = |r: &mut BurstRule| {
            r.threshold_packets = threshold_packets.unwrap_or(r.threshold_packets);
            r.window_us = window_us.unwrap_or(r.window_us);
        };
        if port.is_none() {
            change(&mut self.default_burst_rule);
        }
        for q in self.queues(port, priority) {
            let mut rule = q.measures.rule;
            change(&mut rule);
            q.measures.set_rule(rule);
        }
    }

    /// Forgets what the queues chosen as by [`Self::set_depth`] measured, at `now_us`.
    pub fn reset_measures(&mut self, port: Option<u16>, priority: Option<u8>, now_us: u64) {
        for q in self.queues(port, priority) {
            q.measures.reset(q.items.len(), now_us);
        }
    }

    /// What `port`'s queue `priority` measured (`None`: the port has no queues yet).
    pub fn measures(&self, port: u16, priority: u8) -> Option<&QueueMeasures> {
        self.ports
            .get(&port)
            .and_then(|p| p.queues.get(usize::from(priority)))
            .map(|q| &q.measures)
    }

    /// The burst rule of `port`'s queue `priority`; a port not seen yet has the default.
    pub fn burst_rule(&self, port: u16, priority: u8) -> BurstRule {
        self.measures(port, priority)
            .map_or(self.default_burst_rule, |m| m.rule)
    }

    /// Changes the scheduling of `port`, or of every port (including ports not seen yet) when
    /// `port` is `None`.
    fn schedule(&mut self, port: Option<u16>, change: impl Fn(&mut Scheduling)) {
        match port {
            Some(p) => self.port(p).reschedule(&change),
            None => {
                change(&mut self.default_scheduling);
                for p in self.ports.values_mut() {
                    p.reschedule(&change);
                }
            }
        }
    }

    /// Makes the queues chosen as by [`Self::set_depth`] strict (served before every other
    /// queue of their port, highest priority first) or not (sharing the port by DWRR).
    pub fn set_strict(&mut self, port: Option<u16>, priority: Option<u8>, strict: bool) {
        let mask = priority_mask(priority);
        self.schedule(port, |s| {
            s.strict = if strict {
                s.strict | mask
            } else {
                s.strict & !mask
            };
        });
    }

    /// Sets the DWRR weight of the queues chosen as by [`Self::set_depth`].
    pub fn set_weight(&mut self, port: Option<u16>, priority: Option<u8>, weight: u32) {
        let mask = priority_mask(priority);
        self.schedule(port, |s| {
            for (p, w) in s.weights.iter_mut().enumerate() {
                if mask & (1 << p) != 0 {
                    *w = weight;
                }
            }
        });
    }

    /// Sets the base quantum (bytes) of `port`, or of every port when `None`.
    pub fn set_quantum(&mut self, port: Option<u16>, bytes: u32) {
        self.schedule(port, |s| s.quantum = bytes);
    }

    /// How `port`'s queues share it; a port not seen yet has the default.
    pub fn scheduling(&self, port: u16) -> Scheduling {
        self.ports
            .get(&port)
            .map_or(self.default_scheduling, |p| p.scheduling)
    }

    /// Sets how many more frames `port` may be given (`None`: any number, the default).
    pub fn set_budget(&mut self, port: u16, frames: Option<u32>) {
        match frames {
            Some(n) => self.budgets.insert(port, n),
            None => self.budgets.remove(&port),
        };
    }

    /// Whether `port` may be given a frame now.
    fn takes(&self, port: u16) -> bool {
        self.budgets.get(&port).is_none_or(|&n| n > 0)
    }

    /// Counts a frame given to `port` against its budget.
    fn spend(&mut self, port: u16) {
        if let Some(n) = self.budgets.get_mut(&port) {
            *n = n.saturating_sub(1);
        }
    }

    /// Bounds the shared buffer to `bytes` bytes as well as [`BUFFER_PACKETS`] packets (`None`:
    /// packets only).
    pub fn set_buffer_bytes(&mut self, bytes: Option<u64>) {
        self.buffer_bytes = bytes;
    }

    /// Queues `item`, a packet of `bytes` bytes, for `port` at `priority` (clamped to 0..=7);
    /// gives it back, with the reason, if its queue or the shared buffer is full.
    pub fn enqueue(
        &mut self,
        port: u16,
        priority: u8,
        item: T,
        bytes: u32,
        now_us: u64,
    ) -> Result<(), (T, Refusal)> {
        let priority = priority.min(PRIORITIES as u8 - 1);
        let buffer_full = self.queued >= BUFFER_PACKETS
            || self
                .buffer_bytes
                .is_some_and(|b| self.queued_bytes + u64::from(bytes) > b);
        let q = &mut self.port(port).queues[usize::from(priority)];
        let refusal = if buffer_full {
            Some(Refusal::BufferFull)
        } else if q.items.len() >= q.depth {
            Some(Refusal::QueueFull)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            *self.dropped.entry((port, priority)).or_default() += 1;
            return Err((item, refusal));
        }
        q.measures.arrived(q.items.len(), now_us);
        let ahead = q.items.len() as u32;
        q.items.push_back(Waiting {
            item,
            bytes,
            enq_us: now_us,
            ahead,
        });
        q.bytes += u64::from(bytes);
        self.queued += 1;
        self.queued_bytes += u64::from(bytes);
        let waiting = self.busy.entry(port).or_default();
        if *waiting == 0 {
            self.backlogged.push(port);
        }
        *waiting += 1;
        Ok(())
    }

    /// Moves the ports whose queues went from empty to holding a packet since the last call
    /// into `into` (a port may appear again after it emptied and filled once more).
    pub fn take_backlogged(&mut self, into: &mut Vec<u16>) {
        into.append(&mut self.backlogged);
    }

    /// Whether a packet for `port` at `priority` would leave at once, with nothing left behind
    /// (no packet is queued anywhere, its queue accepts packets at an unlimited rate, and the
    /// port takes a frame now); if so, it is counted as given to the port, without a queue, and
    /// as a packet that went through its queue at `now_us` without waiting.
    pub fn pass_through(&mut self, port: u16, priority: u8, now_us: u64) -> bool {
        if self.queued != 0 || !self.takes(port) {
            return false;
        }
        let unlimited = match self.ports.get(&port) {
            Some(p) => {
                let q = &p.queues[usize::from(priority).min(PRIORITIES - 1)];
                q.rate_pps.is_none() && q.depth > 0 && p.rate_pps.is_none()
            }
            None => {
                self.default_rate.is_none()
                    && self.default_depth > 0
                    && self.default_port_rate.is_none()
            }
        };
        if unlimited {
            self.spend(port);
            let q = &mut self.port(port).queues[usize::from(priority).min(PRIORITIES - 1)];
            q.measures.passed(now_us);
        }
        unlimited
    }

    /// The next packet that may leave at `now_us`: the lowest-numbered port with a ready
    /// packet that takes a frame now and whose own rate lets it send, from the queue its
    /// [`Scheduling`] picks among its ready ones (a rate-limited queue is ready from its next
    /// departure time).
    pub fn dequeue(&mut self, now_us: u64) -> Option<Dequeued<T>> {
        if self.queued == 0 {
            return None;
        }
        let ready = |_: usize, q: &Queue<T>| q.ready_at().is_some_and(|t| t <= now_us);
        let (port, priority) = self
            .busy
            .keys()
            .filter(|port| self.budgets.get(port).is_none_or(|&n| n > 0))
            .find_map(|&port| {
                let state = self.ports.get_mut(&port).expect("busy ports have queues");
                if state.rate_pps.is_some() && state.pacer.ready_at_us() > now_us {
                    return None;
                }
                state.select(ready).map(|p| (port, p))
            })?;
        self.spend(port);
        Some(self.pop(port, priority, now_us))
    }

    /// The next packet of `port` that may leave at `now_us`, from the queue its
    /// [`Scheduling`] picks among those `eligible` names (bit `p` for priority `p`) that hold
    /// one; queue rates are not applied (the port's transmitter sets the pace).
    pub fn dequeue_port(&mut self, port: u16, eligible: u8, now_us: u64) -> Option<Dequeued<T>> {
        if !self.busy.contains_key(&port) {
            return None;
        }
        let state = self.ports.get_mut(&port).expect("busy ports have queues");
        let priority = state.select(|p, q| eligible & (1 << p) != 0 && !q.items.is_empty())?;
        Some(self.pop(port, priority, now_us))
    }

    /// Takes the head of `port`'s queue `priority`, which holds a packet.
    fn pop(&mut self, port: u16, priority: usize, now_us: u64) -> Dequeued<T> {
        let state = self.ports.get_mut(&port).expect("busy ports have queues");
        if let Some(rate) = state.rate_pps {
            state.pacer.sent(now_us, rate);
        }
        let q = &mut state.queues[priority];
        let w = q.items.pop_front().expect("the queue holds a packet");
        q.bytes -= u64::from(w.bytes);
        if let Some(rate) = q.rate_pps {
            q.pacer.sent(now_us, rate);
        }
        let deq_qdepth = q.items.len() as u32;
        q.measures.left(w.enq_us, q.items.len(), now_us);
        state.sent(priority, w.bytes);
        self.queued -= 1;
        self.queued_bytes -= u64::from(w.bytes);
        let waiting = self.busy.get_mut(&port).expect("the port is busy");
        *waiting -= 1;
        if *waiting == 0 {
            self.busy.remove(&port);
        }
        Dequeued {
            item: w.item,
            port,
            enq_us: w.enq_us,
            enq_qdepth: w.ahead,
            deq_qdepth,
            deq_timedelta: now_us.saturating_sub(w.enq_us),
            priority: priority as u8,
        }
    }

    /// The earliest time a queued packet may leave (a port that takes no frame now is waited
    /// for by its owner, not by the clock; one with a rate of its own is not ready before its
    /// next departure).
    pub fn next_ready(&self) -> Option<u64> {
        self.ports
            .iter()
            .filter(|(&port, _)| self.takes(port))
            .filter_map(|(_, p)| {
                let first = p.queues.iter().filter_map(Queue::ready_at).min()?;
                Some(match p.rate_pps {
                    Some(_) => first.max(p.pacer.ready_at_us()),
                    None => first,
                })
            })
            .min()
    }

    /// Packets `port`'s queue `priority` dropped because it was full (BMv2 keeps this count to
    /// itself too: a P4 program never sees a tail drop).
    pub fn dropped(&self, port: u16, priority: u8) -> u64 {
        self.dropped.get(&(port, priority)).copied().unwrap_or(0)
    }

    /// The depth (packets) and rate (packets per second, `None` unlimited) of `port`'s queue
    /// `priority`; a port not seen yet has the defaults.
    pub fn config(&self, port: u16, priority: u8) -> (usize, Option<u64>) {
        match self.ports.get(&port) {
            Some(p) => {
                let q = &p.queues[usize::from(priority).min(PRIORITIES - 1)];
                (q.depth, q.rate_pps)
            }
            None => (self.default_depth, self.default_rate),
        }
    }

    /// The ports that have queues (every port a packet was queued for or a setting named).
    pub fn ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.ports.keys().copied()
    }

    /// The number of packets in `port`'s queue `priority`.
    pub fn occupancy(&self, port: u16, priority: u8) -> usize {
        self.ports
            .get(&port)
            .and_then(|p| p.queues.get(usize::from(priority)))
            .map_or(0, |q| q.items.len())
    }

    /// The bytes of the packets in `port`'s queue `priority`.
    pub fn occupancy_bytes(&self, port: u16, priority: u8) -> u64 {
        self.ports
            .get(&port)
            .and_then(|p| p.queues.get(usize::from(priority)))
            .map_or(0, |q| q.bytes)
    }

    /// The bytes queued on every port together.
    pub fn buffered_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Whether no packet is queued anywhere (so none can be dequeued, whatever the time).
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_buffer_bounds_every_queue_together() {
        let mut tm = TrafficManager::default();
        tm.set_depth(None, None, MAX_DEPTH);
        // Deep queues on two ports fill the buffer; then every queue refuses.
        for i in 0..BUFFER_PACKETS {
            tm.enqueue((i % 2) as u16, 0, i, 64, 0).unwrap();
        }
        assert_eq!(tm.enqueue(3, 7, 0, 64, 0), Err((0, Refusal::BufferFull)));
        tm.dequeue(0).unwrap();
        assert!(tm.enqueue(3, 7, 0, 64, 0).is_ok());
    }

    #[test]
    fn queue_settings_are_checked_in_one_place() {
        assert_eq!(depth(0), Err(QueueSettingError::Depth(0)));
        assert_eq!(depth(MAX_DEPTH as u128), Ok(MAX_DEPTH));
        assert!(depth(MAX_DEPTH as u128 + 1).is_err());
        assert_eq!(rate(0), Ok(None));
        assert_eq!(rate(5), Ok(Some(5)));
        assert!(rate(u128::from(u64::MAX) + 1).is_err());
        assert_eq!(priority(7), Ok(7));
        assert_eq!(priority(256), Err(QueueSettingError::Priority(256)));
    }

    #[test]
    fn strict_priority_and_depths() {
        let mut tm = TrafficManager::default();
        tm.set_rate(Some(1), None, Some(1000));
        tm.enqueue(1, 0, "low", 100, 0).unwrap();
        tm.enqueue(1, 7, "high", 100, 0).unwrap();
        tm.enqueue(1, 7, "high2", 100, 0).unwrap();
        let first = tm.dequeue(0).unwrap();
        assert_eq!(
            (first.item, first.enq_qdepth, first.deq_qdepth),
            ("high", 0, 1)
        );
        // Rate 1000 pps per queue: priority 7 may send again 1000 µs later; priority 0 now.
        assert_eq!(tm.next_ready(), Some(0));
        assert_eq!(tm.dequeue(999).unwrap().item, "low");
        assert!(tm.dequeue(999).is_none());
        assert_eq!(tm.next_ready(), Some(1000));
        let second = tm.dequeue(1000).unwrap();
        assert_eq!(
            (second.item, second.enq_qdepth, second.deq_timedelta),
            ("high2", 1, 1000)
        );
    }

    #[test]
    fn a_port_without_budget_keeps_its_packets_queued() {
        let mut tm = TrafficManager::default();
        tm.set_budget(1, Some(1));
        assert!(
            tm.pass_through(1, 0, 0),
            "idle: the first frame skips the queue"
        );
        assert!(!tm.pass_through(1, 0, 0), "the budget is spent");
        for i in 0..3 {
            tm.enqueue(1, 0, i, 64, 0).unwrap();
        }
        tm.enqueue(2, 0, 9, 64, 0).unwrap();
        // Port 1 takes nothing: port 2 is served, port 1's packets wait and count as depth.
        assert_eq!(tm.next_ready(), Some(0));
        assert_eq!(tm.dequeue(0).unwrap().item, 9);
        assert!(tm.dequeue(0).is_none());
        assert_eq!(tm.next_ready(), None);
        assert_eq!(tm.occupancy(1, 0), 3);
        tm.set_budget(1, Some(2));
        let first = tm.dequeue(0).unwrap();
        assert_eq!((first.item, first.enq_qdepth, first.deq_qdepth), (0, 0, 2));
        assert_eq!(tm.dequeue(0).unwrap().item, 1);
        assert!(tm.dequeue(0).is_none(), "two given, the budget is spent");
        tm.set_budget(1, None);
        assert_eq!(tm.dequeue(0).unwrap().item, 2);
    }

    #[test]
    fn a_full_queue_drops_at_the_tail() {
        let mut tm = TrafficManager::default();
        tm.set_depth(Some(2), Some(0), 1);
        tm.enqueue(2, 0, 1, 60, 0).unwrap();
        assert_eq!(tm.enqueue(2, 0, 2, 60, 0), Err((2, Refusal::QueueFull)));
        assert_eq!(tm.occupancy(2, 0), 1);
        assert_eq!((tm.dropped(2, 0), tm.dropped(2, 1)), (1, 0));
    }

    #[test]
    fn a_buffer_in_bytes_bounds_every_queue_together() {
        let mut tm = TrafficManager::default();
        tm.set_buffer_bytes(Some(3000));
        tm.enqueue(1, 3, "a", 1500, 0).unwrap();
        tm.enqueue(2, 3, "b", 1000, 0).unwrap();
        assert_eq!(
            tm.enqueue(1, 0, "c", 501, 0),
            Err(("c", Refusal::BufferFull))
        );
        tm.enqueue(1, 0, "c", 500, 0).unwrap();
        assert_eq!(
            (tm.buffered_bytes(), tm.occupancy_bytes(1, 3)),
            (3000, 1500)
        );
        tm.dequeue_port(1, 0xff, 0).unwrap();
        assert_eq!(tm.buffered_bytes(), 1500);
    }

    #[test]
    fn a_port_sends_its_highest_eligible_priority_when_asked() {
        let mut tm = TrafficManager::default();
        let mut backlogged = Vec::new();
        tm.enqueue(4, 3, "data", 1000, 0).unwrap();
        tm.enqueue(4, 6, "cnp", 74, 1).unwrap();
        tm.enqueue(5, 0, "other", 60, 1).unwrap();
        tm.take_backlogged(&mut backlogged);
        assert_eq!(backlogged, [4, 5]);
        // Priority 6 first; with 6 paused (not eligible) priority 3.
        assert_eq!(tm.dequeue_port(4, !(1 << 6), 2).unwrap().item, "data");
        let cnp = tm.dequeue_port(4, 0xff, 3).unwrap();
        assert_eq!((cnp.item, cnp.deq_timedelta), ("cnp", 2));
        assert!(tm.dequeue_port(4, 0xff, 3).is_none());
        // Port 4 empty again: a new packet backlogs it again.
        tm.enqueue(4, 3, "again", 1000, 4).unwrap();
        tm.take_backlogged(&mut backlogged);
        assert_eq!(backlogged, [4, 5, 4]);
    }

    /// Queues a 100-byte frame on port 1 at time 0 for each of `priorities` in turn, each
    /// frame's item its priority.
    fn enqueue_each(tm: &mut TrafficManager<u8>, priorities: &[u8]) {
        for &priority in priorities {
            tm.enqueue(1, priority, priority, 100, 0).unwrap();
        }
    }

    /// A port whose priorities 1 and 2 share it by DWRR with weights 3 and 1 (the others
    /// strict), with base quantum `quantum`.
    fn weighted(quantum: u32) -> TrafficManager<u8> {
        let mut tm = TrafficManager::default();
        tm.set_depth(Some(1), None, MAX_DEPTH);
        tm.set_strict(Some(1), Some(1), false);
        tm.set_strict(Some(1), Some(2), false);
        tm.set_weight(Some(1), Some(2), 3);
        tm.set_quantum(Some(1), quantum);
        tm
    }

    /// Bytes sent by priorities 2 and 1 of port 1 while both stay backlogged, each with 4000
    /// frames of sizes that vary (64 to 1517 bytes; `scale` times them), taking `take` frames
    /// through `next`.
    fn shares(
        tm: &mut TrafficManager<u8>,
        scale: u32,
        mut next: impl FnMut(&mut TrafficManager<u8>) -> Dequeued<u8>,
    ) -> (u64, u64) {
        for i in 0..4000u32 {
            for p in [1u8, 2] {
                let bytes = (64 + (i * 7919 + u32::from(p) * 31) % 1454) * scale;
                tm.enqueue(1, p, p, bytes, 0).unwrap();
            }
        }
        let mut sent = [0u64; 3];
        while tm.occupancy(1, 1) > 0 && tm.occupancy(1, 2) > 0 {
            let before = [tm.occupancy_bytes(1, 1), tm.occupancy_bytes(1, 2)];
            let d = next(tm);
            let after = [tm.occupancy_bytes(1, 1), tm.occupancy_bytes(1, 2)];
            let p = usize::from(d.priority);
            sent[p] += before[p - 1] - after[p - 1];
        }
        (sent[2], sent[1])
    }

    /// Asserts `heavy` is 3 times `light` within 5%.
    fn assert_three_to_one(heavy: u64, light: u64) {
        let ratio = heavy as f64 / light as f64;
        assert!((ratio - 3.0).abs() <= 0.15, "{heavy} : {light} = {ratio}");
    }

    #[test]
    fn weights_three_to_one_share_a_port_three_to_one_in_bytes() {
        // When the port's transmitter asks (the simulator's path).
        let mut tm = weighted(DEFAULT_QUANTUM);
        let (heavy, light) = shares(&mut tm, 1, |tm| tm.dequeue_port(1, 0xff, 0).unwrap());
        assert_three_to_one(heavy, light);
        // As fast as queue rates allow, a port budget at a time (softswitch run's path).
        let mut tm = weighted(DEFAULT_QUANTUM);
        let (heavy, light) = shares(&mut tm, 1, |tm| {
            tm.set_budget(1, Some(1));
            let d = tm.dequeue(0).unwrap();
            assert!(tm.dequeue(0).is_none(), "the budget of one frame is spent");
            d
        });
        assert_three_to_one(heavy, light);
        // Jumbo frames a hundred times the smallest quantum: rounds without a frame are
        // skipped, and the share holds.
        let mut tm = weighted(MIN_QUANTUM);
        let (heavy, light) = shares(&mut tm, 6, |tm| tm.dequeue_port(1, 0xff, 0).unwrap());
        assert_three_to_one(heavy, light);
    }

    #[test]
    fn a_port_rate_paces_all_its_queues_together_and_the_weights_share_it() {
        // 1000 packets a second for the whole port: one departure a millisecond, whichever
        // queue sends it; a strict queue's packet takes the next one.
        let mut tm = weighted(DEFAULT_QUANTUM);
        tm.set_port_rate(None, Some(1000));
        assert_eq!(
            tm.port_rate(7),
            Some(1000),
            "the default of ports not seen yet"
        );
        let mut now = 0;
        let (heavy, light) = shares(&mut tm, 1, |tm| {
            let d = tm.dequeue(now).expect("one departure a millisecond");
            assert!(tm.dequeue(now).is_none(), "the port's rate allows one");
            assert_eq!(tm.next_ready(), Some(now + 1000));
            now += 1000;
            d
        });
        assert_three_to_one(heavy, light);
        tm.enqueue(1, 6, 6, 64, now).unwrap();
        let d = tm.dequeue(now).unwrap();
        assert_eq!((d.item, d.deq_timedelta), (6, 0));
        // Unlimited again: everything ready leaves at once.
        tm.set_port_rate(Some(1), None);
        assert!(tm.dequeue(now).is_some() && tm.dequeue(now).is_some());
    }

    #[test]
    fn strict_queues_go_before_the_weighted_ones_whatever_their_number() {
        let mut tm = weighted(DEFAULT_QUANTUM);
        enqueue_each(&mut tm, &[2, 1, 0, 0]);
        let order: Vec<u8> = (0..4)
            .map(|_| tm.dequeue_port(1, 0xff, 0).unwrap().item)
            .collect();
        assert_eq!(order, [0, 0, 1, 2], "priority 0 is strict, 1 and 2 are not");
        // A paused strict queue (not eligible) lets the weighted ones through.
        enqueue_each(&mut tm, &[0, 2]);
        assert_eq!(tm.dequeue_port(1, !1, 0).unwrap().item, 2);
        assert_eq!(tm.dequeue_port(1, 0xff, 0).unwrap().item, 0);
    }

    #[test]
    fn a_frame_larger_than_the_quantum_waits_while_the_deficit_carries_over() {
        let mut tm = TrafficManager::default();
        tm.set_strict(Some(1), None, false);
        tm.set_quantum(Some(1), 500);
        for _ in 0..4 {
            tm.enqueue(1, 1, "big", 1500, 0).unwrap();
            for _ in 0..3 {
                tm.enqueue(1, 2, "small", 500, 0).unwrap();
            }
        }
        // Weight 1 each: 500 bytes a round. The 1500-byte frame goes every third round, when
        // the deficit carried over from the two rounds before covers it.
        let order: Vec<&str> = (0..8)
            .map(|_| tm.dequeue_port(1, 0xff, 0).unwrap().item)
            .collect();
        assert_eq!(
            order,
            ["small", "small", "big", "small", "small", "small", "big", "small"]
        );
    }

    #[test]
    fn an_emptied_queue_forgets_its_deficit_and_a_held_one_keeps_it() {
        let mut tm = TrafficManager::default();
        tm.set_strict(Some(1), None, false);
        tm.enqueue(1, 1, "short", 100, 0).unwrap();
        tm.enqueue(1, 2, "long", 1000, 0).unwrap();
        tm.enqueue(1, 2, "long", 1000, 0).unwrap();
        assert_eq!(tm.dequeue_port(1, 0xff, 0).unwrap().item, "short");
        let deficits = |tm: &TrafficManager<&str>| tm.ports[&1].deficits.bytes;
        assert_eq!(
            deficits(&tm)[1],
            0,
            "1400 bytes unused, forgotten as it emptied"
        );
        // Priority 2 gets its quantum, sends 1000 bytes and keeps 514 while it holds a frame,
        // also while not eligible (paused): then priority 1 goes.
        assert_eq!(tm.dequeue_port(1, 0xff, 0).unwrap().item, "long");
        assert_eq!(deficits(&tm)[2], 514);
        tm.enqueue(1, 1, "short", 100, 0).unwrap();
        assert_eq!(tm.dequeue_port(1, !(1 << 2), 0).unwrap().item, "short");
        assert_eq!(deficits(&tm)[2], 514);
        assert_eq!(tm.dequeue_port(1, 0xff, 0).unwrap().item, "long");
        assert_eq!(deficits(&tm)[2], 0);
    }

    #[test]
    fn the_share_is_in_bytes_whatever_the_frame_sizes() {
        // 64-byte frames at weight 3 against 1,500-byte ones at weight 1: 3:1 in bytes is
        // about 70 frames to 1, which a round robin counting frames would not give.
        let mut tm = weighted(DEFAULT_QUANTUM);
        for _ in 0..30_000 {
            tm.enqueue(1, 2, 2, 64, 0).unwrap();
        }
        for _ in 0..300 {
            tm.enqueue(1, 1, 1, 1500, 0).unwrap();
        }
        let mut sent = [0u64; 3];
        while tm.occupancy(1, 1) > 0 {
            let d = tm.dequeue_port(1, 0xff, 0).unwrap();
            sent[usize::from(d.item)] += if d.item == 2 { 64 } else { 1500 };
        }
        assert_three_to_one(sent[2], sent[1]);
    }

    #[test]
    fn a_held_weighted_queue_banks_no_credit_to_burst_with_later() {
        // Priority 2 (weight 3) paused again after each frame it sends, as PFC on a lossless
        // DWRR class; priority 1 (weight 1) always free. 100-byte frames.
        let mut tm = weighted(DEFAULT_QUANTUM);
        for _ in 0..5000 {
            enqueue_each(&mut tm, &[1, 2]);
        }
        let most = 100 + u64::from(3 * DEFAULT_QUANTUM);
        let mut paused = false;
        for _ in 0..2000 {
            let eligible = if paused { !(1u8 << 2) } else { 0xff };
            paused = tm.dequeue_port(1, eligible, 0).unwrap().item == 2;
            let banked = tm.ports[&1].deficits.bytes[2];
            assert!(banked <= most, "priority 2 banked {banked} bytes");
        }
        // Freed, the two share the port 3:1 at once: no burst of priority 2.
        let next: Vec<u8> = (0..800)
            .map(|_| tm.dequeue_port(1, 0xff, 0).unwrap().item)
            .collect();
        let twos = next.iter().filter(|&&p| p == 2).count();
        assert!((540..=660).contains(&twos), "{twos} of 800 from priority 2");
        // The same with a rate holding priority 2 back for a simulated second.
        let mut tm = weighted(DEFAULT_QUANTUM);
        tm.set_rate(Some(1), Some(2), Some(1000));
        for _ in 0..5000 {
            enqueue_each(&mut tm, &[1, 2]);
        }
        for now in (0..1_000_000u64).step_by(1000) {
            tm.set_budget(1, Some(2));
            while tm.dequeue(now).is_some() {}
            let banked = tm.ports[&1].deficits.bytes[2];
            assert!(
                banked <= most,
                "priority 2 banked {banked} bytes at {now} µs"
            );
        }
    }

    #[test]
    fn a_queue_moved_in_or_out_of_the_strict_set_starts_without_a_deficit() {
        let mut tm = weighted(DEFAULT_QUANTUM);
        enqueue_each(&mut tm, &[2, 2, 1]);
        assert_eq!(tm.dequeue_port(1, 0xff, 0).unwrap().item, 1);
        assert_eq!(tm.dequeue_port(1, 0xff, 0).unwrap().item, 2);
        assert!(
            tm.ports[&1].deficits.bytes[2] > 0,
            "a frame left, credit left"
        );
        tm.set_strict(Some(1), Some(2), true);
        assert_eq!(tm.ports[&1].deficits.bytes[2], 0);
        tm.set_strict(Some(1), Some(2), false);
        assert_eq!(tm.ports[&1].deficits.bytes[2], 0);
    }

    #[test]
    fn a_rate_shapes_a_weighted_queue() {
        let mut tm = weighted(DEFAULT_QUANTUM);
        tm.set_rate(Some(1), Some(2), Some(1000));
        for _ in 0..3 {
            enqueue_each(&mut tm, &[2, 1]);
        }
        // Priority 2 (weight 3) may send one packet a millisecond, whatever its deficit:
        // priority 1 sends its three (its turn comes first), then priority 2 one.
        let now: Vec<u8> = std::iter::from_fn(|| tm.dequeue(0).map(|d| d.item)).collect();
        assert_eq!(now, [1, 1, 1, 2]);
        assert_eq!(tm.next_ready(), Some(1000));
        assert_eq!(tm.dequeue(1000).unwrap().item, 2);
        assert!(tm.dequeue(1999).is_none());
    }

    #[test]
    fn each_queue_measures_its_sojourns_occupancies_and_microbursts() {
        let mut tm = TrafficManager::default();
        tm.set_burst_rule(Some(1), Some(3), Some(4), Some(100));
        // Three bursts of 6 packets, at 0, 1000 and 2000 µs, each drained a packet per 10 µs;
        // then one held 200 µs, longer than the window.
        for t0 in [0, 1000, 2000] {
            for i in 0..6 {
                tm.enqueue(1, 3, i, 100, t0).unwrap();
            }
            for k in 1..=6 {
                tm.dequeue_port(1, 0xff, t0 + 10 * k).unwrap();
            }
        }
        let m = tm.measures(1, 3).unwrap();
        let b = m.bursts;
        // From the 5th arrival (4 ahead) until the 4th departure leaves 2 behind (half the
        // threshold); the peak is the 6th arrival's 5 ahead, the occupancy's maximum.
        assert_eq!(
            (
                b.microbursts,
                b.longer,
                b.last_peak_packets,
                b.last_duration_us
            ),
            (3, 0, 5, 40)
        );
        assert_eq!((m.sojourn_us.total(), m.sojourn_us.max()), (18, 60));
        assert_eq!(m.sojourn_us.counts()[4], 3, "10 µs is in [8, 16)");
        assert_eq!((m.occupancy.quantile(0.5), m.occupancy.max()), (2, 5));
        assert_eq!(tm.measures(1, 0).unwrap().sojourn_us.total(), 0);
        for i in 0..5 {
            tm.enqueue(1, 3, i, 100, 3000).unwrap();
        }
        tm.dequeue_port(1, 0xff, 3200).unwrap();
        tm.dequeue_port(1, 0xff, 3200).unwrap();
        assert_eq!(
            tm.measures(1, 3).unwrap().bursts.longer,
            0,
            "3 left: still on"
        );
        tm.dequeue_port(1, 0xff, 3200).unwrap();
        assert_eq!(tm.measures(1, 3).unwrap().bursts.longer, 1);
        // A port not seen yet has the default rule; a reset forgets.
        assert_eq!(tm.burst_rule(2, 3), BurstRule::default());
        tm.reset_measures(Some(1), None, 4000);
        let m = tm.measures(1, 3).unwrap();
        assert_eq!((m.sojourn_us.total(), m.bursts.microbursts), (0, 0));
        assert_eq!(m.rule.threshold_packets, 4, "the rule stays");
    }

    #[test]
    fn a_packet_passed_through_counts_as_no_wait_in_its_queue() {
        let mut tm = TrafficManager::<()>::default();
        assert!(tm.pass_through(5, 2, 7));
        let m = tm.measures(5, 2).unwrap();
        assert_eq!(
            (m.sojourn_us.total(), m.sojourn_us.max(), m.occupancy.max()),
            (1, 0, 0)
        );
    }

    #[test]
    fn weights_and_quanta_are_checked_in_one_place() {
        assert_eq!(weight(0), Err(QueueSettingError::Weight(0)));
        assert_eq!(weight(u128::from(MAX_WEIGHT)), Ok(MAX_WEIGHT));
        assert!(weight(u128::from(MAX_WEIGHT) + 1).is_err());
        assert_eq!(quantum(63), Err(QueueSettingError::Quantum(63)));
        assert_eq!(quantum(1500), Ok(1500));
        assert!(quantum(u128::from(MAX_QUANTUM) + 1).is_err());
        let default = TrafficManager::<()>::default().scheduling(9);
        assert_eq!(default, Scheduling::default());
        assert_eq!(default.strict, 0xff, "every priority strict, as BMv2");
    }
}
