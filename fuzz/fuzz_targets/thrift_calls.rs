//! libFuzzer's entry point for the calls of a BMv2 Thrift connection:
//! [`lossless_fuzz::thrift_calls`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::thrift_calls(data));
