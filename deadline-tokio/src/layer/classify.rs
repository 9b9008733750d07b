//! What an HTTP or gRPC response means for retrying: [`classify_response`], the rules
//! [`DependencyLayer`](super::DependencyLayer) applies to every answer of the next service.

use deadline_core::{Outcome, parse_grpc_pushback, parse_retry_after};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::answer::GRPC_STATUS;

/// The `grpc-retry-pushback-ms` header (gRFC A6): how long a gRPC server asks the client to
/// wait before retrying, or (negative, or not a number) not to retry at all.
pub(crate) const GRPC_RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// What a response head means for retrying: `None` when it is an answer to return (a
/// success, or a failure the caller is to see as it is), or the [`Outcome`] of an attempt
/// that failed.
///
/// A gRPC response (its `content-type` starts with `application/grpc`) that carries
/// `grpc-status` in its head (a trailers-only response, which is how a gRPC server answers
/// an error before any message) is read by its gRPC status; any other response by its HTTP
/// status:
///
/// | response | outcome |
/// |---|---|
/// | gRPC `grpc-status: 0`, or a gRPC response without `grpc-status` in its head | `None` (a success) |
/// | gRPC `UNAVAILABLE` (14) or `RESOURCE_EXHAUSTED` (8) | [`Outcome::Failed`], or with `grpc-retry-pushback-ms` [`Outcome::Pushback`] ([`parse_grpc_pushback`]: a negative or unreadable value is [`Pushback::DontRetry`](deadline_core::Pushback::DontRetry)) |
/// | any other gRPC status, or one that cannot be read | [`Outcome::Fatal`] |
/// | HTTP 429, or 503, with `Retry-After` in seconds | [`Outcome::Pushback`] ([`parse_retry_after`]) |
/// | HTTP 500, 502, 503, 504, 408, 429 (without a readable `Retry-After`) | [`Outcome::Failed`] |
/// | any other 4xx or 5xx (400, 404, 501, ...) | [`Outcome::Fatal`] |
/// | 1xx, 2xx, 3xx | `None` (a success) |
///
/// [`Outcome::Fatal`] ends the call at once, and the layer returns that response to the
/// caller as it came; [`Outcome::Failed`] is retried as the policy allows (not for a call
/// that is not idempotent: the server may have acted on it), and [`Outcome::Pushback`]
/// after the server's delay (the server did not act on it, so even a call that is not
/// idempotent is retried). A `Retry-After` in its HTTP-date form is not read (the core does
/// not read the wall clock): the response is [`Outcome::Failed`].
///
/// The gRPC status of a response that streams messages comes in its trailers, at the end
/// of the body: it cannot be read without reading the body, which the layer leaves to the
/// caller, so such a response is a success here whatever its trailers say.
///
/// Nothing here panics or fails on a hostile header: a value that cannot be read is
/// treated as described, never trusted.
///
/// ```
/// use deadline_core::{Outcome, Pushback, ms};
/// use deadline_tokio::layer::classify_response;
/// use http::{HeaderMap, HeaderValue, StatusCode};
///
/// let none = HeaderMap::new();
/// assert_eq!(classify_response(StatusCode::OK, &none), None);
/// assert_eq!(classify_response(StatusCode::SERVICE_UNAVAILABLE, &none), Some(Outcome::Failed));
/// assert_eq!(classify_response(StatusCode::BAD_REQUEST, &none), Some(Outcome::Fatal));
///
/// let mut later = HeaderMap::new();
/// later.insert("retry-after", HeaderValue::from_static("2"));
/// assert_eq!(
///     classify_response(StatusCode::TOO_MANY_REQUESTS, &later),
///     Some(Outcome::Pushback(Pushback::After(ms(2_000)))),
/// );
///
/// let mut grpc = HeaderMap::new();
/// grpc.insert("content-type", HeaderValue::from_static("application/grpc"));
/// grpc.insert("grpc-status", HeaderValue::from_static("14"));
/// assert_eq!(classify_response(StatusCode::OK, &grpc), Some(Outcome::Failed));
/// grpc.insert("grpc-retry-pushback-ms", HeaderValue::from_static("-1"));
/// assert_eq!(classify_response(StatusCode::OK, &grpc), Some(Outcome::Pushback(Pushback::DontRetry)));
/// ```
#[must_use]
pub fn classify_response(status: StatusCode, headers: &HeaderMap) -> Option<Outcome> {
    if is_grpc(headers) {
        if let Some(code) = headers.get(GRPC_STATUS) {
            return classify_grpc(code, headers);
        }
    }
    classify_http(status, headers)
}

/// Whether the response is a gRPC one (`application/grpc`, `application/grpc+proto`,
/// `application/grpc-web`, ...).
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// A gRPC status in a response head.
fn classify_grpc(code: &HeaderValue, headers: &HeaderMap) -> Option<Outcome> {
    match code.as_bytes().trim_ascii() {
        b"0" => None,
        // UNAVAILABLE, RESOURCE_EXHAUSTED: a retry may succeed, after the server's pushback.
        b"14" | b"8" => Some(
            headers
                .get(GRPC_RETRY_PUSHBACK_MS)
                .map_or(Outcome::Failed, |v| {
                    Outcome::Pushback(parse_grpc_pushback(v.as_bytes()))
                }),
        ),
        // Every other status, and one that cannot be read (which tonic reads as UNKNOWN).
        _ => Some(Outcome::Fatal),
    }
}

