#![no_main]

#[path = "../props/wire.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::check_grpc_timeout(data));
