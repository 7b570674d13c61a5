//! libFuzzer's entry point for a host TOML config: [`lossless_fuzz::host_config`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::host_config(data));
