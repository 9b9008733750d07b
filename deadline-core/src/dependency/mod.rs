//! [`Dependency`]: everything shared about one downstream dependency, as one `static`: its
//! policy, its retry-and-hedge budget, its circuit breaker, its counters and its live
//! latency histogram; and its one-line call ([`Dependency::run`]).

mod latency;
#[cfg(feature = "metrics")]
pub(crate) mod metrics;
mod record;
mod run;
mod steps;
#[cfg(feature = "advice")]
mod watch;

use core::marker::PhantomData;
use core::time::Duration;

use crate::breaker::{BreakerConfig, CircuitBreaker};
use crate::call_context::Call;
use crate::call_timeout::Limits;
use crate::counters::Counters;
use crate::deadline::Deadline;
use crate::drive::{AnyErrorFails, Attempt, DeadlineOnly, Full, Mode, Runtime};
use crate::latency::DependencyHistogram;
use latency::LiveLatency;
#[cfg(feature = "advice")]
use watch::LiveAdvice;

use crate::dependency_policy::Policy;
use crate::retry_budget::RetryBudget;

pub use record::Recorder;
pub use run::{Run, RunFuture, WithReport, WithReportFuture};
pub use steps::Steps;

/// One downstream dependency, shared by every request that calls it: its [`Policy`], its
/// retry-and-hedge [`RetryBudget`], its [`CircuitBreaker`] (if it has one), its
/// [`Counters`] and its live latency histogram ([`DependencyHistogram`]). Every setting is a
/// `const fn`, so a dependency is one `static`; a call to it is one line
/// ([`Dependency::run`]), and records itself. A `static`, never a `const`: each use of a
/// `const` is a new dependency, whose budget, breaker, counters and histogram start empty
/// (clippy's `declare_interior_mutable_const` says so too).
///
/// The runtime `Rt` is fixed with the type: `deadline_tokio::Dependency` (an alias of
/// `Dependency<'static, deadline_tokio::Tokio>`), `Dependency<deadline_std::Blocking>` on plain
/// threads, `Dependency<deadline_std::AsyncIo>` on async-std and smol,
/// `Dependency<deadline_embassy::Embassy>` on embassy. Application code written against an
/// alias of its own runs unchanged on another runtime.
///
/// ```
/// use deadline_core::virtual_time::ManualRuntime;
/// use deadline_core::{Dependency, ms, Policy};
/// use deadline_core::budget::RetryBudget;
///
/// static PRICING: Dependency<ManualRuntime> = Dependency::new(
///     Policy::required("pricing").idempotent().with_cap(ms(110)).with_floor(ms(30)).with_retries(2).with_hedge_at_p95(ms(60)),
/// )
/// .budget(RetryBudget::percent(10));
///
/// assert_eq!(PRICING.policy().name(), "pricing");
/// assert_eq!(PRICING.counters().snapshot().calls, 0);
/// ```
///
/// Its calls run in mode `M` ([`Mode`]): [`Full`] by default (retries, hedges, the budget and
/// the breaker, as configured), or [`DeadlineOnly`] for a dependency made with
/// [`Dependency::deadline_only`], whose calls make one attempt with its timeout from the time
/// left and carry none of the rest (no code linked for it, no room kept for it in the call's
/// future).
#[derive(Debug)]
pub struct Dependency<'n, Rt, M = Full> {
    policy: Policy<'n>,
    budget: Option<RetryBudget>,
    breaker: Option<CircuitBreaker>,
    counters: Counters,
    latency: LiveLatency,
    #[cfg(feature = "advice")]
    advice: LiveAdvice,
    runtime: PhantomData<fn() -> (Rt, M)>,
}

impl<'n, Rt> Dependency<'n, Rt> {
    /// Whether each call is also sent to the `metrics` facade (feature `metrics`). Such a
    /// call allocates the labels it sends; without the feature a call allocates nothing.
    pub const PUBLISHES_METRICS: bool = cfg!(feature = "metrics");

