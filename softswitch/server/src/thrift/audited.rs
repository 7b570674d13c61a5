//! The audit trail of the Thrift services: which of BMv2's calls change the switch
//! ([`MUTATIONS`]), and what a connection's current call is as the wire shows it — its name and
//! the argument naming what it changes, read as the call is decoded; how it ended, as its
//! answer is written — recorded through [`crate::audit`] as the answer's end is written, before
//! it is sent (so that a change is recorded even if the client is gone, and before the client
//! has its answer). Read off
//! the wire rather than in each handler, so that no mutating call of the three services can be
//! served unrecorded.

use std::cell::{Cell, RefCell};

use thrift::protocol::{
    TFieldIdentifier, TListIdentifier, TMapIdentifier, TMessageIdentifier, TMessageType,
    TOutputProtocol, TSetIdentifier, TStructIdentifier,
};

use crate::audit::{self, Surface};

/// A call that changes the switch: its method name, and the argument (its field id in BMv2's
/// IDL, and what it names) that says what it changes, when one does.
type Mutation = (&'static str, Option<(i16, &'static str)>);

/// The calls that change the switch.
const MUTATIONS: &[Mutation] = &[
    // standard: tables, action profiles, counters, meters, registers, learning, value sets.
    ("bm_mt_clear_entries", Some((2, "table"))),
    ("bm_mt_add_entry", Some((2, "table"))),
    ("bm_mt_set_default_action", Some((2, "table"))),
    ("bm_mt_reset_default_entry", Some((2, "table"))),
    ("bm_mt_delete_entry", Some((2, "table"))),
    ("bm_mt_modify_entry", Some((2, "table"))),
    ("bm_mt_set_entry_ttl", Some((2, "table"))),
    ("bm_mt_act_prof_add_member", Some((2, "action profile"))),
    ("bm_mt_act_prof_delete_member", Some((2, "action profile"))),
    ("bm_mt_act_prof_modify_member", Some((2, "action profile"))),
    ("bm_mt_act_prof_create_group", Some((2, "action profile"))),
    ("bm_mt_act_prof_delete_group", Some((2, "action profile"))),
    (
        "bm_mt_act_prof_add_member_to_group",
        Some((2, "action profile")),
    ),
    (
        "bm_mt_act_prof_remove_member_from_group",
        Some((2, "action profile")),
    ),
    ("bm_mt_indirect_add_entry", Some((2, "table"))),
    ("bm_mt_indirect_modify_entry", Some((2, "table"))),
    ("bm_mt_indirect_delete_entry", Some((2, "table"))),
    ("bm_mt_indirect_set_entry_ttl", Some((2, "table"))),
    ("bm_mt_indirect_set_default_member", Some((2, "table"))),
    ("bm_mt_indirect_reset_default_entry", Some((2, "table"))),
    ("bm_mt_indirect_ws_add_entry", Some((2, "table"))),
    ("bm_mt_indirect_ws_modify_entry", Some((2, "table"))),
    ("bm_mt_indirect_ws_set_default_group", Some((2, "table"))),
    ("bm_mt_reset_counters", Some((2, "table"))),
    ("bm_mt_write_counter", Some((2, "table"))),
    ("bm_mt_set_meter_rates", Some((2, "table"))),
    ("bm_counter_reset_all", Some((2, "counter"))),
    ("bm_counter_write", Some((2, "counter"))),
    ("bm_learning_ack", Some((2, "learn list"))),
    ("bm_learning_ack_buffer", Some((2, "learn list"))),
    ("bm_learning_set_timeout", Some((2, "learn list"))),
    ("bm_learning_set_buffer_size", Some((2, "learn list"))),
    ("bm_load_new_config", None),
    ("bm_swap_configs", None),
    ("bm_meter_array_set_rates", Some((2, "meter"))),
    ("bm_meter_set_rates", Some((2, "meter"))),
    ("bm_register_write", Some((2, "register"))),
    ("bm_register_write_range", Some((2, "register"))),
    ("bm_register_reset", Some((2, "register"))),
    ("bm_parse_vset_add", Some((2, "value set"))),
    ("bm_parse_vset_remove", Some((2, "value set"))),
    ("bm_parse_vset_clear", Some((2, "value set"))),
    ("bm_dev_mgr_add_port", Some((1, "interface"))),
    ("bm_dev_mgr_remove_port", Some((1, "port"))),
    ("bm_set_crc16_custom_parameters", Some((2, "calculation"))),
    ("bm_set_crc32_custom_parameters", Some((2, "calculation"))),
    ("bm_set_toeplitz_hash_key", Some((2, "calculation"))),
    ("bm_reset_state", None),
    // simple_pre_lag: multicast groups, nodes, LAGs.
    ("bm_mc_mgrp_create", Some((2, "group"))),
    ("bm_mc_mgrp_destroy", Some((2, "group handle"))),
    ("bm_mc_node_create", Some((2, "rid"))),
    ("bm_mc_node_associate", Some((2, "group handle"))),
    ("bm_mc_node_dissociate", Some((2, "group handle"))),
    ("bm_mc_node_destroy", Some((2, "node handle"))),
    ("bm_mc_node_update", Some((2, "node handle"))),
    ("bm_mc_set_lag_membership", Some((2, "lag"))),
    // simple_switch: mirroring, queues.
    ("mirroring_mapping_add", Some((1, "mirror"))),
    ("mirroring_mapping_delete", Some((1, "mirror"))),
    ("mirroring_session_add", Some((1, "mirror"))),
    ("mirroring_session_delete", Some((1, "mirror"))),
    ("set_egress_priority_queue_depth", Some((1, "port"))),
    ("set_egress_queue_depth", Some((1, "port"))),
    ("set_all_egress_queue_depths", None),
    ("set_egress_priority_queue_rate", Some((1, "port"))),
    ("set_egress_queue_rate", Some((1, "port"))),
    ("set_all_egress_queue_rates", None),
];

