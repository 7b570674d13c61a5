//! `lossless host attach` killed with SIGKILL at any moment leaves a state that the next
//! attach or detach recovers from without manual cleanup, with no XDP or TCX program left on
//! the interface; `status` reports what a killed attach left; and attach over a foreign XDP
//! program names it. Checked on real veths, with the kernel's own view (`ip -d link`, the
//! loaded links) as the independent witness.

use std::time::Instant;

use dataplane_common::{maps, programs};
use host::attach::{Stage, PAUSE_ENV};
use lossless_tests::bed::{pin_dirs, privileged, Attached, Link, Running};
use serde_json::Value;
use sysutil::pins::PinDir;

/// The hooks every kill test attaches: an XDP link and two TCX links.
const HOOKS: &str = "xdp,cnp";

/// `host attach` of `link`'s rx interface with [`HOOKS`] in skb mode.
fn attach_args(link: &Link) -> [&str; 7] {
    let rx = link.rx.ifname.as_str();
    ["host", "attach", rx, "--mode", "skb", "--hooks", HOOKS]
}

/// The pin directory of `link`'s rx interface (in its namespace).
fn rx_pin_dir(link: &Link) -> PinDir {
    let name = link.rx.ifname.clone();
    link.rx_ns.run(move || PinDir::new(&name).unwrap()).unwrap()
}

/// The TCX programs on `link`'s rx interface, both directions, as the kernel lists them.
fn tcx_programs(link: &Link) -> usize {
    let name = link.rx.ifname.clone();
    link.rx_ns
        .run(move || host::interface_programs::tcx_program_ids(&name).len())
        .unwrap()
}

/// `host status --json` run in `link`'s rx namespace.
fn status(link: &Link) -> Vec<Value> {
    let out = Link::lossless(&link.rx_ns, &["host", "status", "--json"]).unwrap();
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The status entries of `link`'s rx interface.
fn entries_of(link: &Link) -> Vec<Value> {
    status(link)
        .into_iter()
        .filter(|e| e["interface"] == link.rx.ifname.as_str())
        .collect()
}

/// Nothing of `link`'s rx interface is left: no pin directory, no program on it.
fn assert_clean(link: &Link, context: &str) {
    let left: Vec<String> = pin_dirs()
        .into_iter()
        .filter(|d| d.starts_with(&link.rx.ifname))
        .collect();
    assert!(left.is_empty(), "{context}: pins left: {left:?}");
    assert!(!link.rx_xdp_attached(), "{context}: an XDP program is left");
    assert_eq!(tcx_programs(link), 0, "{context}: TCX programs are left");
}

/// `host attach` stopped at each stage, seen by `status` as in progress, killed with
/// SIGKILL, seen as stale; then the next attach (even stages) or detach (odd stages)
/// removes the leftover with its links, and the interface attaches and detaches cleanly.
#[test]
fn an_attach_killed_at_any_stage_is_recovered() {
    let Some(link) = Link::for_test("an_attach_killed_at_any_stage_is_recovered") else {
        return;
    };
    let attach = attach_args(&link);
    for (i, stage) in Stage::ALL.into_iter().enumerate() {
        let context = stage.name();
        let mut running = Running::spawn(&link.rx_ns, &attach, &[(PAUSE_ENV, stage.name())]);
        running.wait_for(&format!("attach paused at {}", stage.name()));
        let pid = running.pid();
        let live = entries_of(&link);
        assert_eq!(live.len(), 1, "{context}: {live:?}");
        assert_eq!(live[0]["state"], "attaching", "{context}: {live:?}");
        assert_eq!(live[0]["owner_pid"], pid, "{context}: {live:?}");
        let busy = Link::lossless(&link.rx_ns, &attach[..3]).unwrap_err();
        assert!(
            format!("{busy:#}").contains("in progress"),
            "{context}: {busy:#}"
        );

        running.kill();
        let stale = entries_of(&link);
        assert_eq!(stale.len(), 1, "{context}: {stale:?}");
        assert_eq!(stale[0]["state"], "stale", "{context}: {stale:?}");
        assert_eq!(stale[0]["netns"]["current"], true, "{context}: {stale:?}");
        let text = Link::lossless(&link.rx_ns, &["host", "status"]).unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains("left by a killed attach"),
            "{context}: {text}"
        );

        let recovery = if i % 2 == 0 {
            Link::lossless(&link.rx_ns, &attach).unwrap()
        } else {
            Link::lossless(&link.rx_ns, &["host", "detach", &link.rx.ifname]).unwrap()
        };
        let said = String::from_utf8_lossy(&recovery.stdout);
        assert!(
            said.contains("left by a killed attach or detach"),
            "{context}: {said}"
        );
        if i % 2 == 0 {
            assert!(link.rx_xdp_attached(), "{context}: attach after recovery");
            Link::lossless(&link.rx_ns, &["host", "detach", &link.rx.ifname]).unwrap();
        }
        assert_clean(&link, context);
    }
}

