//! IPv4 header (RFC 791) with its header checksum. Options are carried but not
//! interpreted; fragments are reported, not reassembled.

use core::fmt;
use core::net::Ipv4Addr;

use super::ip::{self, Ecn, Protocol};
use super::{check_len, checksum, read_u16, view, write_u16, Error, Result};

mod field {
    use crate::Field;

    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// Byte offset of the TOS (traffic class) byte.
pub const TOS_OFFSET: usize = field::TOS;
/// Byte offset of the TTL.
pub const TTL_OFFSET: usize = field::TTL;
/// Byte range of the header checksum.
pub const CHECKSUM_RANGE: core::ops::Range<usize> = field::CHECKSUM;

view! {
    /// A read/write view of an IPv4 packet.
    Packet
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Fails with `Truncated` if the buffer is shorter than the header, the header length, or
    /// the total length the header announces, and with `Malformed` if the lengths contradict
    /// each other.
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        check_len(data, HEADER_LEN)?;
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::Malformed("IPv4 header length below 20"));
        }
        check_len(data, header_len)?;
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed("IPv4 total length below header length"));
        }
        check_len(data, total_len)
    }

    /// IP version (4 for a valid packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The TOS byte: DSCP and ECN.
    pub fn traffic_class(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// Differentiated services code point.
    pub fn dscp(&self) -> u8 {
        ip::dscp(self.traffic_class())
    }

    /// ECN codepoint.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_traffic_class(self.traffic_class())
    }

    /// Total length (header and payload) in bytes.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT.start)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF.start) & 0x4000 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF.start) & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (read_u16(self.buffer.as_ref(), field::FLG_OFF.start) & 0x1fff) * 8
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Upper-layer protocol.
    pub fn protocol(&self) -> Protocol {
        self.buffer.as_ref()[field::PROTOCOL].into()
    }

    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        <[u8; 4]>::try_from(&self.buffer.as_ref()[field::SRC_ADDR])
            .unwrap()
            .into()
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        <[u8; 4]>::try_from(&self.buffer.as_ref()[field::DST_ADDR])
            .unwrap()
            .into()
    }

    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::finish(checksum::sum(&self.buffer.as_ref()[..self.header_len()])) == 0
    }

    /// The payload, up to the total length (link-layer padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 4 and the header length in bytes (a multiple of 4).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (header_len / 4) as u8;
    }

    /// Sets the TOS byte.
    pub fn set_traffic_class(&mut self, value: u8) {
        self.buffer.as_mut()[field::TOS] = value;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH.start, value);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT.start, value);
    }

    /// Sets the flags and fragment offset: DF as given, MF clear, offset 0.
    pub fn set_dont_frag(&mut self, value: bool) {
        write_u16(
            self.buffer.as_mut(),
            field::FLG_OFF.start,
            if value { 0x4000 } else { 0 },
        );
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the upper-layer protocol.
    pub fn set_protocol(&mut self, value: Protocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.into();
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the header checksum as given (after an incremental update, RFC 1624, where
    /// [`Packet::fill_checksum`] would sum the whole header).
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM.start, value);
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM.start, 0);
        let header_len = self.header_len();
        let value = checksum::finish(checksum::sum(&self.buffer.as_ref()[..header_len]));
        write_u16(self.buffer.as_mut(), field::CHECKSUM.start, value);
    }

    /// The payload, up to the total length, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// An unfragmented IPv4 header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Upper-layer protocol.
    pub protocol: Protocol,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Differentiated services code point (0..=63).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
}

impl Repr {
    /// Reads a header, checking version and checksum; refuses options and fragments.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        if packet.version() != 4 {
            return Err(Error::Malformed("IP version is not 4"));
        }
        if !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        if packet.header_len() != HEADER_LEN {
            return Err(Error::Unsupported("IPv4 options"));
        }
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(Error::Unsupported("IPv4 fragment"));
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.payload().len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Length of the header.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header, with its checksum, into a buffer of at least
    /// `buffer_len() + payload_len` bytes; fails if the total exceeds 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        let total_len = HEADER_LEN + self.payload_len;
        let total = u16::try_from(total_len)
            .map_err(|_| Error::Malformed("IPv4 packet over 65535 bytes"))?;
        check_len(packet.buffer.as_ref(), total_len)?;
        packet.set_version_and_header_len(HEADER_LEN);
        packet.set_traffic_class(ip::traffic_class(self.dscp, self.ecn));
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.set_dont_frag(self.dont_frag);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv4 src={} dst={} proto={:?} len={} ttl={} dscp={} ecn={:?}",
            self.src_addr,
            self.dst_addr,
            self.protocol,
            self.payload_len,
            self.ttl,
            self.dscp,
            self.ecn
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;
    use std::vec::Vec;

    fn scapy_header() -> Vec<u8> {
        vectors::ROCE_V4.to_vec()[14..].to_vec()
    }

    fn expected() -> Repr {
        Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: Protocol::Udp,
            payload_len: 40,
            ttl: 64,
            dscp: 26,
            ecn: Ecn::Ect0,
            ident: 0,
            dont_frag: true,
        }
    }

    #[test]
    fn parse_scapy() {
        let bytes = scapy_header();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.checksum(), 0x2645);
        assert_eq!(Repr::parse(&packet).unwrap(), expected());
        assert_eq!(packet.payload().len(), 40);
    }

    /// Asserts that `repr`, emitted over `packet` with its header zeroed, gives `packet` back.
    fn assert_emits(repr: Repr, packet: &[u8]) {
        let mut out = packet.to_vec();
        out[..HEADER_LEN].fill(0);
        repr.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, packet);
    }

    #[test]
    fn emit_matches_scapy() {
        assert_emits(expected(), &scapy_header());
        // scapy's UDP vector has id 0x1234, no flags, TOS 0.
        let udp = vectors::UDP_V4;
        assert_emits(
            Repr::parse(&Packet::new_checked(udp).unwrap()).unwrap(),
            udp,
        );
    }

    #[test]
    fn bad_checksum_and_version() {
        let mut bytes = scapy_header();
        bytes[8] = 63;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()),
            Err(Error::Checksum)
        );
        let mut bytes = scapy_header();
        bytes[0] = 0x65;
        assert!(matches!(
            Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn truncated_at_every_boundary() {
        let bytes = scapy_header();
        crate::assert_prefixes_truncated(&bytes, |b| Packet::new_checked(b).map(drop));
        // Trailing link-layer padding is not payload.
        let mut padded = bytes.clone();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(
            Packet::new_checked(&padded[..]).unwrap().payload().len(),
            40
        );
        let mut out = [0u8; 59];
        assert_eq!(
            expected().emit(&mut Packet::new_unchecked(&mut out[..])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn inconsistent_lengths() {
        let mut bytes = scapy_header();
        bytes[0] = 0x44; // IHL 4
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Malformed(_))
        ));
        let mut bytes = scapy_header();
        bytes[2..4].copy_from_slice(&[0, 19]);
        assert!(matches!(
            Packet::new_checked(&bytes[..]),
            Err(Error::Malformed(_))
        ));
    }
}
