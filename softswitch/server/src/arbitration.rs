//! Client arbitration on the StreamChannel (P4Runtime's MasterArbitrationUpdate), as the
//! specification's "Client Arbitration and Controller Replication" section says: a stream that
//! sends an election id at least as high as the highest the server has ever seen becomes the
//! primary, the only client whose Write and SetForwardingPipelineConfig are accepted and the one
//! that receives PacketIn, digests and idle-timeout notifications. A lower (or unset) id makes
//! a backup; so when the primary leaves, nobody is primary until a client claims an id at least
//! as high as the last one. Arbitration notifications carry that highest id (unset while there
//! has never been a primary) and a status: OK to the primary, ALREADY_EXISTS to backups when
//! there is a primary, NOT_FOUND when there is none. A change of primary is announced to every
//! live stream; a new backup is told alone. Only the default role is served.
//!
//! A client cannot make the server hold without bound: at most [`MAX_STREAMS`] streams are open
//! at once (the next is refused with RESOURCE_EXHAUSTED, as the specification says), and each
//! holds at most [`STREAM_QUEUE`] messages its client has not read yet; past that, PacketIns,
//! digest lists and notifications to it are dropped (the specification lets a server drop them
//! under load) and counted, and the count is logged when the stream ends.
//!
//! A client that closes its stream and opens a new one with the same election id at once (the
//! P4 tutorials' PTF tests do, between two tests) races the server's handling of the old
//! stream's end. So an update whose election id another live stream holds waits up to
//! [`HOLDER_GRACE`] for that stream to end before it is refused with INVALID_ARGUMENT; a stream
//! whose client has stopped reading (its response side dropped) no longer holds its id.

use std::sync::Mutex;
use std::time::Duration;

use p4runtime::google::rpc;
use p4runtime::p4::v1 as p4v1;
use tokio::sync::mpsc;
use tonic::{Code, Status};

use super::idle;
use super::packetio;
use super::pipeline::Pipeline;
use softswitch_device::engine::Controller;

/// A request message that names the device it is for.
pub trait ForDevice {
    /// The device id it names.
    fn device_id(&self) -> u64;
}

/// [`ForDevice`] for the messages of the requests that read, each with its `device_id` field.
macro_rules! for_device {
    ($($message:ty),* $(,)?) => {
        $(impl ForDevice for $message {
            fn device_id(&self) -> u64 {
                self.device_id
            }
        })*
    };
}

for_device!(
    p4v1::ReadRequest,
    p4v1::GetForwardingPipelineConfigRequest,
    p4runtime::lossless::softswitch::v1::GetQueuesRequest,
);

/// What a stream receives.
pub type StreamItem = Result<p4v1::StreamMessageResponse, Status>;

/// StreamChannels open at once.
pub const MAX_STREAMS: usize = 64;

/// Messages a stream holds for its client before it drops new ones.
pub const STREAM_QUEUE: usize = 1024;

/// How long a MasterArbitrationUpdate whose election id another live stream holds waits for
/// that stream to end before it is refused.
pub const HOLDER_GRACE: Duration = Duration::from_secs(2);

