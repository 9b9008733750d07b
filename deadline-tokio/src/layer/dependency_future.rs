//! The futures of a [`DependencyService`](super::DependencyService): one request's call to
//! the dependency, after its body is read into memory for a buffered one.

use core::future::{Future, IntoFuture};
use core::pin::Pin;
use core::task::{Context, Poll, ready};
use core::time::Duration;

use deadline_core::CallError;
use deadline_core::drive::{Classify, Full};
use deadline_core::run::RunFuture;
use deadline_core::wire::Incoming;
use deadline_core::{Clock, Deadline, Error};
use http::request::Parts;
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::dependency_attempt::{AttemptFuture, Attempts, Failed, Failure, OutcomeOf, outcome_of};
use super::dependency_error::DependencyError;
use super::headers::Scanned;
use super::propagate::PropagateService;
use super::propagate_body::PropagateBody;
use super::replay::{Collected, ReplayBody, TooLarge};
use crate::time::TokioClock;
use crate::{Dependency, Entropy, Tokio};

/// The call's future, as the dependency runs it.
pub(super) type RunOf<S, B, R, C, T> = RunFuture<
    'static,
    'static,
    Tokio,
    Attempts<S, B, R, C, T>,
    OutcomeOf<Response<PropagateBody<R>>, <S as Service<Request<B>>>::Error>,
    Entropy,
    AttemptFuture<S, B, C>,
    Response<PropagateBody<R>>,
    Failure<Response<PropagateBody<R>>, <S as Service<Request<B>>>::Error>,
    Full,
>;

/// The deadline that a request's own timeout header sets from now (a timeout its caller set,
/// such as tonic's `Request::set_timeout`: the shortest that can be read), plus `reserve`,
/// which the call keeps after it: or [`Deadline::NEVER`] for a request with none. The whole
/// call runs within it, as its caller asked: each attempt, a retry or a hedge included, is
/// sent with what is left of the timeout (the reserve, kept for the work after the call in
/// the scope, does not come off it), not with the whole timeout again.
pub(super) fn own_deadline(headers: &http::HeaderMap, reserve: Duration) -> Deadline {
    match Incoming::read_outgoing(Scanned::new(headers).lookup()).shortest_valid() {
        Some(own) => Deadline::after(TokioClock.now(), own.saturating_add(reserve)),
        None => Deadline::NEVER,
    }
}

/// The call of one request to `dependency`, within `own` (the request's own deadline, or
/// [`Deadline::NEVER`]: [`own_deadline`]), keeping `reserve` after it.
pub(super) fn start<S, B, R, C, T>(
    dependency: &'static Dependency,
    reserve: Duration,
    own: Deadline,
    attempts: Attempts<S, B, R, C, T>,
) -> RunOf<S, B, R, C, T>
where
    S: Service<Request<B>, Response = Response<R>> + Clone,
    T: Clone,
    C: Classify<S::Error> + Clone,
{
    let classify: OutcomeOf<Response<PropagateBody<R>>, S::Error> = outcome_of;
    dependency
        .run_attempt(attempts)
        .reserve(reserve)
        .deadline(own)
        .classify(classify)
        .into_future()
}

pin_project_lite::pin_project! {
    /// The call in progress.
    pub(super) struct Calling<S, B, R, C, T>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        pub(super) run: RunOf<S, B, R, C, T>,
    }
}

impl<S, B, R, C, T> Future for Calling<S, B, R, C, T>
where
    S: Service<Request<B>, Response = Response<R>> + Clone,
    T: Clone,
    C: Classify<S::Error> + Clone,
{
    type Output = Result<Response<PropagateBody<R>>, DependencyError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().run.poll(cx)) {
            Ok(response) => Ok(response),
            Err(error) => match error.into_attempt() {
                Ok(failure) => match failure.what {
                    // The call gave up after an answer: the caller gets it, as it came.
                    Failed::Response(response) => Ok(response),
                    Failed::Inner(error) => Err(DependencyError::Call(CallError::Attempt(error))),
                    Failed::Deadline(error) => {
                        Err(DependencyError::Call(CallError::Library(error)))
                    }
                },
                Err(error) => Err(DependencyError::Call(error)),
            },
        })
    }
}

