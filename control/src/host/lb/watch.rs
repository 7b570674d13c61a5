//! `lossless host watch IFACE`: follows the kernel's link events (rtnetlink) and keeps the
//! balancer's live uplinks in step with their carrier, like a routing daemon withdraws a
//! route over a dead link.
//!
//! Deletion and `set` need no watcher (the kernel empties the device-map entry of a deleted
//! interface, and `set` writes the live set itself); a carrier change does: XDP cannot see
//! another interface's carrier, and this kernel refuses the tracing programs that could.

use std::{io, mem, os::fd::AsRawFd as _, time::Instant};

use anyhow::Context as _;

use crate::{
    host::pinned_maps::PinnedMaps,
    traffic::sys::{check, socket},
};

/// The rtnetlink multicast group of link events (linux/rtnetlink.h RTMGRP_LINK).
const RTMGRP_LINK: u32 = 1;
/// Netlink message header length.
const NLMSG_HDR_LEN: usize = 16;
/// Link added or changed, link deleted (linux/rtnetlink.h).
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;

/// Interface indexes of the link messages in one netlink datagram.
fn link_indexes(datagram: &[u8]) -> Vec<u32> {
    let mut indexes = Vec::new();
    let mut rest = datagram;
    while rest.len() >= NLMSG_HDR_LEN {
        let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
        if len < NLMSG_HDR_LEN || len > rest.len() {
            break;
        }
        // struct ifinfomsg: family, pad, type (u16), index (i32), flags, change.
        if matches!(kind, RTM_NEWLINK | RTM_DELLINK) && len >= NLMSG_HDR_LEN + 8 {
            let at = NLMSG_HDR_LEN + 4;
            indexes.push(i32::from_ne_bytes(rest[at..at + 4].try_into().unwrap()) as u32);
        }
        rest = &rest[((len + 3) & !3).min(rest.len())..];
    }
    indexes
}

/// Follows link events until the process is stopped, syncing the live uplinks of `maps` on
/// each event that concerns one of them. Prints one line per change.
pub fn watch(maps: &PinnedMaps) -> anyhow::Result<()> {
    let events = socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)
        .context("opening a netlink socket")?;
    // SAFETY: sockaddr_nl is plain data; the groups field subscribes to link events.
    let mut address: libc::sockaddr_nl = unsafe { mem::zeroed() };
    address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    address.nl_groups = RTMGRP_LINK;
    // SAFETY: a valid address of the given length.
    check(unsafe {
        libc::bind(
            events.as_raw_fd(),
            (&address as *const libc::sockaddr_nl).cast(),
            mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    })
    .context("subscribing to link events")?;
    // Subscribed first, synced second: no change falls between the two.
    report(maps.sync_lb_live()?, Instant::now());
    println!("{}: watching its uplinks' carrier", maps.dir().interface());
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: the buffer is writable for its length.
        let len = unsafe {
            libc::recv(
                events.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                0,
            )
        };
        let at = Instant::now();
        if len < 0 {
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) => continue,
                // Events were lost: sync anyway.
                Some(libc::ENOBUFS) => {}
                _ => return Err(error).context("reading link events"),
            }
        }
        let datagram = &buffer[..len.max(0) as usize];
        let watched: Vec<u32> = maps
            .read_lb_uplinks()?
            .iter()
            .map(|(_, u)| u.ifindex)
            .collect();
        if len < 0 || link_indexes(datagram).iter().any(|i| watched.contains(i)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_index_of_each_link_message() {
        let mut datagram = Vec::new();
        for (kind, index) in [(RTM_NEWLINK, 7i32), (3u16, 9), (RTM_DELLINK, 12)] {
            let len = NLMSG_HDR_LEN + 16;
            let mut message = vec![0u8; len];
            message[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
            message[4..6].copy_from_slice(&kind.to_ne_bytes());
            message[NLMSG_HDR_LEN + 4..NLMSG_HDR_LEN + 8].copy_from_slice(&index.to_ne_bytes());
            datagram.extend(message);
        }
        assert_eq!(link_indexes(&datagram), [7, 12]);
        assert_eq!(link_indexes(&datagram[..20]), Vec::<u32>::new());
    }
}
