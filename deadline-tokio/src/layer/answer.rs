//! The answers the layers make themselves: a gRPC status for a gRPC request, a plain HTTP
//! status with a short text otherwise, and the body type that carries either the handler's
//! body or such an answer.

use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Bytes;
use deadline_core::Error;
use deadline_core::wire::WireError;
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
    /// Anything else: answered with an HTTP status.
    Http,
}

impl Protocol {
    /// The protocol of a request with these headers.
    pub(crate) fn of(headers: &HeaderMap) -> Protocol {
        match headers.get(CONTENT_TYPE) {
            Some(value) if value.as_bytes().starts_with(b"application/grpc") => Protocol::Grpc,
            _ => Protocol::Http,
        }
    }
}

/// The answer to a request that the layer did not let its handler answer, for `error`
/// (with, for a malformed header, which header it was and what was wrong with it).
///
/// - gRPC: HTTP 200, trailers-only: `grpc-status` from [`Error::grpc_code`] and
///   `grpc-message` naming the reason, in the headers of a response with no body.
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
    match protocol {
        Protocol::Grpc => {
            let mut response = Response::new(DeadlineBody::answer(Bytes::new()));
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            headers.insert(
                GRPC_STATUS,
                HeaderValue::from(u16::from(error.grpc_code().as_u8())),
            );
            if let Ok(message) = HeaderValue::from_bytes(reason.text().as_bytes()) {
                headers.insert(GRPC_MESSAGE, message);
            }
            response
        }
        Protocol::Http => {
            let mut text = reason.text();
            text.push('\n');
            let mut response = Response::new(DeadlineBody::answer(Bytes::from(text)));
            *response.status_mut() = StatusCode::from_u16(error.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
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
    /// The response body of the layers: the handler's own body, or the short answer the layer
    /// made itself (see [`DeadlineLayer`](super::DeadlineLayer)).
    pub struct DeadlineBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        /// The handler's body, as it is.
        Inner {
            #[pin]
            body: B,
        },
        /// The layer's answer: its text, until it has been sent (empty for a gRPC answer,
        /// whose status travels in the headers).
        Answer { text: Option<Bytes> },
    }
}

impl<B> DeadlineBody<B> {
    /// The handler's body, passed through.
    pub(crate) fn inner(body: B) -> Self {
        DeadlineBody {
            kind: Kind::Inner { body },
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

    /// The handler's body, or `None` for the layer's own answer.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Inner { body } => Some(body),
            Kind::Answer { .. } => None,
        }
    }
}

impl<B> core::fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.kind {
            Kind::Inner { .. } => f.write_str("DeadlineBody::Inner(..)"),
            Kind::Answer { text } => f.debug_tuple("DeadlineBody::Answer").field(text).finish(),
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Answer { text } => Poll::Ready(text.take().map(|text| Ok(Frame::data(text)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Answer { text } => text.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Answer { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |text| text.len() as u64))
            }
        }
    }
}
