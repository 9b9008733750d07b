//! [`DependencyLayer`]: each request sent through a client as one call to a
//! [`Dependency`], with its retries, hedges, retry budget and breaker, and the time left of
//! each attempt in its deadline header.

use core::fmt;
use core::task::{Context, Poll};
use core::time::Duration;

#[cfg(doc)]
use deadline_core::CallError;
#[cfg(doc)]
use deadline_core::Outcome;
use deadline_core::drive::{AnyErrorFails, Classify};
#[cfg(doc)]
use deadline_core::wire::ResponseHead;
use deadline_core::wire::{DeadlineHeader, Propagation};
use http::{Request, Response};
use http_body::Body;
use tower_layer::Layer;
use tower_service::Service;

use super::dependency_attempt::Attempts;
use super::dependency_error::DependencyError;
use super::dependency_future::{
    BufferedFuture, BufferedState, Calling, DependencyFuture, Next, own_deadline, start,
};
use super::propagate::{PropagateLayer, PropagateService};
use super::propagate_body::PropagateBody;
use super::replay::{Collected, ReplayBody};
use crate::Dependency;

/// A tower layer for a client: each request is one call to a [`Dependency`], made as the
/// dependency's policy says, with each attempt's time left in the request's deadline header.
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// use deadline_core::{ms, Policy};
/// use deadline_core::policy::Backoff;
/// use deadline_core::wire::DeadlineHeader;
/// use deadline_tokio::DependencyLayer;
/// use deadline_tokio::{Dependency, scope_timeout};
/// use http::{Request, Response, StatusCode};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// static PRICING: Dependency = Dependency::new(
///     Policy::required("pricing")
///         .idempotent()
///         .with_cap(ms(100))
///         .with_floor(ms(10))
///         .with_retries(2)
///         .with_backoff(Backoff::constant(ms(10))),
/// );
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // The dependency fails its first request with a 503, then answers with the deadline it
/// // was sent.
/// let calls = Arc::new(AtomicU32::new(0));
/// let pricing = service_fn(move |req: Request<String>| {
///     let n = calls.fetch_add(1, Ordering::SeqCst);
///     async move {
///         let sent = req.headers()["x-deadline-ms"].to_str().unwrap().to_owned();
///         let status = if n == 0 { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
///         Ok::<_, Infallible>(Response::builder().status(status).body(sent).unwrap())
///     }
/// });
/// let client = DependencyLayer::new(&PRICING, DeadlineHeader::DeadlineMs).layer(pricing);
///
/// let response = scope_timeout(ms(1_000), client.oneshot(Request::new("price?".to_owned())))
///     .await
///     .expect("inside its scope")
///     .unwrap();
/// assert_eq!(response.status(), StatusCode::OK);
/// // The retry's own timeout, 100 ms (the cap), less the 5 ms kept for the network.
/// let body = response.into_body().into_inner().unwrap();
/// assert_eq!(body, "95");
/// assert_eq!(PRICING.counters().snapshot().retries, 1);
/// # }
/// ```
///
/// What each attempt sends, which response is retried, and bodies that are not `Clone`: [the layer module](crate::layer#dependencylayer-in-detail).
#[derive(Clone, Copy)]
pub struct DependencyLayer<C = AnyErrorFails, M = Cloned> {
    dependency: &'static Dependency,
    propagate: PropagateLayer,
    reserve: Duration,
    classify: C,
    mode: M,
}

/// How each attempt gets its copy of the request: a clone of it ([`DependencyLayer::new`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cloned;

/// How each attempt gets its copy of the request: the body is read into memory before the
/// first attempt, up to a limit, and sent again by each ([`DependencyLayer::buffered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buffered {
    limit: usize,
}

impl Buffered {
    /// The most bytes of a request body kept.
    #[must_use]
    pub const fn limit(&self) -> usize {
        self.limit
    }
}

impl DependencyLayer {
    /// Each request one call to `dependency`, each attempt's time left written into
    /// `header`, less [`Propagation::DEFAULT`]'s allowance (5 ms); no reserve; every error
    /// of the inner service [`Outcome::Failed`]; each attempt sends a clone of the request.
    ///
    /// A dependency that is [not idempotent](deadline_core::Policy::not_idempotent) is
    /// retried only after a refused connection or a server's pushback: the layer reads a
    /// pushback in the response itself, but a refused connection is an error of the inner
    /// service, which only [`classify_error`](DependencyLayer::classify_error) can tell
    /// (`ClassifyConnect` for a client that connects through this crate's `Connector`).
    /// Without it, such a dependency's refused connections are never retried.
    #[must_use]
    pub const fn new(dependency: &'static Dependency, header: DeadlineHeader) -> Self {
        DependencyLayer {
            dependency,
            propagate: PropagateLayer::new(Propagation::DEFAULT, header),
            reserve: Duration::ZERO,
            classify: AnyErrorFails,
            mode: Cloned,
        }
    }
}

impl<C, M> DependencyLayer<C, M> {
    /// The same layer, keeping back `propagation`'s allowance from the time left it sends.
    #[must_use]
    pub const fn with_propagation(mut self, propagation: Propagation) -> Self {
        self.propagate = self.propagate.with_propagation(propagation);
        self
    }

