//! [`StdClock`]: the core's clock on [`std::time::Instant`].

use std::sync::OnceLock;

use deadline_core::{Clock, Instant, duration_to_micros};

/// How far before the first use the origin lies, so that std instants taken before the first
/// conversion (a request's arrival time, say) still convert exactly.
const ORIGIN_MARGIN: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The process-wide origin of the core instants made from std instants: one day before the
/// first time a conversion needed one (less on a platform that cannot represent that instant).
fn origin() -> std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    *ORIGIN.get_or_init(|| {
        let now = std::time::Instant::now();
        let mut margin = ORIGIN_MARGIN;
        loop {
            match now.checked_sub(margin) {
                Some(origin) => break origin,
                None if margin.is_zero() => break now,
                None => margin /= 2,
            }
        }
    })
}

/// Converts a std instant to a core [`Instant`]: whole microseconds since the process-wide
/// origin, rounded down.
///
/// The origin lies one day before the first conversion, so instants taken shortly before it
/// convert exactly; an instant before the origin gives [`Instant::ZERO`] (saturating, never a
/// panic).
///
/// ```
/// use deadline_std::{from_std, to_std};
///
/// let now = std::time::Instant::now();
/// let core = from_std(now);
/// assert!(to_std(core) <= now);
/// assert!(now - to_std(core) < std::time::Duration::from_micros(1));
/// ```
#[must_use]
pub fn from_std(t: std::time::Instant) -> Instant {
    Instant::from_micros(duration_to_micros(t.saturating_duration_since(origin())))
}

/// Converts a core [`Instant`] to a std instant. An instant too far in the future for the
/// platform (such as [`Instant::MAX`]) gives a stand-in 30 years from now.
#[must_use]
pub fn to_std(t: Instant) -> std::time::Instant {
    checked_to_std(t).unwrap_or_else(far_future)
}

/// Converts a core [`Instant`] to a std instant, or `None` if the platform cannot represent it.
#[must_use]
pub fn checked_to_std(t: Instant) -> Option<std::time::Instant> {
    origin().checked_add(t.since_origin())
}

/// A stand-in for "never" that every platform can represent: 30 years from now.
fn far_future() -> std::time::Instant {
    const THIRTY_YEARS: std::time::Duration = std::time::Duration::from_secs(86_400 * 365 * 30);
    let now = std::time::Instant::now();
    now.checked_add(THIRTY_YEARS).unwrap_or(now)
}

/// The core's [`Clock`] on [`std::time::Instant`], from a process-wide origin (see
/// [`from_std`]).
///
/// ```
/// use deadline_core::Clock;
/// use deadline_std::StdClock;
///
/// let a = StdClock.now();
/// let b = StdClock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StdClock;

impl Clock for StdClock {
    fn now(&self) -> Instant {
        from_std(std::time::Instant::now())
    }
}
