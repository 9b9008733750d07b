//! [`DeadlineBody`]: the response body of [`DeadlineLayer`](crate::DeadlineLayer).

use core::pin::Pin;
use core::task::{Context, Poll};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use deadline_core::wire::{Cut, Envelopes, FailureWindow, GRPC_MESSAGE, GRPC_STATUS, Protocol};
use deadline_core::{Clock, Deadline, Error};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::bounded_body::{BoundedBody, Polled};
use super::headers::{lookup, set};
use super::messages::Messages;
use super::server::Bound;
use crate::clock::TokioClock;

pin_project_lite::pin_project! {
    /// The response body of [`DeadlineLayer`](crate::DeadlineLayer): the handler's own body,
    /// bounded by the request's deadline and polled inside the request's
    /// [`scope`](crate::scope), or the short answer the layer made itself.
    ///
    /// **At the deadline instant**, the client gets one complete answer:
    ///
    /// - A frame the body has ready is sent, whatever the time (but for the part of a message
    ///   not yet whole, below): a response whose head was given out in time and whose body is
    ///   already complete (in memory, or every frame ready: 16 frames of any size, then up to
    ///   4 MiB in all, sent after the deadline, and whatever came before, the frame that
    ///   ends it: trailers, gRPC-Web's trailer frame, Connect's end-stream message) is
    ///   delivered whole, a moment after the deadline if that is when it is sent.
    /// - A body that has to wait for a frame at the deadline (server-streaming gRPC,
    ///   server-sent events, a chunked response still being made), or that keeps sending
    ///   past it (more than [`LateFrames`](deadline_core::wire::LateFrames) allows),
    ///   is dropped there, which drops the handler's
    ///   stream and the work behind it, and it ends the way its protocol expects
    ///   ([`Protocol::cut`]; for a body of messages, after a whole one: [`Envelopes::cut`]):
    ///   gRPC with trailers `grpc-status: 4` (`DEADLINE_EXCEEDED`);
    ///   gRPC-Web with those trailers as the body's last message (its trailer frame, in
    ///   base64 for `application/grpc-web-text`), which a browser can read; Connect
    ///   streaming with an end-of-stream message carrying `deadline_exceeded`;
    ///   anything else (HTTP/1.1 chunked or with a length, HTTP/2) with the body failing with
    ///   [`BodyError::Deadline`], on which hyper resets the HTTP/2 stream or closes the
    ///   HTTP/1.1 connection, so the client sees a cut response, never one that looks
    ///   complete (over HTTP/1.0, a body of no stated length ends where the connection
    ///   closes, so its cut looks complete: [`Cut::Reset`](deadline_core::wire::Cut::Reset)).
    /// - A body that fails within the failure window before the deadline
    ///   ([`ServerPolicy::failure_window`](deadline_core::wire::ServerPolicy::failure_window))
    ///   or after it, whatever its error, is cut as the deadline's, as above: a body relayed
    ///   from a client layer (`PropagateLayer`'s) fails as its deadline there, and the client
    ///   reads the deadline's status, not a reset stream.
    /// - A body of gRPC, gRPC-Web or Connect streaming messages (the response says so in its
    ///   `content-type`: [`Envelopes::of_response`]) is sent whole message by whole
    ///   message, however its frames split them (a proxy's do): the bytes of a message not yet
    ///   whole are held until it is, up to [`Envelopes::HOLD_AT_MOST`] (4 MiB) a message, so
    ///   such a message's first byte goes when its last one comes. Cut at the deadline, the
    ///   body ends after a whole message, and the client reads the deadline's status, not a
    ///   broken message; a body that has already sent its protocol's last message ends
    ///   there, with nothing added. A longer message passes as it comes, and a body cut
    ///   inside it ends as a cut stream. gRPC-Web's base64 form
    ///   (`application/grpc-web-text`) is read through its text, quantum by quantum
    ///   ([`Envelopes::of`]), and its whole messages are sent encoded again, each frame
    ///   padded, as its clients read it; text that is not base64 is sent as it comes, and cut
    ///   at the deadline it ends as a cut stream.
    /// - A gRPC-Web or Connect streaming body that its response says is something else (another
    ///   content type, or a `content-encoding` over the whole body) is sent as it comes, and
    ///   cut at the deadline it ends as a cut stream, with nothing written into it
    ///   ([`Envelopes::cut_unread`]).
    /// - A response whose body would end with its protocol's ending declares no length: its
    ///   `content-length` is removed and the body says no exact size
    ///   ([`Cut::keeps_declared_length`]), so that a cut body does not disagree with its
    ///   head. One that would end as a cut stream keeps its length, which tells the client
    ///   it was cut.
    pub struct DeadlineBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        /// The handler's body, until the deadline. There it ends as `protocol` ends a body,
        /// or as a cut stream when `reset` ([`Envelopes::cut_unread`] gives one or the other).
        /// A flag rather than that 72-byte `Cut`, so that the body, moved and boxed with every
        /// response it bounds, stays at 104 bytes around axum's `Body`.
        Inner {
            #[pin]
            body: BoundedBody<B>,
            protocol: Protocol,
            reset: bool,
            // The stretch before the deadline in which its failures are the deadline's.
            window: FailureWindow,
        },
        /// The handler's body of enveloped messages, until the deadline, sent whole message by
        /// whole message.
        Messages {
            #[pin]
            body: BoundedBody<B>,
            protocol: Protocol,
            // Where it stands between them, and what it holds (boxed, so that the other
            // bodies, most of them, stay small to move).
            messages: Box<Messages>,
            // The stretch before the deadline in which its failures are the deadline's.
            window: FailureWindow,
        },
        /// The layer's answer: its text, until it has been sent (none for a gRPC answer,
        /// whose status travels in the headers).
        Answer { text: Option<Bytes> },
        /// Cut at the deadline: the handler's body is dropped; what is left to send (the
        /// trailers, or the end-of-stream message, or the error), then nothing.
        Cut { last: Option<Last> },
        /// The handler's body ended with part of a message held, which was sent: its
        /// trailers, if it ended with some, then nothing. (Boxed: a rare end, which would
        /// otherwise make every body larger to move.)
        Ended { trailers: Option<Box<HeaderMap>> },
    }
}

