//! Ethernet II frames with up to two VLAN tags: none, one 802.1Q tag (0x8100),
//! or an 802.1ad service tag (0x88a8) followed by an 802.1Q customer tag.

use core::fmt;
use core::str::FromStr;

use super::vlan::{self, TAG_LEN};
use super::{check_len, enum_with_unknown, read_u16, view, write_u16, Error, Result};

enum_with_unknown! {
    /// The EtherType of a frame's payload.
    pub enum EtherType(u16) {
        /// IPv4.
        Ipv4 = 0x0800,
        /// ARP.
        Arp = 0x0806,
        /// IPv6.
        Ipv6 = 0x86dd,
        /// 802.1Q customer VLAN tag.
        Vlan = 0x8100,
        /// 802.1ad service VLAN tag (QinQ outer tag).
        QinQ = 0x88a8,
        /// MAC control (PAUSE, 802.1Qbb PFC).
        MacControl = 0x8808,
    }
}

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Address(pub [u8; 6]);

impl Address {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Address = Address([0xff; 6]);

    /// Whether the group bit is set (multicast or broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for Address {
    type Err = Error;

    /// Parses six colon-separated octets of two hex digits each, either case, e.g.
    /// `02:00:00:0a:Bc:01`: the form `ip link`, scapy and the P4 tutorials print, and the only
    /// one the tutorials' controller reads as a MAC address.
    fn from_str(text: &str) -> Result<Address> {
        let mut bytes = [0u8; 6];
        let mut parts = text.split(':');
        for byte in &mut bytes {
            let part = parts
                .next()
                .ok_or(Error::Malformed("MAC address needs six octets"))?;
            *byte = match *part.as_bytes() {
                [high, low] => (hex_digit(high)? << 4) | hex_digit(low)?,
                _ => return Err(Error::Malformed("MAC address octet")),
            };
        }
        if parts.next().is_some() {
            return Err(Error::Malformed("MAC address needs six octets"));
        }
        Ok(Address(bytes))
    }
}

/// The value of one hex digit of a MAC address.
fn hex_digit(digit: u8) -> Result<u8> {
    match digit {
        b'0'..=b'9' => Ok(digit - b'0'),
        b'a'..=b'f' => Ok(digit - b'a' + 10),
        b'A'..=b'F' => Ok(digit - b'A' + 10),
        _ => Err(Error::Malformed("MAC address octet")),
    }
}

mod field {
    use crate::Field;

    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: usize = 14;
}

/// Length of an untagged Ethernet header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Minimum length of a frame without its FCS; shorter frames are padded to it.
pub const MIN_FRAME_LEN: usize = 60;

view! {
    /// A read/write view of an Ethernet frame (without FCS).
    Frame,
    /// Fails with `Truncated` if the buffer cannot hold the header.
    check_len = HEADER_LEN,
    /// Everything after the EtherType.
    payload,
    /// Everything after the EtherType, writable.
    payload_mut
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Destination MAC address.
    pub fn dst_addr(&self) -> Address {
        Address(self.buffer.as_ref()[field::DESTINATION].try_into().unwrap())
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> Address {
        Address(self.buffer.as_ref()[field::SOURCE].try_into().unwrap())
    }

    /// EtherType after the addresses (a TPID when the frame is tagged).
    pub fn ethertype(&self) -> EtherType {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE.start).into()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0);
    }

    /// Sets the EtherType after the addresses.
    pub fn set_ethertype(&mut self, value: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE.start, value.into());
    }
}

/// The VLAN tags of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vlan {
    /// No tag.
    #[default]
    Untagged,
    /// One 802.1Q tag (TPID 0x8100).
    Single(vlan::Repr),
    /// An 802.1ad service tag (TPID 0x88a8) then an 802.1Q customer tag (0x8100).
    Double {
        /// The service tag.
        outer: vlan::Repr,
        /// The customer tag.
        inner: vlan::Repr,
    },
}