/// Kills at random moments of real attaches (no pause): whatever the moment, an attach
/// afterwards either works or finds the interface attached, and a detach then leaves nothing.
#[test]
fn attaches_killed_at_random_moments_never_leave_the_interface_stuck() {
    let Some(link) =
        Link::for_test("attaches_killed_at_random_moments_never_leave_the_interface_stuck")
    else {
        return;
    };
    let attach = attach_args(&link);
    // How long a whole attach takes here: the kills fall inside it.
    let started = Instant::now();
    Link::lossless(&link.rx_ns, &attach).unwrap();
    let whole = started.elapsed();
    Link::lossless(&link.rx_ns, &["host", "detach", &link.rx.ifname]).unwrap();
    // A fixed spread of moments over the attach (no clock-seeded randomness: reproducible).
    for step in 0..8u32 {
        let at = whole * (2 * step + 1) / 16;
        let running = Running::spawn(&link.rx_ns, &attach, &[]);
        std::thread::sleep(at);
        running.kill();
        let context = format!("killed after {at:?} of {whole:?}");
        match Link::lossless(&link.rx_ns, &attach) {
            Ok(_) => {}
            Err(e) => assert!(
                format!("{e:#}").contains("already attached"),
                "{context}: {e:#}"
            ),
        }
        assert!(link.rx_xdp_attached(), "{context}: not attached");
        Link::lossless(&link.rx_ns, &["host", "detach", &link.rx.ifname]).unwrap();
        assert_clean(&link, &context);
    }
}

/// A killed detach is recovered too: its pins are out of sight in IFACE:detaching, and the
/// next detach removes them.
#[test]
fn a_detach_killed_midway_is_recovered() {
    let Some(link) = Link::for_test("a_detach_killed_midway_is_recovered") else {
        return;
    };
    let attached = link.attach_rx(&["--hooks", HOOKS]);
    // A detach that dies between taking the pins out of sight and removing them: the same
    // leftover as a SIGKILL there, made by renaming the directory as detach does.
    let dir = rx_pin_dir(&link);
    dir.rename_to(&dir.hidden("detaching")).unwrap();
    let stale = entries_of(&link);
    assert_eq!(stale[0]["state"], "stale", "{stale:?}");
    assert_eq!(stale[0]["purpose"], "detaching", "{stale:?}");
    assert!(
        link.rx_xdp_attached(),
        "the programs stay while their pins do"
    );
    attached.detach().unwrap();
    assert_clean(&link, "after detach");
}

