//! libFuzzer's entry point for the agent's TOML file: [`lossless_fuzz::agent_config`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::agent_config(data));
