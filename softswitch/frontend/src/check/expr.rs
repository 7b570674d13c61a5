//! Expressions: typing, constant folding (with [`ops`](softswitch_core::ops) for sized values, exact
//! arbitrary-precision arithmetic for `int`), implicit casts of `int` values, places (l-values)
//! and assignments of scalars and aggregates.

use super::{Checker, Sym};
use crate::ast::{self, BinOp, ExprKind, UnOp};
use crate::diagnostic::{fail, Result};
use crate::limits::MAX_INT_BITS;
use crate::source::Span;
use crate::types::{Type, Types};
use num_bigint::BigInt;
use num_traits::{Signed as _, ToPrimitive as _, Zero as _};
use softswitch_core::ir::{
    mask, sign_extend, ArithOp, CompareOp, DynSlot, Expr, Place, Slot, Stmt, SLOT_BITS,
};
use softswitch_core::limbs::Limbs;
use softswitch_core::ops;

/// What softswitch does with values wider than 128 bits, for the errors about the rest.
const WIDE_SUPPORT: &str = "softswitch supports copies, int constants, &, |, ^, ~, shifts by a \
     constant, ==, != and slices of at most 128 bits of such values, not other operations yet";

/// A lowered expression.
#[derive(Clone, Debug)]
pub(super) enum Val {
    /// A scalar value; `konst` holds it when known at compile time. As a scalar, an `int` is
    /// its value modulo 2^128 (two's complement), which is what any conversion to a sized
    /// type keeps.
    Scalar {
        expr: Expr,
        ty: Type,
        konst: Option<u128>,
    },
    /// An `int`: an arbitrary-precision compile-time value of at most [`MAX_INT_BITS`] bits.
    Int(BigInt),
    /// An aggregate or stack in storage.
    Agg { base: Slot, ty: Type },
    /// `packet.lookahead<T>()` of a header, struct or tuple, or a part of one: `T`'s bits
    /// `offset` bits past the parser's cursor, which must have `need` bits after it.
    Lookahead { ty: Type, offset: u32, need: u32 },
    /// A value of a [wide](Types::is_wide) `bit<W>` computed from others (`a & b`, `a << 8`),
    /// limb by limb.
    Wide { limbs: Limbs, ty: Type },
    /// A header-stack element chosen at run time, `slot` its first slot.
    DynElem { slot: DynSlot, ty: Type },
}

/// A part of a value that a list or struct expression gives: its slot offset, its type and the
/// expression for it.
type Part<'e> = (u32, Type, &'e ast::Expr);

/// A scalar with its type and compile-time value.
pub(super) struct Scalar {
    pub expr: Expr,
    pub ty: Type,
    pub konst: Option<u128>,
}

fn scalar(expr: Expr, ty: Type, konst: Option<u128>) -> Val {
    Val::Scalar { expr, ty, konst }
}

fn konst(v: u128, ty: Type) -> Val {
    Val::Scalar {
        expr: Expr::Const(v),
        ty,
        konst: Some(v),
    }
}

/// `v` modulo 2^128, in two's complement: the bits of any sized value it converts to.
fn int_bits(v: &BigInt) -> u128 {
    (v & BigInt::from(u128::MAX))
        .to_u128()
        .expect("masked to 128 bits")
}

/// The `int` `v`, refused at `span` if it has more than [`MAX_INT_BITS`] bits.
pub(super) fn int(v: BigInt, span: Span) -> Result<Val> {
    if v.bits() >= MAX_INT_BITS {
        return fail(
            span,
            format!("this int constant has more than {MAX_INT_BITS} bits (limits::MAX_INT_BITS)"),
        );
    }
    Ok(Val::Int(v))
}

impl<'a> Checker<'a> {
    pub(super) fn show(&self, ty: &Type) -> String {
        self.types.show(ty).to_string()
    }

