//! P4Info: reading p4c's P4Info files, finding tables, actions, counters and registers by name
//! ([`super::names`]) and by id, and describing a program in a few lines.

use std::{fmt::Write as _, path::Path};

use anyhow::{bail, Context as _};
use p4runtime::p4::config::v1::{
    action::Param, counter_spec::Unit, match_field, p4_bitstring_like_type_spec, p4_data_type_spec,
    Action, Counter, DirectCounter, MatchField, P4Info, Preamble, Register, Table,
};
use prost::Message as _;

use crate::{
    names::{resolve, Candidate, NameError},
    render::plural,
};

/// Reads a P4Info file in any of the formats p4c writes (`--p4runtime-files`): binary protobuf
/// (`.bin`, `.pb`), protobuf's JSON mapping (`.json`), else protobuf text format (`.txt`,
/// `.txtpb`, `.pbtxt`, ...).
pub fn read_file(path: &Path) -> anyhow::Result<P4Info> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.is_empty() {
        bail!("{} is empty, not a P4Info file", path.display());
    }
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    let parsed = match extension {
        "bin" | "pb" => P4Info::decode(bytes.as_slice()).map_err(anyhow::Error::from),
        "json" => std::str::from_utf8(&bytes)
            .map_err(anyhow::Error::from)
            .and_then(|text| Ok(p4runtime::format::from_json(text)?)),
        _ => std::str::from_utf8(&bytes)
            .map_err(anyhow::Error::from)
            .and_then(|text| Ok(p4runtime::format::from_text(text)?)),
    };
    parsed.with_context(|| format!("{} is not a P4Info file", path.display()))
}

/// An entity of P4Info that starts with a preamble (id, name, alias).
pub trait Named {
    /// Its preamble.
    fn preamble(&self) -> Option<&Preamble>;

    /// Its fully qualified name ("" without a preamble).
    fn name(&self) -> &str {
        self.preamble().map_or("", |p| p.name.as_str())
    }

    /// Its id (0 without a preamble).
    fn id(&self) -> u32 {
        self.preamble().map_or(0, |p| p.id)
    }

    /// A candidate for name resolution that resolves to `item`.
    fn candidate<U>(&self, item: U) -> Candidate<'_, U> {
        Candidate {
            name: self.name(),
            alias: self.preamble().map_or("", |p| p.alias.as_str()),
            item,
        }
    }
}

macro_rules! named {
    ($($t:ty),*) => {$(
        impl Named for $t {
            fn preamble(&self) -> Option<&Preamble> {
                self.preamble.as_ref()
            }
        }
    )*};
}
named!(Table, Action, Counter, DirectCounter, Register);

/// Finds the entity of `kind` that `name` names.
pub fn by_name<'a, T: Named>(kind: &str, items: &'a [T], name: &str) -> Result<&'a T, NameError> {
    resolve(kind, name, items.iter().map(|item| item.candidate(item)))
}

/// The entity with this id.
pub fn by_id<T: Named>(items: &[T], id: u32) -> Option<&T> {
    items.iter().find(|item| item.id() == id)
}

/// A counter of either kind.
#[derive(Clone, Copy, Debug)]
pub enum AnyCounter<'a> {
    /// A counter array, read by index.
    Indirect(&'a Counter),
    /// A direct counter, one cell per entry of its table.
    Direct(&'a DirectCounter),
}

impl Named for AnyCounter<'_> {
    fn preamble(&self) -> Option<&Preamble> {
        match self {
            AnyCounter::Indirect(c) => c.preamble(),
            AnyCounter::Direct(c) => c.preamble(),
        }
    }
}

/// Finds a counter, indirect or direct, by name.
pub fn counter<'a>(p4info: &'a P4Info, name: &str) -> Result<AnyCounter<'a>, NameError> {
    let candidates = all_counters(p4info);
    resolve("counter", name, candidates.iter().map(|c| c.candidate(*c)))
}

/// Every counter of the program, indirect ones first.
pub fn all_counters(p4info: &P4Info) -> Vec<AnyCounter<'_>> {
    let indirect = p4info.counters.iter().map(AnyCounter::Indirect);
    indirect
        .chain(p4info.direct_counters.iter().map(AnyCounter::Direct))
        .collect()
}

