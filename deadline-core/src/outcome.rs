//! [`Outcome`](crate::Outcome): how a failed attempt ended, as far as retrying is concerned, and the server's
//! word on when to come back ([`Pushback`]).

use core::time::Duration;

/// How a failed attempt ended, as far as retrying is concerned.
///
/// The caller (or the driver's classifier) maps its own errors onto these. The difference
/// between them is whether the attempt may have run on the server, which decides whether a
/// call that is not idempotent may be repeated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Outcome {
    /// The attempt ran out of time: its timeout fired, a limit of its own did (a socket's
    /// read timeout set from its limits, its connect limit), or the next service answered
    /// that its time ran out (an HTTP 504, gRPC `DEADLINE_EXCEEDED`:
    /// [`ResponseHead::classify`](crate::wire::ResponseHead::classify)). Counted as a timeout, and the
    /// call's error is the library's timeout, as when the driver cuts an attempt off. The
    /// server may have run it (and succeeded): not retried for a call that is not
    /// idempotent.
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
    /// A failure a retry would not fix (a 4xx other than 408 and 429, a 5xx other than 500,
    /// 502, 503 and 504, gRPC `INVALID_ARGUMENT`, `NOT_FOUND`, `PERMISSION_DENIED`...).
    /// Never retried.
    Fatal,
}

/// A server's word on when to retry (read from `Retry-After` and `grpc-retry-pushback-ms` by
/// [`wire::parse_retry_after`](crate::wire::parse_retry_after) and
/// [`wire::parse_grpc_pushback`](crate::wire::parse_grpc_pushback)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Pushback {
    /// Retry this long after the failure: the wait before the retry, in place of the
    /// policy's backoff, which starts over from its first step for any retry after that one
    /// (gRFC A6's "retry in n ms"; HTTP's `Retry-After` asks for no sooner, which this keeps).
    After(Duration),
    /// Do not retry (and send no further hedges).
    DontRetry,
}
