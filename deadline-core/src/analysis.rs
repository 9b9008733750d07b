//! Timeout analysis from a measured latency sample, and pool sizing by Little's law.
//!
//! A timeout `T` with `r` retries has two consequences, and both should be quoted whenever a
//! timeout is proposed:
//!
//! - its **worst case** `(r + 1) × T`, plus the longest backoff before each retry when the
//!   policy backs off, which has to fit inside the allocation the budget gave the call
//!   ([`worst_case`], [`worst_case_with_backoff`], [`attempts_that_fit`]);
//! - its **kill fraction** `1 − F(T)`: the share of calls that would have succeeded after `T`
//!   and are abandoned instead ([`Sample::kill_fraction`]).
//!
//! If the attempts are independent, all of them time out with probability
//! `(1 − F(T))^(r + 1)` ([`Sample::failure_probability`]). [`Sample::assess`] computes all of
//! these at once for one candidate `(T, r)` against an allocation.
//!
//! Percentiles use the **nearest-rank** rule ([`Quantile::nearest_rank`]): the `q` quantile of
//! `n` sorted values is the value of rank `⌈q·n⌉` (at least 1). It always returns a measured
//! value, never an interpolation, which is what a timeout is compared against. The
//! [`Histogram`](crate::observe::Histogram) uses the same rule over its buckets.
//!
//! Integer arithmetic is used wherever the answer is exact (durations, counts, ranks); `f64`
//! only for fractions. There is no `libm` here: powers are computed by repeated squaring.
//!
//! ```
//! use deadline_core::analysis::Sample;
//! use deadline_core::ms;
//!
//! // A hundred calls: 45 at 8 ms, 25 at 11, 15 at 16, 8 at 24, 4 at 45, 2 at 90, 1 at 400.
//! let mut calls = [ms(8); 100];
//! let mut at = 45;
//! for (n, t) in [(25, 11), (15, 16), (8, 24), (4, 45), (2, 90), (1, 400)] {
//!     calls[at..at + n].fill(ms(t));
//!     at += n;
//! }
//! let sample = Sample::new(&mut calls).unwrap();
//! assert_eq!((sample.p50(), sample.p95(), sample.p99()), (ms(11), ms(45), ms(90)));
//!
//! // T = 90 ms with one retry, against a 250 ms allocation.
//! let a = sample.assess(ms(90), 1, ms(250));
//! assert_eq!(a.worst_case, ms(180));
//! assert!(a.fits);
//! assert_eq!(a.kill_fraction, 0.01); // the one call in a hundred that takes 400 ms
//! assert_eq!(a.failure_probability, 0.0001); // if the attempts are independent
//! ```

use core::fmt;
use core::time::Duration;

use crate::backoff::{Jitter, Multiplier};
use crate::dependency_policy::RetryPolicy;
use crate::quantile::Quantile;

/// Nanoseconds in one second.
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Why a slice could not be read as a [`Sample`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SampleError {
    /// The slice is empty: an empty sample has no distribution to read.
    Empty,
    /// [`Sample::from_sorted`] was given a slice that is not in ascending order.
    Unsorted,
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::Empty => f.write_str("empty latency sample"),
            SampleError::Unsorted => f.write_str("latency sample is not sorted"),
        }
    }
}

impl core::error::Error for SampleError {}

/// A measured latency sample: non-empty and sorted in ascending order.
///
/// Build one with [`Sample::new`], which sorts the caller's slice in place
/// (`sort_unstable`, no allocation), or with [`Sample::from_sorted`], which checks that a
/// shared slice is already sorted. Either way every query afterwards is a binary search or a
/// single index, and none of them can fail.
///
/// `F(T)` below is the sample's distribution function: the share of calls that took at most
/// `T`. A call that took exactly `T` counts as finished in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sample<'a> {
    sorted: &'a [Duration],
}

impl<'a> Sample<'a> {
    /// Sorts `calls` in place and reads it as a sample.
    ///
    /// # Errors
    ///
    /// [`SampleError::Empty`] if `calls` is empty.
    pub fn new(calls: &'a mut [Duration]) -> Result<Self, SampleError> {
        if calls.is_empty() {
            return Err(SampleError::Empty);
        }
        calls.sort_unstable();
        Ok(Sample { sorted: calls })
    }

