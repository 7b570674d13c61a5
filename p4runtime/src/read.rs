//! A Read's answer, drained: the entities of every message the switch streams, in order.

use crate::p4::v1::{entity, ReadResponse};

/// Every entity `answer` streams, and the status that ended it early, if one did (the entities
/// before it are kept). Unbounded in entities and time: for a server the caller trusts (the
/// tests' own switch); p4client's reads of a switch bound both.
pub async fn drain(
    mut answer: tonic::Streaming<ReadResponse>,
) -> (Vec<entity::Entity>, Option<tonic::Status>) {
    let mut entities = Vec::new();
    loop {
        match answer.message().await {
            Ok(Some(message)) => {
                entities.extend(message.entities.into_iter().filter_map(|e| e.entity))
            }
            Ok(None) => return (entities, None),
            Err(status) => return (entities, Some(status)),
        }
    }
}
