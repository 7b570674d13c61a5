//! Values wider than 128 bits as IR expressions, 128-bit limb by limb: what the front end and
//! the BMv2 JSON loader lower bitwise operators, shifts by constants and equality of such
//! values to. A wide value is stored in several slots ([`slot_widths`](crate::ir::slot_widths));
//! here it is a list of expressions, one per 128 bits, least significant first, so the
//! interpreter runs only its ordinary 128-bit operators on them.

use crate::ir::{mask, ArithOp, CompareOp, Expr, Place, Slot, Stmt, MAX_WIDTH, SLOT_BITS};

/// A value of `width` bits as limbs, least significant first, each below 2^128; the bits above
/// `width` are 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Limbs {
    limbs: Vec<Expr>,
    width: u16,
}

/// How many limbs a `width`-bit value has.
fn count(width: u16) -> usize {
    usize::from(width.div_ceil(SLOT_BITS).max(1))
}

/// `a op b` on 128 bits, folding what a constant 0 makes trivial.
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

impl Limbs {
    /// The wide value stored at `slot` (`width` bits, in [`slot_widths`](crate::ir::slot_widths)'
    /// order).
    pub fn stored(slot: Slot, width: u16) -> Limbs {
        let n = count(width) as u32;
        Limbs {
            limbs: (slot..slot + n).rev().map(Expr::Load).collect(),
            width,
        }
    }

    /// A value of at most 128 bits (unsigned, below 2^`width`).
    pub fn narrow(expr: Expr, width: u16) -> Limbs {
        Limbs {
            limbs: vec![expr],
            width: width.min(SLOT_BITS),
        }
    }

    /// The constant of these bytes, most significant first (at most [`MAX_WIDTH`] + 128 bits:
    /// `None` past it).
    pub fn constant(bytes: &[u8]) -> Option<Limbs> {
        let width = bytes.len().checked_mul(8)?;
        if width > usize::from(MAX_WIDTH) + usize::from(SLOT_BITS) {
            return None;
        }
        let limbs = bytes
            .rchunks(16)
            .map(|c| Expr::Const(c.iter().fold(0u128, |v, b| v << 8 | u128::from(*b))))
            .collect();
        Some(Limbs::padded(limbs, width as u16))
    }

    fn padded(mut limbs: Vec<Expr>, width: u16) -> Limbs {
        limbs.resize(count(width), Expr::Const(0));
        Limbs { limbs, width }
    }

    /// Its width in bits.
    pub fn width(&self) -> u16 {
        self.width
    }

