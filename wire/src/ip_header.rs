//! An IP header of either version, for what reads IPv4 and IPv6 alike above IP (smoltcp's
//! `IpRepr`): the frame parser of `roce` and the listing of `pretty_print`.

use core::fmt;
use core::net::IpAddr;

use super::ethernet::EtherType;
use super::ip::Protocol;
use super::{ipv4, ipv6, Error, Result};

/// An IPv4 header without options, or an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IpRepr {
    /// IPv4.
    V4(ipv4::Repr),
    /// IPv6.
    V6(ipv6::Repr),
}

/// What the layer above IP takes from its header, whichever the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Upper {
    /// Source and destination addresses (for the pseudo-header of a checksum).
    pub addresses: (IpAddr, IpAddr),
    /// The protocol of the payload (IPv4 protocol, IPv6 next header).
    pub protocol: Protocol,
    /// Length of the IP header: where the payload starts.
    pub start: usize,
    /// Length of the IP header and payload (link-layer padding excluded).
    pub end: usize,
}

impl IpRepr {
    /// Reads the header of the packet that `ethertype` announces, checking it as the version's
    /// own `parse` does; `Unsupported` for an EtherType that is not IP.
    pub(crate) fn parse(ethertype: EtherType, bytes: &[u8]) -> Result<IpRepr> {
        match ethertype {
            EtherType::Ipv4 => {
                let packet = ipv4::Packet::new_checked(bytes)?;
                ipv4::Repr::parse(&packet).map(IpRepr::V4)
            }
            EtherType::Ipv6 => {
                let packet = ipv6::Packet::new_checked(bytes)?;
                ipv6::Repr::parse(&packet).map(IpRepr::V6)
            }
            _ => Err(Error::Unsupported("not IP")),
        }
    }

    /// The layer's name, for a listing that says which layer it could not read.
    pub(crate) fn name(ethertype: EtherType) -> &'static str {
        if ethertype == EtherType::Ipv4 {
            "IPv4"
        } else {
            "IPv6"
        }
    }

    /// What the layer above takes from this header. An IPv4 header parsed has no options
    /// (`parse` refuses them): it is `ipv4::HEADER_LEN` long.
    pub(crate) fn upper(&self) -> Upper {
        let (addresses, protocol, start, payload_len) = match self {
            IpRepr::V4(repr) => (
                (repr.src_addr.into(), repr.dst_addr.into()),
                repr.protocol,
                ipv4::HEADER_LEN,
                repr.payload_len,
            ),
            IpRepr::V6(repr) => (
                (repr.src_addr.into(), repr.dst_addr.into()),
                repr.next_header,
                ipv6::HEADER_LEN,
                repr.payload_len,
            ),
        };
        Upper {
            addresses,
            protocol,
            start,
            end: start + payload_len,
        }
    }
}

impl fmt::Display for IpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpRepr::V4(repr) => repr.fmt(f),
            IpRepr::V6(repr) => repr.fmt(f),
        }
    }
}
