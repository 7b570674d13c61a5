//! The gNMI service over a [`CounterTree`]: Capabilities, Get, and Subscribe in its three modes
//! (STREAM with SAMPLE, ON_CHANGE and TARGET_DEFINED subscriptions, ONCE, POLL), each ending its
//! first full answer with `sync_response`. Set is refused: the tree is telemetry, read only.
//! Everything a client sends is bounded by [`Limits`], and refused past them with a gRPC status
//! that names the limit.

use std::{
    collections::{BTreeMap, HashMap},
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use tokio::{
    sync::{mpsc, OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::{
    path::{DataPath, PathLimits, OPENCONFIG},
    proto::gnmi::{
        g_nmi_server::{GNmi, GNmiServer},
        get_request::DataType,
        subscribe_request, subscribe_response, subscription_list, CapabilityRequest,
        CapabilityResponse, Encoding, GetRequest, GetResponse, Notification, SetRequest,
        SetResponse, SubscribeRequest, SubscribeResponse, Subscription, SubscriptionList,
        SubscriptionMode, Update,
    },
    tree::{typed_value, CounterTree, Leaf, ENCODINGS},
};

/// The gNMI version served (the vendored gnmi.proto's `gnmi_service` option).
pub const GNMI_VERSION: &str = "0.10.0";

/// What one client may ask of the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Subscribe streams open at once, all clients together.
    pub max_streams: usize,
    /// Subscribe streams open at once from one client address.
    pub max_streams_per_client: usize,
    /// Subscriptions in one SubscriptionList, or paths in one Get.
    pub max_paths: usize,
    /// The shortest SAMPLE or heartbeat interval; also how often ON_CHANGE subscriptions look
    /// for changes.
    pub min_sample_interval: Duration,
    /// The interval of TARGET_DEFINED subscriptions (a SAMPLE subscription that names none gets
    /// the shortest, [`Limits::min_sample_interval`], as the specification says).
    pub default_sample_interval: Duration,
    /// How long a Subscribe stream may wait before its SubscriptionList.
    pub first_request_timeout: Duration,
    /// Bytes of one request message.
    pub max_request_bytes: usize,
    /// How long a Subscribe stream waits for a client that has stopped reading (its queue
    /// full) before it ends the stream and frees its slot.
    pub send_timeout: Duration,
    /// How often the server pings an idle HTTP/2 connection; one that does not answer within
    /// the same time is closed, with its streams.
    pub keepalive: Duration,
    /// Bounds on each path.
    pub path: PathLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_streams: 32,
            max_streams_per_client: 8,
            max_paths: 64,
            min_sample_interval: Duration::from_millis(100),
            default_sample_interval: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(10),
            max_request_bytes: 64 * 1024,
            send_timeout: Duration::from_secs(30),
            keepalive: Duration::from_secs(30),
            path: PathLimits::default(),
        }
    }
}

/// Reads of the tree in a row that may fail before a STREAM ends with the error; a failed read
/// skips that sample.
const MAX_FAILED_READS: u32 = 5;

/// Responses a Subscribe stream may have queued for a slow client before it waits.
const STREAM_QUEUE: usize = 16;

/// A read of the tree and when it was made.
type Latest = (Instant, Arc<Snapshot>);

/// The gNMI service over `T`.
pub struct Service<T> {
    tree: Arc<T>,
    limits: Limits,
    streams: Arc<Semaphore>,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
    /// The last read of the tree and when it was made, shared by every request.
    latest: Arc<tokio::sync::Mutex<Option<Latest>>>,
    /// Where the grid of [`Limits::min_sample_interval`] that STREAMs wake on starts.
    epoch: Instant,
}

impl<T: CounterTree> Service<T> {
    /// The service over `tree`, within `limits`.
    pub fn new(tree: Arc<T>, limits: Limits) -> Self {
        Self {
            tree,
            streams: Arc::new(Semaphore::new(limits.max_streams)),
            limits,
            per_client: Arc::default(),
            latest: Arc::default(),
            epoch: Instant::now(),
        }
    }

    /// The tonic server of this service, its requests bounded by
    /// [`Limits::max_request_bytes`]: what a gRPC server adds beside its other services.
    pub fn into_server(self) -> GNmiServer<Self> {
        let bytes = self.limits.max_request_bytes;
        GNmiServer::new(self).max_decoding_message_size(bytes)
    }

