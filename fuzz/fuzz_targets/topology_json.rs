//! libFuzzer's entry point for the P4 tutorials' topology.json: [`lossless_fuzz::topology_json`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::topology_json(data));
