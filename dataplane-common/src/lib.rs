//! Types and arithmetic shared by the lossless eBPF programs and user space.
//!
//! Everything here is `#![no_std]` and `#[repr(C)]`: the eBPF programs keep these records in
//! maps, and the control plane reads and writes the same records through aya. The maps
//! themselves (`maps`) and the programs' names (`programs`) are declared here once, for both
//! sides. The data-path arithmetic (the phantom queue and the RED profile) lives here too, so
//! the very functions the kernel runs are unit-tested on the host.
#![no_std]

#[cfg(test)]
extern crate std;

/// Declares a record of `u64` counters as the maps keep them (`#[repr(C)]`, one copy per CPU)
/// with `accumulate`, which adds another copy into it field by field: the control plane sums
/// the per-CPU copies, and the hooks, with it.
macro_rules! counters {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($(#[$field_attr:meta])* pub $field:ident: u64,)*
        }
    ) => {
        $(#[$attr])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "user", derive(serde::Serialize))]
        pub struct $name {
            $($(#[$field_attr])* pub $field: u64,)*
        }

        impl $name {
            /// Adds `other` into `self`, field by field.
            pub fn accumulate(&mut self, other: &$name) {
                $(self.$field += other.$field;)*
            }
        }
    };
}

/// Lets user space copy the named records in and out of maps through aya (`aya::Pod`, with the
/// `user` feature). Each call says, in a `// SAFETY:` comment above it, why its records hold
/// no padding and no value that some bytes could not be.
macro_rules! pod {
    ($($record:ty),+ $(,)?) => {
        $(
            #[cfg(feature = "user")]
            // SAFETY: the caller's comment: a plain `#[repr(C)]` record of integers (and byte
            // arrays) without implicit padding, so any bytes are a value of it.
            unsafe impl aya::Pod for $record {}
        )+
    };
}

pub mod cnp;
pub mod config;
pub mod counters;
pub mod lb;
pub mod maps;
pub mod mirror;
pub mod nak;
pub mod pfc;
pub mod phantom_queue;
pub mod programs;
pub mod red;
pub mod uapi;

/// Number of 802.1p priorities (traffic classes).
pub const PRIORITIES: usize = 8;

/// Number of DSCP code points.
pub const DSCP_VALUES: usize = 64;

wire::named_enum! {
    /// The place in the kernel's data path where a program runs, by index; named on the
    /// command line and in JSON `xdp`, `tc`.
    #[repr(u32)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Hook {
        /// XDP, on ingress, before the stack sees the frame.
        Xdp => "xdp",
        /// TC (clsact/TCX) on egress, when the frame leaves the interface.
        TcEgress => "tc",
    }
}

impl Hook {
    /// The bit of this hook in [`config::AttachInfo::hooks`].
    pub const fn bit(self) -> u32 {
        1 << self as u32
    }
}
