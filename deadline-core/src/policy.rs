//! [`Policy`]: how one dependency is called: cap, floor, required or optional, idempotent,
//! connect limit, retries and hedging, each set by name.

use core::time::Duration;

use crate::backoff::Backoff;
use crate::quantile::Quantile;
use crate::time::{duration_to_micros, duration_to_micros_ceil, micros_to_duration};

/// `micros` as a [`Duration`], with `u64::MAX` (no bound) as [`Duration::MAX`].
const fn unbounded_or_duration(micros: u64) -> Duration {
    if micros == u64::MAX {
        Duration::MAX
    } else {
        micros_to_duration(micros)
    }
}

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
/// Start from [`Policy::required`] or [`Policy::optional`] with the dependency's name, then
/// set each number by name; every setting is a `const fn`, so a policy can be a `static`.
/// Document where each number comes from: `cap` from the p99.9 plus a margin, `floor` from
/// the p50.
///
/// ```
/// use deadline_core::{Backoff, Jitter, Policy, ms};
///
/// // Pricing: p50 30 ms, p99.9 90 ms; cap = p99.9 + 20 ms margin.
/// static PRICING: Policy = Policy::required("pricing")
///     .cap(ms(110))
///     .floor(ms(30))
///     .connect(ms(5))
///     .retries(2)
///     .backoff(Backoff::exponential(ms(10)).max(ms(40)).jitter(Jitter::Full))
///     .hedge_after(ms(60))
///     .idempotent();
/// assert_eq!(PRICING.get_cap(), ms(110));
/// assert_eq!(PRICING.retry.attempts(), 3);
/// assert_eq!(PRICING.hedge.map(|h| h.max_hedges), Some(1));
/// ```
///
/// The name is borrowed, not `'static`: a policy built from configuration borrows its name
/// from the configuration it was read from.
///
/// ```
/// use deadline_core::{Policy, ms};
///
/// let config = String::from("inventory");
/// let policy = Policy::optional(&config).cap(ms(60)).floor(ms(25));
/// assert_eq!(policy.name, "inventory");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Policy<'n> {
    /// A name for traces, metrics and errors.
    pub name: &'n str,
    /// The cap ([`get_cap`](Policy::get_cap)) in whole microseconds, rounded down;
    /// `u64::MAX` for none.
    cap_us: u64,
    /// The floor ([`get_floor`](Policy::get_floor)) in whole microseconds, rounded up.
    floor_us: u64,
    /// Required, or optional with a fallback.
    pub necessity: Necessity,
    /// Whether a repeated call is safe; `false` unless set ([`Policy::idempotent`]). A call
    /// that is not idempotent is never hedged, and is retried only when the failed attempt
    /// cannot have run on the server (a refused connection, a server's pushback), unless
    /// [`RetryPolicy::retry_non_idempotent`] allows retries after a timeout or a server
    /// failure too.
    pub idempotent: bool,
    /// The connect limit ([`get_connect`](Policy::get_connect)) in whole microseconds,
    /// rounded down; `u64::MAX` for the same as the timeout.
    connect_us: u64,
    /// Retries: attempts, backoff, and what may be retried.
    pub retry: RetryPolicy,
    /// Hedged requests, if any.
    pub hedge: Option<HedgePolicy>,
}

impl<'n> Policy<'n> {
    /// A required dependency named `name`: the request fails without it. No cap (an attempt
    /// gets all the time left) and no floor until they are set; not idempotent (see
    /// [`Policy::idempotent`]), no retries (and [`Backoff::DEFAULT`] between them once
    /// [`retries`](Policy::retries) allows some), no hedging, no separate connect limit.
    #[must_use]
    pub const fn required(name: &'n str) -> Self {
        Policy {
            name,
            cap_us: u64::MAX,
            floor_us: 0,
            necessity: Necessity::Required,
            idempotent: false,
            connect_us: u64::MAX,
            retry: RetryPolicy::new(1, Backoff::DEFAULT),
            hedge: None,
        }
    }

