//! Properties of the `grpc-timeout` and `x-deadline-ms` codecs and of the `Retry-After` and
//! `grpc-retry-pushback-ms` parsers, over arbitrary bytes.
//!
//! One copy of each property, used twice: by the cargo-fuzz targets (`fuzz/fuzz_targets`) and
//! by the proptest suite that CI runs on stable (`deadline-core/tests/fuzz_wire.rs`). Each
//! `check_*` function panics when a property fails; that is the whole interface.

#![allow(dead_code, unreachable_pub)]

use core::time::Duration;

use deadline_core::wire::{DeadlineMs, GrpcTimeout, GrpcUnit, Propagation, WireError};
use deadline_core::wire::{parse_grpc_pushback, parse_retry_after};
use deadline_core::{Deadline, Error, Instant, Pushback};

/// The most a server in these properties believes: 30 s.
pub const SERVER_MAX: Duration = Duration::from_secs(30);
/// What a client in these properties keeps back for the network: 5 ms.
pub const ALLOWANCE: Duration = Duration::from_millis(5);

const SERVER: Propagation = Propagation::DEFAULT
    .with_allowance(ALLOWANCE)
    .with_max(SERVER_MAX);

/// Arrival times to decode at: the origin, an ordinary instant, and one a microsecond short of
/// the end of time (where `now + budget` must saturate, not wrap or panic).
const NOWS: [Instant; 3] = [
    Instant::ZERO,
    Instant::from_secs(7),
    Instant::from_micros(u64::MAX - 1),
];

/// Little-endian `u64` from up to 8 bytes of `data` starting at `at` (missing bytes are 0).
pub fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    for (slot, byte) in word.iter_mut().zip(data.iter().skip(at)) {
        *slot = *byte;
    }
    u64::from_le_bytes(word)
}

/// A duration spread over the whole range from the bytes: whole seconds from the first 8
/// (shifted right by a count taken from byte 12, so that small values are common too), and
/// nanoseconds from the next 4.
pub fn duration_from(data: &[u8]) -> Duration {
    let shift = u32::from(data.get(12).copied().unwrap_or(0) % 64);
    let secs = u64_at(data, 0) >> shift;
    let nanos = u32::try_from(u64_at(data, 8) & 0xffff_ffff).unwrap_or(0) % 1_000_000_000;
    Duration::new(secs, nanos)
}

/// Whether `bytes` is 1 or more ASCII digits.
fn all_digits(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit)
}

/// The number `digits` spells (at most 38 digits, which `u128` holds).
fn number(digits: &[u8]) -> u128 {
    digits
        .iter()
        .fold(0u128, |acc, d| acc * 10 + u128::from(d - b'0'))
}