/// One connection's current call, as the audit trail sees it. The input protocol tells it
/// what it reads ([`Call::message_begun`] and the others), and the [`Answer`] protocol what is
/// written back, recording a mutating call as its answer's end is written.
#[derive(Default)]
pub(super) struct Call {
    /// The call's entry in [`MUTATIONS`], if it is one.
    mutation: Cell<Option<&'static Mutation>>,
    /// How deeply the reader is in structures (1: the arguments), and the field it is in.
    depth: Cell<u32>,
    field: Cell<Option<i16>>,
    /// The argument naming what the call changes, once read.
    target: RefCell<Option<String>>,
    /// The answer: its message type, depth and field, and the error it says, if any.
    answer: Cell<Option<TMessageType>>,
    answer_depth: Cell<u32>,
    answer_field: Cell<Option<i16>>,
    error: RefCell<Option<String>>,
}

impl Call {
    /// A call named `name` (`standard:bm_mt_add_entry`) begins.
    pub(super) fn message_begun(&self, name: &str) {
        let method = name.rsplit(':').next().unwrap_or(name);
        self.mutation
            .set(MUTATIONS.iter().find(|(m, _)| *m == method));
        self.depth.set(0);
        self.field.set(None);
        *self.target.borrow_mut() = None;
        self.answer.set(None);
        self.answer_depth.set(0);
        self.answer_field.set(None);
        *self.error.borrow_mut() = None;
    }

    /// The reader entered a structure.
    pub(super) fn struct_begun(&self) {
        self.depth.set(self.depth.get() + 1);
    }

    /// The reader left a structure.
    pub(super) fn struct_ended(&self) {
        self.depth.set(self.depth.get().saturating_sub(1));
    }