pin_project_lite::pin_project! {
    /// The response future of a [`DependencyService`](super::DependencyService) that clones
    /// each request ([`DependencyLayer::new`](crate::DependencyLayer::new)): the call to the
    /// dependency, with its attempts in flight and its one sleep inside it, no allocation of
    /// its own. Dropping it drops every attempt still running.
    #[must_use = "futures do nothing unless polled"]
    pub struct DependencyFuture<S, B, R, C>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        pub(super) calling: Calling<S, B, R, C, B>,
    }
}

impl<S, B, R, C> Future for DependencyFuture<S, B, R, C>
where
    S: Service<Request<B>, Response = Response<R>> + Clone,
    B: Clone,
    C: Classify<S::Error> + Clone,
{
    type Output = Result<Response<PropagateBody<R>>, DependencyError<S::Error>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().calling.poll(cx)
    }
}

/// What a buffered request's call starts with, once its body is read.
pub(super) struct Next<S, C> {
    pub(super) head: Parts,
    pub(super) service: PropagateService<S>,
    pub(super) dependency: &'static Dependency,
    pub(super) reserve: Duration,
    /// The request's own deadline ([`own_deadline`]).
    pub(super) own: Deadline,
    pub(super) classify: C,
}

pin_project_lite::pin_project! {
    /// The response future of a [`DependencyService`](super::DependencyService) that buffers each request's body
    /// ([`DependencyLayer::buffered`](crate::DependencyLayer::buffered)): the body read into memory, then the call to the
    /// dependency, as [`DependencyFuture`]. The bytes read are the one allocation of its
    /// own; dropping it drops every attempt still running.
    #[must_use = "futures do nothing unless polled"]
    pub struct BufferedFuture<S, B, R, C>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        pub(super) state: BufferedState<S, B, R, C>,
    }
}

pin_project_lite::pin_project! {
    #[project = BufferedProj]
    pub(super) enum BufferedState<S, B, R, C>
    where
        S: Service<Request<B>>,
    {
        /// Reading the body.
        Reading {
            #[pin]
            body: B,
            read: Collected,
            limit: usize,
            next: Option<Next<S, C>>,
        },
        /// The call in progress.
        Calling {
            #[pin]
            calling: Calling<S, B, R, C, ReplayBody>,
        },
        /// The body could not be read: the request was not sent.
        Failed,
    }
}

impl<S, B, R, C> Future for BufferedFuture<S, B, R, C>
where
    S: Service<Request<B>, Response = Response<R>> + Clone,
    B: Body + From<ReplayBody>,
    B::Error: Into<Box<dyn core::error::Error + Send + Sync>>,
    C: Classify<S::Error> + Clone,
{
    type Output = Result<Response<PropagateBody<R>>, DependencyError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                BufferedProj::Reading {
                    mut body,
                    read,
                    limit,
                    next,
                } => {
                    let error = match ready!(body.as_mut().poll_frame(cx)) {
                        Some(Ok(frame)) => match read.push(frame, *limit) {
                            Ok(()) => continue,
                            Err(TooLarge) => DependencyError::BodyTooLarge { limit: *limit },
                        },
                        Some(Err(error)) => DependencyError::Body(error.into()),
                        None => match next.take() {
                            Some(next) => {
                                let body = core::mem::take(read).finish();
                                let attempts = Attempts::new(
                                    next.service,
                                    Request::from_parts(next.head, body),
                                    B::from,
                                    next.classify,
                                );
                                let run = start(next.dependency, next.reserve, next.own, attempts);
                                state.set(BufferedState::Calling {
                                    calling: Calling { run },
                                });
                                continue;
                            }
                            // Polled again after it failed to start: the same as a spent
                            // deadline (nothing is sent).
                            None => {
                                DependencyError::Call(CallError::Library(Error::DeadlineExceeded))
                            }
                        },
                    };
                    state.set(BufferedState::Failed);
                    return Poll::Ready(Err(error));
                }
                BufferedProj::Calling { calling } => return calling.poll(cx),
                // Polled again after it failed: nothing was sent, and nothing will be.
                BufferedProj::Failed => {
                    return Poll::Ready(Err(DependencyError::Call(CallError::Library(
                        Error::DeadlineExceeded,
                    ))));
                }
            }
        }
    }
}
