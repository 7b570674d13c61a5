//! The frames hosts of the fabric send and read: RoCEv2 (Ethernet, IPv4, UDP 4791, BTH,
//! payload, ICRC) data packets and CNPs, and 802.1Qbb PFC frames. Byte offsets, no options:
//! enough for the fabric's own endpoints, which only talk to each other through the switches.

use softswitch_core::hash::{crc32, csum16};

/// RoCEv2's UDP destination port.
pub const ROCEV2_PORT: u16 = 4791;
/// BTH opcode of a CNP.
pub const OPCODE_CNP: u8 = 0x81;
/// BTH opcode of an RC SEND-only packet, what hosts send as data.
pub const OPCODE_SEND_ONLY: u8 = 0x04;
/// Length of a CNP frame without FCS.
pub const CNP_BYTES: usize = 74;
const HEADERS: usize = 14 + 20 + 8 + 12;
const ICRC: usize = 4;

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
    /// ECN (2 = ECT(0), 3 = CE).
    pub ecn: u8,
    /// UDP source port (the flow's entropy).
    pub sport: u16,
    /// BTH opcode.
    pub opcode: u8,
    /// BTH destination QP.
    pub qp: u32,
    /// BTH packet sequence number.
    pub psn: u32,
}

impl Roce {
    /// The frame, `len` bytes long (at least the headers and ICRC; a CNP is always 74: BTH
    /// with BECN, 16 reserved bytes, ICRC).
    pub fn emit(&self, len: usize) -> Vec<u8> {
        let len = if self.opcode == OPCODE_CNP {
            CNP_BYTES
        } else {
            len.max(HEADERS + ICRC)
        };
        let mut f = vec![0u8; len];
        f[0..6].copy_from_slice(&self.dst_mac);
        f[6..12].copy_from_slice(&self.src_mac);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[1] = (self.dscp << 2) | (self.ecn & 3);
        ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&self.src_ip.to_be_bytes());
        ip[16..20].copy_from_slice(&self.dst_ip.to_be_bytes());
        let sum = csum16(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let udp = &mut f[34..42];
        udp[0..2].copy_from_slice(&self.sport.to_be_bytes());
        udp[2..4].copy_from_slice(&ROCEV2_PORT.to_be_bytes());
        udp[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
        let bth = &mut f[42..54];
        bth[0] = self.opcode;
        bth[2..4].copy_from_slice(&0xffffu16.to_be_bytes());
        if self.opcode == OPCODE_CNP {
            bth[4] = 0x40; // BECN
        }
        bth[5..8].copy_from_slice(&self.qp.to_be_bytes()[1..]);
        bth[9..12].copy_from_slice(&self.psn.to_be_bytes()[1..]);
        let icrc = icrc(&f[..len - ICRC]);
        f[len - ICRC..].copy_from_slice(&icrc.to_le_bytes());
        f
    }

    /// Reads a RoCEv2-over-IPv4 frame; `None` for anything else.
    pub fn parse(f: &[u8]) -> Option<Roce> {
        if f.len() < HEADERS + ICRC
            || f[12..14] != [0x08, 0x00]
            || f[14] != 0x45
            || f[23] != 17
            || f[36..38] != ROCEV2_PORT.to_be_bytes()
        {
            return None;
        }
        let be32 = |b: &[u8]| u32::from_be_bytes([0, b[0], b[1], b[2]]);
        Some(Roce {
            dst_mac: f[0..6].try_into().ok()?,
            src_mac: f[6..12].try_into().ok()?,
            src_ip: u32::from_be_bytes(f[26..30].try_into().ok()?),
            dst_ip: u32::from_be_bytes(f[30..34].try_into().ok()?),
            dscp: f[15] >> 2,
            ecn: f[15] & 3,
            sport: u16::from_be_bytes([f[34], f[35]]),
            opcode: f[42],
            qp: be32(&f[47..50]),
            psn: be32(&f[51..54]),
        })
    }
}

/// The RoCEv2 ICRC of a frame without its ICRC: CRC-32 over 8 bytes of ones and the frame from
/// IPv4 on, with TOS, TTL, IPv4 checksum, UDP checksum and the BTH byte after P_Key all ones.
pub fn icrc(frame: &[u8]) -> u32 {
    let mut masked = vec![0xff; 8];
    masked.extend_from_slice(&frame[14..]);
    for i in [8 + 1, 8 + 8, 8 + 10, 8 + 11, 8 + 26, 8 + 27, 8 + 32] {
        masked[i] = 0xff;
    }
    crc32(&masked)
}

/// Pause times of a PFC frame per priority (`None`: the class is not enabled).
pub fn parse_pfc(f: &[u8]) -> Option<[Option<u16>; 8]> {
    if f.len() < 34 || f[12..14] != [0x88, 0x08] || f[14..16] != [0x01, 0x01] {
        return None;
    }
    let enabled = u16::from_be_bytes([f[16], f[17]]);
    Some(std::array::from_fn(|p| {
        (enabled >> p & 1 == 1).then(|| u16::from_be_bytes([f[18 + 2 * p], f[19 + 2 * p]]))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(opcode: u8) -> Roce {
        Roce {
            src_mac: [8, 0, 0, 0, 1, 1],
            dst_mac: [0, 0xaa, 0, 0, 0, 1],
            src_ip: 0x0a00_0101,
            dst_ip: 0x0a00_0202,
            dscp: 26,
            ecn: 2,
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
        assert_eq!(Roce::parse(&f), Some(sample(OPCODE_SEND_ONLY)));
        assert_eq!(csum16(&f[14..34]), 0, "a valid IPv4 checksum sums to zero");
    }

    #[test]
    fn the_icrc_ignores_the_variant_fields() {
        let f = sample(OPCODE_SEND_ONLY).emit(100);
        let mut marked = f.clone();
        marked[15] |= 3;
        marked[22] -= 1;
        assert_eq!(icrc(&f[..96]), icrc(&marked[..96]));
        marked[60] ^= 1;
        assert_ne!(icrc(&f[..96]), icrc(&marked[..96]));
    }

    #[test]
    fn pfc_times_per_enabled_class() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x88, 0x08]);
        f[14..16].copy_from_slice(&[0x01, 0x01]);
        f[17] = 0b1000;
        f[24..26].copy_from_slice(&500u16.to_be_bytes());
        let times = parse_pfc(&f).unwrap();
        assert_eq!(times[3], Some(500));
        assert_eq!(times[2], None);
    }
}
