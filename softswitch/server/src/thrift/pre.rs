//! BMv2's `simple_pre_lag` Thrift service (the packet replication engine) over the switch's
//! runtime interface: multicast groups (a group's handle is its id, as BMv2's) and replication
//! nodes (a replication id and ports; handles as the switch assigns them, from 0), associated
//! to groups, and `mc_dump`'s JSON. LAGs are not supported: a node with LAG members and
//! `mc_set_lag_membership` are refused.

use std::sync::Arc;

use softswitch_core::runtime::RuntimeError;
use softswitch_core::switch::Switch;

use super::bindings::simple_pre_lag::*;
use super::Runtime;

/// The `simple_pre_lag` service.
pub(super) struct SimplePreLag(pub(super) Arc<Runtime>);

/// The most ports a port map may name: BMv2's port numbers are below 512.
const MAX_PORTS: usize = 512;

fn mc_op(code: McOperationErrorCode) -> thrift::Error {
    InvalidMcOperation::new(code).into()
}

/// The ports of BMv2's port map: a string of '0' and '1', port 0 last.
fn ports(map: &str) -> thrift::Result<Vec<u16>> {
    if map.len() > MAX_PORTS || map.bytes().any(|b| b != b'0' && b != b'1') {
        super::note!(
            info,
            "thrift mc: a port map of more than {MAX_PORTS} ports or not of 0 and 1"
        );
        return Err(mc_op(McOperationErrorCode::ERROR));
    }
    Ok(map
        .bytes()
        .rev()
        .enumerate()
        .filter(|&(_, b)| b == b'1')
        .map(|(port, _)| port as u16)
        .collect())
}

/// Refuses a LAG map that names any LAG.
fn no_lags(call: &str, map: &str) -> thrift::Result<()> {
    if map.bytes().any(|b| b == b'1') {
        super::note!(warn, "thrift {call}: not supported by softswitch: LAGs");
        return Err(mc_op(McOperationErrorCode::ERROR));
    }
    Ok(())
}

/// A group id or handle from the wire.
fn group(g: i32) -> thrift::Result<u16> {
    u16::try_from(g).map_err(|_| mc_op(McOperationErrorCode::INVALID_MGID))
}

/// A node handle from the wire.
fn node(h: i32) -> thrift::Result<usize> {
    usize::try_from(h).map_err(|_| mc_op(McOperationErrorCode::INVALID_L1_HANDLE))
}

/// BMv2's code for a refused group or node operation on `group` (if any).
fn refused(call: &str, switch: &Switch, group: Option<u16>, e: RuntimeError) -> thrift::Error {
    super::note!(info, "thrift {call}: {e}");
    if let RuntimeError::Budget(_) = e {
        return mc_op(McOperationErrorCode::TABLE_FULL);
    }
    let group_exists =
        group.is_none_or(|g| switch.multicast_groups().iter().any(|&(id, _)| id == g));
    mc_op(if group_exists {
        McOperationErrorCode::INVALID_L1_HANDLE
    } else {
        McOperationErrorCode::INVALID_MGRP_HANDLE
    })
}

impl SimplePreLag {
    /// Associates node `l1_handle` with group `mgrp_handle`, or dissociates it: `change` is
    /// the switch's method, `call` names it in the note of a refusal.
    fn link(
        &self,
        call: &'static str,
        mgrp_handle: BmMcMgrpHandle,
        l1_handle: BmMcL1Handle,
        change: fn(&mut Switch, u16, usize) -> Result<(), RuntimeError>,
    ) -> thrift::Result<()> {
        let (g, n) = (group(mgrp_handle)?, node(l1_handle)?);
        self.0
            .on_switch(move |s| change(s, g, n).map_err(|e| refused(call, s, Some(g), e)))
    }
}

impl SimplePreLAGSyncHandler for SimplePreLag {
    fn handle_bm_mc_mgrp_create(&self, _: i32, mgrp: BmMcMgrp) -> thrift::Result<BmMcMgrpHandle> {
        let g = group(mgrp)?;
        self.0.on_switch(move |s| {
            s.create_multicast_group(g)
                .map_err(|e| refused("mc_mgrp_create", s, None, e))?;
            Ok(mgrp)
        })
    }

