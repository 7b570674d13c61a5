//! The whole program: externs, field lists and calculations, actions with their primitives, the
//! parser, the deparser, the pipelines' control flow graphs with their tables and conditionals,
//! and the checksums, lowered to one `ir::Program`.

use std::cell::Cell;
use std::collections::HashMap;

use serde_json::Value;
use softswitch_core::externs::{self, CtorArg, CtorParam, Object, Param as ExternParam};
use softswitch_core::ir::{
    self, Action, ActionCall, Body, CaseKeyset, Condition, Control, CounterKind, DynSlot, EmitItem,
    Entry, Expr, ExternArg, ExternCall, ExternId, FieldItem, FieldLayout, FieldList, FieldMatch,
    HeaderRef, Instance, InstanceKind, Key, MatchKind, Param, ParserIr, Place, Program, Slot,
    State, Stmt, Table, Target, TraceNames, Transition,
};

use crate::expr::{field_name, unwrap_expression, Scope, Typed};
use crate::joins::{hit_miss, Graph, Node};
use crate::json::{
    array, array_member, flag, hex, hex_bytes, member, name, str_member, string, uint, uint_member,
};
use crate::layout::{Field, FieldStore, Layout};
use crate::{fail, limits, Digest, Loaded, Result};

/// Lowers the parsed JSON program `root`.
pub fn lower(root: &Value) -> Result<Loaded> {
    if !root.is_object() {
        return fail("the program must be a JSON object");
    }
    let layout = Layout::new(root)?;
    let mut l = Lowerer {
        layout,
        instances: Vec::new(),
        instance_index: HashMap::new(),
        direct_meters: HashMap::new(),
        direct_counters: HashMap::new(),
        field_lists: HashMap::new(),
        program_field_lists: Vec::new(),
        calculations: HashMap::new(),
        actions: Vec::new(),
        action_ids: HashMap::new(),
        bodies: Vec::new(),
        tables: Vec::new(),
        table_index: HashMap::new(),
        lowered_nodes: 0,
        copied_fields: Cell::new(0),
        cells: 0,
        conditions: Vec::new(),
        condition_index: HashMap::new(),
        learn_lists: HashMap::new(),
        digests: Vec::new(),
    };
    l.externs(root)?;
    l.field_lists(root)?;
    l.learn_lists(root)?;
    l.calculations(root)?;
    l.actions(root)?;
    let parser = l.parser(root)?;
    let deparser = l.deparser(root)?;
    let (mut with_entries, mut with_timeout) = (Vec::new(), Vec::new());
    let mut pipelines = HashMap::new();
    for p in array(member(root, "pipelines", "the program")?, "\"pipelines\"")? {
        let pname = name(p, "a pipeline")?;
        l.tables_of(p, pname, &mut with_entries, &mut with_timeout)?;
        pipelines.insert(pname.to_string(), p);
    }
    let mut control = |pname: &str| -> Result<Control> {
        let body = match pipelines.get(pname) {
            Some(p) => {
                let init = p.get("init_table").and_then(Value::as_str);
                let graph = Graph::of(p, init)?;
                l.graph(&graph, init, None, 0)?
            }
            None => Vec::new(),
        };
        Ok(Control {
            name: pname.to_string(),
            body,
        })
    };
    let ingress = control("ingress")?;
    let egress = control("egress")?;
    let (verify, compute) = l.checksums(root)?;
    let errors = errors(root)?;
    let program = Program {
        slots: l.layout.slots,
        header_layouts: l.layout.header_layouts.clone(),
        header_bits: l.layout.header_bits.clone(),
        std_meta: l.layout.std_meta,
        user_meta: l.layout.user_meta,
        // BMv2 keeps locals in its metadata, which it zeroes for each packet: so does the switch.
        locals: Vec::new(),
        field_lists: l.program_field_lists,
        parser,
        subparsers: Vec::new(),
        controls: [
            Control {
                name: "verifyChecksum".into(),
                body: verify,
            },
            ingress,
            egress,
            Control {
                name: "computeChecksum".into(),
                body: compute,
            },
            Control {
                name: "deparser".into(),
                body: deparser,
            },
        ],
        tables: l.tables,
        actions: l.actions,
        bodies: l.bodies,
        instances: l.instances,
        errors,
        trace_names: TraceNames {
            headers: {
                let mut headers: Vec<(Slot, String)> = l
                    .layout
                    .headers
                    .iter()
                    .filter_map(|h| Some((h.valid?, h.name.clone())))
                    .collect();
                headers.sort_by_key(|(slot, _)| *slot);
                headers
            },
            conditions: l.conditions,
        },
    };
    check_run_depth(&program)?;
    Ok(Loaded {
        program,
        digests: l.digests,
        tables_with_entries: with_entries,
        tables_with_timeout: with_timeout,
    })
}

/// A calculation: its algorithm's `HashAlgorithm` code, its fields, and whether the payload
/// follows them.
struct Calculation {
    algo: u128,
    fields: FieldList,
    payload: bool,
}

struct Lowerer {
    layout: Layout,
    instances: Vec<Instance>,
    /// (JSON kind, name) → instance.
    instance_index: HashMap<(&'static str, String), usize>,
    /// Table name → (direct meter instance, its result field's slot and width).
    direct_meters: HashMap<String, (usize, Slot, u16)>,
    /// Table name → direct counter instance.
    direct_counters: HashMap<String, usize>,
    /// JSON field list id → program field list.
    field_lists: HashMap<u64, usize>,
    program_field_lists: Vec<Vec<Slot>>,
    calculations: HashMap<String, Calculation>,
    actions: Vec<Action>,
    /// JSON action id → action index.
    action_ids: HashMap<u64, usize>,
    bodies: Vec<Body>,
    tables: Vec<Table>,
    /// Table name → table index.
    table_index: HashMap<String, usize>,
    lowered_nodes: usize,
    /// Items of calculations' and learn lists' field lists copied into primitives and
    /// checksums so far (each use holds its own copy).
    copied_fields: Cell<usize>,
    cells: u64,
    /// The conditionals' names and sources, for the trace.
    conditions: Vec<Condition>,
    /// Conditional name → index in `conditions`.
    condition_index: HashMap<String, u32>,
    /// JSON learn list id → (digest index, the values it sends).
    learn_lists: HashMap<u64, (usize, FieldList)>,
    digests: Vec<Digest>,
}

/// The `"parameters"` of a primitive or parser operation.
fn params<'a>(v: &'a Value, what: &str) -> Result<&'a [Value]> {
    array_member(v, "parameters", what)
}

/// Parameter `i` of a primitive.
fn param<'a>(ps: &'a [Value], i: usize, op: &str) -> Result<&'a Value> {
    match ps.get(i) {
        Some(p) => Ok(p),
        None => fail(format!("{op} lacks parameter {}", i + 1)),
    }
}

/// The `"value"` string of a named-object parameter (`{"type": "register_array", "value": N}`).
fn object_name<'a>(v: &'a Value, what: &str) -> Result<&'a str> {
    string(member(v, "value", what)?, what)
}

/// A BMv2 hash algorithm name as v1model's `HashAlgorithm` code.
fn algorithm(name: &str) -> Result<u128> {
    Ok(match name {
        "crc32" => 0,
        "crc32_custom" => 1,
        "crc16" => 2,
        "crc16_custom" => 3,
        "random" => 4,
        "identity" => 5,
        "csum16" => 6,
        "xor16" => 7,
        other => return fail(format!("hash algorithm {other} is not supported")),
    })
}

/// One list of BMv2's `field_lists` or `learn_lists` ([`Lowerer::lists_of_fields`]).
struct ListOfFields<'j> {
    /// Its name.
    name: &'j str,
    /// Its id.
    id: u64,
    /// What errors call it (`learn list NAME`).
    what: String,
    /// Its fields, each with its width.
    fields: Vec<(Field, u16)>,
}

impl Lowerer {
    fn scope<'a>(&'a self, params: &'a [(Slot, u16)]) -> Scope<'a> {
        Scope {
            layout: &self.layout,
            params,
        }
    }

    fn add_instance(&mut self, kind: &'static str, iname: &str, ik: InstanceKind) -> Result<usize> {
        let size = u64::from(ik.cells().unwrap_or(0));
        self.cells = self.cells.saturating_add(size);
        if self.cells > limits::MAX_EXTERN_CELLS {
            return fail(format!(
                "the register, counter and meter arrays have more than {} cells together \
                 (limits::MAX_EXTERN_CELLS)",
                limits::MAX_EXTERN_CELLS
            ));
        }
        self.instances.push(Instance {
            name: iname.to_string(),
            kind: ik,
        });
        let i = self.instances.len() - 1;
        self.instance_index.insert((kind, iname.to_string()), i);
        Ok(i)
    }

