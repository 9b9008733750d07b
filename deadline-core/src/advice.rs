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
//! An attempt that timed out after `t` took *at least* `t`: how much longer is not known. A
//! [`Dependency`](crate::Dependency) records it in its histogram at `t` and counts it apart
//! (`timed_out`), and every figure here takes both into account:
//!
//! - **Kill fraction**: the larger of the histogram's share above `T` (each timed-out attempt
//!   counted at its timeout) and the share of attempts that timed out. Each timed-out attempt
//!   is counted as killed, whatever cut it (the cap, a deadline with less time left, or the
//!   next service answering that the time it was given ran out), so
//!   the figure is never lower than the timed-out share.
//! - **Quantiles** are [`Reading`]s, two bounds: `at_least`, the histogram's quantile with each
//!   timed-out attempt at its timeout, and `at_most`, the quantile with each timed-out attempt
//!   taken as slower than everything recorded (the histogram's value `timed_out` ranks
//!   further up). When the quantile falls among the timed-out attempts (they are more than
//!   `1 - q` of the whole), there is no upper bound: `at_most` is `None`, and the quantile is
//!   only known to lie above the cap, where nothing was measured.
//! - **Suggested cap**: the cap's quantile plus the margin, as a [`Reading`] too: `at_most`
//!   plus the margin is the cap to use, conservative; with no upper bound, the cap must go
//!   up before the quantile can be measured.
//!
//! Every value is the upper bound of its bucket (the histogram's error: at most 3.125% above
//! the true value for a server's histogram), and the kill fraction counts the whole bucket
//! that holds `T` as killed, unless `T` is that bucket's upper bound: it errs high, and is the
//! exact kill fraction at some `T'` between `T` minus one bucket width and `T`.
//!
//! ```
//! use deadline_core::advice::Advice;
//! use deadline_core::observe::Histogram;
//! use deadline_core::{Policy, ms};
//!
//! let latency: Histogram = Histogram::new();
//! latency.record_n(ms(20), 990);
//! latency.record_n(ms(45), 8);
//! latency.record_n(ms(50), 2); // two attempts timed out at the 50 ms cap
//! let policy = Policy::required("pricing").with_cap(ms(50)).with_cap_margin(ms(10));
//!
//! let advice = Advice::assess(latency.buckets(), 2, &policy, policy.cap()).unwrap();
//! assert_eq!(advice.kill_fraction, 0.002); // the two timeouts: over the stated 0.1%
//! assert!(advice.kills_too_many);
//! // The p99.9 (rank 999 of 1 000) is one of the timed-out attempts: above the cap.
//! assert_eq!(advice.p999.at_most, None);
//! assert!(advice.p999.at_least >= ms(50));
//! // The p99 is measured: 45 ms, within the histogram's error.
//! let p99 = advice.p99.at_most.unwrap();
//! assert!(p99 >= ms(45) && p99 <= ms(45) + ms(45) / 32);
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
pub struct Reading {
    /// The quantile with each timed-out attempt at its timeout.
    pub at_least: Duration,
    /// The quantile with each timed-out attempt slower than everything recorded; `None` when
    /// the quantile falls among the timed-out attempts (it lies above what was measured).
    pub at_most: Option<Duration>,
}

