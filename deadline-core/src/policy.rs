//! [`Policy`]: how one dependency is called: cap, floor, required or optional, idempotent,
//! connect limit, retries and hedging.

use core::time::Duration;

use crate::backoff::Backoff;

/// Whether the request can do without a dependency's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Necessity {
    /// The request fails without it. Its floor is reserved by every earlier call, and when its
    /// own timeout would fall under the floor the request fails at once, uncalled.
    Required,
    /// The request has a fallback (a default, a cached or a partial answer). Earlier calls
    /// reserve nothing for it, and when its timeout would fall under the floor it is skipped.
    Optional,
}

/// How one dependency is called.
///
/// Build one with [`Policy::required`] or [`Policy::optional`] (both `const`, so a table of
/// policies can be a `static`), then adjust it with the `with_*` methods. Document where each
/// number comes from: `cap` from the p99.9 plus a margin, `floor` from the
/// p50 ([`Policy::from_latency`] does this arithmetic).
///
/// ```
/// use deadline_core::{Policy, ms};
///
/// // B: p50 30 ms, p99.9 90 ms; cap = p99.9 + 20 ms margin.
/// static B: Policy = Policy::from_latency("B", ms(30), ms(90), ms(20)).with_connect(ms(5));
/// assert_eq!(B.cap, ms(110));
/// assert_eq!(B.floor, ms(30));
/// assert_eq!(B.connect, ms(5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Policy {
    /// A name for traces, metrics and errors.
    pub name: &'static str,
    /// The longest we wait for one attempt, even when more time is left. Pick it from an
    /// acceptable rate of false timeouts: p99.9 plus a margin for a rate of 0.1%.
    pub cap: Duration,
    /// The shortest timeout worth calling with (for example the p50). Under it the call is not
    /// made: an optional call is skipped, a required one fails at once.
    pub floor: Duration,
    /// Required, or optional with a fallback.
    pub necessity: Necessity,
    /// Whether a repeated call is safe; `false` unless set ([`Policy::idempotent`]). A call
    /// that is not idempotent is never hedged, and is retried only when the failed attempt
    /// cannot have run on the server (a refused connection, a server's pushback), unless
    /// [`RetryPolicy::retry_non_idempotent`] allows retries after a timeout or a server
    /// failure too.
    pub idempotent: bool,
    /// The connect limit, kept apart from the read limit: reaching the server should take
    /// milliseconds, so this is short. The connect limit handed out is never more than the
    /// call's timeout. [`Duration::MAX`] means "the same as the timeout".
    pub connect: Duration,
    /// Retries: attempts, backoff, and what may be retried.
    pub retry: RetryPolicy,
    /// Hedged requests, if any.
    pub hedge: Option<HedgePolicy>,
}

impl Policy {
    /// A required dependency: not idempotent (see [`Policy::idempotent`]), no retries, no
    /// hedging, no separate connect limit.
    #[must_use]
    pub const fn required(name: &'static str, cap: Duration, floor: Duration) -> Self {
        Policy {
            name,
            cap,
            floor,
            necessity: Necessity::Required,
            idempotent: false,
            connect: Duration::MAX,
            retry: RetryPolicy::NONE,
            hedge: None,
        }
    }

    /// An optional dependency (it has a fallback): not idempotent, no retries, no hedging.
    #[must_use]
    pub const fn optional(name: &'static str, cap: Duration, floor: Duration) -> Self {
        Policy::required(name, cap, floor).with_necessity(Necessity::Optional)
    }

    /// A required dependency sized from measured latency: `cap = p999 + margin` (saturating),
    /// `floor = p50`.
    #[must_use]
    pub const fn from_latency(
        name: &'static str,
        p50: Duration,
        p999: Duration,
        margin: Duration,
    ) -> Self {
        Policy::required(name, p999.saturating_add(margin), p50)
    }

    /// The same policy with another necessity.
    #[must_use]
    pub const fn with_necessity(mut self, necessity: Necessity) -> Self {
        self.necessity = necessity;
        self
    }

    /// The same policy, marked idempotent: repeating the call is safe (a read, or a write
    /// with an idempotency key), so it may be retried after a timeout or a server failure,
    /// and hedged. Policies are not idempotent until they say so.
    ///
    /// ```
    /// use deadline_core::{Backoff, Policy, ms};
    ///
    /// static PROFILE: Policy = Policy::required("profile", ms(50), ms(10))
    ///     .with_attempts(2, Backoff::constant(ms(5)))
    ///     .idempotent();
    /// assert!(PROFILE.idempotent);
    /// assert!(!Policy::required("checkout", ms(50), ms(10)).idempotent);
    /// ```
    #[must_use]
    pub const fn idempotent(self) -> Self {
        self.with_idempotent(true)
    }

    /// The same policy, marked idempotent or not.
    #[must_use]
    pub const fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// The same policy with a connect limit apart from the read limit.
    #[must_use]
    pub const fn with_connect(mut self, connect: Duration) -> Self {
        self.connect = connect;
        self
    }

    /// The same policy with retries.
    #[must_use]
    pub const fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same policy with `attempts` attempts in all (the first plus `attempts - 1`
    /// retries) and the given backoff between them.
    #[must_use]
    pub const fn with_attempts(mut self, attempts: u32, backoff: Backoff) -> Self {
        self.retry = RetryPolicy::new(attempts, backoff);
        self
    }

    /// The same policy with hedged requests.
    #[must_use]
    pub const fn with_hedge(mut self, hedge: HedgePolicy) -> Self {
        self.hedge = Some(hedge);
        self
    }

    /// Whether the request fails without this dependency.
    #[must_use]
    pub const fn is_required(&self) -> bool {
        matches!(self.necessity, Necessity::Required)
    }
}

/// How a dependency's calls are retried.
///
/// ```
/// use deadline_core::{Backoff, Jitter, RetryPolicy, ms};
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
    /// server and run ([`Outcome::TimedOut`](crate::Outcome::TimedOut), [`Outcome::Failed`](crate::Outcome::Failed)).
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

/// How a dependency's calls are hedged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct HedgePolicy {
    /// How long an attempt runs before a copy is sent (the dependency's p95), unless a live
    /// value is passed to the decision.
    pub delay: Duration,
    /// The most copies sent per call besides its attempts (0: no hedging).
    pub max_hedges: u32,
}

impl HedgePolicy {
    /// Send up to `max_hedges` copies, the first after `delay`.
    #[must_use]
    pub const fn new(delay: Duration, max_hedges: u32) -> Self {
        HedgePolicy { delay, max_hedges }
    }

    /// The delay to use: `live` if there is one (such as a p95 read from a live histogram),
    /// else the fixed [`delay`](Self::delay).
    #[must_use]
    pub const fn delay_with(&self, live: Option<Duration>) -> Duration {
        match live {
            Some(d) => d,
            None => self.delay,
        }
    }
}
