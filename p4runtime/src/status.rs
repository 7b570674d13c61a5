//! The P4Runtime error convention (specification section "Error Reporting Messages"): a Write
//! whose updates did not all succeed (or a Read whose requests did not) answers with gRPC code
//! `UNKNOWN`, and its `grpc-status-details-bin` carries a `google.rpc.Status` whose `details`
//! hold one `p4.v1.Error` per update (or request), in request order (`OK` for the ones that
//! succeeded).
//!
//! gRPC carries those details in an HTTP/2 trailer, and standard clients refuse large ones:
//! grpcio (gRPC C-core) refuses trailers past 8 KiB at random and past 16 KiB always, grpc-java
//! past 8 KiB, and the client then sees RESOURCE_EXHAUSTED and none of the statuses. So the
//! details are kept within [`DETAILS_BUDGET`]: a failed update's message is cut to
//! [`MAX_UPDATE_MESSAGE`] bytes; when the messages do not all fit, the later ones are left out
//! (every update keeps its code, one `p4.v1.Error` each, as the specification asks); and a batch
//! longer than [`REPORTED_UPDATES`], whose codes alone may not fit, gets the errors of as many
//! updates from its start as fit, the status message saying how many and where the first
//! failure past them is.

use prost::{Message as _, Name as _};

use crate::google::rpc;
use crate::p4::v1::Error;

/// The most bytes the encoded `google.rpc.Status` of a batch takes. The trailer carries it in
/// base64 (4/3 of it: 6.7 KiB), so with the other trailers (grpc-status, a grpc-message of at
/// most a few hundred bytes) it stays under the 8 KiB that every standard gRPC client accepts
/// (6 KiB did not: grpcio counts the base64 text and refused 8.4 KiB of trailers).
pub const DETAILS_BUDGET: usize = 5 * 1024;

/// The most bytes of a failed update's message kept (cut at a character, marked with `…`).
pub const MAX_UPDATE_MESSAGE: usize = 200;

/// The most bytes of the message of a whole request's error (a device config's diagnostics,
/// say) kept: gRPC carries it in the `grpc-message` trailer, percent-encoded (up to three times
/// its size), under the same 8 KiB every standard client accepts.
pub const MAX_STATUS_MESSAGE: usize = 2048;

/// The encoded size of the longest message [`batch_result`] writes at the top of the status,
/// reserved in [`DETAILS_BUDGET`].
const TOP_MESSAGE: usize = 256;

/// The encoded size of one update's error without a message, in the details: a `details` field
/// holding an `Any` (the type URL and an `Error` with a canonical code below 128).
const BARE_ERROR: usize = 39;

/// Updates per batch whose errors always fit [`DETAILS_BUDGET`], each with its code (124): a
/// client that wants every update's status sends batches at most this long.
pub const REPORTED_UPDATES: usize = (DETAILS_BUDGET - TOP_MESSAGE) / BARE_ERROR;

/// The `p4.v1.Error` of an update that succeeded.
pub fn update_ok() -> Error {
    Error {
        canonical_code: tonic::Code::Ok as i32,
        ..Default::default()
    }
}

/// The `p4.v1.Error` of an update that failed with `code` and `message` (cut to
/// [`MAX_UPDATE_MESSAGE`] bytes).
pub fn update_error(code: tonic::Code, message: impl Into<String>) -> Error {
    Error {
        canonical_code: code as i32,
        message: shortened(message.into(), MAX_UPDATE_MESSAGE),
        space: String::new(),
        code: 0,
        details: None,
    }
}

/// The message of a whole request's error, cut to [`MAX_STATUS_MESSAGE`] bytes.
pub fn status_message(message: impl Into<String>) -> String {
    shortened(message.into(), MAX_STATUS_MESSAGE)
}

/// `text` cut to at most `max` bytes at a character boundary, ending in `…` when cut.
fn shortened(mut text: String, max: usize) -> String {
    const MARK: &str = "…";
    if text.len() <= max {
        return text;
    }
    let mut end = max - MARK.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MARK);
    text
}

/// An update's error packed for the details.
fn packed(error: &Error) -> prost_types::Any {
    prost_types::Any {
        type_url: Error::type_url(),
        value: error.encode_to_vec(),
    }
}

/// The bytes `error` adds to the details (its field tag, length and `Any`).
fn detail_len(error: &Error) -> usize {
    let len = packed(error).encoded_len();
    1 + prost::length_delimiter_len(len) + len
}

