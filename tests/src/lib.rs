//! The test bed of lossless's integration tests: privilege checks, the `lossless` binary,
//! frames crafted with an independent encoder (etherparse), raw capture (AF_PACKET), labs run
//! through the binary, softswitch on veths between host namespaces, the P4 tutorials' two
//! hosts around it for the P4Runtime client, `lossless net` networks for the Mininet tests, the
//! benchmarks' load generator, htsim, the reference simulator `lossless sim` is compared with,
//! and a single-node Slurm of a test's own.

pub mod bed;
pub mod capture;
pub mod craft;
pub mod gnmi;
pub mod htsim;
pub mod lab;
pub mod load;
pub mod net;
pub mod slurm;
pub mod switch;
pub mod tutorial_bed;
