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
/// A deadline made by [`Deadline::after`] also remembers its start (the arrival): the clock
/// cannot read earlier than that, so a reading before it (a clock that stepped back) counts
/// as no time passed, and the time left never exceeds the budget. [`Deadline::at`] has no
/// known start. Equality, ordering and hashing are the instant's alone: two deadlines at the
/// same instant are the same deadline, whatever their starts.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms};
///
/// let arrival = Instant::from_millis(1_000);
/// let deadline = Deadline::after(arrival, ms(200));
/// assert_eq!(deadline.remaining(Instant::from_millis(1_115)), ms(85));
/// assert!(deadline.is_expired(Instant::from_millis(1_200)));
///
/// // The clock stepped back 600 ms: no time has passed, and no more than the budget is left.
/// assert_eq!(deadline.remaining(Instant::from_millis(400)), ms(200));
///
/// // A child deadline never outlives its parent.
/// let child = deadline.child(ms(500), Instant::from_millis(1_150));
/// assert_eq!(child, deadline);
/// ```
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Deadline {
    at: Instant,
    /// A lower bound on the real time: the clock read at least this much when the deadline
    /// was set. [`Instant::ZERO`] when unknown (every reading is at least that).
    start: Instant,
}

impl PartialEq for Deadline {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Deadline {}

impl PartialOrd for Deadline {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Deadline {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

impl core::hash::Hash for Deadline {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.at.hash(state);
    }
}

impl Deadline {
    /// A deadline that never comes: at [`Instant::MAX`], so the time left is all the time
    /// the clock can still count.
    pub const NEVER: Deadline = Deadline {
        at: Instant::MAX,
        start: Instant::ZERO,
    };

    /// The deadline at instant `at`, with no known start: the time left at `now` is
    /// `at - now` for any reading `now`.
    #[must_use]
    pub const fn at(at: Instant) -> Self {
        Deadline {
            at,
            start: Instant::ZERO,
        }
    }

    /// The deadline `budget` after `arrival` (saturating). Set this once per request.
    ///
    /// The deadline remembers `arrival` as its start: a reading of the clock before it counts
    /// as the arrival itself, so [`remaining`](Deadline::remaining) never exceeds `budget`.
    #[must_use]
    pub const fn after(arrival: Instant, budget: Duration) -> Self {
        Deadline {
            at: arrival.saturating_add(budget),
            start: arrival,
        }
    }

    /// The deadline at `at` that started at `start` (no later than `at`): the one
    /// [`after`](Deadline::after) makes for `start` and `at - start`, without the arithmetic.
    #[inline]
    pub(crate) const fn between(start: Instant, at: Instant) -> Self {
        Deadline { at, start }
    }

    /// The instant of the deadline.
    #[must_use]
    pub const fn instant(self) -> Instant {
        self.at
    }

    /// The latest of `now` and the start: the clock cannot really read earlier than the start.
    const fn effective(self, now: Instant) -> Instant {
        if now.as_micros() < self.start.as_micros() {
            self.start
        } else {
            now
        }
    }

    /// The time left at `now`; zero once the deadline has passed. A `now` before the
    /// deadline's start (a clock that stepped back) counts as the start: the time left is
    /// never more than the budget given to [`Deadline::after`].
    #[must_use]
    // Inlined on 64-bit hosts, one copy on 32-bit targets, where most decisions read it: see
    // `duration_to_micros` (`call_timeout` inlines its own, `left`).
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    pub const fn remaining(self, now: Instant) -> Duration {
        self.left(now)
    }

    /// [`remaining`](Deadline::remaining), always inlined.
    #[inline(always)]
    pub(crate) const fn left(self, now: Instant) -> Duration {
        self.at.saturating_duration_since(self.effective(now))
    }

    /// [`remaining`](Deadline::remaining) in whole microseconds.
    #[inline(always)]
    pub(crate) const fn left_micros(self, now: Instant) -> u64 {
        self.at
            .as_micros()
            .saturating_sub(self.effective(now).as_micros())
    }

    /// Whether the deadline has been reached at `now` (no time is left).
    #[must_use]
    pub const fn is_expired(self, now: Instant) -> bool {
        self.effective(now).as_micros() >= self.at.as_micros()
    }

    /// A deadline for inner work started at `now` with its own `timeout`: the earlier of
    /// `now + timeout` and this deadline. It is never later than `self`, and its time left
    /// never exceeds `timeout` nor this deadline's.
    #[must_use]
    pub const fn child(self, timeout: Duration, now: Instant) -> Deadline {
        self.min(Deadline::after(now, timeout))
    }

    /// This deadline moved earlier by `allowance` (saturating): what is left for the next hop
    /// after the network's share, or after work that must happen once the inner call returns.
    /// The start stays: if the allowance is more than the budget, no time is left.
    #[must_use]
    pub const fn shortened_by(self, allowance: Duration) -> Deadline {
        Deadline {
            at: self.at.saturating_sub(allowance),
            start: self.start,
        }
    }

    /// The earlier of two deadlines, with the later of their starts (the better lower bound
    /// on the real time), so its time left never exceeds either one's.
    #[must_use]
    pub const fn min(self, other: Deadline) -> Deadline {
        let at = if other.at.as_micros() < self.at.as_micros() {
            other.at
        } else {
            self.at
        };
        let start = if other.start.as_micros() > self.start.as_micros() {
            other.start
        } else {
            self.start
        };
        Deadline { at, start }
    }
}

impl From<Instant> for Deadline {
    fn from(at: Instant) -> Self {
        Deadline::at(at)
    }
}
