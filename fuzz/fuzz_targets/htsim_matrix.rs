//! libFuzzer's entry point for an htsim connection matrix: [`lossless_fuzz::htsim_matrix`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::htsim_matrix(data));
