//! Statements and calls: blocks, assignments, `if`, `switch` (on values and on
//! `action_run`), `exit`, `return`, and calls of actions, functions, tables, header methods.

use super::expr::{to_place, val_type, Val};
use super::{CallParam, Checker, Sym};
use crate::ast::{self, Direction, ExprKind, Stmt as AstStmt, SwitchLabel};
use crate::diagnostic::{fail, Result};
use crate::source::Span;
use crate::types::Type;
use softswitch_core::ir::{DynSlot, Expr, ExternCall, Invoke, Place, Stmt};
use std::collections::HashMap;

impl<'a> Checker<'a> {
    /// Lowers a block in its own scope. An error in a statement is recorded and the block
    /// goes on with the next (see [`Checker::recover`]).
    pub(super) fn block(&mut self, b: &'a ast::Block) -> Result<Vec<Stmt>> {
        self.scopes.push(HashMap::new());
        let mut out = Vec::new();
        for s in &b.stmts {
            let stmts = self.stmt(s);
            match self.recovered(stmts) {
                Ok(stmts) => out.extend(stmts),
                Err(e) => {
                    self.scopes.pop();
                    return Err(e);
                }
            }
        }
        self.scopes.pop();
        Ok(out)
    }

    fn stmt_block(&mut self, s: &'a AstStmt) -> Result<Vec<Stmt>> {
        match s {
            AstStmt::Block(b) => self.block(b),
            other => {
                self.scopes.push(HashMap::new());
                let r = self.stmt(other);
                self.scopes.pop();
                r
            }
        }
    }

