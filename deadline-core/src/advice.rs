//! [`Advice`]: what a dependency's cap costs and what it should be, read off a latency
//! histogram in which the attempts that timed out are censored (feature `advice`).
//!
//! A cap `T` is a decision to abandon the calls that would have answered after `T`: its
//! **kill fraction** is `1 - F(T)`, read here off the histogram's buckets. With retries, its
//! **worst case** is every attempt running to `T` and every backoff at its longest
//! ([`worst_case_with_backoff`]), which must fit the
//! slice of the budget the dependency usually gets. And the cap a policy *should* have is the
//! quantile its stated false-timeout rate names plus a margin: the p99.9 plus 10 ms by default.
//!
//! # Timed-out attempts are censored
//!
//! An attempt that timed out after `t` took *at least* `t`: how much longer is not known. What
//! cut it may be the cap, or a deadline with less time left than the cap (the caller's), or
//! the next service answering that the time it was given ran out. So did a copy cancelled
//! after `t` because another copy answered first (a hedge overtook it) or the call ended
//! otherwise: left out, the slow copies a hedge hides would make the dependency look as fast
//! as its hedges (and an adaptive cap follow them down, to kill the slow first copies). A
//! [`Dependency`](crate::Dependency) records each in its histogram at `t`,
//! and again in a second histogram of the attempts cut short alone (for short, the timed-out
//! ones), so that each bucket says how many of its latencies are lower bounds. Every figure here takes them into account:
//!
//! - **Kill fraction**: the Kaplan-Meier estimate of the share of attempts that would run
//!   past `T`. Each bucket's answers are the attempts known to end there; its timed-out
//!   attempts leave the attempts still running without an end, and the estimate spreads
//!   their share over the attempts that ran on. An attempt its caller's deadline cut at 30 ms
//!   is not the cap's kill, and it does not make the dependency look faster than it is
//!   either: the attempts that ran past 30 ms say how it would have ended. With no timeouts
//!   below the cap this is the share of latencies above the cap. When no attempt ran as long
//!   as the cap (every one answered or was cut before it), the cap killed none: 0.
//! - **Quantiles** are [`Reading`]s: `estimate`, the quantile of the same estimate, between
//!   two bounds: `at_least`, the histogram's quantile with each timed-out attempt at its
//!   timeout, and `at_most`, the quantile with each timed-out attempt taken as slower than
//!   everything recorded (the histogram's value `timed_out` ranks further up). When the
//!   quantile falls among the timed-out attempts (they are more than `1 - q` of the whole),
//!   there is no upper bound: `at_most` is `None`. When it lies beyond every attempt that
//!   answered (the attempts still running there all timed out), there is no estimate
//!   either, and the quantile is only known to lie above what was measured.
//! - **Suggested cap**: the cap's quantile plus the margin, as a [`Reading`] too: its
//!   `estimate` is the cap to use; with none, the cap must go up before the quantile can be
//!   measured, if it is the cap that cut the attempts.
//! - **Enough**: the quantiles, and a cap against them, are judged once the estimate at the
//!   cap rests on enough attempts: as many as an uncensored sample would need to leave the
//!   attempts still running there. An attempt its caller's deadline cut before the cap says
//!   nothing of what the cap does, and one cut just before the cap says nothing of the tail
//!   beyond it. A cap whose kills are alone more than its stated rate of every latency
//!   recorded kills too many however few attempts ran as far.
//!
//! A [`Dependency`](crate::Dependency) records a timeout of an attempt its cap limited that
//! came within 11 ms below the cap (at most half the cap) at the cap: the next service, told
//! the cap less the hop's 5 ms allowance, rounded down to a millisecond, answered that its
//! time ran out (a server on this library answers its 5 ms reply margin before that). It
//! records any other timeout when it came: one of an attempt its caller's nearer deadline
//! limited (however near the cap), or one that came earlier.
//!
//! Every value is the upper bound of its bucket (the histogram's error: at most 3.125% above
//! the true value for a server's histogram), and the kill fraction counts the whole bucket
//! that holds `T` as killed: it errs high, and is the exact kill fraction at some `T'`
//! between `T` minus one bucket width and `T`. For a cap above the one the attempts ran with,
//! the kill fraction says nothing past that cap: the attempts it cut are censored there,
//! and no attempt ran longer.
//!
//! ```
//! use deadline_core::advice::Advice;
//! use deadline_core::observe::Histogram;
//! use deadline_core::{Policy, ms};
//!
//! let latency: Histogram = Histogram::new();
//! let timeouts: Histogram = Histogram::new();
//! latency.record_n(ms(20), 990);
//! latency.record_n(ms(45), 8);
//! latency.record_n(ms(50), 2); // two attempts timed out at the 50 ms cap
//! timeouts.record_n(ms(50), 2);
//! let policy = Policy::required("pricing").with_cap(ms(50)).with_cap_margin(ms(10));
//!
//! let advice = Advice::assess(latency.buckets(), timeouts.buckets(), &policy, policy.cap())
//!     .unwrap();
//! assert_eq!(advice.kill_fraction, 0.002); // the two timeouts: over the stated 0.1%
//! assert!(advice.kills_too_many);
//! // The p99.9 (rank 999 of 1 000) is one of the timed-out attempts: above the cap.
//! assert_eq!((advice.p999.estimate, advice.p999.at_most), (None, None));
//! assert!(advice.p999.at_least >= ms(50));
//! // The p99 (rank 990) is measured: 20 ms, within the histogram's error. Its upper
//! // bound, the two timeouts taken as slower than everything, is 45 ms.
//! let p99 = advice.p99.estimate.unwrap();
//! assert!(p99 >= ms(20) && p99 <= ms(20) + ms(20) / 32);
//! let most = advice.p99.at_most.unwrap();
//! assert!(most >= ms(45) && most <= ms(45) + ms(45) / 32);
//! ```
//!
//! Attempts cut below the cap by their callers' deadlines are not the cap's kills:
//!
//! ```
//! use deadline_core::advice::Advice;
//! use deadline_core::observe::Histogram;
//! use deadline_core::{Policy, ms};
//!
//! let latency: Histogram = Histogram::new();
//! let timeouts: Histogram = Histogram::new();
//! latency.record_n(ms(10), 500);
//! latency.record_n(ms(30), 1_000); // callers with 30 ms: cut there
//! timeouts.record_n(ms(30), 1_000);
//! latency.record_n(ms(40), 500); // callers that waited: each got its answer
//! let policy = Policy::required("pricing").with_cap(ms(100));
//!
//! let advice = Advice::assess(latency.buckets(), timeouts.buckets(), &policy, policy.cap())
//!     .unwrap();
//! assert_eq!(advice.kill_fraction, 0.0);
//! assert!(!advice.kills_too_many);
//! // Every attempt that ran past 30 ms answered at 40: the estimate gives the ones cut at
//! // 30 ms the same, so the median is 40 ms, where counting each at its 30 ms says 30.
//! assert!(advice.p50.estimate.unwrap() >= ms(40));
//! assert!(advice.p50.at_least < ms(40));
//! ```

