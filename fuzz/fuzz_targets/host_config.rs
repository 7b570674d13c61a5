//! libFuzzer's entry point for a host TOML config: [`lossless_fuzz::host_config`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::host_config(data));