/// A match field of `table` by name (or unique dotted suffix).
pub fn match_field<'a>(table: &'a Table, name: &str) -> Result<&'a MatchField, NameError> {
    let kind = format!("match field of {}", table.name());
    by_plain_name(&kind, &table.match_fields, name, |f| &f.name)
}

/// A parameter of `action` by name.
pub fn param<'a>(action: &'a Action, name: &str) -> Result<&'a Param, NameError> {
    let kind = format!("parameter of {}", action.name());
    by_plain_name(&kind, &action.params, name, |p| &p.name)
}

/// Finds one of `items`, which have a name and no alias, by name.
fn by_plain_name<'a, T>(
    kind: &str,
    items: &'a [T],
    name: &str,
    name_of: impl Fn(&'a T) -> &'a str,
) -> Result<&'a T, NameError> {
    let candidates = items.iter().map(|item| Candidate {
        name: name_of(item),
        alias: "",
        item,
    });
    resolve(kind, name, candidates)
}

/// A match field's kind, if it is one of P4Runtime's standard kinds.
pub fn match_kind(field: &MatchField) -> Option<match_field::MatchType> {
    match field.r#match {
        Some(match_field::Match::MatchType(kind)) => match_field::MatchType::try_from(kind).ok(),
        _ => None,
    }
}

/// The bit width of a register's cells, if they are bitstrings.
pub fn register_bitwidth(register: &Register) -> Option<u32> {
    let spec = register.type_spec.as_ref()?.type_spec.as_ref()?;
    let p4_data_type_spec::TypeSpec::Bitstring(bits) = spec else {
        return None;
    };
    match bits.type_spec.as_ref()? {
        p4_bitstring_like_type_spec::TypeSpec::Bit(b) => u32::try_from(b.bitwidth).ok(),
        p4_bitstring_like_type_spec::TypeSpec::Int(i) => u32::try_from(i.bitwidth).ok(),
        p4_bitstring_like_type_spec::TypeSpec::Varbit(v) => u32::try_from(v.max_bitwidth).ok(),
    }
}

/// A few lines that say what a program has: tables with keys and actions, counters, registers.
pub fn describe(p4info: &P4Info) -> String {
    let mut out = [
        plural(p4info.tables.len(), "table", "tables"),
        plural(p4info.actions.len(), "action", "actions"),
        plural(p4info.counters.len(), "counter", "counters"),
        plural(
            p4info.direct_counters.len(),
            "direct counter",
            "direct counters",
        ),
        plural(p4info.registers.len(), "register", "registers"),
    ]
    .join(", ");
    out.push('\n');
    for table in &p4info.tables {
        let _ = writeln!(
            out,
            "table {} (id {}, size {})",
            table.name(),
            table.id(),
            table.size
        );
        for field in &table.match_fields {
            let kind = match_kind(field).map_or("other", |k| match k {
                match_field::MatchType::Exact => "exact",
                match_field::MatchType::Lpm => "lpm",
                match_field::MatchType::Ternary => "ternary",
                match_field::MatchType::Range => "range",
                match_field::MatchType::Optional => "optional",
                match_field::MatchType::Unspecified => "unspecified",
            });
            let _ = writeln!(out, "  key {} {kind} bit<{}>", field.name, field.bitwidth);
        }
        let actions: Vec<String> = table
            .action_refs
            .iter()
            .filter_map(|r| by_id(&p4info.actions, r.id))
            .map(action_signature)
            .collect();
        let _ = writeln!(out, "  actions {}", actions.join(", "));
    }
    for counter in &p4info.counters {
        let unit = counter.spec.as_ref().map_or(0, |s| s.unit);
        let _ = writeln!(
            out,
            "counter {} (id {}, {} cells, {})",
            counter.name(),
            counter.id(),
            counter.size,
            unit_name(unit)
        );
    }
    for counter in &p4info.direct_counters {
        let unit = counter.spec.as_ref().map_or(0, |s| s.unit);
        let table = by_id(&p4info.tables, counter.direct_table_id).map_or("?", Named::name);
        let _ = writeln!(
            out,
            "direct counter {} (id {}, of table {table}, {})",
            counter.name(),
            counter.id(),
            unit_name(unit)
        );
    }
    for register in &p4info.registers {
        let width = register_bitwidth(register).map_or("?".to_owned(), |w| w.to_string());
        let _ = writeln!(
            out,
            "register {} (id {}, {} cells, bit<{width}>)",
            register.name(),
            register.id(),
            register.size
        );
    }
    out
}

