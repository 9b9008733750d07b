//! The header codecs (`grpc-timeout`, `x-deadline-ms`) and `Propagation`: tables of the
//! grammar's edges, and properties over any bytes and any duration.

use core::time::Duration;

use deadline_core::call::call_timeout;
use deadline_core::wire::{
    DeadlineHeader, DeadlineMs, ENVOY_UPSTREAM_RQ_TIMEOUT_MS, GRPC_TIMEOUT, GrpcTimeout, GrpcUnit,
    Incoming, Propagation, WireError, X_DEADLINE_MS,
};
use deadline_core::{Deadline, Instant, Policy, ms};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// Nanoseconds per unit, written out here apart from the library's own table.
fn unit_nanos(letter: u8) -> Option<u128> {
    Some(match letter {
        b'n' => 1,
        b'u' => 1_000,
        b'm' => 1_000_000,
        b'S' => 1_000_000_000,
        b'M' => 60 * 1_000_000_000,
        b'H' => 3_600 * 1_000_000_000,
        _ => return None,
    })
}

/// The PROTOCOL-HTTP2 grammar, as an independent oracle: 1 to 8 ASCII digits, then one unit.
/// Returns the value in nanoseconds when `value` is well formed.
fn grammar(value: &[u8]) -> Option<u128> {
    let (&unit, digits) = value.split_last()?;
    let per_unit = unit_nanos(unit)?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let count: u128 = core::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(count * per_unit)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(0x5eed_0005),
        ..ProptestConfig::default()
    }
}

#[test]
fn header_names_are_lowercase_http2_names() {
    for name in [GRPC_TIMEOUT, X_DEADLINE_MS] {
        assert!(!name.is_empty());
        assert_eq!(name, name.to_ascii_lowercase());
        assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    }
    assert_eq!(GRPC_TIMEOUT, "grpc-timeout");
    assert_eq!(X_DEADLINE_MS, "x-deadline-ms");
}

#[test]
fn grpc_timeout_rejects_values_outside_the_grammar() {
    let cases: &[(&[u8], WireError)] = &[
        (b"", WireError::Empty),
        (b"S", WireError::Empty),
        (b"n", WireError::Empty),
        (b" 1S", WireError::Whitespace),
        (b"1S ", WireError::Whitespace),
        (b"1 S", WireError::Whitespace),
        (b"\t1S", WireError::Whitespace),
        (b"1S\r\n", WireError::Whitespace),
        (b" ", WireError::Whitespace),
        (b"+1S", WireError::Sign),
        (b"-1S", WireError::Sign),
        (b"-0n", WireError::Sign),
        (b"123456789S", WireError::TooManyDigits),
        (b"000000001S", WireError::TooManyDigits),
        (b"99999999999999999999999H", WireError::TooManyDigits),
        (b"1", WireError::MissingUnit),
        (b"12345678", WireError::MissingUnit),
        (b"123456789", WireError::MissingUnit),
        (b"1s", WireError::UnknownUnit),
        (b"1h", WireError::UnknownUnit),
        (b"1x", WireError::UnknownUnit),
        (b"1ms", WireError::UnknownUnit),
        (b"1\xb5", WireError::UnknownUnit),
        ("1µ".as_bytes(), WireError::UnknownUnit),
        (b"1SS", WireError::InvalidDigit),
        (b"1.5S", WireError::InvalidDigit),
        (b"1_000m", WireError::InvalidDigit),
        (b"0x1S", WireError::InvalidDigit),
        (b"1e3m", WireError::InvalidDigit),
        ("١S".as_bytes(), WireError::InvalidDigit),
        ("１S".as_bytes(), WireError::InvalidDigit),
        (b"1\0S", WireError::InvalidDigit),
    ];
    for &(value, expected) in cases {
        assert_eq!(
            GrpcTimeout::parse(value),
            Err(expected),
            "{:?}",
            String::from_utf8_lossy(value)
        );
        if let Ok(text) = core::str::from_utf8(value) {
            assert_eq!(text.parse::<GrpcTimeout>(), Err(expected), "{text:?}");
        }
        let server = Propagation::DEFAULT
            .with_allowance(ms(0))
            .with_max(ms(1_000));
        assert_eq!(
            server.decode_grpc_timeout(value, Instant::ZERO),
            Err(expected)
        );
    }
}

