//! BMv2 JSON expressions ("type value objects") lowered to IR expressions.
//!
//! BMv2 computes on arbitrary-precision integers and p4c masks every result to its P4 width
//! (`(a + b) & 0xff`); softswitch computes on 128 bits, which gives the same values for the
//! fields of up to 128 bits it supports. Signed fields are sign-extended to 128 bits when read,
//! so arithmetic, shifts and comparisons on them are two's complement, as in BMv2.

use serde_json::Value;
use softswitch_core::ir::{mask, ArithOp, CompareOp, DynSlot, Expr, Place, Slot, SLOT_BITS};

use crate::json::{array, hex, member, str_member, string, uint};
use crate::layout::{Field, Layout};
use crate::{fail, limits, wide, Result};

/// A lowered expression: its IR, its width (128 when p4c left it unsized, as constants are) and
/// whether it holds a signed (sign-extended) value.
#[derive(Clone, Debug, PartialEq)]
pub struct Typed {
    /// The expression.
    pub expr: Expr,
    /// Its width in bits.
    pub width: u16,
    /// Whether it is signed.
    pub signed: bool,
}

impl Typed {
    fn unsigned(expr: Expr, width: u16) -> Typed {
        Typed {
            expr,
            width,
            signed: false,
        }
    }

    /// The expression cut to `width` bits, for a store into a field of that width.
    pub fn fit(self, width: u16) -> Expr {
        match self.expr {
            Expr::Const(v) => Expr::Const(v & mask(width)),
            e if self.width <= width && !self.signed => e,
            e => Expr::Truncate {
                arg: Box::new(e),
                width,
            },
        }
    }
}

/// A header-stack element picked at run time (`dereference_header_stack`): slots
/// `base + index * stride ..`, where `base` is the first element's validity slot.
#[derive(Clone, Debug, PartialEq)]
pub struct DynElement {
    /// The stack's name.
    pub stack: String,
    /// The picked element's validity slot.
    pub valid: DynSlot,
}

impl DynElement {
    /// The slot `offset` slots into the picked element, as a place.
    pub fn place(&self, offset: u32) -> Place {
        Place::Dyn(self.valid.offset(offset))
    }

    /// The slot `offset` slots into the picked element, as a value (0 out of range).
    pub fn load(&self, offset: u32) -> Expr {
        Expr::LoadDyn(self.valid.offset(offset))
    }
}

/// A field of a header-stack element picked at run time (`access_field`).
pub struct DynField {
    /// The element.
    pub element: DynElement,
    /// The field's offset from the element's validity slot.
    pub offset: u32,
    /// Its width.
    pub width: u16,
    /// Whether it is signed.
    pub signed: bool,
}

/// What names in an expression resolve to.
pub struct Scope<'a> {
    /// The headers and metadata.
    pub layout: &'a Layout,
    /// The slots and widths of the current action's runtime data (`runtime_data`, `local`).
    pub params: &'a [(Slot, u16)],
}

