//! softswitch's gNMI server (`softswitch run --gnmi-addr`) read by a real client (pygnmi, from
//! PyPI, with its own generated gnmi_pb2): softswitch runs lossless.p4 between two hosts on
//! veths. Capabilities lists the models served; Get answers at OpenConfig's interface and qos
//! paths and at the `lossless` origin's switch totals; a STREAM subscription's SAMPLE of the
//! port's in-pkts grows while frames come in, and its ON_CHANGE subscriptions to the program's
//! PFC state for priority 3 of that port (lossless.p4's `pfc_rx` counter and `pfc_paused_until`
//! register) say nothing until a PAUSE frame (scapy's) arrives, then give the pause counted
//! and when it ends. With P4Runtime's mutual TLS, gNMI takes the CA's clients and refuses a
//! client without a certificate. The server listens on the switch namespace's loopback, so its
//! port meets no other test's.

use std::time::Instant;

use lossless_tests::{
    bed::{lossless_bin, privileged_and, TEST_MAC},
    craft::{scapy_frame, scapy_pfc},
    gnmi::{self, counter, pygnmi_or_skip, Stream, DEADLINE},
    switch::{dataplane_p4, SwitchBed, Topology},
};
use testkit::pki::Lab;

const HOST: &str = "127.0.0.1";
const PORT: &str = "57400";
/// The priority the PAUSE names.
const PRIORITY: u16 = 3;

#[test]
fn pygnmi_reads_softswitch_counters_and_sees_a_pause_on_change() {
    let test = "pygnmi_reads_softswitch_counters_and_sees_a_pause_on_change";
    let Some(python) = privileged_and(test, pygnmi_or_skip) else {
        return;
    };
    let addr = format!("{HOST}:{PORT}");
    let mut bed = SwitchBed::start_with_options(
        Topology::new(2).unwrap(),
        Some(&dataplane_p4("lossless.p4")),
        &["--gnmi-addr", &addr],
    )
    .unwrap();
    bed.wait_for_log(&format!("gNMI on {addr}")).unwrap();
    let host = &bed.hosts()[0];
    let iface = host.switch_iface.clone();
    let ns = &bed.topology().switch_ns;
    // lossless.p4's cells for (port, priority): port << 3 | priority.
    let cell = (host.port << 3) | PRIORITY;
    let pauses = format!(
        "lossless:/p4/counters/counter[name=LosslessIngress.pfc_rx]/cell[index={cell}]/state/packets"
    );
    let paused_until = format!(
        "lossless:/p4/registers/register[name=pfc_paused_until]/cell[index={cell}]/state/value"
    );

    // Capabilities and Get.
    let in_pkts = format!("/interfaces/interface[name={iface}]/state/counters/in-pkts");
    let queues = format!("/qos/interfaces/interface[interface-id={iface}]/output/queues");
    let answers = gnmi::client(
        ns,
        &python,
        &[
            HOST,
            PORT,
            &iface,
            "get",
            &format!("/interfaces/interface[name={iface}]/state/counters"),
            &queues,
            "lossless:/switch/state",
            &pauses,
        ],
    );
    let capabilities = &answers["capabilities"];
    let models = gnmi::model_names(capabilities);
    assert_eq!(
        models,
        ["openconfig-interfaces", "openconfig-qos", "lossless"],
        "{capabilities}"
    );
    let get = &answers["get"];
    let counters = get[format!("/interfaces/interface[name={iface}]/state/counters")]
        .as_object()
        .unwrap();
    let names: Vec<&str> = counters
        .keys()
        .map(|k| k.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "in-octets",
            "in-pkts",
            "out-discards",
            "out-errors",
            "out-octets",
            "out-pkts"
        ],
        "{get}"
    );
    // Eight queues, each with its drops.
    let dropped: Vec<u64> = get[&queues]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.ends_with("/state/dropped-pkts"))
        .map(|(_, leaf)| counter(leaf, "json_val"))
        .collect();
    assert_eq!(dropped, [0; 8], "{get}");
    let totals = get["lossless:/switch/state"].as_object().unwrap();
    assert!(totals.contains_key("switch/state/received"), "{get}");
    // A counter cell still zero is not served.
    assert_eq!(get[&pauses]["code"], "NOT_FOUND", "{get}");

    // STREAM: SAMPLE of in-pkts every 200 ms, ON_CHANGE of the program's PFC state.
    let stream = Stream::start(
        ns,
        &python,
        &[HOST, PORT, &iface, "stream", &pauses, &paused_until],
    );
    let in_pkts_leaf = in_pkts.trim_start_matches('/').to_string();
    let first = stream.next();
    counter(&first["leaves"][&in_pkts_leaf], "json_ietf_val");
    assert_eq!(first["leaves"].as_object().unwrap().len(), 1, "{first}");
    let synced = stream.next();
    assert_eq!(synced["synced"], true, "{synced}");

    // Frames from the host until enough samples are seen; the samples move.
    let src = TEST_MAC.map(|b| format!("{b:02x}")).join(":");
    let frame = scapy_frame(&format!(
        "Ether(src='{src}', dst='02:00:00:00:00:02')/IP(src='10.0.0.1', dst='10.0.0.2')/UDP(sport=1, dport=2)"
    ))
    .unwrap();
    let socket = host.socket();
    gnmi::assert_counter_grows(&in_pkts_leaf, || {
        for _ in 0..20 {
            socket.send(&frame).unwrap();
        }
        let update = stream.next();
        let leaves = update["leaves"].as_object().unwrap();
        assert!(
            !leaves.keys().any(|k| k.starts_with("p4/")),
            "ON_CHANGE sent before any pause: {update}"
        );
        update
    });

    // A PAUSE for priority 3: the ON_CHANGE subscriptions send the pause counted and the time
    // the program holds the priority paused until (its clock's microseconds).
    let pause = scapy_pfc("c3_enabled=1, c3_pause_time=100");
    socket.send(&pause).unwrap();
    let counted = pauses.trim_start_matches("lossless:/").to_string();
    let until = paused_until.trim_start_matches("lossless:/").to_string();
    let (mut count, mut time) = (None, None);
    let deadline = Instant::now() + DEADLINE;
    while count.is_none() || time.is_none() {
        assert!(
            Instant::now() < deadline,
            "no ON_CHANGE update for the pause"
        );
        let update = stream.next();
        let leaves = &update["leaves"];
        count = count.or(leaves.get(&counted).map(|l| counter(l, "json_ietf_val")));
        time = time.or(leaves.get(&until).map(|l| counter(l, "json_ietf_val")));
    }
    assert_eq!(count, Some(1));
    assert!(time.unwrap() > 0);
    drop(stream);

    burst_measures_are_served(&bed, &python, &socket, &src);
    bed.into_topology().unwrap();
}

