//! A P4Runtime connection to one device of a switch: reads, and — after arbitration on a
//! StreamChannel — writes and pipeline changes. Only standard P4Runtime, so it drives BMv2's
//! `simple_switch_grpc` as it drives softswitch; softswitch's own queue service rides on the
//! same channel.
//!
//! Errors carry the RPC, the switch, the gRPC status and, for a write, each failed update's
//! P4Runtime error with the label of the entry it came from.

use std::{fmt, time::Duration};

use p4runtime::{
    lossless::softswitch::v1::{queues_client::QueuesClient, GetQueuesRequest, QueueState},
    p4::{
        config::v1::P4Info,
        v1::{
            get_forwarding_pipeline_config_request::ResponseType,
            p4_runtime_client::P4RuntimeClient, set_forwarding_pipeline_config_request,
            stream_message_request, stream_message_response, write_request::Atomicity, Entity,
            ForwardingPipelineConfig, GetForwardingPipelineConfigRequest, MasterArbitrationUpdate,
            ReadRequest, SetForwardingPipelineConfigRequest, StreamMessageRequest, Uint128,
            WriteRequest,
        },
    },
};
use std::path::PathBuf;
use tokio::sync::mpsc;
use tonic::{transport::Channel, Code};

use crate::entries::Labelled;

/// How long to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for the answer of one RPC (a pipeline push compiles a program).
const RPC_TIMEOUT: Duration = Duration::from_secs(60);
/// Updates per WriteRequest: as many as a switch can report one status each for within the
/// trailer size standard gRPC clients accept (`p4runtime::status`), well under gRPC's default
/// 4 MiB message limit.
const BATCH: usize = p4runtime::status::REPORTED_UPDATES;

/// Which device of which switch, and as whom.
#[derive(Clone, Debug)]
pub struct Target {
    /// `HOST:PORT` of the P4Runtime server.
    pub address: String,
    /// The P4Runtime device id.
    pub device_id: u64,
    /// This client's election id (the highest one is the primary, which alone writes).
    pub election_id: ElectionId,
    /// TLS to the server, if it serves TLS.
    pub tls: Option<ClientTls>,
}

/// How a client reaches a server over TLS: the CA its certificate must chain to, and for mutual
/// TLS the client's own certificate and key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA certificate (PEM) the server's must chain to.
    pub ca: PathBuf,
    /// The client's certificate chain and key (PEM), for a server that asks for one.
    pub identity: Option<(PathBuf, PathBuf)>,
    /// The name the server's certificate must carry (default: the host of the address).
    pub server_name: Option<String>,
}

impl ClientTls {
    /// tonic's configuration of it, the files read.
    fn config(&self) -> anyhow::Result<tonic::transport::ClientTlsConfig> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
        };
        let mut config =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(&self.ca)?));
        if let Some((cert, key)) = &self.identity {
            config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        if let Some(name) = &self.server_name {
            config = config.domain_name(name);
        }
        Ok(config)
    }
}

/// The election id a client claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionId {
    /// This one.
    Fixed(u128),
    /// One above the highest the switch reports when arbitration starts (1 if it reports none):
    /// the primary role, taken over from whoever holds it.
    Auto,
}

/// The most a Read may bring back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// Entities.
    pub entities: usize,
    /// Bytes of the answer's messages, encoded.
    pub bytes: usize,
}

impl ReadLimits {
    /// No limit but memory's (reads of a known, small set of cells).
    pub const NONE: ReadLimits = ReadLimits {
        entities: usize::MAX,
        bytes: usize::MAX,
    };
}

/// A failed RPC: what was asked of whom, the gRPC status, and per-update errors of a write.
#[derive(Debug, thiserror::Error)]
pub struct RpcError {
    /// The RPC (`Write`, `Read`, ...).
    pub rpc: &'static str,
    /// The switch's address.
    pub address: String,
    /// The gRPC status code.
    pub code: Code,
    /// The status message.
    pub message: String,
    /// The updates that failed: their label, P4Runtime code and message.
    pub updates: Vec<(String, Code, String)>,
    /// What else explains the failure (this client is not the primary).
    pub note: Option<String>,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {}: {}: {}",
            self.rpc,
            self.address,
            code_name(self.code),
            self.message
        )?;
        for (label, code, message) in &self.updates {
            write!(f, "\n  {label}: {}: {message}", code_name(*code))?;
        }
        if let Some(note) = &self.note {
            write!(f, "\n  ({note})")?;
        }
        Ok(())
    }
}