    /// An optional dependency named `name` (the request has a fallback); otherwise as
    /// [`Policy::required`].
    #[must_use]
    pub const fn optional(name: &'n str) -> Self {
        Policy::required(name).necessity(Necessity::Optional)
    }

    /// The same policy with the longest wait for one attempt set to `cap`, in whole
    /// microseconds (rounded down). Pick it from an acceptable rate of false timeouts: p99.9
    /// plus a margin for a rate of 0.1%. [`Duration::MAX`] (the default) means no cap: an
    /// attempt gets all the time left.
    #[must_use]
    pub const fn cap(mut self, cap: Duration) -> Self {
        self.cap_us = duration_to_micros(cap);
        self
    }

    /// The same policy with the shortest timeout worth calling with set to `floor`, in whole
    /// microseconds (rounded up), for example the p50. Under it the call is not made: an
    /// optional call is skipped, a required one fails at once. Zero by default.
    #[must_use]
    pub const fn floor(mut self, floor: Duration) -> Self {
        self.floor_us = duration_to_micros_ceil(floor);
        self
    }

    /// The longest wait for one attempt ([`cap`](Policy::cap)); [`Duration::MAX`] for none.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::{Policy, ms};
    ///
    /// assert_eq!(Policy::required("B").cap(ms(110)).get_cap(), ms(110));
    /// assert_eq!(Policy::required("B").get_cap(), Duration::MAX);
    /// // Whole microseconds: a cap rounds down, a floor up.
    /// let p = Policy::required("B").cap(Duration::from_nanos(1_500)).floor(Duration::from_nanos(1_500));
    /// assert_eq!((p.get_cap(), p.get_floor()), (Duration::from_micros(1), Duration::from_micros(2)));
    /// ```
    #[must_use]
    pub const fn get_cap(&self) -> Duration {
        unbounded_or_duration(self.cap_us)
    }

    /// The shortest timeout worth calling with ([`floor`](Policy::floor)).
    #[must_use]
    pub const fn get_floor(&self) -> Duration {
        micros_to_duration(self.floor_us)
    }

    /// The connect limit ([`connect`](Policy::connect)); [`Duration::MAX`] for the same as
    /// the timeout.
    #[must_use]
    pub const fn get_connect(&self) -> Duration {
        unbounded_or_duration(self.connect_us)
    }

    /// The cap in whole microseconds; `u64::MAX` for none.
    #[inline(always)]
    pub(crate) const fn cap_micros(&self) -> u64 {
        self.cap_us
    }

    /// The floor in whole microseconds.
    #[inline(always)]
    pub(crate) const fn floor_micros(&self) -> u64 {
        self.floor_us
    }

    /// The connect limit in whole microseconds; `u64::MAX` for the same as the timeout.
    #[inline(always)]
    pub(crate) const fn connect_micros(&self) -> u64 {
        self.connect_us
    }

