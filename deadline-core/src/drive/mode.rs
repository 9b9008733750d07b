//! [`Mode`]: what a driven call may do besides its first attempt.

/// What a driven call may do besides its first attempt, fixed in its type so that a call that
/// only keeps its deadline carries none of the code for the rest: [`Full`] or
/// [`DeadlineOnly`].
pub trait Mode {
    /// Whether retries, hedges, the retry budget and the circuit breaker are used.
    const FULL: bool;
}

/// Everything the policy asks for: retries with backoff, hedges, the retry budget and the
/// circuit breaker. The default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Full;

impl Mode for Full {
    const FULL: bool = true;
}

/// One attempt, with its timeout from the time left, and nothing else
/// ([`Driver::deadline_only`](super::Driver::deadline_only)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeadlineOnly;

impl Mode for DeadlineOnly {
    const FULL: bool = false;
}
