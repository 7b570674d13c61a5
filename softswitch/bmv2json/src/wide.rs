//! BMv2 JSON expressions over fields wider than 128 bits, lowered 128-bit limb by limb.
//!
//! p4c writes what P4 does with a wide field as BMv2's unbounded-integer operations: a copy is
//! an `assign`, a slice `(f >> lo) & mask`, a write to a slice `f = (f & ~m) | (v << lo)`. Such
//! an expression is lowered here to one IR expression per 128-bit limb (least significant
//! first); the bitwise operators work limb by limb, and a shift by a constant joins two limbs
//! for each one it makes. Other operators on wide values (arithmetic, ordering) are refused
//! with the operator named.

use serde_json::Value;
use softswitch_core::ir::{mask, ArithOp, CompareOp, Expr, Slot, MAX_WIDTH, SLOT_BITS};

use crate::expr::{Scope, Typed};
use crate::json::{hex_bytes, str_member, string};
use crate::layout::FieldStore;
use crate::{fail, limits, Result};

/// A wide value: its limbs, least significant first, each below 2^128, and its width (the bits
/// above it are 0).
pub struct Limbs {
    /// The limbs.
    pub limbs: Vec<Expr>,
    /// Its width in bits.
    pub width: u16,
}

impl Limbs {
    fn new(mut limbs: Vec<Expr>, width: u16) -> Limbs {
        limbs.resize(
            usize::from(width.div_ceil(SLOT_BITS).max(1)),
            Expr::Const(0),
        );
        Limbs { limbs, width }
    }

    /// The value modulo 2^`width`, as `width.div_ceil(128)` limbs.
    pub fn fit(mut self, width: u16) -> Vec<Expr> {
        let n = usize::from(width.div_ceil(SLOT_BITS).max(1));
        self.limbs.resize(n, Expr::Const(0));
        let top = width - (n as u16 - 1) * SLOT_BITS;
        if top < SLOT_BITS && self.width > width {
            let last = self.limbs.pop().unwrap_or(Expr::Const(0));
            self.limbs
                .push(arith(ArithOp::BitAnd, last, Expr::Const(mask(top))));
        }
        self.limbs
    }

    fn limb(&self, i: i64) -> Expr {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.limbs.get(i))
            .cloned()
            .unwrap_or(Expr::Const(0))
    }
}

fn arith(op: ArithOp, a: Expr, b: Expr) -> Expr {
    match (op, &a, &b) {
        (ArithOp::BitAnd, Expr::Const(0), _) | (ArithOp::BitAnd, _, Expr::Const(0)) => {
            Expr::Const(0)
        }
        (ArithOp::BitOr | ArithOp::BitXor | ArithOp::Shl | ArithOp::Shr, _, Expr::Const(0)) => a,
        (ArithOp::BitOr | ArithOp::BitXor, Expr::Const(0), _) => b,
        _ => Expr::Arith {
            op,
            width: SLOT_BITS,
            signed: false,
            a: Box::new(a),
            b: Box::new(b),
        },
    }
}

/// Whether `v` mentions a field wider than 128 bits (or a constant that is).
pub fn mentions_wide(scope: &Scope, v: &Value, depth: usize) -> bool {
    if depth > limits::MAX_EXPR_DEPTH {
        return false;
    }
    match v.get("type").and_then(Value::as_str) {
        Some("field") => v
            .get("value")
            .and_then(|f| scope.field(f).ok())
            .is_some_and(|f| matches!(f.store, FieldStore::Wide(_))),
        Some("hexstr") => v
            .get("value")
            .and_then(Value::as_str)
            .is_some_and(|s| s.trim_start_matches("0x").trim_start_matches('0').len() > 32),
        Some("expression") => v
            .get("value")
            .is_some_and(|e| mentions_wide(scope, e, depth + 1)),
        _ => ["left", "right", "cond"]
            .iter()
            .filter_map(|side| v.get(*side))
            .any(|e| mentions_wide(scope, e, depth + 1)),
    }
}

