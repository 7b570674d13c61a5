//! Bit-level reading and writing of packet bytes, most significant bit first, as P4 headers
//! are laid out on the wire.

/// Reads `width` (at most 128) bits starting `offset` bits into `data`; the caller checks bounds.
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
    (head << (128 - (8 - shift))) | (rest >> tail_bits)
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
        if self.bits.is_multiple_of(8) && width.is_multiple_of(8) {
            let n = usize::from(width / 8);
            self.bytes.extend_from_slice(&value.to_be_bytes()[16 - n..]);
            self.bits += usize::from(width);
            return;
        }
        let mut remaining = usize::from(width);
        while remaining > 0 {
            let bit = self.bits % 8;
            if bit == 0 {
                self.bytes.push(0);
            }
            let room = 8 - bit;
            let take = room.min(remaining);
            let chunk = ((value >> (remaining - take)) & ((1u128 << take) - 1)) as u8;
            let last = self.bytes.last_mut().expect("a byte was pushed");
            *last |= chunk << (room - take);
            self.bits += take;
            remaining -= take;
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
