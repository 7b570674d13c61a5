//! `lossless p4 entries add|modify|delete|clear`, `entries apply --modify` and `lossless p4 cli`
//! against softswitch between the P4 tutorials' two hosts: entries written in
//! simple_switch_CLI's words carry ping (read off the hosts' kernels) and read back over
//! P4Runtime as written; a runtime JSON applies twice with --modify; a commands.txt routes.

use lossless_tests::{bed::privileged, switch::program as p4_file, tutorial_bed::TutorialBed};
use serde_json::{json, Value};

/// For a test that can run ([`privileged`]), forward.p4 on a fresh softswitch, no entries.
fn bare_bed(test: &str) -> Option<TutorialBed> {
    privileged(test).then(|| {
        let bed = TutorialBed::new().unwrap();
        let program = p4_file("forward.p4");
        bed.p4_ok(&["pipeline", "set", "--program", program.to_str().unwrap()]);
        bed
    })
}

/// `entries list ipv4_lpm --json`'s entries that are not the default, by match.
fn routes(bed: &TutorialBed) -> Vec<Value> {
    let listed = bed.p4_json(&["entries", "list", "ipv4_lpm"]);
    let mut routes: Vec<Value> = listed["table_entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("default_action").is_none())
        .cloned()
        .collect();
    routes.sort_by_key(|e| e["match"].to_string());
    routes
}

/// A route as `entries list --json` shows it.
fn route(ip: &str, mac: &str, port: u64) -> Value {
    json!({"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": [ip, 32]},
           "action_name": "MyIngress.ipv4_forward",
           "action_params": {"dstAddr": mac, "port": port}})
}

/// The bed pings through the two routes `how` installed, and they are the only ones listed.
fn assert_both_routes(bed: &TutorialBed, how: &str) {
    bed.assert_pings(3, &format!("through {how}"));
    assert_eq!(
        routes(bed),
        vec![
            route("10.0.1.1", "08:00:00:00:01:11", 1),
            route("10.0.2.2", "08:00:00:00:02:22", 2)
        ]
    );
}

#[test]
fn one_entry_at_a_time_in_table_add_words() {
    let Some(bed) = bare_bed("one_entry_at_a_time_in_table_add_words") else {
        return;
    };
    let add = |words: &str| {
        let mut args = vec!["entries", "add"];
        args.extend(words.split_whitespace());
        bed.p4_ok(&args)
    };
    // Ours, and simple_switch_CLI's line pasted with its `table_add`.
    let said = add("ipv4_lpm ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 2");
    assert!(said.starts_with("added MyIngress.ipv4_lpm"), "{said}");
    add("table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.1.1/32 => 08:00:00:00:01:11 1");
    assert_both_routes(&bed, "added entries");

    // A second add of the same key is refused; modify changes the action's data.
    let refused = bed.p4_refused(&[
        "entries",
        "add",
        "ipv4_lpm",
        "ipv4_forward",
        "10.0.2.2/32",
        "=>",
        "08:00:00:00:02:22",
        "2",
    ]);
    assert!(refused.contains("ALREADY_EXISTS"), "{refused}");
    bed.p4_ok(&[
        "entries",
        "modify",
        "ipv4_lpm",
        "ipv4_forward",
        "10.0.2.2/32",
        "=>",
        "08:00:00:00:02:99",
        "2",
    ]);
    assert_eq!(routes(&bed)[1], route("10.0.2.2", "08:00:00:00:02:99", 2));

    // Wrong words are refused before anything is written, saying what was expected.
    let refused = bed.p4_refused(&["entries", "add", "ipv4_lpm", "ipv4_forward", "10.0.2.3/32"]);
    assert!(
        refused.contains("takes 2 parameter(s) (dstAddr, port), not 0"),
        "{refused}"
    );

    // Delete by key, then clear: the table is empty.
    bed.p4_ok(&["entries", "delete", "ipv4_lpm", "10.0.2.2/32"]);
    assert_eq!(
        routes(&bed),
        vec![route("10.0.1.1", "08:00:00:00:01:11", 1)]
    );
    let cleared = bed.p4_json(&["entries", "clear", "ipv4_lpm"]);
    assert_eq!(cleared["deleted"], 1, "{cleared}");
    assert_eq!(routes(&bed), Vec::<Value>::new());

    // A runtime JSON twice: refused without --modify, idempotent with it.
    let file = p4_file("forward-runtime.json");
    let file = file.to_str().unwrap();
    bed.p4_ok(&["entries", "apply", file]);
    let refused = bed.p4_refused(&["entries", "apply", file]);
    assert!(refused.contains("ALREADY_EXISTS"), "{refused}");
    bed.p4_ok(&["entries", "apply", "--modify", file]);
    bed.p4_ok(&["entries", "apply", "--modify", file]);
    assert_eq!(routes(&bed).len(), 2);
    bed.assert_pings(3, "after re-applying");
}

#[test]
fn a_simple_switch_cli_commands_file_routes() {
    let Some(bed) = bare_bed("a_simple_switch_cli_commands_file_routes") else {
        return;
    };
    let commands = bed.dir.join("commands.txt");
    std::fs::write(
        &commands,
        "# the tutorials' routes, as simple_switch_CLI takes them\n\
         table_set_default ipv4_lpm drop\n\
         \n\
         table_add ipv4_lpm ipv4_forward 10.0.1.1/32 => 08:00:00:00:01:11 1\n\
         table_add ipv4_lpm ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 2  # h2\n\
         register_write last_length 7 77\n\
         mc_mgrp_create 1\n\
         mc_node_create 0 1 2\n\
         mc_node_associate 1 0\n\
         mirroring_add 5 2\n",
    )
    .unwrap();
    let said = bed.p4_ok(&["cli", commands.to_str().unwrap()]);
    assert!(said.contains("node created with handle 0"), "{said}");
    assert_both_routes(&bed, "cli routes");
    let cell = bed.p4_json(&["registers", "read", "last_length", "--index", "7"]);
    assert_eq!(cell[0]["value"], 77, "{cell}");

    // A failing line stops the run, and its error names the file's line.
    std::fs::write(
        &commands,
        "table_clear ipv4_lpm\n# nothing\ntable_add ipv4_lpm ipv4_forward 10.0.9.9 => 1 2\n",
    )
    .unwrap();
    let refused = bed.p4_refused(&["cli", commands.to_str().unwrap()]);
    assert!(refused.contains("commands.txt:3: table_add"), "{refused}");
    assert!(refused.contains("VALUE/PREFIX_LENGTH"), "{refused}");
    assert_eq!(routes(&bed), Vec::<Value>::new(), "line 1 ran");
    let refused = {
        std::fs::write(&commands, "set_queue_depth 64\n").unwrap();
        bed.p4_refused(&["cli", commands.to_str().unwrap()])
    };
    assert!(
        refused.contains("not a command lossless p4 cli runs"),
        "{refused}"
    );
}