/// Lowers `v`, a value that [`mentions_wide`], as limbs.
pub fn limbs(scope: &Scope, v: &Value, depth: usize) -> Result<Limbs> {
    if depth > limits::MAX_EXPR_DEPTH {
        return fail(format!(
            "an expression nests deeper than {} levels (limits::MAX_EXPR_DEPTH)",
            limits::MAX_EXPR_DEPTH
        ));
    }
    if v.get("type").is_none() {
        return operation(scope, v, depth);
    }
    match str_member(v, "type", "a value")? {
        "field" => {
            let value = v.get("value").unwrap_or(&Value::Null);
            let field = scope.field(value)?;
            match field.store {
                FieldStore::Wide(w) if !field.signed => {
                    let n = u32::from(w.div_ceil(SLOT_BITS));
                    let slots = (field.slot..field.slot + n).rev();
                    Ok(Limbs::new(slots.map(Expr::Load).collect(), w))
                }
                _ => narrow(scope, v),
            }
        }
        "hexstr" => {
            let s = string(v.get("value").unwrap_or(&Value::Null), "a hexstr")?;
            if s.starts_with('-') {
                return fail(format!("a negative constant ({s}) wider than 128 bits"));
            }
            let bytes = hex_bytes(s, "a hexstr")?;
            let width = bytes.len() * 8;
            if width > usize::from(MAX_WIDTH) + usize::from(SLOT_BITS) {
                return fail(format!("the constant {s} has more than {MAX_WIDTH} bits"));
            }
            let limbs = bytes
                .rchunks(16)
                .map(|c| Expr::Const(c.iter().fold(0u128, |v, b| v << 8 | u128::from(*b))))
                .collect();
            Ok(Limbs::new(limbs, width as u16))
        }
        "expression" => limbs(scope, v.get("value").unwrap_or(&Value::Null), depth + 1),
        _ => narrow(scope, v),
    }
}

/// A value of at most 128 bits, as one limb.
fn narrow(scope: &Scope, v: &Value) -> Result<Limbs> {
    let t: Typed = scope.expr(v)?;
    if t.signed {
        return fail("a signed value in an expression over a value wider than 128 bits");
    }
    Ok(Limbs::new(vec![t.expr], t.width))
}

fn operation(scope: &Scope, v: &Value, depth: usize) -> Result<Limbs> {
    let op = str_member(v, "op", "an expression")?;
    let side = |s: &str| match v.get(s) {
        Some(Value::Null) | None => fail(format!("an operation lacks its \"{s}\" operand")),
        Some(e) => limbs(scope, e, depth + 1),
    };
    match op {
        "&" | "|" | "^" => {
            let (a, b) = (side("left")?, side("right")?);
            let op = match op {
                "&" => ArithOp::BitAnd,
                "|" => ArithOp::BitOr,
                _ => ArithOp::BitXor,
            };
            let width = if op == ArithOp::BitAnd {
                a.width.min(b.width)
            } else {
                a.width.max(b.width)
            };
            let n = a.limbs.len().max(b.limbs.len()) as i64;
            let out = (0..n).map(|i| arith(op, a.limb(i), b.limb(i))).collect();
            Ok(Limbs::new(
                Limbs {
                    limbs: out,
                    width: a.width.max(b.width),
                }
                .fit(width),
                width,
            ))
        }
        "~" => {
            let a = side("right")?;
            let limbs = a
                .limbs
                .iter()
                .map(|l| Expr::Complement {
                    arg: Box::new(l.clone()),
                    width: SLOT_BITS,
                })
                .collect();
            let width = a.width;
            Ok(Limbs::new(
                Limbs {
                    limbs,
                    width: width.saturating_add(SLOT_BITS),
                }
                .fit(width),
                width,
            ))
        }
        "<<" | ">>" => {
            let a = side("left")?;
            let Expr::Const(s) = scope.expr(v.get("right").unwrap_or(&Value::Null))?.expr else {
                return fail("a value wider than 128 bits is shifted by a constant only");
            };
            let s = s.min(u128::from(MAX_WIDTH) + u128::from(SLOT_BITS)) as i64;
            let (q, r) = (s / 128, (s % 128) as u128);
            let left = op == "<<";
            let width = if left {
                (i64::from(a.width) + s).min(i64::from(MAX_WIDTH)) as u16
            } else {
                (i64::from(a.width) - s).max(1) as u16
            };
            let n = i64::from(width.div_ceil(SLOT_BITS));
            let out = (0..n)
                .map(|i| {
                    if r == 0 {
                        return a.limb(if left { i - q } else { i + q });
                    }
                    let (near, far) = if left {
                        (a.limb(i - q), a.limb(i - q - 1))
                    } else {
                        (a.limb(i + q), a.limb(i + q + 1))
                    };
                    let (op_near, op_far) = if left {
                        (ArithOp::Shl, ArithOp::Shr)
                    } else {
                        (ArithOp::Shr, ArithOp::Shl)
                    };
                    arith(
                        ArithOp::BitOr,
                        arith(op_near, near, Expr::Const(r)),
                        arith(op_far, far, Expr::Const(128 - r)),
                    )
                })
                .collect();
            // A shift left past MAX_WIDTH keeps MAX_WIDTH bits.
            let all = Limbs {
                limbs: out,
                width: width.saturating_add(SLOT_BITS),
            };
            Ok(Limbs::new(all.fit(width), width))
        }
        other => fail(format!(
            "operation {other} on a value wider than 128 bits is not supported yet"
        )),
    }
}

