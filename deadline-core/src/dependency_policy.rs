//! [`Policy`]: how one dependency is called: cap, floor, required or optional, whether a call
//! may be repeated, connect limit, retries and hedging, each set by name.

use core::time::Duration;

use crate::backoff::Backoff;
use crate::policy_error::PolicyError;
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

/// Whether a call may be repeated: what a policy must say before it retries or hedges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Idempotence {
    /// Not said. A policy that says nothing makes one attempt: it cannot retry or hedge
    /// ([`Policy::with_retries`] and the hedge settings do not compile on it in a `static` or
    /// a `const`, and panic at run time).
    Unstated,
    /// Repeating the call is safe (a read, or a write with an idempotency key): any failure
    /// may be retried, and the call may be hedged.
    Idempotent,
    /// The call must not run twice: only an attempt that provably never reached the server
    /// is retried (a refused connection, a server's pushback); it is never hedged.
    NotIdempotent,
}

/// How one dependency is called.
///
/// Start from [`Policy::required`] or [`Policy::optional`] with the dependency's name, then
/// set each number by name; every setting is a `const fn`, so a policy can be a `static`.
/// Document where each number comes from: the cap from the p99.9 plus a margin, the floor
/// from the p50.
///
/// **Retries and hedges need a word on idempotence first.** [`with_retries`](Self::with_retries)
/// and the hedge settings come after [`idempotent`](Self::idempotent) (any failure may be
/// retried, and the call hedged) or [`not_idempotent`](Self::not_idempotent) (only an attempt
/// that never reached the server is retried; never hedged). Without it a `static` policy
/// does not compile, rather than retry nothing in silence:
///
/// ```compile_fail,E0080
/// use deadline_core::{Policy, ms};
///
/// // error: "retries need the policy to say whether a call may be repeated ..."
/// static FLAKY: Policy = Policy::required("flaky").with_cap(ms(100)).with_retries(5);
/// ```
///
/// ```
/// use deadline_core::policy::{Backoff, Jitter};
/// use deadline_core::{Policy, ms};
///
/// // Pricing: p50 30 ms, p99.9 90 ms; cap = p99.9 + 20 ms margin.
/// static PRICING: Policy = Policy::required("pricing")
///     .idempotent()
///     .with_cap(ms(110))
///     .with_floor(ms(30))
///     .with_connect(ms(5))
///     .with_retries(2)
///     .with_backoff(Backoff::exponential(ms(10)).with_max(ms(40)).with_jitter(Jitter::Full))
///     .with_hedge_after(ms(60));
/// assert_eq!(PRICING.cap(), ms(110));
/// assert_eq!(PRICING.retry().attempts(), 3);
/// assert_eq!(PRICING.hedge().map(|h| h.max_hedges()), Some(1));
///
/// // The name is borrowed: a policy built from configuration borrows it from there.
/// let config = String::from("inventory");
/// let policy = Policy::optional(&config).with_cap(ms(60)).with_floor(ms(25));
/// assert_eq!(policy.name(), "inventory");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Policy<'n> {
    pub(crate) name: &'n str,
    /// The cap in whole microseconds, rounded down; `u64::MAX` for none.
    cap_us: u64,
    /// The floor in whole microseconds, rounded up.
    floor_us: u64,
    pub(crate) necessity: Necessity,
    pub(crate) idempotence: Idempotence,
    /// The connect limit in whole microseconds, rounded down; `u64::MAX` for the same as the
    /// timeout.
    connect_us: u64,
    pub(crate) retry: RetryPolicy,
    pub(crate) hedge: Option<HedgePolicy>,
    /// What the live advice measures the cap against (feature `advice`).
    #[cfg(feature = "advice")]
    advice: AdvicePolicy,
}

impl<'n> Policy<'n> {
    /// A required dependency named `name`: the request fails without it. No cap (an attempt
    /// gets all the time left) and no floor until they are set; idempotence not said (see
    /// [`Policy::idempotent`]), no retries ([`Backoff::DEFAULT`] between them once
    /// [`with_retries`](Policy::with_retries) allows some), no hedging, no separate connect
    /// limit.
    #[must_use]
    pub const fn required(name: &'n str) -> Self {
        Policy {
            name,
            cap_us: u64::MAX,
            floor_us: 0,
            necessity: Necessity::Required,
            idempotence: Idempotence::Unstated,
            connect_us: u64::MAX,
            retry: RetryPolicy::new(1, Backoff::DEFAULT),
            hedge: None,
            #[cfg(feature = "advice")]
            advice: AdvicePolicy::DEFAULT,
        }
    }

