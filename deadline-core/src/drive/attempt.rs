//! [`Attempt`]: what starts one attempt of a driven call.

use core::future::Future;
use core::marker::PhantomData;

use crate::call_timeout::Limits;

use super::runtime::Runtime;
use super::scoped::{Scoped, enter, scope};

/// Starts one attempt of a driven call with its limits: any `FnMut(Limits) -> impl Future`,
/// an [`InScope`] attempt, or a type of your own (one a library can name in a future type of
/// its own, which a closure cannot be: see
/// [`Dependency::run_attempt`](crate::Dependency::run_attempt)).
pub trait Attempt {
    /// The attempt's future.
    type Future: Future;

    /// Starts an attempt under `limits`.
    fn start(&mut self, limits: Limits) -> Self::Future;
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
        scope(deadline, enter::<Rt, _>(deadline, || attempt.start(limits)))
    }
}
