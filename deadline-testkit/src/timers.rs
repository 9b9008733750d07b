//! Timer wrappers for the suite: [`Late`] (a busy runtime that wakes late) and [`Stepper`]
//! (which finds the next wake-up, so [`run_virtual`] can move a virtual clock straight to it).

use core::future::{Future, poll_fn};
use core::pin::{Pin, pin};
use core::sync::atomic::{AtomicU64, Ordering};
use core::task::{Context, Poll};
use core::time::Duration;

use deadline_core::{Clock, Instant, Timer};

/// A timer whose every sleep ends `by` after its instant, like a busy runtime's: for checking
/// that the driver trusts the clock, not the wake-up.
#[derive(Clone, Copy, Debug)]
pub struct Late<T> {
    timer: T,
    by: Duration,
}

impl<T> Late<T> {
    /// `timer`, waking every sleep `by` late.
    pub const fn new(timer: T, by: Duration) -> Self {
        Late { timer, by }
    }
}

impl<T: Clock> Clock for Late<T> {
    fn now(&self) -> Instant {
        self.timer.now()
    }
}

impl<T: Timer> Timer for Late<T> {
    type Sleep = T::Sleep;

    fn sleep_until(&self, at: Instant) -> T::Sleep {
        self.timer.sleep_until(at.saturating_add(self.by))
    }

    fn budget_spent(&self) -> bool {
        self.timer.budget_spent()
    }
}

/// Wraps a timer and notes the earliest instant any of its pending sleeps waits for, so that
/// a test harness can move a virtual clock (a [`ManualTimer`](deadline_core::virtual_time::ManualTimer)'s,
/// embassy's mock driver) straight to the next wake-up. See [`run_virtual`].
#[derive(Debug)]
pub struct Stepper<T> {
    timer: T,
    next: AtomicU64,
}

impl<T> Stepper<T> {
    /// Wraps `timer`.
    pub const fn new(timer: T) -> Self {
        Stepper {
            timer,
            next: AtomicU64::new(u64::MAX),
        }
    }

    /// The wrapped timer.
    pub const fn inner(&self) -> &T {
        &self.timer
    }
}

impl<T: Clock> Clock for Stepper<T> {
    fn now(&self) -> Instant {
        self.timer.now()
    }
}

impl<'a, T: Timer> Timer for &'a Stepper<T> {
    type Sleep = Stepped<'a, T::Sleep>;

    fn sleep_until(&self, at: Instant) -> Self::Sleep {
        Stepped {
            next: &self.next,
            at,
            sleep: self.timer.sleep_until(at),
        }
    }

    fn budget_spent(&self) -> bool {
        self.timer.budget_spent()
    }
}

pin_project_lite::pin_project! {
    /// The sleep of a [`Stepper`]: the wrapped timer's sleep, noting its instant while
    /// pending.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Stepped<'a, S> {
        next: &'a AtomicU64,
        at: Instant,
        #[pin]
        sleep: S,
    }
}

impl<S: Future<Output = ()>> Future for Stepped<'_, S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        match this.sleep.poll(cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => {
                this.next.fetch_min(this.at.as_micros(), Ordering::SeqCst);
                Poll::Pending
            }
        }
    }
}

/// Runs `fut` on the current executor in virtual time: whenever it is pending, moves the
/// clock (with `advance`, given the instant to move to) to the earliest instant a sleep of
/// `stepper` waits for, and wakes itself so the executor polls it again.
///
/// With a [`ManualTimer`](deadline_core::virtual_time::ManualTimer) inside the stepper, this runs the
/// core's virtual-time timer on any executor (async-std's, smol's); with embassy's timer
/// inside, `advance` moves embassy's mock driver.
///
/// # Panics
///
/// If `fut` is pending and no sleep of `stepper` is: it would never complete.
pub async fn run_virtual<T, F>(
    stepper: &Stepper<T>,
    fut: F,
    mut advance: impl FnMut(Instant),
) -> F::Output
where
    T: Timer,
    F: Future,
{
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        stepper.next.store(u64::MAX, Ordering::SeqCst);
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        let next = stepper.next.load(Ordering::SeqCst);
        assert!(
            next != u64::MAX,
            "the future is pending and waits for no sleep: it would never complete"
        );
        advance(Instant::from_micros(next));
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}
