//! `lossless check` against what a fabric does, on Mininet: the mis-mapped DSCP of
//! dataplane-p4/misconfigured/dscp-mismatch (s2 queues DSCP 26 in priority 0, which has no PFC
//! and no RED) is reported from the files and, the same, from the running network's live
//! entries (`check --net`); under an incast of RoCEv2 (the incast experiment's DCQCN senders, h1
//! and h3 into h2, s2's port to h2 the bottleneck) the receiver counts fewer frames than the
//! senders sent, every lost frame tail-dropped in s2's priority-0 queue (the switches' own
//! count), while s2 sent no PAUSE and its program dropped nothing. Its fixed twin checks
//! clean, loses nothing, and s2 pauses instead.

use std::path::{Path, PathBuf};

use lossless::net::experiment::{Links, Pacing};
use lossless_tests::{
    bed::lossless_bin,
    net::{mininet, net, scratch, STATE_ROOT},
    switch::dataplane_p4,
};
use serde_json::Value;

/// The links every sender starts at (and never exceeds) and every switch queue drains at, as
/// `lossless net experiment incast` paces its links: frames of 1000 bytes (1024 on the wire)
/// at 8 Mb/s, 976 a second, in queues 1024 deep (PFC pauses at 16: the rest is headroom for a
/// software switch's bursts). s2's port to h2, the bottleneck, drains at a quarter of it.
const LINKS: Links = Links {
    pacing: Pacing {
        link_rate: 8_000_000,
        queue_depth: 1024,
    },
    size: 1000,
};
const PPS: &str = "976";
const BOTTLENECK_PPS: &str = "244";
/// How long the senders send.
const SECS: &str = "4s";

/// The incast experiment's sender to h2 (RoCEv2 in the lossless priority with DCQCN's reaction
/// point, its parameters scaled to the link), as words for the script.
fn sender() -> String {
    LINKS.dcqcn_sender("10.0.2.1".parse().unwrap()).join(" ")
}

/// Run inside the network once it is up: the live check, the queues paced, the hosts reading
/// pause quanta at 1 Gb/s, a receiver on h2 (waited for until its packet socket is open), h1
/// and h3 sending to it, then every switch's PAUSE count and s2's program drops.
const INCAST_SCRIPT: &str = r#"set -e
l="$LOSSLESS_BIN"
set +e
"$l" check --net "$LOSSLESS_NET" --json > "$OUT/check.json"
echo $? > "$OUT/check.rc"
set -e
for s in s1 s2 s3; do
  "$l" p4 --switch $s queue set --rate "$PPS" --depth "$DEPTH" > /dev/null
done
"$l" p4 --switch s2 queue set --port 1 --rate "$BOTTLENECK_PPS" > /dev/null
for h in h1 h2 h3; do
  "$l" net exec $h -- "$l" host set eth0 pfc.link_speed_bps=1000000000 > /dev/null
done
sockets() { "$l" net exec h2 -- cat /proc/net/packet | wc -l; }
before=$(sockets)
"$l" net exec h2 -- "$l" traffic recv --iface eth0 --idle-timeout 5s --json > "$OUT/recv.json" &
recv=$!
waited=0
until [ "$(sockets)" -gt "$before" ]; do
  # The receiver opens its socket within a second; one that ended first fails the run.
  waited=$((waited + 1))
  [ "$waited" -lt 1000 ] || { echo "the receiver on h2 opened no socket" >&2; exit 1; }
  sleep 0.01
done
senders=""
for h in h1 h3; do
  # $SEND is the sender's words, split here.
  "$l" net exec $h -- "$l" $SEND --duration "$SECS" > "$OUT/$h.json" &
  senders="$senders $!"
done
for pid in $senders $recv; do wait $pid; done
for s in s1 s2 s3; do
  "$l" p4 --switch $s counters read LosslessIngress.pfc_pause_tx --json > "$OUT/$s-pause.json"
done
"$l" p4 --switch s2 counters read LosslessIngress.dropped --json > "$OUT/s2-dropped.json"
for s in s1 s2 s3; do
  "$l" p4 --switch $s counters read LosslessEgress.pfc_hold_expired --json > "$OUT/$s-expired.json"
  "$l" p4 --switch $s queue show --json > "$OUT/$s-queues.json"
done
"#;

