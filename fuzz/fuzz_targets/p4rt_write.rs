//! libFuzzer's entry point for a P4Runtime WriteRequest: [`lossless_fuzz::p4rt_write`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::p4rt_write(data));
