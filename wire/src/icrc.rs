//! The RoCEv2 invariant CRC: a CRC-32 over 8 bytes of 0xff (the absent LRH),
//! then IP, UDP, BTH and payload with the fields that routers may change
//! masked to all ones — IPv4 TOS, TTL and header checksum; IPv6 traffic class,
//! flow label and hop limit; the UDP checksum; the BTH byte after the P_Key —
//! stored little-endian in the last 4 bytes of the packet. [`PsnDelta`] changes an ICRC with the
//! PSN without computing it again.

use super::crc::{Crc32, CRC32_TABLE};
use super::{bth, check_len, ipv4, ipv6, udp, Error, Result};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// What stands in the CRC for InfiniBand's local route header, which RoCEv2 does not carry.
const ABSENT_LRH: [u8; 8] = [0xff; 8];

/// The bits of byte `offset` of the IP + UDP + BTH prefix that the ICRC takes as ones, behind
/// an IPv4 (`ipv4`) or IPv6 header of `ip_len` bytes.
#[inline(always)]
fn masked_bits(ipv4: bool, ip_len: usize, offset: usize) -> u8 {
    let udp_checksum = ip_len + udp::CHECKSUM_RANGE.start;
    let variant = if offset == udp_checksum
        || offset == udp_checksum + 1
        || offset == ip_len + udp::HEADER_LEN + bth::FECN_BECN_OFFSET
    {
        true
    } else if ipv4 {
        offset == ipv4::TOS_OFFSET
            || offset == ipv4::TTL_OFFSET
            || ipv4::CHECKSUM_RANGE.contains(&offset)
    } else {
        // Traffic class and flow label (all of the first word but the version), hop limit.
        if offset == 0 {
            return 0x0f;
        }
        offset < 4 || offset == ipv6::HOP_LIMIT_OFFSET
    };
    if variant {
        0xff
    } else {
        0
    }
}

/// Computes the ICRC of an IPv4 or IPv6 RoCEv2 packet given from its IP header
/// up to, not including, the ICRC.
#[inline(always)]
pub fn compute(packet: &[u8]) -> Result<u32> {
    check_len(packet, 1)?;
    let (is_ipv4, ip_len) = match packet[0] >> 4 {
        4 => {
            let ip_len = usize::from(packet[0] & 0x0f) * 4;
            if ip_len < ipv4::HEADER_LEN {
                return Err(Error::Malformed("IPv4 header length below 20"));
            }
            (true, ip_len)
        }
        6 => (false, ipv6::HEADER_LEN),
        _ => return Err(Error::Malformed("not an IP packet")),
    };
    let prefix_len = ip_len + udp::HEADER_LEN + bth::HEADER_LEN;
    check_len(packet, prefix_len)?;
    let mut crc = Crc32::new();
    crc.update(&ABSENT_LRH);
    for (offset, &byte) in packet[..prefix_len].iter().enumerate() {
        crc.update_byte(byte | masked_bits(is_ipv4, ip_len, offset));
    }
    crc.update(&packet[prefix_len..]);
    Ok(crc.finish())
}

/// Computes the ICRC of `packet` (IP header to end, ICRC included) and stores it in the last 4 bytes.
#[inline(always)]
pub fn fill(packet: &mut [u8]) -> Result<()> {
    let body = packet.len().checked_sub(ICRC_LEN).ok_or(Error::Truncated)?;
    let crc = compute(&packet[..body])?;
    packet[body..].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Whether the last 4 bytes of `packet` (IP header to end) hold its correct ICRC.
pub fn verify(packet: &[u8]) -> Result<bool> {
    let body = packet.len().checked_sub(ICRC_LEN).ok_or(Error::Truncated)?;
    Ok(compute(&packet[..body])?.to_le_bytes() == packet[body..])
}

/// How a packet's ICRC changes with its BTH PSN. A CRC is linear over XOR: two packets of one
/// length that differ only in their PSNs have ICRCs that differ by a value that depends on the
/// two PSNs' XOR and on how many bytes follow the PSN, not on the other bytes. A table per PSN
/// byte makes that value three look-ups.
#[derive(Clone)]
pub struct PsnDelta {
    /// `table[k][v]`: the change a difference `v` in the PSN's byte `k` (most significant first)
    /// makes.
    table: [[u32; 256]; 3],
}

impl core::fmt::Debug for PsnDelta {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PsnDelta").finish_non_exhaustive()
    }
}