#[test]
fn grpc_timeout_decodes_each_unit_and_leading_zeros() {
    let cases: &[(&str, Duration, u32, GrpcUnit)] = &[
        ("7n", Duration::from_nanos(7), 7, GrpcUnit::Nanos),
        ("7u", Duration::from_micros(7), 7, GrpcUnit::Micros),
        ("7m", Duration::from_millis(7), 7, GrpcUnit::Millis),
        ("7S", Duration::from_secs(7), 7, GrpcUnit::Seconds),
        ("7M", Duration::from_secs(7 * 60), 7, GrpcUnit::Minutes),
        ("7H", Duration::from_secs(7 * 3_600), 7, GrpcUnit::Hours),
        ("00000001S", Duration::from_secs(1), 1, GrpcUnit::Seconds),
        ("00000000n", Duration::ZERO, 0, GrpcUnit::Nanos),
        ("0S", Duration::ZERO, 0, GrpcUnit::Seconds),
        (
            "99999999n",
            Duration::from_nanos(99_999_999),
            99_999_999,
            GrpcUnit::Nanos,
        ),
    ];
    for &(text, duration, value, unit) in cases {
        let t = GrpcTimeout::parse(text.as_bytes()).unwrap();
        assert_eq!(
            (t.duration(), t.value(), t.unit()),
            (duration, value, unit),
            "{text}"
        );
        assert_eq!(text.parse::<GrpcTimeout>(), Ok(t));
        // The value is held in canonical form: no leading zeros.
        let canonical = text.trim_start_matches('0');
        let canonical = if canonical.len() == 1 {
            format!("0{canonical}")
        } else {
            canonical.to_owned()
        };
        assert_eq!(t.as_str(), canonical, "{text}");
        assert_eq!(t.to_string(), canonical);
        assert_eq!(t.as_bytes(), canonical.as_bytes());
    }
}

#[test]
fn grpc_timeout_hostile_largest_value_decodes_without_overflow() {
    let t = GrpcTimeout::parse(b"99999999H").unwrap();
    let expected_nanos = 99_999_999u128 * 3_600 * 1_000_000_000;
    assert_eq!(t.duration().as_nanos(), expected_nanos);

    // Clamped by the server's maximum, whatever the clock reads.
    let server = Propagation::DEFAULT
        .with_allowance(ms(0))
        .with_max(Duration::from_secs(30));
    for now in [Instant::ZERO, Instant::from_secs(1), Instant::MAX] {
        let local = server.decode_grpc_timeout(b"99999999H", now).unwrap();
        assert!(local.remaining(now) <= server.max());
        assert!(local.instant() >= now);
    }
    // With no maximum at all, the deadline saturates at the end of time instead of wrapping.
    let open = Propagation::DEFAULT
        .with_allowance(ms(0))
        .with_max(Duration::MAX);
    let near_end = Instant::from_micros(u64::MAX - 5);
    let local = open.decode_grpc_timeout(b"99999999H", near_end).unwrap();
    assert_eq!(local, Deadline::NEVER);
}