    fn instance(&self, kind: &'static str, iname: &str) -> Result<usize> {
        match self.instance_index.get(&(kind, iname.to_string())) {
            Some(&i) => Ok(i),
            None => fail(format!("no {kind} is called {iname}")),
        }
    }

    /// The indexed (not direct) register, counter or meter array `iname` of JSON kind `kind`.
    fn indexed(&self, kind: &'static str, iname: &str) -> Result<usize> {
        let i = self.instance(kind, iname)?;
        match self.instances[i].kind.cells() {
            Some(_) => Ok(i),
            None => fail(format!(
                "{iname} is direct: it cannot be used with an index"
            )),
        }
    }

    fn externs(&mut self, root: &Value) -> Result<()> {
        // Each BMv2 array once, in the order of the core's extern types.
        let objects = externs::objects();
        for (k, object) in objects.iter().enumerate() {
            let array = object.bmv2_array;
            if objects[..k].iter().any(|o| o.bmv2_array == array) {
                continue;
            }
            let types: Vec<&Object> = objects
                .iter()
                .copied()
                .filter(|o| o.bmv2_array == array)
                .collect();
            for v in array_member(root, &format!("{array}s"), "the program")? {
                self.object_instance(v, &types)?;
            }
        }
        for v in array_member(root, "parse_vsets", "the program")? {
            let vname = name(v, "a parser value set")?;
            let what = format!("parser value set {vname}");
            let width = uint_member(v, "compressed_bitwidth", &what)?;
            let size = uint_member(v, "max_size", &what)?;
            if width > 128 || size > limits::MAX_TABLE_SIZE {
                return fail(format!(
                    "{what}: {size} values of {width} bits is too large"
                ));
            }
            let ik = InstanceKind::ValueSet {
                size: size as u32,
                width: width as u16,
                fields: Vec::new(),
            };
            self.add_instance("parse_vset", vname, ik)?;
        }
        if let Some(e) = array_member(root, "extern_instances", "the program")?.first() {
            let ename = name(e, "an extern instance")?;
            return fail(format!(
                "extern instance {ename} ({}): extern objects are not supported by softswitch's \
                 BMv2 JSON loader",
                e.get("type").and_then(Value::as_str).unwrap_or("?")
            ));
        }
        Ok(())
    }

