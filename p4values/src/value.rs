//! Values of match fields, action parameters and registers: from the runtime JSON's forms to
//! P4Runtime bytestrings, and back to the same forms for display.
//!
//! The accepted forms are those of the P4 tutorials' `p4runtime_lib` (`convert.encode`): an
//! integer (negative ones in two's complement), `true`/`false` (1/0, as Python's `bool` is an
//! `int`), a MAC address `aa:bb:cc:dd:ee:ff`, a dotted IPv4 address, an IPv6 address, a
//! one-element list of any of these, or any other string taken as its raw bytes. An address or a
//! raw string must be exactly as long as the field's bytes, as there. One addition: a string of
//! decimal digits, or `0x` and hex digits, is that number (as BMv2's CLI and the command line
//! read it, and as [`display`] writes values wider than 64 bits), where `convert.encode` would
//! take its characters as raw bytes. Values go on the wire in
//! the P4Runtime specification's canonical form (§8.4, "Bytestrings"): big-endian, without
//! leading zero bytes, zero as one zero byte.
//!
//! The text forms of addresses are read here and nowhere else in the workspace: MAC addresses
//! by `wire`'s [`Address`], dotted IPv4 addresses by [`parse_ipv4`].

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::Value;
use wire::ethernet::Address;

use crate::bytestring::{byte_len, canonical, significant_bits, to_u128};

/// Why a value cannot be encoded for a field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValueError {
    /// The value does not fit the field's width.
    #[error("{value} does not fit in {bitwidth} bits")]
    TooWide {
        /// The value as written.
        value: String,
        /// The field's width.
        bitwidth: u32,
    },
    /// An address or raw string of the wrong length for the field.
    #[error("{value} is {len} bytes, the field is {bitwidth} bits ({bytes} bytes)")]
    WrongLength {
        /// The value as written.
        value: String,
        /// Its encoded length.
        len: usize,
        /// The field's width.
        bitwidth: u32,
        /// The field's width in bytes.
        bytes: usize,
    },
    /// A JSON value of a type that is no value (an object, `null`, a longer list), or text on
    /// the command line that is neither an integer nor an address.
    #[error("{0} is not a value (an integer, or a MAC, IPv4 or IPv6 address)")]
    NotAValue(String),
    /// An integer too large for JSON numbers as read here.
    #[error("{0} is not an integer of at most 64 bits (write wider values as addresses)")]
    NotAnInteger(String),
}

/// The largest value of a field of `bitwidth` bits, in canonical form.
pub fn all_ones(bitwidth: u32) -> Vec<u8> {
    let mut bytes = vec![0xff; byte_len(bitwidth)];
    if !bitwidth.is_multiple_of(8) {
        bytes[0] = (1u8 << (bitwidth % 8)) - 1;
    }
    bytes
}

/// Encodes one runtime-JSON value for a field of `bitwidth` bits, in canonical form.
pub fn encode(value: &Value, bitwidth: u32) -> Result<Vec<u8>, ValueError> {
    let shown = || value.to_string();
    let bytes = match value {
        Value::Array(items) if items.len() == 1 => return encode(&items[0], bitwidth),
        Value::Bool(b) => vec![u8::from(*b)],
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(n), _) => u128::from(n).to_be_bytes().to_vec(),
            (None, Some(n)) => twos_complement(n.into(), bitwidth, shown)?,
            _ => return Err(ValueError::NotAnInteger(shown())),
        },
        Value::String(text) => match unsigned_text(text) {
            Some(n) => n.to_be_bytes().to_vec(),
            None => exact_length(
                string_bytes(text).unwrap_or_else(|| text.as_bytes().to_vec()),
                bitwidth,
                shown,
            )?,
        },
        _ => return Err(ValueError::NotAValue(shown())),
    };
    fit(&bytes, bitwidth, shown)
}

/// Encodes a value typed on the command line for a field of `bitwidth` bits: a decimal integer
/// (negative in two's complement), a `0x` hex integer, or a MAC, IPv4 or IPv6 address. Unlike
/// runtime JSON, a string that is none of these is refused, not taken as raw bytes.
pub fn encode_text(text: &str, bitwidth: u32) -> Result<Vec<u8>, ValueError> {
    let shown = || text.to_owned();
    let bytes = if let Some(n) = unsigned_text(text) {
        n.to_be_bytes().to_vec()
    } else if let Ok(n) = text.parse::<i128>() {
        twos_complement(n, bitwidth, shown)?
    } else if let Some(bytes) = string_bytes(text) {
        exact_length(bytes, bitwidth, shown)?
    } else {
        return Err(ValueError::NotAValue(shown()));
    };
    fit(&bytes, bitwidth, shown)
}

