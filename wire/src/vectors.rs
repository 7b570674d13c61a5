//! Test vectors: frames from encoders independent of ours, as bytes. Each names the scapy
//! expression that produced it, with `src = "02:00:00:00:00:01"`, `dst = "02:00:00:00:00:02"`,
//! `pay = Raw(bytes(range(16)))` and `from scapy.contrib.roce import BTH, AETH, cnp`, and
//! [`SCAPY`] lists them so that `tests/independent_decoders.rs` can rerun scapy and decode them
//! with tshark. Public for the tests of the crates that build frames through this one.

use core::net::{IpAddr, Ipv4Addr};

use crate::bth::{self, Opcode};
use crate::ethernet::{Address, Vlan};
use crate::ip::Ecn;
use crate::roce::RoceFrame;

/// `src` of the scapy expressions: the MAC address of the vectors' sender.
pub const SRC: Address = Address([2, 0, 0, 0, 0, 1]);

/// `dst` of the scapy expressions: the MAC address of the vectors' receiver.
pub const DST: Address = Address([2, 0, 0, 0, 0, 2]);

/// The headers of [`ROCE_V4`] as a [`RoceFrame`] (with its 16-byte payload): where the tests
/// that build RoCEv2 frames start, changing only what they are about. `roce`'s tests check
/// that it parses from and emits to those bytes.
pub const ROCE_V4_FRAME: RoceFrame = RoceFrame {
    src_mac: SRC,
    dst_mac: DST,
    vlan: Vlan::Untagged,
    src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
    dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    dscp: 26,
    ecn: Ecn::Ect0,
    ttl: 64,
    flow_label: 0,
    src_port: 49152,
    bth: bth::Repr {
        ack_req: true,
        ..bth::Repr::new(Opcode::RcSendOnly, 0x12, 0x345678)
    },
    payload_len: 16,
};

/// A vector and the scapy expression that builds it.
#[derive(Debug, Clone, Copy)]
pub struct Vector {
    /// The constant's name.
    pub name: &'static str,
    /// A scapy expression whose `raw()` is `bytes`.
    pub scapy: &'static str,
    /// The frame (or packet, for the UDP vectors: from the IP header).
    pub bytes: &'static [u8],
}

/// How many bytes the hex digits of `text` make.
const fn byte_count(text: &str) -> usize {
    text.len() / 2
}

/// The bytes of `text`, hex digits without separators; a compile error if it holds anything else.
const fn decode<const N: usize>(text: &str) -> [u8; N] {
    const fn digit(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("test vectors are lower-case hex digits"),
        }
    }
    let text = text.as_bytes();
    assert!(text.len() == 2 * N, "an odd number of hex digits");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = (digit(text[2 * i]) << 4) | digit(text[2 * i + 1]);
        i += 1;
    }
    out
}

