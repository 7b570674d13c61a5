//! libFuzzer's entry point for a BMv2 JSON program: [`lossless_fuzz::bmv2_json`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::bmv2_json(data));