    /// The tree now: one read at most every [`Limits::min_sample_interval`], shared by every
    /// request made meanwhile (callers that come while it is read wait for that read).
    async fn read(&self) -> Result<Arc<Snapshot>, Status> {
        let mut latest = self.latest.lock().await;
        if let Some((at, snapshot)) = latest.as_ref() {
            if at.elapsed() < self.limits.min_sample_interval {
                return Ok(snapshot.clone());
            }
        }
        let tree = self.tree.clone();
        let leaves = tokio::task::spawn_blocking(move || tree.read())
            .await
            .map_err(|e| Status::internal(format!("reading the counters: {e}")))?
            .map_err(|e| Status::unavailable(format!("reading the counters: {e:#}")))?;
        let snapshot = Arc::new(Snapshot {
            timestamp: now_ns(),
            leaves,
        });
        *latest = Some((Instant::now(), snapshot.clone()));
        Ok(snapshot)
    }

    /// The first time on the grid of [`Limits::min_sample_interval`] at or after `at`: STREAMs
    /// wake only there, however their subscriptions' intervals are staggered.
    fn on_grid(&self, at: Instant) -> Instant {
        let step = self.limits.min_sample_interval.as_nanos().max(1);
        let since = at.saturating_duration_since(self.epoch).as_nanos();
        let steps = since.div_ceil(step);
        self.epoch + Duration::from_nanos(u64::try_from(steps * step).unwrap_or(u64::MAX))
    }

    fn path(
        &self,
        prefix: Option<&crate::proto::gnmi::Path>,
        path: Option<&crate::proto::gnmi::Path>,
    ) -> Result<DataPath, Status> {
        let path = DataPath::from_proto(prefix, path, &self.limits.path)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let origins = self.tree.origins();
        if !origins.contains(&path.origin.as_str()) {
            let served: Vec<&str> = origins
                .iter()
                .map(|o| if o.is_empty() { OPENCONFIG } else { o })
                .collect();
            return Err(Status::invalid_argument(format!(
                "origin {:?} is not served; the served ones are {} (no origin is openconfig)",
                path.origin,
                served.join(", ")
            )));
        }
        Ok(path)
    }

    fn check_paths(&self, count: usize) -> Result<(), Status> {
        if count > self.limits.max_paths {
            tracing::info!("gNMI: refused {count} paths in one request");
            return Err(Status::invalid_argument(format!(
                "{count} paths in one request, more than the {} allowed",
                self.limits.max_paths
            )));
        }
        Ok(())
    }

    /// A slot for one more Subscribe stream from `peer`, or RESOURCE_EXHAUSTED.
    fn admit(&self, peer: Option<SocketAddr>) -> Result<StreamSlot, Status> {
        let permit = self.streams.clone().try_acquire_owned().map_err(|_| {
            tracing::info!("gNMI: refused a Subscribe stream from {peer:?}: all open");
            Status::resource_exhausted(format!(
                "{} Subscribe streams are open, the most the server takes at once",
                self.limits.max_streams
            ))
        })?;
        let client = peer.map(|p| p.ip());
        if let Some(ip) = client {
            let mut counts = self.per_client.lock().expect("client counts");
            let count = counts.entry(ip).or_default();
            if *count >= self.limits.max_streams_per_client {
                tracing::info!("gNMI: refused a Subscribe stream from {ip}: its limit reached");
                return Err(Status::resource_exhausted(format!(
                    "{ip} has {} Subscribe streams open, the most one client may",
                    self.limits.max_streams_per_client
                )));
            }
            *count += 1;
        }
        Ok(StreamSlot {
            _permit: permit,
            client,
            per_client: self.per_client.clone(),
        })
    }

    /// The subscriptions of `list`, checked; their modes and intervals only for a STREAM
    /// (ONCE and POLL ignore them, as the specification says).
    fn subscriptions(&self, list: &SubscriptionList, stream: bool) -> Result<Vec<Sub>, Status> {
        self.check_paths(list.subscription.len())?;
        if list.subscription.is_empty() {
            return Err(Status::invalid_argument(
                "a SubscriptionList without subscriptions",
            ));
        }
        let now = Instant::now();
        list.subscription
            .iter()
            .map(|s| {
                let path = self.path(list.prefix.as_ref(), s.path.as_ref())?;
                let (kind, heartbeat) = if stream {
                    (
                        self.kind(s)?,
                        self.interval("heartbeat_interval", s.heartbeat_interval)?,
                    )
                } else {
                    // Unused: ONCE and POLL answer when asked.
                    (Kind::OnChange, None)
                };
                Ok(Sub {
                    path,
                    kind,
                    heartbeat,
                    suppress_redundant: s.suppress_redundant,
                    due: now,
                    sent: BTreeMap::new(),
                })
            })
            .collect()
    }

