//! P4Info for a compiled program, with p4c's conventions, so that a controller written against
//! p4c's P4Info for the same program works with ours: fully qualified names (`@name` honoured,
//! absolute with a leading dot or relative to the enclosing control), ids from [`ids`], `@id`
//! honoured (on action parameters and match fields too, else they count from 1), aliases, action reference
//! scopes, default actions, direct resources, action profiles, counters, meters, registers,
//! digests with their `type_info`, value sets and controller packet metadata.
//!
//! As in p4c, the actions listed are those a table refers to or a control calls; declarations
//! annotated `@hidden` keep their ids but are left out.

pub mod ids;
mod typespec;

use p4runtime::p4::config::v1 as p4i;
use p4runtime::p4::config::v1::p4_ids::Prefix;
use p4values::bytestring::padded;

use ids::Symbols;
use softswitch_core::ir::{self, CounterKind, InstanceKind, MatchKind, Program};
use softswitch_frontend::ast::Annotation;
use softswitch_frontend::cpinfo::{self, CpInfo};
use softswitch_frontend::diagnostic::Diagnostic;
use softswitch_frontend::source::{SourceMap, Span};
use softswitch_frontend::types::Type;

/// The architecture named in `pkg_info`.
pub const ARCH: &str = "v1model";

/// The P4Info of `compiled`, whose source is in `map`. Fails on a bad `@id` (wrong prefix,
/// duplicate), with the declaration's location.
pub fn p4info(
    compiled: &softswitch_frontend::Compiled,
    map: &SourceMap,
) -> Result<p4i::P4Info, Diagnostic> {
    P4InfoBuilder::new(&compiled.program, &compiled.control_plane, map)?.build()
}

struct P4InfoBuilder<'a> {
    program: &'a Program,
    cp: &'a CpInfo,
    map: &'a SourceMap,
    symbols: Symbols,
    /// How each action appears in P4Info.
    used_actions: Vec<ActionUse>,
}

impl<'a> P4InfoBuilder<'a> {
    fn new(
        program: &'a Program,
        control_plane: &'a CpInfo,
        map: &'a SourceMap,
    ) -> Result<Self, Diagnostic> {
        let mut b = P4InfoBuilder {
            program,
            cp: control_plane,
            map,
            symbols: Symbols::default(),
            used_actions: used_actions(program),
        };
        b.collect()?;
        b.symbols.assign();
        Ok(b)
    }

    /// Adds every control-plane symbol, with its `@id`.
    fn collect(&mut self) -> Result<(), Diagnostic> {
        let p = self.program;
        let cp = self.cp;
        for (t, tcp) in p.tables.iter().zip(&cp.tables) {
            self.add(Prefix::Table, &t.name, &tcp.annotations)?;
        }
        for (i, a) in p.actions.iter().enumerate() {
            if self.used_actions[i] != ActionUse::Unlisted {
                self.add(Prefix::Action, &a.name, &cp.actions[i])?;
            }
        }
        for (i, inst) in p.instances.iter().enumerate() {
            if let Some(prefix) = instance_prefix(&inst.kind) {
                self.add(prefix, &inst.name, &cp.instances[i])?;
            }
        }
        for d in &cp.digests {
            self.add(Prefix::Digest, &d.name, &[])?;
        }
        for h in &cp.controller_headers {
            self.add(Prefix::ControllerHeader, &h.type_name, &h.annotations)?;
        }
        Ok(())
    }

