//! The P4Runtime service: Capabilities, Set/GetForwardingPipelineConfig, Write, Read and
//! StreamChannel, over the engine (pipeline) and the arbitration (clients).

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use p4runtime::p4::v1::{
    self as p4v1, get_forwarding_pipeline_config_request::ResponseType,
    p4_runtime_server::P4Runtime, set_forwarding_pipeline_config_request::Action as SetAction,
    stream_message_request::Update as Incoming, write_request::Atomicity,
};
use p4runtime::status;
use tokio_stream::{wrappers::UnboundedReceiverStream, Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::arbitration::{Arbitration, StreamItem};
use super::engine::{EngineHandle, Stopped};
use super::pipeline::Compiled;
use super::{entities, packetio};

/// The P4Runtime API version the definitions come from.
pub const API_VERSION: &str = "1.5.0";

/// The P4Runtime service of one device.
pub struct P4RuntimeService {
    engine: EngineHandle,
    arbitration: Arc<Arbitration>,
    /// The config of VERIFY_AND_SAVE, waiting for COMMIT.
    saved: Arc<Mutex<Option<Compiled>>>,
}

impl P4RuntimeService {
    /// The service for the device behind `engine` and `arbitration`.
    pub fn new(engine: EngineHandle, arbitration: Arc<Arbitration>) -> Self {
        P4RuntimeService {
            engine,
            arbitration,
            saved: Arc::new(Mutex::new(None)),
        }
    }
}

impl From<Stopped> for Status {
    fn from(e: Stopped) -> Self {
        Status::unavailable(e.to_string())
    }
}

/// A request for a role other than the default, which is the only one served.
fn unknown_role() -> Status {
    Status::not_found("no such role: softswitch serves the default role only")
}

fn no_pipeline() -> Status {
    Status::failed_precondition("no forwarding pipeline: set one with SetForwardingPipelineConfig")
}

/// Compiles a device config off the async runtime.
async fn compile(config: p4v1::ForwardingPipelineConfig) -> Result<Compiled, Status> {
    let p4info = config
        .p4info
        .ok_or_else(|| Status::invalid_argument("the config has no p4info"))?;
    let cookie = config.cookie.map_or(0, |c| c.cookie);
    tokio::task::spawn_blocking(move || {
        Compiled::new(config.p4_device_config, Some(&p4info), cookie)
    })
    .await
    .map_err(|e| Status::internal(format!("the compiler failed: {e}")))?
    .map_err(Status::invalid_argument)
}

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for P4RuntimeService {
    #[allow(deprecated)] // role_id: a role named by its deprecated id is unknown too.
    async fn write(
        &self,
        request: Request<p4v1::WriteRequest>,
    ) -> Result<Response<p4v1::WriteResponse>, Status> {
        let req = request.into_inner();
        // The specification's order: device and role (NOT_FOUND), then primary.
        self.arbitration.check_device(req.device_id)?;
        if !req.role.is_empty() || req.role_id != 0 {
            return Err(unknown_role());
        }
        self.arbitration
            .check_primary(req.device_id, req.election_id)?;
        match Atomicity::try_from(req.atomicity) {
            Ok(Atomicity::ContinueOnError) => {}
            _ => {
                return Err(Status::unimplemented(
                    "softswitch applies updates with CONTINUE_ON_ERROR only",
                ))
            }
        }
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
                            match result {
                                Ok(()) => status::update_ok(),
                                Err(s) => status::update_error(s.code(), s.message()),
                            }
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .await??;
        status::batch_result("updates", results)?;
        Ok(Response::new(p4v1::WriteResponse {}))
    }

    type ReadStream = ResponseStream<p4v1::ReadResponse>;

    async fn read(
        &self,
        request: Request<p4v1::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let req = request.into_inner();
        self.arbitration.check_device(req.device_id)?;
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
        let mut answers = vec![Ok(p4v1::ReadResponse { entities })];
        if let Err(status) = status::batch_result("requests", results) {
            answers.push(Err(status));
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(answers))))
    }

    #[allow(deprecated)] // role_id: a role named by its deprecated id is unknown too.
    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<p4v1::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4v1::SetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        self.arbitration.check_device(req.device_id)?;
        if !req.role.is_empty() || req.role_id != 0 {
            return Err(unknown_role());
        }
        self.arbitration
            .check_primary(req.device_id, req.election_id)?;
        let action = SetAction::try_from(req.action).unwrap_or(SetAction::Unspecified);
        tracing::debug!(action = action.as_str_name(), "SetForwardingPipelineConfig");
        let config = || {
            req.config
                .clone()
                .ok_or_else(|| Status::invalid_argument("the request has no config"))
        };
        match action {
            SetAction::Verify => {
                compile(config()?).await?;
            }
            SetAction::VerifyAndSave => {
                let compiled = compile(config()?).await?;
                *self.saved.lock().expect("saved lock") = Some(compiled);
            }
            SetAction::VerifyAndCommit => {
                let compiled = compile(config()?).await?;
                self.engine.call(move |e| e.load(compiled)).await?;
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
                self.engine.call(move |e| e.load(compiled)).await?;
            }
            SetAction::ReconcileAndCommit => {
                return Err(Status::unimplemented(
                    "RECONCILE_AND_COMMIT is not supported: the pipeline is replaced and its state reset (VERIFY_AND_COMMIT)",
                ))
            }
            SetAction::Unspecified => return Err(Status::invalid_argument("the request's action is unspecified")),
        }
        Ok(Response::new(p4v1::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<p4v1::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4v1::GetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        self.arbitration.check_device(req.device_id)?;
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
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<StreamItem>();
        let client = self.arbitration.join(tx.clone());
        let arbitration = self.arbitration.clone();
        let engine = self.engine.clone();
        tokio::spawn(async move {
            let mut arbitrated = false;
            while let Some(message) = incoming.next().await {
                let Ok(message) = message else { break };
                let result = match message.update {
                    Some(Incoming::Arbitration(update)) => {
                        let r = arbitration.arbitrate(client, &update);
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
                    let _ = tx.send(Err(status));
                    break;
                }
            }
            arbitration.leave(client);
        });
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
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

/// Sends a StreamError about a message of the stream: its status and the offending message.
fn stream_error(
    tx: &tokio::sync::mpsc::UnboundedSender<StreamItem>,
    status: Status,
    details: p4v1::stream_error::Details,
) {
    let error = p4v1::StreamError {
        canonical_code: status.code() as i32,
        message: status.message().to_string(),
        details: Some(details),
        ..Default::default()
    };
    let _ = tx.send(Ok(p4v1::StreamMessageResponse {
        update: Some(p4v1::stream_message_response::Update::Error(error)),
    }));
}

/// Clears an acknowledged digest list from the cache, so its messages may be sent again; an
/// acknowledgement for a digest the pipeline does not have gets an INVALID_ARGUMENT
/// StreamError, as the specification says.
async fn digest_ack(
    engine: &EngineHandle,
    ack: p4v1::DigestListAck,
    tx: &tokio::sync::mpsc::UnboundedSender<StreamItem>,
) {
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
    tx: &tokio::sync::mpsc::UnboundedSender<StreamItem>,
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
        .map_err(Status::from)
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
