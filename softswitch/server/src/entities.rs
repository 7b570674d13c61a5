//! P4Runtime entities against the running pipeline: one Write update applied, one Read entity
//! answered. Table entries (with their idle timeouts), default entries, counters, direct
//! counters, meters, direct meters, registers, multicast groups, clone sessions and digest
//! settings; other entities are `UNIMPLEMENTED`. Also the table entries of idle-timeout notifications ([`idle_entry`]). What
//! a client writes is bounded by the switch's state budget (`softswitch_core::budget`, refused
//! with `RESOURCE_EXHAUSTED`), and the opaque `metadata` it keeps with an entry or a group by
//! [`MAX_METADATA_BYTES`].

use std::time::Duration;

use p4runtime::p4::config::v1 as p4i;
use p4runtime::p4::v1::{self as p4v1, entity::Entity as E, update::Type as UpdateType};
use tonic::Status;

use super::bytes::{decode, encode};
use super::idle::supports_idle_timeout;
use super::pipeline::Pipeline;
use softswitch_core::externs::Cell;
use softswitch_core::ir::{self, ActionCall, FieldMatch, MatchKind};
use softswitch_core::meter::MeterConfig;
use softswitch_core::runtime::{CellIndex, EntryWrite, RuntimeError};
use softswitch_core::table::{
    prefix_mask, ControllerData, CounterCell, EntryChange, Installed, TableError,
};

/// The most bytes of `metadata` a table entry or a multicast group keeps. The specification
/// sets no bound and PI none but gRPC's message size; a controller's cookie needs far less, and
/// past this a client would fill the switch's memory with bytes the switch never reads.
pub const MAX_METADATA_BYTES: usize = 64 << 10;

