//! `lossless agent` scraped by a real Prometheus (Debian's): while RoCEv2 traffic and PFC
//! frames reach an interface the agent attached, PromQL over the HTTP API (`rate`, `sum by
//! (priority)`, `resets`) agrees with `lossless host stats --json`; `/metrics` passes
//! `promtool check metrics`; a restarted agent adopts the pins and no counter resets; an
//! interface added to the file (SIGHUP) is attached when it appears and detached when the file
//! drops it. The agent and Prometheus run in the receiving namespace, on its own loopback, so
//! their ports meet no other test's. And with a web configuration (exporter-toolkit's), Prometheus
//! scrapes the agent over TLS with basic auth, and is refused without the password.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use dataplane_common::counters::ParseError;
use lossless_tests::{
    bed::{output_with_input, privileged, Link, Running},
    craft::scapy_pfc,
};
use serde_json::Value;
use sysutil::netns::{unique_name, Namespace};
use testkit::pki::{Ca, Role, Validity};

/// The agent's and Prometheus' addresses, on the receiving namespace's loopback.
const AGENT: &str = "127.0.0.1:9477";
const PROMETHEUS: &str = "127.0.0.1:9090";
/// How long Prometheus may take to start, scrape and agree.
const DEADLINE: Duration = Duration::from_secs(45);

/// Removes what the agent leaves pinned (it detaches nothing on exit), even when the test fails.
struct Detach<'a>(&'a Namespace, Vec<String>);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        for iface in &self.1 {
            let _ = Link::lossless(self.0, &["host", "detach", iface]);
        }
    }
}

/// A Prometheus server in a namespace, with its own configuration and data directory; killed
/// on drop.
struct Prometheus(Child);

