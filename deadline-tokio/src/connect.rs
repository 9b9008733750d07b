//! A connect limit apart from the read limit, per request (feature `hyper-util`).
//!
//! hyper-util's and tonic's connectors take one fixed connect timeout per client, set when
//! the client is built. [`Connector`] wraps any connector (a `tower::Service<Uri>`, such as
//! hyper-util's `HttpConnector`) and bounds each connect, when it starts, by the shorter of
//! the dependency's connect limit ([`Policy::connect`]) and the time left of the current
//! deadline ([`current`]): inside a [`DependencyLayer`](crate::DependencyLayer) call
//! that is the time left of the attempt, whose scope ends at its timeout. Reaching a server
//! in the same data centre takes milliseconds, so a host that does not answer is given up
//! on after the connect limit, with the rest of the attempt's time left for a retry,
//! instead of after the whole read limit.
//!
//! Each connection it makes ([`Io`]) is given up when a write to it makes no progress for
//! as long as the longest any attempt can wait ([`Policy::longest_cap`]: the policy's cap,
//! or an adaptive cap's upper bound): by then every request writing to it has been given up. Without this, hyper's connection task
//! keeps trying to send an abandoned request's body to a peer that has stopped reading, for
//! as long as the peer keeps the connection open, and the task and its socket are left.
//!
//! What a failed connect means for the call is read from the client's error by
//! [`ClassifyConnect`] (or [`outcome`]), which finds the [`ConnectError`] in the error's
//! source chain (hyper-util's `client::legacy::Error`, tonic's `transport::Error`):
//!
//! | the connect | outcome | so the call |
//! |---|---|---|
//! | ran out of time ([`ConnectError::TimedOut`]) | [`Outcome::TimedOut`] | counts it in the dependency's `timeouts`, retries it as the policy allows a timeout, and ends as the library's [`Error::Timeout`](deadline_core::Error::Timeout) (504, `DEADLINE_EXCEEDED`) |
//! | failed ([`ConnectError::Failed`]: refused, no route, a name that did not resolve) | [`Outcome::Refused`] | retries it even when the policy is not idempotent: the request was never sent |
//!
//! Any other error (the connection broke after the request was sent) is left to the
//! classifier given to [`ClassifyConnect::otherwise`] ([`Outcome::Failed`] by default).
//!
//! ```
//! use deadline_core::{ms, Policy};
//! use deadline_core::policy::Backoff;
//! use deadline_tokio::connect::{ClassifyConnect, Connector};
//! use deadline_core::wire::DeadlineHeader;
//! use deadline_tokio::DependencyLayer;
//! use deadline_tokio::{Dependency, scope_timeout};
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::client::legacy::connect::HttpConnector;
//! use hyper_util::rt::TokioExecutor;
//! use tower::{Layer, ServiceExt};
//!
//! // 100 ms per attempt, of which at most 20 to connect; three attempts.
//! static PRICING: Dependency = Dependency::new(
//!     Policy::required("pricing")
//!         .idempotent()
//!         .with_cap(ms(100))
//!         .with_floor(ms(10))
//!         .with_connect(ms(20))
//!         .with_retries(2)
//!         .with_backoff(Backoff::constant(ms(5))),
//! );
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A port nothing listens on: each connect is refused.
//! let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
//! let connector = Connector::new(HttpConnector::new(), PRICING.policy());
//! let client = Client::builder(TokioExecutor::new()).build(connector);
//! let client = DependencyLayer::new(&PRICING, DeadlineHeader::DeadlineMs)
//!     .classify_error(ClassifyConnect::new())
//!     .layer(client);
//!
//! let request = http::Request::get(format!("http://{closed}/price")).body(Empty::<bytes::Bytes>::new());
//! let error = scope_timeout(ms(1_000), client.oneshot(request.unwrap()))
//!     .await
//!     .expect("inside its scope")
//!     .unwrap_err();
//! // Refused three times: never sent, so retried; the last refusal is the call's error.
//! assert_eq!(PRICING.counters().snapshot().retries, 2);
//! assert!(error.library().is_none(), "{error}");
//! # }
//! ```

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::pin::pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::error::Error as StdError;
use std::io;

