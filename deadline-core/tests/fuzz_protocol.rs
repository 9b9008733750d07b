//! The fuzz target's properties for the core's protocol rules (`fuzz/props/protocol.rs`), run
//! by proptest on stable: on any bytes, and on bytes shaped like the headers (digits, units,
//! signs, whitespace), so that the accepting paths are reached often.

#[path = "../../fuzz/props/protocol.rs"]
mod props;

use proptest::prelude::*;

/// A header value: well formed, nearly so, or any bytes.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[0-9]{1,8}[HMSmun]".prop_map(String::into_bytes),
        "[0-9]{1,21}".prop_map(String::into_bytes),
        "[ \t]?[+-]?[0-9]{0,12}[HMSmunsh]?[ \t]?".prop_map(String::into_bytes),
        Just(b"0".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

/// Flags, then five values split at `\n` (the last one feeds numbers).
fn request() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        proptest::collection::vec(value(), 4),
        proptest::collection::vec(any::<u8>(), 24),
    )
        .prop_map(|(flags, values, numbers)| {
            let mut data = vec![flags];
            for value in values {
                data.extend(value.into_iter().filter(|b| *b != b'\n'));
                data.push(b'\n');
            }
            data.extend(numbers);
            data
        })
}

/// A response: a status, flags, and three values.
fn response() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![0u16..600, Just(200u16), Just(503u16), Just(429u16)],
        any::<u8>(),
        prop_oneof![
            "[0-9]{1,3}".prop_map(String::into_bytes),
            "-?[0-9]{0,11}".prop_map(String::into_bytes),
            value()
        ],
        value(),
        value(),
    )
        .prop_map(|(status, flags, a, b, c)| {
            let mut data = status.to_le_bytes().to_vec();
            data.push(flags);
            for value in [a, b, c] {
                data.extend(value.into_iter().filter(|b| *b != b'\n'));
                data.push(b'\n');
            }
            data
        })
}

/// A streamed body of messages, as `check_envelopes` reads it: a frame count, the frames'
/// sizes, then envelopes of short messages (lengths that walk to whole messages often),
/// their last one perhaps cut short.
fn body() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 8),
        proptest::collection::vec((any::<u8>(), 0u8..40), 0..6),
        0usize..40,
    )
        .prop_map(|(frames, sizes, messages, short)| {
            let mut data = vec![frames];
            data.extend(sizes.iter().take(usize::from(frames % 9)).map(|s| s % 24));
            let at = data.len();
            for (flags, len) in messages {
                data.push(flags);
                data.extend_from_slice(&u32::from(len).to_be_bytes());
                data.extend(std::iter::repeat_n(0xA5, usize::from(len)));
            }
            data.truncate(data.len().saturating_sub(short).max(at));
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
    #![proptest_config(ProptestConfig::with_cases(cases(4_096)))]

    #[test]
    fn grpc_status(data in prop_oneof![value(), "[ \t]?[0-9]{1,4}[ \t]?".prop_map(String::into_bytes)]) {
        props::check_grpc_status(&data);
    }

    #[test]
    fn server(data in prop_oneof![request(), proptest::collection::vec(any::<u8>(), 0..64)]) {
        props::check_server(&data);
    }

    #[test]
    fn send(data in proptest::collection::vec(any::<u8>(), 0..48)) {
        props::check_send(&data);
    }

    #[test]
    fn envelopes(data in prop_oneof![body(), proptest::collection::vec(any::<u8>(), 0..96)]) {
        props::check_envelopes(&data);
    }

    #[test]
    fn response_head(data in prop_oneof![response(), proptest::collection::vec(any::<u8>(), 0..32)]) {
        props::check_response(&data);
    }
}

/// The edges: empty input, a lone byte, the largest values.
#[test]
fn edges() {
    for data in [
        &b""[..],
        b"\xff",
        b"\x0f200m\n300\n40\n250\n",
        b"\x0f99999999H\n9999999999\n18446744073709551615\n18446744073709551615\n",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    ] {
        props::check_grpc_status(data);
        props::check_server(data);
        props::check_send(data);
        props::check_response(data);
        props::check_envelopes(data);
    }
}