    /// The reader is at field `id` (none at a structure's end).
    pub(super) fn field_begun(&self, field: &TFieldIdentifier) {
        self.field.set(field.id);
    }

    /// The reader read `value` (handed back as it came); kept (as much of it as an audit line
    /// carries) if it is the argument naming the target. A field sent twice is kept the last
    /// time, as the generated decoder keeps it.
    pub(super) fn value_read<V: std::fmt::Display>(
        &self,
        value: thrift::Result<V>,
    ) -> thrift::Result<V> {
        let value = value?;
        if let Some((_, Some((id, _)))) = self.mutation.get() {
            if self.depth.get() == 1 && self.field.get() == Some(*id) {
                *self.target.borrow_mut() = Some(audit::Field::cut(&value));
            }
        }
        Ok(value)
    }

    /// The call's answer is written: a mutating call is recorded, with `peer`.
    fn answered(&self, peer: &str) {
        let Some((method, target)) = self.mutation.get() else {
            return;
        };
        let result = match (self.answer.get(), self.error.borrow().clone()) {
            (Some(TMessageType::Reply), None) => Ok(()),
            (_, Some(error)) => Err(error),
            (_, None) => Err("no answer".to_string()),
        };
        let what = || match (target, self.target.borrow().as_deref()) {
            (Some((_, label)), Some(value)) => format!("{label} {value}"),
            (Some((_, label)), None) => format!("{label} (not given)"),
            (None, _) => "the switch".to_string(),
        };
        audit::record(Surface::Thrift, peer, method, what, result);
    }

    fn answer_struct_begun(&self, name: &str) {
        let depth = self.answer_depth.get() + 1;
        self.answer_depth.set(depth);
        // A reply's result structure holds the success value (field 0) or one of the
        // exceptions the IDL declares (fields 1 and up): the exception's structure names it.
        let exception = self.answer_field.get().is_some_and(|id| id >= 1);
        if depth == 2 && exception && self.answer.get() == Some(TMessageType::Reply) {
            *self.error.borrow_mut() = Some(name.to_string());
        }
    }

    fn answer_value(&self, value: &dyn std::fmt::Display) {
        let (depth, field) = (self.answer_depth.get(), self.answer_field.get());
        let mut error = self.error.borrow_mut();
        match self.answer.get() {
            // An application error (TApplicationException): field 1 is its message.
            Some(TMessageType::Exception) if depth == 1 && field == Some(1) => {
                *error = Some(format!("application error: {}", audit::Field::cut(value)));
            }
            // A declared exception's first field is its code (`InvalidTableOperation code 7`).
            Some(TMessageType::Reply) if depth == 2 && field == Some(1) => {
                if let Some(e) = error.as_mut().filter(|e| !e.contains(' ')) {
                    e.push_str(&format!(" code {}", audit::Field::cut(value)));
                }
            }
            _ => {}
        }
    }
}

/// An output protocol that tells [`Call`] what the answer says, as it is written, and records
/// the call (from `peer`) as the answer's end is written.
pub(super) struct Answer<'c, P> {
    /// The protocol written to.
    pub(super) inner: P,
    /// The call being answered.
    pub(super) call: &'c Call,
    /// Who sent it.
    pub(super) peer: &'c str,
}

