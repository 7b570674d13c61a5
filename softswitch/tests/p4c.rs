//! Every program the project says BMv2 runs (`testkit::bmv2::bmv2_programs`: dataplane-p4's,
//! the integration tests', softswitch's corpus but for the programs listed there with their
//! reasons) compiles with p4c's BMv2 back end (`p4c-bm2-ss --p4runtime-files`) without an
//! error or a warning, and the P4Info softswitch computes for it is p4c's, entity for entity:
//! names, ids, aliases, annotations, match fields, action references and parameters, sizes,
//! externs, controller metadata, digests and their types.
//!
//! Needs p4c (`LOSSLESS_P4REF` or PATH): skipped without it outside CI, a failure under CI.

use std::collections::BTreeMap;
use std::path::Path;

use p4runtime::p4::config::v1::P4Info;
use prost::{Message, Name};
use softswitch_frontend::source::SourceMap;

fn softswitch_p4info(program: &Path) -> Result<P4Info, String> {
    let mut map = SourceMap::new();
    let text = std::fs::read_to_string(program).map_err(|e| e.to_string())?;
    let file = map.add(program.display().to_string(), text);
    let compiled = softswitch_frontend::compile(&mut map, file).map_err(|d| d.render(&map))?;
    softswitch_server::p4info::p4info(&compiled, &map).map_err(|d| d.render(&map))
}

/// Each entity of a kind in protobuf text, by id.
fn by_id<T: Message + Name>(entities: &[T], id: impl Fn(&T) -> u32) -> BTreeMap<u32, String> {
    entities
        .iter()
        .map(|e| (id(e), p4runtime::format::to_text(e)))
        .collect()
}

/// Every entity of `info`, as (kind, id) → its text.
fn entities(info: &P4Info) -> BTreeMap<(&'static str, u32), String> {
    fn preamble_id(p: &Option<p4runtime::p4::config::v1::Preamble>) -> u32 {
        p.as_ref().map_or(0, |p| p.id)
    }
    let mut all = BTreeMap::new();
    let mut add = |kind: &'static str, entities: BTreeMap<u32, String>| {
        all.extend(entities.into_iter().map(|(id, text)| ((kind, id), text)));
    };
    // The entities with a preamble, by its id: (kind, field of P4Info).
    macro_rules! add_by_preamble {
        ($($kind:literal: $field:ident),* $(,)?) => {
            $(add($kind, by_id(&info.$field, |e| preamble_id(&e.preamble)));)*
        };
    }
    add_by_preamble!(
        "table": tables,
        "action": actions,
        "action_profile": action_profiles,
        "counter": counters,
        "direct_counter": direct_counters,
        "meter": meters,
        "direct_meter": direct_meters,
        "controller_packet_metadata": controller_packet_metadata,
        "value_set": value_sets,
        "register": registers,
        "digest": digests,
    );
    add("extern", by_id(&info.externs, |e| e.extern_type_id));
    // p4c writes an empty type_info for some programs and none for others; to any reader of
    // the message the two are the same.
    if let Some(types) = info
        .type_info
        .as_ref()
        .filter(|t| **t != Default::default())
    {
        add(
            "type_info",
            BTreeMap::from([(0, p4runtime::format::to_text(types))]),
        );
    }
    all
}

/// The first line where two texts differ, with its neighbours.
fn first_difference(ours: &str, p4c: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), p4c.lines().collect());
    let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    format!(
        "at line {}: softswitch has {:?}, p4c has {:?}",
        at + 1,
        a.get(at).unwrap_or(&"(end)"),
        b.get(at).unwrap_or(&"(end)")
    )
}

/// What differs between softswitch's and p4c's P4Info of one program.
fn differences(ours: &P4Info, p4c: &P4Info) -> Vec<String> {
    let (ours, p4c) = (entities(ours), entities(p4c));
    let mut out = Vec::new();
    for (key, text) in &p4c {
        match ours.get(key) {
            None => out.push(format!("{} {}: only p4c has it:\n{text}", key.0, key.1)),
            Some(mine) if mine != text => out.push(format!(
                "{} {}: {}",
                key.0,
                key.1,
                first_difference(mine, text)
            )),
            Some(_) => {}
        }
    }
    for (key, text) in &ours {
        if !p4c.contains_key(key) {
            out.push(format!(
                "{} {}: only softswitch has it:\n{text}",
                key.0, key.1
            ));
        }
    }
    out
}

/// What is wrong with `program`: p4c's errors or warnings, or a P4Info unlike softswitch's.
fn check(toolchain: &p4toolchain::Toolchain, program: &Path) -> Vec<String> {
    let shown = program.display();
    let compiled = match testkit::bmv2::compiled(toolchain, program) {
        Ok(c) => c,
        Err(e) => return vec![e.to_string()],
    };
    let mut failures = Vec::new();
    if !compiled.warnings.is_empty() {
        failures.push(format!(
            "{shown}: p4c warns:\n{}",
            compiled.warnings.join("\n")
        ));
    }
    let p4c = std::fs::read(&compiled.p4info_binary)
        .map_err(|e| e.to_string())
        .and_then(|bytes| P4Info::decode(bytes.as_slice()).map_err(|e| e.to_string()));
    match p4c.and_then(|p4c| Ok((softswitch_p4info(program)?, p4c))) {
        Ok((ours, p4c)) => {
            let diff = differences(&ours, &p4c);
            if !diff.is_empty() {
                failures.push(format!(
                    "{shown}: softswitch's P4Info is not p4c's:\n{}",
                    diff.join("\n")
                ));
            }
        }
        Err(e) => failures.push(format!("{shown}: {e}")),
    }
    failures
}

#[test]
fn every_bmv2_program_compiles_with_p4c_and_has_p4cs_p4info() {
    let test = "every_bmv2_program_compiles_with_p4c_and_has_p4cs_p4info";
    let Some((toolchain, programs)) = testkit::bmv2::toolchain_and_programs_or_skip(test) else {
        return;
    };
    // Two compiles at a time (p4c is single-threaded; the machine has two cores).
    let failures: Vec<String> = programs
        .chunks(2)
        .flat_map(|pair| {
            std::thread::scope(|scope| {
                let running: Vec<_> = pair
                    .iter()
                    .map(|program| scope.spawn(move || check(toolchain, program)))
                    .collect();
                let done: Vec<Vec<String>> = running
                    .into_iter()
                    .map(|r| r.join().expect("no panic"))
                    .collect();
                done
            })
        })
        .flatten()
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