/// `grpc-timeout`, decoding `data` as a header value and encoding a duration made from it.
///
/// - Decoding never panics. A value is accepted exactly when it is 1 to 8 ASCII digits and a
///   unit among `H M S m u n`, and then stands for the number the digits spell, in that unit.
///   Its canonical text re-decodes to the same value, and holds only digits and the unit.
/// - A rejected value is a malformed deadline (HTTP 400, gRPC `INVALID_ARGUMENT`), never
///   `Spent`.
/// - The local deadline made from an accepted value, at any arrival time, is never more than
///   the value and never more than the server's maximum.
/// - Encoding a duration and decoding it again gives back at most that duration, and less by
///   under one unit of the unit chosen (or exactly `99999999H` for a longer one); only zero
///   is refused.
/// - What a client sends for a deadline is never more than the time left less the allowance;
///   it sends nothing only when that is zero.
pub fn check_grpc_timeout(data: &[u8]) {
    match GrpcTimeout::parse(data) {
        Ok(timeout) => {
            let (last, digits) = data.split_last().expect("an accepted value is not empty");
            assert_eq!(GrpcUnit::from_byte(*last), Some(timeout.unit()));
            assert!(all_digits(digits) && digits.len() <= GrpcTimeout::MAX_DIGITS);
            assert_eq!(u128::from(timeout.value()), number(digits));
            assert_eq!(
                timeout.duration(),
                timeout.unit().times(u64::from(timeout.value()))
            );
            let text = timeout.as_bytes();
            let (unit, value) = text.split_last().expect("the text has a unit");
            assert!(all_digits(value) && *unit == timeout.unit().as_byte());
            assert_eq!(GrpcTimeout::parse(text), Ok(timeout));
            for now in NOWS {
                let local = SERVER
                    .decode_grpc_timeout(data, now)
                    .expect("accepted above");
                assert!(local.remaining(now) <= SERVER_MAX);
                assert!(local.remaining(now) <= timeout.duration());
            }
        }
        Err(error) => {
            assert_ne!(error, WireError::Spent);
            assert_eq!(Error::from(error), Error::MalformedDeadline);
            assert_eq!(Error::from(error).http_status(), 400);
            let well_formed = data.split_last().is_some_and(|(last, digits)| {
                GrpcUnit::from_byte(*last).is_some()
                    && all_digits(digits)
                    && digits.len() <= GrpcTimeout::MAX_DIGITS
            });
            assert!(!well_formed, "a well-formed value was rejected: {error:?}");
            assert_eq!(SERVER.decode_grpc_timeout(data, Instant::ZERO), Err(error));
        }
    }

    let left = duration_from(data);
    match GrpcTimeout::from_duration(left) {
        Ok(sent) => {
            let back = GrpcTimeout::parse(sent.as_bytes()).expect("what is sent decodes");
            assert_eq!(back.duration(), sent.duration());
            assert!(sent.value() >= 1);
            assert!(back.duration() <= left);
            let longest = GrpcUnit::Hours.times(u64::from(GrpcTimeout::MAX_VALUE));
            if left < longest {
                assert!(left - back.duration() < sent.unit().as_duration());
            } else {
                assert_eq!(back.duration(), longest);
            }
        }
        Err(error) => {
            assert_eq!(error, WireError::Spent);
            assert!(left.is_zero());
        }
    }

    let now = Instant::from_micros(u64_at(data, 4) >> 8);
    let deadline = Deadline::after(now, left);
    let budget = deadline.remaining(now).saturating_sub(ALLOWANCE);
    match SERVER.encode_grpc_timeout(deadline, now) {
        Ok(sent) => assert!(sent.duration() <= budget && !budget.is_zero()),
        Err(error) => assert!(error == WireError::Spent && budget.is_zero()),
    }
}

/// `x-deadline-ms`, decoding `data` and encoding a duration made from it.
///
/// - Decoding never panics; a value is accepted exactly when it is 1 to 20 ASCII digits that
///   spell at most `u64::MAX` milliseconds, and stands for that number (a larger one is
///   rejected, never read as the largest). Its text re-decodes to the same value and holds
///   only digits.
/// - A rejected value is a malformed deadline (400), never `Spent`.
/// - A decoded local deadline is never more than the value or the server's maximum.
/// - Encoding rounds down to whole milliseconds (less by under 1 ms), refusing only less
///   than 1 ms; what a client sends is never more than the time left less the allowance.
pub fn check_deadline_ms(data: &[u8]) {
    match DeadlineMs::parse(data) {
        Ok(value) => {
            assert!(all_digits(data) && data.len() <= DeadlineMs::MAX_DIGITS);
            assert_eq!(u128::from(value.millis()), number(data));
            assert!(all_digits(value.as_bytes()));
            assert_eq!(DeadlineMs::parse(value.as_bytes()), Ok(value));
            for now in NOWS {
                let local = SERVER
                    .decode_deadline_ms(data, now)
                    .expect("accepted above");
                assert!(local.remaining(now) <= SERVER_MAX);
                assert!(local.remaining(now) <= value.duration());
            }
        }
        Err(error) => {
            assert_ne!(error, WireError::Spent);
            assert_eq!(Error::from(error), Error::MalformedDeadline);
            let fits = all_digits(data)
                && data.len() <= DeadlineMs::MAX_DIGITS
                && number(data) <= u128::from(u64::MAX);
            assert!(!fits, "a well-formed value was rejected: {error:?}");
            if error == WireError::TooLarge {
                assert!(number(data) > u128::from(u64::MAX));
            }
        }
    }

    let left = duration_from(data);
    match DeadlineMs::from_duration(left) {
        Ok(sent) => {
            let back = DeadlineMs::parse(sent.as_bytes()).expect("what is sent decodes");
            assert_eq!(back, sent);
            assert!(back.millis() >= 1);
            assert!(back.duration() <= left);
            if left.as_millis() < u128::from(u64::MAX) {
                assert!(left - back.duration() < Duration::from_millis(1));
            }
        }
        Err(error) => {
            assert_eq!(error, WireError::Spent);
            assert!(left < Duration::from_millis(1));
        }
    }

    let now = Instant::from_micros(u64_at(data, 4) >> 8);
    let deadline = Deadline::after(now, left);
    let budget = deadline.remaining(now).saturating_sub(ALLOWANCE);
    match SERVER.encode_deadline_ms(deadline, now) {
        Ok(sent) => assert!(sent.duration() <= budget),
        Err(error) => assert!(error == WireError::Spent && budget < Duration::from_millis(1)),
    }
}

