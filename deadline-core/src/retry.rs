//! Retries within the deadline: the attempt cap, what may be retried, server pushback, and the
//! backoff.

use core::time::Duration;

use crate::call_context::Call;
use crate::call_timeout::{Decision, Limits, Shortfall};
use crate::outcome::Outcome;
use crate::outcome::Pushback;
use crate::rng::Rng;
use crate::time::Instant;

/// The retry bookkeeping of one call: attempts made and the previous backoff (for
/// decorrelated jitter). Small and `Copy`; one per call, created when its first attempt
/// starts.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Outcome, Policy};
/// use deadline_core::call::Call;
/// use deadline_core::policy::{Backoff, Jitter};
/// use deadline_core::call::{GiveUp, RetryDecision, RetryState};
/// use deadline_core::rng::SplitMix64;
///
/// // The budget table: a retry with 1450 ms left waits 200 ms, then has the rest of the time.
/// let dep = Policy::required("B").idempotent().with_cap(ms(2_000)).with_floor(ms(100))
///     .with_retries(1).with_backoff(Backoff::exponential(ms(200)).with_max(ms(1_000)).with_jitter(Jitter::None));
/// let deadline = Deadline::after(Instant::ZERO, ms(2_000));
/// let call = Call::new(&dep, deadline, ms(0));
/// let mut state = RetryState::new();
/// let mut rng = SplitMix64::new(0);
///
/// let now = Instant::from_millis(550);
/// let RetryDecision::Retry(retry) = state.decide(&call, Outcome::Failed, &mut rng, now) else {
///     panic!("a retry fits")
/// };
/// assert_eq!(retry.at, now + ms(200));
/// assert_eq!(retry.limits.timeout(), deadline.remaining(retry.at));
///
/// // The second failure: both attempts are used.
/// let d = state.decide(&call, Outcome::Failed, &mut rng, retry.at + ms(400));
/// assert_eq!(d, RetryDecision::GiveUp(GiveUp::Exhausted));
/// ```
///
/// The checks before a retry, in order: [the guide](crate::guide#retries-and-what-may-be-repeated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RetryState {
    attempts: u32,
    previous: Duration,
    /// The retries decided before the backoff last started over (after a server's pushback).
    backoff_from: u32,
}

impl Default for RetryState {
    fn default() -> Self {
        RetryState::new()
    }
}

impl RetryState {
    /// The state of a call whose first attempt has started: one attempt made, no backoff yet.
    #[must_use]
    pub const fn new() -> Self {
        RetryState {
            attempts: 1,
            previous: Duration::ZERO,
            backoff_from: 0,
        }
    }

    /// Attempts made so far, the first one and any retry decided on included.
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Retries decided on so far.
    #[must_use]
    pub const fn retries(&self) -> u32 {
        self.attempts.saturating_sub(1)
    }

    /// The backoff drawn before the latest retry (zero before the first retry, and after a
    /// retry the server's pushback timed, from which the backoff starts over).
    #[must_use]
    pub const fn previous_backoff(&self) -> Duration {
        self.previous
    }

    /// Decides, at `now`, what to do after an attempt of `call` failed with `outcome`: retry
    /// at [`Retry::at`] with [`Retry::limits`], or give up for a [`GiveUp`] reason. The checks
    /// and their order are in the docs above.
    ///
    /// On [`RetryDecision::Retry`] the state counts the retry and remembers its backoff, and
    /// one token has been taken from the call's budget (kept even if the retry is not made
    /// after all: see the docs above). On [`RetryDecision::GiveUp`] the state and
    /// the budget are untouched. Draws from `rng` only to jitter the backoff.
    ///
    /// Guarantees, for a retry: `at < deadline`; `limits.timeout() >= floor`;
    /// `limits.timeout() <= deadline.remaining(at) - reserve`; `limits.until() <= deadline`; and
    /// `attempts() <= policy.retry.attempts()`.
    pub fn decide<R: Rng + ?Sized>(
        &mut self,
        call: &Call<'_>,
        outcome: Outcome,
        rng: &mut R,
        now: Instant,
    ) -> RetryDecision {
        self.decide_not_before(call, outcome, Instant::ZERO, rng, now)
    }

