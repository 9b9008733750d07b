//! Retries within the deadline.

use crate::backoff::Backoff;

/// How a dependency's calls are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, the first included: 1 means no retry. 0 is read as 1.
    pub max_attempts: u32,
    /// The wait before each retry.
    pub backoff: Backoff,
    /// Retry a call that is not idempotent even after a timeout (when it may have succeeded).
    pub retry_non_idempotent: bool,
}

impl RetryPolicy {
    /// One attempt, no retry.
    pub const NONE: RetryPolicy = RetryPolicy {
        max_attempts: 1,
        backoff: Backoff::NONE,
        retry_non_idempotent: false,
    };

    /// `max_attempts` attempts in all, with `backoff` between them.
    #[must_use]
    pub const fn new(max_attempts: u32, backoff: Backoff) -> Self {
        RetryPolicy {
            max_attempts,
            backoff,
            retry_non_idempotent: false,
        }
    }
}