    fn handle_bm_mc_mgrp_destroy(&self, _: i32, mgrp_handle: BmMcMgrpHandle) -> thrift::Result<()> {
        let g = group(mgrp_handle)?;
        self.0.on_switch(move |s| {
            s.destroy_multicast_group(g).map_err(|e| {
                super::note!(info, "thrift mc_mgrp_destroy: {e}");
                mc_op(McOperationErrorCode::INVALID_MGRP_HANDLE)
            })
        })
    }

    fn handle_bm_mc_node_create(
        &self,
        _: i32,
        rid: BmMcRid,
        port_map: BmMcPortMap,
        lag_map: BmMcLagMap,
    ) -> thrift::Result<BmMcL1Handle> {
        no_lags("mc_node_create", &lag_map)?;
        let rid = u16::try_from(rid).map_err(|_| mc_op(McOperationErrorCode::ERROR))?;
        let ports = ports(&port_map)?;
        self.0.on_switch(move |s| {
            let handle = s
                .create_multicast_node(rid, ports)
                .map_err(|e| refused("mc_node_create", s, None, e))?;
            i32::try_from(handle).map_err(|_| mc_op(McOperationErrorCode::TABLE_FULL))
        })
    }

    fn handle_bm_mc_node_associate(
        &self,
        _: i32,
        mgrp_handle: BmMcMgrpHandle,
        l1_handle: BmMcL1Handle,
    ) -> thrift::Result<()> {
        self.link(
            "mc_node_associate",
            mgrp_handle,
            l1_handle,
            Switch::associate_node,
        )
    }

    fn handle_bm_mc_node_dissociate(
        &self,
        _: i32,
        mgrp_handle: BmMcMgrpHandle,
        l1_handle: BmMcL1Handle,
    ) -> thrift::Result<()> {
        self.link(
            "mc_node_dissociate",
            mgrp_handle,
            l1_handle,
            Switch::dissociate_node,
        )
    }

    fn handle_bm_mc_node_destroy(&self, _: i32, l1_handle: BmMcL1Handle) -> thrift::Result<()> {
        let n = node(l1_handle)?;
        self.0.on_switch(move |s| {
            s.destroy_multicast_node(n)
                .map_err(|e| refused("mc_node_destroy", s, None, e))
        })
    }

    fn handle_bm_mc_node_update(
        &self,
        _: i32,
        l1_handle: BmMcL1Handle,
        port_map: BmMcPortMap,
        lag_map: BmMcLagMap,
    ) -> thrift::Result<()> {
        no_lags("mc_node_update", &lag_map)?;
        let (n, ports) = (node(l1_handle)?, ports(&port_map)?);
        self.0.on_switch(move |s| {
            s.update_multicast_node(n, ports)
                .map_err(|e| refused("mc_node_update", s, None, e))
        })
    }

    fn handle_bm_mc_set_lag_membership(
        &self,
        _: i32,
        _: BmMcLagIndex,
        _: BmMcPortMap,
    ) -> thrift::Result<()> {
        super::note!(
            warn,
            "thrift mc_set_lag_membership: not supported by softswitch: LAGs"
        );
        Err(mc_op(McOperationErrorCode::ERROR))
    }

    fn handle_bm_mc_get_entries(&self, _: i32) -> thrift::Result<String> {
        self.0.on_switch(|s| {
            // BMv2's layout: groups name their nodes (L1), each node its ports (L2, one per
            // node here, with the node's handle).
            let mgrps: Vec<_> = s
                .multicast_groups()
                .into_iter()
                .map(|(id, nodes)| serde_json::json!({ "id": id, "l1_handles": nodes }))
                .collect();
            let (mut l1, mut l2) = (Vec::new(), Vec::new());
            for (handle, rid, ports) in s.multicast_nodes() {
                l1.push(serde_json::json!({ "handle": handle, "rid": rid, "l2_handle": handle }));
                l2.push(serde_json::json!({ "handle": handle, "ports": ports, "lags": [] }));
            }
            Ok(serde_json::json!({
                "mgrps": mgrps,
                "l1_handles": l1,
                "l2_handles": l2,
                "lags": [],
            })
            .to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_map_names_port_0_last_and_refuses_anything_but_bits() {
        assert_eq!(ports("0110").unwrap(), [1, 2]);
        assert_eq!(ports("1").unwrap(), [0]);
        assert_eq!(ports("").unwrap(), [] as [u16; 0]);
        assert!(ports("01x").is_err());
        assert!(ports(&"1".repeat(MAX_PORTS + 1)).is_err());
        assert!(no_lags("t", "000").is_ok() && no_lags("t", "010").is_err());
    }
}
