//! [`Error`]: why a call was not made or did not finish, and its HTTP and gRPC status.

use core::fmt;
use core::time::Duration;

use crate::grpc_code::GrpcCode;

/// Why a call was not made, or did not finish in time.
///
/// The mapping to status codes lives here and nowhere else:
///
/// | variant | HTTP | gRPC |
/// |---|---|---|
/// | [`Error::DeadlineExceeded`] | 504 Gateway Timeout | 4 `DEADLINE_EXCEEDED` |
/// | [`Error::InsufficientTime`] | 504 Gateway Timeout | 4 `DEADLINE_EXCEEDED` |
/// | [`Error::Timeout`] | 504 Gateway Timeout | 4 `DEADLINE_EXCEEDED` |
/// | [`Error::CircuitOpen`] | 503 Service Unavailable | 14 `UNAVAILABLE` |
/// | [`Error::Shed`] | 503 Service Unavailable | 14 `UNAVAILABLE` |
/// | [`Error::Throttled`] | 429 Too Many Requests | 8 `RESOURCE_EXHAUSTED` |
/// | [`Error::MalformedDeadline`] | 400 Bad Request | 3 `INVALID_ARGUMENT` |
///
/// 504 (RFC 9110) says "the upstream waited and cut off"; 429 (RFC 6585) says "slow down".
/// They are different signals and call for different responses: a client may retry a 504
/// with a new deadline, and must back off on a 429.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The request's deadline has passed: nobody waits for the answer any more.
    DeadlineExceeded,
    /// A required call was not made because the time left for it (after the reserve) is
    /// under its floor: it would probably time out, so the request fails now, uncalled.
    InsufficientTime {
        /// The timeout the call would have had.
        available: Duration,
        /// The dependency's floor (its minimum useful timeout, such as its p50).
        floor: Duration,
    },
    /// The call was made and its timeout fired before an answer came (or its attempt ran out
    /// of its own time before it could send anything), and no retry fitted.
    Timeout {
        /// The timeout that fired (or how long the attempt had run when it ran out).
        after: Duration,
    },
    /// The dependency's circuit breaker is open: calls fail at once for a cooldown.
    CircuitOpen,
    /// The request was rejected at admission: queueing already ate its budget, or the server
    /// is shedding load.
    Shed,
    /// Slow down: the caller should back off (HTTP 429, gRPC `RESOURCE_EXHAUSTED`).
    ///
    /// The driver never ends a call with it: a call whose retry the budget refused, or
    /// whose server said not to retry, ends with its last attempt's failure, and
    /// [`GiveUp::Throttled`](crate::call::GiveUp::Throttled) or
    /// [`GiveUp::ServerSaidNo`](crate::call::GiveUp::ServerSaidNo) in its report. It is for
    /// code that answers its own caller: one that maps a dependency's 429 or
    /// `RESOURCE_EXHAUSTED` (classified as a [`Pushback`](crate::Pushback)) to the
    /// same signal upstream, or that refuses work itself while its retry budget is spent.
    Throttled,
    /// The caller's deadline header (`grpc-timeout`, `connect-timeout-ms`, `x-deadline-ms`,
    /// `x-envoy-expected-rq-timeout-ms`) could not be read
    /// ([`WireError`](crate::wire::WireError) says why): the caller sent a deadline it means
    /// to keep, so a server does not guess one. HTTP 400; gRPC
    /// `INVALID_ARGUMENT` (3), the code gRPC gives to an argument that is wrong whatever the
    /// state of the server (not `INTERNAL`, which says the server is broken).
    MalformedDeadline,
}

impl Error {
    /// The HTTP status code for this error.
    #[must_use]
    pub const fn http_status(self) -> u16 {
        match self {
            Error::DeadlineExceeded | Error::InsufficientTime { .. } | Error::Timeout { .. } => 504,
            Error::CircuitOpen | Error::Shed => 503,
            Error::Throttled => 429,
            Error::MalformedDeadline => 400,
        }
    }

    /// The gRPC status code for this error.
    #[must_use]
    pub const fn grpc_code(self) -> GrpcCode {
        match self {
            Error::DeadlineExceeded | Error::InsufficientTime { .. } | Error::Timeout { .. } => {
                GrpcCode::DeadlineExceeded
            }
            Error::CircuitOpen | Error::Shed => GrpcCode::Unavailable,
            Error::Throttled => GrpcCode::ResourceExhausted,
            Error::MalformedDeadline => GrpcCode::InvalidArgument,
        }
    }

    /// A short, fixed reason for this error, for a `grpc-message` or a response body: the
    /// variant's meaning without its figures (see [`Display`](fmt::Display) for those).
    ///
    /// ```
    /// use deadline_core::Error;
    ///
    /// assert_eq!(Error::DeadlineExceeded.reason(), "deadline exceeded");
    /// assert_eq!(Error::Shed.reason(), "request shed at admission");
    /// assert_eq!(Error::MalformedDeadline.reason(), "malformed deadline header");
    /// ```
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            Error::DeadlineExceeded => "deadline exceeded",
            Error::InsufficientTime { .. } => "not called: too little time left",
            Error::Timeout { .. } => "timed out",
            Error::CircuitOpen => "circuit breaker open",
            Error::Shed => "request shed at admission",
            Error::Throttled => "throttled",
            Error::MalformedDeadline => "malformed deadline header",
        }
    }

    /// Whether the error comes from time running out (as opposed to protection mechanisms).
    #[must_use]
    pub const fn is_deadline(self) -> bool {
        matches!(
            self,
            Error::DeadlineExceeded | Error::InsufficientTime { .. } | Error::Timeout { .. }
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::DeadlineExceeded => f.write_str("deadline exceeded"),
            Error::InsufficientTime { available, floor } => write!(
                f,
                "not called: {} us available is under the floor of {} us",
                available.as_micros(),
                floor.as_micros()
            ),
            Error::Timeout { after } => write!(f, "timed out after {} us", after.as_micros()),
            Error::CircuitOpen => f.write_str("circuit breaker open"),
            Error::Shed => f.write_str("request shed at admission"),
            Error::Throttled => f.write_str("throttled"),
            Error::MalformedDeadline => f.write_str("malformed deadline header"),
        }
    }
}

impl core::error::Error for Error {}
