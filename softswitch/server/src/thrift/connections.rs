//! The Thrift server's open connections and how long they may take: a table of at most
//! [`Limits::connections`] connections, each idle (between two calls), reading a call (from its
//! first byte to its last) or answering one. A call must arrive whole within
//! [`Limits::call_deadline`] of its first byte. When every slot is taken, a newcomer takes the
//! slot of another connection, which is closed, so that neither idle clients (a
//! `simple_switch_CLI` waiting at its prompt) nor senders of partial calls (slow lorises,
//! reconnecting before their deadline) lock the control plane out: the victim is one of the
//! source address holding the most slots — a partial call that has been arriving for longer
//! than [`STALLED`] (the one begun first), else the connection idle the longest, else the
//! partial call begun first. A connection answering a call (its call arrived whole) keeps its
//! slot; a newcomer finding every slot answering is closed at once. Warnings a client can cause
//! at will go through the device's `throttle`.

use std::io;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Limits;

/// The open connections.
pub(super) struct Connections {
    /// How many may be open at once.
    limit: usize,
    /// How long a call may take to arrive once its first byte has.
    call_deadline: Duration,
    open: Mutex<Table>,
}

/// The table of open connections, and the id the next one gets.
#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    next_id: u64,
}

/// How long a call may have been arriving before it is the first to lose its slot to a
/// newcomer: what a client on a live network takes to send any call but a whole BMv2 JSON.
pub(super) const STALLED: Duration = Duration::from_secs(1);

/// One open connection.
struct Slot {
    id: u64,
    peer: String,
    /// The peer's address, whose slots are counted together.
    source: Option<IpAddr>,
    /// The connection's socket, to close it for a newcomer.
    stream: TcpStream,
    state: State,
}

/// Where a connection is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a call since then.
    Idle(Instant),
    /// Reading a call whose first byte arrived then.
    Reading(Instant),
    /// Answering a call that arrived whole (its first byte then).
    Answering(Instant),
}

impl State {
    /// How much rather this connection than another loses its slot to a newcomer at `now`:
    /// the greatest goes, `None` never.
    fn eviction_rank(self, now: Instant) -> Option<(u8, Duration)> {
        match self {
            State::Reading(begun) if now.saturating_duration_since(begun) > STALLED => {
                Some((2, now.saturating_duration_since(begun)))
            }
            State::Idle(since) => Some((1, now.saturating_duration_since(since))),
            State::Reading(begun) => Some((0, now.saturating_duration_since(begun))),
            State::Answering(_) => None,
        }
    }
}

/// A connection that was given a slot.
pub(super) struct Admitted {
    /// Its pacing, for its reader.
    pub(super) pace: Pace,
    /// The peer of the connection closed to make room, if one was.
    pub(super) evicted: Option<String>,
}