use deadline_core::drive::{AnyErrorFails, Classify};
use deadline_core::{Clock, Outcome, Policy};
use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::time::Sleep;
use tower_service::Service;

use crate::bounded::{Elapsed, past_bound};
use crate::clock::TokioClock;
use crate::context::current;

/// A boxed error, as hyper-util and tonic take from a connector.
type BoxError = Box<dyn StdError + Send + Sync>;

/// A connector whose every connect is bounded by the shorter of a connect limit and the
/// time left of the current deadline, read when the connect starts, and whose connections
/// are given up when a write stalls for the policy's cap: see the [module](self).
///
/// Use it where a client takes a connector: hyper-util's
/// `Client::builder(..).build(Connector::new(HttpConnector::new(), policy))`, tonic's
/// `Endpoint::connect_with_connector(Connector::new(..))`. It answers with the inner
/// connector's connection, in an [`Io`].
///
/// The deadline is read from the task that starts the connect. hyper-util's client starts
/// it from the request's own future, so each connect sees its attempt's time left. tonic's
/// `Channel` connects first in `connect_with_connector` (awaited in the caller's scope, if
/// any), and later reconnects from its own worker task, where no request's deadline is
/// current: those are bounded by the connect limit alone (each request waiting on them is
/// still bounded by its own deadline). A connect the client lets finish in the background
/// (hyper-util's, when a pooled connection came free first) keeps its bound.
#[derive(Clone, Copy, Debug)]
pub struct Connector<C> {
    inner: C,
    connect: Duration,
    stall: Duration,
}

impl<C> Connector<C> {
    /// Wraps `inner` for the dependency whose policy is `policy`: each connect bounded by
    /// the policy's connect limit ([`Policy::connect`]; none: the time left alone) or the
    /// time left, whichever is shorter; each connection given up when a write makes no
    /// progress for the longest an attempt can wait ([`Policy::longest_cap`]: the cap, or an
    /// adaptive cap's upper bound; none: never).
    #[must_use]
    pub const fn new(inner: C, policy: &Policy<'_>) -> Self {
        Connector {
            inner,
            connect: policy.connect(),
            stall: policy.longest_cap(),
        }
    }

    /// The connect limit ([`Duration::MAX`] for none).
    #[must_use]
    pub const fn connect_limit(&self) -> Duration {
        self.connect
    }

    /// How long a write may make no progress before its connection is given up
    /// ([`Duration::MAX`] for ever).
    #[must_use]
    pub const fn stall_limit(&self) -> Duration {
        self.stall
    }

    /// The inner connector.
    pub fn get_ref(&self) -> &C {
        &self.inner
    }

    /// The inner connector, unwrapped.
    pub fn into_inner(self) -> C {
        self.inner
    }

    /// The bound of a connect starting now: the connect limit, or the time left of the
    /// current deadline if that is shorter; `None` for no bound at all.
    fn bound(&self) -> Option<Duration> {
        let left = current().map_or(Duration::MAX, |d| d.remaining(TokioClock.now()));
        let bound = self.connect.min(left);
        (bound != Duration::MAX).then_some(bound)
    }
}

impl<C> Service<Uri> for Connector<C>
where
    C: Service<Uri>,
    C::Error: Into<BoxError>,
{
    type Response = Io<C::Response>;
    type Error = ConnectError;
    type Future = ConnectFuture<C::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| ConnectError::Failed(e.into()))
    }

    fn call(&mut self, uri: Uri) -> ConnectFuture<C::Future> {
        let stall = (self.stall != Duration::MAX).then_some(self.stall);
        let Some(bound) = self.bound() else {
            return ConnectFuture::new(Some(self.inner.call(uri)), None, Duration::MAX, stall);
        };
        if bound.is_zero() {
            // Nothing left of the time: the connect is not started.
            return ConnectFuture::new(None, None, bound, stall);
        }
        let until = tokio::time::Instant::now().checked_add(bound);
        ConnectFuture::new(Some(self.inner.call(uri)), until, bound, stall)
    }
}

