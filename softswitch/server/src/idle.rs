//! Idle-timeout notifications, as the specification's "Table Idle Timeout Notification" section
//! has them. The switch's tables keep each entry's last hit (the data path marks it) and its
//! idle timeout; here, on the engine thread and never on a packet's way, the tables whose
//! P4Info says `NOTIFY_CONTROL` are swept every [`SWEEP_INTERVAL`] while one of their entries
//! has a timeout (no entry with one, no sweep and no wake-up). The entries that went their
//! timeout without a hit since their last hit or their last notification are notified to the
//! primary, one `IdleTimeoutNotification` per table and sweep (split past [`MAX_ENTRIES`]),
//! and their count starts again: an entry that stays idle is notified again a timeout later,
//! until it is hit or deleted. So a notification comes between the timeout and the timeout
//! plus one interval after the last hit (BMv2 sweeps every second).

use std::time::{Duration, Instant, SystemTime};

use p4runtime::p4::config::v1::{self as p4i, P4Info};
use p4runtime::p4::v1 as p4v1;

use super::entities;
use super::pipeline::{Index, Pipeline};

/// How often the tables are swept while an entry has an idle timeout.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// Table entries one notification carries at most (about 60 bytes each); a table with more idle
/// entries in one sweep gets several.
pub const MAX_ENTRIES: usize = 1024;

/// The tables swept for idle entries and when next.
#[derive(Debug)]
pub struct IdleSweep {
    /// The program's tables whose P4Info says `NOTIFY_CONTROL`.
    tables: Vec<usize>,
    /// When the next sweep is due, if an entry then has a timeout.
    next: Instant,
}

impl IdleSweep {
    /// The tables of `info` that support idle timeouts, to be swept from `now` on.
    pub fn new(info: &P4Info, index: &Index, now: Instant) -> Self {
        let tables = info
            .tables
            .iter()
            .filter(|t| supports_idle_timeout(t))
            .filter_map(|t| index.tables.get(&t.preamble.as_ref()?.id).copied())
            .collect();
        IdleSweep { tables, next: now }
    }

    /// When the next sweep is due, while an entry of the swept tables has an idle timeout.
    pub fn next_deadline(&self, switch: &softswitch_core::switch::Switch) -> Option<Instant> {
        self.tables
            .iter()
            .any(|&t| switch.has_idle_timeouts(t).unwrap_or(false))
            .then_some(self.next)
    }
}

/// Whether P4Info table `t` supports idle timeouts (`NOTIFY_CONTROL`).
pub fn supports_idle_timeout(t: &p4i::Table) -> bool {
    t.idle_timeout_behavior == p4i::table::IdleTimeoutBehavior::NotifyControl as i32
}

/// If a sweep is due at `now`, sweeps: the notifications of the entries idle past their timeout
/// (none for a table without any), whose counts start again.
pub fn due(p: &mut Pipeline, now: Instant) -> Vec<p4v1::IdleTimeoutNotification> {
    if p.idle.next_deadline(&p.switch).is_none_or(|at| at > now) {
        return Vec::new();
    }
    p.idle.next = now + SWEEP_INTERVAL;
    let timestamp = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let mut notifications = Vec::new();
    for i in 0..p.idle.tables.len() {
        let table = p.idle.tables[i];
        let idle = p.switch.sweep_idle(table).unwrap_or_default();
        let entries: Vec<p4v1::TableEntry> = idle
            .into_iter()
            .filter_map(|handle| entities::idle_entry(p, table, handle))
            .collect();
        if !entries.is_empty() {
            tracing::debug!(
                table = p.switch.program().tables[table].name,
                entries = entries.len(),
                "idle-timeout notification"
            );
        }
        for chunk in entries.chunks(MAX_ENTRIES) {
            notifications.push(p4v1::IdleTimeoutNotification {
                table_entry: chunk.to_vec(),
                timestamp,
            });
        }
    }
    notifications
}
