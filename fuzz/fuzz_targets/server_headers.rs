#![no_main]

#[path = "../props/server.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::check_server(data));
