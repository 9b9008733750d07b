//! [`StdClock`]: the core's clock on [`std::time::Instant`].

use std::sync::OnceLock;
use std::time::Duration;

use deadline_core::{Clock, Instant};

/// How far before the first use the origin lies, so that std instants taken before the first
/// conversion (a request's arrival time, say) still convert exactly.
const ORIGIN_MARGIN: Duration = Duration::from_secs(24 * 60 * 60);

/// The process-wide origin of the core instants made from std instants: one day before the
/// first time a conversion needed one (less on a platform that cannot represent that
/// instant).
#[inline]
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
#[inline]
pub fn from_std(t: std::time::Instant) -> Instant {
    Instant::ZERO.saturating_add(t.saturating_duration_since(origin()))
}

/// Converts a core [`Instant`] to a std instant. An instant too far in the future for the
/// platform gives a stand-in 30 years from now. (The usual platforms represent even
/// [`Instant::MAX`], some 585 000 years ahead: a timer that must never fire should not be
/// given one; `AsyncIoTimer` gives the core's `Instant::MAX` none.)
#[must_use]
pub fn to_std(t: Instant) -> std::time::Instant {
    checked_to_std(t).unwrap_or_else(far_future)
}

/// Converts a core [`Instant`] to a std instant, or `None` if the platform cannot represent it.
#[must_use]
#[inline]
pub fn checked_to_std(t: Instant) -> Option<std::time::Instant> {
    // std's own conversion: on a host a little cheaper than the core's (6 instructions of
    // each sleep a tokio call arms: `bash scripts/instructions.sh
    // dependency_run_deadline_only_pending`, 2 458 -> 2 452).
    origin().checked_add(Duration::from_micros(t.as_micros()))
}

/// A stand-in for "never" that every platform can represent: 30 years from now.
fn far_future() -> std::time::Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(86_400 * 365 * 30);
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
    #[inline]
    fn now(&self) -> Instant {
        from_std(std::time::Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{from_std, origin, to_std};

    /// A core instant is the whole microseconds since the origin, rounded down, over a spread
    /// of instants after it; one before it converts to zero; and it converts back to the latest
    /// whole microsecond at or before the std one.
    #[test]
    fn conversions_round_towards_the_past_and_back() {
        let origin = origin();
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = Duration::new(x >> 40, (x as u32) % 1_000_000_000);
            if let Some(t) = origin.checked_add(d) {
                let core = from_std(t);
                assert_eq!(u128::from(core.as_micros()), d.as_micros(), "{d:?}");
                let back = to_std(core);
                assert!(back <= t && t - back < Duration::from_micros(1), "{d:?}");
            }
            if let Some(t) = origin.checked_sub(d) {
                assert_eq!(from_std(t).as_micros(), 0, "{d:?} before the origin");
            }
        }
    }
}
