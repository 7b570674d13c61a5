//! `for` loops (both forms), `break` and `continue`, lowered to [`Stmt::Loop`]. A three-clause
//! loop lowers as written. A `for`-`in` loop runs a hidden counter: over a header stack or a
//! list, the counter is the element's index and a `switch` on it copies that element into the
//! loop variable; over a range `lo .. hi`, the counter runs from `lo` to `hi` (both included, so
//! `hi` the type's largest value ends the loop rather than wrapping) and is copied into the
//! variable, so the body may change the variable without changing the iterations.
//!
//! P4_16 (1.2.x) allows loops in controls, actions and functions, not in parsers (a parser
//! loops through its states).

use super::Checker;
use crate::ast::{self, ExprKind, ForCollection};
use crate::diagnostic::{fail, Result};
use crate::source::Span;
use crate::types::Type;
use softswitch_core::ir::{ArithOp, CompareOp, Expr, Place, Stmt};
use std::collections::HashMap;

/// The hidden index of a `for`-`in` loop over a stack or a list.
const INDEX: Type = Type::Bits {
    width: 32,
    signed: false,
};

impl<'a> Checker<'a> {
    /// `for (init; cond; update) body`.
    pub(super) fn for_loop(&mut self, l: &'a ast::ForLoop) -> Result<Vec<Stmt>> {
        self.loop_allowed(l.span)?;
        self.in_scope(|c| {
            let mut out = Vec::new();
            for s in &l.init {
                out.extend(c.stmt(s)?);
            }
            let cond = c.bool_expr(&l.cond)?;
            let body = c.loop_body(&l.body)?;
            let mut update = Vec::new();
            for s in &l.update {
                update.extend(c.stmt(s)?);
            }
            out.push(Stmt::Loop { cond, body, update });
            Ok(out)
        })
    }

    /// `for (T x in collection) body`.
    pub(super) fn for_in(&mut self, l: &'a ast::ForInLoop) -> Result<Vec<Stmt>> {
        self.loop_allowed(l.span)?;
        self.in_scope(|c| {
            let ty = c.resolve_type(&l.ty)?;
            if matches!(
                ty,
                Type::Int | Type::Void | Type::String | Type::MatchKind | Type::Var
            ) {
                return fail(l.ty.span(), "a loop variable cannot have this type");
            }
            let var = c.alloc(&ty, l.var.span)?;
            let len = c.types.size(&ty);
            c.locals.push((var, len));
            let mut out = vec![Stmt::Zero { start: var, len }];
            // The collection is read before the variable is declared: it cannot name it.
            let (setup, iteration) = match &l.collection {
                ForCollection::Range(lo, hi) => return c.for_range(l, ty, var, lo, hi, out),
                ForCollection::Expr(e) => c.elements(e, &ty, var)?,
            };
            out.extend(setup);
            c.declare(&l.var, super::Sym::Var { ty, slot: var })?;
            let index = c.alloc(&INDEX, l.span)?;
            let count = iteration.len() as u128;
            let cases = (0..).zip(iteration).map(|(i, s)| (vec![i], s)).collect();
            let mut body = vec![Stmt::Switch {
                on: Expr::Load(index),
                cases,
                default: Vec::new(),
            }];
            body.extend(c.loop_body(&l.body)?);
            out.push(Stmt::Assign(Place::Slot(index), Expr::Const(0)));
            out.push(Stmt::Loop {
                cond: compare(CompareOp::Lt, &INDEX, Expr::Load(index), Expr::Const(count)),
                body,
                update: vec![Stmt::Assign(
                    Place::Slot(index),
                    add_one(&INDEX, Expr::Load(index)),
                )],
            });
            Ok(out)
        })
    }

    /// A `for`-`in` loop over `lo .. hi`, after `out` (the variable's initialization).
    fn for_range(
        &mut self,
        l: &'a ast::ForInLoop,
        ty: Type,
        var: u32,
        lo: &ast::Expr,
        hi: &ast::Expr,
        mut out: Vec<Stmt>,
    ) -> Result<Vec<Stmt>> {
        if !matches!(ty, Type::Bits { .. }) {
            return fail(
                l.ty.span(),
                format!(
                    "a loop over a range needs a bit<W> or int<W> variable, not {}",
                    self.show(&ty)
                ),
            );
        }
        let lo = self.scalar_of(lo, &ty)?;
        let hi = self.scalar_of(hi, &ty)?;
        let (counter, last, go) = (
            self.alloc(&ty, l.span)?,
            self.alloc(&ty, l.span)?,
            self.alloc(&Type::Bool, l.span)?,
        );
        self.declare(
            &l.var,
            super::Sym::Var {
                ty: ty.clone(),
                slot: var,
            },
        )?;
        out.push(Stmt::Assign(Place::Slot(counter), lo));
        out.push(Stmt::Assign(Place::Slot(last), hi));
        out.push(Stmt::Assign(
            Place::Slot(go),
            compare(CompareOp::Le, &ty, Expr::Load(counter), Expr::Load(last)),
        ));
        let mut body = vec![Stmt::Assign(Place::Slot(var), Expr::Load(counter))];
        body.extend(self.loop_body(&l.body)?);
        let update = vec![Stmt::If(
            compare(CompareOp::Eq, &ty, Expr::Load(counter), Expr::Load(last)),
            vec![Stmt::Assign(Place::Slot(go), Expr::Const(0))],
            vec![Stmt::Assign(
                Place::Slot(counter),
                add_one(&ty, Expr::Load(counter)),
            )],
            // The compiler's own `if`: not a condition of the program, not traced.
            None,
        )];
        out.push(Stmt::Loop {
            cond: Expr::Load(go),
            body,
            update,
        });
        Ok(out)
    }

