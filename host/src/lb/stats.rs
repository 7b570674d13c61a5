//! The balancer's counters as `lossless host stats` shows them: one object for the balancer,
//! one per uplink.

use dataplane_common::{
    lb::{LbCounters, UplinkCounters, FLOWLET_ENTRIES, MAX_UPLINKS},
    maps,
    phantom_queue::drained_bytes,
};
use serde::Serialize;

use super::pinned::uplink_name;
use crate::pinned_maps::PinnedMaps;
use sysutil::clock::monotonic_ns;

/// One uplink's state and counters.
#[derive(Clone, Debug, Serialize)]
pub struct UplinkStats {
    /// The interface.
    pub ifname: String,
    /// Its slot in the maps.
    pub slot: u32,
    /// Whether it takes traffic now (configured, carrier up, present).
    pub alive: bool,
    /// WCMP weight.
    pub weight: u32,
    /// Its counters.
    #[serde(flatten)]
    pub counters: UplinkCounters,
    /// Its load estimate now (the backlog dlb compares), in bytes.
    pub load_bytes: u64,
}

/// The flowlet table's size and churn.
#[derive(Clone, Debug, Serialize)]
pub struct FlowletTable {
    /// Entries it holds at most.
    pub capacity: u64,
    /// Entries it holds now.
    pub occupancy: u64,
    /// Packets that found their entry unused or last used by another flow (so: flows seen).
    pub inserts: u64,
    /// Entries taken over by another flow (inserts − occupancy).
    pub evictions: u64,
}

/// The balancer's state and counters.
#[derive(Clone, Debug, Serialize)]
pub struct LbStats {
    /// The policy in force.
    pub policy: &'static str,
    /// Uplinks that left the live set (carrier lost, deleted, removed).
    pub lb_failovers: u64,
    /// Its counters.
    #[serde(flatten)]
    pub counters: LbCounters,
    /// The flowlet table.
    pub flowlet_table: FlowletTable,
}

impl LbStats {
    /// Reads the balancer's counters and its uplinks'.
    pub fn read(maps: &PinnedMaps) -> anyhow::Result<(LbStats, Vec<UplinkStats>)> {
        let config = maps.read_lb_config()?;
        let state = maps.read_lb_state()?;
        let counters = maps.sum_per_cpu(&maps::LB_COUNTERS, 0, LbCounters::accumulate)?;
        let loads: [dataplane_common::phantom_queue::PhantomQueue; MAX_UPLINKS] =
            maps.read_entries(&maps::LB_LOADS, 0)?;
        let now = monotonic_ns();
        let mut uplinks = Vec::new();
        for (slot, uplink) in maps.read_lb_uplinks()? {
            let load = loads[slot as usize];
            let drained =
                drained_bytes(now.saturating_sub(load.last_ns), uplink.rate_bytes_per_sec);
            uplinks.push(UplinkStats {
                ifname: uplink_name(&uplink),
                slot,
                alive: state.live & (1 << slot) != 0,
                weight: uplink.weight,
                counters: maps.sum_per_cpu(
                    &maps::LB_UPLINK_COUNTERS,
                    slot,
                    UplinkCounters::accumulate,
                )?,
                load_bytes: load.backlog_bytes.saturating_sub(drained),
            });
        }
        let occupancy = maps.lb_flowlet_occupancy()?;
        let stats = LbStats {
            policy: config.policy.name(),
            lb_failovers: state.failovers,
            counters,
            flowlet_table: FlowletTable {
                capacity: u64::from(FLOWLET_ENTRIES),
                occupancy,
                inserts: counters.flowlet_inserts,
                evictions: counters.flowlet_inserts.saturating_sub(occupancy),
            },
        };
        Ok((stats, uplinks))
    }

    /// Lines for the stats table.
    pub fn table(&self, uplinks: &[UplinkStats]) -> String {
        let c = &self.counters;
        let t = &self.flowlet_table;
        let mut out = format!(
            "lb policy {} failovers {} not_owned {} not_ip {} malformed {} ttl_expired {} no_uplink {}\n\
             flowlet table {}/{} inserts {} evictions {}; sprayed {} qp_hashed {}\n",
            self.policy, self.lb_failovers, c.not_owned, c.not_ip, c.malformed, c.ttl_expired,
            c.no_uplink, t.occupancy, t.capacity, t.inserts, t.evictions, c.sprayed, c.qp_hashed
        );
        out += &format!(
            "{:<16} {:>5} {:>6} {:>12} {:>14} {:>9} {:>12} {:>10}\n",
            "uplink",
            "alive",
            "weight",
            "tx_packets",
            "tx_bytes",
            "flowlets",
            "path_changes",
            "load_B"
        );
        for u in uplinks {
            out += &format!(
                "{:<16} {:>5} {:>6} {:>12} {:>14} {:>9} {:>12} {:>10}\n",
                u.ifname,
                u.alive,
                u.weight,
                u.counters.tx_packets,
                u.counters.tx_bytes,
                u.counters.flowlets,
                u.counters.path_changes,
                u.load_bytes
            );
        }
        out
    }
}
