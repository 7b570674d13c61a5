//! The Thrift server's open connections and how long they may take: a table of at most
//! [`Limits::connections`] connections, each idle (between two calls) or in a call (from the
//! call's first byte to its answer). When every slot is taken, a newcomer takes the slot of the
//! connection idle the longest, which is closed, so that idle clients (a `simple_switch_CLI`
//! waiting at its prompt) never lock the control plane out; a connection in a call keeps its
//! slot, and a call must arrive whole within [`Limits::call_deadline`] of its first byte, so a
//! sender of a partial call (a slow loris) loses it. Warnings a client can cause at will go
//! through a [`Throttle`].

use std::io;
use std::net::{Shutdown, TcpStream};
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

/// One open connection.
struct Slot {
    id: u64,
    peer: String,
    /// The connection's socket, to close it for a newcomer.
    stream: TcpStream,
    state: State,
}

/// Where a connection is.
#[derive(Clone, Copy)]
enum State {
    /// Waiting for a call since then.
    Idle(Instant),
    /// Reading or answering a call whose first byte arrived then.
    InCall(Instant),
}

/// A connection that was given a slot.
pub(super) struct Admitted {
    /// Its pacing, for its reader.
    pub(super) pace: Pace,
    /// The peer of the idle connection closed to make room, if one was.
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

    /// Gives `stream` (from `peer`) a slot: a free one, or the slot of the connection idle the
    /// longest, which is shut down. `None` when every connection is in a call (or the socket
    /// cannot be shared with the table).
    pub(super) fn admit(self: &Arc<Self>, stream: &TcpStream, peer: &str) -> Option<Admitted> {
        let handle = stream.try_clone().ok()?;
        let mut table = self.table();
        let mut evicted = None;
        if table.slots.len() >= self.limit {
            let oldest = table
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| match s.state {
                    State::Idle(since) => Some((since, i)),
                    State::InCall(_) => None,
                })
                .min()?
                .1;
            let slot = table.slots.swap_remove(oldest);
            // Its reader, blocked for its next call, sees the end of the stream.
            let _ = slot.stream.shutdown(Shutdown::Both);
            evicted = Some(slot.peer);
        }
        let id = table.next_id;
        table.next_id += 1;
        table.slots.push(Slot {
            id,
            peer: peer.to_string(),
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
                    *s = State::InCall(now);
                }
            })
            .map(|_| ())
            .ok_or_else(|| io::Error::other("closed to make room for another connection"))
    }

    /// Before a read of the rest of a call: sets the socket's read timeout to what is left of
    /// the call's deadline, or fails once it has passed.
    pub(super) fn before_read(&self) -> io::Result<()> {
        let Some(State::InCall(begun)) = self.connections.update(self.id, |_| {}) else {
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

/// A warning said at most once a period, with the number held back since the last one.
pub(super) struct Throttle {
    period: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    /// At most one warning every `period`.
    pub(super) const fn new(period: Duration) -> Throttle {
        Throttle {
            period,
            state: Mutex::new((None, 0)),
        }
    }

    /// Whether a warning may be said at `now`: `Some(n)` with the `n` held back since the last
    /// one said, or `None` (this one is held back and counted).
    pub(super) fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, held) = &mut *state;
        match last {
            Some(t) if now.saturating_duration_since(*t) < self.period => {
                *held += 1;
                None
            }
            _ => {
                *last = Some(now);
                Some(std::mem::take(held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// Both ends of a loopback TCP connection: the client's, the server's.
    fn connection(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (client, listener.accept().unwrap().0)
    }

    #[test]
    fn a_newcomer_takes_the_longest_idle_slot_never_one_in_a_call() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let table = Connections::new(&Limits {
            connections: 2,
            ..super::super::LIMITS
        });
        let ends: Vec<_> = (0..5).map(|_| connection(&listener)).collect();
        let a = table.admit(&ends[0].1, "a").unwrap();
        a.pace.call_begun().unwrap();
        let b = table.admit(&ends[1].1, "b").unwrap();
        assert_eq!((a.evicted.as_deref(), b.evicted.as_deref()), (None, None));
        // Full: `a`, the older, is in a call; `b` is closed for the newcomer.
        let c = table.admit(&ends[2].1, "c").unwrap();
        assert_eq!(c.evicted.as_deref(), Some("b"));
        let mut byte = [0];
        assert_eq!(
            (&ends[1].0).read(&mut byte).unwrap(),
            0,
            "b's socket is shut"
        );
        assert!(b.pace.call_begun().is_err(), "b's reader is told");
        drop(b);
        // Both in a call: the next is refused.
        c.pace.call_begun().unwrap();
        assert!(table.admit(&ends[3].1, "d").is_none());
        // `a` answered its call: now it is the one idle, and it goes.
        a.pace.call_answered();
        let e = table.admit(&ends[4].1, "e").unwrap();
        assert_eq!(e.evicted.as_deref(), Some("a"));
    }

    #[test]
    fn a_throttle_says_one_warning_a_period_and_counts_the_rest() {
        let throttle = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(throttle.admit(t0), Some(0));
        assert_eq!(throttle.admit(t0 + Duration::from_secs(1)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(9)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(throttle.admit(t0 + Duration::from_secs(11)), None);
        assert_eq!(throttle.admit(t0 + Duration::from_secs(25)), Some(1));
    }
}
