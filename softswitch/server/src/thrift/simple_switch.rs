//! BMv2's `simple_switch` Thrift service over the switch's runtime interface: mirroring
//! (clone) sessions to a port, egress queue depths and rates (per port and priority, per port,
//! or for all), and the switch's clock. Sessions to a multicast group are refused. Like
//! BMv2's, the queue calls answer 0 for done and 1 for refused (the reason is in the log).

use std::sync::Arc;

use softswitch_core::runtime::RuntimeError;
use softswitch_core::switch::Switch;
use thrift::{ApplicationError, ApplicationErrorKind};

use super::bindings::simple_switch::*;
use super::Runtime;

/// The `simple_switch` service.
pub(super) struct SimpleSwitch(pub(super) Arc<Runtime>);

fn not_found() -> thrift::Error {
    InvalidMirroringOperation::new(MirroringOperationErrorCode::SESSION_NOT_FOUND).into()
}

/// A session id from the wire (BMv2's are not negative).
fn session(id: i32) -> Option<u32> {
    u32::try_from(id).ok()
}

/// A port from the wire.
fn port(p: i32) -> Option<u16> {
    u16::try_from(p).ok()
}

/// A queue call's answer: 0 done, 1 refused (said in the log).
fn queue_answer(call: &str, r: Result<(), RuntimeError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            super::note!(info, "thrift {call}: {e}");
            1
        }
    }
}

impl SimpleSwitch {
    /// Runs `set` on the queues `port_num` and `priority` pick (`None`: all); 1 if either is
    /// out of range.
    fn queues(
        &self,
        call: &'static str,
        port_num: Option<i32>,
        priority: Option<i32>,
        set: impl FnOnce(&mut Switch, Option<u16>, Option<u8>) -> Result<(), RuntimeError>
            + Send
            + 'static,
    ) -> thrift::Result<i32> {
        self.0.on_switch(move |s| {
            let (Some(port), Some(priority)) = (pick(port_num), pick(priority)) else {
                super::note!(info, "thrift {call}: a port or priority out of range");
                return Ok(1);
            };
            Ok(queue_answer(call, set(s, port, priority)))
        })
    }

    /// Sets the depth (packets) of the queues `port_num` and `priority` pick.
    fn queue_depth(
        &self,
        port_num: Option<i32>,
        priority: Option<i32>,
        depth: i32,
    ) -> thrift::Result<i32> {
        // A negative depth is refused as too large a one is.
        let depth = usize::try_from(depth).unwrap_or(usize::MAX);
        self.queues(
            "set_queue_depth",
            port_num,
            priority,
            move |s, port, prio| s.set_queue_depth(port, prio, depth),
        )
    }

    /// Sets the rate (packets per second) of the queues `port_num` and `priority` pick.
    fn queue_rate(
        &self,
        port_num: Option<i32>,
        priority: Option<i32>,
        rate_pps: i64,
    ) -> thrift::Result<i32> {
        let Ok(rate) = u64::try_from(rate_pps) else {
            super::note!(info, "thrift set_queue_rate: a negative rate");
            return Ok(1);
        };
        self.queues(
            "set_queue_rate",
            port_num,
            priority,
            move |s, port, prio| s.set_queue_rate(port, prio, Some(rate)),
        )
    }
}

/// `Some(None)` for all, `Some(Some(v))` for `v` in `T`'s range, `None` past it.
fn pick<T: TryFrom<i32>>(v: Option<i32>) -> Option<Option<T>> {
    match v {
        None => Some(None),
        Some(v) => T::try_from(v).ok().map(Some),
    }
}

impl SimpleSwitchSyncHandler for SimpleSwitch {
    fn handle_mirroring_mapping_add(
        &self,
        mirror_id: i32,
        egress_port: i32,
    ) -> thrift::Result<i32> {
        let (Some(id), Some(port)) = (session(mirror_id), port(egress_port)) else {
            return Ok(1);
        };
        self.0.on_switch(move |s| {
            Ok(match s.set_clone_session(id, port) {
                Ok(()) => 0,
                Err(e) => {
                    super::note!(info, "thrift mirroring_mapping_add: {e}");
                    1
                }
            })
        })
    }

