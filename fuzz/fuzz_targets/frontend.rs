//! libFuzzer's entry point for P4 source: [`lossless_fuzz::frontend`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::frontend(data));
