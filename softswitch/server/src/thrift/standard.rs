//! BMv2's `standard` Thrift service over the switch's runtime interface: table entries and
//! default actions, direct and indirect counters, registers, meters, parser value sets, the
//! JSON config (`bm_get_config`, what `simple_switch_CLI` reads at start), its swap, the ports,
//! the state reset and name lookups. What softswitch does not do (action profiles over Thrift,
//! ageing, learning acks, custom CRC parameters, adding ports at run time) is refused with
//! BMv2's exception and code for it, and said in the switch's log.

use std::collections::BTreeMap;
use std::sync::Arc;

use md5::{Digest as _, Md5};
use softswitch_core::ir::{InstanceKind, Program};
use softswitch_core::meter::MeterConfig;
use softswitch_core::runtime::{CellIndex, RuntimeError};
use softswitch_core::switch::Switch;
use softswitch_core::table::{CounterCell, TableError};
use thrift::OrderedFloat;

use super::bindings::standard::*;
use super::{internal, values, Runtime};
use crate::pipeline::Compiled;

/// The `standard` service.
pub(super) struct Standard(pub(super) Arc<Runtime>);

/// BMv2's table exception with `code`.
fn table_op(code: TableOperationErrorCode) -> thrift::Error {
    InvalidTableOperation::new(code).into()
}

/// A refused table operation: said in the log, answered with BMv2's code for it.
fn table_refused(call: &str, e: RuntimeError) -> thrift::Error {
    use TableOperationErrorCode as C;
    super::note!(info, "thrift {call}: {e}");
    table_op(match e {
        RuntimeError::NoTable(_) => C::INVALID_TABLE_NAME,
        RuntimeError::Table(t) => match t {
            TableError::KeyCount { .. } | TableError::BadMatch { .. } | TableError::Keyless(_) => {
                C::BAD_MATCH_KEY
            }
            TableError::Duplicate(_) => C::DUPLICATE_ENTRY,
            TableError::Full(_) => C::TABLE_FULL,
            TableError::NoEntry(..) | TableError::NoKey(_) => C::INVALID_HANDLE,
            TableError::BadAction { .. } => C::INVALID_ACTION_NAME,
            TableError::ArgCount { .. } => C::BAD_ACTION_DATA,
            TableError::NoProfile(_) => C::WRONG_TABLE_TYPE,
            TableError::NoMember("group", _) => C::INVALID_GRP_HANDLE,
            TableError::NoMember(..) => C::INVALID_MBR_HANDLE,
            TableError::Const(_, "entries") => C::IMMUTABLE_TABLE_ENTRIES,
            TableError::Const(..) => C::DEFAULT_ACTION_IS_CONST,
        },
        RuntimeError::NoInstance(_) | RuntimeError::WrongKind { .. } => C::COUNTERS_DISABLED,
        RuntimeError::Budget(_) => C::TABLE_FULL,
        _ => C::ERROR,
    })
}

/// A call softswitch does not serve: said in the log, answered with `error`.
fn unsupported(call: &str, why: &str, error: impl Into<thrift::Error>) -> thrift::Error {
    super::note!(warn, "thrift {call}: not supported by softswitch: {why}");
    error.into()
}

/// The table named `name`, or BMv2's INVALID_TABLE_NAME.
fn table(switch: &Switch, name: &str) -> thrift::Result<usize> {
    switch
        .table_id(name)
        .ok_or_else(|| table_op(TableOperationErrorCode::INVALID_TABLE_NAME))
}

/// An entry handle from the wire (see [`values::wire_handle`]).
fn handle(h: i32) -> thrift::Result<usize> {
    Ok(values::entry_handle(h))
}

/// The call of action `name` of table `t` with BMv2's action data.
fn action_call(
    switch: &Switch,
    t: usize,
    name: &str,
    data: &[Vec<u8>],
) -> thrift::Result<softswitch_core::ir::ActionCall> {
    let action = switch
        .action_id(t, name)
        .ok_or_else(|| table_op(TableOperationErrorCode::INVALID_ACTION_NAME))?;
    values::call(switch.program(), action, data).map_err(table_op)
}

/// A cell index from the wire.
fn index(i: i32) -> Option<usize> {
    usize::try_from(i).ok()
}

/// A counter cell as BMv2 writes it.
fn counter_value(c: CounterCell) -> BmCounterValue {
    BmCounterValue::new(c.bytes as i64, c.packets as i64)
}

/// A counter cell from BMv2's value (negative counts are zero).
fn counter_cell(v: &BmCounterValue) -> CounterCell {
    let count = |n: Option<i64>| n.map_or(0, |n| n.max(0) as u64);
    CounterCell {
        packets: count(v.packets),
        bytes: count(v.bytes),
    }
}

