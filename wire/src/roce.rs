//! Whole RoCEv2 frames: Ethernet (with VLAN tags) + IPv4 or IPv6 + UDP to port
//! 4791 + BTH + payload + ICRC, built from and parsed into one flat [`RoceFrame`]; a
//! [`PsnPatch`] re-numbers a built frame without building it again.

use core::fmt;
use core::net::IpAddr;

use super::bth::{self, ROCEV2_PORT};
use super::ethernet::{self, Address, EtherType, Vlan, MIN_FRAME_LEN};
use super::icrc::{self, ICRC_LEN};
use super::ip::{Ecn, Protocol};
use super::ip_header::{IpRepr, Upper};
use super::{checksum, ipv4, ipv6, udp, Error, Result};

/// A RoCEv2 frame's headers and payload length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceFrame {
    /// Source MAC address.
    pub src_mac: Address,
    /// Destination MAC address.
    pub dst_mac: Address,
    /// VLAN tags (their PCP carries the priority).
    pub vlan: Vlan,
    /// Source IP address (IPv4 or IPv6, like `dst_ip`).
    pub src_ip: IpAddr,
    /// Destination IP address.
    pub dst_ip: IpAddr,
    /// DSCP (0..=63).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (ignored for IPv4, which is sent with DF and ident 0).
    pub flow_label: u32,
    /// UDP source port: the flow's entropy for ECMP.
    pub src_port: u16,
    /// Base Transport Header.
    pub bth: bth::Repr,
    /// Bytes between BTH and ICRC.
    pub payload_len: usize,
}

/// Bytes of IP + UDP + BTH + ICRC around the payload, for IPv4 or IPv6.
fn ip_overhead(ip: IpAddr) -> usize {
    let ip_len = if ip.is_ipv4() {
        ipv4::HEADER_LEN
    } else {
        ipv6::HEADER_LEN
    };
    ip_len + udp::HEADER_LEN + bth::HEADER_LEN + ICRC_LEN
}

impl RoceFrame {
    /// Bytes of headers and ICRC in a frame of this shape (everything but the payload).
    pub fn overhead(&self) -> usize {
        Self::untagged_overhead(self.dst_ip) + self.vlan.len()
    }

    /// Bytes of headers and ICRC of an untagged frame to an address of `dst_ip`'s family.
    pub fn untagged_overhead(dst_ip: IpAddr) -> usize {
        ethernet::HEADER_LEN + ip_overhead(dst_ip)
    }

    /// Length of the frame without FCS: headers, payload and ICRC, padded to 60 bytes.
    pub fn buffer_len(&self) -> usize {
        (self.overhead() + self.payload_len).max(MIN_FRAME_LEN)
    }

    /// Writes the frame into the start of `buffer`, with `fill_payload` writing
    /// the payload before the ICRC is computed; returns the frame's length.
    pub fn emit(&self, buffer: &mut [u8], fill_payload: impl FnOnce(&mut [u8])) -> Result<usize> {
        let frame_len = self.buffer_len();
        if buffer.len() < frame_len {
            return Err(Error::Truncated);
        }
        let buffer = &mut buffer[..frame_len];
        let ethertype = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => EtherType::Ipv4,
            (IpAddr::V6(_), IpAddr::V6(_)) => EtherType::Ipv6,
            _ => {
                return Err(Error::Malformed(
                    "source and destination IP of different families",
                ))
            }
        };
        let eth = ethernet::Repr {
            dst_addr: self.dst_mac,
            src_addr: self.src_mac,
            vlan: self.vlan,
            ethertype,
        };
        eth.emit(&mut ethernet::Frame::new_unchecked(&mut *buffer))?;