/// Applies one update of a Write.
pub fn write(p: &mut Pipeline, update: &p4v1::Update) -> Result<(), Status> {
    let kind = UpdateType::try_from(update.r#type)
        .ok()
        .filter(|k| *k != UpdateType::Unspecified)
        .ok_or_else(|| {
            Status::invalid_argument("the update's type must be INSERT, MODIFY or DELETE")
        })?;
    match entity(update.entity.as_ref())? {
        E::TableEntry(te) => write_table_entry(p, kind, te),
        E::CounterEntry(ce) => {
            // An unset index writes every cell; unset data changes nothing.
            modify_only(kind, "counter entries")?;
            let value = |_: &CellArray| Ok(ce.data.as_ref().map(cell_of));
            write_cells(p, ("counter", ce.counter_id), ce.index.as_ref(), value)
        }
        E::DirectCounterEntry(dc) => {
            modify_only(kind, "direct counter entries")?;
            let value = || Ok(dc.data.as_ref().map(cell_of));
            let te = dc.table_entry.as_ref();
            write_direct(p, te, ("counter", direct_counter_of), value)
        }
        E::RegisterEntry(re) => {
            // An unset index writes every cell.
            modify_only(kind, "register entries")?;
            let value = |register: &CellArray| match re.data.as_ref().and_then(|d| d.data.as_ref())
            {
                Some(p4v1::p4_data::Data::Bitstring(b)) => {
                    decode(b, register.width.unwrap_or(0), "register data").map(Some)
                }
                _ => Err(Status::invalid_argument(
                    "register data must be a bitstring",
                )),
            };
            write_cells(p, ("register", re.register_id), re.index.as_ref(), value)
        }
        E::MeterEntry(me) => {
            // An unset index configures every cell; an unset config resets them.
            modify_only(kind, "meter entries")?;
            let value = |_: &CellArray| {
                meter_config(me.config.as_ref(), me.counter_data.as_ref()).map(Some)
            };
            write_cells(p, ("meter", me.meter_id), me.index.as_ref(), value)
        }
        E::DirectMeterEntry(dm) => {
            modify_only(kind, "direct meter entries")?;
            let value = || meter_config(dm.config.as_ref(), dm.counter_data.as_ref()).map(Some);
            let te = dm.table_entry.as_ref();
            write_direct(p, te, ("meter", direct_meter_of), value)
        }
        E::PacketReplicationEngineEntry(pre) => write_pre(p, kind, pre),
        E::DigestEntry(de) => {
            if !p.index.digests.contains(&de.digest_id) || de.digest_id == 0 {
                return Err(Status::not_found(format!(
                    "no digest with id {}",
                    de.digest_id
                )));
            }
            let exists = p.digests.entries.contains_key(&de.digest_id);
            match (kind, exists) {
                (UpdateType::Insert, true) => {
                    Err(Status::already_exists("the digest is already configured"))
                }
                (UpdateType::Modify | UpdateType::Delete, false) => {
                    Err(Status::not_found("the digest is not configured"))
                }
                (UpdateType::Delete, true) => {
                    p.digests.forget(de.digest_id);
                    Ok(())
                }
                _ => {
                    p.digests.entries.insert(de.digest_id, *de);
                    Ok(())
                }
            }
        }
        other => Err(unimplemented(other)),
    }
}

/// Appends the entities that `filter` selects (wildcards included) to `out`.
pub fn read(
    p: &Pipeline,
    filter: &p4v1::Entity,
    out: &mut Vec<p4v1::Entity>,
) -> Result<(), Status> {
    let wrap = |e: E| p4v1::Entity { entity: Some(e) };
    match entity(Some(filter))? {
        E::TableEntry(te) => {
            let tables: Vec<usize> = if te.table_id == 0 {
                (0..p.switch.program().tables.len())
                    .filter(|t| table_id(p, *t).is_some())
                    .collect()
            } else {
                vec![table_of(p, te.table_id)?.0]
            };
            for t in tables {
                for entry in table_entries(p, t, te)? {
                    out.push(wrap(E::TableEntry(entry)));
                }
            }
        }
        E::CounterEntry(ce) => {
            let all = p.info.counters.iter().map(|c| id_of(&c.preamble));
            let entity = |counter_id, index, cell| {
                E::CounterEntry(p4v1::CounterEntry {
                    counter_id,
                    index,
                    data: Some(data_of(cell)),
                })
            };
            read_cells(
                p,
                ("counter", ce.counter_id, all),
                ce.index.as_ref(),
                entity,
                out,
            )?;
        }
        E::DirectCounterEntry(dc) => {
            let te = p4v1::TableEntry {
                counter_data: Some(p4v1::CounterData::default()),
                ..dc.table_entry.clone().unwrap_or_default()
            };
            let entity = |mut entry: p4v1::TableEntry| {
                E::DirectCounterEntry(p4v1::DirectCounterEntry {
                    data: entry.counter_data.take(),
                    table_entry: Some(entry),
                })
            };
            read_direct(p, &te, ("counter", direct_counter_of), entity, out)?;
        }
        E::RegisterEntry(re) => {
            let all = p.info.registers.iter().map(|r| id_of(&r.preamble));
            let entity = |register_id, index, value| {
                E::RegisterEntry(p4v1::RegisterEntry {
                    register_id,
                    index,
                    data: Some(p4v1::P4Data {
                        data: Some(p4v1::p4_data::Data::Bitstring(encode(value))),
                    }),
                })
            };
            read_cells(
                p,
                ("register", re.register_id, all),
                re.index.as_ref(),
                entity,
                out,
            )?;
        }
        E::MeterEntry(me) => {
            let all = p.info.meters.iter().map(|m| id_of(&m.preamble));
            let entity = |meter_id, index, config: Option<MeterConfig>| {
                E::MeterEntry(p4v1::MeterEntry {
                    meter_id,
                    index,
                    config: config.map(p4rt_meter_config),
                    counter_data: None,
                })
            };
            read_cells(
                p,
                ("meter", me.meter_id, all),
                me.index.as_ref(),
                entity,
                out,
            )?;
        }
        E::DirectMeterEntry(dm) => {
            let te = p4v1::TableEntry {
                meter_config: Some(p4v1::MeterConfig::default()),
                ..dm.table_entry.clone().unwrap_or_default()
            };
            let entity = |mut entry: p4v1::TableEntry| {
                E::DirectMeterEntry(p4v1::DirectMeterEntry {
                    config: entry.meter_config.take(),
                    table_entry: Some(entry),
                    counter_data: None,
                })
            };
            read_direct(p, &te, ("meter", direct_meter_of), entity, out)?;
        }
        E::PacketReplicationEngineEntry(pre) => {
            use p4v1::packet_replication_engine_entry::Type;
            let pre_entity = |t: Type| {
                wrap(E::PacketReplicationEngineEntry(
                    p4v1::PacketReplicationEngineEntry { r#type: Some(t) },
                ))
            };
            match &pre.r#type {
                Some(Type::MulticastGroupEntry(g)) => {
                    for (id, entry) in &p.multicast_groups {
                        if g.multicast_group_id == 0 || g.multicast_group_id == *id {
                            out.push(pre_entity(Type::MulticastGroupEntry(entry.clone())));
                        }
                    }
                }
                Some(Type::CloneSessionEntry(s)) => {
                    for (id, entry) in &p.clone_sessions {
                        if s.session_id == 0 || s.session_id == *id {
                            out.push(pre_entity(Type::CloneSessionEntry(entry.clone())));
                        }
                    }
                }
                None => {
                    return Err(Status::invalid_argument(
                        "a packet replication engine entry must be a multicast group or a clone session",
                    ))
                }
            }
        }
        E::DigestEntry(de) => {
            for (id, entry) in &p.digests.entries {
                if de.digest_id == 0 || de.digest_id == *id {
                    out.push(wrap(E::DigestEntry(*entry)));
                }
            }
        }
        other => return Err(unimplemented(other)),
    }
    Ok(())
}

/// Appends an entity per cell a read of an indexed extern type's cells selects: `type_id`
/// names the type as v1model.p4 does and the instance by P4Info id (0: each of `all`, the
/// type's ids in P4Info), `index` the cell (unset: every cell); `entity` makes the entity of an
/// id, an index and the cell's value.
fn read_cells<C: Cell>(
    p: &Pipeline,
    (p4, id, all): (&str, u32, impl Iterator<Item = u32>),
    index: Option<&p4v1::Index>,
    entity: impl Fn(u32, Option<p4v1::Index>, C) -> E,
    out: &mut Vec<p4v1::Entity>,
) -> Result<(), Status> {
    let ids: Vec<u32> = if id == 0 { all.collect() } else { vec![id] };
    for id in ids {
        let array = cell_array(p, id, p4)?;
        for i in cells(index, array.size)? {
            let cell = p
                .switch
                .read_cell(array.instance, CellIndex::Index(i))
                .map_err(runtime_error)?;
            let index = Some(p4v1::Index { index: i as i64 });
            out.push(p4v1::Entity {
                entity: Some(entity(id, index, cell)),
            });
        }
    }
    Ok(())
}

/// Writes the cells a write of an indexed extern type's cells selects: `type_id` names the type
/// as v1model.p4 does and the instance by P4Info id, `index` the cell (unset: every cell);
/// `value` gives, from the instance, what to write (`None`: nothing), once the cells are
/// found.
fn write_cells<C: Cell + Copy>(
    p: &mut Pipeline,
    (p4, id): (&str, u32),
    index: Option<&p4v1::Index>,
    value: impl Fn(&CellArray) -> Result<Option<C>, Status>,
) -> Result<(), Status> {
    let array = cell_array(p, id, p4)?;
    let cells = cells(index, array.size)?;
    if let Some(value) = value(&array)? {
        for i in cells {
            p.switch
                .write_cell(array.instance, CellIndex::Index(i), value)
                .map_err(runtime_error)?;
        }
    }
    Ok(())
}

/// Writes the direct counter or meter (`noun`, which `direct_of` finds) of the table entry
/// `te` names by its key; `value` gives what to write (`None`: nothing), once the entry is
/// found.
fn write_direct<C: Cell>(
    p: &mut Pipeline,
    te: Option<&p4v1::TableEntry>,
    (noun, direct_of): (&str, DirectOf),
    value: impl Fn() -> Result<Option<C>, Status>,
) -> Result<(), Status> {
    let te = te.ok_or_else(|| {
        Status::invalid_argument(format!("a direct {noun} entry needs its table_entry"))
    })?;
    let (table, _) = table_of(p, te.table_id)?;
    let instance = direct_of(p, table)?;
    let handle = find_entry(p, table, te)?;
    if let Some(value) = value()? {
        p.switch
            .write_cell(instance, CellIndex::Entry(handle), value)
            .map_err(runtime_error)?;
    }
    Ok(())
}

/// Finds the direct instance of a kind (a counter, a meter) of a program table, or why not.
type DirectOf = fn(&Pipeline, usize) -> Result<usize, Status>;

/// Appends an entity per table entry a read of direct counters or meters selects: the entries
/// of `te`'s table (table id 0: of every table with a direct `noun`, which `direct_of` finds)
/// that its key matches (none: every entry), read as `te` asks (its `counter_data` or
/// `meter_config` set); `entity` makes the entity of one. A key no entry has is NOT_FOUND.
fn read_direct(
    p: &Pipeline,
    te: &p4v1::TableEntry,
    (noun, direct_of): (&str, DirectOf),
    entity: impl Fn(p4v1::TableEntry) -> E,
    out: &mut Vec<p4v1::Entity>,
) -> Result<(), Status> {
    let tables: Vec<usize> = if te.table_id == 0 {
        (0..p.switch.program().tables.len())
            .filter(|t| table_id(p, *t).is_some() && direct_of(p, *t).is_ok())
            .collect()
    } else {
        let (t, _) = table_of(p, te.table_id)?;
        direct_of(p, t)?;
        vec![t]
    };
    for t in tables {
        let entries = table_entries(p, t, te)?;
        if entries.is_empty() && !te.r#match.is_empty() {
            return Err(Status::not_found(format!(
                "no entry with this key: its direct {noun} cannot be read"
            )));
        }
        for entry in entries {
            out.push(p4v1::Entity {
                entity: Some(entity(entry)),
            });
        }
    }
    Ok(())
}