/// The bytes `error` adds to the details without its message.
fn bare_len(error: &Error) -> usize {
    detail_len(&Error {
        message: String::new(),
        ..error.clone()
    })
}

/// The gRPC status of a batch with per-element results (`what` names the elements in the
/// message: "updates", "requests"): `Ok(())` if every one succeeded, else `UNKNOWN` with the
/// elements' [`Error`]s in the details, within [`DETAILS_BUDGET`] (see the module's comment).
pub fn batch_result(what: &str, mut updates: Vec<Error>) -> Result<(), tonic::Status> {
    let failed = |e: &Error| e.canonical_code != tonic::Code::Ok as i32;
    let failures = updates.iter().filter(|e| failed(e)).count();
    if failures == 0 {
        return Ok(());
    }
    let total = updates.len();
    let room = DETAILS_BUDGET - TOP_MESSAGE;
    let mut message = format!("{failures} of {total} {what} failed");
    let bare: usize = updates.iter().map(bare_len).sum();
    if bare <= room {
        // Every element keeps its code; messages stay while they fit, in order.
        let mut used = bare;
        let mut omitted = 0;
        for e in updates.iter_mut().filter(|e| !e.message.is_empty()) {
            let extra = detail_len(e) - bare_len(e);
            if used + extra <= room {
                used += extra;
            } else {
                e.message.clear();
                omitted += 1;
            }
        }
        if omitted > 0 {
            message += &format!(
                " (the messages of the last {omitted} left out to fit gRPC's metadata limit)"
            );
        }
    } else {
        // Not even the codes fit: the errors of the first elements, as many as fit.
        let mut used = 0;
        let kept = updates
            .iter()
            .map(bare_len)
            .take_while(|len| {
                used += len;
                used <= room
            })
            .count();
        let first_unreported = updates[kept..]
            .iter()
            .position(failed)
            .map(|i| kept + i + 1);
        updates.truncate(kept);
        for e in &mut updates {
            e.message.clear();
        }
        message += &format!(
            "; the details hold the first {kept} of them only (gRPC's metadata limit: send at most {REPORTED_UPDATES} per batch to see each status)"
        );
        if let Some(n) = first_unreported {
            message += &format!("; the first failure past them is number {n}");
        }
    }
    let details = rpc::Status {
        code: tonic::Code::Unknown as i32,
        message: message.clone(),
        details: updates.iter().map(packed).collect(),
    };
    Err(tonic::Status::with_details(
        tonic::Code::Unknown,
        message,
        details.encode_to_vec().into(),
    ))
}

/// The per-update errors a status carries in its details (empty when it carries none, as for
/// an error of the whole request). Details that are not `p4.v1.Error` are skipped.
pub fn update_errors(status: &tonic::Status) -> Vec<Error> {
    let Ok(details) = rpc::Status::decode(status.details()) else {
        return Vec::new();
    };
    details
        .details
        .iter()
        .filter(|any| any.type_url == Error::type_url())
        .filter_map(|any| Error::decode(any.value.as_slice()).ok())
        .collect()
}

