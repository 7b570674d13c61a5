//! libFuzzer's entry point for a workload file or short form: [`lossless_fuzz::workload`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::workload(data));