/// What `update` changes, for the audit trail: its entity's kind and its table's or
/// instance's name in `info` (`table_entry MyIngress.ipv4_lpm`, `multicast_group 1`); an id
/// `info` does not have is given as the number.
pub fn describe(info: &p4i::P4Info, update: &p4v1::Update) -> String {
    let named = |kind: &str, id: u32| match p4runtime::p4info::preambles(info).find(|p| p.id == id)
    {
        Some(p) => format!("{kind} {}", p.name),
        None => format!("{kind} id {id}"),
    };
    let table = |kind: &str, te: &Option<p4v1::TableEntry>| {
        named(kind, te.as_ref().map_or(0, |te| te.table_id))
    };
    match update.entity.as_ref().and_then(|e| e.entity.as_ref()) {
        None => "an empty entity".into(),
        Some(E::ExternEntry(x)) => {
            format!("extern_entry type {} id {}", x.extern_type_id, x.extern_id)
        }
        Some(E::TableEntry(te)) => named("table_entry", te.table_id),
        Some(E::ActionProfileMember(m)) => named("action_profile_member", m.action_profile_id),
        Some(E::ActionProfileGroup(g)) => named("action_profile_group", g.action_profile_id),
        Some(E::MeterEntry(m)) => named("meter_entry", m.meter_id),
        Some(E::DirectMeterEntry(m)) => table("direct_meter_entry", &m.table_entry),
        Some(E::CounterEntry(c)) => named("counter_entry", c.counter_id),
        Some(E::DirectCounterEntry(c)) => table("direct_counter_entry", &c.table_entry),
        Some(E::PacketReplicationEngineEntry(pre)) => {
            use p4v1::packet_replication_engine_entry::Type;
            match &pre.r#type {
                Some(Type::MulticastGroupEntry(g)) => {
                    format!("multicast_group_entry {}", g.multicast_group_id)
                }
                Some(Type::CloneSessionEntry(c)) => format!("clone_session_entry {}", c.session_id),
                None => "packet_replication_engine_entry".into(),
            }
        }
        Some(E::ValueSetEntry(v)) => named("value_set_entry", v.value_set_id),
        Some(E::RegisterEntry(r)) => named("register_entry", r.register_id),
        Some(E::DigestEntry(d)) => named("digest_entry", d.digest_id),
    }
}

fn entity(e: Option<&p4v1::Entity>) -> Result<&E, Status> {
    e.and_then(|e| e.entity.as_ref())
        .ok_or_else(|| Status::invalid_argument("the entity is empty"))
}

fn unimplemented(e: &E) -> Status {
    let what = match e {
        E::ExternEntry(_) => "extern entries",
        E::ActionProfileMember(_) | E::ActionProfileGroup(_) => "action profile members and groups",
        E::ValueSetEntry(_) => "value set entries",
        _ => "this entity",
    };
    Status::unimplemented(format!(
        "softswitch does not serve {what} over P4Runtime yet"
    ))
}

fn modify_only(kind: UpdateType, what: &str) -> Result<(), Status> {
    if kind == UpdateType::Modify {
        Ok(())
    } else {
        Err(Status::invalid_argument(format!(
            "{what} can only be modified (MODIFY)"
        )))
    }
}

fn id_of(p: &Option<p4i::Preamble>) -> u32 {
    p.as_ref().map_or(0, |p| p.id)
}

/// The P4Info id of program table `t`, if P4Info has it (not `@hidden`).
fn table_id(p: &Pipeline, t: usize) -> Option<u32> {
    p.index
        .tables
        .iter()
        .find(|(_, &i)| i == t)
        .map(|(&id, _)| id)
}

/// The program index and P4Info of table `id`.
fn table_of(p: &Pipeline, id: u32) -> Result<(usize, &p4i::Table), Status> {
    let t = *p
        .index
        .tables
        .get(&id)
        .ok_or_else(|| Status::not_found(format!("no table with id {id}")))?;
    let info = p
        .info
        .tables
        .iter()
        .find(|x| id_of(&x.preamble) == id)
        .expect("indexed tables are in P4Info");
    Ok((t, info))
}

fn direct_counter_of(p: &Pipeline, table: usize) -> Result<usize, Status> {
    let t = &p.switch.program().tables[table];
    t.direct_counter
        .ok_or_else(|| Status::invalid_argument(format!("table {} has no direct counter", t.name)))
}

/// The direct meter of table `table`, or INVALID_ARGUMENT.
fn direct_meter_of(p: &Pipeline, table: usize) -> Result<usize, Status> {
    let t = &p.switch.program().tables[table];
    t.direct_meter
        .ok_or_else(|| Status::invalid_argument(format!("table {} has no direct meter", t.name)))
}