    fn kind(&self, s: &Subscription) -> Result<Kind, Status> {
        let mode = SubscriptionMode::try_from(s.mode).map_err(|_| {
            Status::invalid_argument(format!("unknown subscription mode {}", s.mode))
        })?;
        Ok(match mode {
            SubscriptionMode::OnChange => Kind::OnChange,
            // Counters change all the time: the target's choice for them is sampling.
            SubscriptionMode::TargetDefined => Kind::Sample(self.limits.default_sample_interval),
            SubscriptionMode::Sample => Kind::Sample(
                self.interval("sample_interval", s.sample_interval)?
                    .unwrap_or(self.limits.min_sample_interval),
            ),
        })
    }

    /// An interval a client gives in ns: None for 0 (the target's choice), refused under
    /// [`Limits::min_sample_interval`].
    fn interval(&self, what: &str, ns: u64) -> Result<Option<Duration>, Status> {
        if ns == 0 {
            return Ok(None);
        }
        let interval = Duration::from_nanos(ns);
        if interval < self.limits.min_sample_interval {
            tracing::info!("gNMI: refused a {what} of {interval:?}");
            return Err(Status::invalid_argument(format!(
                "{what} {interval:?} is shorter than the {:?} allowed",
                self.limits.min_sample_interval
            )));
        }
        Ok(Some(interval))
    }
}

impl<T> Clone for Service<T> {
    fn clone(&self) -> Self {
        Self {
            tree: self.tree.clone(),
            limits: self.limits,
            streams: self.streams.clone(),
            per_client: self.per_client.clone(),
            latest: self.latest.clone(),
            epoch: self.epoch,
        }
    }
}

/// One open Subscribe stream's place in the counts; freed when dropped.
struct StreamSlot {
    _permit: OwnedSemaphorePermit,
    client: Option<IpAddr>,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if let Some(ip) = self.client {
            let mut counts = self.per_client.lock().expect("client counts");
            if let Some(count) = counts.get_mut(&ip) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(&ip);
                }
            }
        }
    }
}

/// The tree read at one time.
struct Snapshot {
    timestamp: i64,
    leaves: Vec<Leaf>,
}

impl Snapshot {
    /// The leaves any of `queries` names, each once, in path order.
    fn matching<'q>(&self, queries: impl Iterator<Item = &'q DataPath> + Clone) -> Vec<&Leaf> {
        let mut found: Vec<&Leaf> = self
            .leaves
            .iter()
            .filter(|leaf| queries.clone().any(|q| q.matches(&leaf.path)))
            .collect();
        found.sort_by(|a, b| a.path.cmp(&b.path));
        found
    }

    fn notification(
        &self,
        leaves: &[&Leaf],
        deleted: Vec<DataPath>,
        encoding: Encoding,
    ) -> Notification {
        Notification {
            timestamp: self.timestamp,
            update: leaves
                .iter()
                .map(|leaf| Update {
                    path: Some(leaf.path.to_proto()),
                    val: Some(typed_value(leaf.value, encoding)),
                    ..Default::default()
                })
                .collect(),
            delete: deleted.iter().map(DataPath::to_proto).collect(),
            ..Default::default()
        }
    }
}

/// How a STREAM subscription sends.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Every interval.
    Sample(Duration),
    /// When a value changes.
    OnChange,
}

/// One subscription of a STREAM, and what it last sent.
struct Sub {
    path: DataPath,
    kind: Kind,
    heartbeat: Option<Duration>,
    suppress_redundant: bool,
    /// When it next looks at the tree.
    due: Instant,
    /// Each leaf it sent: the value and when.
    sent: BTreeMap<DataPath, (u64, Instant)>,
}

