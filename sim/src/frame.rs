//! Frames as the simulator moves them, and the RoCEv2 frames its hosts send and read.
//!
//! A [`Frame`] stores its headers as bytes (what a P4 program parses) and only counts the bytes
//! after them (the payload and ICRC of a data packet): a hop copies ~54 bytes, not an MTU. The
//! formats are `wire`'s: frames are built by its emitters and views and read by its views;
//! nothing here knows a byte offset. Control frames (CNP, ACK, NAK) are small and stored whole,
//! ICRC included.

use std::net::{IpAddr, Ipv4Addr};

use wire::aeth::{self, Syndrome};
use wire::bth::{self, Opcode, ROCEV2_PORT};
use wire::ethernet::{self, Address, EtherType, Vlan};
use wire::icrc::ICRC_LEN;
use wire::ip::{Ecn, Protocol};
use wire::roce::RoceFrame;
use wire::{cnp, ipv4, pfc, udp};

/// A frame on a link: stored bytes, then bytes counted but not stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The stored bytes (the headers, for a data packet).
    pub data: Vec<u8>,
    /// Bytes after `data` that the frame has on the wire (payload, ICRC).
    pub unstored: u32,
}

impl Frame {
    /// Length without FCS, bytes.
    pub fn len(&self) -> u64 {
        self.data.len() as u64 + u64::from(self.unstored)
    }

    /// Whether it has no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Bytes of Ethernet, IPv4, UDP and BTH headers before a RoCEv2 payload.
pub const DATA_HEADER_LEN: usize =
    ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN;

/// Bytes of IPv4, UDP, BTH and ICRC around a payload: what an IP MTU leaves for payload.
pub const IP_OVERHEAD: u32 =
    (ipv4::HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN + ICRC_LEN) as u32;

/// The addresses a QP's frames carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// Ethernet source (the host's).
    pub src_mac: [u8; 6],
    /// Ethernet destination (the next hop's: the host's gateway).
    pub dst_mac: [u8; 6],
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
}

/// A whole RoCEv2 frame of `addresses` with `bth`, `dscp`, `ecn` and UDP source port `sport`,
/// whose payload `write` fills (`payload_len` bytes).
fn emit(
    a: &Addresses,
    dscp: u8,
    ecn: Ecn,
    sport: u16,
    bth: bth::Repr,
    payload_len: usize,
    write: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    let frame = RoceFrame {
        src_mac: Address(a.src_mac),
        dst_mac: Address(a.dst_mac),
        vlan: Vlan::Untagged,
        src_ip: IpAddr::V4(a.src_ip),
        dst_ip: IpAddr::V4(a.dst_ip),
        dscp,
        ecn,
        ttl: 64,
        flow_label: 0,
        src_port: sport,
        bth,
        payload_len,
    };
    let mut buffer = vec![0; frame.buffer_len()];
    frame
        .emit(&mut buffer, write)
        .expect("an IPv4 RoCEv2 frame fits the buffer sized for it");
    buffer
}

/// A whole RoCEv2 SEND Only frame of `addresses` with `dscp`, `ecn` and UDP source port
/// `sport`, to QP `qp` at PSN 0, its `payload_len` bytes of payload zeros.
pub fn send_only(
    a: &Addresses,
    dscp: u8,
    ecn: Ecn,
    sport: u16,
    qp: u32,
    payload_len: usize,
) -> Vec<u8> {
    let bth = bth::Repr::new(Opcode::RcSendOnly, qp, 0);
    emit(a, dscp, ecn, sport, bth, payload_len, |_| {})
}

/// The headers of one QP's data packets, built once; each packet is a copy with its length,
/// opcode, PSN and AckReq set.
#[derive(Clone, Debug)]
pub struct DataTemplate {
    headers: [u8; DATA_HEADER_LEN],
}

impl DataTemplate {
    /// The template of a QP: its addresses, DSCP, ECN codepoint, UDP source port and
    /// destination QP.
    pub fn new(a: &Addresses, dscp: u8, ecn: Ecn, sport: u16, qp: u32) -> Self {
        let bytes = send_only(a, dscp, ecn, sport, qp, 0);
        let mut headers = [0; DATA_HEADER_LEN];
        headers.copy_from_slice(&bytes[..DATA_HEADER_LEN]);
        DataTemplate { headers }
    }