impl<'a> Scope<'a> {
    /// The field `[header, field]` (a `"field"` value).
    pub fn field(&self, v: &Value) -> Result<&'a Field> {
        let (h, f) = field_name(v)?;
        let header = self.layout.header(h)?;
        match header.field(f) {
            Some(field) => Ok(field),
            None => fail(format!("header {h} has no field {f}")),
        }
    }

    /// The validity slot of header `name` (`None`: metadata, always valid).
    pub fn validity(&self, name: &str) -> Result<Option<Slot>> {
        Ok(self.layout.header(name)?.valid)
    }

    /// Lowers a type value object used as a value.
    pub fn expr(&self, v: &Value) -> Result<Typed> {
        self.expr_at(v, 0)
    }

    fn expr_at(&self, v: &Value, depth: usize) -> Result<Typed> {
        if depth > limits::MAX_EXPR_DEPTH {
            return fail(format!(
                "an expression nests deeper than {} levels (limits::MAX_EXPR_DEPTH)",
                limits::MAX_EXPR_DEPTH
            ));
        }
        let ty = str_member(v, "type", "a value")?;
        let value = member(v, "value", "a value")?;
        match ty {
            // `[a dereference_header_stack, "$valid$"]`: p4c's isValid() of a stack element
            // picked at run time (which simple_switch refuses).
            "field" if value.get(0).is_some_and(Value::is_object) => {
                if value.get(1).and_then(Value::as_str) != Some("$valid$") || value.get(2).is_some()
                {
                    return fail("a field of a header picked at run time must be $valid$");
                }
                let element = self.dyn_element(&value[0], depth + 1)?;
                Ok(Typed::unsigned(element.load(0), 1))
            }
            "field" => {
                let (h, f) = field_name(value)?;
                if f == "$valid$" {
                    return Ok(match self.validity(h)? {
                        Some(s) => Typed::unsigned(Expr::Load(s), 1),
                        None => Typed::unsigned(Expr::Const(1), 1),
                    });
                }
                let field = self.field(value)?;
                let Some(width) = field.width() else {
                    return fail(format!(
                        "{h}.{f} is a varbit field or one wider than 128 bits, used as a value"
                    ));
                };
                Ok(load(Expr::Load(field.slot), width, field.signed))
            }
            "hexstr" => {
                let (c, negative) = hex(string(value, "a hexstr")?, "a hexstr")?;
                Ok(Typed {
                    expr: Expr::Const(c),
                    width: 128,
                    signed: negative,
                })
            }
            "bool" => match value {
                Value::Bool(b) => Ok(Typed::unsigned(Expr::Const(u128::from(*b)), 1)),
                _ => fail("a bool value must be true or false"),
            },
            "runtime_data" | "local" => {
                let i = uint(value, "a runtime_data index")? as usize;
                match self.params.get(i) {
                    Some(&(slot, width)) => Ok(Typed::unsigned(Expr::Load(slot), width)),
                    None => fail(format!("runtime_data {i} is not a parameter of the action")),
                }
            }
            "lookahead" => {
                let parts = array(value, "a lookahead")?;
                let (Some(offset), Some(width)) = (parts.first(), parts.get(1)) else {
                    return fail("a lookahead needs an offset and a width");
                };
                let offset = uint(offset, "a lookahead offset")?;
                let width = uint(width, "a lookahead width")?;
                if width > 128 || offset > 1 << 20 {
                    return fail(format!(
                        "a lookahead of {width} bits at {offset}: at most 128 bits within 1 Mib"
                    ));
                }
                Ok(Typed::unsigned(
                    Expr::Lookahead {
                        offset: offset as u32,
                        width: width as u16,
                        need: (offset + width) as u32,
                    },
                    width as u16,
                ))
            }
            "stack_field" => {
                let parts = array(value, "a stack_field")?;
                let (Some(sname), Some(fname), 2) = (
                    parts.first().and_then(Value::as_str),
                    parts.get(1).and_then(Value::as_str),
                    parts.len(),
                ) else {
                    return fail("a stack_field names [stack, field]");
                };
                let element = self.last_element(sname)?;
                let first = &self.layout.headers[self.layout.stacks[sname].elements[0]];
                let Some(field) = first.field(fname) else {
                    return fail(format!("the elements of {sname} have no field {fname}"));
                };
                let Some(width) = field.width() else {
                    return fail(format!(
                        "{sname}.{fname} is a varbit field, used as a value"
                    ));
                };
                Ok(load(
                    element.load(field.slot - element.valid.base),
                    width,
                    field.signed,
                ))
            }
            "expression" => self.operation(value, depth + 1),
            other => fail(format!(
                "a value of type {other} is not supported by softswitch's BMv2 JSON loader"
            )),
        }
    }

    fn operand(&self, op: &Value, side: &str, depth: usize) -> Result<Typed> {
        match op.get(side) {
            Some(Value::Null) | None => fail(format!("an operation lacks its \"{side}\" operand")),
            Some(v) => self.expr_at(v, depth + 1),
        }
    }

    fn operation(&self, v: &Value, depth: usize) -> Result<Typed> {
        // p4c nests an expression object in an expression value.
        if v.get("type").is_some() {
            return self.expr_at(v, depth + 1);
        }
        let op = str_member(v, "op", "an expression")?;
        if wide::mentions_wide(self, v, depth) {
            let side = |s: &str| v.get(s).unwrap_or(&Value::Null);
            return match op {
                "==" | "!=" => wide::equal(self, side("left"), side("right"), op == "!=", depth),
                // Bitwise operators and shifts on a wide value: a narrow consumer takes at
                // most the low 128 bits, and +, - and * keep them.
                "&" | "|" | "^" | "~" | "<<" | ">>" => {
                    let low = wide::limbs(self, v, depth)?.low();
                    Ok(Typed::unsigned(low, SLOT_BITS))
                }
                "+" | "-" | "*" if !matches!(v.get("left"), None | Some(Value::Null)) => {
                    self.narrow_operation(v, op, depth)
                }
                other => fail(format!(
                    "operation {other} on a value wider than 128 bits is not supported yet"
                )),
            };
        }
        self.narrow_operation(v, op, depth)
    }

    fn narrow_operation(&self, v: &Value, op: &str, depth: usize) -> Result<Typed> {
        let unary = matches!(v.get("left"), None | Some(Value::Null));
        // BMv2's integers are unbounded: a difference may be negative (p4c then masks it or
        // casts it with saturation), and a mask by a non-negative value is non-negative.
        let arith = |op: ArithOp, a: Typed, b: Typed| Typed {
            signed: match op {
                ArithOp::Sub => true,
                ArithOp::BitAnd => a.signed && b.signed,
                _ => a.signed || b.signed,
            },
            expr: Expr::Arith {
                op,
                width: 128,
                signed: a.signed,
                a: Box::new(a.expr),
                b: Box::new(b.expr),
            },
            width: 128,
        };
        let compare = |op: CompareOp, a: Typed, b: Typed| {
            Typed::unsigned(
                Expr::Compare {
                    op,
                    width: 128,
                    signed: a.signed || b.signed,
                    a: Box::new(a.expr),
                    b: Box::new(b.expr),
                },
                1,
            )
        };
        let right = || self.operand(v, "right", depth);
        let left = || self.operand(v, "left", depth);
        Ok(match op {
            "-" if unary => {
                let r = right()?;
                Typed {
                    expr: Expr::Negate {
                        arg: Box::new(r.expr),
                        width: 128,
                    },
                    width: 128,
                    signed: true,
                }
            }
            "+" | "-" | "*" | "/" | "%" | "<<" | ">>" | "&" | "|" | "^" => {
                let op = match op {
                    "+" => ArithOp::Add,
                    "-" => ArithOp::Sub,
                    "*" => ArithOp::Mul,
                    "/" => ArithOp::Div,
                    "%" => ArithOp::Mod,
                    "<<" => ArithOp::Shl,
                    ">>" => ArithOp::Shr,
                    "&" => ArithOp::BitAnd,
                    "|" => ArithOp::BitOr,
                    _ => ArithOp::BitXor,
                };
                arith(op, left()?, right()?)
            }
            "==" | "!=" | "<" | "<=" | ">" | ">=" => {
                let op = match op {
                    "==" => CompareOp::Eq,
                    "!=" => CompareOp::Ne,
                    "<" => CompareOp::Lt,
                    "<=" => CompareOp::Le,
                    ">" => CompareOp::Gt,
                    _ => CompareOp::Ge,
                };
                compare(op, left()?, right()?)
            }
            "and" => Typed::unsigned(
                Expr::And(Box::new(left()?.expr), Box::new(right()?.expr)),
                1,
            ),
            "or" => Typed::unsigned(Expr::Or(Box::new(left()?.expr), Box::new(right()?.expr)), 1),
            "not" => Typed::unsigned(Expr::Not(Box::new(right()?.expr)), 1),
            "d2b" => compare(
                CompareOp::Ne,
                right()?,
                Typed::unsigned(Expr::Const(0), 128),
            ),
            "b2d" => right()?,
            "~" => {
                let r = right()?;
                Typed {
                    expr: Expr::Complement {
                        arg: Box::new(r.expr),
                        width: 128,
                    },
                    width: 128,
                    signed: r.signed,
                }
            }
            "?" => {
                let cond = self.operand(v, "cond", depth)?;
                let (a, b) = (left()?, right()?);
                Typed {
                    width: a.width.max(b.width),
                    signed: a.signed || b.signed,
                    expr: Expr::Cond(Box::new(cond.expr), Box::new(a.expr), Box::new(b.expr)),
                }
            }
            "access_field" => {
                let f = self.dyn_field(v, depth)?;
                load(f.element.load(f.offset), f.width, f.signed)
            }
            "valid" if header_name(v.get("right")).is_err() => {
                let e = self.dyn_element(member(v, "right", "a validity test")?, depth + 1)?;
                Typed::unsigned(e.load(0), 1)
            }
            "valid" => {
                let h = header_name(v.get("right"))?;
                match self.validity(h)? {
                    Some(s) => Typed::unsigned(Expr::Load(s), 1),
                    None => Typed::unsigned(Expr::Const(1), 1),
                }
            }
            "valid_union" => {
                let u = header_name(v.get("right"))?;
                let Some(members) = self.layout.unions.get(u) else {
                    return fail(format!("no header union is called {u}"));
                };
                let mut any = Expr::Const(0);
                for &m in members {
                    if let Some(s) = self.layout.headers[m].valid {
                        any = Expr::Or(Box::new(any), Box::new(Expr::Load(s)));
                    }
                }
                Typed::unsigned(any, 1)
            }
            // `lastIndex`: `nextIndex - 1` (all ones, wrapped, before any extract: BMv2's -1).
            "last_stack_index" | "size_stack" => {
                let sname = header_name(v.get("right"))?;
                let Some(stack) = self.layout.stacks.get(sname) else {
                    return fail(format!("no header stack is called {sname}"));
                };
                let next = Expr::Load(stack.base);
                if op == "size_stack" {
                    Typed::unsigned(next, 32)
                } else {
                    Typed {
                        expr: last_index(next),
                        width: 128,
                        signed: true,
                    }
                }
            }
            "two_comp_mod" => {
                let (a, w) = (left()?, self.width_operand(v, depth)?);
                Typed {
                    expr: Expr::SignExtend {
                        arg: Box::new(Expr::Truncate {
                            arg: Box::new(a.expr),
                            width: w,
                        }),
                        from: w,
                        to: 128,
                    },
                    width: 128,
                    signed: true,
                }
            }
            "usat_cast" | "sat_cast" => {
                let (a, w) = (left()?, self.width_operand(v, depth)?);
                let signed_result = op == "sat_cast";
                let (lo, hi) = if signed_result {
                    let hi = mask(w.saturating_sub(1));
                    (!hi, hi)
                } else {
                    (0, mask(w))
                };
                let cmp = |op, x: &Expr, c: u128| {
                    Box::new(Expr::Compare {
                        op,
                        width: 128,
                        signed: true,
                        a: Box::new(x.clone()),
                        b: Box::new(Expr::Const(c)),
                    })
                };
                let x = a.expr;
                // Unsigned operands compare as unsigned; signed ones as two's complement.
                let above = if a.signed {
                    cmp(CompareOp::Gt, &x, hi)
                } else {
                    Box::new(Expr::Compare {
                        op: CompareOp::Gt,
                        width: 128,
                        signed: false,
                        a: Box::new(x.clone()),
                        b: Box::new(Expr::Const(hi)),
                    })
                };
                let below = if a.signed {
                    cmp(CompareOp::Lt, &x, lo)
                } else {
                    Box::new(Expr::Const(0))
                };
                Typed {
                    expr: Expr::Cond(
                        above,
                        Box::new(Expr::Const(hi)),
                        Box::new(Expr::Cond(below, Box::new(Expr::Const(lo)), Box::new(x))),
                    ),
                    width: 128,
                    signed: signed_result,
                }
            }
            other => {
                return fail(format!(
                    "operation {other} is not supported by softswitch's BMv2 JSON loader"
                ))
            }
        })
    }

    /// The stack element a `dereference_header_stack` expression picks (possibly wrapped in
    /// `expression` values, as p4c writes it).
    pub fn dyn_element(&self, v: &Value, depth: usize) -> Result<DynElement> {
        let op = unwrap_expression(v, depth)?;
        if op.get("op").and_then(Value::as_str) != Some("dereference_header_stack") {
            return fail("a header picked at run time must be a dereference_header_stack");
        }
        let left = member(op, "left", "a dereference_header_stack")?;
        if str_member(left, "type", "a dereference_header_stack")? != "header_stack" {
            return fail("a dereference_header_stack's left operand must be a header_stack");
        }
        let sname = string(member(left, "value", "a header_stack")?, "a header_stack")?;
        let index = self.operand(op, "right", depth + 1)?;
        self.element(sname, |_| index.expr)
    }

    /// The last element extracted into stack `sname` (`stack.last`): out of range, so read as
    /// zeros, before any.
    fn last_element(&self, sname: &str) -> Result<DynElement> {
        self.element(sname, |next| last_index(Expr::Load(next)))
    }

    /// The element of stack `sname` at `index`, given the stack's `nextIndex` slot.
    fn element(&self, sname: &str, index: impl FnOnce(Slot) -> Expr) -> Result<DynElement> {
        let Some(stack) = self.layout.stacks.get(sname) else {
            return fail(format!("no header stack is called {sname}"));
        };
        let Some(base) = self.layout.headers[stack.elements[0]].valid else {
            return fail(format!("header stack {sname} holds metadata"));
        };
        Ok(DynElement {
            stack: sname.to_string(),
            valid: DynSlot {
                base,
                stride: stack.stride,
                count: stack.elements.len() as u32,
                index: Box::new(index(stack.base)),
            },
        })
    }

    /// The field an `access_field` operation (`{"op": "access_field", "left": a
    /// dereference_header_stack, "right": the field's index in its header type}`) names.
    pub fn dyn_field(&self, op: &Value, depth: usize) -> Result<DynField> {
        let element = self.dyn_element(member(op, "left", "an access_field")?, depth + 1)?;
        let i = uint(
            member(op, "right", "an access_field")?,
            "an access_field's field",
        )?;
        let first = &self.layout.headers[self.layout.stacks[&element.stack].elements[0]];
        let Some(field) = first.fields.get(i as usize) else {
            return fail(format!(
                "access_field {i}: the elements of {} have {} fields",
                element.stack,
                first.fields.len()
            ));
        };
        let Some(width) = field.width() else {
            return fail(format!(
                "{}.{} is a varbit field, used as a value",
                element.stack, field.name
            ));
        };
        Ok(DynField {
            offset: field.slot - element.valid.base,
            width,
            signed: field.signed,
            element,
        })
    }

    /// The constant width operand (`right`) of a cast.
    fn width_operand(&self, v: &Value, depth: usize) -> Result<u16> {
        match self.operand(v, "right", depth)?.expr {
            Expr::Const(w) if (1..=128).contains(&w) => Ok(w as u16),
            _ => fail("a cast's width must be a constant of 1 to 128 bits"),
        }
    }
}

