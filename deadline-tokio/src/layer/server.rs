//! [`DeadlineLayer`]: each request's deadline from its header, and its handler run under it.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use deadline_core::wire::{GRPC_TIMEOUT, Propagation, WireError, X_DEADLINE_MS};
use deadline_core::{Admission, Clock, Deadline, Error, Instant};
use http::{HeaderMap, Request, Response, StatusCode};
use tokio::time::Timeout;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::{TokioClock, to_tokio};
use crate::context::{Scoped, current, scope};

/// A tower layer that gives each HTTP request a deadline and runs its handler under it.
///
/// For each request, at the moment the layer is called:
///
/// 1. **The deadline.** The time left comes from the `grpc-timeout` header if there is one,
///    else from `x-deadline-ms`, decoded by the core ([`Propagation::decode_grpc_timeout`],
///    [`Propagation::decode_deadline_ms`]) into a deadline on this server's clock, clamped to
///    [`Propagation::max`]. A request with neither header gets
///    [`default_budget`](Self::default_budget), clamped the same way. Only the first value
///    of a header is read, with the whitespace around it removed.
/// 2. **A malformed header** (one the core's codec rejects: a sign, a missing or unknown
///    unit, too many digits...) is answered with **400 Bad Request**, and the inner service
///    is not called. The caller sent a deadline it means to keep, so the server does not
///    guess one. A malformed `x-deadline-ms` is not looked at when a `grpc-timeout` is
///    present.
/// 3. **Admission.** A request whose deadline has already passed is answered with
///    [`Error::DeadlineExceeded`]'s status (504): its caller has stopped waiting. With an
///    [`Admission`] ([`with_admission`](Self::with_admission)), a request with less time left
///    than the handler needs is answered with [`Error::Shed`]'s status (503): another replica
///    may serve it. Either way the inner service is not called, so a rejected request costs
///    nothing further.
/// 4. **The handler** is called with the [`Deadline`] in the request's extensions, and its
///    future runs in a [`scope`] with it: inside, [`remaining`](crate::remaining) and
///    [`current`] give the time left and the deadline, and nested [`decide`](crate::decide),
///    [`drive`](crate::drive), [`statement_timeout`](crate::statement_timeout) and
///    [`PropagateLayer`](super::PropagateLayer) calls inherit it. (The scope covers the
///    future, not the synchronous part of the inner `call`: code there reads the extension.)
/// 5. **At the deadline**, a handler still running is dropped, which cancels its work and
///    every call it has in flight, and the answer is [`Error::DeadlineExceeded`]'s status
///    (504 Gateway Timeout).
///
/// The answers the layer makes itself (400, 503, 504) have an empty body:
/// `ResBody::default()`, hence the `ResBody: Default` bound. The statuses are the core's
/// ([`Error::http_status`]), except 400, which is not a deadline error. They are plain HTTP
/// answers, with no `grpc-status`: a gRPC client maps them by the HTTP status alone (gRPC's
/// own table sends 503 and 504 to `UNAVAILABLE`, 400 to `INTERNAL`).
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
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // Callers are believed up to 10 s; silent ones get 1 s; the handler needs 20 ms at least.
/// let layer = DeadlineLayer::new(Propagation::new(ms(5), ms(10_000)), ms(1_000))
///     .with_admission(Admission::new(ms(20)));
/// let server = layer.layer(service_fn(|_req: Request<()>| async {
///     tokio::time::sleep(ms(30)).await;
///     Ok::<_, Infallible>(Response::new(remaining()))
/// }));
///
/// // 200 ms sent: the handler sees 200 ms at first, 170 ms after its 30 ms of work.
/// let request = Request::builder().header("grpc-timeout", "200m").body(()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.into_body(), Some(ms(170)));
///
/// // 10 ms sent, 20 ms needed: shed at once, the handler is not called.
/// let request = Request::builder().header("x-deadline-ms", "10").body(()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
///
/// // 25 ms sent: admitted, but the handler's 30 ms do not fit. Dropped at the deadline.
/// let request = Request::builder().header("grpc-timeout", "25m").body(()).unwrap();
/// let response = server.clone().oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
///
/// // A malformed header.
/// let request = Request::builder().header("grpc-timeout", "-5S").body(()).unwrap();
/// let response = server.oneshot(request).await.unwrap();
/// assert_eq!(response.status(), StatusCode::BAD_REQUEST);
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
}