#[test]
fn grpc_timeout_encodes_the_most_precise_unit_that_fits() {
    let cases: &[(Duration, &str)] = &[
        (Duration::from_nanos(1), "1n"),
        (Duration::from_nanos(99_999_999), "99999999n"),
        (Duration::from_nanos(100_000_000), "100000u"),
        (Duration::from_nanos(100_000_999), "100000u"),
        (Duration::from_nanos(99_999_999_999), "99999999u"),
        (Duration::from_micros(100_000_000), "100000m"),
        (Duration::from_millis(99_999_999), "99999999m"),
        (Duration::from_millis(100_000_000), "100000S"),
        (Duration::from_secs(99_999_999), "99999999S"),
        (Duration::from_secs(100_000_000), "1666666M"),
        (Duration::from_secs(99_999_999 * 60), "99999999M"),
        (Duration::from_secs(100_000_000 * 60), "1666666H"),
        (Duration::from_secs(99_999_999 * 3_600), "99999999H"),
        (Duration::from_secs(100_000_000 * 3_600), "99999999H"),
        (Duration::MAX, "99999999H"),
        (ms(50), "50000000n"),
        (ms(110), "110000u"),
        (ms(2_000), "2000000u"),
    ];
    for &(d, expected) in cases {
        let t = GrpcTimeout::from_duration(d).unwrap();
        assert_eq!(t.as_str(), expected, "{d:?}");
        assert_eq!(GrpcTimeout::try_from(d), Ok(t));
        assert!(t.duration() <= d, "{d:?} sent as {t}");
    }
}

#[test]
fn grpc_timeout_never_encodes_zero() {
    assert_eq!(
        GrpcTimeout::from_duration(Duration::ZERO),
        Err(WireError::Spent)
    );
    assert_eq!(GrpcTimeout::try_from(Duration::ZERO), Err(WireError::Spent));
}

#[test]
fn deadline_ms_decodes_digits_only_and_rejects_overflow() {
    let rejected: &[(&[u8], WireError)] = &[
        (b"", WireError::Empty),
        (b" 5", WireError::Whitespace),
        (b"5 ", WireError::Whitespace),
        (b"5\t0", WireError::Whitespace),
        (b"+5", WireError::Sign),
        (b"-5", WireError::Sign),
        (b"5ms", WireError::InvalidDigit),
        (b"5.0", WireError::InvalidDigit),
        (b"1e3", WireError::InvalidDigit),
        ("٥".as_bytes(), WireError::InvalidDigit),
        (b"000000000000000000001", WireError::TooManyDigits),
        (b"184467440737095516150", WireError::TooManyDigits),
        // 20 digits, but past u64::MAX milliseconds: rejected like the 21-digit values, never
        // read as u64::MAX.
        (b"18446744073709551616", WireError::TooLarge),
        (b"99999999999999999999", WireError::TooLarge),
    ];
    for &(value, expected) in rejected {
        assert_eq!(DeadlineMs::parse(value), Err(expected), "{value:?}");
        let server = Propagation::DEFAULT
            .with_allowance(ms(0))
            .with_max(ms(1_000));
        assert_eq!(
            server.decode_deadline_ms(value, Instant::ZERO),
            Err(expected)
        );
    }

    let accepted: &[(&str, u64)] = &[
        ("0", 0),
        ("850", 850),
        ("0000850", 850),
        ("18446744073709551615", u64::MAX),
        ("00000000000000000850", 850),
    ];
    for &(text, millis) in accepted {
        let v: DeadlineMs = text.parse().unwrap();
        assert_eq!(v.millis(), millis, "{text}");
        assert_eq!(v.duration(), Duration::from_millis(millis));
        assert_eq!(v.as_str(), millis.to_string());
    }
}

#[test]
fn deadline_ms_encodes_whole_milliseconds_rounded_down_never_zero() {
    let cases: &[(Duration, Result<&str, WireError>)] = &[
        (Duration::ZERO, Err(WireError::Spent)),
        (Duration::from_nanos(1), Err(WireError::Spent)),
        (Duration::from_micros(999), Err(WireError::Spent)),
        (Duration::from_micros(1_000), Ok("1")),
        (Duration::from_micros(1_999), Ok("1")),
        (ms(850), Ok("850")),
        (Duration::MAX, Ok("18446744073709551615")),
    ];
    for &(d, expected) in cases {
        let got = DeadlineMs::from_duration(d);
        assert_eq!(
            got.map(|v| v.to_string()),
            expected.map(str::to_owned),
            "{d:?}"
        );
        assert_eq!(DeadlineMs::try_from(d), got);
    }
}

