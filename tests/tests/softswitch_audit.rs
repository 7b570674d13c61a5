//! Who can reach softswitch's control ports, and what it says of those who write: `softswitch
//! run` in a switch namespace joined by a veth (10.93.0.1 there) to another namespace
//! (10.93.0.2) that stands for a host or a management network. Its Thrift port is off unless
//! asked for (a connect from the other namespace is refused by the switch's kernel: the path
//! routes, nothing listens); asked for on 0.0.0.0, BMv2's own generated client reaches it from
//! there. Every write, over Thrift and P4Runtime, is one audit line in the log the switch
//! writes, with the peer's address and the result; a flood is rate-limited and the lines held
//! back are counted exactly.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};

use lossless_tests::bed::{privileged, subnet_link, TIMEOUT};
use lossless_tests::switch::{program, SwitchBed, Topology};
use p4client::client::{Client, ElectionId, Target};
use p4client::entries::Labelled;
use p4runtime::p4::v1 as p4v1;
use softswitch_server::thrift::bindings::standard::{
    BmAddEntryOptions, BmMatchParam, BmMatchParamExact, BmMatchParamType, StandardSyncClient,
    TStandardSyncClient,
};
use sysutil::netns::Namespace;
use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol, TMultiplexedOutputProtocol};
use thrift::transport::{TBufferedReadTransport, TBufferedWriteTransport};

/// The switch's address on the veth to the other namespace.
const SWITCH: Ipv4Addr = Ipv4Addr::new(10, 93, 0, 1);
/// The table thrift_cli.p4 forwards with.
const TABLE: &str = "ThriftIngress.forward";
/// How many failing Thrift writes the flood sends: many times what the audit's rate limit
/// writes in the seconds a loaded machine takes to send them.
const FLOOD: usize = 400;

/// `softswitch run thrift_cli.p4 OPTIONS` in a switch namespace, started and ready, and
/// another namespace joined to the switch's by a veth ([`SWITCH`] at the switch's end).
fn switch_and_outside(options: &[&str]) -> (SwitchBed, Namespace) {
    let topology = Topology::new(1).unwrap();
    let outside = Namespace::create("lout").unwrap();
    subnet_link(&topology.switch_ns, &outside, [10, 93, 0]).unwrap();
    let program = program("thrift_cli.p4");
    let bed = SwitchBed::start_with_options(topology, Some(&program), options).unwrap();
    (bed, outside)
}

/// A TCP connection from `ns` to `addr`, or why not.
fn connect_from(ns: &Namespace, addr: SocketAddr) -> std::io::Result<TcpStream> {
    ns.run(move || TcpStream::connect_timeout(&addr, TIMEOUT))
        .unwrap()
}

/// BMv2's generated client of the `standard` service on `stream`.
fn thrift_client(stream: TcpStream) -> impl TStandardSyncClient {
    let input = TBinaryInputProtocol::new(
        TBufferedReadTransport::new(stream.try_clone().unwrap()),
        true,
    );
    let output = TMultiplexedOutputProtocol::new(
        "standard",
        TBinaryOutputProtocol::new(TBufferedWriteTransport::new(stream), true),
    );
    StandardSyncClient::new(input, output)
}

/// The key of `TABLE` (its ingress port, 9 bits: 2 bytes) as BMv2 takes it.
fn port_key(port: u8) -> Vec<BmMatchParam> {
    let exact = BmMatchParamExact::new(vec![0, port]);
    vec![BmMatchParam::new(
        BmMatchParamType::EXACT,
        exact,
        None,
        None,
        None,
        None,
    )]
}

#[test]
fn thrift_is_off_under_softswitch_run_and_not_reachable_from_another_namespace() {
    if !privileged("thrift_is_off_under_softswitch_run_and_not_reachable_from_another_namespace") {
        return;
    }
    let (mut bed, outside) = switch_and_outside(&[]);
    // Refused, not timed out: the switch's kernel answered, so the path routes to the switch's
    // address; nothing listens there, neither Thrift nor P4Runtime (on 127.0.0.1).
    for port in [9090, 9559] {
        let refused = connect_from(&outside, SocketAddr::from((SWITCH, port))).unwrap_err();
        assert_eq!(
            refused.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "port {port}: {refused}"
        );
    }
    assert!(
        !bed.lines.iter().any(|l| l.contains("Thrift")),
        "{:?}",
        bed.lines
    );
    bed.stop().unwrap();
}

