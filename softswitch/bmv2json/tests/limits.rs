//! Hostile and malformed BMv2 JSON: each is refused with an error that says why, never a panic,
//! and a well-formed program (basic.p4 as p4c compiles it, the fuzz corpus' seed) loads.
#![forbid(unsafe_code)]

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
    p["header_types"][2]["fields"][0][1] = json!(2049);
    refused(&p, "fields of up to 2048");

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

/// What an error quotes of the JSON is cut and escaped: a million-digit `hexstr` is named, not
/// copied into a megabyte of error.
#[test]
fn errors_quoting_the_json_are_cut_and_escaped() {
    let mut p = basic();
    p["actions"][0]["primitives"] = json!([{"op": "assign", "parameters": [
        {"type": "field", "value": ["standard_metadata", "egress_spec"]},
        {"type": "hexstr", "value": format!("0x{}", "1".repeat(1_000_000))}]}]);
    let e = softswitch_bmv2json::load(&serde_json::to_vec(&p).unwrap()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("a hexstr: 0x111"), "{}", &text[..200]);
    assert!(
        text.len() < 2 * softswitch_bmv2json::limits::MAX_ERROR_CHARS,
        "{} bytes",
        text.len()
    );
    assert!(
        text.ends_with("bytes more not shown)"),
        "{}",
        &text[text.len() - 100..]
    );
    let mut p = basic();
    p["actions"][0]["primitives"] = json!([{"op": "no\u{1b}[2J\nforged", "parameters": []}]);
    let text = softswitch_bmv2json::load(&serde_json::to_vec(&p).unwrap())
        .unwrap_err()
        .to_string();
    assert!(!text.contains('\u{1b}') && !text.contains('\n'), "{text}");
}

/// A field of a stack element picked at run time (`access_field` of a
/// `dereference_header_stack`), as p4c writes `hdr.s[i].f = ..`: `p` with ethernet made a
/// one-element stack `s` and an action writing field `field` of `s[stack]`.
fn run_time_index(stack: &str, field: u64) -> Value {
    let mut p = basic();
    p["header_stacks"] = json!([{"name": "s", "id": 0, "header_type": "ethernet_t",
        "size": 1, "header_ids": [2]}]);
    let element = json!({"type": "expression", "value": {"op": "dereference_header_stack",
        "left": {"type": "header_stack", "value": stack},
        "right": {"type": "field", "value": ["standard_metadata", "ingress_port"]}}});
    let dst = json!({"type": "expression", "value": {"type": "expression",
        "value": {"op": "access_field", "left": element, "right": field}}});
    p["actions"][0]["primitives"] = json!([{"op": "assign",
        "parameters": [dst, {"type": "hexstr", "value": "0x01"}]}]);
    p
}

#[test]
fn run_time_stack_indices_load_and_bad_ones_are_refused() {
    let bytes = serde_json::to_vec(&run_time_index("s", 2)).unwrap();
    softswitch_bmv2json::load(&bytes).unwrap();
    refused(&run_time_index("t", 0), "no header stack is called t");
    refused(&run_time_index("s", 3), "access_field 3");
    let mut p = run_time_index("s", 0);
    let mut deep = json!({"op": "access_field", "left": 0, "right": 0});
    for _ in 0..100 {
        deep = json!({"type": "expression", "value": deep});
    }
    p["actions"][0]["primitives"][0]["parameters"][0] = deep;
    refused(&p, "MAX_EXPR_DEPTH");
}

#[test]
fn malformed_header_union_stacks_are_refused() {
    let with = |stacks: Value, types: Value| {
        let mut p = basic();
        p["header_unions"] = json!([{"name": "u[0]", "id": 0, "union_type": "u_t",
            "header_ids": [2, 3]}]);
        p["header_union_types"] = types;
        p["header_union_stacks"] = stacks;
        p
    };
    let types =
        json!([{"name": "u_t", "id": 0, "headers": [["e", "ethernet_t"], ["i", "ipv4_t"]]}]);
    let stack = |ids: Value| {
        json!([{"name": "u", "id": 0, "union_type": "u_t", "size": 1,
        "header_union_ids": ids}])
    };
    let bytes = serde_json::to_vec(&with(stack(json!([0])), types.clone())).unwrap();
    softswitch_bmv2json::load(&bytes).unwrap();
    refused(
        &with(stack(json!([7])), types.clone()),
        "union id 7, which does not exist",
    );
    refused(&with(stack(json!([0, 0])), types.clone()), "in two places");
    refused(&with(stack(json!([])), types), "has no elements");
    refused(
        &with(stack(json!([0])), json!([])),
        "unknown union type u_t",
    );
}

#[test]
fn digests_of_learn_lists_load_and_bad_ones_are_refused() {
    let with = |lists: Value, list_id: &str| {
        let mut p = basic();
        p["learn_lists"] = lists;
        p["actions"][0]["primitives"] = json!([{"op": "generate_digest", "parameters": [
            {"type": "hexstr", "value": "0x1"}, {"type": "hexstr", "value": list_id}]}]);
        p
    };
    let list = |id: u64, field: &str| {
        json!({"id": id, "name": "learn_t",
        "elements": [{"type": "field", "value": ["ethernet", field]}]})
    };
    let bytes = serde_json::to_vec(&with(json!([list(1, "srcAddr")]), "0x1")).unwrap();
    let loaded = softswitch_bmv2json::load(&bytes).unwrap();
    assert_eq!(loaded.digests[0].name, "learn_t");
    assert_eq!(loaded.digests[0].fields, [("srcAddr".to_string(), 48)]);
    refused(
        &with(json!([list(1, "srcAddr")]), "0x2"),
        "no learn list has id 2",
    );
    refused(
        &with(json!([list(1, "nothing")]), "0x1"),
        "has no field nothing",
    );
    refused(
        &with(json!([list(1, "srcAddr"), list(1, "dstAddr")]), "0x1"),
        "two learn lists",
    );
}