pub use p4runtime::status::code_name;

/// What the switch answered to this client's arbitration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arbitration {
    /// Whether this client is the primary.
    pub primary: bool,
    /// The election id the switch reports: the primary's, or, when the switch says there is no
    /// primary (NOT_FOUND), the highest it has seen (absent when there has never been one).
    pub primary_election_id: Option<u128>,
    /// Whether the switch said there is no primary at all (status NOT_FOUND).
    pub no_primary: bool,
}

/// A connection to one device.
pub struct Client {
    channel: Channel,
    grpc: P4RuntimeClient<Channel>,
    target: Target,
    /// The arbitration answer and the stream's sending half, which keeps the stream (and so
    /// this client's role) alive until the client is dropped.
    stream: Option<(Arbitration, mpsc::Sender<StreamMessageRequest>)>,
    /// The election id claimed: the target's, or the one `auto` chose at arbitration.
    election_id: u128,
}

impl Client {
    /// Connects to the switch (no RPC yet).
    pub async fn connect(target: Target) -> anyhow::Result<Self> {
        let scheme = if target.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let uri = match target.address.split_once("://") {
            // tonic speaks TLS only to an https address: TLS options with another scheme
            // would quietly go in the clear.
            Some((given, _)) if target.tls.is_some() && given != "https" => anyhow::bail!(
                "'{}': TLS options need an https:// address (or none)",
                target.address
            ),
            Some(_) => target.address.clone(),
            None => format!("{scheme}://{}", target.address),
        };
        let mut endpoint = tonic::transport::Endpoint::from_shared(uri)
            .map_err(|e| anyhow::anyhow!("'{}' is no switch address: {e}", target.address))?
            .connect_timeout(CONNECT_TIMEOUT);
        if let Some(tls) = &target.tls {
            endpoint = endpoint
                .tls_config(tls.config()?)
                .map_err(|e| anyhow::anyhow!("TLS to {}: {}", target.address, error_chain(&e)))?;
        }
        let channel = endpoint.connect().await.map_err(|e| {
            anyhow::anyhow!(
                "cannot reach a P4Runtime server at {}: {}",
                target.address,
                error_chain(&e)
            )
        })?;
        Ok(Client {
            grpc: P4RuntimeClient::new(channel.clone()),
            channel,
            election_id: match target.election_id {
                ElectionId::Fixed(id) => id,
                ElectionId::Auto => 1,
            },
            target,
            stream: None,
        })
    }

    /// The target this client talks to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Opens the StreamChannel and sends this client's election id; returns the switch's
    /// answer. The stream stays open (and the role held) until the client is dropped. With
    /// [`ElectionId::Auto`], a first stream without an election id (a backup, which takes
    /// nothing from anyone) asks for the highest id the switch reports, and the role is then
    /// claimed with one above it.
    pub async fn arbitrate(&mut self) -> Result<Arbitration, RpcError> {
        if let Some((arbitration, _)) = &self.stream {
            return Ok(*arbitration);
        }
        if self.target.election_id == ElectionId::Auto {
            let (probe, _) = self.open_stream(None).await?;
            self.election_id = match probe.primary_election_id {
                None => 1,
                Some(highest) => highest.checked_add(1).ok_or_else(|| RpcError {
                    rpc: "StreamChannel",
                    address: self.target.address.clone(),
                    code: Code::ResourceExhausted,
                    message: "the switch reports the largest election id: none is above it".into(),
                    updates: Vec::new(),
                    note: None,
                })?,
            };
            tracing::debug!(
                "election id auto: {} (the switch reported {:?})",
                self.election_id,
                probe.primary_election_id
            );
        }
        let (arbitration, requests) = self.open_stream(Some(self.election_id)).await?;
        self.stream = Some((arbitration, requests));
        Ok(arbitration)
    }