    fn handle_mirroring_mapping_delete(&self, mirror_id: i32) -> thrift::Result<i32> {
        let Some(id) = session(mirror_id) else {
            return Ok(1);
        };
        self.0.on_switch(move |s| {
            let existed = s.clone_session(id).is_some();
            s.remove_clone_session(id);
            Ok(if existed { 0 } else { 1 })
        })
    }

    fn handle_mirroring_mapping_get_egress_port(&self, mirror_id: i32) -> thrift::Result<i32> {
        let Some(id) = session(mirror_id) else {
            return Ok(-1);
        };
        self.0
            .on_switch(move |s| Ok(s.clone_session(id).map_or(-1, i32::from)))
    }

    fn handle_mirroring_session_add(
        &self,
        mirror_id: i32,
        config: MirroringSessionConfig,
    ) -> thrift::Result<()> {
        if config.mgid.is_some() {
            super::note!(
                warn,
                "thrift mirroring_add_mc: not supported by softswitch: clone sessions to a \
                 multicast group"
            );
            return Err(thrift::Error::Application(ApplicationError::new(
                ApplicationErrorKind::InternalError,
                "softswitch's clone sessions send to a port, not to a multicast group",
            )));
        }
        let (Some(id), Some(port)) = (session(mirror_id), config.port.and_then(port)) else {
            return Err(not_found());
        };
        self.0.on_switch(move |s| {
            s.set_clone_session(id, port).map_err(|e| {
                thrift::Error::Application(ApplicationError::new(
                    ApplicationErrorKind::InternalError,
                    e.to_string(),
                ))
            })
        })
    }

    fn handle_mirroring_session_delete(&self, mirror_id: i32) -> thrift::Result<()> {
        let id = session(mirror_id).ok_or_else(not_found)?;
        self.0.on_switch(move |s| {
            s.clone_session(id).ok_or_else(not_found)?;
            s.remove_clone_session(id);
            Ok(())
        })
    }

    fn handle_mirroring_session_get(
        &self,
        mirror_id: i32,
    ) -> thrift::Result<MirroringSessionConfig> {
        let id = session(mirror_id).ok_or_else(not_found)?;
        self.0.on_switch(move |s| {
            let port = s.clone_session(id).ok_or_else(not_found)?;
            Ok(MirroringSessionConfig::new(i32::from(port), None))
        })
    }

    fn handle_set_egress_priority_queue_depth(
        &self,
        port_num: i32,
        priority: i32,
        depth_pkts: i32,
    ) -> thrift::Result<i32> {
        self.queue_depth(Some(port_num), Some(priority), depth_pkts)
    }

    fn handle_set_egress_queue_depth(&self, port_num: i32, depth_pkts: i32) -> thrift::Result<i32> {
        self.queue_depth(Some(port_num), None, depth_pkts)
    }

    fn handle_set_all_egress_queue_depths(&self, depth_pkts: i32) -> thrift::Result<i32> {
        self.queue_depth(None, None, depth_pkts)
    }

    fn handle_set_egress_priority_queue_rate(
        &self,
        port_num: i32,
        priority: i32,
        rate_pps: i64,
    ) -> thrift::Result<i32> {
        self.queue_rate(Some(port_num), Some(priority), rate_pps)
    }

    fn handle_set_egress_queue_rate(&self, port_num: i32, rate_pps: i64) -> thrift::Result<i32> {
        self.queue_rate(Some(port_num), None, rate_pps)
    }

    fn handle_set_all_egress_queue_rates(&self, rate_pps: i64) -> thrift::Result<i32> {
        self.queue_rate(None, None, rate_pps)
    }

    fn handle_get_time_elapsed_us(&self) -> thrift::Result<i64> {
        self.0.on_switch(|s| Ok(s.now_us() as i64))
    }

    fn handle_get_time_since_epoch_us(&self) -> thrift::Result<i64> {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(since.as_micros() as i64)
    }
}