impl Reading {
    /// The value to use: `at_most` when there is one (it errs high, as a cap should), else
    /// `at_least` (a lower bound).
    #[must_use]
    pub const fn value(&self) -> Duration {
        match self.at_most {
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
    /// Attempts counted as killed by the cap: the larger of the histogram's count above it
    /// and `timed_out`.
    pub killed: u64,
    /// `killed / recorded`: the kill fraction `1 - F(cap)`, never below the timed-out share.
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
    /// The cap the stated rate needs: `quantile` plus the policy's margin.
    pub suggested_cap: Reading,
    /// The worst case at the cap with the policy's retries and their longest backoffs.
    pub worst_case: Duration,
    /// The slice of the budget the dependency usually gets, if the policy states one.
    pub slice: Option<Duration>,
    /// Whether the worst case fits the slice (`None` when no slice is stated).
    pub fits: Option<bool>,
    /// Whether enough latencies were recorded to judge the cap's quantile
    /// ([`Advice::enough_for`]).
    pub enough: bool,
    /// Whether the cap kills more than its stated rate, judged once there are `enough`
    /// latencies.
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
    /// [`Histogram::buckets`](crate::observe::Histogram::buckets) gives them), of which
    /// `timed_out` latencies are attempts that timed out, under `policy` (its cap quantile and
    /// margin, its retries and backoff, its slice). `None` when the buckets are empty.
    ///
    /// It reads the buckets twice (their count, then every figure in one pass) and allocates
    /// nothing.
    #[must_use]
    pub fn assess<I>(buckets: I, timed_out: u64, policy: &Policy, cap: Duration) -> Option<Self>
    where
        I: Iterator<Item = Bucket> + Clone,
    {
        let recorded = buckets
            .clone()
            .map(|b| u64::from(b.count))
            .fold(0, u64::saturating_add);
        Self::assess_counted(buckets, recorded, timed_out, policy, cap)
    }

    /// [`assess`](Self::assess) of buckets that hold `recorded` latencies in all (a
    /// histogram's [`count`](crate::observe::Histogram::count), read without the buckets).
    pub(crate) fn assess_counted<I>(
        buckets: I,
        recorded: u64,
        timed_out: u64,
        policy: &Policy,
        cap: Duration,
    ) -> Option<Self>
    where
        I: Iterator<Item = Bucket>,
    {
        if recorded == 0 {
            return None;
        }
        let timed_out = timed_out.min(recorded);
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
        let mut seen = 0u64;
        let mut above_cap = 0u64;
        let mut last = Duration::ZERO;
        for bucket in buckets {
            seen = seen.saturating_add(u64::from(bucket.count));
            last = bucket.high;
            for (pair, found) in ranks.iter().zip(&mut values) {
                for (rank, value) in pair.iter().zip(found) {
                    if value.is_none() && *rank != 0 && *rank <= seen {
                        *value = Some(bucket.high);
                    }
                }
            }
            if bucket.high > cap {
                above_cap = above_cap.saturating_add(u64::from(bucket.count));
            }
        }
        // A rank the walk did not reach (a bucket emptied between the two passes) reads the
        // last value seen.
        let reading = |i: usize| match (ranks.get(i), values.get(i)) {
            (Some(&[_, up]), Some(&[low, high])) => Reading {
                at_least: low.unwrap_or(last),
                at_most: if up == 0 {
                    None
                } else {
                    Some(high.unwrap_or(last))
                },
            },
            _ => Reading {
                at_least: last,
                at_most: None,
            },
        };
        let quantile = reading(3);
        let killed = above_cap.max(timed_out).min(recorded);
        let stated_ppm = u64::from(settings.stated_rate_ppm());
        let enough = Self::enough_for(recorded, settings.quantile());
        let worst_case = worst_case_with_backoff(cap, &policy.retry());
        let slice = settings.slice();
        Some(Advice {
            cap,
            recorded,
            timed_out,
            killed,
            kill_fraction: ratio(killed, recorded),
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
            kills_too_many: enough
                && killed.saturating_mul(PPM) > recorded.saturating_mul(stated_ppm),
        })
    }

    /// Whether the cap is within what its policy states: it kills no more than its stated
    /// rate, and its worst case fits its slice (when one is stated).
    #[must_use]
    pub fn is_within_policy(&self) -> bool {
        !self.kills_too_many && self.fits != Some(false)
    }

    /// Where an adaptive cap between `min` and `max` moves after this advice, or `None` when
    /// it stays (too few latencies: not [`enough`](Self::enough)).
    ///
    /// The suggested cap's upper bound when it has one (the quantile plus the margin, erring
    /// high); when the quantile lies among the timed-out attempts, above the cap, twice the
    /// cap (at least the suggested cap's lower bound), to measure it. Clamped to
    /// `[min, max]`. Since a timed-out attempt counts as slower than everything, a cap that
    /// times out more than half its stated rate moves up by its margin at the next check: it
    /// settles where it times out at most half that rate.
    #[must_use]
    pub fn adapted_cap(&self, min: Duration, max: Duration) -> Option<Duration> {
        if !self.enough {
            return None;
        }
        let target = match self.suggested_cap.at_most {
            Some(cap) => cap,
            None => self.cap.saturating_mul(2).max(self.suggested_cap.at_least),
        };
        Some(target.clamp(min, max.max(min)))
    }
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

    #[test]
    fn an_empty_histogram_gives_no_advice() {
        let h: Histogram = Histogram::new();
        assert_eq!(Advice::assess(h.buckets(), 0, &policy(), ms(50)), None);
    }

    #[test]
    fn without_timeouts_both_bounds_are_the_histograms_quantile() {
        let h: Histogram = Histogram::new();
        for t in 1..=2_000 {
            h.record(Duration::from_micros(t * 20));
        }
        let a = Advice::assess(h.buckets(), 0, &policy(), ms(50)).unwrap();
        assert_eq!(a.p50.at_most, Some(a.p50.at_least));
        assert_eq!(Some(a.p50.at_least), h.p50());
        assert_eq!(Some(a.p999.at_least), h.p999());
        assert_eq!(a.quantile, a.p999);
        assert_eq!(a.suggested_cap.value(), h.p999().unwrap() + ms(10));
        // 40 ms is the largest: nothing above the 50 ms cap.
        assert_eq!((a.killed, a.kill_fraction), (0, 0.0));
        assert!(a.enough && !a.kills_too_many && a.is_within_policy());
    }

    #[test]
    fn the_kill_fraction_is_never_below_the_timed_out_share() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(10), 900);
        // A hundred attempts cut at 5 ms by their deadline: below the cap, yet killed.
        h.record_n(ms(5), 100);
        let a = Advice::assess(h.buckets(), 100, &policy(), ms(50)).unwrap();
        assert_eq!(
            (a.killed, a.kill_fraction, a.timed_out_share),
            (100, 0.1, 0.1)
        );
        assert!(a.kills_too_many);
    }

