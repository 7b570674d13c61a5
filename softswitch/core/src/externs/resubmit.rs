//! `resubmit_preserving_field_list(index)` and `recirculate_preserving_field_list(index)`, and
//! their deprecated forms `resubmit(data)` and `recirculate(data)`: asks for the packet to go
//! through ingress again (resubmit, from ingress) or through the whole pipeline again after
//! the deparser (recirculate, from egress), keeping the preserved field list's user metadata
//! (BMv2's `resubmit` and `recirculate`, whose optional parameter is the field list's id).

use super::{preserved, Extern, Machine, Param, Signature};
use crate::ir::ExternArg;

/// `resubmit_preserving_field_list`, and BMv2's `resubmit`.
pub(crate) const RESUBMIT_PRESERVING_FIELD_LIST: Resubmit = Resubmit {
    recirculate: false,
    signature: &Signature {
        of: None,
        names: &["resubmit_preserving_field_list"],
        arg_names: &[],
        bmv2_ops: &["resubmit"],
        params: &[Param::PreservedIndex],
        bmv2_params: &[],
    },
};

/// The deprecated `resubmit(data)`.
pub(crate) const RESUBMIT: Resubmit = Resubmit {
    recirculate: false,
    signature: &Signature {
        names: &["resubmit"],
        bmv2_ops: &[],
        params: &[Param::PreservedData],
        ..*RESUBMIT_PRESERVING_FIELD_LIST.signature
    },
};

/// `recirculate_preserving_field_list`, and BMv2's `recirculate`.
pub(crate) const RECIRCULATE_PRESERVING_FIELD_LIST: Resubmit = Resubmit {
    recirculate: true,
    signature: &Signature {
        names: &["recirculate_preserving_field_list"],
        bmv2_ops: &["recirculate"],
        ..*RESUBMIT_PRESERVING_FIELD_LIST.signature
    },
};

/// The deprecated `recirculate(data)`.
pub(crate) const RECIRCULATE: Resubmit = Resubmit {
    recirculate: true,
    signature: &Signature {
        names: &["recirculate"],
        ..*RESUBMIT.signature
    },
};

/// A resubmission or a recirculation.
pub(crate) struct Resubmit {
    /// Whether it recirculates (else it resubmits).
    recirculate: bool,
    signature: &'static Signature,
}

impl Extern for Resubmit {
    fn signature(&self) -> &'static Signature {
        self.signature
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let list = Some(preserved(args.first()));
        let effects = m.effects();
        if self.recirculate {
            effects.recirculate = list;
        } else {
            effects.resubmit = list;
        }
        Ok(())
    }
}