/// The operation object inside `v`, unwrapping the `{"type": "expression", "value": ..}` layers
/// p4c nests around it.
pub fn unwrap_expression(mut v: &Value, depth: usize) -> Result<&Value> {
    for _ in depth..=limits::MAX_EXPR_DEPTH {
        match v.get("type").and_then(Value::as_str) {
            Some("expression") => v = member(v, "value", "an expression")?,
            Some(other) => return fail(format!("a {other} where an operation was expected")),
            None => return Ok(v),
        }
    }
    fail(format!(
        "an expression nests deeper than {} levels (limits::MAX_EXPR_DEPTH)",
        limits::MAX_EXPR_DEPTH
    ))
}

/// `next - 1` on 128 bits: a stack's last index from its `nextIndex`.
fn last_index(next: Expr) -> Expr {
    Expr::Arith {
        op: ArithOp::Sub,
        width: 128,
        signed: false,
        a: Box::new(next),
        b: Box::new(Expr::Const(1)),
    }
}

/// A field's value (`expr` reads it): sign-extended to 128 bits when signed.
fn load(expr: Expr, width: u16, signed: bool) -> Typed {
    if signed && width < 128 {
        Typed {
            expr: Expr::SignExtend {
                arg: Box::new(expr),
                from: width,
                to: 128,
            },
            width: 128,
            signed: true,
        }
    } else {
        Typed {
            expr,
            width,
            signed,
        }
    }
}

/// The `[header, field]` of a `"field"` value.
pub fn field_name(v: &Value) -> Result<(&str, &str)> {
    let parts = array(v, "a field reference")?;
    match (
        parts.first().and_then(Value::as_str),
        parts.get(1).and_then(Value::as_str),
    ) {
        (Some(h), Some(f)) if parts.len() == 2 => Ok((h, f)),
        _ => fail("a field reference must be [header, field]"),
    }
}

/// The header name of a `{"type": "header", "value": NAME}` operand.
fn header_name(v: Option<&Value>) -> Result<&str> {
    match v {
        Some(v) => string(member(v, "value", "a header operand")?, "a header operand"),
        None => fail("a validity test lacks its header"),
    }
}