    /// Reads an already sorted slice as a sample, checking the order (one pass).
    ///
    /// # Errors
    ///
    /// [`SampleError::Empty`] if `sorted` is empty, [`SampleError::Unsorted`] if it is not
    /// in ascending order.
    pub fn from_sorted(sorted: &'a [Duration]) -> Result<Self, SampleError> {
        if sorted.is_empty() {
            Err(SampleError::Empty)
        } else if !sorted.is_sorted() {
            Err(SampleError::Unsorted)
        } else {
            Ok(Sample { sorted })
        }
    }

    /// The measured latencies, in ascending order.
    #[must_use]
    pub const fn as_slice(&self) -> &'a [Duration] {
        self.sorted
    }

    /// The number of calls in the sample (at least 1).
    #[must_use]
    pub const fn count(&self) -> usize {
        self.sorted.len()
    }

    /// The fastest call.
    #[must_use]
    pub fn min(&self) -> Duration {
        self.sorted.first().copied().unwrap_or(Duration::ZERO)
    }

    /// The slowest call.
    #[must_use]
    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or(Duration::ZERO)
    }

    /// The `q` quantile by nearest rank: a measured value, never an interpolation.
    #[must_use]
    pub fn percentile(&self, q: Quantile) -> Duration {
        let rank = q.nearest_rank(self.sorted.len() as u64);
        let index = usize::try_from(rank.saturating_sub(1)).unwrap_or(usize::MAX);
        self.sorted
            .get(index)
            .copied()
            .unwrap_or_else(|| self.max())
    }

    /// The median (nearest rank).
    #[must_use]
    pub fn p50(&self) -> Duration {
        self.percentile(Quantile::P50)
    }

    /// The 95th percentile (nearest rank).
    #[must_use]
    pub fn p95(&self) -> Duration {
        self.percentile(Quantile::P95)
    }

    /// The 99th percentile (nearest rank).
    #[must_use]
    pub fn p99(&self) -> Duration {
        self.percentile(Quantile::P99)
    }

    /// The 99.9th percentile (nearest rank).
    #[must_use]
    pub fn p999(&self) -> Duration {
        self.percentile(Quantile::P999)
    }

    /// The arithmetic mean, exact to the nanosecond (rounded down).
    ///
    /// On a latency distribution the mean sits in the sparse region between the bulk and the
    /// tail, which makes it the worst place for a timeout: see [`Sample::kill_fraction`].
    #[must_use]
    pub fn mean(&self) -> Duration {
        let sum = self
            .sorted
            .iter()
            .fold(0u128, |acc, d| acc.saturating_add(d.as_nanos()));
        let nanos = sum
            .checked_div(self.sorted.len() as u128)
            .unwrap_or_default();
        nanos_to_duration(nanos)
    }

    /// How many calls took at most `t`: `n · F(t)`.
    #[must_use]
    pub fn at_most(&self, t: Duration) -> usize {
        self.sorted.partition_point(|&d| d <= t)
    }

    /// How many calls took longer than `t`: the calls a timeout of `t` would abandon.
    #[must_use]
    pub fn above(&self, t: Duration) -> usize {
        self.sorted.len().saturating_sub(self.at_most(t))
    }

    /// `F(t)`: the share of calls that took at most `t`, in `[0, 1]`.
    #[must_use]
    pub fn cdf(&self, t: Duration) -> f64 {
        ratio(self.at_most(t), self.sorted.len())
    }

    /// The kill fraction `1 − F(t)`: the share of calls that took longer than `t`, in `[0, 1]`.
    ///
    /// A timeout is not free: every call that would have succeeded after it is turned into an
    /// error. Read this for several candidates (the median, the p95, the p99) before choosing
    /// one, and place the timeout in a gap of the distribution, where moving it rescues nothing.
    #[must_use]
    pub fn kill_fraction(&self, t: Duration) -> f64 {
        ratio(self.above(t), self.sorted.len())
    }

    /// The probability that all `retries + 1` attempts with timeout `t` time out:
    /// `(1 − F(t))^(retries + 1)`.
    ///
    /// Computed as the exact ratio `killed^(r+1) / n^(r+1)` while both fit in a `u128`
    /// (so 3/100 squared is the `f64` nearest 9/10 000), by repeated squaring otherwise.
    ///
    /// # Assumes independent attempts
    ///
    /// This is the probability **only if the attempts are independent**: if whether one
    /// attempt is slow says nothing about whether the next one will be. That holds for
    /// scattered slowness (a GC pause, a lost packet, one slow replica). It does not hold when
    /// the dependency is overloaded: a retry is then a second request to the same saturated
    /// service, its chance of timing out is close to 1, and the true failure probability is
    /// close to the single-attempt kill fraction, however many retries are allowed. Against
    /// an overloaded dependency retries are a load multiplier, not a reliability mechanism,
    /// which is why they are capped and drawn from a budget.
    #[must_use]
    pub fn failure_probability(&self, t: Duration, retries: u32) -> f64 {
        let killed = self.above(t) as u128;
        let n = self.sorted.len() as u128;
        let exact = retries
            .checked_add(1)
            .and_then(|attempts| Some((killed.checked_pow(attempts)?, n.checked_pow(attempts)?)));
        match exact {
            Some((num, den)) if den > 0 => num as f64 / den as f64,
            _ => failure_probability(self.kill_fraction(t), retries),
        }
    }

    /// Everything about one candidate: timeout `t` with `retries` retries against an
    /// `allocation` (the time the budget gives this call).
    ///
    /// See [`TimeoutAssessment`] for the fields, and [`Sample::failure_probability`] for the
    /// independence assumption behind one of them.
    #[must_use = "the assessment is only worth computing to quote its figures"]
    pub fn assess(&self, t: Duration, retries: u32, allocation: Duration) -> TimeoutAssessment {
        TimeoutAssessment {
            timeout: t,
            retries,
            attempts: u64::from(retries).saturating_add(1),
            worst_case: worst_case(t, retries),
            allocation,
            fits: worst_case_nanos(t, retries) <= allocation.as_nanos(),
            killed: self.above(t),
            calls: self.sorted.len(),
            kill_fraction: self.kill_fraction(t),
            failure_probability: self.failure_probability(t, retries),
        }
    }
}

