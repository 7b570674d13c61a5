//! P4Runtime bytestrings (the P4Runtime specification, §8.4): big-endian unsigned values. A
//! reader accepts any length whose value fits the field's width (leading zero bytes allowed); a
//! writer sends the canonical form, without leading zero bytes, zero as one zero byte. P4Info's
//! own values (enum members, constant parameters) are padded to the field's whole bytes.

/// Why a bytestring is no value of a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// No bytes at all: P4Runtime has no empty bytestring.
    #[error("empty byte string")]
    Empty,
    /// More than 16 significant bytes, too many to read as a number.
    #[error("the value does not fit in {bitwidth} bits")]
    TooLong {
        /// The field's width.
        bitwidth: u32,
    },
    /// A value with bits above the field's width.
    #[error("the value {value:#x} does not fit in {bitwidth} bits")]
    TooWide {
        /// The value.
        value: u128,
        /// The field's width.
        bitwidth: u32,
    },
}

/// The number of bytes a field of `bitwidth` bits takes, as in P4Runtime.
pub fn byte_len(bitwidth: u32) -> usize {
    bitwidth.div_ceil(8) as usize
}

/// `bytes` without leading zero bytes; zero is one zero byte.
pub fn canonical(bytes: &[u8]) -> Vec<u8> {
    match bytes.iter().position(|&b| b != 0) {
        Some(first) => bytes[first..].to_vec(),
        None => vec![0],
    }
}

/// The number of bits from the most significant set bit down (0 for zero).
pub fn significant_bits(bytes: &[u8]) -> u32 {
    match bytes.iter().position(|&b| b != 0) {
        None => 0,
        Some(first) => (bytes.len() - first) as u32 * 8 - bytes[first].leading_zeros(),
    }
}

/// A bytestring as an unsigned integer, if it has at most 16 bytes after its leading zeros.
pub fn to_u128(bytes: &[u8]) -> Option<u128> {
    let canonical = canonical(bytes);
    if canonical.len() > 16 {
        return None;
    }
    Some(
        canonical
            .iter()
            .fold(0u128, |n, &b| (n << 8) | u128::from(b)),
    )
}

/// The value of `bytes` for a field of `bitwidth` bits, as a P4Runtime server reads it.
pub fn decode(bytes: &[u8], bitwidth: u32) -> Result<u128, DecodeError> {
    if bytes.is_empty() {
        return Err(DecodeError::Empty);
    }
    let value = to_u128(bytes).ok_or(DecodeError::TooLong { bitwidth })?;
    if significant_bits(&value.to_be_bytes()) > bitwidth {
        return Err(DecodeError::TooWide { value, bitwidth });
    }
    Ok(value)
}

/// `value` in canonical form.
pub fn encode(value: u128) -> Vec<u8> {
    canonical(&value.to_be_bytes())
}

/// `value` padded to the whole bytes of a `bitwidth`-bit field (at least one, at most 16), as
/// P4Info writes its values.
pub fn padded(value: u128, bitwidth: u32) -> Vec<u8> {
    let len = byte_len(bitwidth).clamp(1, 16);
    value.to_be_bytes()[16 - len..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form() {
        assert_eq!(canonical(&[0, 0, 1, 0]), [1, 0]);
        assert_eq!(canonical(&[0, 0]), [0]);
        assert_eq!(canonical(&[]), [0]);
        assert_eq!(canonical(&[0x80]), [0x80]);
        assert_eq!(encode(0), [0]);
        assert_eq!(encode(0x0102), [1, 2]);
    }

    #[test]
    fn decode_takes_padding_and_refuses_what_does_not_fit() {
        assert_eq!(decode(&[0, 0, 1, 2], 9), Ok(0x102));
        assert_eq!(decode(&[1, 0xff], 9), Ok(0x1ff));
        assert_eq!(
            decode(&[2, 0], 9),
            Err(DecodeError::TooWide {
                value: 0x200,
                bitwidth: 9
            })
        );
        assert_eq!(decode(&[], 8), Err(DecodeError::Empty));
        assert_eq!(
            decode(&[1; 17], 128),
            Err(DecodeError::TooLong { bitwidth: 128 })
        );
        assert_eq!(decode(&[0xff; 16], 128), Ok(u128::MAX));
    }

    #[test]
    fn padded_to_the_field() {
        assert_eq!(padded(1, 9), [0, 1]);
        assert_eq!(padded(0, 1), [0]);
        assert_eq!(padded(0, 0), [0]);
        assert_eq!(padded(5, 200), 5u128.to_be_bytes());
    }
}
