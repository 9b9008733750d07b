//! [`DeadlineLayer`]: each request's deadline from its header, and its handler run under it.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use deadline_core::wire::{
    CONNECT_TIMEOUT_MS, GRPC_TIMEOUT, Incoming, Propagation, WireError, X_DEADLINE_MS,
};
use deadline_core::{Admission, Clock, Deadline, Error, Instant};
use http::{HeaderMap, HeaderValue, Request, Response};
use tokio::time::Sleep;
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{DeadlineBody, Protocol, answer};
use crate::clock::{TokioClock, to_tokio};
use crate::context::{Scoped, current, scope};

/// How long before a request's deadline [`DeadlineLayer`] answers by default: see
/// [`DeadlineLayer::reply_margin`].
pub const DEFAULT_REPLY_MARGIN: Duration = Duration::from_millis(5);

/// A tower layer that gives each HTTP or gRPC request a deadline and runs its handler under
/// it.
///
/// For each request, at the moment the layer is called:
///
/// 1. **The deadline.** The time left comes from the `grpc-timeout` header if there is one,
///    else from Connect's `connect-timeout-ms`, else from `x-deadline-ms`, decoded by the core
///    ([`Propagation::decode_grpc_timeout`], [`Propagation::decode_connect_timeout`],
///    [`Propagation::decode_deadline_ms`]) into a deadline on this server's clock, clamped to
///    [`Propagation::max`]. A request with neither header gets
///    [`default_budget`](Self::default_budget), clamped the same way. Only the first value
///    of a header is read, with the whitespace around it removed.
/// 2. **A malformed header** (one the core's codec rejects: a sign, a missing or unknown
///    unit, too many digits, whitespace inside, a byte that is not a digit...) is answered
///    with [`Error::MalformedDeadline`] (HTTP 400, gRPC `INVALID_ARGUMENT`), naming the
///    header and what is wrong with it, and the inner service is not called. The caller sent
///    a deadline it means to keep, so the server does not guess one. Only the header that
///    is read is checked: a malformed `x-deadline-ms` is not looked at when a `grpc-timeout`
///    or `connect-timeout-ms` is present.
/// 3. **Admission.** A request whose deadline has already passed is answered with
///    [`Error::DeadlineExceeded`]: its caller has stopped waiting. With an [`Admission`]
///    ([`with_admission`](Self::with_admission)), a request with less time left than the
///    handler needs is answered with [`Error::Shed`] (HTTP 503, gRPC `UNAVAILABLE`): another
///    replica may serve it. Either way the inner service is not called, so a rejected
///    request costs nothing further.
/// 4. **The handler** is called with the [`Deadline`] in the request's extensions, and its
///    future runs in a [`scope`] with it: inside, [`remaining`](crate::remaining) and
///    [`current`] give the time left and the deadline, and nested [`decide`](crate::decide),
///    [`drive`](crate::drive), [`statement_timeout`](crate::statement_timeout) and
///    [`PropagateLayer`](super::PropagateLayer) calls inherit it. (The scope covers the
///    future, not the synchronous part of the inner `call`: code there reads the extension.)
///    The handler's deadline is the request's less the [reply margin](Self::reply_margin):
///    that time is kept for the answer to reach the caller.
/// 5. **At the handler's deadline**, a handler still running is dropped, which cancels its
///    work and every call it has in flight, and the answer is [`Error::DeadlineExceeded`]
///    (HTTP 504, gRPC `DEADLINE_EXCEEDED`). If the future is polled inside a scope with an
///    earlier deadline, that one rules, for the handler and for the answer.
/// 6. **The response body** is bounded by the same deadline and polled inside the same
///    scope: a stream still running at the deadline (server-streaming gRPC, server-sent
///    events, chunked HTTP) is dropped there and ended the way its protocol expects (gRPC:
///    trailers with `DEADLINE_EXCEEDED`; HTTP: the stream reset). See [`DeadlineBody`].
///
/// # The answers it makes itself
///
/// Every status comes from the core's one mapping ([`Error::http_status`],
/// [`Error::grpc_code`]), and every answer names its reason ([`Error::reason`]):
///
/// - **A gRPC request** (its `content-type` starts with `application/grpc`) gets a gRPC
///   answer: HTTP 200, trailers-only (the `grpc-status` and `grpc-message` in the headers of a
///   response with no body), `content-type: application/grpc`. A gRPC client reads
///   `DEADLINE_EXCEEDED` (4), `UNAVAILABLE` (14, shed) or `INVALID_ARGUMENT` (3, a malformed
///   `grpc-timeout`), never the `UNAVAILABLE` or `INTERNAL` that gRPC's HTTP-to-status table
///   would make of a bare 504, 503 or 400.
/// - **Any other request** gets a plain HTTP answer: 504, 503 or 400, with a short
///   `text/plain` body naming the reason (`deadline exceeded`, `request shed at admission`,
///   `malformed grpc-timeout header: grpc-timeout unit is not one of H M S m u n`).
/// - **A Connect request** (a `connect-protocol-version` header, or a `content-type` of
///   `application/connect+...` for streams) gets a Connect answer: for a unary call the
///   error's HTTP status with Connect's JSON error body (`{"code":"deadline_exceeded",
///   "message":"deadline exceeded"}`), for a stream HTTP 200 and an end-of-stream message
///   carrying the same error.
///
/// The response body is a [`DeadlineBody`]: the handler's body, or the layer's answer.
///
/// # The reply margin, and tonic
///
/// A tonic server reads `grpc-timeout` itself, outside every user layer, and answers
/// `CANCELLED` when its own timer fires first. So the layer answers
/// [`reply_margin`](Self::reply_margin) (by default [`DEFAULT_REPLY_MARGIN`], 5 ms) before
/// the request's deadline: its answer is on its way before tonic's timer, which has the same
/// deadline, read a moment earlier, and fires on the same millisecond timer wheel. The margin
/// also leaves time for the answer to travel back before a caller that times the call itself
/// gives up. It is part of the budget, like a reserve: the handler's deadline, and so what it
/// passes on, is the request's less the margin.
///
/// A caller's own timer is the caller's: tonic's `Channel`, for one, times each call whose
/// `grpc-timeout` it sends and fails it with `CANCELLED` (not `DEADLINE_EXCEEDED`) if that
/// timer fires before the answer arrives, which happens when the request spent longer than
/// the margin in transit or in queues. Behind [`PropagateLayer`](super::PropagateLayer), such
/// a failure is reported as the deadline's.
///
/// Only [`Propagation::max`] is read here; the allowance is for sending, which is
/// [`PropagateLayer`](super::PropagateLayer)'s work. One [`Propagation`] serves both.
///
/// ```
/// use std::convert::Infallible;
///
/// use deadline_core::wire::Propagation;
/// use deadline_core::{Admission, ms};
/// use deadline_tokio::layer::DeadlineLayer;
/// use deadline_tokio::remaining;
/// use http::{Request, Response, StatusCode};
/// use http_body_util::BodyExt;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // Callers are believed up to 10 s; silent ones get 1 s; the handler needs 20 ms at least.
/// let layer = DeadlineLayer::new(Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000)), ms(1_000))
///     .with_admission(Admission::new(ms(20)));
/// let server = layer.layer(service_fn(|_req: Request<String>| async {
///     tokio::time::sleep(ms(30)).await;
///     Ok::<_, Infallible>(Response::new(format!("{:?} left", remaining().unwrap())))
/// }));
///
/// // 200 ms sent: the handler has 195 ms (5 ms are kept to answer in), 165 ms after its
/// // 30 ms of work.
/// let request = Request::builder().header("grpc-timeout", "200m").body(String::new()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// let body = response.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(body, "165ms left");
///
/// // 10 ms sent, 20 ms needed: shed at once, the handler is not called.
/// let request = Request::builder().header("x-deadline-ms", "10").body(String::new()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
///
/// // 25 ms sent: admitted, but the handler's 30 ms do not fit. Dropped at the deadline.
/// let request = Request::builder().header("grpc-timeout", "25m").body(String::new()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
///
/// // A malformed header: 400, and the body says which header and why.
/// let request = Request::builder().header("grpc-timeout", "-5S").body(String::new()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::BAD_REQUEST);
/// let body = response.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(body, "malformed grpc-timeout header: header value has a sign\n");
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
/// assert_eq!(response.headers()["grpc-message"], "deadline exceeded");
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DeadlineLayer {
    /// How incoming budgets are read: clamped to its [`max`](Propagation::max).
    pub propagation: Propagation,
    /// The budget of a request that comes with no deadline header (clamped to the maximum
    /// too).
    pub default_budget: Duration,
    /// The least time the handler needs: a request with less left is shed (503) without
    /// calling the handler. `None`: only requests whose deadline has passed are refused.
    pub admission: Option<Admission>,
    /// How long before the request's deadline the layer answers, so that its answer reaches
    /// the caller in time (see the type's docs). The handler's deadline is the request's less
    /// this.
    pub reply_margin: Duration,
}