/// What one `(timeout, retries)` pair costs and buys, read off a [`Sample`] by
/// [`Sample::assess`]. Quote `worst_case` against `allocation` and `kill_fraction` together:
/// a timeout proposed with only one of them is a number chosen without knowing its price.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
#[must_use]
pub struct TimeoutAssessment {
    /// The candidate timeout `T` of each attempt.
    pub timeout: Duration,
    /// The candidate retry count `r`.
    pub retries: u32,
    /// Attempts in all: `r + 1`.
    pub attempts: u64,
    /// `(r + 1) × T`, saturating at [`Duration::MAX`]: every attempt may run to its timeout
    /// before the next one.
    pub worst_case: Duration,
    /// The time the budget gives this call.
    pub allocation: Duration,
    /// Whether `(r + 1) × T <= allocation` (computed exactly, before any saturation).
    pub fits: bool,
    /// How many calls of the sample took longer than `T`.
    pub killed: usize,
    /// How many calls the sample holds.
    pub calls: usize,
    /// `1 − F(T)`: the share of good calls one attempt abandons.
    pub kill_fraction: f64,
    /// `(1 − F(T))^(r+1)`: the probability that every attempt times out, **if the attempts
    /// are independent** (close to the kill fraction itself against an overloaded dependency;
    /// see [`Sample::failure_probability`]).
    pub failure_probability: f64,
}

/// The worst-case latency of a call with timeout `t` and `retries` retries: `(r + 1) × t`,
/// saturating at [`Duration::MAX`]. This, not the typical case, is what has to fit in the
/// allocation.
///
/// ```
/// use deadline_core::{analysis::worst_case, ms};
///
/// assert_eq!(worst_case(ms(90), 1), ms(180));
/// assert_eq!(worst_case(ms(90), 2), ms(270));
/// ```
#[must_use]
pub fn worst_case(t: Duration, retries: u32) -> Duration {
    nanos_to_duration(worst_case_nanos(t, retries))
}

/// `(r + 1) × t` in nanoseconds, exact (it cannot overflow a `u128`).
fn worst_case_nanos(t: Duration, retries: u32) -> u128 {
    t.as_nanos()
        .saturating_mul(u128::from(retries).saturating_add(1))
}

/// Past this many retries, [`worst_case_with_backoff`] counts each further wait at the
/// longest wait the backoff can ever give instead of working it out retry by retry, so that
/// no policy makes it loop for long.
pub const EXACT_RETRIES: u32 = 4_096;

