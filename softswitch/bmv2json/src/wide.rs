//! BMv2 JSON expressions over fields wider than 128 bits, lowered 128-bit limb by limb (the
//! core's [`Limbs`]).
//!
//! p4c writes what P4 does with a wide field as BMv2's unbounded-integer operations: a copy is
//! an `assign`, a slice `(f >> lo) & mask`, a write to a slice `f = (f & ~m) | (v << lo)`. Such
//! an expression is lowered here to one IR expression per 128-bit limb (least significant
//! first); the bitwise operators work limb by limb, and a shift by a constant joins two limbs
//! for each one it makes. Other operators on wide values (arithmetic, ordering) are refused
//! with the operator named.

use serde_json::Value;
use softswitch_core::ir::{ArithOp, Expr, Slot, Stmt, MAX_WIDTH};
use softswitch_core::limbs::Limbs;

use crate::expr::{Scope, Typed};
use crate::json::{hex_bytes, str_member, string};
use crate::layout::FieldStore;
use crate::{fail, limits, Result};

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
                FieldStore::Wide(w) if !field.signed => Ok(Limbs::stored(field.slot, w)),
                _ => narrow(scope, v),
            }
        }
        "hexstr" => {
            let s = string(v.get("value").unwrap_or(&Value::Null), "a hexstr")?;
            if s.starts_with('-') {
                return fail(format!("a negative constant ({s}) wider than 128 bits"));
            }
            match Limbs::constant(&hex_bytes(s, "a hexstr")?) {
                Some(c) => Ok(c),
                None => fail(format!("the constant {s} has more than {MAX_WIDTH} bits")),
            }
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
    Ok(Limbs::narrow(t.expr, t.width))
}

fn operation(scope: &Scope, v: &Value, depth: usize) -> Result<Limbs> {
    let op = str_member(v, "op", "an expression")?;
    let side = |s: &str| match v.get(s) {
        Some(Value::Null) | None => fail(format!("an operation lacks its \"{s}\" operand")),
        Some(e) => limbs(scope, e, depth + 1),
    };
    match op {
        "&" | "|" | "^" => {
            let op = match op {
                "&" => ArithOp::BitAnd,
                "|" => ArithOp::BitOr,
                _ => ArithOp::BitXor,
            };
            Limbs::bitwise(op, side("left")?, side("right")?)
                .map_or_else(|| fail("not a bitwise operator"), Ok)
        }
        "~" => Ok(Limbs::complement(side("right")?)),
        "<<" | ">>" => {
            let a = side("left")?;
            let Expr::Const(s) = scope.expr(v.get("right").unwrap_or(&Value::Null))?.expr else {
                return fail("a value wider than 128 bits is shifted by a constant only");
            };
            Ok(Limbs::shift(a, op == "<<", s))
        }
        other => fail(format!(
            "operation {other} on a value wider than 128 bits is not supported yet"
        )),
    }
}

/// `a == b` (or `!=`) where one of them [`mentions_wide`]: limb by limb.
pub fn equal(scope: &Scope, a: &Value, b: &Value, ne: bool, depth: usize) -> Result<Typed> {
    let eq = Limbs::equal(&limbs(scope, a, depth + 1)?, &limbs(scope, b, depth + 1)?);
    let expr = if ne { Expr::Not(Box::new(eq)) } else { eq };
    Ok(Typed {
        expr,
        width: 1,
        signed: false,
    })
}

/// The statements that store `value` into the wide field at `slot` (`width` bits), refused when
/// a slot's new value reads another slot of the field (the loader keeps no temporaries).
pub fn store(slot: Slot, width: u16, value: Limbs) -> Result<Vec<Stmt>> {
    value.store(slot, width).map_or_else(
        || fail("a wide field is written from a shift of itself, which is not supported yet"),
        Ok,
    )
}
