//! [`ManualTimer`]: a virtual-time [`Timer`] with a tiny executor, for tests and simulations.

use core::fmt;
use core::future::Future;
use core::pin::{Pin, pin};
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use portable_atomic::{AtomicU64, Ordering};

use crate::manual_clock::ManualClock;
use crate::time::{Clock, Instant};
use crate::timer::Timer;

/// A [`Timer`] on virtual time: its sleeps complete when its [`ManualClock`] reaches them,
/// and [`run`](ManualTimer::run) drives a future to completion by moving the clock straight
/// to the earliest pending sleep whenever the future is stuck. No wall-clock time passes, so a
/// test of a 2-second budget runs in microseconds and gives the same answer every time.
///
/// The timer is used by reference: `&ManualTimer` implements [`Timer`], and its sleeps
/// borrow it. It can be made to wake late ([`with_lateness`](ManualTimer::with_lateness)),
/// like a busy runtime, to check that code trusts the clock rather than the wake-up.
///
/// ```
/// use deadline_core::virtual_time::ManualTimer;
/// use deadline_core::{Clock, Instant, Timer, ms};
///
/// let timer = ManualTimer::new();
/// let t = &timer;
/// let out = timer.run(async move {
///     t.sleep_until(Instant::from_millis(30)).await;
///     t.now()
/// });
/// assert_eq!(out, Ok(Instant::from_millis(30)));
/// ```
#[derive(Debug, Default)]
pub struct ManualTimer {
    clock: ManualClock,
    /// The earliest instant a sleep polled since the last step is waiting for.
    next_wake: AtomicU64,
    /// How late every wake-up is.
    lateness: Duration,
}

impl ManualTimer {
    /// A timer whose clock starts at its origin.
    #[must_use]
    pub const fn new() -> Self {
        ManualTimer::starting_at(Instant::ZERO)
    }

    /// A timer whose clock starts at `start`.
    #[must_use]
    pub const fn starting_at(start: Instant) -> Self {
        ManualTimer {
            clock: ManualClock::starting_at(start),
            next_wake: AtomicU64::new(u64::MAX),
            lateness: Duration::ZERO,
        }
    }

    /// The same timer, waking every sleep `lateness` after its instant (a busy runtime).
    #[must_use]
    pub const fn with_lateness(mut self, lateness: Duration) -> Self {
        self.lateness = lateness;
        self
    }

    /// The timer's clock.
    #[must_use]
    pub const fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Moves the clock forward by `d` and returns the new instant.
    pub fn advance(&self, d: Duration) -> Instant {
        self.clock.advance(d)
    }

    /// Runs `future` to completion on virtual time and returns its output.
    ///
    /// It polls the future; whenever the future is pending, it moves the clock to the
    /// earliest instant that a [`ManualSleep`] polled in that step waits for (plus the
    /// lateness) and polls again. The waker does nothing: every step polls the whole future,
    /// so futures that wait on something other than this timer's sleeps (a channel, another
    /// runtime's timer) are not supported.
    ///
    /// # Errors
    ///
    /// [`Stalled`] if the future is pending and waits for no sleep of this timer: it would
    /// never complete.
    pub fn run<F: Future>(&self, future: F) -> Result<F::Output, Stalled> {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            self.next_wake.store(u64::MAX, Ordering::Release);
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return Ok(out);
            }
            let wake = Instant::from_micros(self.next_wake.load(Ordering::Acquire));
            let now = self.clock.now();
            if wake == Instant::MAX || wake <= now {
                return Err(Stalled { at: now });
            }
            self.clock.set(wake.saturating_add(self.lateness));
        }
    }

    /// Runs `future` on virtual time inside another executor (tokio, async-std, smol,
    /// embassy): the returned future polls `future`, and whenever it is pending waiting for
    /// a sleep of this timer, moves the clock straight to the earliest such sleep (plus the
    /// lateness) and asks the executor to poll it again at once. No wall-clock time passes.
    ///
    /// A future pending on something else (a channel, I/O, another timer) is left to its own
    /// waker, as any future is; unlike [`run`](ManualTimer::run), nothing reports it stalled.
    ///
    /// ```
    /// use core::pin::pin;
    /// use core::task::{Context, Poll, Waker};
    /// use deadline_core::virtual_time::ManualTimer;
    /// use deadline_core::{Clock, Instant, Timer};
    ///
    /// let timer = ManualTimer::new();
    /// let t = &timer;
    /// let mut future = pin!(timer.advancing(async move {
    ///     t.sleep_until(Instant::from_millis(30)).await;
    ///     t.now()
    /// }));
    /// // The simplest executor: poll until ready (a runtime's `block_on` does better).
    /// let mut cx = Context::from_waker(Waker::noop());
    /// let out = loop {
    ///     if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
    ///         break out;
    ///     }
    /// };
    /// assert_eq!(out, Instant::from_millis(30));
    /// ```
    pub async fn advancing<F: Future>(&self, future: F) -> F::Output {
        let mut future = pin!(future);
        core::future::poll_fn(move |cx| {
            self.next_wake.store(u64::MAX, Ordering::Release);
            if let Poll::Ready(out) = future.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
            let wake = Instant::from_micros(self.next_wake.load(Ordering::Acquire));
            if wake != Instant::MAX && wake > self.clock.now() {
                self.clock.set(wake.saturating_add(self.lateness));
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        })
        .await
    }
}

impl Clock for ManualTimer {
    fn now(&self) -> Instant {
        self.clock.now()
    }
}

impl<'a> Timer for &'a ManualTimer {
    type Sleep = ManualSleep<'a>;
    const SLEEP_READS_CLOCK: bool = true;

    fn sleep_until(&self, at: Instant) -> ManualSleep<'a> {
        ManualSleep { timer: self, at }
    }
}

/// The sleep of a [`ManualTimer`]: ready once the timer's clock reads its instant.
#[derive(Debug)]
#[must_use = "a sleep does nothing unless awaited"]
pub struct ManualSleep<'a> {
    timer: &'a ManualTimer,
    at: Instant,
}

impl ManualSleep<'_> {
    /// The instant the sleep completes at.
    #[must_use]
    pub const fn deadline(&self) -> Instant {
        self.at
    }
}

impl Future for ManualSleep<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.timer.clock.now() >= self.at {
            return Poll::Ready(());
        }
        self.timer
            .next_wake
            .fetch_min(self.at.as_micros(), Ordering::AcqRel);
        Poll::Pending
    }
}

/// [`ManualTimer::run`] found the future pending with no sleep to wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Stalled {
    /// The clock's reading when the future stalled.
    pub at: Instant,
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the future is pending with no sleep to wait for (at {} us)",
            self.at.as_micros()
        )
    }
}

impl core::error::Error for Stalled {}
