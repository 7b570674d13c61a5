//! The notification point in the kernel: which CE-marked packets earn a Congestion
//! Notification Packet (at most one per QP per interval), and the CNP itself, built from
//! the data packet's headers with its ICRC. The eBPF program and the host tests run this code.

/// `skb->mark` of the clone that the TC ingress program sends to egress to become a CNP.
pub const CNP_MARK: u32 = 0x4c4c_434e; // "LLCN"
/// BTH opcode of a CNP.
pub const OPCODE_CNP: u8 = 0x81;
/// Bytes of the data packet the CNP is built from: Ethernet, IPv4 without options, UDP, BTH.
pub const IPV4_DATA_PREFIX: usize = 14 + 20 + 8 + 12;
/// Length of an IPv4 CNP frame: Ethernet, IPv4, UDP, BTH, 16 reserved bytes, ICRC.
pub const IPV4_CNP_LEN: usize = 14 + 20 + 8 + 12 + 16 + 4;
/// BTH F/B byte with BECN set, as a CNP carries it.
const BTH_BECN: u8 = 0x40;
/// UDP destination port of RoCEv2.
const ROCEV2_PORT: u16 = 4791;

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

/// Notification-point counters of one interface (per CPU in the map).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(serde::Serialize))]
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

impl CnpCounters {
    /// Adds `other` into `self` (to sum the per-CPU copies).
    pub fn accumulate(&mut self, other: &CnpCounters) {
        self.cnp_sent += other.cnp_sent;
        self.cnp_suppressed += other.cnp_suppressed;
        self.cnp_received += other.cnp_received;
        self.cnp_unsupported += other.cnp_unsupported;
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` records of `u64`s without padding.
    unsafe impl aya::Pod for super::CnpQpState {}
    unsafe impl aya::Pod for super::CnpCounters {}
}

/// The CRC-32 (IEEE, reflected) table, computed at compile time; in eBPF it is read-only data.
pub static CRC32_TABLE: [u32; 256] = crc32_table();

const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// The byte of a CNP at `offset` (from the IP header) as the ICRC sees it: the fields a
/// router may change are masked to ones (IPv4 TOS, TTL, checksum; UDP checksum; BTH F/B).
#[inline(always)]
fn icrc_view(offset: usize, byte: u8) -> u8 {
    match offset {
        1 | 8 | 10 | 11 | 26 | 27 | 32 => 0xff,
        _ => byte,
    }
}

/// Builds the IPv4 CNP answering the data packet whose first [`IPV4_DATA_PREFIX`] bytes are
/// `data` (Ethernet, IPv4 with IHL 5, UDP, BTH): MACs and IPs swapped, UDP destination 4791
/// from the data packet's source port, BTH opcode 0x81 with BECN, `dest_qp`, the data
/// packet's P_Key, 16 reserved bytes, DSCP `dscp`, Not-ECT, and the ICRC.
#[inline(always)]
pub fn build_ipv4_cnp(data: &[u8; IPV4_DATA_PREFIX], dest_qp: u32, dscp: u8) -> [u8; IPV4_CNP_LEN] {
    let mut cnp = [0u8; IPV4_CNP_LEN];
    // Ethernet: swap the addresses.
    cnp[0..6].copy_from_slice(&data[6..12]);
    cnp[6..12].copy_from_slice(&data[0..6]);
    cnp[12] = 0x08;
    // IPv4: 20 bytes, DF, TTL 64, UDP, addresses swapped.
    let ip = 14;
    cnp[ip] = 0x45;
    cnp[ip + 1] = dscp << 2;
    let total_len = (IPV4_CNP_LEN - ip) as u16;
    cnp[ip + 2..ip + 4].copy_from_slice(&total_len.to_be_bytes());
    cnp[ip + 6] = 0x40;
    cnp[ip + 8] = 64;
    cnp[ip + 9] = 17;
    cnp[ip + 12..ip + 16].copy_from_slice(&data[ip + 16..ip + 20]);
    cnp[ip + 16..ip + 20].copy_from_slice(&data[ip + 12..ip + 16]);
    let checksum = ipv4_checksum(&cnp, ip);
    cnp[ip + 10..ip + 12].copy_from_slice(&checksum.to_be_bytes());
    // UDP: the data packet's source port keeps the flow's path; no checksum (IPv4).
    let udp = ip + 20;
    cnp[udp..udp + 2].copy_from_slice(&data[udp..udp + 2]);
    cnp[udp + 2..udp + 4].copy_from_slice(&ROCEV2_PORT.to_be_bytes());
    cnp[udp + 4..udp + 6].copy_from_slice(&((IPV4_CNP_LEN - udp) as u16).to_be_bytes());
    // BTH: CNP opcode, P_Key of the data packet, BECN, DestQP, PSN 0.
    let bth = udp + 8;
    cnp[bth] = OPCODE_CNP;
    cnp[bth + 2..bth + 4].copy_from_slice(&data[bth + 2..bth + 4]);
    cnp[bth + 4] = BTH_BECN;
    cnp[bth + 5..bth + 8].copy_from_slice(&dest_qp.to_be_bytes()[1..]);
    // 16 reserved bytes stay zero; the ICRC covers IP to the reserved bytes.
    let icrc_start = IPV4_CNP_LEN - 4;
    let mut crc = !0u32;
    for _ in 0..8 {
        crc = CRC32_TABLE[((crc ^ 0xff) & 0xff) as u8 as usize] ^ (crc >> 8);
    }
    for offset in 0..icrc_start - ip {
        let byte = icrc_view(offset, cnp[ip + offset]);
        crc = CRC32_TABLE[((crc ^ byte as u32) & 0xff) as u8 as usize] ^ (crc >> 8);
    }
    cnp[icrc_start..].copy_from_slice(&(!crc).to_le_bytes());
    cnp
}

/// The IPv4 header checksum of the 20 bytes at `ip` in `frame` (its checksum field zero).
#[inline(always)]
fn ipv4_checksum(frame: &[u8; IPV4_CNP_LEN], ip: usize) -> u16 {
    let mut sum = 0u32;
    for word in 0..10 {
        sum += u16::from_be_bytes([frame[ip + 2 * word], frame[ip + 2 * word + 1]]) as u32;
    }
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn crc_table_is_zlibs() {
        // CRC-32 of "123456789" is 0xcbf43926.
        let mut crc = !0u32;
        for b in b"123456789" {
            crc = CRC32_TABLE[((crc ^ *b as u32) & 0xff) as usize] ^ (crc >> 8);
        }
        assert_eq!(!crc, 0xcbf4_3926);
    }

    #[test]
    fn cnp_swaps_and_fills() {
        let mut data = [0u8; IPV4_DATA_PREFIX];
        data[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]); // dst
        data[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]); // src
        data[26..30].copy_from_slice(&[10, 0, 0, 1]); // src ip
        data[30..34].copy_from_slice(&[10, 0, 0, 2]); // dst ip
        data[34..36].copy_from_slice(&50000u16.to_be_bytes());
        data[44..46].copy_from_slice(&[0xff, 0xff]); // P_Key
        let cnp = build_ipv4_cnp(&data, 0x123456, 48);
        assert_eq!(&cnp[0..6], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&cnp[26..30], &[10, 0, 0, 2]);
        assert_eq!(&cnp[30..34], &[10, 0, 0, 1]);
        assert_eq!(cnp[15], 48 << 2);
        assert_eq!(u16::from_be_bytes([cnp[36], cnp[37]]), 4791);
        assert_eq!(cnp[42], OPCODE_CNP);
        assert_eq!(&cnp[47..50], &[0x12, 0x34, 0x56]);
        assert_eq!(ipv4_checksum_of(&cnp), 0);
    }

    fn ipv4_checksum_of(frame: &[u8; IPV4_CNP_LEN]) -> u16 {
        // Summing a header with its checksum in place gives zero after complement.
        ipv4_checksum(frame, 14)
    }
}