impl Vlan {
    /// Number of bytes the tags take.
    pub fn len(&self) -> usize {
        match self {
            Vlan::Untagged => 0,
            Vlan::Single(_) => TAG_LEN,
            Vlan::Double { .. } => 2 * TAG_LEN,
        }
    }

    /// Whether there is no tag.
    pub fn is_empty(&self) -> bool {
        *self == Vlan::Untagged
    }
}

/// The header of an Ethernet frame: addresses, VLAN tags, payload EtherType.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Destination MAC address.
    pub dst_addr: Address,
    /// Source MAC address.
    pub src_addr: Address,
    /// VLAN tags.
    pub vlan: Vlan,
    /// EtherType of the payload after the tags.
    pub ethertype: EtherType,
}

impl Repr {
    /// Reads the header, walking up to two VLAN tags; fails on a third tag or a
    /// service tag that is not followed by a customer tag.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        let (vlan, ethertype) = match frame.ethertype() {
            EtherType::Vlan => {
                let tag = vlan::Tag::new_checked(frame.payload())?;
                (Vlan::Single(vlan::Repr::parse(&tag)), tag.ethertype())
            }
            EtherType::QinQ => {
                let outer = vlan::Tag::new_checked(frame.payload())?;
                if outer.ethertype() != EtherType::Vlan {
                    return Err(Error::Malformed(
                        "802.1ad tag not followed by an 802.1Q tag",
                    ));
                }
                let inner = vlan::Tag::new_checked(outer.payload())?;
                let vlan = Vlan::Double {
                    outer: vlan::Repr::parse(&outer),
                    inner: vlan::Repr::parse(&inner),
                };
                (vlan, inner.ethertype())
            }
            other => (Vlan::Untagged, other),
        };
        if matches!(ethertype, EtherType::Vlan | EtherType::QinQ) {
            return Err(Error::Unsupported("more than two VLAN tags"));
        }
        Ok(Repr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            vlan,
            ethertype,
        })
    }

    /// Length of the header with its tags; the payload starts here.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.vlan.len()
    }

    /// Writes the header and tags into the start of `frame`, which must hold `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) -> Result<()> {
        check_len(frame.buffer.as_ref(), self.buffer_len())?;
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        match self.vlan {
            Vlan::Untagged => frame.set_ethertype(self.ethertype),
            Vlan::Single(tag) => {
                frame.set_ethertype(EtherType::Vlan);
                emit_tag(frame.payload_mut(), tag, self.ethertype);
            }
            Vlan::Double { outer, inner } => {
                frame.set_ethertype(EtherType::QinQ);
                emit_tag(frame.payload_mut(), outer, EtherType::Vlan);
                emit_tag(&mut frame.payload_mut()[TAG_LEN..], inner, self.ethertype);
            }
        }
        Ok(())
    }
}

