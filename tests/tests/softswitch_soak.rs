//! Soak: `softswitch run` on real veths, its P4Runtime server on, forwards a steady flow while a
//! hostile client loops on it: device configs that do not compile, do not match their P4Info, are
//! too large or arrive two at once; writes that fail (500 at once, to const tables, from a
//! non-primary); protobuf that does not decode; junk bytes on the gRPC port; bursts of streams
//! (past the limit, never read) and of reads. Every frame of the flow arrives, once, and every
//! hostile request was refused as the specification says; the switch then still serves a
//! well-behaved client. Bounded: the flow lasts about five seconds.

use std::{
    collections::BTreeSet,
    io::Write as _,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use lossless_tests::{
    bed::{privileged, TEST_MAC},
    craft::udp_src_port,
    switch::{program, SwitchBed},
};
use p4runtime::p4::v1::{self as p4v1, p4_runtime_client::P4RuntimeClient};
use prost::bytes::{Buf as _, BufMut as _};
use tonic::{transport::Channel, Code};

/// Frames of the steady flow, one every [`FLOW_GAP`].
const FLOW_FRAMES: u32 = 5000;
const FLOW_GAP: Duration = Duration::from_millis(1);
/// The switch's P4Runtime address inside its namespace (softswitch's default).
const ADDR: &str = "127.0.0.1:9559";

/// Frame `seq` of the flow: UDP from host 1 to 10.0.2.9 (port 2), its number in the payload.
fn flow_frame(seq: u32) -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2(TEST_MAC, [2, 0, 0, 0, 0, 0xfe])
        .ipv4([10, 0, 1, 9], [10, 0, 2, 9], 64)
        .udp(4000, 5000)
        .write(&mut out, &seq.to_be_bytes())
        .unwrap();
    out
}

fn flow_seq(frame: &[u8]) -> u32 {
    u32::from_be_bytes(frame[frame.len() - 4..].try_into().unwrap())
}

#[test]
fn a_hostile_client_does_not_cost_a_steady_flow_a_frame() {
    if !privileged("a_hostile_client_does_not_cost_a_steady_flow_a_frame") {
        return;
    }
    let mut bed = SwitchBed::new(&program("ipv4_forward.p4"), 2).unwrap();
    let rx = bed.hosts()[1].socket();
    let tx = bed.hosts()[0].socket();
    let flowing = AtomicBool::new(true);
    let switch_ns = &bed.topology().switch_ns;
    let (received, refusals) = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            let start = Instant::now();
            for seq in 0..FLOW_FRAMES {
                // A steady pace: frame n leaves at n gaps after the start.
                if let Some(wait) = (start + FLOW_GAP * seq).checked_duration_since(Instant::now())
                {
                    std::thread::sleep(wait);
                }
                tx.send(&flow_frame(seq)).unwrap();
            }
        });
        let hostile = scope.spawn(|| {
            switch_ns
                .run(|| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(hostile_loop(&flowing))
                })
                .unwrap()
        });
        let received = rx.receive(FLOW_FRAMES as usize, Duration::from_secs(60), |f| {
            udp_src_port(f) == Some(4000)
        });
        sender.join().unwrap();
        flowing.store(false, Ordering::Relaxed);
        (received, hostile.join().unwrap())
    });
    let received =
        received.unwrap_or_else(|e| panic!("{e}; the switch logged:\n{}", bed.lines.join("\n")));
    let seqs: BTreeSet<u32> = received.iter().map(|f| flow_seq(f)).collect();
    assert_eq!(seqs.len(), FLOW_FRAMES as usize, "duplicates in the flow");
    assert_eq!(seqs, (0..FLOW_FRAMES).collect(), "frames of the flow lost");
    // The client was hostile all along, and refused each time.
    eprintln!("hostile rounds: {refusals:?}");
    assert!(refusals.rounds >= 2, "{refusals:?}");
    // Each burst went past the stream limit: the switch refused the streams beyond it.
    assert!(
        refusals.streams_refused >= 16 * refusals.rounds,
        "{refusals:?}"
    );
    // The switch still serves a well-behaved client.
    let caps = bed
        .topology()
        .switch_ns
        .run(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let mut client = connect().await;
                    client
                        .capabilities(p4v1::CapabilitiesRequest { device_id: 0 })
                        .await
                        .map(|r| r.into_inner().p4runtime_api_version)
                })
        })
        .unwrap();
    assert!(caps.unwrap().starts_with("1."));
    let status = bed.stop().unwrap();
    assert!(status.success(), "softswitch exited with {status}");
}

