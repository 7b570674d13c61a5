//! Real sockets between two network namespaces joined by a veth pair: what the
//! sender puts on the wire, the receiver counts. Needs root; skipped otherwise.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::Duration;

use crate::notify::CnpConfig;
use crate::pacing::wire_bits;
use crate::{FixedRate, Receiver, RecvConfig, RecvSummary, SendConfig, SendSummary, Sender};
use sysutil::netns::{veth_pair, Endpoint, Namespace};
use wire::bth::Opcode;
use wire::ethernet::Address;
use wire::ip::Ecn;

/// One test at a time: they measure rates, and the machine may have few cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether the test can run, saying why not if it cannot.
fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: packet sockets and network namespaces need root");
    }
    root
}

/// For a test that can run ([`is_root`]), the right to run alone.
fn exclusive() -> Option<MutexGuard<'static, ()>> {
    is_root().then(|| {
        ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    })
}

/// A receiver on `bed`'s b end that stops after 500 ms without frames.
fn until_idle(bed: &Bed, cnp: Option<CnpConfig>) -> RecvConfig {
    RecvConfig {
        iface: bed.b_end.ifname.clone(),
        duration: None,
        count: None,
        idle_timeout: Some(Duration::from_millis(500)),
        cnp,
    }
}

/// Two namespaces and the veth pair between them.
struct Bed {
    a: Namespace,
    b: Namespace,
    a_end: Endpoint,
    b_end: Endpoint,
}

fn bed() -> Bed {
    let a = Namespace::create("lta").unwrap();
    let b = Namespace::create("ltb").unwrap();
    let (a_end, b_end) = veth_pair(
        &a,
        Ipv4Addr::new(10, 77, 0, 1),
        &b,
        Ipv4Addr::new(10, 77, 0, 2),
    )
    .unwrap();
    Bed { a, b, a_end, b_end }
}

/// Runs a receiver in `b` (open before the sender starts) and a sender in `a`.
fn exchange(
    bed: &Bed,
    recv: RecvConfig,
    send: SendConfig,
    rate_bps: u64,
) -> (SendSummary, RecvSummary) {
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::scope(|scope| {
        let receiver = scope.spawn(|| {
            bed.b
                .run(move || {
                    let mut receiver = Receiver::open(recv).unwrap();
                    ready_tx.send(()).unwrap();
                    receiver.run().unwrap()
                })
                .unwrap()
        });
        ready_rx.recv().unwrap();
        let sent = bed
            .a
            .run(move || {
                let mut sender = Sender::open(send).unwrap();
                let mut rates = FixedRate::split(rate_bps, sender.frames().len());
                sender.run(&mut rates).unwrap()
            })
            .unwrap();
        (sent, receiver.join().unwrap())
    })
}

#[test]
fn ipv4_resolved_paced_and_counted() {
    let Some(_alone) = exclusive() else {
        return;
    };
    let bed = bed();
    let recv = RecvConfig {
        iface: bed.b_end.ifname.clone(),
        duration: None,
        count: Some(2000),
        idle_timeout: Some(Duration::from_secs(5)),
        cnp: None,
    };
    let send = SendConfig {
        count: Some(2000),
        duration: None,
        qps: 4,
        qp_base: 100,
        ..SendConfig::new(&bed.a_end.ifname, IpAddr::V4(bed.b_end.ipv4))
    };
    let rate = 100_000_000;
    let (sent, got) = exchange(&bed, recv, send, rate);

    assert_eq!(
        sent.dst_mac,
        Address(bed.b_end.mac).to_string(),
        "resolved through the neighbour table"
    );
    assert_eq!((sent.packets, got.frames.packets), (2000, 2000));
    assert_eq!(
        (
            got.frames.ect,
            got.frames.ce,
            got.frames.psn_gaps,
            got.frames.reordered,
            got.bad_frames
        ),
        (2000, 0, 0, 0, 0)
    );
    assert_eq!(
        got.qps
            .iter()
            .map(|q| (q.qp, q.frames.packets))
            .collect::<Vec<_>>(),
        [(100, 500), (101, 500), (102, 500), (103, 500)]
    );
    // Paced: 2000 frames of 8384 bits at 100 Mb/s take 167.7 ms — never less (the schedule
    // holds frames back). How much longer depends on the machine's load, so it is not asserted:
    // the sender's speed is the benchmarks' business.
    let expected_s = 2000.0 * wire_bits(1024) as f64 / rate as f64;
    assert!(
        sent.duration_s > expected_s * 0.95,
        "took {} s, at least {expected_s} s expected",
        sent.duration_s
    );
}