impl Connections {
    /// An empty table under `limits`.
    pub(super) fn new(limits: &Limits) -> Arc<Connections> {
        Arc::new(Connections {
            limit: limits.connections,
            call_deadline: limits.call_deadline,
            open: Mutex::new(Table::default()),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A thread that panicked holding the lock left the table consistent: every change is
        // one push, one assignment or one removal.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives `stream` (from `peer`) a slot: a free one, or another connection's (the module's
    /// comment says whose), which is shut down. `None` when every connection is answering a
    /// call (or the socket cannot be shared with the table).
    pub(super) fn admit(self: &Arc<Self>, stream: &TcpStream, peer: &str) -> Option<Admitted> {
        let handle = stream.try_clone().ok()?;
        let source = stream.peer_addr().ok().map(|a| a.ip());
        let mut table = self.table();
        let mut evicted = None;
        if table.slots.len() >= self.limit {
            let victim = table.victim(Instant::now())?;
            let slot = table.slots.swap_remove(victim);
            // Its reader, blocked on the socket, sees the end of the stream.
            let _ = slot.stream.shutdown(Shutdown::Both);
            evicted = Some(slot.peer);
        }
        let id = table.next_id;
        table.next_id += 1;
        table.slots.push(Slot {
            id,
            peer: peer.to_string(),
            source,
            stream: handle,
            state: State::Idle(Instant::now()),
        });
        let pace = Pace {
            connections: self.clone(),
            id,
            stream: stream.try_clone().ok(),
        };
        Some(Admitted { pace, evicted })
    }

    /// Frees connection `id`'s slot (if it was not given to another already).
    fn close(&self, id: u64) {
        self.table().slots.retain(|s| s.id != id);
    }

    /// Connection `id`'s state, with `f` applied to it; `None` if it was closed for another.
    fn update(&self, id: u64, f: impl FnOnce(&mut State)) -> Option<State> {
        let mut table = self.table();
        let slot = table.slots.iter_mut().find(|s| s.id == id)?;
        f(&mut slot.state);
        Some(slot.state)
    }
}

impl Table {
    /// The slot a newcomer takes at `now`, if any may be taken: among the connections of the
    /// source holding the most slots, the one whose [`State::eviction_rank`] is greatest.
    fn victim(&self, now: Instant) -> Option<usize> {
        let held =
            |source: Option<IpAddr>| self.slots.iter().filter(|s| s.source == source).count();
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some(((held(s.source), s.state.eviction_rank(now)?), i)))
            .max_by_key(|&(rank, _)| rank)
            .map(|(_, i)| i)
    }
}

/// The pacing of one connection's calls: its reader reports each call's start and end, and is
/// told how long it may still wait for the rest of a call. Frees the slot when dropped.
pub(super) struct Pace {
    connections: Arc<Connections>,
    id: u64,
    /// The socket whose read timeout carries the deadline (`None`: the clone failed, and the
    /// deadline is checked between reads only).
    stream: Option<TcpStream>,
}

impl Pace {
    /// The first bytes of a call have arrived. An error when the connection was closed for a
    /// newcomer meanwhile.
    pub(super) fn call_begun(&self) -> io::Result<()> {
        let now = Instant::now();
        self.connections
            .update(self.id, |s| {
                if let State::Idle(_) = s {
                    *s = State::Reading(now);
                }
            })
            .map(|_| ())
            .ok_or_else(closed_for_another)
    }

    /// The call has arrived whole: it is being answered, and its slot is no newcomer's. An
    /// error when the connection was closed for a newcomer meanwhile.
    pub(super) fn call_read(&self) -> io::Result<()> {
        self.connections
            .update(self.id, |s| {
                if let State::Reading(begun) = *s {
                    *s = State::Answering(begun);
                }
            })
            .map(|_| ())
            .ok_or_else(closed_for_another)
    }

    /// Before a read of the rest of a call: sets the socket's read timeout to what is left of
    /// the call's deadline, or fails once it has passed.
    pub(super) fn before_read(&self) -> io::Result<()> {
        let Some(State::Reading(begun)) = self.connections.update(self.id, |_| {}) else {
            return Ok(());
        };
        let deadline = self.connections.call_deadline;
        match deadline.checked_sub(begun.elapsed()) {
            Some(left) if !left.is_zero() => match &self.stream {
                Some(stream) => stream.set_read_timeout(Some(left)),
                None => Ok(()),
            },
            _ => Err(self.too_slow()),
        }
    }

    /// The error of a call that did not arrive within the deadline.
    pub(super) fn too_slow(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "a call did not arrive whole within {:?} of its first byte (thrift::LIMITS)",
                self.connections.call_deadline
            ),
        )
    }

    /// The call is answered: the connection is idle, and waits for its next call for as long
    /// as it takes.
    pub(super) fn call_answered(&self) {
        let now = Instant::now();
        let _ = self.connections.update(self.id, |s| *s = State::Idle(now));
        if let Some(stream) = &self.stream {
            let _ = stream.set_read_timeout(None);
        }
    }
}

impl Drop for Pace {
    fn drop(&mut self) {
        self.connections.close(self.id);
    }
}