/// Frames of a burst from the first host to the second.
const BURST: u64 = 10;
/// The rate the second host's queue drains at, packets a second: 20 ms a frame.
const BURST_DRAIN_PPS: u64 = 50;

/// A burst of [`BURST`] frames routed to the second host's port, whose queue is made to drain
/// at [`BURST_DRAIN_PPS`] with a microburst threshold of 4: its measures, read with Get at the
/// `lossless` origin once the burst is over, say one microburst whose peak is the most frames
/// found ahead (the occupancy's maximum, one definition), the last frame's long wait, and no
/// burst under way.
fn burst_measures_are_served(
    bed: &SwitchBed,
    python: &std::path::PathBuf,
    socket: &lossless_tests::capture::RawSocket,
    src: &str,
) {
    let ns = &bed.topology().switch_ns;
    let to = &bed.hosts()[1];
    for words in [
        "entries add ipv4_lpm set_nexthop 10.0.0.2/32 => 2",
        &format!(
            "entries add nexthop forward 2 => {} 02:00:00:00:00:f2 02:00:00:00:00:02",
            to.port
        ),
        &format!(
            "queue set --port {} --priority 0 --rate {BURST_DRAIN_PPS} --burst-threshold 4 \
             --burst-window-us 5000000 --reset-measures",
            to.port
        ),
    ] {
        let out = ns
            .command(lossless_bin())
            .arg("p4")
            .args(words.split_whitespace())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "p4 {words}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let frame = scapy_frame(&format!(
        "Ether(src='{src}', dst='02:00:00:00:00:f1')/IP(src='10.0.0.1', dst='10.0.0.2')/UDP(sport=1, dport=2)/Raw(b'x' * 100)"
    ))
    .unwrap();
    for _ in 0..BURST {
        socket.send(&frame).unwrap();
    }
    let queue = format!(
        "lossless:/qos/interfaces/interface[interface-id={}]/output/queues/queue[name=0]/state",
        to.switch_iface
    );
    let read = || {
        let answers = gnmi::client(ns, python, &[HOST, PORT, &to.switch_iface, "get", &queue]);
        answers["get"][&queue]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let value = |leaves: &serde_json::Map<String, serde_json::Value>, name: &str| {
        leaves
            .iter()
            .find(|(path, _)| path.ends_with(&format!("/state/{name}")))
            .map(|(_, v)| counter(v, "json_val"))
            .unwrap_or_else(|| panic!("no {name} in {leaves:?}"))
    };
    let deadline = Instant::now() + DEADLINE;
    let mut leaves = read();
    while value(&leaves, "microbursts") == 0 {
        assert!(
            Instant::now() < deadline,
            "the burst never ended: {leaves:?}"
        );
        leaves = read();
    }
    let leaf = |name: &str| value(&leaves, name);
    assert_eq!((leaf("microbursts"), leaf("bursts-over-window")), (1, 0));
    assert_eq!((leaf("in-burst"), leaf("open-burst-us")), (0, 0));
    assert_eq!(leaf("burst-threshold-packets"), 4);
    // The first frame may leave before the last arrives: 9 or 8 found ahead at the top.
    let peak = leaf("last-burst-peak-packets");
    assert!((BURST - 2..BURST).contains(&peak), "peak {peak}");
    assert_eq!(leaf("occupancy-max-packets"), peak);
    // The last frame waited for the 8 or 9 ahead of it, 20 ms each.
    let frame_us = 1_000_000 / BURST_DRAIN_PPS;
    assert!(
        leaf("sojourn-max-us") >= (BURST - 2) * frame_us,
        "{}",
        leaf("sojourn-max-us")
    );
    // In the burst from when a frame found 4 ahead (at once) until a departure left 2 behind:
    // the 7th departure after the first frame's, 7 frame times (a late engine adds to it).
    let lasted = leaf("last-burst-duration-us");
    assert!(lasted >= 6 * frame_us, "lasted {lasted} us");
}