#[test]
fn propagation_subtracts_the_allowance_before_sending() {
    let hop = Propagation::DEFAULT
        .with_allowance(ms(5))
        .with_max(ms(10_000));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    for now_ms in [0u64, 100, 194] {
        let now = Instant::from_millis(now_ms);
        let left = deadline.remaining(now);
        assert_eq!(hop.outgoing(deadline, now), Ok(left - hop.allowance()));
        let sent = hop.encode_deadline_ms(deadline, now).unwrap();
        assert_eq!(sent.duration(), left - hop.allowance());
        let sent = hop.encode_grpc_timeout(deadline, now).unwrap();
        assert_eq!(sent.duration(), left - hop.allowance());
    }
    // Within the allowance of the deadline, at it, or past it: nothing is sent.
    for now_ms in [195u64, 199, 200, 10_000] {
        let now = Instant::from_millis(now_ms);
        assert_eq!(hop.outgoing(deadline, now), Err(WireError::Spent));
        assert_eq!(
            hop.encode_grpc_timeout(deadline, now),
            Err(WireError::Spent)
        );
        assert_eq!(hop.encode_deadline_ms(deadline, now), Err(WireError::Spent));
    }
    // 0.5 ms after the allowance is something for grpc-timeout, nothing for x-deadline-ms.
    let now = Instant::from_micros(194_500);
    assert_eq!(
        hop.encode_grpc_timeout(deadline, now).map(|t| t.duration()),
        Ok(Duration::from_micros(500))
    );
    assert_eq!(hop.encode_deadline_ms(deadline, now), Err(WireError::Spent));
}

/// What a request was told is what its header says, rounded down to the header's unit, not
/// the budget it was written from: a next service (behind the same library) that runs out of
/// that time answers its reply margin before it, and that answer, back after a little
/// latency, is within the allowance of what was sent: the deadline's, not a failed
/// dependency. With the budget's unrounded end it was up to a millisecond outside.
#[test]
fn a_next_service_that_runs_out_answers_within_the_allowance_of_what_it_was_told() {
    use deadline_core::wire::{DeadlineHeader, Failure, ResponseHead, ServerPolicy};

    let hop = Propagation::DEFAULT
        .with_allowance(ms(5))
        .with_max(ms(10_000));
    let next = ServerPolicy::new(hop, ms(1_000));
    let request = Deadline::after(Instant::ZERO, ms(200));
    let latency = Duration::from_micros(100);
    let gateway_timeout = Failure::Response(ResponseHead::read(504, |_| None));
    // Sent at every microsecond offset in one millisecond: the budget's fraction of a
    // millisecond is what the millisecond header drops.
    for offset in (0..1_000).step_by(7) {
        let now = Instant::from_micros(20_000 + offset);
        for header in [
            DeadlineHeader::DeadlineMs,
            DeadlineHeader::ConnectTimeout,
            DeadlineHeader::GrpcTimeout,
            DeadlineHeader::Both,
        ] {
            let out = hop.send(request, now, Incoming::NONE, header).unwrap();
            let sent = out.sent();
            // The next service reads the headers as they are written, the earliest first.
            let told = out
                .headers()
                .filter_map(|(name, value)| match name {
                    "x-deadline-ms" => DeadlineMs::parse(value).ok().map(|t| t.duration()),
                    "grpc-timeout" => GrpcTimeout::parse(value).ok().map(|t| t.duration()),
                    _ => deadline_core::wire::ConnectTimeout::parse(value)
                        .ok()
                        .map(|t| t.duration()),
                })
                .min()
                .unwrap();
            assert_eq!(sent.until(), now + told, "{header:?} at {now:?}");
            // It arrives one latency later, and its handler's deadline is the reply margin
            // before what it was told: there it answers 504, one latency from here.
            let arrived = now + latency;
            let answered = arrived + told - next.reply_margin();
            let back = answered + latency;
            assert!(
                sent.is_deadline_failure(gateway_timeout, back),
                "{header:?} at {now:?}: told {told:?}, back at {back:?}, sent until {:?}",
                sent.until()
            );
            // A failure well before then is the dependency's own.
            assert!(!sent.is_deadline_failure(gateway_timeout, now + ms(50)));
        }
    }
}

