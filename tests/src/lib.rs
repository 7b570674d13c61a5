//! The test bed of lossless's integration tests: privilege checks, the `lossless` binary,
//! frames crafted with an independent encoder (etherparse), and raw capture (AF_PACKET).

pub mod bed;
pub mod capture;
pub mod craft;
pub mod switch;
