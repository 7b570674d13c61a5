//! softswitch on veths in namespaces: frames in on one port leave on the port the program
//! chooses, changed as it says (read back with etherparse); frames up to the documented
//! 2016 bytes cross, longer ones are dropped and logged, and a frame the egress interface
//! refuses does not stop the frames behind it; an interface deleted under the running switch
//! takes its port down and the switch goes on; SIGTERM stops it cleanly. Each test runs on
//! both kinds of port: AF_XDP sockets (copy mode on veth) and AF_PACKET rings.

use std::time::Duration;

use etherparse::{NetHeaders, PacketHeaders};
use lossless_tests::{
    bed::{from_test_mac, privileged, TEST_MAC, TIMEOUT},
    craft::ipv4_checksum_ok,
    switch::{program, SwitchBed, Topology},
};

/// A UDP frame from TEST_MAC to 10.0.`net`.9 (etherparse), TTL 64.
fn frame_to(net: u8) -> Vec<u8> {
    frame_with_payload(net, b"softswitch port test")
}

fn frame_with_payload(net: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2(TEST_MAC, [2, 0, 0, 0, 0, 0xfe])
        .ipv4([10, 0, 1, 9], [10, 0, net, 9], 64)
        .udp(4000, 5000)
        .write(&mut out, payload)
        .unwrap();
    out
}

/// A UDP frame to 10.0.`net`.9 of exactly `len` bytes (headers included, no FCS).
fn frame_of_len(net: u8, len: usize) -> Vec<u8> {
    let frame = frame_with_payload(net, &vec![0x5a; len - 42]);
    assert_eq!(frame.len(), len);
    frame
}

/// Stops the switch, which must exit with success, and returns the line of what it printed that
/// contains `needle`.
fn stop_and_find(bed: &mut SwitchBed, needle: &str) -> String {
    let status = bed.stop().unwrap();
    let printed = bed.lines.join("\n");
    assert!(
        status.success(),
        "softswitch exited with {status}: {printed}"
    );
    bed.lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no '{needle}' in:\n{printed}"))
        .clone()
}

/// Sends `frame` from host `from` and returns what host `to` receives of the test's frames.
fn through(bed: &SwitchBed, from: usize, to: usize, frame: &[u8], count: usize) -> Vec<Vec<u8>> {
    let rx = bed.hosts()[to].socket();
    let tx = bed.hosts()[from].socket();
    for _ in 0..count {
        tx.send(frame).unwrap();
    }
    // The switch rewrites the source MAC (to the old destination): match on the payload's UDP
    // ports instead of TEST_MAC.
    rx.receive(count, TIMEOUT, |f| {
        lossless_tests::craft::udp_src_port(f) == Some(4000)
    })
    .unwrap()
}

/// Both kinds of port, as `--port-io` names them.
const PORT_IOS: [&str; 2] = ["afxdp", "af-packet"];

/// A test `name` that runs `check` with each port I/O of [`PORT_IOS`], where it can run
/// ([`privileged`]).
macro_rules! on_every_port_io {
    ($name:ident: $check:ident) => {
        #[test]
        fn $name() {
            if privileged(stringify!($name)) {
                for io in PORT_IOS {
                    $check(io);
                }
            }
        }
    };
}

/// `softswitch run ipv4_forward.p4` on `hosts` hosts with ports of kind `io`, ready.
fn forwarding_bed(topology: Topology, io: &str) -> SwitchBed {
    let bed = SwitchBed::start_on(topology, Some(&program("ipv4_forward.p4")), io).unwrap();
    // The switch says how each port was attached: AF_XDP in copy mode on veth (no fallback).
    let expected = if io == "afxdp" {
        "afxdp (copy mode)"
    } else {
        "af-packet"
    };
    let up = bed
        .lines
        .iter()
        .find(|l| l.contains("P4Runtime on"))
        .cloned()
        .unwrap_or_default();
    let ports = bed.hosts().len();
    assert_eq!(up.matches(expected).count(), ports, "{up}");
    bed
}

on_every_port_io!(frames_are_forwarded_and_rewritten_between_real_ports: forwarded_and_rewritten);

