//! The balancer's pinned maps: the configuration resolved against this machine (interface
//! indexes, MACs, carrier, namespace) and written to the maps, and read back.

use std::{net::IpAddr, time::Duration};

use anyhow::Context as _;
use aya::maps::lpm_trie::Key;
use dataplane_common::{
    lb::{BucketTables, LbSettings, LbState, Policy, Uplink, IFNAMSIZ, MAX_UPLINKS},
    maps,
    phantom_queue::PhantomQueue,
};

use super::buckets::rebalance;
use crate::pinned_maps::PinnedMaps;
use hostconfig::lb::{LbConfig, NextHop, Prefix};
use sysutil::{interface::Interface, neighbour};
use wire::ethernet::Address;

/// How long `set` waits for the kernel to resolve a next hop given by IP address.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Assumed speed of an uplink that reports none (veth, some virtual NICs).
const DEFAULT_RATE_BPS: u64 = 10_000_000_000;

/// The name in an uplink record.
pub fn uplink_name(uplink: &Uplink) -> String {
    let end = uplink.name.iter().position(|&b| b == 0).unwrap_or(IFNAMSIZ);
    String::from_utf8_lossy(&uplink.name[..end]).into_owned()
}

/// The uplink record of `name` in `config`, resolved on this machine; `previous` is the slot's
/// record before, kept (and marked unreachable with `None`) if the interface has gone.
fn resolve_uplink(
    config: &LbConfig,
    name: &str,
    previous: Option<&Uplink>,
) -> anyhow::Result<Option<Uplink>> {
    let interface = match Interface::lookup(name) {
        Ok(interface) => interface,
        Err(_) if previous.is_some() => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("lb.uplinks: {name}")),
    };
    let dst_mac = match config.nexthops.get(name) {
        Some(NextHop::Mac(mac)) => *mac,
        Some(NextHop::Ip(ip)) => neighbour::resolve(*ip, &interface, RESOLVE_TIMEOUT)
            .with_context(|| format!("lb.nexthop.{name}: resolving {ip}"))?,
        None => {
            anyhow::bail!("lb.nexthop.{name}: {name} has no next hop; give its MAC or IP address")
        }
    };
    let mut record = Uplink::FREE;
    record.configured = 1;
    record.ifindex = interface.index;
    record.weight = config.weight(name);
    record.name[..name.len()].copy_from_slice(name.as_bytes());
    record.src_mac = interface.mac.0;
    record.dst_mac = dst_mac.0;
    let bps = config
        .rates_bps
        .get(name)
        .copied()
        .or_else(|| interface.speed_bps())
        .unwrap_or(DEFAULT_RATE_BPS);
    record.rate_bytes_per_sec = (bps / 8).max(1);
    Ok(Some(record))
}

impl PinnedMaps {
    fn lb_uplinks(&self) -> anyhow::Result<[Uplink; MAX_UPLINKS]> {
        self.read_entries(&maps::LB_UPLINKS, 0)
    }

    /// The shared balancer state: live slots and failovers.
    pub fn read_lb_state(&self) -> anyhow::Result<LbState> {
        self.read(&maps::LB_STATE, 0)
    }

    /// The configured uplink slots, by slot.
    pub fn read_lb_uplinks(&self) -> anyhow::Result<Vec<(u32, Uplink)>> {
        Ok(self
            .lb_uplinks()?
            .into_iter()
            .enumerate()
            .filter(|(_, u)| u.configured != 0)
            .map(|(slot, u)| (slot as u32, u))
            .collect())
    }

    /// Reads the balancer's configuration back from the maps.
    pub fn read_lb_config(&self) -> anyhow::Result<LbConfig> {
        let settings = self.read(&maps::LB_SETTINGS, 0)?;
        let mut config = LbConfig {
            policy: Policy::from_u32(settings.policy).unwrap_or(Policy::Ecmp),
            seed: settings.seed,
            flowlet_timeout_us: settings.flowlet_timeout_ns / 1000,
            ..LbConfig::default()
        };
        for (_, uplink) in self.read_lb_uplinks()? {
            let name = uplink_name(&uplink);
            config.weights.insert(name.clone(), uplink.weight);
            config
                .nexthops
                .insert(name.clone(), NextHop::Mac(Address(uplink.dst_mac)));
            config
                .rates_bps
                .insert(name.clone(), uplink.rate_bytes_per_sec * 8);
            config.uplinks.push(name);
        }
        config.prefixes = self.read_prefixes()?;
        Ok(config)
    }

