//! [`Protocol`]: how a request wants to be answered (gRPC, Connect, plain HTTP).

use super::headers::{CONNECT_PROTOCOL_VERSION, CONNECT_TIMEOUT_MS, CONTENT_TYPE};

/// How a request wants to be answered, read from its headers and its query string
/// ([`Protocol::read`]).
///
/// ```
/// use deadline_core::wire::Protocol;
///
/// let grpc = Protocol::read(None, |name| (name == "content-type").then_some(&b"application/grpc+proto"[..]));
/// assert_eq!(grpc, Protocol::Grpc);
/// let web = Protocol::read(None, |name| (name == "content-type").then_some(&b"application/grpc-web-text"[..]));
/// assert_eq!(web, Protocol::GrpcWeb { text: true });
/// let connect = Protocol::read(None, |name| (name == "connect-protocol-version").then_some(&b"1"[..]));
/// assert_eq!(connect, Protocol::ConnectUnary);
/// // Only Connect sends its timeout in `connect-timeout-ms`: a request with it is Connect's.
/// let timed = Protocol::read(None, |name| (name == "connect-timeout-ms").then_some(&b"250"[..]));
/// assert_eq!(timed, Protocol::ConnectUnary);
/// // A Connect GET says its protocol version in the query string.
/// let get = Protocol::read(Some("encoding=json&connect=v1&message=%7B%7D"), |_| None);
/// assert_eq!(get, Protocol::ConnectUnary);
/// assert_eq!(Protocol::read(Some("q=connect%3Dv1"), |_| None), Protocol::Http);
/// assert_eq!(Protocol::read(None, |_| None), Protocol::Http);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Protocol {
    /// A gRPC request (`content-type: application/grpc`, with or without a `+proto`-like
    /// suffix): answered with a gRPC status.
    Grpc,
    /// A gRPC-Web request (`content-type: application/grpc-web`, or `application/grpc-web-text`
    /// for its base64 form, with or without a codec suffix): answered with a gRPC status, in
    /// gRPC-Web's content type; a body cut at the deadline ends with its trailers as the last
    /// message of the body (gRPC-Web's trailer frame), where a browser can read them.
    GrpcWeb {
        /// The body is base64 (`application/grpc-web-text`).
        text: bool,
    },
    /// A Connect unary request (it has a `connect-protocol-version` header, which Connect
    /// clients should send and may leave out, or Connect's own `connect-timeout-ms`, or, for
    /// a GET, `connect=v1` in its query string): answered with the HTTP status of the error's
    /// Connect code and Connect's JSON error body, which a Connect client reads as that code
    /// (a plain 504 it would read as `unavailable`).
    ConnectUnary,
    /// A Connect streaming request (`content-type: application/connect+...`): answered with
    /// HTTP 200 and an end-of-stream message carrying the error.
    ConnectStream {
        /// The request's codec is JSON (`application/connect+json`); else protobuf, or
        /// another binary codec.
        json: bool,
    },
    /// Anything else: answered with an HTTP status and a short text.
    Http,
}

impl Protocol {
    /// The protocol of a request whose query string is `query` (the part of its URI after
    /// `?`, if it has one) and whose headers are read with `header` (the first value of the
    /// header of that lowercase name, if it has one).
    pub fn read<'a>(
        query: Option<&str>,
        mut header: impl FnMut(&'static str) -> Option<&'a [u8]>,
    ) -> Protocol {
        match header(CONTENT_TYPE) {
            Some(value) if value.starts_with(b"application/grpc-web") => Protocol::GrpcWeb {
                text: value.starts_with(b"application/grpc-web-text"),
            },
            Some(value) if value.starts_with(b"application/grpc") => Protocol::Grpc,
            Some(value) if value.starts_with(b"application/connect+") => Protocol::ConnectStream {
                json: value.starts_with(b"application/connect+json"),
            },
            _ if header(CONNECT_PROTOCOL_VERSION).is_some()
                || header(CONNECT_TIMEOUT_MS).is_some()
                || query.is_some_and(|q| q.split('&').any(|param| param == "connect=v1")) =>
            {
                Protocol::ConnectUnary
            }
            _ => Protocol::Http,
        }
    }
}