        let udp_len = udp::HEADER_LEN + bth::HEADER_LEN + self.payload_len + ICRC_LEN;
        let ip_start = eth.buffer_len();
        let ip_end = ip_start + ip_overhead(self.dst_ip) + self.payload_len;
        let (packet, padding) = buffer[ip_start..].split_at_mut(ip_end - ip_start);
        padding.fill(0);
        let udp_start = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(src_addr), IpAddr::V4(dst_addr)) => {
                let repr = ipv4::Repr {
                    src_addr,
                    dst_addr,
                    protocol: Protocol::Udp,
                    payload_len: udp_len,
                    ttl: self.ttl,
                    dscp: self.dscp,
                    ecn: self.ecn,
                    ident: 0,
                    dont_frag: true,
                };
                repr.emit(&mut ipv4::Packet::new_unchecked(&mut *packet))?;
                ipv4::HEADER_LEN
            }
            (IpAddr::V6(src_addr), IpAddr::V6(dst_addr)) => {
                let repr = ipv6::Repr {
                    src_addr,
                    dst_addr,
                    next_header: Protocol::Udp,
                    payload_len: udp_len,
                    hop_limit: self.ttl,
                    dscp: self.dscp,
                    ecn: self.ecn,
                    flow_label: self.flow_label,
                };
                repr.emit(&mut ipv6::Packet::new_unchecked(&mut *packet))?;
                ipv6::HEADER_LEN
            }
            _ => unreachable!("address families checked above"),
        };
        let mut datagram = udp::Packet::new_unchecked(&mut packet[udp_start..]);
        let udp_repr = udp::Repr {
            src_port: self.src_port,
            dst_port: ROCEV2_PORT,
            payload_len: udp_len - udp::HEADER_LEN,
        };
        udp_repr.emit(&mut datagram)?;
        let mut transport = bth::Packet::new_unchecked(datagram.payload_mut());
        self.bth.emit(&mut transport)?;
        let payload = &mut transport.payload_mut()[..self.payload_len];
        fill_payload(payload);
        // The ICRC masks the UDP checksum, and the UDP checksum covers the ICRC: ICRC first.
        icrc::fill(packet)?;
        if self.dst_ip.is_ipv6() {
            // IPv6 requires a UDP checksum (RFC 8200); IPv4 RoCEv2 sends none, as NICs do.
            udp::Packet::new_unchecked(&mut packet[udp_start..])
                .fill_checksum(self.src_ip, self.dst_ip);
        }
        Ok(frame_len)
    }

    /// Reads a RoCEv2 frame, checking IPv4 header checksum, UDP checksum and
    /// ICRC; returns the headers and the payload. Fails with `Unsupported` for
    /// frames that are not IP/UDP to port 4791, `Checksum` for a bad checksum or ICRC.
    pub fn parse(frame: &[u8]) -> Result<(RoceFrame, &[u8])> {
        let view = ethernet::Frame::new_checked(frame)?;
        let eth = ethernet::Repr::parse(&view)?;
        let after_eth = &frame[eth.buffer_len()..];
        let ip = IpRepr::parse(eth.ethertype, after_eth)?;
        let (dscp, ecn, ttl, flow_label) = match ip {
            IpRepr::V4(repr) => (repr.dscp, repr.ecn, repr.ttl, 0),
            IpRepr::V6(repr) => (repr.dscp, repr.ecn, repr.hop_limit, repr.flow_label),
        };
        let Upper {
            addresses: (src_ip, dst_ip),
            protocol,
            start: udp_start,
            end,
        } = ip.upper();
        let packet = &after_eth[..end];
        if protocol != Protocol::Udp {
            return Err(Error::Unsupported("not UDP"));
        }
        let datagram = udp::Packet::new_checked(&packet[udp_start..])?;
        // The port first: other UDP traffic is "not RoCEv2", whatever its checksum.
        if datagram.dst_port() != ROCEV2_PORT {
            return Err(Error::Unsupported("not UDP port 4791"));
        }
        let udp_repr = udp::Repr::parse(&datagram, src_ip, dst_ip)?;
        let transport = bth::Packet::new_checked(datagram.payload())?;
        let payload_len = transport
            .payload()
            .len()
            .checked_sub(ICRC_LEN)
            .ok_or(Error::Truncated)?;
        if !icrc::verify(&packet[..udp_start + usize::from(datagram.len())])? {
            return Err(Error::Checksum);
        }
        let repr = RoceFrame {
            src_mac: eth.src_addr,
            dst_mac: eth.dst_addr,
            vlan: eth.vlan,
            src_ip,
            dst_ip,
            dscp,
            ecn,
            ttl,
            flow_label,
            src_port: udp_repr.src_port,
            bth: bth::Repr::parse(&transport),
            payload_len,
        };
        let payload_start = udp_start + udp::HEADER_LEN + bth::HEADER_LEN;
        Ok((repr, &packet[payload_start..payload_start + payload_len]))
    }
}

