//! [`Deadline`]: the one point in time a whole request shares.

use core::time::Duration;

use crate::time::Instant;

/// The instant after which nobody waits for the answer.
///
/// A deadline is set once, when the request arrives ([`Deadline::after`]), and every call
/// timeout is then computed from the time left ([`Deadline::remaining`]). A deadline handed
/// down to inner work is a [`child`](Deadline::child): never later than its parent, so inner
/// work always ends no later than outer work (the inner < outer rule at every hop).
///
/// ```
/// use deadline_core::{Deadline, Instant, ms};
///
/// let arrival = Instant::ZERO;
/// let deadline = Deadline::after(arrival, ms(200));
/// assert_eq!(deadline.remaining(Instant::from_millis(115)), ms(85));
/// assert!(deadline.is_expired(Instant::from_millis(200)));
///
/// // A child deadline never outlives its parent.
/// let child = deadline.child(ms(500), Instant::from_millis(150));
/// assert_eq!(child, deadline);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    /// A deadline that never comes: the time left is always the largest representable.
    pub const NEVER: Deadline = Deadline { at: Instant::MAX };

    /// The deadline at instant `at`.
    #[must_use]
    pub const fn at(at: Instant) -> Self {
        Deadline { at }
    }

    /// The deadline `budget` after `arrival` (saturating). Set this once per request.
    #[must_use]
    pub const fn after(arrival: Instant, budget: Duration) -> Self {
        Deadline {
            at: arrival.saturating_add(budget),
        }
    }

    /// The instant of the deadline.
    #[must_use]
    pub const fn instant(self) -> Instant {
        self.at
    }

    /// The time left at `now`; zero once the deadline has passed.
    #[must_use]
    pub const fn remaining(self, now: Instant) -> Duration {
        self.at.saturating_duration_since(now)
    }

    /// Whether the deadline has been reached at `now` (no time is left).
    #[must_use]
    pub const fn is_expired(self, now: Instant) -> bool {
        now.as_micros() >= self.at.as_micros()
    }

    /// A deadline for inner work started at `now` with its own `timeout`: the earlier of
    /// `now + timeout` and this deadline. It is never later than `self`.
    #[must_use]
    pub const fn child(self, timeout: Duration, now: Instant) -> Deadline {
        self.min(Deadline::after(now, timeout))
    }

    /// This deadline moved earlier by `allowance` (saturating): what is left for the next hop
    /// after the network's share, or after work that must happen once the inner call returns.
    #[must_use]
    pub const fn shortened_by(self, allowance: Duration) -> Deadline {
        Deadline {
            at: self.at.saturating_sub(allowance),
        }
    }

    /// The earlier of two deadlines.
    #[must_use]
    pub const fn min(self, other: Deadline) -> Deadline {
        if other.at.as_micros() < self.at.as_micros() {
            other
        } else {
            self
        }
    }
}

impl From<Instant> for Deadline {
    fn from(at: Instant) -> Self {
        Deadline::at(at)
    }
}