/// A learn list of 1024 fields used by 257 `generate_digest`s is a 100 KB JSON whose lowered
/// program would hold 263,168 copied fields: without a bound on copies, a 2 MB JSON (16384 x
/// 16384) needed about 13 GB.
#[test]
fn field_lists_copied_into_many_primitives_are_bounded() {
    let mut p = basic();
    let elements: Vec<Value> = (0..1024)
        .map(|_| json!({"type": "field", "value": ["ethernet", "srcAddr"]}))
        .collect();
    p["learn_lists"] = json!([{"id": 1, "name": "learn_t", "elements": elements}]);
    let digest = json!({"op": "generate_digest", "parameters": [
        {"type": "hexstr", "value": "0x1"}, {"type": "hexstr", "value": "0x1"}]});
    let uses = softswitch_bmv2json::limits::MAX_COPIED_FIELDS / 1024 + 1;
    p["actions"][0]["primitives"] = Value::Array(vec![digest.clone(); uses]);
    refused(&p, "MAX_COPIED_FIELDS");
    // Well within the bound (the program's checksums copy fields too), the same list loads.
    p["actions"][0]["primitives"] = Value::Array(vec![digest; uses / 2]);
    softswitch_bmv2json::load(&serde_json::to_vec(&p).unwrap()).unwrap();
}

#[test]
fn control_flow_cycles_are_refused() {
    // A conditional that leads to itself, and a table whose next node is itself.
    let mut p = basic();
    p["pipelines"][0]["conditionals"][0]["true_next"] = json!("node_2");
    refused(&p, "a cycle through node node_2");
    let mut p = basic();
    let table = &mut p["pipelines"][0]["tables"][0];
    table["base_default_next"] = json!("MyIngress.ipv4_lpm");
    for next in table["next_tables"].as_object_mut().unwrap().values_mut() {
        *next = json!("MyIngress.ipv4_lpm");
    }
    refused(&p, "a cycle through node MyIngress.ipv4_lpm");
}

/// 64 conditionals in a row, each branching two ways to the next: lowered once per path, they
/// would be 2^64 statements; lowered once after the branches that meet at them, 64 `if`s.
#[test]
fn branches_that_meet_again_are_lowered_once() {
    let mut p = basic();
    let pipeline = &mut p["pipelines"][0];
    let first = pipeline["conditionals"][0].clone();
    let init = pipeline["init_table"].clone();
    let mut chain: Vec<Value> = (0..64)
        .map(|i| {
            let next = if i == 63 {
                init.clone()
            } else {
                json!(format!("c{}", i + 1))
            };
            let mut c = first.clone();
            c["name"] = json!(format!("c{i}"));
            c["true_next"] = next.clone();
            c["false_next"] = next;
            c
        })
        .collect();
    let conditionals = pipeline["conditionals"].as_array_mut().unwrap();
    conditionals.append(&mut chain);
    pipeline["init_table"] = json!("c0");
    let loaded = softswitch_bmv2json::load(&serde_json::to_vec(&p).unwrap()).unwrap();
    let ingress = &loaded.program.controls[1].body;
    assert_eq!(
        ingress.len(),
        64 + 1,
        "the 64 ifs, then the original pipeline's first node"
    );
}

/// A program whose ethernet header ends in a field `wide` of `bits` bits and whose first action
/// runs `primitive`.
fn wide_with(bits: u32, primitive: Value) -> Value {
    let mut p = basic();
    p["header_types"][2]["fields"]
        .as_array_mut()
        .unwrap()
        .push(json!(["wide", bits, false]));
    p["actions"][0]["primitives"] = json!([primitive]);
    p
}

fn wide_field() -> Value {
    json!({"type": "field", "value": ["ethernet", "wide"]})
}

fn op(op: &str, left: Value, right: Value) -> Value {
    json!({"type": "expression", "value": {"op": op, "left": left, "right": right}})
}

#[test]
fn fields_wider_than_128_bits_load_and_what_they_cannot_do_is_named() {
    let assign = |value: Value| json!({"op": "assign", "parameters": [wide_field(), value]});
    let hex = |s: &str| json!({"type": "hexstr", "value": s});
    // A copy, bitwise operators and shifts by constants load.
    for value in [
        hex("0x01"),
        op(
            "|",
            op("&", wide_field(), hex(&format!("0x{}", "f".repeat(75)))),
            hex("0x1"),
        ),
    ] {
        let bytes = serde_json::to_vec(&wide_with(300, assign(value))).unwrap();
        softswitch_bmv2json::load(&bytes).unwrap();
    }
    refused(
        &wide_with(300, assign(op("+", wide_field(), hex("0x01")))),
        "operation + on a value wider than 128 bits is not supported yet",
    );
    refused(
        &wide_with(300, assign(op(">>", wide_field(), hex("0x08")))),
        "a wide field is written from a shift of itself",
    );
    refused(
        &wide_with(
            300,
            assign(op(
                ">>",
                wide_field(),
                json!({"type": "field", "value": ["ethernet", "etherType"]}),
            )),
        ),
        "shifted by a constant only",
    );
    refused(
        &wide_with(300, assign(hex(&format!("0x1{}", "0".repeat(600))))),
        "has more than 2048 bits",
    );
}