/// Writes one tag and the EtherType that follows it at the start of `buffer`.
fn emit_tag(buffer: &mut [u8], repr: vlan::Repr, next: EtherType) {
    let mut tag = vlan::Tag::new_unchecked(buffer);
    repr.emit(&mut tag);
    tag.set_ethertype(next);
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Ethernet src={} dst={} type={:?}",
            self.src_addr, self.dst_addr, self.ethertype
        )?;
        match self.vlan {
            Vlan::Untagged => Ok(()),
            Vlan::Single(t) => write!(f, " vlan={} pcp={}", t.vid, t.pcp),
            Vlan::Double { outer, inner } => {
                write!(
                    f,
                    " svlan={} pcp={} cvlan={} pcp={}",
                    outer.vid, outer.pcp, inner.vid, inner.pcp
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::{self, DST, SRC};
    use std::string::ToString;
    use std::vec;

    #[test]
    fn parse_untagged() {
        let bytes = vectors::ROCE_V4.to_vec();
        let frame = Frame::new_checked(&bytes[..]).unwrap();
        let repr = Repr::parse(&frame).unwrap();
        assert_eq!(
            repr,
            Repr {
                dst_addr: DST,
                src_addr: SRC,
                vlan: Vlan::Untagged,
                ethertype: EtherType::Ipv4
            }
        );
        assert_eq!(repr.buffer_len(), 14);
        assert_eq!(frame.payload()[0], 0x45);
    }

    #[test]
    fn qinq_parse_and_emit() {
        let bytes = vectors::ROCE_QINQ.to_vec();
        let repr = Repr::parse(&Frame::new_checked(&bytes[..]).unwrap()).unwrap();
        let outer = vlan::Repr {
            pcp: 5,
            dei: true,
            vid: 200,
        };
        let inner = vlan::Repr {
            pcp: 3,
            dei: false,
            vid: 100,
        };
        assert_eq!(repr.vlan, Vlan::Double { outer, inner });
        assert_eq!(repr.ethertype, EtherType::Ipv4);
        assert_eq!(repr.buffer_len(), 22);
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Frame::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, bytes[..22]);
    }

    #[test]
    fn single_tag_round_trip() {
        let repr = Repr {
            dst_addr: DST,
            src_addr: SRC,
            vlan: Vlan::Single(vlan::Repr {
                pcp: 3,
                dei: false,
                vid: 0,
            }),
            ethertype: EtherType::Ipv6,
        };
        let mut out = [0u8; 18];
        repr.emit(&mut Frame::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out[12..18], [0x81, 0x00, 0x60, 0x00, 0x86, 0xdd]);
        assert_eq!(
            Repr::parse(&Frame::new_checked(&out[..]).unwrap()).unwrap(),
            repr
        );
        assert_eq!(
            repr.emit(&mut Frame::new_unchecked(&mut out[..17])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn truncated_at_every_boundary() {
        let bytes = vectors::ROCE_QINQ.to_vec();
        crate::assert_prefixes_truncated(&bytes[..HEADER_LEN], |b| Frame::new_checked(b).map(drop));
        for len in HEADER_LEN..22 {
            let frame = Frame::new_checked(&bytes[..len]).unwrap();
            assert_eq!(Repr::parse(&frame), Err(Error::Truncated), "length {len}");
        }
    }

    #[test]
    fn rejects_bad_tag_stacks() {
        let mut bytes = vectors::ROCE_QINQ.to_vec();
        bytes[20..22].copy_from_slice(&[0x81, 0x00]); // a third tag
        assert!(matches!(
            Repr::parse(&Frame::new_checked(&bytes[..]).unwrap()),
            Err(Error::Unsupported(_))
        ));
        bytes[16..18].copy_from_slice(&[0x08, 0x00]); // S-tag followed by IPv4
        assert!(matches!(
            Repr::parse(&Frame::new_checked(&bytes[..]).unwrap()),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn address_text() {
        let addr: Address = "02:00:00:0a:Bc:01".parse().unwrap();
        assert_eq!(addr, Address([2, 0, 0, 0x0a, 0xbc, 1]));
        assert_eq!(addr.to_string(), "02:00:00:0a:bc:01");
        assert!(!addr.is_multicast() && Address::BROADCAST.is_multicast());
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:03",
            "02:00:00:00:00:1g",
            "002:00:00:00:00:01",
        ] {
            assert!(bad.parse::<Address>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ethertypes_are_the_kernels() {
        // libc's constants are those of the kernel's linux/if_ether.h.
        for (ours, kernel) in [
            (EtherType::Ipv4, libc::ETH_P_IP),
            (EtherType::Arp, libc::ETH_P_ARP),
            (EtherType::Ipv6, libc::ETH_P_IPV6),
            (EtherType::Vlan, libc::ETH_P_8021Q),
            (EtherType::QinQ, libc::ETH_P_8021AD),
            (EtherType::MacControl, libc::ETH_P_PAUSE),
        ] {
            assert_eq!(i32::from(ours.value()), kernel, "{ours:?}");
            assert_eq!(EtherType::from_value(ours.value()), ours);
        }
    }
}