/// What the hostile loop did.
#[derive(Debug, Default)]
struct Refusals {
    /// Rounds of every attack.
    rounds: u32,
    /// Streams refused for being one too many.
    streams_refused: u32,
}

async fn connect() -> P4RuntimeClient<Channel> {
    let channel = Channel::from_static("http://127.0.0.1:9559")
        .connect()
        .await
        .expect("the switch's P4Runtime port answers");
    P4RuntimeClient::new(channel)
}

/// Asserts `result` is a refusal with `code`.
fn refused<T>(what: &str, result: Result<T, tonic::Status>, code: Code) {
    match result {
        Ok(_) => panic!("{what}: accepted"),
        Err(s) => assert_eq!(s.code(), code, "{what}: {s:?}"),
    }
}

/// A StreamChannel that has sent a MasterArbitrationUpdate with `election_id` (none: a backup)
/// and whose answers are never read (the server must bound what it holds for it).
async fn unread_stream(
    client: &mut P4RuntimeClient<Channel>,
    election_id: Option<u128>,
) -> Result<
    (
        tokio::sync::mpsc::Sender<p4v1::StreamMessageRequest>,
        tonic::Streaming<p4v1::StreamMessageResponse>,
    ),
    tonic::Status,
> {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(p4v1::StreamMessageRequest {
        update: Some(p4v1::stream_message_request::Update::Arbitration(
            p4v1::MasterArbitrationUpdate {
                device_id: 0,
                election_id: election_id.map(Into::into),
                ..Default::default()
            },
        )),
    })
    .await
    .unwrap();
    let stream = client
        .stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    Ok((tx, stream))
}

fn set_pipeline(
    action: p4v1::set_forwarding_pipeline_config_request::Action,
    source: Vec<u8>,
    p4info: Option<p4runtime::p4::config::v1::P4Info>,
) -> p4v1::SetForwardingPipelineConfigRequest {
    p4v1::SetForwardingPipelineConfigRequest {
        device_id: 0,
        election_id: Some(10u128.into()),
        action: action as i32,
        config: Some(p4v1::ForwardingPipelineConfig {
            p4info,
            p4_device_config: source,
            cookie: None,
        }),
        ..Default::default()
    }
}