    /// An optional dependency named `name` (the request has a fallback); otherwise as
    /// [`Policy::required`].
    #[must_use]
    pub const fn optional(name: &'n str) -> Self {
        Policy::required(name).with_necessity(Necessity::Optional)
    }

    /// The same policy with the longest wait for one attempt set to `cap`, in whole
    /// microseconds (rounded down). Pick it from an acceptable rate of false timeouts: p99.9
    /// and a margin.
    #[must_use]
    pub const fn with_cap(mut self, cap: Duration) -> Self {
        self.cap_us = duration_to_micros(cap);
        self
    }

    /// The same policy with the shortest timeout worth calling with set to `floor`, in whole
    /// microseconds (rounded up): a call whose timeout would be shorter is not made (skipped
    /// if optional, the request failed at once if required). Pick it from the p50: with less
    /// time than that, most calls would time out anyway.
    #[must_use]
    pub const fn with_floor(mut self, floor: Duration) -> Self {
        self.floor_us = duration_to_micros_ceil(floor);
        self
    }

    /// The same policy with a connect limit apart from the read limit, in whole
    /// microseconds (rounded down): reaching the server should take milliseconds, so this is
    /// short. The connect limit handed out is never more than the call's timeout.
    /// [`Duration::MAX`] (the default) means "the same as the timeout". One under a
    /// microsecond would refuse every connection: [`check`](Self::check) names it, and a
    /// [`Dependency`](crate::Dependency) refuses it.
    #[must_use]
    pub const fn with_connect(mut self, connect: Duration) -> Self {
        self.connect_us = duration_to_micros(connect);
        self
    }

    /// The same policy, required or optional as `necessity` says (for a policy read from
    /// configuration; [`Policy::required`] and [`Policy::optional`] say it at the start).
    #[must_use]
    pub const fn with_necessity(mut self, necessity: Necessity) -> Self {
        self.necessity = necessity;
        self
    }

    /// The same policy, saying that repeating a call is safe (a read, or a write with an
    /// idempotency key): it may be retried after a timeout or a server failure, and hedged.
    #[must_use]
    pub const fn idempotent(mut self) -> Self {
        self.idempotence = Idempotence::Idempotent;
        self
    }

    /// The same policy, saying that a call must not run twice: it is retried only when the
    /// failed attempt provably never reached the server (a refused connection, a server's
    /// pushback), and never hedged.
    ///
    /// Which errors are refused connections or pushbacks is the classifier's to say
    /// ([`Outcome::Refused`](crate::Outcome::Refused), [`Outcome::Pushback`](crate::Outcome::Pushback)):
    /// the default one of [`Dependency::run`](crate::Dependency::run) reads every error as
    /// [`Outcome::Failed`](crate::Outcome::Failed), so with it no retry would ever start, and
    /// in a debug build such a call with retries panics when it is awaited, saying so. Give
    /// the call one that knows your client's errors (`.classify(..)`; deadline-tokio's
    /// `reqwest::classify` for reqwest, `ClassifyConnect` for a client that connects through
    /// its `Connector`; `DependencyLayer` reads a response's pushback itself).
    ///
    /// # Panics
    ///
    /// If the policy already hedges (a hedge is a second copy while the first may run). In a
    /// `static` or a `const`, that is a compile error.
    #[must_use]
    pub const fn not_idempotent(mut self) -> Self {
        assert!(
            self.hedge().is_none(),
            "a policy that hedges cannot be made not idempotent: a hedge runs the call twice; \
             remove the hedge setting, or keep the policy idempotent"
        );
        self.idempotence = Idempotence::NotIdempotent;
        self
    }

    /// The same policy, saying what [`Idempotence`] says (for a policy read from
    /// configuration; [`idempotent`](Self::idempotent) and
    /// [`not_idempotent`](Self::not_idempotent) say it in code).
    ///
    /// # Panics
    ///
    /// If the policy already hedges and `idempotence` is not [`Idempotence::Idempotent`], or
    /// already retries and `idempotence` is [`Idempotence::Unstated`]. In a `static` or a
    /// `const`, that is a compile error.
    #[must_use]
    pub const fn with_idempotence(mut self, idempotence: Idempotence) -> Self {
        assert!(
            self.hedge().is_none() || matches!(idempotence, Idempotence::Idempotent),
            "a policy that hedges must stay idempotent: a hedge runs the call twice; remove \
             the hedge setting, or give Idempotence::Idempotent"
        );
        assert!(
            self.retry.max_attempts <= 1 || !matches!(idempotence, Idempotence::Unstated),
            "a policy that retries must say whether a call may be repeated: give \
             Idempotence::Idempotent or Idempotence::NotIdempotent, or set no retries"
        );
        self.idempotence = idempotence;
        self
    }