    fn read_prefixes(&self) -> anyhow::Result<Vec<Prefix>> {
        let v4 = self.map(&maps::LB_PREFIXES_V4)?;
        let v6 = self.map(&maps::LB_PREFIXES_V6)?;
        let mut prefixes = Vec::new();
        for key in v4.keys() {
            let key = key?;
            prefixes.push(Prefix {
                addr: IpAddr::from(key.data()),
                len: key.prefix_len() as u8,
            });
        }
        for key in v6.keys() {
            let key = key?;
            prefixes.push(Prefix {
                addr: IpAddr::from(key.data()),
                len: key.prefix_len() as u8,
            });
        }
        prefixes.sort();
        Ok(prefixes)
    }

    /// Resolves `config` on this machine and writes it: uplink slots (a name keeps its slot),
    /// device map, carrier watch, live slots, bucket tables (moving as few buckets as
    /// possible), prefixes and settings. Uplinks that leave the live set count as failovers.
    pub fn write_lb_config(&self, config: &LbConfig) -> anyhow::Result<()> {
        config.validate()?;
        let old = self.lb_uplinks()?;
        let slot_of = |name: &str| {
            old.iter()
                .position(|u| u.configured != 0 && uplink_name(u) == name)
        };
        // Names already configured keep their slots; new names take free ones.
        let mut slots: Vec<(usize, &String)> = Vec::new();
        let mut taken = [false; MAX_UPLINKS];
        for name in &config.uplinks {
            if let Some(slot) = slot_of(name) {
                taken[slot] = true;
                slots.push((slot, name));
            }
        }
        for name in &config.uplinks {
            if slot_of(name).is_none() {
                let slot = (0..MAX_UPLINKS)
                    .find(|&s| !taken[s])
                    .context("no free slot")?;
                taken[slot] = true;
                slots.push((slot, name));
                self.clear_lb_slot(slot as u32)?;
            }
        }
        let mut records = [Uplink::FREE; MAX_UPLINKS];
        let mut reachable = [false; MAX_UPLINKS];
        for &(slot, name) in &slots {
            let previous = slot_of(name).map(|s| &old[s]);
            match resolve_uplink(config, name, previous)? {
                Some(record) => {
                    records[slot] = record;
                    reachable[slot] = true;
                }
                None => records[slot] = *previous.expect("kept only if it existed"),
            }
        }

        let mut devmap = self.map(&maps::LB_DEVMAP)?;
        for (slot, record) in records.iter().enumerate() {
            if reachable[slot] {
                devmap
                    .set(slot as u32, record.ifindex, None, 0)
                    .with_context(|| format!("adding {} to the device map", uplink_name(record)))?;
            } else {
                // Free or gone: an empty slot (ifindex 0, which the kernel stores as no device)
                // is what the data path treats as down.
                devmap.set(slot as u32, 0, None, 0)?;
            }
        }
        self.write_entries(&maps::LB_UPLINKS, &records)?;

        let members: Vec<(u8, u32)> = slots
            .iter()
            .map(|&(slot, _)| (slot as u8, records[slot].weight))
            .collect();
        let equal: Vec<(u8, u32)> = members.iter().map(|&(s, _)| (s, 1)).collect();
        let old_tables = self.read(&maps::LB_BUCKETS, 0)?;
        let tables = BucketTables {
            equal: rebalance(&old_tables.equal, &equal),
            weighted: rebalance(&old_tables.weighted, &members),
        };
        self.write_entries(&maps::LB_BUCKETS, &[tables])?;

        self.sync_lb_live()?;
        self.write_prefixes(&config.prefixes)?;
        let settings = LbSettings {
            policy: config.policy.host_code(),
            seed: config.seed,
            flowlet_timeout_ns: config.flowlet_timeout_us * 1000,
        };
        self.write_entries(&maps::LB_SETTINGS, &[settings])
    }