/// How many frames a body of enveloped messages may give in one poll while none of them ends
/// a message, before the task yields: a body always ready with small pieces of one large
/// message does not keep its thread.
const HELD_FRAMES_PER_POLL: u8 = 32;

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
    /// The last frame of a body cut at the deadline, as `cut` says: `None` when the body has
    /// already sent its protocol's last message.
    fn of(cut: Cut) -> Option<Last> {
        Some(match cut {
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
            Cut::Ended => return None,
        })
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
    /// The handler's body, bounded by `deadline` and polled in its scope; sent whole message
    /// by whole message if it is `protocol`'s messages ([`Envelopes::of_response`], from the
    /// response's `headers`), and cut at the deadline the way `protocol` expects; cut as
    /// [`Envelopes::cut_unread`] says if it is not.
    ///
    /// With it, whether the response may keep a length it declares: not when the cut writes
    /// the protocol's ending ([`Cut::keeps_declared_length`]), and the body then says no
    /// exact size.
    #[inline]
    pub(crate) fn inner(body: B, bound: Bound, headers: &HeaderMap) -> (Self, bool) {
        let Bound {
            deadline,
            protocol,
            window,
        } = bound;
        let body = BoundedBody::new(body, deadline, true);
        let (kind, keeps_length) = match Envelopes::of_response(protocol, lookup(headers)) {
            None => {
                let cut = Envelopes::cut_unread(protocol, lookup(headers));
                let reset = cut == Cut::Reset;
                let kind = Kind::Inner {
                    body,
                    protocol,
                    reset,
                    window,
                };
                (kind, cut.keeps_declared_length())
            }
            Some(read) => {
                let kind = Kind::Messages {
                    body,
                    protocol,
                    messages: Box::new(Messages::new(read, protocol)),
                    window,
                };
                (kind, protocol.cut().keeps_declared_length())
            }
        };
        (DeadlineBody { kind }, keeps_length)
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

    /// Whether the handler's body was cut at the deadline (and dropped). A stream that had
    /// already sent its last message (a gRPC-Web trailer frame, a Connect end-of-stream
    /// message) and was still open then is cut too, though its client has all of it.
    pub fn is_cut(&self) -> bool {
        matches!(self.kind, Kind::Cut { .. })
    }

    /// The handler's body (no longer bounded by the deadline), or `None` for the layer's
    /// own answer, a body cut at the deadline, or one that has ended.
    ///
    /// The bytes of a message not yet whole that the layer holds (see above) are dropped
    /// with it: take the body before its first frame.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Inner { body, .. } | Kind::Messages { body, .. } => Some(body.into_inner()),
            Kind::Answer { .. } | Kind::Cut { .. } | Kind::Ended { .. } => None,
        }
    }
}

