//! [`TokioClock`] and [`TokioTimer`]: the core's clock and timer on tokio's time.
//!
//! Both read [`tokio::time::Instant::now`], so a runtime whose clock is paused
//! (`#[tokio::test(start_paused = true)]`, [`tokio::time::pause`]) drives them: the library then
//! runs in virtual time, with no real waiting.
//!
//! # The origin
//!
//! A core [`Instant`] counts microseconds from an origin. The origin here is one tokio instant
//! per process, taken the first time any conversion needs it, one day *before* the real
//! (std) time of that moment. The day is a margin for paused clocks: a paused runtime's clock
//! starts at the real time the runtime was built and moves only when told, so it can read
//! earlier than the real time at which the origin was taken, but not earlier by more than the
//! runtime's age. Instants before the origin (built by hand with
//! [`tokio::time::Instant::from_std`], for example) read as the origin: the conversion
//! saturates, it never panics.
//!
//! The origin is taken from the real clock, never from a paused one, because a paused clock
//! may have been advanced far ahead: an origin taken from it would lie in the future of every
//! other runtime's clock.

use core::time::Duration;
use std::sync::OnceLock;

use deadline_core::time::duration_to_micros;
use deadline_core::{Clock, Instant, Timer};
use tokio::time::{Instant as TokioInstant, Sleep};

/// How far before the real time of first use the origin lies. See the module docs.
const ORIGIN_MARGIN: Duration = Duration::from_secs(24 * 60 * 60);

/// The process-wide origin of the core instants made from tokio instants.
fn origin() -> TokioInstant {
    static ORIGIN: OnceLock<TokioInstant> = OnceLock::new();
    *ORIGIN.get_or_init(|| {
        let real = std::time::Instant::now();
        // Some platforms cannot represent instants before boot: halve the margin until the
        // subtraction works, down to no margin at all.
        let mut margin = ORIGIN_MARGIN;
        let start = loop {
            match real.checked_sub(margin) {
                Some(start) => break start,
                None if margin.is_zero() => break real,
                None => margin /= 2,
            }
        };
        TokioInstant::from_std(start)
    })
}

/// Converts a tokio instant to a core [`Instant`] (whole microseconds since the process-wide
/// origin, rounded down; an instant before the origin gives [`Instant::ZERO`]).
///
/// ```
/// use deadline_tokio::{from_tokio, to_tokio};
///
/// let now = tokio::time::Instant::now();
/// let core = from_tokio(now);
/// // Round trip: equal up to the sub-microsecond part that the core drops.
/// assert!(to_tokio(core) <= now);
/// assert!(now - to_tokio(core) < std::time::Duration::from_micros(1));
/// ```
#[must_use]
pub fn from_tokio(t: TokioInstant) -> Instant {
    Instant::from_micros(duration_to_micros(t.saturating_duration_since(origin())))
}

/// Converts a core [`Instant`] to a tokio instant, or `None` if the platform's instant cannot
/// represent it (such as [`Instant::MAX`] on some platforms).
#[must_use]
pub fn checked_to_tokio(t: Instant) -> Option<TokioInstant> {
    origin().checked_add(t.since_origin())
}

/// Converts a core [`Instant`] to a tokio instant. An instant too far in the future for the
/// platform gives tokio's own "far future" (about 30 years from now), as [`tokio::time::sleep`]
/// does for an overlong duration.
#[must_use]
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
/// use deadline_tokio::TokioClock;
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
/// use deadline_tokio::TokioTimer;
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
    fn now(&self) -> Instant {
        TokioClock.now()
    }
}

impl Timer for TokioTimer {
    type Sleep = Sleep;

    fn sleep_until(&self, at: Instant) -> Sleep {
        tokio::time::sleep_until(to_tokio(at))
    }
}