impl Sub {
    /// What to send from `snapshot` at `now` (which is at or after `due`): the leaves to update
    /// and the paths gone since the last time; and the next time to look.
    fn due_updates<'a>(
        &mut self,
        snapshot: &'a Snapshot,
        now: Instant,
        limits: &Limits,
    ) -> (Vec<&'a Leaf>, Vec<DataPath>) {
        let leaves = snapshot.matching(std::iter::once(&self.path));
        let mut send = Vec::new();
        for leaf in &leaves {
            let last = self.sent.get(&leaf.path);
            let changed = last.is_none_or(|(v, _)| *v != leaf.value);
            let heartbeat = match (self.heartbeat, last) {
                (Some(h), Some((_, at))) => now.duration_since(*at) >= h,
                _ => false,
            };
            let wanted = match self.kind {
                Kind::OnChange => changed || heartbeat,
                Kind::Sample(_) => !self.suppress_redundant || changed || heartbeat,
            };
            if wanted {
                self.sent.insert(leaf.path.clone(), (leaf.value, now));
                send.push(*leaf);
            }
        }
        let gone: Vec<DataPath> = self
            .sent
            .keys()
            .filter(|p| leaves.binary_search_by(|l| l.path.cmp(p)).is_err())
            .cloned()
            .collect();
        for path in &gone {
            self.sent.remove(path);
        }
        self.advance(now, limits);
        (send, gone)
    }

    /// Moves `due` to the next time to look after `now`.
    fn advance(&mut self, now: Instant, limits: &Limits) {
        let step = match self.kind {
            Kind::Sample(interval) => interval,
            Kind::OnChange => limits.min_sample_interval,
        };
        // A stream that fell behind skips the samples it missed rather than bursting them.
        self.due += step;
        if self.due < now {
            self.due = now + step;
        }
    }
}

/// What the subscriptions due at `now` send from `snapshot`, if anything: each leaf and each
/// deleted path once, however many overlapping subscriptions name it.
fn due_notification(
    subs: &mut [Sub],
    snapshot: &Snapshot,
    now: Instant,
    limits: &Limits,
    encoding: Encoding,
) -> Option<Notification> {
    let mut updates = Vec::new();
    let mut gone = Vec::new();
    for sub in subs.iter_mut().filter(|s| s.due <= now) {
        let (send, deleted) = sub.due_updates(snapshot, now, limits);
        updates.extend(send);
        gone.extend(deleted);
    }
    updates.sort_by(|a, b| a.path.cmp(&b.path));
    updates.dedup_by(|a, b| a.path == b.path);
    gone.sort();
    gone.dedup();
    (!updates.is_empty() || !gone.is_empty())
        .then(|| snapshot.notification(&updates, gone, encoding))
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The encoding a client asks for, if the server writes it.
fn encoding(requested: i32) -> Result<Encoding, Status> {
    Encoding::try_from(requested)
        .ok()
        .filter(|e| ENCODINGS.contains(e))
        .ok_or_else(|| {
            // The specification (3.3.1): an encoding the target does not support is
            // UNIMPLEMENTED.
            Status::unimplemented(format!(
                "encoding {requested} is not served; these are: JSON_IETF (4), JSON (0), PROTO (2)"
            ))
        })
}

type Out = mpsc::Sender<Result<SubscribeResponse, Status>>;

fn update(notification: Notification) -> SubscribeResponse {
    SubscribeResponse {
        response: Some(subscribe_response::Response::Update(notification)),
        extension: Vec::new(),
    }
}

fn sync_response() -> SubscribeResponse {
    SubscribeResponse {
        response: Some(subscribe_response::Response::SyncResponse(true)),
        extension: Vec::new(),
    }
}

#[tonic::async_trait]
impl<T: CounterTree> GNmi for Service<T> {
    async fn capabilities(
        &self,
        _request: Request<CapabilityRequest>,
    ) -> Result<Response<CapabilityResponse>, Status> {
        Ok(Response::new(CapabilityResponse {
            supported_models: self.tree.models(),
            supported_encodings: ENCODINGS.iter().map(|e| *e as i32).collect(),
            g_nmi_version: GNMI_VERSION.to_owned(),
            extension: Vec::new(),
        }))
    }

    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let request = request.into_inner();
        let encoding = encoding(request.encoding)?;
        self.check_paths(request.path.len())?;
        let mut queries = request
            .path
            .iter()
            .map(|p| self.path(request.prefix.as_ref(), Some(p)))
            .collect::<Result<Vec<_>, _>>()?;
        if queries.is_empty() {
            queries.push(self.path(request.prefix.as_ref(), None)?);
        }
        let snapshot = self.read().await?;
        // Every leaf is state: a CONFIG Get finds nothing, an ALL, STATE or OPERATIONAL one
        // finds each path's leaves, and a path without any is NOT_FOUND (specification 3.3.4).
        let config_only = request.r#type == DataType::Config as i32;
        let mut notification = Vec::new();
        for query in &queries {
            if config_only {
                continue;
            }
            let leaves = snapshot.matching(std::iter::once(query));
            if leaves.is_empty() {
                return Err(Status::not_found(format!("no data at {query}")));
            }
            notification.push(snapshot.notification(&leaves, Vec::new(), encoding));
        }
        Ok(Response::new(GetResponse {
            notification,
            ..Default::default()
        }))
    }

    async fn set(&self, _request: Request<SetRequest>) -> Result<Response<SetResponse>, Status> {
        Err(Status::unimplemented(
            "Set: this target's tree is read-only telemetry",
        ))
    }

    type SubscribeStream = ReceiverStream<Result<SubscribeResponse, Status>>;

    async fn subscribe(
        &self,
        request: Request<Streaming<SubscribeRequest>>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let slot = self.admit(request.remote_addr())?;
        let mut inbound = request.into_inner();
        let first = tokio::time::timeout(self.limits.first_request_timeout, inbound.message())
            .await
            .map_err(|_| {
                Status::deadline_exceeded(format!(
                    "no SubscriptionList within {:?}",
                    self.limits.first_request_timeout
                ))
            })??;
        let Some(SubscribeRequest {
            request: Some(subscribe_request::Request::Subscribe(list)),
            ..
        }) = first
        else {
            return Err(Status::invalid_argument(
                "a Subscribe stream starts with a SubscriptionList",
            ));
        };
        let encoding = encoding(list.encoding)?;
        let mode = subscription_list::Mode::try_from(list.mode)
            .map_err(|_| Status::invalid_argument(format!("unknown mode {}", list.mode)))?;
        let subs = self.subscriptions(&list, mode == subscription_list::Mode::Stream)?;
        let (out, receive) = mpsc::channel(STREAM_QUEUE);
        let stream = SubscribeStream {
            service: self.clone(),
            encoding,
            updates_only: list.updates_only,
            out,
            _slot: slot,
        };
        tokio::spawn(async move {
            let result = stream.serve(mode, subs, inbound).await;
            if let Err(Ended::Failed(status, out)) = result {
                let _ = out.send(Err(status)).await;
            }
        });
        Ok(Response::new(ReceiverStream::new(receive)))
    }
}

