//! libFuzzer's entry point for P4 source: [`lossless_fuzz::frontend`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::frontend(data));
