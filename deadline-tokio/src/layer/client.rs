//! [`PropagateLayer`]: the time left written into outgoing requests, and the call bounded by it.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use bytes::Bytes;
use deadline_core::wire::{
    CONNECT_TIMEOUT_MS, ConnectTimeout, DeadlineMs, GRPC_TIMEOUT, GrpcTimeout, HeaderSet,
    Propagation, WireError, X_DEADLINE_MS,
};
use deadline_core::{Clock, Deadline, Error, Instant};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Sleep, Timeout};

use super::answer::{GRPC_MESSAGE, GRPC_STATUS};
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
    /// Both `grpc-timeout` and `x-deadline-ms`, for peers that may read either. The request
    /// is made only when both can be written: under one millisecond left to send,
    /// `x-deadline-ms` cannot, and the call is not made rather than leave a peer to read no
    /// deadline at all.
    Both,
    /// `connect-timeout-ms` ([`Propagation::encode_connect_timeout`]): for Connect peers
    /// (connect-go, connect-es, connect-rust); whole milliseconds, at most 10 digits.
    ConnectTimeout,
}

impl DeadlineHeader {
    /// Sets this header (or these headers) to `left`, the budget to send: all of them, or
    /// none.
    pub(crate) fn write(
        self,
        headers: &mut HeaderMap,
        propagation: &Propagation,
        left: Duration,
    ) -> Result<(), WireError> {
        let set = HeaderSet {
            grpc_timeout: matches!(self, DeadlineHeader::GrpcTimeout | DeadlineHeader::Both),
            x_deadline_ms: matches!(self, DeadlineHeader::DeadlineMs | DeadlineHeader::Both),
            connect_timeout_ms: matches!(self, DeadlineHeader::ConnectTimeout),
        };
        let out = propagation.encode_headers(left, set)?;
        if let Some(value) = out.grpc_timeout.and_then(|v| header_value(v.as_bytes())) {
            headers.insert(GRPC_TIMEOUT, value);
        }
        if let Some(value) = out.x_deadline_ms.and_then(|v| header_value(v.as_bytes())) {
            headers.insert(X_DEADLINE_MS, value);
        }
        if let Some(value) = out
            .connect_timeout_ms
            .and_then(|v| header_value(v.as_bytes()))
        {
            headers.insert(CONNECT_TIMEOUT_MS, value);
        }
        Ok(())
    }
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
/// - **A response that is a failure arriving when nothing is left to send**: an HTTP 503 or
///   504, or a trailers-only gRPC `CANCELLED` (1), `UNAVAILABLE` (14) or `DEADLINE_EXCEEDED`
///   (4), is reported as [`PropagateError::Deadline`] too; gRPC trailers with `CANCELLED` or
///   `UNAVAILABLE` at the end of a body are rewritten to `DEADLINE_EXCEEDED`
///   ([`PropagateBody`]). With time left, every answer is relayed as it came.
/// - **The response body** is bounded by the same deadline: a body still streaming at the
///   deadline is dropped and fails with [`PropagateError::Deadline`] ([`PropagateBody`]).
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
/// use http::{Request, Response};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // The next service answers with the `x-deadline-ms` it was sent.
/// let next = service_fn(|req: Request<()>| async move {
///     Ok::<_, Infallible>(Response::new(req.headers().get("x-deadline-ms").cloned()))
/// });
/// let client = PropagateLayer::new(Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000)), DeadlineHeader::DeadlineMs)
///     .layer(next);
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
///
/// // Outside any scope the request goes as it is.
/// let sent = client.oneshot(Request::new(())).await.unwrap();
/// assert_eq!(sent.into_body().into_inner().unwrap(), None);
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
        self.header.write(headers, &self.propagation, left)
    }
}

/// The shortest timeout a request already carries in its `grpc-timeout`,
/// `connect-timeout-ms` or `x-deadline-ms` header (set by the caller, such as tonic's `Request::set_timeout`), if any can be read. A
/// value that cannot be decoded is not a timeout: it is replaced.
pub(crate) fn already_set(headers: &HeaderMap) -> Option<Duration> {
    let grpc = headers
        .get(GRPC_TIMEOUT)
        .and_then(|v| GrpcTimeout::parse(v.as_bytes().trim_ascii()).ok())
        .map(|t| t.duration());
    let millis = headers
        .get(X_DEADLINE_MS)
        .and_then(|v| DeadlineMs::parse(v.as_bytes().trim_ascii()).ok())
        .map(|t| t.duration());
    let connect = headers
        .get(CONNECT_TIMEOUT_MS)
        .and_then(|v| ConnectTimeout::parse(v.as_bytes().trim_ascii()).ok())
        .map(|t| t.duration());
    [grpc, millis, connect].into_iter().flatten().min()
}

