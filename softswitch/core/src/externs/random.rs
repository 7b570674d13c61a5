//! `random(result, lo, hi)`: a pseudo-random value in `[lo, hi]` from the switch's
//! deterministic generator (BMv2's `modify_field_rng_uniform`).

use super::{store, value, Extern, Machine, Param, Signature};
use crate::ir::ExternArg;

/// The `random` extern.
pub(crate) struct Random;

impl Extern for Random {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: None,
            names: &["random"],
            arg_names: &[],
            bmv2_ops: &["modify_field_rng_uniform"],
            params: &[Param::Out, Param::LikeOut, Param::LikeOut],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let (l, h) = (value(m, &args[1]), value(m, &args[2]));
        let r = u128::from(m.state().random());
        let v = match h.checked_sub(l).and_then(|span| span.checked_add(1)) {
            Some(n) if h > l => l + r % n,
            _ if h > l => l.wrapping_add(r),
            _ => l,
        };
        store(m, &args[0], v);
        Ok(())
    }
}
