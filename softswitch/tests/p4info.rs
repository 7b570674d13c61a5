//! P4Info against p4c's: programs with the control-plane names of p4c samples must get p4c's
//! ids, aliases and layout (references in `tests/p4info/`, see its README), and bad `@id`s are
//! refused with their location.

use std::path::{Path, PathBuf};

use p4runtime::p4::config::v1::P4Info;
use p4runtime::p4info::fields_of;
use softswitch_frontend::source::SourceMap;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// Compiles `source` (named `name`) and returns its P4Info or the rendered error.
fn p4info_of(name: &str, source: String) -> Result<P4Info, String> {
    let mut map = SourceMap::new();
    let file = map.add(name, source);
    let program = softswitch_frontend::compile(&mut map, file).map_err(|d| d.render(&map))?;
    softswitch_server::p4info::p4info(&program, &map).map_err(|d| d.render(&map))
}

fn p4info(path: &str) -> P4Info {
    let path = fixture(path);
    let source = std::fs::read_to_string(&path).expect("fixture exists");
    p4info_of(&path.display().to_string(), source).unwrap_or_else(|e| panic!("{e}"))
}

/// The text p4c writes: its two comment lines, then the message.
fn p4c_text(info: &P4Info) -> String {
    format!(
        "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n{}",
        p4runtime::format::to_text(info)
    )
}

fn reference(name: &str) -> String {
    std::fs::read_to_string(fixture(&format!("p4info/{name}.p4c.p4info.txtpb"))).unwrap()
}

/// Every (name, id) of the entities that have a preamble.
fn ids(info: &P4Info) -> Vec<(String, u32)> {
    p4runtime::p4info::preambles(info)
        .map(|p| (p.name.clone(), p.id))
        .collect()
}

/// Asserts that each (name, id) of `expected` is among the entities of `info`.
fn has(info: &P4Info, expected: &[(&str, u32)]) {
    let ids = ids(info);
    for (name, id) in expected {
        assert!(
            ids.contains(&(name.to_string(), *id)),
            "{name} should have id {id}; got {ids:?}"
        );
    }
}

#[test]
fn the_tutorials_basic_program_gets_the_tutorials_ids() {
    let info = p4info("corpus/basic.p4");
    has(
        &info,
        &[
            ("MyIngress.ipv4_lpm", 37375156),
            ("MyIngress.ipv4_forward", 28792405),
            ("MyIngress.drop", 25652968),
            ("NoAction", 21257015),
        ],
    );
    let table = &info.tables[0];
    assert_eq!(table.match_fields[0].name, "hdr.ipv4.dstAddr");
    assert_eq!(table.match_fields[0].bitwidth, 32);
    let forward = info.actions.iter().find(|a| a.params.len() == 2).unwrap();
    assert_eq!(
        fields_of(&forward.params),
        [(1, "dstAddr", 48), (2, "port", 9)]
    );
}

#[test]
fn flowlet_matches_p4c_text_for_text() {
    let ours = p4c_text(&p4info("p4info/flowlet.p4"));
    // That p4c's output predates the initial_default_action field.
    let mut without_initial = String::new();
    let mut skipping = false;
    for line in ours.lines() {
        if line == "  initial_default_action {" {
            skipping = true;
        } else if skipping {
            skipping = line != "  }";
        } else {
            without_initial.push_str(line);
            without_initial.push('\n');
        }
    }
    assert_eq!(without_initial, reference("flowlet"));
}

#[test]
fn action_profiles_match_p4c_text_for_text() {
    assert_eq!(
        p4c_text(&p4info("p4info/profiles.p4")),
        reference("profiles")
    );
}