/// What a reader is told when its connection was closed to make room for a newcomer.
fn closed_for_another() -> io::Error {
    io::Error::other("closed to make room for another connection")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A table of `slots` connections, and `count` loopback TCP connections to admit to it,
    /// each as both its ends: the client's, the server's.
    fn table_and_ends(
        slots: usize,
        count: usize,
    ) -> (Arc<Connections>, Vec<(TcpStream, TcpStream)>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let table = Connections::new(&Limits {
            connections: slots,
            ..super::super::LIMITS
        });
        let connection = |_| {
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            (client, listener.accept().unwrap().0)
        };
        (table, (0..count).map(connection).collect())
    }

    /// Admits `name` on `end`'s server side, which must take a free slot (`evicted` `None`) or
    /// the slot of the connection named `evicted`.
    fn admit(
        table: &Arc<Connections>,
        end: &(TcpStream, TcpStream),
        name: &str,
        evicted: Option<&str>,
    ) -> Admitted {
        let admitted = table.admit(&end.1, name).unwrap();
        assert_eq!(admitted.evicted.as_deref(), evicted, "{name}");
        admitted
    }

    #[test]
    fn a_newcomer_takes_the_longest_idle_slot_never_one_answering() {
        let (table, ends) = table_and_ends(2, 5);
        let a = admit(&table, &ends[0], "a", None);
        a.pace.call_begun().unwrap();
        let b = admit(&table, &ends[1], "b", None);
        // Full: `a`, the older, is reading a call that began just now; `b`, idle, goes.
        let c = admit(&table, &ends[2], "c", Some("b"));
        let mut byte = [0];
        assert_eq!(
            (&ends[1].0).read(&mut byte).unwrap(),
            0,
            "b's socket is shut"
        );
        assert!(b.pace.call_begun().is_err(), "b's reader is told");
        drop(b);
        // Both answering calls: the next is refused.
        a.pace.call_read().unwrap();
        c.pace.call_begun().unwrap();
        c.pace.call_read().unwrap();
        assert!(table.admit(&ends[3].1, "d").is_none());
        // `a` answered its call: now it is the one idle, and it goes.
        a.pace.call_answered();
        let _e = admit(&table, &ends[4], "e", Some("a"));
    }

    /// Slow lorises that keep every slot in a partial call lose them to newcomers, the partial
    /// call begun first going first, before an idle connection unless all are fresh.
    #[test]
    fn partial_calls_lose_their_slots_the_stalled_first() {
        let (table, ends) = table_and_ends(3, 6);
        let idle = table.admit(&ends[0].1, "idle").unwrap();
        let old = table.admit(&ends[1].1, "old").unwrap();
        old.pace.call_begun().unwrap();
        let young = table.admit(&ends[2].1, "young").unwrap();
        young.pace.call_begun().unwrap();
        // Both partial calls are fresh: the idle connection goes first.
        let first = admit(&table, &ends[3], "first", Some("idle"));
        first.pace.call_begun().unwrap();
        drop(idle);
        // Once stalled, the partial call begun first goes, whatever else is there.
        std::thread::sleep(STALLED + Duration::from_millis(100));
        let _second = admit(&table, &ends[4], "second", Some("old"));
        let _third = admit(&table, &ends[5], "third", Some("young"));
    }

    /// The source holding the most slots loses one first: a lone client of another address
    /// keeps its slot while one address fills the others.
    #[test]
    fn the_source_holding_the_most_slots_gives_one_up() {
        let (table, ends) = table_and_ends(3, 5);
        // The lone client (of another address) has been idle the longest; the others are
        // partial calls.
        let lone = table.admit(&ends[0].1, "lone").unwrap();
        table.table().slots[0].source = Some(IpAddr::from([192, 0, 2, 1]));
        let mut crowd = Vec::new();
        for (i, end) in ends.iter().enumerate().skip(1) {
            let a = table.admit(&end.1, &format!("crowd{i}")).unwrap();
            if i > 2 {
                assert!(a.evicted.as_deref().unwrap().starts_with("crowd"), "{i}");
            }
            a.pace.call_begun().unwrap();
            crowd.push(a);
        }
        assert!(
            lone.pace.call_begun().is_ok(),
            "the lone client kept its slot"
        );
    }
}