#[test]
fn thrift_asked_for_answers_from_another_namespace_and_every_write_is_audited() {
    if !privileged("thrift_asked_for_answers_from_another_namespace_and_every_write_is_audited") {
        return;
    }
    let (mut bed, outside) = switch_and_outside(&["--thrift-addr", "0.0.0.0:9090"]);
    let stream = connect_from(&outside, SocketAddr::from((SWITCH, 9090))).unwrap();
    let peer = stream.local_addr().unwrap();
    assert_eq!(peer.ip(), Ipv4Addr::new(10, 93, 0, 2));
    let mut thrift = thrift_client(stream);
    assert_eq!(thrift.bm_mgmt_get_info().unwrap().device_id, Some(0));

    // A Thrift write that succeeds and one that fails: one line each, with the peer.
    let to_port = |port: u8| vec![vec![0, port]];
    let options = || BmAddEntryOptions::new(None);
    let action = "ThriftIngress.to_port".to_string();
    thrift
        .bm_mt_add_entry(
            0,
            TABLE.into(),
            port_key(1),
            action.clone(),
            to_port(2),
            options(),
        )
        .unwrap();
    thrift
        .bm_mt_add_entry(
            0,
            "nosuch".into(),
            port_key(1),
            action,
            to_port(2),
            options(),
        )
        .unwrap_err();
    bed.wait_for_log(&format!(
        "audit: thrift {peer} bm_mt_add_entry table {TABLE}: OK"
    ))
    .unwrap();
    // BMv2's exception and its code (INVALID_TABLE_NAME).
    bed.wait_for_log(&format!(
        "audit: thrift {peer} bm_mt_add_entry table nosuch: InvalidTableOperation code 7"
    ))
    .unwrap();

    // A P4Runtime insert, and the same again (ALREADY_EXISTS), from the switch's namespace.
    bed.topology()
        .switch_ns
        .run(|| {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let mut client = Client::connect(Target {
                    address: "127.0.0.1:9559".into(),
                    device_id: 0,
                    election_id: ElectionId::Fixed(1),
                    tls: None,
                })
                .await
                .unwrap();
                let info = client.p4info().await.unwrap();
                let id = |name: &str| {
                    p4runtime::p4info::preambles(&info)
                        .find(|p| p.name == name)
                        .unwrap()
                        .id
                };
                let entry = p4v1::TableEntry {
                    table_id: id(TABLE),
                    r#match: vec![p4v1::FieldMatch {
                        field_id: 1,
                        field_match_type: Some(p4v1::field_match::FieldMatchType::Exact(
                            p4v1::field_match::Exact { value: vec![3] },
                        )),
                    }],
                    action: Some(p4v1::TableAction {
                        r#type: Some(p4v1::table_action::Type::Action(p4v1::Action {
                            action_id: id("ThriftIngress.to_port"),
                            params: vec![p4v1::action::Param {
                                param_id: 1,
                                value: vec![4],
                            }],
                        })),
                    }),
                    ..Default::default()
                };
                let insert = [Labelled {
                    label: "the entry".into(),
                    update: p4v1::Update {
                        r#type: p4v1::update::Type::Insert as i32,
                        entity: Some(p4v1::Entity {
                            entity: Some(p4v1::entity::Entity::TableEntry(entry)),
                        }),
                    },
                }];
                client.write(&insert).await.unwrap();
                let again = client.write(&insert).await.unwrap_err();
                assert!(again.to_string().contains("ALREADY_EXISTS"), "{again}");
            })
        })
        .unwrap();
    bed.wait_for_log(&format!("INSERT table_entry {TABLE}: OK"))
        .unwrap();
    bed.wait_for_log(&format!("INSERT table_entry {TABLE}: ALREADY_EXISTS"))
        .unwrap();
    let p4runtime_lines: Vec<&String> = bed
        .lines
        .iter()
        .filter(|l| l.contains("audit: p4runtime 127.0.0.1:"))
        .collect();
    assert_eq!(p4runtime_lines.len(), 2, "{p4runtime_lines:?}");

    // A flood of failing deletes: at most a few lines a second are written; the rest are
    // counted, and the counts (SIGUSR1) say exactly how many.
    for handle in 0..FLOOD {
        thrift
            .bm_mt_delete_entry(0, TABLE.into(), 1000 + handle as i32)
            .unwrap_err();
    }
    bed.signal(libc::SIGUSR1);
    bed.wait_for_log("audit counts:").unwrap();
    let written = bed
        .lines
        .iter()
        .filter(|l| l.contains(&format!("audit: thrift {peer} bm_mt_delete_entry table {TABLE}: InvalidTableOperation code 2")))
        .count();
    let suppressed: u64 = bed
        .lines
        .iter()
        .filter_map(|l| {
            let (head, _) = l.split_once(" thrift audit lines suppressed")?;
            head.rsplit(' ').next()?.parse::<u64>().ok()
        })
        .sum();
    assert!(suppressed > 0, "the flood was not rate-limited");
    assert_eq!(written as u64 + suppressed, FLOOD as u64);
    let counts = bed
        .lines
        .iter()
        .find(|l| l.contains("audit counts:"))
        .unwrap();
    assert!(
        counts.contains(&format!(
            "p4runtime 1 ok 1 failed, queues 0 ok 0 failed, thrift 1 ok {} failed; {suppressed} lines suppressed",
            FLOOD + 1
        )),
        "{counts}"
    );
    bed.stop().unwrap();
}
