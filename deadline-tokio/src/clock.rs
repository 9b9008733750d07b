//! [`TokioClock`] and [`TokioTimer`]: the core's clock and timer on tokio's time.
//!
//! Both read [`tokio::time::Instant::now`], so a runtime whose clock is paused
//! (`#[tokio::test(start_paused = true)]`, [`tokio::time::pause`]) drives them: the library then
//! runs in virtual time, with no real waiting.
//!
//! # One time line
//!
//! A core [`Instant`] counts microseconds from an origin. Every std-based adapter shares one:
//! `deadline-std`'s process-wide origin ([`deadline_std::from_std`]). Outside paused test
//! time a tokio instant *is* a std instant, so an instant, a deadline and the time left read
//! the same on [`TokioClock`] and on `deadline-std`'s `StdClock`: a deadline set by a tokio
//! handler crosses into a `spawn_blocking` helper that uses `deadline-std`'s blocking driver
//! or socket limits with the same time left.
//!
//! That origin lies one day before the real (std) time at which it was first needed. The day
//! is a margin for paused clocks too: a paused runtime's clock starts at the real time the
//! runtime was built and moves only when told, so it can read earlier than the real time at
//! which the origin was taken, but not earlier by more than the runtime's age. Instants
//! before the origin read as the origin: the conversion saturates, it never panics.

use core::time::Duration;

use deadline_core::{Clock, Instant, Timer};
use tokio::time::{Instant as TokioInstant, Sleep};

/// Converts a tokio instant to a core [`Instant`] (whole microseconds since the process-wide
/// origin that every std-based adapter shares, rounded down; an instant before the origin
/// gives [`Instant::ZERO`]).
///
/// ```
/// use deadline_tokio::time::{from_tokio, to_tokio};
///
/// let now = tokio::time::Instant::now();
/// let core = from_tokio(now);
/// // Round trip: equal up to the sub-microsecond part that the core drops.
/// assert!(to_tokio(core) <= now);
/// assert!(now - to_tokio(core) < std::time::Duration::from_micros(1));
/// ```
#[must_use]
#[inline]
pub fn from_tokio(t: TokioInstant) -> Instant {
    deadline_std::from_std(t.into_std())
}

/// Converts a core [`Instant`] to a tokio instant, or `None` if the platform's instant cannot
/// represent it (such as [`Instant::MAX`] on some platforms).
#[must_use]
#[inline]
pub fn checked_to_tokio(t: Instant) -> Option<TokioInstant> {
    deadline_std::checked_to_std(t).map(TokioInstant::from_std)
}

/// Converts a core [`Instant`] to a tokio instant. An instant too far in the future for the
/// platform gives tokio's own "far future" (about 30 years from now), as [`tokio::time::sleep`]
/// does for an overlong duration.
#[must_use]
#[inline]
pub fn to_tokio(t: Instant) -> TokioInstant {
    checked_to_tokio(t).unwrap_or_else(far_future)
}

/// Tokio's stand-in for "never": 30 years from now (the same as its private `far_future`).
fn far_future() -> TokioInstant {
    const THIRTY_YEARS: Duration = Duration::from_secs(86_400 * 365 * 30);
    let now = TokioInstant::now();
    now.checked_add(THIRTY_YEARS).unwrap_or(now)
}

/// The core's [`Clock`] on [`tokio::time::Instant`]: paused test time drives it.
///
/// ```
/// use deadline_core::{Clock, ms};
/// use deadline_tokio::time::TokioClock;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let before = TokioClock.now();
/// tokio::time::advance(ms(50)).await;
/// assert_eq!(TokioClock.now() - before, ms(50));
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TokioClock;

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Instant {
        from_tokio(TokioInstant::now())
    }
}

/// The core's [`Timer`] on [`tokio::time::sleep_until`]; its clock is [`TokioClock`].
///
/// The sleep is tokio's own [`Sleep`]: owned, so a driver keeps it in its own state, and
/// dropping it cancels the timer. It must be polled inside a tokio runtime with time enabled.
///
/// ```
/// use deadline_core::{Clock, Timer, ms};
/// use deadline_tokio::time::TokioTimer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = TokioTimer.now();
/// TokioTimer.sleep_until(start + ms(110)).await;
/// assert_eq!(TokioTimer.now() - start, ms(110));
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TokioTimer;

impl Clock for TokioTimer {
    #[inline]
    fn now(&self) -> Instant {
        TokioClock.now()
    }
}

impl Timer for TokioTimer {
    type Sleep = Sleep;

    #[inline]
    fn sleep_until(&self, at: Instant) -> Sleep {
        tokio::time::sleep_until(to_tokio(at))
    }

    /// Whether the task has used up its cooperative budget
    /// ([`tokio::task::coop::has_budget_remaining`]): tokio's resources then read pending,
    /// whatever they hold.
    #[inline]
    fn budget_spent(&self) -> bool {
        !tokio::task::coop::has_budget_remaining()
    }
}
