//! [`PropagateLayer`]: the time left written into outgoing requests, and the call bounded by
//! what was sent.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use deadline_core::runtime::{KeepsSent, Onward, note_sent};
use deadline_core::wire::{
    DeadlineHeader, Failure, Incoming, Outgoing, Propagation, Protocol, ResponseHead, Sent,
    WireError,
};
use deadline_core::{Clock, Error};
use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use super::headers::{Scanned, lookup, set};
use super::propagate_body::PropagateBody;
use super::propagate_error::PropagateError;
use crate::bounded::Bounded;
use crate::clock::TokioClock;
use crate::context::{Tokio, current};

/// A tower layer for a client: each request made inside a deadline [`scope`](crate::scope)
/// carries the time left, and the call is bounded by what was sent.
///
/// ```
/// use std::convert::Infallible;
///
/// use deadline_core::wire::{DeadlineHeader, Propagation};
/// use deadline_core::{Error, ms};
/// use deadline_tokio::layer::{PropagateError, PropagateLayer};
/// use deadline_tokio::scope_timeout;
/// use http::{Request, Response};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // The next service answers with the `x-deadline-ms` it was sent.
/// let next = service_fn(|req: Request<()>| async move {
///     Ok::<_, Infallible>(Response::new(req.headers().get("x-deadline-ms").cloned()))
/// });
/// let client = PropagateLayer::new(Propagation::DEFAULT, DeadlineHeader::DeadlineMs).layer(next);
///
/// scope_timeout(ms(200), async {
///     tokio::time::sleep(ms(50)).await;
///     // 150 ms left, 5 ms kept for the network.
///     let sent = client.clone().oneshot(Request::new(())).await.unwrap();
///     assert_eq!(sent.into_body().into_inner().unwrap().unwrap(), "145");
///
///     tokio::time::sleep(ms(146)).await;
///     // 4 ms left: nothing to send after the allowance, so no call.
///     let spent = client.clone().oneshot(Request::new(())).await;
///     assert_eq!(spent.unwrap_err(), PropagateError::Deadline(Error::DeadlineExceeded));
/// })
/// .await;
/// # }
/// ```
///
/// What it sends, and which failures it reports as the deadline's: [the layer module](crate::layer#propagatelayer-in-detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PropagateLayer {
    propagation: Propagation,
    header: DeadlineHeader,
}

impl PropagateLayer {
    /// Writes `header` with the time left, less `propagation`'s allowance.
    #[must_use]
    pub const fn new(propagation: Propagation, header: DeadlineHeader) -> Self {
        PropagateLayer {
            propagation,
            header,
        }
    }

    /// The same layer, keeping back `propagation`'s allowance.
    #[must_use]
    pub const fn with_propagation(mut self, propagation: Propagation) -> Self {
        self.propagation = propagation;
        self
    }

    /// How the time left is sent.
    #[must_use]
    pub const fn propagation(&self) -> Propagation {
        self.propagation
    }

    /// The header written.
    #[must_use]
    pub const fn header(&self) -> DeadlineHeader {
        self.header
    }
}

impl<S> Layer<S> for PropagateLayer {
    type Service = PropagateService<S>;

    fn layer(&self, inner: S) -> PropagateService<S> {
        PropagateService::new(inner, *self)
    }
}

/// The service made by [`PropagateLayer`]: see there.
#[derive(Clone, Debug)]
pub struct PropagateService<S> {
    inner: S,
    config: PropagateLayer,
    /// Whether the caller judges every answer this service gives it (the attempts of a
    /// `DependencyLayer`): then the runtime is told only when nothing was sent, and the
    /// request's protocol is kept for the caller even when it goes with no deadline.
    judged_by_caller: bool,
}

impl<S> PropagateService<S> {
    /// Wraps `inner` with the rules of `layer` (what [`Layer::layer`] does).
    pub const fn new(inner: S, layer: PropagateLayer) -> Self {
        PropagateService {
            inner,
            config: layer,
            judged_by_caller: false,
        }
    }