    /// The same policy with up to `retries` retries after the first attempt, with the
    /// policy's backoff between them ([`with_backoff`](Self::with_backoff)).
    ///
    /// A retry follows a failure. With no cap ([`with_cap`](Self::with_cap)), an attempt has
    /// all the time left, so one that hangs ends with the deadline and is never retried: only
    /// the errors that come back in time are. Set a cap, the longest a good answer takes, to
    /// retry a hang as well.
    ///
    /// # Panics
    ///
    /// Unless the policy has said whether a call may be repeated
    /// ([`idempotent`](Self::idempotent) or [`not_idempotent`](Self::not_idempotent), before
    /// this): a policy that has not would retry nothing but refused connections, in silence.
    /// In a `static` or a `const`, that is a compile error.
    #[must_use]
    pub const fn with_retries(mut self, retries: u32) -> Self {
        assert!(
            retries == 0 || !matches!(self.idempotence, Idempotence::Unstated),
            "retries need the policy to say whether a call may be repeated: add .idempotent() \
             (any failure is retried) or .not_idempotent() (only an attempt that never reached \
             the server is retried) before .with_retries(..)"
        );
        self.retry.max_attempts = retries.saturating_add(1);
        self
    }

    /// The same policy with `backoff` as the wait before each retry.
    #[must_use]
    pub const fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.retry.backoff = backoff;
        self
    }

    /// The same policy with hedged requests as `hedge` says (none when its
    /// [`max_hedges`](HedgePolicy::max_hedges) is 0).
    ///
    /// # Panics
    ///
    /// For a `hedge` with at least one copy, unless the policy is
    /// [`idempotent`](Self::idempotent) (said before this): a hedge is a second copy of a call
    /// while the first may still run. In a `static` or a `const`, that is a compile error.
    #[must_use]
    pub const fn with_hedge(mut self, hedge: HedgePolicy) -> Self {
        assert!(
            hedge.max_hedges == 0 || matches!(self.idempotence, Idempotence::Idempotent),
            "hedges need an idempotent policy: a hedge runs a second copy of the call while \
             the first may still run; add .idempotent() before the hedge"
        );
        self.hedge = Some(hedge);
        self
    }

    /// The same policy, sending one hedged copy after `delay` (or as many as
    /// [`with_hedges`](Policy::with_hedges) says) while the first attempt still runs. A fixed
    /// delay: it replaces a live quantile set before it
    /// ([`with_hedge_at_p95`](Policy::with_hedge_at_p95)), as that replaces a fixed delay set
    /// before it. The last setting wins.
    ///
    /// ```
    /// use deadline_core::{Policy, ms};
    ///
    /// let policy = Policy::required("pricing").idempotent().with_cap(ms(110));
    /// // A default in code, then the delay from configuration.
    /// let hedge = policy.with_hedge_at_p95(ms(60)).with_hedge_after(ms(40)).hedge().unwrap();
    /// assert_eq!((hedge.delay(), hedge.live()), (ms(40), None));
    /// ```
    ///
    /// # Panics
    ///
    /// As [`with_hedge`](Self::with_hedge).
    #[must_use]
    pub const fn with_hedge_after(self, delay: Duration) -> Self {
        let hedge = match self.hedge {
            Some(h) => HedgePolicy {
                delay,
                live: None,
                ..h
            },
            None => HedgePolicy::new(delay, 1),
        };
        self.with_hedge(hedge)
    }

    /// The same policy, hedging after the `quantile` of the dependency's live latency
    /// histogram (a [`Dependency`](crate::Dependency) keeps one), or after `fallback` while
    /// the histogram holds too few samples to tell.
    ///
    /// # Panics
    ///
    /// As [`with_hedge`](Self::with_hedge).
    #[must_use]
    pub const fn with_hedge_at(self, quantile: Quantile, fallback: Duration) -> Self {
        let hedge = match self.hedge {
            Some(h) => HedgePolicy {
                delay: fallback,
                live: Some(quantile),
                ..h
            },
            None => HedgePolicy::new(fallback, 1).with_live(quantile),
        };
        self.with_hedge(hedge)
    }

    /// The same policy, hedging after the p95 of the dependency's live latency histogram
    /// (a copy for about one call in twenty, sent only for the calls already slower than 95%
    /// of their peers), or after `fallback` while the histogram holds too few samples:
    /// [`with_hedge_at`](Policy::with_hedge_at) with [`Quantile::P95`].
    ///
    /// The histogram holds the attempts that answered or timed out. A first attempt that a
    /// hedge overtook is cancelled: with feature `advice` it is recorded at the time it had
    /// run (for the advice, a lower bound of its latency, as a timeout is; for the live
    /// quantile, which reads the histogram plainly, a latency of that time), so a share of
    /// slow calls keeps the quantile up, and a hedge that lost early counts at its own short
    /// time; without the feature, a cancelled copy is dropped unrecorded, and the winner's
    /// answer recorded. While no more than a few percent of calls are slow, that changes
    /// little (the tail benchmark's 2%: 2.0% extra requests). When more are (a tenth of the
    /// calls stalling, say), without the advice the quantile reads the fast copies that won,
    /// the delay falls to their latency, and more than one call in twenty is hedged; the
    /// retry budget bounds the extra requests, and [`with_hedge_at`](Policy::with_hedge_at)
    /// with a lower quantile, or a fixed [`with_hedge_after`](Policy::with_hedge_after), says
    /// what you mean there.
    ///
    /// # Panics
    ///
    /// As [`with_hedge`](Self::with_hedge).
    #[must_use]
    pub const fn with_hedge_at_p95(self, fallback: Duration) -> Self {
        self.with_hedge_at(Quantile::P95, fallback)
    }

    /// The same policy with up to `hedges` hedged copies per call, after the delay that
    /// [`with_hedge_after`](Policy::with_hedge_after) or
    /// [`with_hedge_at_p95`](Policy::with_hedge_at_p95) sets (before or after this); 0 turns
    /// hedging off, and a delay set after it keeps it off. Hedges with no delay set are never
    /// due: [`Dependency::new`](crate::Dependency::new) refuses them (a compile error in a
    /// `static`, a panic at run time), and [`check`](Self::check) names them.
    ///
    /// ```
    /// use deadline_core::{Policy, ms};
    ///
    /// // The number from configuration, the delay in code: 0 means no hedging, in either order.
    /// let hedges = 0;
    /// let policy = Policy::required("pricing").idempotent().with_cap(ms(110));
    /// assert_eq!(policy.with_hedges(hedges).with_hedge_after(ms(60)).hedge(), None);
    /// assert_eq!(policy.with_hedge_after(ms(60)).with_hedges(hedges).hedge(), None);
    /// ```
    ///
    /// # Panics
    ///
    /// For `hedges > 0`, as [`with_hedge`](Self::with_hedge).
    #[must_use]
    pub const fn with_hedges(self, hedges: u32) -> Self {
        let hedge = match self.hedge {
            Some(h) => HedgePolicy {
                max_hedges: hedges,
                ..h
            },
            // No delay yet: never, until one is set.
            None => HedgePolicy::new(Duration::MAX, hedges),
        };
        self.with_hedge(hedge)
    }

    /// The same policy, saying which quantile of the live latencies its cap should stand
    /// at (feature `advice`): the cap's stated false-timeout rate is `1 - quantile`, and the
    /// suggested cap is that quantile plus the margin ([`with_cap_margin`](Self::with_cap_margin)).
    /// The default is [`Quantile::P999`]: a cap that kills at most 0.1% of the calls.
    #[cfg(feature = "advice")]
    #[must_use]
    pub const fn with_cap_quantile(mut self, quantile: Quantile) -> Self {
        self.advice.quantile = quantile;
        self
    }

    /// The same policy, with `margin` added to the cap's quantile for the suggested cap
    /// (feature `advice`), in whole microseconds (rounded up). The default is 10 ms.
    #[cfg(feature = "advice")]
    #[must_use]
    pub const fn with_cap_margin(mut self, margin: Duration) -> Self {
        self.advice.margin_us = duration_to_micros_ceil(margin);
        self
    }

    /// The same policy, saying how much of the request's budget this dependency usually gets
    /// (feature `advice`), in whole microseconds (rounded down): its worst case, every attempt
    /// running to the cap and every backoff at its longest, is checked against it. Not stated
    /// by default (nothing is checked).
    #[cfg(feature = "advice")]
    #[must_use]
    pub const fn with_slice(mut self, slice: Duration) -> Self {
        self.advice.slice_us = duration_to_micros(slice);
        self
    }

    /// The same policy, with a cap that follows the live latencies (feature `advice`): the
    /// cap's quantile plus its margin, clamped between `min` and `max`, moved down only once
    /// enough latencies were recorded, and up as soon as it kills more than its stated rate
    /// (see [`Advice::adapted_cap`](crate::advice::Advice::adapted_cap)). Off by default: the
    /// cap stays where [`with_cap`](Self::with_cap) put it.
    ///
    /// **Its risk**: a dependency that degrades slowly pulls its own cap up with it, and every
    /// call then waits longer before it is given up; the clamp is the defence, so set `max` to
    /// the longest wait the request can afford (its slice divided by its attempts). While the
    /// quantile lies among the attempts the cap cut (above it, where nothing is measured)
    /// the cap doubles at each check, up to `max`, to measure it; while it lies past the
    /// attempts' callers' deadlines, below the cap, no cap measures it and the cap stays. Only
    /// calls in full mode check the advice (a [`deadline_only`](crate::Dependency::deadline_only) dependency's
    /// cap stays at the policy's, within the bounds).
    ///
    /// # Panics
    ///
    /// If `min > max`. In a `static` or a `const`, that is a compile error. A
    /// [`Dependency`](crate::Dependency) made with the policy also refuses a `min` under a
    /// microsecond or under the floor, as it refuses a fixed cap under a microsecond or
    /// under the floor: a cap moved there would refuse every call, and a refused call records
    /// no latency that could move it back; and a fixed hedge delay at or past `min`
    /// ([`check`](Self::check) names each).
    #[cfg(feature = "advice")]
    #[must_use]
    pub const fn with_adaptive_cap(mut self, min: Duration, max: Duration) -> Self {
        let (min, max) = (duration_to_micros(min), duration_to_micros(max));
        assert!(min <= max, "an adaptive cap needs min <= max");
        self.advice.adaptive_min_us = min;
        self.advice.adaptive_max_us = max;
        self.advice.adaptive = true;
        self
    }

    /// The same policy, warning at most once per `interval` (feature `advice` with
    /// `tracing`) while its cap kills more than its stated rate or its worst case does not fit
    /// its slice. Whole milliseconds (rounded down). The default is one minute.
    #[cfg(feature = "advice")]
    #[must_use]
    pub const fn with_advice_interval(mut self, interval: Duration) -> Self {
        let ms = interval.as_millis();
        self.advice.interval_ms = if ms > u32::MAX as u128 {
            u32::MAX
        } else {
            ms as u32
        };
        self
    }

    /// What the live advice measures the cap against (feature `advice`).
    #[cfg(feature = "advice")]
    #[must_use]
    pub const fn advice(&self) -> AdvicePolicy {
        self.advice
    }

    /// The adaptive cap's bounds in whole microseconds, if the cap follows the live
    /// latencies (feature `advice`).
    #[cfg(feature = "advice")]
    #[inline]
    pub(crate) const fn adaptive_micros(&self) -> Option<(u64, u64)> {
        self.advice.adaptive_micros()
    }

    /// Whether the cap follows the live latencies (feature `advice`).
    #[cfg(feature = "advice")]
    #[inline]
    pub(crate) const fn is_adaptive(&self) -> bool {
        self.advice.adaptive
    }

    /// The dependency's name, for traces, metrics and errors.
    #[must_use]
    pub const fn name(&self) -> &'n str {
        self.name
    }

    /// The longest wait for one attempt; [`Duration::MAX`] for none.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::{Policy, ms};
    ///
    /// assert_eq!(Policy::required("B").with_cap(ms(110)).cap(), ms(110));
    /// assert_eq!(Policy::required("B").cap(), Duration::MAX);
    /// // Whole microseconds: a cap rounds down, a floor up.
    /// let p = Policy::required("B")
    ///     .with_cap(Duration::from_nanos(1_500))
    ///     .with_floor(Duration::from_nanos(1_500));
    /// assert_eq!((p.cap(), p.floor()), (Duration::from_micros(1), Duration::from_micros(2)));
    /// ```
    #[must_use]
    pub const fn cap(&self) -> Duration {
        unbounded_or_duration(self.cap_us)
    }

    /// The longest any attempt can wait: the cap, or with an adaptive cap (feature `advice`),
    /// the most it can grow to ([`with_adaptive_cap`](Self::with_adaptive_cap)'s `max`, which
    /// may be above the fixed cap); [`Duration::MAX`] for none. What outlives every attempt
    /// (a connection's stall limit, say) waits at least this long.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::{Policy, ms};
    ///
    /// assert_eq!(Policy::required("B").with_cap(ms(110)).longest_cap(), ms(110));
    /// assert_eq!(Policy::required("B").longest_cap(), Duration::MAX);
    /// ```
    #[must_use]
    pub const fn longest_cap(&self) -> Duration {
        #[cfg(feature = "advice")]
        if let Some((_, max_us)) = self.adaptive_micros() {
            return unbounded_or_duration(max_us);
        }
        self.cap()
    }

    /// The shortest timeout worth calling with.
    #[must_use]
    pub const fn floor(&self) -> Duration {
        micros_to_duration(self.floor_us)
    }

    /// The connect limit; [`Duration::MAX`] for the same as the timeout.
    #[must_use]
    pub const fn connect(&self) -> Duration {
        unbounded_or_duration(self.connect_us)
    }

    /// Whether the request can do without the dependency.
    #[must_use]
    pub const fn necessity(&self) -> Necessity {
        self.necessity
    }

    /// Whether the request fails without this dependency.
    #[must_use]
    pub const fn is_required(&self) -> bool {
        matches!(self.necessity, Necessity::Required)
    }

    /// What the policy says of repeating a call.
    #[must_use]
    pub const fn idempotence(&self) -> Idempotence {
        self.idempotence
    }

    /// Whether repeating a call is safe ([`Idempotence::Idempotent`]).
    #[must_use]
    pub const fn is_idempotent(&self) -> bool {
        matches!(self.idempotence, Idempotence::Idempotent)
    }

    /// The retries: attempts and backoff.
    #[must_use]
    pub const fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The hedges, if any: `None` when the policy sends no hedged copy (none set, or
    /// [`with_hedges(0)`](Self::with_hedges)).
    #[must_use]
    pub const fn hedge(&self) -> Option<HedgePolicy> {
        match self.hedge {
            Some(h) if h.max_hedges > 0 => Some(h),
            _ => None,
        }
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

    /// The same policy with no hedge policy at all where it sends no hedged copy
    /// ([`with_hedges(0)`](Self::with_hedges) keeps its delay for a number set later): what a
    /// [`Dependency`](crate::Dependency) keeps, so that its calls read "no hedges" once.
    #[cfg(feature = "drive")]
    pub(crate) const fn sending_hedges_only(mut self) -> Self {
        if self.hedge().is_none() {
            self.hedge = None;
        }
        self
    }

    /// Checks that every setting can act, as [`Dependency::new`](crate::Dependency::new)
    /// checks it where it is made (there, a panic; in a `static` or a `const`, a compile
    /// error): for a policy read at run time, such as from a configuration file, whose
    /// author should be told which setting to change.
    ///
    /// # Errors
    ///
    /// The first setting that could never act ([`PolicyError`]), in this order:
    ///
    /// 1. without an adaptive cap, a cap under a microsecond, or a floor above the cap: no
    ///    call would ever be made;
    /// 2. with feature `advice` and an adaptive cap, whose bounds stand in for the cap (the
    ///    fixed cap only picks where it starts): its lower bound under a microsecond or under
    ///    the floor (a cap moved there would refuse every call, and nothing would move it
    ///    back);
    /// 3. a connect limit ([`with_connect`](Self::with_connect)) under a microsecond: every
    ///    connection would be refused at once;
    /// 4. a fixed hedge delay at or past the cap, or at or past the adaptive cap's lower bound
    ///    (or none set, with [`with_hedges`](Self::with_hedges) alone): each attempt has timed
    ///    out by the time its hedge is due. A live delay
    ///    ([`with_hedge_at`](Self::with_hedge_at)) is not refused: its fallback is used only
    ///    until the histogram holds enough latencies, and the live quantile then replaces it.
    ///
    /// The two hedge errors ([`PolicyError::HedgeNotUnderCap`],
    /// [`PolicyError::HedgeNotUnderAdaptiveMin`]) come last, so either one means that every
    /// other setting acts. [`Dependency::deadline_only`](crate::Dependency::deadline_only)
    /// refuses what this returns but those two, and then any retry or hedge at all (it makes
    /// one attempt per call): a policy read from configuration for it is given
    /// `.with_retries(0).with_hedges(0)` first, or checked for
    /// [`retry`](Self::retry)`().attempts() > 1` and [`hedge`](Self::hedge)`().is_some()`.
    ///
    /// The builders refuse other settings where they are called, with a panic (a compile error
    /// in a `static` or a `const`): a hedge or a retry on a policy that has not said whether a
    /// call may be repeated, a hedge on one that may not, an adaptive cap whose `min` is above
    /// its `max`.
    ///
    /// ```
    /// use deadline_core::policy::PolicyError;
    /// use deadline_core::{Policy, ms};
    ///
    /// let policy = Policy::required("pricing").idempotent().with_cap(ms(110));
    /// assert_eq!(policy.check(), Ok(()));
    /// assert_eq!(
    ///     policy.with_hedge_after(ms(120)).check(),
    ///     Err(PolicyError::HedgeNotUnderCap)
    /// );
    /// ```
    pub const fn check(&self) -> Result<(), PolicyError> {
        match self.inert_setting(true) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Panics with [`PolicyError::reason`] when a setting could never act
    /// ([`Policy::check`]); when the calls do not hedge (`hedged` false), the hedge is not
    /// looked at.
    #[cfg(feature = "drive")]
    #[allow(
        clippy::panic,
        reason = "the panic documented on Dependency::new, a compile error in a static"
    )]
    pub(crate) const fn assert_every_setting_acts(&self, hedged: bool) {
        if let Some(error) = self.inert_setting(hedged) {
            panic!("{}", error.reason());
        }
    }

    /// The first setting that could never act ([`Policy::check`]), the hedge looked at only
    /// when the calls may hedge (`hedged`), and last.
    const fn inert_setting(&self, hedged: bool) -> Option<PolicyError> {
        // With an adaptive cap, the cap a call gets lies between its bounds: its lower bound
        // is checked, and the fixed cap only picks where it starts.
        #[cfg(feature = "advice")]
        let adaptive_min_us = if self.advice.adaptive {
            Some(self.advice.adaptive_min_us)
        } else {
            None
        };
        #[cfg(not(feature = "advice"))]
        let adaptive_min_us: Option<u64> = None;
        match adaptive_min_us {
            None if self.cap_us == 0 => return Some(PolicyError::CapUnderAMicrosecond),
            None if self.floor_us > self.cap_us => return Some(PolicyError::FloorAboveCap),
            Some(0) => return Some(PolicyError::AdaptiveMinUnderAMicrosecond),
            Some(min) if self.floor_us > min => return Some(PolicyError::AdaptiveMinUnderFloor),
            _ => {}
        }
        if self.connect_us == 0 {
            return Some(PolicyError::ConnectUnderAMicrosecond);
        }
        let Some(HedgePolicy {
            delay, live: None, ..
        }) = self.hedge()
        else {
            return None;
        };
        if !hedged {
            return None;
        }
        let delay_us = duration_to_micros(delay);
        match adaptive_min_us {
            None if delay_us >= self.cap_us => Some(PolicyError::HedgeNotUnderCap),
            Some(min) if delay_us >= min => Some(PolicyError::HedgeNotUnderAdaptiveMin),
            _ => None,
        }
    }
}

