//! Retries within the deadline: the attempt cap, what may be retried, server pushback, and the
//! decision before each retry.
//!
//! The decision is sans-IO. After an attempt fails, [`RetryState::decide`] takes the call
//! ([`Call`]: policy, request deadline, reserve, retry budget), `now`, the attempt's
//! [`Outcome`] and a random source, and answers with a [`RetryDecision`]: retry at an instant
//! with freshly computed limits, or give up for a stated [`GiveUp`] reason. Nothing is
//! slept and no clock is read; the caller sleeps until [`Retry::at`] and then makes the call.
//!
//! The checks, in order (the first that fails ends the call):
//!
//! 1. The outcome is retryable: not [`Outcome::Fatal`], not a [`Pushback::DontRetry`].
//! 2. The attempt cannot have run twice: a call that is not idempotent is retried only after
//!    [`Outcome::Refused`] or [`Outcome::Pushback`] (the server did not act on it), unless
//!    [`RetryPolicy::retry_non_idempotent`] allows it.
//! 3. Attempts are left under [`RetryPolicy::max_attempts`].
//! 4. The backoff ([`crate::backoff`], lengthened to the server's pushback if that is longer)
//!    ends before the request deadline.
//! 5. The call timeout computed again for a start at the end of the backoff
//!    ([`crate::call_timeout`]) is at least the dependency's floor.
//! 6. The retry budget grants a token. It is asked last, so no token is taken for a retry
//!    that one of the checks above rules out.
//!
//! The token is taken at the decision, before the backoff is slept. A driver that wakes so
//! late that the retry no longer fits (the deadline has passed, or the timeout computed
//! again at the real start is under the floor), or whose circuit breaker then refuses it,
//! makes no retry, and the token is not given back: the budget errs towards fewer retries,
//! never more.
//!
//! ```
//! use deadline_core::backoff::{Backoff, Jitter};
//! use deadline_core::retry::{Call, GiveUp, Outcome, RetryDecision, RetryState};
//! use deadline_core::rng::SplitMix64;
//! use deadline_core::{Deadline, Instant, Policy, ms};
//!
//! // The budget table: a retry with 1450 ms left waits 200 ms, then has the rest of the time.
//! let dep = Policy::required("B", ms(2_000), ms(100))
//!     .with_attempts(2, Backoff::exponential(ms(200), ms(1_000), Jitter::None))
//!     .idempotent();
//! let deadline = Deadline::after(Instant::ZERO, ms(2_000));
//! let call = Call::new(&dep, deadline, ms(0));
//! let mut state = RetryState::new();
//! let mut rng = SplitMix64::new(0);
//!
//! let now = Instant::from_millis(550);
//! let RetryDecision::Retry(retry) = state.decide(&call, Outcome::Failed, &mut rng, now) else {
//!     panic!("a retry fits")
//! };
//! assert_eq!(retry.at, now + ms(200));
//! assert_eq!(retry.limits.timeout, deadline.remaining(retry.at));
//!
//! // The second failure: both attempts are used.
//! let d = state.decide(&call, Outcome::Failed, &mut rng, retry.at + ms(400));
//! assert_eq!(d, RetryDecision::GiveUp(GiveUp::Exhausted));
//! ```

use core::time::Duration;

use crate::backoff::Backoff;
use crate::breaker::CircuitBreaker;
use crate::budget::{Decision, Limits, Shortfall, call_timeout};
use crate::deadline::Deadline;
use crate::policy::Policy;
use crate::rng::Rng;
use crate::throttle::RetryBudget;
use crate::time::Instant;