    /// An instance of one of the core's extern types `types` (those a BMv2 array declares, an
    /// indexed one and a direct one told apart by `is_direct`), from the members its
    /// [`Object`] data names; a direct one is bound to its table.
    fn object_instance(&mut self, v: &Value, types: &[&'static Object]) -> Result<()> {
        let kind = types[0].bmv2_array.replace('_', " ");
        let iname = name(v, &format!("a {kind}"))?;
        let what = format!("{kind} {iname}");
        let direct = types.iter().any(|o| o.direct) && flag(v, "is_direct", &what)?;
        let Some(object) = types.iter().find(|o| o.direct == direct) else {
            return fail(format!("{what}: softswitch has no such {kind}"));
        };
        let width = if object.cell_type {
            let width = uint_member(v, "bitwidth", &what)?;
            if width > 128 {
                return fail(format!(
                    "{what} has {width}-bit cells; at most 128 are supported"
                ));
            }
            Some(width as u16)
        } else {
            None
        };
        let mut args = Vec::with_capacity(object.ctor.len());
        for param in object.ctor {
            args.push(match param {
                CtorParam::Size => {
                    let s = uint_member(v, "size", &what)?;
                    let Ok(s) = u32::try_from(s) else {
                        return fail(format!("{what} is too large"));
                    };
                    CtorArg::Size(s)
                }
                // BMv2's counters count packets and bytes.
                CtorParam::CounterType => CtorArg::Counter(CounterKind::PacketsAndBytes),
                CtorParam::MeterType => CtorArg::MeterBytes(match str_member(v, "type", &what)? {
                    "bytes" => true,
                    "packets" => false,
                    other => return fail(format!("{what} has an unknown type {other}")),
                }),
            });
        }
        let Some(ik) = object.instance(width, args) else {
            return fail(format!(
                "{what}: softswitch's core makes no {} of it",
                object.p4
            ));
        };
        let i = self.add_instance(object.bmv2_array, iname, ik)?;
        if !object.direct {
            return Ok(());
        }
        let table = str_member(v, "binding", &what)?.to_string();
        match object.p4 {
            "direct_meter" => {
                let target = member(v, "result_target", &what)?;
                let field = self.scope(&[]).field(target)?;
                let Some(width) = field.width() else {
                    return fail(format!("{what}'s result target is a varbit field"));
                };
                self.direct_meters.insert(table, (i, field.slot, width));
            }
            "direct_counter" => {
                self.direct_counters.insert(table, i);
            }
            _ => {
                return fail(format!(
                    "{what}: softswitch binds no {} to a table",
                    object.p4
                ))
            }
        }
        Ok(())
    }

    /// The field lists (`field_lists`): the user metadata a `resubmit`, `recirculate` or
    /// `clone` preserves.
    fn field_lists(&mut self, root: &Value) -> Result<()> {
        for list in self.lists_of_fields(root, "field_lists", "field list", "preserved")? {
            let slots = list.fields.iter().map(|(f, _)| f.slot).collect();
            self.program_field_lists.push(slots);
            self.field_lists
                .insert(list.id, self.program_field_lists.len() - 1);
        }
        Ok(())
    }

    /// The learn lists (`learn_lists`): what each `generate_digest` sends, as a digest of the
    /// list's name.
    fn learn_lists(&mut self, root: &Value) -> Result<()> {
        for list in self.lists_of_fields(root, "learn_lists", "learn list", "sent")? {
            let (id, what) = (list.id, list.what);
            if self.learn_lists.contains_key(&id) {
                return fail(format!("{what}: two learn lists have id {id}"));
            }
            let data = list
                .fields
                .iter()
                .map(|(f, width)| FieldItem::Bits(Expr::Load(f.slot), *width))
                .collect();
            self.learn_lists.insert(id, (self.digests.len(), data));
            self.digests.push(Digest {
                name: list.name.to_string(),
                fields: list.fields.into_iter().map(|(f, w)| (f.name, w)).collect(),
            });
        }
        Ok(())
    }

    /// The lists of the program's array `key`, `field_lists` or `learn_lists` (BMv2 writes
    /// both alike: a name, an id and elements of type `field`), `kind` naming one in errors.
    /// A list's fields are `used` (`preserved`, `sent`) as values of one slot: another
    /// element, a varbit field or one wider than 128 bits is refused.
    fn lists_of_fields<'j>(
        &self,
        root: &'j Value,
        key: &str,
        kind: &str,
        used: &str,
    ) -> Result<Vec<ListOfFields<'j>>> {
        let mut out = Vec::new();
        for list in array_member(root, key, "the program")? {
            let lname = name(list, &format!("a {kind}"))?;
            let what = format!("{kind} {lname}");
            let id = uint_member(list, "id", &what)?;
            let mut fields = Vec::new();
            for e in array_member(list, "elements", &what)? {
                if str_member(e, "type", &what)? != "field" {
                    return fail(format!("{what}: only fields may be {used}"));
                }
                let field = self.scope(&[]).field(member(e, "value", &what)?)?;
                let Some(width) = field.width() else {
                    return fail(format!(
                        "{what}: {} is a varbit field or one wider than 128 bits, which cannot \
                         be {used}",
                        field.name
                    ));
                };
                fields.push((field.clone(), width));
            }
            out.push(ListOfFields {
                name: lname,
                id,
                what,
                fields,
            });
        }
        Ok(out)
    }

    /// The fields of a calculation or digest input: consecutive fields of one header are
    /// grouped, so that they are left out while it is invalid, as BMv2 does.
    fn field_items(&self, items: &[Value], what: &str) -> Result<(FieldList, bool)> {
        let scope = self.scope(&[]);
        let mut list: FieldList = Vec::new();
        let mut payload = false;
        let push = |list: &mut FieldList, valid: Option<Slot>, item: FieldItem| match valid {
            None => list.push(item),
            Some(v) => match list.last_mut() {
                Some(FieldItem::Header { valid, fields }) if *valid == v => fields.push(item),
                _ => list.push(FieldItem::Header {
                    valid: v,
                    fields: vec![item],
                }),
            },
        };
        for item in items {
            let ty = str_member(item, "type", what)?;
            let value = member(item, "value", what)?;
            match ty {
                "field" => {
                    let (h, _) = field_name(value)?;
                    let valid = scope.validity(h)?;
                    for leaf in field_leaves(scope.field(value)?) {
                        push(&mut list, valid, leaf);
                    }
                }
                "header" => {
                    let header = self.layout.header(string(value, what)?)?;
                    for leaf in header.fields.iter().flat_map(field_leaves) {
                        push(&mut list, header.valid, leaf);
                    }
                }
                "hexstr" => {
                    let (v, _) = hex(string(value, what)?, what)?;
                    let bits = uint_member(item, "bitwidth", what)?;
                    if bits > 128 {
                        return fail(format!("{what}: a constant of {bits} bits"));
                    }
                    let bits = bits as u16;
                    list.push(FieldItem::Bits(Expr::Const(v & ir::mask(bits)), bits));
                }
                "payload" => payload = true,
                other => return fail(format!("{what}: an input of type {other} is not supported")),
            }
        }
        Ok((list, payload))
    }

    fn calculations(&mut self, root: &Value) -> Result<()> {
        for c in array_member(root, "calculations", "the program")? {
            let cname = name(c, "a calculation")?;
            let what = format!("calculation {cname}");
            let algo = algorithm(str_member(c, "algo", &what)?)?;
            let (fields, payload) = self.field_items(array_member(c, "input", &what)?, &what)?;
            self.calculations.insert(
                cname.to_string(),
                Calculation {
                    algo,
                    fields,
                    payload,
                },
            );
        }
        Ok(())
    }

    fn actions(&mut self, root: &Value) -> Result<()> {
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for a in array(member(root, "actions", "the program")?, "\"actions\"")? {
            let aname = name(a, "an action")?;
            let what = format!("action {aname}");
            let id = uint_member(a, "id", &what)?;
            let mut declared = Vec::new();
            for p in array_member(a, "runtime_data", &what)? {
                let pname = name(p, &format!("a parameter of {what}"))?;
                let width = uint_member(p, "bitwidth", &what)?;
                if width > 128 {
                    return fail(format!("{what}: parameter {pname} has more than 128 bits"));
                }
                declared.push((pname.to_string(), width as u16));
            }
            let prims = array_member(a, "primitives", &what)?;
            let lowered = |l: &Self, slots: &[(Slot, u16)]| {
                l.primitives(prims, slots, &what)
                    .map_err(|e| crate::LoadError::new(format!("{what}: {}", e.message())))
            };
            // p4c repeats an action used in two controls under one name: one action for both,
            // as P4Info has one, when the two are the same (their parameters in the same slots).
            if let Some(&same) = by_name.get(aname) {
                let earlier = &self.bodies[self.actions[same].body];
                let slots: Vec<(Slot, u16)> =
                    earlier.params.iter().map(|p| (p.slot, p.width)).collect();
                if slots.iter().map(|s| s.1).eq(declared.iter().map(|d| d.1))
                    && lowered(self, &slots)? == earlier.stmts
                {
                    self.action_ids.insert(id, same);
                    continue;
                }
            }
            let mut slots = Vec::new();
            let mut params = Vec::new();
            for (pname, width) in declared {
                let slot = self.layout.alloc(1)?;
                slots.push((slot, width));
                params.push(Param {
                    name: pname,
                    slot,
                    width,
                    action_data: true,
                });
            }
            let body = Body {
                name: aname.to_string(),
                params,
                stmts: lowered(self, &slots)?,
            };
            self.bodies.push(body);
            self.actions.push(Action {
                name: aname.to_string(),
                body: self.bodies.len() - 1,
            });
            let index = self.actions.len() - 1;
            by_name.entry(aname.to_string()).or_insert(index);
            self.action_ids.insert(id, index);
        }
        Ok(())
    }

    /// An action's primitives, with `_jump_if_zero` / `_jump` (p4c's `if` and `for` inside an
    /// action) made back into `if` statements and loops.
    fn primitives(&self, prims: &[Value], params: &[(Slot, u16)], what: &str) -> Result<Vec<Stmt>> {
        self.structured(prims, 0, prims.len(), params, what, 0, None)
    }

    /// Primitives `lo..hi` as statements; `inside` is the innermost loop around them.
    ///
    /// p4c writes `for (init; cond; update) body` as: init; at `c`, `_jump_if_zero(cond, end)`;
    /// body; update; `_jump(c)`; `end`. In the body, `break` is `_jump(end)` and `continue` a
    /// `_jump` to the update's first primitive.
    #[allow(clippy::too_many_arguments)]
    fn structured(
        &self,
        prims: &[Value],
        lo: usize,
        hi: usize,
        rt: &[(Slot, u16)],
        what: &str,
        depth: usize,
        inside: Option<LoopJumps>,
    ) -> Result<Vec<Stmt>> {
        if depth > limits::MAX_EXPR_DEPTH {
            return fail("its jumps nest too deeply");
        }
        let scope = self.scope(rt);
        let target = |p: &Value, i: usize| -> Result<usize> {
            let op = str_member(p, "op", what)?;
            let ps = params(p, what)?;
            let t = param(ps, i, op)?;
            match scope.expr(t)?.expr {
                Expr::Const(t) if (t as usize) <= prims.len() => Ok(t as usize),
                _ => fail(format!("{op} jumps outside the action")),
            }
        };
        let mut out = Vec::new();
        let mut i = lo;
        while i < hi {
            let p = &prims[i];
            let op = str_member(p, "op", what)?;
            match op {
                "_jump_if_zero" => {
                    let cond = scope.expr(param(params(p, what)?, 0, op)?)?.expr;
                    let to = target(p, 1)?;
                    if to <= i || to > hi {
                        return fail("a _jump_if_zero that does not jump forward within its block");
                    }
                    let back = &prims[to - 1];
                    if to - 1 > i
                        && back.get("op").and_then(Value::as_str) == Some("_jump")
                        && target(back, 0)? == i
                    {
                        // A loop: its condition here, its back jump at `to - 1`.
                        let jumps = LoopJumps {
                            exit: to,
                            next: continue_target(prims, i + 1, to - 1, to, &target)?,
                        };
                        let (next, d) = (jumps.next, depth + 1);
                        let body = self.structured(prims, i + 1, next, rt, what, d, Some(jumps))?;
                        let update =
                            self.structured(prims, next, to - 1, rt, what, d, Some(jumps))?;
                        out.push(Stmt::Loop { cond, body, update });
                        i = to;
                        continue;
                    }
                    // `if (c) { then } else { else }`: the then-block ends with a jump past
                    // the else-block.
                    let before = &prims[to - 1];
                    let else_end = if to - 1 > i
                        && before.get("op").and_then(Value::as_str) == Some("_jump")
                    {
                        let end = target(before, 0)?;
                        if end < to || end > hi {
                            return fail("a _jump that does not jump forward within its block");
                        }
                        Some(end)
                    } else {
                        None
                    };
                    let then_end = if else_end.is_some() { to - 1 } else { to };
                    let d = depth + 1;
                    let then = self.structured(prims, i + 1, then_end, rt, what, d, inside)?;
                    let (otherwise, next) = match else_end {
                        Some(end) => (self.structured(prims, to, end, rt, what, d, inside)?, end),
                        None => (Vec::new(), to),
                    };
                    out.push(Stmt::If(cond, then, otherwise, None));
                    i = next;
                }
                "_jump" => {
                    let to = target(p, 0)?;
                    match inside {
                        Some(l) if to == l.exit => out.push(Stmt::Break),
                        Some(l) if to == l.next => out.push(Stmt::Continue),
                        _ => return fail(
                            "a _jump that is not the end of an if's block, a break or a continue",
                        ),
                    }
                    i += 1;
                }
                _ => {
                    out.extend(self.primitive(p, rt, what)?);
                    i += 1;
                }
            }
        }
        Ok(out)
    }

    /// The destination place of a field parameter, with its width.
    fn place(&self, v: &Value, params: &[(Slot, u16)], what: &str) -> Result<(Place, u16)> {
        match str_member(v, "type", what)? {
            "field" => {
                let field = self.scope(params).field(member(v, "value", what)?)?;
                match field.width() {
                    Some(w) => Ok((Place::Slot(field.slot), w)),
                    None => fail(format!("{what}: a varbit field written as a value")),
                }
            }
            "expression" => {
                let op = unwrap_expression(v, 0)?;
                match op.get("op").and_then(Value::as_str) {
                    Some("access_field") => {
                        let f = self.scope(params).dyn_field(op, 0)?;
                        Ok((f.element.place(f.offset), f.width))
                    }
                    _ => fail(format!("{what}: cannot write to this expression")),
                }
            }
            other => fail(format!("{what}: cannot write to a {other}")),
        }
    }

    fn header_slot(&self, v: &Value, what: &str) -> Result<(Slot, usize, u32)> {
        let h = self.layout.header(object_name(v, what)?)?;
        match h.base() {
            Some(base) => Ok((base, h.layout, h.len())),
            None => fail(format!("{what}: header {} has no fields", h.name)),
        }
    }

    fn validity_slot(&self, v: &Value, what: &str) -> Result<Slot> {
        let hname = object_name(v, what)?;
        match self.layout.header(hname)?.valid {
            Some(s) => Ok(s),
            None => fail(format!(
                "{what}: {hname} is metadata, which has no validity"
            )),
        }
    }

    /// One primitive (an action's, or a parser's `primitive` operation).
    fn primitive(&self, p: &Value, rt: &[(Slot, u16)], what: &str) -> Result<Vec<Stmt>> {
        let op = str_member(p, "op", what)?;
        let ps = params(p, what)?;
        let arg = |i: usize| param(ps, i, op);
        let scope = self.scope(rt);
        let value = |i: usize| -> Result<Typed> { scope.expr(arg(i)?) };
        let ext = |c: ExternCall| Ok(vec![Stmt::Extern(Box::new(c))]);
        if let Some(id) = externs::by_bmv2_op(op) {
            return ext(ExternCall::Call {
                ext: id,
                args: self.extern_args(id, op, ps, rt, what)?,
            });
        }
        match op {
            "assign" | "modify_field" => {
                let dst = arg(0)?;
                if str_member(dst, "type", what)? == "header" {
                    return self.primitive_assign_header(arg(0)?, arg(1)?, rt, what);
                }
                if str_member(dst, "type", what)? == "field" {
                    let field = scope.field(member(dst, "value", what)?)?;
                    if let FieldStore::Wide(w) = field.store {
                        let src = crate::wide::limbs(&scope, arg(1)?, 0)?;
                        return crate::wide::store(field.slot, w, src);
                    }
                }
                let (place, width) = self.place(dst, rt, what)?;
                Ok(vec![Stmt::Assign(place, value(1)?.fit(width))])
            }
            "assign_header" => self.primitive_assign_header(arg(0)?, arg(1)?, rt, what),
            // A stack element picked at run time (`hdr.s[i].setValid()`).
            "add_header" | "remove_header"
                if str_member(arg(0)?, "type", what)? == "expression" =>
            {
                let element = scope.dyn_element(arg(0)?, 0)?;
                Ok(vec![Stmt::Assign(
                    element.place(0),
                    Expr::Const(u128::from(op == "add_header")),
                )])
            }
            "add_header" | "remove_header" => {
                let mut out = vec![Stmt::Assign(
                    Place::Slot(self.validity_slot(arg(0)?, what)?),
                    Expr::Const(u128::from(op == "add_header")),
                )];
                // A header union holds at most one valid header (BMv2 invalidates the others).
                let h = self.layout.header_index(object_name(arg(0)?, what)?);
                if let (Some(h), "add_header") = (h, op) {
                    for s in self.layout.union_siblings(h) {
                        out.push(Stmt::Assign(Place::Slot(s), Expr::Const(0)));
                    }
                }
                Ok(out)
            }
            "exit" => Ok(vec![Stmt::Exit]),
            "push" | "pop" => {
                let sname = object_name(arg(0)?, what)?;
                let (stack, count, stride, valids) = match (
                    self.layout.stacks.get(sname),
                    self.layout.union_stacks.get(sname),
                ) {
                    (Some(s), _) => (s.base, s.elements.len() as u32, s.stride, vec![0]),
                    (None, Some(u)) => (u.base, u.count, u.stride, u.valids()),
                    (None, None) => {
                        return fail(format!("{what}: no header stack is called {sname}"))
                    }
                };
                let n = match value(1)?.expr {
                    Expr::Const(n) if n <= u128::from(count) => n as i32,
                    _ => return fail(format!("{what}: {op} needs a constant count")),
                };
                ext(ExternCall::StackShift {
                    stack,
                    count,
                    stride,
                    valids,
                    shift: if op == "push" { n } else { -n },
                })
            }
            other => fail(format!(
                "primitive {other} is not supported by softswitch's BMv2 JSON loader"
            )),
        }
    }

    /// The arguments of a call of registered extern `id` by BMv2 primitive `op` with
    /// parameters `ps`, as its signature's parameters say.
    fn extern_args(
        &self,
        id: ExternId,
        op: &str,
        ps: &[Value],
        rt: &[(Slot, u16)],
        what: &str,
    ) -> Result<Vec<ExternArg>> {
        let signature = externs::signature(id);
        let scope = self.scope(rt);
        let mut args = Vec::with_capacity(signature.params.len());
        let mut instance = None;
        for (i, p) in signature.params.iter().enumerate() {
            let j = signature.bmv2_param(i);
            let arg = || param(ps, j, op);
            let value = || -> Result<Typed> { scope.expr(arg()?) };
            let calculation = || -> Result<&Calculation> {
                let cname = object_name(arg()?, what)?;
                match self.calculations.get(cname) {
                    Some(calc) => Ok(calc),
                    None => fail(format!("{what}: no calculation is called {cname}")),
                }
            };
            // A constant id, of a field list or a learn list.
            let id = |kind: &str| -> Result<u64> {
                match value()?.expr {
                    Expr::Const(id) => Ok(u64::try_from(id).unwrap_or(u64::MAX)),
                    _ => fail(format!("{what}: {op}'s {kind} must be a constant id")),
                }
            };
            args.push(match p {
                ExternParam::StandardMetadata => ExternArg::Unused,
                ExternParam::Instance => {
                    let Some(of) = signature.of else {
                        return fail(format!("{what}: {op} is no method"));
                    };
                    let name = object_name(arg()?, what)?;
                    let index = self.indexed(of.bmv2_array, name)?;
                    instance = Some((index, of.p4));
                    ExternArg::Instance(index)
                }
                ExternParam::Cell => {
                    let width = instance
                        .and_then(|(i, of)| Some((self.instances[i].kind.cell_width()?, of)));
                    let Some((width, _)) = width else {
                        let of = instance.map_or("instance", |(_, of)| of);
                        return fail(format!("{what}: {op} to a non-{of}"));
                    };
                    ExternArg::Value(value()?.fit(width))
                }
                ExternParam::Format => {
                    let format = string(member(arg()?, "value", what)?, what)?;
                    ExternArg::Text(format.to_string())
                }
                ExternParam::Values => match ps.get(j) {
                    Some(v) => {
                        let mut values = Vec::new();
                        for a in array(member(v, "value", what)?, what)? {
                            values.push(scope.expr(a)?.expr);
                        }
                        ExternArg::Values(values)
                    }
                    None => ExternArg::Unused,
                },
                ExternParam::Out | ExternParam::CellOut => {
                    let (place, width) = self.place(arg()?, rt, what)?;
                    ExternArg::Out(place, width)
                }
                ExternParam::Bits(_)
                | ExternParam::Bool
                | ExternParam::LikeOut
                | ExternParam::AnyBits => ExternArg::Value(value()?.expr),
                ExternParam::Sized => {
                    let v = value()?;
                    ExternArg::Sized(v.expr, v.width)
                }
                ExternParam::Choice(_) => {
                    let choice = signature.bmv2_ops.iter().position(|o| *o == op);
                    ExternArg::Value(Expr::Const(choice.unwrap_or(0) as u128))
                }
                ExternParam::Algorithm => ExternArg::Value(Expr::Const(calculation()?.algo)),
                ExternParam::Fields => {
                    ExternArg::Fields(self.copy_fields(&calculation()?.fields, what)?)
                }
                ExternParam::Digest => {
                    let list = id("learn list")?;
                    let Some((digest, data)) = self.learn_lists.get(&list) else {
                        return fail(format!("{what}: no learn list has id {list}"));
                    };
                    ExternArg::Digest {
                        digest: *digest,
                        data: self.copy_fields(data, what)?,
                    }
                }
                ExternParam::PreservedIndex | ExternParam::PreservedData => {
                    if ps.get(j).is_none() {
                        ExternArg::Unused
                    } else {
                        match self.field_lists.get(&id("field list")?) {
                            Some(&list) => ExternArg::Preserved(list),
                            None => ExternArg::Unused,
                        }
                    }
                }
            });
        }
        Ok(args)
    }

    fn primitive_assign_header(
        &self,
        dst: &Value,
        src: &Value,
        rt: &[(Slot, u16)],
        what: &str,
    ) -> Result<Vec<Stmt>> {
        let (d, dl, len) = self.header_block(dst, rt, what)?;
        let (s, sl, src_len) = self.header_block(src, rt, what)?;
        if dl != sl || len != src_len {
            return fail(format!(
                "{what}: assign_header between two header types, or a header and metadata"
            ));
        }
        Ok(vec![Stmt::copy_block(d, s, len)])
    }

    /// The first slot of a header operand (a `header`, or a stack element picked at run time:
    /// an `expression` of `dereference_header_stack`), its header type and its slots.
    fn header_block(
        &self,
        v: &Value,
        rt: &[(Slot, u16)],
        what: &str,
    ) -> Result<(Place, usize, u32)> {
        if str_member(v, "type", what)? != "expression" {
            let (slot, layout, len) = self.header_slot(v, what)?;
            return Ok((Place::Slot(slot), layout, len));
        }
        let element = self.scope(rt).dyn_element(v, 0)?;
        let stack = &self.layout.stacks[&element.stack];
        let len = self.layout.headers[stack.elements[0]].len();
        Ok((element.place(0), stack.layout, len))
    }

    fn parser(&self, root: &Value) -> Result<ParserIr> {
        let parsers = array(member(root, "parsers", "the program")?, "\"parsers\"")?;
        let Some(p) = parsers.first() else {
            return fail("the program has no parser");
        };
        if parsers.len() > 1 {
            return fail("the program has more than one parser");
        }
        let states = array(
            member(p, "parse_states", "the parser")?,
            "the parser's states",
        )?;
        let init = str_member(p, "init_state", "the parser")?;
        // The IR starts at state 0: the initial state first, then the others in order.
        let mut order: Vec<&Value> = Vec::new();
        for s in states {
            if name(s, "a parser state")? == init {
                order.insert(0, s);
            } else {
                order.push(s);
            }
        }
        if order
            .first()
            .map(|s| name(s, "a parser state"))
            .transpose()?
            != Some(init)
        {
            return fail(format!("the parser's initial state {init} does not exist"));
        }
        let index: HashMap<&str, usize> = order
            .iter()
            .enumerate()
            .map(|(i, s)| Ok((name(s, "a parser state")?, i)))
            .collect::<Result<_>>()?;
        let target = |next: &Value| -> Result<Target> {
            match next {
                Value::Null => Ok(Target::Accept),
                Value::String(s) => match index.get(s.as_str()) {
                    Some(&i) => Ok(Target::State(i)),
                    None => fail(format!("a transition goes to unknown state {s}")),
                },
                _ => fail("a next_state must be a state name or null"),
            }
        };
        let scope = self.scope(&[]);
        let mut out = Vec::new();
        for s in order {
            let sname = name(s, "a parser state")?;
            let what = format!("parser state {sname}");
            let mut stmts = Vec::new();
            for o in array_member(s, "parser_ops", &what)? {
                stmts.extend(self.parser_op(o, &what)?);
            }
            let mut keys = Vec::new();
            let mut widths = Vec::new();
            for k in array_member(s, "transition_key", &what)? {
                let t = scope.expr(k)?;
                if t.width > 128
                    || t.width == 128
                        && !matches!(t.expr, Expr::Lookahead { .. })
                        && !matches!(k.get("type").and_then(Value::as_str), Some("field"))
                {
                    return fail(format!(
                        "{what}: a transition key must be a field or a lookahead"
                    ));
                }
                widths.push(t.width);
                keys.push(t.expr);
            }
            let transitions = array_member(s, "transitions", &what)?;
            // Whether the keys end with their concatenation, for value sets over several.
            let mut vset_key = false;
            let mut cases = Vec::new();
            let mut default = None;
            for t in transitions {
                let next = target(member(t, "next_state", &what)?)?;
                match str_member(t, "type", &what)? {
                    "default" => {
                        default = Some(next);
                        break;
                    }
                    "hexstr" => {
                        let value = split_key(str_member(t, "value", &what)?, &widths, &what)?;
                        let mask = match t.get("mask") {
                            None | Some(Value::Null) => {
                                widths.iter().map(|&w| ir::mask(w)).collect()
                            }
                            Some(m) => split_key(string(m, &what)?, &widths, &what)?,
                        };
                        let matches = value
                            .into_iter()
                            .zip(mask)
                            .map(|(value, mask)| FieldMatch::Masked { value, mask })
                            .collect();
                        cases.push((CaseKeyset::Fields(matches), next));
                    }
                    "parse_vset" => {
                        let total: u32 = widths.iter().map(|&w| u32::from(w)).sum();
                        if total > 128 {
                            return fail(format!(
                                "{what}: a parser value set over keys of {total} bits is not \
                                 supported (at most 128)"
                            ));
                        }
                        if keys.len() > 1 && !vset_key {
                            let with_widths: Vec<(Expr, u16)> =
                                keys.iter().cloned().zip(widths.iter().copied()).collect();
                            keys.push(ir::concat_keys(&with_widths));
                            vset_key = true;
                        }
                        let vname = str_member(t, "value", &what)?;
                        cases.push((
                            CaseKeyset::ValueSet(self.instance("parse_vset", vname)?),
                            next,
                        ));
                    }
                    other => return fail(format!("{what}: a transition of type {other}")),
                }
            }
            let transition = if cases.is_empty() {
                Transition::Goto(default.unwrap_or(Target::Accept))
            } else {
                if let Some(d) = default {
                    let any = widths
                        .iter()
                        .map(|_| FieldMatch::Masked { value: 0, mask: 0 })
                        .collect();
                    cases.push((CaseKeyset::Fields(any), d));
                }
                Transition::Select {
                    keys,
                    widths,
                    cases,
                }
            };
            out.push(State {
                name: sname.to_string(),
                stmts,
                transition,
            });
        }
        Ok(ParserIr {
            init: Vec::new(),
            states: out,
        })
    }

    /// Where an `extract` writes, the header written (its first element for a stack), and the
    /// statements that first invalidate the other members of its header union (as BMv2 does).
    fn extract_target(
        &self,
        v: &Value,
        what: &str,
    ) -> Result<(HeaderRef, Option<&crate::layout::Header>, Vec<Stmt>)> {
        let invalid = |place| Stmt::Assign(place, Expr::Const(0));
        match str_member(v, "type", what)? {
            "regular" => {
                let hname = object_name(v, what)?;
                let h = self.layout.header(hname)?;
                let siblings = self
                    .layout
                    .header_index(hname)
                    .map(|i| self.layout.union_siblings(i))
                    .unwrap_or_default();
                match h.valid {
                    Some(base) => Ok((
                        HeaderRef::Static {
                            base,
                            layout: h.layout,
                        },
                        Some(h),
                        siblings
                            .into_iter()
                            .map(|s| invalid(Place::Slot(s)))
                            .collect(),
                    )),
                    None => fail(format!("{what}: extracts metadata {hname}")),
                }
            }
            "stack" => {
                let hname = object_name(v, what)?;
                match self.layout.stacks.get(hname) {
                    Some(s) => Ok((
                        HeaderRef::Next {
                            stack: s.base,
                            count: s.elements.len() as u32,
                            stride: s.stride,
                            offset: 0,
                            layout: s.layout,
                        },
                        s.elements.first().map(|&e| &self.layout.headers[e]),
                        Vec::new(),
                    )),
                    None => fail(format!("{what}: no header stack is called {hname}")),
                }
            }
            "union_stack" => {
                let parts = array(member(v, "value", what)?, what)?;
                let (Some(sname), Some(mname), 2) = (
                    parts.first().and_then(Value::as_str),
                    parts.get(1).and_then(Value::as_str),
                    parts.len(),
                ) else {
                    return fail(format!(
                        "{what}: a union_stack extract names [stack, member]"
                    ));
                };
                let Some(s) = self.layout.union_stacks.get(sname) else {
                    return fail(format!("{what}: no header union stack is called {sname}"));
                };
                let Some(&(_, offset, layout)) = s.members.iter().find(|m| m.0 == mname) else {
                    return fail(format!("{what}: {sname}'s unions have no member {mname}"));
                };
                let next = DynSlot {
                    base: s.base + 1,
                    stride: s.stride,
                    count: s.count,
                    index: Box::new(Expr::Load(s.base)),
                };
                let siblings = s
                    .members
                    .iter()
                    .filter(|m| m.0 != mname)
                    .map(|m| invalid(Place::Dyn(next.offset(m.1))))
                    .collect();
                let target = HeaderRef::Next {
                    stack: s.base,
                    count: s.count,
                    stride: s.stride,
                    offset,
                    layout,
                };
                Ok((target, None, siblings))
            }
            other => fail(format!("{what}: extract to a {other} is not supported")),
        }
    }

    fn parser_op(&self, o: &Value, what: &str) -> Result<Vec<Stmt>> {
        let op = str_member(o, "op", what)?;
        let ps = params(o, what)?;
        let scope = self.scope(&[]);
        let ext = |c: ExternCall| Ok(vec![Stmt::Extern(Box::new(c))]);
        match op {
            "extract" => {
                let (target, _, mut out) = self.extract_target(param(ps, 0, op)?, what)?;
                out.push(Stmt::Extern(Box::new(ExternCall::Extract {
                    target,
                    varbit: None,
                })));
                Ok(out)
            }
            "extract_VL" => {
                let (target, h, mut out) = self.extract_target(param(ps, 0, op)?, what)?;
                if !h.is_some_and(|h| h.fields.iter().any(|f| f.width().is_none())) {
                    return fail(format!("{what}: extract_VL of a header without a varbit"));
                }
                out.push(Stmt::Extern(Box::new(ExternCall::Extract {
                    target,
                    varbit: Some(scope.expr(param(ps, 1, op)?)?.expr),
                })));
                Ok(out)
            }
            "set" => {
                let (place, width) = self.place(param(ps, 0, op)?, &[], what)?;
                Ok(vec![Stmt::Assign(
                    place,
                    scope.expr(param(ps, 1, op)?)?.fit(width),
                )])
            }
            "verify" => ext(ExternCall::Verify {
                cond: scope.expr(param(ps, 0, op)?)?.expr,
                error: scope.expr(param(ps, 1, op)?)?.expr,
            }),
            "shift" => {
                let bytes = scope.expr(param(ps, 0, op)?)?.expr;
                ext(ExternCall::Advance(Expr::Arith {
                    op: ir::ArithOp::Mul,
                    width: 128,
                    signed: false,
                    a: Box::new(bytes),
                    b: Box::new(Expr::Const(8)),
                }))
            }
            "advance" => ext(ExternCall::Advance(scope.expr(param(ps, 0, op)?)?.expr)),
            "primitive" => self.primitive(param(ps, 0, op)?, &[], what),
            other => fail(format!("{what}: parser operation {other} is not supported")),
        }
    }

    fn deparser(&self, root: &Value) -> Result<Vec<Stmt>> {
        let deparsers = array(member(root, "deparsers", "the program")?, "\"deparsers\"")?;
        let Some(d) = deparsers.first() else {
            return Ok(Vec::new());
        };
        let mut stmts = self.primitives(
            array_member(d, "primitives", "the deparser")?,
            &[],
            "the deparser",
        )?;
        let mut items = Vec::new();
        for h in array_member(d, "order", "the deparser")? {
            let hname = string(h, "a deparsed header")?;
            let header = self.layout.header(hname)?;
            match header.valid {
                Some(base) => items.push(EmitItem::Header {
                    base,
                    layout: header.layout,
                }),
                None => return fail(format!("the deparser emits metadata {hname}")),
            }
        }
        stmts.push(Stmt::Extern(Box::new(ExternCall::Emit(items))));
        Ok(stmts)
    }

    /// Every table of pipeline `p`, with its action profile.
    fn tables_of(
        &mut self,
        p: &Value,
        pname: &str,
        with_entries: &mut Vec<bool>,
        with_timeout: &mut Vec<bool>,
    ) -> Result<()> {
        let what = format!("pipeline {pname}");
        for ap in array_member(p, "action_profiles", &what)? {
            let aname = name(ap, "an action profile")?;
            let awhat = format!("action profile {aname}");
            let size = uint_member(ap, "max_size", &awhat)?.min(limits::MAX_TABLE_SIZE) as u32;
            let kind = match ap.get("selector") {
                None | Some(Value::Null) => InstanceKind::ActionProfile { size },
                Some(sel) => InstanceKind::ActionSelector {
                    size,
                    algo: algorithm(str_member(sel, "algo", &awhat)?)? as u8,
                },
            };
            self.add_instance("action_profile", aname, kind)?;
        }
        for t in array_member(p, "tables", &what)? {
            let tname = name(t, "a table")?;
            let table = self
                .table(t, tname, p)
                .map_err(|e| crate::LoadError::new(format!("table {tname}: {}", e.message())))?;
            with_entries.push(
                t.get("entries")
                    .is_some_and(|e| e.as_array().is_some_and(|a| !a.is_empty())),
            );
            with_timeout.push(flag(t, "support_timeout", tname)?);
            if self
                .table_index
                .insert(tname.to_string(), self.tables.len())
                .is_some()
            {
                return fail(format!("two tables are called {tname}"));
            }
            self.tables.push(table);
        }
        Ok(())
    }

    fn action_index(&self, id: &Value, what: &str) -> Result<usize> {
        let id = uint(id, what)?;
        match self.action_ids.get(&id) {
            Some(&a) => Ok(a),
            None => fail(format!("{what}: no action has id {id}")),
        }
    }

    fn action_call(&self, entry: &Value, what: &str) -> Result<ActionCall> {
        let action = self.action_index(member(entry, "action_id", what)?, what)?;
        let body = &self.bodies[self.actions[action].body];
        let data = array_member(entry, "action_data", what)?;
        if data.len() != body.params.len() {
            return fail(format!(
                "{what}: action {} takes {} parameters, given {}",
                body.name,
                body.params.len(),
                data.len()
            ));
        }
        let args = data
            .iter()
            .zip(&body.params)
            .map(|(d, p)| Ok(hex(string(d, what)?, what)?.0 & ir::mask(p.width)))
            .collect::<Result<Vec<_>>>()?;
        Ok(ActionCall { action, args })
    }

    fn table(&mut self, t: &Value, tname: &str, pipeline: &Value) -> Result<Table> {
        let scope = self.scope(&[]);
        let mut keys = Vec::new();
        for k in array_member(t, "key", "the table")? {
            let kind = match str_member(k, "match_type", "a key")? {
                "exact" | "valid" => MatchKind::Exact,
                "ternary" => MatchKind::Ternary,
                "lpm" => MatchKind::Lpm,
                "range" => MatchKind::Range,
                "optional" => MatchKind::Optional,
                other => return fail(format!("match type {other} is not supported")),
            };
            let target = member(k, "target", "a key")?;
            let (expr, width) = if str_member(k, "match_type", "a key")? == "valid" {
                match scope.validity(string(target, "a valid key's header")?)? {
                    Some(s) => (Expr::Load(s), 1),
                    None => (Expr::Const(1), 1),
                }
            } else {
                let (h, f) = field_name(target)?;
                let t = scope.expr(&serde_json::json!({"type": "field", "value": [h, f]}))?;
                let width = if f == "$valid$" { 1 } else { t.width.min(128) };
                let width = scope
                    .field(target)
                    .ok()
                    .and_then(|f| f.width())
                    .unwrap_or(width);
                (
                    Expr::Load(match t.expr {
                        Expr::Load(s) => s,
                        Expr::SignExtend { arg, .. } => match *arg {
                            Expr::Load(s) => s,
                            _ => return fail("a key must be a field"),
                        },
                        _ => return fail("a key must be a field"),
                    }),
                    width,
                )
            };
            let expr = match k.get("mask") {
                None | Some(Value::Null) => expr,
                Some(m) => {
                    let (m, _) = hex(string(m, "a key mask")?, "a key mask")?;
                    Expr::Arith {
                        op: ir::ArithOp::BitAnd,
                        width,
                        signed: false,
                        a: Box::new(expr),
                        b: Box::new(Expr::Const(m)),
                    }
                }
            };
            keys.push(Key {
                name: k
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                expr,
                width,
                kind,
            });
        }
        let mut actions = Vec::new();
        for id in array_member(t, "action_ids", "the table")? {
            let a = self.action_index(id, "the table's action_ids")?;
            if !actions.contains(&a) {
                actions.push(a);
            }
        }
        let size = uint_member(t, "max_size", "the table")?;
        if size > limits::MAX_TABLE_SIZE {
            return fail(format!(
                "max_size {size} is more than {} (limits::MAX_TABLE_SIZE)",
                limits::MAX_TABLE_SIZE
            ));
        }
        let (profile, selector) = match str_member(t, "type", "the table")? {
            "simple" => (None, Vec::new()),
            "indirect" | "indirect_ws" => {
                let aname = str_member(t, "action_profile", "the table")?;
                let profile = self.instance("action_profile", aname)?;
                let mut selector = Vec::new();
                let ap = array_member(pipeline, "action_profiles", "the pipeline")?
                    .iter()
                    .find(|ap| ap.get("name").and_then(Value::as_str) == Some(aname));
                if let Some(sel) = ap
                    .and_then(|ap| ap.get("selector"))
                    .filter(|s| !s.is_null())
                {
                    for input in array_member(sel, "input", "a selector")? {
                        let field = scope.field(member(input, "value", "a selector input")?)?;
                        let Some(width) = field.width() else {
                            return fail("a selector input is a varbit field");
                        };
                        selector.push(Key {
                            name: String::new(),
                            expr: Expr::Load(field.slot),
                            width,
                            kind: MatchKind::Selector,
                        });
                    }
                }
                (Some(profile), selector)
            }
            other => return fail(format!("table type {other} is not supported")),
        };
        let default = match t.get("default_entry") {
            Some(d) if !d.is_null() => Some((
                self.action_call(d, "the default entry")?,
                flag(d, "action_const", "the default entry")?,
            )),
            _ => None,
        };
        let (default_action, const_default) = match default {
            Some(d) => d,
            None => {
                let Some(&first) = actions.first() else {
                    return fail("it has no action");
                };
                (
                    ActionCall {
                        action: first,
                        args: Vec::new(),
                    },
                    false,
                )
            }
        };
        let mut const_entries = Vec::new();
        let entries = array_member(t, "entries", "the table")?;
        for (n, e) in entries.iter().enumerate() {
            let ewhat = format!("entry {}", n + 1);
            let mut matches = Vec::new();
            let ms = array_member(e, "match_key", &ewhat)?;
            if ms.len() != keys.len() {
                return fail(format!(
                    "{ewhat} has {} keys, the table {}",
                    ms.len(),
                    keys.len()
                ));
            }
            for (m, k) in ms.iter().zip(&keys) {
                matches.push(entry_match(m, k.width, &ewhat)?);
            }
            let action = self.action_call(member(e, "action_entry", &ewhat)?, &ewhat)?;
            let priority = e
                .get("priority")
                .and_then(Value::as_i64)
                .unwrap_or(n as i64 + 1);
            const_entries.push(Entry {
                matches,
                priority: Entry::priority_from_bmv2(priority),
                action,
            });
        }
        Ok(Table {
            name: tname.to_string(),
            keys,
            actions,
            bindings: Vec::new(),
            default_action,
            const_default,
            const_entries_fixed: !entries.is_empty(),
            const_entries,
            size: size as usize,
            direct_counter: self.direct_counters.get(tname).copied(),
            direct_meter: self.direct_meters.get(tname).map(|d| d.0),
            profile,
            selector,
            copies: Default::default(),
        })
    }

    /// The statements of control flow graph `g` from node `next` up to node `stop` (not
    /// included; `None`: to the end). A branching node's branches are lowered up to its join,
    /// and the statements from the join on follow the branching statement.
    fn graph<'p>(
        &mut self,
        g: &Graph<'p>,
        mut next: Option<&'p str>,
        stop: Option<&'p str>,
        depth: usize,
    ) -> Result<Vec<Stmt>> {
        if depth > limits::MAX_RUN_DEPTH {
            return fail(format!(
                "a pipeline's branches nest deeper than {} levels (limits::MAX_RUN_DEPTH)",
                limits::MAX_RUN_DEPTH
            ));
        }
        let mut out = Vec::new();
        while let Some(node) = next.filter(|&n| Some(n) != stop) {
            self.lowered_nodes += 1;
            if self.lowered_nodes > limits::MAX_LOWERED_NODES {
                return fail(format!(
                    "the pipelines' control flow graphs lower to more than {} nodes \
                     (limits::MAX_LOWERED_NODES)",
                    limits::MAX_LOWERED_NODES
                ));
            }
            let join = g.join(node);
            let table = match g.node(node)? {
                Node::Table(table) => table,
                Node::Conditional(c) => {
                    let what = format!("conditional {node}");
                    let cond = self.scope(&[]).expr(member(c, "expression", &what)?)?.expr;
                    let t = c.get("true_next").and_then(Value::as_str);
                    let f = c.get("false_next").and_then(Value::as_str);
                    let then = self.graph(g, t, join, depth + 1)?;
                    let otherwise = self.graph(g, f, join, depth + 1)?;
                    let index = self.condition(node, c);
                    out.push(Stmt::If(cond, then, otherwise, Some(index)));
                    next = join;
                    continue;
                }
            };
            let Some(&t) = self.table_index.get(node) else {
                return fail(format!(
                    "a pipeline goes to table {node}, which is not loaded"
                ));
            };
            static NONE: std::sync::OnceLock<serde_json::Map<String, Value>> =
                std::sync::OnceLock::new();
            let next_tables: &'p serde_json::Map<String, Value> = match table.get("next_tables") {
                Some(Value::Object(m)) => m,
                _ => NONE.get_or_init(serde_json::Map::new),
            };
            let base = table.get("base_default_next").and_then(Value::as_str);
            let Some(read) = externs::by_method("direct_meter", "read") else {
                return fail("softswitch's core has no direct_meter.read");
            };
            let meter = self
                .direct_meters
                .get(node)
                .map(|&(instance, slot, width)| {
                    Stmt::Extern(Box::new(ExternCall::Call {
                        ext: read,
                        args: vec![
                            ExternArg::Instance(instance),
                            ExternArg::Out(Place::Slot(slot), width),
                        ],
                    }))
                });
            let branch = |l: &mut Self, to: Option<&'p str>| -> Result<Vec<Stmt>> {
                let mut b: Vec<Stmt> = meter.iter().cloned().collect();
                b.extend(l.graph(g, to, join, depth + 1)?);
                Ok(b)
            };
            if let Some((hit, miss)) = hit_miss(table) {
                let then = branch(self, hit)?;
                let otherwise = branch(self, miss)?;
                out.push(Stmt::If(
                    Expr::TableHit {
                        table: t,
                        miss: false,
                    },
                    then,
                    otherwise,
                    None,
                ));
                next = join;
                continue;
            }
            let targets: Vec<Option<&str>> = next_tables.values().map(Value::as_str).collect();
            if targets.iter().all(|&to| to == base) {
                out.push(Stmt::Apply(t));
                out.extend(meter);
                next = base;
                continue;
            }
            // Cases by next node: the actions that lead there.
            let mut cases: Vec<(Vec<usize>, Option<&'p str>)> = Vec::new();
            for (aname, to) in next_tables {
                let to = to.as_str();
                let actions: Vec<usize> = self.tables[t]
                    .actions
                    .iter()
                    .copied()
                    .filter(|&a| self.actions[a].name == *aname)
                    .collect();
                match cases.iter_mut().find(|c| c.1 == to) {
                    Some(c) => c.0.extend(actions),
                    None => cases.push((actions, to)),
                }
            }
            let mut lowered = Vec::new();
            for (actions, to) in cases {
                lowered.push((actions, branch(self, to)?));
            }
            let default = branch(self, base)?;
            out.push(Stmt::SwitchAction {
                table: t,
                cases: lowered,
                default,
            });
            next = join;
        }
        Ok(out)
    }

    /// The index of conditional `node` (JSON `c`) in the trace's conditions: its source
    /// fragment and `file(line)` from its `source_info`, else its expression's place.
    fn condition(&mut self, node: &str, c: &Value) -> u32 {
        if let Some(&i) = self.condition_index.get(node) {
            return i;
        }
        let info = c.get("source_info");
        let text = info
            .and_then(|i| i.get("source_fragment"))
            .and_then(Value::as_str)
            .unwrap_or(node)
            .to_string();
        let location = info.and_then(|i| {
            let file = i.get("filename")?.as_str()?;
            let line = i.get("line")?.as_u64()?;
            Some(format!("{file}({line})"))
        });
        let index = self.conditions.len() as u32;
        self.conditions.push(Condition {
            text,
            node: node.to_string(),
            location,
        });
        self.condition_index.insert(node.to_string(), index);
        index
    }

    /// A copy of `fields` for one use of a calculation or learn list (by `what`), within
    /// [`limits::MAX_COPIED_FIELDS`] for the whole program: a long list used by many primitives
    /// would otherwise cost memory growing with the square of the JSON's size.
    fn copy_fields(&self, fields: &FieldList, what: &str) -> Result<FieldList> {
        let total = self.copied_fields.get() + fields.len();
        if total > limits::MAX_COPIED_FIELDS {
            return fail(format!(
                "{what}: the field lists of calculations and learn lists, copied into each \
                 primitive and checksum that uses them, come to more than {} fields \
                 (limits::MAX_COPIED_FIELDS)",
                limits::MAX_COPIED_FIELDS
            ));
        }
        self.copied_fields.set(total);
        Ok(fields.clone())
    }

    /// The verify and compute checksum controls.
    fn checksums(&self, root: &Value) -> Result<(Vec<Stmt>, Vec<Stmt>)> {
        let (mut verify, mut compute) = (Vec::new(), Vec::new());
        let scope = self.scope(&[]);
        for c in array_member(root, "checksums", "the program")? {
            let cname = name(c, "a checksum")?;
            let what = format!("checksum {cname}");
            let calc_name = str_member(c, "calculation", &what)?;
            let Some(calc) = self.calculations.get(calc_name) else {
                return fail(format!("{what}: no calculation is called {calc_name}"));
            };
            let (dst, width) = self.place(
                &serde_json::json!({"type": "field", "value": member(c, "target", &what)?}),
                &[],
                &what,
            )?;
            let cond = match c.get("if_cond") {
                None | Some(Value::Null) => Expr::Const(1),
                Some(e) => scope.expr(e)?.expr,
            };
            let is_verify = flag(c, "verify", &what)?;
            let is_update = c
                .get("update")
                .map_or(Ok(!is_verify), |_| flag(c, "update", &what))?;
            let Place::Slot(slot) = dst else {
                return fail(format!("{what}: its target must be a field"));
            };
            let payload = if calc.payload { "_with_payload" } else { "" };
            let data = self.copy_fields(&calc.fields, &what)?;
            let call = |kind: &str, checksum: ExternArg| -> Result<Stmt> {
                let name = format!("{kind}_checksum{payload}");
                let Some(ext) = externs::by_name(&name) else {
                    return fail(format!("softswitch's core has no {name}"));
                };
                let args = vec![
                    ExternArg::Value(cond.clone()),
                    ExternArg::Fields(data.clone()),
                    checksum,
                    ExternArg::Value(Expr::Const(calc.algo)),
                ];
                Ok(Stmt::Extern(Box::new(ExternCall::Call { ext, args })))
            };
            if is_verify {
                verify.push(call("verify", ExternArg::Sized(Expr::Load(slot), width))?);
            }
            if is_update {
                compute.push(call("update", ExternArg::Out(Place::Slot(slot), width))?);
            }
        }
        Ok((verify, compute))
    }
}

