//! `verify_checksum[_with_payload](condition, data, checksum, algo)` and
//! `update_checksum[_with_payload](condition, data, checksum, algo)`: when `condition` holds,
//! the checksum of `data` (and of the payload after the parsed headers, for the `_with_payload`
//! forms) by `algo`, cut to the checksum's width, is compared with `checksum` (a difference
//! sets `standard_metadata.checksum_error`) or written to it. BMv2 has no primitive for them:
//! its JSON lists them in `checksums`, which the loader turns into calls of these.

use super::{expr, fields, store, value, Extern, Machine, Param, Signature};
use crate::ir::{mask, ExternArg};

/// `verify_checksum`.
pub(crate) const VERIFY: Checksum = Checksum {
    payload: false,
    signature: &Signature {
        of: None,
        names: &["verify_checksum"],
        arg_names: &[],
        bmv2_ops: &[],
        params: &[Param::Bool, Param::Fields, Param::Sized, Param::Algorithm],
        bmv2_params: &[],
    },
};

/// `verify_checksum_with_payload`.
pub(crate) const VERIFY_WITH_PAYLOAD: Checksum = Checksum {
    payload: true,
    signature: &Signature {
        names: &["verify_checksum_with_payload"],
        ..*VERIFY.signature
    },
};

/// `update_checksum`.
pub(crate) const UPDATE: Checksum = Checksum {
    payload: false,
    signature: &Signature {
        names: &["update_checksum"],
        params: &[Param::Bool, Param::Fields, Param::Out, Param::Algorithm],
        ..*VERIFY.signature
    },
};

/// `update_checksum_with_payload`.
pub(crate) const UPDATE_WITH_PAYLOAD: Checksum = Checksum {
    payload: true,
    signature: &Signature {
        names: &["update_checksum_with_payload"],
        ..*UPDATE.signature
    },
};

/// A checksum's verification or update: its third parameter says which (an `in` checksum to
/// compare, or an `out` one to write).
pub(crate) struct Checksum {
    /// Whether the payload follows the fields.
    payload: bool,
    signature: &'static Signature,
}

impl Checksum {
    /// Whether the payload follows the fields.
    pub(crate) fn payload(&self) -> bool {
        self.payload
    }

    /// The width of a call's checksum (its third argument); `None` for an argument of another
    /// kind, which the signature rules out and with which the call does nothing.
    pub(crate) fn width(args: &[ExternArg]) -> Option<u16> {
        match &args[2] {
            ExternArg::Sized(_, width) | ExternArg::Out(_, width) => Some(*width),
            _ => None,
        }
    }

    /// Ends a call whose condition held and whose fields' checksum came to `c`: compares it,
    /// cut to the width of `checksum` (the call's third argument, whose kind [`Self::width`]
    /// has checked), with that checksum, or writes it there.
    pub(crate) fn conclude(checksum: &ExternArg, m: &mut dyn Machine, c: u64) {
        match checksum {
            ExternArg::Sized(given, width) if u128::from(c) & mask(*width) != m.value(given) => {
                let error = m.program().std_meta.checksum_error;
                m.slots()[error as usize] = 1;
            }
            ExternArg::Out(..) => store(m, checksum, u128::from(c)),
            _ => {}
        }
    }
}

impl Extern for Checksum {
    fn signature(&self) -> &'static Signature {
        self.signature
    }

    fn checksum(&self) -> Option<&Checksum> {
        Some(self)
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        if Self::width(args).is_none() || value(m, &args[0]) == 0 {
            return Ok(());
        }
        let c = m.checksum(fields(&args[1]), expr(&args[3]), self.payload);
        Self::conclude(&args[2], m, c);
        Ok(())
    }
}