    /// A data packet with `payload` bytes (counted, not stored; nor is its ICRC).
    pub fn packet(&self, opcode: Opcode, psn: u32, ack_req: bool, payload: u32) -> Frame {
        let mut data = self.headers.to_vec();
        let udp_len = (udp::HEADER_LEN + bth::HEADER_LEN + ICRC_LEN) as u32 + payload;
        let (_, ip) = data.split_at_mut(ethernet::HEADER_LEN);
        let mut ip = ipv4::Packet::new_unchecked(ip);
        ip.set_total_len((ipv4::HEADER_LEN as u32 + udp_len).min(0xffff) as u16);
        ip.fill_checksum();
        let (_, udp) = data.split_at_mut(ethernet::HEADER_LEN + ipv4::HEADER_LEN);
        let (udp, transport) = udp.split_at_mut(udp::HEADER_LEN);
        udp::Packet::new_unchecked(udp).set_len(udp_len.min(0xffff) as u16);
        let mut bth = bth::Packet::new_unchecked(transport);
        bth.set_opcode(opcode);
        bth.set_psn(psn);
        bth.set_ack_req(ack_req);
        // A frame is at least 60 bytes: a payload too short for that is padded.
        let unstored =
            (payload + ICRC_LEN as u32).max((ethernet::MIN_FRAME_LEN - DATA_HEADER_LEN) as u32);
        Frame { data, unstored }
    }
}

/// A CNP to the sender of QP `qp` (addresses from the CNP's sender, the flow's receiver).
pub fn cnp(a: &Addresses, dscp: u8, qp: u32) -> Frame {
    let c = cnp::Repr {
        dest_qp: qp,
        pkey: bth::DEFAULT_PKEY,
    };
    let data = emit(
        a,
        dscp,
        Ecn::NotEct,
        0xC000,
        c.bth(),
        cnp::RESERVED_LEN,
        |_| {},
    );
    Frame { data, unstored: 0 }
}

/// An RC Acknowledge for QP `qp` saying `syndrome` about PSN `psn` (an ACK: the last PSN
/// received in order; a NAK: the PSN expected).
pub fn acknowledge(
    a: &Addresses,
    dscp: u8,
    sport: u16,
    qp: u32,
    psn: u32,
    syndrome: Syndrome,
) -> Frame {
    let repr = aeth::Repr { syndrome, msn: 0 };
    let data = emit(
        a,
        dscp,
        Ecn::NotEct,
        sport,
        bth::Repr::new(Opcode::RcAck, qp, psn),
        aeth::HEADER_LEN,
        |payload| {
            repr.emit(&mut aeth::Packet::new_unchecked(payload))
                .expect("the payload holds an AETH");
        },
    );
    Frame { data, unstored: 0 }
}

/// A PFC frame from `src_mac` pausing the priorities of `mask` for `quanta` (0: resume).
pub fn pfc(src_mac: [u8; 6], mask: u8, quanta: u16) -> Frame {
    let mut data = vec![0; pfc::FRAME_LEN];
    pfc::Repr::new(mask, quanta)
        .emit_frame(Address(src_mac), &mut data)
        .expect("a PFC frame fits its minimum-size buffer");
    Frame { data, unstored: 0 }
}

/// The fields of a RoCEv2 frame a host acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceHeaders {
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// BTH opcode.
    pub opcode: Opcode,
    /// BTH destination QP.
    pub qp: u32,
    /// BTH PSN.
    pub psn: u32,
    /// BTH AckReq.
    pub ack_req: bool,
    /// The AETH's syndrome, for an Acknowledge.
    pub syndrome: Option<Syndrome>,
}

/// What a host makes of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// A PFC frame.
    Pfc(pfc::Repr),
    /// A RoCEv2 frame over IPv4.
    Roce(RoceHeaders),
    /// Anything else.
    Other,
}

/// Reads a frame's headers (the payload may be unstored, so neither lengths past the headers
/// nor the ICRC are checked).
pub fn read(frame: &[u8]) -> Received {
    let Ok(view) = ethernet::Frame::new_checked(frame) else {
        return Received::Other;
    };
    let Ok(eth) = ethernet::Repr::parse(&view) else {
        return Received::Other;
    };
    match eth.ethertype {
        EtherType::MacControl => {
            pfc::Repr::parse_frame(frame).map_or(Received::Other, Received::Pfc)
        }
        EtherType::Ipv4 => {
            read_roce(&frame[eth.buffer_len()..]).map_or(Received::Other, Received::Roce)
        }
        _ => Received::Other,
    }
}

