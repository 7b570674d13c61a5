//! libFuzzer's entry point for a runtime JSON read by the fabric: [`lossless_fuzz::fabric_runtime_json`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::fabric_runtime_json(data));
