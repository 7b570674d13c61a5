//! The packet parser shared by every program: Ethernet, up to two VLAN tags, IPv4 (with
//! options) or IPv6 (with a bounded walk over extension headers), UDP, and the RoCEv2 BTH.
//!
//! It only reads. Every access is bounds-checked against the end of the frame, so a malformed
//! frame yields a [`ParseError`] and never a read past the end. The headers are `wire`'s views
//! over fixed-size windows of the frame ([`Frame::bytes_at`]): the window's length is checked
//! once against the frame's end, in the form the verifier follows, and every field offset
//! within it is a constant, so the views' own bounds checks fold away.

use core::mem::size_of;

use dataplane_common::counters::ParseError;
use wire::{
    bth,
    ethernet::{self, EtherType},
    ip::{Ecn, Protocol},
    ipv4, ipv6, udp, vlan,
};

/// Most IPv6 extension headers the walk follows before giving up.
const MAX_IPV6_EXTENSIONS: usize = 4;

// IP protocol numbers, from `wire`.
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

    /// The `N` bytes at `offset`, if all of them lie inside the frame: the window a `wire`
    /// view reads a header through.
    #[inline(always)]
    pub fn bytes_at<const N: usize>(&self, offset: usize) -> Option<&[u8; N]> {
        let bytes = self.ptr_at::<[u8; N]>(offset)?;
        // SAFETY: `ptr_at` gave the pointer only with all `N` bytes before the frame's end, and
        // the frame stays in place while the program runs (no helper that moves packet data is
        // called while a window is read; writers go through `ptr_at` after the reads).
        Some(unsafe { &*bytes })
    }

    /// The fixed IPv4 header at `offset`, if all of it lies inside the frame.
    #[inline(always)]
    pub fn ipv4_at(&self, offset: usize) -> Option<ipv4::Packet<&[u8; ipv4::HEADER_LEN]>> {
        self.bytes_at(offset).map(ipv4::Packet::new_unchecked)
    }

    /// The fixed IPv6 header at `offset`, if all of it lies inside the frame.
    #[inline(always)]
    pub fn ipv6_at(&self, offset: usize) -> Option<ipv6::Packet<&[u8; ipv6::HEADER_LEN]>> {
        self.bytes_at(offset).map(ipv6::Packet::new_unchecked)
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
    /// Where the UDP datagram ends when `roce` (by the UDP length, within the IP datagram):
    /// what lies past it (ICRC aside, Ethernet padding) is no RoCE header.
    pub udp_end: usize,
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
        udp_end: 0,
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
        Some(bth::Packet::new_unchecked(*frame.bytes_at(self.bth)?))
    }
}