    #[test]
    fn a_quantile_among_the_timeouts_has_no_upper_bound() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(10), 990);
        h.record_n(ms(50), 10);
        let a = Advice::assess(h.buckets(), 10, &policy(), ms(50)).unwrap();
        // Rank 990 plus 10 is the last: the p99's upper bound is the largest value recorded.
        assert_eq!(a.p99.at_most, h.quantile(Quantile::MAX));
        assert!(a.p99.at_least <= ms(10) + ms(10) / 32);
        assert_eq!(a.p999.at_most, None);
        assert!(!a.suggested_cap.is_bounded());
        // An adaptive cap doubles to measure it, within its bounds.
        assert_eq!(a.adapted_cap(ms(20), ms(500)), Some(ms(100)));
        assert_eq!(a.adapted_cap(ms(20), ms(80)), Some(ms(80)));
    }

    #[test]
    fn too_few_latencies_judge_nothing_and_move_nothing() {
        let h: Histogram = Histogram::new();
        h.record_n(ms(60), 999);
        let a = Advice::assess(h.buckets(), 999, &policy(), ms(50)).unwrap();
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
        let a = Advice::assess(h.buckets(), 0, &p, ms(50)).unwrap();
        assert_eq!((a.worst_case, a.fits), (ms(105), Some(false)));
        assert!(!a.is_within_policy());
        let a = Advice::assess(h.buckets(), 0, &p.with_slice(ms(105)), ms(50)).unwrap();
        assert_eq!(a.fits, Some(true));
    }
}
