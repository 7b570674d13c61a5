//! Packet formats, once for the whole workspace: typed zero-copy views in the style of smoltcp's
//! `wire`, for Ethernet, VLAN, IPv4, IPv6, UDP, the RoCEv2 headers (BTH, AETH, CNP, ICRC) and
//! 802.1Qbb PFC, ERSPAN over GRE, with the Internet checksum and the CRC-32 table.
//!
//! One module per protocol. Each has a private `field` module of byte ranges, a `Packet` (or
//! `Frame`, `Tag`) view over any `T: AsRef<[u8]>` whose `new_checked` refuses a buffer too short
//! for what its header announces, getters, setters where `T: AsMut<[u8]>`, and a `Repr` with
//! `parse`, `emit` and `buffer_len`, shown by `Display`. [`roce::RoceFrame`] puts them together
//! into whole RoCEv2 frames; [`pretty_print`] lists a frame layer by layer.
//!
//! The crate is `#![no_std]` and allocates nothing, so the eBPF programs build their CNP and PFC
//! frames with it (through `dataplane-common`) and take its constants. The `std` feature only
//! speeds up long CRC-32 inputs (crc32fast) for user space.
//!
//! The tests of every module check bytes produced by an independent encoder (scapy, with
//! `scapy.contrib.roce` and `scapy.contrib.mac_control`) or captured off a veth, and
//! `tests/independent_decoders.rs` rebuilds every vector with scapy and decodes it with tshark.
#![forbid(unsafe_code)]
#![no_std]

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod aeth;
pub mod bth;
pub mod checksum;
pub mod cnp;
pub mod crc;
pub mod erspan;
pub mod ethernet;
pub mod icrc;
pub mod ip;
mod ip_header;
pub mod ipv4;
pub mod ipv6;
pub mod pfc;
pub mod pretty_print;
pub mod roce;
pub mod udp;
pub mod vectors;
pub mod vlan;

use core::fmt;

/// A byte range of a header field.
type Field = core::ops::Range<usize>;

/// Why a buffer could not be read or written as a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header or the length it announces.
    Truncated,
    /// A field holds a value the format does not allow (version, length, opcode...).
    Malformed(&'static str),
    /// A checksum or CRC does not match the packet's contents.
    Checksum,
    /// The packet is well formed but not of the kind asked for.
    Unsupported(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("packet truncated"),
            Error::Malformed(what) => write!(f, "malformed packet: {what}"),
            Error::Checksum => f.write_str("bad checksum"),
            Error::Unsupported(what) => write!(f, "unsupported packet: {what}"),
        }
    }
}

impl core::error::Error for Error {}

/// The result of a wire operation.
pub type Result<T> = core::result::Result<T, Error>;

/// Checks that `buffer` holds at least `len` bytes.
#[inline(always)]
fn check_len(buffer: &[u8], len: usize) -> Result<()> {
    if buffer.len() < len {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}

/// Reads a big-endian `u16` at `at`.
#[inline(always)]
fn read_u16(buffer: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buffer[at], buffer[at + 1]])
}

/// Writes a big-endian `u16` at `at`.
#[inline(always)]
fn write_u16(buffer: &mut [u8], at: usize, value: u16) {
    buffer[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// Reads a big-endian 24-bit value at `at`.
#[inline(always)]
fn read_u24(buffer: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, buffer[at], buffer[at + 1], buffer[at + 2]])
}

/// Writes the low 24 bits of `value` big-endian at `at`.
#[inline(always)]
fn write_u24(buffer: &mut [u8], at: usize, value: u32) {
    buffer[at..at + 3].copy_from_slice(&value.to_be_bytes()[1..]);
}

/// Asserts that `parse` fails with `Truncated` on every proper prefix of `bytes` (the check each
/// module's tests make at every boundary of its header).
#[cfg(test)]
fn assert_prefixes_truncated(bytes: &[u8], parse: impl Fn(&[u8]) -> Result<()>) {
    for len in 0..bytes.len() {
        assert_eq!(parse(&bytes[..len]), Err(Error::Truncated), "length {len}");
    }
}

