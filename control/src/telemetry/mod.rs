//! `lossless telemetry`: what the data planes send to a collector. [`collect`] receives the
//! ERSPAN mirrors of lossless.p4 (docs/telemetry.md); [`cli`] is its command line.

pub mod cli;
pub mod collect;
