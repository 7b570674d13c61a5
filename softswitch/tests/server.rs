//! The P4Runtime and Queues services in process: a tonic client against a server on an
//! ephemeral port of 127.0.0.1, ports replaced by recorders. Arbitration, every error code,
//! read-back of every entity, packet I/O, digests, queues, and a pipeline replaced at run time.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use p4runtime::lossless::softswitch::v1 as q;
use p4runtime::p4::config::v1::P4Info;
use p4runtime::p4::v1::get_forwarding_pipeline_config_request::ResponseType;
use p4runtime::p4::v1::{self as p4v1, p4_runtime_client::P4RuntimeClient};
use softswitch_server::engine::{Call as _, Event, Transmit};
use softswitch_server::idle;
use softswitch_server::Device;
use tokio::sync::mpsc::UnboundedSender;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::Code;

const DEVICE: u64 = 3;
const CPU_PORT: u16 = 255;

fn source(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/server/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The P4Info of a test program, computed as `softswitch p4info` does.
fn p4info(name: &str) -> P4Info {
    let mut map = softswitch_frontend::source::SourceMap::new();
    let file = map.add(name, String::from_utf8(source(name)).unwrap());
    let program = softswitch_frontend::compile(&mut map, file).unwrap();
    softswitch_server::p4info::p4info(&program, &map).unwrap()
}

fn id(info: &P4Info, name: &str) -> u32 {
    let p = p4runtime::p4info::preambles(info)
        .find(|p| p.name == name || p.alias == name)
        .unwrap_or_else(|| panic!("no {name} in P4Info"));
    p.id
}

/// A port that hands what the switch sends to the test.
struct Recorder(u16, mpsc::Sender<(u16, Vec<u8>)>);

impl Transmit for Recorder {
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
        let _ = self.1.send((self.0, frame.to_vec()));
        Ok(())
    }
}

/// A recorded port that takes frames only while its gate is open: its room is the gate's
/// (0 shut), as an AF_PACKET port's whose qdisc holds all the kernel lets it.
struct Gated {
    recorder: Recorder,
    room: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl Transmit for Gated {
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
        self.recorder.send(frame)
    }