/// Declares a zero-copy view `$name<T: AsRef<[u8]>>` over a buffer, with `new_unchecked`,
/// `new_checked` (which asks the view's own `check_len`) and `into_inner`. The module that
/// declares it writes the getters, the setters and `check_len` — or, for a header of one fixed
/// length, names that length (`check_len = LEN`, under the method's doc comment) and the macro
/// writes the `check_len` that asks for it, and, where named (each under its doc comment),
/// `payload` and `payload_mut`: what follows the header.
macro_rules! view {
    (
        $(#[$meta:meta])* $name:ident,
        $(#[$check_meta:meta])* check_len = $len:expr
        $(, $(#[$payload_meta:meta])* payload $(, $(#[$payload_mut_meta:meta])* payload_mut)?)?
    ) => {
        view! { $(#[$meta])* $name }

        impl<T: AsRef<[u8]>> $name<T> {
            $(#[$check_meta])*
            pub fn check_len(&self) -> $crate::Result<()> {
                $crate::check_len(self.buffer.as_ref(), $len)
            }
        }

        $(
            impl<T: AsRef<[u8]>> $name<T> {
                $(#[$payload_meta])*
                pub fn payload(&self) -> &[u8] {
                    &self.buffer.as_ref()[$len..]
                }
            }

            $(
                impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
                    $(#[$payload_mut_meta])*
                    pub fn payload_mut(&mut self) -> &mut [u8] {
                        &mut self.buffer.as_mut()[$len..]
                    }
                }
            )?
        )?
    };
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checking it: reading or writing past its end panics.
            #[inline(always)]
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wraps a buffer, failing as `check_len` does when it cannot hold what the
            /// header announces.
            #[inline(always)]
            pub fn new_checked(buffer: T) -> Result<Self> {
                let view = $name { buffer };
                view.check_len()?;
                Ok(view)
            }

            /// The buffer, given back.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
use view;

/// Declares a fieldless enum whose members are numbered from 0 in the order written, each with
/// its name (`Member => "name"`), and gives it `COUNT`, `ALL` (every member, by number),
/// `from_index` and `const fn name`: one list of the members where the enum, its array and its
/// names would be three. The attributes written (docs, `repr`, derives, which must include
/// `Clone` and `Copy`) are the enum's. The records of `dataplane-common` use it too.
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $member:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$vmeta])* $member, )+
        }

        impl $name {
            /// Number of members.
            pub const COUNT: usize = [$($name::$member),+].len();

            /// Every member, by number.
            pub const ALL: [$name; Self::COUNT] = [$($name::$member),+];

            /// The member numbered `index`, or `None` past the last.
            pub const fn from_index(index: usize) -> Option<$name> {
                if index < Self::COUNT {
                    Some(Self::ALL[index])
                } else {
                    None
                }
            }

            /// Its name, as command lines, files, JSON, metrics and tables write it.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$member => $text, )+
                }
            }
        }
    };
}

/// Declares a `u8`/`u16`-backed enum of numbers a field may hold, with an `Unknown` fallback,
/// `From` conversions both ways and `const fn value` (the number on the wire, for constants).
macro_rules! enum_with_unknown {
    (
        $(#[$meta:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value without a name here.
            Unknown($ty),
        }

        impl $name {
            /// The number on the wire.
            #[inline(always)]
            pub const fn value(self) -> $ty {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }

            /// The member of this number.
            #[inline(always)]
            pub const fn from_value(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$ty> for $name {
            fn from(value: $ty) -> Self {
                $name::from_value(value)
            }
        }

        impl From<$name> for $ty {
            fn from(value: $name) -> Self {
                value.value()
            }
        }
    };
}
use enum_with_unknown;
