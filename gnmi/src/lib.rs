//! gNMI for lossless: OpenConfig's gRPC Network Management Interface definitions (vendored
//! `.proto`, `proto/README.md`) with their tonic code, and a read-only telemetry server —
//! Capabilities, Get and Subscribe (STREAM with SAMPLE, ON_CHANGE and TARGET_DEFINED, ONCE,
//! POLL) — over any [`tree::CounterTree`], within written [`server::Limits`]. `lossless agent`
//! and softswitch serve their counters through it. docs/telemetry.md.

pub mod path;
pub mod server;
pub mod tree;

/// The generated protobuf types, clients and servers.
pub mod proto {
    /// The `gnmi` package: the service, paths, values, requests and responses.
    #[allow(missing_docs, clippy::all)]
    pub mod gnmi {
        include!(concat!(env!("OUT_DIR"), "/gnmi.rs"));
    }
    /// The `gnmi_ext` package: the extensions requests and responses may carry.
    #[allow(missing_docs, clippy::all)]
    pub mod gnmi_ext {
        include!(concat!(env!("OUT_DIR"), "/gnmi_ext.rs"));
    }
}
