//! `lossless agent`'s gNMI server read by a real client (pygnmi, from PyPI, with its own
//! generated gnmi_pb2): a STREAM subscription's SAMPLE updates move while RoCEv2 traffic reaches
//! the attached interface, its ON_CHANGE subscription to priority 3's PFC pauses says nothing
//! until a PAUSE (scapy's) arrives and then gives the count `host stats` reads; Capabilities,
//! Get (and NOT_FOUND for a path with no data, UNIMPLEMENTED for an encoding not served,
//! INVALID_ARGUMENT for an origin not served), ONCE and POLL answer; requests past the limits
//! are refused with the limit named; every value comes in the type its encoding gives it (a
//! string for JSON_IETF, a number for JSON, `uint_val` for PROTO). Every client call has a
//! deadline. The agent listens on the receiving namespace's loopback,
//! so its port meets no other test's.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use lossless_tests::{
    bed::{by_priority, privileged_and, Link, Running},
    craft::scapy_pfc,
    gnmi::{self, counter, pygnmi_or_skip, Stream},
};
use sysutil::netns::{unique_name, Namespace};

const HOST: &str = "127.0.0.1";
const PORT: &str = "57400";

/// Removes what the agent leaves pinned, even when the test fails.
struct Detach<'a>(&'a Namespace, String);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        let _ = Link::lossless(self.0, &["host", "detach", &self.1]);
    }
}

#[test]
fn pygnmi_streams_samples_and_a_pause_on_change_from_the_agent() {
    let test = "pygnmi_streams_samples_and_a_pause_on_change_from_the_agent";
    let Some(python) = privileged_and(test, pygnmi_or_skip) else {
        return;
    };
    let link = Link::new().unwrap();
    let rx = link.rx.ifname.clone();
    let ns = &link.rx_ns;
    let _cleanup = Detach(ns, rx.clone());
    let dir = testkit::TempDir::new("gnmi", &unique_name("agent"));
    let config = dir.file(
        "agent.toml",
        &format!("gnmi_listen_address = \"{HOST}:{PORT}\"\n\n[[interfaces]]\nname = \"{rx}\"\nhooks = [\"xdp\"]\n"),
    );
    let metrics = format!("{HOST}:9477");
    let mut agent = Running::spawn(
        ns,
        &[
            "agent",
            "--config",
            &config.display().to_string(),
            "--metrics-addr",
            &metrics,
        ],
        &[("LOSSLESS_LOG", "info")],
    );
    agent.wait_for(&format!("serving gNMI on {HOST}:{PORT}"));
    agent.wait_for(&format!("{rx}: attached"));

    // Capabilities, Get, ONCE, POLL.
    let answers = gnmi::client(ns, &python, &[HOST, PORT, &rx, "requests"]);
    let capabilities = &answers["capabilities"];
    assert_eq!(capabilities["gNMI_version"], "0.10.0", "{capabilities}");
    let models = gnmi::model_names(capabilities);
    assert!(
        models.contains(&"openconfig-interfaces") && models.contains(&"lossless"),
        "{capabilities}"
    );
    assert_eq!(
        capabilities["supported_encodings"],
        serde_json::json!(["JSON_IETF", "JSON", "PROTO"]),
        "{capabilities}"
    );
    let in_pkts = format!("interfaces/interface[name={rx}]/state/counters/in-pkts");
    let get = answers["get"].as_array().unwrap();
    assert_eq!(get.len(), 2, "{get:?}");
    counter(&get[0][&in_pkts], "json_val");
    // The PFC subtree: nine leaves for each of eight priorities.
    assert_eq!(get[1].as_object().unwrap().len(), 72, "{get:?}");
    let missing = &answers["get_missing"];
    assert_eq!(missing["code"], "NOT_FOUND", "{answers}");
    assert!(
        missing["details"].as_str().unwrap().contains("no data at"),
        "{answers}"
    );
    let attached = format!("agent/interfaces/interface[name={rx}]/state/attached");
    assert_eq!(
        counter(&answers["agent"][&attached], "json_val"),
        1,
        "{answers}"
    );
    assert_eq!(
        answers["bytes_encoding"]["code"], "UNIMPLEMENTED",
        "{answers}"
    );
    let unserved = &answers["unserved_origin"];
    assert_eq!(unserved["code"], "INVALID_ARGUMENT", "{answers}");
    assert!(
        unserved["details"]
            .as_str()
            .unwrap()
            .contains("openconfig, lossless"),
        "{answers}"
    );
    let once = answers["once"].as_array().unwrap();
    assert_eq!(once.len(), 2, "{once:?}");
    counter(&once[0][&in_pkts], "uint_val");
    assert_eq!(once[1], "sync_response", "{once:?}");
    let poll = answers["poll"].as_array().unwrap();
    assert_eq!(poll.len(), 3, "{poll:?}");
    for answer in poll {
        counter(&answer[&in_pkts], "json_ietf_val");
    }

    // Limits.
    let refused = gnmi::client(ns, &python, &[HOST, PORT, &rx, "refused"]);
    for (name, limit) in [
        ("too_fast", "shorter than the 100ms allowed"),
        ("too_many", "more than the 64 allowed"),
    ] {
        let status = &refused[name];
        assert_eq!(status["code"], "INVALID_ARGUMENT", "{refused}");
        assert!(
            status["details"].as_str().unwrap().contains(limit),
            "{refused}"
        );
    }

    // STREAM: SAMPLE of in-pkts every 200 ms, ON_CHANGE of priority 3's pauses.
    let stream = Stream::start(ns, &python, &[HOST, PORT, &rx, "stream"]);
    let next = || stream.next();
    let first = next();
    let pauses = format!(
        "interfaces/interface[name={rx}]/pfc/priority[index=3]/state/pause-frames-received"
    );
    assert_eq!(
        counter(&first["leaves"][&pauses], "json_ietf_val"),
        0,
        "{first}"
    );
    let synced = next();
    assert_eq!(synced["synced"], true, "{synced}");

    // Traffic until stopped; the samples move.
    let flowing = Arc::new(AtomicBool::new(true));
    let sender = {
        let socket = link.tx_socket();
        let frame = link.roce().build();
        let flowing = flowing.clone();
        std::thread::spawn(move || {
            while flowing.load(Ordering::Relaxed) {
                for _ in 0..20 {
                    socket.send(&frame).unwrap();
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    gnmi::assert_counter_grows(&in_pkts, || {
        let update = next();
        assert!(
            update["leaves"].get(&pauses).is_none(),
            "ON_CHANGE sent an unchanged value: {update}"
        );
        update
    });
    flowing.store(false, Ordering::Relaxed);
    sender.join().unwrap();

    // A PAUSE for priority 3: the ON_CHANGE subscription sends it, with the count stats has.
    let pause = scapy_pfc("c3_enabled=1, c3_pause_time=100");
    link.tx_socket().send(&pause).unwrap();
    let changed = loop {
        let update = next();
        if let Some(leaf) = update["leaves"].get(&pauses) {
            break counter(leaf, "json_ietf_val");
        }
    };
    assert_eq!(changed, 1);
    assert_eq!(by_priority(&link.rx_stats(), "pfc_pause_rx", 3), 1);
}