/// Attach over an XDP program that is not ours to see (its pins moved away) fails naming the
/// program, its id and its link, instead of "File exists".
#[test]
fn attach_over_an_xdp_program_names_it() {
    let Some(link) = Link::for_test("attach_over_an_xdp_program_names_it") else {
        return;
    };
    let _attached = link.attach_rx(&["--mode", "skb"]);
    let ours = link.rx_status();
    let program = ours["hooks"][0]["program_id"].as_u64().unwrap();
    let link_id = ours["hooks"][0]["link_id"].as_u64().unwrap();
    // Hide the pins where lossless does not look: the program stays, held by its link.
    let dir = rx_pin_dir(&link);
    let hidden = std::path::PathBuf::from(format!("/sys/fs/bpf/hidden-{}", link.rx.ifname));
    std::fs::rename(dir.path(), &hidden).unwrap();
    let refused = Link::lossless(&link.rx_ns, &["host", "attach", &link.rx.ifname]).unwrap_err();
    // Put them back (the failed attach removed the namespace's emptied directory).
    std::fs::create_dir_all(dir.path().parent().unwrap()).unwrap();
    std::fs::rename(&hidden, dir.path()).unwrap();
    let message = format!("{refused:#}");
    for needle in [
        format!(
            "already has an XDP program: id {program} {} (skb mode)",
            programs::XDP
        ),
        format!("held by bpf_link {link_id}"),
        "remove it first".to_owned(),
    ] {
        assert!(message.contains(&needle), "{needle} not in: {message}");
    }
}

/// Two namespaces each with an interface of the same name: both attach, `set` and `detach`
/// in one never touch the other, and `status` tells them apart by namespace.
#[test]
fn same_named_interfaces_in_two_namespaces_are_independent() {
    if !privileged("same_named_interfaces_in_two_namespaces_are_independent") {
        return;
    }
    let (a, b) = (Link::new().unwrap(), Link::new().unwrap());
    // The same name in both: rename b's rx interface to a's.
    let name = a.rx.ifname.clone();
    b.rx_ns.ip(&["link", "set", &b.rx.ifname, "down"]).unwrap();
    b.rx_ns
        .ip(&["link", "set", &b.rx.ifname, "name", &name])
        .unwrap();
    b.rx_ns.ip(&["link", "set", &name, "up"]).unwrap();
    let _in_a = Attached::new(&a.rx_ns, &name, &["--mode", "skb"]).unwrap();
    let in_b = Attached::new(&b.rx_ns, &name, &["--mode", "skb"]).unwrap();

    Link::host_set(&b.rx_ns, &name, &["ecn.prio3.kmin_bytes=1234"]);
    let config = |ns| {
        let out = Link::lossless(ns, &["host", "status", "--json"]).unwrap();
        let all: Value = serde_json::from_slice(&out.stdout).unwrap();
        let here = all
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["interface"] == name.as_str() && e["netns"]["current"] == true)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in this namespace: {all}"));
        here["config"]["ecn"][3]["kmin_bytes"].as_u64().unwrap()
    };
    assert_eq!(config(&b.rx_ns), 1234);
    assert_eq!(config(&a.rx_ns), 20_000, "set in b changed a");

    // status in a: both, by namespace, a's first, each with its namespace's name.
    let out = Link::lossless(&a.rx_ns, &["host", "status", "--json"]).unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours: Vec<&Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["interface"] == name.as_str())
        .collect();
    assert_eq!(ours.len(), 2, "{all}");
    assert_eq!(ours[0]["netns"]["name"], a.rx_ns.name(), "{all}");
    assert_eq!(ours[1]["netns"]["name"], b.rx_ns.name(), "{all}");
    assert_ne!(ours[0]["netns"]["inode"], ours[1]["netns"]["inode"]);
    let text = Link::lossless(&a.rx_ns, &["host", "status"]).unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("netns {}", b.rx_ns.name())),
        "{text}"
    );

    // detach in b: a's stays attached, and b's status says b has nothing left.
    in_b.detach().unwrap();
    assert!(a.rx_xdp_attached(), "detach in b detached a");
    let text = Link::lossless(&b.rx_ns, &["host", "status"]).unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.starts_with("no interface attached in this network namespace"),
        "{text}"
    );
    assert!(text.contains("in other network namespaces:"), "{text}");
    let again = Link::lossless(&b.rx_ns, &["host", "detach", &name]).unwrap_err();
    assert!(format!("{again:#}").contains("not attached"), "{again:#}");
    assert_eq!(pin_dirs().iter().filter(|d| **d == name).count(), 1);
}

