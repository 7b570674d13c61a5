//! ERSPAN mirroring from the host: the session the control plane writes (where mirrored frames
//! go, as what, which frames) and the counters of what the mirror programs sent. The outer
//! headers are `wire::erspan`'s ([`wire::erspan::Outer`], [`wire::erspan::Repr`]); this module
//! fills them from a session and puts them before the mirrored frame's own Ethernet header, the
//! bytes the programs write into the frame's grown head (docs/telemetry.md).

use core::net::Ipv4Addr;

use wire::{
    erspan::{Header, Outer, Repr, OUTER_III_LEN, OUTER_II_LEN},
    ethernet,
};

/// `skb->mark` of a mirror's clone while it is sent, so that no mirror program mirrors it again
/// (the collector may be reached through the mirrored interface itself).
pub const MIRROR_MARK: u32 = 0x4c4c_4d52; // "LLMR"

/// ERSPAN session ids: 10 bits.
pub const MAX_SESSION: u32 = 1023;
/// Type III's hardware id: 6 bits.
pub const MAX_HW_ID: u32 = 63;
/// Type III's timestamp granularity the host writes: 1, units of 100 ns.
pub const GRANULARITY_100NS: u8 = 1;

/// Bytes the programs write at the start of a type II mirror: the outer headers and the
/// mirrored frame's Ethernet header.
pub const II_PREFIX_LEN: usize = OUTER_II_LEN + ethernet::HEADER_LEN;
/// As [`II_PREFIX_LEN`], for type III.
pub const III_PREFIX_LEN: usize = OUTER_III_LEN + ethernet::HEADER_LEN;

/// The ERSPAN encapsulations the host builds.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErspanType {
    /// Type II: GRE 0x88BE, an 8-byte header whose index is the mirrored interface's ifindex.
    II = 2,
    /// Type III: GRE 0x22EB, a 12-byte header with a timestamp, the hardware id and the
    /// direction.
    III = 3,
}

/// The interface's mirroring session (one per interface, in the `MIRROR_SESSION` map): off
/// while it selects nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorSession {
    /// [`MirrorSession::CNP`] and [`MirrorSession::NAK`]: mirror the CNPs, the NAKs (RNR NAKs
    /// included) sent and received.
    pub flags: u32,
    /// Bit p: mirror every frame of priority p (as the ECN classifier gives it).
    pub priorities: u32,
    /// The interface the mirrors are sent out of (toward the collector).
    pub via_ifindex: u32,
    /// The ERSPAN session id (10 bits).
    pub session: u32,
    /// [`ErspanType`] as a number (2 or 3).
    pub erspan_type: u32,
    /// Type III's hardware id (6 bits).
    pub hw_id: u32,
    /// The outer source address.
    pub src_ip: [u8; 4],
    /// The collector's address.
    pub dst_ip: [u8; 4],
    /// The outer source MAC.
    pub src_mac: [u8; 6],
    /// The outer destination MAC (the collector's, or the next hop's toward it).
    pub dst_mac: [u8; 6],
    /// The outer DSCP.
    pub dscp: u8,
    /// The outer TTL.
    pub ttl: u8,
    /// Zero.
    pub reserved: [u8; 2],
    /// GRE sequence number of the next mirror; the programs count it up (not atomically: two
    /// CPUs mirroring at the same moment may send one number twice).
    pub sequence: u32,
}

/// What a mirrored frame is, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mirrored {
    /// A CNP (BTH opcode 0x81).
    Cnp,
    /// A NAK or an RNR NAK.
    Nak,
    /// Another frame of a mirrored priority.
    Priority,
}

impl MirrorSession {
    /// Flag: mirror CNPs.
    pub const CNP: u32 = 1;
    /// Flag: mirror NAKs and RNR NAKs.
    pub const NAK: u32 = 2;

    /// Whether it mirrors anything.
    #[inline(always)]
    pub fn is_on(&self) -> bool {
        self.flags & (Self::CNP | Self::NAK) != 0 || self.priorities & 0xff != 0
    }

