//! The test bed of lossless's integration tests: privilege checks, the `lossless` binary,
//! frames crafted with an independent encoder (etherparse), raw capture (AF_PACKET), and
//! labs run through the binary.

pub mod bed;
pub mod capture;
pub mod craft;
pub mod lab;
pub mod switch;