/// An HTTP status.
fn classify_http(status: StatusCode, headers: &HeaderMap) -> Option<Outcome> {
    let retry_after = || {
        headers
            .get(RETRY_AFTER)
            .and_then(|v| parse_retry_after(v.as_bytes()))
    };
    match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
            Some(retry_after().map_or(Outcome::Failed, Outcome::Pushback))
        }
        StatusCode::INTERNAL_SERVER_ERROR
        | StatusCode::BAD_GATEWAY
        | StatusCode::GATEWAY_TIMEOUT
        | StatusCode::REQUEST_TIMEOUT => Some(Outcome::Failed),
        s if s.is_client_error() || s.is_server_error() => Some(Outcome::Fatal),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use deadline_core::{Pushback, ms};

    use super::*;

    fn headers(pairs: &[(&'static str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    #[test]
    fn http_statuses() {
        let none = HeaderMap::new();
        for code in [500, 502, 503, 504, 408, 429] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(
                classify_response(status, &none),
                Some(Outcome::Failed),
                "{code}"
            );
        }
        for code in [400, 401, 403, 404, 409, 422, 501, 505] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(
                classify_response(status, &none),
                Some(Outcome::Fatal),
                "{code}"
            );
        }
        for code in [100, 200, 201, 204, 301, 304] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(classify_response(status, &none), None, "{code}");
        }
    }

    #[test]
    fn retry_after_is_pushback_on_429_and_503_only() {
        let later = headers(&[("retry-after", b"3")]);
        for code in [429, 503] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(
                classify_response(status, &later),
                Some(Outcome::Pushback(Pushback::After(ms(3_000))))
            );
        }
        assert_eq!(
            classify_response(StatusCode::INTERNAL_SERVER_ERROR, &later),
            Some(Outcome::Failed)
        );
        // A date, garbage, a negative number: no pushback, a plain failure.
        for bad in [
            &b"Fri, 31 Dec 1999 23:59:59 GMT"[..],
            b"-1",
            b"soon",
            b"",
            b"\xff\xfe",
        ] {
            let map = headers(&[("retry-after", bad)]);
            assert_eq!(
                classify_response(StatusCode::TOO_MANY_REQUESTS, &map),
                Some(Outcome::Failed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn grpc_statuses_in_the_head() {
        let grpc = |status: &'static [u8]| {
            headers(&[
                ("content-type", b"application/grpc+proto"),
                ("grpc-status", status),
            ])
        };
        assert_eq!(classify_response(StatusCode::OK, &grpc(b"0")), None);
        assert_eq!(
            classify_response(StatusCode::OK, &grpc(b"14")),
            Some(Outcome::Failed)
        );
        assert_eq!(
            classify_response(StatusCode::OK, &grpc(b"8")),
            Some(Outcome::Failed)
        );
        for fatal in [
            &b"3"[..],
            b"5",
            b"13",
            b"2",
            b"garbage",
            b"",
            b"140",
            b"\xff",
        ] {
            assert_eq!(
                classify_response(StatusCode::OK, &grpc(fatal)),
                Some(Outcome::Fatal),
                "{fatal:?}"
            );
        }
        // No grpc-status in the head: the status is in the trailers, unread; a success.
        let streaming = headers(&[("content-type", b"application/grpc")]);
        assert_eq!(classify_response(StatusCode::OK, &streaming), None);
        // A grpc-status on a response that is not gRPC is not read.
        let plain = headers(&[("grpc-status", b"14")]);
        assert_eq!(classify_response(StatusCode::OK, &plain), None);
    }

    #[test]
    fn grpc_pushback() {
        let with = |pushback: &'static [u8]| {
            headers(&[
                ("content-type", b"application/grpc"),
                ("grpc-status", b"14"),
                ("grpc-retry-pushback-ms", pushback),
            ])
        };
        assert_eq!(
            classify_response(StatusCode::OK, &with(b"250")),
            Some(Outcome::Pushback(Pushback::After(ms(250))))
        );
        for no in [&b"-1"[..], b"-250", b"soon", b"", b"99999999999", b"\xff"] {
            assert_eq!(
                classify_response(StatusCode::OK, &with(no)),
                Some(Outcome::Pushback(Pushback::DontRetry)),
                "{no:?}"
            );
        }
        // Pushback on a status that is not retried changes nothing.
        let fatal = headers(&[
            ("content-type", b"application/grpc"),
            ("grpc-status", b"3"),
            ("grpc-retry-pushback-ms", b"10"),
        ]);
        assert_eq!(
            classify_response(StatusCode::OK, &fatal),
            Some(Outcome::Fatal)
        );
    }
}