/// The rates a meter entry writes: P4Runtime's in units (bytes or packets, as the meter's
/// P4Info unit) per second, the switch's per microsecond, as BMv2's `simple_switch_grpc`
/// converts them; `None`, which resets the meter to mark every packet green, for an unset
/// config. Meters are two-rate three-colour (RFC 2698, as BMv2's): a single-rate `eburst` is
/// INVALID_ARGUMENT, and so is a negative value; meter counters (`counter_data`) are
/// UNIMPLEMENTED, as in BMv2.
fn meter_config(
    config: Option<&p4v1::MeterConfig>,
    counters: Option<&p4v1::MeterCounterData>,
) -> Result<Option<MeterConfig>, Status> {
    if counters.is_some() {
        return Err(Status::unimplemented(
            "softswitch's meters keep no per-colour counters: counter_data must be unset",
        ));
    }
    let Some(c) = config else {
        return Ok(None);
    };
    if c.eburst != 0 {
        return Err(Status::invalid_argument(
            "softswitch's meters are two-rate three-colour (RFC 2698): eburst must be 0",
        ));
    }
    if [c.cir, c.cburst, c.pir, c.pburst].iter().any(|v| *v < 0) {
        return Err(Status::invalid_argument(
            "a meter's rates and bursts may not be negative",
        ));
    }
    Ok(Some(MeterConfig {
        cir: c.cir as f64 / MICROS_PER_SECOND,
        cbs: c.cburst as f64,
        pir: c.pir as f64 / MICROS_PER_SECOND,
        pbs: c.pburst as f64,
    }))
}

/// A meter's rates as P4Runtime reads them back ([`meter_config`]'s inverse, rounded to
/// whole units per second).
fn p4rt_meter_config(c: MeterConfig) -> p4v1::MeterConfig {
    p4v1::MeterConfig {
        cir: (c.cir * MICROS_PER_SECOND).round() as i64,
        cburst: c.cbs.round() as i64,
        pir: (c.pir * MICROS_PER_SECOND).round() as i64,
        pburst: c.pbs.round() as i64,
        eburst: 0,
    }
}

/// Microseconds in a second: P4Runtime's meter rates are per second, the switch's per µs.
const MICROS_PER_SECOND: f64 = 1e6;

/// An indexed instance of a stateful extern type, as an entity names it by P4Info id.
struct CellArray {
    /// Its index among the program's instances.
    instance: usize,
    /// Its number of cells.
    size: usize,
    /// The width of its cells, for a type whose cells hold a P4 value (a register's).
    width: Option<u16>,
}

/// The instance of P4Info id `id`, if it is an indexed instance of the extern type v1model.p4
/// calls `p4` (`counter`, `register`), with its cells as its `ir::InstanceKind` gives them: one
/// lookup for every cell-array entity, the type named as data rather than matched.
fn cell_array(p: &Pipeline, id: u32, p4: &str) -> Result<CellArray, Status> {
    let missing = || Status::not_found(format!("no {p4} with id {id}"));
    let instance = *p.index.instances.get(&id).ok_or_else(missing)?;
    let kind = &p.switch.program().instances[instance].kind;
    let size = kind
        .cells()
        .filter(|_| kind.type_name() == p4)
        .ok_or_else(missing)?;
    Ok(CellArray {
        instance,
        size: size as usize,
        width: kind.cell_width(),
    })
}

/// The cells of a counter or register an entry selects: every one when the index is unset (a
/// wildcard read or write), else the one indexed (a negative index is INVALID_ARGUMENT, one
/// past the end OUT_OF_RANGE, as the specification says).
fn cells(index: Option<&p4v1::Index>, size: usize) -> Result<Vec<usize>, Status> {
    let Some(index) = index else {
        return Ok((0..size).collect());
    };
    if index.index < 0 {
        return Err(Status::invalid_argument(format!(
            "index {} is negative",
            index.index
        )));
    }
    usize::try_from(index.index)
        .ok()
        .filter(|&i| i < size)
        .map(|i| vec![i])
        .ok_or_else(|| Status::out_of_range(format!("index {} is not below {size}", index.index)))
}

fn cell_of(data: &p4v1::CounterData) -> CounterCell {
    CounterCell {
        packets: data.packet_count.max(0) as u64,
        bytes: data.byte_count.max(0) as u64,
    }
}

fn data_of(cell: CounterCell) -> p4v1::CounterData {
    p4v1::CounterData {
        packet_count: cell.packets as i64,
        byte_count: cell.bytes as i64,
    }
}

/// The P4Runtime status of a refusal of the switch's runtime interface.
fn runtime_error(e: RuntimeError) -> Status {
    match e {
        RuntimeError::Table(TableError::Duplicate(_)) => Status::already_exists(e.to_string()),
        RuntimeError::Table(TableError::Full(_)) | RuntimeError::Budget(_) => {
            Status::resource_exhausted(e.to_string())
        }
        RuntimeError::Table(
            TableError::NoEntry(..) | TableError::NoKey(_) | TableError::NoMember(..),
        )
        | RuntimeError::NoTable(_)
        | RuntimeError::NoInstance(_)
        | RuntimeError::NoGroupOrNode { .. } => Status::not_found(e.to_string()),
        RuntimeError::Table(TableError::Const(..)) => Status::permission_denied(e.to_string()),
        RuntimeError::Index { .. } => Status::out_of_range(e.to_string()),
        _ => Status::invalid_argument(e.to_string()),
    }
}

