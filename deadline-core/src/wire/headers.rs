//! The names of the headers the library reads and writes, and the deadline headers of one
//! request: those it arrived with ([`Incoming`]) and those it is sent with
//! ([`DeadlineHeader`]).

use core::time::Duration;

use super::error::WireError;
use super::grpc_timeout::GrpcTimeout;
use super::millis::{ConnectTimeout, DeadlineMs};

/// gRPC's timeout header, lowercase as HTTP/2 requires.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The plain-HTTP header that carries the time left in whole milliseconds.
pub const X_DEADLINE_MS: &str = "x-deadline-ms";

/// The Connect protocol's timeout header: the time left in whole milliseconds, 1 to 10
/// digits.
pub const CONNECT_TIMEOUT_MS: &str = "connect-timeout-ms";

/// Envoy's header telling an upstream service how long Envoy will wait for it, in whole
/// milliseconds ("so that the upstream host can make decisions based on the request
/// timeout"). Read as an incoming budget, in the same form as `x-deadline-ms`, from when the
/// request arrived.
///
/// Envoy's route timeout runs from the end of the request (once its whole body has come in),
/// not from its headers, and Envoy sends the header with the headers. For a request whose body
/// takes long to arrive (an upload, a client-streaming gRPC call without a `grpc-timeout`),
/// the budget read from its headers ends earlier than Envoy stops waiting, by as long as the
/// body took: the server gives up first, on the safe side. Give such a route a default budget
/// of its own rather than Envoy's header (a layer that strips it), or a `grpc-timeout`.
pub const ENVOY_EXPECTED_RQ_TIMEOUT_MS: &str = "x-envoy-expected-rq-timeout-ms";

/// Envoy's `x-envoy-upstream-rq-timeout-ms`: whole milliseconds, set by a client on a request
/// to Envoy (a route timeout of its own for this request; `0` turns Envoy's timeout off).
/// Envoy waits that long in place of the route's timeout, and of a `grpc-timeout` the
/// request carries, and tells the next service so in
/// [`ENVOY_EXPECTED_RQ_TIMEOUT_MS`] (with `max_grpc_timeout` set on the route, in its
/// `grpc-timeout` too).
///
/// A request about to be sent is read with it ([`Incoming::read_outgoing`]): a shorter
/// timeout in it is kept, and a longer one is written down to what is sent
/// ([`Propagation::send`](super::Propagation::send)), so that Envoy tells the next service no
/// more time than is left. A server does not read it (Envoy takes it off the request).
pub const ENVOY_UPSTREAM_RQ_TIMEOUT_MS: &str = "x-envoy-upstream-rq-timeout-ms";

/// A gRPC response's status code, in its head (trailers-only) or its trailers.
pub const GRPC_STATUS: &str = "grpc-status";

/// A gRPC response's status message.
pub const GRPC_MESSAGE: &str = "grpc-message";

/// A gRPC response's status details: a serialized `google.rpc.Status`, whose code a client
/// checks against `grpc-status` (grpc-go answers `INTERNAL` when they differ).
pub const GRPC_STATUS_DETAILS_BIN: &str = "grpc-status-details-bin";

/// gRPC's retry pushback (gRFC A6): milliseconds to wait before retrying, or a negative
/// value for "do not retry".
pub const GRPC_RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// HTTP's `Retry-After`.
pub const RETRY_AFTER: &str = "retry-after";

/// HTTP's `Content-Type`, which tells a gRPC or Connect message from any other.
pub const CONTENT_TYPE: &str = "content-type";

/// HTTP's `Content-Encoding`: a response body compressed whole is not a body of gRPC or
/// Connect envelopes, which compress message by message.
pub const CONTENT_ENCODING: &str = "content-encoding";

/// The header a Connect client sends with every unary request.
pub const CONNECT_PROTOCOL_VERSION: &str = "connect-protocol-version";

/// A deadline header that could not be decoded: which one, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Malformed {
    header: &'static str,
    error: WireError,
}

