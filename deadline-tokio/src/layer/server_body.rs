//! [`DeadlineBody`]: the response body of [`DeadlineLayer`](crate::DeadlineLayer).

use core::pin::Pin;
use core::task::{Context, Poll};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use deadline_core::wire::{Cut, GRPC_MESSAGE, GRPC_STATUS, Protocol};
use deadline_core::{Deadline, Error};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::bounded_body::{BoundedBody, Polled};
use super::headers::set;

pin_project_lite::pin_project! {
    /// The response body of [`DeadlineLayer`](crate::DeadlineLayer): the handler's own body,
    /// bounded by the request's deadline and polled inside the request's
    /// [`scope`](crate::scope), or the short answer the layer made itself.
    ///
    /// **At the deadline instant**, the client gets one complete answer:
    ///
    /// - A frame the body has ready is sent, whatever the time: a response whose head was
    ///   given out in time and whose body is already complete (in memory, or every frame
    ///   ready) is delivered whole, a moment after the deadline if that is when it is sent.
    /// - A body that has to wait for a frame at the deadline (server-streaming gRPC,
    ///   server-sent events, a chunked response still being made), or that keeps sending
    ///   past it (more than 16 frames after it), is dropped there, which drops the handler's
    ///   stream and the work behind it, and it ends the way its protocol expects
    ///   ([`Protocol::cut`]): gRPC with trailers `grpc-status: 4` (`DEADLINE_EXCEEDED`);
    ///   gRPC-Web with those trailers as the body's last message (its trailer frame, in
    ///   base64 for `application/grpc-web-text`), which a browser can read; Connect
    ///   streaming with an end-of-stream message carrying `deadline_exceeded`;
    ///   anything else (HTTP/1.1 chunked or with a length, HTTP/2) with the body failing with
    ///   [`BodyError::Deadline`], on which hyper resets the HTTP/2 stream or closes the
    ///   HTTP/1.1 connection, so the client sees a cut response, never one that looks
    ///   complete.
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
            body: BoundedBody<B>,
            protocol: Protocol,
        },
        /// The layer's answer: its text, until it has been sent (none for a gRPC answer,
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

impl Last {
    /// How a body of `protocol` cut at the deadline ends.
    fn of(protocol: Protocol) -> Last {
        match protocol.cut() {
            Cut::Trailers {
                grpc_status,
                grpc_message,
            } => {
                let mut trailers = HeaderMap::new();
                set(
                    &mut trailers,
                    GRPC_STATUS,
                    grpc_status.as_u8().to_string().as_bytes(),
                );
                set(&mut trailers, GRPC_MESSAGE, grpc_message.as_bytes());
                Last::Trailers(trailers)
            }
            Cut::EndStream(answer) => Last::Data(Bytes::copy_from_slice(answer.body().as_bytes())),
            Cut::TrailerFrame(answer) => {
                let frame = answer.trailer_frame();
                Last::Data(match answer.protocol() {
                    Protocol::GrpcWeb { text: true, .. } => {
                        Bytes::from(STANDARD.encode(frame.as_bytes()))
                    }
                    _ => Bytes::copy_from_slice(frame.as_bytes()),
                })
            }
            Cut::Reset => Last::Error,
        }
    }

    /// The frame.
    fn frame<E>(self) -> Result<Frame<Bytes>, BodyError<E>> {
        match self {
            Last::Trailers(trailers) => Ok(Frame::trailers(trailers)),
            Last::Data(data) => Ok(Frame::data(data)),
            Last::Error => Err(BodyError::Deadline(Error::DeadlineExceeded)),
        }
    }
}

impl<B> DeadlineBody<B> {
    /// The handler's body, bounded by `deadline` and polled in its scope; cut at it the way
    /// `protocol` expects.
    pub(crate) const fn inner(body: B, deadline: Deadline, protocol: Protocol) -> Self {
        DeadlineBody {
            kind: Kind::Inner {
                body: BoundedBody::new(body, deadline, true),
                protocol,
            },
        }
    }

    /// An answer with `text` (nothing at all when it is empty).
    pub(crate) fn answer(text: Bytes) -> Self {
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
            Kind::Inner { body, .. } => Some(body.into_inner()),
            Kind::Answer { .. } | Kind::Cut { .. } => None,
        }
    }
}

impl<B> core::fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.kind {
            Kind::Inner { body, .. } => f
                .debug_struct("DeadlineBody::Inner")
                .field("deadline", &body.deadline())
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
            KindProj::Inner { body, protocol } => {
                let protocol = *protocol;
                match body.poll_step(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Polled::Frame(frame)) => Poll::Ready(Some(Ok(frame))),
                    Poll::Ready(Polled::Failed(error)) => {
                        Poll::Ready(Some(Err(BodyError::Inner(error))))
                    }
                    Poll::Ready(Polled::End) => Poll::Ready(None),
                    Poll::Ready(Polled::Cut) => {
                        // Drop the handler's body (and its stream) now.
                        kind.set(Kind::Cut { last: None });
                        Poll::Ready(Some(Last::of(protocol).frame()))
                    }
                }
            }
            KindProj::Answer { text } => Poll::Ready(text.take().map(|text| Ok(Frame::data(text)))),
            KindProj::Cut { last } => Poll::Ready(last.take().map(Last::frame)),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.get_ref().is_end_stream(),
            Kind::Answer { text } => text.is_none(),
            Kind::Cut { last } => last.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.get_ref().size_hint(),
            Kind::Answer { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |text| text.len() as u64))
            }
            Kind::Cut { .. } => SizeHint::default(),
        }
    }
}