/// A byte string as an integer (at most 16 bytes).
fn bytes_value(bytes: &[u8], what: &str) -> Result<u128> {
    let significant: Vec<u8> = bytes.iter().copied().skip_while(|&b| b == 0).collect();
    if significant.len() > 16 {
        return fail(format!("{what}: a value wider than 128 bits"));
    }
    Ok(significant
        .iter()
        .fold(0u128, |v, &b| v << 8 | u128::from(b)))
}

/// A parser transition value (the key fields, each padded to whole bytes, concatenated) split
/// into one value per key.
fn split_key(s: &str, widths: &[u16], what: &str) -> Result<Vec<u128>> {
    let bytes = hex_bytes(s, what)?;
    let total: usize = widths.iter().map(|w| usize::from(*w).div_ceil(8)).sum();
    // p4c drops leading zero bytes of the whole value: pad them back.
    if bytes.len() > total {
        return fail(format!(
            "{what}: transition value {s} is wider than its key"
        ));
    }
    let mut padded = vec![0u8; total - bytes.len()];
    padded.extend(bytes);
    let mut out = Vec::new();
    let mut at = 0;
    for &w in widths {
        let n = usize::from(w).div_ceil(8);
        out.push(bytes_value(&padded[at..at + n], what)? & ir::mask(w));
        at += n;
    }
    Ok(out)
}