/// `MyIngress.ipv4_forward(dstAddr: bit<48>, port: bit<9>)`.
fn action_signature(action: &Action) -> String {
    let params: Vec<String> = action
        .params
        .iter()
        .map(|p| format!("{}: bit<{}>", p.name, p.bitwidth))
        .collect();
    format!("{}({})", action.name(), params.join(", "))
}

/// What a counter counts.
fn unit_name(unit: i32) -> &'static str {
    match Unit::try_from(unit) {
        Ok(Unit::Bytes) => "bytes",
        Ok(Unit::Packets) => "packets",
        Ok(Unit::Both) => "packets and bytes",
        _ => "unspecified unit",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use p4runtime::p4::config::v1::{
        action, ActionRef, CounterSpec, P4BitTypeSpec, P4BitstringLikeTypeSpec, P4DataTypeSpec,
    };

    fn preamble(id: u32, name: &str, alias: &str) -> Option<Preamble> {
        Some(Preamble {
            id,
            name: name.into(),
            alias: alias.into(),
            ..Default::default()
        })
    }

    fn field(id: u32, name: &str, bitwidth: i32, kind: match_field::MatchType) -> MatchField {
        MatchField {
            id,
            name: name.into(),
            bitwidth,
            r#match: Some(match_field::Match::MatchType(kind as i32)),
            ..Default::default()
        }
    }

    fn new_param(id: u32, name: &str, bitwidth: i32) -> action::Param {
        action::Param {
            id,
            name: name.into(),
            bitwidth,
            ..Default::default()
        }
    }

    /// A P4Info like p4c's for the tutorials' basic.p4, with an ACL table, a counter array, a
    /// direct counter and a register added.
    pub(crate) fn sample() -> P4Info {
        use match_field::MatchType::*;
        P4Info {
            tables: vec![
                Table {
                    preamble: preamble(37375156, "MyIngress.ipv4_lpm", "ipv4_lpm"),
                    match_fields: vec![field(1, "hdr.ipv4.dstAddr", 32, Lpm)],
                    action_refs: [28792405, 25652968, 21257015]
                        .map(|id| ActionRef {
                            id,
                            ..Default::default()
                        })
                        .to_vec(),
                    size: 1024,
                    direct_resource_ids: vec![330000001],
                    ..Default::default()
                },
                Table {
                    preamble: preamble(37000002, "MyIngress.acl", "acl"),
                    match_fields: vec![
                        field(1, "hdr.ipv4.srcAddr", 32, Ternary),
                        field(2, "hdr.udp.dstPort", 16, Range),
                        field(3, "standard_metadata.ingress_port", 9, Exact),
                        field(4, "hdr.ipv4.protocol", 8, Optional),
                    ],
                    action_refs: vec![ActionRef {
                        id: 16000003,
                        ..Default::default()
                    }],
                    size: 256,
                    ..Default::default()
                },
            ],
            actions: vec![
                Action {
                    preamble: preamble(28792405, "MyIngress.ipv4_forward", "ipv4_forward"),
                    params: vec![new_param(1, "dstAddr", 48), new_param(2, "port", 9)],
                },
                Action {
                    preamble: preamble(25652968, "MyIngress.drop", "drop"),
                    params: vec![],
                },
                Action {
                    preamble: preamble(21257015, "NoAction", "NoAction"),
                    params: vec![],
                },
                Action {
                    preamble: preamble(16000003, "MyIngress.deny", "deny"),
                    params: vec![new_param(1, "index", 32)],
                },
            ],
            counters: vec![Counter {
                preamble: preamble(302000001, "MyIngress.port_packets", "port_packets"),
                spec: Some(CounterSpec {
                    unit: Unit::Both as i32,
                }),
                size: 512,
                ..Default::default()
            }],
            direct_counters: vec![DirectCounter {
                preamble: preamble(330000001, "MyIngress.route_hits", "route_hits"),
                spec: Some(CounterSpec {
                    unit: Unit::Packets as i32,
                }),
                direct_table_id: 37375156,
            }],
            registers: vec![Register {
                preamble: preamble(369000001, "MyIngress.last_len", "last_len"),
                type_spec: Some(P4DataTypeSpec {
                    type_spec: Some(p4_data_type_spec::TypeSpec::Bitstring(
                        P4BitstringLikeTypeSpec {
                            type_spec: Some(p4_bitstring_like_type_spec::TypeSpec::Bit(
                                P4BitTypeSpec { bitwidth: 16 },
                            )),
                            ..Default::default()
                        },
                    )),
                }),
                size: 8,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn finds_entities_by_full_name_alias_and_suffix() {
        let p4info = sample();
        assert_eq!(
            by_name("table", &p4info.tables, "MyIngress.acl")
                .unwrap()
                .id(),
            37000002
        );
        assert_eq!(
            by_name("table", &p4info.tables, "ipv4_lpm").unwrap().id(),
            37375156
        );
        assert_eq!(
            by_name("action", &p4info.actions, "drop").unwrap().id(),
            25652968
        );
        assert_eq!(
            by_id(&p4info.actions, 16000003).unwrap().name(),
            "MyIngress.deny"
        );
        let error = by_name("table", &p4info.tables, "MyIngress.ipv4_lmp").unwrap_err();
        assert!(error
            .to_string()
            .starts_with("unknown table 'MyIngress.ipv4_lmp'"));
    }

    #[test]
    fn counters_of_both_kinds_by_name() {
        let p4info = sample();
        assert!(matches!(
            counter(&p4info, "port_packets"),
            Ok(AnyCounter::Indirect(_))
        ));
        assert!(matches!(
            counter(&p4info, "MyIngress.route_hits"),
            Ok(AnyCounter::Direct(_))
        ));
        let all = all_counters(&p4info);
        let names: Vec<&str> = all.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["MyIngress.port_packets", "MyIngress.route_hits"]);
    }

    #[test]
    fn fields_and_params_by_name() {
        let p4info = sample();
        let acl = &p4info.tables[1];
        assert_eq!(match_field(acl, "hdr.udp.dstPort").unwrap().id, 2);
        assert_eq!(match_field(acl, "ingress_port").unwrap().id, 3);
        let error = match_field(acl, "hdr.ipv4.dst").unwrap_err().to_string();
        assert!(
            error.starts_with("unknown match field of MyIngress.acl 'hdr.ipv4.dst'"),
            "{error}"
        );
        assert_eq!(param(&p4info.actions[0], "port").unwrap().bitwidth, 9);
        assert_eq!(register_bitwidth(&p4info.registers[0]), Some(16));
    }

    #[test]
    fn describes_a_program() {
        let text = describe(&sample());
        assert!(text.starts_with("2 tables, 4 actions, 1 counter, 1 direct counter, 1 register\n"));
        assert!(text.contains("table MyIngress.ipv4_lpm (id 37375156, size 1024)\n  key hdr.ipv4.dstAddr lpm bit<32>\n  actions MyIngress.ipv4_forward(dstAddr: bit<48>, port: bit<9>), MyIngress.drop(), NoAction()\n"), "{text}");
        assert!(text.contains(
            "counter MyIngress.port_packets (id 302000001, 512 cells, packets and bytes)"
        ));
        assert!(text.contains("direct counter MyIngress.route_hits (id 330000001, of table MyIngress.ipv4_lpm, packets)"));
        assert!(text.contains("register MyIngress.last_len (id 369000001, 8 cells, bit<16>)"));
    }

    #[test]
    fn reads_p4info_files_in_each_format() {
        let dir = std::env::temp_dir().join(format!("lossless-p4info-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p4info = sample();
        let files = [
            (
                "p.p4info.txtpb",
                p4runtime::format::to_text(&p4info).into_bytes(),
            ),
            (
                "p.p4info.json",
                p4runtime::format::to_json(&p4info).into_bytes(),
            ),
            ("p.p4info.bin", p4info.encode_to_vec()),
        ];
        for (name, bytes) in files {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(read_file(&path).unwrap(), p4info, "{name}");
        }
        let bad = dir.join("bad.txt");
        std::fs::write(&bad, "tables { preamble { idd: 1 } }").unwrap();
        let error = format!("{:#}", read_file(&bad).unwrap_err());
        assert!(
            error.contains("bad.txt is not a P4Info file") && error.contains("idd"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
