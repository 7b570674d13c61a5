//! Parsers: states, `select` transitions with value, mask, range and default keysets.

use super::table::one_per_key;
use super::{Checker, Sym};
use crate::ast::{self, Transition as AstTransition};
use crate::diagnostic::{fail, Result};
use crate::types::Type;
use softswitch_core::ir::{self, CaseKeyset, Expr, InstanceKind, Slot, Target, Transition};
use std::collections::HashMap;

impl<'a> Checker<'a> {
    /// Lowers the v1model parser; its parameters are bound to `args`.
    pub(super) fn parser(
        &mut self,
        p: &'a ast::ParserDecl,
        args: &[(Type, Slot)],
        ctor_args: &[ast::Arg],
    ) -> Result<ir::ParserIr> {
        self.enter_block(&p.name, &p.params, args, &p.ctor_params, ctor_args)?;
        let lowered = self.parser_body(p);
        self.leave_block();
        let lowered = lowered?;
        let depth = self.run_depth().parser(&lowered);
        self.check_run_depth(depth, &format!("parser {}", p.name.name), p.name.span)?;
        Ok(lowered)
    }

    /// Lowers parser `p` instantiated as `i` inside another parser: its `packet_in` parameter is
    /// the caller's packet, its other parameters get slots of their own (bound by copy-in and
    /// copy-out at each `apply`), and it sees only top-level names. Returns its index in
    /// [`ir::Program::subparsers`] and the callable that binds its parameters.
    pub(super) fn sub_parser(
        &mut self,
        i: &ast::Instance,
        p: &'a ast::ParserDecl,
    ) -> Result<(usize, usize)> {
        let (constants, outer) = self.enter_instance(i, &p.name, &p.ctor_params)?;
        let lowered = (|| {
            self.declare_all(constants)?;
            let mut params = Vec::new();
            for param in &p.params {
                if super::type_name(&param.ty) == "packet_in" {
                    self.declare(&param.name, Sym::Packet { out: false })?;
                } else {
                    params.extend(self.params(std::slice::from_ref(param))?);
                }
            }
            let ir = self.parser_body(p)?;
            Ok((params, ir))
        })();
        let name = self.leave_instance(outer);
        let (params, ir) = lowered?;
        let depth = self.run_depth().parser(&ir);
        self.depths.subparsers.push(depth);
        self.subparsers.push(ir);
        let body = self.push_body(name, &params, Vec::new(), i.name.span)?;
        self.callables.push(super::Callable {
            body,
            params,
            ret: None,
            action: None,
        });
        Ok((self.subparsers.len() - 1, self.callables.len() - 1))
    }

    /// The locals and states of a parser whose parameters are declared in the current scope.
    fn parser_body(&mut self, p: &'a ast::ParserDecl) -> Result<ir::ParserIr> {
        let was_in_parser = std::mem::replace(&mut self.in_parser, true);
        self.blocks.push(p.name.name.clone());
        let lowered = self.states(p);
        self.blocks.pop();
        self.in_parser = was_in_parser;
        lowered
    }

    fn states(&mut self, p: &'a ast::ParserDecl) -> Result<ir::ParserIr> {
        let mut init = Vec::new();
        for local in &p.locals {
            let stmts = self.local(local);
            init.extend(self.recovered(stmts)?);
        }
        let mut order: Vec<&ast::State> =
            p.states.iter().filter(|s| s.name.name == "start").collect();
        if order.is_empty() {
            return fail(
                p.name.span,
                format!("parser '{}' has no start state", p.name.name),
            );
        }
        order.extend(p.states.iter().filter(|s| s.name.name != "start"));
        // Each state's index (`start` is 0), by name.
        let mut names = HashMap::new();
        for (i, s) in order.iter().enumerate() {
            let name = s.name.name.as_str();
            if names.insert(name, i).is_some() || name == "accept" || name == "reject" {
                return fail(
                    s.name.span,
                    format!("state '{}' is already declared", s.name.name),
                );
            }
        }
        let mut states = Vec::new();
        for s in &order {
            let mut stmts = Vec::new();
            self.scopes.push(Default::default());
            for st in &s.body {
                let lowered = self.stmt(st);
                stmts.extend(self.recovered(lowered)?);
            }
            let transition = match &s.transition {
                None => Transition::Goto(Target::Reject),
                Some(AstTransition::Goto(t)) => Transition::Goto(target(&names, t)?),
                Some(AstTransition::Select { exprs, cases, .. }) => {
                    self.select(&names, exprs, cases)?
                }
            };
            self.scopes.pop();
            self.spend_name(&s.name.name, s.name.span)?;
            states.push(ir::State {
                name: s.name.name.clone(),
                stmts,
                transition,
            });
        }
        Ok(ir::ParserIr { init, states })
    }

