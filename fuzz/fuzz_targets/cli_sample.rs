#![no_main]

#[path = "../props/cli.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::check_sample(data));
