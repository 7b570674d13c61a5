//! IPv6 fixed header (RFC 8200). Extension headers are not walked: the next
//! header is what the fixed header names.

use core::fmt;
use core::net::Ipv6Addr;

use super::ip::{self, Ecn, Protocol};
use super::{check_len, read_u16, view, write_u16, Error, Result};

mod field {
    use crate::Field;

    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// Byte offset of the hop limit.
pub const HOP_LIMIT_OFFSET: usize = field::HOP_LIMIT;

view! {
    /// A read/write view of an IPv6 packet.
    Packet
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Fails with `Truncated` if the buffer is shorter than the header or the payload length
    /// the header announces.
    pub fn check_len(&self) -> Result<()> {
        check_len(self.buffer.as_ref(), HEADER_LEN)?;
        check_len(
            self.buffer.as_ref(),
            HEADER_LEN + usize::from(self.payload_len()),
        )
    }

    fn first_word(&self) -> u32 {
        u32::from_be_bytes(self.buffer.as_ref()[field::VER_TC_FLOW].try_into().unwrap())
    }

    /// IP version (6 for a valid packet).
    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    /// The traffic class byte: DSCP and ECN.
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// Differentiated services code point.
    pub fn dscp(&self) -> u8 {
        ip::dscp(self.traffic_class())
    }

    /// ECN codepoint.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_traffic_class(self.traffic_class())
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// Payload length in bytes.
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Next header.
    pub fn next_header(&self) -> Protocol {
        self.buffer.as_ref()[field::NEXT_HEADER].into()
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        <[u8; 16]>::try_from(&self.buffer.as_ref()[field::SRC_ADDR])
            .unwrap()
            .into()
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        <[u8; 16]>::try_from(&self.buffer.as_ref()[field::DST_ADDR])
            .unwrap()
            .into()
    }

    /// The payload, up to the payload length (link-layer padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 6, the traffic class and the flow label.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let word = (6 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&word.to_be_bytes());
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH.start, value);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, value: Protocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// The payload, up to the payload length, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// An IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: Protocol,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Differentiated services code point (0..=63).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Repr {
    /// Reads a header, checking the version.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        if packet.version() != 6 {
            return Err(Error::Malformed("IP version is not 6"));
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        })
    }

    /// Length of the header.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a buffer of at least `buffer_len() + payload_len`
    /// bytes; fails if the payload exceeds 65535 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        let length = u16::try_from(self.payload_len)
            .map_err(|_| Error::Malformed("IPv6 payload over 65535 bytes"))?;
        check_len(packet.buffer.as_ref(), HEADER_LEN + self.payload_len)?;
        packet.set_version_tc_flow(ip::traffic_class(self.dscp, self.ecn), self.flow_label);
        packet.set_payload_len(length);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 src={} dst={} nxt={:?} len={} hop={} dscp={} ecn={:?}",
            self.src_addr,
            self.dst_addr,
            self.next_header,
            self.payload_len,
            self.hop_limit,
            self.dscp,
            self.ecn
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;
    use std::{vec, vec::Vec};

    fn scapy_packet() -> Vec<u8> {
        vectors::ROCE_V6.to_vec()[14..].to_vec()
    }

    fn expected() -> Repr {
        Repr {
            src_addr: "fd00::1".parse().unwrap(),
            dst_addr: "fd00::2".parse().unwrap(),
            next_header: Protocol::Udp,
            payload_len: 40,
            hop_limit: 64,
            dscp: 26,
            ecn: Ecn::Ect0,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn parse_scapy() {
        let bytes = scapy_packet();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.traffic_class(), 0x6a);
        assert_eq!(Repr::parse(&packet).unwrap(), expected());
    }

    #[test]
    fn emit_matches_scapy() {
        let bytes = scapy_packet();
        let mut out = bytes.clone();
        out[..HEADER_LEN].fill(0);
        expected()
            .emit(&mut Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn truncated_at_every_boundary() {
        let bytes = scapy_packet();
        crate::assert_prefixes_truncated(&bytes, |b| Packet::new_checked(b).map(drop));
        let mut out = vec![0u8; bytes.len() - 1];
        assert_eq!(
            expected().emit(&mut Packet::new_unchecked(&mut out[..])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn wrong_version() {
        let mut bytes = scapy_packet();
        bytes[0] = 0x46;
        assert!(matches!(
            Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()),
            Err(Error::Malformed(_))
        ));
    }
}