impl Prometheus {
    /// Prometheus scraping every second as the `scrape_configs` (YAML list items) say.
    fn start(ns: &Namespace, dir: &Path, scrape_configs: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n{scrape_configs}"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = ns
            .command("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={PROMETHEUS}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting prometheus");
        Prometheus(child)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on `addr` inside `ns` (HTTP/1.0, the answer read to its end): status and body.
fn get(ns: &Namespace, addr: &str, path: &str) -> Option<(u16, String)> {
    let addr: SocketAddr = addr.parse().unwrap();
    let path = path.to_owned();
    ns.run(move || -> Option<(u16, String)> {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        let (head, body) = answer.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some((status, body.to_owned()))
    })
    .unwrap()
}

/// Runs `promtool` with `args` and `input` on its standard input; it must pass (else the test
/// fails with what it printed).
fn promtool_passes(args: &[&str], input: &[u8]) {
    let out = output_with_input(Command::new("promtool").args(args), input).unwrap();
    assert!(
        out.status.success(),
        "promtool {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Percent-encodes a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The result vector of an instant PromQL query: each sample's labels and value.
fn query(ns: &Namespace, promql: &str) -> Vec<(Value, f64)> {
    let Some((200, body)) = get(
        ns,
        PROMETHEUS,
        &format!("/api/v1/query?query={}", encode(promql)),
    ) else {
        return Vec::new();
    };
    let answer: Value = serde_json::from_str(&body).unwrap();
    answer["data"]["result"]
        .as_array()
        .map(|samples| {
            samples
                .iter()
                .map(|s| {
                    let value = s["value"][1].as_str().unwrap().parse().unwrap();
                    (s["metric"].clone(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Polls until `check` holds, failing after [`DEADLINE`] with what it last saw.
fn eventually<T: std::fmt::Debug>(what: &str, mut check: impl FnMut() -> (bool, T)) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (done, seen) = check();
        if done {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never held; last: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Priority `p`'s `key` in `host stats --json`: a per-priority counter, or an entry of one of
/// the PFC arrays.
fn stat(stats: &Value, key: &str, p: usize) -> f64 {
    let value = match &stats["per_priority"][p][key] {
        Value::Null => &stats[key][p],
        value => value,
    };
    value
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} of priority {p} in {stats}"))
}

/// Whether a sample lies between two readings of its counter (a float's rounding allowed).
fn within(sample: f64, low: f64, high: f64) -> bool {
    let slack = 1e-9 * high.max(1.0);
    sample >= low - slack && sample <= high + slack
}

/// `sum by (priority)` of `metric` on `iface`, as a vector indexed by priority.
fn by_priority(ns: &Namespace, metric: &str, iface: &str) -> Vec<f64> {
    let mut values = vec![f64::NAN; 8];
    for (labels, value) in query(
        ns,
        &format!("sum by (priority)({metric}{{interface=\"{iface}\"}})"),
    ) {
        let priority: usize = labels["priority"].as_str().unwrap().parse().unwrap();
        values[priority] = value;
    }
    values
}

/// The agent's file: the interfaces with hooks xdp and cnp under the profile `marks` (priority
/// 3 drains slowly, so its phantom queue fills and marks).
fn write_config(path: &Path, interfaces: &[&str]) {
    let mut text = String::from(
        "[profiles.marks]\necn.prio3.rate_bps = \"2m\"\necn.prio3.kmin_bytes = 2000\n\
         ecn.prio3.kmax_bytes = 20000\n",
    );
    for iface in interfaces {
        text += &format!(
            "\n[[interfaces]]\nname = \"{iface}\"\nhooks = [\"xdp\", \"cnp\"]\nprofile = \"marks\"\n"
        );
    }
    std::fs::write(path, text).unwrap();
}

fn attached(ns: &Namespace) -> Vec<String> {
    let status = Link::lossless(ns, &["host", "status", "--json"]).unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    status
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["state"] == "attached" && e["netns"]["current"] == true)
        .map(|e| e["interface"].as_str().unwrap().to_owned())
        .collect()
}

fn start_agent(ns: &Namespace, config: &Path) -> Running {
    let config = config.display().to_string();
    Running::spawn(
        ns,
        &["agent", "--config", &config, "--metrics-addr", AGENT],
        &[("LOSSLESS_LOG", "info")],
    )
}

fn signal(agent: &Running, signal: i32) {
    // SAFETY: sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(agent.pid() as i32, signal) }, 0);
}

#[test]
fn prometheus_scrapes_the_agent_and_agrees_with_stats() {
    if !privileged("prometheus_scrapes_the_agent_and_agrees_with_stats") {
        return;
    }
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        testkit::skip(
            "prometheus_scrapes_the_agent_and_agrees_with_stats",
            "needs Debian's prometheus (cargo xtask setup installs it)",
        );
        return;
    }
    let link = Link::new().unwrap();
    let rx = link.rx.ifname.clone();
    let later = unique_name("vz");
    let ns = &link.rx_ns;
    let _cleanup = Detach(ns, vec![rx.clone(), later.clone()]);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique_name("agent"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    write_config(&config, &[&rx]);

    let mut agent = start_agent(ns, &config);
    agent.wait_for(&format!("{rx}: attached (xdp, cnp; profile marks)"));
    let _prometheus = Prometheus::start(
        ns,
        &dir,
        &format!("  - job_name: lossless\n    static_configs:\n      - targets: ['{AGENT}']\n"),
    );

    // Traffic on priorities 3 and 6 (DSCP 26 and 48), ECT(0), until stopped.
    let flowing = Arc::new(AtomicBool::new(true));
    let sender = {
        let socket = link.tx_socket();
        let mut frames = Vec::new();
        for dscp in [26, 48] {
            let mut spec = link.roce();
            spec.dscp = dscp;
            frames.push(spec.build());
        }
        let flowing = flowing.clone();
        std::thread::spawn(move || {
            while flowing.load(Ordering::Relaxed) {
                for _ in 0..20 {
                    frames.iter().for_each(|f| socket.send(f).unwrap());
                }
                // Pacing: about 4000 frames a second.
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // PFC PAUSE frames (scapy): two for priority 1, three for priority 4, short pauses.
    let pauses = link.tx_socket();
    for _ in 0..2 {
        pauses
            .send(&scapy_pfc("c1_enabled=1, c1_pause_time=100"))
            .unwrap();
    }
    for _ in 0..3 {
        pauses
            .send(&scapy_pfc("c4_enabled=1, c4_pause_time=200"))
            .unwrap();
    }

    // Prometheus has the target up and sees the traffic's rate.
    eventually("the target is up", || {
        let up = query(ns, "up{job=\"lossless\"}");
        (up.first().is_some_and(|(_, v)| *v == 1.0), up)
    });
    let rate = eventually("a rate of priority 3's packets", || {
        let rate = query(
            ns,
            &format!("rate(lossless_rx_packets_total{{interface=\"{rx}\",priority=\"3\"}}[5s])"),
        );
        (rate.first().is_some_and(|(_, v)| *v > 0.0), rate)
    });
    eprintln!(
        "rate of priority 3's packets while flowing: {:?}/s",
        rate[0].1
    );

    // promtool accepts /metrics as served.
    let (status, metrics) = get(ns, AGENT, "/metrics").unwrap();
    assert_eq!(status, 200);
    promtool_passes(&["check", "metrics"], metrics.as_bytes());

    // Traffic stops. Counters are monotonic, so a query agrees with stats when each priority's
    // value lies between stats read just before and just after it (a stray frame of the
    // kernel's, IPv6 neighbour discovery say, may still arrive at priority 0 meanwhile).
    flowing.store(false, Ordering::Relaxed);
    sender.join().unwrap();
    let stats = Link::stats(ns, &rx).unwrap();
    assert!(stat(&stats, "ecn_marked", 3) > 0.0, "no marks: {stats}");
    assert_eq!(stat(&stats, "pfc_pause_rx", 1), 2.0, "{stats}");
    assert_eq!(stat(&stats, "pfc_pause_rx", 4), 3.0, "{stats}");
    assert!(stats["cnp_sent"].as_u64().unwrap() > 0, "no CNPs: {stats}");
    for (metric, key, scale) in [
        ("lossless_rx_packets_total", "rx_packets", 1.0),
        ("lossless_rx_bytes_total", "rx_bytes", 1.0),
        ("lossless_ecn_marked_packets_total", "ecn_marked", 1.0),
        ("lossless_ect_packets_total", "ect_packets", 1.0),
        (
            "lossless_pfc_pause_frames_received_total",
            "pfc_pause_rx",
            1.0,
        ),
        ("lossless_pfc_paused_seconds_total", "pfc_paused_ns", 1e-9),
        (
            "lossless_phantom_queue_high_water_bytes",
            "vq_high_water_bytes",
            1.0,
        ),
    ] {
        let seen = eventually(&format!("{metric} by priority agrees with stats"), || {
            let before = Link::stats(ns, &rx).unwrap();
            let seen = by_priority(ns, metric, &rx);
            let after = Link::stats(ns, &rx).unwrap();
            let bounds: Vec<(f64, f64)> = (0..8)
                .map(|p| (stat(&before, key, p) * scale, stat(&after, key, p) * scale))
                .collect();
            let agree = seen
                .iter()
                .zip(&bounds)
                .all(|(s, (low, high))| within(*s, *low, *high));
            (agree, (seen, bounds))
        });
        eprintln!("{metric} by priority: {:?}", seen.0);
    }
    eventually("lossless_cnp_sent_total agrees with stats", || {
        let before = Link::stats(ns, &rx).unwrap()["cnp_sent"].as_f64().unwrap();
        let seen = query(
            ns,
            &format!("lossless_cnp_sent_total{{interface=\"{rx}\"}}"),
        );
        let after = Link::stats(ns, &rx).unwrap()["cnp_sent"].as_f64().unwrap();
        let agree = seen.first().is_some_and(|(_, v)| within(*v, before, after));
        (agree, (seen, before, after))
    });
    let kinds = query(
        ns,
        &format!("lossless_parse_errors_total{{interface=\"{rx}\"}}"),
    );
    assert_eq!(
        kinds.len(),
        ParseError::COUNT,
        "a series per kind of parse error: {kinds:?}"
    );

    // A restart adopts the pins: nothing detached, no counter reset.
    signal(&agent, libc::SIGTERM);
    agent.wait_for("stopped");
    assert!(attached(ns).contains(&rx), "the agent detached on exit");
    let mut agent = start_agent(ns, &config);
    agent.wait_for(&format!("{rx}: adopted the pinned programs"));
    let restarted = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    eventually("a successful scrape after the restart", || {
        let at = query(ns, "timestamp(up{job=\"lossless\"} == 1)");
        (at.first().is_some_and(|(_, t)| *t > restarted), at)
    });
    let resets = query(
        ns,
        &format!("sum(resets(lossless_rx_packets_total{{interface=\"{rx}\"}}[10m]))"),
    );
    assert_eq!(resets.first().map(|(_, v)| *v), Some(0.0), "{resets:?}");

    // SIGHUP with an interface that does not exist yet: absent, then attached when it appears.
    write_config(&config, &[&rx, &later]);
    signal(&agent, libc::SIGHUP);
    agent.wait_for("reloaded");
    eventually("healthz says the new interface is absent", || {
        let health = get(ns, AGENT, "/healthz");
        let absent = health
            .as_ref()
            .is_some_and(|(_, body)| body.contains(&format!("{later}: absent")));
        (absent, health)
    });
    let peer = unique_name("vy");
    let make_later = || {
        ns.ip(&["link", "add", &later, "type", "veth", "peer", "name", &peer])
            .unwrap();
        ns.ip(&["link", "set", &later, "up"]).unwrap();
    };
    make_later();
    agent.wait_for(&format!("{later}: attached"));
    assert!(attached(ns).contains(&later));

    // Deleted: its pins are cleaned; made again (a new ifindex): attached again.
    ns.ip(&["link", "del", &later]).unwrap();
    agent.wait_for(&format!("{later}: detached (the interface is gone)"));
    assert!(!attached(ns).contains(&later));
    make_later();
    agent.wait_for(&format!("{later}: attached"));

    // A file that does not parse changes nothing.
    std::fs::write(&config, "[[interfaces]]\nname = \"a/b\"\n").unwrap();
    signal(&agent, libc::SIGHUP);
    agent.wait_for("keeping the running configuration");
    eventually("the agent reports both interfaces attached", || {
        let up = query(ns, "sum(lossless_agent_interface_attached)");
        (up.first().is_some_and(|(_, v)| *v == 2.0), up)
    });

    // Dropped from the file: detached on SIGHUP; the other stays.
    write_config(&config, &[&rx]);
    signal(&agent, libc::SIGHUP);
    agent.wait_for(&format!("{later}: detached (no longer in the config)"));
    let now = attached(ns);
    assert!(!now.contains(&later) && now.contains(&rx), "{now:?}");
    signal(&agent, libc::SIGTERM);
    agent.wait_for("stopped");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scrape targets of a job as Prometheus' `/api/v1/targets` lists them: health and last
/// error.
fn targets(ns: &Namespace, job: &str) -> Vec<(String, String)> {
    let Some((200, body)) = get(ns, PROMETHEUS, "/api/v1/targets?state=active") else {
        return Vec::new();
    };
    let answer: Value = serde_json::from_str(&body).unwrap();
    answer["data"]["activeTargets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["labels"]["job"] == job)
        .map(|t| {
            let text = |key: &str| t[key].as_str().unwrap_or_default().to_owned();
            (text("health"), text("lastError"))
        })
        .collect()
}

/// Debian's Prometheus scrapes the agent over TLS with basic auth (the agent's web
/// configuration, named in its file, in exporter-toolkit's format, with paths relative to it):
/// with the CA and the password the target is up and the agent's metrics are in Prometheus;
/// without a password, or with a wrong one, it is down with 401. curl without the CA fails the
/// handshake, and plain HTTP gets no page.
#[test]
fn prometheus_scrapes_the_agent_over_tls_with_basic_auth() {
    const NAME: &str = "prometheus_scrapes_the_agent_over_tls_with_basic_auth";
    if !privileged(NAME) {
        return;
    }
    if !testkit::runs_or_skip(
        NAME,
        "prometheus",
        "--version",
        "needs Debian's prometheus (cargo xtask setup installs it)",
    ) || !testkit::runs_or_skip(NAME, "curl", "--version", "needs curl")
    {
        return;
    }
    let ns = &Namespace::create("agtls").unwrap();
    let dir = testkit::TempDir::new("agent-tls", "prometheus");
    let ca = Ca::new(&dir.0, "lab-ca");
    ca.issue(&dir.0, "agent", Role::Server, Validity::Now);
    let password = "scrape-secret";
    std::fs::write(
        dir.0.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: agent.pem\n  key_file: agent.key\n\
             basic_auth_users:\n  prometheus: '{}'\n",
            bcrypt::hash(password, 4).unwrap()
        ),
    )
    .unwrap();
    let config = dir.0.join("agent.toml");
    std::fs::write(&config, "web_config_file = \"web.yml\"\n").unwrap();
    let mut agent = start_agent(ns, &config);
    agent.wait_for(&format!(
        "serving /metrics and /healthz on https://{AGENT} with basic auth"
    ));

    let ca_file = ca.pem.display();
    let job = |name: &str, auth: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {ca_file}\n\
             {auth}    static_configs:\n      - targets: ['{AGENT}']\n"
        )
    };
    let _prometheus = Prometheus::start(
        ns,
        &dir.0,
        &[
            job(
                "authorized",
                &format!(
                    "    basic_auth:\n      username: prometheus\n      password: {password}\n"
                ),
            ),
            job("anonymous", ""),
            job(
                "wrong",
                "    basic_auth:\n      username: prometheus\n      password: guess\n",
            ),
        ]
        .concat(),
    );
    eventually("the authorized job is up with the agent's metrics", || {
        let reconciles = query(ns, "lossless_agent_reconciles_total{job=\"authorized\"}");
        let up = query(ns, "up{job=\"authorized\"}");
        let done = up.first().is_some_and(|(_, v)| *v == 1.0)
            && reconciles.first().is_some_and(|(_, v)| *v >= 1.0);
        (done, (up, reconciles))
    });
    for refused in ["anonymous", "wrong"] {
        eventually(&format!("the {refused} job is down with 401"), || {
            let seen = targets(ns, refused);
            let down = seen
                .first()
                .is_some_and(|(health, error)| health == "down" && error.contains("401"));
            (down, seen)
        });
    }

    // curl: without the CA the handshake fails (exit 60: the peer's certificate is not
    // trusted); with it and the password, the page; plain HTTP gets no page.
    let url = format!("https://{AGENT}/metrics");
    let curl = |args: &[&str]| {
        ns.command("curl")
            .args(["--silent", "--max-time", "5", "--output", "/dev/null"])
            .args(["--write-out", "%{http_code}"])
            .args(args)
            .arg(&url)
            .output()
            .unwrap()
    };
    let untrusted = curl(&[]);
    assert_eq!(untrusted.status.code(), Some(60), "{untrusted:?}");
    let authorized = curl(&[
        "--cacert",
        &ca.pem.display().to_string(),
        "--user",
        &format!("prometheus:{password}"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&authorized.stdout),
        "200",
        "{authorized:?}"
    );
    let anonymous = curl(&["--cacert", &ca.pem.display().to_string()]);
    assert_eq!(
        String::from_utf8_lossy(&anonymous.stdout),
        "401",
        "{anonymous:?}"
    );
    let plain = get(ns, AGENT, "/metrics");
    assert!(
        plain.as_ref().is_none_or(|(status, _)| *status != 200),
        "plain HTTP answered: {plain:?}"
    );
    signal(&agent, libc::SIGTERM);
    agent.wait_for("stopped");
}

/// Every query of the Grafana dashboard is PromQL that promtool accepts (as recording rules,
/// with Grafana's variables given values).
#[test]
fn the_dashboard_queries_are_valid_promql() {
    if !testkit::runs_or_skip(
        "the_dashboard_queries_are_valid_promql",
        "promtool",
        "--version",
        "needs Debian's prometheus package for promtool (cargo xtask setup installs it)",
    ) {
        return;
    }
    let dashboard = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/lossless.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard).unwrap()).unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut count = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$instance", ".*")
                .replace("$interface", ".*");
            count += 1;
            rules += &format!(
                "      - record: dashboard:query{count}\n        expr: {}\n",
                serde_json::to_string(&expr).unwrap()
            );
        }
    }
    assert!(count >= 10, "only {count} queries");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique_name("rules"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("dashboard.rules.yml");
    std::fs::write(&file, rules).unwrap();
    promtool_passes(&["check", "rules", file.to_str().unwrap()], &[]);
    let _ = std::fs::remove_dir_all(&dir);
}
