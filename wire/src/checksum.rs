//! The Internet checksum (RFC 1071): one's-complement sums for IPv4 headers and
//! UDP, including the IPv4 and IPv6 pseudo-headers.

use core::net::IpAddr;

/// Adds `data` as big-endian 16-bit words to a one's-complement sum (odd tail padded with zero),
/// folded to 16 bits so that any length, and a few such sums added together, fit a `u32`.
pub fn sum(data: &[u8]) -> u32 {
    let mut words = data.chunks_exact(2);
    let mut total: u64 = 0;
    for word in &mut words {
        total += u64::from(u16::from_be_bytes([word[0], word[1]]));
    }
    if let [last] = words.remainder() {
        total += u64::from(*last) << 8;
    }
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    total as u32
}

/// Folds a sum into 16 bits and complements it: the value to store in a checksum field.
pub fn finish(mut total: u32) -> u16 {
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    !(total as u16)
}

/// The sum of the pseudo-header for an upper-layer packet of `length` bytes and `protocol`.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, protocol: u8, length: u32) -> u32 {
    let addresses = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => sum(&s.octets()) + sum(&d.octets()),
        (s, d) => sum(&to_v6(s)) + sum(&to_v6(d)),
    };
    addresses + u32::from(protocol) + (length >> 16) + (length & 0xffff)
}

/// An address's 16 bytes as IPv6 (IPv4 mapped if needed).
fn to_v6(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 section 3: sum 0xddf2, checksum !0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(finish(sum(&data)), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn long_inputs_fold_without_overflow() {
        // 100,000 words of 0xffff: one's-complement zero, whose complement is 0.
        let ones = std::vec![0xffu8; 200_000];
        assert_eq!(sum(&ones), 0xffff);
        assert_eq!(finish(sum(&ones)), 0);
    }
}
