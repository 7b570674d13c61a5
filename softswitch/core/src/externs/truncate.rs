//! `truncate(length)`: the packet leaves with at most `length` bytes.

use super::{value, Extern, Machine, Param, Signature};
use crate::ir::ExternArg;

/// The `truncate` extern.
pub(crate) struct Truncate;

impl Extern for Truncate {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: None,
            names: &["truncate"],
            arg_names: &[],
            bmv2_ops: &["truncate"],
            params: &[Param::Bits(32)],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let length = value(m, &args[0]) as u32;
        m.effects().truncate = Some(length);
        Ok(())
    }
}