    /// What a `for`-`in` collection other than a range runs over: statements run once before
    /// the loop, and per element the statements that copy it into the variable at `var`.
    fn elements(
        &mut self,
        e: &ast::Expr,
        ty: &Type,
        var: u32,
    ) -> Result<(Vec<Stmt>, Vec<Vec<Stmt>>)> {
        // `(list<T>) { ... }` (as p4c wants it) or `{ ... }`: the items, each converted to the
        // variable's type.
        let list = match &e.kind {
            ExprKind::Cast(ast::TypeRef::List { elem, .. }, inner) => match &inner.kind {
                ExprKind::List(items) => {
                    let elem_ty = self.resolve_type(elem)?;
                    self.same_element_type("list", &elem_ty, ty, elem.span())?;
                    Some(items)
                }
                _ => None,
            },
            ExprKind::List(items) => Some(items),
            _ => None,
        };
        if let Some(items) = list {
            let mut each = Vec::new();
            for item in items {
                let dst = self.storage(var, ty.clone());
                each.push(self.assign_to(dst, item)?);
            }
            return Ok((Vec::new(), each));
        }
        match self.expr(e)? {
            super::expr::Val::Agg {
                base,
                ty: Type::Stack(agg, count),
            } => {
                let elem = Type::Aggregate(agg);
                self.same_element_type("stack", &elem, ty, e.span)?;
                let stride = self.types.size(&elem);
                let each = (0..count)
                    .map(|i| {
                        vec![Stmt::Copy {
                            dst: var,
                            // A stack holds its next index, then its elements.
                            src: base + 1 + i * stride,
                            len: stride,
                        }]
                    })
                    .collect();
                Ok((Vec::new(), each))
            }
            super::expr::Val::Agg {
                base,
                ty: Type::Tuple(elems),
            } => {
                // A list<T> variable.
                let mut each = Vec::new();
                let places: Vec<(u32, Type)> = self
                    .types
                    .tuple_elements(&elems)
                    .map(|(off, t)| (off, t.clone()))
                    .collect();
                for (off, elem) in places {
                    self.same_element_type("list", &elem, ty, e.span)?;
                    let var_val = self.storage(var, ty.clone());
                    each.push(self.copy_back(var_val, base + off, ty, e.span)?);
                }
                Ok((Vec::new(), each))
            }
            _ => fail(
                e.span,
                "a for-in loop runs over a header stack, a list { ... } or a range lo .. hi",
            ),
        }
    }

    /// Refuses a loop variable of type `var` over a `what` whose elements are `elem`.
    fn same_element_type(&self, what: &str, elem: &Type, var: &Type, at: Span) -> Result<()> {
        if elem == var {
            return Ok(());
        }
        let (e, v) = (self.show(elem), self.show(var));
        fail(
            at,
            format!("the {what}'s elements are {e}, the loop variable is {v}"),
        )
    }

    /// `break;` or `continue;`.
    pub(super) fn loop_jump(&mut self, stmt: Stmt, span: Span) -> Result<Vec<Stmt>> {
        if self.loops == 0 {
            let what = if matches!(stmt, Stmt::Break) {
                "break"
            } else {
                "continue"
            };
            return fail(span, format!("'{what}' outside a loop"));
        }
        Ok(vec![stmt])
    }

    /// A loop's body, in its own scope, with `break` and `continue` allowed.
    fn loop_body(&mut self, body: &'a ast::Stmt) -> Result<Vec<Stmt>> {
        self.loops += 1;
        let r = self.in_scope(|c| match body {
            ast::Stmt::Block(b) => c.block(b),
            other => c.stmt(other),
        });
        self.loops -= 1;
        r
    }

    /// Runs `f` in a new scope.
    fn in_scope<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.scopes.push(HashMap::new());
        let r = f(self);
        self.scopes.pop();
        r
    }

    /// Refuses a loop in a parser, as P4_16 does.
    fn loop_allowed(&self, span: Span) -> Result<()> {
        if self.in_parser {
            return fail(
                span,
                "a for loop cannot be in a parser (P4_16: loops are for controls, actions and \
                 functions; a parser loops through its states)",
            );
        }
        Ok(())
    }
}

/// `a op b` on values of type `ty` (a `bit<W>`, `int<W>` or the index type).
fn compare(op: CompareOp, ty: &Type, a: Expr, b: Expr) -> Expr {
    let (width, signed) = bits_of(ty);
    Expr::Compare {
        op,
        width,
        signed,
        a: Box::new(a),
        b: Box::new(b),
    }
}

/// `a + 1` on values of type `ty`, wrapping.
fn add_one(ty: &Type, a: Expr) -> Expr {
    let (width, signed) = bits_of(ty);
    Expr::Arith {
        op: ArithOp::Add,
        width,
        signed,
        a: Box::new(a),
        b: Box::new(Expr::Const(1)),
    }
}

fn bits_of(ty: &Type) -> (u16, bool) {
    match ty {
        Type::Bits { width, signed } => (*width, *signed),
        _ => unreachable!("loop counters are bit<W> or int<W>"),
    }
}
