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

/// The sum of `data` lying `offset` bytes into the summed data (whose start is even): a byte at
/// an odd offset is the low byte of its word.
pub fn sum_at(offset: usize, data: &[u8]) -> u32 {
    data.iter()
        .enumerate()
        .map(|(i, &byte)| {
            if (offset + i).is_multiple_of(2) {
                u32::from(byte) << 8
            } else {
                u32::from(byte)
            }
        })
        .sum()
}

/// The checksum field after the summed bytes at `offset` changed from `old` to `new` (of equal
/// length), without summing the rest again: RFC 1624's equation 3, `HC' = ~(~HC + ~m + m')`.
pub fn update(checksum: u16, offset: usize, old: &[u8], new: &[u8]) -> u16 {
    let old = finish(sum_at(offset, old)); // ~m, folded
    finish(u32::from(!checksum) + u32::from(old) + sum_at(offset, new))
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
    fn update_matches_a_new_sum() {
        let mut data: [u8; 41] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        let mut checksum = finish(sum(&data));
        // Fields at even and odd offsets, of even and odd lengths.
        for (offset, new) in [
            (4, &[0xde, 0xad][..]),
            (7, &[1, 2, 3][..]),
            (40, &[0xff][..]),
            (0, &[0, 0, 0, 0][..]),
            (13, &[0x80][..]),
        ] {
            let old: std::vec::Vec<u8> = data[offset..offset + new.len()].into();
            data[offset..offset + new.len()].copy_from_slice(new);
            checksum = update(checksum, offset, &old, new);
            assert_eq!(checksum, finish(sum(&data)), "field at {offset}");
        }
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