fn read_roce(packet: &[u8]) -> Option<RoceHeaders> {
    if packet.len() < ipv4::HEADER_LEN {
        return None;
    }
    let ip = ipv4::Packet::new_unchecked(packet);
    let header_len = ip.header_len();
    if ip.version() != 4
        || ip.protocol() != Protocol::Udp
        || packet.len() < header_len + udp::HEADER_LEN
    {
        return None;
    }
    let udp = udp::Packet::new_unchecked(&packet[header_len..]);
    if udp.dst_port() != ROCEV2_PORT {
        return None;
    }
    let transport = &packet[header_len + udp::HEADER_LEN..];
    let bth = bth::Packet::new_checked(transport).ok()?;
    let syndrome = (bth.opcode() == Opcode::RcAck)
        .then(|| {
            aeth::Packet::new_checked(bth.payload())
                .ok()
                .map(|a| a.syndrome().into())
        })
        .flatten();
    Some(RoceHeaders {
        src_ip: ip.src_addr(),
        dst_ip: ip.dst_addr(),
        ecn: ip.ecn(),
        opcode: bth.opcode(),
        qp: bth.dest_qp(),
        psn: bth.psn(),
        ack_req: bth.ack_req(),
        syndrome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses() -> Addresses {
        Addresses {
            src_mac: [8, 0, 0, 0, 1, 1],
            dst_mac: [0, 0xaa, 0, 0, 0, 1],
            src_ip: Ipv4Addr::new(10, 0, 1, 1),
            dst_ip: Ipv4Addr::new(10, 0, 2, 1),
        }
    }

    #[test]
    fn a_data_packet_is_its_whole_frame_with_the_payload_unstored() {
        let t = DataTemplate::new(&addresses(), 26, Ecn::Ect0, 49152, 0x123);
        let p = t.packet(Opcode::RcSendLast, 77, true, 4000);
        assert_eq!(p.len(), 54 + 4000 + 4);
        // The same frame built whole by wire, payload zeros: the stored bytes are its start.
        let whole = emit(
            &addresses(),
            26,
            Ecn::Ect0,
            49152,
            bth::Repr {
                ack_req: true,
                ..bth::Repr::new(Opcode::RcSendLast, 0x123, 77)
            },
            4000,
            |p| p.fill(0),
        );
        assert_eq!(whole.len() as u64, p.len());
        assert_eq!(&whole[..DATA_HEADER_LEN], &p.data[..]);
        let Received::Roce(h) = read(&p.data) else {
            panic!("not read as RoCEv2")
        };
        assert_eq!(
            (h.opcode, h.qp, h.psn, h.ack_req, h.ecn),
            (Opcode::RcSendLast, 0x123, 77, true, Ecn::Ect0)
        );
        // A tiny payload pads to the 60-byte minimum frame.
        assert_eq!(t.packet(Opcode::RcSendOnly, 0, true, 1).len(), 60);
    }

    #[test]
    fn control_frames_parse_with_wire_and_back() {
        let c = cnp(&addresses(), 48, 0x55);
        assert_eq!(c.len(), 74);
        assert!(RoceFrame::parse(&c.data).is_ok(), "a valid ICRC");
        let Received::Roce(h) = read(&c.data) else {
            panic!()
        };
        assert_eq!((h.opcode, h.qp), (Opcode::Cnp, 0x55));
        let n = acknowledge(&addresses(), 26, 49152, 0x55, 9, Syndrome::Nak(0));
        assert!(RoceFrame::parse(&n.data).is_ok());
        let Received::Roce(h) = read(&n.data) else {
            panic!()
        };
        assert_eq!((h.psn, h.syndrome), (9, Some(Syndrome::Nak(0))));
        let Received::Pfc(p) = read(&pfc([2, 0, 0, 0, 0, 1], 1 << 3, 500).data) else {
            panic!()
        };
        assert_eq!(p.pause_times[3], 500);
    }
}
