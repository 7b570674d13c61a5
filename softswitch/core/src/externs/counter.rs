//! `counter.count(index)`: cell `index` of an indirect counter counts the packet and its
//! bytes (an index past the counter's size counts nothing, as in BMv2). The cells are the
//! switch's `State::counters`, of this file's type [`Counters`], which the runtime interface
//! reads and writes.

use super::{
    instance, value, Cell, CellArrays, CellAt, CellStore, CtorParam, Extern, Machine, Object,
    Param, Signature,
};
use crate::ir::{ExternArg, Program};
use crate::table::CounterCell;

/// The cells of every indexed counter, by instance index: `State::counters`. (A direct
/// counter's cells are its table's entries' own.)
pub(crate) type Counters = CellArrays<CounterCell>;

/// Zeroed cells for every counter of `p`.
pub(crate) fn cells(p: &Program) -> Counters {
    CellArrays::new(p, &COUNTER, CounterCell::default())
}

/// A counter's cells are `State::counters`, a direct counter's its table's entries' own.
impl Cell for CounterCell {
    fn store() -> &'static CellStore<Self> {
        const STORE: CellStore<CounterCell> = CellStore {
            objects: &[&COUNTER, &DIRECT_COUNTER],
            read: |state, instance, at| match at {
                CellAt::Index(index) => state.counters.get(instance, index).copied(),
                CellAt::Entry { table, handle } => Some(state.tables[table].entry(handle)?.counter),
            },
            write: |state, instance, at, value, _| {
                *match at {
                    CellAt::Index(index) => state.counters.get_mut(instance, index)?,
                    CellAt::Entry { table, handle } => {
                        &mut state.tables[table].entry_mut(handle)?.counter
                    }
                } = value;
                Some(())
            },
        };
        &STORE
    }
}

/// The extern type `counter(size, type)`.
pub(crate) const COUNTER: Object = Object {
    p4: "counter",
    noun: "counter",
    bmv2_array: "counter_array",
    direct: false,
    cell_type: false,
    ctor: &[CtorParam::Size, CtorParam::CounterType],
    inert: &[],
    cell_bytes: 16,
};

/// The extern type `direct_counter(type)`: the switch counts where its table hits, so its
/// `count` method does nothing.
pub(crate) const DIRECT_COUNTER: Object = Object {
    p4: "direct_counter",
    noun: "direct counter",
    bmv2_array: "counter_array",
    direct: true,
    cell_type: false,
    ctor: &[CtorParam::CounterType],
    inert: &["count"],
    cell_bytes: 0,
};

/// The `count` method of `counter`.
pub(crate) struct Count;

impl Extern for Count {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: Some(&COUNTER),
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
        if let Some(cell) = m.state().counters.get_mut(counter, index) {
            cell.packets += 1;
            cell.bytes += bytes;
        }
        Ok(())
    }
}
