//! `lossless check` against what a fabric does, on Mininet: the mis-mapped DSCP of
//! dataplane-p4/misconfigured/dscp-mismatch (s2 queues DSCP 26 in priority 0, which has no PFC
//! and no RED) is reported from the files and, the same, from the running network's live
//! entries (`check --net`); under an incast of RoCEv2 (the incast experiment's DCQCN senders, h1
//! and h3 into h2, s2's port to h2 the bottleneck) the receiver counts fewer frames than the
//! senders sent, every lost frame tail-dropped in s2's priority-0 queue (the switches' own
//! count), while s2 sent no PAUSE and its program dropped nothing. Its fixed twin checks
//! clean, loses nothing, and s2 pauses instead.
//!
//! And PFC on the lossy priority 0 (dataplane-p4/misconfigured/pfc-on-lossy), reported the same
//! from the files and the live entries: an incast of ordinary DSCP 0 traffic (h1 and h3 into
//! h2) makes s2 pause priority 0 of its upstreams, and a victim flow from h4, on h1's switch, to
//! h3, whose ports are idle, waits with it; its fixed twin drops the incast's excess at s2's
//! queue toward h2, pauses nothing, and the victim gets more than twice as many frames
//! through, losing none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lossless::net::experiment::{Links, Pacing};
use lossless_tests::{
    bed::lossless_bin,
    net::{mininet_alone, net, scratch, STATE_ROOT},
    switch::dataplane_p4,
};
use serde_json::Value;

/// The links every sender starts at (and never exceeds) and every switch queue drains at, as
/// `lossless net experiment incast` paces its links: frames of 1000 bytes (1024 on the wire)
/// at 8 Mb/s, 976 a second, in queues 1024 deep (PFC pauses at 16: the rest is headroom for a
/// software switch's bursts). s2's port to h2, the bottleneck, drains at a quarter of it for
/// the RoCEv2 incast.
const LINKS: Links = Links {
    pacing: Pacing {
        link_rate: 8_000_000,
        queue_depth: 1024,
    },
    size: 1000,
};
const PPS: &str = "976";
/// How long the senders send.
const SECS: &str = "4s";

/// The incast experiment's sender to h2 (RoCEv2 in the lossless priority with DCQCN's reaction
/// point, its parameters scaled to the link), as words for the script.
fn sender() -> String {
    LINKS.dcqcn_sender("10.0.2.1".parse().unwrap()).join(" ")
}

/// Starts every script run inside the network once it is up: the live check, the queues
/// paced (s2's port to h2 at $BOTTLENECK_PPS), the hosts ($HOSTS) reading pause quanta at
/// 1 Gb/s, and `receiver H`, which starts a receiver on host H (waited for until its packet
/// socket is open; it stops $IDLE after the last frame), its pid added to $pids.
const SETUP: &str = r#"set -e
l="$LOSSLESS_BIN"
set +e
"$l" check --net "$LOSSLESS_NET" --json > "$OUT/check.json"
echo $? > "$OUT/check.rc"
set -e
for s in s1 s2 s3; do
  "$l" p4 --switch $s queue set --rate "$PPS" --depth "$DEPTH" > /dev/null
done
"$l" p4 --switch s2 queue set --port 1 --rate "$BOTTLENECK_PPS" > /dev/null
for h in $HOSTS; do
  "$l" net exec $h -- "$l" host set eth0 pfc.link_speed_bps=1000000000 > /dev/null
done
pids=""
sockets() { "$l" net exec $1 -- cat /proc/net/packet | wc -l; }
receiver() {
  before=$(sockets $1)
  "$l" net exec $1 -- "$l" traffic recv --iface eth0 --idle-timeout "$IDLE" --json > "$OUT/$1-recv.json" &
  pids="$pids $!"
  waited=0
  until [ "$(sockets $1)" -gt "$before" ]; do
    # A receiver opens its socket within a second; one that ended first fails the run.
    waited=$((waited + 1))
    [ "$waited" -lt 1000 ] || { echo "the receiver on $1 opened no socket" >&2; exit 1; }
    sleep 0.01
  done
}
"#;

