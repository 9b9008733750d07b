//! [`Protocol`]: how a request wants to be answered (gRPC, Connect, plain HTTP).

use super::headers::{CONNECT_PROTOCOL_VERSION, CONNECT_TIMEOUT_MS, CONTENT_TYPE, media_type};

/// How a request wants to be answered, read from its headers and its query string
/// ([`Protocol::read`]).
///
/// ```
/// use deadline_core::wire::{Codec, Protocol};
///
/// let typed = |value: &'static [u8]| move |name| (name == "content-type").then_some(value);
/// let grpc = Protocol::read(|| None, typed(b"application/grpc+proto"));
/// assert_eq!(grpc, Protocol::Grpc { codec: Codec::Proto });
/// // Media types are compared without regard to case, and the codec is kept for the answer.
/// let json = Protocol::read(|| None, typed(b"Application/gRPC+JSON"));
/// assert_eq!(json, Protocol::Grpc { codec: Codec::Json });
/// let cbor = Protocol::read(|| None, typed(b"application/grpc+cbor"));
/// assert_eq!(cbor, Protocol::Grpc { codec: Codec::Other });
/// let web = Protocol::read(|| None, typed(b"application/grpc-web-text"));
/// assert_eq!(web, Protocol::GrpcWeb { text: true, codec: Codec::Proto });
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
        /// The codec the request's content type names.
        codec: Codec,
    },
    /// A gRPC-Web request (`content-type: application/grpc-web`, or `application/grpc-web-text`
    /// for its base64 form, with or without a codec suffix): answered with a gRPC status, in
    /// gRPC-Web's content type; a body cut at the deadline ends with its trailers as the last
    /// message of the body (gRPC-Web's trailer frame), where a browser can read them.
    GrpcWeb {
        /// The body is base64 (`application/grpc-web-text`).
        text: bool,
        /// The codec the request's content type names.
        codec: Codec,
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
        /// The codec the request's content type names.
        codec: Codec,
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

    /// Whether an answer to this request repeats the request's own `content-type`
    /// ([`ContentType::Request`](super::ContentType::Request)): its codec is neither protobuf nor JSON ([`Codec::Other`]).
    /// A server that may answer the request itself keeps the request's `content-type` for
    /// the answer when this says so, and only then.
    ///
    /// ```
    /// use deadline_core::wire::{Codec, Protocol};
    ///
    /// assert!(Protocol::Grpc { codec: Codec::Other }.answer_repeats_content_type());
    /// assert!(!Protocol::Grpc { codec: Codec::Json }.answer_repeats_content_type());
    /// assert!(!Protocol::Http.answer_repeats_content_type());
    /// ```
    #[must_use]
    pub const fn answer_repeats_content_type(self) -> bool {
        matches!(
            self,
            Protocol::Grpc {
                codec: Codec::Other
            } | Protocol::GrpcWeb {
                codec: Codec::Other,
                ..
            } | Protocol::ConnectStream {
                codec: Codec::Other
            }
        )
    }

    /// The protocol a `content-type` alone says: gRPC's, gRPC-Web's or Connect streaming's,
    /// with the codec it names, or Connect unary's for `application/proto` (Connect's own name
    /// for protobuf; a unary JSON request's `application/json` says nothing); `None` for any
    /// other type.
    pub(super) fn of_content_type(value: &[u8]) -> Option<Protocol> {
        if let Some(codec) = media_type(value, b"application/grpc") {
            return Some(Protocol::Grpc {
                codec: Codec::of(codec),
            });
        }
        if let Some(codec) = media_type(value, b"application/grpc-web") {
            return Some(Protocol::GrpcWeb {
                text: false,
                codec: Codec::of(codec),
            });
        }
        if let Some(codec) = media_type(value, b"application/grpc-web-text") {
            return Some(Protocol::GrpcWeb {
                text: true,
                codec: Codec::of(codec),
            });
        }
        if media_type(value, b"application/proto").is_some() {
            return Some(Protocol::ConnectUnary);
        }
        // Connect's streaming types always name their codec.
        match media_type(value, b"application/connect") {
            Some(codec @ [b'+', ..]) => Some(Protocol::ConnectStream {
                codec: Codec::of(codec),
            }),
            _ => None,
        }
    }
}

/// The codec a gRPC, gRPC-Web or Connect streaming request names in its `content-type`
/// (`application/grpc+json`: JSON). A client checks that an answer names the codec it sent
/// before it reads the status in it (connect-go reads any other as `internal`), so an answer
/// made for the request names the same one ([`Answer::content_type`](super::Answer::content_type)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Codec {
    /// Protocol Buffers: `+proto`, or no suffix (gRPC's and gRPC-Web's default).
    Proto,
    /// JSON: `+json`.
    Json,
    /// Any other codec (`+cbor`, `+thrift`): an answer repeats the request's own
    /// `content-type`, the one name of it that the client is sure to accept.
    Other,
}

impl Codec {
    /// The codec that the rest of a `content-type` after its media type (see [`media_type`])
    /// names: a suffix (`+json`, in any case) before the end or the parameters; none is
    /// protobuf.
    fn of(rest: &[u8]) -> Codec {
        let Some(suffix) = rest.strip_prefix(b"+") else {
            return Codec::Proto;
        };
        let end = suffix
            .iter()
            .position(|byte| matches!(byte, b';' | b' ' | b'\t'))
            .unwrap_or(suffix.len());
        let (name, _) = suffix.split_at(end);
        if name.eq_ignore_ascii_case(b"proto") {
            Codec::Proto
        } else if name.eq_ignore_ascii_case(b"json") {
            Codec::Json
        } else {
            Codec::Other
        }
    }
}
