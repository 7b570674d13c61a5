//! P4Runtime byte strings: big-endian unsigned values. The server accepts any length whose
//! value fits the field's width (leading zero bytes allowed) and answers in canonical form
//! (no leading zero bytes; zero is one zero byte).

use tonic::Status;

use softswitch_core::ir::mask;

/// The value of byte string `bytes` for a `width`-bit field named `what`.
pub fn decode(bytes: &[u8], width: u16, what: &str) -> Result<u128, Status> {
    if bytes.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{what}: empty byte string"
        )));
    }
    let significant: &[u8] = {
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
        &bytes[first..]
    };
    if significant.len() > 16 {
        return Err(Status::invalid_argument(format!(
            "{what}: the value does not fit in {width} bits"
        )));
    }
    let value = significant
        .iter()
        .fold(0u128, |v, &b| (v << 8) | u128::from(b));
    if value & !mask(width) != 0 {
        return Err(Status::invalid_argument(format!(
            "{what}: the value {value:#x} does not fit in {width} bits"
        )));
    }
    Ok(value)
}

/// `value` as a canonical byte string.
pub fn encode(value: u128) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(15);
    bytes[first..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_out_padded_in() {
        assert_eq!(encode(0), [0]);
        assert_eq!(encode(0x0102), [1, 2]);
        assert_eq!(decode(&[0, 0, 1, 2], 9, "x").unwrap(), 0x102);
        assert_eq!(decode(&[1, 0xff], 9, "x").unwrap(), 0x1ff);
    }

    #[test]
    fn values_wider_than_the_field_are_refused() {
        let e = decode(&[2, 0], 9, "port").unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("port"));
        assert_eq!(
            decode(&[], 8, "x").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
}