/// The key of a P4Runtime table entry as the switch matches it.
fn matches_of(
    p: &Pipeline,
    table: usize,
    info: &p4i::Table,
    te: &p4v1::TableEntry,
) -> Result<Vec<FieldMatch>, Status> {
    use p4v1::field_match::FieldMatchType as M;
    let keys = &p.switch.program().tables[table].keys;
    let mut out: Vec<Option<FieldMatch>> = vec![None; keys.len()];
    for m in &te.r#match {
        let pos = info
            .match_fields
            .iter()
            .position(|f| f.id == m.field_id)
            .ok_or_else(|| {
                Status::invalid_argument(format!("table has no match field with id {}", m.field_id))
            })?;
        if out[pos].is_some() {
            return Err(Status::invalid_argument(format!(
                "match field {} given twice",
                m.field_id
            )));
        }
        let key = &keys[pos];
        let (w, name) = (key.width, key.name.as_str());
        let full = ir::mask(w);
        let bad = |what: &str| Status::invalid_argument(format!("match field {name}: {what}"));
        // P4Runtime's canonical form: bits the mask leaves out are zero.
        let masked = |value: u128, mask: u128, outside: &str| {
            if value & !mask != 0 {
                Err(bad(&format!("{outside} must be zero")))
            } else {
                Ok(FieldMatch::Masked { value, mask })
            }
        };
        let fm = match (key.kind, m.field_match_type.as_ref()) {
            (MatchKind::Exact, Some(M::Exact(x))) => FieldMatch::Masked {
                value: decode(&x.value, w, name)?,
                mask: full,
            },
            (MatchKind::Optional, Some(M::Optional(x))) => FieldMatch::Masked {
                value: decode(&x.value, w, name)?,
                mask: full,
            },
            (MatchKind::Lpm, Some(M::Lpm(x))) => {
                let len = u16::try_from(x.prefix_len)
                    .ok()
                    .filter(|l| *l <= w)
                    .ok_or_else(|| bad("prefix length out of range"))?;
                if len == 0 {
                    return Err(bad("a zero-length prefix must be left out (don't care)"));
                }
                masked(
                    decode(&x.value, w, name)?,
                    prefix_mask(w, len),
                    "bits past the prefix",
                )?
            }
            (MatchKind::Ternary, Some(M::Ternary(x))) => {
                let mask = decode(&x.mask, w, name)?;
                if mask == 0 {
                    return Err(bad("a zero mask must be left out (don't care)"));
                }
                masked(decode(&x.value, w, name)?, mask, "bits outside the mask")?
            }
            (MatchKind::Range, Some(M::Range(x))) => {
                let lo = decode(&x.low, w, name)?;
                let hi = decode(&x.high, w, name)?;
                if lo > hi {
                    return Err(bad("low is above high"));
                }
                if lo == 0 && hi == full {
                    return Err(bad("the full range must be left out (don't care)"));
                }
                FieldMatch::Range { lo, hi }
            }
            (kind, _) => return Err(bad(&format!("expected a {kind:?} match"))),
        };
        out[pos] = Some(fm);
    }
    keys.iter()
        .zip(out)
        .map(|(k, m)| match (m, k.kind) {
            (Some(m), _) => Ok(m),
            (None, MatchKind::Exact) => Err(Status::invalid_argument(format!(
                "match field {} is exact and cannot be left out",
                k.name
            ))),
            (None, MatchKind::Range) => Ok(FieldMatch::Range {
                lo: 0,
                hi: ir::mask(k.width),
            }),
            (None, _) => Ok(FieldMatch::Masked { value: 0, mask: 0 }),
        })
        .collect()
}

/// The P4Runtime form of a key (wildcards left out).
fn p4rt_matches(
    p: &Pipeline,
    table: usize,
    info: &p4i::Table,
    matches: &[FieldMatch],
) -> Vec<p4v1::FieldMatch> {
    use p4v1::field_match::{self as fm, FieldMatchType as M};
    let keys = &p.switch.program().tables[table].keys;
    keys.iter()
        .zip(matches)
        .zip(&info.match_fields)
        .filter_map(|((k, m), f)| {
            let full = ir::mask(k.width);
            let t = match (*m, k.kind) {
                (FieldMatch::Masked { mask: 0, .. }, _) => return None,
                (FieldMatch::Range { lo: 0, hi }, MatchKind::Range) if hi == full => return None,
                (FieldMatch::Masked { value, .. }, MatchKind::Exact) => M::Exact(fm::Exact {
                    value: encode(value),
                }),
                (FieldMatch::Masked { value, .. }, MatchKind::Optional) => {
                    M::Optional(fm::Optional {
                        value: encode(value),
                    })
                }
                (FieldMatch::Masked { value, mask }, MatchKind::Lpm) => M::Lpm(fm::Lpm {
                    value: encode(value & mask),
                    prefix_len: mask.count_ones() as i32,
                }),
                (FieldMatch::Masked { value, mask }, _) => M::Ternary(fm::Ternary {
                    value: encode(value & mask),
                    mask: encode(mask),
                }),
                (FieldMatch::Range { lo, hi }, _) => M::Range(fm::Range {
                    low: encode(lo),
                    high: encode(hi),
                }),
            };
            Some(p4v1::FieldMatch {
                field_id: f.id,
                field_match_type: Some(t),
            })
        })
        .collect()
}

/// The switch's form of a P4Runtime action, checked against the table's action references.
fn action_call(
    p: &Pipeline,
    info: &p4i::Table,
    action: Option<&p4v1::TableAction>,
    default: bool,
) -> Result<ActionCall, Status> {
    use p4v1::table_action::Type;
    // The kind of action must be the table's (specification, Action Specification): an action
    // for a direct table, a member, group or action set for one with an implementation.
    let indirect = info.implementation_id != 0 && !default;
    let a = match action.and_then(|a| a.r#type.as_ref()) {
        Some(Type::Action(_)) if indirect => {
            return Err(Status::invalid_argument(
                "this table is implemented by an action profile: its entries take a member, a group or an action set, not an action",
            ))
        }
        Some(Type::Action(a)) => a,
        Some(_) if !indirect => {
            return Err(Status::invalid_argument(
                "this table has no action profile: its entries take an action",
            ))
        }
        Some(_) => {
            return Err(Status::unimplemented(
                "action profile members, groups and action sets are not served yet",
            ))
        }
        None => return Err(Status::invalid_argument("the table entry has no action")),
    };
    let reference = info
        .action_refs
        .iter()
        .find(|r| r.id == a.action_id)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "action {} is not an action of this table",
                a.action_id
            ))
        })?;
    let scope = p4i::action_ref::Scope::try_from(reference.scope).unwrap_or_default();
    // The specification makes a valid action used outside its scope PERMISSION_DENIED.
    match (scope, default) {
        (p4i::action_ref::Scope::DefaultOnly, false) => {
            return Err(Status::permission_denied(
                "this action is @defaultonly: it cannot be an entry's action",
            ))
        }
        (p4i::action_ref::Scope::TableOnly, true) => {
            return Err(Status::permission_denied(
                "this action is @tableonly: it cannot be the default action",
            ))
        }
        _ => {}
    }
    let action = *p
        .index
        .actions
        .get(&a.action_id)
        .expect("referenced actions are indexed");
    let params = crate::p4info::action_data(p.switch.program(), action);
    let info_params = &p
        .info
        .actions
        .iter()
        .find(|x| id_of(&x.preamble) == a.action_id)
        .expect("in P4Info")
        .params;
    if a.params.len() != params.len() {
        return Err(Status::invalid_argument(format!(
            "the action takes {} parameters, {} given",
            params.len(),
            a.params.len()
        )));
    }
    let mut args = vec![None; params.len()];
    for given in &a.params {
        let pos = info_params
            .iter()
            .position(|x| x.id == given.param_id)
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "the action has no parameter with id {}",
                    given.param_id
                ))
            })?;
        if args[pos].is_some() {
            return Err(Status::invalid_argument(format!(
                "parameter {} given twice",
                given.param_id
            )));
        }
        args[pos] = Some(decode(&given.value, params[pos].width, &params[pos].name)?);
    }
    Ok(ActionCall {
        action,
        args: args.into_iter().map(|a| a.expect("all given")).collect(),
    })
}

