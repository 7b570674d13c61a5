//! The InfiniBand Base Transport Header as RoCEv2 carries it after UDP (port
//! 4791): 12 bytes of opcode, flags, partition key, destination QP, ack
//! request and packet sequence number.

use core::fmt;

use super::{check_len, enum_with_unknown, read_u16, read_u24, view, write_u16, write_u24, Result};

/// The UDP destination port of RoCEv2.
pub const ROCEV2_PORT: u16 = 4791;

/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// PSNs and QP numbers are 24-bit.
pub const MASK_24: u32 = 0x00ff_ffff;

enum_with_unknown! {
    /// BTH opcodes this toolkit sends or recognises (transport in the top 3 bits).
    pub enum Opcode(u8) {
        /// RC SEND First.
        RcSendFirst = 0x00,
        /// RC SEND Middle.
        RcSendMiddle = 0x01,
        /// RC SEND Last.
        RcSendLast = 0x02,
        /// RC SEND Only.
        RcSendOnly = 0x04,
        /// RC RDMA WRITE First.
        RcWriteFirst = 0x06,
        /// RC RDMA WRITE Middle.
        RcWriteMiddle = 0x07,
        /// RC RDMA WRITE Last.
        RcWriteLast = 0x08,
        /// RC RDMA WRITE Only.
        RcWriteOnly = 0x0a,
        /// RC Acknowledge.
        RcAck = 0x11,
        /// UD SEND Only.
        UdSendOnly = 0x64,
        /// Congestion Notification Packet (RoCEv2).
        Cnp = 0x81,
    }
}

mod field {
    use crate::Field;

    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: Field = 2..4;
    pub const FECN_BECN: usize = 4;
    pub const DEST_QP: Field = 5..8;
    pub const ACK_REQ: usize = 8;
    pub const PSN: Field = 9..12;
    pub const PAYLOAD: usize = 12;
}

/// Length of the BTH.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Byte offset of the F/B/reserved byte, which the ICRC masks.
pub const FECN_BECN_OFFSET: usize = field::FECN_BECN;

/// Byte offset of the 24-bit PSN.
pub const PSN_OFFSET: usize = field::PSN.start;

view! {
    /// A read/write view of a BTH and what follows it.
    Packet,
    /// Fails with `Truncated` if the buffer cannot hold a BTH.
    check_len = HEADER_LEN,
    /// What follows the BTH (extended headers, payload, ICRC).
    payload,
    /// What follows the BTH, writable.
    payload_mut
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Opcode.
    pub fn opcode(&self) -> Opcode {
        self.buffer.as_ref()[field::OPCODE].into()
    }

    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }

    /// Migration request.
    pub fn migreq(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }

    /// Pad count: bytes of padding at the end of the payload (0..=3).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 3
    }

    /// Transport header version.
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0f
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PKEY.start)
    }

    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x80 != 0
    }

    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x40 != 0
    }

    /// Destination queue pair (24 bits).
    pub fn dest_qp(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::DEST_QP.start)
    }

    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::PSN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the opcode.
    pub fn set_opcode(&mut self, value: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = value.into();
    }

    /// Sets solicited event, migration request, pad count and transport version at once.
    pub fn set_flags(&mut self, solicited: bool, migreq: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] = (u8::from(solicited) << 7)
            | (u8::from(migreq) << 6)
            | ((pad_count & 3) << 4)
            | (tver & 0x0f);
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::PKEY.start, value);
    }

    /// Sets FECN and BECN and clears the reserved bits of their byte.
    pub fn set_fecn_becn(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::FECN_BECN] = (u8::from(fecn) << 7) | (u8::from(becn) << 6);
    }

    /// Sets the destination QP (low 24 bits) and clears the reserved byte before it.
    pub fn set_dest_qp(&mut self, value: u32) {
        write_u24(self.buffer.as_mut(), field::DEST_QP.start, value);
    }

    /// Sets the acknowledge request and clears the reserved bits of its byte.
    pub fn set_ack_req(&mut self, value: bool) {
        self.buffer.as_mut()[field::ACK_REQ] = u8::from(value) << 7;
    }

    /// Sets the PSN (low 24 bits).
    pub fn set_psn(&mut self, value: u32) {
        write_u24(self.buffer.as_mut(), field::PSN.start, value);
    }
}

