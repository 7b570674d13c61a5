//! `clone(type, session)`, `clone_preserving_field_list(type, session, index)` and the
//! deprecated `clone3(type, session, data)`: asks for a copy of the packet to the clone
//! session, from ingress or egress (`CloneType.I2E` 0, `E2E` 1), keeping the preserved field
//! list's user metadata (BMv2's `clone_ingress_pkt_to_egress` and
//! `clone_egress_pkt_to_egress`, whose optional second parameter is the field list's id).

use super::{preserved, value, Extern, Machine, Param, Signature};
use crate::ir::ExternArg;

/// `clone`.
pub(crate) const CLONE: CloneForm = CloneForm(&Signature {
    of: None,
    names: &["clone"],
    arg_names: &[],
    bmv2_ops: &[],
    params: &[Param::Choice(1), Param::Bits(32)],
    bmv2_params: &[],
});

/// `clone_preserving_field_list`, and BMv2's primitives (with or without a field list).
pub(crate) const CLONE_PRESERVING_FIELD_LIST: CloneForm = CloneForm(&Signature {
    of: None,
    names: &["clone_preserving_field_list"],
    arg_names: &[],
    bmv2_ops: &["clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"],
    params: &[Param::Choice(1), Param::Bits(32), Param::PreservedIndex],
    bmv2_params: &[],
});

/// `clone3`.
pub(crate) const CLONE3: CloneForm = CloneForm(&Signature {
    of: None,
    names: &["clone3"],
    arg_names: &[],
    bmv2_ops: &[],
    params: &[Param::Choice(1), Param::Bits(32), Param::PreservedData],
    bmv2_params: &[],
});

/// A form of `clone`.
pub(crate) struct CloneForm(&'static Signature);

impl Extern for CloneForm {
    fn signature(&self) -> &'static Signature {
        self.0
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let egress = value(m, &args[0]) == 1;
        let session = value(m, &args[1]) as u32;
        m.effects().clone = Some((egress, session, preserved(args.get(2))));
        Ok(())
    }
}
