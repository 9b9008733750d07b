//! [`Policy`]: how one dependency is called: cap, floor, required or optional, idempotent,
//! connect limit, retries and hedging.

use core::time::Duration;

use crate::backoff::Backoff;
use crate::hedge::HedgePolicy;
use crate::retry::RetryPolicy;

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
    /// use deadline_core::backoff::Backoff;
    /// use deadline_core::{Policy, ms};
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