use core::time::Duration;

use crate::analysis::worst_case_with_backoff;
use crate::dependency_policy::Policy;
use crate::histogram::Bucket;
use crate::quantile::Quantile;

/// Parts per million in one.
const PPM: u64 = 1_000_000;

/// A quantile read off a histogram with censored latencies: it lies between the two bounds
/// (each the upper bound of its bucket). See the [module](self) for how they are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Reading {
    /// The quantile with each timed-out attempt at its timeout.
    pub at_least: Duration,
    /// The quantile of the Kaplan-Meier estimate, which gives each timed-out attempt the
    /// latencies of the attempts that ran on; `None` when the quantile lies beyond every
    /// attempt that answered.
    pub estimate: Option<Duration>,
    /// The quantile with each timed-out attempt slower than everything recorded; `None` when
    /// the quantile falls among the timed-out attempts.
    pub at_most: Option<Duration>,
}

impl Reading {
    /// The value to use: the `estimate` when there is one, else `at_least` (the quantile
    /// lies above it, beyond what was measured).
    #[must_use]
    pub const fn value(&self) -> Duration {
        match self.estimate {
            Some(d) => d,
            None => self.at_least,
        }
    }

    /// Whether the quantile has an upper bound (it does not lie among the timed-out
    /// attempts).
    #[must_use]
    pub const fn is_bounded(&self) -> bool {
        self.at_most.is_some()
    }