    /// Whether a frame of `priority` that is a CNP (`cnp`) or a NAK (`nak`) is mirrored, and as
    /// what.
    #[inline(always)]
    pub fn selects(&self, cnp: bool, nak: bool, priority: usize) -> Option<Mirrored> {
        if cnp && self.flags & Self::CNP != 0 {
            Some(Mirrored::Cnp)
        } else if nak && self.flags & Self::NAK != 0 {
            Some(Mirrored::Nak)
        } else if self.priorities & (1 << (priority & 7)) != 0 {
            Some(Mirrored::Priority)
        } else {
            None
        }
    }

    /// The encapsulation, if `erspan_type` names one.
    #[inline(always)]
    pub fn kind(&self) -> Option<ErspanType> {
        match self.erspan_type {
            2 => Some(ErspanType::II),
            3 => Some(ErspanType::III),
            _ => None,
        }
    }

    /// The GRE and ERSPAN headers of the mirror of a frame of priority `cos`, seen on the
    /// interface `ifindex` (type II's index) going out (`egress`) or coming in, at `now_ns`
    /// (type III's timestamp, in 100 ns units, its low 32 bits).
    #[inline(always)]
    pub fn header(
        &self,
        kind: ErspanType,
        cos: u8,
        egress: bool,
        ifindex: u32,
        now_ns: u64,
    ) -> Repr {
        Repr {
            sequence: self.sequence,
            vlan: 0,
            cos: cos & 7,
            truncated: false,
            session: (self.session & MAX_SESSION) as u16,
            header: match kind {
                ErspanType::II => Header::II {
                    encap: 0,
                    index: ifindex & 0xfffff,
                },
                ErspanType::III => Header::III {
                    timestamp: (now_ns / 100) as u32,
                    sgt: 0,
                    hw_id: (self.hw_id & MAX_HW_ID) as u8,
                    frame_type: 0,
                    egress,
                    granularity: GRANULARITY_100NS,
                },
            },
        }
    }

    /// The outer Ethernet and IPv4 headers.
    #[inline(always)]
    pub fn outer(&self) -> Outer {
        Outer {
            src_mac: ethernet::Address(self.src_mac),
            dst_mac: ethernet::Address(self.dst_mac),
            src_ip: Ipv4Addr::from(self.src_ip),
            dst_ip: Ipv4Addr::from(self.dst_ip),
            dscp: self.dscp & 0x3f,
            ttl: self.ttl,
        }
    }
}

/// The first `N` bytes of the mirror of a frame of `frame_len` bytes whose Ethernet header is
/// `frame_eth`: the outer headers for `header` ([`II_PREFIX_LEN`] or [`III_PREFIX_LEN`] long
/// with the Ethernet header) then `frame_eth`. `None` when `N` is not the length of `header`'s
/// type or the frame is too long for IPv4.
#[inline(always)]
pub fn prefix<const N: usize>(
    outer: &Outer,
    header: &Repr,
    frame_len: usize,
    frame_eth: &[u8; ethernet::HEADER_LEN],
) -> Option<[u8; N]> {
    let outer_len = N.checked_sub(ethernet::HEADER_LEN)?;
    let expected = match header.header {
        Header::II { .. } => OUTER_II_LEN,
        Header::III { .. } => OUTER_III_LEN,
    };
    if outer_len != expected {
        return None;
    }
    let mut out = [0u8; N];
    outer.emit(header, frame_len, &mut out).ok()?;
    out[outer_len..].copy_from_slice(frame_eth);
    Some(out)
}

counters! {
    /// The frames an interface mirrored (per CPU in the map).
    pub struct MirrorCounters {
        /// CNPs received, mirrored.
        pub rx_cnps: u64,
        /// NAKs (RNR NAKs included) received, mirrored.
        pub rx_naks: u64,
        /// Other frames of a mirrored priority received, mirrored.
        pub rx_priority: u64,
        /// CNPs sent, mirrored.
        pub tx_cnps: u64,
        /// NAKs sent, mirrored.
        pub tx_naks: u64,
        /// Other frames of a mirrored priority sent, mirrored.
        pub tx_priority: u64,
        /// Frames the session selected that are not mirrored as they are: a VLAN tag the kernel
        /// keeps outside the frame, a GSO packet, a frame that is not IPv4 or IPv6 to the skb.
        pub skipped: u64,
        /// Frames whose mirror could not be made or sent (room, store or clone failed).
        pub failed: u64,
    }
}

