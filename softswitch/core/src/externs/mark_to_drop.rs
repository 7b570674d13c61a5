//! `mark_to_drop(standard_metadata)`: the packet goes to the drop port and to no multicast
//! group (BMv2's `mark_to_drop`, and its older `drop` primitive).

use super::{Extern, Machine, Param, Signature};
use crate::ir::ExternArg;

/// The `mark_to_drop` extern.
pub(crate) struct MarkToDrop;

impl Extern for MarkToDrop {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: None,
            names: &["mark_to_drop"],
            arg_names: &[],
            bmv2_ops: &["mark_to_drop", "drop"],
            params: &[Param::StandardMetadata],
            bmv2_params: &[],
        }
    }

    fn execute(&self, _: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let sm = m.program().std_meta;
        let slots = m.slots();
        slots[sm.egress_spec as usize] = 511; // BMv2's drop port
        slots[sm.mcast_grp as usize] = 0;
        Ok(())
    }
}
