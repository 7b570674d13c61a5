//! Reading a P4Info: the preambles (names, ids, aliases) of its entities in one walk, for
//! readers that look an entity up by name or id whatever its kind; and the fields of an entity
//! (an action's parameters, a controller header's metadata) by id, name and width whatever
//! their kind.

use crate::p4::config::v1::{
    action, controller_packet_metadata, Action, ActionProfile, ControllerPacketMetadata, Counter,
    Digest, DirectCounter, DirectMeter, Meter, P4Info, Preamble, Register, Table, ValueSet,
};

/// An entity of a P4Info that may carry a preamble (a controller's P4Info may leave it out).
pub trait Entity {
    /// Its preamble, if it has one.
    fn preamble(&self) -> Option<&Preamble>;
}

/// [`Entity`] for P4Info's entity messages, each with its `preamble` field.
macro_rules! entities {
    ($($entity:ty),* $(,)?) => {
        $(impl Entity for $entity {
            fn preamble(&self) -> Option<&Preamble> {
                self.preamble.as_ref()
            }
        })*
    };
}

entities!(
    Table,
    Action,
    ActionProfile,
    Counter,
    DirectCounter,
    Meter,
    DirectMeter,
    ControllerPacketMetadata,
    ValueSet,
    Register,
    Digest,
);

/// A field of a P4Info entity that a controller names by id: an action's parameter, a
/// controller packet metadata field.
pub trait Field {
    /// Its id, name and width in bits.
    fn id_name_width(&self) -> (u32, &str, i32);
}

impl Field for action::Param {
    fn id_name_width(&self) -> (u32, &str, i32) {
        (self.id, &self.name, self.bitwidth)
    }
}

impl Field for controller_packet_metadata::Metadata {
    fn id_name_width(&self) -> (u32, &str, i32) {
        (self.id, &self.name, self.bitwidth)
    }
}

/// The id, name and width of each of `fields`, in order.
pub fn fields_of<T: Field>(fields: &[T]) -> Vec<(u32, &str, i32)> {
    fields.iter().map(T::id_name_width).collect()
}

/// The preambles of `entities` that have one.
pub fn preambles_of<T: Entity>(entities: &[T]) -> impl Iterator<Item = &Preamble> {
    entities.iter().filter_map(T::preamble)
}

/// The preamble of every entity of `info` that has one (externs' instances do not): tables,
/// actions, the instances of [`instance_preambles`], controller packet metadata, value sets,
/// digests.
pub fn preambles(info: &P4Info) -> impl Iterator<Item = &Preamble> {
    preambles_of(&info.tables)
        .chain(preambles_of(&info.actions))
        .chain(instance_preambles(info))
        .chain(preambles_of(&info.controller_packet_metadata))
        .chain(preambles_of(&info.value_sets))
        .chain(preambles_of(&info.digests))
}

/// The preamble of every entity of `info` that names an instance of an extern in the program
/// (a BMv2 JSON's or softswitch's `instances`): counters, direct counters, meters, direct
/// meters, registers and action profiles, in that order.
pub fn instance_preambles(info: &P4Info) -> impl Iterator<Item = &Preamble> {
    preambles_of(&info.counters)
        .chain(preambles_of(&info.direct_counters))
        .chain(preambles_of(&info.meters))
        .chain(preambles_of(&info.direct_meters))
        .chain(preambles_of(&info.registers))
        .chain(preambles_of(&info.action_profiles))
}
