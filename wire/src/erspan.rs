//! ERSPAN over GRE, as switches mirror frames to a collector and Wireshark decodes them: GRE
//! (RFC 2784) with the sequence number of RFC 2890, protocol 0x88BE for ERSPAN type II or
//! 0x22EB for type III (draft-foschiano-erspan-03, 4.2 and 4.3), then the ERSPAN header and the
//! mirrored Ethernet frame. lossless.p4 builds these frames in its egress; `lossless telemetry
//! collect` reads them with [`decapsulate`].
//!
//! [`Repr`] is what follows the outer IPv4 header (the GRE header, the ERSPAN header); [`Outer`]
//! writes the outer Ethernet and IPv4 headers before it (with [`crate::ethernet`] and
//! [`crate::ipv4`]), as the host's eBPF programs put them before a frame they mirror. ERSPAN
//! type I (GRE 0x88BE without a sequence number, and no ERSPAN header) is refused.

use core::fmt;

use super::{check_len, ethernet, ip::Protocol, ipv4, read_u16, Error, Result};

/// GRE's protocol type of ERSPAN type II (and type I).
pub const GRE_PROTOCOL_ERSPAN_II: u16 = 0x88be;
/// GRE's protocol type of ERSPAN type III.
pub const GRE_PROTOCOL_ERSPAN_III: u16 = 0x22eb;

/// GRE's flag bits in its first 16 bits: checksum, routing, key, sequence number present.
const GRE_C: u16 = 0x8000;
const GRE_R: u16 = 0x4000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;
/// GRE's version, the low 3 bits of its first 16 (0 for GRE).
const GRE_VERSION: u16 = 0x0007;
/// The GRE header ERSPAN II and III use: flags, protocol, sequence number.
pub const GRE_HEADER_LEN: usize = 8;
/// Length of the ERSPAN type II header.
pub const ERSPAN_II_HEADER_LEN: usize = 8;
/// Length of the ERSPAN type III header without its optional platform subheader.
pub const ERSPAN_III_HEADER_LEN: usize = 12;
/// Length of ERSPAN type III's optional platform-specific subheader (present when O is set).
const ERSPAN_III_PLATFORM_LEN: usize = 8;
/// Bytes before the mirrored frame in an ERSPAN type II frame that [`Outer`] writes: Ethernet,
/// IPv4 without options, GRE with a sequence number, ERSPAN II.
pub const OUTER_II_LEN: usize =
    ethernet::HEADER_LEN + ipv4::HEADER_LEN + GRE_HEADER_LEN + ERSPAN_II_HEADER_LEN;
/// Bytes before the mirrored frame in an ERSPAN type III frame that [`Outer`] writes (no
/// platform subheader).
pub const OUTER_III_LEN: usize =
    ethernet::HEADER_LEN + ipv4::HEADER_LEN + GRE_HEADER_LEN + ERSPAN_III_HEADER_LEN;

/// The ERSPAN header's own fields, by type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// Type II: the port index the frame was mirrored at.
    II {
        /// Encapsulation of the original frame (0: untagged).
        encap: u8,
        /// The port index (20 bits).
        index: u32,
    },
    /// Type III.
    III {
        /// The timestamp, in units of `granularity`.
        timestamp: u32,
        /// Security group tag.
        sgt: u16,
        /// Hardware id of the mirroring engine (6 bits).
        hw_id: u8,
        /// Frame type (5 bits; 0: Ethernet).
        frame_type: u8,
        /// Direction: false ingress, true egress.
        egress: bool,
        /// Timestamp granularity (0: 100 µs, 1: 100 ns, 2: IEEE 1588, 3: user-defined).
        granularity: u8,
    },
}

/// A GRE header with its sequence number and the ERSPAN header after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// GRE's sequence number.
    pub sequence: u32,
    /// The original frame's VLAN (12 bits).
    pub vlan: u16,
    /// Class of service of the original frame (3 bits).
    pub cos: u8,
    /// Whether the mirrored frame was truncated.
    pub truncated: bool,
    /// The ERSPAN session id (10 bits).
    pub session: u16,
    /// The type's own fields.
    pub header: Header,
}

