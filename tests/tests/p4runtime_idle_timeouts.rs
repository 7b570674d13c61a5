//! Idle timeouts over P4Runtime, on softswitch and — the reference — on BMv2's
//! simple_switch_grpc, by the same client with the same assertions: the P4 tutorials' h1 and h2
//! around the switch, forward.p4's routes (its table supports idle timeouts) installed by
//! `lossless p4` and given a timeout by a MODIFY from a tonic client that became the primary;
//! h1 pings h2 for several timeouts, which hits both routes: no notification comes and the
//! routes read back a time since their last hit below the timeout. Once the pings stop, both
//! routes are notified, by key and timeout, read back idle for at least the timeout, and are
//! notified again while they stay idle.

use std::time::{Duration, Instant};

use lossless_tests::{
    switch::{program as p4_file, Host},
    tutorial_bed::{TutorialBed, SWITCH_ADDR},
};
use p4runtime::p4::v1::{self as p4v1, p4_runtime_client::P4RuntimeClient};
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;

/// The routes' idle timeout: two BMv2 sweeps (one a second).
const TTL: Duration = Duration::from_secs(2);

/// How long h1 pings h2, hitting both routes: several timeouts.
const PINGING: Duration = Duration::from_secs(6);

/// How long the checks may take before the test fails rather than hangs: far more than the
/// pinging and the waits for notifications.
const GIVE_UP: Duration = Duration::from_secs(90);

/// The client's election id: above `lossless p4`'s (1), so it becomes the primary.
const ELECTION_ID: u128 = 5;

lossless_tests::on_softswitch_and_bmv2!(idle_routes_are_notified:
    idle_routes_are_notified_after_their_timeout_on_softswitch,
    idle_routes_are_notified_after_their_timeout_on_bmv2,
);

fn idle_routes_are_notified(bed: &TutorialBed) {
    bed.program(&p4_file("forward.p4"), &p4_file("forward-runtime.json"));
    let h1 = bed.h1();
    bed.switch_ns()
        .run(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async { tokio::time::timeout(GIVE_UP, check(h1)).await })
                .expect("the checks end within GIVE_UP, whatever the switch does")
        })
        .unwrap();
}

