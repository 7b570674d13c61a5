//! The packet parser shared by every program: Ethernet, up to two VLAN tags, IPv4 (with
//! options) or IPv6 (with a bounded walk over extension headers), UDP, and the RoCEv2 BTH.
//!
//! It only reads. Every access is bounds-checked against the end of the frame, so a malformed
//! frame yields a [`ParseError`] and never a read past the end.

use core::mem::size_of;

use dataplane_common::counters::ParseError;
use network_types::{
    eth::EthHdr,
    ip::{Ipv4Hdr, Ipv6Hdr},
    udp::UdpHdr,
    vlan::VlanHdr,
};
use wire::{bth, ethernet::EtherType, ip::Protocol};

/// Most IPv6 extension headers the walk follows before giving up.
const MAX_IPV6_EXTENSIONS: usize = 4;

// EtherTypes as they lie in memory (network order), and IP protocol numbers, from `wire`.
const ETH_P_IPV4: u16 = EtherType::Ipv4.value().to_be();
const ETH_P_IPV6: u16 = EtherType::Ipv6.value().to_be();
const ETH_P_8021Q: u16 = EtherType::Vlan.value().to_be();
const ETH_P_8021AD: u16 = EtherType::QinQ.value().to_be();

const IPPROTO_HOPOPTS: u8 = Protocol::HopByHop.value();
const IPPROTO_UDP: u8 = Protocol::Udp.value();
const IPPROTO_ROUTING: u8 = Protocol::Ipv6Route.value();
const IPPROTO_FRAGMENT: u8 = Protocol::Ipv6Frag.value();
const IPPROTO_AH: u8 = Protocol::Ah.value();
const IPPROTO_DSTOPTS: u8 = Protocol::Ipv6Opts.value();

/// A frame in memory: `[start, end)` as the program context gives it.
pub struct Frame {
    start: usize,
    end: usize,
}

impl Frame {
    /// The frame between `data` and `data_end`.
    #[inline(always)]
    pub fn new(start: usize, end: usize) -> Self {
        Frame { start, end }
    }

    /// A pointer to a `T` at `offset`, if all of it lies inside the frame.
    #[inline(always)]
    pub fn ptr_at<T>(&self, offset: usize) -> Option<*mut T> {
        if self.start + offset + size_of::<T>() > self.end {
            return None;
        }
        Some((self.start + offset) as *mut T)
    }

    /// Bytes from `offset` to the end of the frame (0 if `offset` is past it).
    #[inline(always)]
    fn remaining(&self, offset: usize) -> usize {
        self.end.saturating_sub(self.start + offset)
    }
}

/// The network layer a frame carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Not IP (ARP, LLDP, MAC control, an unknown EtherType), or malformed.
    Other,
    /// IPv4, header at the offset.
    Ipv4(usize),
    /// IPv6, fixed header at the offset.
    Ipv6(usize),
}

/// What the parser learnt about a frame.
#[derive(Clone, Copy)]
pub struct Parsed {
    /// PCP of the outermost VLAN tag, if tagged.
    pub pcp: Option<u8>,
    /// The network header.
    pub network: Network,
    /// DSCP of the IP header (0 when not IP).
    pub dscp: u8,
    /// ECN bits of the IP header (0 when not IP).
    pub ecn: u8,
    /// UDP to port 4791 with a whole BTH.
    pub roce: bool,
    /// Offset of the BTH when `roce`.
    pub bth: usize,
    /// The transport protocol (IPv4 protocol, last IPv6 next header; 0 when not IP).
    pub protocol: u8,
    /// Offset of the transport header of an unfragmented IP datagram, else 0.
    pub transport: usize,
}

impl Parsed {
    /// A frame that carries nothing the programs act on.
    const OTHER: Parsed = Parsed {
        pcp: None,
        network: Network::Other,
        dscp: 0,
        ecn: 0,
        roce: false,
        bth: 0,
        protocol: 0,
        transport: 0,
    };

