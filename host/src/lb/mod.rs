//! The load balancer's control plane: the `lb.*` keys, the resilient bucket table, and the
//! pinned maps the XDP program reads.

pub mod buckets;
pub mod pinned;
pub mod stats;
pub mod watch;
