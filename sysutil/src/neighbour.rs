//! The destination's MAC address from the kernel's neighbour table (IPv4 ARP
//! and IPv6 neighbour discovery alike), read over rtnetlink in the calling
//! thread's network namespace, and resolved on demand by sending a datagram to
//! the destination's discard port.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use netlink_packet_route::{
    neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage},
    AddressFamily, RouteNetlinkMessage,
};

use crate::error::{NetError, Result};
use crate::interface::Interface;
use crate::netlink;
use crate::sys;
use wire::ethernet::Address;

/// The UDP discard port, the target of the datagram that triggers resolution.
const DISCARD_PORT: u16 = 9;

/// How often the datagram is sent again while waiting.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// How often the table is read again while waiting.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// Neighbour states with a usable link-layer address (the kernel's NUD_VALID: reachable,
/// stale, delay, probe, noarp, permanent).
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

/// The link-layer address of a neighbour message if it is `ip` on `ifindex` and usable.
fn entry_address(message: RouteNetlinkMessage, ip: IpAddr, ifindex: u32) -> Option<Address> {
    let RouteNetlinkMessage::NewNeighbour(entry) = message else {
        return None;
    };
    if entry.header.ifindex != ifindex || u16::from(entry.header.state) & NUD_VALID == 0 {
        return None;
    }
    let (mut dst, mut lladdr) = (None, None);
    for attribute in &entry.attributes {
        match attribute {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => {
                dst = Some(IpAddr::V4(*a))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                dst = Some(IpAddr::V6(*a))
            }
            NeighbourAttribute::LinkLayerAddress(mac) => {
                lladdr = <[u8; 6]>::try_from(mac.as_slice()).ok().map(Address)
            }
            _ => {}
        }
    }
    lladdr.filter(|_| dst == Some(ip))
}

/// Looks `ip` up in the neighbour table of interface `ifindex`.
pub fn lookup(ip: IpAddr, ifindex: u32) -> io::Result<Option<Address>> {
    let mut request = NeighbourMessage::default();
    request.header.family = if ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    netlink::ask(
        RouteNetlinkMessage::GetNeighbour(request),
        true,
        |message| entry_address(message, ip, ifindex),
    )
}

/// The MAC address of `ip` on `iface`: from the neighbour table, or after
/// triggering resolution (ARP or neighbour discovery) and waiting at most
/// `timeout` for it.
pub fn resolve(ip: IpAddr, iface: &Interface, timeout: Duration) -> Result<Address> {
    let read_error = || NetError::io(format!("read the neighbour table of {}", iface.name));
    if let Some(mac) = lookup(ip, iface.index).map_err(read_error())? {
        return Ok(mac);
    }
    let any: IpAddr = if ip.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind((any, 0)).map_err(NetError::io("open a UDP socket"))?;
    sys::set_option(
        &socket,
        libc::SOL_SOCKET,
        libc::SO_BINDTODEVICE,
        iface.name.as_bytes(),
    )
    .map_err(NetError::io(format!("bind a UDP socket to {}", iface.name)))?;
    let start = Instant::now();
    let mut last_sent: Option<Instant> = None;
    while start.elapsed() < timeout {
        if last_sent.is_none_or(|t| t.elapsed() >= RETRY_EVERY) {
            // Failures (unreachable, refused) are expected while resolution is pending.
            let _ = socket.send_to(b"lossless: resolve", SocketAddr::new(ip, DISCARD_PORT));
            last_sent = Some(Instant::now());
        }
        std::thread::sleep(POLL_EVERY);
        if let Some(mac) = lookup(ip, iface.index).map_err(read_error())? {
            return Ok(mac);
        }
    }
    Err(NetError::Unresolved {
        ip,
        gateway_to: None,
        iface: iface.name.clone(),
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use netlink_packet_core::{DoneMessage, NetlinkPayload};
    use netlink_packet_route::neighbour::NeighbourState;

    use super::*;
    use crate::netlink::{tests::datagram, walk, Walk};

    /// An RTM_NEWNEIGH message: `ip` at `mac` on `ifindex` in `state`.
    fn neighbour(
        ifindex: u32,
        state: NeighbourState,
        ip: IpAddr,
        mac: [u8; 6],
    ) -> NetlinkPayload<RouteNetlinkMessage> {
        let mut entry = NeighbourMessage::default();
        entry.header.family = if ip.is_ipv4() {
            AddressFamily::Inet
        } else {
            AddressFamily::Inet6
        };
        entry.header.ifindex = ifindex;
        entry.header.state = state;
        let dst = match ip {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        };
        entry.attributes = vec![
            NeighbourAttribute::Destination(dst),
            NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
        ];
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewNeighbour(entry))
    }

    fn scan(datagram: &[u8], ip: IpAddr, ifindex: u32) -> Walk<Address> {
        walk(datagram, &mut |message| entry_address(message, ip, ifindex)).unwrap()
    }

    #[test]
    fn finds_usable_entries_only() {
        let v4: IpAddr = "10.0.0.2".parse().unwrap();
        let v6: IpAddr = "fd00::2".parse().unwrap();
        let mut entries = vec![
            neighbour(3, NeighbourState::Incomplete, v4, [2, 0, 0, 0, 0, 9]),
            neighbour(4, NeighbourState::Reachable, v4, [2, 0, 0, 0, 0, 8]), // other interface
            neighbour(3, NeighbourState::Stale, v6, [2, 0, 0, 0, 0, 6]),     // stale: usable
            neighbour(3, NeighbourState::Reachable, v4, [2, 0, 0, 0, 0, 2]),
        ];
        let table = datagram(entries.clone());
        assert_eq!(
            scan(&table, v4, 3),
            Walk::Found(Address([2, 0, 0, 0, 0, 2]))
        );
        assert_eq!(
            scan(&table, v6, 3),
            Walk::Found(Address([2, 0, 0, 0, 0, 6]))
        );
        assert_eq!(scan(&table, v4, 5), Walk::More);
        entries.push(NetlinkPayload::Done(DoneMessage::default()));
        assert_eq!(
            scan(&datagram(entries), "10.0.0.9".parse().unwrap(), 3),
            Walk::Done
        );
    }

    #[test]
    fn reads_own_table() {
        let lo = Interface::lookup("lo").unwrap();
        assert_eq!(
            lookup("192.0.2.1".parse().unwrap(), lo.index).unwrap(),
            None
        );
        assert_eq!(
            lookup("2001:db8::1".parse().unwrap(), lo.index).unwrap(),
            None
        );
    }
}