/// A meter's configuration from BMv2's rates: committed, then peak, each in units per
/// microsecond with a burst size in units.
fn meter_config(rates: &[BmMeterRateConfig]) -> Result<MeterConfig, MeterOperationErrorCode> {
    let [committed, peak] = rates else {
        return Err(MeterOperationErrorCode::BAD_RATES_LIST);
    };
    let rate = |r: &BmMeterRateConfig| match r.units_per_micros {
        Some(OrderedFloat(u)) if u.is_finite() && u >= 0.0 => Ok(u),
        _ => Err(MeterOperationErrorCode::INVALID_INFO_RATE_VALUE),
    };
    let burst = |r: &BmMeterRateConfig| match r.burst_size {
        Some(b) if b >= 0 => Ok(f64::from(b)),
        _ => Err(MeterOperationErrorCode::INVALID_BURST_SIZE_VALUE),
    };
    Ok(MeterConfig {
        cir: rate(committed)?,
        cbs: burst(committed)?,
        pir: rate(peak)?,
        pbs: burst(peak)?,
    })
}

/// A meter's rates as BMv2 reads them back ([`meter_config`]'s inverse): committed, then
/// peak; none while it is unconfigured.
fn meter_rates(config: Option<MeterConfig>) -> Vec<BmMeterRateConfig> {
    config.map_or_else(Vec::new, |c| {
        [(c.cir, c.cbs), (c.pir, c.pbs)]
            .map(|(rate, burst)| BmMeterRateConfig {
                units_per_micros: Some(OrderedFloat(rate)),
                burst_size: Some(burst as i32),
            })
            .to_vec()
    })
}

/// The position of instance `i` among the program's instances of its kind, as p4c numbers
/// each kind's arrays in the JSON.
fn id_among_kind(program: &Program, i: usize) -> usize {
    let kind = program.instances[i].kind.type_name();
    program.instances[..i]
        .iter()
        .filter(|other| other.kind.type_name() == kind)
        .count()
}

impl Standard {
    /// Runs `f` on the switch with the index of table `name`.
    fn on_table<R: Send + 'static>(
        &self,
        name: String,
        f: impl FnOnce(&mut Switch, usize) -> thrift::Result<R> + Send + 'static,
    ) -> thrift::Result<R> {
        self.0.on_pipeline(move |p| {
            let t = table(&p.switch, &name)?;
            f(&mut p.switch, t)
        })
    }

    /// Runs `f` on the switch with the index of the `X` instance `name` and its
    /// [`Shape`]; a refusal is `X`'s exception with BMv2's code for it, said in the log.
    fn on_instance<X: Extern, R: Send + 'static, E: Into<Refused<X::Code>>>(
        &self,
        name: String,
        f: impl FnOnce(&mut Switch, usize, Shape) -> Result<R, E> + Send + 'static,
    ) -> thrift::Result<R> {
        self.0.on_pipeline(move |p| {
            let found = p.switch.instance_id(&name).and_then(|i| {
                let shape = X::shape(&p.switch.program().instances[i].kind)?;
                Some((i, shape))
            });
            let Some((i, shape)) = found else {
                return Err(X::exception(X::NO_SUCH_NAME));
            };
            f(&mut p.switch, i, shape).map_err(|refused| {
                X::exception(match refused.into() {
                    Refused::Runtime(e) => {
                        super::note!(info, "thrift {} {name}: {e}", X::KIND);
                        match e {
                            RuntimeError::Index { .. } => X::INVALID_INDEX,
                            _ => X::ERROR,
                        }
                    }
                    Refused::Code(code) => code,
                })
            })
        })
    }

    /// Sets the rates of meter `name`'s cells: `at` picks them from its size.
    fn set_meter_rates(
        &self,
        name: String,
        rates: Vec<BmMeterRateConfig>,
        at: impl FnOnce(usize) -> Option<std::ops::Range<usize>> + Send + 'static,
    ) -> thrift::Result<()> {
        self.on_instance::<InvalidMeterOperation, _, Refused<_>>(name, move |s, m, shape| {
            let config = meter_config(&rates).map_err(Refused::Code)?;
            let cells =
                at(shape.size).ok_or(Refused::Code(MeterOperationErrorCode::INVALID_INDEX))?;
            for cell in cells {
                s.write_cell(m, CellIndex::Index(cell), Some(config))?;
            }
            Ok(())
        })
    }
}

/// Why a call on an extern instance was refused: by the runtime interface, or with a code of
/// the kind's own.
enum Refused<C> {
    Runtime(RuntimeError),
    Code(C),
}

impl<C> From<RuntimeError> for Refused<C> {
    fn from(e: RuntimeError) -> Self {
        Refused::Runtime(e)
    }
}

/// What a call needs of an instance: its number of cells and their width (a register's; a
/// value set's members'), read from its [`InstanceKind`].
#[derive(Clone, Copy)]
struct Shape {
    /// Its cells (a counter's, meter's or register's), or 0.
    size: usize,
    /// The width of what it holds (a register's cells, a value set's members), or 0.
    width: u16,
}

/// An extern kind the service reaches by name, as BMv2's exception of its calls: the extern
/// type (v1model.p4's name) whose instances its calls take, and BMv2's codes for an unknown
/// name, a bad index and the rest.
trait Extern {
    /// BMv2's error codes of the kind.
    type Code: Send + 'static;
    /// The extern type, as v1model.p4 calls it ([`InstanceKind::type_name`]).
    const P4: &'static str;
    /// The kind, as the log names it.
    const KIND: &'static str;
    /// No instance of the kind has the name.
    const NO_SUCH_NAME: Self::Code;
    /// A cell index past the instance's size.
    const INVALID_INDEX: Self::Code;
    /// Any other refusal.
    const ERROR: Self::Code;
    /// The shape of an instance of `kind`, if it is of this kind: for a stateful extern
    /// type, its cells as the kind gives them, the same for every type.
    fn shape(kind: &InstanceKind) -> Option<Shape> {
        (kind.type_name() == Self::P4).then(|| Shape {
            size: kind.cells().map_or(0, |n| n as usize),
            width: kind.cell_width().unwrap_or(0),
        })
    }
    /// The exception with `code`.
    fn exception(code: Self::Code) -> thrift::Error;
}