    /// Both bounds plus `d`, saturating.
    const fn plus(self, d: Duration) -> Reading {
        Reading {
            at_least: self.at_least.saturating_add(d),
            estimate: match self.estimate {
                Some(v) => Some(v.saturating_add(d)),
                None => None,
            },
            at_most: match self.at_most {
                Some(v) => Some(v.saturating_add(d)),
                None => None,
            },
        }
    }
}

/// What a dependency's cap costs and what it should be, from its latency histogram and its
/// policy: [`Advice::assess`], or [`Dependency::advice`](crate::Dependency::advice) for a
/// dependency's live histogram. The [module](self) says how timed-out attempts are counted.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Advice {
    /// The cap assessed.
    pub cap: Duration,
    /// Latencies in the histogram.
    pub recorded: u64,
    /// Of them, attempts that timed out (recorded at their timeout).
    pub timed_out: u64,
    /// Attempts that ran as long as the cap: the histogram's count from the bucket that holds
    /// it on (the answers slower than the cap, and the attempts it cut).
    pub killed: u64,
    /// The kill fraction `1 - F(cap)`: the estimated share of attempts that run past the
    /// cap, never below `killed / recorded` nor above 1 (see the [module](self)).
    pub kill_fraction: f64,
    /// `timed_out / recorded`.
    pub timed_out_share: f64,
    /// The cap's stated false-timeout rate: `1 -` the policy's cap quantile.
    pub stated_rate: f64,
    /// The median.
    pub p50: Reading,
    /// The 99th percentile.
    pub p99: Reading,
    /// The 99.9th percentile.
    pub p999: Reading,
    /// The policy's cap quantile (the p99.9 by default).
    pub quantile: Reading,
    /// The cap the stated rate needs: `quantile` plus the policy's margin. It may be under
    /// the policy's floor, for a dependency far faster than the floor asks: a cap there would
    /// make no call at all (`Dependency::new` refuses such a policy), so lower the floor with
    /// it, or keep the floor as the cap (`deadline plan --live` says which).
    pub suggested_cap: Reading,
    /// The worst case at the cap with the policy's retries and their longest backoffs.
    pub worst_case: Duration,
    /// The slice of the budget the dependency usually gets, if the policy states one.
    pub slice: Option<Duration>,
    /// Whether the worst case fits the slice (`None` when no slice is stated).
    pub fits: Option<bool>,
    /// Whether enough latencies were recorded to judge the cap's quantile
    /// ([`Advice::enough_for`]), counting as many as the estimate at the cap rests on (see the
    /// [module](self)).
    pub enough: bool,
    /// Whether the cap kills more than its stated rate: its kill fraction, judged once there
    /// are `enough` latencies; or, however few attempts ran as far as the cap, once those it
    /// killed are alone more than the stated rate of every latency recorded (and those are
    /// enough).
    pub kills_too_many: bool,
}

impl Advice {
    /// The fewest latencies with which a cap is judged (and an adaptive cap moved): a
    /// thousand, and at least enough that one latency in them is expected beyond the cap's
    /// quantile.
    pub const MIN_SAMPLES: u64 = 1_000;

    /// Whether `recorded` latencies are enough to judge a cap at `quantile`: at least
    /// [`MIN_SAMPLES`](Self::MIN_SAMPLES), and at least `1 / (1 - quantile)`. (A dependency's
    /// histogram holds between 4 096 and 8 192 latencies once warm, so a quantile above
    /// 0.9998 is never judged live.)
    #[must_use]
    pub const fn enough_for(recorded: u64, quantile: Quantile) -> bool {
        let beyond = PPM.saturating_sub(quantile.as_ppm() as u64);
        recorded >= Self::MIN_SAMPLES && recorded.saturating_mul(beyond) >= PPM
    }