impl Repr {
    /// Reads the GRE header at the start of `packet` (an IPv4 payload of protocol 47) and the
    /// ERSPAN header after it; returns them and the mirrored frame. Fails with `Unsupported`
    /// for GRE that is not ERSPAN II or III, `Malformed` for GRE routing or a GRE version
    /// other than 0, an ERSPAN II without a sequence number (type I) or an ERSPAN version that
    /// does not match the protocol.
    pub fn parse(packet: &[u8]) -> Result<(Repr, &[u8])> {
        check_len(packet, 4)?;
        let flags = read_u16(packet, 0);
        let protocol = read_u16(packet, 2);
        if flags & (GRE_R | GRE_VERSION) != 0 {
            return Err(Error::Malformed(
                "GRE with routing or a version other than 0",
            ));
        }
        if protocol != GRE_PROTOCOL_ERSPAN_II && protocol != GRE_PROTOCOL_ERSPAN_III {
            return Err(Error::Unsupported("GRE that is not ERSPAN II or III"));
        }
        if flags & GRE_S == 0 {
            return Err(Error::Malformed(
                "ERSPAN without a GRE sequence number (type I)",
            ));
        }
        // Checksum and key, when present, come before the sequence number.
        let mut at = 4;
        at += if flags & GRE_C != 0 { 4 } else { 0 };
        at += if flags & GRE_K != 0 { 4 } else { 0 };
        check_len(packet, at + 4)?;
        let sequence =
            u32::from_be_bytes([packet[at], packet[at + 1], packet[at + 2], packet[at + 3]]);
        let erspan = &packet[at + 4..];
        let (version, len) = if protocol == GRE_PROTOCOL_ERSPAN_II {
            (1, ERSPAN_II_HEADER_LEN)
        } else {
            (2, ERSPAN_III_HEADER_LEN)
        };
        check_len(erspan, len)?;
        let word = read_u16(erspan, 0);
        if word >> 12 != version {
            return Err(Error::Malformed(
                "ERSPAN version does not match GRE's protocol",
            ));
        }
        let vlan = word & 0x0fff;
        let second = read_u16(erspan, 2);
        let cos = (second >> 13) as u8;
        let middle = ((second >> 11) & 0x3) as u8;
        let truncated = second & 0x0400 != 0;
        let session = second & 0x03ff;
        let (header, skip) = if version == 1 {
            let index = u32::from_be_bytes([erspan[4], erspan[5], erspan[6], erspan[7]]) & 0xfffff;
            let header = Header::II {
                encap: middle,
                index,
            };
            (header, len)
        } else {
            let timestamp = u32::from_be_bytes([erspan[4], erspan[5], erspan[6], erspan[7]]);
            let sgt = read_u16(erspan, 8);
            let last = read_u16(erspan, 10);
            let header = Header::III {
                timestamp,
                sgt,
                frame_type: ((last >> 10) & 0x1f) as u8,
                hw_id: ((last >> 4) & 0x3f) as u8,
                egress: last & 0x0008 != 0,
                granularity: ((last >> 1) & 0x3) as u8,
            };
            let platform = if last & 1 != 0 {
                ERSPAN_III_PLATFORM_LEN
            } else {
                0
            };
            check_len(erspan, len + platform)?;
            (header, len + platform)
        };
        let repr = Repr {
            sequence,
            vlan,
            cos,
            truncated,
            session,
            header,
        };
        Ok((repr, &erspan[skip..]))
    }

    /// The GRE protocol type of this header's ERSPAN type.
    #[inline(always)]
    pub fn gre_protocol(&self) -> u16 {
        match self.header {
            Header::II { .. } => GRE_PROTOCOL_ERSPAN_II,
            Header::III { .. } => GRE_PROTOCOL_ERSPAN_III,
        }
    }

    /// Length of the GRE and ERSPAN headers [`Repr::emit`] writes.
    #[inline(always)]
    pub fn buffer_len(&self) -> usize {
        GRE_HEADER_LEN
            + match self.header {
                Header::II { .. } => ERSPAN_II_HEADER_LEN,
                Header::III { .. } => ERSPAN_III_HEADER_LEN,
            }
    }

