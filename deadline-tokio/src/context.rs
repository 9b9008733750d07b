//! The current deadline, carried by the task: set once per request, inherited by every call
//! made inside it.
//!
//! A handler sets the request's deadline with [`scope`] when the request arrives; code anywhere
//! below it reads the deadline with [`current`] and the time left with [`remaining`], with no
//! parameter threaded through. A nested scope can only shorten the deadline: the inner deadline
//! is the earlier of its own and the outer one, so inner work never outlives outer work.
//!
//! The deadline belongs to the future given to [`scope`], not to the thread or the task: it is
//! set only while that future is polled (as a [`tokio::task_local!`] is), so a task spawned with
//! [`tokio::spawn`] does not see it. Wrap a spawned future with [`propagate`] to carry the
//! deadline into it.

use core::future::{Future, IntoFuture};
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use deadline_core::call::{Decision, Limits, call_timeout};
use deadline_core::runtime::{KeepsSent, Onward, Runtime, ThreadDeadline};
use deadline_core::{Clock, Deadline, Error, Policy};
use deadline_std::Entropy;

use crate::bounded::Bounded;
use crate::clock::{TokioClock, TokioTimer};

/// Runs `fut` under `deadline` and bounds it: `fut` reads `deadline` as the current
/// deadline (or the enclosing one, if that is earlier: a nested scope can shorten the
/// deadline, never extend it), and at that deadline it is polled no more (but see the
/// cooperative budget below) and the result is [`Error::DeadlineExceeded`] (`fut` itself is
/// dropped with the scope's future, at once when it is awaited; kept in a `select!` over
/// `&mut`, when that future is). Takes anything that can be awaited
/// ([`IntoFuture`](core::future::IntoFuture)), a `Dependency::run` call included.
///
/// `fut` is polled first at every wake-up, as tokio's `timeout` polls its future: an answer
/// that is ready is never thrown away for the timer. The timer is made only when `fut` is
/// first pending, and it is read even when `fut` used up the task's cooperative budget. Found
/// pending at the deadline with that budget spent (a tokio resource then reads pending,
/// whatever it holds), `fut` is polled once more, in the task's next poll, before it is cut.
///
/// The enclosing deadline is read when the future runs, not when `scope` is called, so the
/// rule holds whatever the order of construction: a future built outside a request's scope
/// sees the earliest of its own deadline and every deadline around it ([`current`] reads it
/// at each poll), and is cut at that earliest one. The cut takes the enclosing deadline once,
/// when its timer is made at `fut`'s first pending poll: a scope polled once outside a
/// deadline and then moved under one keeps its own instant for the cut (the work inside still
/// reads the earlier deadline).
///
/// ```
/// use deadline_core::{Clock, Deadline, Error, ms};
/// use deadline_tokio::{current, scope};
/// use deadline_tokio::time::TokioClock;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let now = TokioClock.now();
/// let request = Deadline::after(now, ms(200));
/// let answer = scope(request, async {
///     assert_eq!(current(), Some(request));
///     // An inner scope asking for more time gets the outer deadline.
///     scope(Deadline::after(now, ms(500)), async { current() }).await
/// })
/// .await;
/// assert_eq!(answer, Ok(Ok(Some(request))));
///
/// // A second of work under a 200 ms deadline: cut at 200 ms.
/// let slow = scope(Deadline::after(TokioClock.now(), ms(200)), tokio::time::sleep(ms(1_000)));
/// assert_eq!(slow.await, Err(Error::DeadlineExceeded));
/// # }
/// ```
pub fn scope<F: IntoFuture>(deadline: Deadline, fut: F) -> Scope<F::IntoFuture> {
    Scope {
        bounded: Bounded::new(
            deadline.instant(),
            with_deadline(deadline, fut.into_future()),
        ),
    }
}

/// [`scope`] with a deadline `timeout` from now: the one call that sets a request's
/// deadline and bounds what runs under it.
///
/// ```
/// use deadline_core::{Error, ms};
/// use deadline_tokio::{remaining, scope_timeout};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let left = scope_timeout(ms(200), async {
///     tokio::time::sleep(ms(50)).await;
///     remaining()
/// })
/// .await;
/// assert_eq!(left, Ok(Some(ms(150))));
///
/// // A one-second sleep inside 500 ms is cut at 500 ms.
/// let cut = scope_timeout(ms(500), tokio::time::sleep(ms(1_000))).await;
/// assert_eq!(cut, Err(Error::DeadlineExceeded));
/// # }
/// ```
pub fn scope_timeout<F: IntoFuture>(timeout: Duration, fut: F) -> Scope<F::IntoFuture> {
    scope(Deadline::after(TokioClock.now(), timeout), fut)
}

