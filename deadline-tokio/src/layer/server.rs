//! [`DeadlineLayer`]: each request's deadline from its headers, and its handler run under it.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use deadline_core::wire::Admission;
use deadline_core::wire::{Answer, FailureWindow, Incoming, Propagation, Protocol, ServerPolicy};
use deadline_core::{Clock, Deadline, Error, Instant};
use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Asked, render};
use super::headers::Scanned;
use super::server_body::DeadlineBody;
use crate::bounded::Bounded;
use crate::clock::TokioClock;
use crate::context::{Scoped, current, in_scope, with_deadline};

/// A tower layer that gives each HTTP or gRPC request a deadline and runs its handler under
/// it: the core's [`ServerPolicy`], bound to a tower server (axum, hyper, tonic).
///
/// An axum app puts it around its whole router and serves that:
/// `axum::serve(listener, layer.layer(router))` (feature `axum`); a tonic server adds it with
/// `Server::builder().layer(layer)`.
///
/// ```
/// use std::convert::Infallible;
///
/// use deadline_core::wire::Propagation;
/// use deadline_core::ms;
/// use deadline_core::wire::Admission;
/// use deadline_tokio::DeadlineLayer;
/// use deadline_tokio::remaining;
/// use http::{Request, Response, StatusCode};
/// use http_body_util::BodyExt;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // Callers are believed up to 10 s; silent ones get 1 s; the handler needs 20 ms at least.
/// let layer = DeadlineLayer::new(Propagation::DEFAULT.with_max(ms(10_000)), ms(1_000))
///     .with_admission(Admission::new(ms(20)));
/// let server = layer.layer(service_fn(|_req: Request<String>| async {
///     tokio::time::sleep(ms(30)).await;
///     Ok::<_, Infallible>(Response::new(format!("{:?} left", remaining().unwrap())))
/// }));
///
/// // 200 ms sent: the handler has 195 ms, 165 ms after its 30 ms of work.
/// let request = Request::builder().header("grpc-timeout", "200m").body(String::new()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "165ms left");
///
/// // 25 ms sent: admitted, but the handler's 30 ms do not fit. Dropped at the deadline.
/// let request = Request::builder().header("x-deadline-ms", "25").body(String::new()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
///
/// // A gRPC request gets a gRPC answer: HTTP 200, grpc-status 4 (DEADLINE_EXCEEDED).
/// let request = Request::builder()
///     .header("content-type", "application/grpc")
///     .header("grpc-timeout", "25m")
///     .body(String::new())
///     .unwrap();
/// let response = server.oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::OK);
/// assert_eq!(response.headers()["grpc-status"], "4");
/// # }
/// ```
///
/// What it answers, and when: [the layer module](crate::layer#deadlinelayer-in-detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeadlineLayer {
    policy: ServerPolicy,
}

impl DeadlineLayer {
    /// Reads incoming budgets with `propagation` (clamped to its maximum); a request with no
    /// deadline header gets `default_budget` ([`ServerPolicy::new`]).
    #[must_use]
    pub const fn new(propagation: Propagation, default_budget: Duration) -> Self {
        DeadlineLayer {
            policy: ServerPolicy::new(propagation, default_budget),
        }
    }

    /// Sheds requests that `admission` refuses (503 / `UNAVAILABLE`), without calling the
    /// handler ([`ServerPolicy::with_admission`]).
    #[must_use]
    pub const fn with_admission(self, admission: Admission) -> Self {
        DeadlineLayer {
            policy: self.policy.with_admission(admission),
        }
    }

    /// Answers `margin` before each request's deadline
    /// ([`ServerPolicy::with_reply_margin`]).
    #[must_use]
    pub const fn with_reply_margin(self, margin: Duration) -> Self {
        DeadlineLayer {
            policy: self.policy.with_reply_margin(margin),
        }
    }