/// How a dependency's calls are retried.
///
/// ```
/// use deadline_core::backoff::{Backoff, Jitter};
/// use deadline_core::retry::RetryPolicy;
/// use deadline_core::ms;
///
/// let r = RetryPolicy::new(3, Backoff::exponential(ms(10), ms(100), Jitter::Full))
///     .with_retry_non_idempotent(true);
/// assert_eq!(r.attempts(), 3);
/// assert!(r.retry_non_idempotent);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, the first included: 1 means no retry. 0 is read as 1.
    pub max_attempts: u32,
    /// The wait before each retry.
    pub backoff: Backoff,
    /// Retry a call that is not idempotent even when the failed attempt may have reached the
    /// server and run ([`Outcome::TimedOut`], [`Outcome::Failed`]).
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

    /// The same policy, allowing (or not) retries of a non-idempotent call that may have run.
    #[must_use]
    pub const fn with_retry_non_idempotent(mut self, allow: bool) -> Self {
        self.retry_non_idempotent = allow;
        self
    }

    /// Attempts in all, the first included: [`max_attempts`](Self::max_attempts), with 0
    /// read as 1.
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        if self.max_attempts == 0 {
            1
        } else {
            self.max_attempts
        }
    }
}

/// One dependency call of one request: what every decision about its attempts needs besides
/// `now`. It is `Copy`; build it once per call.
///
/// ```
/// use deadline_core::retry::Call;
/// use deadline_core::throttle::RetryBudget;
/// use deadline_core::{Deadline, Instant, Policy, ms};
///
/// let a = Policy::required("A", ms(50), ms(10));
/// let budget = RetryBudget::new(10, 5);
/// let call = Call::new(&a, Deadline::after(Instant::ZERO, ms(200)), ms(50)).with_budget(&budget);
/// // call_timeout at now: min(200 - 0 - 50, 50) = 50.
/// assert_eq!(call.decide(Instant::ZERO).timeout(), Some(ms(50)));
/// ```
///
/// With a circuit breaker ([`Call::with_breaker`]), a driver asks it for leave before every
/// attempt (the first, each retry and each hedge) and reports every attempt's result to it.
/// The decisions of this module do not consult it: [`RetryState::decide`] answers as if it
/// were closed, and the driver asks the breaker at the instant the retry starts.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Call<'a> {
    /// The dependency's policy.
    pub policy: &'a Policy,
    /// The request's deadline.
    pub deadline: Deadline,
    /// The time the caller needs after this call returns (see [`crate::call_timeout`]).
    pub reserve: Duration,
    /// The retry-and-hedge budget that retries and hedges draw from; `None` for no budget.
    pub budget: Option<&'a RetryBudget>,
    /// The dependency's circuit breaker, asked before every attempt; `None` for no breaker.
    pub breaker: Option<&'a CircuitBreaker>,
}

impl<'a> Call<'a> {
    /// A call to the dependency of `policy` within `deadline`, leaving `reserve` after it,
    /// with no retry budget.
    #[must_use]
    pub const fn new(policy: &'a Policy, deadline: Deadline, reserve: Duration) -> Self {
        Call {
            policy,
            deadline,
            reserve,
            budget: None,
            breaker: None,
        }
    }