impl Malformed {
    /// The header's name.
    #[must_use]
    pub const fn header(&self) -> &'static str {
        self.header
    }

    /// What is wrong with its value.
    #[must_use]
    pub const fn error(&self) -> WireError {
        self.error
    }
}

/// The deadline headers a request carries, each one's first value as bytes: `grpc-timeout`,
/// `connect-timeout-ms`, `x-deadline-ms` and Envoy's `x-envoy-expected-rq-timeout-ms`; on a
/// request about to be sent, Envoy's `x-envoy-upstream-rq-timeout-ms` too
/// ([`read_outgoing`](Self::read_outgoing)).
///
/// One rule reads them, on a server and on a client: **the earliest deadline wins**. Each
/// header present says how long its sender will wait; the request is worth nothing after the
/// first of them gives up, so the shortest budget is the request's.
///
/// ```
/// use deadline_core::ms;
/// use deadline_core::wire::{GRPC_TIMEOUT, Incoming, WireError, X_DEADLINE_MS};
///
/// // A gRPC client's 200 ms behind a proxy that waits 150 ms.
/// let incoming = Incoming::read(|name| match name {
///     "grpc-timeout" => Some(&b"200m"[..]),
///     "x-envoy-expected-rq-timeout-ms" => Some(b"150"),
///     _ => None,
/// });
/// assert_eq!(incoming.budget(), Ok(Some(ms(150))));
///
/// // A malformed header is refused, not skipped: the caller meant to send a deadline.
/// let bad = Incoming::read(|name| (name == X_DEADLINE_MS).then_some(&b"50ms"[..]));
/// let error = bad.budget().unwrap_err();
/// assert_eq!((error.header(), error.error()), (X_DEADLINE_MS, WireError::InvalidDigit));
/// assert_eq!(Incoming::NONE.budget(), Ok(None));
/// # let _ = GRPC_TIMEOUT;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Incoming<'a> {
    grpc_timeout: Option<&'a [u8]>,
    connect_timeout_ms: Option<&'a [u8]>,
    x_deadline_ms: Option<&'a [u8]>,
    envoy_timeout_ms: Option<&'a [u8]>,
    envoy_upstream_ms: Option<&'a [u8]>,
}