    /// [`decide`](Self::decide), with the retry starting no earlier than `not_before`: a
    /// server's pushback heard on another copy of the call, which a later failure of another
    /// kind does not lift (an earlier instant changes nothing).
    pub(crate) fn decide_not_before<R: Rng + ?Sized>(
        &mut self,
        call: &Call<'_>,
        outcome: Outcome,
        not_before: Instant,
        rng: &mut R,
        now: Instant,
    ) -> RetryDecision {
        let policy = call.policy;
        let pushback = match outcome {
            Outcome::Fatal | Outcome::Broken => return RetryDecision::GiveUp(GiveUp::NotRetryable),
            Outcome::Pushback(Pushback::DontRetry) => {
                return RetryDecision::GiveUp(GiveUp::ServerSaidNo);
            }
            Outcome::Pushback(Pushback::After(d)) => Some(d),
            Outcome::TimedOut | Outcome::Refused | Outcome::Failed => None,
        };
        let may_have_run = matches!(outcome, Outcome::TimedOut | Outcome::Failed);
        if may_have_run && !policy.is_idempotent() {
            return RetryDecision::GiveUp(GiveUp::MayHaveRun);
        }
        if self.attempts >= policy.retry.attempts() {
            return RetryDecision::GiveUp(GiveUp::Exhausted);
        }
        // The server's word, when it gave one, is the wait, and the backoff starts over for
        // any retry after this one (gRFC A6: "retry in n ms; if this attempt also fails,
        // retry delay will reset to initial backoff"). Otherwise the policy's backoff.
        let (wait, backoff) = match pushback {
            Some(wait) => (wait, Duration::ZERO),
            None => {
                let n = self
                    .attempts
                    .saturating_sub(1)
                    .saturating_sub(self.backoff_from);
                let backoff = policy.retry.backoff.delay(n, self.previous, rng);
                (backoff, backoff)
            }
        };
        let at = now.saturating_add(wait).max(not_before);
        let wait = at.saturating_duration_since(now);
        if call.deadline.is_expired(at) {
            return RetryDecision::GiveUp(GiveUp::BackoffPastDeadline { at });
        }
        let limits = match call.decide(at) {
            Decision::Call(limits) => limits,
            Decision::Skip(shortfall) | Decision::Fail(shortfall) => {
                return RetryDecision::GiveUp(GiveUp::UnderFloor(shortfall));
            }
        };
        if !call.withdraw(now) {
            return RetryDecision::GiveUp(GiveUp::Throttled);
        }
        self.attempts = self.attempts.saturating_add(1);
        self.previous = backoff;
        if pushback.is_some() {
            // The next retry, if any, backs off as the first does.
            self.backoff_from = self.attempts.saturating_sub(1);
        }
        RetryDecision::Retry(Retry {
            at,
            wait,
            limits,
            attempt: self.attempts,
        })
    }
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum RetryDecision {
    /// Sleep until [`Retry::at`], then make the attempt with [`Retry::limits`].
    Retry(Retry),
    /// Make no further attempt; the call ends with the last attempt's failure.
    GiveUp(GiveUp),
}

impl RetryDecision {
    /// The retry, if one is to be made.
    #[must_use]
    pub const fn retry(&self) -> Option<Retry> {
        match self {
            RetryDecision::Retry(r) => Some(*r),
            RetryDecision::GiveUp(_) => None,
        }
    }
}

/// A retry that fits: when to make it and with which limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Retry {
    /// When the backoff ends and the retry starts: `now + wait`, before the deadline.
    pub at: Instant,
    /// The wait: the jittered backoff, or the server's pushback when it gave one.
    pub wait: Duration,
    /// The retry's limits, computed for a start at `at` ([`crate::call::call_timeout`]). A driver
    /// that wakes late computes them again at the instant it actually starts.
    pub limits: Limits,
    /// The number of the attempt about to be made: 2 for the first retry.
    pub attempt: u32,
}

/// Why no retry is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum GiveUp {
    /// The failure is one a retry would not fix ([`Outcome::Fatal`], [`Outcome::Broken`]).
    NotRetryable,
    /// The server said not to retry ([`Pushback::DontRetry`]).
    ServerSaidNo,
    /// The call is not idempotent and the attempt may have run on the server (it timed out
    /// or the server failed), so repeating it could do the work twice.
    MayHaveRun,
    /// Every attempt the policy allows has been made.
    Exhausted,
    /// The backoff would end at or after the request deadline, at `at`.
    BackoffPastDeadline {
        /// When the backoff would have ended.
        at: Instant,
    },
    /// At the end of the backoff the call timeout would fall under the dependency's floor
    /// (the remaining time, less the reserve, is too short for an attempt worth making).
    UnderFloor(Shortfall),
    /// The retry-and-hedge budget refused the retry.
    Throttled,
    /// The request deadline had passed when the retry was to start (a driver woke after it,
    /// at the end of the backoff).
    DeadlinePassed,
    /// The dependency's circuit breaker refused the retry when it was to start.
    CircuitOpen,
    /// An attempt could send nothing (under the allowance one hop keeps back, under a
    /// statement's floor), and no retry could do better: the call's time is too short, or
    /// any attempt's would be.
    NothingToSend,
}