    /// A copy of the BTH of a RoCEv2 `frame`, or `None` if it is not RoCEv2. Copied so that a
    /// helper that invalidates packet pointers may run after; bounds checked again at this
    /// access, because the verifier does not carry the parser's check this far.
    #[inline(always)]
    pub fn bth_header(&self, frame: &Frame) -> Option<bth::Packet<[u8; bth::HEADER_LEN]>> {
        if !self.roce {
            return None;
        }
        let header = frame.ptr_at::<[u8; bth::HEADER_LEN]>(self.bth)?;
        // SAFETY: `ptr_at` gave the pointer only with the whole BTH before the frame's end.
        Some(bth::Packet::new_unchecked(unsafe { *header }))
    }
}

/// Parses `frame` from its Ethernet header.
#[inline(always)]
pub fn parse(frame: &Frame) -> Result<Parsed, ParseError> {
    let eth: *const EthHdr = frame.ptr_at(0).ok_or(ParseError::TruncatedEthernet)?;
    // SAFETY: `ptr_at` gave the pointer only with the whole header before the frame's end.
    let mut ether_type = unsafe { (*eth).ether_type };
    let mut offset = EthHdr::LEN;
    let mut parsed = Parsed::OTHER;

    for depth in 0..3 {
        if ether_type != ETH_P_8021Q && ether_type != ETH_P_8021AD {
            break;
        }
        if depth == 2 {
            return Err(ParseError::TooManyVlans);
        }
        let vlan: *const VlanHdr = frame.ptr_at(offset).ok_or(ParseError::TruncatedVlan)?;
        // SAFETY: `ptr_at` gave the pointer only with the whole tag before the frame's end.
        let (pcp, inner) = unsafe { ((*vlan).pcp(), (*vlan).ether_type) };
        if parsed.pcp.is_none() {
            parsed.pcp = Some(pcp);
        }
        ether_type = inner;
        offset += VlanHdr::LEN;
    }

    let transport = match ether_type {
        ETH_P_IPV4 => parse_ipv4(frame, offset, &mut parsed)?,
        ETH_P_IPV6 => parse_ipv6(frame, offset, &mut parsed)?,
        _ => None,
    };
    if let Some((udp_offset, datagram_end)) = transport {
        if let Some(bth) = parse_udp(frame, udp_offset, datagram_end)? {
            parsed.roce = true;
            parsed.bth = bth;
        }
    }
    Ok(parsed)
}

/// Where a UDP header starts, and where the IP datagram that carries it ends.
type Transport = Option<(usize, usize)>;

/// Parses an IPv4 header; returns the UDP header's place if it carries an unfragmented
/// UDP datagram.
#[inline(always)]
fn parse_ipv4(frame: &Frame, offset: usize, parsed: &mut Parsed) -> Result<Transport, ParseError> {
    let ip: *const Ipv4Hdr = frame.ptr_at(offset).ok_or(ParseError::TruncatedIpv4)?;
    // SAFETY: `ptr_at` gave the pointer only with the whole fixed header before the frame's end.
    let (vihl, tos, total_len, frags, proto) = unsafe {
        (
            (*ip).vihl,
            (*ip).tos,
            u16::from_be_bytes((*ip).tot_len) as usize,
            u16::from_be_bytes((*ip).frags),
            (*ip).proto,
        )
    };
    let header_len = ((vihl & 0x0f) as usize) * 4;
    if vihl >> 4 != 4 || header_len < Ipv4Hdr::LEN || total_len < header_len {
        return Err(ParseError::BadIpv4Header);
    }
    if total_len > frame.remaining(offset) {
        return Err(ParseError::TruncatedIpv4);
    }
    parsed.network = Network::Ipv4(offset);
    parsed.dscp = tos >> 2;
    parsed.ecn = tos & 0b11;
    parsed.protocol = proto;
    // More-fragments flag or a fragment offset: not a whole datagram.
    if frags & 0x3fff != 0 {
        return Ok(None);
    }
    parsed.transport = offset + header_len;
    if proto != IPPROTO_UDP {
        return Ok(None);
    }
    Ok(Some((offset + header_len, offset + total_len)))
}

