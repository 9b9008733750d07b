//! The Connect protocol's `connect-timeout-ms` codec: the grammar's edges (1 to 10 ASCII
//! digits of milliseconds, nothing else), and properties over any bytes and any duration.

use core::time::Duration;

use deadline_core::wire::{CONNECT_TIMEOUT_MS, ConnectTimeout, Propagation, WireError};
use deadline_core::{Deadline, Instant, ms};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(0x5eed_0c0e),
        ..ProptestConfig::default()
    }
}

#[test]
fn the_header_name_is_connects() {
    assert_eq!(CONNECT_TIMEOUT_MS, "connect-timeout-ms");
}

#[test]
fn connect_timeout_rejects_values_outside_the_grammar() {
    let rejected: &[(&[u8], WireError)] = &[
        (b"", WireError::Empty),
        (b" 5", WireError::Whitespace),
        (b"5 ", WireError::Whitespace),
        (b"5\t0", WireError::Whitespace),
        (b"+5", WireError::Sign),
        (b"-5", WireError::Sign),
        (b"5ms", WireError::InvalidDigit),
        (b"5m", WireError::InvalidDigit),
        (b"5.0", WireError::InvalidDigit),
        (b"1e3", WireError::InvalidDigit),
        ("٥".as_bytes(), WireError::InvalidDigit),
        (b"\xff", WireError::InvalidDigit),
        (b"10000000000", WireError::TooManyDigits),
        (b"00000000001", WireError::TooManyDigits),
        (b"99999999999999999999", WireError::TooManyDigits),
    ];
    let server = Propagation::DEFAULT
        .with_allowance(ms(0))
        .with_max(ms(1_000));
    for &(value, expected) in rejected {
        assert_eq!(ConnectTimeout::parse(value), Err(expected), "{value:?}");
        assert_eq!(
            server.decode_connect_timeout(value, Instant::ZERO),
            Err(expected)
        );
    }
}

#[test]
fn connect_timeout_decodes_up_to_ten_digits_and_clamps_to_the_maximum() {
    let accepted: &[(&str, u64)] = &[
        ("0", 0),
        ("1", 1),
        ("850", 850),
        ("0000000850", 850),
        ("9999999999", 9_999_999_999),
    ];
    for &(text, millis) in accepted {
        let v: ConnectTimeout = text.parse().unwrap();
        assert_eq!(v.millis(), millis, "{text}");
        assert_eq!(v.duration(), Duration::from_millis(millis));
        assert_eq!(v.as_str(), millis.to_string());
    }
    // The largest value is clamped to the server's maximum like any other.
    let server = Propagation::DEFAULT
        .with_allowance(ms(0))
        .with_max(ms(1_000));
    let local = server
        .decode_connect_timeout(b"9999999999", Instant::ZERO)
        .unwrap();
    assert_eq!(local.remaining(Instant::ZERO), ms(1_000));
    // Zero: no time left.
    let local = server.decode_connect_timeout(b"0", Instant::ZERO).unwrap();
    assert!(local.is_expired(Instant::ZERO));
}

#[test]
fn connect_timeout_encodes_whole_milliseconds_rounded_down_never_zero_at_most_ten_digits() {
    let cases: &[(Duration, Result<&str, WireError>)] = &[
        (Duration::ZERO, Err(WireError::Spent)),
        (Duration::from_nanos(1), Err(WireError::Spent)),
        (Duration::from_micros(999), Err(WireError::Spent)),
        (Duration::from_micros(1_000), Ok("1")),
        (Duration::from_micros(1_999), Ok("1")),
        (ms(850), Ok("850")),
        (ms(9_999_999_999), Ok("9999999999")),
        (ms(10_000_000_000), Ok("9999999999")),
        (Duration::MAX, Ok("9999999999")),
    ];
    for &(d, expected) in cases {
        let got = ConnectTimeout::from_duration(d);
        assert_eq!(
            got.map(|v| v.to_string()),
            expected.map(str::to_owned),
            "{d:?}"
        );
        assert_eq!(ConnectTimeout::try_from(d), got);
    }
}

