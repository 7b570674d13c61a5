//! `assert(cond)` and `assume(cond)`: a false condition is counted as a failure, which stops
//! an STF run with an error (BMv2 aborts).

use super::{value, Extern, Machine, Param, Signature};
use crate::ir::ExternArg;

/// The `assert` and `assume` extern.
pub(crate) struct Assert;

impl Extern for Assert {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: None,
            names: &["assert", "assume"],
            arg_names: &[],
            bmv2_ops: &["assert", "assume"],
            params: &[Param::Bool],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        if value(m, &args[0]) == 0 {
            m.state().assertion_failures += 1;
        }
        Ok(())
    }
}