    /// Lowers an expression.
    pub(super) fn expr(&mut self, e: &ast::Expr) -> Result<Val> {
        self.spend(1, e.span)?;
        match &e.kind {
            ExprKind::Int(lit) => Ok(match lit.width {
                Some((width, signed)) => {
                    if width > 128 {
                        return fail(e.span, "literal widths above 128 bits are not supported");
                    }
                    konst(lit.value & mask(width), Type::Bits { width, signed })
                }
                None => Val::Int(BigInt::from(lit.value)),
            }),
            ExprKind::Bool(b) => Ok(konst(u128::from(*b), Type::Bool)),
            ExprKind::Str(_) => fail(e.span, "a string is only allowed as an extern argument"),
            ExprKind::DontCare => fail(e.span, "'_' is only allowed as an out argument or a keyset"),
            ExprKind::Name(n) => self.name_value(n, e.span),
            ExprKind::Member(base, m) => self.member(base, m, e.span),
            ExprKind::Index(base, index) => self.index(base, index),
            ExprKind::Slice(base, hi, lo) => {
                let b = match self.expr(base)? {
                    Val::Agg { base: slot, ty: Type::Bits { width, .. } } => {
                        let (h, l) = (self.const_u128(hi)?, self.const_u128(lo)?);
                        return wide_slice(slot, width, h, l, e.span);
                    }
                    v => self.scalar_from(v, base.span)?,
                };
                let Type::Bits { width, .. } = b.ty else {
                    let t = self.show(&b.ty);
                    return fail(base.span, format!("cannot slice a value of type {t}"));
                };
                let (h, l) = (self.const_u128(hi)?, self.const_u128(lo)?);
                if h < l || h >= u128::from(width) {
                    return fail(e.span, format!("slice [{h}:{l}] is out of range for bit<{width}>"));
                }
                let w = (h - l + 1) as u16;
                let ty = Type::Bits { width: w, signed: false };
                let k = b.konst.map(|v| (v >> l) & mask(w));
                Ok(scalar(Expr::Slice { arg: Box::new(b.expr), lo: l as u16, width: w }, ty, k))
            }
            ExprKind::Call { .. } => self.call_value(e),
            ExprKind::Unary(op, arg) => self.unary(*op, arg, e.span),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, e.span),
            ExprKind::Cond(c, a, b) => {
                let cond = self.scalar_any(c)?;
                let cond_konst = cond.konst;
                let c = self.coerce(cond, &Type::Bool, c.span)?;
                let (a_val, b_val) = (self.expr(a)?, self.expr(b)?);
                if let (Some(k), Val::Int(x), Val::Int(y)) = (cond_konst, &a_val, &b_val) {
                    return Ok(Val::Int(if k != 0 { x.clone() } else { y.clone() }));
                }
                let a_val = self.scalar_from(a_val, a.span)?;
                let b_val = self.scalar_from(b_val, b.span)?;
                let (x, y, ty) = self.unify(a_val, b_val, e.span, "?:")?;
                if let Some(k) = cond_konst {
                    let chosen = if k != 0 { x } else { y };
                    return Ok(Val::Scalar { expr: chosen.expr, ty, konst: chosen.konst });
                }
                if ty == Type::Int {
                    return fail(e.span, "the branches of ?: need a width: cast one of them, e.g. (bit<8>) 1");
                }
                Ok(scalar(Expr::Cond(Box::new(c), Box::new(x.expr), Box::new(y.expr)), ty, None))
            }
            ExprKind::Cast(t, arg) => {
                let to = self.resolve_type(t)?;
                let v = self.scalar_any(arg)?;
                self.cast(v, &to, e.span)
            }
            ExprKind::List(_) | ExprKind::StructInit(_) => {
                fail(e.span, "a list or struct expression is only allowed where its type is known (an assignment or initializer)")
            }
        }
    }

    fn name_value(&mut self, n: &str, span: Span) -> Result<Val> {
        match self.lookup(n) {
            Some(Sym::Const { ty, value }) => Ok(konst(*value, ty.clone())),
            Some(Sym::Int(value)) => Ok(Val::Int(value.clone())),
            Some(Sym::Var { ty, slot }) => Ok(self.storage(*slot, ty.clone())),
            Some(_) => fail(span, format!("'{n}' is not a value")),
            None => fail(span, format!("unknown name '{n}'")),
        }
    }

    /// The value stored at `slot` with type `ty`.
    pub(super) fn storage(&self, slot: Slot, ty: Type) -> Val {
        match ty {
            Type::Aggregate(_) | Type::Stack(..) | Type::VarBit(_) | Type::Tuple(_) => {
                Val::Agg { base: slot, ty }
            }
            _ if Types::is_wide(&ty) => Val::Agg { base: slot, ty },
            _ => scalar(Expr::Load(slot), ty, None),
        }
    }

    fn member(&mut self, base: &ast::Expr, m: &ast::Ident, span: Span) -> Result<Val> {
        if let ExprKind::Name(n) = &base.kind {
            if n == "error" {
                return match self.error_codes.get(&m.name) {
                    Some(&code) => Ok(konst(code as u128, Type::Error)),
                    None => fail(m.span, format!("unknown error '{}'", m.name)),
                };
            }
            if let Some(Sym::Type(Type::Enum(i))) = self.lookup(n) {
                let i = *i;
                let def = &self.types.enums[i];
                return match def.member(&m.name) {
                    Some(v) => Ok(konst(v, Type::Enum(i))),
                    None => fail(
                        m.span,
                        format!("enum {} has no member '{}'", def.name, m.name),
                    ),
                };
            }
        }
        if m.name == "hit" || m.name == "miss" {
            if let Some(table) = self.applied_table(base)? {
                return Ok(scalar(
                    Expr::TableHit {
                        table,
                        miss: m.name == "miss",
                    },
                    Type::Bool,
                    None,
                ));
            }
        }
        match self.expr(base)? {
            Val::Agg {
                base: slot,
                ty: Type::Aggregate(agg),
            } => match self.types.field(agg, &m.name) {
                Some((off, fty)) => Ok(self.storage(slot + off, fty)),
                None => {
                    let t = self.show(&Type::Aggregate(agg));
                    fail(m.span, format!("{t} has no field '{}'", m.name))
                }
            },
            Val::Agg {
                base: slot,
                ty: Type::Stack(agg, n),
            } => {
                let bits32 = Type::Bits {
                    width: 32,
                    signed: false,
                };
                // `lastIndex`, the stack's `nextIndex` less one, is the element `last` picks.
                let last_index = Expr::Arith {
                    op: ArithOp::Sub,
                    width: 32,
                    signed: false,
                    a: Box::new(Expr::Load(slot)),
                    b: Box::new(Expr::Const(1)),
                };
                match m.name.as_str() {
                    "size" => Ok(konst(u128::from(n), bits32)),
                    "lastIndex" => Ok(scalar(last_index, bits32, None)),
                    "last" => Ok(Val::DynElem {
                        slot: DynSlot {
                            base: slot + 1,
                            stride: self.types.size(&Type::Aggregate(agg)),
                            count: n,
                            index: Box::new(last_index),
                        },
                        ty: Type::Aggregate(agg),
                    }),
                    "next" => fail(
                        m.span,
                        "stack.next is only allowed as the argument of extract",
                    ),
                    _ => fail(m.span, format!("a header stack has no member '{}'", m.name)),
                }
            }
            Val::Lookahead {
                ty: Type::Aggregate(agg),
                offset,
                need,
            } => {
                let mut at = offset;
                for (name, _, fty) in self.types.aggregates[agg].fields_at() {
                    let bits = self.types.size_in_bits(fty, false);
                    if name != m.name {
                        at += bits;
                        continue;
                    }
                    return Ok(match self.types.scalar_width(fty) {
                        Some(width) => scalar(
                            Expr::Lookahead {
                                offset: at,
                                width,
                                need,
                            },
                            fty.clone(),
                            None,
                        ),
                        None => Val::Lookahead {
                            ty: fty.clone(),
                            offset: at,
                            need,
                        },
                    });
                }
                let t = self.show(&Type::Aggregate(agg));
                fail(m.span, format!("{t} has no field '{}'", m.name))
            }
            Val::DynElem {
                slot: element,
                ty: Type::Aggregate(agg),
            } => match self.types.field(agg, &m.name) {
                Some((off, fty)) if self.types.scalar_width(&fty).is_some() => {
                    Ok(scalar(Expr::LoadDyn(element.offset(off)), fty, None))
                }
                // A member of a header union picked at run time: the same element's header.
                Some((off, fty)) if self.types.is_header(&fty) => Ok(Val::DynElem {
                    slot: element.offset(off),
                    ty: fty,
                }),
                Some(_) => fail(
                    m.span,
                    "nested aggregates in a run-time stack index are not supported yet",
                ),
                None => fail(m.span, format!("no field '{}'", m.name)),
            },
            other => {
                let t = self.show(&val_type(&other));
                fail(
                    span,
                    format!("a value of type {t} has no member '{}'", m.name),
                )
            }
        }
    }

    /// `packet.lookahead<T>()`: a scalar read of `T`'s bits for a `bit<W>`, `int<W>`, `bool`
    /// or serializable enum; otherwise (a header, a struct, a tuple of such fields) a
    /// [`Val::Lookahead`]. Header stacks and unions, and varbit fields, are refused at `at`.
    pub(super) fn lookahead(&self, ty: Type, at: Span) -> Result<Val> {
        self.lookahead_type(&ty, at)?;
        let need = self.types.size_in_bits(&ty, false);
        Ok(match self.types.scalar_width(&ty) {
            Some(width) => scalar(
                Expr::Lookahead {
                    offset: 0,
                    width,
                    need,
                },
                ty,
                None,
            ),
            None => Val::Lookahead {
                ty,
                offset: 0,
                need,
            },
        })
    }

    /// Refuses at `at` a type that `lookahead` cannot read.
    fn lookahead_type(&self, ty: &Type, at: Span) -> Result<()> {
        match ty {
            Type::Bits { .. } | Type::Bool => Ok(()),
            Type::Enum(i) if self.types.enums[*i].repr.is_some() => Ok(()),
            Type::Aggregate(a) if !self.types.is_union(ty) => {
                for (_, fty, _) in &self.types.aggregates[*a].fields {
                    self.lookahead_type(fty, at)?;
                }
                Ok(())
            }
            Type::Tuple(elems) => elems.iter().try_for_each(|t| self.lookahead_type(t, at)),
            other => fail(
                at,
                format!(
                    "lookahead of a {} is not supported: a bit<W>, int<W>, bool, serializable \
                     enum, header, struct or tuple of them, without varbit fields",
                    self.show(other)
                ),
            ),
        }
    }

    /// Statements storing `lookahead<T>()`'s bits (from `offset`, `need` bits needed) in the
    /// value of type `ty` at `base`: first a check that the bits are there (a packet too short
    /// is a parser error and changes nothing), then each field, then each header made valid.
    pub(super) fn lookahead_into(
        &self,
        base: Slot,
        ty: &Type,
        offset: u32,
        need: u32,
    ) -> Vec<Stmt> {
        let mut out = vec![lookahead_check(offset, need)];
        let mut valids = Vec::new();
        self.lookahead_fields(base, ty, &mut offset.clone(), need, &mut out, &mut valids);
        out.extend(valids);
        out
    }

    /// The assignments of `lookahead_into`: fields into `out`, validities into `valids`.
    fn lookahead_fields(
        &self,
        base: Slot,
        ty: &Type,
        at: &mut u32,
        need: u32,
        out: &mut Vec<Stmt>,
        valids: &mut Vec<Stmt>,
    ) {
        if let Some(width) = self.types.scalar_width(ty) {
            let bits = Expr::Lookahead {
                offset: *at,
                width,
                need,
            };
            out.push(Stmt::Assign(Place::Slot(base), bits));
            *at += u32::from(width);
            return;
        }
        match ty {
            Type::Aggregate(a) => {
                if self.types.is_header(ty) {
                    valids.push(Stmt::Assign(Place::Slot(base), Expr::Const(1)));
                }
                for (_, off, fty) in self.types.aggregates[*a].fields_at() {
                    self.lookahead_fields(base + off, fty, at, need, out, valids);
                }
            }
            Type::Tuple(elems) => {
                for (off, ety) in self.types.tuple_elements(elems) {
                    self.lookahead_fields(base + off, ety, at, need, out, valids);
                }
            }
            _ => {}
        }
    }

    /// If `e` is `t.apply()` for a table `t`, the table's index.
    pub(super) fn applied_table(&self, e: &ast::Expr) -> Result<Option<usize>> {
        if let ExprKind::Call { callee, .. } = &e.kind {
            if let ExprKind::Member(t, m) = &callee.kind {
                if m.name == "apply" {
                    if let ExprKind::Name(n) = &t.kind {
                        if let Some(Sym::Table(i)) = self.lookup(n) {
                            return Ok(Some(*i));
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    fn index(&mut self, base: &ast::Expr, index: &ast::Expr) -> Result<Val> {
        let b = self.expr(base)?;
        if let Val::Agg {
            base: slot,
            ty: Type::Tuple(elems),
        } = &b
        {
            let i = self.const_u128(index)? as usize;
            return match self.types.tuple_element(elems, i) {
                Some((off, ty)) => Ok(self.storage(slot + off, ty)),
                None => fail(
                    index.span,
                    format!("index {i} is out of range for a tuple of {}", elems.len()),
                ),
            };
        }
        let Val::Agg {
            base: slot,
            ty: Type::Stack(agg, n),
        } = b
        else {
            let t = self.show(&val_type(&b));
            return fail(base.span, format!("cannot index a value of type {t}"));
        };
        let stride = self.types.size(&Type::Aggregate(agg));
        let i = self.scalar_any(index)?;
        match i.konst {
            Some(k) if i.ty == Type::Int || matches!(i.ty, Type::Bits { .. }) => {
                if k >= u128::from(n) {
                    return fail(
                        index.span,
                        format!("index {k} is out of range for a stack of {n}"),
                    );
                }
                Ok(Val::Agg {
                    base: slot + 1 + k as u32 * stride,
                    ty: Type::Aggregate(agg),
                })
            }
            _ => match i.ty {
                Type::Bits { width, signed } => Ok(Val::DynElem {
                    slot: DynSlot {
                        base: slot + 1,
                        stride,
                        count: n,
                        // A negative index is out of range: sign-extended, it is above any
                        // count.
                        index: Box::new(if signed {
                            Expr::SignExtend {
                                arg: Box::new(i.expr),
                                from: width,
                                to: 128,
                            }
                        } else {
                            i.expr
                        }),
                    },
                    ty: Type::Aggregate(agg),
                }),
                _ => fail(index.span, "a stack index must be a bit<W> or int<W> value"),
            },
        }
    }

    /// A value of a wide `bit<W>` (stored or computed) as limbs, with its type.
    fn wide_limbs(&self, v: Val, span: Span) -> Result<(Limbs, Type)> {
        match v {
            Val::Agg {
                base,
                ty:
                    ty @ Type::Bits {
                        width,
                        signed: false,
                    },
            } => Ok((Limbs::stored(base, width), ty)),
            Val::Wide { limbs, ty } => Ok((limbs, ty)),
            other => {
                let t = self.show(&val_type(&other));
                fail(
                    span,
                    format!("expected an unsigned value wider than 128 bits, found {t}"),
                )
            }
        }
    }

    /// `a op b` where one of them is a [wide](Types::is_wide) `bit<W>`: `&`, `|`, `^` with a
    /// value of the same type or an `int`, shifts by a constant, `==` and `!=`, limb by limb.
    fn wide_binary(&self, op: BinOp, va: Val, vb: Val, spans: (Span, Span, Span)) -> Result<Val> {
        let (a_span, b_span, span) = spans;
        let name = binop_text(op);
        let ty = if Types::is_wide(&val_type(&va)) {
            val_type(&va)
        } else {
            val_type(&vb)
        };
        let Type::Bits { width, .. } = ty else {
            return fail(span, "expected a bit<W> value");
        };
        let operand = |v: Val, at: Span| -> Result<Limbs> {
            match v {
                Val::Int(n) => Ok(wide_int(&n, width)),
                v if val_type(&v) == ty => Ok(self.wide_limbs(v, at)?.0),
                v => {
                    let (t, want) = (self.show(&val_type(&v)), self.show(&ty));
                    fail(
                        at,
                        format!("operands of '{name}' have different types: {want} and {t}"),
                    )
                }
            }
        };
        let arith = match op {
            BinOp::BitAnd => Some(ArithOp::BitAnd),
            BinOp::BitOr => Some(ArithOp::BitOr),
            BinOp::BitXor => Some(ArithOp::BitXor),
            _ => None,
        };
        if let Some(arith) = arith {
            let (x, y) = (operand(va, a_span)?, operand(vb, b_span)?);
            let limbs = Limbs::bitwise(arith, x, y).map(|l| l.truncated(width));
            return match limbs {
                Some(limbs) => Ok(Val::Wide { limbs, ty }),
                None => fail(span, format!("'{name}' is not bitwise")),
            };
        }
        match op {
            BinOp::Eq | BinOp::Ne => {
                let (x, y) = (operand(va, a_span)?, operand(vb, b_span)?);
                let eq = Limbs::equal(&x, &y);
                let e = if op == BinOp::Eq {
                    eq
                } else {
                    Expr::Not(Box::new(eq))
                };
                Ok(scalar(e, Type::Bool, None))
            }
            BinOp::Shl | BinOp::Shr if Types::is_wide(&val_type(&va)) => {
                let x = self.wide_limbs(va, a_span)?.0;
                let amount = match vb {
                    Val::Int(n) if !n.is_negative() => n.to_u128().unwrap_or(u128::MAX),
                    v => match self.scalar_from(v, b_span)?.konst {
                        Some(k) => k,
                        None => {
                            return fail(
                                b_span,
                                "a value wider than 128 bits is shifted by a constant only",
                            )
                        }
                    },
                };
                let limbs = Limbs::shift(x, op == BinOp::Shl, amount).truncated(width);
                Ok(Val::Wide { limbs, ty })
            }
            _ => {
                let t = self.show(&ty);
                fail(
                    span,
                    format!("'{name}' on {t}, wider than 128 bits: {WIDE_SUPPORT}"),
                )
            }
        }
    }

    /// Lowers an expression that must be a scalar.
    pub(super) fn scalar_any(&mut self, e: &ast::Expr) -> Result<Scalar> {
        let v = self.expr(e)?;
        self.scalar_from(v, e.span)
    }

    /// A lowered value (of the expression at `span`) as a scalar; an `int` as its bits.
    pub(super) fn scalar_from(&self, v: Val, span: Span) -> Result<Scalar> {
        match v {
            Val::Scalar { expr, ty, konst } => Ok(Scalar { expr, ty, konst }),
            Val::Int(v) => {
                let bits = int_bits(&v);
                Ok(Scalar {
                    expr: Expr::Const(bits),
                    ty: Type::Int,
                    konst: Some(bits),
                })
            }
            Val::Agg { ty, .. } | Val::Wide { ty, .. } if Types::is_wide(&ty) => {
                let t = self.show(&ty);
                fail(span, format!("{t} is wider than 128 bits: {WIDE_SUPPORT}"))
            }
            other => {
                let t = self.show(&val_type(&other));
                fail(span, format!("expected a scalar value, found {t}"))
            }
        }
    }

    /// Lowers an expression and converts it to `ty` (implicitly, as P4 allows).
    pub(super) fn scalar_of(&mut self, e: &ast::Expr, ty: &Type) -> Result<Expr> {
        let v = self.scalar_any(e)?;
        self.coerce(v, ty, e.span)
    }

    /// Lowers a `bool` expression.
    pub(super) fn bool_expr(&mut self, e: &ast::Expr) -> Result<Expr> {
        self.scalar_of(e, &Type::Bool)
    }

    /// The implicit conversions of P4: `int` constants to sized types, serializable enums to
    /// their underlying type.
    pub(super) fn coerce(&self, v: Scalar, to: &Type, span: Span) -> Result<Expr> {
        if v.ty == *to || *to == Type::Var {
            return Ok(v.expr);
        }
        match (&v.ty, to) {
            (Type::Int, Type::Bits { width, .. }) => {
                let k = v.konst.expect("int values are constants");
                Ok(Expr::Const(k & mask(*width)))
            }
            (Type::Enum(i), Type::Bits { width, signed })
                if self.types.enums[*i].repr == Some((*width, *signed)) =>
            {
                Ok(v.expr)
            }
            _ => {
                let (f, t) = (self.show(&v.ty), self.show(to));
                fail(span, format!("type mismatch: expected {t}, found {f}"))
            }
        }
    }

    /// Brings two scalars to one type for a binary operator.
    fn unify(&self, a: Scalar, b: Scalar, span: Span, op: &str) -> Result<(Scalar, Scalar, Type)> {
        if a.ty == b.ty {
            let ty = a.ty.clone();
            return Ok((a, b, ty));
        }
        let enum_repr = |t: &Type| match t {
            Type::Enum(i) => self.types.enums[*i]
                .repr
                .map(|(width, signed)| Type::Bits { width, signed }),
            _ => None,
        };
        let target = match (&a.ty, &b.ty) {
            (Type::Int, t @ Type::Bits { .. }) | (t @ Type::Bits { .. }, Type::Int) => t.clone(),
            (Type::Int, t) | (t, Type::Int) if enum_repr(t).is_some() => {
                enum_repr(t).expect("checked")
            }
            (x, y) if enum_repr(x).as_ref() == Some(y) => y.clone(),
            (x, y) if enum_repr(y).as_ref() == Some(x) => x.clone(),
            _ => {
                let (x, y) = (self.show(&a.ty), self.show(&b.ty));
                return fail(
                    span,
                    format!("operands of '{op}' have different types: {x} and {y}"),
                );
            }
        };
        let konst_of = |s: &Scalar, t: &Type| match (&s.ty, t, s.konst) {
            (Type::Int, Type::Bits { width, .. }, Some(k)) => Some(k & mask(*width)),
            _ => s.konst,
        };
        let ka = konst_of(&a, &target);
        let kb = konst_of(&b, &target);
        let ea = self.coerce(a, &target, span)?;
        let eb = self.coerce(b, &target, span)?;
        Ok((
            Scalar {
                expr: ea,
                ty: target.clone(),
                konst: ka,
            },
            Scalar {
                expr: eb,
                ty: target.clone(),
                konst: kb,
            },
            target,
        ))
    }

    fn unary(&mut self, op: UnOp, arg: &ast::Expr, span: Span) -> Result<Val> {
        let v = match self.expr(arg)? {
            Val::Int(n) => {
                return match op {
                    UnOp::Neg => int(-n, span),
                    UnOp::Plus => Ok(Val::Int(n)),
                    _ => fail(span, format!("operator {op:?} cannot be applied to int")),
                }
            }
            v if op == UnOp::Complement && Types::is_wide(&val_type(&v)) => {
                let (limbs, ty) = self.wide_limbs(v, arg.span)?;
                let width = limbs.width();
                return Ok(Val::Wide {
                    limbs: Limbs::complement(limbs).truncated(width),
                    ty,
                });
            }
            v => self.scalar_from(v, arg.span)?,
        };
        match (op, &v.ty) {
            (UnOp::Not, Type::Bool) => Ok(scalar(
                Expr::Not(Box::new(v.expr)),
                Type::Bool,
                v.konst.map(|k| k ^ 1),
            )),
            // `~` and `-` of a `bit<W>`: a `bit<W>`, a constant cut to W bits.
            (UnOp::Complement | UnOp::Neg, Type::Bits { width, .. }) => {
                let (arg, width) = (Box::new(v.expr), *width);
                let (expr, k) = if op == UnOp::Neg {
                    (Expr::Negate { arg, width }, v.konst.map(u128::wrapping_neg))
                } else {
                    (Expr::Complement { arg, width }, v.konst.map(|k| !k))
                };
                Ok(scalar(expr, v.ty, k.map(|k| k & mask(width))))
            }
            (UnOp::Plus, Type::Bits { .. }) => Ok(Val::Scalar {
                expr: v.expr,
                ty: v.ty,
                konst: v.konst,
            }),
            _ => {
                let t = self.show(&v.ty);
                fail(span, format!("operator {op:?} cannot be applied to {t}"))
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> Result<Val> {
        let name = binop_text(op);
        if matches!(op, BinOp::Eq | BinOp::Ne) {
            if let Some(eq) = self.initializer_eq(a, b)? {
                let e = if op == BinOp::Eq {
                    eq
                } else {
                    Expr::Not(Box::new(eq))
                };
                return Ok(scalar(e, Type::Bool, None));
            }
        }
        let (va, vb) = (self.expr(a)?, self.expr(b)?);
        match (&va, &vb) {
            (Val::Agg { base: x, ty: tx }, Val::Agg { base: y, ty: ty_y })
                if matches!(op, BinOp::Eq | BinOp::Ne) =>
            {
                if tx != ty_y {
                    return fail(span, format!("operands of '{name}' have different types"));
                }
                self.spend(self.types.parts(tx) as usize, span)?;
                let eq = self.aggregate_eq(*x, *y, tx);
                let e = if op == BinOp::Eq {
                    eq
                } else {
                    Expr::Not(Box::new(eq))
                };
                return Ok(scalar(e, Type::Bool, None));
            }
            (Val::Int(x), Val::Int(y)) => return int_binary(op, x, y, span),
            (Val::Int(x), _) if matches!(op, BinOp::Shl | BinOp::Shr) => {
                let amount = self.scalar_from(vb.clone(), b.span)?;
                let Some(n) = amount.konst.filter(|_| shift_amount_ok(&amount)) else {
                    return fail(
                        b.span,
                        "an int is shifted by an unsigned compile-time constant only",
                    );
                };
                return int_binary(op, x, &BigInt::from(n), span);
            }
            _ => {}
        }
        if Types::is_wide(&val_type(&va)) || Types::is_wide(&val_type(&vb)) {
            return self.wide_binary(op, va, vb, (a.span, b.span, span));
        }
        let x = self.scalar_from(va, a.span)?;
        let y = match vb {
            // A shift amount counts in full: a huge one shifts everything out.
            Val::Int(n) if matches!(op, BinOp::Shl | BinOp::Shr) => {
                if n.is_negative() {
                    return fail(b.span, "a shift amount must be unsigned");
                }
                let n = n.to_u128().unwrap_or(u128::MAX).min(256);
                Scalar {
                    expr: Expr::Const(n),
                    ty: Type::Int,
                    konst: Some(n),
                }
            }
            vb => self.scalar_from(vb, b.span)?,
        };
        match lowered(op) {
            Lowered::Logic => {
                let k = x.konst.zip(y.konst);
                let (ex, ey) = (
                    self.coerce(x, &Type::Bool, a.span)?,
                    self.coerce(y, &Type::Bool, b.span)?,
                );
                let (e, k) = if op == BinOp::And {
                    (Expr::And(Box::new(ex), Box::new(ey)), k.map(|(p, q)| p & q))
                } else {
                    (Expr::Or(Box::new(ex), Box::new(ey)), k.map(|(p, q)| p | q))
                };
                Ok(scalar(e, Type::Bool, k))
            }
            Lowered::Shift(op) => self.shift(op, x, y, span, b.span),
            Lowered::Concat => {
                let (Type::Bits { width: wa, signed }, Type::Bits { width: wb, .. }) =
                    (&x.ty, &y.ty)
                else {
                    return fail(
                        span,
                        "'++' needs two bit<W> or int<W> operands (cast unsized integers)",
                    );
                };
                let (wa, wb, signed) = (*wa, *wb, *signed);
                if wa + wb > 128 {
                    return fail(span, "concatenations wider than 128 bits are not supported");
                }
                let k = x.konst.zip(y.konst).map(|(p, q)| (p << wb) | q);
                let e = Expr::Concat {
                    a: Box::new(x.expr),
                    b: Box::new(y.expr),
                    b_width: wb,
                };
                Ok(scalar(
                    e,
                    Type::Bits {
                        width: wa + wb,
                        signed,
                    },
                    k,
                ))
            }
            Lowered::Compare(op) => {
                let (x, y, ty) = self.unify(x, y, span, name)?;
                let ordered = !matches!(op, CompareOp::Eq | CompareOp::Ne);
                let (width, signed) = match &ty {
                    Type::Bits { width, signed } => (*width, *signed),
                    t if ordered => {
                        let t = self.show(t);
                        return fail(span, format!("'{name}' cannot compare values of type {t}"));
                    }
                    t => (self.types.scalar_width(t).unwrap_or(32), false),
                };
                let k = x
                    .konst
                    .zip(y.konst)
                    .map(|(p, q)| u128::from(ops::compare(op, width, signed, p, q)));
                let e = Expr::Compare {
                    op,
                    width,
                    signed,
                    a: Box::new(x.expr),
                    b: Box::new(y.expr),
                };
                Ok(scalar(e, Type::Bool, k))
            }
            Lowered::Arith(op) => {
                let (x, y, ty) = self.unify(x, y, span, name)?;
                match ty {
                    Type::Bits { width, signed } => Ok(arith(op, width, signed, ty, x, y)),
                    t => {
                        let t = self.show(&t);
                        fail(span, format!("'{name}' cannot be applied to {t}"))
                    }
                }
            }
        }
    }

    /// `a == b` where one side is a list or struct expression, which takes the other's type;
    /// `None` if neither is.
    fn initializer_eq(&mut self, a: &ast::Expr, b: &ast::Expr) -> Result<Option<Expr>> {
        let is_init = |e: &ast::Expr| matches!(e.kind, ExprKind::List(_) | ExprKind::StructInit(_));
        let (stored, init) = match (is_init(a), is_init(b)) {
            (false, true) => (a, b),
            (true, false) => (b, a),
            (false, false) => return Ok(None),
            (true, true) => {
                return fail(
                    a.span,
                    "comparing two list or struct expressions: neither gives the other a type",
                )
            }
        };
        match self.expr(stored)? {
            Val::Agg { base, ty } => {
                self.spend(self.types.parts(&ty) as usize, stored.span)?;
                self.equals_initializer(base, &ty, init).map(Some)
            }
            other => fail(
                init.span,
                format!(
                    "a list or struct expression cannot be a {}",
                    self.show(&val_type(&other))
                ),
            ),
        }
    }

    /// Equality of two stored values of type `ty`, as the specification defines it: structs
    /// field by field, stacks element by element, headers equal when both are invalid or both
    /// valid with equal fields. The conjunctions are balanced trees, so the expression is only
    /// logarithmically deeper than the type.
    fn aggregate_eq(&self, a: Slot, b: Slot, ty: &Type) -> Expr {
        match ty {
            Type::Aggregate(agg) => {
                let fields: Vec<Expr> = self.types.aggregates[*agg]
                    .fields_at()
                    .map(|(_, off, fty)| self.aggregate_eq(a + off, b + off, fty))
                    .collect();
                if !self.types.is_header(ty) {
                    return all(fields);
                }
                let (va, vb) = (Box::new(Expr::Load(a)), Box::new(Expr::Load(b)));
                let both_invalid = Expr::And(
                    Box::new(Expr::Not(va.clone())),
                    Box::new(Expr::Not(vb.clone())),
                );
                let mut valid_and_equal = vec![Expr::And(va, vb)];
                valid_and_equal.extend(fields);
                Expr::Or(Box::new(both_invalid), Box::new(all(valid_and_equal)))
            }
            Type::Stack(agg, n) => {
                let stride = self.types.size(&Type::Aggregate(*agg));
                all((0..*n)
                    .map(|i| {
                        self.aggregate_eq(
                            a + 1 + i * stride,
                            b + 1 + i * stride,
                            &Type::Aggregate(*agg),
                        )
                    })
                    .collect())
            }
            Type::Tuple(elems) => all(self
                .types
                .tuple_elements(elems)
                .map(|(off, ety)| self.aggregate_eq(a + off, b + off, ety))
                .collect()),
            Type::VarBit(_) | Type::Bits { .. } if self.types.size(ty) > 1 => Expr::RangeEq {
                a,
                b,
                len: self.types.size(ty),
            },
            t => {
                let width = self.types.scalar_width(t).unwrap_or(128);
                Expr::Compare {
                    op: CompareOp::Eq,
                    width,
                    signed: false,
                    a: Box::new(Expr::Load(a)),
                    b: Box::new(Expr::Load(b)),
                }
            }
        }
    }

    fn shift(&self, op: ArithOp, x: Scalar, y: Scalar, span: Span, rhs_span: Span) -> Result<Val> {
        if !shift_amount_ok(&y) {
            return fail(rhs_span, "a shift amount must be unsigned");
        }
        match x.ty {
            Type::Bits { width, signed } => Ok(arith(op, width, signed, x.ty.clone(), x, y)),
            _ => fail(span, "shifts need a bit<W> or int<W> left operand"),
        }
    }

    fn cast(&self, v: Scalar, to: &Type, span: Span) -> Result<Val> {
        let from = v.ty.clone();
        let out = |e: Expr, k: Option<u128>| Ok(scalar(e, to.clone(), k));
        match (&from, to) {
            (a, b) if a == b => out(v.expr, v.konst),
            (Type::Int, Type::Bits { width, .. }) => {
                let k = v.konst.expect("const") & mask(*width);
                out(Expr::Const(k), Some(k))
            }
            (Type::Int, Type::Bool)
            | (
                Type::Bits {
                    width: 1,
                    signed: false,
                },
                Type::Bool,
            )
            | (
                Type::Bool,
                Type::Bits {
                    width: 1,
                    signed: false,
                },
            ) => out(v.expr, v.konst),
            (
                Type::Bits {
                    width: wf,
                    signed: sf,
                },
                Type::Bits { width: wt, .. },
            ) => {
                let (wf, wt, sf) = (*wf, *wt, *sf);
                if wt < wf {
                    out(
                        Expr::Truncate {
                            arg: Box::new(v.expr),
                            width: wt,
                        },
                        v.konst.map(|k| k & mask(wt)),
                    )
                } else if sf && wt > wf {
                    let k = v.konst.map(|k| sign_extend(k, wf) as u128 & mask(wt));
                    out(
                        Expr::SignExtend {
                            arg: Box::new(v.expr),
                            from: wf,
                            to: wt,
                        },
                        k,
                    )
                } else {
                    out(v.expr, v.konst)
                }
            }
            (Type::Enum(i), Type::Bits { .. }) | (Type::Bits { .. }, Type::Enum(i))
                if self.types.enums[*i].repr.is_some() =>
            {
                let (width, signed) = self.types.enums[*i].repr.expect("checked");
                let inner = Scalar {
                    expr: v.expr,
                    ty: Type::Bits { width, signed },
                    konst: v.konst,
                };
                let mid = if matches!(to, Type::Enum(_)) {
                    self.cast(
                        Scalar {
                            ty: from.clone(),
                            ..inner
                        },
                        &Type::Bits { width, signed },
                        span,
                    )?
                } else {
                    self.cast(inner, to, span)?
                };
                let Val::Scalar { expr, konst, .. } = mid else {
                    unreachable!("casts give scalars")
                };
                out(expr, konst)
            }
            (Type::Int, Type::Enum(i)) if self.types.enums[*i].repr.is_some() => {
                let (width, _) = self.types.enums[*i].repr.expect("checked");
                let k = v.konst.expect("const") & mask(width);
                out(Expr::Const(k), Some(k))
            }
            _ => {
                let (f, t) = (self.show(&from), self.show(to));
                fail(span, format!("cannot cast {f} to {t}"))
            }
        }
    }

    /// A non-negative compile-time integer (widths, sizes, slice bounds).
    pub(super) fn const_u128(&mut self, e: &ast::Expr) -> Result<u128> {
        let v = match self.expr(e)? {
            Val::Int(n) if n.is_negative() => {
                return fail(e.span, "expected a non-negative constant")
            }
            Val::Int(n) => {
                return n.to_u128().map_or_else(
                    || fail(e.span, "this constant does not fit in 128 bits"),
                    Ok,
                )
            }
            v => self.scalar_from(v, e.span)?,
        };
        match (v.konst, &v.ty) {
            (Some(k), Type::Bits { .. }) => Ok(k),
            _ => fail(e.span, "expected a compile-time constant integer"),
        }
    }

    /// What a constant of type `ty` declared with value `e` denotes.
    pub(super) fn const_sym(&mut self, ty: Type, e: &ast::Expr) -> Result<Sym<'a>> {
        if ty != Type::Int {
            let value = self.const_value(e, &ty)?;
            return Ok(Sym::Const { ty, value });
        }
        match self.expr(e)? {
            Val::Int(v) => Ok(Sym::Int(v)),
            v => {
                let t = self.show(&val_type(&v));
                fail(e.span, format!("expected an int constant, found {t}"))
            }
        }
    }

    /// A compile-time constant of type `ty`.
    pub(super) fn const_value(&mut self, e: &ast::Expr, ty: &Type) -> Result<u128> {
        let v = self.scalar_any(e)?;
        let Some(k) = v.konst else {
            return fail(e.span, "expected a compile-time constant");
        };
        let k = match (&v.ty, ty) {
            (Type::Int, Type::Bits { width, .. }) => k & mask(*width),
            _ => {
                self.coerce(
                    Scalar {
                        expr: Expr::Const(k),
                        ty: v.ty,
                        konst: Some(k),
                    },
                    ty,
                    e.span,
                )?;
                k
            }
        };
        Ok(k)
    }

    /// Lowers an l-value: storage, or a scalar read from a slot, a stack element or a slice of one.
    pub(super) fn place(&mut self, e: &ast::Expr) -> Result<Val> {
        fn is_place(e: &Expr) -> bool {
            match e {
                Expr::Load(_) | Expr::LoadDyn(_) => true,
                Expr::Slice { arg, .. } => is_place(arg),
                _ => false,
            }
        }
        fn base(e: &Expr) -> Option<Slot> {
            match e {
                Expr::Load(slot) | Expr::LoadDyn(DynSlot { base: slot, .. }) => Some(*slot),
                Expr::Slice { arg, .. } => base(arg),
                _ => None,
            }
        }
        let (val, slot) = match self.expr(e)? {
            v @ Val::Agg { base, .. } => (v, base),
            v @ Val::DynElem {
                slot: DynSlot { base, .. },
                ..
            } => (v, base),
            Val::Scalar { expr, ty, .. } if is_place(&expr) => {
                let slot = base(&expr).expect("a place has a base slot");
                let v = Val::Scalar {
                    expr,
                    ty,
                    konst: None,
                };
                (v, slot)
            }
            _ => return fail(e.span, "this expression cannot be assigned to"),
        };
        if self
            .read_only
            .iter()
            .any(|&(start, len)| (start..start + len).contains(&slot))
        {
            // p4c: "Expression v cannot be the target of an assignment".
            return fail(
                e.span,
                "an `in` or directionless parameter cannot be the target of an assignment \
                 (p4c refuses it too)",
            );
        }
        Ok(val)
    }

    /// Statements that assign `rhs` to the l-value `dst`.
    pub(super) fn assign_to(&mut self, dst: Val, rhs: &ast::Expr) -> Result<Vec<Stmt>> {
        match dst {
            Val::Scalar { expr, ty, .. } => {
                let place = to_place(expr, rhs.span)?;
                let value = self.scalar_of(rhs, &ty)?;
                Ok(vec![Stmt::Assign(place, value)])
            }
            v @ Val::DynElem { .. } => {
                let (dst, ty) = block(v).expect("a stack element");
                self.assign_element(dst, &ty, rhs)
            }
            Val::Int(_) => fail(rhs.span, "an int constant cannot be assigned to"),
            Val::Lookahead { .. } => fail(rhs.span, "a lookahead cannot be assigned to"),
            Val::Wide { .. } => fail(rhs.span, "this expression cannot be assigned to"),
            Val::Agg { base, ty } => self.assign_aggregate(base, &ty, rhs),
        }
    }

    /// Statements that assign `rhs` to the header (or header union) `dst`, a stack element
    /// picked at run time, as one block: a list or struct expression is built in a scratch
    /// value first, so the index is evaluated once.
    fn assign_element(&mut self, dst: Place, ty: &Type, rhs: &ast::Expr) -> Result<Vec<Stmt>> {
        let initializer = match &rhs.kind {
            ExprKind::List(_) | ExprKind::StructInit(_) => true,
            ExprKind::Cast(to, _) => {
                matches!(to, ast::TypeRef::List { .. } | ast::TypeRef::Tuple { .. })
            }
            _ => false,
        };
        if !initializer {
            return self.copy_value(dst, ty, rhs);
        }
        let scratch = self.alloc(ty, rhs.span)?;
        let mut out = self.assign_aggregate(scratch, ty, rhs)?;
        out.push(Stmt::copy_block(
            dst,
            Place::Slot(scratch),
            self.types.size(ty),
        ));
        Ok(out)
    }

    /// Statements that copy the value of type `ty` that `rhs` gives (stored, a stack element
    /// picked at run time, a call's result, a lookahead) into the block at `dst`.
    fn copy_value(&mut self, dst: Place, ty: &Type, rhs: &ast::Expr) -> Result<Vec<Stmt>> {
        let len = self.types.size(ty);
        match self.expr(rhs)? {
            v @ (Val::Agg { .. } | Val::DynElem { .. }) if val_type(&v) == *ty => {
                let (src, _) = block(v).expect("a stored value");
                Ok(vec![Stmt::copy_block(dst, src, len)])
            }
            Val::Scalar {
                expr: Expr::Invoke(inv),
                ty: t,
                ..
            } if t == *ty => {
                let ret = inv.ret.expect("a function with a return value");
                Ok(vec![
                    Stmt::Invoke(inv),
                    Stmt::copy_block(dst, Place::Slot(ret), len),
                ])
            }
            Val::Lookahead {
                ty: t,
                offset,
                need,
            } if t == *ty => Ok(match dst {
                Place::Slot(base) => self.lookahead_into(base, ty, offset, need),
                dst => {
                    let scratch = self.alloc(ty, rhs.span)?;
                    let mut out = self.lookahead_into(scratch, ty, offset, need);
                    out.push(Stmt::CopyBlock {
                        dst,
                        src: Place::Slot(scratch),
                        len,
                    });
                    out
                }
            }),
            other => {
                let (f, t) = (self.show(&val_type(&other)), self.show(ty));
                fail(rhs.span, format!("type mismatch: expected {t}, found {f}"))
            }
        }
    }

    /// The parts a list or struct expression `rhs` gives a value of type `ty` (a struct, header
    /// or tuple), each as (offset in `ty`, type, expression); `None` if `rhs` is neither.
    fn initializer_parts<'e>(
        &mut self,
        ty: &Type,
        rhs: &'e ast::Expr,
    ) -> Result<Option<Vec<Part<'e>>>> {
        if let ExprKind::Cast(
            to @ (ast::TypeRef::List { .. } | ast::TypeRef::Tuple { .. }),
            inner,
        ) = &rhs.kind
        {
            return self.cast_list_parts(ty, to, inner);
        }
        let items: Vec<(Option<&ast::Ident>, &ast::Expr)> = match &rhs.kind {
            ExprKind::List(items) => items.iter().map(|e| (None, e)).collect(),
            ExprKind::StructInit(inits) => inits.iter().map(|(f, e)| (Some(f), e)).collect(),
            _ => return Ok(None),
        };
        let places: Vec<(String, u32, Type)> = match ty {
            Type::Tuple(elems) => self
                .types
                .tuple_elements(elems)
                .enumerate()
                .map(|(i, (off, ety))| (i.to_string(), off, ety.clone()))
                .collect(),
            Type::Aggregate(agg) if !self.types.is_union(ty) => self.types.aggregates[*agg]
                .fields_at()
                .map(|(n, off, fty)| (n.to_string(), off, fty.clone()))
                .collect(),
            _ => {
                return fail(
                    rhs.span,
                    format!("a list or struct expression cannot be a {}", self.show(ty)),
                )
            }
        };
        let what = if matches!(ty, Type::Tuple(_)) {
            "elements"
        } else {
            "fields"
        };
        if items.len() != places.len() {
            let why = if matches!(rhs.kind, ExprKind::StructInit(_)) {
                format!("every field of {} must be initialized", self.show(ty))
            } else {
                format!(
                    "{} has {} {what}, the list has {} values",
                    self.show(ty),
                    places.len(),
                    items.len()
                )
            };
            return fail(rhs.span, why);
        }
        let mut parts: Vec<Part> = Vec::with_capacity(places.len());
        for (i, (field, e)) in items.into_iter().enumerate() {
            let place = match field {
                None => places.get(i),
                Some(f) => places.iter().find(|(n, ..)| *n == f.name),
            };
            let Some((_, off, fty)) = place else {
                let f = field.expect("positional items are counted");
                return fail(
                    f.span,
                    format!("{} has no field '{}'", self.show(ty), f.name),
                );
            };
            if let Some(f) = field.filter(|_| parts.iter().any(|(o, ..)| o == off)) {
                return fail(f.span, format!("field '{}' is initialized twice", f.name));
            }
            parts.push((*off, fty.clone(), e));
        }
        Ok(Some(parts))
    }

    /// The parts `(list<T>){ ... }` or `(tuple<...>){ ... }` gives a value of type `ty`, which
    /// must be the cast's type.
    fn cast_list_parts<'e>(
        &mut self,
        ty: &Type,
        to: &ast::TypeRef,
        inner: &'e ast::Expr,
    ) -> Result<Option<Vec<Part<'e>>>> {
        let ExprKind::List(items) = &inner.kind else {
            return fail(inner.span, "expected a list expression { ... }");
        };
        let fits = match (to, ty) {
            (ast::TypeRef::List { elem, .. }, Type::Tuple(elems)) => {
                let elem = self.resolve_type(elem)?;
                elems.len() == items.len() && elems.iter().all(|t| *t == elem)
            }
            (ast::TypeRef::Tuple { .. }, _) => self.resolve_type(to)? == *ty,
            _ => false,
        };
        if !fits {
            let t = self.show(ty);
            return fail(
                to.span(),
                format!("this cast does not give a value of type {t}"),
            );
        }
        self.initializer_parts(ty, inner)
    }

    fn assign_aggregate(&mut self, base: Slot, ty: &Type, rhs: &ast::Expr) -> Result<Vec<Stmt>> {
        if let Some(parts) = self.initializer_parts(ty, rhs)? {
            let mut out = Vec::new();
            if self.types.is_header(ty) {
                out.push(Stmt::Assign(Place::Slot(base), Expr::Const(1)));
            }
            for (off, fty, e) in parts {
                out.extend(self.assign_to(self.storage(base + off, fty), e)?);
            }
            return Ok(out);
        }
        if Types::is_wide(ty) {
            return self.assign_wide(base, ty, rhs);
        }
        self.copy_value(Place::Slot(base), ty, rhs)
    }

    /// Statements that assign `rhs` to the [wide](Types::is_wide) `bit<W>` stored at `base`:
    /// a copy of a stored one, an `int` constant, or a value computed limb by limb.
    fn assign_wide(&mut self, base: Slot, ty: &Type, rhs: &ast::Expr) -> Result<Vec<Stmt>> {
        match self.expr(rhs)? {
            Val::Agg { base: src, ty: t } if t == *ty => Ok(vec![Stmt::Copy {
                dst: base,
                src,
                len: self.types.size(ty),
            }]),
            Val::Int(v) => Ok(wide_constant(base, ty, &v)),
            Val::Wide { limbs, ty: t } if t == *ty => {
                let width = limbs.width();
                limbs.store(base, width).map_or_else(
                    || {
                        fail(
                            rhs.span,
                            "a value wider than 128 bits written from a shift of itself is not \
                             supported yet: shift into another variable",
                        )
                    },
                    Ok,
                )
            }
            _ => fail(
                rhs.span,
                format!("expected a value of type {}", self.show(ty)),
            ),
        }
    }

    /// Whether the value of type `ty` stored at `base` equals `e`, which may be a list or
    /// struct expression: its type is the other operand's (`h.s == {1, 2}`), and it compares
    /// as that value would after an assignment (a header given a list is valid).
    fn equals_initializer(&mut self, base: Slot, ty: &Type, e: &ast::Expr) -> Result<Expr> {
        if let Some(parts) = self.initializer_parts(ty, e)? {
            let mut all_parts = Vec::with_capacity(parts.len() + 1);
            if self.types.is_header(ty) {
                all_parts.push(Expr::Load(base));
            }
            for (off, fty, item) in parts {
                all_parts.push(self.equals_initializer(base + off, &fty, item)?);
            }
            return Ok(all(all_parts));
        }
        match self.storage(base, ty.clone()) {
            Val::Agg { .. } => match self.expr(e)? {
                Val::Agg { base: other, ty: t } if t == *ty => {
                    Ok(self.aggregate_eq(base, other, ty))
                }
                other => {
                    let (f, t) = (self.show(&val_type(&other)), self.show(ty));
                    fail(e.span, format!("type mismatch: expected {t}, found {f}"))
                }
            },
            _ => Ok(Expr::Compare {
                op: CompareOp::Eq,
                width: self.types.scalar_width(ty).unwrap_or(128),
                signed: false,
                a: Box::new(Expr::Load(base)),
                b: Box::new(self.scalar_of(e, ty)?),
            }),
        }
    }
}

/// A statement that only checks that the parser's cursor has `need` bits after it (a packet
/// too short is `PacketTooShort`, as for any lookahead); it reads none.
pub(super) fn lookahead_check(offset: u32, need: u32) -> Stmt {
    let check = Expr::Lookahead {
        offset,
        width: 0,
        need,
    };
    Stmt::If(check, Vec::new(), Vec::new(), None)
}

/// The statements that store the `int` `v` into the wide `ty` at `base`: its bits modulo
/// 2^W, slot by slot (see [`slot_widths`](softswitch_core::ir::slot_widths)).
fn wide_constant(base: Slot, ty: &Type, v: &BigInt) -> Vec<Stmt> {
    let Type::Bits { width, .. } = ty else {
        return Vec::new();
    };
    let n = u32::from(width.div_ceil(SLOT_BITS));
    (0..n)
        .map(|i| {
            let limb = (v >> (128 * i as usize)) & BigInt::from(u128::MAX);
            let bits = limb.to_u128().unwrap_or(0) & mask(slot_width(*width, i));
            Stmt::Assign(Place::Slot(base + n - 1 - i), Expr::Const(bits))
        })
        .collect()
}

/// The `int` `v` modulo 2^`width`, as limbs.
fn wide_int(v: &BigInt, width: u16) -> Limbs {
    let bits: BigInt = v & ((BigInt::from(1) << usize::from(width)) - 1);
    let (_, bytes) = bits.to_bytes_be();
    Limbs::constant(&bytes)
        .unwrap_or_else(|| Limbs::narrow(Expr::Const(0), 1))
        .truncated(width)
}

/// The width of limb `i` (from the least significant) of a wide `bit<width>`.
fn slot_width(width: u16, i: u32) -> u16 {
    (u32::from(width) - i * 128).min(128) as u16
}

/// The slice `[h:l]` of the wide `bit<width>` stored at `slot` (see
/// [`slot_widths`](softswitch_core::ir::slot_widths)): the bits of at most two slots, joined.
fn wide_slice(slot: Slot, width: u16, h: u128, l: u128, span: Span) -> Result<Val> {
    if h < l || h >= u128::from(width) {
        return fail(
            span,
            format!("slice [{h}:{l}] is out of range for bit<{width}>"),
        );
    }
    if h - l >= u128::from(SLOT_BITS) {
        return fail(
            span,
            format!("slice [{h}:{l}] has more than 128 bits: softswitch supports slices of at most 128 bits of a wide value"),
        );
    }
    let (h, l) = (h as u16, l as u16);
    let last = slot + u32::from(width.div_ceil(SLOT_BITS)) - 1;
    // The bits `lo..=hi` (counted from the value's least significant bit) of one slot.
    let part = |hi: u16, lo: u16| {
        let chunk = lo / SLOT_BITS;
        let arg = Box::new(Expr::Load(last - u32::from(chunk)));
        Expr::Slice {
            arg,
            lo: lo - chunk * SLOT_BITS,
            width: hi - lo + 1,
        }
    };
    let split = (h / SLOT_BITS) * SLOT_BITS;
    let expr = if split > l {
        Expr::Concat {
            a: Box::new(part(h, split)),
            b: Box::new(part(split - 1, l)),
            b_width: split - l,
        }
    } else {
        part(h, l)
    };
    let ty = Type::Bits {
        width: h - l + 1,
        signed: false,
    };
    Ok(scalar(expr, ty, None))
}

/// The conjunction of `parts` (true if there are none) as a balanced tree of `&&`.
fn all(mut parts: Vec<Expr>) -> Expr {
    if parts.len() <= 1 {
        return parts.pop().unwrap_or(Expr::Const(1));
    }
    let right = parts.split_off(parts.len() / 2);
    Expr::And(Box::new(all(parts)), Box::new(all(right)))
}

/// Where a stored value starts, with its type: a slot, or a stack element picked at run time.
pub(super) fn block(v: Val) -> Option<(Place, Type)> {
    match v {
        Val::Agg { base, ty } => Some((Place::Slot(base), ty)),
        Val::DynElem { slot, ty } => Some((Place::Dyn(slot), ty)),
        _ => None,
    }
}

/// The type of a lowered value.
pub(super) fn val_type(v: &Val) -> Type {
    match v {
        Val::Scalar { ty, .. }
        | Val::Agg { ty, .. }
        | Val::DynElem { ty, .. }
        | Val::Lookahead { ty, .. } => ty.clone(),
        Val::Wide { ty, .. } => ty.clone(),
        Val::Int(_) => Type::Int,
    }
}

/// The place a `Load`, `LoadDyn` or slice-of-place expression reads.
pub(super) fn to_place(e: Expr, span: Span) -> Result<Place> {
    match e {
        Expr::Load(s) => Ok(Place::Slot(s)),
        Expr::LoadDyn(slot) => Ok(Place::Dyn(slot)),
        Expr::Slice { arg, lo, width } => Ok(Place::Slice {
            inner: Box::new(to_place(*arg, span)?),
            lo,
            width,
        }),
        _ => fail(span, "this expression cannot be assigned to"),
    }
}

/// Whether `amount` may be a shift amount: an unsigned `bit<W>`, or an `int` that fits in
/// 128 bits (a larger one is clamped before it gets here).
fn shift_amount_ok(amount: &Scalar) -> bool {
    matches!(amount.ty, Type::Bits { signed: false, .. } | Type::Int)
}

/// `x op y` on two `int`s, exactly: arithmetic, bitwise operators (two's complement), shifts
/// and comparisons; results beyond [`MAX_INT_BITS`] are refused at `span`.
/// What a binary operator on sized values lowers to.
enum Lowered {
    /// `&&`, `||`: [`Expr::And`], [`Expr::Or`].
    Logic,
    /// `++`: [`Expr::Concat`].
    Concat,
    /// A comparison.
    Compare(CompareOp),
    /// `<<`, `>>`: arithmetic whose right operand may be an `int`.
    Shift(ArithOp),
    /// Arithmetic or bitwise, on operands of one type.
    Arith(ArithOp),
}

/// The IR operation of source operator `op`.
fn lowered(op: BinOp) -> Lowered {
    match op {
        BinOp::And | BinOp::Or => Lowered::Logic,
        BinOp::Concat => Lowered::Concat,
        BinOp::Eq => Lowered::Compare(CompareOp::Eq),
        BinOp::Ne => Lowered::Compare(CompareOp::Ne),
        BinOp::Lt => Lowered::Compare(CompareOp::Lt),
        BinOp::Le => Lowered::Compare(CompareOp::Le),
        BinOp::Gt => Lowered::Compare(CompareOp::Gt),
        BinOp::Ge => Lowered::Compare(CompareOp::Ge),
        BinOp::Shl => Lowered::Shift(ArithOp::Shl),
        BinOp::Shr => Lowered::Shift(ArithOp::Shr),
        BinOp::Add => Lowered::Arith(ArithOp::Add),
        BinOp::Sub => Lowered::Arith(ArithOp::Sub),
        BinOp::Mul => Lowered::Arith(ArithOp::Mul),
        BinOp::Div => Lowered::Arith(ArithOp::Div),
        BinOp::Mod => Lowered::Arith(ArithOp::Mod),
        BinOp::AddSat => Lowered::Arith(ArithOp::AddSat),
        BinOp::SubSat => Lowered::Arith(ArithOp::SubSat),
        BinOp::BitAnd => Lowered::Arith(ArithOp::BitAnd),
        BinOp::BitOr => Lowered::Arith(ArithOp::BitOr),
        BinOp::BitXor => Lowered::Arith(ArithOp::BitXor),
    }
}

fn int_binary(op: BinOp, x: &BigInt, y: &BigInt, span: Span) -> Result<Val> {
    let compare = |r: bool| Ok(konst(u128::from(r), Type::Bool));
    match op {
        BinOp::Add => int(x + y, span),
        BinOp::Sub => int(x - y, span),
        BinOp::Mul => int(x * y, span),
        BinOp::Div | BinOp::Mod if y.is_positive() && !x.is_negative() => {
            int(if op == BinOp::Div { x / y } else { x % y }, span)
        }
        BinOp::Div | BinOp::Mod => fail(
            span,
            "'/' and '%' on int need non-negative operands and a positive divisor",
        ),
        BinOp::BitAnd => int(x & y, span),
        BinOp::BitOr => int(x | y, span),
        BinOp::BitXor => int(x ^ y, span),
        BinOp::Shl | BinOp::Shr if y.is_negative() => fail(span, "a shift amount must be unsigned"),
        BinOp::Shl => match y.to_u64().filter(|&n| n < MAX_INT_BITS) {
            Some(n) => int(x << n, span),
            None if x.is_zero() => Ok(Val::Int(BigInt::zero())),
            None => fail(
                span,
                format!(
                    "this int constant has more than {MAX_INT_BITS} bits (limits::MAX_INT_BITS)"
                ),
            ),
        },
        // Shifting right by more than the value's bits leaves 0 (or -1): stop there.
        BinOp::Shr => int(x >> y.to_u64().unwrap_or(u64::MAX).min(MAX_INT_BITS), span),
        BinOp::Eq => compare(x == y),
        BinOp::Ne => compare(x != y),
        BinOp::Lt => compare(x < y),
        BinOp::Le => compare(x <= y),
        BinOp::Gt => compare(x > y),
        BinOp::Ge => compare(x >= y),
        _ => fail(span, format!("'{}' needs sized operands", binop_text(op))),
    }
}

/// The operator as written.
pub(super) fn binop_text(op: BinOp) -> &'static str {
    match op {
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Mod => "%",
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::AddSat => "|+|",
        BinOp::SubSat => "|-|",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::BitAnd => "&",
        BinOp::BitXor => "^",
        BinOp::BitOr => "|",
        BinOp::Concat => "++",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::And => "&&",
        BinOp::Or => "||",
    }
}

/// `x op y` over `bit<width>` or `int<width>`, of type `ty`, folded when both are constant.
fn arith(op: ArithOp, width: u16, signed: bool, ty: Type, x: Scalar, y: Scalar) -> Val {
    let k = x
        .konst
        .zip(y.konst)
        .map(|(p, q)| ops::binop(op, width, signed, p, q));
    let e = Expr::Arith {
        op,
        width,
        signed,
        a: Box::new(x.expr),
        b: Box::new(y.expr),
    };
    scalar(e, ty, k)
}
