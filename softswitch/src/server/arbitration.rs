//! Client arbitration on the StreamChannel (P4Runtime's MasterArbitrationUpdate): each stream
//! may claim an election id; the highest is the primary, the only client whose Write and
//! SetForwardingPipelineConfig are accepted and the one that receives PacketIn and digests.
//! Every change of primary is announced to every stream (OK to the primary, ALREADY_EXISTS with
//! the primary's election id to the others). Only the default role is served.

use std::sync::Mutex;

use p4runtime::google::rpc;
use p4runtime::p4::v1 as p4v1;
use tokio::sync::mpsc::UnboundedSender;
use tonic::{Code, Status};

use super::engine::Controller;
use super::packetio;
use super::pipeline::Pipeline;

/// What a stream receives.
pub type StreamItem = Result<p4v1::StreamMessageResponse, Status>;

struct Client {
    id: u64,
    election_id: Option<u128>,
    tx: UnboundedSender<StreamItem>,
}

/// The connected streams and their election ids.
pub struct Arbitration {
    device_id: u64,
    clients: Mutex<(u64, Vec<Client>)>,
}

impl Arbitration {
    /// No client yet, for device `device_id`.
    pub fn new(device_id: u64) -> Self {
        Arbitration {
            device_id,
            clients: Mutex::new((0, Vec::new())),
        }
    }

    /// The device id served.
    pub fn device_id(&self) -> u64 {
        self.device_id
    }

    /// Checks a request's device id.
    pub fn check_device(&self, device_id: u64) -> Result<(), Status> {
        if device_id == self.device_id {
            Ok(())
        } else {
            Err(Status::not_found(format!(
                "no device {device_id} (this switch is device {})",
                self.device_id
            )))
        }
    }

    /// A new stream; returns its client id.
    pub fn join(&self, tx: UnboundedSender<StreamItem>) -> u64 {
        let mut g = self.clients.lock().expect("arbitration lock");
        g.0 += 1;
        let id = g.0;
        g.1.push(Client {
            id,
            election_id: None,
            tx,
        });
        id
    }

    /// A stream ended: its client leaves (a new primary is announced if it was the primary).
    pub fn leave(&self, client: u64) {
        let mut g = self.clients.lock().expect("arbitration lock");
        let before = primary(&g.1);
        g.1.retain(|c| c.id != client);
        if primary(&g.1) != before {
            announce(self.device_id, &g.1);
        }
    }

    /// Handles a MasterArbitrationUpdate from `client` (a role given by its deprecated id is
    /// refused like one given by name).
    #[allow(deprecated)]
    pub fn arbitrate(
        &self,
        client: u64,
        update: &p4v1::MasterArbitrationUpdate,
    ) -> Result<(), Status> {
        self.check_device(update.device_id)?;
        if let Some(role) = &update.role {
            if role.id != 0 || !role.name.is_empty() || role.config.is_some() {
                return Err(Status::unimplemented(
                    "softswitch serves the default role only",
                ));
            }
        }
        let election_id = update.election_id.map(u128::from);
        let mut g = self.clients.lock().expect("arbitration lock");
        if election_id.is_some()
            && g.1
                .iter()
                .any(|c| c.id != client && c.election_id == election_id)
        {
            return Err(Status::invalid_argument(
                "another client holds this election id",
            ));
        }
        if let Some(c) = g.1.iter_mut().find(|c| c.id == client) {
            c.election_id = election_id;
        }
        announce(self.device_id, &g.1);
        Ok(())
    }

    /// Checks that a Write or SetForwardingPipelineConfig comes from the primary.
    pub fn check_primary(
        &self,
        device_id: u64,
        election_id: Option<p4v1::Uint128>,
    ) -> Result<(), Status> {
        self.check_device(device_id)?;
        let g = self.clients.lock().expect("arbitration lock");
        match (primary(&g.1), election_id.map(u128::from)) {
            (Some(p), Some(e)) if p == e => Ok(()),
            (None, _) => Err(Status::permission_denied(
                "no primary controller: open a StreamChannel and send a MasterArbitrationUpdate first",
            )),
            _ => Err(Status::permission_denied(
                "only the primary controller (highest election id) may write",
            )),
        }
    }

    /// Whether `client` is the primary.
    pub fn is_primary(&self, client: u64) -> bool {
        let g = self.clients.lock().expect("arbitration lock");
        let p = primary(&g.1);
        g.1.iter()
            .any(|c| c.id == client && c.election_id.is_some() && c.election_id == p)
    }

    /// Sends a message to the primary's stream, if there is a primary.
    fn to_primary(&self, message: p4v1::stream_message_response::Update) {
        let g = self.clients.lock().expect("arbitration lock");
        let p = primary(&g.1);
        if let Some(c) =
            g.1.iter()
                .find(|c| c.election_id.is_some() && c.election_id == p)
        {
            let _ = c.tx.send(Ok(p4v1::StreamMessageResponse {
                update: Some(message),
            }));
        }
    }
}

fn primary(clients: &[Client]) -> Option<u128> {
    clients.iter().filter_map(|c| c.election_id).max()
}

fn announce(device_id: u64, clients: &[Client]) {
    let p = primary(clients);
    for c in clients {
        let is_primary = c.election_id.is_some() && c.election_id == p;
        let (code, message) = if is_primary {
            (Code::Ok, "this client is the primary")
        } else {
            (Code::AlreadyExists, "another client is the primary")
        };
        let update = p4v1::MasterArbitrationUpdate {
            device_id,
            role: None,
            election_id: p.map(p4v1::Uint128::from),
            status: Some(rpc::Status {
                code: code as i32,
                message: message.into(),
                details: Vec::new(),
            }),
        };
        let _ = c.tx.send(Ok(p4v1::StreamMessageResponse {
            update: Some(p4v1::stream_message_response::Update::Arbitration(update)),
        }));
    }
}

impl Controller for Arbitration {
    fn packet_in(&self, pipeline: &Pipeline, frame: Vec<u8>) {
        let message = packetio::packet_in(&pipeline.info, frame);
        self.to_primary(p4v1::stream_message_response::Update::Packet(message));
    }

    fn digests(&self, pipeline: &mut Pipeline, sent: Vec<crate::switch::DigestSent>) {
        let program = pipeline.switch.program();
        let mut lists = Vec::new();
        for d in sent {
            let Some(&digest_id) = pipeline.index.digests.get(d.digest) else {
                continue;
            };
            if !pipeline.digest_entries.contains_key(&digest_id) {
                continue;
            }
            let cp = &program.control_plane;
            let data = packetio::digest_data(
                &cp.types,
                &program.errors,
                &cp.digests[d.digest].ty,
                &d.values,
            );
            lists.push((digest_id, data));
        }
        for (digest_id, data) in lists {
            let list_id = pipeline.next_list_id;
            pipeline.next_list_id += 1;
            let timestamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            self.to_primary(p4v1::stream_message_response::Update::Digest(
                p4v1::DigestList {
                    digest_id,
                    list_id,
                    data: vec![data],
                    timestamp,
                },
            ));
        }
    }
}
