//! Hedged requests: a copy of a slow call sent before its timeout, the first answer wins.

use core::time::Duration;

use crate::call_context::Call;
use crate::call_timeout::{Decision, Limits, Shortfall};
use crate::dependency_policy::HedgePolicy;
use crate::time::Instant;

/// The hedging bookkeeping of one call: hedges sent and the latest send. Small and `Copy`.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::call::Call;
/// use deadline_core::call::{HedgeDecision, HedgeState};
/// use deadline_core::policy::HedgePolicy;
///
/// // B: p95 60 ms; at most one hedge.
/// let b = Policy::required("B").idempotent().with_cap(ms(110)).with_floor(ms(30))
///     .with_hedge(HedgePolicy::new(ms(60), 1));
/// let call = Call::new(&b, Deadline::after(Instant::ZERO, ms(200)), ms(20));
/// let mut hedges = HedgeState::new(Instant::from_millis(10)); // first attempt at 10 ms
///
/// assert_eq!(hedges.next_at(&call, None), Some(Instant::from_millis(70)));
/// assert_eq!(hedges.decide(&call, None, Instant::from_millis(30)),
///            HedgeDecision::NotYet(Instant::from_millis(70)));
/// // At 70 ms: min(200 - 70 - 20, 110) = 110 ms for the copy.
/// let HedgeDecision::Send(limits) = hedges.decide(&call, None, Instant::from_millis(70)) else {
///     panic!("the hedge is due")
/// };
/// assert_eq!(limits.timeout(), ms(110));
/// assert_eq!(hedges.next_at(&call, None), None); // max_hedges reached
/// ```
///
/// The schedule and the rules of a hedge: [the guide](crate::guide#hedged-requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HedgeState {
    sent: u32,
    last_send: Instant,
    stopped: bool,
    refused: bool,
}

impl HedgeState {
    /// The state of a call whose first attempt started at `first_send`.
    #[must_use]
    pub const fn new(first_send: Instant) -> Self {
        HedgeState {
            sent: 0,
            last_send: first_send,
            stopped: false,
            refused: false,
        }
    }

    /// Hedges sent so far.
    #[must_use]
    pub const fn sent(&self) -> u32 {
        self.sent
    }

    /// Whether the budget has refused the next hedge already ([`HedgeDecision::Throttled`]
    /// since the latest copy was sent): a refusal of it again keeps no more copies from the
    /// dependency than the first did.
    #[must_use]
    pub const fn refused(&self) -> bool {
        self.refused
    }

    /// Records an attempt (a retry) sent at `at`: the next hedge is due `delay` after it.
    pub fn restart(&mut self, at: Instant) {
        self.last_send = self.last_send.max(at);
        self.stopped = false;
        self.refused = false;
    }

    /// Moves the next hedge to no sooner than `not_before` (a server's pushback on one of the
    /// copies), so it is due at `max(not_before, the schedule)`.
    pub fn push_back(&mut self, not_before: Instant, call: &Call<'_>, live: Option<Duration>) {
        let delay = call
            .policy
            .hedge
            .map_or(Duration::ZERO, |h| h.delay_with(live));
        self.last_send = self.last_send.max(not_before.saturating_sub(delay));
    }

    /// Sends no more hedges for this call until the next [`restart`](Self::restart) (a server
    /// said not to retry, or the hedges cannot fit any more).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// The call's hedge policy if it may still hedge, or why it gets no hedge at all, now
    /// or later.
    #[inline]
    fn schedule(&self, call: &Call<'_>) -> Result<HedgePolicy, NoHedge> {
        let Some(policy) = call.policy.hedge else {
            return Err(NoHedge::NotConfigured);
        };
        if !call.policy.is_idempotent() {
            return Err(NoHedge::NotIdempotent);
        }
        if self.sent >= policy.max_hedges {
            return Err(NoHedge::AllSent);
        }
        if self.stopped {
            return Err(NoHedge::Stopped);
        }
        Ok(policy)
    }

    /// When the next hedge is due (`delay` after the latest send), or `None` if no hedge
    /// will be sent (see [`decide`](Self::decide) for the reasons).
    #[must_use]
    pub fn next_at(&self, call: &Call<'_>, live: Option<Duration>) -> Option<Instant> {
        let policy = self.schedule(call).ok()?;
        Some(self.last_send.saturating_add(policy.delay_with(live)))
    }

    /// Decides at `now` whether to send a hedge. The rules are in the docs above.
    ///
    /// On [`HedgeDecision::Send`] the state counts the hedge and restarts the schedule from
    /// `now`, and one token has been taken from the call's budget. On
    /// [`HedgeDecision::Throttled`] the schedule moves on by one delay. A
    /// [`HedgeDecision::Stop`] for a timeout under the floor also stops further hedges (the
    /// time left only shrinks).
    ///
    /// Guarantees, for a hedge: `limits.timeout() >= floor`,
    /// `limits.timeout() <= deadline.remaining(now) - reserve`, `limits.until() <= deadline`, and
    /// `sent() <= max_hedges`.
    pub fn decide(
        &mut self,
        call: &Call<'_>,
        live: Option<Duration>,
        now: Instant,
    ) -> HedgeDecision {
        let due = match self.schedule(call) {
            Ok(policy) => self.last_send.saturating_add(policy.delay_with(live)),
            Err(reason) => return HedgeDecision::Stop(reason),
        };
        if now < due {
            return HedgeDecision::NotYet(due);
        }
        let limits = match call.decide(now) {
            Decision::Call(limits) => limits,
            Decision::Skip(shortfall) | Decision::Fail(shortfall) => {
                self.stopped = true;
                return HedgeDecision::Stop(NoHedge::UnderFloor(shortfall));
            }
        };
        if !call.withdraw(now) {
            self.last_send = now;
            self.refused = true;
            return HedgeDecision::Throttled;
        }
        self.sent = self.sent.saturating_add(1);
        self.last_send = now;
        self.refused = false;
        HedgeDecision::Send(limits)
    }
}

/// Whether to send a hedge now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum HedgeDecision {
    /// Send a copy now, with these limits (computed from the time left now).
    Send(Limits),
    /// Not yet: the next hedge is due at this instant.
    NotYet(Instant),
    /// The retry-and-hedge budget refused; the next chance is one delay from now
    /// ([`HedgeState::next_at`]).
    Throttled,
    /// No hedge, now or later, for this call's current attempt.
    Stop(NoHedge),
}

/// Why no hedge is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum NoHedge {
    /// The policy has no [`HedgePolicy`](crate::policy::HedgePolicy).
    NotConfigured,
    /// The call is not idempotent: a copy could do its work twice.
    NotIdempotent,
    /// [`HedgePolicy::max_hedges`](crate::policy::HedgePolicy::max_hedges) copies have been sent.
    AllSent,
    /// Hedging was stopped ([`HedgeState::stop`]): a server said not to retry.
    Stopped,
    /// A copy sent now would get a timeout under the dependency's floor.
    UnderFloor(Shortfall),
}
