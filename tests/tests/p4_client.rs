//! `lossless p4` against softswitch on veths: the control plane pushes the pipeline and
//! installs routes from a P4-tutorials runtime JSON, hosts ping and send UDP through the switch
//! (delivery read by the hosts' kernels), counters read back equal what the kernels sent, only
//! the primary writes, malformed requests get the right codes, and the pipeline is replaced
//! while the switch runs. dataplane-p4's lossless.p4, configured from its two-hosts example,
//! carries ping, UDP and RoCEv2 the same way — on softswitch and, driven by the same commands
//! but for `--target bmv2`, on BMv2's simple_switch_grpc.

use std::{io::BufRead as _, process::Stdio};

use lossless_tests::{
    bed::{lossless_bin, privileged, privileged_and, TIMEOUT},
    switch::{dataplane_p4, program as p4_file, softswitch_bin},
    tutorial_bed::{tx_counts, TutorialBed, SWITCH_ADDR},
};
use p4client::client::{Client, ElectionId, ReadLimits, Target};
use serde_json::{json, Value};
use traffic::{FixedRate, Receiver, RecvConfig, SendConfig, Sender};
use wire::ethernet::Address;

/// The cell of `counter` at `index` in `counters read --json` output.
fn cell(cells: &Value, index: i64) -> (u64, u64) {
    let cell = cells
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["index"] == index)
        .unwrap_or_else(|| panic!("no index {index} in {cells}"));
    (
        cell["packets"].as_u64().unwrap(),
        cell["bytes"].as_u64().unwrap(),
    )
}

/// For a test that can run ([`privileged`]), a bed running forward.p4 with the
/// tutorials-shaped routes applied.
fn routed_bed(test: &str) -> Option<TutorialBed> {
    privileged(test).then(|| {
        let bed = TutorialBed::new().unwrap();
        bed.program(&p4_file("forward.p4"), &p4_file("forward-runtime.json"));
        bed
    })
}

/// A P4Runtime client of the bed's switch (device 0, plain TCP) with the election id
/// `election_id`, connected.
async fn connect(election_id: u128) -> Client {
    Client::connect(Target {
        address: SWITCH_ADDR.into(),
        device_id: 0,
        election_id: ElectionId::Fixed(election_id),
        tls: None,
    })
    .await
    .unwrap()
}