/// Where a frame of one [`RoceFrame`]'s shape carries what changes with its PSN — the BTH PSN,
/// the ICRC and, over IPv6, the UDP checksum — so that a sender builds each QP's frame once and
/// gives every copy its PSN in a few operations, whatever the frame's length.
#[derive(Debug, Clone)]
pub struct PsnPatch {
    /// Offset of the PSN in the frame.
    psn_at: usize,
    /// Offset of the ICRC in the frame.
    icrc_at: usize,
    /// Over IPv6: the offset of the UDP header, whose checksum covers the PSN and the ICRC.
    udp_at: Option<usize>,
    /// The ICRC's change with the PSN.
    delta: icrc::PsnDelta,
}

impl RoceFrame {
    /// How frames of this shape change with their PSN.
    pub fn psn_patch(&self) -> PsnPatch {
        let ip_at = ethernet::HEADER_LEN + self.vlan.len();
        let udp_at =
            ip_at + ip_overhead(self.dst_ip) - udp::HEADER_LEN - bth::HEADER_LEN - ICRC_LEN;
        let psn_at = udp_at + udp::HEADER_LEN + bth::PSN_OFFSET;
        let icrc_at = ip_at + ip_overhead(self.dst_ip) + self.payload_len - ICRC_LEN;
        PsnPatch {
            psn_at,
            icrc_at,
            udp_at: self.dst_ip.is_ipv6().then_some(udp_at),
            delta: icrc::PsnDelta::new(icrc_at - (psn_at + 3)),
        }
    }
}

impl PsnPatch {
    /// Gives `frame` — built by [`RoceFrame::emit`] from the frame this patch came from, with
    /// any PSN — the PSN `psn` (masked to 24 bits), with its ICRC and checksums right.
    #[inline]
    pub fn set_psn(&self, frame: &mut [u8], psn: u32) -> Result<()> {
        if frame.len() < self.icrc_at + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let psn_field = self.psn_at..self.psn_at + 3;
        let icrc_field = self.icrc_at..self.icrc_at + ICRC_LEN;
        let old_psn = [
            frame[psn_field.start],
            frame[psn_field.start + 1],
            frame[psn_field.start + 2],
        ];
        let new_psn: [u8; 3] = psn.to_be_bytes()[1..].try_into().expect("3 bytes");
        let old_icrc: [u8; ICRC_LEN] = frame[icrc_field.clone()].try_into().expect("4 bytes");
        let xor =
            u32::from_be_bytes([0, old_psn[0], old_psn[1], old_psn[2]]) ^ (psn & bth::MASK_24);
        let new_icrc = (u32::from_le_bytes(old_icrc) ^ self.delta.of(xor)).to_le_bytes();
        frame[psn_field.clone()].copy_from_slice(&new_psn);
        frame[icrc_field.clone()].copy_from_slice(&new_icrc);
        if let Some(udp_at) = self.udp_at {
            let mut datagram = udp::Packet::new_unchecked(&mut frame[udp_at..]);
            let mut sum = datagram.checksum();
            sum = checksum::update(sum, psn_field.start - udp_at, &old_psn, &new_psn);
            sum = checksum::update(sum, icrc_field.start - udp_at, &old_icrc, &new_icrc);
            // 0 means "no checksum": its one's-complement twin stands for it, as in emit.
            datagram.set_checksum(if sum == 0 { 0xffff } else { sum });
        }
        Ok(())
    }
}