#[test]
fn propagation_sends_the_time_left_less_the_allowance() {
    let hop = Propagation::DEFAULT
        .with_allowance(ms(5))
        .with_max(ms(10_000));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    let sent = hop.encode_connect_timeout(deadline, Instant::ZERO).unwrap();
    assert_eq!(sent.as_str(), "195");
    // 5.9 ms left: 0.9 ms after the allowance, under one millisecond: nothing is sent.
    let late = Instant::from_micros(194_100);
    assert_eq!(
        hop.encode_connect_timeout(deadline, late),
        Err(WireError::Spent)
    );
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decoding_never_panics_and_accepts_exactly_one_to_ten_digits(
        bytes in proptest::collection::vec(any::<u8>(), 0..14),
    ) {
        let decoded = ConnectTimeout::parse(&bytes);
        let well_formed = !bytes.is_empty() && bytes.len() <= 10 && bytes.iter().all(u8::is_ascii_digit);
        prop_assert_eq!(decoded.is_ok(), well_formed);
        if let Ok(v) = decoded {
            let exact: u64 = core::str::from_utf8(&bytes).unwrap().parse().unwrap();
            prop_assert_eq!(v.millis(), exact);
        }
        let _ = Propagation::DEFAULT.with_allowance(ms(1)).with_max(Duration::MAX).decode_connect_timeout(&bytes, Instant::MAX);
    }

    #[test]
    fn decoding_on_near_misses(text in "[0-9+\\- ]{0,12}") {
        let decoded = ConnectTimeout::parse(text.as_bytes());
        let well_formed = !text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit());
        prop_assert_eq!(decoded.is_ok(), well_formed);
    }

    #[test]
    fn round_trip_loses_less_than_one_millisecond(
        secs in prop_oneof![0u64..100_000, any::<u64>()],
        nanos in 0u32..1_000_000_000,
    ) {
        let d = Duration::new(secs, nanos);
        match ConnectTimeout::from_duration(d) {
            Ok(sent) => {
                prop_assert!(sent.as_bytes().len() <= 10);
                let back = ConnectTimeout::parse(sent.as_bytes()).unwrap();
                prop_assert_eq!(back, sent);
                prop_assert!(back.duration() <= d);
                if d < ms(ConnectTimeout::MAX_MILLIS) {
                    prop_assert!(d - back.duration() < ms(1));
                } else {
                    prop_assert_eq!(back.millis(), ConnectTimeout::MAX_MILLIS);
                }
            }
            Err(e) => {
                prop_assert_eq!(e, WireError::Spent);
                prop_assert!(d < ms(1));
            }
        }
    }

    #[test]
    fn propagation_never_sends_more_than_left_minus_allowance(
        deadline_us in prop_oneof![any::<u64>(), 0u64..10_000_000],
        now_us in prop_oneof![any::<u64>(), 0u64..10_000_000],
        allowance_us in 0u64..100_000,
        max_us in prop_oneof![Just(u64::MAX), 0u64..10_000_000],
        receiver_now_us in any::<u64>(),
    ) {
        let hop = Propagation::DEFAULT.with_allowance(Duration::from_micros(allowance_us)).with_max(Duration::from_micros(max_us));
        let deadline = Deadline::at(Instant::from_micros(deadline_us));
        let now = Instant::from_micros(now_us);
        let limit = deadline.remaining(now).saturating_sub(hop.allowance());
        let receiver_now = Instant::from_micros(receiver_now_us);
        match hop.encode_connect_timeout(deadline, now) {
            Ok(v) => {
                prop_assert!(v.duration() <= limit && !v.duration().is_zero());
                let local = hop.decode_connect_timeout(v.as_bytes(), receiver_now).unwrap();
                prop_assert!(local.remaining(receiver_now) <= v.duration().min(hop.max()));
            }
            Err(e) => prop_assert!(e == WireError::Spent && limit < ms(1)),
        }
    }
}