    fn select(
        &mut self,
        names: &HashMap<&str, usize>,
        exprs: &[ast::Expr],
        cases: &[ast::SelectCase],
    ) -> Result<Transition> {
        let mut keys = Vec::new();
        let mut types = Vec::new();
        let mut widths = Vec::new();
        for e in exprs {
            let v = self.scalar_any(e)?;
            if v.ty == Type::Int || self.types.scalar_width(&v.ty).is_none() {
                return fail(
                    e.span,
                    format!("cannot select on a value of type {}", self.show(&v.ty)),
                );
            }
            keys.push(v.expr);
            widths.push(self.types.scalar_width(&v.ty).unwrap_or(0));
            types.push(v.ty);
        }
        let mut out = Vec::new();
        // The select expressions concatenated, a last key for value sets over several.
        let mut concatenated = None;
        for case in cases {
            if let Some(set) = self.value_set_keyset(&case.keyset, &types)? {
                if types.len() > 1 && concatenated.is_none() {
                    let widths = types
                        .iter()
                        .map(|t| self.types.scalar_width(t).unwrap_or(1));
                    let with_widths: Vec<(Expr, u16)> = keys.iter().cloned().zip(widths).collect();
                    concatenated = Some(ir::concat_keys(&with_widths));
                }
                out.push((CaseKeyset::ValueSet(set), target(names, &case.target)?));
                continue;
            }
            let keyset = one_per_key(&case.keyset, types.len(), case.span, |keys, given| {
                format!("select has {keys} expressions, the case gives {given}")
            })?;
            let mut matches = Vec::new();
            for (k, ty) in keyset.iter().zip(&types) {
                matches.push(self.keyset_match(k, ty)?);
            }
            out.push((CaseKeyset::Fields(matches), target(names, &case.target)?));
        }
        keys.extend(concatenated);
        Ok(Transition::Select {
            keys,
            widths,
            cases: out,
        })
    }
}

impl Checker<'_> {
    /// If the keyset is a parser value set, its instance index (checked against the key type).
    fn value_set_keyset(&self, keyset: &[ast::Keyset], types: &[Type]) -> Result<Option<usize>> {
        let [ast::Keyset::Value(ast::Expr {
            kind: ast::ExprKind::Name(n),
            span,
        })] = keyset
        else {
            return Ok(None);
        };
        let Some(Sym::Instance(i)) = self.lookup(n) else {
            return Ok(None);
        };
        let widths: Vec<Option<u16>> = types.iter().map(|t| self.types.scalar_width(t)).collect();
        match (&self.instances[*i].kind, widths.as_slice()) {
            (InstanceKind::ValueSet { width, fields, .. }, [w])
                if fields.len() <= 1 && *w == Some(*width) =>
            {
                Ok(Some(*i))
            }
            (InstanceKind::ValueSet { fields, .. }, ws)
                if fields.len() == ws.len()
                    && fields.iter().zip(ws).all(|((_, f), w)| Some(*f) == *w) =>
            {
                Ok(Some(*i))
            }
            (InstanceKind::ValueSet { .. }, _) => fail(
                *span,
                "the value set's type differs from the select expression's",
            ),
            _ => fail(*span, format!("'{n}' is not a value set or a constant")),
        }
    }
}

fn target(names: &HashMap<&str, usize>, t: &ast::Ident) -> Result<Target> {
    match t.name.as_str() {
        "accept" => Ok(Target::Accept),
        "reject" => Ok(Target::Reject),
        n => match names.get(n) {
            Some(&i) => Ok(Target::State(i)),
            None => fail(t.span, format!("unknown state '{n}'")),
        },
    }
}
