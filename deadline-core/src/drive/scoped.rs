//! [`Scoped`]: a future polled under a current deadline, on any [`Runtime`].

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use core::time::Duration;

use crate::call_timeout::{Decision, call_timeout};
use crate::deadline::Deadline;
use crate::policy::Policy;
use crate::statement::{StatementDecision, StatementPolicy};
use crate::time::Clock;

use super::runtime::Runtime;

pin_project_lite::pin_project! {
    /// A future running with a current deadline ([`scope`]).
    ///
    /// Each poll reads the enclosing deadline ([`Runtime::current`]), takes the earlier of it
    /// and its own, and polls the inner future with that as the current deadline: a nested
    /// scope can shorten the deadline, never extend it, whatever the order in which the
    /// futures were built. No allocation: it holds the inner future and one [`Deadline`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<Rt, F> {
        deadline: Deadline,
        #[pin]
        fut: F,
        runtime: PhantomData<fn() -> Rt>,
    }
}

/// Runs `fut` with `deadline` as `Rt`'s current deadline, or with the enclosing one if that
/// is earlier when it runs.
pub const fn scope<Rt: Runtime, F: Future>(deadline: Deadline, fut: F) -> Scoped<Rt, F> {
    Scoped {
        deadline,
        fut,
        runtime: PhantomData,
    }
}

/// Runs `f` with `deadline` as `Rt`'s current deadline, or with the enclosing one if that is
/// earlier: the synchronous step of one [`Scoped`] poll.
pub fn enter<Rt: Runtime, R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
    let deadline = Rt::current().map_or(deadline, |outer| outer.min(deadline));
    Rt::enter(deadline, f)
}

/// Runs `fut` with a current deadline `timeout` from now on `Rt`'s clock (or the enclosing
/// one, if that is earlier when it runs).
pub fn scope_timeout<Rt: Runtime, F: Future>(timeout: Duration, fut: F) -> Scoped<Rt, F> {
    scope(Deadline::after(Rt::timer().now(), timeout), fut)
}

/// Runs `fut` with the deadline current *now*, where this is called (or [`Deadline::NEVER`]
/// outside any scope): for a future about to be spawned, which would not see it otherwise.
pub fn propagate<Rt: Runtime, F: Future>(fut: F) -> Scoped<Rt, F> {
    scope(Rt::current().unwrap_or(Deadline::NEVER), fut)
}

/// `Rt`'s current deadline, or `None` where there is none: outside any scope, and in a scope
/// of [`Deadline::NEVER`] (what [`propagate`] gives outside one), which bounds nothing. Every
/// adapter reads the current deadline through this, so that "no deadline" means one thing.
#[must_use]
#[inline]
pub fn current<Rt: Runtime>() -> Option<Deadline> {
    Rt::current().filter(|d| *d != Deadline::NEVER)
}

/// The time left until `Rt`'s current deadline (zero once it has passed), or `None` where
/// there is none ([`current`]).
#[must_use]
pub fn remaining<Rt: Runtime>() -> Option<Duration> {
    current::<Rt>().map(|d| d.remaining(Rt::timer().now()))
}

/// The decision for a call to `policy`'s dependency starting now under `Rt`'s current
/// deadline, keeping `reserve` for the work after it ([`call_timeout`]); outside any scope the
/// deadline never comes.
pub fn decide<Rt: Runtime>(policy: &Policy<'_>, reserve: Duration) -> Decision {
    let deadline = Rt::current().unwrap_or(Deadline::NEVER);
    call_timeout(policy, deadline, reserve, Rt::timer().now())
}

/// The database statement timeout for a query starting now under `Rt`'s current deadline
/// ([`crate::statement_timeout`]).
pub fn statement_timeout<Rt: Runtime>(policy: &StatementPolicy) -> StatementDecision {
    let deadline = Rt::current().unwrap_or(Deadline::NEVER);
    crate::statement::statement_timeout(policy, deadline, Rt::timer().now())
}

impl<Rt, F> Scoped<Rt, F> {
    /// The scope's own deadline (the one it was made with, before any enclosing deadline is
    /// taken into account).
    #[must_use]
    pub const fn deadline(&self) -> Deadline {
        self.deadline
    }
}

impl<Rt: Runtime, F: Future> Scoped<Rt, F> {
    /// Polls the inner future as it is, inside a scope already entered with this one's
    /// deadline (or an earlier one).
    #[inline]
    pub(crate) fn poll_entered(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().fut.poll(cx)
    }
}

impl<Rt: Runtime, F: Future> Future for Scoped<Rt, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let fut = this.fut;
        enter::<Rt, _>(*this.deadline, || fut.poll(cx))
    }
}
