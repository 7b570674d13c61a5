//! libFuzzer's entry point for a size-CDF file: [`lossless_fuzz::size_cdf`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::size_cdf(data));
