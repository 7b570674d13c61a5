//! The Rust bindings of BMv2's runtime Thrift services, generated from the IDL beside them by
//! the Apache Thrift compiler (`cargo xtask codegen`; README.md here): data types, clients and
//! the processors that decode a call and encode its answer. Not edited by hand, and so not held
//! to the workspace's lints.

#![allow(clippy::all, missing_docs, dead_code, non_camel_case_types)]

pub mod simple_pre_lag;
pub mod simple_switch;
pub mod standard;
