//! P4Runtime byte strings for the server: p4values' `bytestring` (any length whose value fits
//! the field's width in, canonical form out), its errors as gRPC statuses.

use p4values::bytestring;
use tonic::Status;

/// The value of byte string `bytes` for a `width`-bit field named `what` (p4values'
/// [`bytestring::decode`]); INVALID_ARGUMENT naming `what` if it is none.
pub fn decode(bytes: &[u8], width: u16, what: &str) -> Result<u128, Status> {
    bytestring::decode(bytes, u32::from(width))
        .map_err(|e| Status::invalid_argument(format!("{what}: {e}")))
}

pub use bytestring::encode;

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
