//! One attempt of a [`DependencyLayer`](crate::DependencyLayer) call: a copy of the request
//! sent through a ready clone of the inner service, and how it failed.

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll, ready};

use deadline_core::call::Limits;
use deadline_core::drive::{Attempt, Classify};
use deadline_core::wire::ResponseHead;
use deadline_core::{Error, Outcome};
use http::{Request, Response};
use tower_service::Service;

use super::headers::{dated, lookup};
use super::propagate::{PropagateFuture, PropagateService};
use super::propagate_body::PropagateBody;
use super::propagate_error::PropagateError;

/// How one attempt failed: its outcome for the retry decision, and what it failed with.
#[derive(Debug)]
pub(super) struct Failure<R, E> {
    pub(super) outcome: Outcome,
    pub(super) what: Failed<R, E>,
}

/// What an attempt failed with.
#[derive(Debug)]
pub(super) enum Failed<R, E> {
    /// A response classified as a failure: the caller gets it if the call gives up.
    Response(R),
    /// The inner service's error.
    Inner(E),
    /// The attempt's deadline: nothing was left to send, or it passed.
    Deadline(Error),
}

impl<R, E> Failure<R, E> {
    /// A failure of the inner service (or of the attempt's deadline), classified.
    fn of(error: PropagateError<E>, classify: &mut impl Classify<E>) -> Self {
        match error {
            PropagateError::Inner(error) => Failure {
                outcome: classify.classify(&error),
                what: Failed::Inner(error),
            },
            PropagateError::Deadline(error) => Failure {
                outcome: Outcome::TimedOut,
                what: Failed::Deadline(error),
            },
        }
    }
}

/// The classifier the driver is given: each attempt's future has classified its own
/// failure already.
pub(super) type OutcomeOf<R, E> = fn(&Failure<R, E>) -> Outcome;

pub(super) fn outcome_of<R, E>(failure: &Failure<R, E>) -> Outcome {
    failure.outcome
}

/// What starts each attempt of one request: a copy of the request through a ready clone of
/// the inner service.
pub(super) struct Attempts<S, B, R, C, T> {
    /// The inner service; ready for the first attempt (the caller polled it).
    service: PropagateService<S>,
    /// Whether the first attempt is still to start.
    first: bool,
    /// The request each attempt sends a copy of.
    request: Request<T>,
    /// Its body as the inner service takes it.
    into_body: fn(T) -> B,
    classify: C,
    /// The inner service's response body.
    response: PhantomData<fn() -> R>,
}

impl<S, B, R, C, T> Attempts<S, B, R, C, T> {
    /// The attempts of `request` through `service` (ready for the first), its body made into
    /// the service's with `into_body`, the service's errors classified with `classify`.
    pub(super) fn new(
        service: PropagateService<S>,
        request: Request<T>,
        into_body: fn(T) -> B,
        classify: C,
    ) -> Self {
        Attempts {
            service,
            first: true,
            request,
            into_body,
            classify,
            response: PhantomData,
        }
    }
}

impl<S, B, R, C, T> Attempt for Attempts<S, B, R, C, T>
where
    S: Service<Request<B>, Response = Response<R>> + Clone,
    T: Clone,
    C: Classify<S::Error> + Clone,
{
    type Future = AttemptFuture<S, B, C>;

    fn start(&mut self, _limits: Limits) -> AttemptFuture<S, B, C> {
        // Started inside the attempt's scope: `PropagateService` sends its time left.
        let request = self.request.clone().map(self.into_body);
        let classify = self.classify.clone();
        let state = if core::mem::take(&mut self.first) {
            let clone = self.service.clone();
            let mut ready = core::mem::replace(&mut self.service, clone);
            AttemptState::Calling {
                call: ready.call(request),
            }
        } else {
            AttemptState::Waiting {
                service: self.service.clone(),
                request: Some(request),
            }
        };
        AttemptFuture { state, classify }
    }
}

pin_project_lite::pin_project! {
    /// One attempt: a clone of the inner service polled ready, then called.
    pub(super) struct AttemptFuture<S, B, C>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: AttemptState<S, B>,
        classify: C,
    }
}

pin_project_lite::pin_project! {
    #[project = AttemptStateProj]
    enum AttemptState<S, B>
    where
        S: Service<Request<B>>,
    {
        /// Waiting for the service to be ready.
        Waiting {
            service: PropagateService<S>,
            request: Option<Request<B>>,
        },
        /// The request sent.
        Calling {
            #[pin]
            call: PropagateFuture<S::Future>,
        },
    }
}

impl<S, B, ResBody, C> Future for AttemptFuture<S, B, C>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    C: Classify<S::Error>,
{
    type Output = Result<
        Response<PropagateBody<ResBody>>,
        Failure<Response<PropagateBody<ResBody>>, S::Error>,
    >;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                AttemptStateProj::Waiting { service, request } => {
                    if let Err(error) = ready!(service.poll_ready(cx)) {
                        return Poll::Ready(Err(Failure::of(error, this.classify)));
                    }
                    // The request is there until it is sent, and the state changes then.
                    let Some(request) = request.take() else {
                        return Poll::Ready(Err(Failure::of(
                            PropagateError::Deadline(Error::DeadlineExceeded),
                            this.classify,
                        )));
                    };
                    let call = service.call(request);
                    this.state.set(AttemptState::Calling { call });
                }
                AttemptStateProj::Calling { call } => {
                    let protocol = call.as_ref().get_ref().protocol();
                    return Poll::Ready(match ready!(call.poll(cx)) {
                        Ok(response) => {
                            let head = ResponseHead::read(
                                response.status().as_u16(),
                                lookup(response.headers()),
                            );
                            // Read for the request as it was sent, when it was.
                            let head = protocol.map_or(head, |p| head.for_request(p));
                            match head.classify() {
                                None => Ok(response),
                                Some(outcome) => Err(Failure {
                                    outcome: dated(
                                        outcome,
                                        response.status().as_u16(),
                                        response.headers(),
                                    ),
                                    what: Failed::Response(response),
                                }),
                            }
                        }
                        Err(error) => Err(Failure::of(error, this.classify)),
                    });
                }
            }
        }
    }
}