/// The P4Runtime form of an action call; parameters carry their P4Info ids (`@id` honoured).
fn p4rt_action(p: &Pipeline, call: &ActionCall) -> p4v1::TableAction {
    let id = p
        .index
        .actions
        .iter()
        .find(|(_, &i)| i == call.action)
        .map_or(0, |(&id, _)| id);
    let info_params = p
        .info
        .actions
        .iter()
        .find(|x| id_of(&x.preamble) == id)
        .map_or(&[][..], |a| a.params.as_slice());
    p4v1::TableAction {
        r#type: Some(p4v1::table_action::Type::Action(p4v1::Action {
            action_id: id,
            params: call
                .args
                .iter()
                .zip(info_params)
                .map(|(v, param)| p4v1::action::Param {
                    param_id: param.id,
                    value: encode(*v),
                })
                .collect(),
        })),
    }
}

/// The handle of the installed entry with `te`'s key (and priority, where the table has one).
fn find_entry(p: &Pipeline, table: usize, te: &p4v1::TableEntry) -> Result<usize, Status> {
    let (_, info) = table_of(p, te.table_id)?;
    let matches = matches_of(p, table, info, te)?;
    p.switch
        .entry_with_key(table, &matches, i64::from(te.priority))
        .map_err(runtime_error)
}

/// Refuses the parts of a written table entry softswitch does not keep, so that what is
/// accepted reads back the same: `is_const` (never writable), `time_since_last_hit` (never
/// writable), an idle timeout that is negative or where the table (or a default entry) has
/// none, direct meters, and a counter value for a table without a direct counter.
fn check_entry_fields(
    t: &ir::Table,
    info: &p4i::Table,
    te: &p4v1::TableEntry,
) -> Result<(), Status> {
    if te.is_const {
        return Err(Status::invalid_argument(
            "is_const must be false in a write",
        ));
    }
    if te.time_since_last_hit.is_some() {
        return Err(Status::invalid_argument(
            "time_since_last_hit must be unset in a write",
        ));
    }
    if te.idle_timeout_ns < 0 {
        return Err(Status::invalid_argument(format!(
            "idle_timeout_ns {} is negative",
            te.idle_timeout_ns
        )));
    }
    if te.idle_timeout_ns != 0 && te.is_default_action {
        return Err(Status::invalid_argument(
            "the default entry has no idle timeout: idle_timeout_ns must be 0",
        ));
    }
    if te.idle_timeout_ns != 0 && !supports_idle_timeout(info) {
        return Err(Status::invalid_argument(format!(
            "table {} has no idle timeout (its P4Info says NO_TIMEOUT): idle_timeout_ns must be 0",
            t.name
        )));
    }
    if te.meter_config.is_some() || te.meter_counter_data.is_some() {
        return Err(Status::unimplemented(
            "softswitch does not take a table entry's meter_config in a write yet: \
             configure its direct meter with a DirectMeterEntry",
        ));
    }
    if te.counter_data.is_some() && t.direct_counter.is_none() {
        return Err(Status::invalid_argument(format!(
            "table {} has no direct counter: counter_data must be unset",
            t.name
        )));
    }
    Ok(())
}

fn write_table_entry(
    p: &mut Pipeline,
    kind: UpdateType,
    te: &p4v1::TableEntry,
) -> Result<(), Status> {
    // What the update asks, read off the program and P4Info (borrowed, not copied); then one
    // call down to the switch, whose table checks the entry's rules and applies it whole.
    let (table, info) = table_of(p, te.table_id)?;
    let t = &p.switch.program().tables[table];
    if kind != UpdateType::Delete {
        // A DELETE is judged by its key alone.
        check_entry_fields(t, info, te)?;
    }
    if te.is_default_action {
        if kind != UpdateType::Modify {
            return Err(Status::invalid_argument(
                "the default entry can only be modified (MODIFY)",
            ));
        }
        if !te.r#match.is_empty() || te.priority != 0 {
            return Err(Status::invalid_argument(
                "the default entry has no match and priority 0",
            ));
        }
        if te.counter_data.is_some() {
            return Err(Status::unimplemented(
                "softswitch keeps no direct counter for default entries",
            ));
        }
        // No action resets the default entry: the program's action, no metadata.
        let (call, data) = match te.action {
            None => (None, None),
            Some(_) => (
                Some(action_call(p, info, te.action.as_ref(), true)?),
                controller_data(te)?,
            ),
        };
        return p
            .switch
            .set_default_entry(table, call, data)
            .map_err(runtime_error);
    }
    // P4Runtime's rule: a priority above 0 where entries have one, else none.
    let with_priority = t.has_priority();
    if with_priority && te.priority <= 0 {
        return Err(Status::invalid_argument(
            "this table's entries need a priority above 0",
        ));
    }
    if !with_priority && te.priority != 0 {
        return Err(Status::invalid_argument(
            "this table's entries take no priority (it has no ternary, range or optional key)",
        ));
    }
    let matches = matches_of(p, table, info, te)?;
    let priority = i64::from(te.priority);
    let write = match kind {
        UpdateType::Insert => EntryWrite::Insert {
            entry: ir::Entry {
                matches,
                priority,
                action: action_call(p, info, te.action.as_ref(), false)?,
            },
            data: controller_data(te)?,
            counter: te.counter_data.as_ref().map(cell_of),
            idle_timeout: idle_timeout(te),
        },
        // An unset action leaves the action as it is; a set counter_data is written; the
        // metadata is replaced; a timeout that changes starts counting again, the same one
        // keeps counting (as PI).
        UpdateType::Modify => EntryWrite::Modify {
            matches,
            priority,
            change: EntryChange {
                action: match te.action {
                    Some(_) => Some(action_call(p, info, te.action.as_ref(), false)?),
                    None => None,
                },
                data: Some(controller_data(te)?),
                counter: te.counter_data.as_ref().map(cell_of),
                idle_timeout: Some(idle_timeout(te)),
            },
        },
        UpdateType::Delete => EntryWrite::Delete { matches, priority },
        UpdateType::Unspecified => unreachable!("refused in write"),
    };
    p.switch
        .write_entry(table, write)
        .map(drop)
        .map_err(runtime_error)
}