impl<P: TOutputProtocol> TOutputProtocol for Answer<'_, P> {
    fn write_message_begin(&mut self, identifier: &TMessageIdentifier) -> thrift::Result<()> {
        self.call.answer.set(Some(identifier.message_type));
        if identifier.message_type == TMessageType::Exception {
            *self.call.error.borrow_mut() = Some("application error".into());
        }
        self.inner.write_message_begin(identifier)
    }
    fn write_message_end(&mut self) -> thrift::Result<()> {
        self.call.answered(self.peer);
        self.inner.write_message_end()
    }
    fn write_struct_begin(&mut self, identifier: &TStructIdentifier) -> thrift::Result<()> {
        self.call.answer_struct_begun(&identifier.name);
        self.inner.write_struct_begin(identifier)
    }
    fn write_struct_end(&mut self) -> thrift::Result<()> {
        let depth = self.call.answer_depth.get();
        self.call.answer_depth.set(depth.saturating_sub(1));
        self.inner.write_struct_end()
    }
    fn write_field_begin(&mut self, identifier: &TFieldIdentifier) -> thrift::Result<()> {
        self.call.answer_field.set(identifier.id);
        self.inner.write_field_begin(identifier)
    }
    fn write_field_end(&mut self) -> thrift::Result<()> {
        self.inner.write_field_end()
    }
    fn write_field_stop(&mut self) -> thrift::Result<()> {
        self.inner.write_field_stop()
    }
    fn write_bool(&mut self, b: bool) -> thrift::Result<()> {
        self.inner.write_bool(b)
    }
    fn write_bytes(&mut self, b: &[u8]) -> thrift::Result<()> {
        self.inner.write_bytes(b)
    }
    fn write_i8(&mut self, i: i8) -> thrift::Result<()> {
        self.inner.write_i8(i)
    }
    fn write_i16(&mut self, i: i16) -> thrift::Result<()> {
        self.inner.write_i16(i)
    }
    fn write_i32(&mut self, i: i32) -> thrift::Result<()> {
        self.call.answer_value(&i);
        self.inner.write_i32(i)
    }
    fn write_i64(&mut self, i: i64) -> thrift::Result<()> {
        self.inner.write_i64(i)
    }
    fn write_double(&mut self, d: f64) -> thrift::Result<()> {
        self.inner.write_double(d)
    }
    fn write_uuid(&mut self, uuid: &uuid::Uuid) -> thrift::Result<()> {
        self.inner.write_uuid(uuid)
    }
    fn write_string(&mut self, s: &str) -> thrift::Result<()> {
        self.call.answer_value(&s);
        self.inner.write_string(s)
    }
    fn write_list_begin(&mut self, identifier: &TListIdentifier) -> thrift::Result<()> {
        self.inner.write_list_begin(identifier)
    }
    fn write_list_end(&mut self) -> thrift::Result<()> {
        self.inner.write_list_end()
    }
    fn write_set_begin(&mut self, identifier: &TSetIdentifier) -> thrift::Result<()> {
        self.inner.write_set_begin(identifier)
    }
    fn write_set_end(&mut self) -> thrift::Result<()> {
        self.inner.write_set_end()
    }
    fn write_map_begin(&mut self, identifier: &TMapIdentifier) -> thrift::Result<()> {
        self.inner.write_map_begin(identifier)
    }
    fn write_map_end(&mut self) -> thrift::Result<()> {
        self.inner.write_map_end()
    }
    fn flush(&mut self) -> thrift::Result<()> {
        self.inner.flush()
    }
    fn write_byte(&mut self, b: u8) -> thrift::Result<()> {
        self.inner.write_byte(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thrift::protocol::{TBinaryInputProtocol, TInputProtocol, TType};

    /// The target `call` keeps when the protocol reads `bytes` (one call of i16, i32 and string
    /// arguments) through it, as the generated decoders read.
    fn target_of(bytes: &[u8]) -> Option<String> {
        let call = Call::default();
        let mut input = super::super::Paced {
            inner: TBinaryInputProtocol::new(bytes, true),
            pace: None,
            call: &call,
        };
        input.read_message_begin().unwrap();
        input.read_struct_begin().unwrap();
        loop {
            let field = input.read_field_begin().unwrap();
            match field.field_type {
                TType::Stop => break,
                TType::I16 => drop(input.read_i16().unwrap()),
                TType::I32 => drop(input.read_i32().unwrap()),
                TType::String => drop(input.read_string().unwrap()),
                other => panic!("no {other:?} argument in these tests"),
            }
            input.read_field_end().unwrap();
        }
        input.read_struct_end().unwrap();
        input.read_message_end().unwrap();
        call.target.take()
    }

    /// A strict binary-protocol call of `name` whose arguments are `fields`, ended.
    fn call_bytes(name: &str, fields: &[u8]) -> Vec<u8> {
        let mut b = 0x8001_0001u32.to_be_bytes().to_vec();
        b.extend((name.len() as i32).to_be_bytes());
        b.extend(name.as_bytes());
        b.extend(0i32.to_be_bytes());
        b.extend(fields);
        b.push(0);
        b
    }

    fn string_field(id: i16, value: &str) -> Vec<u8> {
        let mut b = vec![11u8];
        b.extend(id.to_be_bytes());
        b.extend((value.len() as i32).to_be_bytes());
        b.extend(value.as_bytes());
        b
    }

    #[test]
    fn a_target_sent_twice_is_the_last_one_as_the_decoder_keeps() {
        let fields = [
            vec![8u8, 0, 1, 0, 0, 0, 0],
            string_field(2, "decoy"),
            string_field(2, "MyIngress.route"),
        ]
        .concat();
        let bytes = call_bytes("standard:bm_mt_clear_entries", &fields);
        assert_eq!(target_of(&bytes).as_deref(), Some("MyIngress.route"));
    }

    #[test]
    fn an_i16_target_is_read() {
        // bm_mc_set_lag_membership(cxt_id: i32 = 1, lag_index: i16 = 2, port_map: string = 3).
        let fields = [vec![8u8, 0, 1, 0, 0, 0, 0], vec![6u8, 0, 2, 0, 5]].concat();
        let bytes = call_bytes("simple_pre_lag:bm_mc_set_lag_membership", &fields);
        assert_eq!(target_of(&bytes).as_deref(), Some("5"));
    }

    /// The calls of the three services that change nothing (not audited).
    const READS: &[&str] = &[
        "bm_counter_read",
        "bm_dev_mgr_show_ports",
        "bm_get_config",
        "bm_get_config_md5",
        "bm_get_id_from_name",
        "bm_mc_get_entries",
        "bm_meter_get_rates",
        "bm_mgmt_get_info",
        "bm_mt_act_prof_get_group",
        "bm_mt_act_prof_get_groups",
        "bm_mt_act_prof_get_member",
        "bm_mt_act_prof_get_members",
        "bm_mt_get_default_entry",
        "bm_mt_get_entries",
        "bm_mt_get_entry",
        "bm_mt_get_entry_from_key",
        "bm_mt_get_meter_rates",
        "bm_mt_get_num_entries",
        "bm_mt_read_counter",
        "bm_parse_vset_get",
        "bm_register_read",
        "bm_register_read_all",
        "bm_serialize_state",
        "get_time_elapsed_us",
        "get_time_since_epoch_us",
        "mirroring_mapping_get_egress_port",
        "mirroring_session_get",
    ];

    #[test]
    fn every_generated_handler_is_a_mutation_or_a_known_read() {
        let generated = [
            include_str!("../../vendor/bmv2_thrift/standard.rs"),
            include_str!("../../vendor/bmv2_thrift/simple_pre_lag.rs"),
            include_str!("../../vendor/bmv2_thrift/simple_switch.rs"),
        ];
        let handlers: std::collections::BTreeSet<&str> = generated
            .iter()
            .flat_map(|source| source.split("fn handle_").skip(1))
            .map(|rest| rest.split('(').next().unwrap())
            .collect();
        let audited: std::collections::BTreeSet<&str> = MUTATIONS
            .iter()
            .map(|(m, _)| *m)
            .chain(READS.iter().copied())
            .collect();
        assert_eq!(audited.len(), MUTATIONS.len() + READS.len(), "listed twice");
        // A new IDL method must be put in MUTATIONS (audited) or READS (knowingly not).
        assert_eq!(handlers, audited);
    }
}