/// One key of a const entry.
fn entry_match(m: &Value, width: u16, what: &str) -> Result<FieldMatch> {
    let value = |key: &str| -> Result<u128> {
        Ok(bytes_value(&hex_bytes(str_member(m, key, what)?, what)?, what)? & ir::mask(width))
    };
    Ok(match str_member(m, "match_type", what)? {
        "exact" | "valid" => FieldMatch::Masked {
            value: value("key")?,
            mask: ir::mask(width),
        },
        "lpm" => {
            let len = uint_member(m, "prefix_length", what)?.min(u64::from(width)) as u16;
            let mask = ir::mask(width) & !ir::mask(width - len);
            FieldMatch::Masked {
                value: value("key")?,
                mask,
            }
        }
        "ternary" | "optional" => FieldMatch::Masked {
            value: value("key")?,
            mask: match m.get("mask") {
                None | Some(Value::Null) => ir::mask(width),
                Some(_) => value("mask")?,
            },
        },
        "range" => FieldMatch::Range {
            lo: value("start")?,
            hi: value("end")?,
        },
        other => return fail(format!("{what}: match type {other}")),
    })
}

/// The error names by code.
/// The items a field gives a field list (a hash's, a checksum's, a digest's): its bits in wire
/// order, slot by slot.
fn field_leaves(field: &Field) -> Vec<FieldItem> {
    match field.store {
        FieldStore::One(FieldLayout::VarBit { max }) => vec![FieldItem::VarBit {
            base: field.slot,
            max,
        }],
        FieldStore::One(FieldLayout::Fixed(w)) => vec![FieldItem::Bits(Expr::Load(field.slot), w)],
        FieldStore::Wide(w) => (field.slot..)
            .zip(ir::slot_widths(w))
            .map(|(slot, w)| FieldItem::Bits(Expr::Load(slot), w))
            .collect(),
    }
}