/// The idle timeout a written entry asks for (`idle_timeout_ns`, checked not negative; 0: none).
fn idle_timeout(te: &p4v1::TableEntry) -> Option<Duration> {
    u64::try_from(te.idle_timeout_ns)
        .ok()
        .filter(|&ns| ns != 0)
        .map(Duration::from_nanos)
}

/// The opaque `controller_metadata` and `metadata` (a deprecated field, still part of an entry)
/// of a written table entry, to keep with it: `None` when both are unset, `RESOURCE_EXHAUSTED`
/// past [`MAX_METADATA_BYTES`].
#[allow(deprecated)]
fn controller_data(te: &p4v1::TableEntry) -> Result<Option<ControllerData>, Status> {
    metadata_fits(&te.metadata)?;
    Ok(
        (te.controller_metadata != 0 || !te.metadata.is_empty()).then(|| ControllerData {
            cookie: te.controller_metadata,
            bytes: te.metadata.clone(),
        }),
    )
}

/// Refuses `metadata` past [`MAX_METADATA_BYTES`].
fn metadata_fits(metadata: &[u8]) -> Result<(), Status> {
    if metadata.len() > MAX_METADATA_BYTES {
        return Err(Status::resource_exhausted(format!(
            "metadata of {} bytes: softswitch keeps at most {MAX_METADATA_BYTES} \
             (entities::MAX_METADATA_BYTES)",
            metadata.len()
        )));
    }
    Ok(())
}

/// `entry` with the metadata kept with it (`data`).
#[allow(deprecated)]
fn with_metadata(data: Option<&ControllerData>, entry: p4v1::TableEntry) -> p4v1::TableEntry {
    match data {
        Some(data) => p4v1::TableEntry {
            controller_metadata: data.cookie,
            metadata: data.bytes.clone(),
            ..entry
        },
        None => entry,
    }
}

/// The entries of program table `t` that `filter` selects: all, the one with its key, or the
/// default entry.
fn table_entries(
    p: &Pipeline,
    t: usize,
    filter: &p4v1::TableEntry,
) -> Result<Vec<p4v1::TableEntry>, Status> {
    let Some(id) = table_id(p, t) else {
        return Ok(Vec::new());
    };
    let (_, info) = table_of(p, id)?;
    let program_table = &p.switch.program().tables[t];
    let with_counter = filter.counter_data.is_some() && program_table.direct_counter.is_some();
    let meter = program_table
        .direct_meter
        .filter(|_| filter.meter_config.is_some());
    // As PI, wildcard reads included: only the entries of a table with idle timeouts have a
    // time since their last hit.
    if filter.time_since_last_hit.is_some()
        && (filter.is_default_action || !supports_idle_timeout(info))
    {
        return Err(Status::invalid_argument(format!(
            "table {}{} has no idle timeout: time_since_last_hit must be unset in the read",
            program_table.name,
            if filter.is_default_action {
                "'s default entry"
            } else {
                ""
            }
        )));
    }
    if filter.is_default_action {
        let entry = p4v1::TableEntry {
            table_id: id,
            action: Some(p4rt_action(
                p,
                p.switch.default_action(t).map_err(runtime_error)?,
            )),
            is_default_action: true,
            ..Default::default()
        };
        let data = p.switch.entry_data(t, None).map_err(runtime_error)?;
        return Ok(vec![with_metadata(data, entry)]);
    }
    let wanted = if filter.r#match.is_empty() {
        None
    } else {
        Some(matches_of(
            p,
            t,
            info,
            &p4v1::TableEntry {
                table_id: id,
                ..filter.clone()
            },
        )?)
    };
    let now_us = p.switch.now_us();
    Ok(p.switch
        .entries(t)
        .map_err(runtime_error)?
        .filter(|(_, i)| wanted.as_ref().is_none_or(|w| *w == i.entry.matches))
        .filter(|(_, i)| filter.priority == 0 || i64::from(filter.priority) == i.entry.priority)
        .map(|(h, i)| p4v1::TableEntry {
            action: Some(p4rt_action(p, &i.entry.action)),
            counter_data: with_counter.then(|| data_of(i.counter)),
            meter_config: meter
                .and_then(|m| p.switch.read_cell(m, CellIndex::Entry(h)).ok().flatten())
                .map(p4rt_meter_config),
            is_const: program_table.const_entries_fixed,
            time_since_last_hit: filter.time_since_last_hit.map(|_| {
                let last_hit_us = p.switch.last_hit_us(t, h).unwrap_or(now_us);
                p4v1::table_entry::IdleTimeout {
                    elapsed_ns: nanos(Duration::from_micros(now_us.saturating_sub(last_hit_us))),
                }
            }),
            ..keyed_entry(p, (t, id, info), i)
        })
        .collect())
}

/// Entry `i` of program table `t` (P4Info id `id`) by its key — table id, match and
/// priority — with its metadata and idle timeout, and nothing else.
fn keyed_entry(
    p: &Pipeline,
    (t, id, info): (usize, u32, &p4i::Table),
    i: &Installed,
) -> p4v1::TableEntry {
    let entry = p4v1::TableEntry {
        table_id: id,
        r#match: p4rt_matches(p, t, info, &i.entry.matches),
        priority: if p.switch.program().tables[t].has_priority() {
            i.entry.priority as i32
        } else {
            0
        },
        idle_timeout_ns: i.idle_timeout.map_or(0, |timeout| nanos(timeout.ttl)),
        ..Default::default()
    };
    with_metadata(i.data.as_deref(), entry)
}

