//! [`PropagateLayer`]: the time left written into outgoing requests, and the call bounded by it.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use deadline_core::wire::{
    DeadlineMs, GRPC_TIMEOUT, GrpcTimeout, Propagation, WireError, X_DEADLINE_MS,
};
use deadline_core::{Clock, Deadline, Error, Instant};
use http::{HeaderMap, HeaderValue, Request};
use tokio::time::Timeout;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::{TokioClock, to_tokio};
use crate::context::current;

/// Which header [`PropagateLayer`] writes the time left into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadlineHeader {
    /// `grpc-timeout` ([`Propagation::encode_grpc_timeout`]): for gRPC peers, and any peer
    /// that reads it; precise to the microsecond below 100 s.
    GrpcTimeout,
    /// `x-deadline-ms` ([`Propagation::encode_deadline_ms`]): whole milliseconds.
    DeadlineMs,
    /// Both headers, for peers that may read either. The request is made only when both
    /// can be written: under one millisecond left to send, `x-deadline-ms` cannot, and the
    /// call is not made rather than leave a peer to read no deadline at all.
    Both,
}

/// A tower layer that writes the time left into each outgoing HTTP request made inside a
/// deadline [`scope`](crate::scope), and bounds the call by that deadline.
///
/// For each request:
///
/// - **Inside a scope**, the header chosen ([`DeadlineHeader`]) is set to the time left minus
///   [`Propagation::allowance`], rounded down, or to the timeout the request already carries
///   if that is shorter ([`Propagation::outgoing_within`]): a request made with tonic's
///   `Request::set_timeout(50 ms)` inside a 1 s scope goes out with 50 ms. An existing value
///   that cannot be decoded is replaced.
///   The call is then dropped if it has not answered by the deadline, with
///   [`PropagateError::Deadline`]`(`[`Error::DeadlineExceeded`]`)`.
/// - **A failure of the inner service that comes when nothing is left to send** (the time left
///   is within the allowance) is reported as [`PropagateError::Deadline`]: it is the budget
///   running out at the next hop, or at a client below this layer that times the header it
///   sends (tonic's `Channel` fails such a call with `CANCELLED`), and it goes up as
///   `DEADLINE_EXCEEDED` / 504, not as the failure it arrived as.
/// - **When nothing is left to send** ([`WireError::Spent`]), the inner service is not
///   called: the result is [`PropagateError::Deadline`]`(`[`Error::DeadlineExceeded`]`)`,
///   which maps to 504 and gRPC `DEADLINE_EXCEEDED`.
/// - **Outside any scope** (or under [`Deadline::NEVER`], which
///   [`propagate`](crate::propagate) gives outside one), the request passes through
///   unchanged, headers included, and the call is not bounded.
///
/// The deadline is read from the task when the service is *called*, so put this layer where
/// it is called from the request's task: not behind a `Buffer`, whose worker runs in a task
/// of its own.
///
/// ```
/// use std::convert::Infallible;
///
/// use deadline_core::wire::Propagation;
/// use deadline_core::{Error, ms};
/// use deadline_tokio::layer::{DeadlineHeader, PropagateError, PropagateLayer};
/// use deadline_tokio::scope_timeout;
/// use http::Request;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // The next service answers with the `x-deadline-ms` it was sent.
/// let next = service_fn(|req: Request<()>| async move {
///     Ok::<_, Infallible>(req.headers().get("x-deadline-ms").cloned())
/// });
/// let client = PropagateLayer::new(Propagation::new(ms(5), ms(10_000)), DeadlineHeader::DeadlineMs)
///     .layer(next);
///
/// scope_timeout(ms(200), async {
///     tokio::time::sleep(ms(50)).await;
///     // 150 ms left, 5 ms kept for the network.
///     let sent = client.clone().oneshot(Request::new(())).await.unwrap();
///     assert_eq!(sent.unwrap(), "145");
///
///     tokio::time::sleep(ms(146)).await;
///     // 4 ms left: nothing to send after the allowance, so no call.
///     let spent = client.clone().oneshot(Request::new(())).await;
///     assert_eq!(spent, Err(PropagateError::Deadline(Error::DeadlineExceeded)));
/// })
/// .await;
///
/// // Outside any scope the request goes as it is.
/// let sent = client.oneshot(Request::new(())).await.unwrap();
/// assert_eq!(sent, None);
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PropagateLayer {
    /// The per-hop allowance kept back from what is sent ([`Propagation::allowance`]).
    pub propagation: Propagation,
    /// The header written.
    pub header: DeadlineHeader,
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

    /// Sets the chosen header(s) for work that must end by `deadline`, at `now`: all of them,
    /// or none. A shorter timeout already on the request (in either header) is kept.
    fn write(
        &self,
        headers: &mut HeaderMap,
        deadline: Deadline,
        now: Instant,
    ) -> Result<(), WireError> {
        let left = self
            .propagation
            .outgoing_within(deadline, now, already_set(headers))?;
        let grpc = match self.header {
            DeadlineHeader::GrpcTimeout | DeadlineHeader::Both => {
                Some(GrpcTimeout::from_duration(left).map(|v| header_value(v.as_bytes()))?)
            }
            DeadlineHeader::DeadlineMs => None,
        };
        let millis = match self.header {
            DeadlineHeader::DeadlineMs | DeadlineHeader::Both => {
                Some(DeadlineMs::from_duration(left).map(|v| header_value(v.as_bytes()))?)
            }
            DeadlineHeader::GrpcTimeout => None,
        };
        if let Some(value) = grpc.flatten() {
            headers.insert(GRPC_TIMEOUT, value);
        }
        if let Some(value) = millis.flatten() {
            headers.insert(X_DEADLINE_MS, value);
        }
        Ok(())
    }
}

