//! softswitch standing in for BMv2's `simple_switch` (a symlink of that name, BMv2's command
//! line, p4c-bm2-ss's JSON), driven by BMv2's own `simple_switch_CLI` over Thrift: what the CLI
//! prints is read off its output, what the switch then does off the wire (raw frames on the
//! hosts' interfaces, compared byte for byte with those sent).

use std::path::Path;
use std::time::Duration;

use lossless_tests::bed::{privileged_and, TIMEOUT};
use lossless_tests::capture::RawSocket;
use lossless_tests::switch::{program, softswitch_bin, Bmv2Build, SwitchBed, Topology};
use p4toolchain::{Compiled, Toolchain};

/// The source MAC of every frame this test sends: a filter against anything else on the wire.
const SRC: [u8; 6] = [0x02, 0x54, 0x48, 0x52, 0x46, 0x54];
/// A frame's length.
const FRAME_BYTES: usize = 64;
/// The EtherType the program clones to session 5.
const CLONED: u16 = 0x88b5;
/// Any other EtherType.
const PLAIN: u16 = 0x88b6;

/// A frame from [`SRC`] with EtherType `ether_type` and `seq` in its payload.
fn frame(ether_type: u16, seq: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend(SRC);
    f.extend(ether_type.to_be_bytes());
    f.resize(FRAME_BYTES, seq);
    f
}

fn ours(f: &[u8]) -> bool {
    f.get(6..12) == Some(&SRC[..])
}

/// Starts softswitch through a symlink named `simple_switch` in `dir`, on three hosts,
/// running `program` (BMv2 JSON or P4 source), with BMv2's options `options`.
fn simple_switch(dir: &Path, program: &Path, options: &[&str]) -> SwitchBed {
    let link = dir.join("simple_switch");
    if !link.exists() {
        std::os::unix::fs::symlink(softswitch_bin(), &link).unwrap();
    }
    SwitchBed::start_as_simple_switch(Topology::new(3).unwrap(), &link, program, options).unwrap()
}

/// Sends `frame` from `from` and asserts that each of `to` receives it, and nothing else.
fn arrives_at(frame: &[u8], from: &RawSocket, to: &[&RawSocket]) {
    from.send(frame).unwrap();
    for socket in to {
        assert_eq!(socket.receive(1, TIMEOUT, ours).unwrap(), [frame]);
    }
}

/// Every frame of ours that arrives on `socket` during `window`.
fn arriving(socket: &RawSocket, window: Duration) -> Vec<Vec<u8>> {
    let end = std::time::Instant::now() + window;
    let mut frames = Vec::new();
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        frames.extend(socket.poll_frames(left, ours).unwrap());
    }
    frames
}

/// What each test here starts from: BMv2's toolchain, thrift_cli.p4 compiled by its p4c, and a
/// scratch directory.
struct Lab {
    toolchain: &'static Toolchain,
    compiled: Compiled,
    scratch: testkit::TempDir,
}

impl Lab {
    /// The lab of `test`, or `None` where it is skipped (not root, or no p4c and BMv2).
    fn new(test: &str) -> Option<Lab> {
        let toolchain = privileged_and(test, testkit::bmv2::toolchain_or_skip)?;
        Some(Lab {
            toolchain,
            compiled: testkit::bmv2::compiled(toolchain, &program("thrift_cli.p4")).unwrap(),
            scratch: testkit::TempDir::new("llthrift", "scratch"),
        })
    }

    /// BMv2's own simple_switch on three hosts, running the compiled JSON with `options`.
    fn bmv2(&self, options: &[&str]) -> SwitchBed {
        SwitchBed::start_bmv2(
            Topology::new(3).unwrap(),
            &self.toolchain.simple_switch,
            Bmv2Build::Thrift,
            Some(&self.compiled.json),
            &self.scratch.0,
            options,
        )
        .unwrap()
    }
}

