//! The fuzz target's properties for [`DeadlineLayer`](deadline_tokio::DeadlineLayer)'s
//! header handling (`fuzz/props/server.rs`), run by proptest on stable: on any bytes, and on
//! requests shaped like real ones (a protocol, well-formed and malformed `grpc-timeout` and
//! `x-deadline-ms` values, a second `grpc-timeout`, admission on or off, the handler's work).
//! Every request is served in paused (virtual) time.

#[path = "../../fuzz/props/server.rs"]
mod props;

use proptest::prelude::*;

/// A header value: well formed, nearly so, or hostile.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[0-9]{1,8}[HMSmun]".prop_map(String::into_bytes),
        "[0-9]{1,21}".prop_map(String::into_bytes),
        "[ \t]?[+-]?[0-9]{0,10}[HMSmunsh]?[ \t]?".prop_map(String::into_bytes),
        Just(b"99999999H".to_vec()),
        Just(b"0m".to_vec()),
        Just(b"18446744073709551615".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

/// The bytes the property reads: flags, then the values split at `\n`, the work, and
/// Envoy's value.
fn request() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        value(),
        value(),
        value(),
        0u16..12_000,
        value(),
    )
        .prop_map(|(flags, grpc, ms, second, work, envoy)| {
            let mut data = vec![flags];
            for part in [grpc, ms, second] {
                data.extend(part.into_iter().filter(|b| *b != b'\n'));
                data.push(b'\n');
            }
            data.extend(work.to_le_bytes());
            data.push(b'\n');
            data.extend(envoy.into_iter().filter(|b| *b != b'\n'));
            data
        })
}

/// `default` cases, or `PROPTEST_CASES` when set (miri runs few).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(2_048)))]

    #[test]
    fn shaped_requests(data in request()) {
        props::check_server(&data);
    }

    #[test]
    fn any_bytes(data in proptest::collection::vec(any::<u8>(), 0..48)) {
        props::check_server(&data);
    }
}

/// Each rule of the layer, once: served, malformed, shed, expired, dropped at the deadline.
#[test]
fn each_rule_once() {
    let cases: [&[u8]; 6] = [
        b"\x03200m\n\n\n\x1e\x00",      // gRPC, 200 ms, 30 ms of work: served
        b"\x02-5S\n\n\n\x00\x00",       // a sign: 400
        b"\x0c\n10\n\n\x00\x00",        // 10 ms, 20 ms needed: shed
        b"\x020m\n\n\n\x00\x00",        // no time: 504 at once
        b"\x0299999999H\n\n\n\xff\xff", // a hostile budget, 65 s of work: 504 at 10 s
        b"\x12250m\n\nxyz\n\x10\x00",   // a second, malformed grpc-timeout is not read
    ];
    for data in cases {
        props::check_server(data);
    }
}
