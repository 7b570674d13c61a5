//! `hash(result, algo, base, data, max)`: `base + h % max` for the hash `h` of `data` by
//! `algo` ([`crate::hash`]), or `base` when `max` is 0, as v1model.p4 says and BMv2 does
//! (BMv2's `modify_field_with_hash_based_offset`, whose calculation gives the algorithm and the
//! data).

use super::{expr, fields, store, value, Extern, Machine, Param, Signature};
use crate::ir::ExternArg;

/// The `hash` extern.
pub(crate) struct Hash;

impl Extern for Hash {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: None,
            names: &["hash"],
            arg_names: &[],
            bmv2_ops: &["modify_field_with_hash_based_offset"],
            params: &[
                Param::Out,
                Param::Algorithm,
                Param::AnyBits,
                Param::Fields,
                Param::AnyBits,
            ],
            // BMv2: (result, base, calculation, max).
            bmv2_params: &[0, 2, 1, 2, 3],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let h = u128::from(m.checksum(fields(&args[3]), expr(&args[1]), false));
        let (base, max) = (value(m, &args[2]), value(m, &args[4]));
        let v = if max == 0 {
            base
        } else {
            base.wrapping_add(h % max)
        };
        store(m, &args[0], v);
        Ok(())
    }
}