impl<B> core::fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.kind {
            Kind::Inner { body, .. } | Kind::Messages { body, .. } => f
                .debug_struct("DeadlineBody::Inner")
                .field("deadline", &body.deadline())
                .finish_non_exhaustive(),
            Kind::Answer { text } => f.debug_tuple("DeadlineBody::Answer").field(text).finish(),
            Kind::Cut { .. } => f.write_str("DeadlineBody::Cut"),
            Kind::Ended { .. } => f.write_str("DeadlineBody::Ended"),
        }
    }
}

/// The error of a [`DeadlineBody`]: the handler's body failed, or it was cut at the deadline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BodyError<E> {
    /// The body was still streaming at the request's deadline, and was dropped there. Always
    /// [`Error::DeadlineExceeded`].
    ///
    /// Its [`source`](core::error::Error::source) is the HTTP/2 reset the stream ends with,
    /// an `h2::Error` of reason `CANCEL` ([`Cut::RESET_CODE`]): hyper resets the stream with
    /// the reason it finds in a body error's source chain (and `INTERNAL_ERROR` without one),
    /// which a gRPC or Connect client reads as `CANCELLED`, the shape of a deadline, not as
    /// `INTERNAL`.
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
            BodyError::Deadline(_) => Some(&*RESET),
            BodyError::Inner(error) => Some(error),
        }
    }
}

/// Whether a handler's body bounded by `deadline` that failed now failed of the deadline: in
/// the failure `window` ([`ServerPolicy::failure_window`]) or after the deadline, whatever its
/// error, it is cut as the deadline's, and the client reads the deadline's status. A body
/// relayed from a client layer (`PropagateLayer`'s) fails with the deadline's error there
/// (what it sent running out, or this deadline, by which it is bounded too, polled first),
/// and that failure alone would reset the stream, which a gRPC client reads as `INTERNAL`.
///
/// [`ServerPolicy::failure_window`]: deadline_core::wire::ServerPolicy::failure_window
fn failed_of(window: FailureWindow, deadline: Deadline) -> bool {
    window.is_deadline_failure(deadline, TokioClock.now())
}