    /// The same layer, keeping `reserve` after each call for the work that follows it
    /// ([`Run::reserve`](deadline_core::run::Run::reserve)): each attempt's timeout is
    /// `min(left - reserve, cap)`.
    #[must_use]
    pub const fn reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// The same layer, classifying the inner service's errors with `classify`, any
    /// `FnMut(&E) -> Outcome + Clone` (annotate the argument's type:
    /// `|e: &hyper_util::client::legacy::Error| if e.is_connect() { Outcome::Refused } else
    /// { Outcome::Failed }`). Each attempt uses a clone of it.
    #[must_use]
    pub fn classify_error<C2>(self, classify: C2) -> DependencyLayer<C2, M> {
        DependencyLayer {
            dependency: self.dependency,
            propagate: self.propagate,
            reserve: self.reserve,
            classify,
            mode: self.mode,
        }
    }

    /// The same layer, reading each request's body into memory (at most `limit` bytes)
    /// before the first attempt, and sending it again with each ([`ReplayBody`]): for a
    /// body that is not `Clone`, such as `tonic::body::Body`. The body type must be
    /// `From<ReplayBody>`, as tonic's is (feature `tonic`). A longer body fails the request
    /// with [`DependencyError::BodyTooLarge`], unsent; one that fails to be read, with
    /// [`DependencyError::Body`].
    #[must_use]
    pub fn buffered(self, limit: usize) -> DependencyLayer<C, Buffered> {
        DependencyLayer {
            dependency: self.dependency,
            propagate: self.propagate,
            reserve: self.reserve,
            classify: self.classify,
            mode: Buffered { limit },
        }
    }

    /// The dependency called.
    #[must_use]
    pub const fn dependency(&self) -> &'static Dependency {
        self.dependency
    }
}

impl<C, M: fmt::Debug> fmt::Debug for DependencyLayer<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DependencyLayer")
            .field("dependency", &self.dependency.name())
            .field("propagate", &self.propagate)
            .field("reserve", &self.reserve)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl<S, C: Clone, M: Clone> Layer<S> for DependencyLayer<C, M> {
    type Service = DependencyService<S, C, M>;

    fn layer(&self, inner: S) -> Self::Service {
        DependencyService {
            inner: PropagateService::judged_by_caller(inner, self.propagate),
            dependency: self.dependency,
            reserve: self.reserve,
            classify: self.classify.clone(),
            mode: self.mode.clone(),
        }
    }
}

/// The service made by [`DependencyLayer`]: see there.
#[derive(Clone)]
pub struct DependencyService<S, C = AnyErrorFails, M = Cloned> {
    inner: PropagateService<S>,
    dependency: &'static Dependency,
    reserve: Duration,
    classify: C,
    mode: M,
}

impl<S, C, M> DependencyService<S, C, M> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        self.inner.get_mut()
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner.into_inner()
    }

    /// The dependency called.
    #[must_use]
    pub const fn dependency(&self) -> &'static Dependency {
        self.dependency
    }

    /// Takes the inner service the caller polled ready, for the first attempt, and leaves a
    /// clone of it for the next request.
    fn take_ready(&mut self) -> PropagateService<S>
    where
        S: Clone,
    {
        let clone = self.inner.clone();
        core::mem::replace(&mut self.inner, clone)
    }
}

impl<S: fmt::Debug, C, M: fmt::Debug> fmt::Debug for DependencyService<S, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DependencyService")
            .field("inner", &self.inner)
            .field("dependency", &self.dependency.name())
            .field("reserve", &self.reserve)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl<S, B, ResBody, C> Service<Request<B>> for DependencyService<S, C, Cloned>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    B: Clone,
    C: Classify<S::Error> + Clone,
{
    type Response = Response<PropagateBody<ResBody>>;
    type Error = DependencyError<S::Error>;
    type Future = DependencyFuture<S, B, ResBody, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(DependencyError::of_inner)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let own = own_deadline(request.headers(), self.reserve);
        let attempts = Attempts::new(
            self.take_ready(),
            request,
            core::convert::identity,
            self.classify.clone(),
        );
        DependencyFuture {
            calling: Calling {
                run: start(self.dependency, self.reserve, own, attempts),
            },
        }
    }
}

impl<S, B, ResBody, C> Service<Request<B>> for DependencyService<S, C, Buffered>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    B: Body + From<ReplayBody>,
    B::Error: Into<Box<dyn core::error::Error + Send + Sync>>,
    C: Classify<S::Error> + Clone,
{
    type Response = Response<PropagateBody<ResBody>>;
    type Error = DependencyError<S::Error>;
    type Future = BufferedFuture<S, B, ResBody, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(DependencyError::of_inner)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (head, body) = request.into_parts();
        // From now: the time the body takes to read counts.
        let own = own_deadline(&head.headers, self.reserve);
        BufferedFuture {
            state: BufferedState::Reading {
                body,
                read: Collected::default(),
                limit: self.mode.limit,
                next: Some(Next {
                    head,
                    service: self.take_ready(),
                    dependency: self.dependency,
                    reserve: self.reserve,
                    own,
                    classify: self.classify.clone(),
                }),
            },
        }
    }
}