fn forwarded_and_rewritten(io: &str) {
    let mut bed = forwarding_bed(Topology::new(3).unwrap(), io);
    let sent = frame_to(2);
    let got = through(&bed, 0, 1, &sent, 20);
    assert_eq!(got.len(), 20);
    for frame in &got {
        let h = PacketHeaders::from_ethernet_slice(frame).unwrap();
        let eth = h.link.unwrap().ethernet2().unwrap();
        assert_eq!(
            eth.destination,
            [2, 0, 0, 0, 0, 2],
            "dst MAC rewritten by route()"
        );
        assert_eq!(eth.source, [2, 0, 0, 0, 0, 0xfe], "src MAC is the old dst");
        let Some(NetHeaders::Ipv4(ip, _)) = h.net else {
            panic!("not IPv4")
        };
        assert_eq!(ip.time_to_live, 63);
        assert!(ipv4_checksum_ok(frame), "the checksum was updated");
        assert_eq!(h.payload.slice(), b"softswitch port test");
    }
    // Nothing leaks to the third port.
    let third = bed.hosts()[2].socket();
    assert!(third
        .poll_frames(Duration::from_millis(200), from_test_mac)
        .unwrap()
        .is_empty());
    // A destination without a route is dropped.
    let none = bed.hosts()[1].socket();
    bed.hosts()[0].socket().send(&frame_to(9)).unwrap();
    assert!(none
        .poll_frames(
            Duration::from_millis(200),
            |f| lossless_tests::craft::udp_src_port(f) == Some(4000)
        )
        .unwrap()
        .is_empty());
    stop_and_find(&mut bed, "softswitch: stopped");
}

on_every_port_io!(a_deleted_interface_takes_its_port_down_and_the_switch_goes_on: port_down);

fn port_down(io: &str) {
    let mut bed = forwarding_bed(Topology::new(3).unwrap(), io);
    assert_eq!(through(&bed, 0, 1, &frame_to(2), 1).len(), 1);
    // Deleting the host end deletes the pair, and so the switch's port 2.
    bed.hosts()[1]
        .ns
        .ip(&["link", "del", &bed.hosts()[1].iface.clone()])
        .unwrap();
    bed.wait_for_log("port 2 is down").unwrap();
    assert!(bed.running(), "the switch must survive a port going away");
    // Frames routed to the dead port are lost; the other ports still forward.
    bed.hosts()[0].socket().send(&frame_to(2)).unwrap();
    assert_eq!(through(&bed, 0, 2, &frame_to(3), 5).len(), 5);
    assert_eq!(through(&bed, 2, 0, &frame_to(1), 5).len(), 5);
    // The frame routed to the dead port was counted as lost.
    let summary = stop_and_find(&mut bed, " lost ");
    let lost: u64 = summary
        .split(" lost ")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no lost count in '{summary}'"));
    assert!(lost >= 1, "{summary}");
}

on_every_port_io!(
    frames_up_to_2016_bytes_cross_longer_ones_are_dropped_and_a_refused_one_stops_nothing:
    frame_lengths
);

fn frame_lengths(io: &str) {
    // Hosts 1 and 2 take jumbo frames; host 3 keeps the default MTU of 1500.
    let topology = Topology::new(3).unwrap();
    topology.set_mtu(0, 9000).unwrap();
    topology.set_mtu(1, 9000).unwrap();
    let mut bed = forwarding_bed(topology, io);
    // The documented limit, and the lengths the review saw dropped (1990..2016).
    for len in [1514, 1989, 1990, 2000, 2015, 2016] {
        let sent = frame_of_len(2, len);
        let got = through(&bed, 0, 1, &sent, 1);
        assert_eq!(got[0].len(), len, "a frame of {len} bytes changed length");
        assert_eq!(got[0][14..22], sent[14..22], "frame of {len} bytes");
        assert_eq!(got[0][42..], sent[42..], "the payload of {len} bytes");
    }
    // One byte more is dropped, said in the log with the limit.
    let host2 = bed.hosts()[1].socket();
    bed.hosts()[0]
        .socket()
        .send(&frame_of_len(2, 2017))
        .unwrap();
    bed.wait_for_log("dropped a frame of 2017 bytes, longer than 2016")
        .unwrap();
    bed.hosts()[0]
        .socket()
        .send(&frame_of_len(2, 4000))
        .unwrap();
    // A frame the switch accepts but host 3's interface (MTU 1500) cannot send is lost, and
    // the frames behind it in the transmit ring still leave.
    bed.hosts()[0]
        .socket()
        .send(&frame_of_len(3, 1600))
        .unwrap();
    assert_eq!(through(&bed, 0, 2, &frame_to(3), 5).len(), 5);
    // Nothing over the limit reached host 2: every frame it got was one it was sent.
    assert!(host2
        .poll_frames(Duration::from_millis(200), |f| f.len() > 2016)
        .unwrap()
        .is_empty());
    if io == "afxdp" {
        // The 4000-byte frame does not fit an AF_XDP socket's frame: the kernel drops it and
        // the socket's statistics count it.
        let summary = stop_and_find(&mut bed, "frames dropped for being longer than 2016 bytes");
        assert!(summary.contains("too_long=1"), "{summary}");
        let kernel = bed
            .lines
            .iter()
            .find(|l| {
                l.contains("frames the kernel dropped before the switch read them (the AF_XDP")
            })
            .unwrap_or_else(|| panic!("no kernel drops in:\n{}", bed.lines.join("\n")));
        assert!(kernel.contains("kernel_drops=1"), "{kernel}");
    } else {
        let summary = stop_and_find(&mut bed, "frames dropped for being longer than 2016 bytes");
        assert!(summary.contains("too_long=2"), "{summary}");
    }
}