    /// Opens a StreamChannel, sends a MasterArbitrationUpdate with `election_id` and waits for
    /// the switch's answer; the stream lives as long as the returned sending half.
    async fn open_stream(
        &mut self,
        election_id: Option<u128>,
    ) -> Result<(Arbitration, mpsc::Sender<StreamMessageRequest>), RpcError> {
        let (requests, receiver) = mpsc::channel(4);
        let update = MasterArbitrationUpdate {
            device_id: self.target.device_id,
            role: None,
            election_id: election_id.map(uint128),
            status: None,
        };
        requests
            .send(StreamMessageRequest {
                update: Some(stream_message_request::Update::Arbitration(update)),
            })
            .await
            .expect("the receiver is alive");
        let call = self
            .grpc
            .stream_channel(tokio_stream::wrappers::ReceiverStream::new(receiver));
        let mut inbound = within(&self.target.address, "StreamChannel", call)
            .await?
            .into_inner();
        let answer = async {
            loop {
                match inbound.message().await? {
                    Some(message) => {
                        if let Some(stream_message_response::Update::Arbitration(answer)) =
                            message.update
                        {
                            return Ok(answer);
                        }
                    }
                    None => {
                        return Err(tonic::Status::unavailable(
                            "the switch closed the stream without answering the arbitration",
                        ))
                    }
                }
            }
        };
        let answer = within(&self.target.address, "StreamChannel", answer).await?;
        // Drain what else the switch sends (packet-ins, errors) so the stream keeps flowing.
        tokio::spawn(async move { while let Ok(Some(_)) = inbound.message().await {} });
        let arbitration = Arbitration {
            primary: answer
                .status
                .as_ref()
                .is_none_or(|s| s.code == Code::Ok as i32),
            primary_election_id: answer.election_id.map(from_uint128),
            no_primary: answer
                .status
                .as_ref()
                .is_some_and(|s| s.code == Code::NotFound as i32),
        };
        Ok((arbitration, requests))
    }

    /// Pushes a pipeline (VERIFY_AND_COMMIT): P4Info and the target's device config.
    pub async fn set_pipeline(
        &mut self,
        p4info: P4Info,
        device_config: Vec<u8>,
    ) -> Result<(), RpcError> {
        self.arbitrate().await?;
        let request = SetForwardingPipelineConfigRequest {
            device_id: self.target.device_id,
            election_id: Some(uint128(self.election_id)),
            action: set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
            config: Some(ForwardingPipelineConfig {
                p4info: Some(p4info),
                p4_device_config: device_config,
                cookie: None,
            }),
            ..Default::default()
        };
        let call = self.grpc.set_forwarding_pipeline_config(request);
        let result = within(&self.target.address, "SetForwardingPipelineConfig", call).await;
        result.map(drop).map_err(|e| self.with_role_note(e))
    }