/// Why a Subscribe stream's task stops early.
enum Ended {
    /// The client went away.
    Gone,
    /// An error to tell the client on `Out`.
    Failed(Status, Out),
}

/// One Subscribe stream being served.
struct SubscribeStream<T> {
    service: Service<T>,
    encoding: Encoding,
    updates_only: bool,
    out: Out,
    _slot: StreamSlot,
}

impl<T: CounterTree> SubscribeStream<T> {
    /// Queues `response`; a client that leaves the queue full for [`Limits::send_timeout`]
    /// has stopped reading, and the stream ends.
    async fn send(&self, response: SubscribeResponse) -> Result<(), Ended> {
        let limit = self.service.limits.send_timeout;
        match tokio::time::timeout(limit, self.out.send(Ok(response))).await {
            Ok(sent) => sent.map_err(|_| Ended::Gone),
            Err(_) => {
                tracing::info!(
                    "gNMI: ending a Subscribe stream whose client read nothing for {limit:?}"
                );
                Err(Ended::Gone)
            }
        }
    }

    fn fail(&self, status: Status) -> Ended {
        Ended::Failed(status, self.out.clone())
    }

    /// Serves a stream of `mode`: every leaf the subscriptions name, then what the mode
    /// sends after it (nothing for ONCE).
    async fn serve(
        self,
        mode: subscription_list::Mode,
        mut subs: Vec<Sub>,
        inbound: Streaming<SubscribeRequest>,
    ) -> Result<(), Ended> {
        self.full(&mut subs).await?;
        match mode {
            subscription_list::Mode::Once => Ok(()),
            subscription_list::Mode::Poll => self.poll(subs, inbound).await,
            subscription_list::Mode::Stream => self.stream(subs, inbound).await,
        }
    }

    /// Sends the values of `leaves`, read in `snapshot`, as one update.
    async fn send_values(&self, snapshot: &Snapshot, leaves: &[&Leaf]) -> Result<(), Ended> {
        self.send(update(snapshot.notification(
            leaves,
            Vec::new(),
            self.encoding,
        )))
        .await
    }