    /// The fewest latencies the histogram holds before a live hedge delay
    /// ([`Policy::with_hedge_at`](crate::Policy::with_hedge_at)) is read from it; until then
    /// the policy's fallback delay is used.
    pub const MIN_LIVE_SAMPLES: u32 = LiveLatency::MIN_SAMPLES;
    /// The live hedge delay is read from the histogram again after this many more
    /// latencies (reading it walks the histogram; a call reads the value kept).
    pub const LIVE_REFRESH: u32 = LiveLatency::REFRESH;
    /// The latency histogram is halved every this many latencies recorded.
    pub const LATENCY_HALF_LIFE: u32 = LiveLatency::HALF_LIFE;
    /// The live advice is checked every this many latencies recorded by a call (feature
    /// `advice`), with the one that halves the histogram, before it does: see
    /// [`Dependency::advice`].
    #[cfg(feature = "advice")]
    pub const ADVICE_EVERY: u32 = LiveAdvice::EVERY;

    /// The dependency called as `policy` says, with the default retry budget
    /// ([`RetryBudget::default`]: 10% extra calls, 10 per second whatever the traffic), no
    /// circuit breaker, and empty counters and histogram.
    ///
    /// # Panics
    ///
    /// When a setting of `policy` could never act; in a `static` or a `const`, that is a
    /// compile error. A cap under a microsecond, or a floor above the cap, would never make a
    /// call, a connect limit under a microsecond would refuse every connection, and a fixed
    /// hedge delay at or past the cap (or none set, with
    /// [`Policy::with_hedges`] alone) would come after every attempt had timed out. A live
    /// hedge delay's fallback may lie past the cap: it is used only until the histogram holds
    /// [`MIN_LIVE_SAMPLES`](Self::MIN_LIVE_SAMPLES) latencies, and the live quantile then
    /// replaces it. With an adaptive cap (feature `advice`), its bounds stand in for the cap.
    /// [`Policy::check`] names such a setting without the panic, for a policy read at run
    /// time.
    ///
    /// ```compile_fail
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, Policy, ms};
    ///
    /// static PRICING: Dependency<ManualRuntime> =
    ///     Dependency::new(Policy::required("pricing").with_cap(ms(20)).with_floor(ms(30)));
    /// ```
    ///
    /// ```compile_fail,E0080
    /// use core::time::Duration;
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, Policy};
    ///
    /// static PRICING: Dependency<ManualRuntime> =
    ///     Dependency::new(Policy::optional("pricing").with_cap(Duration::from_nanos(999)));
    /// ```
    ///
    /// ```compile_fail
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, Policy, ms};
    ///
    /// static PRICING: Dependency<ManualRuntime> =
    ///     Dependency::new(Policy::required("pricing").idempotent().with_cap(ms(110)).with_hedges(1));
    /// ```
    ///
    /// With a delay under the cap, fixed or live, it hedges:
    ///
    /// ```
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, Policy, ms};
    ///
    /// static PRICING: Dependency<ManualRuntime> = Dependency::new(
    ///     Policy::required("pricing").idempotent().with_cap(ms(110)).with_hedges(2).with_hedge_after(ms(60)),
    /// );
    /// static QUOTES: Dependency<ManualRuntime> = Dependency::new(
    ///     Policy::required("quotes").idempotent().with_cap(ms(110)).with_hedge_at_p95(ms(60)),
    /// );
    /// # let _ = (&PRICING, &QUOTES);
    /// ```
    #[must_use]
    pub const fn new(policy: Policy<'n>) -> Self {
        policy.assert_every_setting_acts(true);
        let policy = policy.sending_hedges_only();
        Dependency {
            policy,
            budget: Some(RetryBudget::percent(RetryBudget::DEFAULT_PERCENT)),
            breaker: None,
            counters: Counters::new(),
            latency: LiveLatency::new(),
            #[cfg(feature = "advice")]
            advice: LiveAdvice::new(&policy),
            runtime: PhantomData,
        }
    }

    /// The same dependency drawing its retries and hedges from `budget`, its own: each
    /// dependency keeps one. (A budget kept in a `const` and given to several dependencies is
    /// copied into each, not shared. For one budget across several kinds of call, give each
    /// call a `static` one with [`Call::with_budget`](crate::call::Call::with_budget) and
    /// drive it.)
    #[must_use]
    pub const fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The same dependency with no retry budget: its retries and hedges are limited by its
    /// policy alone.
    #[must_use]
    pub const fn no_budget(mut self) -> Self {
        self.budget = None;
        self
    }

    /// The same dependency behind a circuit breaker configured as `config`, asked before
    /// every attempt.
    #[must_use]
    pub const fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = Some(CircuitBreaker::new(config));
        self
    }

    /// The dependency called as `policy` says, one attempt per call and nothing else: each
    /// call's timeout comes from the time left (the policy's cap, floor and connect limit). A
    /// policy with retries or hedges is refused (they would never be made): that is
    /// [`Dependency::new`]'s, or the policy shared with one is given here with
    /// `.with_retries(0).with_hedges(0)`. It has no retry budget and no circuit breaker; it keeps its counters and latency histogram as any dependency does,
    /// but no live hedge delay. Its calls run the [`DeadlineOnly`] machine: none of the code
    /// for retries, hedges (the live delay's quantile included), backoff, the budget or the
    /// breaker is linked for them, and their futures keep no room for it.
    ///
    /// ```
    /// use deadline_core::drive::DeadlineOnly;
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, Policy, ms};
    ///
    /// static PRICING: Dependency<ManualRuntime, DeadlineOnly> =
    ///     Dependency::deadline_only(Policy::required("pricing").with_cap(ms(110)).with_floor(ms(30)));
    ///
    /// assert!(PRICING.retry_budget().is_none());
    /// ```
    ///
    /// # Panics
    ///
    /// When `policy`'s cap is under a microsecond or its floor is above its cap (no call would
    /// ever be made); with an adaptive cap, when its lower bound is, instead of the fixed cap;
    /// when its connect limit is under a microsecond (every connection would be refused); and
    /// then when it has retries or hedges, which a deadline-only call never makes. In a
    /// `static` or a `const`, that is a compile error:
    ///
    /// ```compile_fail
    /// use deadline_core::drive::DeadlineOnly;
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, Policy, ms};
    ///
    /// // Two retries that would never be made: refused.
    /// static PRICING: Dependency<ManualRuntime, DeadlineOnly> = Dependency::deadline_only(
    ///     Policy::required("pricing").idempotent().with_cap(ms(110)).with_retries(2),
    /// );
    /// ```
    ///
    /// [`Policy::check`] names the cap, floor and connect settings without the panic.
    #[must_use]
    pub const fn deadline_only(policy: Policy<'n>) -> Dependency<'n, Rt, DeadlineOnly> {
        policy.assert_every_setting_acts(false);
        assert!(
            policy.retry().attempts() <= 1 && policy.hedge().is_none(),
            "a deadline-only dependency makes one attempt per call, and this policy has retries \
             or hedges it would never make: use Dependency::new for them, or give the \
             deadline-only dependency the policy with .with_retries(0).with_hedges(0)"
        );
        let policy = policy.sending_hedges_only();
        Dependency {
            policy,
            budget: None,
            breaker: None,
            counters: Counters::new(),
            latency: LiveLatency::new(),
            #[cfg(feature = "advice")]
            advice: LiveAdvice::new(&policy),
            runtime: PhantomData,
        }
    }
}