#[test]
fn digests_and_their_types_match_p4c() {
    let info = p4info("p4info/digests.p4");
    let reference = reference("digests");
    for (name, id) in ids(&info) {
        assert!(
            reference.contains(&format!("    id: {id}\n    name: \"{name}\"\n")),
            "{name} {id} is not in p4c's output"
        );
    }
    assert_eq!(ids(&info).len(), 12);
    let ours = p4c_text(&info);
    let from = |text: &str| text[text.find("digests {").unwrap()..].to_string();
    // p4c's core.p4 declares one more error than softswitch's.
    let expected = from(&reference).replace("    members: \"UnreachableState\"\n", "");
    assert_eq!(from(&ours), expected);
}

#[test]
fn counters_packet_io_and_digests_get_p4cs_ids() {
    let info = p4info("p4info/packetio.p4");
    has(
        &info,
        &[
            ("PreQosPipe.pre_qos_counter", 315693181),
            ("PostQosPipe.post_qos_counter", 302958180),
            ("acls", 325583051),
            ("packet_out", 75327753),
            ("packet_in", 80671331),
            ("ddn_digest_t", 396224266),
        ],
    );
    let packet_in = &info.controller_packet_metadata[1];
    assert_eq!(
        fields_of(&packet_in.metadata),
        [(1, "ingress_port", 9), (2, "_pad", 7)]
    );
    let acl = &info.tables[0];
    assert_eq!(acl.direct_resource_ids, [325583051]);
    assert_eq!(
        info.direct_counters[0].direct_table_id,
        acl.preamble.as_ref().unwrap().id
    );
    // @defaultonly on the reference, @name on the key.
    assert_eq!(acl.action_refs[2].scope, 2);
    assert_eq!(acl.match_fields[1].name, "eth_type");
}

const TINY: &str = r#"
#include <core.p4>
#include <v1model.p4>
struct H { } struct M { bit<8> k; }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) { state start { transition accept; } }
control I(inout H h, inout M m, inout standard_metadata_t s) {
    ANNOTATION_A action a() { }
    @id(0x01000009) action b(@id(3) bit<8> x, bit<8> y) { m.k = x + y; }
    ANNOTATION_T table t { key = { m.k: exact @id(7); } actions = { a; b; } }
    apply { t.apply(); }
}
control E(inout H h, inout M m, inout standard_metadata_t s) { apply { } }
control D(packet_out p, in H h) { apply { } }
control C(inout H h, inout M m) { apply { } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;

fn tiny(action_annotation: &str, table_annotation: &str) -> Result<P4Info, String> {
    let source = TINY
        .replace("ANNOTATION_A", action_annotation)
        .replace("ANNOTATION_T", table_annotation);
    p4info_of("tiny.p4", source)
}

#[test]
fn explicit_ids_get_their_prefix_and_field_ids_are_honoured() {
    let info = tiny("@id(5)", "@id(0x02000009) @name(\".top\")").unwrap();
    has(&info, &[("I.a", 0x0100_0005), ("top", 0x0200_0009)]);
    assert_eq!(info.tables[0].match_fields[0].id, 7);
    // Action parameters too, as p4c's field id allocator numbers them.
    let b = info
        .actions
        .iter()
        .find(|a| a.preamble.as_ref().unwrap().id == 0x0100_0009)
        .unwrap();
    let ids: Vec<(&str, u32)> = b.params.iter().map(|p| (p.name.as_str(), p.id)).collect();
    assert_eq!(ids, [("x", 3), ("y", 2)]);
}

#[test]
fn bad_ids_are_refused_where_they_are_written() {
    let err = tiny("@id(0x02000005)", "").unwrap_err();
    assert!(
        err.contains("tiny.p4:7:") && err.contains("wrong 8-bit prefix"),
        "{err}"
    );
    let err = tiny("@id(9)", "").unwrap_err();
    assert!(
        err.contains("tiny.p4:8:") && err.contains("more than one declaration"),
        "{err}"
    );
}

#[test]
fn hidden_entities_are_left_out() {
    let info = tiny("", "@hidden").unwrap();
    assert!(info.tables.is_empty());
    assert_eq!(info.actions.len(), 2);
}