/// Entry `handle` of program table `t` as an idle-timeout notification names it: its key
/// (table id, match, priority), `controller_metadata`, `metadata` and `idle_timeout_ns`, as the
/// specification asks, without its action (as PI leaves it out). `None` if the table is not in
/// P4Info or has no such entry.
pub fn idle_entry(p: &Pipeline, t: usize, handle: usize) -> Option<p4v1::TableEntry> {
    let id = table_id(p, t)?;
    let (_, info) = table_of(p, id).ok()?;
    let installed = p.switch.entry(t, handle).ok()?;
    Some(keyed_entry(p, (t, id, info), installed))
}

/// A duration in nanoseconds, as P4Runtime's int64 fields carry them.
fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Egress port and replication id of each replica (the deprecated `egress_port` is still what
/// many clients send). As the specification says, the (port, instance) pairs must be unique
/// (INVALID_ARGUMENT); backup replicas are not supported (UNIMPLEMENTED).
#[allow(deprecated)]
fn replicas(replicas: &[p4v1::Replica]) -> Result<Vec<(u16, u16)>, Status> {
    if replicas.iter().any(|r| !r.backup_replicas.is_empty()) {
        return Err(Status::unimplemented(
            "softswitch does not support backup replicas",
        ));
    }
    let pairs = replicas
        .iter()
        .map(|r| {
            let port = match &r.port_kind {
                Some(p4v1::replica::PortKind::EgressPort(p)) => u128::from(*p),
                Some(p4v1::replica::PortKind::Port(b)) => decode(b, 9, "replica port")?,
                None => return Err(Status::invalid_argument("a replica needs a port")),
            };
            let port = u16::try_from(port)
                .ok()
                .filter(|&p| p < 511)
                .ok_or_else(|| {
                    Status::invalid_argument(format!("port {port} is not a port (0..510)"))
                })?;
            let rid = u16::try_from(r.instance).map_err(|_| {
                Status::invalid_argument("a replica's instance must fit in 16 bits")
            })?;
            Ok((port, rid))
        })
        .collect::<Result<Vec<_>, Status>>()?;
    let mut seen = std::collections::BTreeSet::new();
    if let Some((port, rid)) = pairs.iter().find(|pair| !seen.insert(**pair)) {
        return Err(Status::invalid_argument(format!(
            "port {port} instance {rid} is replicated twice"
        )));
    }
    Ok(pairs)
}

fn write_pre(
    p: &mut Pipeline,
    kind: UpdateType,
    pre: &p4v1::PacketReplicationEngineEntry,
) -> Result<(), Status> {
    use p4v1::packet_replication_engine_entry::Type;
    let exists_check = |exists: bool| match (kind, exists) {
        (UpdateType::Insert, true) => Err(Status::already_exists("it already exists")),
        (UpdateType::Modify | UpdateType::Delete, false) => {
            Err(Status::not_found("it does not exist"))
        }
        _ => Ok(()),
    };
    match &pre.r#type {
        Some(Type::MulticastGroupEntry(g)) => {
            let id = g.multicast_group_id;
            let group = u16::try_from(id).ok().filter(|&g| g != 0).ok_or_else(|| {
                Status::invalid_argument(
                    "a multicast group id is 1..65535 (standard_metadata.mcast_grp is 16 bits)",
                )
            })?;
            exists_check(p.multicast_groups.contains_key(&id))?;
            let kept = p.multicast_groups.get(&id).map_or(0, kept_footprint);
            if kind == UpdateType::Delete {
                p.switch.remove_multicast_group(group);
                p.multicast_groups.remove(&id);
                let _ = p.switch.charge_owner_state(kept, 0);
            } else {
                metadata_fits(&g.metadata)?;
                let replicas = replicas(&g.replicas)?;
                // The copy kept for Read is charged too.
                p.switch
                    .charge_owner_state(kept, kept_footprint(g))
                    .map_err(runtime_error)?;
                if let Err(e) = p.switch.set_multicast_group(group, &replicas) {
                    let _ = p.switch.charge_owner_state(kept_footprint(g), kept);
                    return Err(runtime_error(e));
                }
                p.multicast_groups.insert(id, g.clone());
            }
            Ok(())
        }
        Some(Type::CloneSessionEntry(s)) => {
            let id = s.session_id;
            if id == 0 {
                return Err(Status::invalid_argument(
                    "clone session id 0 is not a session",
                ));
            }
            exists_check(p.clone_sessions.contains_key(&id))?;
            let kept = p.clone_sessions.get(&id).map_or(0, kept_footprint);
            if kind == UpdateType::Delete {
                p.switch.remove_clone_session(id);
                p.clone_sessions.remove(&id);
                let _ = p.switch.charge_owner_state(kept, 0);
                return Ok(());
            }
            let ports = replicas(&s.replicas)?;
            let [(port, _)] = ports.as_slice() else {
                return Err(Status::unimplemented("softswitch clone sessions send to exactly one replica (as BMv2's mirroring_add)"));
            };
            if s.packet_length_bytes != 0 {
                return Err(Status::unimplemented(
                    "clone sessions do not truncate (packet_length_bytes must be 0)",
                ));
            }
            if s.class_of_service != 0 {
                return Err(Status::unimplemented(
                    "clone sessions have no class of service (class_of_service must be 0)",
                ));
            }
            p.switch
                .charge_owner_state(kept, kept_footprint(s))
                .map_err(runtime_error)?;
            if let Err(e) = p.switch.set_clone_session(id, *port) {
                let _ = p.switch.charge_owner_state(kept_footprint(s), kept);
                return Err(runtime_error(e));
            }
            p.clone_sessions.insert(id, s.clone());
            Ok(())
        }
        None => Err(Status::invalid_argument(
            "a packet replication engine entry must be a multicast group or a clone session",
        )),
    }
}

/// What the copy of a replication entry kept for Read is charged against the switch's state
/// budget: its encoded size and the map's node.
fn kept_footprint(entry: &impl prost::Message) -> usize {
    softswitch_core::budget::REPLICATION_ITEM_BYTES + entry.encoded_len()
}
