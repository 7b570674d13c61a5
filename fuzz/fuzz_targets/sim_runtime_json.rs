//! libFuzzer's entry point for a runtime JSON read by the simulator: [`lossless_fuzz::sim_runtime_json`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::sim_runtime_json(data));