/// Implements [`Extern`] for BMv2's exception `$exception` with codes `$code`, of instances of
/// the extern type v1model.p4 calls `$p4`.
macro_rules! extern_kind {
    ($exception:ident, $code:ident, $p4:literal, $what:literal, $no_name:ident, $index:ident
     $(, $shape:item)?) => {
        impl Extern for $exception {
            type Code = $code;
            const P4: &'static str = $p4;
            const KIND: &'static str = $what;
            const NO_SUCH_NAME: $code = $code::$no_name;
            const INVALID_INDEX: $code = $code::$index;
            const ERROR: $code = $code::ERROR;
            $($shape)?
            fn exception(code: $code) -> thrift::Error {
                Self::new(code).into()
            }
        }
    };
}

extern_kind!(
    InvalidRegisterOperation,
    RegisterOperationErrorCode,
    "register",
    "register",
    INVALID_REGISTER_NAME,
    INVALID_INDEX
);
extern_kind!(
    InvalidCounterOperation,
    CounterOperationErrorCode,
    "counter",
    "counter",
    INVALID_COUNTER_NAME,
    INVALID_INDEX
);
extern_kind!(
    InvalidMeterOperation,
    MeterOperationErrorCode,
    "meter",
    "meter",
    INVALID_METER_NAME,
    INVALID_INDEX
);
// A value set has no index: any refusal is ERROR. It has no `externs::Object` (no cells): its
// members' width is its own variant's.
extern_kind!(
    InvalidParseVSetOperation,
    ParseVSetOperationErrorCode,
    "value_set",
    "value set",
    INVALID_PARSE_VSET_NAME,
    ERROR,
    fn shape(kind: &InstanceKind) -> Option<Shape> {
        match *kind {
            InstanceKind::ValueSet { width, .. } => Some(Shape { size: 0, width }),
            _ => None,
        }
    }
);

impl StandardSyncHandler for Standard {
    fn handle_bm_mt_get_num_entries(&self, _: i32, table_name: String) -> thrift::Result<i64> {
        self.on_table(table_name, |s, t| {
            let entries = s
                .entries(t)
                .map_err(|e| table_refused("table_num_entries", e))?;
            Ok(entries.count() as i64)
        })
    }

    fn handle_bm_mt_clear_entries(
        &self,
        _: i32,
        table_name: String,
        reset_default_entry: bool,
    ) -> thrift::Result<()> {
        self.on_table(table_name, move |s, t| {
            s.clear_table(t)
                .map_err(|e| table_refused("table_clear", e))?;
            if reset_default_entry {
                let initial = s.program().tables[t].default_action.clone();
                s.set_default(t, initial)
                    .map_err(|e| table_refused("table_clear", e))?;
            }
            Ok(())
        })
    }

    fn handle_bm_mt_add_entry(
        &self,
        _: i32,
        table_name: String,
        match_key: BmMatchParams,
        action_name: String,
        action_data: BmActionData,
        options: BmAddEntryOptions,
    ) -> thrift::Result<BmEntryHandle> {
        self.on_table(table_name, move |s, t| {
            let program = s.program();
            let entry = softswitch_core::ir::Entry {
                matches: values::matches(program, t, &match_key).map_err(table_op)?,
                priority: values::priority(program, t, &options).map_err(table_op)?,
                action: action_call(s, t, &action_name, &action_data)?,
            };
            let handle = s
                .add_entry(t, entry)
                .map_err(|e| table_refused("table_add", e))?;
            Ok(values::wire_handle(handle))
        })
    }

    fn handle_bm_mt_set_default_action(
        &self,
        _: i32,
        table_name: String,
        action_name: String,
        action_data: BmActionData,
    ) -> thrift::Result<()> {
        self.on_table(table_name, move |s, t| {
            let call = action_call(s, t, &action_name, &action_data)?;
            s.set_default(t, call)
                .map_err(|e| table_refused("table_set_default", e))
        })
    }

    fn handle_bm_mt_reset_default_entry(&self, _: i32, table_name: String) -> thrift::Result<()> {
        self.on_table(table_name, |s, t| {
            let initial = s.program().tables[t].default_action.clone();
            s.set_default(t, initial)
                .map_err(|e| table_refused("table_reset_default", e))
        })
    }

    fn handle_bm_mt_delete_entry(
        &self,
        _: i32,
        table_name: String,
        entry_handle: BmEntryHandle,
    ) -> thrift::Result<()> {
        self.on_table(table_name, move |s, t| {
            s.remove_entry(t, handle(entry_handle)?)
                .map_err(|e| table_refused("table_delete", e))
        })
    }

