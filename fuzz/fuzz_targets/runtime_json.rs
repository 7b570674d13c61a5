//! libFuzzer's entry point for a runtime JSON read by `lossless p4`: [`lossless_fuzz::runtime_json`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::runtime_json(data));
