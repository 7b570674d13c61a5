//! Packet formats in user space: typed zero-copy views in the style of smoltcp's `wire`.
//!
//! One module per protocol. Each has a private `field` module of byte ranges, a
//! `Packet` (or `Frame`) view over any `T: AsRef<[u8]>` whose `new_checked`
//! refuses a buffer too short for what its header announces, getters, setters
//! where `T: AsMut<[u8]>`, and a `Repr` with `parse`, `emit` and `buffer_len`.
//! [`roce::RoceFrame`] puts them together into whole RoCEv2 frames.
//!
//! The tests of every module check bytes produced by an independent encoder
//! (scapy 2.8, with `scapy.contrib.roce` and `scapy.contrib.mac_control`).

pub mod bth;
pub mod checksum;
pub mod cnp;
pub mod ethernet;
pub mod icrc;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod pfc;
pub mod roce;
pub mod udp;
pub mod vlan;

#[cfg(test)]
mod vectors;

/// A byte range of a header field.
type Field = core::ops::Range<usize>;

/// Why a buffer could not be read or written as a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header or the length it announces.
    #[error("packet truncated")]
    Truncated,
    /// A field holds a value the format does not allow (version, length, opcode...).
    #[error("malformed packet: {0}")]
    Malformed(&'static str),
    /// A checksum or CRC does not match the packet's contents.
    #[error("bad checksum")]
    Checksum,
    /// The packet is well formed but not of the kind asked for.
    #[error("unsupported packet: {0}")]
    Unsupported(&'static str),
}

/// The result of a wire operation.
pub type Result<T> = core::result::Result<T, Error>;

/// Checks that `buffer` holds at least `len` bytes.
fn check_len(buffer: &[u8], len: usize) -> Result<()> {
    if buffer.len() < len {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}

/// Reads a big-endian `u16` at `at`.
fn read_u16(buffer: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buffer[at], buffer[at + 1]])
}

/// Writes a big-endian `u16` at `at`.
fn write_u16(buffer: &mut [u8], at: usize, value: u16) {
    buffer[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// Reads a big-endian 24-bit value at `at`.
fn read_u24(buffer: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, buffer[at], buffer[at + 1], buffer[at + 2]])
}

/// Writes the low 24 bits of `value` big-endian at `at`.
fn write_u24(buffer: &mut [u8], at: usize, value: u32) {
    buffer[at..at + 3].copy_from_slice(&value.to_be_bytes()[1..]);
}

/// Declares a `u8`/`u16`-backed enum with named values and an `Unknown` fallback,
/// with `From` conversions both ways.
macro_rules! enum_with_unknown {
    (
        $(#[$meta:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value without a name here.
            Unknown($ty),
        }

        impl From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
use enum_with_unknown;

/// Decodes a hex string (whitespace allowed) into bytes, for test vectors.
#[cfg(test)]
fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(core::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}
