//! [`BoundedBody`]: a response body bounded by a deadline, the one way both layers bound a
//! body.

use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Buf;
use deadline_core::wire::LateFrames;
use deadline_core::{Clock, Deadline};
use http_body::{Body, Frame};
use tokio::time::Sleep;

use crate::bounded::poll_boxed_timer;
use crate::clock::TokioClock;
use crate::context::in_scope;

pin_project_lite::pin_project! {
    /// A response body bounded by a deadline.
    ///
    /// - Each frame is asked of the body first: a frame it has ready is sent, whatever the
    ///   time. So a response that is complete when the deadline comes (its head given out in
    ///   time, its body already in memory) reaches the client whole, within what
    ///   [`LateFrames`] allows after the deadline (16 frames of any size, then up to 4 MiB in
    ///   all, and the frame that ends it).
    /// - Once the deadline has passed, the body gets no more time: the first time it would
    ///   wait for a frame, or once it has sent what [`LateFrames`] allows, it is cut
    ///   ([`Polled::Cut`]). A wait found with the task's cooperative budget spent gets one
    ///   more poll first (`bounded::past_bound`): the frame may have been there, held back
    ///   by the budget. Once between two frames: a body that gives a frame is spared again.
    /// - Before the deadline, a body that waits is cut when the deadline comes.
    pub(crate) struct BoundedBody<B> {
        #[pin]
        body: B,
        // Made the first time the body waits, on the heap: a body that is complete when it is
        // answered (most responses) never needs it, and stays small to move and to box.
        sleep: Option<Pin<Box<Sleep>>>,
        deadline: Deadline,
        // Polled inside a scope with the deadline (a handler's body), or not.
        scoped: bool,
        // Given its one more poll past the deadline with the task's budget spent
        // (`bounded::past_bound`), since its last frame.
        spared: bool,
        late: LateFrames,
    }
}

/// One step of a [`BoundedBody`].
pub(crate) enum Polled<T, E> {
    /// A frame of the body.
    Frame(Frame<T>),
    /// The body failed.
    Failed(E),
    /// The body ended.
    End,
    /// The deadline came first: drop the body.
    Cut,
}

impl<B> BoundedBody<B> {
    /// `body`, bounded by `deadline`; polled inside a scope with it when `scoped`.
    pub(crate) const fn new(body: B, deadline: Deadline, scoped: bool) -> Self {
        BoundedBody {
            body,
            sleep: None,
            deadline,
            scoped,
            spared: false,
            late: LateFrames::new(),
        }
    }

    /// The deadline.
    pub(crate) const fn deadline(&self) -> Deadline {
        self.deadline
    }

    /// The body.
    pub(crate) const fn get_ref(&self) -> &B {
        &self.body
    }

    /// The body, no longer bounded.
    pub(crate) fn into_inner(self) -> B {
        self.body
    }
}

impl<B: Body> BoundedBody<B> {
    /// The next step of the body. `metered`: a frame that comes after the deadline, and
    /// does not end the body, counts against what may be sent late here; a caller that reads
    /// the frame first (whether it ends a body of messages) counts it itself
    /// ([`send_late`](Self::send_late)).
    ///
    /// Inlined into each body's poll, where `metered` is a constant: called out of line, a
    /// request through `Router::layer(DeadlineLayer)` took 76 instructions more in process
    /// (`bash scripts/instructions.sh axum_request_deadline_layer`: 15 746 against 15 670,
    /// when it was measured).
    #[inline(always)]
    pub(crate) fn poll_step(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        metered: bool,
    ) -> Poll<Polled<B::Data, B::Error>> {
        let this = self.project();
        let deadline = *this.deadline;
        let mut body = this.body;
        let frame = if *this.scoped {
            in_scope(deadline, || body.as_mut().poll_frame(cx))
        } else {
            body.as_mut().poll_frame(cx)
        };
        match frame {
            Poll::Ready(Some(Ok(frame))) => {
                // A body that gives frames is spared again the next time the budget holds it
                // back: a channel's stream spends a unit of the budget on each frame, and
                // one complete at the deadline is read over as many polls as it needs
                // (`LateFrames` still bounds one that never ends).
                *this.spared = false;
                // A frame that ends the body (trailers are always the last frame, though a
                // stream body says it has ended only when polled again) is sent whatever the
                // time: no clock to read. A frame with more to come, after the deadline,
                // counts against what may be sent late.
                let ends = frame.is_trailers() || body.is_end_stream();
                if metered && !ends && deadline.is_expired(TokioClock.now()) {
                    let len = frame.data_ref().map_or(0, Buf::remaining);
                    if !this.late.send(len, false) {
                        return Poll::Ready(Polled::Cut);
                    }
                }
                Poll::Ready(Polled::Frame(frame))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Polled::Failed(error)),
            Poll::Ready(None) => Poll::Ready(Polled::End),
            Poll::Pending => poll_boxed_timer(this.sleep, deadline.instant(), this.spared, cx)
                .map(|_| Polled::Cut),
        }
    }

    /// Whether a frame of `len` bytes, which a [`poll_step`](Self::poll_step) that was not
    /// `metered` gave, may be sent: always before the deadline, and after it as
    /// [`LateFrames`] allows (always, when it `ends` the body or its messages).
    pub(crate) fn send_late(self: Pin<&mut Self>, len: usize, ends: bool) -> bool {
        let this = self.project();
        !this.deadline.is_expired(TokioClock.now()) || this.late.send(len, ends)
    }

    /// Whether the body says it has ended.
    pub(crate) fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
}
