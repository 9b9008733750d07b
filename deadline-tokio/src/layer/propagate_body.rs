//! [`PropagateBody`]: the response body of [`PropagateLayer`](super::PropagateLayer).

use core::fmt;
use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Bytes;
use deadline_core::wire::{
    Failure, GRPC_MESSAGE, GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, GRPC_STATUS_DETAILS_BIN, Sent,
};
use deadline_core::{Clock, Error};
use http_body::{Body, Frame, SizeHint};

use super::bounded_body::{BoundedBody, Polled};
use super::headers::set;
use super::propagate_error::PropagateError;
use crate::clock::TokioClock;

pin_project_lite::pin_project! {
    /// The response body of [`PropagateService`](super::PropagateService): the next
    /// service's body, bounded by what the request was sent with
    /// ([`Sent::deadline`](deadline_core::wire::Sent::deadline)).
    ///
    /// - A frame the body has ready is passed on, whatever the time, within what
    ///   [`LateFrames`](deadline_core::wire::LateFrames) allows after the time is up (16
    ///   frames of any size, then up to 4 MiB in all, and the frame that ends it: a body that
    ///   keeps every frame ready is still cut); a body that has
    ///   to wait when its time is up, or sends more than that after it, is dropped (which, on
    ///   a hyper or tonic connection, resets the stream) and fails with
    ///   [`PropagateError::Deadline`]`(`[`Error::DeadlineExceeded`]`)`.
    /// - A failure that is the deadline's
    ///   ([`Sent::is_deadline_failure`](deadline_core::wire::Sent::is_deadline_failure)) is
    ///   reported as the deadline's: a body error becomes [`PropagateError::Deadline`], and
    ///   gRPC trailers with `CANCELLED` or `UNAVAILABLE` are rewritten to
    ///   `DEADLINE_EXCEEDED`, so the caller reads the deadline, not the next hop's timer
    ///   (unless they say when to retry, or not to, `grpc-retry-pushback-ms`: the next
    ///   service's own answer, relayed as it came).
    /// - Outside any scope, the body passes through (its errors as
    ///   [`PropagateError::Inner`]).
    pub struct PropagateBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Unbounded {
            #[pin]
            body: B,
        },
        Bounded {
            #[pin]
            body: BoundedBody<B>,
            sent: Sent,
        },
        /// Dropped when its time ran out.
        Cut,
    }
}

impl<B> PropagateBody<B> {
    pub(super) const fn unbounded(body: B) -> Self {
        PropagateBody {
            kind: Kind::Unbounded { body },
        }
    }

    pub(super) const fn bounded(body: B, sent: Sent) -> Self {
        PropagateBody {
            kind: Kind::Bounded {
                body: BoundedBody::new(body, sent.deadline(), false),
                sent,
            },
        }
    }

    /// The next service's body, no longer bounded; `None` once it was cut.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            Kind::Unbounded { body } => Some(body),
            Kind::Bounded { body, .. } => Some(body.into_inner()),
            Kind::Cut => None,
        }
    }
}

impl<B> fmt::Debug for PropagateBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Unbounded { .. } => f.write_str("PropagateBody::Unbounded(..)"),
            Kind::Bounded { sent, .. } => f
                .debug_struct("PropagateBody::Bounded")
                .field("sent", sent)
                .finish_non_exhaustive(),
            Kind::Cut => f.write_str("PropagateBody::Cut"),
        }
    }
}

impl<B> Body for PropagateBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = PropagateError<B::Error>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut kind = self.project().kind;
        match kind.as_mut().project() {
            KindProj::Unbounded { body } => body
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(PropagateError::Inner))),
            KindProj::Bounded { body, sent } => {
                let sent = *sent;
                match body.poll_step(cx, true) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Polled::Frame(frame)) => Poll::Ready(Some(Ok(relay(frame, sent)))),
                    Poll::Ready(Polled::Failed(error)) => Poll::Ready(Some(Err(
                        if sent.is_deadline_failure(Failure::Body, TokioClock.now()) {
                            PropagateError::Deadline(Error::DeadlineExceeded)
                        } else {
                            PropagateError::Inner(error)
                        },
                    ))),
                    Poll::Ready(Polled::End) => Poll::Ready(None),
                    Poll::Ready(Polled::Cut) => {
                        kind.set(Kind::Cut);
                        Poll::Ready(Some(Err(PropagateError::Deadline(Error::DeadlineExceeded))))
                    }
                }
            }
            KindProj::Cut => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Unbounded { body } => body.is_end_stream(),
            Kind::Bounded { body, .. } => body.get_ref().is_end_stream(),
            Kind::Cut => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Unbounded { body } => body.size_hint(),
            Kind::Bounded { body, .. } => body.get_ref().size_hint(),
            Kind::Cut => SizeHint::default(),
        }
    }
}

/// A frame passed on: trailers whose gRPC status is the deadline's are rewritten to
/// `DEADLINE_EXCEEDED`, without the details of the status they replace (a client checks
/// their code against `grpc-status`).
fn relay(frame: Frame<Bytes>, sent: Sent) -> Frame<Bytes> {
    match frame.into_trailers() {
        Ok(mut trailers) => {
            let failure = Failure::Trailers {
                grpc_status: trailers.get(GRPC_STATUS).map(|v| v.as_bytes()),
                grpc_retry_pushback_ms: trailers.get(GRPC_RETRY_PUSHBACK_MS).map(|v| v.as_bytes()),
            };
            if sent.is_deadline_failure(failure, TokioClock.now()) {
                let error = Error::DeadlineExceeded;
                let code = error.grpc_code().as_u8().to_string();
                set(&mut trailers, GRPC_STATUS, code.as_bytes());
                set(&mut trailers, GRPC_MESSAGE, error.reason().as_bytes());
                trailers.remove(GRPC_STATUS_DETAILS_BIN);
            }
            Frame::trailers(trailers)
        }
        Err(frame) => frame,
    }
}