/// The shortest timeout a request already carries in its `grpc-timeout` or `x-deadline-ms`
/// header (set by the caller, such as tonic's `Request::set_timeout`), if any can be read. A
/// value that cannot be decoded is not a timeout: it is replaced.
fn already_set(headers: &HeaderMap) -> Option<Duration> {
    let grpc = headers
        .get(GRPC_TIMEOUT)
        .and_then(|v| GrpcTimeout::parse(v.as_bytes().trim_ascii()).ok())
        .map(|t| t.duration());
    let millis = headers
        .get(X_DEADLINE_MS)
        .and_then(|v| DeadlineMs::parse(v.as_bytes().trim_ascii()).ok())
        .map(|t| t.duration());
    match (grpc, millis) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// An encoded value as a header value. The codecs write ASCII digits and a unit letter only,
/// which are always valid, so this is never `None` in practice.
fn header_value(bytes: &[u8]) -> Option<HeaderValue> {
    HeaderValue::from_bytes(bytes).ok()
}

impl<S> Layer<S> for PropagateLayer {
    type Service = PropagateService<S>;

    fn layer(&self, inner: S) -> PropagateService<S> {
        PropagateService {
            inner,
            config: *self,
        }
    }
}

/// The service made by [`PropagateLayer`]: see there.
#[derive(Clone, Debug)]
pub struct PropagateService<S> {
    inner: S,
    config: PropagateLayer,
}

impl<S> PropagateService<S> {
    /// Wraps `inner` with the rules of `layer`.
    pub const fn new(inner: S, layer: PropagateLayer) -> Self {
        PropagateService {
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

impl<S, B> Service<Request<B>> for PropagateService<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = PropagateError<S::Error>;
    type Future = PropagateFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(PropagateError::Inner)
    }

    fn call(&mut self, mut request: Request<B>) -> PropagateFuture<S::Future> {
        let Some(deadline) = current().filter(|d| *d != Deadline::NEVER) else {
            return PropagateFuture {
                state: State::Unbounded {
                    call: self.inner.call(request),
                },
            };
        };
        let now = TokioClock.now();
        if self
            .config
            .write(request.headers_mut(), deadline, now)
            .is_err()
        {
            return PropagateFuture {
                state: State::Spent,
            };
        }
        let call = self.inner.call(request);
        PropagateFuture {
            state: State::Bounded {
                call: tokio::time::timeout_at(to_tokio(deadline.instant()), call),
                deadline,
                propagation: self.config.propagation,
            },
        }
    }
}

/// The error of a [`PropagateService`]: the deadline's, or the inner service's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PropagateError<E> {
    /// No time was left: the request was not made because nothing was left to send after
    /// the allowance, or it was dropped at the deadline. Always
    /// [`Error::DeadlineExceeded`] (HTTP 504, gRPC `DEADLINE_EXCEEDED`).
    Deadline(Error),
    /// The inner service failed.
    Inner(E),
}

impl<E> PropagateError<E> {
    /// The deadline error, if that is what this is.
    pub fn deadline(&self) -> Option<Error> {
        match self {
            PropagateError::Deadline(error) => Some(*error),
            PropagateError::Inner(_) => None,
        }
    }

    /// The inner service's error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            PropagateError::Deadline(_) => None,
            PropagateError::Inner(error) => Some(error),
        }
    }
}