/// Ends every script: waits for its senders and receivers ($pids), then reads every switch's
/// PAUSE count, packets let go while paused and queues, and s2's program drops.
const READ: &str = r#"for pid in $pids; do wait $pid; done
for s in s1 s2 s3; do
  "$l" p4 --switch $s counters read LosslessIngress.pfc_pause_tx --json > "$OUT/$s-pause.json"
  "$l" p4 --switch $s counters read LosslessEgress.pfc_hold_expired --json > "$OUT/$s-expired.json"
  "$l" p4 --switch $s queue show --json > "$OUT/$s-queues.json"
done
"$l" p4 --switch s2 counters read LosslessIngress.dropped --json > "$OUT/s2-dropped.json"
"#;

/// The RoCEv2 incast: a receiver on h2, h1 and h3 sending to it ($SEND, the sender's words).
const INCAST: &str = r#"receiver h2
for h in h1 h3; do
  "$l" net exec $h -- "$l" $SEND --duration "$SECS" > "$OUT/$h.json" &
  pids="$pids $!"
done
"#;

/// Ordinary traffic into a bottleneck: h1 and h3 each send DSCP 0 to h2 at three quarters of
/// a link, 24 times what s2's port to h2 drains (a sixteenth of a link) together, and h4 (on
/// h1's switch) sends DSCP 0 to h3 at an eighth of a link: the victim, whose path shares only
/// s1's uplink (with h1's three quarters) and has room on every hop. No receiver on h2: what
/// its queue holds when the senders stop would take it 16 s to drain.
const VICTIM: &str = r#"receiver h3
for h in h1 h3; do
  "$l" net exec $h -- "$l" traffic send --dst-ip 10.0.2.1 --rate "$INCAST_RATE" $LOSSY > "$OUT/$h.json" &
  pids="$pids $!"
done
"$l" net exec h4 -- "$l" traffic send --dst-ip 10.0.3.1 --rate "$VICTIM_RATE" $LOSSY > "$OUT/h4.json" &
pids="$pids $!"
"#;

/// What one run of a script on a fabric showed.
struct Run {
    /// `lossless check --net`'s exit status and report.
    live_rc: i32,
    live: Value,
    /// Frames each sender sent.
    sent: BTreeMap<String, u64>,
    /// Frames each receiver counted, and those its own socket dropped (it fell behind).
    received: BTreeMap<String, (u64, u64)>,
    /// PAUSE frames each switch sent.
    pauses: Vec<(String, u64)>,
    /// Frames s2's program itself dropped (no route, TTL: not a queue).
    program_drops: u64,
    /// Packets let go while still paused, on every switch.
    hold_expired: u64,
    /// Packets tail-dropped at full queues, per (switch, port, priority) with any, as the
    /// switches count them (`queue show`).
    tail_drops: Vec<(String, u64, u64, u64)>,
}

impl Run {
    /// Frames `hosts` sent, together.
    fn sent_by(&self, hosts: &[&str]) -> u64 {
        hosts.iter().map(|h| self.sent[*h]).sum()
    }

    /// Frames `host`'s receiver counted, asserting its socket dropped none (what the fabric
    /// lost, not the receiver).
    fn received_by(&self, host: &str) -> u64 {
        let (packets, socket_drops) = self.received[host];
        assert_eq!(socket_drops, 0, "{host}'s receiver fell behind");
        packets
    }