impl<'n, Rt, M> Dependency<'n, Rt, M> {
    /// How it is called.
    #[must_use]
    pub const fn policy(&self) -> &Policy<'n> {
        &self.policy
    }

    /// Its name (the policy's).
    #[must_use]
    pub const fn name(&self) -> &'n str {
        self.policy.name
    }

    /// Its retry-and-hedge budget, if it has one.
    #[must_use]
    pub const fn retry_budget(&self) -> Option<&RetryBudget> {
        self.budget.as_ref()
    }

    /// Its circuit breaker, if it has one.
    #[must_use]
    pub const fn circuit_breaker(&self) -> Option<&CircuitBreaker> {
        self.breaker.as_ref()
    }

    /// Its counters: every call made through [`run`](Self::run) is recorded in them, once,
    /// when it ends, or when its future is dropped after it started (its caller went away:
    /// then with the timeouts, retries and hedges it made, and neither a success nor a
    /// deadline exceeded).
    #[must_use]
    pub const fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Its latency histogram, to read: each attempt that answers is recorded with its own
    /// latency, and each that times out with how long it ran, which it took at least (with
    /// feature `advice`, at the cap when the cap limited it and that came within 11 ms of
    /// it, at most half the cap:
    /// [`advice`](Self::advice)); it is halved every [`LATENCY_HALF_LIFE`](Self::LATENCY_HALF_LIFE) latencies,
    /// so that it follows what the dependency does now.
    /// Record into it with [`record_latency`](Self::record_latency), which keeps the live
    /// hedge delay up to date. (With feature `advice` the timed-out attempts are kept in a
    /// second histogram too, which emptying or halving this one leaves as it is, so that
    /// answers recorded after it in those buckets would read as timed out: to start over,
    /// make a new `Dependency`.)
    ///
    /// It is the default [`Histogram`](crate::observe::Histogram) on a target with 64-bit atomics, and
    /// the compact one on a microcontroller without them ([`DependencyHistogram`]).
    #[must_use]
    pub const fn latency(&self) -> &DependencyHistogram {
        self.latency.histogram()
    }

    /// Its latency histogram and the live hedge delay read from it.
    #[inline]
    pub(crate) const fn live_latency(&self) -> &LiveLatency {
        &self.latency
    }

    /// The [`Call`] of this dependency within `deadline`, keeping `reserve` after it, with its
    /// budget and breaker (and its adaptive cap, feature `advice`): for a driver of your own.
    #[must_use]
    #[inline]
    pub fn call(&self, deadline: Deadline, reserve: Duration) -> Call<'_> {
        let call = Call::new(&self.policy, deadline, reserve)
            .with_budget_opt(self.budget.as_ref())
            .with_breaker_opt(self.breaker.as_ref());
        #[cfg(feature = "advice")]
        if self.policy.is_adaptive() {
            return call.with_cap_micros(self.advice.cap_micros(&self.policy));
        }
        call
    }
}