fn errors(root: &Value) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for e in array_member(root, "errors", "the program")? {
        let pair = array(e, "an error")?;
        let (Some(n), Some(code)) = (pair.first().and_then(Value::as_str), pair.get(1)) else {
            return fail("an error must be [name, code]");
        };
        let code = uint(code, "an error code")? as usize;
        if code >= limits::MAX_OBJECTS {
            return fail(format!("error code {code} is too large"));
        }
        if names.len() <= code {
            names.resize(code + 1, String::new());
        }
        names[code] = n.to_string();
    }
    if names.is_empty() {
        names = [
            "NoError",
            "PacketTooShort",
            "NoMatch",
            "StackOutOfBounds",
            "HeaderTooShort",
            "ParserTimeout",
            "ParserInvalidArgument",
        ]
        .map(String::from)
        .to_vec();
    }
    Ok(names)
}

/// Checks that running a packet recurses at most [`limits::MAX_RUN_DEPTH`] levels.
fn check_run_depth(p: &Program) -> Result<()> {
    let no: [usize; 0] = [];
    let bodies: Vec<usize> = {
        let d = ir::RunDepth {
            bodies: &no,
            tables: &no,
            subparsers: &no,
        };
        p.bodies.iter().map(|b| d.stmts(&b.stmts)).collect()
    };
    let tables: Vec<usize> = {
        let d = ir::RunDepth {
            bodies: &bodies,
            tables: &no,
            subparsers: &no,
        };
        p.tables
            .iter()
            .map(|t| d.table_apply(t, &p.actions))
            .collect()
    };
    let d = ir::RunDepth {
        bodies: &bodies,
        tables: &tables,
        subparsers: &no,
    };
    let deepest = p
        .controls
        .iter()
        .map(|c| d.stmts(&c.body))
        .chain([d.parser(&p.parser)])
        .chain(bodies.iter().copied())
        .chain(tables.iter().copied())
        .max()
        .unwrap_or(0);
    if deepest > limits::MAX_RUN_DEPTH {
        return fail(format!(
            "running it would recurse {deepest} levels, more than {} (limits::MAX_RUN_DEPTH)",
            limits::MAX_RUN_DEPTH
        ));
    }
    Ok(())
}