/// An unsigned integer written as decimal digits, or `0x` (`0X`) and hex digits, of at most
/// 128 bits; `None` for any other text.
fn unsigned_text(text: &str) -> Option<u128> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u128::from_str_radix(digits, radix).ok()
}

/// A negative integer in `bitwidth` bits, two's complement, as the tutorials encode it.
fn twos_complement(
    n: i128,
    bitwidth: u32,
    shown: impl Fn() -> String,
) -> Result<Vec<u8>, ValueError> {
    let (min, mask) = match bitwidth {
        0 => (0, 0),
        1..=127 => (-(1i128 << (bitwidth - 1)), (1u128 << bitwidth) - 1),
        _ => (i128::MIN, u128::MAX),
    };
    if n < min {
        return Err(ValueError::TooWide {
            value: shown(),
            bitwidth,
        });
    }
    Ok(((n as u128) & mask).to_be_bytes().to_vec())
}

/// `bytes` if they are exactly as long as a field of `bitwidth` bits.
fn exact_length(
    bytes: Vec<u8>,
    bitwidth: u32,
    shown: impl Fn() -> String,
) -> Result<Vec<u8>, ValueError> {
    if bytes.len() != byte_len(bitwidth) {
        return Err(ValueError::WrongLength {
            value: shown(),
            len: bytes.len(),
            bitwidth,
            bytes: byte_len(bitwidth),
        });
    }
    Ok(bytes)
}

/// The canonical form of `bytes`, if their value fits in `bitwidth` bits.
fn fit(bytes: &[u8], bitwidth: u32, shown: impl Fn() -> String) -> Result<Vec<u8>, ValueError> {
    let canonical = canonical(bytes);
    if significant_bits(&canonical) > bitwidth {
        return Err(ValueError::TooWide {
            value: shown(),
            bitwidth,
        });
    }
    Ok(canonical)
}

/// The bytes of an address: a MAC, IPv4 or IPv6 address in network order.
fn string_bytes(text: &str) -> Option<Vec<u8>> {
    if let Ok(mac) = text.parse::<Address>() {
        Some(mac.0.to_vec())
    } else if let Some(ip) = parse_ipv4(text) {
        Some(ip.octets().to_vec())
    } else {
        text.parse::<Ipv6Addr>().ok().map(|ip| ip.octets().to_vec())
    }
}

/// Four dotted decimal octets. The tutorials' pattern (`\d{1,3}` four times) also admits octets
/// above 255, which `inet_aton` then refuses: here they are no address and fall through to the
/// raw-string form, whose length check refuses them for a 32-bit field.
pub fn parse_ipv4(text: &str) -> Option<Ipv4Addr> {
    let shaped = text.split('.').count() == 4
        && text
            .split('.')
            .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    if !shaped {
        return None;
    }
    let octets: Vec<u8> = text.split('.').filter_map(|p| p.parse().ok()).collect();
    <[u8; 4]>::try_from(octets).ok().map(Ipv4Addr::from)
}

/// How a value read back from a switch is shown, chosen from the field's width and name: a
/// 48-bit field as a MAC address; a 32-bit or 128-bit field whose name says it is an address
/// (its last dotted component, in any case, contains `addr` or has an `_`-separated word `ip`,
/// `ipv4`, `ipv6`, `srcip` or `dstip`) as an IPv4 or IPv6 address; anything
/// else as an integer. Each form is one `encode` takes back, so listed entries can be applied
/// again.
pub fn display(bytes: &[u8], bitwidth: u32, name: &str) -> Value {
    let Some(n) = to_u128(bytes) else {
        return Value::String(format!("0x{}", hex(bytes)));
    };
    let last = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    let address_name = last.contains("addr")
        || last
            .split('_')
            .any(|w| ["ip", "ipv4", "ipv6", "srcip", "dstip"].contains(&w));
    match bitwidth {
        48 if n < 1 << 48 => {
            let mut mac = [0; 6];
            mac.copy_from_slice(&n.to_be_bytes()[10..]);
            Value::String(Address(mac).to_string())
        }
        32 if address_name && n <= u128::from(u32::MAX) => {
            Value::String(Ipv4Addr::from(n as u32).to_string())
        }
        128 if address_name => Value::String(Ipv6Addr::from(n).to_string()),
        _ => match u64::try_from(n) {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(format!("0x{n:x}")),
        },
    }
}

