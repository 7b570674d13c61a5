//! The P4Runtime error convention (specification section "Error Reporting Messages"): a Write
//! whose updates did not all succeed (or a Read whose requests did not) answers with gRPC code
//! `UNKNOWN`, and its `grpc-status-details-bin` carries a `google.rpc.Status` whose `details`
//! hold one `p4.v1.Error` per update (or request), in request order (`OK` for the ones that
//! succeeded).

use prost::{Message as _, Name as _};

use crate::google::rpc;
use crate::p4::v1::Error;

/// The `p4.v1.Error` of an update that succeeded.
pub fn update_ok() -> Error {
    Error {
        canonical_code: tonic::Code::Ok as i32,
        ..Default::default()
    }
}

/// The `p4.v1.Error` of an update that failed with `code` and `message`.
pub fn update_error(code: tonic::Code, message: impl Into<String>) -> Error {
    Error {
        canonical_code: code as i32,
        message: message.into(),
        space: String::new(),
        code: 0,
        details: None,
    }
}

/// The gRPC status of a batch with per-element results (`what` names the elements in the
/// message: "updates", "requests"): `Ok(())` if every one succeeded, else `UNKNOWN` with every
/// one's [`Error`] in the details.
pub fn batch_result(what: &str, updates: Vec<Error>) -> Result<(), tonic::Status> {
    let failed = updates
        .iter()
        .filter(|e| e.canonical_code != tonic::Code::Ok as i32)
        .count();
    if failed == 0 {
        return Ok(());
    }
    let message = format!("{failed} of {} {what} failed", updates.len());
    let details = rpc::Status {
        code: tonic::Code::Unknown as i32,
        message: message.clone(),
        details: updates
            .iter()
            .map(|e| prost_types::Any {
                type_url: Error::type_url(),
                value: e.encode_to_vec(),
            })
            .collect(),
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

    #[test]
    fn a_status_without_details_has_no_update_errors() {
        assert!(update_errors(&tonic::Status::permission_denied("not primary")).is_empty());
    }
}
