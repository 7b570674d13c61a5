//! IEEE 802.1Q VLAN tag: the 4 bytes after an 802.1Q (0x8100) or 802.1ad
//! (0x88a8) EtherType — priority (PCP), drop eligibility (DEI), VLAN id, and
//! the EtherType of what follows.

use super::ethernet::EtherType;
use super::{read_u16, view, write_u16, Result};

mod field {
    use crate::Field;

    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
    pub const PAYLOAD: usize = 4;
}

/// Length of a VLAN tag in bytes.
pub const TAG_LEN: usize = field::PAYLOAD;

view! {
    /// A read/write view of a VLAN tag and what follows it.
    Tag,
    /// Fails with `Truncated` if the buffer cannot hold a tag.
    check_len = TAG_LEN,
    /// What follows the tag.
    payload,
    /// What follows the tag, writable.
    payload_mut
}

impl<T: AsRef<[u8]>> Tag<T> {
    /// Priority code point (0..=7).
    pub fn pcp(&self) -> u8 {
        (read_u16(self.buffer.as_ref(), field::TCI.start) >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::TCI.start) & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TCI.start) & 0x0fff
    }

    /// EtherType of the payload after the tag.
    pub fn ethertype(&self) -> EtherType {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE.start).into()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    /// Sets priority, drop eligibility and VLAN id at once (the TCI).
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = (u16::from(pcp & 7) << 13) | (u16::from(dei) << 12) | (vid & 0x0fff);
        write_u16(self.buffer.as_mut(), field::TCI.start, tci);
    }

    /// Sets the EtherType of the payload.
    pub fn set_ethertype(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE.start, value.into());
    }
}

/// The contents of a VLAN tag (its TPID belongs to the header before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095; 0 = priority tag only).
    pub vid: u16,
}

impl Repr {
    /// Reads a tag.
    pub fn parse<T: AsRef<[u8]>>(tag: &Tag<T>) -> Repr {
        Repr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
        }
    }

    /// Writes the TCI of this tag (the caller writes the EtherType that follows).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut Tag<T>) {
        tag.set_tci(self.pcp, self.dei, self.vid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;

    #[test]
    fn reads_scapy_dot1q() {
        // Inner tag of vectors::ROCE_QINQ: Dot1Q(prio=3, vlan=100) then IPv4.
        let frame = vectors::ROCE_QINQ.to_vec();
        let tag = Tag::new_checked(&frame[18..]).unwrap();
        assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (3, false, 100));
        assert_eq!(tag.ethertype(), EtherType::Ipv4);
        assert_eq!(
            Repr::parse(&tag),
            Repr {
                pcp: 3,
                dei: false,
                vid: 100
            }
        );
    }

    #[test]
    fn emit_round_trip() {
        let repr = Repr {
            pcp: 5,
            dei: true,
            vid: 200,
        };
        let mut bytes = [0u8; 4];
        let mut tag = Tag::new_unchecked(&mut bytes[..]);
        repr.emit(&mut tag);
        tag.set_ethertype(EtherType::Vlan);
        // Outer tag of vectors::ROCE_QINQ: Dot1AD(prio=5, id=1, vlan=200).
        assert_eq!(bytes, [0xb0, 0xc8, 0x81, 0x00]);
        assert_eq!(Repr::parse(&Tag::new_checked(&bytes[..]).unwrap()), repr);
    }

    #[test]
    fn truncated() {
        crate::assert_prefixes_truncated(&[0u8; TAG_LEN], |b| Tag::new_checked(b).map(drop));
    }
}
