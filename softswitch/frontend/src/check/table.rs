//! Tables: keys and match kinds, the action list, default action, constant entries, size,
//! direct counters and meters; and keyset elements shared with parser `select`.

use super::{unsupported, Callable, Checker, Sym};
use crate::ast::{self, ExprKind, Keyset, TableProp};
use crate::diagnostic::{fail, Diagnostic, Result};
use crate::source::Span;
use crate::types::Type;
use softswitch_core::ir::{self, mask, ActionCall, FieldMatch, InstanceKind, MatchKind};

impl Checker<'_> {
    /// Lowers a table declared in the current control; returns its index.
    pub(super) fn table(&mut self, t: &ast::TableDecl) -> Result<usize> {
        let name = self.qualified(&t.name.name, &t.annotations, t.name.span)?;
        self.spend_annotations(&t.annotations, t.name.span)?;
        let mut keys = Vec::new();
        // Each key's type, for the values of its const entries (an enum member, an int).
        let mut key_types = Vec::new();
        let mut actions = Vec::new();
        let mut default = None;
        let mut entries = None;
        let mut size = 1024;
        let mut direct_counter = None;
        let mut direct_meter = None;
        let mut profile = None;
        let mut bindings = Vec::new();
        let mut order = EntryOrder {
            largest_wins: true,
            delta: 1,
        };
        let mut cp = crate::cpinfo::TableCp {
            annotations: t.annotations.clone(),
            ..Default::default()
        };
        for prop in &t.props {
            match prop {
                TableProp::Key(elems) => {
                    for k in elems {
                        let (key, ty) = self.key(k)?;
                        keys.push(key);
                        key_types.push(ty);
                        self.spend_annotations(&k.annotations, k.expr.span)?;
                        cp.keys.push(k.annotations.clone());
                    }
                }
                TableProp::Actions(refs) => {
                    for r in refs {
                        let action = self.action_index(&r.name)?;
                        actions.push(action);
                        self.spend_annotations(&r.annotations, r.span)?;
                        cp.action_refs.push(r.annotations.clone());
                        if !r.args.is_empty() {
                            bindings.push((action, self.action_binding(action, r)?));
                        }
                    }
                }
                TableProp::DefaultAction { action, is_const } => {
                    default = Some((action, *is_const))
                }
                TableProp::Entries {
                    entries: e,
                    is_const,
                } => entries = Some((e, *is_const)),
                TableProp::Other { name: p, value, .. } => match p.name.as_str() {
                    "size" => size = self.const_u128(value)?.min(1 << 24) as usize,
                    "counters" => direct_counter = Some(self.direct_instance(value, true)?),
                    "meters" => direct_meter = Some(self.direct_instance(value, false)?),
                    "implementation" => profile = Some(self.profile_instance(value, &t.name)?),
                    "largest_priority_wins" => match value.kind {
                        ExprKind::Bool(b) => order.largest_wins = b,
                        _ => {
                            return fail(value.span, "largest_priority_wins must be true or false")
                        }
                    },
                    "priority_delta" => {
                        order.delta = u64::try_from(self.const_u128(value)?)
                            .ok()
                            .filter(|d| *d > 0)
                            .ok_or_else(|| {
                                Diagnostic::new(value.span, "priority_delta must be positive")
                            })?
                    }
                    "support_timeout" => {
                        cp.supports_timeout = matches!(value.kind, ExprKind::Bool(true))
                    }
                    _ => {}
                },
            }
        }
        let default_action = match default {
            Some((r, is_const)) => {
                let call = self.action_call(r, &actions)?;
                (call, is_const)
            }
            None => {
                let no_action = ast::Ident {
                    name: "NoAction".into(),
                    span: t.name.span,
                };
                (
                    ActionCall {
                        action: self.action_index(&no_action)?,
                        args: Vec::new(),
                    },
                    false,
                )
            }
        };
        cp.keys = keys
            .iter()
            .zip(std::mem::take(&mut cp.keys))
            .filter(|(k, _)| k.kind != MatchKind::Selector)
            .map(|(_, annotations)| annotations)
            .collect();
        let key_types: Vec<Type> = keys
            .iter()
            .zip(key_types)
            .filter(|(k, _)| k.kind != MatchKind::Selector)
            .map(|(_, ty)| ty)
            .collect();
        cp.default_written = default.is_some();
        cp.has_entries = entries.is_some();
        let (selector, keys): (Vec<ir::Key>, Vec<ir::Key>) = keys
            .into_iter()
            .partition(|k| k.kind == MatchKind::Selector);
        if !selector.is_empty()
            && !profile.is_some_and(|p| {
                matches!(self.instances[p].kind, InstanceKind::ActionSelector { .. })
            })
        {
            return fail(
                t.name.span,
                "selector keys need an action selector: implementation = action_selector(...)",
            );
        }
        let table = ir::Table {
            name,
            keys,
            actions,
            bindings,
            default_action: default_action.0,
            const_default: default_action.1,
            const_entries: Vec::new(),
            const_entries_fixed: entries.as_ref().is_some_and(|(_, c)| *c),
            size,
            direct_counter,
            direct_meter,
            profile,
            selector,
            copies: Default::default(),
        };
        let depth = self.run_depth().table_apply(&table, &self.actions);
        self.depths.tables.push(depth);
        self.tables.push(table);
        self.cp.tables.push(cp);
        let idx = self.tables.len() - 1;
        if let Some((list, _)) = entries {
            let needs_priority = self.tables[idx].has_priority();
            let placed = self.entry_priorities(list, order, needs_priority)?;
            let mut out = Vec::new();
            for (i, bmv2) in placed {
                let priority = ir::Entry::priority_from_bmv2(bmv2);
                out.push(self.const_entry(idx, &key_types, &list[i], priority)?);
            }
            self.tables[idx].const_entries = out;
        }
        Ok(idx)
    }

    /// A key element, with its type.
    fn key(&mut self, k: &ast::KeyElement) -> Result<(ir::Key, Type)> {
        let v = self.scalar_any(&k.expr)?;
        let Some(width) = self.types.scalar_width(&v.ty).filter(|_| v.ty != Type::Int) else {
            return fail(
                k.expr.span,
                format!("a key of type {} cannot be matched", self.show(&v.ty)),
            );
        };
        let kind = match self.lookup(&k.match_kind.name) {
            Some(Sym::MatchKind(m)) => match m.as_str() {
                "exact" => MatchKind::Exact,
                "ternary" => MatchKind::Ternary,
                "lpm" => MatchKind::Lpm,
                "range" => MatchKind::Range,
                "optional" => MatchKind::Optional,
                "selector" => MatchKind::Selector,
                _ => return Err(unsupported(k.match_kind.span, &format!("match kind '{m}'"))),
            },
            _ => {
                return fail(
                    k.match_kind.span,
                    format!("unknown match kind '{}'", k.match_kind.name),
                )
            }
        };
        let name = super::name_annotation(&k.annotations).unwrap_or_else(|| expr_text(&k.expr));
        self.spend_name(&name, k.expr.span)?;
        let key = ir::Key {
            name,
            expr: v.expr,
            width,
            kind,
        };
        Ok((key, v.ty))
    }

    /// The action profile or selector of `implementation = value`: a named instance, or one
    /// written in place (`action_selector(HashAlgorithm.crc16, 32w64, 32w14)`), named after the table.
    fn profile_instance(&mut self, value: &ast::Expr, table: &ast::Ident) -> Result<usize> {
        let index = match &value.kind {
            ExprKind::Name(n) => match self.lookup(n) {
                Some(Sym::Instance(i)) => *i,
                _ => {
                    return fail(
                        value.span,
                        format!("'{n}' is not an action profile or selector"),
                    )
                }
            },
            ExprKind::Call {
                callee,
                type_args,
                args,
            } => {
                let ExprKind::Name(kind) = &callee.kind else {
                    return fail(
                        callee.span,
                        "expected action_profile(...) or action_selector(...)",
                    );
                };
                let instance = ast::Instance {
                    annotations: Vec::new(),
                    ty: ast::TypeRef::Named {
                        name: ast::Ident {
                            name: kind.clone(),
                            span: callee.span,
                        },
                        args: type_args.clone(),
                    },
                    args: args.clone(),
                    name: ast::Ident {
                        name: format!("{}_profile", table.name),
                        span: table.span,
                    },
                };
                self.instance(&instance)?
            }
            _ => {
                return fail(
                    value.span,
                    "expected action_profile(...) or action_selector(...)",
                )
            }
        };
        match self.instances[index].kind {
            InstanceKind::ActionProfile { .. } | InstanceKind::ActionSelector { .. } => Ok(index),
            _ => fail(value.span, "expected an action profile or selector"),
        }
    }

    fn action_index(&self, name: &ast::Ident) -> Result<usize> {
        match self.lookup(&name.name) {
            Some(Sym::Callable(i)) => match self.callables[*i].action {
                Some(a) => Ok(a),
                None => fail(
                    name.span,
                    format!("'{}' is a function, not an action", name.name),
                ),
            },
            _ => fail(name.span, format!("unknown action '{}'", name.name)),
        }
    }

    fn direct_instance(&self, value: &ast::Expr, counter: bool) -> Result<usize> {
        if let ExprKind::Name(n) = &value.kind {
            if let Some(Sym::Instance(i)) = self.lookup(n) {
                let want = if counter {
                    "direct_counter"
                } else {
                    "direct_meter"
                };
                if self.instances[*i].kind.type_name() == want {
                    return Ok(*i);
                }
            }
        }
        fail(
            value.span,
            if counter {
                "expected a direct_counter instance"
            } else {
                "expected a direct_meter instance"
            },
        )
    }

    /// Action `action`'s callable and how many of its parameters are directional (they come
    /// before the action data).
    fn action_params(&self, action: usize) -> (Callable, usize) {
        let callable = self.callables[self.action_callables[action]].clone();
        let directional = callable
            .params
            .iter()
            .take_while(|p| p.direction != ast::Direction::None)
            .count();
        (callable, directional)
    }

    /// The copy-in and copy-out of the directional arguments bound in the actions list
    /// (`actions = { setbyte(hdr.data.b2); }`).
    fn action_binding(&mut self, action: usize, r: &ast::ActionRef) -> Result<ir::ActionBinding> {
        let (callable, directional) = self.action_params(action);
        if r.args.len() != directional {
            return fail(
                r.span,
                format!(
                    "'{}' has {directional} directional parameters, {} bound",
                    r.name.name,
                    r.args.len()
                ),
            );
        }
        let args: Vec<&ast::Arg> = r.args.iter().collect();
        let (copy_in, copy_out) = self.bind(&callable.params, &args, true)?;
        Ok(ir::ActionBinding { copy_in, copy_out })
    }

    /// An action with constant action-data arguments (default action, constant entries).
    fn action_call(&mut self, r: &ast::ActionRef, allowed: &[usize]) -> Result<ActionCall> {
        let action = self.action_index(&r.name)?;
        if !allowed.contains(&action) {
            return fail(
                r.name.span,
                format!("action '{}' is not in the table's actions", r.name.name),
            );
        }
        // Directional arguments are the table's binding (or written again here); skip them.
        let (callable, directional) = self.action_params(action);
        let data = &callable.params[directional..];
        let given = if r.args.len() == callable.params.len() {
            &r.args[directional..]
        } else {
            &r.args[..]
        };
        let names: Vec<&str> = data.iter().map(|p| p.name.as_str()).collect();
        let args = super::stmt::order_args(&names, given, r.span)?;
        let mut values = Vec::new();
        for (arg, p) in args.iter().zip(data) {
            let v = self.const_value(&arg.value, &p.ty)?;
            values.push(v & mask(self.types.scalar_width(&p.ty).unwrap_or(128)));
        }
        Ok(ActionCall {
            action,
            args: values,
        })
    }

    /// The entries of `entries = {...}` in the order p4c's BMv2 back end lists them, each with
    /// the priority it gives BMv2 (a smaller value wins). As p4c: priorities written
    /// `priority = N` (or none: the first entry wins) are completed, each entry without one
    /// taking the one before it moved by `priority_delta` towards losing
    /// (`largest_priority_wins` says which way); the entries are sorted, winner first, and
    /// numbered from 1, but an entry annotated `@priority(N)` gives BMv2 N.
    fn entry_priorities(
        &mut self,
        entries: &[ast::Entry],
        order: EntryOrder,
        needs_priority: bool,
    ) -> Result<Vec<(usize, i64)>> {
        let mut p4: Vec<i128> = Vec::new();
        let mut current: i128 = 0;
        for (i, e) in entries.iter().enumerate() {
            match &e.priority {
                Some(p) if !needs_priority => {
                    return fail(
                        p.span,
                        "the table's keys are exact or lpm only: its entries take no priority",
                    )
                }
                Some(p) => current = i128::try_from(self.const_u128(p)?).unwrap_or(i128::MAX),
                None if i == 0 && entries.iter().any(|e| e.priority.is_some()) => {
                    return fail(
                        e.span,
                        "the first entry must have a priority, as later ones do",
                    )
                }
                None => {}
            }
            p4.push(current);
            let step = i128::from(order.delta);
            current = if order.largest_wins {
                current - step
            } else {
                current + step
            };
        }
        let mut placed: Vec<usize> = (0..entries.len()).collect();
        // Stable, so equal priorities keep the order they are written in.
        if order.largest_wins {
            placed.sort_by_key(|&i| std::cmp::Reverse(p4[i]));
        } else {
            placed.sort_by_key(|&i| p4[i]);
        }
        placed
            .into_iter()
            .enumerate()
            .map(|(rank, i)| {
                let annotated = entries[i]
                    .annotations
                    .iter()
                    .find(|a| a.name.name == "priority");
                let bmv2 = match annotated {
                    Some(a) => annotation_int(a)?,
                    None => rank as i64 + 1,
                };
                Ok((i, bmv2))
            })
            .collect()
    }

    fn const_entry(
        &mut self,
        table: usize,
        key_types: &[Type],
        e: &ast::Entry,
        priority: i64,
    ) -> Result<ir::Entry> {
        let keys: Vec<(u16, MatchKind)> = self.tables[table]
            .keys
            .iter()
            .map(|k| (k.width, k.kind))
            .collect();
        let keyset = one_per_key(&e.keyset, keys.len(), e.span, |keys, given| {
            format!("the table has {keys} keys, the entry gives {given}")
        })?;
        let mut matches = Vec::new();
        for ((k, (width, kind)), ty) in keyset.iter().zip(&keys).zip(key_types) {
            let m = self.keyset_match(k, ty)?;
            check_match_kind(m, *kind, *width, k.span())?;
            matches.push(m);
        }
        let actions = self.tables[table].actions.clone();
        let action = self.action_call(&e.action, &actions)?;
        Ok(ir::Entry {
            matches,
            priority,
            action,
        })
    }

    /// A keyset element of type `ty` as a match.
    pub(super) fn keyset_match(&mut self, k: &Keyset, ty: &Type) -> Result<FieldMatch> {
        let width = self.types.scalar_width(ty).unwrap_or(1);
        Ok(match k {
            Keyset::Default(_) | Keyset::DontCare(_) => FieldMatch::Masked { value: 0, mask: 0 },
            Keyset::Value(v) => FieldMatch::Masked {
                value: self.const_value(v, ty)?,
                mask: mask(width),
            },
            Keyset::Mask(v, m) => {
                // A mask is bits of the value's width, also for an enum (`E.A &&& 0xf0`).
                let bits = Type::Bits {
                    width,
                    signed: false,
                };
                let mask_ty = if matches!(ty, Type::Enum(_)) {
                    &bits
                } else {
                    ty
                };
                let (v, m) = (self.const_value(v, ty)?, self.const_value(m, mask_ty)?);
                FieldMatch::Masked {
                    value: v & m,
                    mask: m,
                }
            }
            Keyset::Range(lo, hi) => FieldMatch::Range {
                lo: self.const_value(lo, ty)?,
                hi: self.const_value(hi, ty)?,
            },
        })
    }
}