impl DeadlineLayer {
    /// Reads incoming budgets with `propagation` (clamped to its maximum); a request with no
    /// deadline header gets `default_budget`. No admission rule (see
    /// [`with_admission`](Self::with_admission)); the reply margin is
    /// [`DEFAULT_REPLY_MARGIN`] (see [`with_reply_margin`](Self::with_reply_margin)).
    #[must_use]
    pub const fn new(propagation: Propagation, default_budget: Duration) -> Self {
        DeadlineLayer {
            propagation,
            default_budget,
            admission: None,
            reply_margin: DEFAULT_REPLY_MARGIN,
        }
    }

    /// Sheds requests that `admission` rejects ([`Admission::admit`]) with its error's
    /// status (503), without calling the handler.
    #[must_use]
    pub const fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Answers `margin` before each request's deadline (zero: at the deadline itself, which
    /// lets a tonic server's own `CANCELLED` answer first).
    #[must_use]
    pub const fn with_reply_margin(mut self, margin: Duration) -> Self {
        self.reply_margin = margin;
        self
    }

    /// The request's deadline, from its headers, at `now`; or the header that could not be
    /// read, and why.
    fn deadline(
        &self,
        headers: &HeaderMap,
        now: Instant,
    ) -> Result<Deadline, (&'static str, WireError)> {
        let incoming = Incoming {
            grpc_timeout: headers.get(GRPC_TIMEOUT).map(HeaderValue::as_bytes),
            connect_timeout_ms: headers.get(CONNECT_TIMEOUT_MS).map(HeaderValue::as_bytes),
            x_deadline_ms: headers.get(X_DEADLINE_MS).map(HeaderValue::as_bytes),
        };
        self.propagation
            .incoming_deadline(incoming, self.default_budget, now)
    }

