//! CRC-32 as IEEE 802.3 and zlib compute it (reflected, polynomial 0x04C11DB7, initial value
//! and final xor all ones): the one table, built at compile time, and a running CRC over it.
//! The eBPF programs run [`Crc32`] from this table (read-only data there); with the `std`
//! feature, [`Crc32::update`] hands whole slices to crc32fast, which gives the same CRC faster
//! (checked by the tests below).

/// The byte-at-a-time table of a reflected CRC whose reflected polynomial is `poly`: 0xEDB88320
/// for CRC-32, 0xA001 for CRC-16/ARC.
pub const fn reflected_table(poly: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// The CRC-32 table.
pub static CRC32_TABLE: [u32; 256] = reflected_table(0xEDB8_8320);

/// A CRC-32 being computed: [`Crc32::new`], any number of updates, [`Crc32::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32 {
    /// The register before the final xor.
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Crc32::new()
    }
}

impl Crc32 {
    /// A CRC over no bytes yet.
    #[inline(always)]
    pub const fn new() -> Crc32 {
        Crc32 { state: !0 }
    }

    /// Adds one byte.
    #[inline(always)]
    pub fn update_byte(&mut self, byte: u8) {
        self.state =
            CRC32_TABLE[((self.state ^ u32::from(byte)) & 0xff) as usize] ^ (self.state >> 8);
    }

    /// Adds `data`.
    #[inline(always)]
    pub fn update(&mut self, data: &[u8]) {
        #[cfg(feature = "std")]
        {
            let mut fast = crc32fast::Hasher::new_with_initial(!self.state);
            fast.update(data);
            self.state = !fast.finalize();
        }
        #[cfg(not(feature = "std"))]
        for &byte in data {
            self.update_byte(byte);
        }
    }

    /// The CRC of everything added.
    #[inline(always)]
    pub fn finish(self) -> u32 {
        !self.state
    }
}

/// The CRC-32 of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = Crc32::new();
    crc.update(data);
    crc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC of `data` byte by byte from the table, whatever the features.
    fn from_table(data: &[u8]) -> u32 {
        let mut crc = Crc32::new();
        for &byte in data {
            crc.update_byte(byte);
        }
        crc.finish()
    }

    #[test]
    fn check_value() {
        // The catalogue's check value of CRC-32: the CRC of "123456789" is 0xcbf43926.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(from_table(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn slices_and_bytes_agree_at_every_length_and_split() {
        let data: std::vec::Vec<u8> = (0..600u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for len in [0, 1, 3, 15, 16, 63, 64, 65, 255, 600] {
            let whole = crc32(&data[..len]);
            assert_eq!(whole, from_table(&data[..len]), "length {len}");
            for split in [0, len.min(1), len / 2, len] {
                let mut crc = Crc32::new();
                crc.update(&data[..split]);
                crc.update(&data[split..len]);
                assert_eq!(crc.finish(), whole, "length {len} split at {split}");
            }
        }
    }

    #[test]
    fn the_table_is_zlibs() {
        // zlib's table (crc32.c) starts 0x00000000, 0x77073096, 0xee0e612c and ends 0x2d02ef8d.
        assert_eq!(CRC32_TABLE[..3], [0, 0x7707_3096, 0xee0e_612c]);
        assert_eq!(CRC32_TABLE[255], 0x2d02_ef8d);
    }
}
