//! P4Runtime v1 and P4Info, wire-compatible with the official definitions (same packages,
//! messages and field numbers: they are generated from the descriptors the official `p4runtime`
//! package embeds), with tonic clients and servers; softswitch's own `Queues` service; and the
//! helpers both sides of P4Runtime need: the error convention of the specification
//! ([`status`]), P4Info's text and JSON formats ([`format`]), the walk over a P4Info's
//! entities ([`p4info`]), and a Read's streamed answer drained ([`read`]).
#![forbid(unsafe_code)]

pub mod format;
pub mod p4info;
pub mod read;
pub mod status;

/// Google's RPC status and codes (`google/rpc/status.proto`, `google/rpc/code.proto`).
pub mod google {
    /// Package `google.rpc`.
    #[allow(missing_docs, clippy::all)]
    pub mod rpc {
        include!(concat!(env!("OUT_DIR"), "/google.rpc.rs"));
    }
}

/// The P4 packages.
pub mod p4 {
    /// Package `p4.v1`: the P4Runtime service and its messages (`p4/v1/p4runtime.proto`,
    /// `p4/v1/p4data.proto`).
    #[allow(missing_docs, clippy::all)]
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/p4.v1.rs"));
    }

    /// P4Info.
    pub mod config {
        /// Package `p4.config.v1`: P4Info and P4 types (`p4/config/v1/p4info.proto`,
        /// `p4/config/v1/p4types.proto`).
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/p4.config.v1.rs"));
        }
    }

    pub mod tmp;
}

/// softswitch's own services.
pub mod lossless {
    /// softswitch.
    pub mod softswitch {
        /// Package `lossless.softswitch.v1`: the `Queues` service (egress queue depth and rate per
        /// port and priority), served beside P4Runtime (`proto/lossless/softswitch/v1/queues.proto`).
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/lossless.softswitch.v1.rs"));
        }
    }
}

/// Every file above (and `google/protobuf/any.proto`) as one encoded
/// `google.protobuf.FileDescriptorSet`: for reflection, text and JSON formats.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

impl From<u128> for p4::v1::Uint128 {
    fn from(value: u128) -> Self {
        p4::v1::Uint128 {
            high: (value >> 64) as u64,
            low: value as u64,
        }
    }
}

impl From<p4::v1::Uint128> for u128 {
    fn from(value: p4::v1::Uint128) -> Self {
        (u128::from(value.high) << 64) | u128::from(value.low)
    }
}
