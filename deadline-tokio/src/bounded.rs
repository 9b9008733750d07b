//! The one way this crate bounds a future, and a response body, by a deadline.
//!
//! Both follow tokio's own `timeout`: the work is polled first, so an answer that is ready is
//! never thrown away for a timer, even at the deadline; the timer is armed only when the work
//! is first pending (tokio's `timeout` builds its `Sleep` at once and arms it then; here the
//! `Sleep` itself is made then); and the timer is read even when the task's cooperative
//! budget is spent (tokio's timer answers "pending" with no budget left, without arming
//! itself: work that spends the budget at every poll would never be ended). tokio's `timeout`
//! reads it so only when its own future spent the budget; these read it whoever spent it.
//!
//! With the budget spent, though, the work's "pending" may be the budget's: a tokio resource
//! reads "pending" then, whatever it holds. So work found pending at or past its bound with
//! no budget left is given one more poll, in the task's next poll (which starts with a fresh
//! budget, unless other work of the task spends it first), and ended only if it is pending
//! again then, or found so again with no budget. Work that spends the budget at every poll is
//! ended one poll later than work that waits, and an answer a spent budget hid is kept.
//!
//! The clock, not the timer's wake-up, says when the bound has passed. Tokio's timer reads
//! "pending" until its driver has fired it, and on a loaded runtime a task can be polled
//! after its bound and before that: a request's future first polled long after it arrived,
//! or woken by its socket. A later timer around it, checked in the same poll, could then
//! answer first. So every poll that finds the work pending reads the clock, and work still
//! pending at or after its bound ends there (or at the next poll, when the budget was spent:
//! above).

use core::future::Future;
use core::pin::{Pin, pin};
use core::task::{Context, Poll};

use deadline_core::{Instant, Timer};
use tokio::time::Sleep;

use crate::clock::TokioTimer;

/// The bound passed before the work was done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Elapsed;

pin_project_lite::pin_project! {
    /// A future bounded by an instant: its output, or [`Elapsed`] once the instant has come
    /// while it was still pending.
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct Bounded<F> {
        #[pin]
        fut: F,
        #[pin]
        sleep: Option<Sleep>,
        until: Instant,
        // Given its one more poll past the bound (see the module's documentation).
        spared: bool,
    }
}

impl<F> Bounded<F> {
    /// `fut`, bounded by `until`.
    #[inline]
    pub(crate) const fn new(until: Instant, fut: F) -> Self {
        Bounded {
            fut,
            sleep: None,
            until,
            spared: false,
        }
    }

    /// Moves the bound to `until` if that is earlier.
    #[cfg(feature = "tower")]
    pub(crate) fn shorten(self: Pin<&mut Self>, until: Instant) {
        let mut this = self.project();
        if until < *this.until {
            *this.until = until;
            if let Some(sleep) = this.sleep.as_mut().as_pin_mut() {
                sleep.reset(crate::clock::to_tokio(until));
            }
        }
    }
}

impl<F: Future> Bounded<F> {
    /// As [`Future::poll`], the bound moved first to `enclosing`'s instant if that is earlier:
    /// read once, when the work is first pending and its timer is made.
    #[inline]
    pub(crate) fn poll_within(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        enclosing: impl FnOnce() -> Option<Instant>,
    ) -> Poll<Result<F::Output, Elapsed>> {
        let this = self.project();
        if let Poll::Ready(output) = this.fut.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        if this.sleep.is_none() {
            if let Some(outer) = enclosing() {
                *this.until = (*this.until).min(outer);
            }
        }
        poll_timer(this.sleep, *this.until, this.spared, cx).map(Err)
    }
}

impl<F: Future> Future for Bounded<F> {
    type Output = Result<F::Output, Elapsed>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_within(cx, || None)
    }
}

/// The timer of work that is pending: made at the first call, then polled. One copy for
/// every kind of work.
pub(crate) fn poll_timer(
    mut sleep: Pin<&mut Option<Sleep>>,
    until: Instant,
    spared: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<Elapsed> {
    if sleep.is_none() {
        sleep.set(Some(TokioTimer.sleep_until(until)));
    }
    match sleep.as_pin_mut() {
        Some(sleep) => poll_sleep(sleep, spared, cx),
        None => Poll::Ready(Elapsed),
    }
}

/// [`poll_timer`] with the timer on the heap, for work that is rarely pending (a response
/// body, nearly always complete when it is answered): the work stays small to move and to box.
#[cfg(feature = "tower")]
pub(crate) fn poll_boxed_timer(
    sleep: &mut Option<Pin<Box<Sleep>>>,
    until: Instant,
    spared: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<Elapsed> {
    let sleep = sleep.get_or_insert_with(|| Box::pin(TokioTimer.sleep_until(until)));
    poll_sleep(sleep.as_mut(), spared, cx)
}

/// Polls the timer of work that is pending. The clock is read first: once it has reached the
/// timer's instant the bound has passed, fired or not. Then the timer, even when the task has
/// no cooperative budget left (used up by the work, or before it): tokio's timer would answer
/// "pending" without arming itself, and work that spends the budget at every poll would never
/// be ended; read this way, the timer wakes the task at the bound. Past the bound,
/// [`past_bound`] decides.
fn poll_sleep(sleep: Pin<&mut Sleep>, spared: &mut bool, cx: &mut Context<'_>) -> Poll<Elapsed> {
    if tokio::time::Instant::now() >= sleep.deadline() {
        return past_bound(spared, cx);
    }
    let elapsed = if tokio::task::coop::has_budget_remaining() {
        sleep.poll(cx).is_ready()
    } else {
        pin!(tokio::task::unconstrained(sleep)).poll(cx).is_ready()
    };
    if elapsed {
        past_bound(spared, cx)
    } else {
        Poll::Pending
    }
}

/// Work found pending at or past its bound: ended, unless the task has no cooperative budget
/// left and the work has not yet been `spared` once, when the task is woken to poll it again
/// in its next poll (its "pending" may have been the budget's). Only this path reads the
/// budget for it: the work's own polls before the bound read nothing more.
pub(crate) fn past_bound(spared: &mut bool, cx: &mut Context<'_>) -> Poll<Elapsed> {
    if !*spared && !tokio::task::coop::has_budget_remaining() {
        *spared = true;
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    Poll::Ready(Elapsed)
}
