//! The answers the layers make themselves: a gRPC status for a gRPC request, a plain HTTP
//! status with a short text otherwise, and the body type that carries either the handler's
//! body or such an answer.

use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Bytes;
use deadline_core::wire::WireError;
use deadline_core::{Deadline, Error, GrpcCode};
use tokio::time::Sleep;

use crate::clock::to_tokio;
use crate::context::in_scope;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};

/// The `grpc-status` header: the gRPC status code of a response.
pub(crate) const GRPC_STATUS: &str = "grpc-status";
/// The `grpc-message` header: the gRPC status message of a response.
pub(crate) const GRPC_MESSAGE: &str = "grpc-message";

/// How a request wants to be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// A gRPC request (`content-type: application/grpc`, with or without a `+proto`-like
    /// suffix, and gRPC-Web's `application/grpc-web`): answered with a gRPC status.
    Grpc,
    /// A Connect unary request (it has a `connect-protocol-version` header): answered with
    /// the HTTP status of the error and Connect's JSON error body.
    ConnectUnary,
    /// A Connect streaming request (`content-type: application/connect+...`): answered with
    /// HTTP 200 and an end-of-stream message carrying the error. `json` for
    /// `application/connect+json`.
    ConnectStream {
        /// The request's codec is JSON (else protobuf, or another binary codec).
        json: bool,
    },
    /// Anything else: answered with an HTTP status.
    Http,
}

impl Protocol {
    /// The protocol of a request with these headers.
    pub(crate) fn of(headers: &HeaderMap) -> Protocol {
        match headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes) {
            Some(value) if value.starts_with(b"application/grpc") => Protocol::Grpc,
            Some(value) if value.starts_with(b"application/connect+") => Protocol::ConnectStream {
                json: value.starts_with(b"application/connect+json"),
            },
            _ if headers.contains_key(CONNECT_PROTOCOL_VERSION) => Protocol::ConnectUnary,
            _ => Protocol::Http,
        }
    }
}

/// The header a Connect client sends with every unary request.
const CONNECT_PROTOCOL_VERSION: &str = "connect-protocol-version";

/// The Connect protocol's name for an error's gRPC code.
fn connect_code(error: Error) -> &'static str {
    match error.grpc_code() {
        GrpcCode::DeadlineExceeded => "deadline_exceeded",
        GrpcCode::Unavailable => "unavailable",
        GrpcCode::ResourceExhausted => "resource_exhausted",
        GrpcCode::InvalidArgument => "invalid_argument",
        _ => "unknown",
    }
}

/// Connect's JSON error object: `{"code":"deadline_exceeded","message":"..."}`. The texts
/// are the fixed, printable ASCII messages of [`Message`], without quotes or backslashes.
fn connect_error_json(error: Error, message: &str) -> String {
    let message: String = message
        .chars()
        .filter(|c| *c != '"' && *c != '\\')
        .collect();
    format!(
        r#"{{"code":"{}","message":"{message}"}}"#,
        connect_code(error)
    )
}

