//! libFuzzer's entry point for a P4Runtime SetForwardingPipelineConfigRequest: [`lossless_fuzz::p4rt_set_pipeline`].
#![forbid(unsafe_code)]
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lossless_fuzz::p4rt_set_pipeline(data));