/// How a dependency's calls are retried: attempts in all, and the wait before each retry
/// ([`Policy::with_retries`], [`Policy::with_backoff`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RetryPolicy {
    pub(crate) max_attempts: u32,
    pub(crate) backoff: Backoff,
}

impl RetryPolicy {
    /// `max_attempts` attempts in all (0 is read as 1), with `backoff` between them.
    #[must_use]
    pub const fn new(max_attempts: u32, backoff: Backoff) -> Self {
        RetryPolicy {
            max_attempts,
            backoff,
        }
    }

    /// Attempts in all, the first included: 1 means no retry.
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        if self.max_attempts == 0 {
            1
        } else {
            self.max_attempts
        }
    }

    /// The wait before each retry.
    #[must_use]
    pub const fn backoff(&self) -> Backoff {
        self.backoff
    }
}

/// How a dependency's calls are hedged ([`Policy::with_hedge`] and its shorthands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HedgePolicy {
    pub(crate) delay: Duration,
    pub(crate) max_hedges: u32,
    pub(crate) live: Option<Quantile>,
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

    /// The same policy, hedging after `quantile` of the dependency's live latency histogram
    /// instead of the fixed delay, once the histogram holds enough samples
    /// ([`Dependency`](crate::Dependency) reads it at the start of each call).
    #[must_use]
    pub const fn with_live(mut self, quantile: Quantile) -> Self {
        self.live = Some(quantile);
        self
    }

    /// How long an attempt runs before a copy is sent, when no live value is used.
    #[must_use]
    pub const fn delay(&self) -> Duration {
        self.delay
    }

    /// The most copies sent per call besides its attempts.
    #[must_use]
    pub const fn max_hedges(&self) -> u32 {
        self.max_hedges
    }

    /// The quantile of the live latency histogram hedged after, if any.
    #[must_use]
    pub const fn live(&self) -> Option<Quantile> {
        self.live
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

/// What a dependency's live timeout advice measures its cap against (feature `advice`): the
/// cap's quantile and margin, the slice of the budget the dependency usually gets, the
/// adaptive cap's bounds and the interval between warnings. Set with the policy's
/// [`with_cap_quantile`](Policy::with_cap_quantile), [`with_cap_margin`](Policy::with_cap_margin),
/// [`with_slice`](Policy::with_slice), [`with_adaptive_cap`](Policy::with_adaptive_cap) and
/// [`with_advice_interval`](Policy::with_advice_interval); read with [`Policy::advice`].
///
/// ```
/// use deadline_core::policy::Quantile;
/// use deadline_core::{Policy, ms};
///
/// let pricing = Policy::required("pricing")
///     .with_cap(ms(110))
///     .with_cap_quantile(Quantile::P999)
///     .with_cap_margin(ms(20))
///     .with_slice(ms(170))
///     .with_adaptive_cap(ms(60), ms(160));
/// let advice = pricing.advice();
/// assert_eq!(advice.stated_rate_ppm(), 1_000); // 0.1%
/// assert_eq!((advice.margin(), advice.slice()), (ms(20), Some(ms(170))));
/// assert_eq!(advice.adaptive_cap(), Some((ms(60), ms(160))));
/// assert_eq!(Policy::required("plain").advice().adaptive_cap(), None);
/// ```
#[cfg(feature = "advice")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AdvicePolicy {
    quantile: Quantile,
    /// The margin in whole microseconds, rounded up.
    margin_us: u64,
    /// The slice in whole microseconds, rounded down; `u64::MAX` for none stated.
    slice_us: u64,
    /// Whether the cap follows the live latencies.
    adaptive: bool,
    /// The adaptive cap's bounds, in whole microseconds.
    adaptive_min_us: u64,
    adaptive_max_us: u64,
    /// The shortest time between two warnings, in whole milliseconds.
    interval_ms: u32,
}