    /// The advice for `cap` from a histogram's non-empty buckets in ascending order (as
    /// [`Histogram::buckets`](crate::observe::Histogram::buckets) gives them), each attempt
    /// that timed out among them at its timeout, and the buckets of those timed-out attempts
    /// alone (a histogram of the same layout, or [`core::iter::empty`] when none timed out),
    /// under `policy` (its cap quantile and margin, its retries and backoff, its slice).
    /// `None` when the buckets are empty.
    ///
    /// It reads each list twice (their counts, then every figure in one pass) and allocates
    /// nothing.
    #[must_use]
    pub fn assess<I, J>(buckets: I, timeouts: J, policy: &Policy, cap: Duration) -> Option<Self>
    where
        I: Iterator<Item = Bucket> + Clone,
        J: Iterator<Item = Bucket> + Clone,
    {
        let (recorded, timed_out) = with_timeouts(buckets.clone(), timeouts.clone()).fold(
            (0u64, 0u64),
            |(all, cut), (b, censored)| {
                (
                    all.saturating_add(u64::from(b.count)),
                    cut.saturating_add(censored),
                )
            },
        );
        if recorded == 0 {
            return None;
        }
        let settings = policy.advice();
        let quantiles = [
            Quantile::P50,
            Quantile::P99,
            Quantile::P999,
            settings.quantile(),
        ];
        // Two ranks per quantile: its own, and `timed_out` further up (0: past the end).
        let ranks: [[u64; 2]; 4] = quantiles.map(|q| {
            let rank = q.nearest_rank(recorded);
            let above = rank.saturating_add(timed_out);
            [rank, if above <= recorded { above } else { 0 }]
        });
        let mut values = [[None::<Duration>; 2]; 4];
        let mut estimates = [None::<Duration>; 4];
        let mut seen = 0u64;
        let mut above_cap = 0u64;
        let mut last = Duration::ZERO;
        // The Kaplan-Meier estimate, as each timed-out attempt's share handed on to the
        // attempts still running: every attempt still running weighs `weight` (1 until a
        // timeout), so the estimated share still running is `weight * running / recorded`.
        // Without timeouts `weight` stays exactly 1 and every figure is a whole count.
        let mut running = recorded;
        let mut weight = 1.0f64;
        // At the cap's bucket: the attempts still running there and their weight.
        let mut at_cap = None::<(u64, f64)>;
        let n = recorded as f64;
        // Each quantile is reached where the estimated count ended reaches its nearest rank:
        // exactly the histogram's quantile without timeouts (where the count is whole), and
        // with them up to one bucket of answers above where the estimated share reaches `q`,
        // erring high as a cap should (the tail past the censored attempts rests on few
        // answers). A millionth of an attempt of room for the product's rounding.
        let targets = ranks.map(|[rank, _]| rank as f64 - 1e-6);
        for (bucket, censored) in with_timeouts(buckets, timeouts) {
            let count = u64::from(bucket.count);
            seen = seen.saturating_add(count);
            last = bucket.high;
            for (pair, found) in ranks.iter().zip(&mut values) {
                for (rank, value) in pair.iter().zip(found) {
                    if value.is_none() && *rank != 0 && *rank <= seen {
                        *value = Some(bucket.high);
                    }
                }
            }
            // (With no cap, no bucket is the cap's: not even the last, unbounded one.)
            if bucket.high >= cap && cap != Duration::MAX {
                above_cap = above_cap.saturating_add(count);
                if at_cap.is_none() {
                    at_cap = Some((running, weight));
                }
            }
            // Its answers end first, then its timed-out attempts hand their share on.
            let answered = count.saturating_sub(censored).min(running);
            running = running.saturating_sub(answered);
            if answered > 0 {
                let ended = n - weight * running as f64;
                for (target, estimate) in targets.iter().zip(&mut estimates) {
                    if estimate.is_none() && ended >= *target {
                        *estimate = Some(bucket.high);
                    }
                }
            }
            let censored = censored.min(running);
            let still = running.saturating_sub(censored);
            if still == 0 {
                running = 0;
            } else if censored > 0 {
                weight *= running as f64 / still as f64;
                running = still;
            }
        }
        let reading = |i: usize| match (ranks.get(i), values.get(i), estimates.get(i)) {
            (Some(&[_, up]), Some(&[low, high]), Some(&estimate)) => Reading {
                at_least: low.unwrap_or(last),
                estimate,
                at_most: if up == 0 {
                    None
                } else {
                    Some(high.unwrap_or(last))
                },
            },
            _ => Reading {
                at_least: last,
                estimate: None,
                at_most: None,
            },
        };
        let quantile = reading(3);
        // No attempt ran as long as the cap: it killed none, and the attempts behind the
        // estimate are all there were. Otherwise the estimate at the cap rests on the attempts
        // still running there: as many as an uncensored sample of `recorded / weight`.
        let (running_at_cap, weight_at_cap) = at_cap.map_or((0.0, weight), |(running, weight)| {
            (weight * running as f64, weight)
        });
        let kill_fraction = (running_at_cap / n).min(1.0);
        let stated_ppm = u64::from(settings.stated_rate_ppm());
        let effective = (n / weight_at_cap) as u64;
        let enough = Self::enough_for(effective, settings.quantile());
        let worst_case = worst_case_with_backoff(cap, &policy.retry());
        let slice = settings.slice();
        Some(Advice {
            cap,
            recorded,
            timed_out,
            killed: above_cap.min(recorded),
            kill_fraction,
            timed_out_share: ratio(timed_out, recorded),
            stated_rate: ratio(stated_ppm, PPM),
            p50: reading(0),
            p99: reading(1),
            p999: reading(2),
            quantile,
            suggested_cap: quantile.plus(settings.margin()),
            worst_case,
            slice,
            fits: slice.map(|s| worst_case <= s),
            enough,
            // Judged on the estimate once it rests on enough attempts (whole counts without
            // timeouts below the cap, compared exactly); or, however few ran as far as the
            // cap, once the attempts it killed are alone more than its rate of all of them:
            // the estimate is never below that share.
            kills_too_many: (enough && running_at_cap * PPM as f64 > n * stated_ppm as f64)
                || (Self::enough_for(recorded, settings.quantile())
                    && above_cap.saturating_mul(PPM) > recorded.saturating_mul(stated_ppm)),
        })
    }

