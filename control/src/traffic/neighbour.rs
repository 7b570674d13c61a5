//! The destination's MAC address from the kernel's neighbour table (IPv4 ARP
//! and IPv6 neighbour discovery alike), read over rtnetlink in the calling
//! thread's network namespace, and resolved on demand by sending a datagram to
//! the destination's discard port.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::error::{Result, TrafficError};
use super::interface::Interface;
use super::netlink::{self, Request, NLM_F_DUMP, NLM_F_REQUEST};
use super::sys;
use wire::ethernet::Address;

/// The UDP discard port, the target of the datagram that triggers resolution.
const DISCARD_PORT: u16 = 9;

/// How often the datagram is sent again while waiting.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// How often the table is read again while waiting.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// Neighbour states with a usable link-layer address (the kernel's NUD_VALID).
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

/// Length of `struct ndmsg`, and the message types and attributes used here (linux/neighbour.h).
const NDMSG_LEN: usize = 12;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;

/// The link-layer address of a neighbour message body if it is `ip` on `ifindex` and usable.
fn entry_address(kind: u16, body: &[u8], ip: IpAddr, ifindex: u32) -> Option<Address> {
    if kind != RTM_NEWNEIGH || body.len() < NDMSG_LEN {
        return None;
    }
    let entry_ifindex = i32::from_ne_bytes(body[4..8].try_into().unwrap());
    let state = u16::from_ne_bytes(body[8..10].try_into().unwrap());
    if entry_ifindex != ifindex as i32 || state & NUD_VALID == 0 {
        return None;
    }
    let (mut dst, mut lladdr) = (None, None);
    for (kind, value) in netlink::attributes(&body[NDMSG_LEN..]) {
        match (kind, value.len()) {
            (NDA_DST, _) => dst = netlink::ip_address(value),
            (NDA_LLADDR, 6) => lladdr = Some(Address(value.try_into().unwrap())),
            _ => {}
        }
    }
    lladdr.filter(|_| dst == Some(ip))
}

/// Looks `ip` up in the neighbour table of interface `ifindex`.
pub fn lookup(ip: IpAddr, ifindex: u32) -> io::Result<Option<Address>> {
    let family = if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let mut ndmsg = [0u8; NDMSG_LEN];
    ndmsg[0] = family as u8;
    Request::new(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, &ndmsg)
        .exchange(|kind, body| entry_address(kind, body, ip, ifindex))
}

/// The MAC address of `ip` on `iface`: from the neighbour table, or after
/// triggering resolution (ARP or neighbour discovery) and waiting at most
/// `timeout` for it.
pub fn resolve(ip: IpAddr, iface: &Interface, timeout: Duration) -> Result<Address> {
    let read_error = || TrafficError::io(format!("read the neighbour table of {}", iface.name));
    if let Some(mac) = lookup(ip, iface.index).map_err(read_error())? {
        return Ok(mac);
    }
    let any: IpAddr = if ip.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind((any, 0)).map_err(TrafficError::io("open a UDP socket"))?;
    sys::set_option(
        &socket,
        libc::SOL_SOCKET,
        libc::SO_BINDTODEVICE,
        iface.name.as_bytes(),
    )
    .map_err(TrafficError::io(format!(
        "bind a UDP socket to {}",
        iface.name
    )))?;
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
    Err(TrafficError::Unresolved {
        ip,
        gateway_to: None,
        iface: iface.name.clone(),
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::netlink::{
        tests::{encode_attributes, message},
        walk, Walk, NLMSG_DONE,
    };

    /// An RTM_NEWNEIGH body: ndmsg, then NDA_DST and NDA_LLADDR.
    fn neighbour(ifindex: i32, state: u16, ip: IpAddr, mac: [u8; 6]) -> Vec<u8> {
        let mut body = vec![if ip.is_ipv4() { 2 } else { 10 }, 0, 0, 0];
        body.extend_from_slice(&ifindex.to_ne_bytes());
        body.extend_from_slice(&state.to_ne_bytes());
        body.extend_from_slice(&[0, 1]);
        let dst = match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        body.extend(encode_attributes(&[(NDA_DST, &dst), (NDA_LLADDR, &mac)]));
        body
    }

    fn scan(datagram: &[u8], ip: IpAddr, ifindex: u32) -> Walk<Address> {
        walk(datagram, &mut |kind, body| {
            entry_address(kind, body, ip, ifindex)
        })
        .unwrap()
    }

    #[test]
    fn finds_usable_entries_only() {
        let v4: IpAddr = "10.0.0.2".parse().unwrap();
        let v6: IpAddr = "fd00::2".parse().unwrap();
        let mut datagram = message(RTM_NEWNEIGH, &neighbour(3, 0x01, v4, [2, 0, 0, 0, 0, 9])); // incomplete
        datagram.extend(message(
            RTM_NEWNEIGH,
            &neighbour(4, 0x02, v4, [2, 0, 0, 0, 0, 8]),
        )); // other interface
        datagram.extend(message(
            RTM_NEWNEIGH,
            &neighbour(3, 0x04, v6, [2, 0, 0, 0, 0, 6]),
        )); // stale: usable
        datagram.extend(message(
            RTM_NEWNEIGH,
            &neighbour(3, 0x02, v4, [2, 0, 0, 0, 0, 2]),
        ));
        assert_eq!(
            scan(&datagram, v4, 3),
            Walk::Found(Address([2, 0, 0, 0, 0, 2]))
        );
        assert_eq!(
            scan(&datagram, v6, 3),
            Walk::Found(Address([2, 0, 0, 0, 0, 6]))
        );
        assert_eq!(scan(&datagram, v4, 5), Walk::More);
        datagram.extend(message(NLMSG_DONE, &[0; 4]));
        assert_eq!(scan(&datagram, "10.0.0.9".parse().unwrap(), 3), Walk::Done);
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