/// The worst-case latency of a call with timeout `t` under `retry`: every attempt runs to its
/// timeout, and every wait before a retry is the longest its backoff can draw,
///
/// ```text
/// (r + 1) × t + Σ for n in 0..r of Backoff::bounds(n, previous).1
/// ```
///
/// where `r` is the policy's retries ([`RetryPolicy::attempts`] minus one) and `previous` is
/// the term before (zero before the first retry, as [`RetryState`](crate::call::RetryState)
/// starts), so decorrelated jitter grows from its largest previous wait: `3 × base`, then
/// `9 × base`, up to `max`. Saturates at [`Duration::MAX`].
///
/// This is the rule "the worst case is `(r + 1) × T` plus the wait times", and what the
/// allocation has to hold when the policy backs off; [`worst_case`] is the same without the
/// waits. The sum is exact for the first [`EXACT_RETRIES`] retries; past them (a backoff still
/// growing after 4096 retries) each further wait counts as the longest the backoff can ever
/// give, an upper bound.
///
/// Not counted, because no policy bounds them: a server's pushback that asks for a longer
/// wait ([`Pushback::After`](crate::Pushback::After)), and a hedge sent while an
/// attempt runs, which may run to its own timeout after the attempt's ends. The request
/// deadline bounds both.
///
/// ```
/// use deadline_core::analysis::{worst_case, worst_case_with_backoff};
/// use deadline_core::ms;
/// use deadline_core::policy::{Backoff, Jitter, RetryPolicy};
///
/// // A 2 s read limit and three tries is 6 s, plus the wait times.
/// let retry = RetryPolicy::new(3, Backoff::exponential(ms(200)).with_max(ms(1_000)).with_jitter(Jitter::Full));
/// assert_eq!(worst_case(ms(2_000), 2), ms(6_000));
/// // Full jitter waits at most 200 ms before the first retry and 400 ms before the second.
/// assert_eq!(worst_case_with_backoff(ms(2_000), &retry), ms(6_000 + 200 + 400));
/// ```
#[must_use]
pub fn worst_case_with_backoff(t: Duration, retry: &RetryPolicy) -> Duration {
    let retries = retry.attempts().saturating_sub(1);
    let backoff = &retry.backoff;
    let decorrelated = matches!(backoff.jitter, Jitter::Decorrelated);
    // The longest wait the backoff can give at all: its bound once the ceiling is at `max`.
    let longest = {
        let mut top = *backoff;
        top.base = backoff.max();
        top.bounds(0, backoff.max()).1
    };
    // Without decorrelation the bound depends on `n` alone, and stays put from the first
    // retry when the ceiling cannot grow (no base, or a multiplier of one).
    let constant =
        !decorrelated && (backoff.base.is_zero() || backoff.multiplier == Multiplier::ONE);
    let mut total = worst_case_nanos(t, retries);
    let mut previous = Duration::ZERO;
    let mut n: u32 = 0;
    while n < retries {
        let left = u128::from(retries.saturating_sub(n));
        if n >= EXACT_RETRIES {
            total = total.saturating_add(longest.as_nanos().saturating_mul(left));
            break;
        }
        let wait = backoff.bounds(n, previous).1;
        // Every later wait is the same once the bound has reached the longest it can be, or
        // cannot change: a fixed point of decorrelated jitter (each bound depends on the
        // previous one only), or a ceiling that does not grow.
        if wait == longest || constant || (decorrelated && wait == previous) {
            total = total.saturating_add(wait.as_nanos().saturating_mul(left));
            break;
        }
        total = total.saturating_add(wait.as_nanos());
        previous = wait;
        n = n.saturating_add(1);
    }
    nanos_to_duration(total)
}

/// The largest number of attempts with timeout `t` whose worst case fits in `allocation`:
/// `⌊allocation / t⌋`, saturating at `u32::MAX` (and `u32::MAX` for a zero `t`).
///
/// The retry count is one less: see [`retries_that_fit`]. Zero attempts means `t` is larger
/// than the allocation, and one of the two has to move.
///
/// ```
/// use deadline_core::{analysis::attempts_that_fit, ms};
///
/// assert_eq!(attempts_that_fit(ms(250), ms(90)), 2); // one retry
/// assert_eq!(attempts_that_fit(ms(150), ms(90)), 1); // no retry
/// assert_eq!(attempts_that_fit(ms(80), ms(90)), 0); // the timeout is too large
/// ```
#[must_use]
pub fn attempts_that_fit(allocation: Duration, t: Duration) -> u32 {
    match allocation.as_nanos().checked_div(t.as_nanos()) {
        Some(attempts) => u32::try_from(attempts).unwrap_or(u32::MAX),
        None => u32::MAX,
    }
}