    /// Whether the cap is within what its policy states: it kills no more than its stated
    /// rate, and its worst case fits its slice (when one is stated).
    #[must_use]
    pub fn is_within_policy(&self) -> bool {
        !self.kills_too_many && self.fits != Some(false)
    }

    /// Where an adaptive cap between `min` and `max` moves after this advice, or `None` when
    /// it stays.
    ///
    /// - With [`enough`](Self::enough) latencies and an estimate of the quantile: the
    ///   suggested cap's estimate (the quantile plus the margin), up or down.
    /// - Else, when the cap [kills too many](Self::kills_too_many) (however few latencies
    ///   ran as far), or with `enough` of them the quantile lies among the attempts it cut:
    ///   twice the cap (at least the suggested cap's lower bound), to measure it.
    /// - Otherwise it stays: too few latencies, or a quantile beyond every answer that the
    ///   cap did not cut (the callers' deadlines cut the attempts, and no cap measures more).
    ///
    /// Clamped to `[min, max]`. So a cap that kills more than its stated rate moves up at the
    /// next check, and one that kills less moves down to the quantile plus the margin once
    /// that quantile rests on enough latencies. Where the callers' deadlines leave too few
    /// attempts running as far as the cap to judge it, a cap that moved up stays there: a
    /// cap errs high.
    #[must_use]
    pub fn adapted_cap(&self, min: Duration, max: Duration) -> Option<Duration> {
        let among_kills = self.enough && self.suggested_cap.estimate.is_none();
        let target = match self.suggested_cap.estimate {
            Some(cap) if self.enough => cap,
            _ if self.killed > 0 && (self.kills_too_many || among_kills) => {
                self.cap.saturating_mul(2).max(self.suggested_cap.at_least)
            }
            _ => return None,
        };
        Some(target.clamp(min, max.max(min)))
    }
}

/// Each of `buckets` with how many of its latencies are attempts that timed out: the
/// `timeouts` bucket with its bounds, at most its count. (A timeouts bucket with no bucket of
/// its bounds, which only histograms read as they changed leave, is skipped.)
fn with_timeouts(
    buckets: impl Iterator<Item = Bucket>,
    timeouts: impl Iterator<Item = Bucket>,
) -> impl Iterator<Item = (Bucket, u64)> {
    let mut timeouts = timeouts.peekable();
    buckets.map(move |bucket| {
        let mut censored = 0;
        while let Some(t) = timeouts.next_if(|t| t.low <= bucket.low) {
            if t.low == bucket.low {
                censored = t.count.min(bucket.count);
            }
        }
        (bucket, u64::from(censored))
    })
}

