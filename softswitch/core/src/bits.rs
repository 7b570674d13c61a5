//! Bit-level reading and writing of packet bytes, most significant bit first, as P4 headers
//! are laid out on the wire.

/// Reads `width` (at most 128) bits starting `offset` bits into `data`; the caller checks bounds.
#[inline(always)]
pub fn read_bits(data: &[u8], offset: usize, width: u16) -> u128 {
    if width == 0 {
        return 0;
    }
    let start = offset / 8;
    let shift = offset % 8;
    let width = usize::from(width);
    let nbytes = (shift + width).div_ceil(8);
    if shift + width <= 64 && start + 8 <= data.len() {
        // One 8-byte load covers the field; 64-bit shifts are cheap.
        let word = u64::from_be_bytes(data[start..start + 8].try_into().expect("8 bytes"));
        return u128::from((word << shift) >> (64 - width));
    }
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

/// A growing byte buffer written a field at a time. Bits gather in a 64-bit accumulator and
/// move to the buffer 32 at a time, with 64-bit arithmetic only (128-bit shifts are slow).
#[derive(Debug, Default, Clone)]
pub struct BitWriter {
    bytes: Vec<u8>,
    /// Pending bits, right-aligned; fewer than 32 between calls.
    acc: u64,
    acc_bits: u32,
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
            acc: 0,
            acc_bits: 0,
        }
    }

    /// Appends the low `width` bits of `value`.
    #[inline]
    pub fn write(&mut self, value: u128, width: u16) {
        let w = u32::from(width);
        if w > 64 {
            self.write_u64((value >> 64) as u64, w - 64);
            self.write_u64(value as u64, 64);
        } else {
            self.write_u64(value as u64, w);
        }
    }

    /// Appends the low `w` (at most 64) bits of `v`.
    #[inline]
    fn write_u64(&mut self, v: u64, w: u32) {
        if w > 32 {
            self.write_u32(v >> 32, w - 32);
            self.write_u32(v & u64::from(u32::MAX), 32);
        } else {
            self.write_u32(v, w);
        }
    }

    /// Appends the low `w` (at most 32) bits of `v`.
    #[inline(always)]
    fn write_u32(&mut self, v: u64, w: u32) {
        let v = v & ((1u64 << w) - 1);
        self.acc = (self.acc << w) | v;
        self.acc_bits += w;
        if self.acc_bits >= 32 {
            self.acc_bits -= 32;
            self.bytes
                .extend_from_slice(&((self.acc >> self.acc_bits) as u32).to_be_bytes());
            self.acc &= (1u64 << self.acc_bits) - 1;
        }
    }

    /// Moves the accumulator's whole bytes to the buffer.
    fn flush_bytes(&mut self) {
        while self.acc_bits >= 8 {
            self.acc_bits -= 8;
            self.bytes.push((self.acc >> self.acc_bits) as u8);
        }
        self.acc &= (1u64 << self.acc_bits) - 1;
    }

    /// Appends whole bytes.
    pub fn extend(&mut self, bytes: &[u8]) {
        if self.acc_bits.is_multiple_of(8) {
            self.flush_bytes();
            self.bytes.extend_from_slice(bytes);
        } else {
            for &b in bytes {
                self.write_u32(u64::from(b), 8);
            }
        }
    }

    /// An empty writer that writes into `buffer` (cleared first), reusing its allocation.
    pub fn reusing(mut buffer: Vec<u8>) -> Self {
        buffer.clear();
        BitWriter {
            bytes: buffer,
            acc: 0,
            acc_bits: 0,
        }
    }

    /// The number of bits written.
    pub fn len_bits(&self) -> usize {
        self.bytes.len() * 8 + self.acc_bits as usize
    }

    /// The bytes written (the last one zero-padded).
    pub fn into_bytes(mut self) -> Vec<u8> {
        self.flush_bytes();
        if self.acc_bits > 0 {
            self.bytes.push((self.acc << (8 - self.acc_bits)) as u8);
        }
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
        let mut next = crate::test_support::xorshift64(0x1234_5678_9abc_def0);
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