/// The HTTP/2 reset of a body cut at the deadline ([`Cut::RESET_CODE`]), the source of every
/// [`BodyError::Deadline`].
static RESET: std::sync::LazyLock<h2::Error> =
    std::sync::LazyLock::new(|| h2::Error::from(h2::Reason::from(Cut::RESET_CODE)));

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
        let (mut body, protocol, messages, window) = match kind.as_mut().project() {
            KindProj::Inner {
                body,
                protocol,
                reset,
                window,
            } => {
                let deadline = body.deadline();
                match body.poll_step(cx, true) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Polled::Frame(frame)) => return Poll::Ready(Some(Ok(frame))),
                    Poll::Ready(Polled::End) => return Poll::Ready(None),
                    Poll::Ready(Polled::Failed(error)) if !failed_of(*window, deadline) => {
                        return Poll::Ready(Some(Err(BodyError::Inner(error))));
                    }
                    Poll::Ready(Polled::Failed(_) | Polled::Cut) => {}
                }
                let cut = if *reset { Cut::Reset } else { protocol.cut() };
                // Drop the handler's body (and its stream) now.
                kind.set(Kind::Cut { last: None });
                return Poll::Ready(Last::of(cut).map(Last::frame));
            }
            KindProj::Messages {
                body,
                protocol,
                messages,
                window,
            } => (body, *protocol, messages, *window),
            KindProj::Answer { text } => {
                return Poll::Ready(text.take().map(|text| Ok(Frame::data(text))));
            }
            KindProj::Cut { last } => return Poll::Ready(last.take().map(Last::frame)),
            KindProj::Ended { trailers } => {
                return Poll::Ready(
                    trailers
                        .take()
                        .map(|trailers| Ok(Frame::trailers(*trailers))),
                );
            }
        };
        // A body of enveloped messages: whole message by whole message.
        for _ in 0..HELD_FRAMES_PER_POLL {
            let step = match body.as_mut().poll_step(cx, false) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(step) => step,
            };
            match step {
                Polled::Frame(frame) => match frame.into_data() {
                    Ok(data) => {
                        // After the deadline, a frame counts against what may be sent late,
                        // unless it ends the body or the protocol's messages (gRPC-Web's
                        // trailer frame, Connect's end-stream message: the client's answer).
                        // Read first, so that it is known; cut, the body ends as it would
                        // have before it.
                        let before = messages.mark();
                        let len = data.len();
                        let whole = messages.whole(data);
                        let ends = messages.first_end() || body.is_end_stream();
                        if !body.as_mut().send_late(len, ends) {
                            let cut = before.cut(protocol);
                            kind.set(Kind::Cut { last: None });
                            return Poll::Ready(Last::of(cut).map(Last::frame));
                        }
                        if let Some(whole) = whole {
                            return Poll::Ready(Some(Ok(Frame::data(whole))));
                        }
                    }
                    // The handler's trailers: after the bytes of a message it never finished,
                    // if there are any.
                    Err(frame) => {
                        let Some(held) = messages.take_held() else {
                            return Poll::Ready(Some(Ok(frame)));
                        };
                        kind.set(Kind::Ended {
                            trailers: frame.into_trailers().ok().map(Box::new),
                        });
                        return Poll::Ready(Some(Ok(Frame::data(held))));
                    }
                },
                Polled::Failed(error) if !failed_of(window, body.deadline()) => {
                    return Poll::Ready(Some(Err(BodyError::Inner(error))));
                }
                Polled::End => {
                    let Some(held) = messages.take_held() else {
                        return Poll::Ready(None);
                    };
                    kind.set(Kind::Ended { trailers: None });
                    return Poll::Ready(Some(Ok(Frame::data(held))));
                }
                Polled::Failed(_) | Polled::Cut => {
                    // What is held of a message not yet whole is dropped with the handler's
                    // body (and its stream), now.
                    let cut = messages.cut(protocol);
                    kind.set(Kind::Cut { last: None });
                    return Poll::Ready(Last::of(cut).map(Last::frame));
                }
            }
        }
        // Every frame of this poll held part of a message: yield, and come back.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.get_ref().is_end_stream(),
            Kind::Messages { body, messages, .. } => {
                body.get_ref().is_end_stream() && !messages.holds_any()
            }
            Kind::Answer { text } => text.is_none(),
            Kind::Cut { last } => last.is_none(),
            Kind::Ended { trailers } => trailers.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            // Cut, it ends short: its own size, which a length declared from it lets the
            // client see.
            Kind::Inner {
                body, reset: true, ..
            } => body.get_ref().size_hint(),
            // Cut, it ends without the rest of its own body and with what that does not count
            // (the protocol's ending, after the part of a message held back; in gRPC-Web's
            // base64 form, its messages encoded again): no size, neither an exact one, from
            // which a server would declare a length (`Cut::keeps_declared_length`), nor a
            // lower bound it might not reach.
            Kind::Inner { .. } | Kind::Messages { .. } | Kind::Cut { .. } | Kind::Ended { .. } => {
                SizeHint::default()
            }
            Kind::Answer { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |text| text.len() as u64))
            }
        }
    }
}