/// The live timeout advice (feature `advice`).
#[cfg(feature = "advice")]
impl<'n, Rt, M> Dependency<'n, Rt, M> {
    /// The cap its calls get now: the policy's, or, with an adaptive cap
    /// ([`Policy::with_adaptive_cap`](crate::Policy::with_adaptive_cap)), where the advice
    /// moved it, within its bounds.
    #[must_use]
    pub fn cap(&self) -> Duration {
        self.advice.cap(&self.policy)
    }

    /// What its cap costs and what it should be, read now off its live latency histogram
    /// ([`Advice`](crate::advice::Advice)): the cap's kill fraction and the p50, p99 and
    /// p99.9, with the attempts that timed out (at the cap, or earlier at a caller's
    /// deadline) censored; the cap its stated false-timeout rate needs; its worst case
    /// against its slice. `None` while nothing is recorded. It walks the histogram (a few microseconds):
    /// call it from an exporter or a status page, not per call.
    ///
    /// Calls made through [`run`](Self::run) check it themselves every
    /// [`ADVICE_EVERY`](Self::ADVICE_EVERY) latencies, with the instant of the latest one
    /// (no clock is read): they move an adaptive cap; with feature `metrics` they set the
    /// gauges `deadline_kill_fraction`, `deadline_timed_out_fraction`,
    /// `deadline_suggested_cap_seconds` (the estimate, or the lower bound when the quantile
    /// lies beyond every answer) and `deadline_cap_seconds` (the cap in use once the check has
    /// moved an adaptive one), `+Inf` for no cap (label `dependency`); with feature
    /// `tracing`, while the cap kills more than its stated rate or its worst case does not
    /// fit its slice, they log a `WARN` at most once per
    /// [`interval`](crate::Policy::with_advice_interval). (A
    /// [`deadline_only`](Dependency::deadline_only) dependency's calls check nothing: its
    /// advice is read on demand, and an adaptive cap stays where its policy puts it.)
    ///
    /// How fast it follows a change: the histogram is halved every
    /// [`LATENCY_HALF_LIFE`](Self::LATENCY_HALF_LIFE) latencies (4 096), so the latencies of
    /// before a shift weigh half after each half-life. A new tail shows in the kill fraction
    /// at once and dominates it within two half-lives; a tail that goes away leaves the
    /// p99.9 only once it weighs under 0.1% of the histogram, which for a tail of 20% takes
    /// eight or nine half-lives (about 35 000 calls). The crate's test `advice_shift` shows
    /// both on virtual time.
    ///
    /// ```
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, Policy, ms};
    ///
    /// static PRICING: Dependency<ManualRuntime> = Dependency::new(
    ///     Policy::required("pricing").with_cap(ms(50)).with_cap_margin(ms(10)),
    /// );
    ///
    /// for n in 0..2_000u64 {
    ///     if n % 200 == 199 {
    ///         PRICING.record_timeout(ms(50)); // one call in two hundred is cut at the cap
    ///     } else {
    ///         PRICING.record_latency(ms(20 + n % 20));
    ///     }
    /// }
    /// let advice = PRICING.advice().unwrap();
    /// assert_eq!(advice.kill_fraction, 0.005); // 0.5% killed, over the stated 0.1%
    /// assert!(advice.kills_too_many);
    /// assert_eq!(advice.suggested_cap.estimate, None); // the p99.9 lies above the cap
    /// assert!(advice.p99.estimate.unwrap() < ms(41)); // the p99 does not
    /// ```
    #[must_use]
    pub fn advice(&self) -> Option<crate::advice::Advice> {
        let (histogram, timeouts) = self.latency.copies();
        crate::advice::Advice::assess(
            histogram.buckets(),
            timeouts.buckets(),
            &self.policy,
            self.cap(),
        )
    }

    /// Its counters, a copy of its latency histogram, its policy and the cap in use, as they
    /// are now ([`DependencySnapshot`](crate::observe::DependencySnapshot)), to export: with
    /// feature `serde` it serialises to JSON, which `deadline plan --live` reads.
    #[must_use]
    pub fn snapshot(&self) -> crate::snapshot::DependencySnapshot<'n> {
        crate::snapshot::DependencySnapshot::new(
            self.policy,
            self.cap(),
            self.counters.snapshot(),
            self.latency.copies(),
        )
    }

    /// Its policy and live advice, which its recorder checks.
    #[inline]
    pub(crate) const fn watch(&self) -> (&Policy<'n>, &LiveAdvice) {
        (&self.policy, &self.advice)
    }
}

