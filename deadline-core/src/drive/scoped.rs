//! The current deadline of a future, on any [`Runtime`]: [`scope`], which bounds what runs
//! inside it, and [`with_deadline`], which only sets the deadline it reads.

use core::future::{Future, IntoFuture};
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use core::time::Duration;

use crate::deadline::Deadline;
use crate::error::Error;
use crate::time::Clock;
use crate::timer::Timer;
use crate::wire::Sent;

use super::runtime::{KeepsSent, Onward, Runtime};

pin_project_lite::pin_project! {
    /// A future running with a current deadline, not bounded by it ([`with_deadline`]).
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
/// is earlier when it runs, without bounding it: what runs inside reads the deadline, and
/// nothing is dropped when it passes. For work that bounds itself (a server layer, an
/// attempt the driver times); to bound a piece of work, use [`scope`].
pub const fn with_deadline<Rt: Runtime, F: Future>(deadline: Deadline, fut: F) -> Scoped<Rt, F> {
    Scoped {
        deadline,
        fut,
        runtime: PhantomData,
    }
}

/// Runs `fut` with `deadline` as `Rt`'s current deadline (or the enclosing one, if that is
/// earlier when it runs), and bounds it by that deadline: at the deadline `fut` is polled no
/// more and the result is [`Error::DeadlineExceeded`] (`fut` is dropped with the scope's
/// future). `fut` is polled first at every wake-up, so
/// an answer that is ready is never thrown away for the timer; the timer is made only when
/// `fut` is first pending. On a runtime whose task can spend its poll's budget
/// ([`Timer::budget_spent`]: tokio), `fut` found pending at the deadline with that budget
/// spent is polled once more, in the task's next poll, before the scope ends.
///
/// ```
/// use deadline_core::runtime::{Runtime, scope_timeout};
/// use deadline_core::virtual_time::ManualRuntime;
/// use deadline_core::{Clock, Error, Timer, ms};
///
/// // A second of work in a 500 ms scope: cut at 500 ms.
/// let t = ManualRuntime::timer();
/// let start = t.now();
/// let work = async { t.sleep_until(t.now() + ms(1_000)).await; 42 };
/// let cut = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(500), work));
/// assert_eq!(cut, Ok(Err(Error::DeadlineExceeded)));
/// assert_eq!(t.now() - start, ms(500));
/// ```
pub fn scope<Rt: Runtime, F: IntoFuture>(deadline: Deadline, fut: F) -> Scope<Rt, F::IntoFuture> {
    Scope {
        fut: with_deadline(deadline, fut.into_future()),
        sleep: None,
        spared: false,
    }
}

/// Runs `f` with `deadline` as `Rt`'s current deadline, or with the enclosing one if that is
/// earlier: the synchronous step of one [`Scoped`] poll.
#[inline]
pub fn enter<Rt: Runtime, R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
    let deadline = Rt::current().map_or(deadline, |outer| outer.min(deadline));
    Rt::enter(deadline, f)
}

/// [`enter`] for one poll of an attempt ([`Runtime::enter_attempt`]): also returns what `f`
/// sent onward ([`note_sent`]), if it noted any.
#[inline]
pub(crate) fn enter_attempt<Rt: Runtime, R>(
    deadline: Deadline,
    f: impl FnOnce() -> R,
) -> (R, Option<Onward>) {
    let deadline = Rt::current().map_or(deadline, |outer| outer.min(deadline));
    Rt::enter_attempt(deadline, f)
}

/// [`scope`] with a deadline `timeout` from now on `Rt`'s clock.
pub fn scope_timeout<Rt: Runtime, F: IntoFuture>(
    timeout: Duration,
    fut: F,
) -> Scope<Rt, F::IntoFuture> {
    scope(Deadline::after(Rt::timer().now(), timeout), fut)
}

/// Runs `fut` with the deadline current *now*, where this is called (or [`Deadline::NEVER`]
/// outside any scope), without bounding it ([`with_deadline`]): for a future about to be
/// spawned, which would not see the deadline otherwise.
pub fn propagate<Rt: Runtime, F: Future>(fut: F) -> Scoped<Rt, F> {
    with_deadline(Rt::current().unwrap_or(Deadline::NEVER), fut)
}