    /// The rule the layer follows.
    #[must_use]
    pub const fn policy(&self) -> ServerPolicy {
        self.policy
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> DeadlineService<S> {
        DeadlineService::new(inner, *self)
    }
}

/// The service made by [`DeadlineLayer`]: see there.
///
/// A request's budget runs from when it arrived: when the inner service was not ready to
/// take it (a concurrency limit, a rate limit, a buffer inside this layer), the time from
/// the first `poll_ready` that found it not ready to the `call` is spent from the budget, and
/// a request whose deadline passed while it waited is answered at once, without calling the
/// handler.
///
/// That wait belongs to the request the service is next called for. Servers make a service
/// per request (a clone, which starts with no wait: hyper-util's `TowerToHyperService`,
/// `axum::serve`, tonic), so it is that request's. One instance driven for many requests in
/// turn, as the worker behind tower's `Buffer` is, can count the wait of a request its
/// caller gave up on for the next one: put a `Buffer` inside this layer, not around it
/// (behind it, the services the buffer's worker calls run on that worker's task, outside the
/// request's scope: they do not see its deadline).
#[derive(Debug)]
pub struct DeadlineService<S> {
    inner: S,
    policy: ServerPolicy,
    // The policy's failure window, worked out once (`ServerPolicy::failure_window`: about 27
    // instructions a request otherwise).
    window: FailureWindow,
    // When `poll_ready` first found the inner service not ready for the next request: that
    // request's arrival. Cleared by `call`.
    waiting_since: Option<Instant>,
}

/// A clone is a new handle that has not waited (tower's `Service` contract: a clone is not
/// ready until it is polled).
impl<S: Clone> Clone for DeadlineService<S> {
    fn clone(&self) -> Self {
        DeadlineService {
            inner: self.inner.clone(),
            policy: self.policy,
            window: self.window,
            waiting_since: None,
        }
    }
}

impl<S> DeadlineService<S> {
    /// Wraps `inner` with the rules of `layer` (what [`Layer::layer`] does).
    pub const fn new(inner: S, layer: DeadlineLayer) -> Self {
        DeadlineService {
            inner,
            policy: layer.policy,
            window: layer.policy.failure_window(),
            waiting_since: None,
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

    /// The same rules around `f(inner)`.
    #[cfg(feature = "axum")]
    pub(crate) fn map_ref<T>(&self, f: impl FnOnce(&S) -> T) -> DeadlineService<T> {
        DeadlineService {
            inner: f(&self.inner),
            policy: self.policy,
            window: self.window,
            waiting_since: None,
        }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for DeadlineService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<DeadlineBody<ResBody>>;
    type Error = S::Error;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        let ready = self.inner.poll_ready(cx);
        // The clock is read only when the request has to wait.
        if ready.is_pending() && self.waiting_since.is_none() {
            self.waiting_since = Some(TokioClock.now());
        }
        ready
    }

    fn call(&mut self, request: Request<ReqBody>) -> DeadlineFuture<S::Future> {
        let headers = Scanned::new(request.headers());
        let protocol = Protocol::read(|| request.uri().query(), headers.lookup());
        let incoming = Incoming::read(headers.lookup());
        let asked = Asked::of(&request, protocol);
        let now = TokioClock.now();
        let arrived = self.waiting_since.take().unwrap_or(now);
        let deadline = match self
            .policy
            .accept(protocol, incoming, arrived, now, current())
        {
            Ok(deadline) => deadline,
            Err(answer) => return DeadlineFuture::answered(answer, asked),
        };
        // The inner service is called in the scope too: a service that reads the deadline in
        // its `call` (as the client layers do) sees this request's.
        let window = self.window;
        in_scope(deadline, || DeadlineFuture {
            state: State::Running {
                handler: Bounded::new(
                    deadline.instant(),
                    with_deadline(deadline, self.inner.call(request)),
                ),
                deadline,
                protocol,
                asked,
                window,
            },
        })
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`DeadlineService`]: the handler's, under the deadline, or an
    /// answer made at once.
    #[must_use = "futures do nothing unless polled"]
    pub struct DeadlineFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        /// The handler, in its scope, until the deadline; a failure within `window` of the
        /// deadline is the deadline's ([`ServerPolicy::failure_window`]).
        Running {
            #[pin]
            handler: Bounded<Scoped<F>>,
            deadline: Deadline,
            protocol: Protocol,
            asked: Asked,
            window: FailureWindow,
        },
        /// Answered without calling the handler, or the handler dropped at the deadline or
        /// failed of it.
        Answered { answer: Answer, asked: Asked },
    }
}

impl<F> DeadlineFuture<F> {
    /// `answer`, to the request `asked` is of.
    fn answered(answer: Answer, asked: Asked) -> Self {
        DeadlineFuture {
            state: State::Answered { answer, asked },
        }
    }
}

impl<F, ResBody, E> DeadlineFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    /// Polls the handler under the deadline. What it came to is made into the output with
    /// `on_response` (the handler's response, with what its body is to be bounded by:
    /// [`Bound`]) or `on_answer` (the layer's own answer, and what it needs of the request:
    /// the handler was not called, or was dropped at the deadline, or failed of it).
    #[inline]
    pub(crate) fn poll_with<T>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        on_response: impl FnOnce(Response<ResBody>, Bound, &mut Context<'_>) -> T,
        on_answer: impl FnOnce(Answer, &Asked) -> T,
    ) -> Poll<Result<T, E>> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Running {
                mut handler,
                deadline,
                protocol,
                asked,
                window,
            } => {
                // Polled inside a scope with an earlier deadline (rare on a server), that one
                // rules, for the handler and for its body.
                if let Some(outer) = current().filter(|outer| *outer < *deadline) {
                    *deadline = outer;
                    handler.as_mut().shorten(outer.instant());
                }
                let bound = Bound {
                    deadline: *deadline,
                    protocol: *protocol,
                    window: *window,
                };
                let protocol = *protocol;
                match handler.poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Ok(Ok(response))) => {
                        Poll::Ready(Ok(on_response(response, bound, cx)))
                    }
                    // A service error within the failure window of the deadline, or after it,
                    // is the deadline's: a client layer inside (`PropagateLayer`) fails as its
                    // deadline there (what it sent running out, nothing left to send, or this
                    // deadline, by which it is bounded too, polled first), and its error alone
                    // would reach the server, which closes the connection or resets the
                    // stream with no answer.
                    Poll::Ready(Ok(Err(_)))
                        if bound
                            .window
                            .is_deadline_failure(bound.deadline, TokioClock.now()) =>
                    {
                        let answer = Answer::new(protocol, Error::DeadlineExceeded);
                        let asked = *asked;
                        state.set(State::Answered { answer, asked });
                        Poll::Ready(Ok(on_answer(answer, &asked)))
                    }
                    Poll::Ready(Ok(Err(error))) => Poll::Ready(Err(error)),
                    Poll::Ready(Err(_elapsed)) => {
                        // The deadline came first: the handler is dropped now, cancelling
                        // its work.
                        let answer = Answer::new(protocol, Error::DeadlineExceeded);
                        let asked = *asked;
                        state.set(State::Answered { answer, asked });
                        Poll::Ready(Ok(on_answer(answer, &asked)))
                    }
                }
            }
            StateProj::Answered { answer, asked } => Poll::Ready(Ok(on_answer(*answer, asked))),
        }
    }
}

impl<F, ResBody, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<DeadlineBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_with(cx, |response, bound, _| bounded(response, bound), render)
    }
}

/// What a handler and its response body are bounded by: the request's deadline, the protocol
/// whose ending a cut writes, and the failure window before the deadline
/// ([`ServerPolicy::failure_window`]).
#[derive(Clone, Copy)]
pub(crate) struct Bound {
    pub(crate) deadline: Deadline,
    pub(crate) protocol: Protocol,
    pub(crate) window: FailureWindow,
}

/// `response` with its body bounded as `bound` says ([`DeadlineBody`]); without its
/// `content-length` when a cut would write the protocol's ending into the body.
pub(crate) fn bounded<B>(response: Response<B>, bound: Bound) -> Response<DeadlineBody<B>> {
    let (parts, body) = response.into_parts();
    let (body, keeps_length) = DeadlineBody::inner(body, bound, &parts.headers);
    let mut response = Response::from_parts(parts, body);
    if !keeps_length {
        response.headers_mut().remove(http::header::CONTENT_LENGTH);
    }
    response
}