/// What one run of the incast on a fabric showed.
struct Run {
    /// `lossless check --net`'s exit status and report.
    live_rc: i32,
    live: Value,
    /// Frames the senders sent, and the receiver counted.
    sent: u64,
    received: u64,
    /// PAUSE frames each switch sent.
    pauses: Vec<(String, u64)>,
    /// Frames s2's program itself dropped (no route, TTL: not a queue).
    program_drops: u64,
    /// Packets let go while still paused, on every switch.
    hold_expired: u64,
    /// Frames the receiver's own socket dropped (it fell behind).
    socket_drops: u64,
    /// Packets tail-dropped at full queues, per (switch, port, priority) with any, as the
    /// switches count them (`queue show`).
    tail_drops: Vec<(String, u64, u64, u64)>,
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

/// Brings `topology` up as network `name` on softswitch, runs [`INCAST_SCRIPT`] in it, and
/// reads what it wrote.
fn incast(name: &str, topology: &Path) -> Run {
    let dir = scratch(name);
    let script = dir.join("incast.sh");
    std::fs::write(&script, INCAST_SCRIPT).unwrap();
    testkit::output_of(
        net(name, &["up"])
            .arg(topology)
            .args(["--switch", "softswitch", "--host-hooks", "xdp", "--program"])
            .arg(dataplane_p4("lossless.p4"))
            .arg("--run")
            .arg(&script)
            .env("OUT", &dir)
            .env("LOSSLESS_BIN", lossless_bin())
            .envs([("PPS", PPS), ("BOTTLENECK_PPS", BOTTLENECK_PPS)])
            .env("DEPTH", LINKS.pacing.queue_depth.to_string())
            .env("SECS", SECS)
            .env("SEND", sender()),
    );
    assert!(!Path::new(STATE_ROOT).join(name).exists());
    let live_rc = std::fs::read_to_string(dir.join("check.rc"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let sent = ["h1", "h3"]
        .iter()
        .map(|h| {
            read_json(&dir.join(format!("{h}.json")))["packets"]
                .as_u64()
                .unwrap()
        })
        .sum();
    let recv = read_json(&dir.join("recv.json"));
    let run = Run {
        live_rc,
        live: read_json(&dir.join("check.json")),
        sent,
        received: recv["packets"].as_u64().unwrap(),
        socket_drops: recv["socket_drops"].as_u64().unwrap(),
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

fn fabric(folder: &str) -> PathBuf {
    dataplane_p4("misconfigured/dscp-mismatch")
        .join(folder)
        .join("topology.json")
}

#[test]
fn mis_mapped_dscp_drops_in_the_lossy_queue_and_its_fix_pauses_on_softswitch() {
    if !mininet("mis_mapped_dscp_drops_in_the_lossy_queue_and_its_fix_pauses_on_softswitch") {
        return;
    }
    let mismapped = ("dscp-map-disagrees".to_string(), "s2".to_string());

    let (rc, files) = check_files(&fabric(""));
    assert_eq!(rc, 1, "{files:#}");
    assert!(errors(&files).contains(&mismapped), "{files:#}");
    let run = incast("t-sw-dscp", &fabric(""));
    assert_eq!(run.live_rc, 1, "{:#}", run.live);
    assert_eq!(
        errors(&run.live),
        errors(&files),
        "the live entries give what the files do: {:#}",
        run.live
    );
    assert!(run.sent > 1000, "sent {}", run.sent);
    // Two senders, each at up to twice the rate of the port they share, and nothing slows
    // them (priority 0 has no RED either): once s2's priority-0 queue is full, most of what
    // comes is dropped.
    assert!(
        run.received * 10 < run.sent * 9,
        "sent {}, received {}: the lossy queue dropped nothing",
        run.sent,
        run.received
    );
    let s2 = run.pauses.iter().find(|(s, _)| s == "s2").unwrap().1;
    assert_eq!(s2, 0, "a lossy queue pauses nothing: {:?}", run.pauses);
    assert_eq!(
        run.program_drops, 0,
        "dropped in the queue, not by the program"
    );
    assert_eq!(
        run.socket_drops, 0,
        "dropped in the fabric, not by the receiver"
    );
    // Every frame lost was tail-dropped at a full queue, as the switches count them, and the
    // queue that dropped them is s2's priority 0 toward h2 (port 1).
    assert_eq!(
        run.tail_drops.iter().map(|d| d.3).sum::<u64>(),
        run.sent - run.received,
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

    let (rc, files) = check_files(&fabric("fixed"));
    assert_eq!((rc, errors(&files)), (0, vec![]), "{files:#}");
    let run = incast("t-sw-dscpfix", &fabric("fixed"));
    assert_eq!(run.live_rc, 0, "{:#}", run.live);
    assert_eq!(run.live["errors"], 0, "{:#}", run.live);
    // DCQCN slows the senders to what the bottleneck drains.
    assert!(run.sent > 200, "sent {}", run.sent);
    assert_eq!(
        run.received, run.sent,
        "the lossless class lost frames ({} let go while paused)",
        run.hold_expired
    );
    assert_eq!(run.tail_drops, vec![], "a lossless queue overflowed");
    let s2 = run.pauses.iter().find(|(s, _)| s == "s2").unwrap().1;
    assert!(s2 > 0, "s2 never paused: {:?}", run.pauses);
}