    fn add(
        &mut self,
        prefix: Prefix,
        name: &str,
        annotations: &[Annotation],
    ) -> Result<(), Diagnostic> {
        let explicit = match annotations.iter().find(|a| a.name.name == "id") {
            None => None,
            Some(a) => match a.body.first().map(|t| &t.tok) {
                Some(softswitch_frontend::lexer::Tok::Int(lit))
                    if lit.value <= u128::from(u32::MAX) =>
                {
                    Some(lit.value as u32)
                }
                _ => {
                    return Err(Diagnostic::new(
                        a.name.span,
                        "@id needs an unsigned 32-bit integer",
                    ))
                }
            },
        };
        self.symbols.add(prefix, name, explicit).map_err(|e| {
            let span = annotations
                .iter()
                .find(|a| a.name.name == "id")
                .map_or(Span::default(), |a| a.name.span);
            Diagnostic::new(span, e.to_string())
        })
    }

    fn preamble(&self, prefix: Prefix, name: &str, annotations: &[Annotation]) -> p4i::Preamble {
        p4i::Preamble {
            id: self.symbols.id(prefix, name),
            name: name.to_string(),
            alias: self.symbols.alias(name),
            annotations: self.annotations(annotations),
            doc: documentation(annotations),
            ..Default::default()
        }
    }

    /// Annotations as P4 source text (`@noWarn("unused")`), except those P4Info represents
    /// elsewhere (`@name`, `@id`, `@brief`, `@description`, `@max_group_size`,
    /// `@selector_size_semantics`). Structured annotations are left out.
    fn annotations(&self, annotations: &[Annotation]) -> Vec<String> {
        annotations
            .iter()
            .filter(|a| {
                !matches!(
                    a.name.name.as_str(),
                    "name"
                        | "id"
                        | "brief"
                        | "description"
                        | "max_group_size"
                        | "selector_size_semantics"
                )
            })
            .map(|a| match (a.body.first(), a.body.last()) {
                (Some(first), Some(last)) => {
                    format!(
                        "@{}({})",
                        a.name.name,
                        self.map.snippet(first.span.to(last.span))
                    )
                }
                _ => format!("@{}", a.name.name),
            })
            .collect()
    }

    fn build(self) -> Result<p4i::P4Info, Diagnostic> {
        let mut specs = typespec::TypeSpecs::new(&self.cp.types, &self.program.errors);
        let digests = self
            .cp
            .digests
            .iter()
            .map(|d| p4i::Digest {
                preamble: Some(self.preamble(Prefix::Digest, &d.name, &[])),
                type_spec: Some(specs.spec(&d.ty)),
            })
            .collect();
        // p4c converts every action parameter's type, adding the serializable enums to type_info.
        for (i, types) in self.cp.action_param_types.iter().enumerate() {
            if self.used_actions[i] == ActionUse::Tabled
                && !cpinfo::has(&self.cp.actions[i], "hidden")
            {
                for ty in types.iter().filter(|t| matches!(t, Type::Enum(_))) {
                    specs.spec(ty);
                }
            }
        }
        let mut info = p4i::P4Info {
            pkg_info: Some(p4i::PkgInfo {
                arch: ARCH.into(),
                ..Default::default()
            }),
            tables: self.tables(),
            actions: self.actions(),
            controller_packet_metadata: self.controller_headers(),
            digests,
            type_info: Some(specs.info),
            ..Default::default()
        };
        self.instances(&mut info);
        Ok(info)
    }