/// Pins of a lossless before namespace keys (`/sys/fs/bpf/lossless/IFACE/`) stay readable:
/// `status` lists them with no namespace, a command in another namespace leaves them alone,
/// and the first command in the namespace whose interface runs their programs adopts them.
#[test]
fn pins_of_the_layout_before_namespace_keys_are_adopted() {
    if !privileged("pins_of_the_layout_before_namespace_keys_are_adopted") {
        return;
    }
    let (link, other) = (Link::new().unwrap(), Link::new().unwrap());
    let attached = link.attach_rx(&["--mode", "skb"]);
    let dir = rx_pin_dir(&link);
    // Where the old layout kept them.
    let legacy = dir.legacy();
    dir.rename_to(&legacy).unwrap();
    let before = entries_of(&link);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0]["netns"], Value::Null, "{before:?}");
    assert_eq!(before[0]["state"], "attached", "{before:?}");

    // The same name in another namespace, whose interface does not run them: not adopted.
    other
        .rx_ns
        .ip(&["link", "set", &other.rx.ifname, "down"])
        .unwrap();
    other
        .rx_ns
        .ip(&["link", "set", &other.rx.ifname, "name", &link.rx.ifname])
        .unwrap();
    let elsewhere = Link::lossless(&other.rx_ns, &["host", "stats", &link.rx.ifname]);
    assert!(
        format!("{:#}", elsewhere.unwrap_err()).contains("not attached"),
        "another namespace adopted them"
    );
    assert!(legacy.exists());

    // In its own namespace: adopted by the first command, and everything works on.
    link.rx_stats();
    assert!(!legacy.exists() && dir.exists(), "not adopted");
    let after = entries_of(&link);
    assert_eq!(after[0]["netns"]["current"], true, "{after:?}");
    attached.detach().unwrap();
    assert_clean(&link, "after detach");
}

/// Programs pinned by a build before NAK counting (adopted after an upgrade) have no NAK maps:
/// `host stats` still reads every other counter, leaves the NAK fields out rather than
/// reporting zeros, and says why; a hook not attached leaves its direction out the same way.
#[test]
fn pins_without_the_nak_maps_still_give_the_other_counters() {
    if !privileged("pins_without_the_nak_maps_still_give_the_other_counters") {
        return;
    }
    let link = Link::new().unwrap();
    let attached = link.attach_rx(&["--mode", "skb", "--hooks", "xdp"]);
    let stats = link.rx_stats();
    assert!(stats["nak_received"].is_object(), "{stats}");
    assert!(
        stats.get("nak_sent").is_none(),
        "no tc hook, no sent: {stats}"
    );

    let dir = rx_pin_dir(&link);
    for def in [&maps::NAK_COUNTERS.spec, &maps::NAK_QPS.spec] {
        std::fs::remove_file(dir.map(def)).unwrap();
    }
    let stats = link.rx_stats();
    for key in ["nak_received", "nak_sent"] {
        assert!(stats.get(key).is_none(), "{key}: {stats}");
    }
    assert_eq!(stats["nak_qps"], Value::Array(Vec::new()), "{stats}");
    assert_eq!(
        stats["per_priority"].as_array().map(Vec::len),
        Some(8),
        "{stats}"
    );
    let table = Link::lossless(&link.rx_ns, &["host", "stats", &link.rx.ifname]).unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("nak not counted"), "{table}");
    attached.detach().unwrap();
    assert_clean(&link, "after detach");
}
