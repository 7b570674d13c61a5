//! The audit trail of the Thrift services: which of BMv2's calls change the switch
//! ([`MUTATIONS`]), and what a connection's current call is as the wire shows it — its name and
//! the argument naming what it changes, read as the call is decoded; how it ended, as its
//! answer is written — recorded through [`crate::audit`] once the call is answered. Read off
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

/// The most characters of an argument kept for the audit line (a name).
const MAX_TARGET_CHARS: usize = 256;

/// One connection's current call, as the audit trail sees it. The input protocol tells it
/// what it reads ([`Call::message_begun`] and the others), the [`Answer`] protocol what is
/// written back, and [`Call::answered`] records a mutating call once its answer is written.
#[derive(Default)]
pub(super) struct Call {
    /// The method (without the service's prefix) and its entry in [`MUTATIONS`], if it is one.
    method: RefCell<String>,
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
        *self.method.borrow_mut() = method.chars().take(MAX_TARGET_CHARS).collect();
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

    /// The reader read `value`, as text; kept if it is the argument naming the target.
    pub(super) fn value_read(&self, value: impl FnOnce() -> String) {
        let Some((_, Some((id, _)))) = self.mutation.get() else {
            return;
        };
        if self.depth.get() == 1 && self.field.get() == Some(*id) && self.target.borrow().is_none()
        {
            *self.target.borrow_mut() = Some(value().chars().take(MAX_TARGET_CHARS).collect());
        }
    }

    /// The call was answered: a mutating one is recorded, with `peer`.
    pub(super) fn answered(&self, peer: &str) {
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

    fn answer_value(&self, value: impl FnOnce() -> String) {
        let (depth, field) = (self.answer_depth.get(), self.answer_field.get());
        let mut error = self.error.borrow_mut();
        match self.answer.get() {
            // An application error (TApplicationException): field 1 is its message.
            Some(TMessageType::Exception) if depth == 1 && field == Some(1) => {
                *error = Some(format!("application error: {}", value()));
            }
            // A declared exception's first field is its code (`InvalidTableOperation code 7`).
            Some(TMessageType::Reply) if depth == 2 && field == Some(1) => {
                if let Some(e) = error.as_mut().filter(|e| !e.contains(' ')) {
                    e.push_str(&format!(" code {}", value()));
                }
            }
            _ => {}
        }
    }
}

/// An output protocol that tells [`Call`] what the answer says, as it is written.
pub(super) struct Answer<'c, P> {
    /// The protocol written to.
    pub(super) inner: P,
    /// The call being answered.
    pub(super) call: &'c Call,
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
        self.call.answer_value(|| i.to_string());
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
        self.call
            .answer_value(|| s.chars().take(MAX_TARGET_CHARS).collect());
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
