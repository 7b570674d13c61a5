//! The written limits of the workload format (docs/workloads.md, "Limits"). Files are read no
//! further than their limit; counts are checked before anything of that size is allocated, so
//! a workload past a limit is refused with the number it would have been and the limit.

use crate::{Ps, PS_PER_SECOND};

/// A workload TOML file, in bytes.
pub const MAX_WORKLOAD_FILE_BYTES: u64 = 1 << 20;
/// A size-CDF file, in bytes.
pub const MAX_CDF_FILE_BYTES: u64 = 1 << 20;
/// Points of a size CDF (GoogleRPC2008, the longest published, has 843).
pub const MAX_CDF_POINTS: usize = 10_000;
/// An htsim connection-matrix file, in bytes (a 4 Mi-flow matrix is about 200 MiB).
pub const MAX_MATRIX_FILE_BYTES: u64 = 256 << 20;
/// One line of a size-CDF or matrix file, in bytes.
pub const MAX_LINE_BYTES: usize = 4096;
/// Parts of one workload.
pub const MAX_PARTS: usize = 64;
/// Endpoints a workload is expanded onto (a fat-tree of radix 64 has 65,536 hosts), and so
/// ranks, senders and matrix nodes.
pub const MAX_ENDPOINTS: u32 = 65_536;
/// Flows of a whole expanded workload (about 100 bytes each).
pub const MAX_FLOWS: u64 = 4 << 20;
/// Dependencies of all flows together (8 bytes each).
pub const MAX_DEPENDENCIES: u64 = 16 << 20;
/// Trigger lines of a connection matrix.
pub const MAX_TRIGGERS: u64 = MAX_FLOWS;
/// Failure lines of a connection matrix.
pub const MAX_FAILURES: u64 = 65_536;
/// Any size in bytes: a flow, a collective's buffer per rank, a burst (1 TiB).
pub const MAX_BYTES: u64 = 1 << 40;
/// Any time: a start, a period, a duration, a gap, and the start of any flow (one hour).
pub const MAX_TIME: Ps = 3600 * PS_PER_SECOND;
/// QPs per connection.
pub const MAX_QPS: u32 = 256;
/// Repetitions of a collective or an incast.
pub const MAX_REPS: u32 = 1_000_000;