    fn handle_bm_mt_modify_entry(
        &self,
        _: i32,
        table_name: String,
        entry_handle: BmEntryHandle,
        action_name: String,
        action_data: BmActionData,
    ) -> thrift::Result<()> {
        self.on_table(table_name, move |s, t| {
            let call = action_call(s, t, &action_name, &action_data)?;
            s.modify_entry(t, handle(entry_handle)?, call)
                .map_err(|e| table_refused("table_modify", e))
        })
    }

    fn handle_bm_mt_set_entry_ttl(
        &self,
        _: i32,
        _: String,
        _: BmEntryHandle,
        _: i32,
    ) -> thrift::Result<()> {
        Err(no_ageing("bm_mt_set_entry_ttl"))
    }

    fn handle_bm_mt_act_prof_add_member(
        &self,
        _: i32,
        _: String,
        _: String,
        _: BmActionData,
    ) -> thrift::Result<BmMemberHandle> {
        Err(act_prof_unsupported("bm_mt_act_prof_add_member"))
    }

    fn handle_bm_mt_act_prof_delete_member(
        &self,
        _: i32,
        _: String,
        _: BmMemberHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_act_prof_delete_member"))
    }

    fn handle_bm_mt_act_prof_modify_member(
        &self,
        _: i32,
        _: String,
        _: BmMemberHandle,
        _: String,
        _: BmActionData,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_act_prof_modify_member"))
    }

    fn handle_bm_mt_act_prof_create_group(
        &self,
        _: i32,
        _: String,
    ) -> thrift::Result<BmGroupHandle> {
        Err(act_prof_unsupported("bm_mt_act_prof_create_group"))
    }

    fn handle_bm_mt_act_prof_delete_group(
        &self,
        _: i32,
        _: String,
        _: BmGroupHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_act_prof_delete_group"))
    }

    fn handle_bm_mt_act_prof_add_member_to_group(
        &self,
        _: i32,
        _: String,
        _: BmMemberHandle,
        _: BmGroupHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_act_prof_add_member_to_group"))
    }