    fn room(&mut self) -> Option<u32> {
        Some(self.room.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// A device with ports 1..=4 recorded, served on an ephemeral port.
struct Bed {
    device: std::sync::Arc<Device>,
    addr: String,
    sent: mpsc::Receiver<(u16, Vec<u8>)>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Bed {
    async fn new() -> Bed {
        Bed::with_gate(None).await
    }

    /// A bed whose port 3 takes frames only while `gate` (its room) is not 0, if given.
    async fn with_gate(gate: Option<std::sync::Arc<std::sync::atomic::AtomicU32>>) -> Bed {
        let (tx, sent) = mpsc::channel();
        let ports: BTreeMap<u16, Box<dyn Transmit>> = (1..=4)
            .map(|p| {
                let recorder = Recorder(p, tx.clone());
                let port: Box<dyn Transmit> = match &gate {
                    Some(room) if p == 3 => Box::new(Gated {
                        recorder,
                        room: room.clone(),
                    }),
                    _ => Box::new(recorder),
                };
                (p, port)
            })
            .collect();
        let device = std::sync::Arc::new(Device::start(DEVICE, ports, Some(CPU_PORT), None));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = device.clone();
        tokio::spawn(async move {
            serving
                .serve(listener, None, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Bed {
            device,
            addr,
            sent,
            stop: Some(stop),
        }
    }

    async fn client(&self) -> P4RuntimeClient<Channel> {
        P4RuntimeClient::connect(self.addr.clone()).await.unwrap()
    }

    fn inject(&self, port: u16, frame: Vec<u8>) {
        self.device
            .engine
            .send(Event::Frame { port, data: frame })
            .unwrap();
    }

    /// The next frame the switch sends, waiting at most 5 s.
    fn next_sent(&self) -> (u16, Vec<u8>) {
        self.sent
            .recv_timeout(Duration::from_secs(5))
            .expect("the switch sends a frame")
    }

    /// Every frame sent after all queued work is done.
    async fn sent_now(&self) -> Vec<(u16, Vec<u8>)> {
        self.device.engine.call(|_| ()).await.unwrap();
        self.sent.try_iter().collect()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A controller stream that has arbitrated with `election_id`.
struct Stream {
    tx: UnboundedSender<p4v1::StreamMessageRequest>,
    rx: tonic::Streaming<p4v1::StreamMessageResponse>,
}

impl Stream {
    async fn open(client: &mut P4RuntimeClient<Channel>, election_id: u128) -> Stream {
        let (tx, requests) = tokio::sync::mpsc::unbounded_channel();
        let rx = client
            .stream_channel(UnboundedReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        let mut s = Stream { tx, rx };
        s.arbitrate(election_id);
        s
    }

    /// A stream that arbitrated with `election_id` and was answered that it is the primary.
    async fn primary(client: &mut P4RuntimeClient<Channel>, election_id: u128) -> Stream {
        let mut s = Stream::open(client, election_id).await;
        assert_eq!(s.arbitration().await, (Code::Ok as i32, election_id));
        s
    }

    fn arbitrate(&mut self, election_id: u128) {
        self.send(p4v1::stream_message_request::Update::Arbitration(
            p4v1::MasterArbitrationUpdate {
                device_id: DEVICE,
                election_id: Some(election_id.into()),
                ..Default::default()
            },
        ));
    }

    fn send(&self, update: p4v1::stream_message_request::Update) {
        self.tx
            .send(p4v1::StreamMessageRequest {
                update: Some(update),
            })
            .unwrap();
    }

    async fn next(&mut self) -> p4v1::stream_message_response::Update {
        let m = tokio::time::timeout(Duration::from_secs(5), self.rx.next())
            .await
            .expect("a stream message within 5 s")
            .expect("the stream is open")
            .expect("not an error");
        m.update.unwrap()
    }

    /// The next DigestList.
    async fn digest(&mut self) -> p4v1::DigestList {
        loop {
            if let p4v1::stream_message_response::Update::Digest(d) = self.next().await {
                return d;
            }
        }
    }

    /// The idle-timeout notifications that come within `wait` (other messages are dropped).
    async fn idle_notifications(&mut self, wait: Duration) -> Vec<p4v1::IdleTimeoutNotification> {
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        while let Ok(Some(m)) = tokio::time::timeout_at(deadline, self.rx.next()).await {
            if let Some(p4v1::stream_message_response::Update::IdleTimeoutNotification(n)) =
                m.expect("not an error").update
            {
                got.push(n);
            }
        }
        got
    }

    /// The error status that ends the stream, within 5 s.
    async fn end(&mut self) -> tonic::Status {
        tokio::time::timeout(Duration::from_secs(5), self.rx.next())
            .await
            .expect("an answer within 5 s")
            .expect("an answer before the stream's end")
            .expect_err("an error status")
    }

    /// Waits for the next StreamError and checks that it is an INVALID_ARGUMENT carrying
    /// `details`.
    async fn invalid_argument(&mut self, details: p4v1::stream_error::Details) {
        loop {
            if let p4v1::stream_message_response::Update::Error(e) = self.next().await {
                assert_eq!(e.canonical_code, Code::InvalidArgument as i32);
                assert_eq!(e.details, Some(details));
                return;
            }
        }
    }

    /// The next arbitration answer: (code, primary's election id).
    async fn arbitration(&mut self) -> (i32, u128) {
        loop {
            if let p4v1::stream_message_response::Update::Arbitration(a) = self.next().await {
                return (a.status.unwrap().code, a.election_id.map_or(0, u128::from));
            }
        }
    }
}

fn config(program: &str) -> p4v1::ForwardingPipelineConfig {
    p4v1::ForwardingPipelineConfig {
        p4info: Some(p4info(program)),
        p4_device_config: source(program),
        cookie: Some(p4v1::forwarding_pipeline_config::Cookie { cookie: 42 }),
    }
}

async fn set_pipeline(
    client: &mut P4RuntimeClient<Channel>,
    election_id: u128,
    action: p4v1::set_forwarding_pipeline_config_request::Action,
    config: Option<p4v1::ForwardingPipelineConfig>,
) -> Result<(), tonic::Status> {
    let request = pipeline_request(election_id, action, config);
    client
        .set_forwarding_pipeline_config(request)
        .await
        .map(|_| ())
}

/// The SetForwardingPipelineConfig [`set_pipeline`] sends.
fn pipeline_request(
    election_id: u128,
    action: p4v1::set_forwarding_pipeline_config_request::Action,
    config: Option<p4v1::ForwardingPipelineConfig>,
) -> p4v1::SetForwardingPipelineConfigRequest {
    p4v1::SetForwardingPipelineConfigRequest {
        device_id: DEVICE,
        election_id: Some(election_id.into()),
        action: action as i32,
        config,
        ..Default::default()
    }
}

/// The config GetForwardingPipelineConfig answers with, for `response_type`.
async fn pipeline_config(
    client: &mut P4RuntimeClient<Channel>,
    response_type: ResponseType,
) -> Option<p4v1::ForwardingPipelineConfig> {
    client
        .get_forwarding_pipeline_config(p4v1::GetForwardingPipelineConfigRequest {
            device_id: DEVICE,
            response_type: response_type as i32,
        })
        .await
        .unwrap()
        .into_inner()
        .config
}

/// The code of a refused request.
fn refusal(result: Result<(), tonic::Status>) -> Code {
    result.expect_err("the request is refused").code()
}

/// VERIFY_AND_COMMIT of test program `program` with its P4Info.
async fn commit(
    client: &mut P4RuntimeClient<Channel>,
    election_id: u128,
    program: &str,
) -> Result<(), tonic::Status> {
    set_pipeline(
        client,
        election_id,
        SetAction::VerifyAndCommit,
        Some(config(program)),
    )
    .await
}

async fn write(
    client: &mut P4RuntimeClient<Channel>,
    election_id: u128,
    updates: Vec<(p4v1::update::Type, p4v1::entity::Entity)>,
) -> Result<(), tonic::Status> {
    client
        .write(p4v1::WriteRequest {
            device_id: DEVICE,
            election_id: Some(election_id.into()),
            updates: updates
                .into_iter()
                .map(|(t, e)| p4v1::Update {
                    r#type: t as i32,
                    entity: Some(p4v1::Entity { entity: Some(e) }),
                })
                .collect(),
            ..Default::default()
        })
        .await
        .map(|_| ())
}

async fn read(
    client: &mut P4RuntimeClient<Channel>,
    entity: p4v1::entity::Entity,
) -> Vec<p4v1::entity::Entity> {
    let (out, status) = read_batch(client, vec![entity]).await;
    if let Some(status) = status {
        panic!("the read failed: {status:?}");
    }
    out
}

/// The entities a Read of `entities` streams, and the error status that ends the stream, if
/// any.
async fn read_batch(
    client: &mut P4RuntimeClient<Channel>,
    entities: Vec<p4v1::entity::Entity>,
) -> (Vec<p4v1::entity::Entity>, Option<tonic::Status>) {
    let answer = client
        .read(p4v1::ReadRequest {
            device_id: DEVICE,
            entities: entities
                .into_iter()
                .map(|e| p4v1::Entity { entity: Some(e) })
                .collect(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    p4runtime::read::drain(answer).await
}

/// Writes `updates` as the primary of [`loaded`] (election id 10); they must succeed.
async fn apply(
    client: &mut P4RuntimeClient<Channel>,
    updates: Vec<(p4v1::update::Type, p4v1::entity::Entity)>,
) {
    write(client, 10, updates).await.unwrap();
}

fn action(id: u32, params: &[&[u8]]) -> Option<p4v1::TableAction> {
    Some(p4v1::TableAction {
        r#type: Some(p4v1::table_action::Type::Action(p4v1::Action {
            action_id: id,
            params: params
                .iter()
                .enumerate()
                .map(|(i, v)| p4v1::action::Param {
                    param_id: i as u32 + 1,
                    value: v.to_vec(),
                })
                .collect(),
        })),
    })
}

fn lpm(field: u32, value: [u8; 4], len: i32) -> p4v1::FieldMatch {
    p4v1::FieldMatch {
        field_id: field,
        field_match_type: Some(p4v1::field_match::FieldMatchType::Lpm(
            p4v1::field_match::Lpm {
                value: value.to_vec(),
                prefix_len: len,
            },
        )),
    }
}

fn route(info: &P4Info, dst: [u8; 4], len: i32, port: u8) -> p4v1::entity::Entity {
    p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: id(info, "route"),
        r#match: vec![lpm(1, dst, len)],
        action: action(id(info, "forward"), &[&[port]]),
        ..Default::default()
    })
}

/// An IPv4/UDP frame from `src` to `dst` (port 1000 to 2000, "hello"), with valid IPv4 and UDP
/// checksums (built by wire).
fn ipv4_frame(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    udp_frame(src, dst, 0, b"hello")
}

/// An IPv4/UDP frame from `src` to `dst` (port 1000 to 2000) with `dscp` and `payload`, with
/// valid IPv4 and UDP checksums (built by wire).
fn udp_frame(src: [u8; 4], dst: [u8; 4], dscp: u8, payload: &[u8]) -> Vec<u8> {
    use wire::{ethernet, ip, ipv4, udp};
    let header = ethernet::Repr {
        dst_addr: ethernet::Address([2, 0, 0, 0, 0, 2]),
        src_addr: ethernet::Address([2, 0, 0, 0, 0, 1]),
        vlan: ethernet::Vlan::Untagged,
        ethertype: ethernet::EtherType::Ipv4,
    };
    let datagram = udp::Repr {
        src_port: 1000,
        dst_port: 2000,
        payload_len: payload.len(),
    };
    let packet = ipv4::Repr {
        src_addr: src.into(),
        dst_addr: dst.into(),
        protocol: ip::Protocol::Udp,
        payload_len: datagram.buffer_len() + payload.len(),
        ttl: 64,
        dscp,
        ecn: ip::Ecn::NotEct,
        ident: 0,
        dont_frag: true,
    };
    let mut frame = vec![0; header.buffer_len() + packet.buffer_len() + packet.payload_len];
    let mut eth = ethernet::Frame::new_unchecked(&mut frame[..]);
    header.emit(&mut eth).unwrap();
    let mut ip = ipv4::Packet::new_unchecked(eth.payload_mut());
    packet.emit(&mut ip).unwrap();
    let mut udp = udp::Packet::new_unchecked(ip.payload_mut());
    datagram.emit(&mut udp).unwrap();
    udp.payload_mut().copy_from_slice(payload);
    udp.fill_checksum(src.into(), dst.into());
    frame
}

use p4v1::set_forwarding_pipeline_config_request::Action as SetAction;
use p4v1::update::Type::{Delete, Insert, Modify};

/// A bed with switch.p4 loaded by a primary with election id 10.
async fn loaded() -> (Bed, P4RuntimeClient<Channel>, Stream, P4Info) {
    loaded_with("switch.p4").await
}

/// A bed with test program `program` loaded by a primary with election id 10.
async fn loaded_with(program: &str) -> (Bed, P4RuntimeClient<Channel>, Stream, P4Info) {
    load(Bed::new().await, program).await
}

/// `bed` with test program `program` loaded by a primary with election id 10.
async fn load(bed: Bed, program: &str) -> (Bed, P4RuntimeClient<Channel>, Stream, P4Info) {
    let mut client = bed.client().await;
    let primary = Stream::primary(&mut client, 10).await;
    commit(&mut client, 10, program).await.unwrap();
    (bed, client, primary, p4info(program))
}

/// [`loaded`], with 10.0.0.0/8 routed to `port`.
async fn routed_to(port: u8) -> (Bed, P4RuntimeClient<Channel>, Stream, P4Info) {
    let (bed, mut client, primary, info) = loaded().await;
    apply(
        &mut client,
        vec![(Insert, route(&info, [10, 0, 0, 0], 8, port))],
    )
    .await;
    (bed, client, primary, info)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_size_limit_is_refused_before_it_is_read() {
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    let _primary = Stream::primary(&mut client, 1).await;
    let config = p4v1::ForwardingPipelineConfig {
        p4info: Some(P4Info::default()),
        p4_device_config: vec![b' '; softswitch_server::p4rt::MAX_REQUEST_BYTES],
        cookie: None,
    };
    let err = set_pipeline(&mut client, 1, SetAction::Verify, Some(config))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert!(err.message().contains("limit"), "{err:?}");
    // The switch goes on serving.
    assert!(client
        .capabilities(p4v1::CapabilitiesRequest { device_id: DEVICE })
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_and_device_ids() {
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    let caps = client
        .capabilities(p4v1::CapabilitiesRequest { device_id: DEVICE })
        .await
        .unwrap()
        .into_inner();
    assert!(caps.p4runtime_api_version.starts_with("1."));
    let err = client
        .get_forwarding_pipeline_config(p4v1::GetForwardingPipelineConfigRequest {
            device_id: DEVICE + 1,
            response_type: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        pipeline_config(&mut client, ResponseType::All).await,
        None,
        "no pipeline yet: no config"
    );
    // Writes (from the primary) and reads need a pipeline.
    let _primary = Stream::primary(&mut client, 1).await;
    let err = write(&mut client, 1, vec![]).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let Err(err) = client
        .read(p4v1::ReadRequest {
            device_id: DEVICE,
            ..Default::default()
        })
        .await
    else {
        panic!("a Read without a pipeline succeeded");
    };
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_highest_election_id_is_primary_and_only_it_may_write() {
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    // No stream at all: nobody may write.
    let err = commit(&mut client, 1, "switch.p4").await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);

    let mut first = Stream::primary(&mut client, 5).await;
    let second = Stream::primary(&mut client, 7).await;
    // The first is told it is now a backup.
    let mut told = first.arbitration().await;
    while told.1 != 7 {
        told = first.arbitration().await;
    }
    assert_eq!(told, (Code::AlreadyExists as i32, 7));

    let err = commit(&mut client, 5, "switch.p4").await.unwrap_err();
    assert_eq!(
        err.code(),
        Code::PermissionDenied,
        "a backup may not set the pipeline"
    );
    commit(&mut client, 7, "switch.p4").await.unwrap();
    let info = p4info("switch.p4");
    let err = write(
        &mut client,
        5,
        vec![(Insert, route(&info, [10, 0, 0, 0], 8, 1))],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "a backup may not write");

    // The same election id twice is refused on the stream.
    let mut third = Stream::open(&mut client, 7).await;
    assert_eq!(third.end().await.code(), Code::InvalidArgument);

    // The primary leaves: the backup is told there is no primary, with the highest election id
    // seen, and stays a backup (its id is lower than that one).
    drop(second);
    let mut told = first.arbitration().await;
    while told.0 != Code::NotFound as i32 {
        told = first.arbitration().await;
    }
    assert_eq!(told, (Code::NotFound as i32, 7));
    let err = write(
        &mut client,
        5,
        vec![(Insert, route(&info, [10, 0, 0, 0], 8, 1))],
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.code(),
        Code::PermissionDenied,
        "a lower election id than the last primary's does not become primary"
    );
    // Claiming the last primary's id makes it primary.
    first.arbitrate(7);
    assert_eq!(first.arbitration().await, (Code::Ok as i32, 7));
    write(
        &mut client,
        7,
        vec![(Insert, route(&info, [10, 0, 0, 0], 8, 1))],
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_downgrades_leaves_no_primary_and_a_stream_keeps_its_device() {
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    // Nobody has been primary yet: the first id claims it.
    let mut backup = Stream::primary(&mut client, 3).await;
    let mut primary = Stream::primary(&mut client, 9).await;
    assert_eq!(backup.arbitration().await, (Code::AlreadyExists as i32, 9));
    // The primary downgrades itself: everyone is told there is no primary.
    primary.arbitrate(2);
    assert_eq!(primary.arbitration().await, (Code::NotFound as i32, 9));
    assert_eq!(backup.arbitration().await, (Code::NotFound as i32, 9));
    let err = commit(&mut client, 9, "switch.p4").await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    // A stream cannot move to another device.
    backup.send(p4v1::stream_message_request::Update::Arbitration(
        p4v1::MasterArbitrationUpdate {
            device_id: DEVICE + 1,
            election_id: Some(20u128.into()),
            ..Default::default()
        },
    ));
    assert_eq!(backup.end().await.code(), Code::FailedPrecondition);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_are_verified_saved_committed_and_read_back() {
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    let _primary = Stream::primary(&mut client, 1).await;

    // The p4info must describe the program; the device config is P4 source, UTF-8, and its
    // errors come with their location.
    let with = |p4info: &str, source: &[u8]| p4v1::ForwardingPipelineConfig {
        p4info: Some(self::p4info(p4info)),
        p4_device_config: source.to_vec(),
        cookie: None,
    };
    for (refused, says) in [
        (
            with("ports.p4", &source("switch.p4")),
            "P4Info does not describe",
        ),
        (with("switch.p4", b"control oops("), "device_config.p4:1:"),
        (with("switch.p4", &[0xff, 0xfe]), "UTF-8"),
        // BMv2's JSON is loaded as such, and an incomplete one refused saying what it lacks.
        (
            with("switch.p4", b"{\n  \"header_types\" : []\n}"),
            "BMv2 JSON: the program has no \"headers\"",
        ),
    ] {
        let err = set_pipeline(&mut client, 1, SetAction::VerifyAndCommit, Some(refused))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains(says), "{}", err.message());
    }
    // VERIFY loads nothing; COMMIT needs a saved config.
    set_pipeline(&mut client, 1, SetAction::Verify, Some(config("switch.p4")))
        .await
        .unwrap();
    assert_eq!(pipeline_config(&mut client, ResponseType::All).await, None);
    assert_eq!(
        refusal(set_pipeline(&mut client, 1, SetAction::Commit, None).await),
        Code::NotFound,
        "nothing saved to commit"
    );
    // A P4Info that differs only where it may (here an annotation, as another p4c version
    // could write) is read back as it was sent.
    let mut annotated = config("switch.p4");
    let sent_info = annotated.p4info.as_mut().unwrap();
    sent_info.tables[0]
        .preamble
        .as_mut()
        .unwrap()
        .annotations
        .push("@from_the_controller".into());
    let sent_info = sent_info.clone();
    set_pipeline(&mut client, 1, SetAction::VerifyAndSave, Some(annotated))
        .await
        .unwrap();
    assert_eq!(
        refusal(set_pipeline(&mut client, 1, SetAction::Commit, Some(config("switch.p4"))).await),
        Code::InvalidArgument,
        "COMMIT takes no config"
    );
    set_pipeline(&mut client, 1, SetAction::Commit, None)
        .await
        .unwrap();

    let all = pipeline_config(&mut client, ResponseType::All)
        .await
        .unwrap();
    assert_eq!(all.p4info, Some(sent_info));
    assert_eq!(all.p4_device_config, source("switch.p4"));
    assert_eq!(all.cookie.unwrap().cookie, 42);
    let cookie = pipeline_config(&mut client, ResponseType::CookieOnly)
        .await
        .unwrap();
    assert!(
        cookie.p4info.is_none() && cookie.p4_device_config.is_empty() && cookie.cookie.is_some()
    );
    let info = pipeline_config(&mut client, ResponseType::P4infoAndCookie)
        .await
        .unwrap();
    assert!(info.p4info.is_some() && info.p4_device_config.is_empty());
    let device = pipeline_config(&mut client, ResponseType::DeviceConfigAndCookie)
        .await
        .unwrap();
    assert!(device.p4info.is_none() && !device.p4_device_config.is_empty());

    // A VERIFY_AND_COMMIT after a VERIFY_AND_SAVE leaves nothing to COMMIT.
    set_pipeline(
        &mut client,
        1,
        SetAction::VerifyAndSave,
        Some(config("ports.p4")),
    )
    .await
    .unwrap();
    commit(&mut client, 1, "switch.p4").await.unwrap();
    assert_eq!(
        refusal(set_pipeline(&mut client, 1, SetAction::Commit, None).await),
        Code::NotFound,
        "the saved config was superseded by the committed one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_entries_of_every_match_kind_are_written_and_read_back() {
    let (_bed, mut client, _primary, info) = loaded().await;
    let acl = id(&info, "acl");
    let ternary = |v: u8, m: u8| p4v1::FieldMatch {
        field_id: 1,
        field_match_type: Some(p4v1::field_match::FieldMatchType::Ternary(
            p4v1::field_match::Ternary {
                value: vec![v, 0, 0, 0],
                mask: vec![m, 0, 0, 0],
            },
        )),
    };
    let range = p4v1::FieldMatch {
        field_id: 2,
        field_match_type: Some(p4v1::field_match::FieldMatchType::Range(
            p4v1::field_match::Range {
                low: vec![6],
                high: vec![17],
            },
        )),
    };
    let optional = p4v1::FieldMatch {
        field_id: 3,
        field_match_type: Some(p4v1::field_match::FieldMatchType::Optional(
            p4v1::field_match::Optional { value: vec![4] },
        )),
    };
    let acl_entry = |matches: Vec<p4v1::FieldMatch>, priority: i32| {
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
            table_id: acl,
            r#match: matches,
            action: action(id(&info, "drop"), &[]),
            priority,
            ..Default::default()
        })
    };
    let smac = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: id(&info, "smac"),
        r#match: vec![p4v1::FieldMatch {
            field_id: 1,
            field_match_type: Some(p4v1::field_match::FieldMatchType::Exact(
                p4v1::field_match::Exact {
                    value: vec![2, 0, 0, 0, 0, 1],
                },
            )),
        }],
        // A parameter with an @id(5) keeps its id when read back.
        action: Some(p4v1::TableAction {
            r#type: Some(p4v1::table_action::Type::Action(p4v1::Action {
                action_id: id(&info, "set_tos"),
                params: vec![p4v1::action::Param {
                    param_id: 5,
                    value: vec![0x20],
                }],
            })),
        }),
        ..Default::default()
    });
    let written = vec![
        route(&info, [10, 0, 0, 0], 8, 1),
        route(&info, [10, 1, 0, 0], 16, 2),
        acl_entry(vec![ternary(192, 255), range.clone(), optional.clone()], 10),
        acl_entry(vec![range.clone()], 5),
        smac.clone(),
    ];
    write(
        &mut client,
        10,
        written.iter().map(|e| (Insert, e.clone())).collect(),
    )
    .await
    .unwrap();

    let all = read(
        &mut client,
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry::default()),
    )
    .await;
    assert_eq!(all.len(), written.len());
    for e in &written {
        assert!(all.contains(e), "{e:?} not read back from {all:?}");
    }
    // One table, one entry by key.
    let routes = read(
        &mut client,
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
            table_id: id(&info, "route"),
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(routes.len(), 2);
    let one = read(&mut client, route(&info, [10, 1, 0, 0], 16, 0)).await;
    assert_eq!(one, vec![route(&info, [10, 1, 0, 0], 16, 2)]);

    // MODIFY changes the action; DELETE removes.
    apply(
        &mut client,
        vec![(Modify, route(&info, [10, 1, 0, 0], 16, 3))],
    )
    .await;
    assert_eq!(
        read(&mut client, route(&info, [10, 1, 0, 0], 16, 0)).await,
        vec![route(&info, [10, 1, 0, 0], 16, 3)]
    );
    apply(
        &mut client,
        vec![(Delete, route(&info, [10, 1, 0, 0], 16, 0))],
    )
    .await;
    assert!(read(&mut client, route(&info, [10, 1, 0, 0], 16, 0))
        .await
        .is_empty());

    // The default entry.
    let default = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: id(&info, "route"),
        action: action(id(&info, "forward"), &[&[4]]),
        is_default_action: true,
        ..Default::default()
    });
    apply(&mut client, vec![(Modify, default.clone())]).await;
    let read_default = read(
        &mut client,
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
            table_id: id(&info, "route"),
            is_default_action: true,
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(read_default, vec![default]);
}

fn error_codes(status: &tonic::Status) -> Vec<i32> {
    p4runtime::status::update_errors(status)
        .iter()
        .map(|e| e.canonical_code)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_updates_are_reported_one_by_one_with_the_specs_codes() {
    let (_bed, mut client, _primary, info) = routed_to(1).await;
    let bad_prefix = route(&info, [10, 0, 0, 1], 8, 1);
    let wide_port = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: id(&info, "route"),
        r#match: vec![lpm(1, [11, 0, 0, 0], 8)],
        action: action(id(&info, "forward"), &[&[2, 0]]),
        ..Default::default()
    });
    let no_table = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: 0x0200_0001,
        ..Default::default()
    });
    let no_priority = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: id(&info, "acl"),
        action: action(id(&info, "drop"), &[]),
        ..Default::default()
    });
    let err = write(
        &mut client,
        10,
        vec![
            (Insert, route(&info, [12, 0, 0, 0], 8, 1)),
            (Insert, route(&info, [10, 0, 0, 0], 8, 2)),
            (Delete, route(&info, [13, 0, 0, 0], 8, 1)),
            (Insert, bad_prefix),
            (Insert, wide_port),
            (Insert, no_table),
            (Insert, no_priority),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.code(),
        Code::Unknown,
        "a batch with failures is UNKNOWN"
    );
    assert_eq!(
        error_codes(&err),
        [
            Code::Ok,
            Code::AlreadyExists,
            Code::NotFound,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::NotFound,
            Code::InvalidArgument
        ]
        .map(|c| c as i32)
    );
    // CONTINUE_ON_ERROR: the good update was applied.
    assert_eq!(
        read(&mut client, route(&info, [12, 0, 0, 0], 8, 0))
            .await
            .len(),
        1
    );
    let err = client
        .write(p4v1::WriteRequest {
            device_id: DEVICE,
            election_id: Some(10u128.into()),
            atomicity: p4v1::write_request::Atomicity::RollbackOnError as i32,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_counters_and_registers_are_read_and_written() {
    let (bed, mut client, _primary, info) = routed_to(2).await;
    let frame = ipv4_frame([192, 168, 0, 1], [10, 2, 3, 4]);
    for _ in 0..3 {
        bed.inject(1, frame.clone());
    }
    for _ in 0..3 {
        assert_eq!(bed.next_sent(), (2, frame.clone()));
    }
    // The indirect counter, cell 1 (the ingress port).
    let counters = read(
        &mut client,
        p4v1::entity::Entity::CounterEntry(p4v1::CounterEntry {
            counter_id: id(&info, "port_counter"),
            index: Some(p4v1::Index { index: 1 }),
            ..Default::default()
        }),
    )
    .await;
    let p4v1::entity::Entity::CounterEntry(c) = &counters[0] else {
        panic!()
    };
    assert_eq!(
        c.data,
        Some(p4v1::CounterData {
            packet_count: 3,
            byte_count: 3 * frame.len() as i64
        })
    );
    // Wildcard: every cell of every counter.
    let all = read(
        &mut client,
        p4v1::entity::Entity::CounterEntry(p4v1::CounterEntry::default()),
    )
    .await;
    assert_eq!(all.len(), 512);
    // The direct counter of the route entry.
    let direct = read(
        &mut client,
        p4v1::entity::Entity::DirectCounterEntry(p4v1::DirectCounterEntry {
            table_entry: Some(p4v1::TableEntry {
                table_id: id(&info, "route"),
                ..Default::default()
            }),
            data: None,
        }),
    )
    .await;
    let p4v1::entity::Entity::DirectCounterEntry(d) = &direct[0] else {
        panic!()
    };
    assert_eq!(d.data.unwrap().packet_count, 3);
    // Counters are written with MODIFY only.
    apply(
        &mut client,
        vec![(
            Modify,
            p4v1::entity::Entity::CounterEntry(p4v1::CounterEntry {
                counter_id: id(&info, "port_counter"),
                index: Some(p4v1::Index { index: 1 }),
                data: Some(p4v1::CounterData {
                    packet_count: 0,
                    byte_count: 0,
                }),
            }),
        )],
    )
    .await;
    let err = write(
        &mut client,
        10,
        vec![(
            Insert,
            p4v1::entity::Entity::CounterEntry(p4v1::CounterEntry {
                counter_id: id(&info, "port_counter"),
                index: Some(p4v1::Index { index: 64 }),
                ..Default::default()
            }),
        )],
    )
    .await
    .unwrap_err();
    assert_eq!(error_codes(&err), [Code::InvalidArgument as i32]);
    // The register holds the last packet length from port 1; it can be written.
    let reg = |index, value: Option<Vec<u8>>| {
        p4v1::entity::Entity::RegisterEntry(p4v1::RegisterEntry {
            register_id: id(&info, "last_length"),
            index: Some(p4v1::Index { index }),
            data: value.map(|v| p4v1::P4Data {
                data: Some(p4v1::p4_data::Data::Bitstring(v)),
            }),
        })
    };
    let cell = |entities: Vec<p4v1::entity::Entity>| match &entities[0] {
        p4v1::entity::Entity::RegisterEntry(r) => r.data.clone().unwrap().data.unwrap(),
        other => panic!("not a register entry: {other:?}"),
    };
    let len: Vec<u8> = (frame.len() as u32)
        .to_be_bytes()
        .into_iter()
        .skip_while(|b| *b == 0)
        .collect();
    assert_eq!(
        cell(read(&mut client, reg(1, None)).await),
        p4v1::p4_data::Data::Bitstring(len)
    );
    apply(&mut client, vec![(Modify, reg(5, Some(vec![7])))]).await;
    assert_eq!(
        cell(read(&mut client, reg(5, None)).await),
        p4v1::p4_data::Data::Bitstring(vec![7])
    );
    let err = write(&mut client, 10, vec![(Modify, reg(16, Some(vec![7])))])
        .await
        .unwrap_err();
    assert_eq!(error_codes(&err), [Code::OutOfRange as i32]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multicast_groups_and_clone_sessions_are_replication_entries() {
    let (bed, mut client, _primary, info) = loaded().await;
    use p4v1::packet_replication_engine_entry::Type;
    let replica = |port: u8, instance| p4v1::Replica {
        instance,
        port_kind: Some(p4v1::replica::PortKind::Port(vec![port])),
        ..Default::default()
    };
    let group = |replicas| {
        p4v1::entity::Entity::PacketReplicationEngineEntry(p4v1::PacketReplicationEngineEntry {
            r#type: Some(Type::MulticastGroupEntry(p4v1::MulticastGroupEntry {
                multicast_group_id: 7,
                replicas,
                metadata: Vec::new(),
            })),
        })
    };
    let flood = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: id(&info, "route"),
        r#match: vec![lpm(1, [10, 0, 0, 0], 8)],
        action: action(id(&info, "flood"), &[&[7]]),
        ..Default::default()
    });
    apply(
        &mut client,
        vec![
            (Insert, group(vec![replica(2, 1), replica(3, 1)])),
            (Insert, flood),
        ],
    )
    .await;
    let err = write(&mut client, 10, vec![(Insert, group(vec![]))])
        .await
        .unwrap_err();
    assert_eq!(error_codes(&err), [Code::AlreadyExists as i32]);
    // A (port, instance) pair twice is INVALID_ARGUMENT, backup replicas UNIMPLEMENTED; the
    // group stays as it was.
    let with_backup = p4v1::Replica {
        backup_replicas: vec![p4v1::BackupReplica {
            instance: 1,
            port: vec![4],
        }],
        ..replica(2, 1)
    };
    let err = write(
        &mut client,
        10,
        vec![
            (Modify, group(vec![replica(2, 1), replica(2, 1)])),
            (Modify, group(vec![with_backup])),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        error_codes(&err),
        [Code::InvalidArgument as i32, Code::Unimplemented as i32]
    );
    let frame = ipv4_frame([1, 1, 1, 1], [10, 9, 9, 9]);
    bed.inject(1, frame.clone());
    let mut ports: Vec<u16> = (0..2).map(|_| bed.next_sent().0).collect();
    ports.sort();
    assert_eq!(ports, [2, 3]);
    apply(&mut client, vec![(Modify, group(vec![replica(4, 2)]))]).await;
    assert_eq!(
        read(&mut client, group(vec![])).await,
        vec![group(vec![replica(4, 2)])],
        "read back as written"
    );
    bed.inject(1, frame.clone());
    assert_eq!(bed.next_sent().0, 4);
    apply(&mut client, vec![(Delete, group(vec![]))]).await;
    assert!(read(&mut client, group(vec![])).await.is_empty());

    let session = |id, replicas| {
        p4v1::entity::Entity::PacketReplicationEngineEntry(p4v1::PacketReplicationEngineEntry {
            r#type: Some(Type::CloneSessionEntry(p4v1::CloneSessionEntry {
                session_id: id,
                replicas,
                ..Default::default()
            })),
        })
    };
    apply(&mut client, vec![(Insert, session(5, vec![replica(3, 0)]))]).await;
    assert_eq!(
        read(&mut client, session(0, vec![])).await,
        vec![session(5, vec![replica(3, 0)])]
    );
    let err = write(&mut client, 10, vec![(Delete, session(6, vec![]))])
        .await
        .unwrap_err();
    assert_eq!(error_codes(&err), [Code::NotFound as i32]);
    // What softswitch cannot do is refused, not stored and ignored.
    let classed =
        p4v1::entity::Entity::PacketReplicationEngineEntry(p4v1::PacketReplicationEngineEntry {
            r#type: Some(Type::CloneSessionEntry(p4v1::CloneSessionEntry {
                session_id: 6,
                replicas: vec![replica(3, 0)],
                class_of_service: 2,
                ..Default::default()
            })),
        });
    let err = write(&mut client, 10, vec![(Insert, classed)])
        .await
        .unwrap_err();
    assert_eq!(error_codes(&err), [Code::Unimplemented as i32]);
    assert!(bed.sent_now().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packets_go_to_and_come_from_the_controller_and_digests_are_streamed() {
    let (bed, mut client, mut primary, info) = loaded().await;
    // PacketOut: the packet_out header carries the egress port.
    let payload = ipv4_frame([1, 2, 3, 4], [5, 6, 7, 8]);
    primary.send(p4v1::stream_message_request::Update::Packet(
        p4v1::PacketOut {
            payload: payload.clone(),
            metadata: vec![
                p4v1::PacketMetadata {
                    metadata_id: 1,
                    value: vec![3],
                },
                p4v1::PacketMetadata {
                    metadata_id: 2,
                    value: vec![0],
                },
            ],
        },
    ));
    assert_eq!(bed.next_sent(), (3, payload.clone()));
    // A bad PacketOut gets a StreamError.
    let bad = p4v1::PacketOut {
        payload: payload.clone(),
        metadata: vec![],
    };
    primary.send(p4v1::stream_message_request::Update::Packet(bad.clone()));
    // It carries the PacketOut, as the specification suggests.
    primary
        .invalid_argument(p4v1::stream_error::Details::PacketOut(
            p4v1::PacketOutError {
                packet_out: Some(bad),
            },
        ))
        .await;
    // To the CPU: a PacketIn with the ingress port in its metadata.
    let to_cpu = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: id(&info, "route"),
        r#match: vec![lpm(1, [10, 0, 0, 0], 8)],
        action: action(id(&info, "to_cpu"), &[]),
        ..Default::default()
    });
    apply(&mut client, vec![(Insert, to_cpu)]).await;
    let frame = ipv4_frame([1, 2, 3, 4], [10, 0, 0, 1]);
    bed.inject(2, frame.clone());
    loop {
        if let p4v1::stream_message_response::Update::Packet(p) = primary.next().await {
            assert_eq!(p.payload, frame);
            assert_eq!(
                p.metadata[0],
                p4v1::PacketMetadata {
                    metadata_id: 1,
                    value: vec![2]
                }
            );
            break;
        }
    }
    // Digests flow once configured: smac misses, so learn() sends the source MAC and port.
    let digest_id = id(&info, "learn_t");
    apply(
        &mut client,
        vec![(
            Insert,
            p4v1::entity::Entity::DigestEntry(p4v1::DigestEntry {
                digest_id,
                config: Some(p4v1::digest_entry::Config {
                    max_timeout_ns: 0,
                    max_list_size: 1,
                    ack_timeout_ns: 60_000_000_000,
                }),
            }),
        )],
    )
    .await;
    // The same data twice before an acknowledgement is one digest (the specification's cache):
    // the next digest after the first is the one from port 3.
    let port_of = |d: &p4v1::DigestList| {
        let p4v1::p4_data::Data::Struct(s) = d.data[0].data.clone().unwrap() else {
            panic!()
        };
        match s.members[1].data.clone().unwrap() {
            p4v1::p4_data::Data::Bitstring(p) => p[0],
            other => panic!("{other:?}"),
        }
    };
    bed.inject(4, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    bed.inject(4, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    bed.inject(3, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    let mut lists = Vec::new();
    while lists.len() < 2 {
        if let p4v1::stream_message_response::Update::Digest(d) = primary.next().await {
            lists.push((port_of(&d), d.list_id));
        }
    }
    assert_eq!(lists.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [4, 3]);
    // Acknowledged, port 4's digest may come again: inject it, then a marker from a new port,
    // until port 4's arrives before the marker (the acknowledgement has been handled).
    primary.send(p4v1::stream_message_request::Update::DigestAck(
        p4v1::DigestListAck {
            digest_id,
            list_id: lists[0].1,
        },
    ));
    let mut marker = 10u8;
    loop {
        bed.inject(4, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
        bed.inject(u16::from(marker), ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
        let mut seen = Vec::new();
        while seen.last() != Some(&marker) {
            if let p4v1::stream_message_response::Update::Digest(d) = primary.next().await {
                seen.push(port_of(&d));
            }
        }
        if seen == [4, marker] {
            break;
        }
        assert_eq!(seen, [marker], "digests after the acknowledgement");
        marker += 1;
        assert!(marker < 60, "the acknowledgement never cleared the digest");
    }
    bed.inject(2, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    let d = primary.digest().await;
    assert_eq!(d.digest_id, digest_id);
    let p4v1::p4_data::Data::Struct(s) = d.data[0].data.clone().unwrap() else {
        panic!()
    };
    let fields: Vec<_> = s.members.into_iter().map(|m| m.data.unwrap()).collect();
    assert_eq!(
        fields,
        vec![
            p4v1::p4_data::Data::Bitstring(vec![2, 0, 0, 0, 0, 1]),
            p4v1::p4_data::Data::Bitstring(vec![2]),
        ]
    );
    primary.send(p4v1::stream_message_request::Update::DigestAck(
        p4v1::DigestListAck {
            digest_id,
            list_id: d.list_id,
        },
    ));
    // An acknowledgement for a digest the program does not have is an INVALID_ARGUMENT
    // StreamError.
    let unknown = p4v1::DigestListAck {
        digest_id: 0x0500_0bad,
        list_id: 1,
    };
    primary.send(p4v1::stream_message_request::Update::DigestAck(unknown));
    primary
        .invalid_argument(p4v1::stream_error::Details::DigestListAck(
            p4v1::DigestListAckError {
                digest_list_ack: Some(unknown),
            },
        ))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_is_replaced_while_the_switch_runs() {
    let (bed, mut client, _primary, _) = routed_to(2).await;
    let frame = ipv4_frame([1, 1, 1, 1], [10, 0, 0, 1]);
    bed.inject(1, frame.clone());
    assert_eq!(bed.next_sent().0, 2);

    commit(&mut client, 10, "ports.p4").await.unwrap();
    let ports = p4info("ports.p4");
    // The old tables are gone; the new program drops until told otherwise.
    assert!(read(
        &mut client,
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry::default())
    )
    .await
    .is_empty());
    bed.inject(1, frame.clone());
    assert!(bed.sent_now().await.is_empty());
    let patch = exact_entry(
        id(&ports, "patch"),
        &[1],
        action(id(&ports, "forward"), &[&[4]]),
    );
    apply(
        &mut client,
        vec![(Insert, p4v1::entity::Entity::TableEntry(patch))],
    )
    .await;
    bed.inject(1, frame.clone());
    assert_eq!(bed.next_sent(), (4, frame));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_depth_and_rate_are_set_per_port_and_priority() {
    let (bed, _client, _primary, _info) = loaded().await;
    let mut queues = q::queues_client::QueuesClient::connect(bed.addr.clone())
        .await
        .unwrap();
    let set = set_queue(&mut queues, |r| {
        r.port = Some(2);
        r.priority = Some(3);
        r.depth_packets = Some(10);
        r.rate_pps = Some(1000);
    })
    .await
    .unwrap();
    assert_eq!(set, vec![unused_queue(2, 3, 10, 1000)]);
    let all = queues
        .get_queues(q::GetQueuesRequest { device_id: DEVICE })
        .await
        .unwrap()
        .into_inner();
    // Every port of the switch (1..=4), 8 queues each, whether or not a packet waited in them.
    assert_eq!(all.queues.len(), 32);
    assert_eq!(all.queues[0], unused_queue(1, 0, 64, 0));
    assert_eq!(all.queues[8 + 3], set[0]);
    assert_eq!((all.default_depth_packets, all.default_rate_pps), (64, 0));
    assert_invalid(
        &mut queues,
        &[
            |r| r.priority = Some(8),
            // 511 is v1model's drop port, not a port with queues.
            |r| r.port = Some(511),
            |r| r.depth_packets = Some(0),
            // The microburst rule is checked by the traffic manager's rules.
            |r| r.burst_window_us = Some(softswitch_core::tm::measures::MAX_BURST_WINDOW_US + 1),
        ],
    )
    .await;
    // One rule with STF's set_queue_depth (tests/stf_limits.rs): the traffic manager's.
    let zero = set_queue(&mut queues, |r| r.depth_packets = Some(0))
        .await
        .unwrap_err();
    assert_eq!(
        zero.message(),
        softswitch_core::tm::QueueSettingError::Depth(0).to_string()
    );
    let other = set_queue(&mut queues, |r| r.device_id = DEVICE + 1)
        .await
        .unwrap_err();
    assert_eq!(other.code(), Code::NotFound);
    // The microburst rule is set like a depth.
    let rule = set_queue(&mut queues, |r| {
        r.port = Some(2);
        r.burst_threshold_packets = Some(5);
        r.burst_window_us = Some(250);
        r.reset_measures = true;
    })
    .await
    .unwrap();
    assert_eq!(rule.len(), 8);
    assert!(rule
        .iter()
        .all(|s| (s.burst_threshold_packets, s.burst_window_us) == (5, 250)));
}

/// Checks that a SetQueue through `queues` of each of `settings` (as [`set_queue`] makes it)
/// is refused with INVALID_ARGUMENT.
async fn assert_invalid(
    queues: &mut q::queues_client::QueuesClient<Channel>,
    settings: &[fn(&mut q::SetQueueRequest)],
) {
    for &setting in settings {
        let refused = set_queue(queues, setting).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    }
}

/// A SetQueue through `queues` of what `setting` sets on a request for every queue of the
/// device (a port and a priority among what it may set): the queues it changed, or its
/// refusal.
async fn set_queue(
    queues: &mut q::queues_client::QueuesClient<Channel>,
    setting: impl FnOnce(&mut q::SetQueueRequest),
) -> Result<Vec<q::QueueState>, tonic::Status> {
    let mut request = q::SetQueueRequest {
        device_id: DEVICE,
        ..Default::default()
    };
    setting(&mut request);
    let answer = queues.set_queue(request).await?;
    Ok(answer.into_inner().queues)
}

/// The state of an empty strict-priority queue of `depth` packets drained at `rate` packets a
/// second (0: unlimited) that no packet went through, under the default burst rule.
fn unused_queue(port: u32, priority: u32, depth: u32, rate: u64) -> q::QueueState {
    use softswitch_core::tm::measures;
    q::QueueState {
        port,
        priority,
        depth_packets: depth,
        rate_pps: rate,
        strict: true,
        weight: 1,
        quantum_bytes: 1514,
        sojourn_us_buckets: vec![0; measures::SOJOURN_BUCKETS],
        burst_threshold_packets: measures::DEFAULT_BURST_THRESHOLD,
        burst_window_us: measures::DEFAULT_BURST_WINDOW_US,
        ..Default::default()
    }
}

/// A table entry of table `table` matching `field` 1 exactly on `value`, with `action`.
fn exact_entry(table: u32, value: &[u8], action: Option<p4v1::TableAction>) -> p4v1::TableEntry {
    p4v1::TableEntry {
        table_id: table,
        r#match: vec![p4v1::FieldMatch {
            field_id: 1,
            field_match_type: Some(p4v1::field_match::FieldMatchType::Exact(
                p4v1::field_match::Exact {
                    value: value.to_vec(),
                },
            )),
        }],
        action,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn const_tables_const_defaults_scopes_and_unkept_fields_are_refused_as_the_spec_says() {
    let (_bed, mut client, _primary, info) = loaded_with("scoped.p4").await;
    let (fixed, keyless, scoped) = (
        id(&info, "fixed"),
        id(&info, "keyless"),
        id(&info, "scoped"),
    );
    let (forward, drop) = (id(&info, "forward"), id(&info, "drop"));
    let default = |table: u32, action: Option<p4v1::TableAction>, priority: i32| p4v1::TableEntry {
        table_id: table,
        action,
        priority,
        is_default_action: true,
        ..Default::default()
    };
    let dst = [2, 0, 0, 0, 0, 9];
    let tagged = |f: fn(&mut p4v1::TableEntry)| {
        let mut e = exact_entry(scoped, &dst, action(forward, &[&[1]]));
        f(&mut e);
        e
    };
    let cases: Vec<(p4v1::update::Type, p4v1::TableEntry, Code)> = vec![
        // A const table takes no entries; its default action, not const, may change.
        (
            Insert,
            exact_entry(fixed, &[0x86, 0xdd], action(drop, &[])),
            Code::PermissionDenied,
        ),
        (
            Modify,
            default(fixed, action(forward, &[&[2]]), 0),
            Code::Ok,
        ),
        // A keyless table takes no entries; a const default action cannot change.
        (
            Insert,
            p4v1::TableEntry {
                table_id: keyless,
                action: action(forward, &[&[2]]),
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
        (
            Modify,
            default(keyless, action(forward, &[&[2]]), 0),
            Code::PermissionDenied,
        ),
        // A table implemented by an action profile takes members or groups, not actions.
        (
            Insert,
            exact_entry(id(&info, "indirect"), &dst, action(forward, &[&[1]])),
            Code::InvalidArgument,
        ),
        // ... and a direct table takes actions, not members.
        (
            Insert,
            exact_entry(
                scoped,
                &dst,
                Some(p4v1::TableAction {
                    r#type: Some(p4v1::table_action::Type::ActionProfileMemberId(1)),
                }),
            ),
            Code::InvalidArgument,
        ),
        // Action scopes.
        (
            Insert,
            exact_entry(scoped, &dst, action(drop, &[])),
            Code::PermissionDenied,
        ),
        (
            Modify,
            default(scoped, action(forward, &[&[2]]), 0),
            Code::PermissionDenied,
        ),
        // The default entry has priority 0.
        (
            Modify,
            default(scoped, action(drop, &[]), 3),
            Code::InvalidArgument,
        ),
        // Fields softswitch would not keep are refused rather than dropped.
        (Insert, tagged(|e| e.is_const = true), Code::InvalidArgument),
        // An idle timeout where the table has none (its P4Info says NO_TIMEOUT).
        (
            Insert,
            tagged(|e| e.idle_timeout_ns = 1_000_000),
            Code::InvalidArgument,
        ),
        (
            Insert,
            tagged(|e| e.counter_data = Some(p4v1::CounterData::default())),
            Code::InvalidArgument,
        ),
    ];
    let err = write(
        &mut client,
        10,
        cases
            .iter()
            .map(|(t, e, _)| (*t, p4v1::entity::Entity::TableEntry(e.clone())))
            .collect(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error_codes(&err),
        cases.iter().map(|(_, _, c)| *c as i32).collect::<Vec<_>>(),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_counters_are_written_with_their_entries_and_modify_may_leave_the_action() {
    let (_bed, mut client, _primary, info) = loaded().await;
    let counted = |packets: i64| {
        let p4v1::entity::Entity::TableEntry(mut e) = route(&info, [10, 0, 0, 0], 8, 1) else {
            unreachable!()
        };
        e.counter_data = Some(p4v1::CounterData {
            packet_count: packets,
            byte_count: packets * 100,
        });
        e
    };
    // INSERT with counter_data sets the entry's counter.
    apply(
        &mut client,
        vec![(Insert, p4v1::entity::Entity::TableEntry(counted(7)))],
    )
    .await;
    let read_counted = |client: &mut P4RuntimeClient<Channel>| {
        let mut filter = counted(0);
        filter.action = None;
        filter.counter_data = Some(p4v1::CounterData::default());
        let mut client = client.clone();
        async move { read(&mut client, p4v1::entity::Entity::TableEntry(filter)).await }
    };
    assert_eq!(
        read_counted(&mut client).await,
        vec![p4v1::entity::Entity::TableEntry(counted(7))]
    );
    // MODIFY without an action keeps the action and writes the counter.
    let mut modify = counted(3);
    modify.action = None;
    apply(
        &mut client,
        vec![(Modify, p4v1::entity::Entity::TableEntry(modify))],
    )
    .await;
    assert_eq!(
        read_counted(&mut client).await,
        vec![p4v1::entity::Entity::TableEntry(counted(3))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_and_register_cells_are_written_by_index_or_all_at_once() {
    let (_bed, mut client, _primary, info) = loaded().await;
    let port_counter = id(&info, "port_counter");
    let counter = |index: Option<i64>, data: Option<(i64, i64)>| {
        p4v1::entity::Entity::CounterEntry(p4v1::CounterEntry {
            counter_id: port_counter,
            index: index.map(|index| p4v1::Index { index }),
            data: data.map(|(packet_count, byte_count)| p4v1::CounterData {
                packet_count,
                byte_count,
            }),
        })
    };
    // No index: every cell; no data: no change.
    apply(&mut client, vec![(Modify, counter(None, Some((5, 50))))]).await;
    apply(&mut client, vec![(Modify, counter(Some(3), None))]).await;
    let cells = read(&mut client, counter(None, None)).await;
    assert_eq!(cells.len(), 512);
    for cell in &cells {
        let p4v1::entity::Entity::CounterEntry(c) = cell else {
            panic!("{cell:?}")
        };
        assert_eq!(c.data.unwrap().packet_count, 5, "{c:?}");
    }
    let last_length = id(&info, "last_length");
    let register = |index: Option<i64>, value: u8| {
        p4v1::entity::Entity::RegisterEntry(p4v1::RegisterEntry {
            register_id: last_length,
            index: index.map(|index| p4v1::Index { index }),
            data: Some(p4v1::P4Data {
                data: Some(p4v1::p4_data::Data::Bitstring(vec![value])),
            }),
        })
    };
    apply(&mut client, vec![(Modify, register(None, 9))]).await;
    let cells = read(&mut client, register(None, 0)).await;
    assert_eq!(cells.len(), 16);
    assert!(cells.iter().all(|c| matches!(
        c,
        p4v1::entity::Entity::RegisterEntry(r)
            if r.data.as_ref().unwrap().data == Some(p4v1::p4_data::Data::Bitstring(vec![9]))
    )));
    // A negative index is INVALID_ARGUMENT, one past the end OUT_OF_RANGE.
    let err = write(
        &mut client,
        10,
        vec![
            (Modify, counter(Some(-1), Some((1, 1)))),
            (Modify, counter(Some(512), Some((1, 1)))),
            (Modify, register(Some(-1), 1)),
            (Modify, register(Some(16), 1)),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        error_codes(&err),
        [
            Code::InvalidArgument,
            Code::OutOfRange,
            Code::InvalidArgument,
            Code::OutOfRange
        ]
        .map(|c| c as i32)
    );
    // A Read answers every request: the cells of the good ones, then UNKNOWN with one
    // p4.v1.Error per request.
    let (cells, err) = read_batch(
        &mut client,
        vec![
            counter(Some(1), None),
            counter(Some(-1), None),
            counter(Some(512), None),
            counter(Some(2), None),
        ],
    )
    .await;
    assert_eq!(
        cells,
        [
            counter(Some(1), Some((5, 50))),
            counter(Some(2), Some((5, 50)))
        ]
    );
    let err = err.expect("bad indices are refused");
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(
        error_codes(&err),
        [Code::Ok, Code::InvalidArgument, Code::OutOfRange, Code::Ok].map(|c| c as i32)
    );

    // A direct counter written without data keeps its value; one of an absent entry is
    // NOT_FOUND.
    apply(
        &mut client,
        vec![(Insert, route(&info, [10, 0, 0, 0], 8, 1))],
    )
    .await;
    let direct = |dst: [u8; 4], data: Option<p4v1::CounterData>| {
        let p4v1::entity::Entity::TableEntry(te) = route(&info, dst, 8, 1) else {
            unreachable!()
        };
        p4v1::entity::Entity::DirectCounterEntry(p4v1::DirectCounterEntry {
            table_entry: Some(p4v1::TableEntry { action: None, ..te }),
            data,
        })
    };
    let four = p4v1::CounterData {
        packet_count: 4,
        byte_count: 40,
    };
    apply(
        &mut client,
        vec![(Modify, direct([10, 0, 0, 0], Some(four)))],
    )
    .await;
    apply(&mut client, vec![(Modify, direct([10, 0, 0, 0], None))]).await;
    let read_back = read(&mut client, direct([10, 0, 0, 0], None)).await;
    let [p4v1::entity::Entity::DirectCounterEntry(d)] = read_back.as_slice() else {
        panic!("{read_back:?}")
    };
    assert_eq!(d.data, Some(four));
    let (read_back, err) = read_batch(&mut client, vec![direct([11, 0, 0, 0], None)]).await;
    assert!(read_back.is_empty());
    assert_eq!(
        error_codes(&err.expect("the direct counter of an absent entry is refused")),
        [Code::NotFound as i32]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_read_or_pipeline_for_an_unknown_role_is_not_found_before_arbitration_is_checked() {
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    let Err(err) = client
        .read(p4v1::ReadRequest {
            device_id: DEVICE,
            role: "sdn".into(),
            ..Default::default()
        })
        .await
    else {
        panic!("a read for an unknown role is refused");
    };
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = client
        .write(p4v1::WriteRequest {
            device_id: DEVICE,
            role: "sdn".into(),
            election_id: Some(1u128.into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = client
        .set_forwarding_pipeline_config(p4v1::SetForwardingPipelineConfigRequest {
            role: "sdn".into(),
            ..pipeline_request(1, SetAction::VerifyAndCommit, Some(config("switch.p4")))
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // controller_metadata: deprecated, still part of an entry.
async fn entry_metadata_is_read_back_as_written() {
    let (_bed, mut client, _primary, info) = loaded().await;
    let tagged = |port: u8, metadata: &[u8]| {
        let p4v1::entity::Entity::TableEntry(te) = route(&info, [10, 0, 0, 0], 8, port) else {
            unreachable!()
        };
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
            metadata: metadata.to_vec(),
            controller_metadata: 7,
            ..te
        })
    };
    apply(&mut client, vec![(Insert, tagged(1, b"owner=lab"))]).await;
    assert_eq!(
        read(&mut client, route(&info, [10, 0, 0, 0], 8, 0)).await,
        vec![tagged(1, b"owner=lab")]
    );
    apply(&mut client, vec![(Modify, tagged(2, b"v2"))]).await;
    assert_eq!(
        read(&mut client, route(&info, [10, 0, 0, 0], 8, 0)).await,
        vec![tagged(2, b"v2")]
    );
    // Deleted, the entry's metadata goes with it.
    apply(
        &mut client,
        vec![
            (Delete, route(&info, [10, 0, 0, 0], 8, 0)),
            (Insert, route(&info, [10, 0, 0, 0], 8, 1)),
        ],
    )
    .await;
    assert_eq!(
        read(&mut client, route(&info, [10, 0, 0, 0], 8, 0)).await,
        vec![route(&info, [10, 0, 0, 0], 8, 1)]
    );
    // The default entry's, until it is reset.
    let default = |action: Option<p4v1::TableAction>, metadata: &[u8]| {
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
            table_id: id(&info, "route"),
            action,
            is_default_action: true,
            metadata: metadata.to_vec(),
            ..Default::default()
        })
    };
    let to_cpu = action(id(&info, "to_cpu"), &[]);
    apply(&mut client, vec![(Modify, default(to_cpu.clone(), b"d"))]).await;
    assert_eq!(
        read(&mut client, default(None, b"")).await,
        vec![default(to_cpu, b"d")]
    );
    apply(&mut client, vec![(Modify, default(None, b""))]).await;
    assert_eq!(
        read(&mut client, default(None, b"")).await,
        vec![default(action(id(&info, "drop"), &[]), b"")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_are_batched_by_list_size_and_timeout() {
    let (bed, mut client, mut primary, info) = loaded().await;
    let digest_id = id(&info, "learn_t");
    let entry = |max_timeout_ns, max_list_size| {
        p4v1::entity::Entity::DigestEntry(p4v1::DigestEntry {
            digest_id,
            config: Some(p4v1::digest_entry::Config {
                max_timeout_ns,
                max_list_size,
                ack_timeout_ns: 0,
            }),
        })
    };
    // Two per list, however long it takes: ports 1 and 2 come in one list.
    apply(&mut client, vec![(Insert, entry(60_000_000_000, 2))]).await;
    bed.inject(1, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    bed.inject(2, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    assert_eq!(primary.digest().await.data.len(), 2);
    // A list of up to 100 after 1 ms: a single message comes alone, when its time is up.
    apply(&mut client, vec![(Modify, entry(1_000_000, 100))]).await;
    bed.inject(3, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    assert_eq!(primary.digest().await.data.len(), 1);
}

/// switch.p4 compiled by p4c for BMv2: its BMv2 JSON and its P4Info; `None` (`test` skipped)
/// without p4c and BMv2.
fn compiled_by_p4c(test: &str) -> Option<(Vec<u8>, P4Info)> {
    use prost::Message as _;
    let toolchain = testkit::bmv2::toolchain_or_skip(test)?;
    let program = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/server/switch.p4");
    let compiled = testkit::bmv2::compiled(toolchain, &program).unwrap_or_else(|e| panic!("{e}"));
    let info = P4Info::decode(&std::fs::read(&compiled.p4info_binary).unwrap()[..]).unwrap();
    Some((std::fs::read(&compiled.json).unwrap(), info))
}

/// A digest of a BMv2 JSON program (p4c-bm2-ss's output for switch.p4, set with p4c's own
/// P4Info, as a controller of BMv2 does) reaches the controller as the same program's digest
/// does from source: same digest id, same data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_of_a_bmv2_json_program_reaches_the_controller_as_from_source() {
    let test = "a_digest_of_a_bmv2_json_program_reaches_the_controller_as_from_source";
    let Some((json, p4c_info)) = compiled_by_p4c(test) else {
        return;
    };
    // Without the controller's P4Info, the one derived from the JSON names the digest as p4c.
    let derived = softswitch_server::pipeline::Compiled::from_bmv2_json(json.clone(), None, 0)
        .unwrap()
        .info;
    assert_eq!(id(&derived, "learn_t"), id(&p4c_info, "learn_t"));
    let mut received = Vec::new();
    for (device_config, info) in [(source("switch.p4"), p4info("switch.p4")), (json, p4c_info)] {
        let bed = Bed::new().await;
        let mut client = bed.client().await;
        let mut primary = Stream::primary(&mut client, 10).await;
        let config = p4v1::ForwardingPipelineConfig {
            p4info: Some(info.clone()),
            p4_device_config: device_config,
            cookie: None,
        };
        set_pipeline(&mut client, 10, SetAction::VerifyAndCommit, Some(config))
            .await
            .unwrap();
        let digest_id = id(&info, "learn_t");
        let entry = p4v1::entity::Entity::DigestEntry(p4v1::DigestEntry {
            digest_id,
            config: Some(p4v1::digest_entry::Config {
                max_timeout_ns: 0,
                max_list_size: 1,
                ack_timeout_ns: 0,
            }),
        });
        apply(&mut client, vec![(Insert, entry)]).await;
        // smac misses, so learn() sends the source MAC and the ingress port.
        bed.inject(4, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
        let list = primary.digest().await;
        assert_eq!(list.digest_id, digest_id);
        received.push(list.data);
    }
    let p4v1::p4_data::Data::Struct(s) = received[0][0].data.clone().unwrap() else {
        panic!("{:?}", received[0]);
    };
    assert_eq!(
        s.members[1].data,
        Some(p4v1::p4_data::Data::Bitstring(vec![4])),
        "the port"
    );
    assert_eq!(received[0], received[1], "from source, then from JSON");
}

/// BMv2's JSON wrapped in PI's `p4.tmp.P4DeviceConfig` (`reassign`, `device_data`), as the P4
/// tutorials' `p4runtime_lib` sends it to simple_switch_grpc, is loaded and runs; the config is
/// read back as it was sent; a wrapper around anything but BMv2 JSON is refused, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bmv2_json_in_pis_device_config_wrapper_is_loaded_and_read_back_as_sent() {
    use p4runtime::p4::tmp::P4DeviceConfig;
    use prost::Message as _;
    let test = "a_bmv2_json_in_pis_device_config_wrapper_is_loaded_and_read_back_as_sent";
    let Some((json, info)) = compiled_by_p4c(test) else {
        return;
    };
    let wrapped = P4DeviceConfig {
        reassign: true,
        extras: None,
        device_data: json,
    }
    .encode_to_vec();
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    let _primary = Stream::primary(&mut client, 10).await;
    let config = |device_config: Vec<u8>| p4v1::ForwardingPipelineConfig {
        p4info: Some(info.clone()),
        p4_device_config: device_config,
        cookie: None,
    };

    let not_json = P4DeviceConfig {
        reassign: true,
        extras: None,
        device_data: b"\x00\x01 not a program".to_vec(),
    };
    let Err(refused) = set_pipeline(
        &mut client,
        10,
        SetAction::VerifyAndCommit,
        Some(config(not_json.encode_to_vec())),
    )
    .await
    else {
        panic!("a wrapper around no BMv2 JSON was loaded");
    };
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("P4DeviceConfig"), "{refused:?}");

    set_pipeline(
        &mut client,
        10,
        SetAction::VerifyAndCommit,
        Some(config(wrapped.clone())),
    )
    .await
    .unwrap();
    apply(
        &mut client,
        vec![(Insert, route(&info, [11, 0, 0, 0], 8, 3))],
    )
    .await;
    bed.inject(1, ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]));
    assert_eq!(bed.next_sent().0, 3, "routed by the entry just written");

    let answer = pipeline_config(&mut client, ResponseType::All).await;
    assert_eq!(answer.unwrap().p4_device_config, wrapped);
}

/// A refused SetForwardingPipelineConfig changes nothing of arbitration: its client stays the
/// primary and commits the next config; a second stream claiming the same election id is
/// refused with INVALID_ARGUMENT while the first is open (as the specification says and
/// simple_switch_grpc does), and takes the primary's place once the first has closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pipeline_leaves_arbitration_as_it_was() {
    let bed = Bed::new().await;
    let mut client = bed.client().await;
    let first = Stream::primary(&mut client, 1).await;
    let refused = set_pipeline(
        &mut client,
        1,
        SetAction::VerifyAndCommit,
        Some(p4v1::ForwardingPipelineConfig {
            p4info: Some(p4info("switch.p4")),
            p4_device_config: vec![0x08, 0x01, 0x1a, 0x80],
            cookie: None,
        }),
    )
    .await;
    assert_eq!(refusal(refused), Code::InvalidArgument);
    commit(&mut client, 1, "switch.p4").await.unwrap();
    write(
        &mut client,
        1,
        vec![(Insert, route(&p4info("switch.p4"), [11, 0, 0, 0], 8, 3))],
    )
    .await
    .unwrap();

    let mut second = Stream::open(&mut client, 1).await;
    let status = second.end().await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    drop(first);
    // The first stream's end reaches the server on its own time: claim until it has.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let _third = loop {
        let mut third = Stream::open(&mut client, 1).await;
        match tokio::time::timeout(Duration::from_secs(5), third.rx.next()).await {
            Ok(Some(Ok(m))) => {
                let Some(p4v1::stream_message_response::Update::Arbitration(a)) = m.update else {
                    panic!("{m:?}");
                };
                assert_eq!(a.status.unwrap().code, Code::Ok as i32);
                break third;
            }
            other => assert!(
                std::time::Instant::now() < deadline,
                "the closed stream still holds the election id: {other:?}"
            ),
        }
    };
    write(
        &mut client,
        1,
        vec![(Delete, route(&p4info("switch.p4"), [11, 0, 0, 0], 8, 3))],
    )
    .await
    .unwrap();
}

/// A port that takes nothing more keeps its packets in its queue, where the program and the
/// Queues service see them, up to the queue's depth; once it takes frames again they leave in
/// order, without another packet arriving to push them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_that_takes_nothing_more_keeps_its_packets_queued() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let gate = std::sync::Arc::new(AtomicU32::new(0));
    let (bed, mut client, _primary, info) =
        load(Bed::with_gate(Some(gate.clone())).await, "switch.p4").await;
    apply(
        &mut client,
        vec![(Insert, route(&info, [11, 0, 0, 0], 8, 3))],
    )
    .await;
    for i in 0..70u8 {
        bed.inject(1, ipv4_frame([1, 2, 3, i], [11, 0, 0, 1]));
    }
    assert_eq!(bed.sent_now().await, vec![], "port 3 took nothing");
    let queued = bed
        .device
        .engine
        .call(|e| e.pipeline.as_ref().unwrap().switch.queue_occupancy(3, 0))
        .await
        .unwrap();
    assert_eq!(
        queued,
        softswitch_core::tm::DEFAULT_DEPTH,
        "full, the rest tail-dropped"
    );

    gate.store(64, Ordering::SeqCst);
    let sources: Vec<u8> = (0..softswitch_core::tm::DEFAULT_DEPTH)
        .map(|_| {
            let (port, frame) = bed.next_sent();
            assert_eq!(port, 3);
            frame[29] // the last byte of the IPv4 source address
        })
        .collect();
    let expected: Vec<u8> = (0..softswitch_core::tm::DEFAULT_DEPTH as u8).collect();
    assert_eq!(sources, expected, "in the order they came");
}

/// DWRR set over the Queues service shares a slow port by weight: priorities 1 and 2 of port 3
/// made DWRR with weights 1 and 3, a backlog of frames of both (sizes varying) waits while the
/// port takes nothing, then the port takes frames again; while both priorities still hold
/// frames, what leaves is 3 bytes of priority 2 for 1 of priority 1 (within 5%), as tshark
/// reads the frames' DSCPs and lengths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dwrr_weights_set_over_the_queues_service_share_a_slow_port_three_to_one() {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FRAMES: usize = 600;
    let gate = std::sync::Arc::new(AtomicU32::new(0));
    let (bed, _client, _primary, _info) =
        load(Bed::with_gate(Some(gate.clone())).await, "classes.p4").await;
    let mut queues = q::queues_client::QueuesClient::connect(bed.addr.clone())
        .await
        .unwrap();
    for (priority, weight) in [(1, 1), (2, 3)] {
        let set = set_queue(&mut queues, |r| {
            r.port = Some(3);
            r.priority = Some(priority);
            r.depth_packets = Some(FRAMES as u32);
            r.strict = Some(false);
            r.weight = Some(weight);
        })
        .await
        .unwrap();
        assert_eq!((set[0].strict, set[0].weight), (false, weight));
    }
    // The rules are the traffic manager's; the quantum is the port's, not a priority's.
    assert_invalid(
        &mut queues,
        &[
            |r| r.weight = Some(softswitch_core::tm::MAX_WEIGHT + 1),
            |r| {
                r.priority = Some(1);
                r.quantum_bytes = Some(3000);
            },
        ],
    )
    .await;

    // CS1 (priority 1) and CS2 (priority 2), 60 to 1060 bytes of payload.
    for i in 0..FRAMES {
        for dscp in [8, 16] {
            let payload = vec![0x5a; 60 + (i * 37 + usize::from(dscp)) % 1000];
            bed.inject(1, udp_frame([10, 0, 0, 1], [10, 0, 0, 2], dscp, &payload));
        }
    }
    assert_eq!(bed.sent_now().await, vec![], "port 3 took nothing");
    let backlog = bed
        .device
        .engine
        .call(|e| {
            let switch = &e.pipeline.as_ref().unwrap().switch;
            (switch.queue_occupancy(3, 1), switch.queue_occupancy(3, 2))
        })
        .await
        .unwrap();
    assert_eq!(backlog, (FRAMES, FRAMES));

    gate.store(8, Ordering::SeqCst);
    let frames: Vec<Vec<u8>> = (0..2 * FRAMES)
        .map(|_| {
            let (port, frame) = bed.next_sent();
            assert_eq!(port, 3);
            frame
        })
        .collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let fields = testkit::tshark(
        &refs,
        &["-T", "fields", "-e", "ip.dsfield.dscp", "-e", "frame.len"],
    )
    .unwrap();
    // Bytes of each class until one of them has sent its last frame.
    let (mut bytes, mut count) = ([0u64; 2], [0usize; 2]);
    for line in fields.lines() {
        let (dscp, len) = line.split_once('\t').unwrap_or_else(|| panic!("{line:?}"));
        let class = match dscp.trim() {
            "8" => 0,
            "16" => 1,
            other => panic!("DSCP {other}"),
        };
        bytes[class] += len.trim().parse::<u64>().unwrap();
        count[class] += 1;
        if count[class] == FRAMES {
            break;
        }
    }
    let ratio = bytes[1] as f64 / bytes[0] as f64;
    eprintln!(
        "priority 2: {} bytes, priority 1: {} bytes, {ratio:.3}",
        bytes[1], bytes[0]
    );
    assert!((ratio - 3.0).abs() <= 0.15, "{bytes:?}: {ratio}");
}

/// A frame that smac looks up by source MAC `mac`.
fn from_mac(mac: [u8; 6]) -> Vec<u8> {
    let mut frame = ipv4_frame([1, 2, 3, 4], [11, 0, 0, 1]);
    frame[6..12].copy_from_slice(&mac);
    frame
}

/// An smac entry for source MAC `mac` (NoAction) with idle timeout `ttl` and `metadata`.
fn timed_entry(info: &P4Info, mac: [u8; 6], ttl: Duration, metadata: &[u8]) -> p4v1::TableEntry {
    p4v1::TableEntry {
        idle_timeout_ns: ttl.as_nanos() as i64,
        metadata: metadata.to_vec(),
        ..exact_entry(id(info, "smac"), &mac, action(id(info, "NoAction"), &[]))
    }
}

/// The source MACs of the entries a notification names.
fn notified_macs(notifications: &[p4v1::IdleTimeoutNotification]) -> Vec<[u8; 6]> {
    notifications
        .iter()
        .flat_map(|n| &n.table_entry)
        .map(|e| match &e.r#match[0].field_match_type {
            Some(p4v1::field_match::FieldMatchType::Exact(x)) => x.value[..].try_into().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// The specification's idle timeouts: an entry that goes its timeout without a hit is notified
/// to the primary — by key, metadata and timeout, without its action — and again a timeout
/// later while it stays idle; an entry that is hit, or has no timeout, is not; once hits stop,
/// the notification comes no sooner than a timeout after the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_entries_are_notified_after_their_timeout_and_not_while_hit() {
    const TTL: Duration = Duration::from_millis(500);
    let (bed, mut client, mut primary, info) = loaded().await;
    let (hit, idle, untimed) = (
        [2, 0, 0, 0, 0, 0xaa],
        [2, 0, 0, 0, 0, 0xbb],
        [2, 0, 0, 0, 0, 0xcc],
    );
    let entity = |e: p4v1::TableEntry| p4v1::entity::Entity::TableEntry(e);
    let (written, written_wall) = (std::time::Instant::now(), std::time::SystemTime::now());
    apply(
        &mut client,
        vec![
            (Insert, entity(timed_entry(&info, hit, TTL, b"hit"))),
            (Insert, entity(timed_entry(&info, idle, TTL, b"idle"))),
            (
                Insert,
                entity(timed_entry(&info, untimed, Duration::ZERO, b"")),
            ),
        ],
    )
    .await;
    // `hit` is hit every TTL/10 for four timeouts; the longest gap between two hits is kept:
    // only a machine that stalled the test past the timeout may see it notified.
    let mut last = std::time::Instant::now();
    let mut longest_gap = Duration::ZERO;
    while written.elapsed() < 4 * TTL {
        bed.inject(1, from_mac(hit));
        longest_gap = longest_gap.max(last.elapsed());
        last = std::time::Instant::now();
        tokio::time::sleep(TTL / 10).await;
    }
    let last_hit = last;
    let during = primary.idle_notifications(Duration::ZERO).await;
    let timeouts_passed = written.elapsed().as_nanos() / TTL.as_nanos();
    let macs = notified_macs(&during);
    assert!(
        !macs.contains(&hit) || longest_gap >= TTL,
        "an entry hit every {longest_gap:?} at most was notified: {during:?}"
    );
    assert!(!macs.contains(&untimed), "{during:?}");
    // Idle all along: notified at most once per timeout, the first time a timeout after the
    // write at the earliest.
    let idle_count = macs.iter().filter(|m| **m == idle).count();
    assert!(
        (1..=timeouts_passed as usize).contains(&idle_count),
        "{idle_count} notifications in {timeouts_passed} timeouts: {during:?}"
    );
    let first = &during[0];
    let written_ns = written_wall
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    assert!(
        first.timestamp - written_ns >= TTL.as_nanos() as i64,
        "{first:?}"
    );
    assert_eq!(first.table_entry.len(), 1, "{first:?}");
    assert_eq!(
        first.table_entry[0],
        p4v1::TableEntry {
            action: None,
            ..timed_entry(&info, idle, TTL, b"idle")
        },
        "key, metadata and timeout, no action"
    );
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    assert!(
        (now_ns - 10_000_000_000..=now_ns).contains(&first.timestamp),
        "{first:?}"
    );
    // Hits stop: `hit` is notified, no sooner than a timeout after its last hit; `idle`, still
    // idle, again.
    let after = primary.idle_notifications(TTL * 3).await;
    let macs = notified_macs(&after);
    assert!(macs.contains(&hit), "{after:?}");
    assert!(macs.contains(&idle), "{after:?}");
    assert!(!macs.contains(&untimed), "{after:?}");
    let last_hit_wall = std::time::SystemTime::now() - last_hit.elapsed();
    let last_hit_ns = last_hit_wall
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    for n in after
        .iter()
        .filter(|n| notified_macs(std::slice::from_ref(n)).contains(&hit))
    {
        assert!(
            n.timestamp - last_hit_ns >= TTL.as_nanos() as i64 - 1_000_000,
            "{n:?}"
        );
    }
    // Deleted, an entry is not notified any more.
    let delete = |mac: [u8; 6]| (Delete, entity(exact_entry(id(&info, "smac"), &mac, None)));
    apply(&mut client, vec![delete(hit), delete(idle)]).await;
    let _ = primary.idle_notifications(idle::SWEEP_INTERVAL * 2).await;
    assert_eq!(primary.idle_notifications(TTL * 2).await, Vec::new());
}

/// Idle timeouts read back as written (`idle_timeout_ns` exactly; `time_since_last_hit` when
/// asked, and only then), change with MODIFY, and are refused where the specification refuses
/// them: negative, on a default entry, `time_since_last_hit` in a write, or asked of a table
/// without idle timeouts (wildcard reads included, as PI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeouts_read_back_change_and_are_refused_where_the_spec_says() {
    let (bed, mut client, _primary, info) = loaded().await;
    let smac = id(&info, "smac");
    let mac = [2, 0, 0, 0, 0, 0xaa];
    let ttl = Duration::from_nanos(1_234_567_891);
    let entry = timed_entry(&info, mac, ttl, b"");
    apply(
        &mut client,
        vec![(Insert, p4v1::entity::Entity::TableEntry(entry.clone()))],
    )
    .await;
    let query = |since: bool| {
        p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
            table_id: smac,
            time_since_last_hit: since.then(p4v1::table_entry::IdleTimeout::default),
            ..Default::default()
        })
    };
    assert_eq!(
        read(&mut client, query(false)).await,
        vec![p4v1::entity::Entity::TableEntry(entry.clone())]
    );
    let since = |entities: Vec<p4v1::entity::Entity>| match &entities[..] {
        [p4v1::entity::Entity::TableEntry(e)] => {
            assert_eq!(e.idle_timeout_ns, entry.idle_timeout_ns);
            Duration::from_nanos(e.time_since_last_hit.expect("asked for").elapsed_ns as u64)
        }
        other => panic!("{other:?}"),
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = since(read(&mut client, query(true)).await);
    assert!(before >= Duration::from_millis(200), "{before:?}");
    bed.inject(1, from_mac(mac));
    bed.sent_now().await;
    let after = since(read(&mut client, query(true)).await);
    assert!(
        after < before,
        "a hit restarts it: {after:?} after {before:?}"
    );
    // MODIFY sets another timeout (the action may be left out), and 0 takes it away.
    for ns in [5_000_000_000, 0] {
        let modified = p4v1::TableEntry {
            idle_timeout_ns: ns,
            action: None,
            ..entry.clone()
        };
        apply(
            &mut client,
            vec![(Modify, p4v1::entity::Entity::TableEntry(modified))],
        )
        .await;
        assert_eq!(
            read(&mut client, query(false)).await,
            vec![p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
                idle_timeout_ns: ns,
                ..entry.clone()
            })]
        );
    }
    // Refused writes.
    let refused = |f: fn(&mut p4v1::TableEntry)| {
        let mut e = entry.clone();
        f(&mut e);
        (Modify, p4v1::entity::Entity::TableEntry(e))
    };
    let err = write(
        &mut client,
        10,
        vec![
            refused(|e| e.idle_timeout_ns = -1),
            refused(|e| e.time_since_last_hit = Some(Default::default())),
            refused(|e| {
                e.r#match.clear();
                e.is_default_action = true;
                e.metadata.clear();
            }),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(error_codes(&err), vec![Code::InvalidArgument as i32; 3]);
    // time_since_last_hit of a table without idle timeouts, of a default entry, of every
    // table (route has none).
    for filter in [
        p4v1::TableEntry {
            table_id: id(&info, "route"),
            ..Default::default()
        },
        p4v1::TableEntry {
            table_id: smac,
            is_default_action: true,
            ..Default::default()
        },
        p4v1::TableEntry::default(),
    ] {
        let (_, status) = read_batch(
            &mut client,
            vec![p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
                time_since_last_hit: Some(Default::default()),
                ..filter
            })],
        )
        .await;
        let status = status.expect("refused");
        assert_eq!(error_codes(&status), vec![Code::InvalidArgument as i32]);
    }
}

/// A P4Runtime meter configuration.
fn rates(cir: i64, cburst: i64, pir: i64, pburst: i64) -> p4v1::MeterConfig {
    p4v1::MeterConfig {
        cir,
        cburst,
        pir,
        pburst,
        eburst: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meters_and_direct_meters_are_configured_read_back_and_colour_packets() {
    let (bed, mut client, _primary, info) = loaded_with("meters.p4").await;
    let port_meter = id(&info, "port_meter");
    let meter = |meter_id: u32, index: Option<i64>, config: Option<p4v1::MeterConfig>| {
        p4v1::entity::Entity::MeterEntry(p4v1::MeterEntry {
            meter_id,
            index: index.map(|index| p4v1::Index { index }),
            config,
            counter_data: None,
        })
    };
    let configs = |entities: Vec<p4v1::entity::Entity>| -> Vec<Option<p4v1::MeterConfig>> {
        entities
            .into_iter()
            .map(|e| match e {
                p4v1::entity::Entity::MeterEntry(m) => m.config,
                p4v1::entity::Entity::DirectMeterEntry(m) => m.config,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    // Unconfigured, every cell reads back without a config (a wildcard read: every meter).
    assert_eq!(
        configs(read(&mut client, meter(0, None, None)).await),
        [None; 8]
    );
    // No index configures every cell; rates are per second, read back as written.
    let slow = rates(1000, 10, 2000, 20);
    apply(
        &mut client,
        vec![(Modify, meter(port_meter, None, Some(slow)))],
    )
    .await;
    // Cell 1: one packet green, then red (neither bucket refills).
    let one = rates(0, 1, 0, 1);
    apply(
        &mut client,
        vec![(Modify, meter(port_meter, Some(1), Some(one)))],
    )
    .await;
    let read_back = read(&mut client, meter(port_meter, None, None)).await;
    let mut expected = [Some(slow); 8];
    expected[1] = Some(one);
    assert_eq!(configs(read_back), expected);

    // The direct meter of port 2's entry: green, yellow, red.
    let by_port = id(&info, "by_port");
    let entry = exact_entry(by_port, &[0, 2], action(id(&info, "colour"), &[]));
    apply(
        &mut client,
        vec![(Insert, p4v1::entity::Entity::TableEntry(entry.clone()))],
    )
    .await;
    let direct = |config: Option<p4v1::MeterConfig>| {
        p4v1::entity::Entity::DirectMeterEntry(p4v1::DirectMeterEntry {
            table_entry: Some(p4v1::TableEntry {
                action: None,
                ..entry.clone()
            }),
            config,
            counter_data: None,
        })
    };
    let two = rates(0, 1, 0, 2);
    apply(&mut client, vec![(Modify, direct(Some(two)))]).await;
    let wildcard = p4v1::entity::Entity::DirectMeterEntry(p4v1::DirectMeterEntry::default());
    assert_eq!(configs(read(&mut client, wildcard).await), [Some(two)]);
    let with_meter = p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
        table_id: by_port,
        meter_config: Some(p4v1::MeterConfig::default()),
        ..Default::default()
    });
    let read_back = read(&mut client, with_meter).await;
    let [p4v1::entity::Entity::TableEntry(te)] = read_back.as_slice() else {
        panic!("{read_back:?}")
    };
    assert_eq!(te.meter_config, Some(two));

    // The packets' colours, as the program writes them into their first two bytes.
    let colours = |port: u16| {
        bed.inject(port, vec![0xff; 64]);
        let (out, frame) = bed.next_sent();
        assert_eq!(out, port);
        (frame[0], frame[1])
    };
    assert_eq!(
        [colours(1), colours(1)],
        [(0, 0xff), (2, 0xff)],
        "port 1's meter cell: green then red; no entry, no direct colour"
    );
    assert_eq!(
        [colours(2), colours(2), colours(2)],
        [(0, 0), (0, 1), (0, 2)],
        "port 2's entry's meter: green, yellow, red"
    );
    // An unset config resets a cell: unconfigured, it marks every packet green again.
    apply(
        &mut client,
        vec![(Modify, meter(port_meter, Some(1), None))],
    )
    .await;
    assert_eq!(
        configs(read(&mut client, meter(port_meter, Some(1), None)).await),
        [None]
    );
    assert_eq!([colours(1), colours(1)], [(0, 0xff), (0, 0xff)]);

    // Refusals, one code per update, as the specification's.
    let absent = p4v1::entity::Entity::DirectMeterEntry(p4v1::DirectMeterEntry {
        table_entry: Some(exact_entry(by_port, &[0, 3], None)),
        config: Some(two),
        counter_data: None,
    });
    let err = write(
        &mut client,
        10,
        vec![
            (Modify, meter(port_meter, Some(8), Some(one))),
            (Modify, meter(port_meter, Some(-1), Some(one))),
            (
                Modify,
                meter(
                    port_meter,
                    Some(0),
                    Some(p4v1::MeterConfig { eburst: 5, ..one }),
                ),
            ),
            (Modify, meter(port_meter, Some(0), Some(rates(-1, 1, 0, 1)))),
            (Insert, meter(port_meter, Some(0), Some(one))),
            (Modify, meter(by_port, Some(0), Some(one))),
            (Modify, absent),
            (
                Modify,
                p4v1::entity::Entity::MeterEntry(p4v1::MeterEntry {
                    meter_id: port_meter,
                    index: Some(p4v1::Index { index: 0 }),
                    config: Some(one),
                    counter_data: Some(p4v1::MeterCounterData::default()),
                }),
            ),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        error_codes(&err),
        [
            Code::OutOfRange,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::NotFound,
            Code::NotFound,
            Code::Unimplemented,
        ]
        .map(|c| c as i32)
    );
    // None of them changed a cell.
    let read_back = read(&mut client, meter(port_meter, Some(0), None)).await;
    assert_eq!(configs(read_back), [Some(slow)]);
}
