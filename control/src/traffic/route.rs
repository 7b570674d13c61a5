//! The next hop towards a destination out of one interface, as the kernel's routing table
//! gives it: an RTM_GETROUTE request for the destination with the interface as the output
//! interface (what `ip route get DST oif IFACE` asks, and what a socket bound to the
//! interface gets), answered with the route's gateway, if it has one.

use std::io;
use std::net::IpAddr;

use super::error::{Result, TrafficError};
use super::interface::Interface;
use super::netlink::{self, Request, NLM_F_REQUEST};

/// Length of `struct rtmsg`, and the message types and attributes used here
/// (linux/rtnetlink.h).
const RTMSG_LEN: usize = 12;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;

/// Where frames to a destination go on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop {
    /// The destination is on the link: frames go to its own MAC address.
    Direct(IpAddr),
    /// The route goes through this gateway: frames go to the gateway's MAC address.
    Gateway(IpAddr),
}

impl NextHop {
    /// The address whose link-layer address the frames carry.
    pub fn neighbour(self) -> IpAddr {
        match self {
            NextHop::Direct(ip) | NextHop::Gateway(ip) => ip,
        }
    }

    /// The gateway, if the route has one.
    pub fn gateway(self) -> Option<IpAddr> {
        match self {
            NextHop::Gateway(ip) => Some(ip),
            NextHop::Direct(_) => None,
        }
    }
}

/// The gateway of an RTM_NEWROUTE message's route, `Some(None)` for a route without one.
fn route_gateway(kind: u16, body: &[u8]) -> Option<Option<IpAddr>> {
    if kind != RTM_NEWROUTE || body.len() < RTMSG_LEN {
        return None;
    }
    Some(
        netlink::attributes(&body[RTMSG_LEN..])
            .find(|(kind, _)| *kind == RTA_GATEWAY)
            .and_then(|(_, value)| netlink::ip_address(value)),
    )
}

/// Asks the kernel for the route to `dst` out of interface `ifindex`: `Ok(Some(gateway))`
/// through a gateway, `Ok(None)` on the link; an error (ENETUNREACH...) when there is none.
pub fn lookup(dst: IpAddr, ifindex: u32) -> io::Result<Option<IpAddr>> {
    let (family, address, prefix) = match dst {
        IpAddr::V4(a) => (libc::AF_INET, a.octets().to_vec(), 32),
        IpAddr::V6(a) => (libc::AF_INET6, a.octets().to_vec(), 128),
    };
    let mut rtmsg = [0u8; RTMSG_LEN];
    rtmsg[0] = family as u8;
    rtmsg[1] = prefix;
    Request::new(RTM_GETROUTE, NLM_F_REQUEST, &rtmsg)
        .attribute(RTA_DST, &address)
        .attribute(RTA_OIF, &ifindex.to_ne_bytes())
        .exchange(route_gateway)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no route in the answer"))
}

/// The next hop towards `dst` out of `iface`, as the kernel would route a packet from a
/// socket bound to `iface`.
pub fn next_hop(dst: IpAddr, iface: &Interface) -> Result<NextHop> {
    match lookup(dst, iface.index) {
        Ok(Some(gateway)) => Ok(NextHop::Gateway(gateway)),
        Ok(None) => Ok(NextHop::Direct(dst)),
        Err(source) => Err(TrafficError::Io {
            what: format!("no route to {dst} out of {}", iface.name),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::netlink::tests::{encode_attributes, message};
    use crate::traffic::netlink::{walk, Walk};

    #[test]
    fn gateway_or_none_from_the_answer() {
        let rtmsg = [2, 32, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0];
        let mut via = rtmsg.to_vec();
        via.extend(encode_attributes(&[
            (RTA_DST, &[10, 0, 2, 2]),
            (RTA_OIF, &3u32.to_ne_bytes()),
            (RTA_GATEWAY, &[10, 0, 1, 1]),
        ]));
        let mut on_link = rtmsg.to_vec();
        on_link.extend(encode_attributes(&[(RTA_DST, &[10, 0, 1, 5])]));
        let read = |body: &[u8]| walk(&message(RTM_NEWROUTE, body), &mut route_gateway).unwrap();
        assert_eq!(read(&via), Walk::Found(Some("10.0.1.1".parse().unwrap())));
        assert_eq!(read(&on_link), Walk::Found(None));
        assert_eq!(
            walk(&message(RTM_GETROUTE, &via), &mut route_gateway).unwrap(),
            Walk::More
        );
    }

    #[test]
    fn asks_own_kernel() {
        let lo = Interface::lookup("lo").unwrap();
        // 127.0.0.1 is local: a route without a gateway.
        assert_eq!(
            lookup("127.0.0.1".parse().unwrap(), lo.index).unwrap(),
            None
        );
    }
}