    /// The device's pipeline: P4Info and cookie, or with `with_device_config` everything.
    pub async fn pipeline(
        &mut self,
        with_device_config: bool,
    ) -> Result<Option<ForwardingPipelineConfig>, RpcError> {
        let response_type = if with_device_config {
            ResponseType::All
        } else {
            ResponseType::P4infoAndCookie
        };
        let request = GetForwardingPipelineConfigRequest {
            device_id: self.target.device_id,
            response_type: response_type as i32,
        };
        let call = self.grpc.get_forwarding_pipeline_config(request);
        match within(&self.target.address, "GetForwardingPipelineConfig", call).await {
            Ok(answer) => Ok(answer.into_inner().config),
            // The specification answers "no pipeline" with an unset config; PI's server (BMv2)
            // with FAILED_PRECONDITION.
            Err(e) if e.code == Code::FailedPrecondition => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The P4Info of the pipeline on the device, which must have one.
    pub async fn p4info(&mut self) -> anyhow::Result<P4Info> {
        let config = self.pipeline(false).await?;
        config.and_then(|c| c.p4info).ok_or_else(|| {
            anyhow::anyhow!(
                "device {} on {} has no pipeline: push one with `lossless p4 pipeline set`",
                self.target.device_id,
                self.target.address
            )
        })
    }

    /// Writes `updates` (after arbitration), in batches that continue past a failed update;
    /// fails with every failed update's error and label.
    pub async fn write(&mut self, updates: &[Labelled]) -> Result<(), RpcError> {
        self.arbitrate().await?;
        let mut failed: Option<RpcError> = None;
        for batch in updates.chunks(BATCH) {
            let request = WriteRequest {
                device_id: self.target.device_id,
                election_id: Some(uint128(self.election_id)),
                updates: batch.iter().map(|l| l.update.clone()).collect(),
                atomicity: Atomicity::ContinueOnError as i32,
                ..Default::default()
            };
            let call = self.grpc.write(request);
            let Err(mut error) = within(&self.target.address, "Write", call).await else {
                continue;
            };
            if error.updates.is_empty() {
                // The whole request was refused: later batches would be too.
                return Err(self.with_role_note(error));
            }
            // The details come in request order, one per update of the batch.
            let mut labelled: Vec<_> = batch
                .iter()
                .zip(error.updates.drain(..))
                .filter(|(_, (_, code, _))| *code != Code::Ok)
                .map(|(l, (_, code, message))| (l.label.clone(), code, message))
                .collect();
            match &mut failed {
                None => {
                    error.updates = labelled;
                    failed = Some(error);
                }
                Some(first) => first.updates.append(&mut labelled),
            }
        }
        match failed {
            None => Ok(()),
            Some(mut error) => {
                error.message = format!(
                    "{} of {} updates failed",
                    error.updates.len(),
                    updates.len()
                );
                Err(self.with_role_note(error))
            }
        }
    }

    /// Reads `entities` (wildcards allowed) and returns every entity the switch sends.
    pub async fn read(&mut self, entities: Vec<Entity>) -> Result<Vec<Entity>, RpcError> {
        self.read_within(entities, ReadLimits::NONE).await
    }

    /// Reads `entities` as [`Client::read`] does, but stops with a `RESOURCE_EXHAUSTED` error
    /// once the switch has answered more entities or bytes than `limits` allow (a switch's
    /// answer is untrusted input; gRPC's own 4 MiB bounds each message, not the stream).
    pub async fn read_within(
        &mut self,
        entities: Vec<Entity>,
        limits: ReadLimits,
    ) -> Result<Vec<Entity>, RpcError> {
        let request = ReadRequest {
            device_id: self.target.device_id,
            role: String::new(),
            entities,
        };
        let call = self.grpc.read(request);
        let mut stream = within(&self.target.address, "Read", call)
            .await?
            .into_inner();
        let mut out = Vec::new();
        let mut bytes = 0;
        loop {
            let message = stream.message();
            match within(&self.target.address, "Read", message).await {
                Ok(Some(response)) => {
                    bytes += prost::Message::encoded_len(&response);
                    out.extend(response.entities);
                    if out.len() > limits.entities || bytes > limits.bytes {
                        return Err(RpcError {
                            rpc: "Read",
                            address: self.target.address.clone(),
                            code: Code::ResourceExhausted,
                            message: format!(
                                "the answer holds more than {} entities or {} bytes, the most \
                                 read",
                                limits.entities, limits.bytes
                            ),
                            updates: Vec::new(),
                            note: None,
                        });
                    }
                }
                Ok(None) => return Ok(out),
                Err(e) => return Err(failed_reads(e)),
            }
        }
    }

    /// softswitch's queue service: changes queues, returns them after the change.
    pub async fn set_queue(
        &mut self,
        mut request: p4runtime::lossless::softswitch::v1::SetQueueRequest,
    ) -> Result<Vec<QueueState>, RpcError> {
        request.device_id = self.target.device_id;
        let mut queues = QueuesClient::new(self.channel.clone());
        let call = queues.set_queue(request);
        Ok(within(&self.target.address, "Queues.SetQueue", call)
            .await?
            .into_inner()
            .queues)
    }

    /// softswitch's queue service: every queue of every port.
    pub async fn queues(&mut self) -> Result<Vec<QueueState>, RpcError> {
        let mut queues = QueuesClient::new(self.channel.clone());
        let call = queues.get_queues(GetQueuesRequest {
            device_id: self.target.device_id,
        });
        Ok(within(&self.target.address, "Queues.GetQueues", call)
            .await?
            .into_inner()
            .queues)
    }

    /// Adds to a refused write why this client may not write: it is not the primary.
    fn with_role_note(&self, mut error: RpcError) -> RpcError {
        if let Some((arbitration, _)) = &self.stream {
            let id = self.election_id;
            let seen = arbitration
                .primary_election_id
                .map(|id| format!(" ({id})"))
                .unwrap_or_default();
            if arbitration.no_primary {
                error.note = Some(format!(
                    "no client is the primary and this client's election id {id} is below the highest the switch has seen{seen}"
                ));
            } else if !arbitration.primary {
                error.note = Some(format!(
                    "this client's election id {id} is not the primary's{seen}"
                ));
            }
        }
        error
    }
}

/// Runs one RPC step under [`RPC_TIMEOUT`], turning a status into an [`RpcError`].
async fn within<T>(
    address: &str,
    rpc: &'static str,
    call: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> Result<T, RpcError> {
    let status = match tokio::time::timeout(RPC_TIMEOUT, call).await {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(status)) => status,
        Err(_) => {
            tonic::Status::deadline_exceeded(format!("no answer in {} s", RPC_TIMEOUT.as_secs()))
        }
    };
    let updates = p4runtime::status::update_errors(&status)
        .into_iter()
        .map(|e| (String::new(), Code::from(e.canonical_code), e.message))
        .collect();
    Err(RpcError {
        rpc,
        address: address.to_owned(),
        code: status.code(),
        // A connection that failed (a TLS handshake refused, a reset) is a status whose
        // message is only "transport error": the cause is in its source.
        message: match std::error::Error::source(&status) {
            Some(cause) => format!("{}: {}", status.message(), error_chain(cause)),
            None => status.message().to_owned(),
        },
        updates,
        note: None,
    })
}

/// A Read's per-request errors (one per entity asked for, in order, `OK` for the good ones)
/// reduced to the failed ones, each labelled with the request it answers.
fn failed_reads(mut error: RpcError) -> RpcError {
    error.updates = std::mem::take(&mut error.updates)
        .into_iter()
        .enumerate()
        .filter(|(_, (_, code, _))| *code != Code::Ok)
        .map(|(i, (_, code, message))| (format!("read request {i}"), code, message))
        .collect();
    error
}

/// An election id as P4Runtime's `Uint128`.
fn uint128(n: u128) -> Uint128 {
    Uint128 {
        high: (n >> 64) as u64,
        low: n as u64,
    }
}

fn from_uint128(n: Uint128) -> u128 {
    (u128::from(n.high) << 64) | u128::from(n.low)
}

/// An error and its sources, `: `-joined (tonic's transport errors hide the cause inside).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if parts.last() != Some(&part) {
            parts.push(part);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// Parses an election id: `auto`, a decimal `u128`, or `HIGH,LOW` as p4runtime-shell writes it.
pub fn parse_election_id(text: &str) -> Result<ElectionId, String> {
    if text.trim() == "auto" {
        return Ok(ElectionId::Auto);
    }
    let parsed = match text.split_once(',') {
        Some((high, low)) => high.trim().parse::<u64>().and_then(|h| {
            low.trim()
                .parse::<u64>()
                .map(|l| (u128::from(h) << 64) | u128::from(l))
        }),
        None => text.trim().parse::<u128>(),
    };
    match parsed {
        Ok(0) => Err("an election id must be above 0".to_owned()),
        Ok(id) => Ok(ElectionId::Fixed(id)),
        Err(_) => Err(format!(
            "'{text}' is not an election id (a number, HIGH,LOW, or auto)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn election_ids() {
        assert_eq!(parse_election_id("1"), Ok(ElectionId::Fixed(1)));
        assert_eq!(parse_election_id("0,5"), Ok(ElectionId::Fixed(5)));
        assert_eq!(parse_election_id("1,0"), Ok(ElectionId::Fixed(1 << 64)));
        assert_eq!(parse_election_id("auto"), Ok(ElectionId::Auto));
        assert_eq!(from_uint128(uint128((7 << 64) | 9)), (7 << 64) | 9);
        assert!(parse_election_id("0").is_err());
        assert!(parse_election_id("x").is_err());
        assert!(parse_election_id("1,2,3").is_err());
    }

    #[test]
    fn a_reads_failed_requests_are_labelled_and_the_good_ones_left_out() {
        let error = failed_reads(RpcError {
            rpc: "Read",
            address: "127.0.0.1:9559".into(),
            code: Code::Unknown,
            message: "1 of 2 requests failed".into(),
            updates: vec![
                (String::new(), Code::Ok, String::new()),
                (
                    String::new(),
                    Code::OutOfRange,
                    "index 9 is not below 4".into(),
                ),
            ],
            note: None,
        });
        assert_eq!(
            error.to_string(),
            "Read on 127.0.0.1:9559: UNKNOWN: 1 of 2 requests failed\n  read request 1: OUT_OF_RANGE: index 9 is not below 4"
        );
    }

    #[test]
    fn errors_show_status_and_failed_updates() {
        let error = RpcError {
            rpc: "Write",
            address: "127.0.0.1:9559".into(),
            code: Code::Unknown,
            message: "1 of 2 updates failed".into(),
            updates: vec![(
                "table_entries[1] (t: ...)".into(),
                Code::AlreadyExists,
                "entry exists".into(),
            )],
            note: Some("this client's election id 1 is not the primary's (2)".into()),
        };
        assert_eq!(
            error.to_string(),
            "Write on 127.0.0.1:9559: UNKNOWN: 1 of 2 updates failed\n  table_entries[1] (t: ...): ALREADY_EXISTS: entry exists\n  (this client's election id 1 is not the primary's (2))"
        );
    }
}