impl<'n, Rt, M: Mode> Dependency<'n, Rt, M> {
    /// Records one attempt's latency (as each call does): into the histogram, and into the
    /// live hedge delay when it is due to be read again.
    pub fn record_latency(&self, latency: Duration) {
        let _ = self.latency.record(latency, self.live_quantile());
    }

    /// Records one attempt that timed out after `after`, an attempt its cap limited (as each
    /// call does for one; feature `advice`): into the histogram at `after`, a lower bound of
    /// its latency, and into the timeouts' histogram, as censored there (see
    /// [`advice`](Self::advice)); within 11 ms below the cap (at most half the cap), at the
    /// cap, as the cap's kill whose end came back a little before it (the next service
    /// answering that the cap's time it was told, the cap less the hop's allowance, ran out:
    /// a server on this library answers its reply margin before that). A call records an
    /// attempt its caller's nearer deadline limited where it ended, however near the cap.
    #[cfg(feature = "advice")]
    pub fn record_timeout(&self, after: Duration) {
        let cap = self.advice.cap(&self.policy);
        let at = LiveAdvice::timed_out_at(after, cap, true);
        self.latency.count_timeout(at);
        let _ = self.latency.record(at, self.live_quantile());
    }

    /// The hedge delay read from the live histogram, when the policy hedges at a quantile of
    /// it ([`Policy::with_hedge_at`](crate::Policy::with_hedge_at)) and at least [`MIN_LIVE_SAMPLES`](Dependency::MIN_LIVE_SAMPLES)
    /// latencies were recorded; `None` otherwise (the policy's fixed delay applies). It is
    /// the value read when the latest [`LIVE_REFRESH`](Dependency::LIVE_REFRESH) latencies
    /// began. Always `None` for a [`deadline_only`](Dependency::deadline_only) dependency, whose
    /// calls never hedge: it keeps no live delay, and links none of the code that reads one.
    #[must_use]
    #[inline]
    pub fn live_hedge_delay(&self) -> Option<Duration> {
        self.live_quantile()?;
        self.latency.delay()
    }