    fn handle_bm_mt_act_prof_remove_member_from_group(
        &self,
        _: i32,
        _: String,
        _: BmMemberHandle,
        _: BmGroupHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported(
            "bm_mt_act_prof_remove_member_from_group",
        ))
    }

    fn handle_bm_mt_act_prof_get_members(
        &self,
        _: i32,
        _: String,
    ) -> thrift::Result<Vec<BmMtActProfMember>> {
        Err(act_prof_unsupported("bm_mt_act_prof_get_members"))
    }

    fn handle_bm_mt_act_prof_get_member(
        &self,
        _: i32,
        _: String,
        _: BmMemberHandle,
    ) -> thrift::Result<BmMtActProfMember> {
        Err(act_prof_unsupported("bm_mt_act_prof_get_member"))
    }

    fn handle_bm_mt_act_prof_get_groups(
        &self,
        _: i32,
        _: String,
    ) -> thrift::Result<Vec<BmMtActProfGroup>> {
        Err(act_prof_unsupported("bm_mt_act_prof_get_groups"))
    }

    fn handle_bm_mt_act_prof_get_group(
        &self,
        _: i32,
        _: String,
        _: BmGroupHandle,
    ) -> thrift::Result<BmMtActProfGroup> {
        Err(act_prof_unsupported("bm_mt_act_prof_get_group"))
    }

    fn handle_bm_mt_indirect_add_entry(
        &self,
        _: i32,
        _: String,
        _: BmMatchParams,
        _: BmMemberHandle,
        _: BmAddEntryOptions,
    ) -> thrift::Result<BmEntryHandle> {
        Err(act_prof_unsupported("bm_mt_indirect_add_entry"))
    }

    fn handle_bm_mt_indirect_modify_entry(
        &self,
        _: i32,
        _: String,
        _: BmEntryHandle,
        _: BmMemberHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_indirect_modify_entry"))
    }

    fn handle_bm_mt_indirect_delete_entry(
        &self,
        _: i32,
        _: String,
        _: BmEntryHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_indirect_delete_entry"))
    }

    fn handle_bm_mt_indirect_set_entry_ttl(
        &self,
        _: i32,
        _: String,
        _: BmEntryHandle,
        _: i32,
    ) -> thrift::Result<()> {
        Err(no_ageing("bm_mt_indirect_set_entry_ttl"))
    }

    fn handle_bm_mt_indirect_set_default_member(
        &self,
        _: i32,
        _: String,
        _: BmMemberHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_indirect_set_default_member"))
    }

    fn handle_bm_mt_indirect_reset_default_entry(&self, _: i32, _: String) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_indirect_reset_default_entry"))
    }

    fn handle_bm_mt_indirect_ws_add_entry(
        &self,
        _: i32,
        _: String,
        _: BmMatchParams,
        _: BmGroupHandle,
        _: BmAddEntryOptions,
    ) -> thrift::Result<BmEntryHandle> {
        Err(act_prof_unsupported("bm_mt_indirect_ws_add_entry"))
    }

    fn handle_bm_mt_indirect_ws_modify_entry(
        &self,
        _: i32,
        _: String,
        _: BmEntryHandle,
        _: BmGroupHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_indirect_ws_modify_entry"))
    }

    fn handle_bm_mt_indirect_ws_set_default_group(
        &self,
        _: i32,
        _: String,
        _: BmGroupHandle,
    ) -> thrift::Result<()> {
        Err(act_prof_unsupported("bm_mt_indirect_ws_set_default_group"))
    }

    fn handle_bm_mt_read_counter(
        &self,
        _: i32,
        table_name: String,
        entry_handle: BmEntryHandle,
    ) -> thrift::Result<BmCounterValue> {
        self.on_table(table_name, move |s, t| {
            let Some(counter) = s.program().tables[t].direct_counter else {
                return Err(table_op(TableOperationErrorCode::COUNTERS_DISABLED));
            };
            let cell = s
                .read_cell(counter, CellIndex::Entry(handle(entry_handle)?))
                .map_err(|e| table_refused("counter_read", e))?;
            Ok(counter_value(cell))
        })
    }

    fn handle_bm_mt_reset_counters(&self, _: i32, table_name: String) -> thrift::Result<()> {
        self.on_table(table_name, |s, t| {
            let Some(counter) = s.program().tables[t].direct_counter else {
                return Err(table_op(TableOperationErrorCode::COUNTERS_DISABLED));
            };
            let handles: Vec<usize> = s
                .entries(t)
                .map_err(|e| table_refused("counter_reset", e))?
                .map(|(h, _)| h)
                .collect();
            for h in handles {
                s.write_cell(counter, CellIndex::Entry(h), CounterCell::default())
                    .map_err(|e| table_refused("counter_reset", e))?;
            }
            Ok(())
        })
    }

    fn handle_bm_mt_write_counter(
        &self,
        _: i32,
        table_name: String,
        entry_handle: BmEntryHandle,
        value: BmCounterValue,
    ) -> thrift::Result<()> {
        self.on_table(table_name, move |s, t| {
            let Some(counter) = s.program().tables[t].direct_counter else {
                return Err(table_op(TableOperationErrorCode::COUNTERS_DISABLED));
            };
            s.write_cell(
                counter,
                CellIndex::Entry(handle(entry_handle)?),
                counter_cell(&value),
            )
            .map_err(|e| table_refused("counter_write", e))
        })
    }

    fn handle_bm_mt_set_meter_rates(
        &self,
        _: i32,
        table_name: String,
        entry_handle: BmEntryHandle,
        rates: Vec<BmMeterRateConfig>,
    ) -> thrift::Result<()> {
        self.on_table(table_name, move |s, t| {
            let Some(meter) = s.program().tables[t].direct_meter else {
                return Err(table_op(TableOperationErrorCode::METERS_DISABLED));
            };
            let h = handle(entry_handle)?;
            s.entry(t, h)
                .map_err(|e| table_refused("meter_set_rates", e))?;
            let config = meter_config(&rates)
                .map_err(|_| table_op(TableOperationErrorCode::INVALID_METER_OPERATION))?;
            s.write_cell(meter, CellIndex::Entry(h), Some(config))
                .map_err(|e| table_refused("meter_set_rates", e))
        })
    }

    fn handle_bm_mt_get_meter_rates(
        &self,
        _: i32,
        table_name: String,
        entry_handle: BmEntryHandle,
    ) -> thrift::Result<Vec<BmMeterRateConfig>> {
        self.on_table(table_name, move |s, t| {
            let Some(meter) = s.program().tables[t].direct_meter else {
                return Err(table_op(TableOperationErrorCode::METERS_DISABLED));
            };
            s.read_cell(meter, CellIndex::Entry(handle(entry_handle)?))
                .map(meter_rates)
                .map_err(|e| table_refused("meter_get_rates", e))
        })
    }

    fn handle_bm_mt_get_entries(
        &self,
        _: i32,
        table_name: String,
    ) -> thrift::Result<Vec<BmMtEntry>> {
        self.on_table(table_name, |s, t| {
            let program = s.program();
            let entries = s.entries(t).map_err(|e| table_refused("table_dump", e))?;
            Ok(entries
                .map(|(h, installed)| values::entry(program, t, h, installed))
                .collect())
        })
    }

    fn handle_bm_mt_get_entry(
        &self,
        _: i32,
        table_name: String,
        entry_handle: BmEntryHandle,
    ) -> thrift::Result<BmMtEntry> {
        self.on_table(table_name, move |s, t| {
            let h = handle(entry_handle)?;
            let installed = s
                .entry(t, h)
                .map_err(|e| table_refused("table_dump_entry", e))?;
            Ok(values::entry(s.program(), t, h, installed))
        })
    }

    fn handle_bm_mt_get_default_entry(
        &self,
        _: i32,
        table_name: String,
    ) -> thrift::Result<BmActionEntry> {
        self.on_table(table_name, |s, t| {
            let call = s
                .default_action(t)
                .map_err(|e| table_refused("table_dump", e))?;
            Ok(values::action_entry(s.program(), call))
        })
    }

    fn handle_bm_mt_get_entry_from_key(
        &self,
        _: i32,
        table_name: String,
        match_key: BmMatchParams,
        options: BmAddEntryOptions,
    ) -> thrift::Result<BmMtEntry> {
        self.on_table(table_name, move |s, t| {
            let program = s.program();
            let matches = values::matches(program, t, &match_key).map_err(table_op)?;
            let priority = values::has_priority(program, t)
                .then(|| values::priority(program, t, &options))
                .transpose()
                .map_err(table_op)?;
            let h = s
                .entry_by_key(t, &matches, priority)
                .map_err(|e| table_refused("table_dump_entry_from_key", e))?
                .ok_or_else(|| table_op(TableOperationErrorCode::BAD_MATCH_KEY))?;
            let installed = s
                .entry(t, h)
                .map_err(|e| table_refused("table_dump_entry_from_key", e))?;
            Ok(values::entry(s.program(), t, h, installed))
        })
    }

    fn handle_bm_counter_read(
        &self,
        _: i32,
        counter_name: String,
        index_: i32,
    ) -> thrift::Result<BmCounterValue> {
        self.on_instance::<InvalidCounterOperation, _, _>(counter_name, move |s, c, shape| {
            let i = index(index_).unwrap_or(shape.size);
            s.read_cell(c, CellIndex::Index(i)).map(counter_value)
        })
    }

    fn handle_bm_counter_reset_all(&self, _: i32, counter_name: String) -> thrift::Result<()> {
        self.on_instance::<InvalidCounterOperation, _, _>(counter_name, |s, c, shape| {
            (0..shape.size)
                .try_for_each(|i| s.write_cell(c, CellIndex::Index(i), CounterCell::default()))
        })
    }

    fn handle_bm_counter_write(
        &self,
        _: i32,
        counter_name: String,
        index_: i32,
        value: BmCounterValue,
    ) -> thrift::Result<()> {
        self.on_instance::<InvalidCounterOperation, _, _>(counter_name, move |s, c, shape| {
            let i = index(index_).unwrap_or(shape.size);
            s.write_cell(c, CellIndex::Index(i), counter_cell(&value))
        })
    }

    fn handle_bm_learning_ack(
        &self,
        _: i32,
        _: BmLearningListId,
        _: BmLearningBufferId,
        _: Vec<BmLearningSampleId>,
    ) -> thrift::Result<()> {
        Err(learning_unsupported("bm_learning_ack"))
    }

    fn handle_bm_learning_ack_buffer(
        &self,
        _: i32,
        _: BmLearningListId,
        _: BmLearningBufferId,
    ) -> thrift::Result<()> {
        Err(learning_unsupported("bm_learning_ack_buffer"))
    }

    fn handle_bm_learning_set_timeout(
        &self,
        _: i32,
        _: BmLearningListId,
        _: i32,
    ) -> thrift::Result<()> {
        Err(learning_unsupported("bm_learning_set_timeout"))
    }

    fn handle_bm_learning_set_buffer_size(
        &self,
        _: i32,
        _: BmLearningListId,
        _: i32,
    ) -> thrift::Result<()> {
        Err(learning_unsupported("bm_learning_set_buffer_size"))
    }

    fn handle_bm_load_new_config(&self, config_str: String) -> thrift::Result<()> {
        let mut staged = self
            .0
            .staged
            .lock()
            .map_err(|_| internal("the staged config's lock is poisoned".into()))?;
        if staged.is_some() {
            return Err(InvalidSwapOperation::new(SwapOperationErrorCode::ONGOING_SWAP).into());
        }
        // Loaded here, on this connection's thread: the engine forwards meanwhile.
        let compiled = Compiled::from_bmv2_json(config_str.into_bytes(), None, 0)
            .map_err(|e| internal(format!("bm_load_new_config: {e}")))?;
        *staged = Some(compiled);
        Ok(())
    }

    fn handle_bm_swap_configs(&self) -> thrift::Result<()> {
        let compiled = self
            .0
            .staged
            .lock()
            .map_err(|_| internal("the staged config's lock is poisoned".into()))?
            .take()
            .ok_or_else(|| InvalidSwapOperation::new(SwapOperationErrorCode::NO_ONGOING_SWAP))?;
        self.0.on_engine(move |e| {
            crate::engine::load(e, compiled);
            Ok(())
        })
    }

    fn handle_bm_meter_array_set_rates(
        &self,
        _: i32,
        meter_array_name: String,
        rates: Vec<BmMeterRateConfig>,
    ) -> thrift::Result<()> {
        self.set_meter_rates(meter_array_name, rates, |size| Some(0..size))
    }

    fn handle_bm_meter_set_rates(
        &self,
        _: i32,
        meter_array_name: String,
        index_: i32,
        rates: Vec<BmMeterRateConfig>,
    ) -> thrift::Result<()> {
        self.set_meter_rates(meter_array_name, rates, move |size| {
            index(index_).filter(|&i| i < size).map(|i| i..i + 1)
        })
    }

    fn handle_bm_meter_get_rates(
        &self,
        _: i32,
        meter_array_name: String,
        index_: i32,
    ) -> thrift::Result<Vec<BmMeterRateConfig>> {
        self.on_instance::<InvalidMeterOperation, _, _>(meter_array_name, move |s, m, shape| {
            let i = index(index_).unwrap_or(shape.size);
            s.read_cell(m, CellIndex::Index(i)).map(meter_rates)
        })
    }

    fn handle_bm_register_read(
        &self,
        _: i32,
        register_array_name: String,
        idx: i32,
    ) -> thrift::Result<BmRegisterValue> {
        self.on_instance::<InvalidRegisterOperation, _, _>(register_array_name, move |s, r, _| {
            let i = index(idx).unwrap_or(usize::MAX);
            // BmRegisterValue is an i64: the low 64 bits of the cell.
            s.read_cell(r, CellIndex::Index(i))
                .map(|v: u128| v as u64 as i64)
        })
    }

    fn handle_bm_register_read_all(
        &self,
        _: i32,
        register_array_name: String,
    ) -> thrift::Result<Vec<BmRegisterValue>> {
        self.on_instance::<InvalidRegisterOperation, _, _>(register_array_name, |s, r, shape| {
            (0..shape.size)
                .map(|i| {
                    s.read_cell(r, CellIndex::Index(i))
                        .map(|v: u128| v as u64 as i64)
                })
                .collect()
        })
    }

    fn handle_bm_register_write(
        &self,
        _: i32,
        register_array_name: String,
        index_: i32,
        value: BmRegisterValue,
    ) -> thrift::Result<()> {
        self.on_instance::<InvalidRegisterOperation, _, _>(
            register_array_name,
            move |s, r, shape| {
                let i = index(index_).unwrap_or(usize::MAX);
                // As BMv2: the value is cut to the register's width.
                let v = u128::from(value as u64) & softswitch_core::ir::mask(shape.width);
                s.write_cell(r, CellIndex::Index(i), v)
            },
        )
    }

    fn handle_bm_register_write_range(
        &self,
        _: i32,
        register_array_name: String,
        start_index: i32,
        end_index: i32,
        value: BmRegisterValue,
    ) -> thrift::Result<()> {
        self.on_instance::<InvalidRegisterOperation, _, _>(
            register_array_name,
            move |s, r, shape| {
                let v = u128::from(value as u64) & softswitch_core::ir::mask(shape.width);
                let (start, end) = (
                    index(start_index).unwrap_or(usize::MAX),
                    index(end_index).unwrap_or(usize::MAX),
                );
                // Checked at both ends first, so that a range past the size changes nothing.
                s.read_cell::<u128>(r, CellIndex::Index(start))?;
                s.read_cell::<u128>(r, CellIndex::Index(end))?;
                (start..=end).try_for_each(|i| s.write_cell(r, CellIndex::Index(i), v))
            },
        )
    }

    fn handle_bm_register_reset(&self, _: i32, register_array_name: String) -> thrift::Result<()> {
        self.on_instance::<InvalidRegisterOperation, _, _>(register_array_name, |s, r, shape| {
            (0..shape.size).try_for_each(|i| s.write_cell(r, CellIndex::Index(i), 0u128))
        })
    }

    fn handle_bm_parse_vset_add(
        &self,
        _: i32,
        parse_vset_name: String,
        value: BmParseVSetValue,
    ) -> thrift::Result<()> {
        self.on_instance::<InvalidParseVSetOperation, _, Refused<_>>(
            parse_vset_name,
            move |s, v, shape| {
                let value = p4values::bytestring::decode(&value, shape.width.into())
                    .map_err(|_| Refused::Code(ParseVSetOperationErrorCode::ERROR))?;
                let member = softswitch_core::ir::FieldMatch::Masked {
                    value,
                    mask: softswitch_core::ir::mask(shape.width),
                };
                Ok(s.value_set_add(v, member)?)
            },
        )
    }

    fn handle_bm_parse_vset_remove(
        &self,
        _: i32,
        _: String,
        _: BmParseVSetValue,
    ) -> thrift::Result<()> {
        Err(vset_unsupported("bm_parse_vset_remove"))
    }

    fn handle_bm_parse_vset_get(&self, _: i32, _: String) -> thrift::Result<Vec<BmParseVSetValue>> {
        Err(vset_unsupported("bm_parse_vset_get"))
    }

    fn handle_bm_parse_vset_clear(&self, _: i32, _: String) -> thrift::Result<()> {
        Err(vset_unsupported("bm_parse_vset_clear"))
    }

    fn handle_bm_dev_mgr_add_port(&self, _: String, _: i32, _: String) -> thrift::Result<()> {
        Err(dev_mgr_unsupported("bm_dev_mgr_add_port"))
    }

    fn handle_bm_dev_mgr_remove_port(&self, _: i32) -> thrift::Result<()> {
        Err(dev_mgr_unsupported("bm_dev_mgr_remove_port"))
    }

    fn handle_bm_dev_mgr_show_ports(&self) -> thrift::Result<Vec<DevMgrPortInfo>> {
        Ok(self
            .0
            .info
            .ports
            .iter()
            .map(|(port, iface)| {
                DevMgrPortInfo::new(i32::from(*port), iface.clone(), true, BTreeMap::new())
            })
            .collect())
    }

    fn handle_bm_mgmt_get_info(&self) -> thrift::Result<BmConfig> {
        let info = &self.0.info;
        Ok(BmConfig::new(
            info.device_id as i64,
            i32::from(info.thrift_port),
            None,
            None,
            None,
        ))
    }

    fn handle_bm_set_crc16_custom_parameters(
        &self,
        _: i32,
        _: String,
        _: BmCrc16Config,
    ) -> thrift::Result<()> {
        Err(crc_unsupported("bm_set_crc16_custom_parameters"))
    }

    fn handle_bm_set_crc32_custom_parameters(
        &self,
        _: i32,
        _: String,
        _: BmCrc32Config,
    ) -> thrift::Result<()> {
        Err(crc_unsupported("bm_set_crc32_custom_parameters"))
    }

    fn handle_bm_set_toeplitz_hash_key(
        &self,
        _: i32,
        _: String,
        _: BmToeplitzHashKey,
    ) -> thrift::Result<()> {
        Err(unsupported(
            "bm_set_toeplitz_hash_key",
            "no toeplitz hash calculation",
            InvalidToeplitzHashOperation::new(ToeplitzHashErrorCode::INVALID_CALCULATION_NAME),
        ))
    }

    fn handle_bm_reset_state(&self) -> thrift::Result<()> {
        self.0.on_pipeline(|p| {
            p.switch.reset_state();
            // What P4Runtime wrote and reads back goes with the state.
            p.multicast_groups.clear();
            p.clone_sessions.clear();
            Ok(())
        })
    }

    fn handle_bm_get_config(&self) -> thrift::Result<String> {
        self.0.on_pipeline(|p| {
            if !softswitch_bmv2json::looks_like_bmv2_json(&p.device_config) {
                return Err(internal(
                    "softswitch runs this program from P4 source, which has no BMv2 JSON: \
                     give simple_switch_CLI --json with p4c-bm2-ss's JSON of the same program"
                        .into(),
                ));
            }
            String::from_utf8(p.device_config.clone())
                .map_err(|_| internal("the JSON config is not UTF-8".into()))
        })
    }

    fn handle_bm_get_config_md5(&self) -> thrift::Result<Vec<u8>> {
        self.0
            .on_pipeline(|p| Ok(Md5::digest(&p.device_config).to_vec()))
    }

    fn handle_bm_get_id_from_name(
        &self,
        _: i32,
        resource_type: BmResourceType,
        resource_name: String,
    ) -> thrift::Result<i32> {
        self.0.on_pipeline(move |p| {
            let s = &p.switch;
            // Instances by extern type (v1model.p4's names, as the calls on them take them).
            let of_type = |types: &[&str]| {
                s.instance_id(&resource_name)
                    .filter(|&i| types.contains(&s.program().instances[i].kind.type_name()))
                    .map(|i| id_among_kind(s.program(), i))
            };
            let id = match resource_type {
                BmResourceType::MATCH_TABLE => s.table_id(&resource_name),
                BmResourceType::ACTION_PROFILE => of_type(&["action_profile", "action_selector"]),
                BmResourceType::COUNTER => of_type(&[InvalidCounterOperation::P4]),
                BmResourceType::METER => of_type(&[InvalidMeterOperation::P4]),
                BmResourceType::REGISTER => of_type(&[InvalidRegisterOperation::P4]),
                _ => {
                    return Err(
                        InvalidIdLookup::new(IdLookupErrorCode::INVALID_RESOURCE_TYPE).into(),
                    )
                }
            };
            id.and_then(|i| i32::try_from(i).ok()).ok_or_else(|| {
                InvalidIdLookup::new(IdLookupErrorCode::INVALID_RESOURCE_NAME).into()
            })
        })
    }

    fn handle_bm_serialize_state(&self) -> thrift::Result<String> {
        Err(unsupported(
            "bm_serialize_state",
            "the state is not serialized",
            internal("bm_serialize_state is not supported by softswitch".into()),
        ))
    }
}

