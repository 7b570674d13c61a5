//! softswitch on veths in namespaces: frames in on one port leave on the port the program
//! chooses, changed as it says (read back with etherparse); an interface deleted under the
//! running switch takes its port down and the switch goes on; SIGTERM stops it cleanly.

use std::time::Duration;

use etherparse::{NetHeaders, PacketHeaders};
use lossless_tests::{
    bed::{from_test_mac, privileged, TEST_MAC, TIMEOUT},
    craft::ipv4_checksum_ok,
    switch::{program, SwitchBed},
};

/// A UDP frame from TEST_MAC to 10.0.`net`.9 (etherparse), TTL 64.
fn frame_to(net: u8) -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2(TEST_MAC, [2, 0, 0, 0, 0, 0xfe])
        .ipv4([10, 0, 1, 9], [10, 0, net, 9], 64)
        .udp(4000, 5000)
        .write(&mut out, b"softswitch port test")
        .unwrap();
    out
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

#[test]
fn frames_are_forwarded_and_rewritten_between_real_ports() {
    if !privileged("frames_are_forwarded_and_rewritten_between_real_ports") {
        return;
    }
    let mut bed = SwitchBed::new(&program("ipv4_forward.p4"), 3).unwrap();
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
    let status = bed.stop().unwrap();
    assert!(
        status.success(),
        "softswitch exited with {status}: {}",
        bed.lines.join("\n")
    );
    assert!(bed.lines.iter().any(|l| l.contains("softswitch: stopped")));
}

#[test]
fn a_deleted_interface_takes_its_port_down_and_the_switch_goes_on() {
    if !privileged("a_deleted_interface_takes_its_port_down_and_the_switch_goes_on") {
        return;
    }
    let mut bed = SwitchBed::new(&program("ipv4_forward.p4"), 3).unwrap();
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
    let status = bed.stop().unwrap();
    assert!(status.success(), "softswitch exited with {status}");
}