/// Parses an IPv6 header and its extension headers; returns the UDP header's place if the
/// chain ends in an unfragmented UDP datagram.
#[inline(always)]
fn parse_ipv6(frame: &Frame, offset: usize, parsed: &mut Parsed) -> Result<Transport, ParseError> {
    let ip: *const Ipv6Hdr = frame.ptr_at(offset).ok_or(ParseError::TruncatedIpv6)?;
    // SAFETY: `ptr_at` gave the pointer only with the whole fixed header before the frame's end.
    let (vcf0, vcf1, mut next, payload_len) = unsafe {
        (
            (*ip).vcf[0],
            (*ip).vcf[1],
            (*ip).next_hdr,
            (*ip).payload_len,
        )
    };
    let datagram_len = Ipv6Hdr::LEN + u16::from_be_bytes(payload_len) as usize;
    if vcf0 >> 4 != 6 || datagram_len > frame.remaining(offset) {
        return Err(ParseError::TruncatedIpv6);
    }
    let end = offset + datagram_len;
    let traffic_class = (vcf0 << 4) | (vcf1 >> 4);
    parsed.network = Network::Ipv6(offset);
    parsed.dscp = traffic_class >> 2;
    parsed.ecn = traffic_class & 0b11;

    let mut cursor = offset + Ipv6Hdr::LEN;
    for _ in 0..MAX_IPV6_EXTENSIONS {
        parsed.protocol = next;
        parsed.transport = cursor;
        let header_len = match next {
            IPPROTO_UDP => return Ok(Some((cursor, end))),
            IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS => {
                let ext: *const [u8; 2] = frame
                    .ptr_at(cursor)
                    .ok_or(ParseError::TruncatedIpv6Extension)?;
                // SAFETY: `ptr_at` gave the pointer only with both bytes before the frame's end.
                (unsafe { (*ext)[1] } as usize + 1) * 8
            }
            IPPROTO_AH => {
                let ext: *const [u8; 2] = frame
                    .ptr_at(cursor)
                    .ok_or(ParseError::TruncatedIpv6Extension)?;
                // SAFETY: `ptr_at` gave the pointer only with both bytes before the frame's end.
                (unsafe { (*ext)[1] } as usize + 2) * 4
            }
            IPPROTO_FRAGMENT => {
                let ext: *const [u8; 8] = frame
                    .ptr_at(cursor)
                    .ok_or(ParseError::TruncatedIpv6Extension)?;
                // SAFETY: `ptr_at` gave the pointer only with all 8 bytes before the frame's end.
                let offset_and_more = u16::from_be_bytes(unsafe { [(*ext)[2], (*ext)[3]] });
                if offset_and_more & 0xfff9 != 0 {
                    parsed.transport = 0;
                    return Ok(None);
                }
                8
            }
            _ => return Ok(None),
        };
        // SAFETY: `ptr_at` gives the pointer only with the byte before the frame's end.
        next = unsafe {
            *frame
                .ptr_at::<u8>(cursor)
                .ok_or(ParseError::TruncatedIpv6Extension)?
        };
        if frame.remaining(cursor) < header_len {
            return Err(ParseError::TruncatedIpv6Extension);
        }
        cursor += header_len;
    }
    parsed.protocol = next;
    parsed.transport = cursor;
    match next {
        IPPROTO_UDP => Ok(Some((cursor, end))),
        IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS | IPPROTO_AH | IPPROTO_FRAGMENT => {
            Err(ParseError::TooManyIpv6Extensions)
        }
        _ => Ok(None),
    }
}

/// Parses a UDP header that must end by `datagram_end` (the IP datagram's end: Ethernet
/// padding is not payload); returns the BTH's offset if it is RoCEv2 with a whole BTH.
#[inline(always)]
fn parse_udp(
    frame: &Frame,
    offset: usize,
    datagram_end: usize,
) -> Result<Option<usize>, ParseError> {
    let udp: *const UdpHdr = frame.ptr_at(offset).ok_or(ParseError::TruncatedUdp)?;
    if offset + UdpHdr::LEN > datagram_end {
        return Err(ParseError::TruncatedUdp);
    }
    // SAFETY: `ptr_at` gave the pointer only with the whole header before the frame's end.
    if u16::from_be_bytes(unsafe { (*udp).dst }) != bth::ROCEV2_PORT {
        return Ok(None);
    }
    let bth_end = offset + UdpHdr::LEN + bth::HEADER_LEN;
    if frame
        .ptr_at::<[u8; bth::HEADER_LEN]>(offset + UdpHdr::LEN)
        .is_none()
        || bth_end > datagram_end
    {
        return Err(ParseError::TruncatedBth);
    }
    Ok(Some(offset + UdpHdr::LEN))
}
