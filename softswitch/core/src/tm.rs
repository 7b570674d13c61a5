//! The traffic manager: per egress port up to 8 strict-priority FIFO queues (priority 7 served
//! first, 0 last), each with a depth limit in packets (default 64, tail drop) and an optional
//! rate in packets per second. Depths are per queue: `enq_qdepth` is the number of packets
//! already in the packet's own (port, priority) queue when it arrives, `deq_qdepth` the number
//! left behind in it when it leaves; `deq_timedelta` is the time it spent queued, in
//! microseconds. That is BMv2's reading with one queue per port; BMv2 with `--priority-queues`
//! reports the sum over all the port's queues instead (docs/p4-programs.md).
//!
//! A port may also push back: its owner gives it a budget of frames it can take now
//! ([`TrafficManager::set_budget`]); at zero its packets wait in their queues, as in BMv2 when
//! its egress blocks on a send the interface cannot take yet, so queue depths show the real
//! bottleneck.

use std::collections::{BTreeMap, VecDeque};

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

/// A queue setting refused by [`depth`], [`rate`] or [`priority`]: the rules every front door
/// (the Queues service, STF) applies.
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
}

#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<(T, u64, u32)>,
    depth: usize,
    rate_pps: Option<u64>,
    next_departure_us: u64,
}

impl<T> Queue<T> {
    fn new(depth: usize, rate_pps: Option<u64>) -> Self {
        Queue {
            items: VecDeque::new(),
            depth,
            rate_pps,
            next_departure_us: 0,
        }
    }

    fn ready_at(&self) -> Option<u64> {
        self.items
            .front()
            .map(|(_, enq, _)| (*enq).max(self.next_departure_us))
    }
}

/// Per-port priority queues.
#[derive(Debug)]
pub(crate) struct TrafficManager<T> {
    ports: BTreeMap<u16, Vec<Queue<T>>>,
    /// Packets queued per port, for ports with any.
    busy: BTreeMap<u16, usize>,
    default_depth: usize,
    default_rate: Option<u64>,
    queued: usize,
    /// Tail drops per (port, priority), for ports with any.
    dropped: BTreeMap<(u16, u8), u64>,
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
            queued: 0,
            dropped: BTreeMap::new(),
            budgets: BTreeMap::new(),
        }
    }
}

impl<T> TrafficManager<T> {
    fn port(&mut self, port: u16) -> &mut Vec<Queue<T>> {
        let (depth, rate) = (self.default_depth, self.default_rate);
        self.ports
            .entry(port)
            .or_insert_with(|| (0..PRIORITIES).map(|_| Queue::new(depth, rate)).collect())
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
            .flat_map(|(_, qs)| qs.iter_mut().enumerate())
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
        }
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

    /// Queues `item` for `port` at `priority` (clamped to 0..=7); gives it back if the queue or
    /// the shared buffer ([`BUFFER_PACKETS`]) is full.
    pub fn enqueue(&mut self, port: u16, priority: u8, item: T, now_us: u64) -> Result<(), T> {
        let priority = priority.min(PRIORITIES as u8 - 1);
        let buffer_full = self.queued >= BUFFER_PACKETS;
        let q = &mut self.port(port)[usize::from(priority)];
        if q.items.len() >= q.depth || buffer_full {
            *self.dropped.entry((port, priority)).or_default() += 1;
            return Err(item);
        }
        let ahead = q.items.len() as u32;
        q.items.push_back((item, now_us, ahead));
        self.queued += 1;
        *self.busy.entry(port).or_default() += 1;
        Ok(())
    }

    /// Whether a packet for `port` at `priority` would leave at once, with nothing left behind
    /// (no packet is queued anywhere, its queue accepts packets at an unlimited rate, and the
    /// port takes a frame now); if so, it is counted as given to the port, without a queue.
    pub fn pass_through(&mut self, port: u16, priority: u8) -> bool {
        if self.queued != 0 || !self.takes(port) {
            return false;
        }
        let unlimited = match self.ports.get(&port) {
            Some(queues) => {
                let q = &queues[usize::from(priority).min(PRIORITIES - 1)];
                q.rate_pps.is_none() && q.depth > 0
            }
            None => self.default_rate.is_none() && self.default_depth > 0,
        };
        if unlimited {
            self.spend(port);
        }
        unlimited
    }

    /// The next packet that may leave at `now_us`: the lowest-numbered port with a ready
    /// packet that takes a frame now, its highest-priority ready queue.
    pub fn dequeue(&mut self, now_us: u64) -> Option<Dequeued<T>> {
        if self.queued == 0 {
            return None;
        }
        let budgets = &mut self.budgets;
        for (&port, waiting) in self.busy.iter_mut() {
            let budget = budgets.get_mut(&port);
            if budget.as_ref().is_some_and(|n| **n == 0) {
                continue;
            }
            let queues = self.ports.get_mut(&port).expect("busy ports have queues");
            for q in queues.iter_mut().rev() {
                if q.ready_at().is_some_and(|t| t <= now_us) {
                    let (item, enq_us, enq_qdepth) =
                        q.items.pop_front().expect("ready means non-empty");
                    self.queued -= 1;
                    *waiting -= 1;
                    if *waiting == 0 {
                        self.busy.remove(&port);
                    }
                    if let Some(rate) = q.rate_pps {
                        q.next_departure_us =
                            now_us.max(q.next_departure_us) + 1_000_000 / rate.max(1);
                    }
                    if let Some(n) = budget {
                        *n -= 1;
                    }
                    let deq_qdepth = q.items.len() as u32;
                    return Some(Dequeued {
                        item,
                        port,
                        enq_us,
                        enq_qdepth,
                        deq_qdepth,
                        deq_timedelta: now_us.saturating_sub(enq_us),
                    });
                }
            }
        }
        None
    }

    /// The earliest time a queued packet may leave (a port that takes no frame now is waited
    /// for by its owner, not by the clock).
    pub fn next_ready(&self) -> Option<u64> {
        self.ports
            .iter()
            .filter(|(&port, _)| self.takes(port))
            .flat_map(|(_, qs)| qs.iter().filter_map(Queue::ready_at))
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
            Some(qs) => {
                let q = &qs[usize::from(priority).min(PRIORITIES - 1)];
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
            .and_then(|qs| qs.get(usize::from(priority)))
            .map_or(0, |q| q.items.len())
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
            tm.enqueue((i % 2) as u16, 0, i, 0).unwrap();
        }
        assert_eq!(tm.enqueue(3, 7, 0, 0), Err(0));
        tm.dequeue(0).unwrap();
        assert!(tm.enqueue(3, 7, 0, 0).is_ok());
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
        tm.enqueue(1, 0, "low", 0).unwrap();
        tm.enqueue(1, 7, "high", 0).unwrap();
        tm.enqueue(1, 7, "high2", 0).unwrap();
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
            tm.pass_through(1, 0),
            "idle: the first frame skips the queue"
        );
        assert!(!tm.pass_through(1, 0), "the budget is spent");
        for i in 0..3 {
            tm.enqueue(1, 0, i, 0).unwrap();
        }
        tm.enqueue(2, 0, 9, 0).unwrap();
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
        tm.enqueue(2, 0, 1, 0).unwrap();
        assert_eq!(tm.enqueue(2, 0, 2, 0), Err(2));
        assert_eq!(tm.occupancy(2, 0), 1);
        assert_eq!((tm.dropped(2, 0), tm.dropped(2, 1)), (1, 0));
    }
}
