//! [`Protocol`]: how a request wants to be answered (gRPC, Connect, plain HTTP).

use super::headers::{CONNECT_PROTOCOL_VERSION, CONNECT_TIMEOUT_MS, CONTENT_TYPE, media_type};

/// How a request wants to be answered, read from its headers and its query string
/// ([`Protocol::read`]).
///
/// ```
/// use deadline_core::wire::Protocol;
///
/// let typed = |value: &'static [u8]| move |name| (name == "content-type").then_some(value);
/// assert_eq!(Protocol::read(|| None, typed(b"application/grpc+proto")), Protocol::Grpc { json: false });
/// // Media types are compared without regard to case, and the codec is kept for the answer.
/// assert_eq!(Protocol::read(|| None, typed(b"Application/gRPC+JSON")), Protocol::Grpc { json: true });
/// let web = Protocol::read(|| None, typed(b"application/grpc-web-text"));
/// assert_eq!(web, Protocol::GrpcWeb { text: true, json: false });
/// // Another type whose name starts the same is not gRPC's.
/// assert_eq!(Protocol::read(|| None, typed(b"application/grpcx")), Protocol::Http);
/// let connect = Protocol::read(|| None, |name| (name == "connect-protocol-version").then_some(&b"1"[..]));
/// assert_eq!(connect, Protocol::ConnectUnary);
/// // Only Connect sends its timeout in `connect-timeout-ms`: a request with it is Connect's.
/// let timed = Protocol::read(|| None, |name| (name == "connect-timeout-ms").then_some(&b"250"[..]));
/// assert_eq!(timed, Protocol::ConnectUnary);
/// // A Connect GET says its protocol version in the query string.
/// let get = Protocol::read(|| Some("encoding=json&connect=v1&message=%7B%7D"), |_| None);
/// assert_eq!(get, Protocol::ConnectUnary);
/// assert_eq!(Protocol::read(|| Some("q=connect%3Dv1"), |_| None), Protocol::Http);
/// assert_eq!(Protocol::read(|| None, |_| None), Protocol::Http);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Protocol {
    /// A gRPC request (`content-type: application/grpc`, with or without a codec suffix such
    /// as `+proto`): answered with a gRPC status, in the request's codec's content type (a
    /// client checks it before it reads the status).
    Grpc {
        /// The request's codec is JSON (`application/grpc+json`); else protobuf, or another
        /// codec, answered as protobuf.
        json: bool,
    },
    /// A gRPC-Web request (`content-type: application/grpc-web`, or `application/grpc-web-text`
    /// for its base64 form, with or without a codec suffix): answered with a gRPC status, in
    /// gRPC-Web's content type; a body cut at the deadline ends with its trailers as the last
    /// message of the body (gRPC-Web's trailer frame), where a browser can read them.
    GrpcWeb {
        /// The body is base64 (`application/grpc-web-text`).
        text: bool,
        /// The request's codec is JSON (`+json`); else protobuf.
        json: bool,
    },
    /// A Connect unary request (it has a `connect-protocol-version` header, which Connect
    /// clients should send and may leave out, or Connect's own `connect-timeout-ms`, or, for
    /// a GET, `connect=v1` in its query string, or the type `application/proto`): answered
    /// with the HTTP status of the error's Connect code and Connect's JSON error body, which
    /// a Connect client reads as that code (a plain 504 it would read as `unavailable`).
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
    /// The protocol of a request whose headers are read with `header` (the first value of
    /// the header of that lowercase name, if it has one), and whose query string (the part of
    /// its URI after `?`, if it has one) `query` gives, asked only when the headers do not
    /// decide.
    pub fn read<'a, 'q>(
        query: impl FnOnce() -> Option<&'q str>,
        mut header: impl FnMut(&'static str) -> Option<&'a [u8]>,
    ) -> Protocol {
        if let Some(typed) = header(CONTENT_TYPE).and_then(Protocol::of_content_type) {
            return typed;
        }
        let connect = header(CONNECT_PROTOCOL_VERSION).is_some()
            || header(CONNECT_TIMEOUT_MS).is_some()
            || query().is_some_and(|q| q.split('&').any(|param| param == "connect=v1"));
        if connect {
            Protocol::ConnectUnary
        } else {
            Protocol::Http
        }
    }

    /// The protocol a `content-type` alone says: gRPC's, gRPC-Web's or Connect streaming's,
    /// with the codec it names, or Connect unary's for `application/proto` (Connect's own name
    /// for protobuf; a unary JSON request's `application/json` says nothing); `None` for any
    /// other type.
    pub(super) fn of_content_type(value: &[u8]) -> Option<Protocol> {
        if let Some(codec) = media_type(value, b"application/grpc") {
            return Some(Protocol::Grpc {
                json: is_json(codec),
            });
        }
        if let Some(codec) = media_type(value, b"application/grpc-web") {
            return Some(Protocol::GrpcWeb {
                text: false,
                json: is_json(codec),
            });
        }
        if let Some(codec) = media_type(value, b"application/grpc-web-text") {
            return Some(Protocol::GrpcWeb {
                text: true,
                json: is_json(codec),
            });
        }
        if media_type(value, b"application/proto").is_some() {
            return Some(Protocol::ConnectUnary);
        }
        // Connect's streaming types always name their codec.
        match media_type(value, b"application/connect") {
            Some(codec @ [b'+', ..]) => Some(Protocol::ConnectStream {
                json: is_json(codec),
            }),
            _ => None,
        }
    }
}

/// Whether the rest of a `content-type` after its media type (see [`media_type`]) names the
/// JSON codec: `+json`, in any case, then nothing or parameters.
fn is_json(codec: &[u8]) -> bool {
    codec.split_at_checked(5).is_some_and(|(suffix, rest)| {
        suffix.eq_ignore_ascii_case(b"+json")
            && matches!(rest.first(), None | Some(b';' | b' ' | b'\t'))
    })
}