impl PsnDelta {
    /// The tables for packets with `after` bytes between the PSN's last byte and the ICRC.
    pub fn new(after: usize) -> PsnDelta {
        let mut table = [[0u32; 256]; 3];
        for (k, byte_table) in table.iter_mut().enumerate() {
            // The CRC register, started at zero, after a byte with one bit set and the zero bytes
            // behind it: what that bit adds to any CRC over a packet of this shape.
            let bits: [u32; 8] = core::array::from_fn(|bit| {
                let mut state = CRC32_TABLE[1 << bit];
                for _ in 0..after + (2 - k) {
                    state = CRC32_TABLE[(state & 0xff) as usize] ^ (state >> 8);
                }
                state
            });
            for value in 1..256usize {
                let low = value.trailing_zeros() as usize;
                byte_table[value] = byte_table[value & (value - 1)] ^ bits[low];
            }
        }
        PsnDelta { table }
    }

    /// What to XOR into the ICRC (as a number, before its little-endian store) when the PSN
    /// changes by `psn_xor` (old PSN XOR new).
    #[inline(always)]
    pub fn of(&self, psn_xor: u32) -> u32 {
        self.table[0][(psn_xor >> 16 & 0xff) as usize]
            ^ self.table[1][(psn_xor >> 8 & 0xff) as usize]
            ^ self.table[2][(psn_xor & 0xff) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;

    #[test]
    fn matches_scapy() {
        // scapy stores zlib's crc32 byte-reversed: `struct.pack("!I", icrc)[::-1]`.
        for vector in [vectors::ROCE_V4, vectors::ROCE_V6, vectors::CNP_V4] {
            let frame = vector.to_vec();
            assert!(verify(&frame[14..]).unwrap(), "{vector:02x?}");
            let mut copy = frame[14..].to_vec();
            let n = copy.len();
            copy[n - 4..].fill(0);
            fill(&mut copy).unwrap();
            assert_eq!(copy, frame[14..]);
        }
        let qinq = vectors::ROCE_QINQ.to_vec();
        assert!(verify(&qinq[22..]).unwrap());
        assert_eq!(
            compute(&vectors::ROCE_V4.to_vec()[14..70]).unwrap(),
            0x0d99508e
        );
    }

    #[test]
    fn masked_fields_do_not_count() {
        let frame = vectors::ROCE_V4.to_vec();
        let mut packet = frame[14..].to_vec();
        packet[1] = 0x6b; // ECN CE
        packet[8] = 1; // TTL
        packet[10..12].fill(0); // IP checksum
        packet[26..28].fill(0x55); // UDP checksum
        packet[32] = 0xc0; // FECN, BECN
        assert!(verify(&packet).unwrap());
        packet[40] ^= 1; // payload
        assert!(!verify(&packet).unwrap());

        let frame = vectors::ROCE_V6.to_vec();
        let mut packet = frame[14..].to_vec();
        packet[1] = 0; // traffic class and flow label
        packet[7] = 3; // hop limit
        assert!(verify(&packet).unwrap());
        packet[0] = 0x56;
        assert!(matches!(compute(&packet), Err(Error::Malformed(_))));
    }

    #[test]
    fn psn_delta_matches_a_new_icrc() {
        for vector in [vectors::ROCE_V4, vectors::ROCE_V6] {
            let mut packet = vector.to_vec()[14..].to_vec();
            let ip_len = if packet[0] >> 4 == 4 { 20 } else { 40 };
            let psn_at = ip_len + udp::HEADER_LEN + 9;
            let icrc_at = packet.len() - ICRC_LEN;
            let delta = PsnDelta::new(icrc_at - psn_at - 3);
            for psn in [0u32, 1, 0xff, 0x100, 0x10000, 0xabcdef, 0xffffff, 0x800000] {
                let old =
                    u32::from_be_bytes([0, packet[psn_at], packet[psn_at + 1], packet[psn_at + 2]]);
                let icrc = u32::from_le_bytes(packet[icrc_at..].try_into().unwrap());
                packet[psn_at..psn_at + 3].copy_from_slice(&psn.to_be_bytes()[1..]);
                let patched = icrc ^ delta.of(old ^ psn);
                assert_eq!(
                    patched,
                    compute(&packet[..icrc_at]).unwrap(),
                    "PSN {psn:#x}"
                );
                packet[icrc_at..].copy_from_slice(&patched.to_le_bytes());
            }
        }
    }

    #[test]
    fn truncated() {
        for (vector, ip_at) in [
            (vectors::ROCE_V4, 14),
            (vectors::ROCE_V6, 14),
            (vectors::ROCE_QINQ, 22),
        ] {
            let frame = vector.to_vec();
            let ip_len = if frame[ip_at] >> 4 == 4 { 20 } else { 40 };
            for len in 0..ip_len + 8 + 12 {
                assert_eq!(
                    compute(&frame[ip_at..ip_at + len]),
                    Err(Error::Truncated),
                    "length {len}"
                );
            }
        }
        assert_eq!(fill(&mut [0u8; 3]), Err(Error::Truncated));
        assert_eq!(verify(&[0x45, 0, 0, 0, 0]), Err(Error::Truncated));
    }
}