/// Where `break` and `continue` jump in a loop of an action's primitives.
#[derive(Clone, Copy)]
struct LoopJumps {
    /// The primitive after the loop.
    exit: usize,
    /// The first primitive of the update.
    next: usize,
}

/// The first primitive of the update of a loop whose body and update are primitives
/// `lo..back` and whose exit is `exit`: the first target of a forward `_jump` in them that is
/// neither a `break` nor an `if`'s jump past its else-block (one right before the target of a
/// `_jump_if_zero`); `back` when there is none (no `continue`: the update is run as the body's
/// end, the same).
fn continue_target(
    prims: &[Value],
    lo: usize,
    back: usize,
    exit: usize,
    target: &dyn Fn(&Value, usize) -> Result<usize>,
) -> Result<usize> {
    fn op(p: &Value) -> Option<&str> {
        p.get("op").and_then(Value::as_str)
    }
    let mut else_skips = Vec::new();
    for p in &prims[lo..back] {
        if op(p) == Some("_jump_if_zero") {
            else_skips.push(target(p, 1)?.wrapping_sub(1));
        }
    }
    let mut next = back;
    for (at, p) in prims.iter().enumerate().take(back).skip(lo) {
        if op(p) == Some("_jump") && !else_skips.contains(&at) {
            let to = target(p, 0)?;
            if to != exit && to > at && to <= back {
                next = next.min(to);
            }
        }
    }
    Ok(next)
}