/// The largest retry count with timeout `t` that fits in `allocation`:
/// [`attempts_that_fit`] minus one, or `None` when not even one attempt fits.
///
/// ```
/// use deadline_core::{analysis::retries_that_fit, ms};
///
/// assert_eq!(retries_that_fit(ms(250), ms(90)), Some(1));
/// assert_eq!(retries_that_fit(ms(80), ms(90)), None);
/// ```
#[must_use]
pub fn retries_that_fit(allocation: Duration, t: Duration) -> Option<u32> {
    attempts_that_fit(allocation, t).checked_sub(1)
}

/// `kill_fraction^(retries + 1)`: the probability that every attempt times out when each one
/// independently times out with probability `kill_fraction` (clamped to `[0, 1]`; NaN reads
/// as 1, the cautious answer).
///
/// **The attempts are assumed independent**, which is false against an overloaded dependency:
/// see [`Sample::failure_probability`]. Computed by repeated squaring (no `libm`).
///
/// ```
/// use deadline_core::analysis::failure_probability;
///
/// assert_eq!(failure_probability(0.5, 0), 0.5);
/// assert_eq!(failure_probability(0.5, 2), 0.125);
/// ```
#[must_use]
pub fn failure_probability(kill_fraction: f64, retries: u32) -> f64 {
    let p = if kill_fraction.is_nan() {
        1.0
    } else {
        kill_fraction.clamp(0.0, 1.0)
    };
    let mut exponent = u64::from(retries).saturating_add(1);
    let mut base = p;
    let mut result = 1.0;
    while exponent > 0 {
        if exponent & 1 == 1 {
            result *= base;
        }
        base *= base;
        exponent >>= 1;
    }
    result
}

/// An arrival rate: `events` per `per`, for [`in_flight`].
///
/// ```
/// use core::time::Duration;
/// use deadline_core::analysis::{Rate, in_flight};
///
/// // 12 000 a minute is 200 a second.
/// let per_minute = Rate::new(12_000, Duration::from_secs(60));
/// assert_eq!(in_flight(per_minute, Duration::from_secs(10)), 2000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rate {
    /// How many events arrive in each `per`.
    pub events: u64,
    /// The interval `events` are counted over.
    pub per: Duration,
}

impl Rate {
    /// `events` per `per`.
    #[must_use]
    pub const fn new(events: u64, per: Duration) -> Self {
        Rate { events, per }
    }

    /// `events` per second.
    #[must_use]
    pub const fn per_second(events: u64) -> Self {
        Rate::new(events, Duration::from_secs(1))
    }
}

/// Little's law: the number of requests in flight is the arrival rate times the time each one
/// stays, `L = λ × W`, rounded up and saturating at `u64::MAX` (`u64::MAX` for a rate over a
/// zero interval).
///
/// Timeouts set the worst-case latency, so they set the worst-case concurrency a pool must
/// hold during a downstream stall: pass the worst case ([`worst_case`], or the deadline), not
/// the typical latency. Choose the timeout, the pool size and the retry policy as one set.
///
/// ```
/// use core::time::Duration;
/// use deadline_core::analysis::{Rate, in_flight};
///
/// // 200 requests per second against a 10 s timeout: up to 2000 in flight during a stall.
/// assert_eq!(in_flight(Rate::per_second(200), Duration::from_secs(10)), 2000);
/// ```
#[must_use]
pub fn in_flight(rate: Rate, latency: Duration) -> u64 {
    let Some(product) = u128::from(rate.events).checked_mul(latency.as_nanos()) else {
        return u64::MAX;
    };
    if product == 0 {
        return 0;
    }
    match product.checked_div(rate.per.as_nanos()) {
        Some(floor) => {
            let exact = floor
                .checked_mul(rate.per.as_nanos())
                .is_some_and(|p| p == product);
            let ceil = if exact {
                floor
            } else {
                floor.saturating_add(1)
            };
            u64::try_from(ceil).unwrap_or(u64::MAX)
        }
        None => u64::MAX,
    }
}

/// `num / den` as a fraction; 0 when `den` is 0.
fn ratio(num: usize, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// A [`Duration`] from nanoseconds, saturating at [`Duration::MAX`].
fn nanos_to_duration(nanos: u128) -> Duration {
    let secs = nanos.checked_div(NANOS_PER_SEC).unwrap_or_default();
    let sub = nanos.checked_rem(NANOS_PER_SEC).unwrap_or_default();
    match (u64::try_from(secs), u32::try_from(sub)) {
        (Ok(secs), Ok(sub)) => Duration::new(secs, sub),
        _ => Duration::MAX,
    }
}