/// The sending side of a stream: what the server has for one client.
#[derive(Clone)]
pub struct StreamTx {
    tx: mpsc::Sender<StreamItem>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl StreamTx {
    /// A stream's queue of [`STREAM_QUEUE`] messages and the receiving side the RPC answers with.
    pub fn channel() -> (StreamTx, mpsc::Receiver<StreamItem>) {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let dropped = Default::default();
        (StreamTx { tx, dropped }, rx)
    }

    /// Queues `item` for the client; drops and counts it if the client is that far behind.
    pub fn send(&self, item: StreamItem) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(item) {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Messages dropped so far because the client did not read them.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the stream's response side is gone (the client cancelled or the connection
    /// closed), though its request side may not have ended yet.
    fn closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Why an update was not taken at once.
enum Arbitrated {
    /// Taken, or refused for good.
    Done(Result<(), Status>),
    /// Another live stream holds its election id.
    IdHeld,
}

struct Client {
    id: u64,
    /// Whether it has sent an accepted MasterArbitrationUpdate.
    live: bool,
    election_id: Option<u128>,
    tx: StreamTx,
}

#[derive(Default)]
struct Clients {
    next_id: u64,
    all: Vec<Client>,
    /// The client id of the primary, if there is one.
    primary: Option<u64>,
    /// The highest election id ever seen (the primary's, while there is one).
    highest: Option<u128>,
}

/// The connected streams and their election ids.
pub struct Arbitration {
    device_id: u64,
    clients: Mutex<Clients>,
    /// Woken whenever a stream leaves.
    left: tokio::sync::Notify,
}

impl Arbitration {
    /// No client yet, for device `device_id`.
    pub fn new(device_id: u64) -> Self {
        Arbitration {
            device_id,
            clients: Mutex::new(Clients::default()),
            left: tokio::sync::Notify::new(),
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

    /// The message of `request`, whose device id is checked as by [`Self::check_device`].
    pub fn message_of<T: ForDevice>(&self, request: tonic::Request<T>) -> Result<T, Status> {
        let message = request.into_inner();
        self.check_device(message.device_id())?;
        Ok(message)
    }

    /// A new stream; returns its client id, or RESOURCE_EXHAUSTED when [`MAX_STREAMS`] are open.
    pub fn join(&self, tx: StreamTx) -> Result<u64, Status> {
        let mut g = self.clients.lock().expect("arbitration lock");
        if g.all.len() >= MAX_STREAMS {
            return Err(Status::resource_exhausted(format!(
                "{MAX_STREAMS} StreamChannels are open already, the most this switch serves"
            )));
        }
        g.next_id += 1;
        let id = g.next_id;
        g.all.push(Client {
            id,
            live: false,
            election_id: None,
            tx,
        });
        Ok(id)
    }

    /// A stream ended: its client leaves; if it was the primary, every live stream is told that
    /// there is none.
    pub fn leave(&self, client: u64) {
        let mut g = self.clients.lock().expect("arbitration lock");
        if let Some(c) = g.all.iter().find(|c| c.id == client) {
            if c.tx.dropped() > 0 {
                tracing::warn!(
                    client,
                    dropped = c.tx.dropped(),
                    "a StreamChannel ended whose client did not read all it was sent"
                );
            }
        }
        g.all.retain(|c| c.id != client);
        if g.primary == Some(client) {
            tracing::debug!(stream = client, "the primary left: no primary");
            g.primary = None;
            self.announce(&g, None);
        }
        drop(g);
        self.left.notify_waiters();
    }

    /// Handles a MasterArbitrationUpdate from `client` (a role given by its deprecated id is
    /// refused like one given by name). An election id another live stream holds is waited
    /// for up to [`HOLDER_GRACE`] (that stream may be ending), then refused.
    pub async fn arbitrate(
        &self,
        client: u64,
        update: &p4v1::MasterArbitrationUpdate,
    ) -> Result<(), Status> {
        let deadline = tokio::time::Instant::now() + HOLDER_GRACE;
        loop {
            // Registered before the check, so a stream leaving in between is not missed.
            let left = self.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            match self.try_arbitrate(client, update) {
                Arbitrated::Done(result) => return result,
                Arbitrated::IdHeld => {
                    if tokio::time::timeout_at(deadline, left).await.is_err() {
                        // Only a leave wakes the wait: the holder may have closed or moved to
                        // another id meanwhile, so look once more before refusing.
                        return match self.try_arbitrate(client, update) {
                            Arbitrated::Done(result) => result,
                            Arbitrated::IdHeld => Err(Status::invalid_argument(
                                "another live client holds this election id",
                            )),
                        };
                    }
                }
            }
        }
    }

    /// [`Arbitration::arbitrate`] without waiting.
    #[allow(deprecated)]
    fn try_arbitrate(&self, client: u64, update: &p4v1::MasterArbitrationUpdate) -> Arbitrated {
        let mut g = self.clients.lock().expect("arbitration lock");
        let live = g.all.iter().any(|c| c.id == client && c.live);
        if update.device_id != self.device_id {
            // A stream's device cannot change; a first update names an unknown device.
            return Arbitrated::Done(Err(if live {
                Status::failed_precondition(format!(
                    "this stream is arbitrated for device {}; open a new stream for device {}",
                    self.device_id, update.device_id
                ))
            } else {
                self.check_device(update.device_id).unwrap_err()
            }));
        }
        if let Some(role) = &update.role {
            if role.id != 0 || !role.name.is_empty() || role.config.is_some() {
                return Arbitrated::Done(Err(Status::unimplemented(
                    "softswitch serves the default role only",
                )));
            }
        }
        let election_id = update.election_id.map(u128::from);
        if election_id.is_some()
            && g.all
                .iter()
                .any(|c| c.id != client && c.live && !c.tx.closed() && c.election_id == election_id)
        {
            return Arbitrated::IdHeld;
        }
        if let Some(c) = g.all.iter_mut().find(|c| c.id == client) {
            c.live = true;
            c.election_id = election_id;
        }
        let becomes_primary = election_id.is_some_and(|e| g.highest.is_none_or(|h| e >= h));
        tracing::debug!(
            stream = client,
            election_id = ?election_id,
            highest = ?g.highest,
            primary = becomes_primary,
            "arbitration"
        );
        if becomes_primary {
            g.primary = Some(client);
            g.highest = election_id;
            self.announce(&g, None);
        } else if g.primary == Some(client) {
            // The primary downgraded itself.
            g.primary = None;
            self.announce(&g, None);
        } else {
            self.announce(&g, Some(client));
        }
        Arbitrated::Done(Ok(()))
    }

    /// Checks that a Write or SetForwardingPipelineConfig comes from the primary.
    pub fn check_primary(
        &self,
        device_id: u64,
        election_id: Option<p4v1::Uint128>,
    ) -> Result<(), Status> {
        self.check_device(device_id)?;
        let g = self.clients.lock().expect("arbitration lock");
        match (g.primary, election_id.map(u128::from)) {
            (Some(_), Some(e)) if g.highest == Some(e) => Ok(()),
            (None, _) => Err(Status::permission_denied(
                "no primary controller: open a StreamChannel and send a MasterArbitrationUpdate with an election id at least as high as any seen before",
            )),
            _ => Err(Status::permission_denied(
                "only the primary controller (highest election id) may write",
            )),
        }
    }

    /// Whether `client` is the primary.
    pub fn is_primary(&self, client: u64) -> bool {
        let g = self.clients.lock().expect("arbitration lock");
        g.primary == Some(client)
    }

    /// Sends a message to the primary's stream, if there is a primary.
    fn to_primary(&self, message: p4v1::stream_message_response::Update) {
        let g = self.clients.lock().expect("arbitration lock");
        if let Some(c) = g.all.iter().find(|c| Some(c.id) == g.primary) {
            c.tx.send(Ok(p4v1::StreamMessageResponse {
                update: Some(message),
            }));
        }
    }

    /// Sends the arbitration state to `only` that client, or to every live client.
    fn announce(&self, g: &Clients, only: Option<u64>) {
        for c in g
            .all
            .iter()
            .filter(|c| c.live && only.is_none_or(|o| o == c.id))
        {
            let (code, message) = match g.primary {
                Some(p) if p == c.id => (Code::Ok, "this client is the primary"),
                Some(_) => (Code::AlreadyExists, "another client is the primary"),
                None => (
                    Code::NotFound,
                    "no client is the primary: an election id at least as high as this one claims it",
                ),
            };
            let update = p4v1::MasterArbitrationUpdate {
                device_id: self.device_id,
                role: None,
                election_id: g.highest.map(p4v1::Uint128::from),
                status: Some(rpc::Status {
                    code: code as i32,
                    message: message.into(),
                    details: Vec::new(),
                }),
            };
            c.tx.send(Ok(p4v1::StreamMessageResponse {
                update: Some(p4v1::stream_message_response::Update::Arbitration(update)),
            }));
        }
    }
}

impl Controller for Arbitration {
    type Pipeline = Pipeline;

    fn packet_in(&self, pipeline: &Pipeline, frame: Vec<u8>) {
        let message = packetio::packet_in(&pipeline.info, frame);
        self.to_primary(p4v1::stream_message_response::Update::Packet(message));
    }

    fn notify(&self, pipeline: &mut Pipeline, sent: Vec<softswitch_core::switch::DigestSent>) {
        let now = std::time::Instant::now();
        let cp = &pipeline.control_plane;
        for d in sent {
            let Some(&digest_id) = pipeline.index.digests.get(d.digest) else {
                continue;
            };
            let ty = &cp.digests[d.digest].ty;
            pipeline.digests.add(
                digest_id,
                d.values,
                |values| {
                    packetio::digest_data(&cp.types, &pipeline.switch.program().errors, ty, values)
                },
                now,
            );
        }
        for list in pipeline.digests.due(now) {
            self.to_primary(p4v1::stream_message_response::Update::Digest(list));
        }
        for notification in idle::due(pipeline, now) {
            self.to_primary(
                p4v1::stream_message_response::Update::IdleTimeoutNotification(notification),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_holds_at_most_its_queue_and_counts_what_it_drops() {
        let (tx, mut rx) = StreamTx::channel();
        for _ in 0..STREAM_QUEUE + 10 {
            tx.send(Err(Status::internal("x")));
        }
        assert_eq!(tx.dropped(), 10);
        let mut held = 0;
        while rx.try_recv().is_ok() {
            held += 1;
        }
        assert_eq!(held, STREAM_QUEUE);
    }

    #[test]
    fn streams_past_the_limit_are_refused() {
        let arbitration = Arbitration::new(1);
        for _ in 0..MAX_STREAMS {
            arbitration.join(StreamTx::channel().0).unwrap();
        }
        let refused = arbitration.join(StreamTx::channel().0).unwrap_err();
        assert_eq!(refused.code(), Code::ResourceExhausted);
        arbitration.leave(1);
        assert!(arbitration.join(StreamTx::channel().0).is_ok());
    }

    fn claim(election_id: u64) -> p4v1::MasterArbitrationUpdate {
        p4v1::MasterArbitrationUpdate {
            device_id: 1,
            election_id: Some(p4v1::Uint128 {
                high: 0,
                low: election_id,
            }),
            ..Default::default()
        }
    }

    /// The tutorials' PTF tests close a stream and claim its election id on a new one at once.
    #[tokio::test(start_paused = true)]
    async fn an_election_id_held_by_a_stream_that_ends_within_the_grace_is_taken() {
        let arbitration = std::sync::Arc::new(Arbitration::new(1));
        let (old_tx, _old_rx) = StreamTx::channel();
        let old = arbitration.join(old_tx).unwrap();
        arbitration.arbitrate(old, &claim(1)).await.unwrap();
        let (new_tx, _new_rx) = StreamTx::channel();
        let new = arbitration.join(new_tx).unwrap();
        let claiming = tokio::spawn({
            let arbitration = arbitration.clone();
            async move { arbitration.arbitrate(new, &claim(1)).await }
        });
        // The claim runs until it waits for the holder (the runtime is single-threaded).
        tokio::task::yield_now().await;
        assert!(!claiming.is_finished());
        arbitration.leave(old);
        claiming.await.unwrap().unwrap();
        assert!(arbitration.is_primary(new));
    }

    #[tokio::test(start_paused = true)]
    async fn an_election_id_held_by_a_live_stream_is_refused_after_the_grace() {
        let arbitration = Arbitration::new(1);
        let (tx, _rx) = StreamTx::channel();
        let holder = arbitration.join(tx).unwrap();
        arbitration.arbitrate(holder, &claim(1)).await.unwrap();
        let (tx, _rx) = StreamTx::channel();
        let other = arbitration.join(tx).unwrap();
        let started = tokio::time::Instant::now();
        let refused = arbitration.arbitrate(other, &claim(1)).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(started.elapsed() >= HOLDER_GRACE);
        assert!(arbitration.is_primary(holder));
    }

    #[tokio::test]
    async fn a_stream_whose_client_stopped_reading_holds_no_election_id() {
        let arbitration = Arbitration::new(1);
        let (tx, rx) = StreamTx::channel();
        let gone = arbitration.join(tx).unwrap();
        arbitration.arbitrate(gone, &claim(1)).await.unwrap();
        drop(rx);
        let (tx, _rx) = StreamTx::channel();
        let new = arbitration.join(tx).unwrap();
        arbitration.arbitrate(new, &claim(1)).await.unwrap();
        assert!(arbitration.is_primary(new));
    }
}
