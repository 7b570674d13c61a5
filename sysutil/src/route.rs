//! The next hop towards a destination out of one interface, as the kernel's routing table
//! gives it: an RTM_GETROUTE request for the destination with the interface as the output
//! interface (what `ip route get DST oif IFACE` asks, and what a socket bound to the
//! interface gets), answered with the route's gateway, if it has one.

use std::io;
use std::net::IpAddr;

use netlink_packet_route::{
    route::{RouteAddress, RouteAttribute, RouteMessage},
    AddressFamily, RouteNetlinkMessage,
};

use crate::error::{NetError, Result};
use crate::interface::Interface;
use crate::netlink;

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
fn route_gateway(message: RouteNetlinkMessage) -> Option<Option<IpAddr>> {
    let RouteNetlinkMessage::NewRoute(route) = message else {
        return None;
    };
    Some(
        route
            .attributes
            .iter()
            .find_map(|attribute| match attribute {
                RouteAttribute::Gateway(RouteAddress::Inet(ip)) => Some(IpAddr::V4(*ip)),
                RouteAttribute::Gateway(RouteAddress::Inet6(ip)) => Some(IpAddr::V6(*ip)),
                _ => None,
            }),
    )
}

/// Asks the kernel for the route to `dst` out of interface `ifindex`: `Ok(Some(gateway))`
/// through a gateway, `Ok(None)` on the link; an error (ENETUNREACH...) when there is none.
pub fn lookup(dst: IpAddr, ifindex: u32) -> io::Result<Option<IpAddr>> {
    let mut request = RouteMessage::default();
    (
        request.header.address_family,
        request.header.destination_prefix_length,
    ) = match dst {
        IpAddr::V4(_) => (AddressFamily::Inet, 32),
        IpAddr::V6(_) => (AddressFamily::Inet6, 128),
    };
    request.attributes = vec![
        RouteAttribute::Destination(dst.into()),
        RouteAttribute::Oif(ifindex),
    ];
    netlink::ask(RouteNetlinkMessage::GetRoute(request), false, route_gateway)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no route in the answer"))
}

/// The next hop towards `dst` out of `iface`, as the kernel would route a packet from a
/// socket bound to `iface`.
pub fn next_hop(dst: IpAddr, iface: &Interface) -> Result<NextHop> {
    match lookup(dst, iface.index) {
        Ok(Some(gateway)) => Ok(NextHop::Gateway(gateway)),
        Ok(None) => Ok(NextHop::Direct(dst)),
        Err(error) => Err(NetError::Io {
            what: format!("no route to {dst} out of {}", iface.name),
            error,
        }),
    }
}

#[cfg(test)]
mod tests {
    use netlink_packet_core::NetlinkPayload;

    use super::*;
    use crate::netlink::{tests::datagram, walk, Walk};

    fn route(attributes: Vec<RouteAttribute>) -> RouteMessage {
        let mut route = RouteMessage::default();
        route.header.address_family = AddressFamily::Inet;
        route.header.destination_prefix_length = 32;
        route.attributes = attributes;
        route
    }

    #[test]
    fn gateway_or_none_from_the_answer() {
        let dst = |ip: &str| RouteAttribute::Destination(ip.parse::<IpAddr>().unwrap().into());
        let via = route(vec![
            dst("10.0.2.2"),
            RouteAttribute::Oif(3),
            RouteAttribute::Gateway("10.0.1.1".parse::<IpAddr>().unwrap().into()),
        ]);
        let on_link = route(vec![dst("10.0.1.5")]);
        let read = |message| {
            walk(
                &datagram(vec![NetlinkPayload::InnerMessage(message)]),
                &mut route_gateway,
            )
            .unwrap()
        };
        assert_eq!(
            read(RouteNetlinkMessage::NewRoute(via.clone())),
            Walk::Found(Some("10.0.1.1".parse().unwrap()))
        );
        assert_eq!(
            read(RouteNetlinkMessage::NewRoute(on_link)),
            Walk::Found(None)
        );
        assert_eq!(read(RouteNetlinkMessage::GetRoute(via)), Walk::More);
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