pin_project_lite::pin_project! {
    /// The future of one connect made by a [`Connector`]: the inner connector's, ended with
    /// [`ConnectError::TimedOut`] at its bound (dropping the connect in progress).
    ///
    /// It is `Unpin` when the inner connector's future is (hyper-util's client asks for
    /// that): its timer is boxed, and made only if the connect is pending.
    #[must_use = "futures do nothing unless polled"]
    pub struct ConnectFuture<F> {
        // `None`: no time was left, and the connect was not started.
        #[pin]
        connect: Option<F>,
        // When the bound runs out; `None` for no bound.
        until: Option<tokio::time::Instant>,
        sleep: Option<Pin<Box<Sleep>>>,
        // The bound, for the error.
        after: Duration,
        // The stall limit of the connection made.
        stall: Option<Duration>,
        // Given its one more poll past the bound with the task's budget spent
        // (`bounded::past_bound`).
        spared: bool,
    }
}

impl<F> ConnectFuture<F> {
    fn new(
        connect: Option<F>,
        until: Option<tokio::time::Instant>,
        after: Duration,
        stall: Option<Duration>,
    ) -> Self {
        ConnectFuture {
            connect,
            until,
            sleep: None,
            after,
            stall,
            spared: false,
        }
    }
}

impl<F, T, E> Future for ConnectFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Io<T>, ConnectError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(connect) = this.connect.as_pin_mut() else {
            return Poll::Ready(Err(ConnectError::TimedOut {
                after: Duration::ZERO,
            }));
        };
        // The connect first, as tokio's own timeout does: a connection made at the bound is
        // kept.
        if let Poll::Ready(connected) = connect.poll(cx) {
            let stall = *this.stall;
            return Poll::Ready(match connected {
                Ok(io) => Ok(Io {
                    io,
                    stall,
                    stalled: None,
                }),
                Err(e) => Err(ConnectError::Failed(e.into())),
            });
        }
        let Some(until) = *this.until else {
            return Poll::Pending;
        };
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until)));
        // A task with no cooperative budget left (used up by the connect, or before it) does
        // not stop the timer from being read.
        let fired = if tokio::task::coop::has_budget_remaining() {
            sleep.as_mut().poll(cx).is_ready()
        } else {
            pin!(tokio::task::unconstrained(sleep.as_mut()))
                .poll(cx)
                .is_ready()
        };
        if fired {
            past_bound(this.spared, cx)
                .map(|Elapsed| Err(ConnectError::TimedOut { after: *this.after }))
        } else {
            Poll::Pending
        }
    }
}

/// A connection made by a [`Connector`]: the inner connector's, given up (its writes fail
/// with [`io::ErrorKind::TimedOut`]) when a write or flush makes no progress for the stall
/// limit, the policy's cap. Reads, and writes that progress, are the inner connection's.
#[derive(Debug)]
pub struct Io<T> {
    io: T,
    stall: Option<Duration>,
    // Armed at the first write or flush that could not progress, cleared by the next one
    // that does.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> Io<T> {
    /// The inner connection.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// The inner connection, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.io
    }

    /// The inner connection, unwrapped.
    pub fn into_inner(self) -> T {
        self.io
    }

    /// A write or flush polled to `polled`: progress clears the stall, and a stall that
    /// has lasted the limit fails.
    fn progress<R>(
        &mut self,
        polled: Poll<io::Result<R>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let Some(limit) = self.stall else {
            return Poll::Pending;
        };
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if stalled.as_mut().poll(cx).is_ready() {
            Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no byte could be written for {limit:?}: the connection is given up"),
            )))
        } else {
            Poll::Pending
        }
    }
}