/// Lower-case hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc(value: Value, bitwidth: u32) -> Result<Vec<u8>, ValueError> {
        encode(&value, bitwidth)
    }

    #[test]
    fn integers_are_canonical() {
        assert_eq!(enc(json!(0), 9).unwrap(), [0]);
        assert_eq!(enc(json!(1), 9).unwrap(), [1]);
        assert_eq!(enc(json!(511), 9).unwrap(), [1, 0xff]);
        assert_eq!(enc(json!(1337), 40).unwrap(), [0x05, 0x39]);
        assert_eq!(enc(json!(u64::MAX), 64).unwrap(), [0xff; 8]);
        assert_eq!(enc(json!(1), 1).unwrap(), [1]);
    }

    #[test]
    fn all_ones_is_the_canonical_maximum() {
        assert_eq!(all_ones(9), enc(json!(511), 9).unwrap());
        assert_eq!(all_ones(16), [0xff, 0xff]);
        assert_eq!(all_ones(1), [1]);
    }

    #[test]
    fn integers_wider_than_the_field_are_refused() {
        assert_eq!(
            enc(json!(512), 9),
            Err(ValueError::TooWide {
                value: "512".into(),
                bitwidth: 9
            })
        );
        assert!(enc(json!(256), 8).is_err());
        assert!(enc(json!(2), 1).is_err());
    }

    #[test]
    fn negative_integers_are_twos_complement() {
        assert_eq!(enc(json!(-1), 8).unwrap(), [0xff]);
        assert_eq!(enc(json!(-1), 9).unwrap(), [0x01, 0xff]);
        assert_eq!(enc(json!(-128), 8).unwrap(), [0x80]);
        assert_eq!(enc(json!(-2), 16).unwrap(), [0xff, 0xfe]);
        assert_eq!(enc(json!(-1), 128).unwrap(), [0xff; 16]);
        assert!(enc(json!(-129), 8).is_err());
        assert!(enc(json!(-2), 1).is_err());
        assert_eq!(enc(json!(-1), 1).unwrap(), [1]);
    }

    #[test]
    fn booleans_are_integers_as_in_python() {
        assert_eq!(enc(json!(true), 1).unwrap(), [1]);
        assert_eq!(enc(json!(false), 8).unwrap(), [0]);
    }

    #[test]
    fn addresses() {
        assert_eq!(
            enc(json!("08:00:00:00:01:11"), 48).unwrap(),
            [8, 0, 0, 0, 1, 0x11]
        );
        assert_eq!(
            enc(json!("AA:bb:CC:dd:EE:ff"), 48).unwrap(),
            [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]
        );
        // Canonical: the leading zero bytes of an address go too.
        assert_eq!(enc(json!("00:00:00:00:00:05"), 48).unwrap(), [5]);
        assert_eq!(enc(json!("10.0.1.1"), 32).unwrap(), [10, 0, 1, 1]);
        assert_eq!(enc(json!("0.0.0.0"), 32).unwrap(), [0]);
        assert_eq!(
            enc(json!("2001:db8::1"), 128).unwrap(),
            [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(enc(json!("::1"), 128).unwrap(), [1]);
    }

    #[test]
    fn an_address_must_match_the_field_length() {
        assert_eq!(
            enc(json!("10.0.1.1"), 48),
            Err(ValueError::WrongLength {
                value: "\"10.0.1.1\"".into(),
                len: 4,
                bitwidth: 48,
                bytes: 6
            })
        );
        assert!(enc(json!("08:00:00:00:01:11"), 32).is_err());
        // A 9-bit field is two bytes wide, and a MAC is six.
        assert!(enc(json!("08:00:00:00:01:11"), 9).is_err());
    }

    #[test]
    fn an_address_like_string_that_is_no_address_is_raw_bytes() {
        // 256 is no octet: it is the raw 9-byte string, too long for 32 bits.
        assert!(matches!(
            enc(json!("10.0.0.256"), 32),
            Err(ValueError::WrongLength { len: 10, .. })
        ));
        assert!(matches!(
            enc(json!("1.2.3.4.5"), 32),
            Err(ValueError::WrongLength { len: 9, .. })
        ));
    }

    #[test]
    fn other_strings_are_raw_bytes_of_the_field_length() {
        assert_eq!(enc(json!("AB"), 16).unwrap(), [b'A', b'B']);
        assert!(enc(json!("ABC"), 16).is_err());
        // Raw bytes still have to fit an odd width.
        assert!(matches!(
            enc(json!("AB"), 9),
            Err(ValueError::TooWide { .. })
        ));
    }

    #[test]
    fn strings_of_digits_are_numbers() {
        assert_eq!(enc(json!("42"), 16).unwrap(), [42]);
        assert_eq!(enc(json!("0x1f"), 8).unwrap(), [0x1f]);
        assert_eq!(enc(json!("0X1F"), 8).unwrap(), [0x1f]);
        assert!(matches!(
            enc(json!("0x1ff"), 8),
            Err(ValueError::TooWide { .. })
        ));
        // What display writes for a value wider than 64 bits, encode takes back.
        let wide = display(&[0xff; 16], 128, "big");
        assert_eq!(enc(wide, 128).unwrap(), [0xff; 16]);
        // Not digits: raw bytes, as before.
        assert_eq!(enc(json!("0xzz"), 32).unwrap(), b"0xzz");
    }

    #[test]
    fn a_one_element_list_is_its_element() {
        assert_eq!(enc(json!([5]), 16).unwrap(), [5]);
        assert_eq!(enc(json!(["10.0.0.1"]), 32).unwrap(), [10, 0, 0, 1]);
    }

    #[test]
    fn non_values_are_refused() {
        for value in [json!(null), json!({}), json!([1, 2]), json!([]), json!(1.5)] {
            assert!(enc(value.clone(), 32).is_err(), "{value}");
        }
        assert!(matches!(
            enc(json!(1.5), 32),
            Err(ValueError::NotAnInteger(_))
        ));
    }

    #[test]
    fn command_line_values() {
        assert_eq!(encode_text("1500", 16).unwrap(), [0x05, 0xdc]);
        assert_eq!(encode_text("0x10", 16).unwrap(), [0x10]);
        assert_eq!(encode_text("0XfF", 8).unwrap(), [0xff]);
        assert_eq!(encode_text("-1", 16).unwrap(), [0xff, 0xff]);
        assert_eq!(encode_text("10.0.0.1", 32).unwrap(), [10, 0, 0, 1]);
        assert_eq!(
            encode_text("08:00:00:00:01:11", 48).unwrap(),
            [8, 0, 0, 0, 1, 0x11]
        );
        assert_eq!(
            encode_text("340282366920938463463374607431768211455", 128).unwrap(),
            [0xff; 16]
        );
        assert!(matches!(
            encode_text("70000", 16),
            Err(ValueError::TooWide { .. })
        ));
        assert!(matches!(
            encode_text("0x1ff", 8),
            Err(ValueError::TooWide { .. })
        ));
        assert!(matches!(
            encode_text("-129", 8),
            Err(ValueError::TooWide { .. })
        ));
        // No raw strings on the command line, even of the right length.
        assert_eq!(
            encode_text("ab", 16),
            Err(ValueError::NotAValue("ab".into()))
        );
        assert!(encode_text("0xzz", 16).is_err());
        assert!(matches!(
            encode_text("10.0.0.1", 16),
            Err(ValueError::WrongLength { .. })
        ));
    }

    #[test]
    fn display_round_trips_through_encode() {
        let cases = [
            (json!("08:00:00:00:02:22"), 48, "dstAddr"),
            (json!("10.0.2.2"), 32, "hdr.ipv4.dstAddr"),
            (json!("2001:db8::2"), 128, "hdr.ipv6.dst_ip"),
            (json!(2), 9, "port"),
            (json!(167772674), 32, "hdr.meta.threshold"),
            (json!(167772674), 32, "multiplier"),
            (json!("10.0.0.1"), 32, "next_hop_ip"),
            (json!(0), 16, "x"),
        ];
        for (value, bitwidth, name) in cases {
            let bytes = enc(value.clone(), bitwidth).unwrap();
            let shown = display(&bytes, bitwidth, name);
            assert_eq!(shown, value, "{name}");
            assert_eq!(enc(shown, bitwidth).unwrap(), bytes);
        }
    }

    #[test]
    fn display_accepts_padded_bytes() {
        assert_eq!(display(&[0, 2], 9, "port"), json!(2));
        assert_eq!(
            display(
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7],
                64,
                "x"
            ),
            json!(7)
        );
        assert_eq!(
            display(&[1; 17], 136, "x"),
            json!("0x0101010101010101010101010101010101")
        );
        assert_eq!(
            display(&[0xff; 16], 128, "big"),
            json!("0xffffffffffffffffffffffffffffffff")
        );
    }
}
