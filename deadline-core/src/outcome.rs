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
    /// `UNAVAILABLE`, or `CANCELLED`: the call cut short), or the connection was lost after
    /// the request was sent. One that comes at or after the end of its attempt is that attempt's
    /// timeout. It may have acted
    /// on the request before failing, so a non-idempotent call is treated as for
    /// [`Outcome::TimedOut`].
    Failed,
    /// The server declined the request and said when to come back, or not to: an HTTP 429 or
    /// 503 with `Retry-After`, or gRPC's `grpc-retry-pushback-ms`. The server did not act on
    /// it, so it may be retried even if not idempotent.
    Pushback(Pushback),
    /// The server's answer, final: the request as it stands is refused or cannot be served,
    /// and a retry would get the same (a 4xx other than 408 and 429, an HTTP 501 or 505, gRPC
    /// `INVALID_ARGUMENT`, `NOT_FOUND`, `PERMISSION_DENIED`, `UNIMPLEMENTED`...). Never
    /// retried, and not held against the dependency's circuit breaker: the dependency
    /// answered as it should.
    Fatal,
    /// The server failed in a way a retry would not fix: gRPC `INTERNAL`, `UNKNOWN` or
    /// `DATA_LOSS` (or a `grpc-status` that cannot be read), a Connect unary 500 (those
    /// three codes), an HTTP 5xx other than 500, 501, 502, 503, 504 and 505. Never retried,
    /// as [`Outcome::Fatal`], but held against the dependency's circuit breaker as a failure:
    /// a dependency that answers every call with `INTERNAL` is not healthy. A gRPC client
    /// reads an intermediary's failure so too (gRPC's table makes a bare HTTP 400 `INTERNAL`
    /// and a 413 `UNKNOWN`, as tonic and an Envoy's local reply do): it counts as the path to
    /// the dependency failing.
    Broken,
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
