//! Bit-level reading and writing of packet bytes, most significant bit first, as P4 headers
//! are laid out on the wire.

/// Reads `width` (at most 128) bits starting `offset` bits into `data`; the caller checks bounds.
#[inline]
pub fn read_bits(data: &[u8], offset: usize, width: u16) -> u128 {
    let start = offset / 8;
    let shift = offset % 8;
    let width = usize::from(width);
    let nbytes = (shift + width).div_ceil(8);
    if shift + width <= 128 && start + 16 <= data.len() {
        // One 16-byte load covers the field.
        let word = u128::from_be_bytes(data[start..start + 16].try_into().expect("16 bytes"));
        let v = word >> (128 - shift - width);
        return if width == 128 {
            v
        } else {
            v & ((1u128 << width) - 1)
        };
    }
    if nbytes <= 16 {
        // The covering bytes fit one u128: load them, then drop the bits on either side.
        let v = data[start..start + nbytes]
            .iter()
            .fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
        let v = v >> (nbytes * 8 - shift - width);
        return if width == 128 {
            v
        } else {
            v & ((1u128 << width) - 1)
        };
    }
    // 17 bytes: the first byte's low bits, then 16 whole bytes shifted in.
    let head = u128::from(data[start]) & ((1u128 << (8 - shift)) - 1);
    let rest = data[start + 1..start + nbytes]
        .iter()
        .fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
    let tail_bits = (nbytes - 1) * 8 - (shift + width - 8);
    (head << (width - (8 - shift))) | (rest >> tail_bits)
}

/// A growing byte buffer written a field at a time.
#[derive(Debug, Default, Clone)]
pub struct BitWriter {
    bytes: Vec<u8>,
    bits: usize,
}

impl BitWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> Self {
        BitWriter {
            bytes: Vec::with_capacity(bytes),
            bits: 0,
        }
    }

    /// Appends the low `width` bits of `value`.
    pub fn write(&mut self, value: u128, width: u16) {
        let mut w = u32::from(width);
        let bit = (self.bits % 8) as u32;
        if bit == 0 && w % 8 == 0 {
            // The common case: whole bytes at a byte boundary.
            self.bytes
                .extend_from_slice(&value.to_be_bytes()[16 - (w / 8) as usize..]);
            self.bits += w as usize;
            return;
        }
        self.bits += w as usize;
        let mut v = if w >= 128 {
            value
        } else {
            value & ((1u128 << w) - 1)
        };
        if bit != 0 {
            // Fill the free low bits of the last, partial byte first.
            let room = 8 - bit;
            let last = self.bytes.last_mut().expect("a partial byte exists");
            if w <= room {
                *last |= (v << (room - w)) as u8;
                return;
            }
            *last |= (v >> (w - room)) as u8;
            w -= room;
            v &= (1u128 << w) - 1;
        }
        // Byte-aligned now: whole bytes, then the leftover bits at the top of a new byte.
        let whole = (w / 8) as usize;
        let rest = w % 8;
        let bytes = (v >> rest).to_be_bytes();
        self.bytes.extend_from_slice(&bytes[16 - whole..]);
        if rest != 0 {
            self.bytes
                .push(((v & ((1 << rest) - 1)) << (8 - rest)) as u8);
        }
    }

    /// Appends whole bytes.
    pub fn extend(&mut self, bytes: &[u8]) {
        if self.bits.is_multiple_of(8) {
            self.bytes.extend_from_slice(bytes);
            self.bits += bytes.len() * 8;
        } else {
            for &b in bytes {
                self.write(u128::from(b), 8);
            }
        }
    }

    /// The number of bits written.
    pub fn len_bits(&self) -> usize {
        self.bits
    }

    /// The bytes written (the last one zero-padded).
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read_round_trips_unaligned_fields() {
        let mut w = BitWriter::new();
        w.write(0x4, 4);
        w.write(0x5, 4);
        w.write(0x1ff, 9);
        w.write(0x7f, 7);
        let bytes = w.into_bytes();
        assert_eq!(bytes, vec![0x45, 0xff, 0xff]);
        assert_eq!(read_bits(&bytes, 0, 4), 4);
        assert_eq!(read_bits(&bytes, 8, 9), 0x1ff);
        assert_eq!(read_bits(&bytes, 17, 7), 0x7f);
    }

    #[test]
    fn random_fields_round_trip() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut fields = Vec::new();
        let mut w = BitWriter::new();
        for _ in 0..2000 {
            let width = (next() % 128 + 1) as u16;
            let value = ((u128::from(next()) << 64) | u128::from(next())) & crate::ir::mask(width);
            w.write(value, width);
            fields.push((value, width));
        }
        let total = w.len_bits();
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), total.div_ceil(8));
        let mut offset = 0;
        for (value, width) in fields {
            assert_eq!(
                read_bits(&bytes, offset, width),
                value,
                "at bit {offset}, width {width}"
            );
            offset += usize::from(width);
        }
    }

    #[test]
    fn reads_128_bit_fields_at_odd_offsets() {
        let data = [0xffu8; 20];
        assert_eq!(read_bits(&data, 3, 128), u128::MAX);
        let mut w = BitWriter::new();
        w.write(0b101, 3);
        w.write(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, 128);
        w.write(0b11111, 5);
        let bytes = w.into_bytes();
        assert_eq!(
            read_bits(&bytes, 3, 128),
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210
        );
        assert_eq!(read_bits(&bytes, 0, 3), 0b101);
        assert_eq!(read_bits(&bytes, 131, 5), 0b11111);
    }
}
