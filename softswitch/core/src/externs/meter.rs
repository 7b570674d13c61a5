//! `meter.execute_meter(index, result)` and `direct_meter.read(result)`: the colour of a
//! packet (two-rate three-colour marking, [`crate::meter`]) at cell `index` of an indirect meter
//! (an index past its size reads green), or at the direct meter cell of the entry the table
//! just hit (without one, the default action of a miss, the result is left as it was, as in
//! BMv2). The cells are the switch's `State::meters`, of this file's type [`Meters`], whose
//! rates the runtime interface sets.

use super::{
    instance, store, value, Cell, CellArrays, CellAt, CellStore, CtorParam, Extern, Machine,
    Object, Param, Signature,
};
use crate::ir::{ExternArg, Program};
use crate::meter::{Color, Meter, MeterConfig};
use std::collections::HashMap;

/// The cells of every meter and direct meter: `State::meters`.
#[derive(Debug)]
pub(crate) struct Meters {
    /// Each indexed meter's cells, by instance index.
    indexed: CellArrays<Meter>,
    /// The direct meters' cells, by instance index and entry handle, made when first used.
    direct: HashMap<(usize, usize), Meter>,
}

impl Meters {
    /// Unconfigured cells for every meter of `p` (none yet for its direct meters).
    pub(crate) fn new(p: &Program) -> Self {
        Meters {
            indexed: CellArrays::new(p, &METER, Meter::default()),
            direct: HashMap::new(),
        }
    }

    /// The direct meter cell of entry `handle` of the table owning meter `instance`, made
    /// (unconfigured) when first used.
    pub(crate) fn direct(&mut self, instance: usize, handle: usize) -> &mut Meter {
        self.direct.entry((instance, handle)).or_default()
    }

    /// Forgets the direct meter cell of entry `handle` (removed) of the table owning
    /// `instance`.
    pub(crate) fn forget_direct(&mut self, instance: usize, handle: usize) {
        self.direct.remove(&(instance, handle));
    }
}

/// A meter's cell as the control plane sees it: its rates, `None` for an unconfigured meter
/// (which marks every packet green). Writing rates fills its buckets; writing `None` resets it.
impl Cell for Option<MeterConfig> {
    fn store() -> &'static CellStore<Self> {
        const STORE: CellStore<Option<MeterConfig>> = CellStore {
            objects: &[&METER, &DIRECT_METER],
            read: |state, instance, at| {
                Some(match at {
                    CellAt::Index(index) => state.meters.indexed.get(instance, index)?.config(),
                    CellAt::Entry { handle, .. } => state
                        .meters
                        .direct
                        .get(&(instance, handle))
                        .and_then(Meter::config),
                })
            },
            write: |state, instance, at, value, now_us| {
                let meter = match at {
                    CellAt::Index(index) => state.meters.indexed.get_mut(instance, index)?,
                    CellAt::Entry { handle, .. } => state.meters.direct(instance, handle),
                };
                match value {
                    Some(config) => meter.configure(config, now_us),
                    None => *meter = Meter::default(),
                }
                Some(())
            },
        };
        &STORE
    }
}

/// The extern type `meter(size, type)`.
pub(crate) const METER: Object = Object {
    p4: "meter",
    noun: "meter",
    bmv2_array: "meter_array",
    direct: false,
    cell_type: false,
    ctor: &[CtorParam::Size, CtorParam::MeterType],
    inert: &[],
    cell_bytes: 64,
};

/// The extern type `direct_meter(type)`.
pub(crate) const DIRECT_METER: Object = Object {
    p4: "direct_meter",
    noun: "direct meter",
    bmv2_array: "meter_array",
    direct: true,
    cell_type: false,
    ctor: &[CtorParam::MeterType],
    inert: &[],
    cell_bytes: 0,
};

/// The `execute_meter` method of `meter`.
pub(crate) struct Execute;

impl Extern for Execute {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: Some(&METER),
            names: &["execute_meter"],
            arg_names: &["index", "result"],
            bmv2_ops: &["execute_meter"],
            params: &[Param::Instance, Param::AnyBits, Param::Out],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let Some(meter) = instance(&args[0]) else {
            return Ok(());
        };
        let index = value(m, &args[1]) as usize;
        let amount = amount(m, meter);
        let now = m.now_us();
        let color = m
            .state()
            .meters
            .indexed
            .get_mut(meter, index)
            .map_or(Color::Green, |cell| cell.execute(amount, now));
        store(m, &args[2], color as u128);
        Ok(())
    }
}

/// The `read` method of `direct_meter` (BMv2 has no primitive for it: the loader calls it
/// where a table with a direct meter was applied).
pub(crate) struct DirectRead;

impl Extern for DirectRead {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: Some(&DIRECT_METER),
            names: &["read"],
            arg_names: &["result"],
            bmv2_ops: &[],
            params: &[Param::Instance, Param::Out],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let Some(meter) = instance(&args[0]) else {
            return Ok(());
        };
        let amount = amount(m, meter);
        let now = m.now_us();
        if let Some((table, handle)) = m.last_hit() {
            if m.program().tables[table].direct_meter == Some(meter) {
                let color = m.state().meters.direct(meter, handle).execute(amount, now);
                store(m, &args[1], color as u128);
            }
        }
        Ok(())
    }
}

/// What one packet takes from meter `meter`: its length for a meter of bytes, else 1.
fn amount(m: &mut dyn Machine, meter: usize) -> f64 {
    if m.program().instances[meter].kind.meter_bytes() == Some(true) {
        let length = m.program().std_meta.packet_length;
        m.slots()[length as usize] as f64
    } else {
        1.0
    }
}
