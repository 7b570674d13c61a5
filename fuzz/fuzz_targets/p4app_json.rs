//! libFuzzer's entry point for p4-utils' p4app.json: [`lossless_fuzz::p4app_json`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::p4app_json(data));
