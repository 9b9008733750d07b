//! [`Call`]: one dependency call of one request, the context every decision about its
//! attempts takes.

use core::time::Duration;

use crate::breaker::CircuitBreaker;
use crate::call_timeout::Decision;
#[cfg(feature = "advice")]
use crate::call_timeout::decide_capped;
#[cfg(not(feature = "advice"))]
use crate::call_timeout::decide_micros;
use crate::deadline::Deadline;
use crate::dependency_policy::Policy;
use crate::retry_budget::RetryBudget;
use crate::time::{Instant, duration_to_micros_ceil, micros_to_duration};

/// One dependency call of one request: what every decision about its attempts needs besides
/// `now`. It is `Copy`; build it once per call.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::budget::RetryBudget;
/// use deadline_core::call::Call;
///
/// let a = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
/// let budget = RetryBudget::percent(10).with_floor_per_sec(5);
/// let call = Call::new(&a, Deadline::after(Instant::ZERO, ms(200)), ms(50)).with_budget(&budget);
/// // call_timeout at now: min(200 - 0 - 50, 50) = 50.
/// assert_eq!(call.decide(Instant::ZERO).timeout(), Some(ms(50)));
/// ```
///
/// With a circuit breaker ([`Call::with_breaker`]), a driver asks it for leave before every
/// attempt (the first, each retry and each hedge) and reports every attempt's result to it.
/// The decisions of this module do not consult it: [`RetryState::decide`](crate::call::RetryState::decide) answers as if it
/// were closed, and the driver asks the breaker at the instant the retry starts.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Call<'a> {
    /// The dependency's policy.
    pub policy: &'a Policy<'a>,
    /// The request's deadline.
    pub deadline: Deadline,
    /// The time the caller needs after this call returns ([`reserve`](Call::reserve)), in
    /// whole microseconds, rounded up.
    reserve_us: u64,
    /// The retry-and-hedge budget that retries and hedges draw from; `None` for no budget.
    pub budget: Option<&'a RetryBudget>,
    /// The dependency's circuit breaker, asked before every attempt; `None` for no breaker.
    pub breaker: Option<&'a CircuitBreaker>,
    /// The cap each attempt gets at most, in whole microseconds: the policy's, or a
    /// dependency's adaptive cap (feature `advice`).
    #[cfg(feature = "advice")]
    cap_us: u64,
}

impl<'a> Call<'a> {
    /// A call to the dependency of `policy` within `deadline`, leaving `reserve` after it,
    /// with no retry budget.
    #[must_use]
    #[inline]
    pub const fn new(policy: &'a Policy<'a>, deadline: Deadline, reserve: Duration) -> Self {
        Call {
            policy,
            deadline,
            reserve_us: duration_to_micros_ceil(reserve),
            budget: None,
            breaker: None,
            #[cfg(feature = "advice")]
            cap_us: policy.cap_micros(),
        }
    }

    /// The same call with a cap of `cap_us` whole microseconds in place of its policy's (a
    /// dependency's adaptive cap).
    #[cfg(feature = "advice")]
    #[must_use]
    #[inline]
    pub(crate) const fn with_cap_micros(mut self, cap_us: u64) -> Self {
        self.cap_us = cap_us;
        self
    }

    /// The cap each attempt gets at most: the policy's, or the adaptive cap a
    /// [`Dependency`](crate::Dependency) gave the call (feature `advice`).
    #[must_use]
    pub const fn cap(&self) -> Duration {
        let cap_us = self.cap_micros();
        if cap_us == u64::MAX {
            Duration::MAX
        } else {
            micros_to_duration(cap_us)
        }
    }

    /// [`cap`](Self::cap) in whole microseconds (`u64::MAX` for none).
    #[must_use]
    pub(crate) const fn cap_micros(&self) -> u64 {
        #[cfg(feature = "advice")]
        let cap_us = self.cap_us;
        #[cfg(not(feature = "advice"))]
        let cap_us = self.policy.cap_micros();
        cap_us
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

    /// The time the caller needs after this call returns (see [`crate::call::call_timeout`]), in
    /// whole microseconds (rounded up).
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::{Deadline, Instant, ms, Policy};
    /// use deadline_core::call::{Call, call_timeout};
    ///
    /// let b = Policy::required("B");
    /// let deadline = Deadline::after(Instant::ZERO, ms(200));
    /// let call = Call::new(&b, deadline, Duration::from_nanos(20_000_001));
    /// assert_eq!(call.reserve(), Duration::from_micros(20_001));
    /// // The same decision as `call_timeout` with the reserve as given.
    /// let now = Instant::from_millis(10);
    /// assert_eq!(call.decide(now), call_timeout(&b, deadline, Duration::from_nanos(20_000_001), now));
    /// assert_eq!(call.decide(now).timeout(), Some(Duration::from_micros(169_999)));
    /// ```
    #[must_use]
    pub const fn reserve(&self) -> Duration {
        micros_to_duration(self.reserve_us)
    }

    /// The decision for an attempt starting at `now`: [`call_timeout`](crate::call::call_timeout) with this call's
    /// policy, deadline and reserve.
    pub fn decide(&self, now: Instant) -> Decision {
        #[cfg(feature = "advice")]
        return decide_capped(
            self.policy,
            self.cap_us,
            self.deadline,
            self.reserve_us,
            now,
        );
        #[cfg(not(feature = "advice"))]
        decide_micros(self.policy, self.deadline, self.reserve_us, now)
    }

    /// Asks the budget for one retry or hedge at `now`; `true` when there is no budget.
    #[must_use]
    pub fn withdraw(&self, now: Instant) -> bool {
        self.budget.is_none_or(|b| b.try_withdraw(now))
    }

    /// Records one original call in the budget at `now` (nothing when there is no budget).
    #[inline]
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
            self.reserve_us,
            self.budget.is_some(),
            self.breaker.is_some()
        );
    }
}
