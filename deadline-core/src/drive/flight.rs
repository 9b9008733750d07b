//! [`Attempt`]: the record of one attempt that has started, kept by the call machine while
//! the attempt runs.

use crate::breaker::{BreakerOutcome, CircuitBreaker, Permit};
use core::time::Duration;

use crate::call_timeout::Limits;
use crate::dependency_policy::Policy;
use crate::time::Instant;

/// One attempt that has started: its limits, its number and the circuit breaker's leave to
/// make it. Hand it back to its course when it ends (`Course::succeeded`, `failed`,
/// `timed_out` or `cancel`).
///
/// Its breaker permit is reported when the attempt ends ([`settle`](Attempt::settle)); the
/// call machine reports the permits of the attempts still in flight when it is dropped (the
/// driver's future was dropped: nobody waits for the call any more) as
/// [`Abandoned`](BreakerOutcome::Abandoned), so a half-open breaker's probe slot is freed at
/// once rather than after the breaker's probe timeout.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "hand the attempt back to its course when it ends"]
pub struct Attempt {
    /// When its timeout ends (its timeout and connect limit follow from it, its start and
    /// the policy).
    pub(super) until: Instant,
    pub(super) number: u32,
    pub(super) hedge: bool,
    pub(super) started: Instant,
    pub(super) permit: Option<Permit>,
}

impl Attempt {
    /// The attempt's limits under `policy`, its call's: hand them to the attempt (its timeout
    /// ends at [`Limits::until`]).
    #[must_use]
    pub(super) const fn limits(&self, policy: &Policy) -> Limits {
        Limits::of(policy, self.started, self.until)
    }

    /// The attempt's timeout.
    #[must_use]
    pub(super) const fn timeout(&self) -> Duration {
        self.until.saturating_duration_since(self.started)
    }

    /// Whether the attempt's timeout is `cap_us`, its call's cap (whole microseconds), or
    /// more: the time left was not what limited it.
    #[must_use]
    pub(super) const fn is_capped(&self, cap_us: u64) -> bool {
        self.until
            .as_micros()
            .saturating_sub(self.started.as_micros())
            >= cap_us
    }

    /// The attempt's number: 0 for the first, counting every retry and hedge in the order
    /// they started.
    #[must_use]
    pub(super) const fn number(&self) -> u32 {
        self.number
    }

    /// Whether the attempt is a hedge (a copy sent while another attempt was running).
    #[must_use]
    pub(super) const fn is_hedge(&self) -> bool {
        self.hedge
    }

    /// When the attempt started.
    #[must_use]
    pub(super) const fn started(&self) -> Instant {
        self.started
    }

    /// Hands the attempt's permit back to `breaker`, its call's, unused (once): the attempt
    /// is abandoned ([`CircuitBreaker::abandon`]).
    #[inline]
    pub(super) fn abandon(&mut self, breaker: Option<&CircuitBreaker>) {
        if let (Some(breaker), Some(permit)) = (breaker, self.permit.take()) {
            breaker.abandon(permit);
        }
    }

    /// Reports the attempt's result to `breaker`, its call's (once).
    #[inline]
    pub(super) fn settle(
        &mut self,
        breaker: Option<&CircuitBreaker>,
        outcome: BreakerOutcome,
        now: Instant,
    ) {
        if let (Some(breaker), Some(permit)) = (breaker, self.permit.take()) {
            breaker.record(permit, outcome, now);
        }
    }
}