pin_project_lite::pin_project! {
    /// The future of [`scope`] and [`scope_timeout`]: the work, with the deadline current
    /// while it runs, or [`Error::DeadlineExceeded`] once the deadline has passed.
    #[must_use = "futures do nothing unless polled"]
    pub struct Scope<F> {
        #[pin]
        bounded: Bounded<Scoped<F>>,
    }
}

impl<F: Future> Future for Scope<F> {
    type Output = Result<F::Output, Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Bounded by the enclosing deadline too, if that is earlier (read here, outside the
        // scope's own): a scope inside a task that carries a shorter deadline
        // ([`propagate`]) is cut at that one, the deadline its work reads.
        self.project()
            .bounded
            .poll_within(cx, || current().map(|d| d.instant()))
            .map(|out| out.map_err(|_elapsed| Error::DeadlineExceeded))
    }
}

/// Runs `fut` with `deadline` as the current deadline (or the enclosing one, if that is
/// earlier), **without bounding it**: what runs inside reads the deadline, and nothing is
/// dropped when it passes. For work that bounds itself; to bound a piece of work, use
/// [`scope`].
pub fn with_deadline<F: Future>(deadline: Deadline, fut: F) -> Scoped<F> {
    deadline_core::runtime::with_deadline::<Tokio, F>(deadline, fut)
}

/// Runs `fut` with the deadline current *now*, where `propagate` is called, without bounding
/// it ([`with_deadline`]): for a future about to be spawned, which would not see the current
/// deadline otherwise. Awaited inside a scope with an earlier deadline, it sees that one.
///
/// It does not bound the task, on purpose: a producer spawned to feed a streamed answer must
/// outlive the answer's cut at the deadline, or its channel would close first and the
/// stream end as if complete (gRPC `OK`), not with the deadline's answer. Work that must end
/// at the deadline is spawned in a scope: `tokio::spawn(scope(deadline, work))`, with the
/// deadline read by [`current`] before.
///
/// ```
/// use deadline_core::ms;
/// use deadline_tokio::{propagate, remaining, scope_timeout};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let left = scope_timeout(ms(200), async {
///     tokio::spawn(propagate(async { remaining() })).await.unwrap()
/// })
/// .await;
/// assert_eq!(left, Ok(Some(ms(200))));
/// # }
/// ```
pub fn propagate<F: Future>(fut: F) -> Scoped<F> {
    with_deadline(current_or_never(), fut)
}

/// `fut`, bounded by the current deadline if there is one (read when it is first polled,
/// where its scope is): its output, or [`Error::DeadlineExceeded`] once the deadline has
/// passed. For the integrations' own waits (a pool's, a query's), which must end at the
/// deadline with an answer rather than be dropped with the scope around them.
#[cfg(any(feature = "postgres", feature = "sqlx"))]
pub(crate) async fn within_current<F: Future>(fut: F) -> Result<F::Output, Error> {
    match current() {
        Some(deadline) => Bounded::new(deadline.instant(), fut)
            .await
            .map_err(|_elapsed| Error::DeadlineExceeded),
        None => Ok(fut.await),
    }
}

/// A future running with a current deadline it does not enforce: what [`with_deadline`] and
/// [`propagate`] return (the core's [`Scoped`](deadline_core::runtime::Scoped) on [`Tokio`]).
pub type Scoped<F> = deadline_core::runtime::Scoped<Tokio, F>;

/// Runs `f` with `deadline` as the current deadline, or the enclosing one if that is earlier:
/// one synchronous step of a [`Scoped`] poll, for the layers' bodies.
#[cfg(feature = "tower")]
pub(crate) fn in_scope<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
    deadline_core::runtime::enter::<Tokio, R>(deadline, f)
}

/// tokio as the core's [`Runtime`]: [`TokioTimer`], the default random source [`Entropy`],
/// and the current deadline ([`scope`]).
///
/// The current deadline is kept where a [`tokio::task_local!`] keeps its value, in a
/// thread-local set only while a scoped future is polled and put back after it (also on
/// unwind): the core's [`ThreadDeadline`], whose constant-initialised `Cell` is read and set in
/// a few instructions (a task-local's `RefCell` and lazy slot cost about fifty per scope
/// entry). Because every poll sets it, it follows the future across the worker threads of the
/// multi-threaded runtime, and a spawned task does not inherit it. It keeps what an attempt
/// sends onward ([`KeepsSent`]: reqwest's `.time_left()` tells it), so a next service's
/// answer that the time sent ran out is the attempt's timeout. Name it to build a
/// [`Dependency`](crate::Dependency) for tokio, or use that alias.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tokio;