impl<T: Read + Unpin> Read for Io<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Io<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.progress(polled, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.progress(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.progress(polled, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for Io<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

/// Why a [`Connector`]'s connect failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connect limit, or the time left, ran out `after` the connect started (zero: no
    /// time was left, and the connect was not started). The attempt's timeout:
    /// [`Outcome::TimedOut`].
    TimedOut {
        /// The bound that ran out.
        after: Duration,
    },
    /// The inner connector failed (connection refused, no route to the host, a name that
    /// did not resolve): the request was never sent, [`Outcome::Refused`].
    Failed(BoxError),
}

impl ConnectError {
    /// What this failed connect means for retrying: [`Outcome::TimedOut`] or
    /// [`Outcome::Refused`].
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match self {
            ConnectError::TimedOut { .. } => Outcome::TimedOut,
            ConnectError::Failed(_) => Outcome::Refused,
        }
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::TimedOut { after } if after.is_zero() => {
                f.write_str("no time left to connect")
            }
            ConnectError::TimedOut { after } => {
                write!(f, "the connect timed out after {after:?}")
            }
            ConnectError::Failed(error) => write!(f, "the connect failed: {error}"),
        }
    }
}

impl StdError for ConnectError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ConnectError::TimedOut { .. } => None,
            ConnectError::Failed(error) => Some(&**error),
        }
    }
}

/// What `error` means for retrying if a [`Connector`]'s connect failed somewhere in its
/// source chain (`error` itself included): [`ConnectError::outcome`]; `None` if no
/// [`ConnectError`] is in the chain.
///
/// ```
/// use deadline_core::{Outcome, ms};
/// use deadline_tokio::connect::{ConnectError, outcome};
///
/// let timed_out = ConnectError::TimedOut { after: ms(20) };
/// assert_eq!(outcome(&timed_out), Some(Outcome::TimedOut));
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// assert_eq!(outcome(&ConnectError::Failed(refused.into())), Some(Outcome::Refused));
/// // An error that did not come from the connect.
/// assert_eq!(outcome(&std::io::Error::from(std::io::ErrorKind::ConnectionReset)), None);
/// ```
#[must_use]
pub fn outcome(error: &(dyn StdError + 'static)) -> Option<Outcome> {
    crate::error_chain::find::<ConnectError>(error).map(ConnectError::outcome)
}

/// A classifier for a client's errors ([`Classify`]): a failed connect by [`outcome`]; an
/// HTTP/2 stream the server reset with `REFUSED_STREAM` (closed before any processing, RFC
/// 9113) [`Outcome::Refused`], as the request never ran; any other error by the classifier
/// it was given ([`otherwise`](Self::otherwise);
/// [`AnyErrorFails`], so [`Outcome::Failed`], by default). Give it to
/// [`DependencyLayer::classify_error`](crate::DependencyLayer::classify_error)
/// with a client that connects through a [`Connector`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassifyConnect<C = AnyErrorFails> {
    otherwise: C,
}

impl ClassifyConnect {
    /// Failed connects by [`outcome`]; every other error [`Outcome::Failed`].
    #[must_use]
    pub const fn new() -> Self {
        ClassifyConnect {
            otherwise: AnyErrorFails,
        }
    }
}

impl<C> ClassifyConnect<C> {
    /// The same, classifying every error that is not a failed connect with `otherwise`.
    #[must_use]
    pub fn otherwise<C2>(self, otherwise: C2) -> ClassifyConnect<C2> {
        ClassifyConnect { otherwise }
    }
}

impl<E: StdError + 'static, C: Classify<E>> Classify<E> for ClassifyConnect<C> {
    fn classify(&mut self, error: &E) -> Outcome {
        match outcome(error) {
            Some(outcome) => outcome,
            None if crate::error_chain::refused_stream(error) => Outcome::Refused,
            None => self.otherwise.classify(error),
        }
    }
}
