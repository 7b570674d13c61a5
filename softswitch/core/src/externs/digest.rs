//! `digest<T>(receiver, data)`: sends `data`'s fields, flattened, to the control plane as a
//! digest of type `T` (BMv2's `generate_digest`, whose learn list gives the data). The switch
//! keeps them in `State::digests` until the runtime interface takes them.

use super::{value, Extern, Machine, Param, Signature};
use crate::ir::{self, ExternArg, FieldItem};
use crate::state::DigestSent;

/// The `digest` extern.
pub(crate) struct Digest;

impl Extern for Digest {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: None,
            names: &["digest"],
            arg_names: &[],
            bmv2_ops: &["generate_digest"],
            params: &[Param::Bits(32), Param::Digest],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let receiver = value(m, &args[0]) as u32;
        let ExternArg::Digest { digest, data } = &args[1] else {
            return Ok(());
        };
        let mut values = Vec::new();
        for f in ir::flat_fields(data) {
            match f {
                FieldItem::Bits(e, _) => values.push(m.value(e)),
                FieldItem::VarBit { base, max } => {
                    let n = 1 + max.div_ceil(128) as usize;
                    values.extend_from_slice(&m.slots()[*base as usize..*base as usize + n]);
                }
                FieldItem::Header { .. } => unreachable!("flat_fields opens groups"),
            }
        }
        m.state().digests.push(DigestSent {
            receiver,
            digest: *digest,
            values,
        });
        Ok(())
    }
}