/// Parses `frame` from its Ethernet header.
#[inline(always)]
pub fn parse(frame: &Frame) -> Result<Parsed, ParseError> {
    let eth = ethernet::Frame::new_unchecked(
        frame
            .bytes_at::<{ ethernet::HEADER_LEN }>(0)
            .ok_or(ParseError::TruncatedEthernet)?,
    );
    let mut ether_type = eth.ethertype();
    let mut offset = ethernet::HEADER_LEN;
    let mut parsed = Parsed::OTHER;

    for depth in 0..3 {
        if ether_type != EtherType::Vlan && ether_type != EtherType::QinQ {
            break;
        }
        if depth == 2 {
            return Err(ParseError::TooManyVlans);
        }
        let tag = vlan::Tag::new_unchecked(
            frame
                .bytes_at::<{ vlan::TAG_LEN }>(offset)
                .ok_or(ParseError::TruncatedVlan)?,
        );
        if parsed.pcp.is_none() {
            parsed.pcp = Some(tag.pcp());
        }
        ether_type = tag.ethertype();
        offset += vlan::TAG_LEN;
    }

    let transport = match ether_type {
        EtherType::Ipv4 => parse_ipv4(frame, offset, &mut parsed)?,
        EtherType::Ipv6 => parse_ipv6(frame, offset, &mut parsed)?,
        _ => None,
    };
    if let Some((udp_offset, datagram_end)) = transport {
        if let Some((bth, udp_end)) = parse_udp(frame, udp_offset, datagram_end)? {
            parsed.roce = true;
            parsed.bth = bth;
            parsed.udp_end = udp_end;
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
    let ip = frame.ipv4_at(offset).ok_or(ParseError::TruncatedIpv4)?;
    let header_len = ip.header_len();
    let total_len = usize::from(ip.total_len());
    if ip.version() != 4 || header_len < ipv4::HEADER_LEN || total_len < header_len {
        return Err(ParseError::BadIpv4Header);
    }
    if total_len > frame.remaining(offset) {
        return Err(ParseError::TruncatedIpv4);
    }
    let proto = ip.protocol().value();
    parsed.network = Network::Ipv4(offset);
    parsed.dscp = ip.dscp();
    parsed.ecn = ip.ecn().bits();
    parsed.protocol = proto;
    // More-fragments flag or a fragment offset: not a whole datagram.
    if ip.more_frags() || ip.frag_offset() != 0 {
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
    let ip = frame.ipv6_at(offset).ok_or(ParseError::TruncatedIpv6)?;
    let mut next = ip.next_header().value();
    let datagram_len = ipv6::HEADER_LEN + usize::from(ip.payload_len());
    if ip.version() != 6 || datagram_len > frame.remaining(offset) {
        return Err(ParseError::TruncatedIpv6);
    }
    let end = offset + datagram_len;
    parsed.network = Network::Ipv6(offset);
    parsed.dscp = ip.dscp();
    parsed.ecn = Ecn::from_traffic_class(ip.traffic_class()).bits();

    let mut cursor = offset + ipv6::HEADER_LEN;
    for _ in 0..MAX_IPV6_EXTENSIONS {
        parsed.protocol = next;
        parsed.transport = cursor;
        let header_len = match next {
            IPPROTO_UDP => return Ok(Some((cursor, end))),
            IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS => {
                let ext: &[u8; 2] = frame
                    .bytes_at(cursor)
                    .ok_or(ParseError::TruncatedIpv6Extension)?;
                (ext[1] as usize + 1) * 8
            }
            IPPROTO_AH => {
                let ext: &[u8; 2] = frame
                    .bytes_at(cursor)
                    .ok_or(ParseError::TruncatedIpv6Extension)?;
                (ext[1] as usize + 2) * 4
            }
            IPPROTO_FRAGMENT => {
                let ext: &[u8; 8] = frame
                    .bytes_at(cursor)
                    .ok_or(ParseError::TruncatedIpv6Extension)?;
                let offset_and_more = u16::from_be_bytes([ext[2], ext[3]]);
                if offset_and_more & 0xfff9 != 0 {
                    parsed.transport = 0;
                    return Ok(None);
                }
                8
            }
            _ => return Ok(None),
        };
        next = frame
            .bytes_at::<1>(cursor)
            .ok_or(ParseError::TruncatedIpv6Extension)?[0];
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
/// padding is not payload); returns the BTH's offset and the UDP datagram's end (by its length,
/// at most `datagram_end`) if it is RoCEv2 with a whole BTH.
#[inline(always)]
fn parse_udp(
    frame: &Frame,
    offset: usize,
    datagram_end: usize,
) -> Result<Option<(usize, usize)>, ParseError> {
    let udp = udp::Packet::new_unchecked(
        frame
            .bytes_at::<{ udp::HEADER_LEN }>(offset)
            .ok_or(ParseError::TruncatedUdp)?,
    );
    if offset + udp::HEADER_LEN > datagram_end {
        return Err(ParseError::TruncatedUdp);
    }
    if udp.dst_port() != bth::ROCEV2_PORT {
        return Ok(None);
    }
    let bth_end = offset + udp::HEADER_LEN + bth::HEADER_LEN;
    if frame
        .ptr_at::<[u8; bth::HEADER_LEN]>(offset + udp::HEADER_LEN)
        .is_none()
        || bth_end > datagram_end
    {
        return Err(ParseError::TruncatedBth);
    }
    let udp_end = datagram_end.min(offset + usize::from(udp.len()));
    Ok(Some((offset + udp::HEADER_LEN, udp_end)))
}