    fn tables(&self) -> Vec<p4i::Table> {
        let p = self.program;
        p.tables
            .iter()
            .zip(&self.cp.tables)
            .filter(|(_, tcp)| !cpinfo::has(&tcp.annotations, "hidden"))
            .map(|(t, tcp)| {
                let action_id = |a: usize| self.symbols.id(Prefix::Action, &p.actions[a].name);
                let match_fields = t
                    .keys
                    .iter()
                    .zip(&tcp.keys)
                    .zip(field_ids(&tcp.keys))
                    .map(|((k, annotations), id)| p4i::MatchField {
                        id,
                        name: k.name.clone(),
                        bitwidth: i32::from(k.width),
                        annotations: self.annotations(annotations),
                        doc: documentation(annotations),
                        r#match: Some(
                            p4i::match_field::Match::MatchType(match_type(k.kind) as i32),
                        ),
                        ..Default::default()
                    })
                    .collect();
                let action_refs = t
                    .actions
                    .iter()
                    .zip(&tcp.action_refs)
                    .map(|(&a, annotations)| p4i::ActionRef {
                        id: action_id(a),
                        scope: scope(annotations) as i32,
                        annotations: self.annotations(annotations),
                        ..Default::default()
                    })
                    .collect();
                let mut direct_resource_ids = Vec::new();
                if let Some(c) = t.direct_counter {
                    direct_resource_ids
                        .push(self.symbols.id(Prefix::DirectCounter, &p.instances[c].name));
                }
                if let Some(m) = t.direct_meter {
                    direct_resource_ids
                        .push(self.symbols.id(Prefix::DirectMeter, &p.instances[m].name));
                }
                p4i::Table {
                    preamble: Some(self.preamble(Prefix::Table, &t.name, &tcp.annotations)),
                    match_fields,
                    action_refs,
                    const_default_action_id: if t.const_default {
                        action_id(t.default_action.action)
                    } else {
                        0
                    },
                    initial_default_action: tcp.default_written.then(|| p4i::TableActionCall {
                        action_id: action_id(t.default_action.action),
                        arguments: self.arguments(&t.default_action),
                    }),
                    implementation_id: t.profile.map_or(0, |i| {
                        self.symbols.id(Prefix::ActionProfile, &p.instances[i].name)
                    }),
                    direct_resource_ids,
                    size: t.size as i64,
                    idle_timeout_behavior: if tcp.supports_timeout {
                        p4i::table::IdleTimeoutBehavior::NotifyControl as i32
                    } else {
                        p4i::table::IdleTimeoutBehavior::NoTimeout as i32
                    },
                    is_const_table: t.const_entries_fixed,
                    has_initial_entries: tcp.has_entries,
                    other_properties: None,
                }
            })
            .collect()
    }

    /// The ids of action `action`'s parameters: `@id` where given, else counting from 1.
    fn param_ids(&self, action: usize) -> Vec<u32> {
        field_ids(&self.cp.action_params[action])
    }

    /// The action data of a call, with the ids of [`Self::actions`]' parameters.
    fn arguments(&self, call: &ir::ActionCall) -> Vec<p4i::table_action_call::Argument> {
        action_data(self.program, call.action)
            .iter()
            .zip(&call.args)
            .zip(self.param_ids(call.action))
            .map(
                |((param, value), param_id)| p4i::table_action_call::Argument {
                    param_id,
                    value: padded(*value, u32::from(param.width)),
                },
            )
            .collect()
    }

    fn actions(&self) -> Vec<p4i::Action> {
        let p = self.program;
        p.actions
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                self.used_actions[*i] != ActionUse::Unlisted
                    && !cpinfo::has(&self.cp.actions[*i], "hidden")
            })
            .map(|(i, a)| p4i::Action {
                preamble: Some(self.preamble(Prefix::Action, &a.name, &self.cp.actions[i])),
                // An action only called has its arguments bound by the calls: p4c lists it
                // without parameters.
                params: if self.used_actions[i] == ActionUse::Tabled {
                    action_data(p, i)
                } else {
                    Vec::new()
                }
                .iter()
                .zip(&self.cp.action_params[i])
                .zip(self.param_ids(i))
                .map(|((param, annotations), id)| p4i::action::Param {
                    id,
                    name: param.name.clone(),
                    bitwidth: i32::from(param.width),
                    annotations: self.annotations(annotations),
                    doc: documentation(annotations),
                    ..Default::default()
                })
                .collect(),
            })
            .collect()
    }

    fn controller_headers(&self) -> Vec<p4i::ControllerPacketMetadata> {
        self.cp
            .controller_headers
            .iter()
            .filter(|h| !cpinfo::has(&h.annotations, "hidden"))
            .map(|h| {
                let fields = &self.cp.types.aggregates[h.aggregate].fields;
                let annotations: Vec<Vec<Annotation>> =
                    fields.iter().map(|(_, _, a)| a.clone()).collect();
                p4i::ControllerPacketMetadata {
                    preamble: Some(p4i::Preamble {
                        name: h.controller_name.clone(),
                        alias: h.controller_name.clone(),
                        ..self.preamble(Prefix::ControllerHeader, &h.type_name, &h.annotations)
                    }),
                    metadata: fields
                        .iter()
                        .zip(field_ids(&annotations))
                        .map(|((name, ty, annotations), id)| {
                            p4i::controller_packet_metadata::Metadata {
                                id,
                                name: name.clone(),
                                bitwidth: i32::from(self.cp.types.scalar_width(ty).unwrap_or(0)),
                                annotations: self.annotations(annotations),
                                ..Default::default()
                            }
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// Counters, direct counters, meters, direct meters, registers, action profiles, value sets.
    fn instances(&self, info: &mut p4i::P4Info) {
        let p = self.program;
        let table_of = |pick: &dyn Fn(&ir::Table) -> Option<usize>, i: usize| {
            p.tables
                .iter()
                .find(|t| pick(t) == Some(i))
                .map_or(0, |t| self.symbols.id(Prefix::Table, &t.name))
        };
        for (i, inst) in p.instances.iter().enumerate() {
            let annotations = &self.cp.instances[i];
            let Some(prefix) = instance_prefix(&inst.kind) else {
                continue;
            };
            if cpinfo::has(annotations, "hidden") {
                continue;
            }
            let preamble = Some(self.preamble(prefix, &inst.name, annotations));
            // A stateful extern type's instance: its P4Info entity by its prefix, its
            // configuration from its constructor's arguments.
            let kind = &inst.kind;
            let size = kind.cells().unwrap_or(0);
            let counter = || {
                Some(counter_spec(
                    kind.counter_kind().unwrap_or(CounterKind::PacketsAndBytes),
                ))
            };
            let meter = || Some(meter_spec(kind.meter_bytes() == Some(true)));
            match (prefix, kind) {
                (Prefix::Counter, _) => info.counters.push(p4i::Counter {
                    preamble,
                    spec: counter(),
                    size: i64::from(size),
                    ..Default::default()
                }),
                (Prefix::DirectCounter, _) => info.direct_counters.push(p4i::DirectCounter {
                    preamble,
                    spec: counter(),
                    direct_table_id: table_of(&|t| t.direct_counter, i),
                }),
                (Prefix::Meter, _) => info.meters.push(p4i::Meter {
                    preamble,
                    spec: meter(),
                    size: i64::from(size),
                    ..Default::default()
                }),
                (Prefix::DirectMeter, _) => info.direct_meters.push(p4i::DirectMeter {
                    preamble,
                    spec: meter(),
                    direct_table_id: table_of(&|t| t.direct_meter, i),
                }),
                (Prefix::Register, _) => info.registers.push(p4i::Register {
                    preamble,
                    type_spec: Some(p4i::P4DataTypeSpec {
                        type_spec: Some(p4i::p4_data_type_spec::TypeSpec::Bitstring(
                            typespec::bitstring_like(&softswitch_frontend::types::Type::Bits {
                                width: kind.cell_width().unwrap_or(0),
                                signed: false,
                            }),
                        )),
                    }),
                    size: size as i32,
                    ..Default::default()
                }),
                (
                    _,
                    &InstanceKind::ActionProfile { size }
                    | &InstanceKind::ActionSelector { size, .. },
                ) => {
                    let selector = matches!(inst.kind, InstanceKind::ActionSelector { .. });
                    let mut tables: Vec<&str> = p
                        .tables
                        .iter()
                        .filter(|t| t.profile == Some(i))
                        .map(|t| t.name.as_str())
                        .collect();
                    tables.sort_unstable();
                    info.action_profiles.push(p4i::ActionProfile {
                        preamble,
                        table_ids: tables
                            .iter()
                            .map(|t| self.symbols.id(Prefix::Table, t))
                            .collect(),
                        with_selector: selector,
                        size: i64::from(size),
                        max_group_size: int_arg(annotations, "max_group_size").unwrap_or(0),
                        selector_size_semantics: selector.then_some(
                            p4i::action_profile::SelectorSizeSemantics::SumOfWeights(
                                p4i::action_profile::SumOfWeights {},
                            ),
                        ),
                        ..Default::default()
                    });
                }
                (
                    _,
                    &InstanceKind::ValueSet {
                        size,
                        width,
                        ref fields,
                    },
                ) => {
                    // A value set of bit<W> has one unnamed match field; of a struct, one per
                    // field, as p4c writes them.
                    let unnamed = [(String::new(), width)];
                    let fields = if fields.is_empty() {
                        &unnamed[..]
                    } else {
                        fields
                    };
                    let exact = p4i::match_field::Match::MatchType(
                        p4i::match_field::MatchType::Exact as i32,
                    );
                    info.value_sets.push(p4i::ValueSet {
                        preamble,
                        r#match: (1..)
                            .zip(fields)
                            .map(|(id, (name, width))| p4i::MatchField {
                                id,
                                name: name.clone(),
                                bitwidth: i32::from(*width),
                                r#match: Some(exact.clone()),
                                ..Default::default()
                            })
                            .collect(),
                        size: size as i32,
                    })
                }
                _ => {}
            }
        }
    }
}

/// The P4Info type prefix of an extern instance, by its v1model.p4 type: P4Info has an entity
/// for each of these (none for the others, such as `Checksum16`).
fn instance_prefix(kind: &InstanceKind) -> Option<Prefix> {
    Some(match kind.type_name() {
        "register" => Prefix::Register,
        "counter" => Prefix::Counter,
        "direct_counter" => Prefix::DirectCounter,
        "meter" => Prefix::Meter,
        "direct_meter" => Prefix::DirectMeter,
        "action_profile" | "action_selector" => Prefix::ActionProfile,
        "value_set" => Prefix::ValueSet,
        _ => return None,
    })
}

/// The action-data parameters of action `action`.
pub fn action_data(p: &Program, action: usize) -> Vec<&ir::Param> {
    p.bodies[p.actions[action].body]
        .params
        .iter()
        .filter(|x| x.action_data)
        .collect()
}

/// Ids of match fields, action parameters or metadata: `@id` where given, else counting from 1
/// past the positions the explicit ones took (p4c's field id allocator).
fn field_ids(annotations: &[Vec<Annotation>]) -> Vec<u32> {
    let explicit: Vec<Option<u32>> = annotations
        .iter()
        .map(|a| int_arg(a, "id").and_then(|v| u32::try_from(v).ok()))
        .collect();
    let mut taken: std::collections::BTreeSet<u32> = explicit.iter().flatten().copied().collect();
    let mut next = 1;
    explicit
        .iter()
        .map(|e| match e {
            Some(id) => {
                next += 1;
                *id
            }
            None => {
                while taken.contains(&next) {
                    next += 1;
                }
                taken.insert(next);
                next
            }
        })
        .collect()
}

/// The integer argument of annotation `name` (`@max_group_size(200)` → 200).
fn int_arg(annotations: &[Annotation], name: &str) -> Option<i32> {
    let a = annotations.iter().find(|a| a.name.name == name)?;
    match a.body.first().map(|t| &t.tok) {
        Some(softswitch_frontend::lexer::Tok::Int(lit)) => i32::try_from(lit.value).ok(),
        _ => None,
    }
}

fn documentation(annotations: &[Annotation]) -> Option<p4i::Documentation> {
    let brief = cpinfo::string_arg(annotations, "brief");
    let description = cpinfo::string_arg(annotations, "description");
    (brief.is_some() || description.is_some()).then(|| p4i::Documentation {
        brief: brief.unwrap_or_default(),
        description: description.unwrap_or_default(),
    })
}

fn scope(annotations: &[Annotation]) -> p4i::action_ref::Scope {
    if cpinfo::has(annotations, "tableonly") {
        p4i::action_ref::Scope::TableOnly
    } else if cpinfo::has(annotations, "defaultonly") {
        p4i::action_ref::Scope::DefaultOnly
    } else {
        p4i::action_ref::Scope::TableAndDefault
    }
}

fn match_type(kind: MatchKind) -> p4i::match_field::MatchType {
    use p4i::match_field::MatchType;
    match kind {
        MatchKind::Exact => MatchType::Exact,
        MatchKind::Ternary => MatchType::Ternary,
        MatchKind::Lpm => MatchType::Lpm,
        MatchKind::Range => MatchType::Range,
        MatchKind::Optional => MatchType::Optional,
        MatchKind::Selector => MatchType::Unspecified,
    }
}

fn counter_spec(kind: CounterKind) -> p4i::CounterSpec {
    use p4i::counter_spec::Unit;
    let unit = match kind {
        CounterKind::Packets => Unit::Packets,
        CounterKind::Bytes => Unit::Bytes,
        CounterKind::PacketsAndBytes => Unit::Both,
    };
    p4i::CounterSpec { unit: unit as i32 }
}

fn meter_spec(bytes: bool) -> p4i::MeterSpec {
    use p4i::meter_spec::Unit;
    p4i::MeterSpec {
        unit: if bytes { Unit::Bytes } else { Unit::Packets } as i32,
        ..Default::default()
    }
}

/// How an action appears in P4Info.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ActionUse {
    /// Not at all: it is called only from other actions (p4c's front end inlines it into
    /// them), or never.
    Unlisted,
    /// Called by a control, directly or from a function it calls, and in no table: listed
    /// without parameters, as p4c lists it (the calls bind them).
    Called,
    /// In some table's action list: listed with its action data.
    Tabled,
}

/// How each action appears in P4Info.
fn used_actions(p: &Program) -> Vec<ActionUse> {
    let mut invoked = vec![false; p.bodies.len()];
    let mut is_action = vec![false; p.bodies.len()];
    for a in &p.actions {
        is_action[a.body] = true;
    }
    let mut stack: Vec<&ir::Stmt> = p.controls.iter().flat_map(|c| c.body.iter()).collect();
    let mut seen = vec![false; p.bodies.len()];
    while let Some(s) = stack.pop() {
        match s {
            ir::Stmt::Invoke(inv) => {
                invoked[inv.body] = true;
                // A function's body is the caller's (inlined); an action's calls are its own.
                if !seen[inv.body] && !is_action[inv.body] {
                    seen[inv.body] = true;
                    stack.extend(p.bodies[inv.body].stmts.iter());
                }
            }
            ir::Stmt::If(_, a, b, _) => stack.extend(a.iter().chain(b)),
            ir::Stmt::Loop { body, update, .. } => stack.extend(body.iter().chain(update)),
            ir::Stmt::Switch { cases, default, .. } => {
                stack.extend(cases.iter().flat_map(|(_, s)| s).chain(default));
            }
            ir::Stmt::SwitchAction { cases, default, .. } => {
                stack.extend(cases.iter().flat_map(|(_, s)| s).chain(default));
            }
            _ => {}
        }
    }
    let listed: std::collections::HashSet<usize> = p
        .tables
        .iter()
        .flat_map(|t| t.actions.iter().copied())
        .collect();
    p.actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if listed.contains(&i) {
                ActionUse::Tabled
            } else if invoked[a.body] {
                ActionUse::Called
            } else {
                ActionUse::Unlisted
            }
        })
        .collect()
}
