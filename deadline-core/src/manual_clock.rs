//! [`ManualClock`]: virtual time for tests, simulations and replays (feature `test-util`).

use portable_atomic::{AtomicU64, Ordering};

use crate::time::{Clock, Instant, duration_to_micros};
use core::time::Duration;

/// A clock that moves only when told to: for tests, simulations and replays.
///
/// It is `Sync` (an atomic inside), so one manual clock can be shared by the tasks or threads
/// of a test. [`advance`](ManualClock::advance) and [`set`](ManualClock::set) never move it
/// backwards.
///
/// ```
/// use core::time::Duration;
/// use deadline_core::{Clock, Instant};
/// use deadline_core::virtual_time::ManualClock;
///
/// let clock = ManualClock::new();
/// assert_eq!(clock.now(), Instant::ZERO);
/// clock.advance(Duration::from_millis(10));
/// assert_eq!(clock.now(), Instant::from_millis(10));
/// clock.set(Instant::from_millis(5)); // earlier: ignored, the clock is monotonic
/// assert_eq!(clock.now(), Instant::from_millis(10));
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    micros: AtomicU64,
}

impl ManualClock {
    /// A manual clock at its origin.
    #[must_use]
    pub const fn new() -> Self {
        ManualClock {
            micros: AtomicU64::new(0),
        }
    }

    /// A manual clock that starts at `start`.
    #[must_use]
    pub const fn starting_at(start: Instant) -> Self {
        ManualClock {
            micros: AtomicU64::new(start.as_micros()),
        }
    }

    /// Moves the clock forward by `d` (saturating) and returns the new instant.
    pub fn advance(&self, d: Duration) -> Instant {
        let by = duration_to_micros(d);
        let prev = self
            .micros
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |m| {
                Some(m.saturating_add(by))
            })
            .unwrap_or_else(|m| m);
        Instant::from_micros(prev.saturating_add(by))
    }

    /// Moves the clock to `t`, if `t` is later than the clock's current reading.
    pub fn set(&self, t: Instant) {
        self.micros.fetch_max(t.as_micros(), Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant::from_micros(self.micros.load(Ordering::Acquire))
    }
}

/// Prints the clock's current reading.
#[cfg(feature = "defmt")]
impl defmt::Format for ManualClock {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "ManualClock({=u64}us)", self.now().as_micros());
    }
}