/// Tells `Rt` what a request sent from the current scope told its next service: an adapter
/// calls it when it writes the time left into a request it does not see the answer to (a
/// reqwest request). When the scope is an attempt's ([`InScope`](crate::drive::InScope), as
/// [`Dependency::run`](crate::Dependency::run) runs them), a failure of that attempt that
/// comes at or after [`Sent::running_out_from`] (the next service answering that the time it
/// was told ran out, say, which arrives before the attempt's own end) is the attempt running
/// out of time: counted, retried and answered as a timeout, not as a failed dependency.
/// Outside an attempt, nothing reads it.
///
/// ```
/// use deadline_core::drive::DeadlineOnly;
/// use deadline_core::runtime::note_sent;
/// use deadline_core::virtual_time::ManualRuntime;
/// use deadline_core::wire::{DeadlineHeader, Incoming, Propagation};
/// use deadline_core::{CallError, Clock, Dependency, Error, Policy, Timer, ms};
///
/// static PRICES: Dependency<ManualRuntime, DeadlineOnly> =
///     Dependency::deadline_only(Policy::required("prices").with_cap(ms(100)));
///
/// let call = PRICES.run(|limits| async move {
///     let t = ManualRuntime::timer();
///     // The request carries the attempt's time left less 5 ms: 95 ms.
///     let out = Propagation::DEFAULT
///         .send(limits.deadline(), t.now(), Incoming::NONE, DeadlineHeader::DeadlineMs)
///         .unwrap();
///     note_sent::<ManualRuntime>(&out.sent());
///     // The next service ran out of those 95 ms and answered 504 its 5 ms reply margin
///     // before them: at 90 ms, 10 ms before the attempt's own end.
///     t.sleep_until(t.now() + ms(90)).await;
///     Err::<(), _>("504 Gateway Timeout")
/// });
/// let called = ManualRuntime::block_on(async { call.await }).unwrap();
/// // The attempt ran out of the time it sent: the call timed out, it did not fail.
/// assert_eq!(called, Err(CallError::Library(Error::Timeout { after: ms(90) })));
/// assert_eq!(PRICES.counters().snapshot().timeouts, 1);
/// ```
#[inline]
pub fn note_sent<Rt: KeepsSent>(sent: &Sent) {
    Rt::note_sent(Onward::RunningOutFrom(sent.running_out_from()));
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

pin_project_lite::pin_project! {
    /// A future bounded by its current deadline ([`scope`]): its output, or
    /// [`Error::DeadlineExceeded`] when the deadline (its own, or an earlier enclosing one
    /// read at its first poll) passes first.
    #[must_use = "futures do nothing unless polled"]
    pub struct Scope<Rt: Runtime, F> {
        #[pin]
        fut: Scoped<Rt, F>,
        #[pin]
        sleep: Option<<Rt::Timer as Timer>::Sleep>,
        // Given its one more poll past the deadline with the task's budget spent
        // ([`Timer::budget_spent`]).
        spared: bool,
    }
}

impl<Rt: Runtime, F: Future> Future for Scope<Rt, F> {
    type Output = Result<F::Output, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(output) = this.fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        // The clock, not the wake-up: a timer may still read pending when its task is polled
        // after its instant (tokio's does until its driver has run).
        if !<Rt::Timer as Timer>::SLEEP_READS_CLOCK
            && this.fut.deadline.is_expired(Rt::timer().now())
        {
            return past_deadline::<Rt, _>(this.spared, cx);
        }
        if this.sleep.is_none() {
            let deadline =
                current::<Rt>().map_or(this.fut.deadline, |outer| outer.min(this.fut.deadline));
            this.sleep
                .set(Some(Rt::timer().sleep_until(deadline.instant())));
        }
        match this.sleep.as_pin_mut().map(|sleep| sleep.poll(cx)) {
            Some(Poll::Ready(())) => past_deadline::<Rt, _>(this.spared, cx),
            _ => Poll::Pending,
        }
    }
}

/// Work found pending at or past its scope's deadline: [`Error::DeadlineExceeded`], unless the
/// task's budget is spent ([`Timer::budget_spent`]) and the work has not yet been `spared`
/// once, when the task is woken to poll it again in its next poll (its "pending" may have
/// been the budget's).
fn past_deadline<Rt: Runtime, T>(
    spared: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<Result<T, Error>> {
    if !*spared && Rt::timer().budget_spent() {
        *spared = true;
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    Poll::Ready(Err(Error::DeadlineExceeded))
}