    /// Every leaf the subscriptions name, then sync_response.
    async fn full(&self, subs: &mut [Sub]) -> Result<(), Ended> {
        let snapshot = self.service.read().await.map_err(|s| self.fail(s))?;
        let now = Instant::now();
        let leaves = snapshot.matching(subs.iter().map(|s| &s.path));
        for sub in subs.iter_mut() {
            for leaf in snapshot.matching(std::iter::once(&sub.path)) {
                sub.sent.insert(leaf.path.clone(), (leaf.value, now));
            }
        }
        if !self.updates_only && !leaves.is_empty() {
            self.send_values(&snapshot, &leaves).await?;
        }
        self.send(sync_response()).await
    }

    /// After the first values, the values again at each Poll request.
    async fn poll(
        self,
        subs: Vec<Sub>,
        mut inbound: Streaming<SubscribeRequest>,
    ) -> Result<(), Ended> {
        let mut answered = Instant::now();
        loop {
            match inbound.message().await {
                Ok(None) | Err(_) => return Ok(()),
                Ok(Some(SubscribeRequest {
                    request: Some(subscribe_request::Request::Poll(_)),
                    ..
                })) => {
                    // At most one answer per min_sample_interval: a faster Poll waits.
                    tokio::time::sleep_until(answered + self.service.limits.min_sample_interval)
                        .await;
                    answered = Instant::now();
                    let snapshot = self.service.read().await.map_err(|s| self.fail(s))?;
                    let leaves = snapshot.matching(subs.iter().map(|s| &s.path));
                    self.send_values(&snapshot, &leaves).await?;
                    self.send(sync_response()).await?;
                }
                Ok(Some(_)) => {
                    return Err(self.fail(Status::invalid_argument(
                        "a POLL stream takes only Poll requests after its SubscriptionList",
                    )))
                }
            }
        }
    }

    /// After the first values, samples and changes as each subscription asks.
    async fn stream(
        self,
        mut subs: Vec<Sub>,
        mut inbound: Streaming<SubscribeRequest>,
    ) -> Result<(), Ended> {
        let limits = self.service.limits;
        let start = Instant::now();
        for sub in &mut subs {
            sub.due = start
                + match sub.kind {
                    Kind::Sample(interval) => interval,
                    Kind::OnChange => limits.min_sample_interval,
                };
        }
        // A client may close its side and go on receiving.
        let mut listening = true;
        let mut failed_reads = 0;
        loop {
            let due = subs
                .iter()
                .map(|s| s.due)
                .min()
                .expect("at least one subscription");
            let due = self.service.on_grid(due);
            tokio::select! {
                message = inbound.message(), if listening => match message {
                    Ok(None) => listening = false,
                    Err(_) => return Ok(()),
                    Ok(Some(_)) => return Err(self.fail(Status::invalid_argument(
                        "a STREAM subscription takes no more requests after its SubscriptionList",
                    ))),
                },
                _ = tokio::time::sleep_until(due) => {
                    let snapshot = match self.service.read().await {
                        Ok(snapshot) => {
                            failed_reads = 0;
                            snapshot
                        }
                        Err(status) => {
                            failed_reads += 1;
                            if failed_reads >= MAX_FAILED_READS {
                                tracing::warn!("gNMI: ending a STREAM after {failed_reads} failed reads in a row: {}", status.message());
                                return Err(self.fail(status));
                            }
                            tracing::warn!("gNMI: skipping a STREAM's sample: {}", status.message());
                            let now = Instant::now();
                            for sub in subs.iter_mut().filter(|s| s.due <= now) {
                                sub.advance(now, &limits);
                            }
                            continue;
                        }
                    };
                    let due = due_notification(&mut subs, &snapshot, Instant::now(), &limits, self.encoding);
                    if let Some(notification) = due {
                        self.send(update(notification)).await?;
                    }
                }
                _ = self.out.closed() => return Err(Ended::Gone),
            }
        }
    }
}

/// Serves the gNMI service over `tree` on `listener` (plain gRPC) until the task is dropped.
pub async fn serve<T: CounterTree>(
    listener: tokio::net::TcpListener,
    tree: Arc<T>,
    limits: Limits,
) -> Result<(), tonic::transport::Error> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    serve_with_incoming(incoming, tree, limits).await
}