    pub(super) fn stmt(&mut self, s: &'a AstStmt) -> Result<Vec<Stmt>> {
        self.spend(1, stmt_span(s))?;
        match s {
            AstStmt::Assign { lhs, rhs, .. } => {
                let dst = self.place(lhs)?;
                self.assign_to(dst, rhs)
            }
            AstStmt::Call(e) => self.call_stmt(e),
            AstStmt::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                let c = self.bool_expr(cond)?;
                let t = self.stmt_block(then)?;
                let o = match otherwise {
                    Some(o) => self.stmt_block(o)?,
                    None => Vec::new(),
                };
                let index = self.conditions.len() as u32;
                self.conditions.push(cond.span);
                Ok(vec![Stmt::If(c, t, o, Some(index))])
            }
            AstStmt::Block(b) => self.block(b),
            AstStmt::Switch { expr, cases, span } => self.switch(expr, cases, *span),
            AstStmt::Exit(_) => Ok(vec![Stmt::Exit]),
            AstStmt::Return(value, span) => match (value, self.ret.clone()) {
                (None, None) => Ok(vec![Stmt::Return]),
                (Some(v), Some((ty, slot))) => {
                    let mut out = self.assign_to(self.storage(slot, ty), v)?;
                    out.push(Stmt::Return);
                    Ok(out)
                }
                (Some(v), None) => fail(v.span, "this function or action returns no value"),
                (None, Some(_)) => fail(*span, "this function must return a value"),
            },
            AstStmt::Decl(d) => match &**d {
                ast::Decl::Var(v) => self.var_decl(v),
                ast::Decl::Const {
                    ty, name, value, ..
                } => {
                    let ty = self.resolve_type(ty)?;
                    let sym = self.const_sym(ty, value)?;
                    self.declare(name, sym)?;
                    Ok(Vec::new())
                }
                other => fail(
                    other.name_span(),
                    "only variables and constants can be declared in a block",
                ),
            },
            AstStmt::Empty(_) => Ok(Vec::new()),
            AstStmt::For(l) => self.for_loop(l),
            AstStmt::ForIn(l) => self.for_in(l),
            AstStmt::Break(span) => self.loop_jump(Stmt::Break, *span),
            AstStmt::Continue(span) => self.loop_jump(Stmt::Continue, *span),
        }
    }

    fn switch(
        &mut self,
        on: &ast::Expr,
        cases: &'a [ast::SwitchCase],
        span: Span,
    ) -> Result<Vec<Stmt>> {
        let action_run = match &on.kind {
            ExprKind::Member(base, m) if m.name == "action_run" => self.applied_table(base)?,
            _ => None,
        };
        let (on_expr, on_ty) = match action_run {
            Some(_) => (None, None),
            None => {
                let v = self.scalar_any(on)?;
                if !matches!(v.ty, Type::Bits { .. } | Type::Enum(_) | Type::Error) {
                    return fail(
                        on.span,
                        format!("cannot switch on a value of type {}", self.show(&v.ty)),
                    );
                }
                (Some(v.expr), Some(v.ty))
            }
        };
        let mut pending: Vec<u128> = Vec::new();
        let mut value_cases = Vec::new();
        let mut default = None;
        let mut pending_default = false;
        for case in cases {
            match &case.label {
                SwitchLabel::Default(s) => {
                    if default.is_some() || pending_default {
                        return fail(*s, "duplicate default label");
                    }
                    pending_default = true;
                }
                SwitchLabel::Expr(e) => match (action_run, &on_ty) {
                    (Some(table), _) => {
                        let ExprKind::Name(n) = &e.kind else {
                            return fail(e.span, "expected an action name");
                        };
                        let action = match self.lookup(n) {
                            Some(Sym::Callable(i)) => self.callables[*i].action,
                            _ => None,
                        };
                        match action {
                            Some(a) if self.tables[table].actions.contains(&a) => {
                                pending.push(a as u128)
                            }
                            _ => {
                                return fail(
                                    e.span,
                                    format!(
                                        "'{n}' is not an action of table {}",
                                        self.tables[table].name
                                    ),
                                )
                            }
                        }
                    }
                    (None, ty) => {
                        let ty = ty.clone().expect("set for value switches");
                        pending.push(self.const_value(e, &ty)?);
                    }
                },
            }
            if let Some(body) = &case.body {
                let stmts = self.block(body)?;
                if pending_default {
                    default = Some(stmts.clone());
                    pending_default = false;
                }
                if !pending.is_empty() {
                    value_cases.push((std::mem::take(&mut pending), stmts));
                }
            }
        }
        if !pending.is_empty() || pending_default {
            return fail(span, "the last switch label needs a body");
        }
        let default = default.unwrap_or_default();
        Ok(vec![match (action_run, on_expr) {
            (Some(table), _) => {
                let cases = value_cases
                    .into_iter()
                    .map(|(v, s)| (v.into_iter().map(|a| a as usize).collect(), s))
                    .collect();
                Stmt::SwitchAction {
                    table,
                    cases,
                    default,
                }
            }
            (None, on) => Stmt::Switch {
                on: on.expect("value switch"),
                cases: value_cases,
                default,
            },
        }])
    }

    fn call_parts(e: &ast::Expr) -> (&ast::Expr, &[ast::TypeRef], &[ast::Arg]) {
        match &e.kind {
            ExprKind::Call {
                callee,
                type_args,
                args,
            } => (callee, type_args, args),
            _ => unreachable!("the parser only makes call statements of calls"),
        }
    }

    fn call_stmt(&mut self, e: &ast::Expr) -> Result<Vec<Stmt>> {
        let (callee, type_args, args) = Self::call_parts(e);
        match &callee.kind {
            ExprKind::Member(base, method) => {
                if VALUE_METHODS.contains(&method.name.as_str()) {
                    return self.discarded_value(e);
                }
                if let ExprKind::Name(n) = &base.kind {
                    let mut sym = self.lookup(n).cloned();
                    if method.name == "apply"
                        && matches!(sym, Some(Sym::Control(_) | Sym::Parser(_)))
                    {
                        let name = ast::Ident {
                            name: n.clone(),
                            span: base.span,
                        };
                        sym = self.direct_type_instance(&name, e.span)?;
                    }
                    match sym {
                        Some(Sym::Packet { out }) => {
                            return self.packet_call(out, method, type_args, args, e.span)
                        }
                        Some(Sym::Table(t)) if method.name == "apply" => {
                            no_args(args)?;
                            return Ok(vec![Stmt::Apply(t)]);
                        }
                        Some(Sym::Instance(i)) => return self.method_call(i, method, args, e.span),
                        Some(Sym::ParserInstance { parser, callable })
                            if method.name == "apply" =>
                        {
                            // The packet argument is the caller's packet; the rest bind like a call's.
                            let rest: Vec<&ast::Arg> = args
                                .iter()
                                .filter(|a| !matches!(&a.value.kind, ExprKind::Name(n) if matches!(self.lookup(n), Some(Sym::Packet { .. }))))
                                .collect();
                            let params = self.callables[callable].params.clone();
                            if rest.len() != params.len() {
                                return fail(e.span, format!("the parser takes {} arguments besides the packet, {} given", params.len(), rest.len()));
                            }
                            let (copy_in, copy_out) = self.bind(&params, &rest, false)?;
                            return Ok(vec![Stmt::Extern(Box::new(ExternCall::SubParser {
                                parser,
                                copy_in,
                                copy_out,
                            }))]);
                        }
                        Some(Sym::ControlInstance(c)) if method.name == "apply" => {
                            let inv = self.invoke(c, args, e.span)?;
                            return Ok(vec![Stmt::Invoke(Box::new(inv))]);
                        }
                        _ => {}
                    }
                }
                let target = self.expr(base)?;
                let mut out = self.header_method(target, method, args)?;
                if method.name == "setValid" {
                    out.extend(self.invalidate_union_siblings(base)?);
                }
                Ok(out)
            }
            ExprKind::Name(n) => match self.lookup(n).cloned() {
                Some(Sym::Callable(i)) => {
                    let inv = self.invoke(i, args, e.span)?;
                    Ok(vec![Stmt::Invoke(Box::new(inv))])
                }
                Some(Sym::GenericFunction(proto, body)) => {
                    let i = self.instantiate(proto, body, type_args, args, e.span)?;
                    let inv = self.invoke(i, args, e.span)?;
                    Ok(vec![Stmt::Invoke(Box::new(inv))])
                }
                Some(Sym::ExternFunction) => self.function_call(n, type_args, args, e.span),
                Some(_) => fail(callee.span, format!("'{n}' cannot be called")),
                None => fail(callee.span, format!("unknown name '{n}'")),
            },
            _ => fail(callee.span, "this expression cannot be called"),
        }
    }

    /// A call whose value is discarded (`packet.lookahead<T>();`): evaluated for its effects
    /// (a lookahead past the packet's end is a parser error, as in BMv2) into a scratch slot.
    fn discarded_value(&mut self, e: &ast::Expr) -> Result<Vec<Stmt>> {
        match self.call_value(e)? {
            Val::Scalar { expr, ty, .. } => {
                let scratch = self.alloc(&ty, e.span)?;
                Ok(vec![Stmt::Assign(Place::Slot(scratch), expr)])
            }
            // Its bits must be there; none is read.
            Val::Lookahead { offset, need, .. } => {
                Ok(vec![super::expr::lookahead_check(offset, need)])
            }
            _ => Ok(Vec::new()),
        }
    }

    /// A call in an expression: `h.isValid()`, a function with a result, `lookahead`, `length`.
    pub(super) fn call_value(&mut self, e: &ast::Expr) -> Result<Val> {
        let (callee, type_args, args) = Self::call_parts(e);
        let scalar = |expr: Expr, ty: Type| {
            Ok(Val::Scalar {
                expr,
                ty,
                konst: None,
            })
        };
        match &callee.kind {
            ExprKind::Member(base, method) => {
                if let ExprKind::Name(n) = &base.kind {
                    if let Some(Sym::Packet { out: false }) = self.lookup(n) {
                        return match method.name.as_str() {
                            "lookahead" => {
                                let [t] = type_args else {
                                    return fail(callee.span, "lookahead needs one type argument");
                                };
                                let ty = self.resolve_type(t)?;
                                self.lookahead(ty, t.span())
                            }
                            "length" => scalar(
                                Expr::PacketLength,
                                Type::Bits {
                                    width: 32,
                                    signed: false,
                                },
                            ),
                            _ => fail(
                                method.span,
                                format!("packet_in.{} has no result", method.name),
                            ),
                        };
                    }
                }
                if matches!(
                    method.name.as_str(),
                    "minSizeInBits" | "minSizeInBytes" | "maxSizeInBits" | "maxSizeInBytes"
                ) {
                    no_args(args)?;
                    let ty = super::expr::val_type(&self.expr(base)?);
                    let bits = self.types.size_in_bits(&ty, method.name.starts_with("max"));
                    let value = if method.name.ends_with("Bytes") {
                        bits.div_ceil(8)
                    } else {
                        bits
                    };
                    return Ok(Val::Int(value.into()));
                }
                if let ExprKind::Name(n) = &base.kind {
                    if let Some(Sym::Instance(i)) = self.lookup(n) {
                        let i = *i;
                        if matches!(
                            self.instances[i].kind,
                            softswitch_core::ir::InstanceKind::Checksum16
                        ) && method.name == "get"
                        {
                            let [data] = args else {
                                return fail(e.span, "get takes one argument");
                            };
                            let fields = self.field_list(&data.value)?;
                            return scalar(
                                Expr::Checksum16(Box::new(fields)),
                                Type::Bits {
                                    width: 16,
                                    signed: false,
                                },
                            );
                        }
                    }
                }
                if method.name == "isValid" {
                    no_args(args)?;
                    return match self.expr(base)? {
                        // Valid once its bits are there (a packet too short is a parser error).
                        Val::Lookahead {
                            ty, offset, need, ..
                        } if self.types.is_header(&ty) => {
                            let check = Expr::Lookahead {
                                offset,
                                width: 0,
                                need,
                            };
                            scalar(
                                Expr::Or(Box::new(check), Box::new(Expr::Const(1))),
                                Type::Bool,
                            )
                        }
                        Val::Agg { base: slot, ty } if self.types.is_header(&ty) => {
                            scalar(Expr::Load(slot), Type::Bool)
                        }
                        Val::Agg {
                            base: slot,
                            ty: Type::Aggregate(a),
                        } if self.types.aggregates[a].kind == ast::AggregateKind::HeaderUnion => {
                            let mut any = Expr::Const(0);
                            let mut off = 0;
                            for (_, fty, _) in self.types.aggregates[a].fields.clone() {
                                any = Expr::Or(Box::new(any), Box::new(Expr::Load(slot + off)));
                                off += self.types.size(&fty);
                            }
                            scalar(any, Type::Bool)
                        }
                        Val::DynElem { slot: element, ty } => {
                            // A header's validity, or any of a header union's members'.
                            let any = self.types.validity_offsets(&ty).into_iter().fold(
                                Expr::Const(0),
                                |any, off| {
                                    let valid = Expr::LoadDyn(element.offset(off));
                                    Expr::Or(Box::new(any), Box::new(valid))
                                },
                            );
                            scalar(any, Type::Bool)
                        }
                        other => fail(
                            base.span,
                            format!(
                                "isValid needs a header, found {}",
                                self.show(&val_type(&other))
                            ),
                        ),
                    };
                }
                fail(
                    e.span,
                    format!(
                        "'{}' has no result that can be used in an expression",
                        method.name
                    ),
                )
            }
            ExprKind::Name(n) => match self.lookup(n).cloned() {
                Some(Sym::GenericFunction(proto, body)) => {
                    let i = self.instantiate(proto, body, type_args, args, e.span)?;
                    let Some((ty, _)) = self.callables[i].ret.clone() else {
                        return fail(e.span, format!("'{n}' returns no value"));
                    };
                    let inv = self.invoke(i, args, e.span)?;
                    scalar(Expr::Invoke(Box::new(inv)), ty)
                }
                Some(Sym::Callable(i)) => {
                    let Some((ty, _)) = self.callables[i].ret.clone() else {
                        return fail(e.span, format!("'{n}' returns no value"));
                    };
                    let inv = self.invoke(i, args, e.span)?;
                    scalar(Expr::Invoke(Box::new(inv)), ty)
                }
                Some(Sym::ExternFunction) => match self.user_extern_call(n, args, e.span)? {
                    Some(v) => Ok(v),
                    None => fail(e.span, format!("'{n}' returns no value")),
                },
                Some(_) => fail(
                    callee.span,
                    format!("'{n}' has no result that can be used in an expression"),
                ),
                None => fail(callee.span, format!("unknown name '{n}'")),
            },
            _ => fail(callee.span, "this expression cannot be called"),
        }
    }

    /// If `member` is `u.h` for a header union `u`, statements invalidating `u`'s other members
    /// (a union holds at most one valid header).
    /// The union may be an element of a stack picked at run time, or `stack.next`.
    pub(super) fn invalidate_union_siblings(&mut self, member: &ast::Expr) -> Result<Vec<Stmt>> {
        let ExprKind::Member(union, name) = &member.kind else {
            return Ok(Vec::new());
        };
        // Where the union's slot `off` is.
        let next_of = match &union.kind {
            ExprKind::Member(stack, next) if next.name == "next" => Some(stack),
            _ => None,
        };
        let (agg, place): (usize, Box<dyn Fn(u32) -> Place>) = match next_of {
            Some(stack_expr) => {
                let Val::Agg {
                    base: stack,
                    ty: Type::Stack(agg, count),
                } = self.expr(stack_expr)?
                else {
                    return Ok(Vec::new());
                };
                let next = DynSlot {
                    base: stack + 1,
                    stride: self.types.size(&Type::Aggregate(agg)),
                    count,
                    index: Box::new(Expr::Load(stack)),
                };
                (agg, Box::new(move |off| Place::Dyn(next.offset(off))))
            }
            None => match self.expr(union)? {
                Val::Agg {
                    base,
                    ty: Type::Aggregate(agg),
                } => (agg, Box::new(move |off| Place::Slot(base + off))),
                Val::DynElem {
                    slot: element,
                    ty: Type::Aggregate(agg),
                } => (agg, Box::new(move |off| Place::Dyn(element.offset(off)))),
                _ => return Ok(Vec::new()),
            },
        };
        if self.types.aggregates[agg].kind != ast::AggregateKind::HeaderUnion {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (field, off, _) in self.types.aggregates[agg].fields_at() {
            if field != name.name {
                out.push(Stmt::Assign(place(off), Expr::Const(0)));
            }
        }
        Ok(out)
    }

    fn header_method(
        &mut self,
        target: Val,
        method: &ast::Ident,
        args: &[ast::Arg],
    ) -> Result<Vec<Stmt>> {
        match (method.name.as_str(), target) {
            ("setValid" | "setInvalid", Val::Agg { base, ty }) if self.types.is_header(&ty) => {
                no_args(args)?;
                Ok(vec![Stmt::Assign(
                    Place::Slot(base),
                    Expr::Const(u128::from(method.name == "setValid")),
                )])
            }
            ("setValid" | "setInvalid", Val::DynElem { slot, .. }) => {
                no_args(args)?;
                Ok(vec![Stmt::Assign(
                    Place::Dyn(slot),
                    Expr::Const(u128::from(method.name == "setValid")),
                )])
            }
            (
                "push_front" | "pop_front",
                Val::Agg {
                    base,
                    ty: Type::Stack(agg, count),
                },
            ) => {
                let [arg] = args else {
                    return fail(method.span, format!("{} takes one argument", method.name));
                };
                let n = self.const_u128(&arg.value)?.min(u128::from(count)) as i32;
                let stride = self.types.size(&Type::Aggregate(agg));
                let shift = if method.name == "push_front" { n } else { -n };
                Ok(vec![Stmt::Extern(Box::new(ExternCall::StackShift {
                    stack: base,
                    count,
                    stride,
                    valids: self.types.validity_offsets(&Type::Aggregate(agg)),
                    shift,
                }))])
            }
            (m, other) => fail(
                method.span,
                format!(
                    "a value of type {} has no method '{m}'",
                    self.show(&val_type(&other))
                ),
            ),
        }
    }

    /// Binds arguments to an action's or function's parameters (copy-in, copy-out).
    pub(super) fn invoke(&mut self, idx: usize, args: &[ast::Arg], span: Span) -> Result<Invoke> {
        let callable = self.callables[idx].clone();
        let names: Vec<&str> = callable.params.iter().map(|p| p.name.as_str()).collect();
        let args = order_args(&names, args, span)?;
        let (copy_in, copy_out) = self.bind(&callable.params, &args, callable.action.is_some())?;
        Ok(Invoke {
            copy_in,
            body: callable.body,
            copy_out,
            ret: callable.ret.map(|(_, s)| s),
        })
    }

    /// Copy-in and copy-out statements binding `args` to the first `args.len()` of `params`.
    /// An action's directionless parameters (`action`: its action data, in a direct call) take
    /// any value, run-time ones included, as p4c's BMv2 back end compiles them (the tutorials'
    /// calc and firewall); those of functions, parsers and controls take compile-time constants
    /// only, as p4c's type checker says.
    pub(super) fn bind(
        &mut self,
        params: &[CallParam],
        args: &[&ast::Arg],
        action: bool,
    ) -> Result<(Vec<Stmt>, Vec<Stmt>)> {
        let mut copy_in = Vec::new();
        let mut copy_out = Vec::new();
        for (p, arg) in params.iter().zip(args) {
            if p.direction == Direction::None && !action && !self.is_constant(&arg.value)? {
                // p4c's type unification refuses it (p4lang/p4c#4175); `in` takes any value.
                return fail(
                    arg.value.span,
                    format!(
                        "argument used for directionless parameter '{}' must be a compile-time \
                         constant (p4c refuses a run-time value outside an action call); \
                         declare the parameter `in` to pass one",
                        p.name
                    ),
                );
            }
            let param_val = self.storage(p.slot, p.ty.clone());
            if matches!(p.direction, Direction::Out) {
                copy_in.push(Stmt::Zero {
                    start: p.slot,
                    len: self.types.size(&p.ty),
                });
            } else {
                copy_in.extend(self.assign_to(param_val, &arg.value)?);
            }
            if matches!(p.direction, Direction::Out | Direction::InOut)
                && !matches!(arg.value.kind, ExprKind::DontCare)
            {
                let dst = self.place(&arg.value)?;
                copy_out.extend(self.copy_back(dst, p.slot, &p.ty, arg.value.span)?);
            }
        }
        Ok((copy_in, copy_out))
    }

    /// Whether `e` is a compile-time constant: a constant scalar, or a list or struct
    /// expression of constants (`f({ {48w1, 48w1, 16w1} })` for a directionless struct
    /// parameter, which p4c accepts).
    fn is_constant(&mut self, e: &ast::Expr) -> Result<bool> {
        match &e.kind {
            ExprKind::List(items) => {
                for item in items {
                    if !self.is_constant(item)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            ExprKind::StructInit(inits) => {
                for (_, item) in inits {
                    if !self.is_constant(item)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            _ => Ok(self.scalar_any(e)?.konst.is_some()),
        }
    }

    /// Statements copying a value stored at `src` (of type `ty`) into the l-value `dst`.
    pub(super) fn copy_back(&self, dst: Val, src: u32, ty: &Type, span: Span) -> Result<Vec<Stmt>> {
        if val_type(&dst) != *ty {
            return fail(
                span,
                format!(
                    "type mismatch: expected {}, found {}",
                    self.show(ty),
                    self.show(&val_type(&dst))
                ),
            );
        }
        match dst {
            Val::Scalar { expr, .. } => {
                Ok(vec![Stmt::Assign(to_place(expr, span)?, Expr::Load(src))])
            }
            v @ (Val::Agg { .. } | Val::DynElem { .. }) => {
                let (dst, ty) = super::expr::block(v).expect("a stored value");
                let len = self.types.size(&ty);
                Ok(vec![Stmt::copy_block(dst, Place::Slot(src), len)])
            }
            Val::Int(_) => fail(span, "an int constant cannot be an out argument"),
            Val::Lookahead { .. } => fail(span, "a lookahead cannot be an out argument"),
            Val::Wide { .. } => fail(
                span,
                "a computed value wider than 128 bits cannot be an out argument",
            ),
        }
    }
}

/// Puts arguments in parameter order, resolving named arguments.
pub(super) fn order_args<'e>(
    params: &[&str],
    args: &'e [ast::Arg],
    span: Span,
) -> Result<Vec<&'e ast::Arg>> {
    if args.len() != params.len() {
        return fail(
            span,
            format!("expected {} arguments, found {}", params.len(), args.len()),
        );
    }
    if args.iter().all(|a| a.name.is_none()) {
        return Ok(args.iter().collect());
    }
    params
        .iter()
        .map(|p| {
            match args
                .iter()
                .find(|a| a.name.as_ref().is_some_and(|n| n.name == *p))
            {
                Some(a) => Ok(a),
                None => fail(span, format!("missing argument '{p}'")),
            }
        })
        .collect()
}

/// Methods whose only use is their value: a call of one as a statement is evaluated, and the
/// value dropped (functions and actions that return one are called as usual).
const VALUE_METHODS: [&str; 6] = [
    "lookahead",
    "isValid",
    "minSizeInBits",
    "minSizeInBytes",
    "maxSizeInBits",
    "maxSizeInBytes",
];

/// Where a statement is.
fn stmt_span(s: &AstStmt) -> Span {
    match s {
        AstStmt::Assign { span, .. }
        | AstStmt::If { span, .. }
        | AstStmt::Switch { span, .. }
        | AstStmt::Exit(span)
        | AstStmt::Return(_, span)
        | AstStmt::Empty(span)
        | AstStmt::Break(span)
        | AstStmt::Continue(span) => *span,
        AstStmt::For(l) => l.span,
        AstStmt::ForIn(l) => l.span,
        AstStmt::Call(e) => e.span,
        AstStmt::Block(b) => b.span,
        AstStmt::Decl(d) => d.name_span(),
    }
}

pub(super) fn no_args(args: &[ast::Arg]) -> Result<()> {
    match args.first() {
        Some(a) => fail(a.value.span, "this method takes no arguments"),
        None => Ok(()),
    }
}
