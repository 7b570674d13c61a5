//! The frames hosts of the fabric send and read, built and read by `wire`: RoCEv2 over IPv4
//! (Ethernet, IPv4, UDP 4791, BTH, payload, ICRC) data packets and CNPs, and 802.1Qbb PFC
//! frames. [`Roce`] holds the few fields the fabric's hosts vary; the rest is fixed (untagged,
//! TTL 64, DF, the default P_Key, a zero payload).

use std::net::{IpAddr, Ipv4Addr};

use wire::bth::{self, Opcode};
use wire::cnp;
use wire::ethernet::{Address, Vlan};
use wire::ip::Ecn;
use wire::pfc;
use wire::roce::RoceFrame;

/// BTH opcode of an RC SEND-only packet, what hosts send as data.
pub const OPCODE_SEND_ONLY: Opcode = Opcode::RcSendOnly;
/// BTH opcode of a CNP.
pub const OPCODE_CNP: Opcode = Opcode::Cnp;

/// The fields of a RoCEv2 frame that the fabric's hosts set and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Roce {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IPv4 source.
    pub src_ip: u32,
    /// IPv4 destination.
    pub dst_ip: u32,
    /// DSCP.
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// UDP source port (the flow's entropy).
    pub sport: u16,
    /// BTH opcode.
    pub opcode: Opcode,
    /// BTH destination QP.
    pub qp: u32,
    /// BTH packet sequence number.
    pub psn: u32,
}

impl Roce {
    /// The frame, `len` bytes long without FCS (at least the headers and ICRC, padded to the
    /// minimum frame; a CNP is always 74: BTH with BECN, 16 reserved bytes, ICRC).
    pub fn emit(&self, len: usize) -> Vec<u8> {
        let (bth, payload_len) = if self.opcode == OPCODE_CNP {
            let cnp = cnp::Repr {
                dest_qp: self.qp,
                pkey: bth::DEFAULT_PKEY,
            };
            (cnp.bth(), cnp::RESERVED_LEN)
        } else {
            let bth = bth::Repr::new(self.opcode, self.qp, self.psn);
            let overhead = RoceFrame::untagged_overhead(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            (bth, len.saturating_sub(overhead))
        };
        let frame = RoceFrame {
            src_mac: Address(self.src_mac),
            dst_mac: Address(self.dst_mac),
            vlan: Vlan::Untagged,
            src_ip: Ipv4Addr::from(self.src_ip).into(),
            dst_ip: Ipv4Addr::from(self.dst_ip).into(),
            dscp: self.dscp,
            ecn: self.ecn,
            ttl: 64,
            flow_label: 0,
            src_port: self.sport,
            bth,
            payload_len,
        };
        let mut buffer = vec![0; frame.buffer_len()];
        frame
            .emit(&mut buffer, |payload| payload.fill(0))
            .expect("an IPv4 RoCEv2 frame fits the buffer sized for it");
        buffer
    }

    /// Reads a RoCEv2-over-IPv4 frame, checking its IPv4 checksum and ICRC: `Unsupported` for
    /// anything but RoCEv2 over IPv4, `Checksum` for a bad checksum or ICRC.
    pub fn parse(f: &[u8]) -> wire::Result<Roce> {
        let (frame, _) = RoceFrame::parse(f)?;
        let (IpAddr::V4(src_ip), IpAddr::V4(dst_ip)) = (frame.src_ip, frame.dst_ip) else {
            return Err(wire::Error::Unsupported("not IPv4"));
        };
        Ok(Roce {
            src_mac: frame.src_mac.0,
            dst_mac: frame.dst_mac.0,
            src_ip: src_ip.into(),
            dst_ip: dst_ip.into(),
            dscp: frame.dscp,
            ecn: frame.ecn,
            sport: frame.src_port,
            opcode: frame.bth.opcode,
            qp: frame.bth.dest_qp,
            psn: frame.bth.psn,
        })
    }
}

/// Reads a PFC frame (to 01:80:c2:00:00:01): `None` for any other frame.
pub fn parse_pfc(f: &[u8]) -> Option<pfc::Repr> {
    pfc::Repr::parse_frame(f).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(opcode: Opcode) -> Roce {
        Roce {
            src_mac: [8, 0, 0, 0, 1, 1],
            dst_mac: [0, 0xaa, 0, 0, 0, 1],
            src_ip: 0x0a00_0101,
            dst_ip: 0x0a00_0202,
            dscp: 26,
            ecn: Ecn::Ect0,
            sport: 49152,
            opcode,
            qp: 0x12,
            psn: 7,
        }
    }

    #[test]
    fn data_frames_round_trip() {
        let f = sample(OPCODE_SEND_ONLY).emit(1000);
        assert_eq!(f.len(), 1000);
        assert_eq!(Roce::parse(&f), Ok(sample(OPCODE_SEND_ONLY)));
        assert_eq!(
            wire::checksum::finish(wire::checksum::sum(&f[14..34])),
            0,
            "a valid IPv4 checksum sums to zero"
        );
    }

    #[test]
    fn a_cnp_is_74_bytes_with_becn() {
        let f = sample(OPCODE_CNP).emit(1000);
        assert_eq!(f.len(), 74);
        let (frame, _) = RoceFrame::parse(&f).unwrap();
        assert!(frame.bth.becn);
        assert_eq!(
            Roce::parse(&f),
            Ok(Roce {
                psn: 0,
                ..sample(OPCODE_CNP)
            })
        );
    }

    #[test]
    fn the_icrc_ignores_the_variant_fields() {
        let f = sample(OPCODE_SEND_ONLY).emit(100);
        let mut marked = f.clone();
        marked[15] |= 3;
        marked[22] -= 1;
        let icrc = |f: &[u8]| wire::icrc::compute(&f[14..96]).unwrap();
        assert_eq!(icrc(&f), icrc(&marked));
        marked[60] ^= 1;
        assert_ne!(icrc(&f), icrc(&marked));
        assert_eq!(Roce::parse(&marked), Err(wire::Error::Checksum));
    }

    #[test]
    fn pfc_times_per_enabled_class() {
        let mut f = vec![0u8; 60];
        pfc::Repr::new(0b1000, 500)
            .emit_frame(Address([2, 0, 0, 0, 0, 1]), &mut f)
            .unwrap();
        let pfc = parse_pfc(&f).unwrap();
        assert_eq!((pfc.class_enable, pfc.pause_times[3]), (0b1000, 500));
        assert_eq!(pfc.pause_times[2], 0);
    }
}