#[test]
fn propagation_clamps_incoming_budgets_to_the_maximum() {
    let server = Propagation::DEFAULT
        .with_allowance(ms(0))
        .with_max(ms(1_000));
    let now = Instant::from_millis(40);
    for (budget, expected) in [
        (ms(0), ms(0)),
        (ms(250), ms(250)),
        (ms(1_000), ms(1_000)),
        (ms(1_001), ms(1_000)),
        (Duration::MAX, ms(1_000)),
    ] {
        let local = server.incoming(budget, now);
        assert_eq!(local.remaining(now), expected, "{budget:?}");
        assert_eq!(local.is_expired(now), expected.is_zero());
    }
    let local = server.decode_deadline_ms(b"86400000", now).unwrap();
    assert_eq!(local.remaining(now), server.max());
    let local = server.decode_grpc_timeout(b"250m", now).unwrap();
    assert_eq!(local.remaining(now), ms(250));
}

#[test]
fn a_call_timeout_travels_to_the_callee_shortened_by_the_allowance() {
    // The checkout example: B gets 110 ms at 10 ms; the callee, on another clock, gets 110 ms minus the
    // network's share.
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let request = Deadline::after(Instant::ZERO, ms(200));
    let start = Instant::from_millis(10);
    let limits = call_timeout(&b, request, ms(20), start).limits().unwrap();

    let hop = Propagation::DEFAULT
        .with_allowance(ms(3))
        .with_max(ms(60_000));
    let header = hop.encode_grpc_timeout(limits.deadline(), start).unwrap();
    let callee_now = Instant::from_secs(1_000);
    let callee = hop
        .decode_grpc_timeout(header.as_bytes(), callee_now)
        .unwrap();
    assert_eq!(
        callee.remaining(callee_now),
        limits.timeout() - hop.allowance()
    );
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grpc_timeout_decoding_never_panics_on_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let decoded = GrpcTimeout::parse(&bytes);
        prop_assert_eq!(decoded.ok().map(|t| t.duration().as_nanos()), grammar(&bytes));
        let _ = Propagation::DEFAULT.with_allowance(ms(1)).with_max(Duration::MAX).decode_grpc_timeout(&bytes, Instant::MAX);
    }

    #[test]
    fn grpc_timeout_decoding_matches_the_grammar_on_near_misses(
        text in "[0-9HMSmunsh +\\-]{0,12}",
    ) {
        let decoded = GrpcTimeout::parse(text.as_bytes());
        prop_assert_eq!(decoded.ok().map(|t| t.duration().as_nanos()), grammar(text.as_bytes()));
        if let Ok(t) = decoded {
            // The canonical text decodes to the same value.
            prop_assert_eq!(GrpcTimeout::parse(t.as_bytes()).map(|u| u.duration()), Ok(t.duration()));
        }
    }

    #[test]
    fn deadline_ms_decoding_never_panics_on_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..24),
    ) {
        let decoded = DeadlineMs::parse(&bytes);
        let well_formed = !bytes.is_empty() && bytes.len() <= 20 && bytes.iter().all(u8::is_ascii_digit);
        let exact: Option<u128> = well_formed
            .then(|| core::str::from_utf8(&bytes).unwrap().parse().unwrap());
        let fits = exact.is_some_and(|e| e <= u128::from(u64::MAX));
        prop_assert_eq!(decoded.is_ok(), fits);
        if let Ok(v) = decoded {
            prop_assert_eq!(Some(u128::from(v.millis())), exact);
        }
        if well_formed && !fits {
            prop_assert_eq!(decoded, Err(WireError::TooLarge));
        }
        let _ = Propagation::DEFAULT.with_allowance(ms(1)).with_max(Duration::MAX).decode_deadline_ms(&bytes, Instant::MAX);
    }

    #[test]
    fn deadline_ms_decoding_on_digit_strings(text in "[0-9+\\- ]{0,22}") {
        let decoded = DeadlineMs::parse(text.as_bytes());
        let well_formed = !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit());
        let fits = well_formed && text.parse::<u64>().is_ok();
        prop_assert_eq!(decoded.is_ok(), fits);
    }

    #[test]
    fn deadline_ms_overflow_is_rejected_never_saturated(
        excess in 1u128..=u128::from(u64::MAX) * 4,
    ) {
        // Every 20-digit value past u64::MAX milliseconds is rejected, the way a 21-digit
        // value is: no value past the largest decodes to it.
        let value = u128::from(u64::MAX) + excess;
        let text = value.to_string();
        prop_assume!(text.len() <= DeadlineMs::MAX_DIGITS);
        prop_assert_eq!(DeadlineMs::parse(text.as_bytes()), Err(WireError::TooLarge));
        let server = Propagation::DEFAULT.with_allowance(ms(0)).with_max(Duration::MAX);
        prop_assert_eq!(server.decode_deadline_ms(text.as_bytes(), Instant::ZERO), Err(WireError::TooLarge));
    }

    #[test]
    fn grpc_timeout_round_trip_loses_less_than_one_unit(
        secs in prop_oneof![0u64..200_000, any::<u64>()],
        nanos in prop_oneof![0u32..1_000, 0u32..1_000_000_000],
    ) {
        let d = Duration::new(secs, nanos);
        prop_assume!(!d.is_zero());
        let sent = GrpcTimeout::from_duration(d).unwrap();
        prop_assert!(sent.value() > 0);
        prop_assert!(sent.as_bytes().len() <= 9);
        let back = GrpcTimeout::parse(sent.as_bytes()).unwrap();
        prop_assert_eq!(back, sent);
        let per_unit = unit_nanos(sent.unit().as_byte()).unwrap();
        let (d_ns, back_ns) = (d.as_nanos(), back.duration().as_nanos());
        prop_assert!(back_ns <= d_ns);
        let largest = 99_999_999u128 * 3_600 * 1_000_000_000;
        if d_ns <= largest {
            prop_assert!(d_ns - back_ns < per_unit, "{:?} sent as {}", d, sent);
        } else {
            prop_assert_eq!(back_ns, largest);
        }
        // The most precise unit that fits: the next finer one would need 9 digits.
        let finer = GrpcUnit::ALL.iter().rev().skip_while(|&&u| u != sent.unit()).nth(1);
        if let Some(finer) = finer {
            let finer_ns = unit_nanos(finer.as_byte()).unwrap();
            prop_assert!(d_ns / finer_ns > 99_999_999, "{:?} sent as {}", d, sent);
        }
    }

    #[test]
    fn deadline_ms_round_trip_loses_less_than_one_millisecond(
        secs in prop_oneof![0u64..100_000, any::<u64>()],
        nanos in 0u32..1_000_000_000,
    ) {
        let d = Duration::new(secs, nanos);
        match DeadlineMs::from_duration(d) {
            Ok(sent) => {
                let back = DeadlineMs::parse(sent.as_bytes()).unwrap();
                prop_assert_eq!(back, sent);
                prop_assert!(back.duration() <= d);
                if d.as_millis() <= u128::from(u64::MAX) {
                    prop_assert!(d - back.duration() < ms(1));
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

        match hop.outgoing(deadline, now) {
            Ok(sent) => {
                prop_assert_eq!(sent, limit);
                prop_assert!(!sent.is_zero());
            }
            Err(e) => {
                prop_assert_eq!(e, WireError::Spent);
                prop_assert!(limit.is_zero());
            }
        }
        match hop.encode_grpc_timeout(deadline, now) {
            Ok(t) => {
                prop_assert!(t.duration() <= limit && !t.duration().is_zero());
                let local = hop.decode_grpc_timeout(t.as_bytes(), receiver_now).unwrap();
                prop_assert!(local.remaining(receiver_now) <= t.duration().min(hop.max()));
            }
            Err(e) => prop_assert!(e == WireError::Spent && limit.is_zero()),
        }
        match hop.encode_deadline_ms(deadline, now) {
            Ok(v) => {
                prop_assert!(v.duration() <= limit && !v.duration().is_zero());
                let local = hop.decode_deadline_ms(v.as_bytes(), receiver_now).unwrap();
                prop_assert!(local.remaining(receiver_now) <= v.duration().min(hop.max()));
            }
            Err(e) => prop_assert!(e == WireError::Spent && limit < ms(1)),
        }
    }
}

/// The encoding by its definition, in 128-bit nanoseconds: the finest unit whose count fits
/// 8 digits. The encoder works in 64-bit arithmetic and must agree with it everywhere.
fn encode_oracle(left: Duration) -> Option<(u32, GrpcUnit)> {
    let nanos = left.as_nanos();
    if nanos == 0 {
        return None;
    }
    for unit in GrpcUnit::ALL {
        let count = nanos / unit.as_duration().as_nanos();
        if count <= u128::from(GrpcTimeout::MAX_VALUE) {
            return Some((u32::try_from(count).unwrap(), unit));
        }
    }
    Some((GrpcTimeout::MAX_VALUE, GrpcUnit::Hours))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grpc_timeout_encoding_agrees_with_its_definition(
        secs in prop_oneof![0u64..200, 0u64..200_000, 0u64..10_000_000_000, any::<u64>()],
        nanos in 0u32..1_000_000_000,
    ) {
        let left = Duration::new(secs, nanos);
        let encoded = GrpcTimeout::from_duration(left).ok().map(|t| (t.value(), t.unit()));
        prop_assert_eq!(encoded, encode_oracle(left));
    }

    #[test]
    fn a_parsed_grpc_timeout_writes_its_canonical_form(value in 0u32..=GrpcTimeout::MAX_VALUE, zeros in 0usize..3, unit in prop::sample::select(GrpcUnit::ALL.to_vec())) {
        let text = format!("{}{value}{}", "0".repeat(zeros), char::from(unit.as_byte()));
        let parsed = GrpcTimeout::parse(text.as_bytes());
        if text.len() > 9 {
            prop_assert_eq!(parsed, Err(WireError::TooManyDigits));
        } else {
            let parsed = parsed.unwrap();
            prop_assert_eq!((parsed.value(), parsed.unit()), (value, unit));
            prop_assert_eq!(parsed.as_str(), format!("{value}{}", char::from(unit.as_byte())));
        }
    }
}

/// The codec a request names is read from its content type's suffix, in any case, before its
/// parameters; no suffix is protobuf. An answer names protobuf and JSON itself, and repeats
/// the request's own content type for any other codec, which a client checks before it reads
/// the status.
#[test]
fn a_requests_codec_decides_the_answers_content_type() {
    use deadline_core::Error;
    use deadline_core::wire::{Answer, Codec, ContentType, Protocol};

    let read = |value: &'static [u8]| {
        Protocol::read(|| None, |name| (name == "content-type").then_some(value))
    };
    let grpc = |codec| Protocol::Grpc { codec };
    // (content type sent, protocol read, whether the answer repeats it)
    let cases: [(&[u8], Protocol, bool); 10] = [
        (b"application/grpc", grpc(Codec::Proto), false),
        (b"application/grpc;charset=utf-8", grpc(Codec::Proto), false),
        (b"application/grpc+PROTO", grpc(Codec::Proto), false),
        (
            b"application/grpc+json; charset=utf-8",
            grpc(Codec::Json),
            false,
        ),
        (b"application/grpc+json5", grpc(Codec::Other), true),
        (b"application/grpc+cbor", grpc(Codec::Other), true),
        (b"application/grpc+", grpc(Codec::Other), true),
        (
            b"application/grpc-web-text+thrift",
            Protocol::GrpcWeb {
                text: true,
                codec: Codec::Other,
            },
            true,
        ),
        (
            b"application/connect+cbor",
            Protocol::ConnectStream {
                codec: Codec::Other,
            },
            true,
        ),
        (
            b"application/connect+Json",
            Protocol::ConnectStream { codec: Codec::Json },
            false,
        ),
    ];
    for (sent, protocol, repeats) in cases {
        let text = core::str::from_utf8(sent).unwrap();
        assert_eq!(read(sent), protocol, "{text}");
        assert_eq!(protocol.answer_repeats_content_type(), repeats, "{text}");
        match Answer::new(protocol, Error::DeadlineExceeded).content_type() {
            ContentType::Request { fallback } => {
                assert!(repeats, "{text}");
                // Protobuf's name in the same protocol, for a server that cannot keep the
                // request's own.
                let fallback = read(fallback.as_bytes().to_vec().leak());
                assert!(!fallback.answer_repeats_content_type(), "{text}");
            }
            ContentType::Fixed(fixed) => {
                assert!(!repeats, "{text}");
                // The fixed name reads back as the same protocol and codec.
                assert_eq!(read(fixed.as_bytes().to_vec().leak()), protocol, "{text}");
            }
        }
    }
    // Unary protocols have a content type of their own, whatever the request's.
    for protocol in [Protocol::ConnectUnary, Protocol::Http] {
        assert!(!protocol.answer_repeats_content_type());
        assert!(matches!(
            Answer::new(protocol, Error::DeadlineExceeded).content_type(),
            ContentType::Fixed(_)
        ));
    }
}

/// Envoy's `x-envoy-upstream-rq-timeout-ms` is a client's header: a request about to be sent
/// has it written down to the time sent, whatever it held (a longer route timeout, Envoy's "no
/// timeout" `0`, or a value that cannot be read, replaced rather than failing the call); a
/// server never reads its budget from it (Envoy takes it off the request).
#[test]
fn envoys_upstream_timeout_is_written_down_and_never_a_servers_budget() {
    let hop = Propagation::DEFAULT.with_allowance(ms(5));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    for held in [&b"30000"[..], b"0", b"soon", b" 250 "] {
        let already =
            Incoming::read_outgoing(|name| (name == ENVOY_UPSTREAM_RQ_TIMEOUT_MS).then_some(held));
        let out = hop
            .send(deadline, Instant::ZERO, already, DeadlineHeader::DeadlineMs)
            .unwrap();
        let headers: Vec<_> = out.headers().collect();
        assert_eq!(
            headers,
            [
                (X_DEADLINE_MS, &b"195"[..]),
                (ENVOY_UPSTREAM_RQ_TIMEOUT_MS, b"195")
            ],
            "{held:?}"
        );
    }
    // Under a millisecond to send: the call is not made, as with the other millisecond
    // headers.
    let already = Incoming::read_outgoing(|name| {
        (name == ENVOY_UPSTREAM_RQ_TIMEOUT_MS).then_some(&b"30000"[..])
    });
    let close = Deadline::after(Instant::ZERO, ms(5) + Duration::from_micros(500));
    assert_eq!(
        hop.send(close, Instant::ZERO, already, DeadlineHeader::GrpcTimeout),
        Err(WireError::Spent)
    );
    // A server reads no budget from it.
    let incoming =
        Incoming::read(|name| (name == ENVOY_UPSTREAM_RQ_TIMEOUT_MS).then_some(&b"1"[..]));
    assert_eq!(incoming.budget(), Ok(None));
}