/// Routes from a runtime JSON in the tutorials' shape carry ping and UDP both ways; the
/// ingress-port counter equals what each host's kernel sent, the direct counter counts each
/// route's hits, the register holds the last frame's length, and the entries read back as the
/// runtime JSON that made them.
#[test]
fn routes_from_a_tutorial_runtime_json_carry_ping_and_udp() {
    let Some(bed) = routed_bed("routes_from_a_tutorial_runtime_json_carry_ping_and_udp") else {
        return;
    };
    bed.assert_pings(3, "");
    let payloads = bed.udp(20, 200).unwrap();
    for (i, payload) in payloads.iter().enumerate() {
        let expected: Vec<u8> = (0..200).map(|j| (i + j) as u8).collect();
        assert_eq!(payload, &expected, "datagram {i}");
    }

    let (h1_packets, h1_bytes) = tx_counts(bed.h1()).unwrap();
    let (h2_packets, h2_bytes) = tx_counts(bed.h2()).unwrap();
    assert_eq!(
        (h1_packets, h2_packets),
        (23, 3),
        "3 echo requests + 20 datagrams, 3 replies"
    );
    let counters = bed.p4_json(&["counters", "read", "MyIngress.port_packets"]);
    assert_eq!(cell(&counters, 1), (h1_packets, h1_bytes), "{counters}");
    assert_eq!(cell(&counters, 2), (h2_packets, h2_bytes), "{counters}");
    let one = bed.p4_json(&["counters", "read", "port_packets", "--index", "2"]);
    assert_eq!(one.as_array().unwrap().len(), 1);
    assert_eq!(cell(&one, 2), (h2_packets, h2_bytes));

    // The direct counter: one cell per route, named by its match.
    let hits = bed.p4_json(&["counters", "read", "route_hits"]);
    let route = |ip: &str| route_packets(&hits, ip);
    assert_eq!((route("10.0.2.2"), route("10.0.1.1")), (23, 3));

    // The last frame h1 sent: Ethernet 14 + IPv4 20 + UDP 8 + 200.
    let registers = bed.p4_json(&["registers", "read", "last_length", "--index", "1"]);
    assert_eq!(
        registers,
        json!([{"register": "MyIngress.last_length", "index": 1, "value": 242}])
    );
    let written = bed.p4_json(&["registers", "write", "last_length", "--index", "5", "77"]);
    assert_eq!(written[0]["value"], 77);
    // As text, of 512 cells only those not at zero (1, 2 and 5), and how many are hidden; a
    // range cuts them; --all shows the zeros.
    let text = bed.p4_ok(&["registers", "read", "last_length"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[0], "MyIngress.last_length[1] = 242");
    assert_eq!(lines[2], "MyIngress.last_length[5] = 77");
    assert_eq!(lines[3], "(509 cells at zero not shown; --all shows them)");
    let range = bed.p4_ok(&["registers", "read", "last_length", "--index", "2..6"]);
    assert!(range.starts_with("MyIngress.last_length[2] = "), "{range}");
    assert!(
        range.ends_with("[5] = 77\n(2 cells at zero not shown; --all shows them)\n"),
        "{range}"
    );
    let all = bed.p4_ok(&[
        "registers",
        "read",
        "last_length",
        "--index",
        "2..6",
        "--all",
    ]);
    assert_eq!(all.lines().count(), 4, "{all}");
    assert!(bed
        .p4_refused(&["registers", "read", "last_length", "--index", "500..513"])
        .contains("index 512 is not in 0..512"));

    // Listed entries are the runtime JSON that made them (the default action last).
    let listed = bed.p4_json(&["entries", "list", "ipv4_lpm"]);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(p4_file("forward-runtime.json")).unwrap())
            .unwrap();
    let mut expected = file["table_entries"].as_array().unwrap().clone();
    expected.rotate_left(1);
    let mut got = listed["table_entries"].as_array().unwrap().clone();
    got.sort_by_key(|e| e["match"].to_string());
    expected.sort_by_key(|e| e["match"].to_string());
    assert_eq!(got, expected);
    let text = bed.p4_ok(&["entries", "list", "ipv4_lpm"]);
    assert!(
        text.contains(r#"MyIngress.ipv4_lpm: hdr.ipv4.dstAddr=["10.0.2.2",32] => MyIngress.ipv4_forward(dstAddr="08:00:00:00:02:22", port=2)"#),
        "{text}"
    );
}

/// RoCEv2 frames in the lossless priority (DSCP 26) sent from h1 to h2 through the switch.
const ROCE_FRAMES: u64 = 200;

lossless_tests::on_softswitch_and_bmv2!(lossless_p4_forwards_and_counts:
    /// dataplane-p4's lossless.p4 in softswitch, configured from the two-hosts example's
    /// runtime JSON by `lossless p4`: see [`lossless_p4_forwards_and_counts`].
    lossless_p4_from_its_runtime_json_forwards_and_counts,
    /// The same on BMv2's simple_switch_grpc: the same `lossless p4` commands (but for
    /// `pipeline set --target bmv2`, which compiles lossless.p4 with p4c), the same traffic,
    /// the same counts.
    lossless_p4_on_bmv2_from_its_runtime_json_forwards_and_counts,
);

/// The same on softswitch standing in for simple_switch_grpc: launched through a symlink of
/// that name with the P4 tutorials' command line, given BMv2 JSON and P4Info by
/// `pipeline set --target bmv2` (p4c's output, as BMv2 is), the same traffic, the same counts.
#[test]
fn lossless_p4_on_softswitch_as_simple_switch_grpc_from_bmv2_json_forwards_and_counts() {
    let test = "lossless_p4_on_softswitch_as_simple_switch_grpc_from_bmv2_json_forwards_and_counts";
    if privileged_and(test, testkit::bmv2::toolchain_or_skip).is_none() {
        return;
    }
    let bed = TutorialBed::softswitch_as_bmv2().unwrap();
    assert!(
        bed.bed
            .lines
            .iter()
            .any(|l| l.contains("Thrift (simple_switch_CLI) on 0.0.0.0:9090")),
        "softswitch did not serve Thrift on --thrift-port 9090: {}",
        bed.bed.lines.join("\n")
    );
    lossless_p4_forwards_and_counts(&bed);
    // --pcap: h1's port received every frame h1's kernel sent, h2's port sent each on to h2's
    // MAC (static neighbours: h1 sends nothing that is not for h2), read back by scapy.
    let Some(python) = testkit::venv_python_or_skip(test) else {
        return;
    };
    let (h1_packets, _) = tx_counts(bed.h1()).unwrap();
    let frames = |iface: &str, direction: &str, dst: &str| -> u64 {
        let file = bed
            .dir
            .join("pcaps")
            .join(format!("{iface}_{direction}.pcap"));
        let script = "import sys\nfrom scapy.all import rdpcap, Ether\n\
            print(sum(1 for p in rdpcap(sys.argv[1]) if sys.argv[2] in ('', p[Ether].dst)))";
        let out = testkit::output_of(
            std::process::Command::new(&python)
                .args(["-c", script])
                .arg(&file)
                .arg(dst),
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let (h1, h2) = (bed.h1(), bed.h2());
    assert_eq!(frames(&h1.switch_iface, "in", ""), h1_packets);
    assert_eq!(
        frames(&h2.switch_iface, "out", "08:00:00:00:02:22"),
        h1_packets
    );
}

/// lossless.p4 configured from the two-hosts example's runtime JSON by `lossless p4`: ping and
/// UDP cross the switch, RoCEv2 frames in its lossless priority arrive all, in order and
/// unmarked, its per-port counter equals what each host's kernel sent, its route counter counts
/// each route's packets, the routes read back as the file wrote them, and a register cell
/// written reads back.
fn lossless_p4_forwards_and_counts(bed: &TutorialBed) {
    let runtime = dataplane_p4("topologies/two-hosts/s1-runtime.json");
    bed.program(&dataplane_p4("lossless.p4"), &runtime);
    bed.assert_pings(3, "");
    assert_eq!(bed.udp(20, 200).unwrap().len(), 20);

    let (h1, h2) = (bed.h1(), bed.h2());
    let receive = RecvConfig {
        iface: h2.iface.clone(),
        duration: None,
        count: Some(ROCE_FRAMES),
        idle_timeout: Some(TIMEOUT),
        cnp: None,
    };
    let mut receiver = h2.ns.run(|| Receiver::open(receive)).unwrap().unwrap();
    let mut send = SendConfig::new(h1.iface.clone(), "10.0.2.2".parse().unwrap());
    send.dst_mac = Some("08:00:00:00:01:00".parse::<Address>().unwrap());
    send.count = Some(ROCE_FRAMES);
    send.duration = None;
    send.qps = 4;
    let mut sender = h1.ns.run(|| Sender::open(send)).unwrap().unwrap();
    let received = std::thread::scope(|scope| {
        let receiving = scope.spawn(move || receiver.run());
        // 1 Mb/s, about 120 frames/s: a queue reaches the example's Kmin (5 packets) only if
        // the switch stalls for some 40 ms, so a CE mark or a loss here is the program's doing,
        // not a loaded machine's (BMv2 lost and marked frames at 20 and 5 Mb/s under load).
        let mut rates = FixedRate::split(1_000_000, 4);
        sender.run(&mut rates).unwrap();
        receiving.join().unwrap().unwrap()
    });
    assert_eq!(
        (
            received.frames.packets,
            received.frames.psn_gaps,
            received.frames.reordered,
            received.frames.ce
        ),
        (ROCE_FRAMES, 0, 0, 0),
        "{received:?}"
    );

    let (h1_packets, h1_bytes) = tx_counts(h1).unwrap();
    let (h2_packets, h2_bytes) = tx_counts(h2).unwrap();
    assert!(h1_packets >= 3 + 20 + ROCE_FRAMES, "{h1_packets}");
    let counters = bed.p4_json(&["counters", "read", "LosslessIngress.port_rx"]);
    assert_eq!(cell(&counters, 1), (h1_packets, h1_bytes), "{counters}");
    assert_eq!(cell(&counters, 2), (h2_packets, h2_bytes), "{counters}");
    let hits = bed.p4_json(&["counters", "read", "route_hits"]);
    let route = |ip: &str| route_packets(&hits, ip);
    assert_eq!(
        (route("10.0.2.2"), route("10.0.1.1")),
        (h1_packets, h2_packets)
    );

    let listed = bed.p4_json(&["entries", "list", "LosslessIngress.ipv4_lpm"]);
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&runtime).unwrap()).unwrap();
    let routes = |entries: &Value| {
        let mut routes: Vec<Value> = entries["table_entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["table"] == "LosslessIngress.ipv4_lpm" && e.get("match").is_some())
            .cloned()
            .collect();
        routes.sort_by_key(|e| e["match"].to_string());
        routes
    };
    assert_eq!(routes(&listed), routes(&file));

    // Registers: the depth kept for h2's lossless queue (port 2, priority 3) is 0 once the
    // queue has drained, and a cell written (a spray turn of a flow slot no flow uses here)
    // reads back. BMv2's P4Runtime server (PI) reads and writes no register: UNIMPLEMENTED,
    // passed on as such (its registers are reached through simple_switch_CLI).
    let read_depth = ["registers", "read", "pfc_queue_depth", "--index", "19"];
    let write = ["registers", "write", "spray_next", "--index", "4000", "1"];
    if bed.bmv2 {
        for refused in [bed.p4_refused(&read_depth), bed.p4_refused(&write)] {
            assert!(refused.contains("UNIMPLEMENTED"), "{refused}");
        }
        return;
    }
    assert_eq!(
        bed.p4_json(&read_depth),
        json!([{"register": "pfc_queue_depth", "index": 19, "value": 0}])
    );
    bed.p4_ok(&write);
    let read = bed.p4_json(&["registers", "read", "spray_next", "--index", "4000"]);
    assert_eq!(
        read,
        json!([{"register": "LosslessIngress.spray_next", "index": 4000, "value": 1}])
    );
}

/// A program in two files (its types in one it includes) is pushed by `pipeline set
/// --program`, which inlines the include (softswitch takes no file from a device config):
/// ping crosses it once the tutorials' routes are in.
#[test]
fn a_program_in_two_files_is_pushed_and_forwards() {
    if !privileged("a_program_in_two_files_is_pushed_and_forwards") {
        return;
    }
    let bed = TutorialBed::new().unwrap();
    let forward = std::fs::read_to_string(p4_file("forward.p4")).unwrap();
    let split = forward.find("parser MyParser").unwrap();
    let dir = bed.dir.join("two-files");
    std::fs::create_dir_all(dir.join("include")).unwrap();
    std::fs::write(dir.join("include/types.p4"), &forward[..split]).unwrap();
    let main = dir.join("main.p4");
    std::fs::write(
        &main,
        format!("#include \"include/types.p4\"\n{}", &forward[split..]),
    )
    .unwrap();
    bed.program(&main, &p4_file("forward-runtime.json"));
    bed.assert_pings(3, "");
}

/// `watch --json` prints one array a tick, with rates from the second tick on.
#[test]
fn watch_prints_counters_with_rates() {
    let Some(bed) = routed_bed("watch_prints_counters_with_rates") else {
        return;
    };
    bed.assert_pings(2, "");
    let mut watch = bed
        .switch_ns()
        .command(lossless_bin())
        .args(["p4", "watch", "port_packets", "--interval", "0.2", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let second: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    watch.kill().unwrap();
    watch.wait().unwrap();
    let port1 = |rows: &Value| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["index"] == 1)
            .cloned()
            .unwrap_or_else(|| panic!("no port 1 in {rows}"))
    };
    assert_eq!(port1(&first)["packets"], 2);
    assert!(port1(&first).get("packets_per_s").is_none());
    assert_eq!(port1(&second)["packets_per_s"], 0.0);

    // Into a pipe the table is printed again at each reading, without clear-screen codes.
    let mut watch = bed
        .switch_ns()
        .command(lossless_bin())
        .args(["p4", "watch", "port_packets", "--interval", "0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut text = String::new();
    for line in std::io::BufReader::new(watch.stdout.take().unwrap()).lines() {
        text += &line.unwrap();
        text.push('\n');
        if text.matches("device 0 on").count() == 3 {
            break;
        }
    }
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert!(!text.contains('\x1b'), "escape codes in a pipe: {text:?}");
    assert!(text.contains("\n\ndevice 0 on"), "{text}");
}

/// A Read whose answer holds more entities or bytes than its limits is refused with
/// RESOURCE_EXHAUSTED (`lossless check --net` reads switches so); within them it is whole.
#[test]
fn a_read_past_its_limits_is_refused() {
    let Some(bed) = routed_bed("a_read_past_its_limits_is_refused") else {
        return;
    };
    bed.switch_ns()
        .run(|| {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let mut client = connect(1).await;
                let p4info = client.p4info().await.unwrap();
                let all = || -> Vec<_> {
                    p4info
                        .tables
                        .iter()
                        .flat_map(p4client::entries::read_all)
                        .collect()
                };
                let whole = client.read_within(all(), ReadLimits::NONE).await.unwrap();
                // The two routes, and the table's default entry.
                assert_eq!(whole.len(), 3, "{whole:?}");
                for limits in [
                    ReadLimits {
                        entities: whole.len() - 1,
                        bytes: usize::MAX,
                    },
                    ReadLimits {
                        entities: usize::MAX,
                        bytes: 16,
                    },
                ] {
                    let error = client.read_within(all(), limits).await.unwrap_err();
                    assert_eq!(error.code, tonic::Code::ResourceExhausted, "{error}");
                    assert!(error.to_string().contains("the most read"), "{error}");
                }
                let exact = ReadLimits {
                    entities: whole.len(),
                    bytes: usize::MAX,
                };
                assert_eq!(client.read_within(all(), exact).await.unwrap(), whole);
            })
        })
        .unwrap();
}

/// While a client with election id 10 holds the primary role, a write with election id 5 is
/// refused with PERMISSION_DENIED and changes nothing; once the primary leaves, a client needs an
/// election id at least as high as the last primary's.
#[test]
fn only_the_primary_writes() {
    if !privileged("only_the_primary_writes") {
        return;
    }
    let bed = TutorialBed::new().unwrap();
    // Before any pipeline, a command that needs the P4Info says so.
    let stderr = bed.p4_refused(&["entries", "list", "ipv4_lpm"]);
    assert!(
        stderr.contains("has no pipeline: push one with `lossless p4 pipeline set`"),
        "{stderr}"
    );
    bed.p4_ok(&[
        "pipeline",
        "set",
        "--program",
        p4_file("forward.p4").to_str().unwrap(),
    ]);
    let entries = p4_file("forward-runtime.json");
    let entries = entries.to_str().unwrap();

    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::scope(|scope| {
        let sw = bed.switch_ns();
        let holder = scope.spawn(move || {
            sw.run(move || {
                let runtime = tokio::runtime::Runtime::new().unwrap();
                runtime.block_on(async move {
                    let mut client = connect(10).await;
                    let arbitration = client.arbitrate().await.unwrap();
                    held_tx.send(arbitration).unwrap();
                    release_rx.await.unwrap();
                })
            })
            .unwrap()
        });
        let arbitration = held_rx.recv().unwrap();
        assert!(arbitration.primary, "{arbitration:?}");

        let stderr = bed.p4_refused(&["entries", "apply", entries, "--election-id", "5"]);
        assert!(
            stderr.contains("Write on 127.0.0.1:9559: PERMISSION_DENIED"),
            "{stderr}"
        );
        assert!(
            stderr.contains("election id 5 is not the primary's (10)"),
            "{stderr}"
        );
        let listed = bed.p4_json(&["entries", "list", "ipv4_lpm"]);
        let routes: Vec<&Value> = listed["table_entries"]
            .as_array()
            .map(|a| a.iter().filter(|e| e.get("match").is_some()).collect())
            .unwrap_or_default();
        assert!(
            routes.is_empty(),
            "a refused write changed the table: {listed}"
        );
        assert!(bed
            .p4_refused(&[
                "pipeline",
                "set",
                "--program",
                p4_file("by_port.p4").to_str().unwrap(),
                "--election-id",
                "5",
            ])
            .contains("PERMISSION_DENIED"));

        release_tx.send(()).unwrap();
        holder.join().unwrap();
    });
    // With the primary gone there is none, and a lower id than its 10 does not claim the role
    // (P4Runtime's arbitration rules); an id at least as high does.
    let stderr = bed.p4_refused(&["entries", "apply", entries, "--election-id", "5"]);
    assert!(stderr.contains("PERMISSION_DENIED"), "{stderr}");
    assert!(
        stderr.contains("no client is the primary and this client's election id 5 is below the highest the switch has seen (10)"),
        "{stderr}"
    );
    bed.p4_ok(&["entries", "apply", entries, "--election-id", "11"]);
    bed.assert_pings(1, "");

    // After p4runtime-shell's default election id (1,0: 2^64), the default 1 is refused and
    // `auto` claims one above what the switch reports.
    let program = p4_file("forward.p4");
    let program = program.to_str().unwrap();
    let set = |id: &'static str| ["pipeline", "set", "--program", program, "--election-id", id];
    bed.p4_ok(&set("1,0"));
    let stderr = bed.p4_refused(&set("1"));
    assert!(
        stderr.contains("below the highest the switch has seen (18446744073709551616)"),
        "{stderr}"
    );
    // Into a pipe, the client's log lines (here the id auto chose, at debug) carry no colour.
    let output = bed
        .switch_ns()
        .command(lossless_bin())
        .env("LOSSLESS_LOG", "lossless=debug")
        .arg("p4")
        .args(set("auto"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("election id auto: 18446744073709551617"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\x1b'),
        "colour codes into a pipe: {stderr:?}"
    );
    // auto took 2^64 + 1: 2^64 is below it now.
    let stderr = bed.p4_refused(&set("1,0"));
    assert!(stderr.contains("(18446744073709551617)"), "{stderr}");
}

/// A name the program lacks is the client's error, naming it, and writes nothing; a value the
/// switch finds too wide for its field (sent under a stale P4Info) is the switch's
/// INVALID_ARGUMENT, shown with the entry; a duplicate entry is the switch's ALREADY_EXISTS per
/// entry while the rest of the file applies.
#[test]
fn malformed_requests_get_the_right_codes() {
    let Some(bed) = routed_bed("malformed_requests_get_the_right_codes") else {
        return;
    };
    let write = |name: &str, json: Value| {
        let path = bed.dir.join(name);
        std::fs::write(&path, json.to_string()).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let route = |ip: &str, port: u64| {
        json!({"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": [ip, 32]},
               "action_name": "MyIngress.ipv4_forward",
               "action_params": {"dstAddr": "08:00:00:00:03:33", "port": port}})
    };

    let unknown = write(
        "unknown.json",
        json!({"table_entries": [route("10.0.3.3", 3),
            {"table": "MyIngress.nosuch", "action_name": "MyIngress.drop"}]}),
    );
    let stderr = bed.p4_refused(&["entries", "apply", &unknown]);
    assert!(stderr.contains("nothing written"), "{stderr}");
    assert!(
        stderr.contains("unknown table 'MyIngress.nosuch'"),
        "{stderr}"
    );
    let listed = bed.p4_json(&["entries", "list", "ipv4_lpm"]).to_string();
    assert!(!listed.contains("10.0.3.3"), "{listed}");

    // A stale P4Info that says the port is 16 bits wide lets 1000 through the client; the
    // switch, whose port is 9 bits, refuses it.
    let p4info = std::process::Command::new(softswitch_bin())
        .arg("p4info")
        .arg(p4_file("forward.p4"))
        .output()
        .unwrap();
    assert!(p4info.status.success());
    let text = String::from_utf8(p4info.stdout).unwrap();
    let port = text.find("name: \"port\"").expect("a port parameter");
    let width = port + text[port..].find("bitwidth: 9").expect("its width");
    let stale_text = format!("{}bitwidth: 16{}", &text[..width], &text[width + 11..]);
    let stale = bed.dir.join("stale.p4info.txtpb");
    std::fs::write(&stale, stale_text).unwrap();
    let too_wide = write(
        "too_wide.json",
        json!({"table_entries": [route("10.0.4.4", 1000), route("10.0.5.5", 3)]}),
    );
    let stderr = bed.p4_refused(&[
        "entries",
        "apply",
        &too_wide,
        "--p4info",
        stale.to_str().unwrap(),
    ]);
    assert!(
        stderr.contains("Write on 127.0.0.1:9559: UNKNOWN: 1 of 2 updates failed"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains(r#"table_entries[0] (MyIngress.ipv4_lpm: hdr.ipv4.dstAddr=["10.0.4.4",32]"#)
            && stderr.contains("INVALID_ARGUMENT"),
        "{stderr}"
    );
    let listed = bed.p4_json(&["entries", "list", "ipv4_lpm"]).to_string();
    assert!(
        !listed.contains("10.0.4.4") && listed.contains("10.0.5.5"),
        "{listed}"
    );

    // The routes are in already: each insert is ALREADY_EXISTS, the default action (a MODIFY)
    // applies again.
    let stderr = bed.p4_refused(&[
        "entries",
        "apply",
        p4_file("forward-runtime.json").to_str().unwrap(),
    ]);
    assert!(
        stderr.contains("UNKNOWN: 2 of 3 updates failed"),
        "{stderr}"
    );
    assert_eq!(stderr.matches(": ALREADY_EXISTS: ").count(), 2, "{stderr}");
    assert!(!stderr.contains("table_entries[0]"), "{stderr}");

    let stderr = bed.p4_refused(&["counters", "read", "nosuch"]);
    assert!(
        stderr.contains(
            "unknown counter 'nosuch' (known: MyIngress.port_packets, MyIngress.route_hits)"
        ),
        "{stderr}"
    );
    let stderr = bed.p4_refused(&["entries", "list", "ipv4_lpm", "--device-id", "7"]);
    assert!(stderr.contains("NOT_FOUND"), "{stderr}");
}

/// A second program replaces the first in the running switch (same process): the old table is
/// gone, the new one forwards once its entries are in — h1's frames through a multicast group
/// written from the runtime JSON — and its counter counts.
#[test]
fn the_pipeline_is_replaced_while_the_switch_runs() {
    let Some(mut bed) = routed_bed("the_pipeline_is_replaced_while_the_switch_runs") else {
        return;
    };
    bed.assert_pings(1, "");
    assert!(bed.bed.running());

    bed.p4_ok(&[
        "pipeline",
        "set",
        "--program",
        p4_file("by_port.p4").to_str().unwrap(),
    ]);
    // The process the bed started has not exited: the pipeline changed inside it.
    assert!(bed.bed.running(), "softswitch exited");
    assert!(bed
        .p4_refused(&["entries", "list", "MyIngress.ipv4_lpm"])
        .contains("unknown table 'MyIngress.ipv4_lpm'"));
    assert!(
        !bed.ping(1),
        "the new pipeline forwards before it has entries"
    );
    bed.p4_ok(&[
        "entries",
        "apply",
        p4_file("by_port-runtime.json").to_str().unwrap(),
    ]);
    bed.assert_pings(3, "");
    let counters = bed.p4_json(&["counters", "read", "PortIngress.ingress_packets"]);
    // 1 unanswered echo and 3 answered ones from h1; 3 replies from h2.
    assert_eq!(cell(&counters, 1).0, 4, "{counters}");
    assert_eq!(cell(&counters, 2).0, 3, "{counters}");
    let info = bed.p4_json(&["pipeline", "get"]);
    assert_eq!(info["tables"][0]["preamble"]["name"], "PortIngress.by_port");
}

/// The P4Info p4c wrote for a program (text format, unchanged) drives softswitch: pipeline set
/// with it, entries resolved against it, read back.
#[test]
fn p4c_p4info_drives_softswitch() {
    if !privileged("p4c_p4info_drives_softswitch") {
        return;
    }
    let program = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../softswitch/tests/p4info/flowlet.p4");
    let p4info = program.with_file_name("flowlet.p4c.p4info.txtpb");
    let bed = TutorialBed::new().unwrap();
    bed.p4_ok(&[
        "pipeline",
        "set",
        "--program",
        program.to_str().unwrap(),
        "--p4info",
        p4info.to_str().unwrap(),
    ]);
    let entries = bed.dir.join("flowlet.json");
    std::fs::write(
        &entries,
        json!({"table_entries": [{"table": "ecmp_group",
            "match": {"hdr.ipv4.dstAddr": ["10.0.1.0", 24]},
            "action_name": "set_ecmp_select",
            "action_params": {"ecmp_base": 0, "ecmp_count": 2}}]})
        .to_string(),
    )
    .unwrap();
    bed.p4_ok(&["entries", "apply", entries.to_str().unwrap()]);
    let listed = bed.p4_json(&["entries", "list", "ingress.ecmp_group"]);
    let route = listed["table_entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e.get("match").is_some())
        .cloned()
        .unwrap_or_else(|| panic!("no entry in {listed}"));
    assert_eq!(route["match"]["hdr.ipv4.dstAddr"], json!(["10.0.1.0", 24]));
    assert_eq!(
        route["action_params"],
        json!({"ecmp_base": 0, "ecmp_count": 2})
    );
}

/// `SOFTSWITCH_LOG=softswitch=debug` logs each control-plane change (arbitration, each
/// update of a Write with its result, a pipeline set and loaded); `trace` adds one line per
/// frame in and out. Into a pipe, without colour codes.
#[test]
fn softswitch_logs_control_plane_at_debug_and_frames_at_trace() {
    if !privileged("softswitch_logs_control_plane_at_debug_and_frames_at_trace") {
        return;
    }
    let mut bed = TutorialBed::logging(Some("info,softswitch=trace")).unwrap();
    bed.p4_ok(&[
        "pipeline",
        "set",
        "--program",
        p4_file("forward.p4").to_str().unwrap(),
    ]);
    bed.p4_ok(&[
        "entries",
        "apply",
        p4_file("forward-runtime.json").to_str().unwrap(),
    ]);
    bed.assert_pings(1, "");
    for needle in [
        "arbitration",
        "SetForwardingPipelineConfig",
        "pipeline loaded",
        "Write",
        "frame in",
        "frame out",
    ] {
        bed.bed.wait_for_log(needle).unwrap();
    }
    let debug = |what: &str| {
        bed.bed
            .lines
            .iter()
            .find(|l| l.contains(what))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        debug("pipeline loaded").contains("DEBUG"),
        "{:?}",
        bed.bed.lines
    );
    assert!(debug("Write").contains("TableEntry"), "{}", debug("Write"));
    assert!(debug("frame in").contains("TRACE"), "{}", debug("frame in"));
    let coloured: Vec<&String> = bed
        .bed
        .lines
        .iter()
        .filter(|l| l.contains('\x1b'))
        .collect();
    assert!(
        coloured.is_empty(),
        "colour codes into a pipe: {coloured:?}"
    );
}

/// softswitch's queue service: `queue set` changes one queue and `queue show` reads it back.
#[test]
fn queue_set_and_show() {
    let Some(bed) = routed_bed("queue_set_and_show") else {
        return;
    };
    // Before any setting, while ports forward: every port's 8 queues, at BMv2's defaults.
    bed.assert_pings(2, "");
    let queues = bed.p4_json(&["queue", "show"]);
    let rows = queues.as_array().unwrap();
    let ports: std::collections::BTreeSet<u64> =
        rows.iter().map(|q| q["port"].as_u64().unwrap()).collect();
    assert_eq!(ports, [1, 2].into(), "{queues}");
    assert_eq!(rows.len(), 16, "{queues}");
    assert!(
        rows.iter()
            .all(|q| q["depth_packets"] == 64 && q["rate_pps"] == 0),
        "{queues}"
    );
    let table = String::from_utf8(bed.p4(&["queue", "show"]).stdout).unwrap();
    assert_eq!(table.lines().count(), 17, "{table}");
    // The queue under test: priority 3 of port 2, set with `options`; the changed rows.
    let set_queue = |options: &[&str]| {
        let mut args = vec!["queue", "set", "--port", "2", "--priority", "3"];
        args.extend_from_slice(options);
        bed.p4_json(&args)
    };
    let changed = set_queue(&["--depth", "16", "--rate", "1000"]);
    // The queue's measures are all at zero (nothing went through it), its burst rule the
    // default.
    assert_eq!(
        changed,
        json!([{"port": 2, "priority": 3, "depth_packets": 16, "rate_pps": 1000,
                "occupancy_packets": 0, "strict": true, "weight": 1, "quantum_bytes": 1514,
                "dropped_packets": 0,
                "burst_threshold_packets": 16, "burst_window_us": 1000, "in_burst": false,
                "microbursts": 0, "bursts_over_window": 0, "last_burst_peak_packets": 0,
                "last_burst_duration_us": 0, "occupancy_p50_packets": 0,
                "occupancy_p99_packets": 0, "occupancy_max_packets": 0, "sojourn_p50_us": 0,
                "sojourn_p99_us": 0, "sojourn_max_us": 0, "sojourn_us_buckets": vec![0u64; 32],
                "port_rate_pps": 0, "open_burst_peak_packets": 0, "open_burst_us": 0}])
    );
    // Scheduling: priority 3 of port 2 shares the port by DWRR with weight 3, its quantum 9000.
    let changed = set_queue(&["--dwrr", "--weight", "3"]);
    assert_eq!(
        (changed[0]["strict"].clone(), changed[0]["weight"].clone()),
        (json!(false), json!(3))
    );
    let changed = bed.p4_json(&["queue", "set", "--port", "2", "--quantum", "9000"]);
    assert_eq!(changed.as_array().unwrap().len(), 8, "{changed}");
    assert!(changed
        .as_array()
        .unwrap()
        .iter()
        .all(|q| q["quantum_bytes"] == 9000));
    assert!(bed
        .p4_refused(&["queue", "set", "--port", "2", "--weight", "101"])
        .contains("101 is not in 1..=100"));
    let queues = bed.p4_json(&["queue", "show"]);
    let queue = |port: u64, priority: u64| {
        queues
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["port"] == port && q["priority"] == priority)
            .cloned()
            .unwrap_or_else(|| panic!("no queue {port}/{priority} in {queues}"))
    };
    assert_eq!(queue(2, 3)["rate_pps"], 1000);
    assert_eq!(queue(2, 2)["depth_packets"], 64);
    assert_eq!(
        (queue(2, 3)["strict"].clone(), queue(2, 2)["strict"].clone()),
        (json!(false), json!(true))
    );
    assert_eq!(
        queue(1, 3)["quantum_bytes"],
        1514,
        "the quantum is port 2's"
    );
    let table = String::from_utf8(bed.p4(&["queue", "show"]).stdout).unwrap();
    assert!(table.contains("dwrr:3"), "{table}");
    assert!(bed
        .p4_refused(&["queue", "set", "--port", "2"])
        .contains("nothing to change"));
}

/// The packets counted in the direct counter cell `hits` (a `counters read route_hits --json`)
/// holds for the route to `ip`/32.
fn route_packets(hits: &Value, ip: &str) -> u64 {
    hits.as_array()
        .unwrap()
        .iter()
        .find(|c| c["entry"]["match"]["hdr.ipv4.dstAddr"] == json!([ip, 32]))
        .unwrap_or_else(|| panic!("no route to {ip} in {hits}"))["packets"]
        .as_u64()
        .unwrap()
}