/// A Base Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub migreq: bool,
    /// Pad count (0..=3).
    pub pad_count: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination queue pair (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Repr {
    /// A header with the given opcode, destination QP and PSN, default
    /// partition key and every flag clear.
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Repr {
        Repr {
            opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: dest_qp & MASK_24,
            ack_req: false,
            psn: psn & MASK_24,
        }
    }

    /// Reads a header (reserved bits are ignored).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            opcode: packet.opcode(),
            solicited: packet.solicited(),
            migreq: packet.migreq(),
            pad_count: packet.pad_count(),
            tver: packet.tver(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qp: packet.dest_qp(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        }
    }

    /// Length of the header.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (reserved bits zero) into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_len(packet.buffer.as_ref(), HEADER_LEN)?;
        packet.set_opcode(self.opcode);
        packet.set_flags(self.solicited, self.migreq, self.pad_count, self.tver);
        packet.set_pkey(self.pkey);
        packet.set_fecn_becn(self.fecn, self.becn);
        packet.set_dest_qp(self.dest_qp);
        packet.set_ack_req(self.ack_req);
        packet.set_psn(self.psn);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BTH opcode={:?} qp={:#08x} psn={} pkey={:#06x}",
            self.opcode, self.dest_qp, self.psn, self.pkey
        )?;
        if self.fecn || self.becn {
            write!(f, " fecn={} becn={}", self.fecn, self.becn)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{vectors, Error};
    use std::vec::Vec;

    /// The BTH of vectors::ROCE_V4: `BTH(opcode=0x04, dqpn=0x000012, psn=0x345678, ackreq=1)`.
    fn scapy_bth() -> Vec<u8> {
        vectors::ROCE_V4.to_vec()[42..54].to_vec()
    }

    #[test]
    fn parse_scapy() {
        let bytes = scapy_bth();
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap());
        let mut expected = Repr::new(Opcode::RcSendOnly, 0x12, 0x345678);
        expected.ack_req = true;
        assert_eq!(repr, expected);

        // vectors::ROCE_V6: `BTH(opcode=0x0a, dqpn=0xabcdef, psn=0xffffff)`.
        let v6 = vectors::ROCE_V6.to_vec();
        let repr = Repr::parse(&Packet::new_checked(&v6[62..]).unwrap());
        assert_eq!(repr, Repr::new(Opcode::RcWriteOnly, 0xabcdef, 0xffffff));
    }

    #[test]
    fn emit_round_trip() {
        let bytes = scapy_bth();
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap());
        let mut out = [0u8; HEADER_LEN];
        repr.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out[..], bytes[..]);

        let all = Repr {
            opcode: Opcode::Unknown(0x2a),
            solicited: true,
            migreq: true,
            pad_count: 3,
            tver: 0xf,
            pkey: 0x1234,
            fecn: true,
            becn: true,
            dest_qp: MASK_24,
            ack_req: true,
            psn: 1,
        };
        all.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(
            out,
            [0x2a, 0xff, 0x12, 0x34, 0xc0, 0xff, 0xff, 0xff, 0x80, 0, 0, 1]
        );
        assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()), all);
    }

    #[test]
    fn truncated() {
        let bytes = scapy_bth();
        crate::assert_prefixes_truncated(&bytes[..HEADER_LEN], |b| {
            Packet::new_checked(b).map(drop)
        });
        let repr = Repr::new(Opcode::Cnp, 1, 0);
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut [0u8; 11][..])),
            Err(Error::Truncated)
        );
    }
}
