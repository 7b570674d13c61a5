//! The audit trail of control writes: every change a client asks of the switch — a P4Runtime
//! Write's update or SetForwardingPipelineConfig, a Queues SetQueue, a mutating call of BMv2's
//! Thrift API — is said once in the log, as
//!
//! `audit: SURFACE PEER OP WHAT: RESULT`
//!
//! (`audit: p4runtime CN=controller (10.0.0.5:41234) INSERT table_entry MyIngress.ipv4_lpm:
//! OK`), and counted per surface and result. PEER is the TLS client certificate's subject with
//! the address, or the address alone; RESULT is `OK` or the error (a gRPC code, a Thrift
//! exception). This module is the one place that knows the format; the servers call
//! [`record`].
//!
//! The log takes at most [`LINES_PER_SECOND`] audit lines a second: past them lines are
//! counted, not written, and the next line written is preceded by `audit: K audit lines
//! suppressed`. The counts ([`counts`]) include every write, written or suppressed;
//! [`report`] writes them (with any suppressed lines not yet said) to the log, which
//! `softswitch run` does on SIGUSR1 and at exit.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use softswitch_device::throttle::Throttle;

/// The most audit lines written a second; the others are counted ([`Counts::suppressed`]).
pub const LINES_PER_SECOND: u32 = 20;

/// The longest name, peer or error text an audit line carries, in characters (a client
/// chooses them): longer ones are cut, with `…`.
const MAX_FIELD_CHARS: usize = 200;

/// Where a write came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    /// The P4Runtime service (Write, SetForwardingPipelineConfig).
    P4Runtime,
    /// softswitch's Queues service (SetQueue).
    Queues,
    /// BMv2's runtime Thrift services (`simple_switch_CLI`).
    Thrift,
}

impl Surface {
    const ALL: [Surface; 3] = [Surface::P4Runtime, Surface::Queues, Surface::Thrift];

    fn name(self) -> &'static str {
        match self {
            Surface::P4Runtime => "p4runtime",
            Surface::Queues => "queues",
            Surface::Thrift => "thrift",
        }
    }
}

/// Writes that succeeded and failed, per surface (in [`Surface::ALL`]'s order).
static RESULTS: [[AtomicU64; 2]; 3] = [const { [const { AtomicU64::new(0) }; 2] }; 3];
/// Lines not written since the process began.
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);
/// Lines not written and not yet said to be.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The rate limit of audit lines.
static LINES: Throttle = Throttle::new(Duration::from_secs(1), LINES_PER_SECOND);

/// Records one write from `peer` on `surface`: `op` (what was asked: `INSERT`,
/// `bm_mt_add_entry`) on `what` (what it changes: `table_entry MyIngress.ipv4_lpm`, made only
/// when the line is written), ended with `result` (`Err` carries the error's text). Counted
/// always, written within the rate limit.
pub fn record(
    surface: Surface,
    peer: &str,
    op: &str,
    what: impl FnOnce() -> String,
    result: Result<(), String>,
) {
    let index = Surface::ALL
        .iter()
        .position(|s| *s == surface)
        .expect("every surface is in ALL");
    RESULTS[index][usize::from(result.is_err())].fetch_add(1, Ordering::Relaxed);
    if LINES.admit(Instant::now()).is_none() {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
        PENDING.fetch_add(1, Ordering::Relaxed);
        return;
    }
    say_suppressed();
    tracing::info!(
        "audit: {} {} {} {}: {}",
        surface.name(),
        Field(peer),
        Field(op),
        Field(&what()),
        match result {
            Ok(()) => "OK".to_string(),
            Err(e) => Field(&e).to_string(),
        }
    );
}

/// Writes how many lines were suppressed since that was last said, if any were.
fn say_suppressed() {
    let held = PENDING.swap(0, Ordering::Relaxed);
    if held > 0 {
        tracing::info!(
            "audit: {held} audit lines suppressed (at most {LINES_PER_SECOND} a second)"
        );
    }
}

/// The audit counts so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Per surface (P4Runtime, Queues, Thrift): writes that succeeded and that failed.
    pub results: [(u64, u64); 3],
    /// Audit lines not written (the rate limit's), since the process began.
    pub suppressed: u64,
}

impl Counts {
    /// The writes on `surface` that succeeded and that failed.
    pub fn of(&self, surface: Surface) -> (u64, u64) {
        let index = Surface::ALL
            .iter()
            .position(|s| *s == surface)
            .expect("every surface is in ALL");
        self.results[index]
    }
}

impl fmt::Display for Counts {
    /// `p4runtime 3 ok 1 failed, queues 0 ok 0 failed, thrift 5 ok 2 failed; 0 lines
    /// suppressed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, surface) in Surface::ALL.iter().enumerate() {
            let (ok, failed) = self.results[i];
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{} {ok} ok {failed} failed", surface.name())?;
        }
        write!(f, "; {} lines suppressed", self.suppressed)
    }
}

/// The counts of every write recorded in this process.
pub fn counts() -> Counts {
    let load = |i: usize, r: usize| RESULTS[i][r].load(Ordering::Relaxed);
    Counts {
        results: [0, 1, 2].map(|i| (load(i, 0), load(i, 1))),
        suppressed: SUPPRESSED.load(Ordering::Relaxed),
    }
}

/// Writes the suppressed lines not yet said and the counts to the log:
/// `audit counts: p4runtime 3 ok 1 failed, ...`.
pub fn report() {
    say_suppressed();
    tracing::info!("audit counts: {}", counts());
}

/// Who sent a gRPC request: the subject of the TLS client certificate it came with, and the
/// address (`CN=controller (10.0.0.5:41234)`), or the address alone.
pub fn grpc_peer<T>(request: &tonic::Request<T>) -> String {
    let addr = request
        .remote_addr()
        .map_or("an unknown address".to_string(), |a| a.to_string());
    let subject = request
        .peer_certs()
        .and_then(|certs| tlsfiles::subject(certs.first()?));
    match subject {
        Some(subject) => format!("{subject} ({addr})"),
        None => addr,
    }
}

/// The result of a gRPC write as [`record`] takes it: the error is its code as the
/// specifications name it, and its message (`INVALID_ARGUMENT: no such table`).
pub fn grpc_result<T>(result: &Result<T, tonic::Status>) -> Result<(), String> {
    match result {
        Ok(_) => Ok(()),
        Err(status) => Err(format!(
            "{}: {}",
            p4runtime::status::code_name(status.code()),
            status.message()
        )),
    }
}

/// A field of an audit line, which a client may have chosen: control characters escaped, cut
/// at [`MAX_FIELD_CHARS`], so that one line stays one line.
struct Field<'a>(&'a str);

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chars = self.0.chars();
        for c in chars.by_ref().take(MAX_FIELD_CHARS) {
            write!(f, "{}", c.escape_debug())?;
        }
        if chars.next().is_some() {
            write!(f, "…")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_s_text_stays_on_one_line_and_is_cut() {
        assert_eq!(Field("a\nb").to_string(), "a\\nb");
        let long = "x".repeat(MAX_FIELD_CHARS + 5);
        assert_eq!(
            Field(&long).to_string(),
            format!("{}…", "x".repeat(MAX_FIELD_CHARS))
        );
    }
}