/// The canonical name of a gRPC code, as the P4Runtime specification writes it.
pub fn code_name(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::Unknown => "UNKNOWN",
        tonic::Code::InvalidArgument => "INVALID_ARGUMENT",
        tonic::Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::PermissionDenied => "PERMISSION_DENIED",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::FailedPrecondition => "FAILED_PRECONDITION",
        tonic::Code::Aborted => "ABORTED",
        tonic::Code::OutOfRange => "OUT_OF_RANGE",
        tonic::Code::Unimplemented => "UNIMPLEMENTED",
        tonic::Code::Internal => "INTERNAL",
        tonic::Code::Unavailable => "UNAVAILABLE",
        tonic::Code::DataLoss => "DATA_LOSS",
        tonic::Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_ok_is_ok() {
        assert!(batch_result("updates", vec![update_ok(), update_ok()]).is_ok());
        assert!(batch_result("updates", Vec::new()).is_ok());
    }

    #[test]
    fn a_failed_update_makes_unknown_with_every_update_in_order() {
        let status = batch_result(
            "updates",
            vec![
                update_ok(),
                update_error(tonic::Code::AlreadyExists, "entry exists"),
            ],
        )
        .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unknown);
        let errors = update_errors(&status);
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].canonical_code, tonic::Code::Ok as i32);
        assert_eq!(errors[1].canonical_code, tonic::Code::AlreadyExists as i32);
        assert_eq!(errors[1].message, "entry exists");
        // The type URL the official clients look for.
        assert_eq!(Error::type_url(), "type.googleapis.com/p4.v1.Error");
    }

    /// The encoded details of a batch's status, and its errors.
    fn details(status: &tonic::Status) -> (usize, Vec<Error>) {
        (status.details().len(), update_errors(status))
    }

    fn failing(n: usize, message: &str) -> Vec<Error> {
        (0..n)
            .map(|_| update_error(tonic::Code::InvalidArgument, message))
            .collect()
    }

    #[test]
    fn a_bare_error_takes_what_the_budget_reserves() {
        let worst = update_error(tonic::Code::Unauthenticated, "");
        assert_eq!(bare_len(&worst), BARE_ERROR);
        assert!(bare_len(&update_ok()) <= BARE_ERROR);
        assert_eq!(REPORTED_UPDATES, 124);
    }

    #[test]
    fn messages_are_cut_at_a_character() {
        let cut = update_error(tonic::Code::Internal, "é".repeat(300)).message;
        assert!(
            cut.len() <= MAX_UPDATE_MESSAGE && cut.ends_with('…'),
            "{cut}"
        );
        assert_eq!(
            update_error(tonic::Code::Internal, "short").message,
            "short"
        );
    }

    #[test]
    fn a_small_batch_keeps_every_message() {
        let status = batch_result("updates", failing(3, &"x".repeat(150))).unwrap_err();
        let (_, errors) = details(&status);
        assert_eq!(errors.len(), 3);
        assert!(errors.iter().all(|e| e.message.len() == 150));
        assert_eq!(status.message(), "3 of 3 updates failed");
    }

    #[test]
    fn the_messages_that_do_not_fit_are_left_out_and_every_code_stays() {
        let mut updates = failing(100, &"y".repeat(500));
        updates[0] = update_ok();
        let status = batch_result("updates", updates).unwrap_err();
        let (len, errors) = details(&status);
        assert!(len <= DETAILS_BUDGET, "{len}");
        assert_eq!(errors.len(), 100);
        assert_eq!(errors[0].canonical_code, tonic::Code::Ok as i32);
        assert!(errors[1..]
            .iter()
            .all(|e| e.canonical_code == tonic::Code::InvalidArgument as i32));
        // The first messages stay (cut), the later ones are left out.
        assert_eq!(errors[1].message.len(), MAX_UPDATE_MESSAGE);
        assert!(errors.last().unwrap().message.is_empty());
        assert!(
            status
                .message()
                .contains("left out to fit gRPC's metadata limit"),
            "{}",
            status.message()
        );
        // A batch of REPORTED_UPDATES keeps every code, whatever its messages.
        let status = batch_result("updates", failing(REPORTED_UPDATES, &"w".repeat(500)));
        let (len, errors) = details(&status.unwrap_err());
        assert!(len <= DETAILS_BUDGET, "{len}");
        assert_eq!(errors.len(), REPORTED_UPDATES);
    }

    #[test]
    fn a_long_batch_reports_its_first_updates_and_where_the_next_failure_is() {
        // The review's batch: 500 failing updates with long messages made ~33 KB of details.
        let status = batch_result("updates", failing(500, &"z".repeat(60))).unwrap_err();
        let (len, errors) = details(&status);
        assert!(len <= DETAILS_BUDGET, "{len}");
        assert!(errors.len() >= REPORTED_UPDATES, "{}", errors.len());
        assert!(status.message().starts_with("500 of 500 updates failed"));
        assert!(
            status.message().contains(&format!(
                "the first failure past them is number {}",
                errors.len() + 1
            )),
            "{}",
            status.message()
        );
        // Failures only past the reported ones are still pointed at.
        let mut updates = vec![update_ok(); 1000];
        updates[700] = update_error(tonic::Code::AlreadyExists, "exists");
        let status = batch_result("updates", updates).unwrap_err();
        assert!(
            status.message().contains("number 701"),
            "{}",
            status.message()
        );
        assert!(status.details().len() <= DETAILS_BUDGET);
    }

    #[test]
    fn a_status_without_details_has_no_update_errors() {
        assert!(update_errors(&tonic::Status::permission_denied("not primary")).is_empty());
    }
}
