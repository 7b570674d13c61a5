//! `lossless host watch IFACE`: follows the kernel's link events (rtnetlink) and keeps the
//! balancer's live uplinks in step with their carrier, like a routing daemon withdraws a
//! route over a dead link.
//!
//! Deletion and `set` need no watcher (the kernel empties the device-map entry of a deleted
//! interface, and `set` writes the live set itself); a carrier change does: XDP cannot see
//! another interface's carrier, and this kernel refuses the tracing programs that could.

use std::time::Instant;

use anyhow::Context as _;

use crate::pinned_maps::PinnedMaps;
use sysutil::netlink::LinkEvents;

/// Follows link events until the process is stopped, syncing the live uplinks of `maps` on
/// each event that concerns one of them. Prints one line per change.
pub fn watch(maps: &PinnedMaps) -> anyhow::Result<()> {
    let mut events = LinkEvents::subscribe().context("subscribing to link events")?;
    // Subscribed first, synced second: no change falls between the two.
    report(maps.sync_lb_live()?, Instant::now());
    println!("{}: watching its uplinks' carrier", maps.dir().interface());
    loop {
        let indexes = events.wait().context("reading link events")?;
        let at = Instant::now();
        let watched: Vec<u32> = maps
            .read_lb_uplinks()?
            .iter()
            .map(|(_, u)| u.ifindex)
            .collect();
        // Events lost or unreadable: sync anyway.
        if indexes.is_none_or(|indexes| indexes.iter().any(|i| watched.contains(i))) {
            report(maps.sync_lb_live()?, at);
        }
    }
}

fn report(changes: Vec<(String, bool)>, event: Instant) {
    for (uplink, live) in changes {
        println!(
            "{uplink}: {} ({:.3} ms after the event)",
            if live { "up" } else { "down, traffic moved" },
            event.elapsed().as_secs_f64() * 1e3
        );
    }
}
