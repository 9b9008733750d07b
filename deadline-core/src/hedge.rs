//! Hedged requests.

use core::time::Duration;

/// How a dependency's calls are hedged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct HedgePolicy {
    /// How long the first attempt runs before a copy is sent (the dependency's p95).
    pub delay: Duration,
    /// The most copies sent besides the first attempt.
    pub max_hedges: u32,
}

impl HedgePolicy {
    /// Send up to `max_hedges` copies, the first after `delay`.
    #[must_use]
    pub const fn new(delay: Duration, max_hedges: u32) -> Self {
        HedgePolicy { delay, max_hedges }
    }
}