    /// PAUSE frames `switch` sent.
    fn pauses_of(&self, switch: &str) -> u64 {
        self.pauses.iter().find(|(s, _)| s == switch).unwrap().1
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

/// The packets of every cell of a `counters read --json`.
fn cells(counter: &Value) -> u64 {
    counter
        .as_array()
        .unwrap_or_else(|| panic!("no cells: {counter}"))
        .iter()
        .map(|c| c["packets"].as_u64().unwrap())
        .sum()
}

/// The queues of a `queue show --json` that tail-dropped packets: (port, priority, packets).
fn queue_drops(queues: &Value) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
    queues
        .as_array()
        .unwrap_or_else(|| panic!("no queues: {queues}"))
        .iter()
        .map(|q| {
            let field = |k: &str| q[k].as_u64().unwrap_or_else(|| panic!("no {k} in {q}"));
            (field("port"), field("priority"), field("dropped_packets"))
        })
        .filter(|&(_, _, dropped)| dropped > 0)
}

/// Brings `topology` up as network `name` on softswitch, runs [`SETUP`], `body` and [`READ`]
/// in it with `env` (and the links' pacing), and reads what they wrote: the JSON summaries of
/// `senders` (`$OUT/H.json`) and `receivers` (`$OUT/H-recv.json`).
fn run(
    name: &str,
    topology: &Path,
    body: &str,
    env: &[(&str, &str)],
    senders: &[&str],
    receivers: &[&str],
) -> Run {
    let dir = scratch(name);
    let script = dir.join("run.sh");
    std::fs::write(&script, format!("{SETUP}{body}{READ}")).unwrap();
    testkit::output_of(
        net(name, &["up"])
            .arg(topology)
            .args(["--switch", "softswitch", "--host-hooks", "xdp", "--program"])
            .arg(dataplane_p4("lossless.p4"))
            .arg("--run")
            .arg(&script)
            .env("OUT", &dir)
            .env("LOSSLESS_BIN", lossless_bin())
            .envs([("PPS", PPS), ("SECS", SECS)])
            .env("DEPTH", LINKS.pacing.queue_depth.to_string())
            .envs(env.iter().copied()),
    );
    assert!(!Path::new(STATE_ROOT).join(name).exists());
    let live_rc = std::fs::read_to_string(dir.join("check.rc"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let packets = |v: &Value| v["packets"].as_u64().unwrap();
    let run = Run {
        live_rc,
        live: read_json(&dir.join("check.json")),
        sent: senders
            .iter()
            .map(|h| {
                (
                    h.to_string(),
                    packets(&read_json(&dir.join(format!("{h}.json")))),
                )
            })
            .collect(),
        received: receivers
            .iter()
            .map(|h| {
                let recv = read_json(&dir.join(format!("{h}-recv.json")));
                let drops = recv["socket_drops"].as_u64().unwrap();
                (h.to_string(), (packets(&recv), drops))
            })
            .collect(),
        pauses: ["s1", "s2", "s3"]
            .iter()
            .map(|s| {
                let file = dir.join(format!("{s}-pause.json"));
                (s.to_string(), cells(&read_json(&file)))
            })
            .collect(),
        program_drops: cells(&read_json(&dir.join("s2-dropped.json"))),
        hold_expired: ["s1", "s2", "s3"]
            .iter()
            .map(|s| cells(&read_json(&dir.join(format!("{s}-expired.json")))))
            .sum(),
        tail_drops: ["s1", "s2", "s3"]
            .iter()
            .flat_map(|s| {
                let queues = read_json(&dir.join(format!("{s}-queues.json")));
                queue_drops(&queues)
                    .map(|(port, prio, n)| (s.to_string(), port, prio, n))
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// The RoCEv2 incast h1, h3 -> h2 on `topology`.
fn incast(name: &str, topology: &Path) -> Run {
    let send = sender();
    let env = [
        ("HOSTS", "h1 h2 h3"),
        ("BOTTLENECK_PPS", "244"),
        ("IDLE", "5s"),
        ("SEND", send.as_str()),
    ];
    run(name, topology, INCAST, &env, &["h1", "h3"], &["h2"])
}

/// Ordinary (DSCP 0) incast h1, h3 -> h2 and the victim flow h4 -> h3 on `topology`.
fn victim(name: &str, topology: &Path) -> Run {
    let lossy = format!(
        "--iface eth0 --size {} --dscp 0 --ecn not-ect --duration {SECS} --json",
        LINKS.size
    );
    let env = [
        ("HOSTS", "h1 h2 h3 h4"),
        ("BOTTLENECK_PPS", "61"),
        ("IDLE", "5s"),
        ("INCAST_RATE", "6000000"),
        ("VICTIM_RATE", "1000000"),
        ("LOSSY", lossy.as_str()),
    ];
    run(name, topology, VICTIM, &env, &["h1", "h3", "h4"], &["h3"])
}

/// `lossless check FILE --json`: its exit status and report.
fn check_files(topology: &Path) -> (i32, Value) {
    let out = std::process::Command::new(lossless_bin())
        .arg("check")
        .arg(topology)
        .arg("--json")
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code().unwrap(), report)
}

/// The errors of a report, as (rule, switch).
fn errors(report: &Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["where"]["switch"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// The topology of a seeded misconfiguration (`fixed`: of its fixed twin).
fn fabric(misconfiguration: &str, folder: &str) -> PathBuf {
    dataplane_p4("misconfigured")
        .join(misconfiguration)
        .join(folder)
        .join("topology.json")
}

#[test]
fn mis_mapped_dscp_drops_in_the_lossy_queue_and_its_fix_pauses_on_softswitch() {
    // Alone: the senders' rates are what the machine's load lets them keep.
    let Some(_alone) =
        mininet_alone("mis_mapped_dscp_drops_in_the_lossy_queue_and_its_fix_pauses_on_softswitch")
    else {
        return;
    };
    let mismapped = ("dscp-map-disagrees".to_string(), "s2".to_string());

    let (rc, files) = check_files(&fabric("dscp-mismatch", ""));
    assert_eq!(rc, 1, "{files:#}");
    assert!(errors(&files).contains(&mismapped), "{files:#}");
    let run = incast("t-sw-dscp", &fabric("dscp-mismatch", ""));
    assert_eq!(run.live_rc, 1, "{:#}", run.live);
    assert_eq!(
        errors(&run.live),
        errors(&files),
        "the live entries give what the files do: {:#}",
        run.live
    );
    let sent = run.sent_by(&["h1", "h3"]);
    let received = run.received_by("h2");
    assert!(sent > 1000, "sent {sent}");
    // Two senders, each at up to twice the rate of the port they share, and nothing slows
    // them (priority 0 has no RED either): once s2's priority-0 queue is full, most of what
    // comes is dropped.
    assert!(
        received * 10 < sent * 9,
        "sent {sent}, received {received}: the lossy queue dropped nothing"
    );
    assert_eq!(
        run.pauses_of("s2"),
        0,
        "a lossy queue pauses nothing: {:?}",
        run.pauses
    );
    assert_eq!(
        run.program_drops, 0,
        "dropped in the queue, not by the program"
    );
    // Every frame lost was tail-dropped at a full queue, as the switches count them, and the
    // queue that dropped them is s2's priority 0 toward h2 (port 1).
    assert_eq!(
        run.tail_drops.iter().map(|d| d.3).sum::<u64>(),
        sent - received,
        "{:?}",
        run.tail_drops
    );
    assert!(
        run.tail_drops
            .iter()
            .any(|(s, port, prio, _)| (s.as_str(), *port, *prio) == ("s2", 1, 0)),
        "s2's priority-0 queue toward h2 dropped nothing: {:?}",
        run.tail_drops
    );

    let (rc, files) = check_files(&fabric("dscp-mismatch", "fixed"));
    assert_eq!((rc, errors(&files)), (0, vec![]), "{files:#}");
    let run = incast("t-sw-dscpfix", &fabric("dscp-mismatch", "fixed"));
    assert_eq!(run.live_rc, 0, "{:#}", run.live);
    assert_eq!(run.live["errors"], 0, "{:#}", run.live);
    // DCQCN slows the senders to what the bottleneck drains.
    let sent = run.sent_by(&["h1", "h3"]);
    assert!(sent > 200, "sent {sent}");
    assert_eq!(
        run.received_by("h2"),
        sent,
        "the lossless class lost frames ({} let go while paused)",
        run.hold_expired
    );
    assert_eq!(run.tail_drops, vec![], "a lossless queue overflowed");
    assert!(run.pauses_of("s2") > 0, "s2 never paused: {:?}", run.pauses);
}

#[test]
fn pfc_on_the_lossy_priority_stops_a_victim_flow_and_its_fix_drops_on_softswitch() {
    // Alone: the senders' rates are what the machine's load lets them keep.
    let Some(_alone) = mininet_alone(
        "pfc_on_the_lossy_priority_stops_a_victim_flow_and_its_fix_drops_on_softswitch",
    ) else {
        return;
    };
    let (rc, files) = check_files(&fabric("pfc-on-lossy", ""));
    assert_eq!(rc, 1, "{files:#}");
    let found = errors(&files);
    for s in ["s1", "s2", "s3"] {
        let pfc_on_0 = ("pfc-unused-priority".to_string(), s.to_string());
        assert!(found.contains(&pfc_on_0), "{s}: {files:#}");
    }
    assert!(
        found.iter().all(|(rule, _)| rule == "pfc-unused-priority"),
        "{files:#}"
    );
    let run = victim("t-sw-pfc0", &fabric("pfc-on-lossy", ""));
    assert_eq!(run.live_rc, 1, "{:#}", run.live);
    assert_eq!(
        errors(&run.live),
        found,
        "the live entries give what the files do: {:#}",
        run.live
    );
    // s2's queue toward h2 passes the PFC threshold and s2 pauses priority 0 of s1 (and s3);
    // the victim's frames wait in s1's paused queue behind h1's, and s1, its queue past the
    // threshold too, pauses h4 (whose sender holds its frames while paused), though nothing on
    // their way to h3 is full. Nothing is dropped: everything is lossless now.
    for s in ["s1", "s2"] {
        assert!(run.pauses_of(s) > 0, "{s} never paused: {:?}", run.pauses);
    }
    assert_eq!(run.tail_drops, vec![], "a lossless queue overflowed");
    let victim_sent = run.sent["h4"];
    let paused = run.received_by("h3");

    let (rc, files) = check_files(&fabric("pfc-on-lossy", "fixed"));
    assert_eq!((rc, errors(&files)), (0, vec![]), "{files:#}");
    let run = victim("t-sw-pfc0fix", &fabric("pfc-on-lossy", "fixed"));
    assert_eq!(run.live_rc, 0, "{:#}", run.live);
    assert_eq!(run.live["errors"], 0, "{:#}", run.live);
    assert_eq!(
        run.pauses.iter().map(|p| p.1).sum::<u64>(),
        0,
        "{:?}",
        run.pauses
    );
    // The victim loses nothing and gets through at least twice what it did beside the
    // paused incast (its sender's own rate is what the machine's load lets it keep: the two
    // runs are compared, not the nominal rate).
    let received = run.received_by("h3");
    assert_eq!(received, run.sent["h4"], "the victim lost frames");
    assert!(
        paused * 2 < received,
        "the victim got {paused} frames through (of {victim_sent} sent) beside the paused \
         incast, {received} without the pauses"
    );
    // The incast's excess is tail-dropped at s2's priority-0 queue toward h2, and nowhere else.
    assert_eq!(run.tail_drops.len(), 1, "{:?}", run.tail_drops);
    let (s, port, prio, dropped) = run.tail_drops[0].clone();
    assert_eq!(
        (s.as_str(), port, prio),
        ("s2", 1, 0),
        "{:?}",
        run.tail_drops
    );
    assert!(dropped > 0);
    assert_eq!(run.program_drops, 0);
}