    /// Whether a request whose handler must be done by `deadline` is served, starting at
    /// `now`.
    fn admit(&self, deadline: Deadline, now: Instant) -> Result<(), Error> {
        // Without a rule of its own, a request is refused only when its deadline has passed.
        self.admission
            .unwrap_or(Admission::DEFAULT)
            .admit(deadline, now)
            .map(drop)
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> DeadlineService<S> {
        DeadlineService {
            inner,
            config: *self,
        }
    }
}

/// The service made by [`DeadlineLayer`]: see there.
#[derive(Clone, Debug)]
pub struct DeadlineService<S> {
    inner: S,
    config: DeadlineLayer,
}

impl<S> DeadlineService<S> {
    /// Wraps `inner` with the rules of `layer`.
    pub const fn new(inner: S, layer: DeadlineLayer) -> Self {
        DeadlineService {
            inner,
            config: layer,
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

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for DeadlineService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<DeadlineBody<ResBody>>;
    type Error = S::Error;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> DeadlineFuture<S::Future> {
        let protocol = Protocol::of(request.headers());
        let now = TokioClock.now();
        let deadline = match self.config.deadline(request.headers(), now) {
            Ok(deadline) => deadline.shortened_by(self.config.reply_margin),
            Err((header, error)) => {
                return DeadlineFuture::answered(
                    protocol,
                    Error::from(error),
                    Some((header, error)),
                );
            }
        };
        // Inside an enclosing scope (rare on a server), the earlier deadline rules, as in
        // `scope`; it is read again at every poll.
        let deadline = current().map_or(deadline, |outer| outer.min(deadline));
        if let Err(error) = self.config.admit(deadline, now) {
            return DeadlineFuture::answered(protocol, error, None);
        }
        request.extensions_mut().insert(deadline);
        DeadlineFuture {
            state: State::Running {
                handler: scope(deadline, self.inner.call(request)),
                sleep: tokio::time::sleep_until(to_tokio(deadline.instant())),
                armed: deadline,
                protocol,
            },
        }
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
        /// The handler, in its scope, until the deadline.
        Running {
            #[pin]
            handler: Scoped<F>,
            #[pin]
            sleep: Sleep,
            // The deadline the sleep is armed for.
            armed: Deadline,
            protocol: Protocol,
        },
        /// Answered without calling the handler, or the handler dropped at the deadline.
        Answered {
            protocol: Protocol,
            error: Error,
            // The header that could not be read, and why, for a malformed one.
            malformed: Option<(&'static str, WireError)>,
        },
    }
}

impl<F> DeadlineFuture<F> {
    fn answered(
        protocol: Protocol,
        error: Error,
        malformed: Option<(&'static str, WireError)>,
    ) -> Self {
        DeadlineFuture {
            state: State::Answered {
                protocol,
                error,
                malformed,
            },
        }
    }
}

impl<F, ResBody, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<DeadlineBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Running {
                handler,
                mut sleep,
                armed,
                protocol,
            } => {
                // The handler first, as `tokio::time::timeout` does: an answer that is ready
                // is never thrown away for a timer.
                if let Poll::Ready(answer) = handler.poll(cx) {
                    let (deadline, protocol) = (*armed, *protocol);
                    return Poll::Ready(answer.map(|response| {
                        response.map(|body| DeadlineBody::inner(body, deadline, protocol))
                    }));
                }
                // An enclosing scope with an earlier deadline than the one armed rules.
                if let Some(outer) = current().filter(|outer| *outer < *armed) {
                    *armed = outer;
                    sleep.as_mut().reset(to_tokio(outer.instant()));
                }
                if sleep.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // The deadline came first: drop the handler now, cancelling its work.
                let protocol = *protocol;
                state.set(State::Answered {
                    protocol,
                    error: Error::DeadlineExceeded,
                    malformed: None,
                });
                Poll::Ready(Ok(answer(protocol, Error::DeadlineExceeded, None)))
            }
            StateProj::Answered {
                protocol,
                error,
                malformed,
            } => Poll::Ready(Ok(answer(*protocol, *error, *malformed))),
        }
    }
}
