//! What a response says to the client that sent the request: whether to retry it
//! ([`ResponseHead::classify`]), and whether it is the shape of a deadline running out
//! ([`ResponseHead::is_deadline_shaped`]); the parsers of the server's word on when to come
//! back (`Retry-After`, `grpc-retry-pushback-ms`).

use core::time::Duration;

use super::headers::{CONTENT_TYPE, GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, RETRY_AFTER, media_type};
use super::protocol::Protocol;
use crate::grpc_code::GrpcCode;
use crate::outcome::{Outcome, Pushback};

/// The head of a response, as far as the library reads it: its HTTP status and the few
/// headers that say what it means.
///
/// ```
/// use deadline_core::Outcome;
/// use deadline_core::wire::ResponseHead;
///
/// let unavailable = ResponseHead::read(200, |name| match name {
///     "content-type" => Some(&b"application/grpc"[..]),
///     "grpc-status" => Some(b"14"),
///     _ => None,
/// });
/// assert_eq!(unavailable.classify(), Some(Outcome::Failed));
/// assert!(unavailable.is_deadline_shaped());
/// assert_eq!(ResponseHead::read(404, |_| None).classify(), Some(Outcome::Fatal));
/// // The next service's time ran out: the attempt's timeout, not a failed dependency.
/// assert_eq!(ResponseHead::read(504, |_| None).classify(), Some(Outcome::TimedOut));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResponseHead<'a> {
    status: u16,
    content_type: Option<&'a [u8]>,
    grpc_status: Option<&'a [u8]>,
    grpc_retry_pushback_ms: Option<&'a [u8]>,
    retry_after: Option<&'a [u8]>,
    /// The answer to a Connect unary request ([`for_request`](Self::for_request)).
    connect_unary: bool,
}

/// What a gRPC status means for retrying the request, with the server's
/// `grpc-retry-pushback-ms` if it sent one, or `None` for `OK`: the gRPC rows of
/// [`ResponseHead::classify`], for a client that gives the status apart from a response head
/// (tonic's `Status`: `deadline_tokio::tonic::classify`).
///
/// | status | outcome |
/// |---|---|
/// | `OK` | `None` |
/// | `DEADLINE_EXCEEDED` | [`Outcome::TimedOut`], or with a `grpc-retry-pushback-ms` that says not to retry [`Pushback::DontRetry`] |
/// | `CANCELLED` | [`Outcome::Failed`], or with a `grpc-retry-pushback-ms` that says not to retry [`Pushback::DontRetry`] |
/// | `UNAVAILABLE`, `RESOURCE_EXHAUSTED` | [`Outcome::Failed`], or with `grpc-retry-pushback-ms` [`Outcome::Pushback`] ([`parse_grpc_pushback`]: declined) |
/// | `UNKNOWN`, `INTERNAL`, `DATA_LOSS` (the server failed) | [`Outcome::Broken`] |
/// | any other (the server's answer) | [`Outcome::Fatal`] |
///
/// ```
/// use deadline_core::{Outcome, Pushback, ms};
/// use deadline_core::wire::{GrpcCode, classify_grpc};
///
/// assert_eq!(classify_grpc(GrpcCode::DeadlineExceeded, None), Some(Outcome::TimedOut));
/// assert_eq!(classify_grpc(GrpcCode::NotFound, None), Some(Outcome::Fatal));
/// assert_eq!(classify_grpc(GrpcCode::Internal, None), Some(Outcome::Broken));
/// assert_eq!(
///     classify_grpc(GrpcCode::Unavailable, Some(b"250")),
///     Some(Outcome::Pushback(Pushback::After(ms(250)))),
/// );
/// // The server ran out of time: it may have acted on the request, and its wait does not
/// // make the call safe to repeat. Its "do not retry" is heard.
/// assert_eq!(
///     classify_grpc(GrpcCode::DeadlineExceeded, Some(b"250")),
///     Some(Outcome::TimedOut),
/// );
/// assert_eq!(
///     classify_grpc(GrpcCode::DeadlineExceeded, Some(b"-1")),
///     Some(Outcome::Pushback(Pushback::DontRetry)),
/// );
/// assert_eq!(classify_grpc(GrpcCode::Ok, None), None);
/// ```
#[must_use]
pub fn classify_grpc(code: GrpcCode, retry_pushback_ms: Option<&[u8]>) -> Option<Outcome> {
    match code {
        GrpcCode::Ok => None,
        // The server's word on retrying (gRFC A6), when it gave one, rules: when to come
        // back, or not to.
        // The server may have acted on the request: its word on when to retry does not make
        // the call safe to repeat, so only "do not retry" is heard (below).
        GrpcCode::DeadlineExceeded => Some(refused_or(Outcome::TimedOut, retry_pushback_ms)),
        // `CANCELLED` from a server is its call cut short, often by a deadline (tonic's server
        // answers the request's `grpc-timeout` so): a failure, which at or after the attempt's
        // own end is its timeout.
        GrpcCode::Cancelled => Some(refused_or(Outcome::Failed, retry_pushback_ms)),
        GrpcCode::Unavailable | GrpcCode::ResourceExhausted => {
            Some(retry_pushback_ms.map_or(Outcome::Failed, |v| {
                Outcome::Pushback(parse_grpc_pushback(v))
            }))
        }
        GrpcCode::Unknown | GrpcCode::Internal | GrpcCode::DataLoss => Some(Outcome::Broken),
        _ => Some(Outcome::Fatal),
    }
}