/// How a table orders the priorities of its entries.
#[derive(Clone, Copy)]
struct EntryOrder {
    /// `largest_priority_wins` (true unless the table says otherwise).
    largest_wins: bool,
    /// `priority_delta` (1 unless the table says otherwise).
    delta: u64,
}

/// The integer an annotation such as `@priority(N)` holds.
fn annotation_int(a: &ast::Annotation) -> Result<i64> {
    match a.body.as_slice() {
        [crate::lexer::Token {
            tok: crate::lexer::Tok::Int(lit),
            ..
        }] => i64::try_from(lit.value)
            .ok()
            .filter(|v| *v <= i64::from(i32::MAX))
            .ok_or_else(|| Diagnostic::new(a.name.span, "the priority is out of range")),
        _ => fail(a.name.span, format!("@{} takes one integer", a.name.name)),
    }
}

/// The keyset of a table entry or `select` case (written at `span`) as one element per key, a
/// lone `default` or `_` standing for every key; an error, which `mismatch` words from the
/// number of keys and the number given, when there are more or fewer.
pub(super) fn one_per_key(
    keyset: &[Keyset],
    keys: usize,
    span: Span,
    mismatch: impl FnOnce(usize, usize) -> String,
) -> Result<Vec<Keyset>> {
    let keyset = match keyset {
        [k @ (Keyset::Default(_) | Keyset::DontCare(_))] if keys > 1 => vec![k.clone(); keys],
        _ => keyset.to_vec(),
    };
    if keyset.len() != keys {
        return fail(span, mismatch(keys, keyset.len()));
    }
    Ok(keyset)
}