impl<'a> Incoming<'a> {
    /// No deadline header at all.
    pub const NONE: Incoming<'static> = Incoming {
        grpc_timeout: None,
        connect_timeout_ms: None,
        x_deadline_ms: None,
        envoy_timeout_ms: None,
        envoy_upstream_ms: None,
    };

    /// The deadline headers, read with `header`, which gives the first value of the header
    /// of that (lowercase) name, if the request has one.
    pub fn read(mut header: impl FnMut(&'static str) -> Option<&'a [u8]>) -> Self {
        Incoming {
            grpc_timeout: header(GRPC_TIMEOUT),
            connect_timeout_ms: header(CONNECT_TIMEOUT_MS),
            x_deadline_ms: header(X_DEADLINE_MS),
            envoy_timeout_ms: header(ENVOY_EXPECTED_RQ_TIMEOUT_MS),
            envoy_upstream_ms: None,
        }
    }

    /// The deadline headers of a request about to be sent, read with `header`: those
    /// [`read`](Self::read) reads, and Envoy's [`ENVOY_UPSTREAM_RQ_TIMEOUT_MS`], which a client
    /// sets on a request to Envoy (`0`, Envoy's "no timeout", is no timeout here). Both kinds
    /// of timeout count in [`shortest_valid`](Self::shortest_valid), and
    /// [`Propagation::send`](super::Propagation::send) writes each one present down to what is
    /// sent: a value it cannot read is replaced, not an error, and, as for the other
    /// millisecond headers, under a millisecond to send the call is not made.
    ///
    /// ```
    /// use deadline_core::wire::{DeadlineHeader, Incoming, Propagation};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// // A route timeout of 30 s set for Envoy, inside 200 ms: Envoy is told 195 ms.
    /// let already = Incoming::read_outgoing(|name| {
    ///     (name == "x-envoy-upstream-rq-timeout-ms").then_some(&b"30000"[..])
    /// });
    /// let hop = Propagation::DEFAULT.with_allowance(ms(5));
    /// let out = hop.send(Deadline::after(Instant::ZERO, ms(200)), Instant::ZERO, already, DeadlineHeader::GrpcTimeout)?;
    /// let headers: Vec<_> = out.headers().collect();
    /// assert_eq!(
    ///     headers,
    ///     [("grpc-timeout", &b"195000u"[..]), ("x-envoy-upstream-rq-timeout-ms", b"195")],
    /// );
    /// // A shorter one is kept, and sent in every header.
    /// let short = Incoming::read_outgoing(|name| {
    ///     (name == "x-envoy-upstream-rq-timeout-ms").then_some(&b"50"[..])
    /// });
    /// assert_eq!(short.shortest_valid(), Some(ms(50)));
    /// // Envoy's "no timeout" is none here.
    /// let off = Incoming::read_outgoing(|name| {
    ///     (name == "x-envoy-upstream-rq-timeout-ms").then_some(&b"0"[..])
    /// });
    /// assert_eq!(off.shortest_valid(), None);
    /// # Ok::<(), deadline_core::wire::WireError>(())
    /// ```
    pub fn read_outgoing(mut header: impl FnMut(&'static str) -> Option<&'a [u8]>) -> Self {
        Incoming {
            envoy_upstream_ms: header(ENVOY_UPSTREAM_RQ_TIMEOUT_MS),
            ..Self::read(header)
        }
    }

    /// Whether the request carries `grpc-timeout`.
    pub(super) const fn has_grpc_timeout(&self) -> bool {
        self.grpc_timeout.is_some()
    }

    /// Whether the request carries `connect-timeout-ms`.
    pub(super) const fn has_connect_timeout_ms(&self) -> bool {
        self.connect_timeout_ms.is_some()
    }

    /// Whether the request carries `x-deadline-ms`.
    pub(super) const fn has_x_deadline_ms(&self) -> bool {
        self.x_deadline_ms.is_some()
    }

    /// Whether the request carries `x-envoy-expected-rq-timeout-ms`.
    pub(super) const fn has_envoy_timeout_ms(&self) -> bool {
        self.envoy_timeout_ms.is_some()
    }

    /// Whether the request carries `x-envoy-upstream-rq-timeout-ms` (read by
    /// [`read_outgoing`](Self::read_outgoing)).
    pub(super) const fn has_envoy_upstream_ms(&self) -> bool {
        self.envoy_upstream_ms.is_some()
    }

    /// Hands each header present to `f`, decoded (the whitespace around its value removed
    /// first, as HTTP allows it there), in a fixed order: `grpc-timeout`,
    /// `connect-timeout-ms`, `x-deadline-ms`, `x-envoy-expected-rq-timeout-ms`,
    /// `x-envoy-upstream-rq-timeout-ms` (but its `0`, Envoy's "no timeout"); stops at the
    /// first error `f` returns. Only the headers present are decoded.
    fn for_each_decoded<E>(
        &self,
        mut f: impl FnMut(&'static str, Result<Duration, WireError>) -> Result<(), E>,
    ) -> Result<(), E> {
        // The milliseconds alone: the values' text (which `parse` also keeps) is not needed.
        let millis = |v: &[u8]| DeadlineMs::parse_millis(v.trim_ascii()).map(Duration::from_millis);
        if let Some(v) = self.grpc_timeout {
            f(GRPC_TIMEOUT, GrpcTimeout::parse_duration(v.trim_ascii()))?;
        }
        if let Some(v) = self.connect_timeout_ms {
            let connect = ConnectTimeout::parse_millis(v.trim_ascii());
            f(CONNECT_TIMEOUT_MS, connect.map(Duration::from_millis))?;
        }
        if let Some(v) = self.x_deadline_ms {
            f(X_DEADLINE_MS, millis(v))?;
        }
        if let Some(v) = self.envoy_timeout_ms {
            f(ENVOY_EXPECTED_RQ_TIMEOUT_MS, millis(v))?;
        }
        if let Some(v) = self.envoy_upstream_ms {
            // `0` is Envoy's "no timeout": none to hand on.
            let upstream = millis(v);
            if upstream != Ok(Duration::ZERO) {
                f(ENVOY_UPSTREAM_RQ_TIMEOUT_MS, upstream)?;
            }
        }
        Ok(())
    }

    /// The request's budget, on a server: the shortest of the headers present, or `None`
    /// when it has none.
    ///
    /// # Errors
    ///
    /// The first header (in the order of [`Incoming`]'s list) whose value cannot be decoded,
    /// with why: answer [`Error::MalformedDeadline`](crate::Error::MalformedDeadline) (HTTP
    /// 400, gRPC `INVALID_ARGUMENT`), naming it. Every header present is checked: a caller
    /// that sent a deadline means to keep it, so none is guessed at or skipped.
    pub fn budget(&self) -> Result<Option<Duration>, Malformed> {
        let mut shortest: Option<Duration> = None;
        self.for_each_decoded(|header, decoded| {
            let budget = decoded.map_err(|error| Malformed { header, error })?;
            shortest = Some(shortest.map_or(budget, |s| s.min(budget)));
            Ok(())
        })?;
        Ok(shortest)
    }

    /// The shortest timeout among the headers whose value can be decoded, for a request a
    /// client is about to send (a timeout its caller set, such as tonic's
    /// `Request::set_timeout`): what [`Propagation::send`](super::Propagation::send) keeps
    /// when it is shorter. A value that cannot be decoded is no timeout: it is replaced by
    /// what is sent.
    #[must_use]
    pub fn shortest_valid(&self) -> Option<Duration> {
        let mut shortest: Option<Duration> = None;
        let _: Result<(), core::convert::Infallible> = self.for_each_decoded(|_, decoded| {
            if let Ok(timeout) = decoded {
                shortest = Some(shortest.map_or(timeout, |s| s.min(timeout)));
            }
            Ok(())
        });
        shortest
    }
}

/// Which header a client writes the time left into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DeadlineHeader {
    /// `grpc-timeout` ([`GrpcTimeout`]): for gRPC peers, and any peer that reads it; precise
    /// to the microsecond below 100 s.
    GrpcTimeout,
    /// `x-deadline-ms` ([`DeadlineMs`]): whole milliseconds.
    DeadlineMs,
    /// Both `grpc-timeout` and `x-deadline-ms`, for peers that may read either. Under one
    /// millisecond left to send, `x-deadline-ms` cannot carry it, and the call is not made
    /// rather than leave a peer to read no deadline at all.
    Both,
    /// `connect-timeout-ms` ([`ConnectTimeout`]): for Connect peers (connect-go,
    /// connect-es, connect-rust); whole milliseconds, at most 10 digits. The header makes a
    /// request that is not gRPC, gRPC-Web or Connect streaming by its `content-type` a Connect
    /// unary call ([`Protocol::read`](super::Protocol::read)), and a reader that knows the
    /// request reads its answers as one's
    /// ([`ResponseHead::for_request`](super::ResponseHead::for_request)): in `deadline-tokio`,
    /// `DependencyLayer` does not retry its 500, and both `DependencyLayer` and
    /// `PropagateLayer` read a 499 near the end of the time sent as the deadline's. A request
    /// sent with no deadline goes without the header, and is a Connect call only by its own
    /// headers (Connect's clients send `connect-protocol-version`).
    ConnectTimeout,
}

/// The rest of `value`, a `content-type`, after the media type `media` (such as
/// `application/grpc`), if it is that type: `media` in any ASCII case (media types are
/// case-insensitive), then nothing, a codec suffix (`+proto`) or parameters (`;`). Another
/// type whose name starts the same (`application/grpc-web` for `application/grpc`) is not it.
pub(super) fn media_type<'v>(value: &'v [u8], media: &[u8]) -> Option<&'v [u8]> {
    let (name, rest) = value.split_at_checked(media.len())?;
    let ends = matches!(rest.first(), None | Some(b'+' | b';' | b' ' | b'\t'));
    (ends && name.eq_ignore_ascii_case(media)).then_some(rest)
}