    /// Wraps `inner` for a caller that reads every answer itself (a `DependencyLayer`'s
    /// attempts): this service already reports as the deadline's each failure of its shape
    /// that comes once the time sent is running out, and every other answer is the next
    /// service's. Telling the runtime what was sent would make the driver count any failure
    /// then as a timeout, a real 500 included; so it is told only that nothing was sent.
    /// The request's protocol ([`PropagateFuture::protocol`]) is kept for the caller whether
    /// the request goes with a deadline or, with none, as it came.
    pub(super) const fn judged_by_caller(inner: S, layer: PropagateLayer) -> Self {
        PropagateService {
            inner,
            config: layer,
            judged_by_caller: true,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, ResBody> Service<Request<B>> for PropagateService<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Response = Response<PropagateBody<ResBody>>;
    type Error = PropagateError<S::Error>;
    type Future = PropagateFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(PropagateError::Inner)
    }

    fn call(&mut self, mut request: Request<B>) -> PropagateFuture<S::Future> {
        let Some(deadline) = current() else {
            // Sent as it came: its own headers say its protocol, read only for a caller that
            // judges the answers (a `DependencyLayer` attempt with no deadline).
            let protocol = self.judged_by_caller.then(|| protocol_of(&request));
            return PropagateFuture {
                state: State::Unbounded {
                    call: self.inner.call(request),
                    protocol,
                },
            };
        };
        let already = Incoming::read_outgoing(lookup(request.headers()));
        let now = TokioClock.now();
        let sending = self
            .config
            .propagation
            .send(deadline, now, already, self.config.header);
        let refused = refusal(&self.config.propagation);
        let sending = if self.judged_by_caller {
            sending.inspect_err(|_| Tokio::note_sent(refused)).ok()
        } else {
            noted(sending, refused).ok()
        };
        let Some(outgoing) = sending else {
            return PropagateFuture {
                state: State::Spent,
            };
        };
        for (name, value) in outgoing.headers() {
            set(request.headers_mut(), name, value);
        }
        // As sent: the header just written can say Connect (`connect-timeout-ms`).
        let protocol = protocol_of(&request);
        let sent = outgoing.sent();
        PropagateFuture {
            state: State::Bounded {
                call: Bounded::new(sent.deadline().instant(), self.inner.call(request)),
                sent,
                protocol,
            },
        }
    }
}

/// The protocol of `request` ([`Protocol::read`]), which says what its answers mean
/// ([`ResponseHead::for_request`]).
fn protocol_of<B>(request: &Request<B>) -> Protocol {
    let headers = Scanned::new(request.headers());
    Protocol::read(|| request.uri().query(), headers.lookup())
}

pin_project_lite::pin_project! {
    /// The response future of [`PropagateService`]: the inner call, bounded by what was sent
    /// when there is a deadline.
    #[must_use = "futures do nothing unless polled"]
    pub struct PropagateFuture<F> {
        #[pin]
        state: State<F>,
    }
}

impl<F> PropagateFuture<F> {
    /// The protocol of the request as sent, which says what its answers mean
    /// ([`ResponseHead::for_request`]); `None` when it was not sent, or sent as it came for a
    /// caller that does not judge the answers (`PropagateLayer` outside any scope).
    pub(super) const fn protocol(&self) -> Option<Protocol> {
        match &self.state {
            State::Bounded { protocol, .. } => Some(*protocol),
            State::Unbounded { protocol, .. } => *protocol,
            State::Spent => None,
        }
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        /// No deadline (outside any scope, or an attempt with none): the call as it is.
        Unbounded {
            #[pin]
            call: F,
            // The request's protocol, when a caller judges the answers.
            protocol: Option<Protocol>,
        },
        /// The call, dropped when the time sent (plus the allowance) runs out.
        Bounded {
            #[pin]
            call: Bounded<F>,
            sent: Sent,
            // The request's protocol, as sent.
            protocol: Protocol,
        },
        /// Not called, or dropped: no time left.
        Spent,
    }
}

impl<F, B, E> Future for PropagateFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<PropagateBody<B>>, PropagateError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Unbounded { call, .. } => call
                .poll(cx)
                .map_ok(|response| response.map(PropagateBody::unbounded))
                .map_err(PropagateError::Inner),
            StateProj::Bounded {
                call,
                sent,
                protocol,
            } => {
                let (sent, protocol) = (*sent, *protocol);
                let deadline = || PropagateError::Deadline(Error::DeadlineExceeded);
                match call.poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Ok(Ok(response))) => {
                        let head = ResponseHead::read(
                            response.status().as_u16(),
                            lookup(response.headers()),
                        )
                        .for_request(protocol);
                        if sent.is_deadline_failure(Failure::Response(head), TokioClock.now()) {
                            return Poll::Ready(Err(deadline()));
                        }
                        Poll::Ready(Ok(response.map(|body| PropagateBody::bounded(body, sent))))
                    }
                    Poll::Ready(Ok(Err(error))) => Poll::Ready(Err(
                        if sent.is_deadline_failure(Failure::Transport, TokioClock.now()) {
                            deadline()
                        } else {
                            PropagateError::Inner(error)
                        },
                    )),
                    Poll::Ready(Err(_elapsed)) => {
                        // The time sent ran out: drop the call now.
                        state.set(State::Spent);
                        Poll::Ready(Err(deadline()))
                    }
                }
            }
            StateProj::Spent => Poll::Ready(Err(PropagateError::Deadline(Error::DeadlineExceeded))),
        }
    }
}

/// What a request sends, told to the runtime: inside a
/// [`Dependency::run`](deadline_core::Dependency::run) attempt, a failure once it is running
/// out is the attempt's timeout, whatever error the caller makes of it; with nothing left to
/// send, the request is not made, and the attempt's failure (this refusal, `refused`:
/// [`refusal`]) is not the dependency's: its breaker does not count it ([`Onward::Nothing`];
/// the call ends with [`Error::DeadlineExceeded`], or an earlier attempt's failure, when the
/// call's time was short, and the attempt ran out of time when only its cap was).
pub(crate) fn noted(
    sending: Result<Outgoing, WireError>,
    refused: Onward,
) -> Result<Outgoing, Error> {
    match sending {
        Ok(outgoing) => {
            note_sent::<Tokio>(&outgoing.sent());
            Ok(outgoing)
        }
        Err(spent) => {
            Tokio::note_sent(refused);
            Err(Error::from(spent))
        }
    }
}

/// What the runtime is told of a request `propagation` would not send: the least time left
/// it needs ([`Propagation::needs`](deadline_core::wire::Propagation::needs)).
pub(crate) const fn refusal(propagation: &Propagation) -> Onward {
    Onward::nothing(propagation.needs())
}
