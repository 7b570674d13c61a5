//! The hash and checksum algorithms of v1model's `HashAlgorithm`, over the bit-level
//! concatenation of a field list (big-endian, zero-padded to a whole byte at the end), as BMv2
//! computes them. CRC-32 and the Internet checksum are wire's; CRC-16 uses its table maker.

use wire::crc::reflected_table;

/// `HashAlgorithm` members in v1model's declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// CRC-32 (zlib's: reflected, polynomial 0x04C11DB7, init and final xor 0xFFFFFFFF).
    Crc32,
    /// `crc32_custom` (computed as `crc32`: polynomials are not configurable yet).
    Crc32Custom,
    /// CRC-16 (ARC: reflected, polynomial 0x8005, init 0).
    Crc16,
    /// `crc16_custom` (computed as `crc16`).
    Crc16Custom,
    /// A random number.
    Random,
    /// The data itself (its low 64 bits).
    Identity,
    /// The Internet checksum: ones' complement of the ones' complement sum of 16-bit words.
    Csum16,
    /// XOR of 16-bit words.
    Xor16,
}

impl Algorithm {
    /// The algorithm with the enum code `code`.
    pub fn from_code(code: u128) -> Option<Self> {
        use Algorithm::*;
        Some(match code {
            0 => Crc32,
            1 => Crc32Custom,
            2 => Crc16,
            3 => Crc16Custom,
            4 => Random,
            5 => Identity,
            6 => Csum16,
            7 => Xor16,
            _ => return None,
        })
    }
}

/// The hash of `data` with `algo`; `random` draws from `rng`.
pub fn compute(algo: Algorithm, data: &[u8], rng: &mut impl FnMut() -> u64) -> u64 {
    match algo {
        Algorithm::Crc32 | Algorithm::Crc32Custom => u64::from(crc32(data)),
        Algorithm::Crc16 | Algorithm::Crc16Custom => u64::from(crc16(data)),
        Algorithm::Random => rng(),
        Algorithm::Identity => data.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
        Algorithm::Csum16 => u64::from(csum16(data)),
        Algorithm::Xor16 => u64::from(words(data).fold(0u16, |acc, w| acc ^ w)),
    }
}

fn words(data: &[u8]) -> impl Iterator<Item = u16> + '_ {
    data.chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
}

/// The Internet checksum of `data` (wire's, as every header checksum of the workspace).
pub fn csum16(data: &[u8]) -> u16 {
    wire::checksum::finish(wire::checksum::sum(data))
}

/// The CRC-16/ARC table, made by wire's table maker beside its CRC-32 table.
static CRC16_TABLE: [u32; 256] = reflected_table(0xA001);

/// CRC-32 as zlib computes it (wire's).
pub fn crc32(data: &[u8]) -> u32 {
    wire::crc::crc32(data)
}

/// CRC-16/ARC: reflected, polynomial 0x8005, initial value and final xor 0.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u32, |crc, &b| {
        (crc >> 8) ^ CRC16_TABLE[((crc ^ u32::from(b)) & 0xff) as usize]
    }) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values_of_the_catalogue() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc16(b"123456789"), 0xBB3D);
    }

    #[test]
    fn odd_lengths_pad_with_a_zero_byte_and_carries_fold() {
        assert_eq!(csum16(&[0x01]), 0xfeff);
        assert_eq!(csum16(&[0xff, 0xff, 0x00, 0x01]), 0xfffe);
    }

    #[test]
    fn ipv4_header_checksum() {
        // An IPv4 header with its checksum field zeroed; the known checksum is 0xb861.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(csum16(&h), 0xb861);
    }
}
