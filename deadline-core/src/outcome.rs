//! [`Outcome`](crate::Outcome): how a failed attempt ended, as far as retrying is concerned, and the server's

use core::time::Duration;

/// How a failed attempt ended, as far as retrying is concerned.
///
/// The caller (or the driver's classifier) maps its own errors onto these. The difference
/// between them is whether the attempt may have run on the server, which decides whether a
/// call that is not idempotent may be repeated.
///
/// [`Pushback`], with the parsers of the headers that carry it (`Retry-After`,
/// `grpc-retry-pushback-ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Outcome {
    /// The attempt ran out of time: its timeout fired, or a limit of its own did (a socket's
    /// read timeout set from its limits, its connect limit). Counted as a timeout, and the
    /// call's error is the library's timeout, as when the driver cuts an attempt off. The
    /// server may have run it (and succeeded): not retried for a non-idempotent call unless
    /// [`RetryPolicy::retry_non_idempotent`](crate::RetryPolicy::retry_non_idempotent).
    TimedOut,
    /// The attempt provably did not reach the server: connection refused, no route, a name
    /// that did not resolve. Safe to retry, idempotent or not.
    Refused,
    /// The server answered with a failure a retry may fix (a 500, 502 or 503; gRPC
    /// `UNAVAILABLE`), or the connection broke after the request was sent. It may have acted
    /// on the request before failing, so a non-idempotent call is treated as for
    /// [`Outcome::TimedOut`].
    Failed,
    /// The server declined the request and said when to come back, or not to: an HTTP 429 or
    /// 503 with `Retry-After`, or gRPC's `grpc-retry-pushback-ms`. The server did not act on
    /// it, so it may be retried even if not idempotent.
    Pushback(Pushback),
    /// A failure a retry would not fix (a 4xx other than 408 and 429, gRPC
    /// `INVALID_ARGUMENT`, `NOT_FOUND`, `PERMISSION_DENIED`...). Never retried.
    Fatal,
}

/// A server's word on when to retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Pushback {
    /// Retry no sooner than this long after the failure. The wait before the retry is the
    /// longer of this and the policy's backoff.
    After(Duration),
    /// Do not retry (and send no further hedges).
    DontRetry,
}

/// Parses an HTTP `Retry-After` value in its delay-seconds form (RFC 9110 §10.2.3:
/// `1*DIGIT`, optional whitespace around it), saturating on overflow.
///
/// Returns `None` for the HTTP-date form and for anything malformed: turning a date into a
/// delay needs the wall clock, which the core does not read. A caller that has one may
/// subtract it and build [`Pushback::After`] itself. `None` means "no pushback": classify the
/// response as [`Outcome::Failed`].
///
/// ```
/// use deadline_core::{Pushback, ms, parse_retry_after};
///
/// assert_eq!(parse_retry_after(b"120"), Some(Pushback::After(ms(120_000))));
/// assert_eq!(parse_retry_after(b" 3 "), Some(Pushback::After(ms(3_000))));
/// assert_eq!(parse_retry_after(b"Fri, 31 Dec 1999 23:59:59 GMT"), None);
/// assert_eq!(parse_retry_after(b"-1"), None);
/// ```
#[must_use]
pub fn parse_retry_after(value: &[u8]) -> Option<Pushback> {
    let digits = value.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    let mut secs: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        secs = secs
            .saturating_mul(10)
            .saturating_add(u64::from(b.wrapping_sub(b'0')));
    }
    Some(Pushback::After(Duration::from_secs(secs)))
}

/// Parses gRPC's `grpc-retry-pushback-ms` value (gRFC A6): a signed 32-bit decimal integer of
/// milliseconds to wait before retrying.
///
/// As A6 says, a negative value, or one that does not parse (empty, not decimal, outside the
/// `i32` range), means the server asks the client not to retry at all. Surrounding ASCII
/// whitespace is ignored; a leading `+` or a leading zero is accepted.
///
/// ```
/// use deadline_core::{Pushback, ms, parse_grpc_pushback};
///
/// assert_eq!(parse_grpc_pushback(b"250"), Pushback::After(ms(250)));
/// assert_eq!(parse_grpc_pushback(b"-1"), Pushback::DontRetry);
/// assert_eq!(parse_grpc_pushback(b"soon"), Pushback::DontRetry);
/// assert_eq!(parse_grpc_pushback(b"2147483648"), Pushback::DontRetry);
/// ```
#[must_use]
pub fn parse_grpc_pushback(value: &[u8]) -> Pushback {
    let text = value.trim_ascii();
    let Ok(text) = core::str::from_utf8(text) else {
        return Pushback::DontRetry;
    };
    match text.parse::<i32>() {
        Ok(ms) => match u64::try_from(ms) {
            Ok(ms) => Pushback::After(Duration::from_millis(ms)),
            Err(_) => Pushback::DontRetry,
        },
        Err(_) => Pushback::DontRetry,
    }
}