/// Whether the current deadline leaves nothing to send to the next service, within
/// `propagation`'s per-hop allowance (`false` outside any [`scope`](crate::scope)).
///
/// A downstream failure that arrives now (a `CANCELLED`, `UNAVAILABLE` or
/// `DEADLINE_EXCEEDED`, an HTTP 503 or 504, a timeout or a reset) is the budget running out,
/// not the next service's own fault: report it to the caller as
/// [`Error::DeadlineExceeded`] (504 / `DEADLINE_EXCEEDED`), not as the failure it arrived
/// as. [`PropagateLayer`] does this itself; this is for calls made without it.
///
/// ```
/// use deadline_core::wire::Propagation;
/// use deadline_core::ms;
/// use deadline_tokio::layer::no_time_left;
/// use deadline_tokio::scope_timeout;
///
/// const HOP: Propagation = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// scope_timeout(ms(100), async {
///     assert!(!no_time_left(&HOP));
///     tokio::time::sleep(ms(96)).await; // 4 ms left, under the 5 ms allowance
///     assert!(no_time_left(&HOP));
/// })
/// .await;
/// assert!(!no_time_left(&HOP));
/// # }
/// ```
#[must_use]
pub fn no_time_left(propagation: &Propagation) -> bool {
    current()
        .filter(|d| *d != Deadline::NEVER)
        .is_some_and(|d| propagation.outgoing(d, TokioClock.now()).is_err())
}

/// Whether a response head reports a failure that, arriving with no time left, is the
/// deadline's: HTTP 503 or 504, or a trailers-only gRPC status `CANCELLED` (1),
/// `DEADLINE_EXCEEDED` (4) or `UNAVAILABLE` (14).
fn failure_of_the_deadline(status: StatusCode, headers: &HeaderMap) -> bool {
    matches!(
        status,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    ) || headers.get(GRPC_STATUS).is_some_and(deadline_grpc_status)
}

/// `grpc-status` 1, 4 or 14.
fn deadline_grpc_status(value: &HeaderValue) -> bool {
    matches!(value.as_bytes(), b"1" | b"4" | b"14")
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
            PropagateError::Deadline(error) => Some(super::status::status_of(*error)),
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

impl<F, B, E> Future for PropagateFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<PropagateBody<B>>, PropagateError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Unbounded { call } => call
                .poll(cx)
                .map_ok(|response| response.map(PropagateBody::unbounded))
                .map_err(PropagateError::Inner),
            StateProj::Bounded {
                call,
                deadline,
                propagation,
            } => {
                let (deadline, propagation) = (*deadline, *propagation);
                // Nothing is left to send (within the per-hop allowance of the deadline).
                let spent = || propagation.outgoing(deadline, TokioClock.now()).is_err();
                match call.poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Ok(Ok(response))) => {
                        // A failure that arrives with no time left is the deadline's: an HTTP
                        // 503 or 504, or a trailers-only CANCELLED, UNAVAILABLE or
                        // DEADLINE_EXCEEDED.
                        if failure_of_the_deadline(response.status(), response.headers()) && spent()
                        {
                            return Poll::Ready(Err(PropagateError::Deadline(
                                Error::DeadlineExceeded,
                            )));
                        }
                        Poll::Ready(Ok(response
                            .map(|body| PropagateBody::bounded(body, deadline, propagation))))
                    }
                    Poll::Ready(Ok(Err(error))) => {
                        // A failure that comes when nothing is left to send is the deadline's:
                        // the next service's own timer, or a client's (tonic's `Channel`
                        // times the `grpc-timeout` it sends and fails with `CANCELLED`), ran
                        // out on the budget sent.
                        if spent() {
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
                }
            }
            StateProj::Spent => Poll::Ready(Err(PropagateError::Deadline(Error::DeadlineExceeded))),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response body of [`PropagateService`]: the next service's body, bounded by the
    /// deadline the request was sent under.
    ///
    /// - **At the deadline** a body still streaming is dropped (which, on a hyper or tonic
    ///   connection, resets the stream) and fails with
    ///   [`PropagateError::Deadline`]`(`[`Error::DeadlineExceeded`]`)`.
    /// - **A failure that arrives with no time left to send** (within the per-hop allowance)
    ///   is the deadline's: a body error becomes [`PropagateError::Deadline`], and gRPC
    ///   trailers with `grpc-status` `CANCELLED` (1) or `UNAVAILABLE` (14) are rewritten to
    ///   `DEADLINE_EXCEEDED` (4), so the caller reads the deadline, not the next hop's timer.
    /// - Outside any scope, the body passes through (its errors as
    ///   [`PropagateError::Inner`]).
    pub struct PropagateBody<B> {
        #[pin]
        kind: BodyKind<B>,
    }
}

