//! `register.read(result, index)` and `register.write(index, value)`: cell `index` of a
//! register (an index past its size reads 0 and writes nothing, as in BMv2). The cells are the
//! switch's `State::registers`, of this file's type [`Registers`], which the runtime interface
//! reads and writes.

use super::{
    instance, value, Cell, CellArrays, CellAt, CellStore, CtorParam, Extern, Machine, Object,
    Param, Signature,
};
use crate::ir::{ExternArg, Program};

/// The cells of every register, by instance index: `State::registers`.
pub(crate) type Registers = CellArrays<u128>;

/// Zeroed cells for every register of `p`.
pub(crate) fn cells(p: &Program) -> Registers {
    CellArrays::new(p, &REGISTER, 0)
}

/// A register's cell: its value, kept as written (whether it fits the register's width is the
/// caller's check, which knows its syntax).
impl Cell for u128 {
    fn store() -> &'static CellStore<Self> {
        const STORE: CellStore<u128> = CellStore {
            objects: &[&REGISTER],
            read: |state, instance, at| match at {
                CellAt::Index(index) => state.registers.get(instance, index).copied(),
                CellAt::Entry { .. } => None,
            },
            write: |state, instance, at, value, _| match at {
                CellAt::Index(index) => {
                    *state.registers.get_mut(instance, index)? = value;
                    Some(())
                }
                CellAt::Entry { .. } => None,
            },
        };
        &STORE
    }
}

/// The extern type: `register<T>(size)`.
pub(crate) const REGISTER: Object = Object {
    p4: "register",
    noun: "register",
    bmv2_array: "register_array",
    direct: false,
    cell_type: true,
    ctor: &[CtorParam::Size],
    inert: &[],
    cell_bytes: 16,
};

/// The `read` method of `register`.
pub(crate) struct Read;

impl Extern for Read {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: Some(&REGISTER),
            names: &["read"],
            arg_names: &["result", "index"],
            bmv2_ops: &["register_read"],
            params: &[Param::CellOut, Param::Instance, Param::AnyBits],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let (ExternArg::Out(result, _), Some(register)) = (&args[0], instance(&args[1])) else {
            return Ok(());
        };
        let index = value(m, &args[2]) as usize;
        let v = m.state().registers.get(register, index).copied();
        m.store(result, v.unwrap_or(0));
        Ok(())
    }
}

/// The `write` method of `register`.
pub(crate) struct Write;

impl Extern for Write {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: Some(&REGISTER),
            names: &["write"],
            arg_names: &["index", "value"],
            bmv2_ops: &["register_write"],
            params: &[Param::Instance, Param::AnyBits, Param::Cell],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let Some(register) = instance(&args[0]) else {
            return Ok(());
        };
        let index = value(m, &args[1]) as usize;
        let v = value(m, &args[2]);
        if let Some(cell) = m.state().registers.get_mut(register, index) {
            *cell = v;
        }
        Ok(())
    }
}
