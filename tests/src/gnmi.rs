//! A real gNMI client for the tests of the gNMI servers (`lossless agent`'s, softswitch's):
//! `interop/gnmi_client.py`, pygnmi's own generated gnmi_pb2 and stub, run in a namespace, its
//! one-shot answers parsed as JSON and its STREAM read line by line. Every call has a deadline.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde_json::Value;
use sysutil::netns::Namespace;

use crate::bed::succeeded_within;

/// How long an answer or an update may take to come.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The client script.
pub fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/gnmi_client.py")
}

/// The venv's Python if pygnmi imports in it; else the skip rule.
pub fn pygnmi_or_skip(test: &str) -> Option<PathBuf> {
    let python = testkit::venv_python_or_skip(test)?;
    let imports = Command::new(&python)
        .args(["-c", "import pygnmi.spec.v080.gnmi_pb2_grpc"])
        .status()
        .is_ok_and(|s| s.success());
    if !imports {
        testkit::skip(test, "needs pygnmi in the venv (cargo xtask setup)");
        return None;
    }
    Some(python)
}

/// Runs the client with `args` (HOST PORT IFACE WHAT ...) in `ns` and parses the JSON of its
/// last line; a client still running after [`DEADLINE`] is killed and the test fails.
pub fn client(ns: &Namespace, python: &PathBuf, args: &[&str]) -> Value {
    client_with(ns, python, &[], args)
}

/// [`client`] with the environment `env` too (`GNMI_CA`, `GNMI_CERT`, `GNMI_KEY`: over TLS).
pub fn client_with(
    ns: &Namespace,
    python: &PathBuf,
    env: &[(&str, &Path)],
    args: &[&str],
) -> Value {
    let what = args.get(3).copied().unwrap_or_default();
    let child = ns
        .command(python)
        .envs(env.iter().copied())
        .arg(client_script())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = succeeded_within(child, DEADLINE, &format!("gnmi_client.py {what}"));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("gnmi_client.py {what} printed no JSON ({e}): {text}"))
}

/// The client's STREAM subscription (`gnmi_client.py ... stream ...`), killed on drop.
pub struct Stream {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Stream {
    /// Starts the client with `args` (HOST PORT IFACE stream ...) in `ns`.
    pub fn start(ns: &Namespace, python: &PathBuf, args: &[&str]) -> Self {
        let mut child = ns
            .command(python)
            .arg(client_script())
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (send, lines) = mpsc::channel::<Value>();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        Stream { child, lines }
    }

    /// The next response (`{"synced": true}` or `{"leaves": {path: value}}`), within
    /// [`DEADLINE`].
    pub fn next(&self) -> Value {
        self.lines
            .recv_timeout(DEADLINE)
            .expect("an update from the STREAM subscription")
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The names of the models a Capabilities answer (the client's `capabilities`) lists.
pub fn model_names(capabilities: &Value) -> Vec<&str> {
    capabilities["supported_models"]
        .as_array()
        .unwrap_or_else(|| panic!("no supported_models: {capabilities}"))
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect()
}

/// The counter of a leaf the client reported, which must come as `kind` (a `TypedValue` field)
/// holding what that encoding writes: JSON_IETF a string (RFC 7951's uint64), JSON a number,
/// PROTO a `uint_val`.
pub fn counter(leaf: &Value, kind: &str) -> u64 {
    assert_eq!(leaf["kind"], kind, "{leaf}");
    let value = &leaf["value"];
    match kind {
        "json_ietf_val" => value.as_str().and_then(|v| v.parse().ok()),
        _ => value.as_u64(),
    }
    .unwrap_or_else(|| panic!("{kind} holds no counter: {leaf}"))
}

/// Reads updates with `next` until three samples of the counter leaf `leaf` (JSON_IETF) are
/// seen within [`DEADLINE`], counting from the first that is not 0 (under load an update or two
/// may come before any frame has), and asserts that they grow: none below the one before (two
/// may see the same count) and the third above the first. `next` may send the frames that
/// make the counter grow, and check each update; an update without `leaf` is passed over.
pub fn assert_counter_grows(leaf: &str, mut next: impl FnMut() -> Value) {
    let mut samples = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while samples.len() < 3 {
        assert!(Instant::now() < deadline, "samples {samples:?}");
        let update = next();
        if let Some(leaf) = update["leaves"].get(leaf) {
            let value = counter(leaf, "json_ietf_val");
            if samples.is_empty() && value == 0 {
                continue;
            }
            samples.push(value);
        }
    }
    assert!(
        samples.windows(2).all(|w| w[0] <= w[1]) && samples[2] > samples[0],
        "{leaf} did not grow: {samples:?}"
    );
}