#[cfg(feature = "advice")]
impl AdvicePolicy {
    /// The defaults: the cap at the p99.9 plus 10 ms, no slice stated, no adaptive cap, a
    /// warning at most once a minute.
    pub const DEFAULT: AdvicePolicy = AdvicePolicy {
        quantile: Quantile::P999,
        margin_us: 10_000,
        slice_us: u64::MAX,
        adaptive: false,
        adaptive_min_us: 0,
        adaptive_max_us: 0,
        interval_ms: 60_000,
    };

    /// The quantile of the live latencies the cap should stand at.
    #[must_use]
    pub const fn quantile(&self) -> Quantile {
        self.quantile
    }

    /// The cap's stated false-timeout rate, `1 - quantile`, in parts per million.
    #[must_use]
    pub const fn stated_rate_ppm(&self) -> u32 {
        1_000_000u32.saturating_sub(self.quantile.as_ppm())
    }

    /// The margin added to the quantile for the suggested cap.
    #[must_use]
    pub const fn margin(&self) -> Duration {
        micros_to_duration(self.margin_us)
    }

    /// The slice of the request's budget the dependency usually gets, if stated.
    #[must_use]
    pub const fn slice(&self) -> Option<Duration> {
        if self.slice_us == u64::MAX {
            None
        } else {
            Some(micros_to_duration(self.slice_us))
        }
    }

    /// The adaptive cap's bounds, `(min, max)`, if the cap follows the live latencies.
    #[must_use]
    pub const fn adaptive_cap(&self) -> Option<(Duration, Duration)> {
        if self.adaptive {
            Some((
                micros_to_duration(self.adaptive_min_us),
                micros_to_duration(self.adaptive_max_us),
            ))
        } else {
            None
        }
    }

    /// The adaptive cap's bounds in whole microseconds, `(min, max)`, if the cap follows the
    /// live latencies.
    #[inline]
    pub(crate) const fn adaptive_micros(&self) -> Option<(u64, u64)> {
        if self.adaptive {
            Some((self.adaptive_min_us, self.adaptive_max_us))
        } else {
            None
        }
    }

    /// The shortest time between two warnings.
    #[must_use]
    pub const fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms as u64)
    }
}