/// A Connect end-of-stream message carrying `error`: flags `0x02`, a 4-byte big-endian
/// length, and `{"error":{...}}`.
fn connect_end_stream(error: Error, message: &str) -> Bytes {
    let json = format!(r#"{{"error":{}}}"#, connect_error_json(error, message));
    let len = u32::try_from(json.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(json.len().saturating_add(5));
    out.push(0x02);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(json.as_bytes());
    Bytes::from(out)
}

/// The answer to a request that the layer did not let its handler answer, for `error`
/// (with, for a malformed header, which header it was and what was wrong with it).
///
/// - gRPC: HTTP 200, trailers-only: `grpc-status` from [`Error::grpc_code`] and
///   `grpc-message` naming the reason, in the headers of a response with no body.
/// - Connect unary: [`Error::http_status`] and Connect's JSON error body
///   (`{"code":"deadline_exceeded",...}`); Connect streaming: HTTP 200 and an end-of-stream
///   message with that error.
/// - HTTP: [`Error::http_status`], with the reason as a short `text/plain` body.
pub(crate) fn answer<B>(
    protocol: Protocol,
    error: Error,
    malformed: Option<(&'static str, WireError)>,
) -> Response<DeadlineBody<B>> {
    let reason = match malformed {
        Some((header, why)) => Message::Malformed(header, why),
        None => Message::Reason(error.reason()),
    };
    let status =
        StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match protocol {
        Protocol::Grpc => {
            let mut response = Response::new(DeadlineBody::answer(Bytes::new()));
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            grpc_status(headers, error, &reason.text());
            response
        }
        Protocol::ConnectUnary => {
            let body = connect_error_json(error, &reason.text());
            let mut response = Response::new(DeadlineBody::answer(Bytes::from(body)));
            *response.status_mut() = status;
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Protocol::ConnectStream { json } => {
            let body = connect_end_stream(error, &reason.text());
            let mut response = Response::new(DeadlineBody::answer(body));
            let content_type = if json {
                "application/connect+json"
            } else {
                "application/connect+proto"
            };
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            response
        }
        Protocol::Http => {
            let mut text = reason.text();
            text.push('\n');
            let mut response = Response::new(DeadlineBody::answer(Bytes::from(text)));
            *response.status_mut() = status;
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
    }
}

/// Sets `grpc-status` and `grpc-message` for `error` in `headers` (or trailers).
fn grpc_status(headers: &mut HeaderMap, error: Error, message: &str) {
    headers.insert(
        GRPC_STATUS,
        HeaderValue::from(u16::from(error.grpc_code().as_u8())),
    );
    if let Ok(message) = HeaderValue::from_bytes(message.as_bytes()) {
        headers.insert(GRPC_MESSAGE, message);
    }
}

/// What an answer says.
enum Message {
    /// The error's own reason.
    Reason(&'static str),
    /// A header that could not be read, and why.
    Malformed(&'static str, WireError),
}

impl Message {
    /// The text: printable ASCII only, so it is a valid `grpc-message` as it is (gRPC
    /// percent-encodes only bytes outside `0x20..=0x7E` and `%`, and none of these has one).
    fn text(&self) -> String {
        match self {
            Message::Reason(reason) => (*reason).to_owned(),
            Message::Malformed(header, why) => {
                format!("malformed {header} header: {}", why.reason())
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The response body of [`DeadlineLayer`](super::DeadlineLayer): the handler's own body,
    /// bounded by the request's deadline and polled inside the request's
    /// [`scope`](crate::scope), or the short answer the layer made itself.
    ///
    /// A body still streaming at the deadline (server-streaming gRPC, server-sent events, a
    /// chunked response) is dropped there, which drops the handler's stream and the work
    /// behind it, and ends the way the protocol expects:
    ///
    /// - gRPC: trailers `grpc-status: 4` (`DEADLINE_EXCEEDED`) and `grpc-message`;
    /// - Connect streaming: an end-of-stream message with `deadline_exceeded`;
    /// - anything else (HTTP/1.1 chunked or with a length, HTTP/2): the body fails with
    ///   [`BodyError::Deadline`], on which hyper resets the HTTP/2 stream or closes the
    ///   HTTP/1.1 connection, so the client sees a truncated response, never a complete one.
    pub struct DeadlineBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        /// The handler's body, until the deadline.
        Inner {
            #[pin]
            body: B,
            #[pin]
            sleep: Sleep,
            deadline: Deadline,
            protocol: Protocol,
        },
        /// The layer's answer: its text, until it has been sent (empty for a gRPC answer,
        /// whose status travels in the headers).
        Answer { text: Option<Bytes> },
        /// Cut at the deadline: the handler's body is dropped; what is left to send (the
        /// trailers, or the end-of-stream message, or the error), then nothing.
        Cut { last: Option<Last> },
    }
}

/// The last frame of a body cut at the deadline.
enum Last {
    /// gRPC trailers.
    Trailers(HeaderMap),
    /// A Connect end-of-stream message.
    Data(Bytes),
    /// The body's error: hyper resets the stream.
    Error,
}

impl<B> DeadlineBody<B> {
    /// The handler's body, bounded by `deadline` and polled in its scope; cut at it the way
    /// `protocol` expects.
    pub(crate) fn inner(body: B, deadline: Deadline, protocol: Protocol) -> Self {
        DeadlineBody {
            kind: Kind::Inner {
                body,
                sleep: tokio::time::sleep_until(to_tokio(deadline.instant())),
                deadline,
                protocol,
            },
        }
    }

    /// An answer with `text` (nothing at all when it is empty).
    fn answer(text: Bytes) -> Self {
        DeadlineBody {
            kind: Kind::Answer {
                text: (!text.is_empty()).then_some(text),
            },
        }
    }

    /// Whether this is the layer's own answer rather than the handler's body.
    pub fn is_answer(&self) -> bool {
        matches!(self.kind, Kind::Answer { .. })
    }

    /// Whether the handler's body was cut at the deadline (and dropped).
    pub fn is_cut(&self) -> bool {
        matches!(self.kind, Kind::Cut { .. })
    }

    /// The handler's body (no longer bounded by the deadline), or `None` for the layer's
    /// own answer or a body cut at the deadline.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Inner { body, .. } => Some(body),
            Kind::Answer { .. } | Kind::Cut { .. } => None,
        }
    }
}

impl<B> core::fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.kind {
            Kind::Inner { deadline, .. } => f
                .debug_struct("DeadlineBody::Inner")
                .field("deadline", deadline)
                .finish_non_exhaustive(),
            Kind::Answer { text } => f.debug_tuple("DeadlineBody::Answer").field(text).finish(),
            Kind::Cut { .. } => f.write_str("DeadlineBody::Cut"),
        }
    }
}

/// The error of a [`DeadlineBody`]: the handler's body failed, or it was cut at the deadline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BodyError<E> {
    /// The body was still streaming at the request's deadline, and was dropped there. Always
    /// [`Error::DeadlineExceeded`].
    Deadline(Error),
    /// The handler's body failed.
    Inner(E),
}

impl<E: core::fmt::Display> core::fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BodyError::Deadline(error) => error.fmt(f),
            BodyError::Inner(error) => error.fmt(f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for BodyError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            BodyError::Deadline(error) => Some(error),
            BodyError::Inner(error) => Some(error),
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = BodyError<B::Error>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut kind = self.project().kind;
        match kind.as_mut().project() {
            KindProj::Inner {
                body,
                sleep,
                deadline,
                protocol,
            } => {
                // The deadline first: a stream that always has a frame ready is cut at the
                // deadline all the same.
                if sleep.poll(cx).is_pending() {
                    let deadline = *deadline;
                    return in_scope(deadline, || body.poll_frame(cx))
                        .map(|frame| frame.map(|frame| frame.map_err(BodyError::Inner)));
                }
                let last = match *protocol {
                    Protocol::Grpc => {
                        let mut trailers = HeaderMap::new();
                        let error = Error::DeadlineExceeded;
                        grpc_status(&mut trailers, error, error.reason());
                        Last::Trailers(trailers)
                    }
                    Protocol::ConnectStream { .. } => {
                        let error = Error::DeadlineExceeded;
                        Last::Data(connect_end_stream(error, error.reason()))
                    }
                    Protocol::ConnectUnary | Protocol::Http => Last::Error,
                };
                // Drop the handler's body (and its stream) now.
                kind.set(Kind::Cut { last: None });
                Poll::Ready(Some(match last {
                    Last::Trailers(trailers) => Ok(Frame::trailers(trailers)),
                    Last::Data(data) => Ok(Frame::data(data)),
                    Last::Error => Err(BodyError::Deadline(Error::DeadlineExceeded)),
                }))
            }
            KindProj::Answer { text } => Poll::Ready(text.take().map(|text| Ok(Frame::data(text)))),
            KindProj::Cut { last } => Poll::Ready(match last.take() {
                Some(Last::Trailers(trailers)) => Some(Ok(Frame::trailers(trailers))),
                Some(Last::Data(data)) => Some(Ok(Frame::data(data))),
                Some(Last::Error) => Some(Err(BodyError::Deadline(Error::DeadlineExceeded))),
                None => None,
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Answer { text } => text.is_none(),
            Kind::Cut { last } => last.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Answer { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |text| text.len() as u64))
            }
            Kind::Cut { .. } => SizeHint::default(),
        }
    }
}