    /// The same policy with another necessity.
    #[must_use]
    pub const fn necessity(mut self, necessity: Necessity) -> Self {
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
    /// static PROFILE: Policy = Policy::required("profile")
    ///     .cap(ms(50))
    ///     .retries(1)
    ///     .backoff(Backoff::constant(ms(5)))
    ///     .idempotent();
    /// assert!(PROFILE.idempotent);
    /// assert!(!Policy::required("checkout").idempotent);
    /// ```
    #[must_use]
    pub const fn idempotent(self) -> Self {
        self.with_idempotent(true)
    }

    /// The same policy, marked idempotent or not (for a flag read from configuration).
    #[must_use]
    pub const fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// The same policy with a connect limit apart from the read limit, in whole
    /// microseconds (rounded down): reaching the server should take milliseconds, so this is
    /// short. The connect limit handed out is never more than the call's timeout.
    /// [`Duration::MAX`] (the default) means "the same as the timeout".
    #[must_use]
    pub const fn connect(mut self, connect: Duration) -> Self {
        self.connect_us = duration_to_micros(connect);
        self
    }

    /// The same policy with these retries.
    #[must_use]
    pub const fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same policy with `attempts` attempts in all (the first plus `attempts - 1`
    /// retries); 0 is read as 1.
    #[must_use]
    pub const fn attempts(mut self, attempts: u32) -> Self {
        self.retry.max_attempts = attempts;
        self
    }

    /// The same policy with up to `retries` retries after the first attempt.
    #[must_use]
    pub const fn retries(self, retries: u32) -> Self {
        self.attempts(retries.saturating_add(1))
    }

    /// The same policy with `backoff` as the wait before each retry.
    #[must_use]
    pub const fn backoff(mut self, backoff: Backoff) -> Self {
        self.retry.backoff = backoff;
        self
    }

    /// The same policy with hedged requests as `hedge` says.
    #[must_use]
    pub const fn hedge(mut self, hedge: HedgePolicy) -> Self {
        self.hedge = Some(hedge);
        self
    }

    /// The same policy, sending one hedged copy after `delay` (or as many as
    /// [`Policy::hedges`] says) while the first attempt still runs.
    #[must_use]
    pub const fn hedge_after(mut self, delay: Duration) -> Self {
        self.hedge = Some(match self.hedge {
            Some(h) => HedgePolicy { delay, ..h },
            None => HedgePolicy::new(delay, 1),
        });
        self
    }

    /// The same policy, hedging after the `quantile` of the dependency's live latency
    /// histogram (a [`Dependency`](crate::Dependency) keeps one), or after `fallback` while
    /// the histogram holds too few samples to tell.
    ///
    /// ```
    /// use deadline_core::{Policy, Quantile, ms};
    ///
    /// let p = Policy::required("pricing").hedge_at(Quantile::P95, ms(40)).idempotent();
    /// assert_eq!(p.hedge.and_then(|h| h.live), Some(Quantile::P95));
    /// ```
    #[must_use]
    pub const fn hedge_at(self, quantile: Quantile, fallback: Duration) -> Self {
        let mut p = self.hedge_after(fallback);
        if let Some(h) = &mut p.hedge {
            h.live = Some(quantile);
        }
        p
    }

    /// The same policy, hedging after the p95 of the dependency's live latency histogram
    /// (a copy for about one call in twenty, sent only for the calls already slower than 95%
    /// of their peers), or after `fallback` while the histogram holds too few samples:
    /// [`hedge_at`](Policy::hedge_at) with [`Quantile::P95`].
    #[must_use]
    pub const fn hedge_at_p95(self, fallback: Duration) -> Self {
        self.hedge_at(Quantile::P95, fallback)
    }

    /// The same policy with up to `hedges` hedged copies per call (after the delay of
    /// [`Policy::hedge_after`], or the policy's current one); 0 turns hedging off.
    #[must_use]
    pub const fn hedges(mut self, hedges: u32) -> Self {
        self.hedge = match (self.hedge, hedges) {
            (_, 0) => None,
            (Some(h), n) => Some(HedgePolicy { max_hedges: n, ..h }),
            (None, n) => Some(HedgePolicy::new(self.get_cap(), n)),
        };
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
/// let r = RetryPolicy::new(3, Backoff::exponential(ms(10)).max(ms(100)).jitter(Jitter::Full))
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
    /// Hedge after this quantile of the dependency's live latency histogram instead of
    /// `delay`, once it holds enough samples ([`Dependency`](crate::Dependency) reads it at
    /// the start of each call); `None` for the fixed delay.
    pub live: Option<Quantile>,
}

impl HedgePolicy {
    /// Send up to `max_hedges` copies, the first after `delay`.
    #[must_use]
    pub const fn new(delay: Duration, max_hedges: u32) -> Self {
        HedgePolicy {
            delay,
            max_hedges,
            live: None,
        }
    }

    /// The same policy, hedging after `quantile` of the live latency histogram when there
    /// is one with enough samples (see [`HedgePolicy::live`]).
    #[must_use]
    pub const fn live(mut self, quantile: Quantile) -> Self {
        self.live = Some(quantile);
        self
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