/// Declares a vector constant from its hex digits and records its scapy expression.
macro_rules! vectors {
    ($( $(#[$meta:meta])* $name:ident = $scapy:literal, $hex:expr; )+) => {
        $(
            $(#[$meta])*
            pub const $name: &[u8] = &decode::<{ byte_count($hex) }>($hex);
        )+

        /// Every vector with its scapy expression.
        pub const SCAPY: &[Vector] = &[
            $( Vector { name: stringify!($name), scapy: $scapy, bytes: $name }, )+
        ];
    };
}

vectors! {
    /// A RoCEv2 SEND over IPv4, DSCP 26 with ECT(0), no UDP checksum.
    ROCE_V4 = "Ether(src=src,dst=dst)/IP(src='10.0.0.1',dst='10.0.0.2',tos=0x6a,ttl=64,id=0,flags='DF')\
        /UDP(sport=49152,dport=4791,chksum=0)/BTH(opcode=0x04,dqpn=0x000012,psn=0x345678,ackreq=1)/pay",
        "0200000000020200000000010800456a003c00004000401126450a0000010a000002\
        c00012b7002800000400ffff0000001280345678000102030405060708090a0b0c0d0e0f8e50990d";

    /// A RoCEv2 RDMA WRITE over IPv6 with a flow label and a UDP checksum.
    ROCE_V6 = "Ether(src=src,dst=dst)/IPv6(src='fd00::1',dst='fd00::2',tc=0x6a,fl=0x12345,hlim=64)\
        /UDP(sport=49153,dport=4791)/BTH(opcode=0x0a,dqpn=0xabcdef,psn=0xffffff)/pay",
        "02000000000202000000000186dd66a1234500281140fd000000000000000000000000000001\
        fd000000000000000000000000000002c00112b700284b080a00ffff00abcdef00ffffff000102030405060708090a0b0c0d0e0f\
        d02605d8";

    /// A RoCEv2 SEND FIRST behind an 802.1ad service tag and an 802.1Q customer tag.
    ROCE_QINQ = "Ether(src=src,dst=dst)/Dot1AD(prio=5,id=1,vlan=200)/Dot1Q(prio=3,vlan=100)\
        /IP(src='10.0.0.1',dst='10.0.0.2',tos=0x69,ttl=64,id=0,flags='DF')\
        /UDP(sport=49152,dport=4791,chksum=0)/BTH(opcode=0x00,dqpn=1,psn=0)/Raw(b'')",
        "02000000000202000000000188a8b0c88100606408004569002c00004000401126560a000001\
        0a000002c00012b7001800000000ffff00000001000000007770a587";

    /// The CNP answering [`ROCE_V4`].
    CNP_V4 = "Ether(src=dst,dst=src)/IP(src='10.0.0.2',dst='10.0.0.1',tos=0xc0,ttl=64,id=0,flags='DF')\
        /UDP(sport=49152,dport=4791,chksum=0)/cnp(0x000012)",
        "020000000001020000000002080045c0003c00004000401125ef0a0000020a000001\
        c00012b7002800008100ffff400000120000000000000000000000000000000000000000b8e7f1e4";

    /// An RC ACKNOWLEDGE with its AETH: syndrome 0x1f (ACK, credits "invalid"), MSN 0x102.
    ACK_V4 = "Ether(src=dst,dst=src)/IP(src='10.0.0.2',dst='10.0.0.1',tos=0x68,ttl=64,id=0,flags='DF')\
        /UDP(sport=49152,dport=4791,chksum=0)/BTH(opcode=0x11,dqpn=0x000012,psn=0x345678)\
        /AETH(syndrome=0x1f,msn=0x000102)",
        "02000000000102000000000208004568003000004000401126530a0000020a000001\
        c00012b7001c00001100ffff00000012003456781f000102334c7d56";

    /// An IPv4 UDP datagram to port 4791 (no Ethernet header).
    UDP_V4 = "IP(src='10.0.0.1',dst='10.0.0.2',ttl=64,id=0x1234)/UDP(sport=1234,dport=4791)\
        /Raw(b'hello roce')",
        "4500002612340000401154910a0000010a00000204d212b70012ba7768656c6c6f20726f6365";

    /// An IPv6 UDP datagram to port 4791 (no Ethernet header).
    UDP_V6 = "IPv6(src='fd00::1',dst='fd00::2',hlim=64)/UDP(sport=1234,dport=4791)\
        /Raw(b'hello roce!')",
        "6000000000131140fd000000000000000000000000000001fd000000000000000000000000000002\
        04d212b70013b37368656c6c6f20726f636521";

    /// An 802.1Qbb frame pausing priority 3 for 0xffff quanta and priority 6 for 0x1234
    /// (`from scapy.contrib.mac_control import MACControlClassBasedFlowControl`).
    PFC = "Ether(src=src,dst='01:80:c2:00:00:01',type=0x8808)/MACControlClassBasedFlowControl(\
        c3_enabled=1,c6_enabled=1,c3_pause_time=0xffff,c6_pause_time=0x1234)",
        "0180c2000001020000000001880801010048000000000000ffff00000000123400000000\
        000000000000000000000000000000000000000000000000";
}
