//! The RoCEv2 Congestion Notification Packet after UDP: a BTH with opcode 0x81
//! and BECN set, addressed to the QP of the flow's sender, then 16 reserved
//! bytes, then the ICRC.

use core::fmt;

use super::bth::{self, Opcode};
use super::{check_len, view, Error, Result};

mod field {
    use crate::Field;

    pub const BTH: Field = 0..12;
    pub const RESERVED: Field = 12..28;
    pub const ICRC: Field = 28..32; // 4 bytes: icrc::ICRC_LEN
}

/// Length of the reserved bytes after the BTH.
pub const RESERVED_LEN: usize = field::RESERVED.end - field::RESERVED.start;

/// Length of a CNP from BTH to ICRC inclusive.
pub const PACKET_LEN: usize = field::ICRC.end;

view! {
    /// A read/write view of a CNP, from its BTH to its ICRC.
    Packet,
    /// Fails with `Truncated` if the buffer cannot hold BTH, reserved bytes and ICRC.
    check_len = PACKET_LEN
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The BTH.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(&self.buffer.as_ref()[field::BTH])
    }

    /// The 16 reserved bytes.
    pub fn reserved(&self) -> &[u8] {
        &self.buffer.as_ref()[field::RESERVED]
    }

    /// The ICRC as stored (little-endian on the wire).
    pub fn icrc(&self) -> u32 {
        u32::from_le_bytes(self.buffer.as_ref()[field::ICRC].try_into().unwrap())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The BTH, writable.
    pub fn bth_mut(&mut self) -> bth::Packet<&mut [u8]> {
        bth::Packet::new_unchecked(&mut self.buffer.as_mut()[field::BTH])
    }

    /// Zeroes the reserved bytes.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
}

/// A CNP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// The QP to notify: the sender's QP of the congested flow.
    pub dest_qp: u32,
    /// Partition key.
    pub pkey: u16,
}

impl Repr {
    /// Reads a CNP, failing with `Unsupported` if the opcode is not 0x81.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        let bth = packet.bth();
        if bth.opcode() != Opcode::Cnp {
            return Err(Error::Unsupported("BTH opcode is not CNP"));
        }
        Ok(Repr {
            dest_qp: bth.dest_qp(),
            pkey: bth.pkey(),
        })
    }

    /// The BTH of this CNP: opcode 0x81, BECN set, PSN 0.
    pub fn bth(&self) -> bth::Repr {
        bth::Repr {
            becn: true,
            pkey: self.pkey,
            ..bth::Repr::new(Opcode::Cnp, self.dest_qp, 0)
        }
    }

    /// Length from BTH to ICRC inclusive.
    pub fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes BTH and reserved bytes; the ICRC, which covers the IP and UDP
    /// headers too, is left to `icrc::fill` on the whole IP packet.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_len(packet.buffer.as_ref(), PACKET_LEN)?;
        self.bth().emit(&mut packet.bth_mut())?;
        packet.clear_reserved();
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CNP qp={:#08x} pkey={:#06x}", self.dest_qp, self.pkey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;
    use std::vec::Vec;

    /// The CNP of vectors::CNP_V4, `cnp(0x000012)`, from its BTH on.
    fn scapy_cnp() -> Vec<u8> {
        vectors::CNP_V4.to_vec()[42..].to_vec()
    }

    #[test]
    fn parse_scapy() {
        let bytes = scapy_cnp();
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet).unwrap(),
            Repr {
                dest_qp: 0x12,
                pkey: 0xffff
            }
        );
        assert!(packet.bth().becn());
        assert_eq!(packet.reserved(), [0; 16]);
        assert_eq!(packet.icrc(), 0xe4f1e7b8);
    }

    #[test]
    fn emit_matches_scapy() {
        let bytes = scapy_cnp();
        let mut out = [0xaau8; PACKET_LEN];
        Repr {
            dest_qp: 0x12,
            pkey: 0xffff,
        }
        .emit(&mut Packet::new_unchecked(&mut out[..]))
        .unwrap();
        assert_eq!(out[..28], bytes[..28]);
    }

    #[test]
    fn not_a_cnp() {
        let frame = vectors::ROCE_V4.to_vec();
        let packet = Packet::new_checked(&frame[42..]).unwrap();
        assert!(matches!(Repr::parse(&packet), Err(Error::Unsupported(_))));
    }

    #[test]
    fn truncated() {
        let bytes = scapy_cnp();
        crate::assert_prefixes_truncated(&bytes[..PACKET_LEN], |b| {
            Packet::new_checked(b).map(drop)
        });
        let repr = Repr {
            dest_qp: 1,
            pkey: 0xffff,
        };
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut [0u8; 31][..])),
            Err(Error::Truncated)
        );
    }
}