#[test]
fn gnmi_takes_p4runtime_s_mutual_tls() {
    let test = "gnmi_takes_p4runtime_s_mutual_tls";
    let Some(python) = privileged_and(test, pygnmi_or_skip) else {
        return;
    };
    // Removed on drop, after the bed (declared later, dropped first), however the test ends.
    let lab = Lab::new("gnmitls", "pki", "collector");
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let addr = format!("{HOST}:{PORT}");
    let mut bed = SwitchBed::start_with_options(
        Topology::new(1).unwrap(),
        Some(&dataplane_p4("lossless.p4")),
        &[
            "--gnmi-addr",
            &addr,
            "--tls-cert",
            &path(&lab.server.cert),
            "--tls-key",
            &path(&lab.server.key),
            "--tls-client-ca",
            &path(&lab.ca.pem),
        ],
    )
    .unwrap();
    bed.wait_for_log(&format!("gNMI on {addr} over TLS"))
        .unwrap();
    let ns = &bed.topology().switch_ns;
    let iface = bed.hosts()[0].switch_iface.clone();
    let args = [HOST, PORT, &iface, "get", "lossless:/switch/state"];
    let trusted = gnmi::client_with(
        ns,
        &python,
        &[
            ("GNMI_CA", lab.ca.pem.as_path()),
            ("GNMI_CERT", lab.client.cert.as_path()),
            ("GNMI_KEY", lab.client.key.as_path()),
        ],
        &args,
    );
    let totals = trusted["get"]["lossless:/switch/state"].as_object();
    assert!(
        totals.is_some_and(|t| t.contains_key("switch/state/received")),
        "{trusted}"
    );
    let anonymous = gnmi::client_with(ns, &python, &[("GNMI_CA", lab.ca.pem.as_path())], &args);
    assert!(anonymous.get("unreachable").is_some(), "{anonymous}");
    bed.into_topology().unwrap();
}