/// Attacks the switch round after round while `flowing`.
async fn hostile_loop(flowing: &AtomicBool) -> Refusals {
    use p4v1::set_forwarding_pipeline_config_request::Action;
    let mut refusals = Refusals::default();
    let mut client = connect().await;
    // The primary, which never reads its stream.
    let _primary = unread_stream(&mut client, Some(10)).await.unwrap();
    let real = client
        .get_forwarding_pipeline_config(p4v1::GetForwardingPipelineConfigRequest {
            device_id: 0,
            response_type: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .config
        .expect("the switch runs a program");
    let info = real.p4info.clone();
    let source = std::fs::read(program("ipv4_forward.p4")).unwrap();
    while flowing.load(Ordering::Relaxed) {
        // Device configs that must not replace the pipeline.
        for (what, config, p4info, code) in [
            (
                "random bytes",
                vec![0xff, 0xfe, 0x00, 0x9c],
                info.clone(),
                Code::InvalidArgument,
            ),
            (
                "BMv2 JSON",
                b"{\"header_types\": []}".to_vec(),
                info.clone(),
                Code::InvalidArgument,
            ),
            (
                "a syntax error",
                b"control C( { apply { x = ; }".to_vec(),
                info.clone(),
                Code::InvalidArgument,
            ),
            (
                "nested parentheses",
                format!(
                    "const bit<8> X = {}1{};",
                    "(".repeat(2000),
                    ")".repeat(2000)
                )
                .into_bytes(),
                info.clone(),
                Code::InvalidArgument,
            ),
            (
                "the program with another P4Info",
                source.clone(),
                Some(Default::default()),
                Code::InvalidArgument,
            ),
            (
                "the program without P4Info",
                source.clone(),
                None,
                Code::InvalidArgument,
            ),
            (
                "a 5 MB config",
                vec![b' '; 5 << 20],
                info.clone(),
                Code::OutOfRange,
            ),
        ] {
            let request = set_pipeline(Action::VerifyAndCommit, config, p4info);
            refused(
                what,
                client.set_forwarding_pipeline_config(request).await,
                code,
            );
        }
        // Two compiles at once: at most one runs (the other is refused), neither commits.
        let request = || set_pipeline(Action::Verify, source.clone(), info.clone());
        let (mut a, mut b) = (client.clone(), client.clone());
        let (first, second) = tokio::join!(
            a.set_forwarding_pipeline_config(request()),
            b.set_forwarding_pipeline_config(request())
        );
        assert!(
            first.is_ok() || second.is_ok(),
            "neither VERIFY compiled: {first:?} {second:?}"
        );
        for r in [first, second].into_iter().filter_map(Result::err) {
            assert_eq!(r.code(), Code::ResourceExhausted, "{r:?}");
        }
        // Writes that fail: 500 to an unknown table, one to the const table, one from a
        // non-primary.
        let bad = p4v1::Update {
            r#type: p4v1::update::Type::Insert as i32,
            entity: Some(p4v1::Entity {
                entity: Some(p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
                    table_id: 0x0200_ffff,
                    ..Default::default()
                })),
            }),
        };
        let write = |updates: Vec<p4v1::Update>, election_id: u128| p4v1::WriteRequest {
            device_id: 0,
            election_id: Some(election_id.into()),
            updates,
            ..Default::default()
        };
        let failed = client
            .write(write(vec![bad.clone(); 500], 10))
            .await
            .unwrap_err();
        assert_eq!(failed.code(), Code::Unknown, "{failed:?}");
        assert!(failed.details().len() <= p4runtime::status::DETAILS_BUDGET);
        let table = info.as_ref().unwrap().tables[0]
            .preamble
            .as_ref()
            .unwrap()
            .id;
        let const_entry = p4v1::Update {
            r#type: p4v1::update::Type::Delete as i32,
            entity: Some(p4v1::Entity {
                entity: Some(p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
                    table_id: table,
                    ..Default::default()
                })),
            }),
        };
        refused(
            "a write to a const table",
            client.write(write(vec![const_entry], 10)).await,
            Code::Unknown,
        );
        refused(
            "a backup's write",
            client.write(write(vec![bad], 9)).await,
            Code::PermissionDenied,
        );
        // Protobuf that does not decode.
        for path in [
            "/p4.v1.P4Runtime/Write",
            "/p4.v1.P4Runtime/SetForwardingPipelineConfig",
        ] {
            refused(
                path,
                raw_call(path, vec![0x22, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]).await,
                Code::Internal,
            );
        }
        // Junk on the gRPC port: a connection that is not HTTP/2, one whose frames are junk.
        for junk in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ] {
            if let Ok(mut c) = std::net::TcpStream::connect(ADDR) {
                let _ = c.write_all(junk);
            }
        }
        // A burst of backup streams past the limit, never read, then gone.
        let mut streams = Vec::new();
        for _ in 0..softswitch_server::arbitration::MAX_STREAMS + 16 {
            match unread_stream(&mut client.clone(), None).await {
                Ok(s) => streams.push(s),
                Err(s) => {
                    assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}");
                    refusals.streams_refused += 1;
                }
            }
        }
        drop(streams);
        // A burst of reads, all at once.
        let mut reads = tokio::task::JoinSet::new();
        for _ in 0..100 {
            let mut c = client.clone();
            reads.spawn(async move {
                let request = p4v1::ReadRequest {
                    device_id: 0,
                    entities: vec![p4v1::Entity {
                        entity: Some(p4v1::entity::Entity::TableEntry(Default::default())),
                    }],
                    ..Default::default()
                };
                c.read(request).await.map(|_| ())
            });
        }
        while let Some(read) = reads.join_next().await {
            read.unwrap().unwrap();
        }
        refusals.rounds += 1;
    }
    refusals
}

/// A unary call of `path` whose request is `body` as is, not a protobuf the client encoded.
async fn raw_call(path: &'static str, body: Vec<u8>) -> Result<Vec<u8>, tonic::Status> {
    let channel = Channel::from_static("http://127.0.0.1:9559")
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(body),
        tonic::codegen::http::uri::PathAndQuery::from_static(path),
        RawCodec,
    )
    .await
    .map(tonic::Response::into_inner)
}

/// A codec that sends bytes as they are and returns the answer's bytes.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), Self::Error> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, Self::Error> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}
