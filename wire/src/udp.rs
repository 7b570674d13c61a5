//! UDP header (RFC 768) with its checksum over the IPv4 or IPv6 pseudo-header.

use core::fmt;
use core::net::IpAddr;

use super::ip::Protocol;
use super::{check_len, checksum, read_u16, view, write_u16, Error, Result};

mod field {
    use crate::Field;

    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
    pub const PAYLOAD: usize = 8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Byte range of the checksum.
pub const CHECKSUM_RANGE: core::ops::Range<usize> = field::CHECKSUM;

view! {
    /// A read/write view of a UDP datagram.
    Packet
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Fails with `Truncated` if the buffer is shorter than the header or the length the
    /// header announces, and with `Malformed` if that length is below the header's.
    pub fn check_len(&self) -> Result<()> {
        check_len(self.buffer.as_ref(), HEADER_LEN)?;
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed("UDP length below 8"));
        }
        check_len(self.buffer.as_ref(), len)
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT.start)
    }

    /// Length of header and payload.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Checksum as stored (0: none was computed).
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Whether the checksum is absent (zero) or correct for these addresses.
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.checksum() == 0 || checksum::finish(self.sum(src, dst)) == 0
    }

    /// The payload, up to the UDP length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    fn sum(&self, src: IpAddr, dst: IpAddr) -> u32 {
        let len = self.len();
        checksum::pseudo_header(src, dst, Protocol::Udp.into(), u32::from(len))
            + checksum::sum(&self.buffer.as_ref()[..usize::from(len)])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT.start, value);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT.start, value);
    }

    /// Sets the length of header and payload.
    pub fn set_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH.start, value);
    }

    /// Sets the stored checksum (0: none).
    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM.start, value);
    }

    /// Computes and stores the checksum over the pseudo-header, header and payload.
    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) {
        self.set_checksum(0);
        let value = match checksum::finish(self.sum(src, dst)) {
            0 => 0xffff, // 0 means "no checksum": send its one's-complement twin.
            v => v,
        };
        self.set_checksum(value);
    }

    /// The payload, up to the UDP length, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl Repr {
    /// Reads a header, checking the checksum (if any) against the IP addresses.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>, src: IpAddr, dst: IpAddr) -> Result<Repr> {
        if !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.payload().len(),
        })
    }

    /// Length of the header.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum into a buffer of at least
    /// `buffer_len() + payload_len` bytes; once the payload is in place,
    /// `Packet::fill_checksum` computes the checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        let len = u16::try_from(HEADER_LEN + self.payload_len)
            .map_err(|_| Error::Malformed("UDP datagram over 65535 bytes"))?;
        check_len(packet.buffer.as_ref(), usize::from(len))?;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(0);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UDP src={} dst={} len={}",
            self.src_port, self.dst_port, self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;
    use std::{vec, vec::Vec};

    /// The UDP part of a scapy vector with its IP addresses.
    fn scapy(vector: &[u8], ip_header_len: usize) -> (Vec<u8>, IpAddr, IpAddr) {
        let bytes = vector.to_vec();
        let (src, dst) = if ip_header_len == 20 {
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
        } else {
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
        };
        (bytes[ip_header_len..].to_vec(), src, dst)
    }

    #[test]
    fn checksums_match_scapy() {
        for (vector, ip_len, payload) in [
            (vectors::UDP_V4, 20, &b"hello roce"[..]),
            (vectors::UDP_V6, 40, &b"hello roce!"[..]),
        ] {
            let (bytes, src, dst) = scapy(vector, ip_len);
            let packet = Packet::new_checked(&bytes[..]).unwrap();
            let repr = Repr::parse(&packet, src, dst).unwrap();
            assert_eq!(
                repr,
                Repr {
                    src_port: 1234,
                    dst_port: 4791,
                    payload_len: payload.len()
                }
            );
            assert_eq!(packet.payload(), payload);

            let mut out = vec![0u8; bytes.len()];
            let mut view = Packet::new_unchecked(&mut out[..]);
            repr.emit(&mut view).unwrap();
            view.payload_mut().copy_from_slice(payload);
            view.fill_checksum(src, dst);
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn bad_and_absent_checksum() {
        let (mut bytes, src, dst) = scapy(vectors::UDP_V4, 20);
        bytes[9] ^= 1;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&bytes[..]).unwrap(), src, dst),
            Err(Error::Checksum)
        );
        bytes[6..8].fill(0);
        assert!(Repr::parse(&Packet::new_checked(&bytes[..]).unwrap(), src, dst).is_ok());
    }

    #[test]
    fn truncated_at_every_boundary() {
        let (bytes, ..) = scapy(vectors::UDP_V4, 20);
        crate::assert_prefixes_truncated(&bytes, |b| Packet::new_checked(b).map(drop));
        let mut short = bytes.clone();
        short[4..6].copy_from_slice(&[0, 7]);
        assert!(matches!(
            Packet::new_checked(&short[..]),
            Err(Error::Malformed(_))
        ));
        let repr = Repr {
            src_port: 1,
            dst_port: 2,
            payload_len: 10,
        };
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut [0u8; 17][..])),
            Err(Error::Truncated)
        );
    }
}