/// `Retry-After` (delay-seconds) and `grpc-retry-pushback-ms`, on `data` and on numbers made
/// from it.
///
/// - Neither parser panics.
/// - `Retry-After` gives a delay exactly when the value, less the whitespace around it, is 1
///   or more ASCII digits; the delay is the number they spell in seconds, saturated at
///   `u64::MAX` seconds. Every whole number of seconds, written with or without whitespace
///   around it, comes back as itself.
/// - `grpc-retry-pushback-ms` gives a delay exactly when the trimmed value is a decimal `i32`
///   of at least 0 (gRPC's rule: a negative or unreadable value means "do not retry"), so a
///   delay is never more than `i32::MAX` ms; every such number comes back as itself.
pub fn check_pushback(data: &[u8]) {
    let trimmed = data.trim_ascii();
    match parse_retry_after(data) {
        Some(Pushback::After(delay)) => {
            assert!(all_digits(trimmed));
            let significant: Vec<u8> = trimmed.iter().copied().skip_while(|d| *d == b'0').collect();
            let spelled = if significant.len() > 20 {
                u128::from(u64::MAX)
            } else {
                number(&significant).min(u128::from(u64::MAX))
            };
            assert_eq!(u128::from(delay.as_secs()), spelled);
            assert_eq!(delay.subsec_nanos(), 0);
        }
        Some(other) => panic!("Retry-After gives a delay or nothing, not {other:?}"),
        None => assert!(!all_digits(trimmed)),
    }

    let expected = core::str::from_utf8(trimmed)
        .ok()
        .and_then(|text| text.parse::<i32>().ok());
    match parse_grpc_pushback(data) {
        Pushback::After(delay) => {
            let ms = expected.expect("a delay comes from a number");
            assert!(ms >= 0);
            assert_eq!(delay, Duration::from_millis(u64::from(ms.unsigned_abs())));
            assert!(delay <= Duration::from_millis(i32::MAX as u64));
        }
        Pushback::DontRetry => assert!(expected.is_none_or(|ms| ms < 0)),
        other => panic!("grpc-retry-pushback-ms gives a delay or do-not-retry, not {other:?}"),
    }

    let secs = u64_at(data, 0);
    let pad = " \t"
        .get(..usize::from(data.first().copied().unwrap_or(0) % 3))
        .unwrap_or("");
    let text = format!("{pad}{secs}{pad}");
    assert_eq!(
        parse_retry_after(text.as_bytes()),
        Some(Pushback::After(Duration::from_secs(secs)))
    );
    let ms = i32::from_le_bytes((u64_at(data, 8) as u32).to_le_bytes());
    let text = format!("{pad}{ms}{pad}");
    let expected = match u64::try_from(ms) {
        Ok(ms) => Pushback::After(Duration::from_millis(ms)),
        Err(_) => Pushback::DontRetry,
    };
    assert_eq!(parse_grpc_pushback(text.as_bytes()), expected);
}
