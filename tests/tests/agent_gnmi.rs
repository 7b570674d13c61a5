//! `lossless agent`'s gNMI server read by a real client (pygnmi, from PyPI, with its own
//! generated gnmi_pb2): a STREAM subscription's SAMPLE updates move while RoCEv2 traffic reaches
//! the attached interface, its ON_CHANGE subscription to priority 3's PFC pauses says nothing
//! until a PAUSE (scapy's) arrives and then gives the count `host stats` reads; Capabilities,
//! Get (and NOT_FOUND for a path with no data), ONCE and POLL answer; requests past the limits
//! are refused with the limit named. The agent listens on the receiving namespace's loopback,
//! so its port meets no other test's.

use std::{
    io::{BufRead as _, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc,
    },
    time::{Duration, Instant},
};

use lossless_tests::{
    bed::{by_priority, privileged, Link, Running, TEST_MAC},
    craft::scapy_frame,
};
use serde_json::Value;
use sysutil::netns::{unique_name, Namespace};

const HOST: &str = "127.0.0.1";
const PORT: &str = "57400";
/// How long an update may take to come.
const DEADLINE: Duration = Duration::from_secs(30);

/// Removes what the agent leaves pinned, even when the test fails.
struct Detach<'a>(&'a Namespace, String);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        let _ = Link::lossless(self.0, &["host", "detach", &self.1]);
    }
}

/// A client process, killed on drop.
struct Client(Child);

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/gnmi_client.py")
}

/// Runs the client's one-shot `what` in `ns` and parses its JSON.
fn client(ns: &Namespace, python: &PathBuf, iface: &str, what: &str) -> Value {
    let out = ns
        .command(python)
        .arg(client_script())
        .args([HOST, PORT, iface, what])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gnmi_client.py {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("gnmi_client.py {what} printed no JSON ({e}): {text}"))
}

/// Whether pygnmi imports in the venv; else the skip rule.
fn pygnmi_or_skip(test: &str) -> Option<PathBuf> {
    let python = testkit::venv_python_or_skip(test)?;
    let imports = Command::new(&python)
        .args(["-c", "import pygnmi.client"])
        .status()
        .is_ok_and(|s| s.success());
    if !imports {
        testkit::skip(test, "needs pygnmi in the venv (cargo xtask setup)");
        return None;
    }
    Some(python)
}

#[test]
fn pygnmi_streams_samples_and_a_pause_on_change_from_the_agent() {
    let test = "pygnmi_streams_samples_and_a_pause_on_change_from_the_agent";
    if !privileged(test) {
        return;
    }
    let Some(python) = pygnmi_or_skip(test) else {
        return;
    };
    let link = Link::new().unwrap();
    let rx = link.rx.ifname.clone();
    let ns = &link.rx_ns;
    let _cleanup = Detach(ns, rx.clone());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique_name("gnmi"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    std::fs::write(
        &config,
        format!("gnmi_listen_address = \"{HOST}:{PORT}\"\n\n[[interfaces]]\nname = \"{rx}\"\nhooks = [\"xdp\"]\n"),
    )
    .unwrap();
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
    let answers = client(ns, &python, &rx, "requests");
    let capabilities = &answers["capabilities"];
    assert_eq!(capabilities["gnmi_version"], "0.10.0", "{capabilities}");
    let models: Vec<&str> = capabilities["supported_models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        models.contains(&"openconfig-interfaces") && models.contains(&"lossless"),
        "{capabilities}"
    );
    let encodings = capabilities["supported_encodings"].to_string();
    for encoding in ["json_ietf", "json", "proto"] {
        assert!(
            encodings.contains(&format!("\"{encoding}\"")),
            "{encodings}"
        );
    }
    let in_pkts = format!("interfaces/interface[name={rx}]/state/counters/in-pkts");
    let get = answers["get"].as_array().unwrap();
    assert_eq!(get.len(), 2, "{get:?}");
    assert!(get[0][&in_pkts].is_u64(), "{get:?}");
    // The PFC subtree: nine leaves for each of eight priorities.
    assert_eq!(get[1].as_object().unwrap().len(), 72, "{get:?}");
    assert!(
        answers["get_missing"]
            .as_str()
            .unwrap()
            .contains("no data at"),
        "{answers}"
    );
    let once = answers["once"].as_array().unwrap();
    assert!(once.last().unwrap()["sync_response"] == true, "{once:?}");
    assert!(
        once[0]["update"]["update"][0]["path"] == in_pkts.as_str(),
        "{once:?}"
    );
    let poll = answers["poll"].as_array().unwrap();
    assert_eq!(poll.len(), 3, "{poll:?}");
    assert!(poll.iter().all(|p| p[&in_pkts].is_u64()), "{poll:?}");

    // Limits.
    let refused = client(ns, &python, &rx, "refused");
    assert!(
        refused["too_fast"]
            .as_str()
            .unwrap()
            .contains("shorter than the 100ms allowed"),
        "{refused}"
    );
    assert!(
        refused["too_many"]
            .as_str()
            .unwrap()
            .contains("more than the 64 allowed"),
        "{refused}"
    );

    // STREAM: SAMPLE of in-pkts every 200 ms, ON_CHANGE of priority 3's pauses.
    let mut stream = Client(
        ns.command(&python)
            .arg(client_script())
            .args([HOST, PORT, &rx, "stream"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (send, lines) = mpsc::channel::<Value>();
    let stdout = stream.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(serde_json::from_str(&line).unwrap()).is_err() {
                return;
            }
        }
    });
    let next = || {
        lines
            .recv_timeout(DEADLINE)
            .expect("an update from the STREAM subscription")
    };
    let first = next();
    assert_eq!(first["synced"], true, "{first}");
    let pauses = format!(
        "interfaces/interface[name={rx}]/pfc/priority[index=3]/state/pause-frames-received"
    );
    assert_eq!(first["leaves"][&pauses], 0, "{first}");

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
    let mut samples = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while samples.len() < 3 {
        assert!(Instant::now() < deadline, "samples {samples:?}");
        let update = next();
        assert!(
            update["leaves"].get(&pauses).is_none(),
            "ON_CHANGE sent an unchanged value: {update}"
        );
        if let Some(value) = update["leaves"][&in_pkts].as_u64() {
            samples.push(value);
        }
    }
    assert!(
        samples.windows(2).all(|w| w[0] < w[1]),
        "in-pkts did not grow: {samples:?}"
    );
    flowing.store(false, Ordering::Relaxed);
    sender.join().unwrap();

    // A PAUSE for priority 3: the ON_CHANGE subscription sends it, with the count stats has.
    let src = TEST_MAC.map(|b| format!("{b:02x}")).join(":");
    let pause = scapy_frame(&format!(
        "Ether(src='{src}', dst='01:80:c2:00:00:01')/MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=100)"
    ))
    .unwrap();
    link.tx_socket().send(&pause).unwrap();
    let changed = loop {
        let update = next();
        if let Some(value) = update["leaves"][&pauses].as_u64() {
            break value;
        }
    };
    assert_eq!(changed, 1);
    assert_eq!(by_priority(&link.rx_stats(), "pfc_pause_rx", 3), 1);
}