/// An entry's time to live: entries do not age over Thrift (P4Runtime's idle timeouts do).
fn no_ageing(call: &str) -> thrift::Error {
    unsupported(
        call,
        "entries do not age",
        table_op(TableOperationErrorCode::AGEING_DISABLED),
    )
}

/// Action profiles and selectors over Thrift: not yet (P4Runtime has them).
fn act_prof_unsupported(call: &str) -> thrift::Error {
    unsupported(
        call,
        "action profiles and selectors are served over P4Runtime only",
        table_op(TableOperationErrorCode::ERROR),
    )
}

fn learning_unsupported(call: &str) -> thrift::Error {
    unsupported(
        call,
        "learn lists go to the controller as P4Runtime digests",
        InvalidLearnOperation::new(LearnOperationErrorCode::ERROR),
    )
}

fn vset_unsupported(call: &str) -> thrift::Error {
    unsupported(
        call,
        "parser value sets take additions only",
        InvalidParseVSetOperation::new(ParseVSetOperationErrorCode::ERROR),
    )
}

fn dev_mgr_unsupported(call: &str) -> thrift::Error {
    unsupported(
        call,
        "ports are attached at start (-i PORT@IFACE), not at run time",
        InvalidDevMgrOperation::new(DevMgrErrorCode::ERROR),
    )
}

fn crc_unsupported(call: &str) -> thrift::Error {
    unsupported(
        call,
        "the CRC parameters of a calculation are fixed",
        InvalidCrcOperation::new(CrcErrorCode::INVALID_CONFIG),
    )
}