/// The routes of forward.p4's `ipv4_lpm`, as the switch reads them back (with the time since
/// their last hit).
async fn routes(client: &mut P4RuntimeClient<Channel>, table_id: u32) -> Vec<p4v1::TableEntry> {
    let answer = client
        .read(p4v1::ReadRequest {
            device_id: 0,
            entities: vec![p4v1::Entity {
                entity: Some(p4v1::entity::Entity::TableEntry(p4v1::TableEntry {
                    table_id,
                    time_since_last_hit: Some(Default::default()),
                    ..Default::default()
                })),
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let (entities, failed) = p4runtime::read::drain(answer).await;
    assert!(failed.is_none(), "{failed:?}");
    let route = |entity| match entity {
        p4v1::entity::Entity::TableEntry(e) => Some(e),
        _ => None,
    };
    entities.into_iter().filter_map(route).collect()
}

/// Each route's time since its last hit.
fn idle_for(routes: &[p4v1::TableEntry]) -> Vec<Duration> {
    routes
        .iter()
        .map(|r| Duration::from_nanos(r.time_since_last_hit.unwrap().elapsed_ns as u64))
        .collect()
}

/// The idle-timeout notifications `stream` brings within `wait`.
async fn notifications(
    stream: &mut tonic::Streaming<p4v1::StreamMessageResponse>,
    wait: Duration,
) -> Vec<p4v1::IdleTimeoutNotification> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut got = Vec::new();
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, stream.next()).await {
        if let Some(p4v1::stream_message_response::Update::IdleTimeoutNotification(n)) =
            message.unwrap().update
        {
            got.push(n);
        }
    }
    got
}

/// The client's checks, from the switch's namespace, with `h1` pinging h2.
async fn check(h1: &Host) {
    let mut client = P4RuntimeClient::connect(format!("http://{SWITCH_ADDR}"))
        .await
        .unwrap();
    let (requests, stream_requests) = tokio::sync::mpsc::unbounded_channel();
    // The arbitration goes first: PI's server answers the stream's headers only with its first
    // message, which is the answer to it.
    requests
        .send(p4v1::StreamMessageRequest {
            update: Some(p4v1::stream_message_request::Update::Arbitration(
                p4v1::MasterArbitrationUpdate {
                    device_id: 0,
                    election_id: Some(ELECTION_ID.into()),
                    ..Default::default()
                },
            )),
        })
        .unwrap();
    let mut stream = client
        .stream_channel(tokio_stream::wrappers::UnboundedReceiverStream::new(
            stream_requests,
        ))
        .await
        .unwrap()
        .into_inner();
    let Some(p4v1::stream_message_response::Update::Arbitration(answer)) =
        stream.next().await.unwrap().unwrap().update
    else {
        panic!("no arbitration answer");
    };
    assert_eq!(answer.status.unwrap().code, 0, "the client is the primary");
    let config = client
        .get_forwarding_pipeline_config(p4v1::GetForwardingPipelineConfigRequest {
            device_id: 0,
            response_type:
                p4v1::get_forwarding_pipeline_config_request::ResponseType::P4infoAndCookie as i32,
        })
        .await
        .unwrap()
        .into_inner();
    let table_id = p4runtime::p4info::preambles(&config.config.unwrap().p4info.unwrap())
        .find(|p| p.name == "MyIngress.ipv4_lpm")
        .expect("forward.p4's route table")
        .id;

    // The routes (to h1 and h2) get a timeout.
    let installed = routes(&mut client, table_id).await;
    assert_eq!(installed.len(), 2, "{installed:?}");
    let timed: Vec<p4v1::TableEntry> = installed
        .iter()
        .map(|r| p4v1::TableEntry {
            idle_timeout_ns: TTL.as_nanos() as i64,
            time_since_last_hit: None,
            ..r.clone()
        })
        .collect();
    client
        .write(p4v1::WriteRequest {
            device_id: 0,
            election_id: Some(ELECTION_ID.into()),
            updates: timed
                .iter()
                .map(|r| p4v1::Update {
                    r#type: p4v1::update::Type::Modify as i32,
                    entity: Some(p4v1::Entity {
                        entity: Some(p4v1::entity::Entity::TableEntry(r.clone())),
                    }),
                })
                .collect(),
            ..Default::default()
        })
        .await
        .unwrap();

    // Pings hit both routes (requests one way, replies the other): no notification.
    let interval = "0.2";
    let count = (PINGING.as_secs_f64() / 0.2) as u32;
    let mut ping = h1
        .ns
        .command("ping")
        .args(["-q", "-i", interval, "-W", "2", "-c", &count.to_string()])
        .arg("10.0.2.2")
        .spawn()
        .unwrap();
    let pinged = Instant::now();
    let while_hit = notifications(&mut stream, PINGING - Duration::from_millis(500)).await;
    let busy = routes(&mut client, table_id).await;
    assert!(
        ping.wait().unwrap().success(),
        "h1's pings to h2 were answered"
    );
    assert!(
        pinged.elapsed() >= TTL * 2,
        "the pings lasted several timeouts"
    );
    assert_eq!(while_hit, Vec::new(), "notified while hit");
    for (route, idle) in busy.iter().zip(idle_for(&busy)) {
        assert!(idle < TTL, "{route:?}");
        assert_eq!(route.idle_timeout_ns, TTL.as_nanos() as i64);
    }

    // The pings stop: both routes are notified, by key and timeout (without their action).
    let idle = notifications(&mut stream, TTL + Duration::from_secs(3)).await;
    let mut notified: Vec<p4v1::TableEntry> = idle
        .iter()
        .flat_map(|n| n.table_entry.iter().cloned())
        .collect();
    assert!(idle
        .iter()
        .all(|n| n.timestamp > 0 && !n.table_entry.is_empty()));
    let mut expected: Vec<p4v1::TableEntry> = timed
        .iter()
        .map(|r| p4v1::TableEntry {
            action: None,
            counter_data: None,
            ..r.clone()
        })
        .collect();
    let key = |e: &p4v1::TableEntry| format!("{:?}", e.r#match);
    notified.sort_by_key(key);
    notified.dedup();
    expected.sort_by_key(key);
    assert_eq!(notified, expected);
    let quiet = routes(&mut client, table_id).await;
    for (route, since) in quiet.iter().zip(idle_for(&quiet)) {
        assert!(since >= TTL, "notified but idle for {since:?}: {route:?}");
    }
    // Still idle, they are notified again.
    let again = notifications(&mut stream, TTL + Duration::from_secs(3)).await;
    assert!(
        again.iter().any(|n| !n.table_entry.is_empty()),
        "not notified again while idle"
    );
}
