//! Reading a P4Info: the preambles (names, ids, aliases) of its entities in one walk, for
//! readers that look an entity up by name or id whatever its kind.

use crate::p4::config::v1::{P4Info, Preamble};

/// The preamble of every entity of `info` that has one (externs' instances do not), in the
/// order of P4Info's fields: tables, actions, action profiles, counters, direct counters,
/// meters, direct meters, controller packet metadata, value sets, registers, digests.
pub fn preambles(info: &P4Info) -> impl Iterator<Item = &Preamble> {
    of(&info.tables, |e| e.preamble.as_ref())
        .chain(of(&info.actions, |e| e.preamble.as_ref()))
        .chain(of(&info.action_profiles, |e| e.preamble.as_ref()))
        .chain(of(&info.counters, |e| e.preamble.as_ref()))
        .chain(of(&info.direct_counters, |e| e.preamble.as_ref()))
        .chain(of(&info.meters, |e| e.preamble.as_ref()))
        .chain(of(&info.direct_meters, |e| e.preamble.as_ref()))
        .chain(of(&info.controller_packet_metadata, |e| {
            e.preamble.as_ref()
        }))
        .chain(of(&info.value_sets, |e| e.preamble.as_ref()))
        .chain(of(&info.registers, |e| e.preamble.as_ref()))
        .chain(of(&info.digests, |e| e.preamble.as_ref()))
}

/// The preamble of every entity of `info` that names an instance of an extern in the program
/// (a BMv2 JSON's or softswitch's `instances`): counters, direct counters, meters, direct
/// meters, registers and action profiles, in that order.
pub fn instance_preambles(info: &P4Info) -> impl Iterator<Item = &Preamble> {
    of(&info.counters, |e| e.preamble.as_ref())
        .chain(of(&info.direct_counters, |e| e.preamble.as_ref()))
        .chain(of(&info.meters, |e| e.preamble.as_ref()))
        .chain(of(&info.direct_meters, |e| e.preamble.as_ref()))
        .chain(of(&info.registers, |e| e.preamble.as_ref()))
        .chain(of(&info.action_profiles, |e| e.preamble.as_ref()))
}

/// The preambles of `entities` that have one.
fn of<T>(entities: &[T], preamble: fn(&T) -> Option<&Preamble>) -> impl Iterator<Item = &Preamble> {
    entities.iter().filter_map(preamble)
}