#[test]
fn simple_switch_cli_drives_softswitch_running_p4c_json() {
    let Some(lab) = Lab::new("simple_switch_cli_drives_softswitch_running_p4c_json") else {
        return;
    };
    let bed = simple_switch(&lab.scratch.0, &lab.compiled.json, &[]);
    let cli = |commands: &str| {
        bed.simple_switch_cli(&lab.toolchain.simple_switch_cli, &[], commands)
            .unwrap()
    };
    let hosts = bed.hosts();
    let [h1, h2, h3] = [0, 1, 2].map(|i| hosts[i].socket());

    // table_add: the CLI fetched the JSON from the switch (bm_get_config), the entry has
    // BMv2's first handle, table_dump reads it back, and frames from port 1 reach port 2.
    let out = cli("table_add forward to_port 1 => 2\ntable_dump forward\n");
    assert!(out.contains("Obtaining JSON from switch...\nDone"), "{out}");
    assert!(out.contains("Entry has been added with handle 0"), "{out}");
    assert!(out.contains("EXACT     0001"), "{out}");
    assert!(
        out.contains("Action entry: ThriftIngress.to_port - 02"),
        "{out}"
    );
    assert!(out.contains("Action entry: ThriftIngress.drop - "), "{out}");
    let sent: Vec<Vec<u8>> = (0..5).map(|i| frame(PLAIN, i)).collect();
    for f in &sent {
        h1.send(f).unwrap();
    }
    assert_eq!(h2.receive(5, TIMEOUT, ours).unwrap(), sent);

    // counter_read: port 1's cell counts the five frames and their bytes.
    let out = cli("counter_read rx 1\ncounter_read rx 2\n");
    assert!(
        out.contains(&format!("rx[1]= ({} bytes, 5 packets)", 5 * FRAME_BYTES)),
        "{out}"
    );
    assert!(out.contains("rx[2]= (0 bytes, 0 packets)"), "{out}");

    // register_write, then register_read of the cell and of the whole array (cell 0 holds
    // the last ingress port, the program's own write).
    let out = cli("register_write scratch 3 42\nregister_read scratch 3\nregister_read scratch\n");
    assert!(out.contains("scratch[3]= 42"), "{out}");
    assert!(out.contains("scratch= 1, 0, 0, 42, 0, 0, 0, 0"), "{out}");

    // meter_set_rates, then meter_get_rates of that cell (committed, then peak) and of an
    // unconfigured one (no rates, as BMv2's).
    let out = cli("meter_set_rates police 3 0.5:10 1:20
meter_get_rates police 3
meter_get_rates police 4
");
    assert!(out.contains("0: info rate = 0.5, burst size = 10"), "{out}");
    assert!(out.contains("1: info rate = 1.0, burst size = 20"), "{out}");
    assert!(
        out.contains("expected 2 rates but only received 0"),
        "{out}"
    );

    // mirroring_add: a frame of the cloned EtherType goes on to port 2 and its clone to
    // port 3.
    let out = cli("mirroring_add 5 3\nmirroring_get 5\n");
    assert!(
        out.contains("MirroringSessionConfig(port=3, mgid=None)"),
        "{out}"
    );
    arrives_at(&frame(CLONED, 9), &h1, &[&h2, &h3]);

    // mc_mgrp_create, mc_node_create, mc_node_associate: frames from port 2 go to group 1,
    // whose node copies them to ports 1 and 3.
    let out = cli(
        "mc_mgrp_create 1\nmc_node_create 0 1 3\nmc_node_associate 1 0\n\
         table_add forward to_group 2 => 1\nmc_dump\n",
    );
    assert!(out.contains("node was created with handle 0"), "{out}");
    assert!(
        out.contains("-> (L1h=0, rid=0) -> (ports=[1, 3], lags=[])"),
        "{out}"
    );
    arrives_at(&frame(PLAIN, 7), &h2, &[&h1, &h3]);

    // set_queue_depth: port 2's queue, drained at 20 frames/s, holds 2; of a burst of 30,
    // the frame on its way out and the two queued arrive, the rest are dropped (with
    // BMv2's default depth of 64, all 30 would).
    let out = cli("set_queue_rate 20 2\nset_queue_depth 2 2\n");
    assert!(!out.contains("Error") && !out.contains("Invalid"), "{out}");
    for i in 0..30 {
        h1.send(&frame(PLAIN, i)).unwrap();
    }
    let burst = arriving(&h2, Duration::from_millis(1000));
    assert!(
        (1..=3).contains(&burst.len()),
        "{} of a burst of 30 frames arrived through a queue of depth 2",
        burst.len()
    );
    assert!(arriving(&h2, Duration::from_millis(300)).is_empty());
    // Every frame was counted on the way in, dropped or not.
    let out = cli("counter_read rx 1\n");
    assert!(out.contains("36 packets)"), "{out}");

    // A refused call is BMv2's exception with its code, and the switch goes on.
    let out = cli("table_delete forward 77\ntable_num_entries forward\n");
    assert!(
        out.contains("Invalid table operation (INVALID_HANDLE)"),
        "{out}"
    );
    assert!(out.contains("RuntimeCmd: 2"), "{out}");
    drop(bed.into_topology().unwrap());
}

/// With P4 source, the switch has no BMv2 JSON to give: the CLI takes p4c's JSON of the same
/// program with `--json`, and its names are softswitch's (the front end names objects as p4c
/// does).
#[test]
fn simple_switch_cli_drives_softswitch_running_p4_source_with_p4cs_json() {
    let test = "simple_switch_cli_drives_softswitch_running_p4_source_with_p4cs_json";
    let Some(lab) = Lab::new(test) else {
        return;
    };
    let bed = simple_switch(&lab.scratch.0, &program("thrift_cli.p4"), &[]);
    let cli = &lab.toolchain.simple_switch_cli;
    // Without --json the CLI cannot start: the switch refuses bm_get_config.
    let refused = bed.simple_switch_cli(cli, &[], "table_num_entries forward\n");
    assert!(
        format!("{refused:?}").contains("Error when requesting JSON config from switch"),
        "{refused:?}"
    );
    let json = lab.compiled.json.to_str().unwrap();
    let out = bed
        .simple_switch_cli(
            cli,
            &["--json", json],
            "table_add forward to_port 1 => 3\ncounter_read rx 1\n",
        )
        .unwrap();
    // The switch's md5 is its source's, not the JSON's: the CLI warns, and goes on.
    assert!(out.contains("don't have the same md5 sum"), "{out}");
    assert!(out.contains("Entry has been added with handle 0"), "{out}");
    let hosts = bed.hosts();
    let (h1, h3) = (hosts[0].socket(), hosts[2].socket());
    arrives_at(&frame(PLAIN, 1), &h1, &[&h3]);
    let out = bed
        .simple_switch_cli(cli, &["--json", json], "counter_read rx 1\n")
        .unwrap();
    assert!(
        out.contains(&format!("rx[1]= ({FRAME_BYTES} bytes, 1 packets)")),
        "{out}"
    );
    drop(bed.into_topology().unwrap());
}

/// Entries whose action data is zero, small and wider than a byte, the default entry, and
/// their dumps: what simple_switch_CLI prints is the same, byte for byte, from softswitch as
/// from BMv2's simple_switch (match keys at their field's width, action data in its fewest
/// bytes: port 2 is `02`, port 256 `0100`, 0 `00`).
#[test]
fn table_dump_prints_what_bmv2_prints() {
    let Some(lab) = Lab::new("table_dump_prints_what_bmv2_prints") else {
        return;
    };
    let commands = "table_add forward to_port 1 => 0\n\
                    table_add forward to_port 2 => 2\n\
                    table_add forward to_port 3 => 256\n\
                    table_add forward to_group 4 => 7\n\
                    table_set_default forward to_port 5\n\
                    table_dump forward\n\
                    table_dump_entry forward 2\n\
                    table_dump_entry_from_key forward 4\n";
    let dumps = |bed: SwitchBed| {
        bed.simple_switch_cli(&lab.toolchain.simple_switch_cli, &[], commands)
            .unwrap()
    };
    let ours = dumps(simple_switch(&lab.scratch.0, &lab.compiled.json, &[]));
    let theirs = dumps(lab.bmv2(&[]));
    assert!(theirs.contains("to_port - 0100"), "{theirs}");
    assert_eq!(ours, theirs);
}

/// `--dump-packet-data N`: a frame forwarded from port 1 to port 2 is logged as received and as
/// sent, its first N bytes in hex, in the same words from softswitch as from BMv2's
/// simple_switch given the same option (only the lines' time and thread differ).
#[test]
fn dump_packet_data_logs_frames_as_bmv2_does() {
    let Some(lab) = Lab::new("dump_packet_data_logs_frames_as_bmv2_does") else {
        return;
    };
    let options = ["--log-console", "--dump-packet-data", "20"];
    let dumped = |mut bed: SwitchBed| -> Vec<String> {
        bed.simple_switch_cli(
            &lab.toolchain.simple_switch_cli,
            &[],
            "table_add forward to_port 1 => 2\n",
        )
        .unwrap();
        let (h1, h2) = (bed.hosts()[0].socket(), bed.hosts()[1].socket());
        arrives_at(&frame(PLAIN, 7), &h1, &[&h2]);
        bed.wait_for_log("Sending packet of length 64 on port 2: ")
            .unwrap();
        bed.lines
            .iter()
            .filter_map(|l| l.split_once("] [bmv2] [I] [thread ").map(|(_, rest)| rest))
            .filter_map(|rest| {
                rest.split_once("] ")
                    .map(|(_, message)| message.to_string())
            })
            .filter(|m| m.contains(" packet of length "))
            .collect()
    };
    let ours = dumped(simple_switch(&lab.scratch.0, &lab.compiled.json, &options));
    let theirs = dumped(lab.bmv2(&options));
    let hex: String = frame(PLAIN, 7)[..20]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        theirs,
        [
            format!("Received packet of length 64 on port 1: {hex}"),
            format!("Sending packet of length 64 on port 2: {hex}"),
        ]
    );
    assert_eq!(ours, theirs);
}
