//! The test bed of lossless's integration tests: privilege checks, the `lossless` binary,
//! frames crafted with an independent encoder (etherparse), raw capture (AF_PACKET), and a
//! softswitch between two hosts for the P4Runtime client.

pub mod bed;
pub mod capture;
pub mod craft;
pub mod switch_bed;