    /// Writes the GRE header (sequence number only) and the ERSPAN header (type III without
    /// its platform subheader) at the start of `buffer`; the mirrored frame goes after
    /// [`Repr::buffer_len`] bytes.
    #[inline(always)]
    pub fn emit(&self, buffer: &mut [u8]) -> Result<()> {
        check_len(buffer, self.buffer_len())?;
        buffer[0..2].copy_from_slice(&GRE_S.to_be_bytes());
        buffer[2..4].copy_from_slice(&self.gre_protocol().to_be_bytes());
        buffer[4..8].copy_from_slice(&self.sequence.to_be_bytes());
        let erspan = &mut buffer[GRE_HEADER_LEN..];
        let (version, middle) = match self.header {
            Header::II { encap, .. } => (1u16, u16::from(encap & 0x3)),
            Header::III { .. } => (2u16, 0),
        };
        erspan[0..2].copy_from_slice(&((version << 12) | (self.vlan & 0x0fff)).to_be_bytes());
        let second = (u16::from(self.cos & 0x7) << 13)
            | (middle << 11)
            | (u16::from(self.truncated) << 10)
            | (self.session & 0x03ff);
        erspan[2..4].copy_from_slice(&second.to_be_bytes());
        match self.header {
            Header::II { index, .. } => {
                erspan[4..8].copy_from_slice(&(index & 0xfffff).to_be_bytes());
            }
            Header::III {
                timestamp,
                sgt,
                hw_id,
                frame_type,
                egress,
                granularity,
            } => {
                erspan[4..8].copy_from_slice(&timestamp.to_be_bytes());
                erspan[8..10].copy_from_slice(&sgt.to_be_bytes());
                let last = (u16::from(frame_type & 0x1f) << 10)
                    | (u16::from(hw_id & 0x3f) << 4)
                    | (u16::from(egress) << 3)
                    | (u16::from(granularity & 0x3) << 1);
                erspan[10..12].copy_from_slice(&last.to_be_bytes());
            }
        }
        Ok(())
    }
}

/// The outer Ethernet and IPv4 headers of an ERSPAN frame: what a mirroring session says about
/// where its frames go. [`Outer::emit`] writes them and the GRE and ERSPAN headers after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outer {
    /// The outer source MAC (the mirroring interface's).
    pub src_mac: ethernet::Address,
    /// The outer destination MAC (the collector's, or the next hop's toward it).
    pub dst_mac: ethernet::Address,
    /// The outer source address.
    pub src_ip: core::net::Ipv4Addr,
    /// The collector's address.
    pub dst_ip: core::net::Ipv4Addr,
    /// The outer DSCP.
    pub dscp: u8,
    /// The outer TTL.
    pub ttl: u8,
}

impl Outer {
    /// Writes, at the start of `buffer`, the Ethernet header (EtherType IPv4), the IPv4 header
    /// (protocol 47, identification 0, DF clear, its checksum) of a datagram that carries
    /// `erspan` and a mirrored frame of `frame_len` bytes, then `erspan`'s GRE and ERSPAN
    /// headers: [`OUTER_II_LEN`] or [`OUTER_III_LEN`] bytes, after which the mirrored frame
    /// goes. The frame itself is not written (nor needed in `buffer`). Fails with `Truncated`
    /// if `buffer` is shorter than the headers, `Malformed` if the datagram would pass 65535
    /// bytes.
    #[inline(always)]
    pub fn emit(&self, erspan: &Repr, frame_len: usize, buffer: &mut [u8]) -> Result<()> {
        let ip_at = ethernet::HEADER_LEN;
        let gre_at = ip_at + ipv4::HEADER_LEN;
        check_len(buffer, gre_at + erspan.buffer_len())?;
        let total = ipv4::HEADER_LEN + erspan.buffer_len() + frame_len;
        let total =
            u16::try_from(total).map_err(|_| Error::Malformed("IPv4 packet over 65535 bytes"))?;
        let mut eth = ethernet::Frame::new_unchecked(&mut buffer[..ip_at]);
        eth.set_dst_addr(self.dst_mac);
        eth.set_src_addr(self.src_mac);
        eth.set_ethertype(ethernet::EtherType::Ipv4);
        let mut ip = ipv4::Packet::new_unchecked(&mut buffer[ip_at..gre_at]);
        ip.set_version_and_header_len(ipv4::HEADER_LEN);
        ip.set_traffic_class(crate::ip::traffic_class(self.dscp, crate::ip::Ecn::NotEct));
        ip.set_total_len(total);
        ip.set_ident(0);
        ip.set_dont_frag(false);
        ip.set_ttl(self.ttl);
        ip.set_protocol(Protocol::Gre);
        ip.set_src_addr(self.src_ip);
        ip.set_dst_addr(self.dst_ip);
        ip.fill_checksum();
        erspan.emit(&mut buffer[gre_at..])
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.header {
            Header::II { .. } => "II",
            Header::III { .. } => "III",
        };
        write!(
            f,
            "ERSPAN {kind} session={} seq={} cos={}",
            self.session, self.sequence, self.cos
        )?;
        match self.header {
            Header::II { index, .. } => write!(f, " index={index}"),
            Header::III {
                timestamp, hw_id, ..
            } => write!(f, " timestamp={timestamp} hw_id={hw_id}"),
        }
    }
}