/// `a == b` (or `!=`) where one of them [`mentions_wide`]: limb by limb.
pub fn equal(scope: &Scope, a: &Value, b: &Value, ne: bool, depth: usize) -> Result<Typed> {
    let (a, b) = (limbs(scope, a, depth + 1)?, limbs(scope, b, depth + 1)?);
    let n = a.limbs.len().max(b.limbs.len()) as i64;
    let eq = (0..n)
        .map(|i| Expr::Compare {
            op: CompareOp::Eq,
            width: SLOT_BITS,
            signed: false,
            a: Box::new(a.limb(i)),
            b: Box::new(b.limb(i)),
        })
        .reduce(|x, y| Expr::And(Box::new(x), Box::new(y)))
        .unwrap_or(Expr::Const(1));
    let expr = if ne { Expr::Not(Box::new(eq)) } else { eq };
    Ok(Typed {
        expr,
        width: 1,
        signed: false,
    })
}

/// The statements that store `value` into the wide field at `slot` (`width` bits): one
/// assignment per slot, refused when a slot's new value reads another slot of the field that
/// an earlier assignment changed (the loader keeps no temporaries).
pub fn store(slot: Slot, width: u16, value: Limbs) -> Result<Vec<softswitch_core::ir::Stmt>> {
    use softswitch_core::ir::{Place, Stmt};
    let n = u32::from(width.div_ceil(SLOT_BITS));
    let limbs = value.fit(width);
    let mut out = Vec::new();
    for (i, limb) in limbs.into_iter().enumerate() {
        let dst = slot + n - 1 - i as u32;
        if reads_other(&limb, slot..slot + n, dst) {
            return fail(
                "a wide field is written from a shift of itself, which is not supported yet",
            );
        }
        out.push(Stmt::Assign(Place::Slot(dst), limb));
    }
    Ok(out)
}

/// Whether `e` loads a slot of `range` other than `own`.
fn reads_other(e: &Expr, range: std::ops::Range<Slot>, own: Slot) -> bool {
    match e {
        Expr::Load(s) => range.contains(s) && *s != own,
        Expr::Arith { a, b, .. } => {
            reads_other(a, range.clone(), own) || reads_other(b, range, own)
        }
        Expr::Complement { arg, .. } => reads_other(arg, range, own),
        Expr::Const(_) => false,
        _ => true,
    }
}