/// Rejects a match that its key's match kind cannot express (a range on an exact key, a
/// non-prefix mask on an lpm key).
fn check_match_kind(m: FieldMatch, kind: MatchKind, width: u16, span: Span) -> Result<()> {
    let ok = match (m, kind) {
        (FieldMatch::Masked { mask: mk, .. }, MatchKind::Exact) => mk == mask(width),
        (FieldMatch::Masked { mask: mk, .. }, MatchKind::Lpm) => {
            let ones = mk.count_ones() as u16;
            mk == mask(width) ^ (mask(width - ones.min(width)))
        }
        (FieldMatch::Masked { mask: mk, .. }, MatchKind::Optional) => mk == 0 || mk == mask(width),
        (FieldMatch::Masked { .. }, _) => true,
        (FieldMatch::Range { .. }, MatchKind::Range) => true,
        (FieldMatch::Range { .. }, _) => false,
    };
    if ok {
        Ok(())
    } else {
        fail(
            span,
            format!("this keyset cannot be used with a {kind:?} key").to_lowercase(),
        )
    }
}

/// The control-plane name of a key expression (`hdr.ipv4.dstAddr`).
fn expr_text(e: &ast::Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Member(b, m) => format!("{}.{}", expr_text(b), m.name),
        ExprKind::Index(b, i) => format!("{}[{}]", expr_text(b), expr_text(i)),
        ExprKind::Slice(b, h, l) => format!("{}[{}:{}]", expr_text(b), expr_text(h), expr_text(l)),
        ExprKind::Int(i) => i.value.to_string(),
        ExprKind::Call { callee, .. } => format!("{}()", expr_text(callee)),
        _ => "key".into(),
    }
}
