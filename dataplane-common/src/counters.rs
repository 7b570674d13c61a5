//! Counters the programs keep per CPU, and the kinds of malformed frame they count.

use crate::PRIORITIES;

counters! {
    /// Counters of one priority at one hook.
    pub struct PrioCounters {
        /// Frames seen (at XDP: received; at TC egress: sent).
        pub rx_packets: u64,
        /// Bytes of those frames (from the Ethernet header on).
        pub rx_bytes: u64,
        /// RoCEv2 packets (UDP destination port 4791 with a whole BTH).
        pub roce_packets: u64,
        /// IP packets that arrived ECT(0) or ECT(1).
        pub ect_packets: u64,
        /// IP packets that arrived with CE already set.
        pub ce_on_arrival: u64,
        /// ECT packets this program set to CE.
        pub ecn_marked: u64,
        /// Not-ECT packets the RED profile would have marked (left unchanged).
        pub would_mark_not_ect: u64,
        /// 802.1Qbb PAUSE frames received for this priority with a non-zero time.
        pub pfc_pause_rx: u64,
        /// 802.1Qbb PAUSE frames received for this priority with time 0 (XON).
        pub pfc_resume_rx: u64,
        /// Pause storms the watchdog saw on this priority (runs of pauses longer than its limit).
        pub pfc_storms: u64,
        /// Frames of this priority that left (TC egress) while it was paused.
        pub pfc_violations: u64,
    }
}

wire::named_enum! {
    /// The kinds of malformed frame the parser recognises; each has its own counter, at its
    /// number.
    #[repr(u32)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ParseError {
        /// Shorter than an Ethernet header.
        TruncatedEthernet => "truncated_ethernet",
        /// A VLAN tag cut short.
        TruncatedVlan => "truncated_vlan",
        /// More than two stacked VLAN tags.
        TooManyVlans => "too_many_vlans",
        /// IPv4 header cut short, or total length past the end of the frame.
        TruncatedIpv4 => "truncated_ipv4",
        /// IPv4 version is not 4, IHL < 5, or total length shorter than the header.
        BadIpv4Header => "bad_ipv4_header",
        /// IPv6 header cut short, payload length past the end of the frame, or version not 6.
        TruncatedIpv6 => "truncated_ipv6",
        /// An IPv6 extension header cut short.
        TruncatedIpv6Extension => "truncated_ipv6_extension",
        /// More IPv6 extension headers than the bounded walk follows.
        TooManyIpv6Extensions => "too_many_ipv6_extensions",
        /// UDP header cut short.
        TruncatedUdp => "truncated_udp",
        /// UDP to port 4791 without a whole BTH.
        TruncatedBth => "truncated_bth",
        /// A MAC control frame too short for a PFC payload.
        TruncatedPfc => "truncated_pfc",
        /// A MAC control frame whose opcode is not PFC's 0x0101 (not honoured).
        BadPfcOpcode => "bad_pfc_opcode",
        /// A PFC frame with reserved class-enable bits set (not honoured).
        BadPfcVector => "bad_pfc_vector",
    }
}

/// Every counter of one hook: per priority, and parse errors by kind.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HookCounters {
    /// Indexed by priority.
    pub per_priority: [PrioCounters; PRIORITIES],
    /// Indexed by [`ParseError`].
    pub parse_errors: [u64; ParseError::COUNT],
}

impl Default for HookCounters {
    fn default() -> Self {
        HookCounters {
            per_priority: [PrioCounters::default(); PRIORITIES],
            parse_errors: [0; ParseError::COUNT],
        }
    }
}

impl HookCounters {
    /// Adds `other` into `self` (to sum the per-CPU copies, or the hooks).
    pub fn accumulate(&mut self, other: &HookCounters) {
        for (mine, theirs) in self.per_priority.iter_mut().zip(other.per_priority.iter()) {
            mine.accumulate(theirs);
        }
        for (mine, theirs) in self.parse_errors.iter_mut().zip(other.parse_errors.iter()) {
            *mine += theirs;
        }
    }
}

// SAFETY: plain `#[repr(C)]` records of `u64`s without padding.
pod!(HookCounters);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_indices() {
        for (i, kind) in ParseError::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i);
            assert!(!kind.name().is_empty());
        }
    }

    #[test]
    fn accumulate_adds_every_field() {
        let mut a = HookCounters::default();
        let mut b = HookCounters::default();
        b.per_priority[3].ecn_marked = 2;
        b.per_priority[3].rx_bytes = 7;
        b.parse_errors[ParseError::TruncatedBth as usize] = 1;
        a.accumulate(&b);
        a.accumulate(&b);
        assert_eq!(a.per_priority[3].ecn_marked, 4);
        assert_eq!(a.per_priority[3].rx_bytes, 14);
        assert_eq!(a.parse_errors[ParseError::TruncatedBth as usize], 2);
    }
}