impl MirrorCounters {
    /// The counter of a mirror of `what`, sent (`egress`) or received.
    #[inline(always)]
    pub fn slot(&mut self, what: Mirrored, egress: bool) -> &mut u64 {
        match (what, egress) {
            (Mirrored::Cnp, false) => &mut self.rx_cnps,
            (Mirrored::Nak, false) => &mut self.rx_naks,
            (Mirrored::Priority, false) => &mut self.rx_priority,
            (Mirrored::Cnp, true) => &mut self.tx_cnps,
            (Mirrored::Nak, true) => &mut self.tx_naks,
            (Mirrored::Priority, true) => &mut self.tx_priority,
        }
    }

    /// Every frame mirrored.
    pub fn mirrored(&self) -> u64 {
        self.rx_cnps
            + self.rx_naks
            + self.rx_priority
            + self.tx_cnps
            + self.tx_naks
            + self.tx_priority
    }
}

// SAFETY: plain `#[repr(C)]` records: `MirrorSession` of `u32`s then byte arrays filling 20
// bytes and a last `u32` (52 bytes, no padding); `MirrorCounters` of `u64`s.
pod!(MirrorSession, MirrorCounters);

#[cfg(test)]
mod tests {
    use super::*;
    use wire::erspan::decapsulate;

    fn session(erspan_type: ErspanType) -> MirrorSession {
        MirrorSession {
            flags: MirrorSession::CNP,
            priorities: 1 << 3,
            via_ifindex: 9,
            session: 5,
            erspan_type: erspan_type as u32,
            hw_id: 7,
            src_ip: [10, 0, 9, 1],
            dst_ip: [10, 0, 9, 2],
            src_mac: [2, 0, 0, 0, 0, 0xf3],
            dst_mac: [2, 0, 0, 0, 0, 0xc0],
            dscp: 8,
            ttl: 64,
            reserved: [0; 2],
            sequence: 41,
        }
    }

    #[test]
    fn the_record_has_no_padding() {
        assert_eq!(core::mem::size_of::<MirrorSession>(), 52);
    }

    #[test]
    fn selection_prefers_cnps_and_naks_to_priorities() {
        let s = session(ErspanType::II);
        assert!(s.is_on());
        assert_eq!(s.selects(true, false, 0), Some(Mirrored::Cnp));
        assert_eq!(s.selects(false, true, 3), Some(Mirrored::Priority));
        assert_eq!(s.selects(false, true, 4), None, "NAKs are not selected");
        assert!(!MirrorSession::default().is_on());
    }

    #[test]
    fn prefixes_decapsulate_to_the_session_and_the_frame() {
        let eth = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00];
        let inner = [0xab; 46];
        for (kind, version_is_ii) in [(ErspanType::II, true), (ErspanType::III, false)] {
            let s = session(kind);
            let header = s.header(kind, 3, true, 9, 12_345_600);
            let mut frame = std::vec::Vec::new();
            if version_is_ii {
                frame.extend(prefix::<II_PREFIX_LEN>(&s.outer(), &header, 60, &eth).unwrap());
                assert!(prefix::<III_PREFIX_LEN>(&s.outer(), &header, 60, &eth).is_none());
            } else {
                frame.extend(prefix::<III_PREFIX_LEN>(&s.outer(), &header, 60, &eth).unwrap());
            }
            frame.extend_from_slice(&inner);
            let (repr, mirrored) = decapsulate(&frame).unwrap();
            assert_eq!((repr.session, repr.sequence, repr.cos), (5, 41, 3));
            assert_eq!(&mirrored[..14], &eth);
            assert_eq!(mirrored.len(), 60);
            match repr.header {
                Header::II { index, .. } => assert_eq!(index, 9),
                Header::III {
                    timestamp,
                    hw_id,
                    egress,
                    granularity,
                    ..
                } => assert_eq!(
                    (timestamp, hw_id, egress, granularity),
                    (123_456, 7, true, 1)
                ),
            }
        }
    }
}
