//! [`Attempt`]: what starts one attempt of a driven call.

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::call_timeout::Limits;
use crate::deadline::Deadline;

use super::runtime::{Onward, Runtime};
use super::scoped::{Scoped, enter_attempt, with_deadline};

/// Starts one attempt of a driven call with its limits: any `FnMut(Limits) -> impl Future`,
/// an [`InScope`] attempt, or a type of your own (one a library can name in a future type of
/// its own, which a closure cannot be: see
/// [`Dependency::run_attempt`](crate::Dependency::run_attempt)).
pub trait Attempt {
    /// The attempt's future.
    type Future: Future;

    /// Starts an attempt under `limits`.
    fn start(&mut self, limits: Limits) -> Self::Future;

    /// What `future`, a running attempt, sent onward, if the runtime was told
    /// ([`note_sent`](crate::runtime::note_sent)). The driver asks when the attempt fails: a
    /// failure a retry may fix that comes once what it sent is running out is the attempt
    /// running out of time ([`Onward::RunningOutFrom`]); an attempt that could send nothing
    /// ([`Onward::Nothing`]) never reached the dependency. `None` unless the attempt runs in
    /// its own scope ([`InScope`]) on a runtime that keeps it
    /// ([`KeepsSent`](crate::runtime::KeepsSent)), where what it sends is told apart from
    /// what the code around it sends.
    fn onward(future: Pin<&Self::Future>) -> Option<Onward> {
        let _ = future;
        None
    }

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
    type Future = InScopeFuture<Rt, A::Future>;

    #[inline]
    fn start(&mut self, limits: Limits) -> InScopeFuture<Rt, A::Future> {
        let deadline = limits.deadline();
        let attempt = &mut self.attempt;
        let mut sent = None;
        let fut = entered::<Rt, _>(deadline, &mut sent, || attempt.start(limits));
        InScopeFuture {
            fut: with_deadline(deadline, fut),
            sent,
        }
    }

    #[inline]
    fn onward(future: Pin<&InScopeFuture<Rt, A::Future>>) -> Option<Onward> {
        // Nothing to read on a runtime that keeps nothing, and no code for it either: on the
        // Cortex-M0, reading the field anyway took the deadline-only firmware's library code
        // from 4 052 to 4 112 bytes and the full one's from 10 082 to 10 342, past their
        // 4 096 and 10 240 budgets (`bash scripts/firmware.sh`).
        if Rt::KEEPS_SENT { future.sent } else { None }
    }

    /// The attempt function and the first poll of its future in one scope (one entry into
    /// the runtime's current deadline, not two).
    #[inline]
    fn start_in(
        &mut self,
        limits: Limits,
        mut slot: Pin<&mut Option<InScopeFuture<Rt, A::Future>>>,
        cx: &mut Context<'_>,
    ) -> Poll<<A::Future as Future>::Output> {
        let deadline = limits.deadline();
        let attempt = &mut self.attempt;
        let mut sent = None;
        let polled = entered::<Rt, _>(deadline, &mut sent, || {
            slot.set(Some(InScopeFuture {
                fut: with_deadline(deadline, attempt.start(limits)),
                sent: None,
            }));
            slot.as_mut().as_pin_mut().map_or(Poll::Pending, |running| {
                running.project().fut.poll_entered(cx)
            })
        });
        if let (Some(sent), Some(running)) = (sent, slot.as_pin_mut()) {
            running.project().sent.replace(sent);
        }
        polled
    }
}

/// Runs `f` in `deadline`'s scope on `Rt` as an attempt ([`Runtime::enter_attempt`]), and
/// keeps in `kept` both it and what `f` sent onward ([`Onward::and`]): a failure is the
/// deadline's once every request the attempt made is running out.
#[inline]
fn entered<Rt: Runtime, R>(
    deadline: Deadline,
    kept: &mut Option<Onward>,
    f: impl FnOnce() -> R,
) -> R {
    let (r, sent) = enter_attempt::<Rt, _>(deadline, f);
    if let Some(sent) = sent {
        *kept = Some(kept.map_or(sent, |k| k.and(sent)));
    }
    r
}

pin_project_lite::pin_project! {
    /// The future of an [`InScope`] attempt: the attempt's future, each poll of it inside the
    /// attempt's scope, and what it sent onward ([`Attempt::onward`]).
    #[must_use = "futures do nothing unless polled"]
    pub struct InScopeFuture<Rt, F> {
        #[pin]
        fut: Scoped<Rt, F>,
        sent: Option<Onward>,
    }
}

impl<Rt: Runtime, F: Future> Future for InScopeFuture<Rt, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let fut = this.fut;
        entered::<Rt, _>(fut.deadline(), this.sent, || fut.poll_entered(cx))
    }
}