impl<E: fmt::Display> fmt::Display for PropagateError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropagateError::Deadline(error) => error.fmt(f),
            PropagateError::Inner(error) => error.fmt(f),
        }
    }
}

/// The error's source: the inner service's error, or for a deadline the core [`Error`]; with
/// feature `tonic`, a deadline's source is a `tonic::Status` with `DEADLINE_EXCEEDED` instead,
/// which a tonic client finds when it turns a service error into a status (without it,
/// tonic would report `UNKNOWN`).
impl<E: core::error::Error + 'static> core::error::Error for PropagateError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            #[cfg(feature = "tonic")]
            PropagateError::Deadline(_) => Some(deadline_exceeded()),
            #[cfg(not(feature = "tonic"))]
            PropagateError::Deadline(error) => Some(error),
            PropagateError::Inner(error) => Some(error),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`PropagateService`]: the inner call, bounded by the deadline
    /// when there is one.
    #[must_use = "futures do nothing unless polled"]
    pub struct PropagateFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        /// Outside any scope: the call as it is.
        Unbounded {
            #[pin]
            call: F,
        },
        /// The call, dropped at the deadline.
        Bounded {
            #[pin]
            call: Timeout<F>,
            deadline: Deadline,
            propagation: Propagation,
        },
        /// Not called, or dropped: no time left.
        Spent,
    }
}

impl<F, T, E> Future for PropagateFuture<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, PropagateError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Unbounded { call } => call.poll(cx).map_err(PropagateError::Inner),
            StateProj::Bounded {
                call,
                deadline,
                propagation,
            } => match call.poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(Ok(response))) => Poll::Ready(Ok(response)),
                Poll::Ready(Ok(Err(error))) => {
                    // A failure that comes when nothing is left to send (within the per-hop
                    // allowance of the deadline) is the deadline's: the next service's own
                    // timer, or a client's (tonic's `Channel` times the `grpc-timeout` it
                    // sends and fails with `CANCELLED`), ran out on the budget sent.
                    if propagation.outgoing(*deadline, TokioClock.now()).is_err() {
                        Poll::Ready(Err(PropagateError::Deadline(Error::DeadlineExceeded)))
                    } else {
                        Poll::Ready(Err(PropagateError::Inner(error)))
                    }
                }
                Poll::Ready(Err(_elapsed)) => {
                    // The deadline came first: drop the call now.
                    state.set(State::Spent);
                    Poll::Ready(Err(PropagateError::Deadline(Error::DeadlineExceeded)))
                }
            },
            StateProj::Spent => Poll::Ready(Err(PropagateError::Deadline(Error::DeadlineExceeded))),
        }
    }
}

#[cfg(feature = "tonic")]
/// The status a spent budget reads as, for a tonic client: `DEADLINE_EXCEEDED`. One value for
/// the process, so that a [`PropagateError`]'s source can point at it.
fn deadline_exceeded() -> &'static tonic::Status {
    static STATUS: std::sync::OnceLock<tonic::Status> = std::sync::OnceLock::new();
    STATUS.get_or_init(|| tonic::Status::from(Error::DeadlineExceeded))
}
