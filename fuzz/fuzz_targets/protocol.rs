#![no_main]

#[path = "../props/protocol.rs"]
mod props;

// The first byte picks the rule; the rest is its input.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (pick, rest) = data.split_first().map_or((0, &[][..]), |(p, r)| (*p, r));
    match pick % 5 {
        0 => props::check_grpc_status(rest),
        1 => props::check_server(rest),
        2 => props::check_send(rest),
        3 => props::check_response(rest),
        _ => props::check_envelopes(rest),
    }
});