impl DeadlineLayer {
    /// Reads incoming budgets with `propagation` (clamped to its maximum); a request with no
    /// deadline header gets `default_budget`. No admission rule: see
    /// [`with_admission`](Self::with_admission).
    #[must_use]
    pub const fn new(propagation: Propagation, default_budget: Duration) -> Self {
        DeadlineLayer {
            propagation,
            default_budget,
            admission: None,
        }
    }

    /// Sheds requests that `admission` rejects ([`Admission::admit`]) with its error's
    /// status (503), without calling the handler.
    #[must_use]
    pub const fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = Some(admission);
        self
    }

    /// The request's deadline, from its headers, at `now`.
    fn deadline(&self, headers: &HeaderMap, now: Instant) -> Result<Deadline, WireError> {
        if let Some(value) = headers.get(GRPC_TIMEOUT) {
            self.propagation
                .decode_grpc_timeout(value.as_bytes().trim_ascii(), now)
        } else if let Some(value) = headers.get(X_DEADLINE_MS) {
            self.propagation
                .decode_deadline_ms(value.as_bytes().trim_ascii(), now)
        } else {
            Ok(self.propagation.incoming(self.default_budget, now))
        }
    }

    /// Whether a request with `deadline` is served, starting at `now`.
    fn admit(&self, deadline: Deadline, now: Instant) -> Result<(), Error> {
        if deadline.is_expired(now) {
            return Err(Error::DeadlineExceeded);
        }
        match self.admission {
            Some(admission) => admission.admit(deadline, now).map(drop),
            None => Ok(()),
        }
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
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> DeadlineFuture<S::Future> {
        let now = TokioClock.now();
        let deadline = match self.config.deadline(request.headers(), now) {
            Ok(deadline) => deadline,
            Err(_) => return DeadlineFuture::answer(StatusCode::BAD_REQUEST),
        };
        // Inside an outer scope (rare on a server), the earlier deadline rules, as in `scope`.
        let deadline = current().map_or(deadline, |outer| outer.min(deadline));
        if let Err(error) = self.config.admit(deadline, now) {
            return DeadlineFuture::answer(status(error));
        }
        request.extensions_mut().insert(deadline);
        let handler = scope(deadline, self.inner.call(request));
        DeadlineFuture {
            state: State::Running {
                handler: tokio::time::timeout_at(to_tokio(deadline.instant()), handler),
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
            handler: Timeout<Scoped<F>>,
        },
        /// Answered without calling the handler.
        Answered { status: StatusCode },
    }
}

impl<F> DeadlineFuture<F> {
    fn answer(status: StatusCode) -> Self {
        DeadlineFuture {
            state: State::Answered { status },
        }
    }
}

impl<F, ResBody, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
    ResBody: Default,
{
    type Output = Result<Response<ResBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Running { handler } => match handler.poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(answer)) => Poll::Ready(answer),
                Poll::Ready(Err(_elapsed)) => {
                    // The deadline came first: drop the handler now, cancelling its work.
                    let timed_out = status(Error::DeadlineExceeded);
                    state.set(State::Answered { status: timed_out });
                    Poll::Ready(Ok(empty(timed_out)))
                }
            },
            StateProj::Answered { status } => Poll::Ready(Ok(empty(*status))),
        }
    }
}

/// The HTTP status of a core error ([`Error::http_status`]).
fn status(error: Error) -> StatusCode {
    StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A response with `status` and an empty body.
fn empty<B: Default>(status: StatusCode) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = status;
    response
}
