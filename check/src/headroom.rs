//! PFC headroom: the bytes that still arrive at a queue after it has crossed XOFF, until the
//! upstream stops (IEEE 802.1Qbb's delay model, Annex N): the cable's round trip at the link's
//! rate (what is on the wire towards the switch when the PAUSE leaves, and what the upstream
//! sends while the PAUSE travels), a frame at each end (the PAUSE waits behind the frame the
//! switch is sending; the upstream finishes the frame it is sending), and the upstream's
//! response time at the link's rate.

use std::fmt;

use topology::fabric::PROPAGATION_PS_PER_METRE;

use crate::fabric::Link;

/// The time a sender takes to stop once a PAUSE has arrived, by default: 1 µs, a NIC's or a
/// switch port's handling of a PAUSE (`lossless check --pause-response` sets it).
pub const DEFAULT_RESPONSE_NS: u64 = 1000;

/// Ethernet's bytes around an IP packet of the MTU: header (14) and FCS (4).
pub const FRAME_OVERHEAD: u32 = 18;

/// The headroom a link needs, in bytes, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// The link.
    pub rate_bps: u64,
    /// Its cable, mm.
    pub cable_mm: u64,
    /// Its largest frame, bytes.
    pub frame: u32,
    /// The sender's response time, ns.
    pub response_ns: u64,
    /// The cable's round trip at the rate, bytes.
    pub cable_bytes: u64,
    /// The response time at the rate, bytes.
    pub response_bytes: u64,
}

impl Need {
    /// What `link` needs with a response time of `response_ns`.
    pub fn of(link: &Link, response_ns: u64) -> Need {
        let rate = u128::from(link.rate_bps);
        let round_trip_ps =
            2 * u128::from(link.cable_mm) * u128::from(PROPAGATION_PS_PER_METRE) / 1000;
        let bytes = |ps: u128| {
            u64::try_from((ps * rate).div_ceil(8 * 1_000_000_000_000)).unwrap_or(u64::MAX)
        };
        Need {
            rate_bps: link.rate_bps,
            cable_mm: link.cable_mm,
            frame: link.mtu + FRAME_OVERHEAD,
            response_ns,
            cable_bytes: bytes(round_trip_ps),
            response_bytes: bytes(u128::from(response_ns) * 1000),
        }
    }

    /// The total, bytes.
    pub fn bytes(&self) -> u64 {
        self.cable_bytes + 2 * u64::from(self.frame) + self.response_bytes
    }

    /// The total in frames of the largest size (lossless.p4 counts its thresholds in packets).
    pub fn packets(&self) -> u64 {
        self.bytes().div_ceil(u64::from(self.frame))
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let round_trip_ns = 2 * self.cable_mm * PROPAGATION_PS_PER_METRE / 1000 / 1000;
        write!(
            f,
            "round trip of {} m of cable {round_trip_ns} ns × {} = {} B, + 2 frames × {} B = {} B, \
             + response {} ns × {} = {} B: {} B = {} packets of {} B",
            self.cable_mm as f64 / 1000.0,
            rate(self.rate_bps),
            self.cable_bytes,
            self.frame,
            2 * u64::from(self.frame),
            self.response_ns,
            rate(self.rate_bps),
            self.response_bytes,
            self.bytes(),
            self.packets(),
            self.frame
        )
    }
}

/// A rate as people write it (`100 Gb/s`).
pub fn rate(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 && b % 1_000_000_000 == 0 => format!("{} Gb/s", b / 1_000_000_000),
        b if b >= 1_000_000 && b % 1_000_000 == 0 => format!("{} Mb/s", b / 1_000_000),
        b => format!("{b} b/s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::End;

    #[test]
    fn a_100g_link_of_20_m_with_jumbo_frames() {
        let link = Link {
            a: End::Host(0),
            b: End::Switch(0, 1),
            rate_bps: 100_000_000_000,
            cable_mm: 20_000,
            mtu: 9000,
        };
        let need = Need::of(&link, 1000);
        // 200 ns of round trip at 12.5 B/ns, 1 µs of response.
        assert_eq!(need.cable_bytes, 2500);
        assert_eq!(need.response_bytes, 12_500);
        assert_eq!(need.bytes(), 2500 + 2 * 9018 + 12_500);
        assert_eq!(need.packets(), 4);
        let text = need.to_string();
        assert!(
            text.contains("round trip of 20 m of cable 200 ns × 100 Gb/s = 2500 B"),
            "{text}"
        );
    }
}