    /// Zeroes the counters and load estimate of a slot a new uplink takes: a freed slot keeps
    /// those of its former holder, which are not the new one's. Called before the device map
    /// names the new uplink.
    fn clear_lb_slot(&self, slot: u32) -> anyhow::Result<()> {
        self.zero_per_cpu(&maps::LB_UPLINK_COUNTERS, slot)?;
        self.map(&maps::LB_LOADS)?
            .set(slot, PhantomQueue::default(), 0)?;
        Ok(())
    }

    fn write_prefixes(&self, prefixes: &[Prefix]) -> anyhow::Result<()> {
        let mut v4 = self.map(&maps::LB_PREFIXES_V4)?;
        let mut v6 = self.map(&maps::LB_PREFIXES_V6)?;
        // Add the new ones before removing the old ones, so a prefix in both stays owned.
        let current = self.read_prefixes()?;
        for prefix in prefixes {
            let len = u32::from(prefix.len);
            match prefix.addr {
                IpAddr::V4(a) => v4.insert(&Key::new(len, a.octets()), 1, 0),
                IpAddr::V6(a) => v6.insert(&Key::new(len, a.octets()), 1, 0),
            }
            .with_context(|| format!("lb.prefixes: adding {prefix}"))?;
        }
        for prefix in current.iter().filter(|p| !prefixes.contains(p)) {
            let len = u32::from(prefix.len);
            match prefix.addr {
                IpAddr::V4(a) => v4.remove(&Key::new(len, a.octets())),
                IpAddr::V6(a) => v6.remove(&Key::new(len, a.octets())),
            }?;
        }
        Ok(())
    }

    /// Recomputes the live slots from the uplinks as they are now (present in the device map,
    /// still the interface that was configured, up with carrier) and stores them; slots that
    /// left the live set count as failovers. Returns the uplinks whose state changed.
    pub fn sync_lb_live(&self) -> anyhow::Result<Vec<(String, bool)>> {
        let devmap = self.map(&maps::LB_DEVMAP)?;
        let uplinks = self.read_lb_uplinks()?;
        let mut live = 0u32;
        for (slot, uplink) in &uplinks {
            let name = uplink_name(uplink);
            let same = Interface::lookup(&name).is_ok_and(|i| i.index == uplink.ifindex);
            if same && devmap.get(*slot, 0).is_ok() && Interface::is_running(&name) {
                live |= 1 << slot;
            }
        }
        let mut state = self.read_lb_state()?;
        let changed = state.live ^ live;
        state.failovers += u64::from((state.live & !live).count_ones());
        state.live = live;
        self.write_entries(&maps::LB_STATE, &[state])?;
        Ok(uplinks
            .iter()
            .filter(|(slot, _)| changed & (1 << slot) != 0)
            .map(|(slot, u)| (uplink_name(u), live & (1 << slot) != 0))
            .collect())
    }

    /// Entries of the flowlet table in use.
    pub fn lb_flowlet_occupancy(&self) -> anyhow::Result<u64> {
        let mut used = 0;
        for entry in self.map(&maps::LB_FLOWLETS)?.iter() {
            used += u64::from(entry?.is_used());
        }
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_uplink_record_holds_its_settings_in_the_data_path_units() {
        // The loopback interface exists in every namespace, with or without privileges.
        let mut config = LbConfig::default();
        for (key, value) in [
            ("lb.uplinks", "lo"),
            ("lb.nexthop.lo", "02:00:00:00:00:09"),
            ("lb.weights", "lo:3"),
            ("lb.rate.lo", "8mbit"),
        ] {
            config.apply(key, value).unwrap();
        }
        let record = resolve_uplink(&config, "lo", None).unwrap().unwrap();
        assert_eq!(uplink_name(&record), "lo");
        assert_eq!(record.ifindex, Interface::lookup("lo").unwrap().index);
        assert_eq!(record.dst_mac, [2, 0, 0, 0, 0, 9]);
        assert_eq!(record.weight, 3);
        // dlb drains the load estimate in bytes per second: 8 Mb/s is 1 MB/s.
        assert_eq!(record.rate_bytes_per_sec, 1_000_000);
    }
}
