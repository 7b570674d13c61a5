//! Arithmetic on `width`-bit values with the P4_16 specification's semantics (wrapping and
//! saturating, two's complement for `int<W>`). The checker folds constants and the interpreter
//! evaluates with the same functions, so the two cannot disagree.

use crate::ir::{mask, sign_extend, ArithOp, CompareOp};

/// `a op b` for an arithmetic, bitwise or shift operator on `width`-bit operands.
/// Division or modulo by zero yields 0 (the specification leaves it undefined; nothing panics).
pub fn binop(op: ArithOp, width: u16, signed: bool, a: u128, b: u128) -> u128 {
    let m = mask(width);
    let (a, b) = (a & m, b);
    let r = match op {
        ArithOp::Add => a.wrapping_add(b),
        ArithOp::Sub => a.wrapping_sub(b),
        ArithOp::Mul => a.wrapping_mul(b),
        ArithOp::BitAnd => a & b,
        ArithOp::BitOr => a | b,
        ArithOp::BitXor => a ^ b,
        ArithOp::Shl => {
            if b >= u128::from(width) {
                0
            } else {
                a << b
            }
        }
        ArithOp::Shr if signed => {
            let s = sign_extend(a, width);
            (s >> b.min(127)) as u128
        }
        ArithOp::Shr => {
            if b >= u128::from(width) {
                0
            } else {
                a >> b
            }
        }
        ArithOp::Div | ArithOp::Mod if b & m == 0 => 0,
        ArithOp::Div | ArithOp::Mod if signed => {
            let (x, y) = (sign_extend(a, width), sign_extend(b & m, width));
            (if op == ArithOp::Div {
                x.wrapping_div(y)
            } else {
                x.wrapping_rem(y)
            }) as u128
        }
        ArithOp::Div => a / (b & m),
        ArithOp::Mod => a % (b & m),
        ArithOp::AddSat | ArithOp::SubSat => saturating(op, width, signed, a, b & m),
    };
    r & m
}

fn saturating(op: ArithOp, width: u16, signed: bool, a: u128, b: u128) -> u128 {
    if signed {
        let (x, y) = (sign_extend(a, width), sign_extend(b, width));
        let max = (mask(width) >> 1) as i128;
        let min = -max - 1;
        let r = if op == ArithOp::AddSat {
            x.saturating_add(y)
        } else {
            x.saturating_sub(y)
        };
        r.clamp(min, max) as u128
    } else if op == ArithOp::AddSat {
        a.checked_add(b)
            .filter(|&r| r <= mask(width))
            .unwrap_or(mask(width))
    } else {
        a.saturating_sub(b)
    }
}

/// `a op b` for a comparison operator on `width`-bit operands.
pub fn compare(op: CompareOp, width: u16, signed: bool, a: u128, b: u128) -> bool {
    let m = mask(width);
    let ord = if signed {
        sign_extend(a & m, width).cmp(&sign_extend(b & m, width))
    } else {
        (a & m).cmp(&(b & m))
    };
    match op {
        CompareOp::Eq => ord.is_eq(),
        CompareOp::Ne => ord.is_ne(),
        CompareOp::Lt => ord.is_lt(),
        CompareOp::Le => ord.is_le(),
        CompareOp::Gt => ord.is_gt(),
        CompareOp::Ge => ord.is_ge(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: the mathematical result reduced modulo 2^width, in big (i128) integers.
    fn reference(op: ArithOp, width: u16, signed: bool, a: u128, b: u128) -> u128 {
        let to_int = |v: u128| {
            if signed {
                sign_extend(v, width)
            } else {
                v as i128
            }
        };
        let (x, y) = (to_int(a), to_int(b));
        let max = if signed {
            (1i128 << (width - 1)) - 1
        } else {
            (1i128 << width) - 1
        };
        let min = if signed { -(1i128 << (width - 1)) } else { 0 };
        let r = match op {
            ArithOp::Add => x + y,
            ArithOp::Sub => x - y,
            ArithOp::Mul => x * y,
            ArithOp::AddSat => (x + y).clamp(min, max),
            ArithOp::SubSat => (x - y).clamp(min, max),
            _ => unreachable!("not in the reference"),
        };
        (r.rem_euclid(1i128 << width)) as u128
    }

    #[test]
    fn arithmetic_matches_big_integer_reference_exhaustively_on_small_widths() {
        for width in [1u16, 3, 8] {
            for signed in [false, true] {
                let n = 1u128 << width;
                for a in 0..n {
                    for b in 0..n {
                        for op in [
                            ArithOp::Add,
                            ArithOp::Sub,
                            ArithOp::Mul,
                            ArithOp::AddSat,
                            ArithOp::SubSat,
                        ] {
                            assert_eq!(
                                binop(op, width, signed, a, b),
                                reference(op, width, signed, a, b),
                                "{op:?} w={width} s={signed} {a} {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The full 256-bit product of two 128-bit values, by schoolbook multiplication of 64-bit
    /// halves: a reference independent of `wrapping_mul`.
    fn mul_wide(a: u128, b: u128) -> (u128, u128) {
        let (a1, a0, b1, b0) = (
            a >> 64,
            a & u128::from(u64::MAX),
            b >> 64,
            b & u128::from(u64::MAX),
        );
        let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
        let mid = (p00 >> 64) + (p01 & u128::from(u64::MAX)) + (p10 & u128::from(u64::MAX));
        let lo = (p00 & u128::from(u64::MAX)) | (mid << 64);
        let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
        (hi, lo)
    }

    #[test]
    fn random_wide_operands_match_the_reference() {
        let mut next = crate::test_support::xorshift64(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let width = (next() % 118 + 9) as u16; // 9..=126: sums and differences fit in i128
            let m = mask(width);
            let a = ((u128::from(next()) << 64) | u128::from(next())) & m;
            let b = ((u128::from(next()) << 64) | u128::from(next())) & m;
            for signed in [false, true] {
                for op in [ArithOp::Add, ArithOp::Sub, ArithOp::AddSat, ArithOp::SubSat] {
                    assert_eq!(
                        binop(op, width, signed, a, b),
                        reference(op, width, signed, a, b),
                        "{op:?} w={width} {a} {b}"
                    );
                }
                // Modulo 2^width, the product is the same for signed and unsigned operands.
                assert_eq!(
                    binop(ArithOp::Mul, width, signed, a, b),
                    mul_wide(a, b).1 & m
                );
                let (x, y) = if signed {
                    (sign_extend(a, width), sign_extend(b, width))
                } else {
                    (a as i128, b as i128)
                };
                assert_eq!(compare(CompareOp::Lt, width, signed, a, b), x < y);
            }
        }
    }

    #[test]
    fn shifts_and_division() {
        assert_eq!(binop(ArithOp::Shl, 8, false, 0x81, 1), 0x02);
        assert_eq!(binop(ArithOp::Shl, 8, false, 1, 8), 0);
        assert_eq!(binop(ArithOp::Shr, 8, true, 0x80, 1), 0xc0);
        assert_eq!(binop(ArithOp::Shr, 8, true, 0x80, 200), 0xff);
        assert_eq!(binop(ArithOp::Div, 8, false, 7, 0), 0);
        assert_eq!(binop(ArithOp::Mod, 8, false, 7, 3), 1);
        assert_eq!(binop(ArithOp::Add, 128, false, u128::MAX, 1), 0);
    }

    #[test]
    fn signed_comparison() {
        assert!(compare(CompareOp::Lt, 8, true, 0xff, 0));
        assert!(!compare(CompareOp::Lt, 8, false, 0xff, 0));
    }
}
