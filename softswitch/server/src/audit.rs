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
//! The log takes at most [`LINES_PER_SECOND`] audit lines a second of each surface (a fixed
//! window of one second, so that a flood on one surface — the unauthenticated Thrift port, say
//! — cannot push another's lines out): past them lines are counted, not written, and the
//! surface's next line written is preceded by `audit: K thrift audit lines suppressed`. The
//! counts include every write, written or suppressed; [`report`] writes them (with any
//! suppressed lines not yet said) to the log, which `softswitch run` does on SIGUSR1 and at
//! exit.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use softswitch_device::throttle::Throttle;

/// The most audit lines of one surface written a second; the others are counted.
pub const LINES_PER_SECOND: u32 = 20;

/// The longest name, peer or error text an audit line carries, in characters (a client
/// chooses them): longer ones are cut, with `…`.
const MAX_FIELD_CHARS: usize = 200;

wire::named_enum! {
    /// Where a write came from (its number indexes the counts), named as audit lines name it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Surface {
        /// The P4Runtime service (Write, SetForwardingPipelineConfig).
        P4Runtime => "p4runtime",
        /// softswitch's Queues service (SetQueue).
        Queues => "queues",
        /// BMv2's runtime Thrift services (`simple_switch_CLI`).
        Thrift => "thrift",
    }
}

/// Writes that succeeded and failed, per surface (indexed by [`Surface`]).
static RESULTS: [[AtomicU64; 2]; Surface::COUNT] =
    [const { [const { AtomicU64::new(0) }; 2] }; Surface::COUNT];
/// Lines not written since the process began, per surface.
static SUPPRESSED: [AtomicU64; Surface::COUNT] = [const { AtomicU64::new(0) }; Surface::COUNT];
/// The rate limit of audit lines, per surface.
static LINES: [Throttle; Surface::COUNT] =
    [const { Throttle::new(Duration::from_secs(1), LINES_PER_SECOND) }; Surface::COUNT];

/// Records one write from `peer` on `surface`: `op` (what was asked: `INSERT`,
/// `bm_mt_add_entry`) on `what` (what it changes: `table_entry MyIngress.ipv4_lpm`, made only
/// when the line is written), ended with `result` (`Err` carries the error's text). Counted
/// always, written within the surface's rate limit.
pub fn record(
    surface: Surface,
    peer: &str,
    op: &str,
    what: impl FnOnce() -> String,
    result: Result<(), String>,
) {
    let index = surface as usize;
    RESULTS[index][usize::from(result.is_err())].fetch_add(1, Ordering::Relaxed);
    let Some(held) = LINES[index].admit(Instant::now()) else {
        SUPPRESSED[index].fetch_add(1, Ordering::Relaxed);
        return;
    };
    say_suppressed(surface, held);
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

/// Writes that `held` lines of `surface` were suppressed since that was last said, if any were.
fn say_suppressed(surface: Surface, held: u64) {
    if held > 0 {
        tracing::info!(
            "audit: {held} {} audit lines suppressed (at most {LINES_PER_SECOND} a second)",
            surface.name()
        );
    }
}

/// The audit counts so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    /// Per surface: writes that succeeded and that failed.
    results: [(u64, u64); Surface::COUNT],
    /// Audit lines not written (the rate limits'), since the process began.
    suppressed: u64,
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
fn counts() -> Counts {
    let load = |i: usize, r: usize| RESULTS[i][r].load(Ordering::Relaxed);
    Counts {
        results: Surface::ALL.map(|s| (load(s as usize, 0), load(s as usize, 1))),
        suppressed: SUPPRESSED.iter().map(|s| s.load(Ordering::Relaxed)).sum(),
    }
}

/// Writes the suppressed lines not yet said and the counts to the log:
/// `audit counts: p4runtime 3 ok 1 failed, ...`.
pub fn report() {
    for surface in Surface::ALL {
        say_suppressed(surface, LINES[surface as usize].take_held());
    }
    tracing::info!("audit counts: {}", counts());
}

/// Runs the gRPC write `write` to its end on a task of its own and records it ([`record`],
/// from `peer` on `surface`), even if the request that asked for it is canceled meanwhile: a
/// change handed to the engine is made whatever becomes of the request, so it is recorded
/// whatever becomes of it too.
pub async fn grpc_write<T: Send + 'static>(
    surface: Surface,
    peer: String,
    op: &'static str,
    what: impl FnOnce() -> String + Send + 'static,
    write: impl std::future::Future<Output = Result<T, tonic::Status>> + Send + 'static,
) -> Result<T, tonic::Status> {
    tokio::spawn(async move {
        let result = write.await;
        record(surface, &peer, op, what, grpc_result(&result));
        result
    })
    .await
    .map_err(|e| tonic::Status::internal(format!("{op}: {e}")))?
}

/// Who sent a gRPC request, and its message: the sender is the subject of the TLS client
/// certificate the request came with, and the address (`CN=controller (10.0.0.5:41234)`), or
/// the address alone.
pub fn grpc_peer_and_message<T>(request: tonic::Request<T>) -> (String, T) {
    let addr = request
        .remote_addr()
        .map_or("an unknown address".to_string(), |a| a.to_string());
    let subject = request
        .peer_certs()
        .and_then(|certs| tlsfiles::subject(certs.first()?));
    let peer = match subject {
        Some(subject) => format!("{subject} ({addr})"),
        None => addr,
    };
    (peer, request.into_inner())
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
pub(crate) struct Field<'a>(&'a str);

impl Field<'_> {
    /// As much of `value` as a field shows (and one character more, so that the field still
    /// says it was cut), taken without writing the rest anywhere.
    pub(crate) fn cut(value: &dyn fmt::Display) -> String {
        /// Keeps the first characters written to it, refusing the rest.
        struct Prefix(String, usize);
        impl fmt::Write for Prefix {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                for c in s.chars() {
                    if self.1 == 0 {
                        return Err(fmt::Error);
                    }
                    self.0.push(c);
                    self.1 -= 1;
                }
                Ok(())
            }
        }
        let mut prefix = Prefix(String::new(), MAX_FIELD_CHARS + 1);
        // An error only says the value was longer.
        let _ = fmt::write(&mut prefix, format_args!("{value}"));
        prefix.0
    }
}

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
        let cut = Field::cut(&long);
        assert_eq!(cut.chars().count(), MAX_FIELD_CHARS + 1);
        assert_eq!(Field(&cut).to_string(), Field(&long).to_string());
        assert_eq!(Field::cut(&-7i16), "-7");
    }
}
