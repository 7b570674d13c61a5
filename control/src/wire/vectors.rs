//! Test vectors: frames encoded by scapy 2.8, an encoder independent of ours.
//!
//! Each constant names the scapy expression that produced it, with
//! `src = "02:00:00:00:00:01"`, `dst = "02:00:00:00:00:02"`,
//! `pay = Raw(bytes(range(16)))` and `from scapy.contrib.roce import BTH, cnp`.

/// `Ether(src=src,dst=dst)/IP(src="10.0.0.1",dst="10.0.0.2",tos=0x6a,ttl=64,id=0,flags="DF")
/// /UDP(sport=49152,dport=4791,chksum=0)/BTH(opcode=0x04,dqpn=0x000012,psn=0x345678,ackreq=1)/pay`
pub const ROCE_V4: &str = "0200000000020200000000010800456a003c00004000401126450a0000010a000002\
c00012b7002800000400ffff0000001280345678000102030405060708090a0b0c0d0e0f8e50990d";

/// `Ether(src=src,dst=dst)/IPv6(src="fd00::1",dst="fd00::2",tc=0x6a,fl=0x12345,hlim=64)
/// /UDP(sport=49153,dport=4791)/BTH(opcode=0x0a,dqpn=0xabcdef,psn=0xffffff)/pay`
pub const ROCE_V6: &str = "02000000000202000000000186dd66a1234500281140fd000000000000000000000000000001\
fd000000000000000000000000000002c00112b700284b080a00ffff00abcdef00ffffff000102030405060708090a0b0c0d0e0f\
d02605d8";

/// `Ether(src=src,dst=dst)/Dot1AD(prio=5,id=1,vlan=200)/Dot1Q(prio=3,vlan=100)
/// /IP(src="10.0.0.1",dst="10.0.0.2",tos=0x69,ttl=64,id=0,flags="DF")
/// /UDP(sport=49152,dport=4791,chksum=0)/BTH(opcode=0x00,dqpn=1,psn=0)/Raw(b"")`
pub const ROCE_QINQ: &str =
    "02000000000202000000000188a8b0c88100606408004569002c00004000401126560a000001\
0a000002c00012b7001800000000ffff00000001000000007770a587";

/// `Ether(src=dst,dst=src)/IP(src="10.0.0.2",dst="10.0.0.1",tos=0xc0,ttl=64,id=0,flags="DF")
/// /UDP(sport=49152,dport=4791,chksum=0)/cnp(0x000012)`
pub const CNP_V4: &str = "020000000001020000000002080045c0003c00004000401125ef0a0000020a000001\
c00012b7002800008100ffff400000120000000000000000000000000000000000000000b8e7f1e4";

/// `IP(src="10.0.0.1",dst="10.0.0.2",ttl=64,id=0x1234)/UDP(sport=1234,dport=4791)/Raw(b"hello roce")`
pub const UDP_V4: &str =
    "4500002612340000401154910a0000010a00000204d212b70012ba7768656c6c6f20726f6365";

/// `IPv6(src="fd00::1",dst="fd00::2",hlim=64)/UDP(sport=1234,dport=4791)/Raw(b"hello roce!")`
pub const UDP_V6: &str =
    "6000000000131140fd000000000000000000000000000001fd000000000000000000000000000002\
04d212b70013b37368656c6c6f20726f636521";

/// `from scapy.contrib.mac_control import MACControlClassBasedFlowControl`;
/// `Ether(src=src,dst="01:80:c2:00:00:01",type=0x8808)/MACControlClassBasedFlowControl(
/// c3_enabled=1,c6_enabled=1,c3_pause_time=0xffff,c6_pause_time=0x1234)`
pub const PFC: &str = "0180c2000001020000000001880801010048000000000000ffff00000000123400000000\
000000000000000000000000000000000000000000000000";
