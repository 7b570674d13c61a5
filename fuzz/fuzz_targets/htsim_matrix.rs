//! libFuzzer's entry point for an htsim connection matrix: [`lossless_fuzz::htsim_matrix`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::htsim_matrix(data));