#[test]
fn ipv6_resolved_with_priority_tag() {
    let Some(_alone) = exclusive() else {
        return;
    };
    let bed = bed();
    bed.a
        .ip(&[
            "addr",
            "add",
            "fd77::1/64",
            "dev",
            &bed.a_end.ifname,
            "nodad",
        ])
        .unwrap();
    bed.b
        .ip(&[
            "addr",
            "add",
            "fd77::2/64",
            "dev",
            &bed.b_end.ifname,
            "nodad",
        ])
        .unwrap();
    let recv = RecvConfig {
        iface: bed.b_end.ifname.clone(),
        duration: Some(Duration::from_secs(5)),
        count: Some(300),
        idle_timeout: None,
        cnp: None,
    };
    let send = SendConfig {
        count: Some(300),
        duration: None,
        size: 200,
        pcp: Some(3),
        ecn: Ecn::Ect1,
        ..SendConfig::new(&bed.a_end.ifname, "fd77::2".parse().unwrap())
    };
    let (sent, got) = exchange(&bed, recv, send, 50_000_000);
    assert_eq!(sent.src_ip, "fd77::1".parse::<IpAddr>().unwrap());
    assert_eq!(
        sent.dst_mac,
        Address(bed.b_end.mac).to_string(),
        "resolved by neighbour discovery"
    );
    assert_eq!(
        (
            got.frames.packets,
            got.frames.ect,
            got.frames.psn_gaps,
            got.bad_frames
        ),
        (300, 300, 0, 0)
    );
    assert_eq!(got.qps[0].qp, 256);
}

#[test]
fn cnps_counted_apart_from_data() {
    let Some(_alone) = exclusive() else {
        return;
    };
    let bed = bed();
    let recv = until_idle(&bed, None);
    // CNP-shaped frames: opcode 0x81, 16 reserved bytes, ICRC (74 bytes over IPv4).
    let send = SendConfig {
        count: Some(50),
        duration: None,
        size: 74,
        opcode: Opcode::Cnp,
        ecn: Ecn::NotEct,
        ..SendConfig::new(&bed.a_end.ifname, IpAddr::V4(bed.b_end.ipv4))
    };
    let (_, got) = exchange(&bed, recv, send, 10_000_000);
    assert_eq!(
        (got.frames.cnps, got.frames.packets, got.qps[0].frames.cnps),
        (50, 0, 50)
    );
}

#[test]
fn ce_marks_answered_with_cnps_reach_the_sender() {
    let Some(_alone) = exclusive() else {
        return;
    };
    let bed = bed();
    let recv = until_idle(
        &bed,
        Some(CnpConfig {
            interval: Duration::ZERO,
            ..CnpConfig::default()
        }),
    );
    let send = SendConfig {
        count: Some(100),
        duration: None,
        qps: 2,
        ecn: Ecn::Ce,
        ..SendConfig::new(&bed.a_end.ifname, IpAddr::V4(bed.b_end.ipv4))
    };
    let (sent, got) = exchange(&bed, recv, send, 10_000_000);
    // No rate limit: every CE mark is answered; the sender reads the CNPs it
    // has by the time it ends (the last ones may still be in flight).
    assert_eq!(
        (
            got.frames.packets,
            got.frames.cnp_sent,
            got.frames.cnp_suppressed
        ),
        (100, 100, 0)
    );
    assert!(sent.cnp_received >= 90, "{sent:?}");
    assert_eq!(sent.cnp_unmatched, 0);
    assert_eq!(
        sent.qps.iter().map(|q| q.cnp_received).sum::<u64>(),
        sent.cnp_received
    );
    assert!(sent.qps.iter().all(|q| q.cnp_received > 0), "{sent:?}");
}
