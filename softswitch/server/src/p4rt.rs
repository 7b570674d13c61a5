//! The P4Runtime service: Capabilities, Set/GetForwardingPipelineConfig, Write, Read and
//! StreamChannel, over the engine (pipeline) and the arbitration (clients).

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use p4runtime::p4::v1::{
    self as p4v1, get_forwarding_pipeline_config_request::ResponseType,
    p4_runtime_server::P4Runtime, set_forwarding_pipeline_config_request::Action as SetAction,
    stream_message_request::Update as Incoming, update::Type as UpdateType,
    write_request::Atomicity,
};
use p4runtime::status;
use tokio_stream::{wrappers::ReceiverStream, Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::arbitration::{Arbitration, StreamTx};
use super::audit::{self, Surface};
use super::engine::{self, Call as _, EngineHandle};
use super::pipeline::Compiled;
use super::{entities, packetio};

/// The P4Runtime API version the definitions come from.
pub const API_VERSION: &str = "1.5.0";

/// The largest request a client may send, in bytes (gRPC's usual default; a device config, P4
/// source or p4c's BMv2 JSON, fits: lossless.p4's JSON is about 590 KB): a larger one is refused
/// with OUT_OF_RANGE (tonic's code for it) before it is decoded.
pub const MAX_REQUEST_BYTES: usize = 4 << 20;

/// The most bytes of entities one ReadResponse carries: a larger answer is streamed in several,
/// each well under the 4 MiB that clients accept by default.
pub const MAX_READ_RESPONSE_BYTES: usize = 1 << 20;

/// The P4Runtime service of one device.
#[derive(Clone)]
pub struct P4RuntimeService {
    engine: EngineHandle,
    arbitration: Arc<Arbitration>,
    /// The config of VERIFY_AND_SAVE, waiting for COMMIT.
    saved: Arc<Mutex<Option<Compiled>>>,
    /// One compile at a time: a compile takes a thread with a large stack and the memory of a
    /// program, so concurrent SetForwardingPipelineConfig requests are refused, not stacked up.
    compiling: Arc<tokio::sync::Semaphore>,
}

impl P4RuntimeService {
    /// The service for the device behind `engine` and `arbitration`.
    pub fn new(engine: EngineHandle, arbitration: Arc<Arbitration>) -> Self {
        P4RuntimeService {
            engine,
            arbitration,
            saved: Arc::new(Mutex::new(None)),
            compiling: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }

    /// Checks that a Write or SetForwardingPipelineConfig may change the device, in the
    /// specification's order: device and role (NOT_FOUND), then primary.
    fn check_writer(
        &self,
        device_id: u64,
        role: &str,
        role_id: u64,
        election_id: Option<p4v1::Uint128>,
    ) -> Result<(), Status> {
        self.arbitration.check_device(device_id)?;
        if !role.is_empty() || role_id != 0 {
            return Err(unknown_role());
        }
        self.arbitration.check_primary(device_id, election_id)
    }

    /// Does what a SetForwardingPipelineConfig request asks.
    #[allow(deprecated)] // role_id: a role named by its deprecated id is unknown too.
    async fn set_pipeline(
        &self,
        req: p4v1::SetForwardingPipelineConfigRequest,
    ) -> Result<(), Status> {
        self.check_writer(req.device_id, &req.role, req.role_id, req.election_id)?;
        let action = SetAction::try_from(req.action).unwrap_or(SetAction::Unspecified);
        tracing::debug!(action = action.as_str_name(), "SetForwardingPipelineConfig");
        let config = || {
            req.config
                .clone()
                .ok_or_else(|| Status::invalid_argument("the request has no config"))
        };
        match action {
            SetAction::Verify => {
                compile(&self.compiling, config()?).await?;
            }
            SetAction::VerifyAndSave => {
                let compiled = compile(&self.compiling, config()?).await?;
                *self.saved.lock().expect("saved lock") = Some(compiled);
            }
            SetAction::VerifyAndCommit => {
                let compiled = compile(&self.compiling, config()?).await?;
                self.engine.call(move |e| engine::load(e, compiled)).await?;
                // The last saved config is now the committed one: nothing is left to COMMIT.
                *self.saved.lock().expect("saved lock") = None;
            }
            SetAction::Commit => {
                if req.config.is_some() {
                    return Err(Status::invalid_argument(
                        "COMMIT takes no config: it commits the one saved by VERIFY_AND_SAVE",
                    ));
                }
                let compiled = self.saved.lock().expect("saved lock").take().ok_or_else(|| {
                    Status::not_found("nothing to commit: send VERIFY_AND_SAVE first")
                })?;
                self.engine.call(move |e| engine::load(e, compiled)).await?;
            }
            SetAction::ReconcileAndCommit => {
                return Err(Status::unimplemented(
                    "RECONCILE_AND_COMMIT is not supported: the pipeline is replaced and its state reset (VERIFY_AND_COMMIT)",
                ))
            }
            SetAction::Unspecified => return Err(Status::invalid_argument("the request's action is unspecified")),
        }
        Ok(())
    }
}

/// A request for a role other than the default, which is the only one served.
fn unknown_role() -> Status {
    Status::not_found("no such role: softswitch serves the default role only")
}

fn no_pipeline() -> Status {
    Status::failed_precondition("no forwarding pipeline: set one with SetForwardingPipelineConfig")
}

/// Compiles a device config off the async runtime, one at a time (`compiling`'s one permit):
/// RESOURCE_EXHAUSTED while another compiles.
async fn compile(
    compiling: &Arc<tokio::sync::Semaphore>,
    config: p4v1::ForwardingPipelineConfig,
) -> Result<Compiled, Status> {
    let p4info = config
        .p4info
        .ok_or_else(|| Status::invalid_argument("the config has no p4info"))?;
    let cookie = config.cookie.map_or(0, |c| c.cookie);
    let permit = compiling.clone().try_acquire_owned().map_err(|_| {
        Status::resource_exhausted(
            "another device config is being compiled: send this one when it is done",
        )
    })?;
    // The permit goes with the compile: a client that gives up does not free it early.
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        Compiled::new(config.p4_device_config, Some(&p4info), cookie)
    })
    .await
    .map_err(|e| Status::internal(format!("the compiler failed: {e}")))?
    .map_err(|e| Status::invalid_argument(p4runtime::status::status_message(e)))
}

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for P4RuntimeService {
    #[allow(deprecated)] // role_id: a role named by its deprecated id is unknown too.
    async fn write(
        &self,
        request: Request<p4v1::WriteRequest>,
    ) -> Result<Response<p4v1::WriteResponse>, Status> {
        let (peer, req) = audit::grpc_peer_and_message(request);
        let updates = req.updates.len();
        // Refused whole (not the primary, no pipeline, ...): one audit line for the request.
        let refused = |status: Status| {
            let refused = Err(status);
            let what = || format!("{updates} updates");
            audit::record(
                Surface::P4Runtime,
                &peer,
                "WRITE",
                what,
                audit::grpc_result(&refused),
            );
            refused
        };
        if let Err(s) = self.check_writer(req.device_id, &req.role, req.role_id, req.election_id) {
            return refused(s);
        }
        if Atomicity::try_from(req.atomicity) != Ok(Atomicity::ContinueOnError) {
            return refused(Status::unimplemented(
                "softswitch applies updates with CONTINUE_ON_ERROR only",
            ));
        }
        let writer = peer.clone();
        let results = self
            .engine
            .call(move |e| {
                let p = e.pipeline.as_mut().ok_or_else(no_pipeline)?;
                Ok::<_, Status>(
                    req.updates
                        .iter()
                        .map(|u| {
                            let result = entities::write(p, u);
                            tracing::debug!(update = ?u, result = ?result.as_ref().err(), "Write");
                            let op = UpdateType::try_from(u.r#type)
                                .map_or("UNKNOWN_UPDATE_TYPE", |t| t.as_str_name());
                            let what = || entities::describe(&p.info, u);
                            audit::record(
                                Surface::P4Runtime,
                                &writer,
                                op,
                                what,
                                audit::grpc_result(&result),
                            );
                            match result {
                                Ok(()) => status::update_ok(),
                                Err(s) => status::update_error(s.code(), s.message()),
                            }
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .await;
        let results = match results {
            Ok(Ok(results)) => results,
            Ok(Err(s)) | Err(s) => return refused(s),
        };
        status::batch_result("updates", results)?;
        Ok(Response::new(p4v1::WriteResponse {}))
    }

    type ReadStream = ResponseStream<p4v1::ReadResponse>;

    async fn read(
        &self,
        request: Request<p4v1::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let req = self.arbitration.message_of(request)?;
        // The role filters what is read; only the default role's entities exist.
        if !req.role.is_empty() {
            return Err(unknown_role());
        }
        // As the specification's Read batch processing says: every request is answered, the
        // entities of those that succeeded first, then UNKNOWN with one p4.v1.Error per request
        // if any failed.
        let (entities, results) = self
            .engine
            .call(move |e| {
                let p = e.pipeline.as_ref().ok_or_else(no_pipeline)?;
                let mut out = Vec::new();
                let results = req
                    .entities
                    .iter()
                    .map(|filter| {
                        let before = out.len();
                        match entities::read(p, filter, &mut out) {
                            Ok(()) => status::update_ok(),
                            Err(s) => {
                                out.truncate(before);
                                status::update_error(s.code(), s.message())
                            }
                        }
                    })
                    .collect::<Vec<_>>();
                Ok::<_, Status>((out, results))
            })
            .await??;
        let mut answers: Vec<_> = read_responses(entities).into_iter().map(Ok).collect();
        if let Err(status) = status::batch_result("requests", results) {
            answers.push(Err(status));
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(answers))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<p4v1::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4v1::SetForwardingPipelineConfigResponse>, Status> {
        let (peer, req) = audit::grpc_peer_and_message(request);
        let action = SetAction::try_from(req.action).unwrap_or(SetAction::Unspecified);
        let cookie = req.config.as_ref().and_then(|c| c.cookie).map(|c| c.cookie);
        let what = move || match cookie {
            Some(cookie) => format!("pipeline (cookie {cookie})"),
            None => "pipeline".into(),
        };
        let service = self.clone();
        let set = async move { service.set_pipeline(req).await };
        audit::grpc_write(Surface::P4Runtime, peer, action.as_str_name(), what, set).await?;
        Ok(Response::new(p4v1::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<p4v1::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4v1::GetForwardingPipelineConfigResponse>, Status> {
        let req = self.arbitration.message_of(request)?;
        let kind = ResponseType::try_from(req.response_type)
            .map_err(|_| Status::invalid_argument("unknown response type"))?;
        // Without a pipeline the answer has no config, as the specification says.
        let config = self
            .engine
            .call(move |e| {
                let Some(p) = e.pipeline.as_ref() else {
                    return Ok(None);
                };
                let with_info = matches!(kind, ResponseType::All | ResponseType::P4infoAndCookie);
                let with_device = matches!(
                    kind,
                    ResponseType::All | ResponseType::DeviceConfigAndCookie
                );
                Ok::<_, Status>(Some(p4v1::ForwardingPipelineConfig {
                    p4info: with_info.then(|| p.given_info.clone()),
                    p4_device_config: if with_device {
                        p.device_config.clone()
                    } else {
                        Vec::new()
                    },
                    cookie: Some(p4v1::forwarding_pipeline_config::Cookie { cookie: p.cookie }),
                }))
            })
            .await??;
        Ok(Response::new(p4v1::GetForwardingPipelineConfigResponse {
            config,
        }))
    }

    type StreamChannelStream = ResponseStream<p4v1::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<Streaming<p4v1::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = StreamTx::channel();
        let client = self.arbitration.join(tx.clone())?;
        let arbitration = self.arbitration.clone();
        let engine = self.engine.clone();
        tokio::spawn(async move {
            let mut arbitrated = false;
            while let Some(message) = incoming.next().await {
                let Ok(message) = message else { break };
                let result = match message.update {
                    Some(Incoming::Arbitration(update)) => {
                        let r = arbitration.arbitrate(client, &update).await;
                        arbitrated |= r.is_ok();
                        r
                    }
                    _ if !arbitrated => Err(Status::failed_precondition(
                        "the first message on a stream must be a MasterArbitrationUpdate",
                    )),
                    Some(Incoming::Packet(out)) => {
                        packet_out(&engine, &arbitration, client, out, &tx).await;
                        Ok(())
                    }
                    Some(Incoming::DigestAck(ack)) => {
                        digest_ack(&engine, ack, &tx).await;
                        Ok(())
                    }
                    Some(Incoming::Other(_)) => Ok(()),
                    None => Ok(()),
                };
                if let Err(status) = result {
                    tx.send(Err(status));
                    break;
                }
            }
            arbitration.leave(client);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        _request: Request<p4v1::CapabilitiesRequest>,
    ) -> Result<Response<p4v1::CapabilitiesResponse>, Status> {
        Ok(Response::new(p4v1::CapabilitiesResponse {
            p4runtime_api_version: API_VERSION.into(),
            experimental: None,
        }))
    }
}

/// `entities` in ReadResponses of at most [`MAX_READ_RESPONSE_BYTES`] each (one entity larger
/// than that alone in its own); one empty response when there are none.
fn read_responses(entities: Vec<p4v1::Entity>) -> Vec<p4v1::ReadResponse> {
    let mut responses = vec![p4v1::ReadResponse::default()];
    let mut bytes = 0;
    for entity in entities {
        // The entity with its field tag and length in the response.
        let len = prost::Message::encoded_len(&entity);
        let len = 1 + prost::length_delimiter_len(len) + len;
        let last = responses.last_mut().expect("one response at least");
        if bytes + len > MAX_READ_RESPONSE_BYTES && !last.entities.is_empty() {
            responses.push(p4v1::ReadResponse::default());
            bytes = 0;
        }
        bytes += len;
        responses
            .last_mut()
            .expect("one response at least")
            .entities
            .push(entity);
    }
    responses
}

/// Sends a StreamError about a message of the stream: its status and the offending message.
fn stream_error(tx: &StreamTx, status: Status, details: p4v1::stream_error::Details) {
    let error = p4v1::StreamError {
        canonical_code: status.code() as i32,
        message: status.message().to_string(),
        details: Some(details),
        ..Default::default()
    };
    tx.send(Ok(p4v1::StreamMessageResponse {
        update: Some(p4v1::stream_message_response::Update::Error(error)),
    }));
}

/// Clears an acknowledged digest list from the cache, so its messages may be sent again; an
/// acknowledgement for a digest the pipeline does not have gets an INVALID_ARGUMENT
/// StreamError, as the specification says.
async fn digest_ack(engine: &EngineHandle, ack: p4v1::DigestListAck, tx: &StreamTx) {
    let known = engine
        .call(move |e| {
            let Some(p) = e.pipeline.as_mut() else {
                return false;
            };
            p.digests.acknowledge(&ack);
            ack.digest_id != 0 && p.index.digests.contains(&ack.digest_id)
        })
        .await
        .unwrap_or(true);
    if !known {
        stream_error(
            tx,
            Status::invalid_argument(format!("no digest with id {}", ack.digest_id)),
            p4v1::stream_error::Details::DigestListAck(p4v1::DigestListAckError {
                digest_list_ack: Some(ack),
            }),
        );
    }
}

/// Injects a PacketOut at the CPU port; problems go back on the stream as a StreamError that
/// carries the PacketOut.
async fn packet_out(
    engine: &EngineHandle,
    arbitration: &Arbitration,
    client: u64,
    out: p4v1::PacketOut,
    tx: &StreamTx,
) {
    let primary = arbitration.is_primary(client);
    let offending = out.clone();
    let result = engine
        .call(move |e| {
            if !primary {
                return Err(Status::permission_denied(
                    "only the primary controller may send PacketOut",
                ));
            }
            let cpu_port = e.cpu_port().ok_or_else(|| {
                Status::failed_precondition("the switch has no CPU port (start it with --cpu-port)")
            })?;
            let p = e.pipeline.as_ref().ok_or_else(no_pipeline)?;
            let frame = packetio::packet_out(&p.info, &out)?;
            e.receive(cpu_port, frame);
            Ok(())
        })
        .await
        .and_then(|r| r);
    if let Err(status) = result {
        stream_error(
            tx,
            status,
            p4v1::stream_error::Details::PacketOut(p4v1::PacketOutError {
                packet_out: Some(offending),
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_reads_are_streamed_in_bounded_responses() {
        let entity = |n: u32| p4v1::Entity {
            entity: Some(p4v1::entity::Entity::RegisterEntry(p4v1::RegisterEntry {
                register_id: n,
                data: Some(p4v1::P4Data {
                    data: Some(p4v1::p4_data::Data::Bitstring(vec![7; 1000])),
                }),
                ..Default::default()
            })),
        };
        let entities: Vec<_> = (0..3000).map(entity).collect();
        let responses = read_responses(entities.clone());
        assert!(responses.len() >= 3, "{}", responses.len());
        assert!(responses
            .iter()
            .all(|r| prost::Message::encoded_len(r) <= MAX_READ_RESPONSE_BYTES));
        let back: Vec<_> = responses.into_iter().flat_map(|r| r.entities).collect();
        assert_eq!(back, entities);
        assert_eq!(read_responses(Vec::new()).len(), 1);
    }

    #[tokio::test]
    async fn a_second_compile_while_one_runs_is_refused() {
        let busy = Arc::new(tokio::sync::Semaphore::new(0));
        let config = p4v1::ForwardingPipelineConfig {
            p4info: Some(Default::default()),
            ..Default::default()
        };
        let Err(refused) = compile(&busy, config).await else {
            panic!("compiled while another compile held the permit");
        };
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    }
}