/// Reads an ERSPAN frame as it arrives at a collector: Ethernet (untagged or VLAN-tagged),
/// IPv4 of protocol 47 (its header checksum checked, not a fragment), GRE, ERSPAN II or III;
/// returns the ERSPAN header and the mirrored frame (up to the outer IPv4 length). Fails with
/// `Unsupported` for a frame that is not ERSPAN.
pub fn decapsulate(frame: &[u8]) -> Result<(Repr, &[u8])> {
    let view = ethernet::Frame::new_checked(frame)?;
    let eth = ethernet::Repr::parse(&view)?;
    if eth.ethertype != ethernet::EtherType::Ipv4 {
        return Err(Error::Unsupported("not IPv4"));
    }
    let bytes = &frame[eth.buffer_len()..];
    let packet = ipv4::Packet::new_checked(bytes)?;
    if packet.protocol() != Protocol::Gre {
        return Err(Error::Unsupported("not GRE"));
    }
    if packet.more_frags() || packet.frag_offset() != 0 {
        return Err(Error::Unsupported("an IPv4 fragment"));
    }
    if !packet.verify_checksum() {
        return Err(Error::Checksum);
    }
    Repr::parse(&bytes[packet.header_len()..usize::from(packet.total_len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scapy: `GRE(seqnum_present=1, sequence_number=5)/ERSPAN_II(session_id=7, cos=3,
    /// index=2)`, the first 16 bytes.
    const ERSPAN_II_BYTES: [u8; 16] = [
        0x10, 0x00, 0x88, 0xbe, 0x00, 0x00, 0x00, 0x05, 0x10, 0x00, 0x60, 0x07, 0x00, 0x00, 0x00,
        0x02,
    ];
    /// scapy: `GRE(seqnum_present=1, sequence_number=6)/ERSPAN_III(session_id=9, cos=5,
    /// timestamp=0x01020304, hw=3, d=1, gra=3)`, the first 20 bytes.
    const ERSPAN_III_BYTES: [u8; 20] = [
        0x10, 0x00, 0x22, 0xeb, 0x00, 0x00, 0x00, 0x06, 0x20, 0x00, 0xa0, 0x09, 0x01, 0x02, 0x03,
        0x04, 0x00, 0x00, 0x00, 0x3e,
    ];

    fn type_ii() -> Repr {
        Repr {
            sequence: 5,
            vlan: 0,
            cos: 3,
            truncated: false,
            session: 7,
            header: Header::II { encap: 0, index: 2 },
        }
    }

    fn type_iii() -> Repr {
        Repr {
            sequence: 6,
            vlan: 0,
            cos: 5,
            truncated: false,
            session: 9,
            header: Header::III {
                timestamp: 0x0102_0304,
                sgt: 0,
                hw_id: 3,
                frame_type: 0,
                egress: true,
                granularity: 3,
            },
        }
    }

    #[test]
    fn scapy_bytes_parse_and_emit_back() {
        for (bytes, repr) in [
            (&ERSPAN_II_BYTES[..], type_ii()),
            (&ERSPAN_III_BYTES[..], type_iii()),
        ] {
            let mut packet = std::vec::Vec::from(bytes);
            packet.extend_from_slice(b"inner");
            let (parsed, inner) = Repr::parse(&packet).unwrap();
            assert_eq!(parsed, repr);
            assert_eq!(inner, b"inner");
            let mut out = std::vec![0; repr.buffer_len()];
            repr.emit(&mut out).unwrap();
            assert_eq!(out, bytes);
            crate::assert_prefixes_truncated(bytes, |b| Repr::parse(b).map(|_| ()));
        }
    }

    #[test]
    fn type_i_other_gre_and_a_wrong_version_are_refused() {
        let mut type_i = ERSPAN_II_BYTES;
        type_i[0] = 0; // no sequence number
        assert!(matches!(Repr::parse(&type_i), Err(Error::Malformed(_))));
        let mut other = ERSPAN_II_BYTES;
        other[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
        assert!(matches!(Repr::parse(&other), Err(Error::Unsupported(_))));
        let mut version = ERSPAN_III_BYTES;
        version[8] = 0x10; // version 1 under type III's protocol
        assert!(matches!(Repr::parse(&version), Err(Error::Malformed(_))));
    }

    #[test]
    fn a_gre_key_is_skipped_and_the_platform_subheader_too() {
        // K set: 4 bytes of key before the sequence number.
        let mut keyed = std::vec![0x30, 0x00, 0x88, 0xbe, 0xaa, 0xbb, 0xcc, 0xdd];
        keyed.extend_from_slice(&ERSPAN_II_BYTES[4..]);
        assert_eq!(Repr::parse(&keyed).unwrap().0, type_ii());
        // O set: 8 bytes of platform subheader before the frame.
        let mut platform = std::vec::Vec::from(&ERSPAN_III_BYTES[..]);
        platform[19] |= 1;
        platform.extend_from_slice(&[0; 8]);
        platform.extend_from_slice(b"frame");
        assert_eq!(Repr::parse(&platform).unwrap().1, b"frame");
    }

    /// scapy: `Ether(dst='02:00:00:00:00:c0', src='02:00:00:00:00:f3')/IP(src='10.0.9.1',
    /// dst='10.0.9.2')/GRE(seqnum_present=1, sequence_number=5)/ERSPAN_II(session_id=7, cos=3,
    /// index=2)/` a 42-byte UDP frame.
    const ERSPAN_II_FRAME: &str = "0200000000c00200000000f308004500004e00010000402f547e0a0009010a\
        000902100088be00000005100060070000000202000000000202000000000108004500001c00010000401166\
        ce0a0000010a000002000100020008ebd8";

    fn frame() -> std::vec::Vec<u8> {
        (0..ERSPAN_II_FRAME.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&ERSPAN_II_FRAME[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn outer_headers_are_scapys_and_decapsulate_back() {
        let scapy = frame();
        let outer = Outer {
            src_mac: ethernet::Address([2, 0, 0, 0, 0, 0xf3]),
            dst_mac: ethernet::Address([2, 0, 0, 0, 0, 0xc0]),
            src_ip: core::net::Ipv4Addr::new(10, 0, 9, 1),
            dst_ip: core::net::Ipv4Addr::new(10, 0, 9, 2),
            dscp: 0,
            ttl: 64,
        };
        let mut bytes = std::vec![0; OUTER_II_LEN];
        outer.emit(&type_ii(), 42, &mut bytes).unwrap();
        // scapy's IPv4 identification is 1, ours 0: the same but for it and the checksum.
        let (ident, check) = (18..20, 24..26);
        for (at, (ours, theirs)) in bytes.iter().zip(&scapy).enumerate() {
            if !ident.contains(&at) && !check.contains(&at) {
                assert_eq!(ours, theirs, "byte {at}");
            }
        }
        bytes.extend_from_slice(&scapy[OUTER_II_LEN..]);
        let (repr, inner) = decapsulate(&bytes).unwrap();
        assert_eq!((repr, inner), (type_ii(), &scapy[OUTER_II_LEN..]));
        let mut iii = std::vec![0; OUTER_III_LEN];
        outer.emit(&type_iii(), 42, &mut iii).unwrap();
        iii.extend_from_slice(&scapy[OUTER_II_LEN..]);
        assert_eq!(decapsulate(&iii).unwrap().0, type_iii());
        assert_eq!(
            outer.emit(&type_iii(), 42, &mut [0; OUTER_III_LEN - 1]),
            Err(Error::Truncated)
        );
        assert!(matches!(
            outer.emit(&type_ii(), 65535, &mut [0; OUTER_II_LEN]),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn a_whole_frame_decapsulates_to_the_mirrored_frame() {
        let mut bytes = frame();
        let (repr, inner) = decapsulate(&bytes).unwrap();
        assert_eq!(repr, type_ii());
        assert_eq!(inner.len(), 42);
        assert_eq!(inner, &bytes[14 + 20 + 16..]);
        // Ethernet padding after the outer IPv4 datagram is not the mirrored frame's.
        bytes.extend_from_slice(&[0; 4]);
        assert_eq!(decapsulate(&bytes).unwrap().1.len(), 42);
        // A bad outer checksum, and IPv4 that is not GRE.
        let mut bad = frame();
        bad[24] ^= 1;
        assert_eq!(decapsulate(&bad), Err(Error::Checksum));
        let mut udp = frame();
        udp[23] = 17;
        assert!(matches!(decapsulate(&udp), Err(Error::Unsupported(_))));
    }
}
