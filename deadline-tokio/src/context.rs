//! The current deadline, carried by the task: set once per request, inherited by every call
//! made inside it.
//!
//! A handler sets the request's deadline with [`scope`] when the request arrives; code anywhere
//! below it reads the deadline with [`current`] and the time left with [`remaining`], with no
//! parameter threaded through. A nested scope can only shorten the deadline: the inner deadline
//! is the earlier of its own and the outer one, so inner work never outlives outer work.
//!
//! The deadline is a [`tokio::task_local!`]: it belongs to the future given to [`scope`], not to
//! the thread, and a task spawned with [`tokio::spawn`] does not see it. Wrap a spawned future
//! with [`propagate`] to carry the deadline into it.

use core::future::Future;
use core::time::Duration;

use deadline_core::{Clock, Deadline, Decision, Error, Limits, Policy, call_timeout};
use tokio::task::futures::TaskLocalFuture;
use tokio::time::Timeout;

use crate::clock::{TokioClock, to_tokio};

tokio::task_local! {
    static CURRENT: Deadline;
}

/// A future running with a current deadline: what [`scope`] and its relatives return. It is
/// tokio's [`TaskLocalFuture`]: no allocation, and nameable in a struct.
pub type Scoped<F> = TaskLocalFuture<Deadline, F>;

/// Runs `fut` with `deadline` as the current deadline, or with the current one if that is
/// earlier: a nested scope can shorten the deadline, never extend it.
///
/// The outer deadline is read when `scope` is called, so call it from inside the outer scope
/// (as in `scope(d, fut).await`).
///
/// ```
/// use deadline_core::{Clock, Deadline, ms};
/// use deadline_tokio::{TokioClock, current, scope};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let now = TokioClock.now();
/// let request = Deadline::after(now, ms(200));
/// scope(request, async {
///     assert_eq!(current(), Some(request));
///     // An inner scope asking for more time gets the outer deadline.
///     scope(Deadline::after(now, ms(500)), async {
///         assert_eq!(current(), Some(request));
///     })
///     .await;
/// })
/// .await;
/// assert_eq!(current(), None);
/// # }
/// ```
pub fn scope<F: Future>(deadline: Deadline, fut: F) -> Scoped<F> {
    let deadline = current().map_or(deadline, |outer| outer.min(deadline));
    CURRENT.scope(deadline, fut)
}

/// Runs `fut` with a current deadline `timeout` from now, or the current one if that is earlier.
///
/// ```
/// use deadline_core::ms;
/// use deadline_tokio::{remaining, scope_timeout};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// scope_timeout(ms(200), async {
///     tokio::time::sleep(ms(50)).await;
///     assert_eq!(remaining(), Some(ms(150)));
/// })
/// .await;
/// # }
/// ```
pub fn scope_timeout<F: Future>(timeout: Duration, fut: F) -> Scoped<F> {
    scope(Deadline::after(TokioClock.now(), timeout), fut)
}

/// Runs `fut` with the current deadline, if there is one, else with [`Deadline::NEVER`]: for a
/// future about to be spawned, which would not see the current deadline otherwise.
///
/// ```
/// use deadline_core::ms;
/// use deadline_tokio::{propagate, remaining, scope_timeout};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// scope_timeout(ms(200), async {
///     let inner = tokio::spawn(propagate(async { remaining() }));
///     assert_eq!(inner.await.unwrap(), Some(ms(200)));
/// })
/// .await;
/// # }
/// ```
pub fn propagate<F: Future>(fut: F) -> Scoped<F> {
    CURRENT.scope(current().unwrap_or(Deadline::NEVER), fut)
}

/// The current deadline, or `None` outside any [`scope`].
#[must_use]
pub fn current() -> Option<Deadline> {
    CURRENT.try_with(|d| *d).ok()
}

/// The current deadline, or [`Deadline::NEVER`] outside any [`scope`].
#[must_use]
pub fn current_or_never() -> Deadline {
    current().unwrap_or(Deadline::NEVER)
}

/// The time left until the current deadline (zero once it has passed), or `None` outside any
/// [`scope`].
#[must_use]
pub fn remaining() -> Option<Duration> {
    current().map(|d| d.remaining(TokioClock.now()))
}

/// Whether the current deadline has passed (`false` outside any [`scope`]).
#[must_use]
pub fn is_expired() -> bool {
    current().is_some_and(|d| d.is_expired(TokioClock.now()))
}

/// The decision for a call to `policy`'s dependency starting now, under the current deadline,
/// keeping `reserve` for the work after it: see [`call_timeout`].
///
/// ```
/// use deadline_core::{Decision, Policy, ms};
/// use deadline_tokio::{decide, scope_timeout};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let c = Policy::optional("C", ms(60), ms(25));
/// scope_timeout(ms(200), async {
///     tokio::time::sleep(ms(156)).await;
///     // 200 - 156 - 20 = 24 ms, under C's 25 ms floor.
///     assert!(matches!(decide(&c, ms(20)), Decision::Skip(_)));
/// })
/// .await;
/// # }
/// ```
pub fn decide(policy: &Policy, reserve: Duration) -> Decision {
    call_timeout(policy, current_or_never(), reserve, TokioClock.now())
}

/// A nested call under `limits`: `fut` runs with the call's deadline as the current deadline
/// (so calls inside it inherit the shorter deadline) and is dropped when `limits.until` comes.
///
/// The result is [`Error::Timeout`] when the time ran out. No allocation: the future returned
/// holds `fut`, the scope and tokio's timer.
///
/// ```
/// use deadline_core::{Error, Policy, ms};
/// use deadline_tokio::{decide, remaining, scope_timeout, within};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let b = Policy::required("B", ms(110), ms(30));
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
        inner: tokio::time::timeout_at(to_tokio(limits.until), scope(limits.deadline(), fut)),
        after: limits.timeout,
    }
}

pin_project_lite::pin_project! {
    /// The future returned by [`within`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Within<F> {
        #[pin]
        inner: Timeout<Scoped<F>>,
        after: Duration,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Result<F::Output, Error>;

    fn poll(
        self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<Self::Output> {
        let this = self.project();
        let after = *this.after;
        this.inner
            .poll(cx)
            .map(|r| r.map_err(|_| Error::Timeout { after }))
    }
}