    fn limb(&self, i: i64) -> Expr {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.limbs.get(i))
            .cloned()
            .unwrap_or(Expr::Const(0))
    }

    /// The value modulo 2^`width`, as `width.div_ceil(128)` limbs.
    pub fn fit(mut self, width: u16) -> Vec<Expr> {
        let n = count(width);
        self.limbs.resize(n, Expr::Const(0));
        let top = width - (n as u16 - 1) * SLOT_BITS;
        if top < SLOT_BITS && self.width > width {
            let last = self.limbs.pop().unwrap_or(Expr::Const(0));
            self.limbs
                .push(arith(ArithOp::BitAnd, last, Expr::Const(mask(top))));
        }
        self.limbs
    }

    /// The value modulo 2^`width`.
    pub fn truncated(self, width: u16) -> Limbs {
        Limbs::padded(self.fit(width), width)
    }

    /// The low 128 bits, as one expression.
    pub fn low(self) -> Expr {
        self.fit(SLOT_BITS).swap_remove(0)
    }

    /// `a & b`, `a | b` or `a ^ b` (other operators are not bitwise: `None`).
    pub fn bitwise(op: ArithOp, a: Limbs, b: Limbs) -> Option<Limbs> {
        let width = match op {
            ArithOp::BitAnd => a.width.min(b.width),
            ArithOp::BitOr | ArithOp::BitXor => a.width.max(b.width),
            _ => return None,
        };
        let n = a.limbs.len().max(b.limbs.len()) as i64;
        let limbs = (0..n).map(|i| arith(op, a.limb(i), b.limb(i))).collect();
        let all = Limbs {
            limbs,
            width: a.width.max(b.width),
        };
        Some(Limbs::padded(all.fit(width), width))
    }

    /// `~a` on `a`'s width.
    pub fn complement(a: Limbs) -> Limbs {
        let width = a.width;
        let limbs = a
            .limbs
            .into_iter()
            .map(|l| Expr::Complement {
                arg: Box::new(l),
                width: SLOT_BITS,
            })
            .collect();
        let all = Limbs {
            limbs,
            width: width.saturating_add(SLOT_BITS),
        };
        Limbs::padded(all.fit(width), width)
    }

    /// `a << s` (`left`, growing the width, at most to [`MAX_WIDTH`]) or `a >> s`.
    pub fn shift(a: Limbs, left: bool, s: u128) -> Limbs {
        let s = s.min(u128::from(MAX_WIDTH) + u128::from(SLOT_BITS)) as i64;
        let (q, r) = (s / 128, (s % 128) as u128);
        let width = if left {
            (i64::from(a.width) + s).min(i64::from(MAX_WIDTH)) as u16
        } else {
            (i64::from(a.width) - s).max(1) as u16
        };
        let (op_near, op_far) = if left {
            (ArithOp::Shl, ArithOp::Shr)
        } else {
            (ArithOp::Shr, ArithOp::Shl)
        };
        let limbs = (0..count(width) as i64)
            .map(|i| {
                let (near, far) = if left {
                    (a.limb(i - q), a.limb(i - q - 1))
                } else {
                    (a.limb(i + q), a.limb(i + q + 1))
                };
                if r == 0 {
                    return near;
                }
                arith(
                    ArithOp::BitOr,
                    arith(op_near, near, Expr::Const(r)),
                    arith(op_far, far, Expr::Const(128 - r)),
                )
            })
            .collect();
        // A shift left past MAX_WIDTH keeps MAX_WIDTH bits.
        let all = Limbs {
            limbs,
            width: width.saturating_add(SLOT_BITS),
        };
        Limbs::padded(all.fit(width), width)
    }

    /// `a == b` (1 or 0), limb by limb.
    pub fn equal(a: &Limbs, b: &Limbs) -> Expr {
        let n = a.limbs.len().max(b.limbs.len()) as i64;
        (0..n)
            .map(|i| Expr::Compare {
                op: CompareOp::Eq,
                width: SLOT_BITS,
                signed: false,
                a: Box::new(a.limb(i)),
                b: Box::new(b.limb(i)),
            })
            .reduce(|x, y| Expr::And(Box::new(x), Box::new(y)))
            .unwrap_or(Expr::Const(1))
    }

    /// The statements that store the value, modulo 2^`width`, into the wide value at `slot`: one
    /// assignment per slot. `None` when a slot's new value reads another slot of the
    /// destination (a shift of itself), which an earlier assignment may have changed.
    pub fn store(self, slot: Slot, width: u16) -> Option<Vec<Stmt>> {
        let n = count(width) as u32;
        let mut out = Vec::new();
        for (i, limb) in self.fit(width).into_iter().enumerate() {
            let dst = slot + n - 1 - i as u32;
            if reads_other(&limb, slot..slot + n, dst) {
                return None;
            }
            out.push(Stmt::Assign(Place::Slot(dst), limb));
        }
        Some(out)
    }
}

/// Whether `e` may load a slot of `range` other than `own`.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of a constant limb.
    fn eval(e: &Expr) -> u128 {
        match e {
            Expr::Const(v) => *v,
            Expr::Arith { op, a, b, .. } => crate::ops::binop(*op, 128, false, eval(a), eval(b)),
            Expr::Complement { arg, .. } => !eval(arg),
            other => panic!("not a constant limb: {other:?}"),
        }
    }

    /// The values of constant limbs, least significant first.
    fn value(limbs: Vec<Expr>) -> Vec<u128> {
        limbs.iter().map(eval).collect()
    }

    #[test]
    fn shifts_move_bits_across_limbs() {
        let one = Limbs::constant(&[1]).unwrap();
        let shifted = Limbs::shift(one, true, 200);
        assert_eq!(shifted.width(), 208);
        assert_eq!(value(shifted.clone().fit(208)), vec![0, 1 << 72]);
        let back = Limbs::shift(shifted, false, 130);
        assert_eq!(value(back.fit(128)), vec![1 << 70]);
    }

    #[test]
    fn complement_and_bitwise_keep_the_width() {
        let a = Limbs::constant(&[0xff; 20]).unwrap();
        let c = Limbs::complement(a.clone());
        assert_eq!(value(c.fit(160)), vec![0, 0]);
        let b = Limbs::constant(&[0x0f; 17]).unwrap();
        let x = Limbs::bitwise(ArithOp::BitXor, a, b).unwrap();
        assert_eq!(
            value(x.fit(160)),
            vec![u128::from_be_bytes([0xf0; 16]), 0xffff_fff0]
        );
    }
}
