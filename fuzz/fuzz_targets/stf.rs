//! libFuzzer's entry point for an STF test: [`lossless_fuzz::stf`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::stf(data));