impl fmt::Display for RoceFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RoCEv2 {}:{} -> {} dscp={} ecn={:?} {} payload={}",
            self.src_ip,
            self.src_port,
            self.dst_ip,
            self.dscp,
            self.ecn,
            self.bth,
            self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bth::Opcode;
    use crate::{cnp, vectors, vlan};
    use std::{vec, vec::Vec};

    use vectors::{DST, ROCE_V4_FRAME, SRC};

    fn counting(payload: &mut [u8]) {
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte = i as u8;
        }
    }

    #[test]
    fn emit_matches_scapy_v4() {
        let mut out = [0u8; 128];
        let len = ROCE_V4_FRAME.emit(&mut out, counting).unwrap();
        assert_eq!(out[..len], vectors::ROCE_V4.to_vec()[..]);
    }

    #[test]
    fn psn_patch_matches_a_new_frame() {
        let v6 = RoceFrame {
            src_ip: "fd00::1".parse().unwrap(),
            dst_ip: "fd00::2".parse().unwrap(),
            flow_label: 0x12345,
            ..ROCE_V4_FRAME
        };
        let tagged = RoceFrame {
            vlan: Vlan::Single(vlan::Repr {
                pcp: 3,
                dei: false,
                vid: 0,
            }),
            ..ROCE_V4_FRAME
        };
        // Padded to 60 bytes, odd payload lengths (the ICRC at an odd offset of the UDP
        // checksum's words), IPv4, IPv6, tagged.
        for base in [ROCE_V4_FRAME, v6, tagged] {
            for payload_len in [0, 1, 16, 333, 1000] {
                let shape = RoceFrame {
                    payload_len,
                    ..base
                };
                let patch = shape.psn_patch();
                let mut patched = vec![0u8; shape.buffer_len()];
                shape.emit(&mut patched, counting).unwrap();
                for psn in [0, 1, 0xfe, 0x1_0000, 0xabcdef, 0xffffff, 0x1234567] {
                    patch.set_psn(&mut patched, psn).unwrap();
                    let mut built = vec![0u8; shape.buffer_len()];
                    let numbered = RoceFrame {
                        bth: bth::Repr {
                            psn: psn & bth::MASK_24,
                            ..shape.bth
                        },
                        ..shape
                    };
                    numbered.emit(&mut built, counting).unwrap();
                    assert_eq!(patched, built, "{shape} PSN {psn:#x}");
                }
                assert_eq!(
                    patch.set_psn(&mut patched[..shape.overhead() + payload_len - 1], 0),
                    Err(Error::Truncated)
                );
            }
        }
    }

    #[test]
    fn emit_matches_scapy_v6() {
        let repr = RoceFrame {
            src_ip: "fd00::1".parse().unwrap(),
            dst_ip: "fd00::2".parse().unwrap(),
            flow_label: 0x12345,
            src_port: 49153,
            bth: bth::Repr::new(Opcode::RcWriteOnly, 0xabcdef, 0xffffff),
            ..ROCE_V4_FRAME
        };
        let mut out = [0u8; 128];
        let len = repr.emit(&mut out, counting).unwrap();
        assert_eq!(out[..len], vectors::ROCE_V6.to_vec()[..]);
        let (parsed, payload) = RoceFrame::parse(&out[..len]).unwrap();
        assert_eq!(parsed, repr);
        assert_eq!(payload, (0..16).collect::<Vec<u8>>());
    }

    #[test]
    fn qinq_padded_to_minimum() {
        let repr = RoceFrame {
            vlan: Vlan::Double {
                outer: vlan::Repr {
                    pcp: 5,
                    dei: true,
                    vid: 200,
                },
                inner: vlan::Repr {
                    pcp: 3,
                    dei: false,
                    vid: 100,
                },
            },
            ecn: Ecn::Ect1,
            bth: bth::Repr::new(Opcode::RcSendFirst, 1, 0),
            payload_len: 0,
            ..ROCE_V4_FRAME
        };
        assert_eq!(repr.buffer_len(), 66);
        let mut out = [0u8; 66];
        repr.emit(&mut out, |_| {}).unwrap();
        assert_eq!(out[..], vectors::ROCE_QINQ.to_vec()[..]);

        let short = RoceFrame {
            vlan: Vlan::Untagged,
            ..repr
        };
        assert_eq!(short.overhead(), 58);
        let mut out = [0xffu8; 60];
        assert_eq!(short.emit(&mut out, |_| {}).unwrap(), 60);
        assert_eq!(out[58..], [0, 0]);
        let (parsed, payload) = RoceFrame::parse(&out).unwrap();
        assert_eq!((parsed, payload.len()), (short, 0));
    }

    #[test]
    fn cnp_matches_scapy() {
        let cnp = cnp::Repr {
            dest_qp: 0x12,
            pkey: 0xffff,
        };
        let repr = RoceFrame {
            src_mac: DST,
            dst_mac: SRC,
            src_ip: "10.0.0.2".parse().unwrap(),
            dst_ip: "10.0.0.1".parse().unwrap(),
            dscp: 48,
            ecn: Ecn::NotEct,
            bth: cnp.bth(),
            payload_len: cnp::RESERVED_LEN,
            ..ROCE_V4_FRAME
        };
        let mut out = [0u8; 74];
        repr.emit(&mut out, |reserved| reserved.fill(0)).unwrap();
        assert_eq!(out[..], vectors::CNP_V4.to_vec()[..]);
        let parsed = cnp::Repr::parse(&cnp::Packet::new_checked(&out[42..]).unwrap()).unwrap();
        assert_eq!(parsed, cnp);
    }

    #[test]
    fn parse_scapy_and_round_trip() {
        let bytes = vectors::ROCE_V4.to_vec();
        let (repr, payload) = RoceFrame::parse(&bytes).unwrap();
        assert_eq!(repr, ROCE_V4_FRAME);
        assert_eq!(payload.len(), 16);
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut out, |p| p.copy_from_slice(payload)).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn rejects_corruption_and_other_traffic() {
        let mut bytes = vectors::ROCE_V4.to_vec();
        bytes[60] ^= 0xff; // payload
        assert_eq!(RoceFrame::parse(&bytes).unwrap_err(), Error::Checksum);
        let mut bytes = vectors::ROCE_V4.to_vec();
        bytes[36..38].copy_from_slice(&4792u16.to_be_bytes());
        bytes[40..42].copy_from_slice(&[0x12, 0x34]); // and a bad UDP checksum
        assert!(matches!(
            RoceFrame::parse(&bytes),
            Err(Error::Unsupported(_))
        ));
        let bytes = vectors::PFC.to_vec();
        assert!(matches!(
            RoceFrame::parse(&bytes),
            Err(Error::Unsupported(_))
        ));
        let mixed = RoceFrame {
            dst_ip: "fd00::2".parse().unwrap(),
            ..ROCE_V4_FRAME
        };
        assert!(matches!(
            mixed.emit(&mut [0u8; 128], |_| {}),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn truncated_at_every_boundary() {
        let bytes = vectors::ROCE_V4.to_vec();
        crate::assert_prefixes_truncated(&bytes, |b| RoceFrame::parse(b).map(drop));
        assert_eq!(
            ROCE_V4_FRAME.emit(&mut [0u8; 73], |_| {}),
            Err(Error::Truncated)
        );
    }
}