/// `num / den` as a fraction; 0 when `den` is 0.
fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram;
    use crate::time::ms;

    fn policy() -> Policy<'static> {
        Policy::required("p").with_cap(ms(50))
    }

    /// No timeouts: an empty list of their buckets.
    fn none() -> core::iter::Empty<Bucket> {
        core::iter::empty()
    }

    /// A dependency's two histograms, as it records them: `answers` (each a latency and how
    /// many), then `timeouts` (alike), each in both the latencies and the timeouts.
    fn recorded(answers: &[(Duration, u32)], timeouts: &[(Duration, u32)]) -> [Histogram; 2] {
        let (h, t) = (Histogram::new(), Histogram::new());
        for &(at, n) in answers {
            h.record_n(at, n);
        }
        for &(at, n) in timeouts {
            h.record_n(at, n);
            t.record_n(at, n);
        }
        [h, t]
    }

    /// The advice of `cap` under `policy` over a dependency's two histograms.
    fn assess([h, t]: &[Histogram; 2], policy: &Policy, cap: Duration) -> Advice {
        Advice::assess(h.buckets(), t.buckets(), policy, cap).unwrap()
    }

    #[test]
    fn an_empty_histogram_gives_no_advice() {
        let h: Histogram = Histogram::new();
        assert_eq!(Advice::assess(h.buckets(), none(), &policy(), ms(50)), None);
    }

    #[test]
    fn without_timeouts_the_bounds_and_the_estimate_are_the_histograms_quantile() {
        let h: Histogram = Histogram::new();
        for t in 1..=2_000 {
            h.record(Duration::from_micros(t * 20));
        }
        let a = Advice::assess(h.buckets(), none(), &policy(), ms(50)).unwrap();
        for r in [a.p50, a.p99, a.p999] {
            assert_eq!(
                (r.estimate, r.at_most),
                (Some(r.at_least), Some(r.at_least))
            );
        }
        assert_eq!(Some(a.p50.at_least), h.p50());
        assert_eq!(Some(a.p999.at_least), h.p999());
        assert_eq!(a.quantile, a.p999);
        assert_eq!(a.suggested_cap.value(), h.p999().unwrap() + ms(10));
        // 40 ms is the largest: nothing above the 50 ms cap.
        assert_eq!((a.killed, a.kill_fraction), (0, 0.0));
        assert!(a.enough && !a.kills_too_many && a.is_within_policy());
    }

    /// A dependency far faster than its floor: the quantile and margin say 11 ms, under the
    /// policy's 30 ms floor. The advice says so as it is (the floor is what is off), for its
    /// reader to lower the floor or keep it as the cap.
    #[test]
    fn the_suggested_cap_may_be_under_the_floor() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(1), 2_000);
        let floored = Policy::required("fast")
            .with_cap(ms(100))
            .with_floor(ms(30));
        let a = Advice::assess(h.buckets(), none(), &floored, ms(100)).unwrap();
        assert!(a.suggested_cap.value() < floored.floor());
    }

    #[test]
    fn without_timeouts_the_kill_fraction_is_the_share_above_the_cap() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(10), 999);
        h.record_n(ms(60), 1);
        let a = Advice::assess(h.buckets(), none(), &policy(), ms(50)).unwrap();
        // Exactly the stated 0.1%: not more.
        assert_eq!((a.killed, a.kill_fraction), (1, 0.001));
        assert!(!a.kills_too_many);
        h.record_n(ms(60), 1);
        let a = Advice::assess(h.buckets(), none(), &policy(), ms(50)).unwrap();
        assert_eq!(a.killed, 2);
        assert!(a.kills_too_many);
    }

    /// A hundred attempts cut at 5 ms by their callers' deadlines, below the cap: the cap
    /// killed none of them, and a cap is judged on the 900 that ran on, too few.
    #[test]
    fn attempts_cut_below_the_cap_are_not_its_kills() {
        let both = recorded(&[(ms(10), 900)], &[(ms(5), 100)]);
        let a = assess(&both, &policy(), ms(50));
        let [h, _] = &both;
        assert_eq!(
            (a.killed, a.kill_fraction, a.timed_out_share),
            (0, 0.0, 0.1)
        );
        assert!(!a.enough && !a.kills_too_many);
        // The 100 would have ended as the others did: every quantile is their 10 ms.
        let ten = h.p50();
        assert_eq!((a.p50.estimate, a.p999.estimate), (ten, ten));
        assert_eq!(Some(a.p50.at_least), ten);
        // Rank 999 plus the 100 cut lies past the end: no upper bound.
        assert_eq!(a.p999.at_most, None);
    }

    /// 1 000 attempts: 500 answer at 10 ms, 400 are cut at 20 ms by their callers, and the
    /// other 100 run to the 50 ms cap. Kaplan-Meier: half run past 10 ms, and all of those
    /// that ran past 20 ms reached the cap, so the cap kills half of the attempts, not the
    /// tenth that it cut.
    #[test]
    fn the_kill_fraction_counts_what_the_attempts_cut_earlier_would_have_done() {
        let both = recorded(&[(ms(10), 500)], &[(ms(20), 400), (ms(50), 100)]);
        let a = assess(&both, &policy(), ms(50));
        let [h, _] = &both;
        assert_eq!((a.killed, a.kill_fraction), (100, 0.5));
        // The estimate at the cap rests on 100 attempts, as 200 uncensored would.
        assert!(!a.enough);
        // The median is the 500th: 10 ms. Past it, nothing answered: no estimate.
        assert_eq!(a.p50.estimate, h.p50());
        assert_eq!(a.p99.estimate, None);
        assert!(a.p99.at_least >= ms(50));
    }

    #[test]
    fn a_quantile_among_the_timeouts_has_no_upper_bound() {
        let both = recorded(&[(ms(10), 990)], &[(ms(50), 10)]);
        let a = assess(&both, &policy(), ms(50));
        let [h, _] = &both;
        // Rank 990 plus 10 is the last: the p99's upper bound is the largest value recorded.
        assert_eq!(a.p99.at_most, h.quantile(Quantile::MAX));
        assert!(a.p99.at_least <= ms(10) + ms(10) / 32);
        assert_eq!(a.p99.estimate, Some(a.p99.at_least));
        assert_eq!((a.p999.estimate, a.p999.at_most), (None, None));
        assert!(!a.suggested_cap.is_bounded());
        // The cap cut them: an adaptive cap doubles to measure it, within its bounds.
        assert_eq!(a.adapted_cap(ms(20), ms(500)), Some(ms(100)));
        assert_eq!(a.adapted_cap(ms(20), ms(80)), Some(ms(80)));
    }

    /// Past every answer, the attempts still running were all cut by their callers, below
    /// the cap: no cap measures more, so an adaptive one stays.
    #[test]
    fn a_quantile_past_the_callers_deadlines_moves_no_cap() {
        let a = assess(
            &recorded(&[(ms(10), 1_990)], &[(ms(30), 10)]),
            &policy(),
            ms(50),
        );
        assert_eq!(a.p999.estimate, None);
        assert!(a.enough);
        assert_eq!((a.killed, a.kill_fraction), (0, 0.0));
        assert_eq!(a.adapted_cap(ms(20), ms(500)), None);
    }

    /// 2 000 answers at 10 ms, 2 000 cut at 30 ms by callers, 87 answers from 31 to 60 ms
    /// and one attempt cut at the 70 ms cap: one attempt in the 88 that ran past 30 ms, but
    /// those 88 are all the estimate at the cap rests on, as an uncensored sample of about 170
    /// would: too few to judge a p99.9, and the cap stays.
    #[test]
    fn a_cap_is_judged_on_the_attempts_that_ran_as_far() {
        let answers: std::vec::Vec<_> = core::iter::once((ms(10), 2_000))
            .chain((0..87).map(|i| (ms(31) + Duration::from_micros(i * 330), 1)))
            .collect();
        let both = recorded(&answers, &[(ms(30), 2_000), (ms(70), 1)]);
        let p = Policy::required("p").with_cap(ms(70));
        let a = assess(&both, &p, ms(70));
        assert_eq!(a.killed, 1);
        // Five times the stated 0.1%, on one attempt.
        assert!(a.kill_fraction > 0.005, "{}", a.kill_fraction);
        assert!(!a.enough && !a.kills_too_many);
        assert_eq!(a.adapted_cap(ms(20), ms(400)), None);
    }

    /// 2 000 answers at 10 ms, 2 000 cut at 30 ms by callers, 48 answers from 31 to 60 ms and
    /// 40 attempts cut at the 70 ms cap: the estimate at the cap rests on few attempts, but 40
    /// kills are alone 1% of every latency, ten times the stated rate. The cap kills too many,
    /// and an adaptive one doubles.
    #[test]
    fn kills_that_alone_pass_the_rate_are_judged_however_few_ran_as_far() {
        let answers: std::vec::Vec<_> = core::iter::once((ms(10), 2_000))
            .chain((0..48).map(|i| (ms(31) + Duration::from_micros(i * 600), 1)))
            .collect();
        let both = recorded(&answers, &[(ms(30), 2_000), (ms(70), 40)]);
        let p = Policy::required("p").with_cap(ms(70));
        let a = assess(&both, &p, ms(70));
        assert!(!a.enough && a.kills_too_many, "{a:?}");
        assert_eq!(a.adapted_cap(ms(20), ms(400)), Some(ms(140)));
    }

    /// With no cap, no bucket is the cap's, not even the unbounded last one: nothing is
    /// killed.
    #[test]
    fn with_no_cap_nothing_is_killed() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(10), 999);
        h.record(Duration::from_secs(1_000_000));
        let a = Advice::assess(h.buckets(), none(), &policy(), Duration::MAX).unwrap();
        assert_eq!((a.killed, a.kill_fraction), (0, 0.0));
        assert!(!a.kills_too_many);
    }

    /// The quantile is where the estimated count ended reaches its nearest rank: one attempt
    /// cut at 5 ms, answers at 10 and 20 ms. At 10 ms the estimate has ended 1.5 of the 3
    /// (half its share), short of the median's rank, 2: the median reads 20 ms, one bucket of
    /// answers high, as a cap should err.
    #[test]
    fn the_quantile_is_where_the_estimate_reaches_its_rank() {
        let both = recorded(&[(ms(10), 1), (ms(20), 1)], &[(ms(5), 1)]);
        let a = assess(&both, &policy(), ms(50));
        let [h, _] = &both;
        assert_eq!(a.p50.estimate, h.quantile(Quantile::MAX));
    }

    /// One attempt cut at 1 ms, 26 answers at 60 ms: every attempt that ran on ran past the
    /// 50 ms cap. The estimate's rounding (27/26 of 26) stays at 1.
    #[test]
    fn the_kill_fraction_is_never_above_one() {
        let a = assess(&recorded(&[(ms(60), 26)], &[(ms(1), 1)]), &policy(), ms(50));
        assert_eq!((a.killed, a.kill_fraction), (26, 1.0));
    }

    #[test]
    fn too_few_latencies_judge_nothing_and_move_nothing() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(60), 999);
        let a = Advice::assess(h.buckets(), h.buckets(), &policy(), ms(50)).unwrap();
        assert_eq!(a.kill_fraction, 1.0);
        assert!(!a.enough && !a.kills_too_many);
        assert_eq!(a.adapted_cap(ms(1), ms(1_000)), None);
        assert!(Advice::enough_for(1_000, Quantile::P999));
        assert!(!Advice::enough_for(4_999, Quantile::from_ppm(999_800)));
        assert!(Advice::enough_for(5_000, Quantile::from_ppm(999_800)));
    }

    #[test]
    fn the_worst_case_is_checked_against_the_slice() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(10), 10);
        let p = Policy::required("p")
            .idempotent()
            .with_cap(ms(50))
            .with_retries(1)
            .with_backoff(crate::backoff::Backoff::constant(ms(5)))
            .with_slice(ms(100));
        let a = Advice::assess(h.buckets(), none(), &p, ms(50)).unwrap();
        assert_eq!((a.worst_case, a.fits), (ms(105), Some(false)));
        assert!(!a.is_within_policy());
        let a = Advice::assess(h.buckets(), none(), &p.with_slice(ms(105)), ms(50)).unwrap();
        assert_eq!(a.fits, Some(true));
    }
}
