//! Hostile and malformed BMv2 JSON: each is refused with an error that says why, never a panic,
//! and a well-formed program (basic.p4 as p4c compiles it, the fuzz corpus' seed) loads.

use serde_json::{json, Value};

fn basic() -> Value {
    serde_json::from_str(include_str!("../../../fuzz/corpus/bmv2_json/basic.json"))
        .expect("the seed is JSON")
}

fn refused(program: &Value, says: &str) {
    let bytes = serde_json::to_vec(program).unwrap();
    match softswitch_bmv2json::load(&bytes) {
        Ok(_) => panic!("loaded a program that should be refused ({says})"),
        Err(e) => assert!(e.to_string().contains(says), "{e} does not say {says:?}"),
    }
}

#[test]
fn basic_loads_and_is_recognised() {
    let bytes = serde_json::to_vec(&basic()).unwrap();
    assert!(softswitch_bmv2json::looks_like_bmv2_json(&bytes));
    assert!(!softswitch_bmv2json::looks_like_bmv2_json(
        b"#include <core.p4>\n"
    ));
    let loaded = softswitch_bmv2json::load(&bytes).unwrap();
    assert_eq!(loaded.program.tables[0].name, "MyIngress.ipv4_lpm");
}

#[test]
fn malformed_and_oversized_inputs_are_refused() {
    assert!(softswitch_bmv2json::load(b"{\"header_types\": [").is_err());
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    assert!(softswitch_bmv2json::load(deep.as_bytes()).is_err());
    let big = vec![b' '; softswitch_bmv2json::limits::MAX_JSON_BYTES + 1];
    let e = softswitch_bmv2json::load(&big).unwrap_err();
    assert!(e.to_string().contains("MAX_JSON_BYTES"), "{e}");
    refused(&json!([1, 2]), "must be a JSON object");
}

#[test]
fn unsupported_and_inconsistent_programs_are_refused() {
    let mut p = basic();
    p["header_types"][2]["fields"][0][1] = json!(300);
    refused(&p, "fields of up to 128");

    let mut p = basic();
    p["actions"][0]["primitives"] = json!([{"op": "no_such_primitive", "parameters": []}]);
    refused(&p, "primitive no_such_primitive is not supported");

    let mut p = basic();
    p["pipelines"][0]["init_table"] = json!("nowhere");
    refused(&p, "unknown node nowhere");

    let mut p = basic();
    p["header_types"][2]["fields"] = json!((0..20000)
        .map(|i| json!([format!("f{i}"), 8, false]))
        .collect::<Vec<_>>());
    refused(&p, "MAX_OBJECTS");
}

#[test]
fn control_flow_cycles_are_refused() {
    // A conditional that leads to itself, and a table whose next node is itself.
    let mut p = basic();
    p["pipelines"][0]["conditionals"][0]["true_next"] = json!("node_2");
    refused(&p, "MAX_RUN_DEPTH");
    let mut p = basic();
    let table = &mut p["pipelines"][0]["tables"][0];
    table["base_default_next"] = json!("MyIngress.ipv4_lpm");
    for next in table["next_tables"].as_object_mut().unwrap().values_mut() {
        *next = json!("MyIngress.ipv4_lpm");
    }
    refused(&p, "MAX_LOWERED_NODES");
}
