//! What IPv4 and IPv6 share: the upper-layer protocol number and the traffic
//! class byte (DSCP in the high six bits, ECN in the low two).

use super::enum_with_unknown;

enum_with_unknown! {
    /// The upper-layer protocol (IPv4 protocol, IPv6 next header).
    pub enum Protocol(u8) {
        /// IPv6 hop-by-hop options (an extension header).
        HopByHop = 0,
        /// ICMP.
        Icmp = 1,
        /// TCP.
        Tcp = 6,
        /// UDP.
        Udp = 17,
        /// IPv6 routing header (an extension header).
        Ipv6Route = 43,
        /// IPv6 fragment header (an extension header).
        Ipv6Frag = 44,
        /// GRE (RFC 2784), which carries ERSPAN.
        Gre = 47,
        /// Authentication header (an IPv6 extension header).
        Ah = 51,
        /// ICMPv6.
        Icmpv6 = 58,
        /// IPv6 destination options (an extension header).
        Ipv6Opts = 60,
    }
}

/// The two ECN bits of the traffic class (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// Not ECN-capable transport (0b00).
    #[default]
    NotEct,
    /// ECN-capable transport, codepoint 1 (0b01).
    Ect1,
    /// ECN-capable transport, codepoint 0 (0b10).
    Ect0,
    /// Congestion experienced (0b11).
    Ce,
}

impl Ecn {
    /// The ECN bits of a traffic class byte.
    pub const fn from_traffic_class(traffic_class: u8) -> Ecn {
        match traffic_class & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The codepoint as its two bits.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// The DSCP (high six bits) of a traffic class byte.
pub const fn dscp(traffic_class: u8) -> u8 {
    traffic_class >> 2
}

/// A traffic class byte made of a DSCP (0..=63) and ECN bits.
pub const fn traffic_class(dscp: u8, ecn: Ecn) -> u8 {
    (dscp << 2) | ecn.bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_class_round_trip() {
        // DSCP 26 (AF31, the usual RoCE data class) with ECT(0) is 0x6a.
        assert_eq!(traffic_class(26, Ecn::Ect0), 0x6a);
        assert_eq!((dscp(0x6a), Ecn::from_traffic_class(0x6a)), (26, Ecn::Ect0));
        for bits in 0..4 {
            assert_eq!(Ecn::from_traffic_class(bits).bits(), bits);
        }
        assert_eq!(Protocol::from(17), Protocol::Udp);
        assert_eq!(u8::from(Protocol::Unknown(99)), 99);
    }

    #[test]
    fn protocol_numbers_are_the_kernels() {
        // libc's constants are those of the kernel's linux/in.h and linux/in6.h.
        for (ours, kernel) in [
            (Protocol::HopByHop, libc::IPPROTO_HOPOPTS),
            (Protocol::Icmp, libc::IPPROTO_ICMP),
            (Protocol::Tcp, libc::IPPROTO_TCP),
            (Protocol::Udp, libc::IPPROTO_UDP),
            (Protocol::Ipv6Route, libc::IPPROTO_ROUTING),
            (Protocol::Ipv6Frag, libc::IPPROTO_FRAGMENT),
            (Protocol::Ah, libc::IPPROTO_AH),
            (Protocol::Icmpv6, libc::IPPROTO_ICMPV6),
            (Protocol::Ipv6Opts, libc::IPPROTO_DSTOPTS),
        ] {
            assert_eq!(i32::from(ours.value()), kernel, "{ours:?}");
        }
    }
}
