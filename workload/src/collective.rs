//! Collectives as nccl-tests reports them: which collective a flow belongs to, and the
//! algorithm and bus bandwidth of a completion time, defined once here.
//!
//! nccl-tests (NVIDIA, `doc/PERFORMANCE.md`) times one iteration of a collective over a buffer
//! of `S` bytes per rank and reports
//! - the **algorithm bandwidth** `algbw = S / t`, and
//! - the **bus bandwidth** `busbw = algbw × factor`, which removes the effect of the number of
//!   ranks `n` so that it compares with the link rate: `2(n−1)/n` for AllReduce (a ring sends
//!   each byte `2(n−1)/n` times over each rank's link), `(n−1)/n` for AllToAll (a rank's own
//!   share `S/n` never crosses the network).
//!
//! nccl-tests prints them in GB/s (10^9 bytes per second); here they are bytes per second.

/// The collectives a workload can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveKind {
    /// Ring AllReduce: a reduce-scatter and an all-gather of `n − 1` steps each.
    AllReduce,
    /// All-to-all: each rank sends `S/n` bytes to every other rank.
    AllToAll,
}

impl CollectiveKind {
    /// nccl-tests' bus-bandwidth factor for `ranks` ranks: `2(n−1)/n` for AllReduce,
    /// `(n−1)/n` for AllToAll.
    pub fn bus_factor(self, ranks: u32) -> f64 {
        let n = f64::from(ranks);
        match self {
            CollectiveKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveKind::AllToAll => (n - 1.0) / n,
        }
    }

    /// The name the workload format and reports use.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "allreduce",
            CollectiveKind::AllToAll => "alltoall",
        }
    }
}

/// One collective of a workload: its flows carry its index in their [`crate::Step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collective {
    /// Which collective.
    pub kind: CollectiveKind,
    /// How many ranks take part.
    pub ranks: u32,
    /// `S`, the buffer size per rank in bytes, in nccl-tests' meaning (the `size` column).
    pub bytes: u64,
    /// How many times it runs back to back.
    pub iterations: u32,
    /// Steps per iteration: `2(n−1)` for ring AllReduce, 1 for all-to-all at once, `n − 1` for
    /// serial all-to-all.
    pub steps: u32,
    /// The workload part it comes from.
    pub part: u16,
}

impl Collective {
    /// nccl-tests' algorithm bandwidth for one iteration that took `seconds`: `S / t`, in bytes
    /// per second.
    pub fn algbw(&self, seconds: f64) -> f64 {
        self.bytes as f64 / seconds
    }

    /// nccl-tests' bus bandwidth for one iteration that took `seconds`: `algbw × factor`
    /// ([`CollectiveKind::bus_factor`]), in bytes per second.
    pub fn busbw(&self, seconds: f64) -> f64 {
        self.algbw(seconds) * self.kind.bus_factor(self.ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_as_nccl_tests_defines_them() {
        // 8 ranks, 1 GB in 10 ms: algbw 100 GB/s; AllReduce busbw × 14/8, AllToAll × 7/8.
        let mut c = Collective {
            kind: CollectiveKind::AllReduce,
            ranks: 8,
            bytes: 1_000_000_000,
            iterations: 1,
            steps: 14,
            part: 0,
        };
        assert_eq!(c.algbw(0.01), 100e9);
        assert!((c.busbw(0.01) - 175e9).abs() < 1.0);
        c.kind = CollectiveKind::AllToAll;
        assert!((c.busbw(0.01) - 87.5e9).abs() < 1.0);
        assert_eq!(CollectiveKind::AllReduce.bus_factor(2), 1.0);
        assert_eq!(CollectiveKind::AllToAll.bus_factor(2), 0.5);
    }
}