    /// The same call, drawing its retries and hedges from `budget`.
    #[must_use]
    pub const fn with_budget(mut self, budget: &'a RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The same call, with or without a budget.
    #[must_use]
    pub const fn with_budget_opt(mut self, budget: Option<&'a RetryBudget>) -> Self {
        self.budget = budget;
        self
    }

    /// The same call, asking `breaker` for leave before every attempt and reporting every
    /// attempt's result to it (one breaker per dependency, shared by all its calls).
    #[must_use]
    pub const fn with_breaker(mut self, breaker: &'a CircuitBreaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// The same call, with or without a circuit breaker.
    #[must_use]
    pub const fn with_breaker_opt(mut self, breaker: Option<&'a CircuitBreaker>) -> Self {
        self.breaker = breaker;
        self
    }

    /// The decision for an attempt starting at `now`: [`call_timeout`] with this call's
    /// policy, deadline and reserve.
    pub fn decide(&self, now: Instant) -> Decision {
        call_timeout(self.policy, self.deadline, self.reserve, now)
    }

    /// Asks the budget for one retry or hedge at `now`; `true` when there is no budget.
    #[must_use]
    pub fn withdraw(&self, now: Instant) -> bool {
        self.budget.is_none_or(|b| b.try_withdraw(now))
    }

    /// Records one original call in the budget at `now` (nothing when there is no budget).
    pub fn deposit(&self, now: Instant) {
        if let Some(b) = self.budget {
            b.deposit(now);
        }
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Call<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Call {{ policy: {}, deadline: {}, reserve: {}us, budget: {}, breaker: {} }}",
            self.policy,
            self.deadline,
            crate::time::duration_to_micros(self.reserve),
            self.budget.is_some(),
            self.breaker.is_some()
        );
    }
}

/// How a failed attempt ended, as far as retrying is concerned.
///
/// The caller (or the driver's classifier) maps its own errors onto these. The difference
/// between them is whether the attempt may have run on the server, which decides whether a
/// call that is not idempotent may be repeated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Outcome {
    /// The attempt's timeout fired, or the connection broke after the request was sent. The
    /// server may have run it (and succeeded): not retried for a non-idempotent call unless
    /// [`RetryPolicy::retry_non_idempotent`].
    TimedOut,
    /// The attempt provably did not reach the server: connection refused, a connect timeout,
    /// no route, a name that did not resolve. Safe to retry, idempotent or not.
    Refused,
    /// The server answered with a failure a retry may fix (a 500, 502 or 503; gRPC
    /// `UNAVAILABLE`). It may have acted on the request before failing, so a non-idempotent
    /// call is treated as for [`Outcome::TimedOut`].
    Failed,
    /// The server declined the request and said when to come back, or not to: an HTTP 429 or
    /// 503 with `Retry-After`, or gRPC's `grpc-retry-pushback-ms`. The server did not act on
    /// it, so it may be retried even if not idempotent.
    Pushback(Pushback),
    /// A failure a retry would not fix (a 4xx other than 408 and 429, gRPC
    /// `INVALID_ARGUMENT`, `NOT_FOUND`, `PERMISSION_DENIED`...). Never retried.
    Fatal,
}

/// A server's word on when to retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Pushback {
    /// Retry no sooner than this long after the failure. The wait before the retry is the
    /// longer of this and the policy's backoff.
    After(Duration),
    /// Do not retry (and send no further hedges).
    DontRetry,
}

/// Parses an HTTP `Retry-After` value in its delay-seconds form (RFC 9110 §10.2.3:
/// `1*DIGIT`, optional whitespace around it), saturating on overflow.
///
/// Returns `None` for the HTTP-date form and for anything malformed: turning a date into a
/// delay needs the wall clock, which the core does not read. A caller that has one may
/// subtract it and build [`Pushback::After`] itself. `None` means "no pushback": classify the
/// response as [`Outcome::Failed`].
///
/// ```
/// use deadline_core::retry::{Pushback, parse_retry_after};
/// use deadline_core::ms;
///
/// assert_eq!(parse_retry_after(b"120"), Some(Pushback::After(ms(120_000))));
/// assert_eq!(parse_retry_after(b" 3 "), Some(Pushback::After(ms(3_000))));
/// assert_eq!(parse_retry_after(b"Fri, 31 Dec 1999 23:59:59 GMT"), None);
/// assert_eq!(parse_retry_after(b"-1"), None);
/// ```
#[must_use]
pub fn parse_retry_after(value: &[u8]) -> Option<Pushback> {
    let digits = value.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    let mut secs: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        secs = secs
            .saturating_mul(10)
            .saturating_add(u64::from(b.wrapping_sub(b'0')));
    }
    Some(Pushback::After(Duration::from_secs(secs)))
}