/// Serves the gNMI service over `tree` on the connections `incoming` gives (TLS streams a
/// server has accepted, say) until the task is dropped.
pub async fn serve_with_incoming<T, I, IO, IE>(
    incoming: I,
    tree: Arc<T>,
    limits: Limits,
) -> Result<(), tonic::transport::Error>
where
    T: CounterTree,
    I: tokio_stream::Stream<Item = Result<IO, IE>>,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(limits.keepalive))
        .http2_keepalive_timeout(Some(limits.keepalive))
        .add_service(Service::new(tree, limits).into_server())
        .serve_with_incoming(incoming)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::gnmi::ModelData;

    struct Empty;

    impl CounterTree for Empty {
        fn read(&self) -> anyhow::Result<Vec<Leaf>> {
            Ok(Vec::new())
        }
        fn origins(&self) -> &[&str] {
            &["", "lossless"]
        }
        fn models(&self) -> Vec<ModelData> {
            Vec::new()
        }
    }

    fn service(limits: Limits) -> Service<Empty> {
        Service::new(Arc::new(Empty), limits)
    }

    fn list(count: usize, mode: SubscriptionMode, sample_interval: u64) -> SubscriptionList {
        SubscriptionList {
            subscription: (0..count)
                .map(|_| Subscription {
                    path: Some(DataPath::root("").join("interfaces").to_proto()),
                    mode: mode as i32,
                    sample_interval,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn subscriptions_past_the_limits_are_refused_with_the_limit_named() {
        let service = service(Limits::default());
        // Too many subscriptions, and one sampled too fast.
        for (past, limit) in [
            (list(65, SubscriptionMode::Sample, 0), "64 allowed"),
            (list(1, SubscriptionMode::Sample, 99_999_999), "100ms"),
        ] {
            let refused = service.subscriptions(&past, true).err().unwrap();
            assert_eq!(refused.code(), tonic::Code::InvalidArgument);
            assert!(refused.message().contains(limit), "{refused}");
        }
        // ONCE and POLL ignore intervals.
        assert!(service
            .subscriptions(&list(1, SubscriptionMode::Sample, 1), false)
            .is_ok());
        let subs = service
            .subscriptions(&list(64, SubscriptionMode::TargetDefined, 0), true)
            .unwrap();
        assert!(
            matches!(subs[0].kind, Kind::Sample(d) if d == Limits::default().default_sample_interval)
        );
    }

    #[test]
    fn streams_past_the_limits_are_refused_and_freed_when_they_end() {
        let service = service(Limits {
            max_streams: 3,
            max_streams_per_client: 2,
            ..Limits::default()
        });
        let a: SocketAddr = "192.0.2.1:1000".parse().unwrap();
        let b: SocketAddr = "192.0.2.2:1000".parse().unwrap();
        let first = service.admit(Some(a)).unwrap();
        let _second = service.admit(Some(a)).unwrap();
        let third = service.admit(Some(a)).err().unwrap();
        assert_eq!(third.code(), tonic::Code::ResourceExhausted);
        assert!(third.message().contains("192.0.2.1"), "{third}");
        let _other = service.admit(Some(b)).unwrap();
        let full = service.admit(Some(b)).err().unwrap();
        assert!(full.message().contains("3 Subscribe streams"), "{full}");
        drop(first);
        service.admit(Some(a)).unwrap();
    }

    fn snapshot(values: &[(&str, u64)]) -> Snapshot {
        Snapshot {
            timestamp: 0,
            leaves: values
                .iter()
                .map(|(name, value)| Leaf {
                    path: DataPath::root("").join("c").join(name),
                    value: *value,
                })
                .collect(),
        }
    }

    fn sub(kind: Kind, suppress_redundant: bool) -> Sub {
        Sub {
            path: DataPath::root("").join("c"),
            kind,
            heartbeat: None,
            suppress_redundant,
            due: Instant::now(),
            sent: BTreeMap::new(),
        }
    }

    fn sent(updates: (Vec<&Leaf>, Vec<DataPath>)) -> (Vec<u64>, usize) {
        (updates.0.iter().map(|l| l.value).collect(), updates.1.len())
    }

    #[test]
    fn on_change_sends_changes_and_deletes_only() {
        let limits = Limits::default();
        let mut on_change = sub(Kind::OnChange, false);
        let now = Instant::now();
        let first = snapshot(&[("a", 1), ("b", 5)]);
        assert_eq!(
            sent(on_change.due_updates(&first, now, &limits)),
            (vec![1, 5], 0)
        );
        assert_eq!(
            sent(on_change.due_updates(&first, now, &limits)),
            (vec![], 0)
        );
        let changed = snapshot(&[("a", 2)]);
        assert_eq!(
            sent(on_change.due_updates(&changed, now, &limits)),
            (vec![2], 1)
        );
        assert!(on_change.due > now);
    }

    #[test]
    fn sample_resends_unless_suppressed() {
        let limits = Limits::default();
        let interval = Duration::from_secs(1);
        let now = Instant::now();
        let same = snapshot(&[("a", 1)]);
        let mut plain = sub(Kind::Sample(interval), false);
        let mut suppressed = sub(Kind::Sample(interval), true);
        for _ in 0..2 {
            assert_eq!(sent(plain.due_updates(&same, now, &limits)), (vec![1], 0));
        }
        assert_eq!(
            sent(suppressed.due_updates(&same, now, &limits)),
            (vec![1], 0)
        );
        assert_eq!(
            sent(suppressed.due_updates(&same, now, &limits)),
            (vec![], 0)
        );
        suppressed.heartbeat = Some(interval);
        let later = now + interval;
        assert_eq!(
            sent(suppressed.due_updates(&same, later, &limits)),
            (vec![1], 0)
        );
    }

    /// A tree that counts its reads.
    #[derive(Default)]
    struct Counted(std::sync::atomic::AtomicUsize);

    impl CounterTree for Counted {
        fn read(&self) -> anyhow::Result<Vec<Leaf>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Vec::new())
        }
        fn origins(&self) -> &[&str] {
            &[""]
        }
        fn models(&self) -> Vec<ModelData> {
            Vec::new()
        }
    }

    #[tokio::test]
    async fn requests_share_one_read_per_min_sample_interval() {
        let tree = Arc::new(Counted::default());
        let service = Service::new(
            tree.clone(),
            Limits {
                min_sample_interval: Duration::from_secs(3600),
                ..Limits::default()
            },
        );
        let (a, b) = tokio::join!(service.read(), service.read());
        assert!(Arc::ptr_eq(&a.unwrap(), &b.unwrap()));
        service.read().await.unwrap();
        assert_eq!(tree.0.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn streams_wake_on_the_grid_of_min_sample_interval() {
        let service = service(Limits::default());
        let epoch = service.epoch;
        assert_eq!(service.on_grid(epoch), epoch);
        assert_eq!(
            service.on_grid(epoch + Duration::from_millis(150)),
            epoch + Duration::from_millis(200)
        );
        assert_eq!(
            service.on_grid(epoch + Duration::from_millis(200)),
            epoch + Duration::from_millis(200)
        );
    }

    #[test]
    fn a_path_in_an_origin_not_served_is_refused_naming_those_served() {
        let service = service(Limits::default());
        assert!(service
            .path(None, Some(&DataPath::root("lossless").to_proto()))
            .is_ok());
        let other = service
            .path(None, Some(&DataPath::root("elsewhere").to_proto()))
            .unwrap_err();
        assert_eq!(other.code(), tonic::Code::InvalidArgument);
        assert!(other.message().contains("openconfig, lossless"), "{other}");
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_loses_its_stream_and_slot() {
        let service = service(Limits {
            send_timeout: Duration::from_millis(50),
            ..Limits::default()
        });
        let (out, _unread) = mpsc::channel(1);
        let stream = SubscribeStream {
            service: service.clone(),
            encoding: Encoding::Proto,
            updates_only: false,
            out,
            _slot: service.admit(None).unwrap(),
        };
        assert!(stream.send(sync_response()).await.is_ok());
        assert!(matches!(
            stream.send(sync_response()).await,
            Err(Ended::Gone)
        ));
        drop(stream);
        assert_eq!(
            service.streams.available_permits(),
            Limits::default().max_streams
        );
    }

    #[test]
    fn overlapping_subscriptions_due_together_send_each_leaf_once() {
        let limits = Limits::default();
        let values = snapshot(&[("a", 1), ("b", 2)]);
        let mut subs = [
            sub(Kind::Sample(Duration::from_secs(1)), false),
            sub(Kind::OnChange, false),
        ];
        let now = Instant::now();
        let notification =
            due_notification(&mut subs, &values, now, &limits, Encoding::Proto).unwrap();
        assert_eq!(notification.update.len(), 2, "{notification:?}");
        // Neither is due again yet: nothing to send.
        assert!(due_notification(&mut subs, &values, now, &limits, Encoding::Proto).is_none());
    }

    #[test]
    fn encodings_outside_json_ietf_json_and_proto_are_unimplemented() {
        for refused in [Encoding::Bytes as i32, Encoding::Ascii as i32, 99] {
            assert_eq!(
                encoding(refused).unwrap_err().code(),
                tonic::Code::Unimplemented
            );
        }
        assert_eq!(encoding(4).unwrap(), Encoding::JsonIetf);
    }
}
