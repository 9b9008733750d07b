//! [`Attempt`]: what starts one attempt of a driven call.

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::call_timeout::Limits;

use super::runtime::Runtime;
use super::scoped::{Scoped, enter, with_deadline};

/// Starts one attempt of a driven call with its limits: any `FnMut(Limits) -> impl Future`,
/// an [`InScope`] attempt, or a type of your own (one a library can name in a future type of
/// its own, which a closure cannot be: see
/// [`Dependency::run_attempt`](crate::Dependency::run_attempt)).
pub trait Attempt {
    /// The attempt's future.
    type Future: Future;

    /// Starts an attempt under `limits`.
    fn start(&mut self, limits: Limits) -> Self::Future;

    /// Starts an attempt under `limits` in `slot`, and polls it once: what a driver does
    /// with a new attempt (it answers at once, or it is pending and its timer is armed).
    fn start_in(
        &mut self,
        limits: Limits,
        mut slot: Pin<&mut Option<Self::Future>>,
        cx: &mut Context<'_>,
    ) -> Poll<<Self::Future as Future>::Output> {
        slot.set(Some(self.start(limits)));
        slot.as_pin_mut().map_or(Poll::Pending, |f| f.poll(cx))
    }
}

impl<A: FnMut(Limits) -> F, F: Future> Attempt for A {
    type Future = F;

    #[inline]
    fn start(&mut self, limits: Limits) -> F {
        self(limits)
    }
}

/// An attempt function (or any [`Attempt`]) run inside the attempt's own scope on `Rt`: the
/// function itself (its synchronous part) and every poll of the future it returns see the
/// attempt's deadline, [`Limits::deadline`], as the current one.
#[derive(Clone, Copy, Debug)]
pub struct InScope<Rt, A> {
    attempt: A,
    runtime: PhantomData<fn() -> Rt>,
}

impl<Rt, A> InScope<Rt, A> {
    /// `attempt`, run in each attempt's scope.
    pub const fn new(attempt: A) -> Self {
        InScope {
            attempt,
            runtime: PhantomData,
        }
    }
}

impl<Rt: Runtime, A: Attempt> Attempt for InScope<Rt, A> {
    type Future = Scoped<Rt, A::Future>;

    #[inline]
    fn start(&mut self, limits: Limits) -> Scoped<Rt, A::Future> {
        let deadline = limits.deadline();
        let attempt = &mut self.attempt;
        with_deadline(deadline, enter::<Rt, _>(deadline, || attempt.start(limits)))
    }

    /// The attempt function and the first poll of its future in one scope (one entry into
    /// the runtime's current deadline, not two).
    #[inline]
    fn start_in(
        &mut self,
        limits: Limits,
        mut slot: Pin<&mut Option<Scoped<Rt, A::Future>>>,
        cx: &mut Context<'_>,
    ) -> Poll<<A::Future as Future>::Output> {
        let deadline = limits.deadline();
        let attempt = &mut self.attempt;
        enter::<Rt, _>(deadline, || {
            slot.set(Some(with_deadline(deadline, attempt.start(limits))));
            slot.as_pin_mut()
                .map_or(Poll::Pending, |scoped| scoped.poll_entered(cx))
        })
    }
}