/// Parses gRPC's `grpc-retry-pushback-ms` value (gRFC A6): a signed 32-bit decimal integer of
/// milliseconds to wait before retrying.
///
/// As A6 says, a negative value, or one that does not parse (empty, not decimal, outside the
/// `i32` range), means the server asks the client not to retry at all. Surrounding ASCII
/// whitespace is ignored; a leading `+` or a leading zero is accepted.
///
/// ```
/// use deadline_core::retry::{Pushback, parse_grpc_pushback};
/// use deadline_core::ms;
///
/// assert_eq!(parse_grpc_pushback(b"250"), Pushback::After(ms(250)));
/// assert_eq!(parse_grpc_pushback(b"-1"), Pushback::DontRetry);
/// assert_eq!(parse_grpc_pushback(b"soon"), Pushback::DontRetry);
/// assert_eq!(parse_grpc_pushback(b"2147483648"), Pushback::DontRetry);
/// ```
#[must_use]
pub fn parse_grpc_pushback(value: &[u8]) -> Pushback {
    let text = value.trim_ascii();
    let Ok(text) = core::str::from_utf8(text) else {
        return Pushback::DontRetry;
    };
    match text.parse::<i32>() {
        Ok(ms) => match u64::try_from(ms) {
            Ok(ms) => Pushback::After(Duration::from_millis(ms)),
            Err(_) => Pushback::DontRetry,
        },
        Err(_) => Pushback::DontRetry,
    }
}

/// The retry bookkeeping of one call: attempts made and the previous backoff (for
/// decorrelated jitter). Small and `Copy`; one per call, created when its first attempt
/// starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RetryState {
    attempts: u32,
    previous: Duration,
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

    /// The backoff drawn before the latest retry (zero before the first retry).
    #[must_use]
    pub const fn previous_backoff(&self) -> Duration {
        self.previous
    }

    /// Decides, at `now`, what to do after an attempt of `call` failed with `outcome`: retry
    /// at [`Retry::at`] with [`Retry::limits`], or give up for a [`GiveUp`] reason. The checks
    /// and their order are in the [module docs](self).
    ///
    /// On [`RetryDecision::Retry`] the state counts the retry and remembers its backoff, and
    /// one token has been taken from the call's budget (kept even if the retry is not made
    /// after all: see the [module docs](self)). On [`RetryDecision::GiveUp`] the state and
    /// the budget are untouched. Draws from `rng` only to jitter the backoff.
    ///
    /// Guarantees, for a retry: `at < deadline`; `limits.timeout >= floor`;
    /// `limits.timeout <= deadline.remaining(at) - reserve`; `limits.until <= deadline`; and
    /// `attempts() <= policy.retry.attempts()`.
    pub fn decide<R: Rng + ?Sized>(
        &mut self,
        call: &Call<'_>,
        outcome: Outcome,
        rng: &mut R,
        now: Instant,
    ) -> RetryDecision {
        let policy = call.policy;
        let pushback = match outcome {
            Outcome::Fatal => return RetryDecision::GiveUp(GiveUp::NotRetryable),
            Outcome::Pushback(Pushback::DontRetry) => {
                return RetryDecision::GiveUp(GiveUp::ServerSaidNo);
            }
            Outcome::Pushback(Pushback::After(d)) => d,
            Outcome::TimedOut | Outcome::Refused | Outcome::Failed => Duration::ZERO,
        };
        let may_have_run = matches!(outcome, Outcome::TimedOut | Outcome::Failed);
        if may_have_run && !policy.idempotent && !policy.retry.retry_non_idempotent {
            return RetryDecision::GiveUp(GiveUp::MayHaveRun);
        }
        if self.attempts >= policy.retry.attempts() {
            return RetryDecision::GiveUp(GiveUp::Exhausted);
        }
        let n = self.attempts.saturating_sub(1);
        let backoff = policy.retry.backoff.delay(n, self.previous, rng);
        let wait = backoff.max(pushback);
        let at = now.saturating_add(wait);
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
    /// The wait: the jittered backoff, or the server's pushback if that is longer.
    pub wait: Duration,
    /// The retry's limits, computed for a start at `at` ([`crate::call_timeout`]). A driver
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
    /// The failure is one a retry would not fix ([`Outcome::Fatal`]).
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
}
