//! The notification point in the kernel: which CE-marked packets earn a Congestion
//! Notification Packet (at most one per QP per interval), and the CNP itself, built by
//! `wire` from the data packet's headers with its ICRC. The eBPF program and the host tests
//! run this code.

use wire::ip::Ecn;
use wire::roce::RoceFrame;
use wire::{bth, cnp, ethernet, ipv4, udp};

/// `skb->mark` of the clone that the TC ingress program sends to egress to become a CNP.
pub const CNP_MARK: u32 = 0x4c4c_434e; // "LLCN"
/// Where the BTH of an untagged IPv4 packet without options starts: the only layout the CNP
/// builder answers.
pub const IPV4_BTH_OFFSET: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
/// Bytes of the data packet the CNP is built from: Ethernet, IPv4 without options, UDP, BTH.
pub const IPV4_DATA_PREFIX: usize = IPV4_BTH_OFFSET + bth::HEADER_LEN;
/// Length of an IPv4 CNP frame: Ethernet, IPv4, UDP, BTH, 16 reserved bytes, ICRC.
pub const IPV4_CNP_LEN: usize = IPV4_BTH_OFFSET + cnp::PACKET_LEN;
/// TTL of the CNPs the kernel sends.
const CNP_TTL: u8 = 64;

/// Rate limiting and counts of one QP's CNPs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CnpQpState {
    /// When the last CNP for this QP was sent (monotonic ns); 0 before the first.
    pub last_sent_ns: u64,
    /// CNPs sent for this QP.
    pub sent: u64,
    /// CE packets of this QP that did not earn a CNP (inside the interval).
    pub suppressed: u64,
}

impl CnpQpState {
    /// Whether a CE packet at `now_ns` earns a CNP: the first one does, then at most one per
    /// `interval_ns`. Counts either way.
    #[inline(always)]
    pub fn admit(&mut self, now_ns: u64, interval_ns: u64) -> bool {
        if self.sent > 0 && now_ns.saturating_sub(self.last_sent_ns) < interval_ns {
            self.suppressed += 1;
            return false;
        }
        self.last_sent_ns = now_ns;
        self.sent += 1;
        true
    }
}

counters! {
    /// Notification-point counters of one interface (per CPU in the map).
    pub struct CnpCounters {
        /// CNPs sent for CE-marked data packets.
        pub cnp_sent: u64,
        /// CE-marked data packets inside a QP's interval: no CNP.
        pub cnp_suppressed: u64,
        /// CNPs that arrived (this host is the sender).
        pub cnp_received: u64,
        /// CE packets whose CNP could not be made (IPv4 options, IPv6, clone failed).
        pub cnp_unsupported: u64,
    }
}

// SAFETY: plain `#[repr(C)]` records of `u64`s without padding.
pod!(CnpQpState, CnpCounters);

/// Builds the IPv4 CNP answering the data packet whose first [`IPV4_DATA_PREFIX`] bytes are
/// `data` (Ethernet, IPv4 with IHL 5, UDP, BTH): MACs and IPs swapped, UDP destination 4791
/// from the data packet's source port (which keeps the flow's path), BTH opcode 0x81 with
/// BECN, `dest_qp`, the data packet's P_Key, 16 reserved bytes, DSCP `dscp`, Not-ECT, TTL 64,
/// and the ICRC.
#[inline(always)]
pub fn build_ipv4_cnp(data: &[u8; IPV4_DATA_PREFIX], dest_qp: u32, dscp: u8) -> [u8; IPV4_CNP_LEN] {
    let eth = ethernet::Frame::new_unchecked(&data[..]);
    let ip = ipv4::Packet::new_unchecked(&data[ethernet::HEADER_LEN..]);
    let datagram = udp::Packet::new_unchecked(&data[ethernet::HEADER_LEN + ipv4::HEADER_LEN..]);
    let transport = bth::Packet::new_unchecked(&data[IPV4_BTH_OFFSET..]);
    let notification = cnp::Repr {
        dest_qp,
        pkey: transport.pkey(),
    };
    let frame = RoceFrame {
        src_mac: eth.dst_addr(),
        dst_mac: eth.src_addr(),
        vlan: ethernet::Vlan::Untagged,
        src_ip: ip.dst_addr().into(),
        dst_ip: ip.src_addr().into(),
        dscp: dscp & 0x3f,
        ecn: Ecn::NotEct,
        ttl: CNP_TTL,
        flow_label: 0,
        src_port: datagram.src_port(),
        bth: notification.bth(),
        payload_len: cnp::RESERVED_LEN,
    };
    let mut out = [0u8; IPV4_CNP_LEN];
    // IPV4_CNP_LEN bytes always hold an IPv4 CNP: this cannot fail.
    let _ = frame.emit(&mut out, |reserved| reserved.fill(0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::vectors;

    #[test]
    fn one_cnp_per_interval() {
        let mut qp = CnpQpState::default();
        assert!(qp.admit(1_000, 50_000));
        assert!(!qp.admit(20_000, 50_000));
        assert!(!qp.admit(50_999, 50_000));
        assert!(qp.admit(51_000, 50_000));
        assert_eq!((qp.sent, qp.suppressed), (2, 2));
        // The very first CE packet earns a CNP even at time 0.
        assert!(CnpQpState::default().admit(0, 50_000));
    }

    #[test]
    fn the_cnp_of_scapys_data_packet_is_scapys_cnp() {
        // vectors::CNP_V4 is scapy's CNP for QP 0x12 answering vectors::ROCE_V4, DSCP 48.
        let data: &[u8; IPV4_DATA_PREFIX] =
            vectors::ROCE_V4[..IPV4_DATA_PREFIX].try_into().unwrap();
        assert_eq!(build_ipv4_cnp(data, 0x12, 48)[..], vectors::CNP_V4[..]);
    }

    #[test]
    fn cnp_swaps_and_fills() {
        let data = RoceFrame {
            ecn: Ecn::Ce,
            ttl: 63,
            src_port: 50000,
            bth: bth::Repr::new(bth::Opcode::RcSendOnly, 0x77, 5),
            payload_len: 0,
            ..vectors::ROCE_V4_FRAME
        };
        let mut bytes = [0u8; 64];
        data.emit(&mut bytes, |_| {}).unwrap();
        let prefix: &[u8; IPV4_DATA_PREFIX] = bytes[..IPV4_DATA_PREFIX].try_into().unwrap();
        let cnp = build_ipv4_cnp(prefix, 0x123456, 48);
        // The CNP parses with a good IPv4 checksum and ICRC, answering the data packet.
        let (read, reserved) = RoceFrame::parse(&cnp).unwrap();
        assert_eq!((read.src_mac, read.dst_mac), (data.dst_mac, data.src_mac));
        assert_eq!((read.src_ip, read.dst_ip), (data.dst_ip, data.src_ip));
        assert_eq!(
            (read.dscp, read.ecn, read.src_port),
            (48, Ecn::NotEct, 50000)
        );
        assert_eq!(read.bth.opcode, bth::Opcode::Cnp);
        assert_eq!((read.bth.dest_qp, read.bth.becn), (0x123456, true));
        assert_eq!(reserved, [0; cnp::RESERVED_LEN]);
    }
}