impl Runtime for Tokio {
    type Timer = TokioTimer;
    type Rng = Entropy;
    const KEEPS_SENT: bool = true;

    #[inline]
    fn timer() -> TokioTimer {
        TokioTimer
    }

    #[inline]
    fn rng() -> Entropy {
        Entropy
    }

    #[inline]
    fn current() -> Option<Deadline> {
        ThreadDeadline::current()
    }

    #[inline]
    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        ThreadDeadline::enter(deadline, f)
    }

    #[inline]
    fn enter_attempt<R>(deadline: Deadline, f: impl FnOnce() -> R) -> (R, Option<Onward>) {
        ThreadDeadline::enter_attempt(deadline, f)
    }
}

impl KeepsSent for Tokio {
    #[inline]
    fn note_sent(onward: Onward) {
        ThreadDeadline::note_sent(onward);
    }
}

/// The current deadline, or `None` outside any [`scope`] (and inside one with
/// [`Deadline::NEVER`], which bounds nothing).
#[must_use]
#[inline]
pub fn current() -> Option<Deadline> {
    deadline_core::runtime::current::<Tokio>()
}

/// The current deadline, or [`Deadline::NEVER`] outside any [`scope`].
#[must_use]
#[inline]
pub(crate) fn current_or_never() -> Deadline {
    current().unwrap_or(Deadline::NEVER)
}

/// The time left until the current deadline (zero once it has passed), or `None` outside any
/// [`scope`].
#[must_use]
#[inline]
pub fn remaining() -> Option<Duration> {
    current().map(|d| d.remaining(TokioClock.now()))
}

/// The decision for a call to `policy`'s dependency starting now, under the current deadline,
/// keeping `reserve` for the work after it: see [`call_timeout`](deadline_core::call::call_timeout).
///
/// ```
/// use deadline_core::{ms, Policy};
/// use deadline_core::call::Decision;
/// use deadline_tokio::scope_timeout;
/// use deadline_tokio::low_level::decide;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
/// scope_timeout(ms(200), async {
///     tokio::time::sleep(ms(156)).await;
///     // 200 - 156 - 20 = 24 ms, under C's 25 ms floor.
///     assert!(matches!(decide(&c, ms(20)), Decision::Skip(_)));
/// })
/// .await;
/// # }
/// ```
#[inline]
pub fn decide(policy: &Policy, reserve: Duration) -> Decision {
    call_timeout(policy, current_or_never(), reserve, TokioClock.now())
}

/// A nested call under `limits`: `fut` runs with the call's deadline as the current deadline
/// (so calls inside it inherit the shorter deadline) and is dropped when `limits.until()` comes.
///
/// The result is [`Error::Timeout`] when the time ran out. No allocation: the future returned
/// holds `fut`, the scope and tokio's timer.
///
/// ```
/// use deadline_core::{Error, Policy, ms};
/// use deadline_tokio::{remaining, scope_timeout};
/// use deadline_tokio::low_level::{decide, within};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
/// scope_timeout(ms(200), async {
///     let limits = decide(&b, ms(20)).limits().unwrap();
///     // Inside, the deadline is the call's: 110 ms, not the request's 200.
///     assert_eq!(within(limits, async { remaining() }).await, Ok(Some(ms(110))));
///     // A call slower than its timeout is cut off (and dropped) at the timeout.
///     let slow = within(limits, tokio::time::sleep(ms(500))).await;
///     assert_eq!(slow, Err(Error::Timeout { after: ms(110) }));
/// })
/// .await;
/// # }
/// ```
pub fn within<F: Future>(limits: Limits, fut: F) -> Within<F> {
    Within {
        fut: Bounded::new(limits.until(), with_deadline(limits.deadline(), fut)),
        after: limits.timeout(),
    }
}

pin_project_lite::pin_project! {
    /// The future returned by [`within`]. Its timer is made only when the future is first
    /// pending: a call that answers at its first poll never touches tokio's timer.
    #[must_use = "futures do nothing unless polled"]
    pub struct Within<F> {
        #[pin]
        fut: Bounded<Scoped<F>>,
        after: Duration,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Result<F::Output, Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let after = *this.after;
        this.fut
            .poll(cx)
            .map(|out| out.map_err(|_elapsed| Error::Timeout { after }))
    }
}