/// `outcome`, for a gRPC status that says the server may have acted on the request, unless its
/// `grpc-retry-pushback-ms` says not to retry. A wait it asks for is not read: an
/// [`Outcome::Pushback`] with a wait would let a call that is not idempotent repeat what may
/// have run, and one that is retries after the policy's backoff, as after any timeout.
fn refused_or(outcome: Outcome, retry_pushback_ms: Option<&[u8]>) -> Outcome {
    match retry_pushback_ms.map(parse_grpc_pushback) {
        Some(Pushback::DontRetry) => Outcome::Pushback(Pushback::DontRetry),
        _ => outcome,
    }
}

impl<'a> ResponseHead<'a> {
    /// A response with HTTP `status`, whose headers are read with `header` (the first value
    /// of the header of that lowercase name, if it has one).
    pub fn read(status: u16, mut header: impl FnMut(&'static str) -> Option<&'a [u8]>) -> Self {
        ResponseHead {
            status,
            content_type: header(CONTENT_TYPE),
            grpc_status: header(GRPC_STATUS),
            grpc_retry_pushback_ms: header(GRPC_RETRY_PUSHBACK_MS),
            retry_after: header(RETRY_AFTER),
            connect_unary: false,
        }
    }

    /// The same response, read as the answer to a request of `protocol` (as
    /// [`Protocol::read`] reads the request). It matters for a Connect unary request, whose
    /// error answers carry their Connect code's HTTP status: a 500 is `unknown`, `internal`
    /// or `data_loss`, which gRPC does not retry either, and which count against the
    /// dependency's breaker ([`Outcome::Broken`]; [`classify`](Self::classify)).
    ///
    /// ```
    /// use deadline_core::Outcome;
    /// use deadline_core::wire::{Protocol, ResponseHead};
    ///
    /// let internal = ResponseHead::read(500, |_| None);
    /// assert_eq!(internal.classify(), Some(Outcome::Failed));
    /// let connect = internal.for_request(Protocol::ConnectUnary);
    /// assert_eq!(connect.classify(), Some(Outcome::Broken));
    /// ```
    #[must_use]
    pub const fn for_request(mut self, protocol: Protocol) -> Self {
        self.connect_unary = matches!(protocol, Protocol::ConnectUnary);
        self
    }

    /// Whether this is a gRPC response (`application/grpc`, `application/grpc+proto`,
    /// `application/grpc-web`, ..., in any ASCII case).
    #[must_use]
    pub fn is_grpc(&self) -> bool {
        self.content_type.is_some_and(|v| {
            [
                &b"application/grpc"[..],
                b"application/grpc-web",
                b"application/grpc-web-text",
            ]
            .iter()
            .any(|media| media_type(v, media).is_some())
        })
    }

    /// The gRPC status in the head of a gRPC response (a trailers-only answer, which is how
    /// a gRPC server answers a failure before any message): `None` when there is none (the
    /// status comes in the trailers), `Some(Err(()))` when it is not one of gRPC's codes
    /// (tonic reads it as `UNKNOWN`; grpc-go as `INTERNAL` when it is not a number).
    fn grpc_code(&self) -> Option<Result<GrpcCode, ()>> {
        if !self.is_grpc() {
            return None;
        }
        self.grpc_status.map(|v| GrpcCode::parse(v).ok_or(()))
    }

    /// What this response means for retrying the request, or `None` for an answer (a
    /// success, or a failure the caller gets as it is):
    ///
    /// | response | outcome |
    /// |---|---|
    /// | gRPC `grpc-status: 0`, or a gRPC response without `grpc-status` in its head | `None` |
    /// | gRPC `DEADLINE_EXCEEDED` (4) | [`Outcome::TimedOut`], or with a `grpc-retry-pushback-ms` that says not to retry [`Pushback::DontRetry`] |
    /// | gRPC `CANCELLED` (1: the server cut the call short, as tonic's does at the request's `grpc-timeout`) | [`Outcome::Failed`], or with a `grpc-retry-pushback-ms` that says not to retry [`Pushback::DontRetry`] |
    /// | gRPC `UNAVAILABLE` (14) or `RESOURCE_EXHAUSTED` (8) | [`Outcome::Failed`], or with `grpc-retry-pushback-ms` [`Outcome::Pushback`] ([`parse_grpc_pushback`]: the server declined the request) |
    /// | gRPC `UNKNOWN` (2), `INTERNAL` (13) or `DATA_LOSS` (15), or a `grpc-status` that is not one of gRPC's codes (tonic reads it as `UNKNOWN`) | [`Outcome::Broken`] |
    /// | any other gRPC status | [`Outcome::Fatal`] |
    /// | HTTP 504 (a Connect `deadline_exceeded` too) | [`Outcome::TimedOut`] |
    /// | HTTP 429 or 503 with `Retry-After` in seconds | [`Outcome::Pushback`] ([`parse_retry_after`]) |
    /// | HTTP 500 answering a Connect unary request ([`for_request`](Self::for_request): `unknown`, `internal` or `data_loss`, as gRPC's) | [`Outcome::Broken`] |
    /// | HTTP 500, 502, 503, 408, 429 (without a readable `Retry-After`), and 499 answering a Connect unary request (Connect's `canceled`) | [`Outcome::Failed`] |
    /// | HTTP 501 or 505 (the server does not do what the request asks: gRPC's `UNIMPLEMENTED` is a Connect 501), any other 4xx (400, 404, ...) | [`Outcome::Fatal`] |
    /// | any other 5xx (507, 520, ...) | [`Outcome::Broken`] |
    /// | 1xx, 2xx, 3xx | `None` |
    ///
    /// An HTTP 504 or a gRPC `DEADLINE_EXCEEDED` is the next service saying that the time it
    /// had ran out: the attempt ran out of time below, whenever the answer comes. A service
    /// that was told a deadline answers so before the time it was told, by its own margins
    /// (its reply margin, a database's statement timeout set a margin earlier), which the
    /// caller cannot know; read as a failure, such an answer would make the call's error a
    /// failed dependency (a 502) for what was a deadline. As [`Outcome::TimedOut`] it is
    /// counted as the attempt's timeout and the call's error is the library's timeout, as when
    /// the call's own timer fires; it is retried as a timeout is, when the call is idempotent
    /// and time is left. A gRPC server that says when to retry, or not to
    /// (`grpc-retry-pushback-ms`, gRFC A6), is heard with any status that is not final (the
    /// four above): such a response is its pushback, and the caller gets it as it came if the
    /// call then ends. With `DEADLINE_EXCEEDED` or `CANCELLED` the server may have acted on
    /// the request, and only its "do not retry" is heard: gRFC A6's pushback times a retry
    /// that the policy allows, it does not make one safe, so the call is retried only when
    /// it is idempotent, after the policy's backoff, as after any timeout.
    ///
    /// A failure that may be retried ([`Outcome::Failed`]) and comes at or after the end of
    /// the attempt that got it is that attempt's timeout (the driver's rule): a gRPC
    /// `CANCELLED` or a Connect `canceled` then is the next service cutting the call at the
    /// deadline it was sent.
    ///
    /// A `Retry-After` in its HTTP-date form is not read (the core does not read the wall
    /// clock): the response is [`Outcome::Failed`]. A gRPC status that comes in the
    /// trailers, after a streamed body, cannot be read from the head: such a response is an
    /// answer here.
    #[must_use]
    pub fn classify(&self) -> Option<Outcome> {
        match self.grpc_code() {
            Some(Ok(code)) => classify_grpc(code, self.grpc_retry_pushback_ms),
            Some(Err(())) => Some(Outcome::Broken),
            None => self.classify_http(),
        }
    }

    /// [`classify`](Self::classify) for a plain HTTP status.
    fn classify_http(&self) -> Option<Outcome> {
        match self.status {
            429 | 503 => Some(
                self.retry_after
                    .and_then(parse_retry_after)
                    .map_or(Outcome::Failed, Outcome::Pushback),
            ),
            504 => Some(Outcome::TimedOut),
            // Connect's `unknown`, `internal` and `data_loss`: broken, as in gRPC.
            500 if self.connect_unary => Some(Outcome::Broken),
            500 | 502 | 408 => Some(Outcome::Failed),
            // Connect's `canceled`, as gRPC's `CANCELLED`.
            499 if self.connect_unary => Some(Outcome::Failed),
            400..=499 | 501 | 505 => Some(Outcome::Fatal),
            500..=599 => Some(Outcome::Broken),
            _ => None,
        }
    }

    /// Whether this response is the shape of a deadline running out somewhere below: HTTP
    /// 408, 502, 503 or 504 (and 499, Connect's `canceled`, answering a Connect unary request:
    /// [`for_request`](Self::for_request)), or a gRPC `CANCELLED`, `DEADLINE_EXCEEDED` or
    /// `UNAVAILABLE` in the head. Arriving when the time sent has run out, such a response is the deadline's,
    /// not the next service's own fault ([`Sent::is_deadline_failure`](super::Sent::is_deadline_failure)).
    ///
    /// A response that says when to retry, or not to (`Retry-After`,
    /// `grpc-retry-pushback-ms`), is not: the server answered on its own, and its word on
    /// retrying stands ([`classify`](Self::classify)), whenever it comes.
    ///
    /// ```
    /// use deadline_core::wire::ResponseHead;
    ///
    /// assert!(ResponseHead::read(503, |_| None).is_deadline_shaped());
    /// let busy = ResponseHead::read(503, |name| (name == "retry-after").then_some(&b"1"[..]));
    /// assert!(!busy.is_deadline_shaped());
    /// ```
    #[must_use]
    pub fn is_deadline_shaped(&self) -> bool {
        match self.grpc_code() {
            Some(Ok(code)) => is_deadline_code(code) && self.grpc_retry_pushback_ms.is_none(),
            Some(Err(())) => false,
            None => {
                let shaped = matches!(self.status, 408 | 502 | 503 | 504)
                    || (self.connect_unary && self.status == 499);
                shaped && self.retry_after.is_none()
            }
        }
    }
}

/// A gRPC status that a deadline running out produces: `CANCELLED` (a client's own timer,
/// tonic's for one), `DEADLINE_EXCEEDED`, `UNAVAILABLE` (a connection dropped at the
/// deadline).
pub(super) const fn is_deadline_code(code: GrpcCode) -> bool {
    matches!(
        code,
        GrpcCode::Cancelled | GrpcCode::DeadlineExceeded | GrpcCode::Unavailable
    )
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
/// use deadline_core::{Pushback, ms};
/// use deadline_core::wire::parse_retry_after;
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
/// use deadline_core::{Pushback, ms};
/// use deadline_core::wire::parse_grpc_pushback;
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
