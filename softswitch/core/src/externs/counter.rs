//! `counter.count(index)`: cell `index` of an indirect counter counts the packet and its
//! bytes (an index past the counter's size counts nothing, as in BMv2). The cells are the
//! switch's `State::counters`, which the runtime interface reads and writes.

use super::{instance, value, Extern, Machine, Object, Param, Signature};
use crate::ir::ExternArg;

/// The `count` method of `counter`.
pub(crate) struct Count;

impl Extern for Count {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: Some(Object {
                p4: "counter",
                bmv2_array: "counter_array",
            }),
            names: &["count"],
            arg_names: &["index"],
            bmv2_ops: &["count"],
            params: &[Param::Instance, Param::AnyBits],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let Some(counter) = instance(&args[0]) else {
            return Ok(());
        };
        let index = value(m, &args[1]) as usize;
        let length = m.program().std_meta.packet_length;
        let bytes = m.slots()[length as usize] as u64;
        if let Some(cell) = m.state().counters[counter].get_mut(index) {
            cell.packets += 1;
            cell.bytes += bytes;
        }
        Ok(())
    }
}