pin_project_lite::pin_project! {
    #[project = BodyKindProj]
    enum BodyKind<B> {
        Unbounded {
            #[pin]
            body: B,
        },
        Bounded {
            #[pin]
            body: B,
            #[pin]
            sleep: Sleep,
            deadline: Deadline,
            propagation: Propagation,
        },
        /// Dropped at the deadline.
        Cut,
    }
}

impl<B> PropagateBody<B> {
    fn unbounded(body: B) -> Self {
        PropagateBody {
            kind: BodyKind::Unbounded { body },
        }
    }

    fn bounded(body: B, deadline: Deadline, propagation: Propagation) -> Self {
        PropagateBody {
            kind: BodyKind::Bounded {
                body,
                sleep: tokio::time::sleep_until(to_tokio(deadline.instant())),
                deadline,
                propagation,
            },
        }
    }

    /// The next service's body, no longer bounded; `None` once it was cut at the deadline.
    pub fn into_inner(self) -> Option<B> {
        match self.kind {
            BodyKind::Unbounded { body } | BodyKind::Bounded { body, .. } => Some(body),
            BodyKind::Cut => None,
        }
    }
}

impl<B> fmt::Debug for PropagateBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyKind::Unbounded { .. } => f.write_str("PropagateBody::Unbounded(..)"),
            BodyKind::Bounded { deadline, .. } => f
                .debug_struct("PropagateBody::Bounded")
                .field("deadline", deadline)
                .finish_non_exhaustive(),
            BodyKind::Cut => f.write_str("PropagateBody::Cut"),
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
            BodyKindProj::Unbounded { body } => body
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(PropagateError::Inner))),
            BodyKindProj::Bounded {
                body,
                sleep,
                deadline,
                propagation,
            } => {
                if sleep.poll(cx).is_ready() {
                    kind.set(BodyKind::Cut);
                    return Poll::Ready(Some(Err(PropagateError::Deadline(
                        Error::DeadlineExceeded,
                    ))));
                }
                let (deadline, propagation) = (*deadline, *propagation);
                let spent = || propagation.outgoing(deadline, TokioClock.now()).is_err();
                match body.poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => match frame.into_trailers() {
                        Ok(mut trailers) => {
                            let relayed = trailers
                                .get(GRPC_STATUS)
                                .is_some_and(|v| matches!(v.as_bytes(), b"1" | b"14"));
                            if relayed && spent() {
                                let error = Error::DeadlineExceeded;
                                trailers.insert(
                                    GRPC_STATUS,
                                    HeaderValue::from(u16::from(error.grpc_code().as_u8())),
                                );
                                trailers
                                    .insert(GRPC_MESSAGE, HeaderValue::from_static(error.reason()));
                            }
                            Poll::Ready(Some(Ok(Frame::trailers(trailers))))
                        }
                        Err(frame) => Poll::Ready(Some(Ok(frame))),
                    },
                    Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(if spent() {
                        PropagateError::Deadline(Error::DeadlineExceeded)
                    } else {
                        PropagateError::Inner(error)
                    }))),
                    other => {
                        other.map(|frame| frame.map(|frame| frame.map_err(PropagateError::Inner)))
                    }
                }
            }
            BodyKindProj::Cut => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Unbounded { body } | BodyKind::Bounded { body, .. } => body.is_end_stream(),
            BodyKind::Cut => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Unbounded { body } | BodyKind::Bounded { body, .. } => body.size_hint(),
            BodyKind::Cut => SizeHint::default(),
        }
    }
}
