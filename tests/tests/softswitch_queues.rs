//! Queues that build at the real bottleneck: a switch between the P4 tutorials' h1 and h2
//! whose port to h2 is rate-limited by an HTB qdisc, as Mininet's `bw` links are, runs the
//! tutorials' ecn solution (it marks CE when `enq_qdepth` reaches 10). A burst from h1 faster
//! than the link must leave packets in the switch's queue, where the program sees them: h2
//! receives CE marks, read by tshark. BMv2's simple_switch_grpc, whose egress blocks on the
//! send, is the control under the same test.

use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::path::Path;
use std::time::{Duration, Instant};

use lossless_tests::{
    bed::privileged_and, capture::RawSocket, craft::udp_src_port, tutorial_bed::TutorialBed,
};

/// Datagrams in the burst and their payload size: 300 kB, a quarter second at the link's rate.
const BURST: usize = 300;
const PAYLOAD: usize = 1000;
/// The rate of the switch's port to h2, as Mininet's `bw=10` sets it.
const LINK_MBIT: u32 = 10;
/// The UDP source port of the burst.
const SRC_PORT: u16 = 4791;

/// The ecn solution's routes between h1 and h2.
const ENTRIES: &str = r#"{"table_entries": [
  {"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.1.1", 32]},
   "action_name": "MyIngress.ipv4_forward",
   "action_params": {"dstAddr": "08:00:00:00:01:11", "port": 1}},
  {"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.2.2", 32]},
   "action_name": "MyIngress.ipv4_forward",
   "action_params": {"dstAddr": "08:00:00:00:02:22", "port": 2}}
]}"#;

/// Loads the ecn solution on `bed`, limits the switch's port to h2 to [`LINK_MBIT`] as
/// Mininet's TCIntf does (`htb default 1`, a class `rate ...Mbit burst 15k`), sends the burst
/// from h1 as ECT(1), and returns the ECN field of every datagram h2 received, as tshark reads
/// it.
fn ecn_of_a_burst(bed: &TutorialBed, tutorials: &Path) -> Vec<u8> {
    let entries = bed.dir.join("ecn-entries.json");
    std::fs::write(&entries, ENTRIES).unwrap();
    bed.program(&tutorials.join("exercises/ecn/solution/ecn.p4"), &entries);
    let port = &bed.h2().switch_iface;
    let ns = bed.switch_ns();
    ns.command("tc")
        .args([
            "qdisc", "add", "dev", port, "root", "handle", "5:0", "htb", "default", "1",
        ])
        .status()
        .unwrap()
        .success()
        .then_some(())
        .expect("tc qdisc add htb");
    let rate = format!("{LINK_MBIT}Mbit");
    ns.command("tc")
        .args([
            "class", "add", "dev", port, "parent", "5:0", "classid", "5:1", "htb",
        ])
        .args(["rate", &rate, "burst", "15k"])
        .status()
        .unwrap()
        .success()
        .then_some(())
        .expect("tc class add");

    let rx = RawSocket::open_in(&bed.h2().ns, &bed.h2().iface);
    let sent = bed
        .h1()
        .ns
        .run(|| -> std::io::Result<usize> {
            let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, SRC_PORT))?;
            let tos: libc::c_int = 1; // ECT(1), as the exercise's send.py sets it
                                      // SAFETY: setsockopt with a c_int option value of its size.
            let ret = unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_TOS,
                    (&tos as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if ret != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let payload = [0x5a; PAYLOAD];
            for _ in 0..BURST {
                socket.send_to(&payload, (Ipv4Addr::new(10, 0, 2, 2), 9000))?;
            }
            Ok(BURST)
        })
        .unwrap()
        .unwrap();
    assert_eq!(sent, BURST);
    // What the link lets through: the whole burst, or what came until nothing more did for
    // five seconds (the burst takes a quarter of one at the link's rate; a switch starved of
    // CPU by a busy machine may pause longer than that between frames).
    let mut frames = Vec::new();
    let mut last = Instant::now();
    while frames.len() < BURST && last.elapsed() < Duration::from_secs(5) {
        let more = rx
            .poll_frames(Duration::from_millis(200), |f| {
                udp_src_port(f) == Some(SRC_PORT)
            })
            .unwrap();
        if !more.is_empty() {
            last = Instant::now();
            frames.extend(more);
        }
    }
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let fields = testkit::tshark(&refs, &["-T", "fields", "-e", "ip.dsfield.ecn"]).unwrap();
    fields
        .lines()
        .map(|l| l.trim().parse().unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// Checks what h2 received of the burst through `switch`: some datagrams, the first unmarked
/// (the queue was empty), and CE marks on some (the queue held ten packets or more).
fn assert_marked(switch: &str, ecn: &[u8]) {
    let marked = ecn.iter().filter(|&&e| e == 3).count();
    let ect = ecn.iter().filter(|&&e| e == 1).count();
    eprintln!(
        "{switch}: {} of {BURST} datagrams arrived, {marked} marked CE, {ect} ECT(1)",
        ecn.len()
    );
    assert_eq!(
        ecn.first(),
        Some(&1),
        "{switch}: the first one met an empty queue"
    );
    assert!(
        marked > 0,
        "{switch}: no CE mark: the queue never held 10 packets ({ecn:?})"
    );
    assert_eq!(marked + ect, ecn.len(), "{switch}: {ecn:?}");
}

#[test]
fn a_rate_limited_port_builds_a_queue_the_program_sees_on_softswitch() {
    let test = "a_rate_limited_port_builds_a_queue_the_program_sees_on_softswitch";
    let Some(tutorials) = privileged_and(test, testkit::tutorials_or_skip) else {
        return;
    };
    let bed = TutorialBed::new().unwrap();
    assert_marked("softswitch", &ecn_of_a_burst(&bed, &tutorials));
}

#[test]
fn a_rate_limited_port_builds_a_queue_the_program_sees_on_bmv2() {
    let test = "a_rate_limited_port_builds_a_queue_the_program_sees_on_bmv2";
    let Some(tutorials) = privileged_and(test, testkit::tutorials_or_skip) else {
        return;
    };
    let Some(grpc) = testkit::bmv2::simple_switch_grpc_or_skip(test) else {
        return;
    };
    let bed = TutorialBed::bmv2(grpc).unwrap();
    assert_marked("BMv2", &ecn_of_a_burst(&bed, &tutorials));
}