    /// The quantile of the live hedge delay, if the policy asks for one and the calls may
    /// hedge (not in [`DeadlineOnly`] mode: a constant, so that mode links no code for it).
    #[inline]
    pub(crate) const fn live_quantile(&self) -> Option<crate::quantile::Quantile> {
        if !M::FULL {
            return None;
        }
        match self.policy.hedge {
            Some(h) => h.live,
            None => None,
        }
    }

    /// Its recorder, for a driver of your own ([`Recorder`]): it records each attempt's
    /// latency as [`record_latency`](Self::record_latency) does; with feature `advice`, also
    /// each timeout as `record_timeout` does, checking the advice as [`run`](Self::run) does.
    #[must_use]
    pub fn recorder(&self) -> Recorder<'_> {
        Recorder::new(
            self.policy.name,
            &self.latency,
            self.live_quantile(),
            #[cfg(feature = "advice")]
            self.watch(),
        )
    }
}

impl<'n, Rt: Runtime, M: Mode> Dependency<'n, Rt, M> {
    /// One call to the dependency, run as its policy says, under the runtime's current
    /// deadline: `attempt` is invoked once per attempt (the first, each retry, each hedge)
    /// with that attempt's limits, inside the attempt's own scope, so the function itself
    /// and every call it makes see the attempt's deadline.
    ///
    /// Adjust the call before awaiting it: [`reserve`](Run::reserve) (the time kept for the
    /// work after it), [`in_plan`](Run::in_plan) (the reserve from a request's plan),
    /// [`classify`](Run::classify) (by default every `Err` is a failure worth retrying, as
    /// the policy allows), [`rng`](Run::rng) (the backoff's jitter, by default the runtime's
    /// source, seeded from entropy; not for a deadline-only dependency, which has no
    /// backoff), [`deadline`](Run::deadline), [`report`](Run::report).
    ///
    /// Awaited, it gives `Result<T, CallError<E>>`, and records the call in the
    /// dependency's counters and histogram.
    pub fn run<A, F>(&self, attempt: A) -> Run<'_, 'n, Rt, A, AnyErrorFails, Rt::Rng, M>
    where
        A: FnMut(Limits) -> F,
        F: core::future::Future,
    {
        Run::new(self, attempt, AnyErrorFails, Rt::rng())
    }

    /// [`run`](Self::run) with an attempt that is any [`Attempt`], not only a closure: a type
    /// of your own that starts each attempt, for code that must name the call's future
    /// ([`RunFuture`]) in a type, such as a tower service's `Future`, which a closure's type
    /// cannot appear in. Everything else is as for [`run`](Self::run).
    ///
    /// ```
    /// use deadline_core::drive::Attempt;
    /// use deadline_core::virtual_time::ManualRuntime;
    /// use deadline_core::{Dependency, ms, Policy};
    /// use deadline_core::call::Limits;
    ///
    /// static PRICING: Dependency<ManualRuntime> =
    ///     Dependency::new(Policy::required("pricing").with_cap(ms(110)).with_floor(ms(30)));
    ///
    /// /// Answers with its attempt's timeout.
    /// struct Timeout;
    ///
    /// impl Attempt for Timeout {
    ///     type Future = core::future::Ready<Result<core::time::Duration, ()>>;
    ///
    ///     fn start(&mut self, limits: Limits) -> Self::Future {
    ///         core::future::ready(Ok(limits.timeout()))
    ///     }
    /// }
    ///
    /// let call = ManualRuntime::block_on(async { PRICING.run_attempt(Timeout).await });
    /// assert_eq!(call, Ok(Ok(ms(110))));
    /// ```
    pub fn run_attempt<A: Attempt>(
        &self,
        attempt: A,
    ) -> Run<'_, 'n, Rt, A, AnyErrorFails, Rt::Rng, M> {
        Run::new(self, attempt, AnyErrorFails, Rt::rng())
    }
}
