//! The fuzz targets' properties for the header codecs and the pushback parsers
//! (`fuzz/props/wire.rs`), run by proptest on stable: on any bytes, and on bytes shaped like
//! the grammars (digits, units, signs, whitespace), so that the accepting paths are reached
//! often.

#[path = "../../fuzz/props/wire.rs"]
mod props;

use proptest::prelude::*;

/// Bytes shaped like a header value: a sign or whitespace now and then, digits (sometimes too
/// many), a unit or a wrong letter, a number to make a duration of.
fn shaped() -> impl Strategy<Value = Vec<u8>> {
    (
        "[ \t+-]?",
        "[0-9]{0,24}",
        "[HMSmunsh ]?",
        "[ \t]?",
        proptest::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(|(pre, digits, unit, post, tail)| {
            let mut v = format!("{pre}{digits}{unit}{post}").into_bytes();
            // Half the time the value is alone; else raw bytes follow (they also feed the
            // durations the properties encode).
            if tail.first().is_some_and(|b| b % 2 == 0) {
                v.extend(tail);
            }
            v
        })
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..40), shaped()]
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
    fn grpc_timeout(data in bytes()) {
        props::check_grpc_timeout(&data);
    }

    #[test]
    fn deadline_ms(data in bytes()) {
        props::check_deadline_ms(&data);
    }

    #[test]
    fn pushback(data in bytes()) {
        props::check_pushback(&data);
    }
}

/// The fuzzers' seed inputs, and the edges they start from, pass too.
#[test]
fn seeds_and_edges() {
    for value in [
        &b"200m"[..],
        b"99999999H",
        b"0S",
        b"850",
        b"99999999999999999999",
        b"999999999999999999999",
        b" 120 ",
        b"-1",
        b"",
        b"+5",
        b"2147483648",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x3f",
    ] {
        props::check_grpc_timeout(value);
        props::check_deadline_ms(value);
        props::check_pushback(value);
    }
}
