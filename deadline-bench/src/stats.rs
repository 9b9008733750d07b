//! Percentiles and medians of what a run measured, and how they are printed.

use std::time::Duration;

use deadline_core::analysis::{Sample, SampleError};
use deadline_core::policy::Quantile;

/// The `q` quantile of sorted `values` by the core's nearest rank (an exact integer rank:
/// p99.9 of 1 000 values is the 999th); zero when empty.
///
/// # Panics
///
/// If `sorted` is not in ascending order.
#[must_use]
pub fn percentile(sorted: &[Duration], q: Quantile) -> Duration {
    match Sample::from_sorted(sorted) {
        Ok(sample) => sample.percentile(q),
        Err(SampleError::Empty) => Duration::ZERO,
        Err(unsorted) => panic!("a percentile of latencies not sorted: {unsorted}"),
    }
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
#[must_use]
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// The smallest and largest of `values`.
#[must_use]
pub fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// A duration in milliseconds, to 0.01 ms.
#[must_use]
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// The machine's load average over the last minute, from `/proc/loadavg` (`None` where there
/// is none).
#[must_use]
pub fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// An interval that holds the median of some values a known share of the time
/// ([`median_interval`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Its lower end: one of the values.
    pub low: f64,
    /// Its upper end: one of the values.
    pub high: f64,
    /// The share of the time it holds the median (0 to 1).
    pub holds: f64,
}

/// Where an [`Interval`] lies against a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Wholly below it.
    Below,
    /// Across it, or touching it: the median may be on either side.
    Across,
    /// Wholly above it.
    Above,
}

impl Interval {
    /// Where the interval lies against `bound`: only an interval wholly on one side says the
    /// median is there.
    #[must_use]
    pub fn side(&self, bound: f64) -> Side {
        if self.high < bound {
            Side::Below
        } else if self.low > bound {
            Side::Above
        } else {
            Side::Across
        }
    }
}

/// A distribution-free interval for the median of `values` (each one measured the same way,
/// independently: a round's ratio, say), from their order statistics: the `k`-th smallest
/// and the `k`-th largest, with `k` the largest for which the interval holds the median at
/// least `confidence` (0 to 1) of the time, by the sign test's binomial. `None` when there
/// are too few values for that confidence (fewer than 6 for 95%).
#[must_use]
pub fn median_interval(values: &[f64], confidence: f64) -> Option<Interval> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // P(Binomial(n, 1/2) <= i) for each i, built term by term: C(n, i) / 2^n, each term from
    // its logarithm, so that for many values the first terms (below the smallest f64) count
    // as the zeros they nearly are rather than leaving every later term zero.
    let mut ln_term = -(n as f64) * core::f64::consts::LN_2;
    let mut below = 0.0;
    let mut best = None;
    for k in 1..=n / 2 {
        // `below` is P(X <= k - 2); add P(X = k - 1).
        below += ln_term.exp();
        ln_term += ((n - (k - 1)) as f64 / k as f64).ln();
        let holds = 1.0 - 2.0 * below;
        if holds < confidence {
            break;
        }
        best = Some(Interval {
            low: v[k - 1],
            high: v[n - k],
            holds,
        });
    }
    best
}

/// Where the median of some ratios (one figure of two ways, one ratio per round) stands
/// against `bound`, with the words to print: see [`against`].
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Where the interval of their median lies against the bound; `None` with too few rounds
    /// for one.
    pub side: Option<Side>,
    /// The word for it: the one given for above or below, "level", or "not known".
    pub word: &'static str,
    /// The median ratio, its interval and the word, printed.
    pub text: String,
}

/// The verdict on `ratios` against `bound`, from the interval that holds their median 95% of
/// the time ([`median_interval`]): `above` when it lies wholly above the bound, `below` when
/// wholly below, "level" when it holds it, "not known" with too few ratios for an interval.
#[must_use]
pub fn against(ratios: &[f64], bound: f64, above: &'static str, below: &'static str) -> Verdict {
    let m = median(ratios);
    match median_interval(ratios, 0.95) {
        Some(interval) => {
            let side = interval.side(bound);
            let word = match side {
                Side::Above => above,
                Side::Below => below,
                Side::Across => "level",
            };
            Verdict {
                side: Some(side),
                word,
                text: format!(
                    "{m:.3}x, {word} ({:.0}% interval of the median {:.3}x to {:.3}x)",
                    interval.holds * 1e2,
                    interval.low,
                    interval.high
                ),
            }
        }
        None => Verdict {
            side: None,
            word: "not known (too few rounds)",
            text: format!("{m:.3}x (too few rounds for an interval: 6 at least)"),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use deadline_core::policy::Quantile;

    use super::{Interval, Side, against, median_interval, percentile};

    #[test]
    fn the_p999_of_a_thousand_is_the_999th() {
        // 99.9 / 100 * 1000 is 999.000...1 in floating point, whose ceiling picked the
        // largest value instead.
        let sorted: Vec<Duration> = (1..=1000).map(Duration::from_millis).collect();
        assert_eq!(
            percentile(&sorted, Quantile::P999),
            Duration::from_millis(999)
        );
        assert_eq!(
            percentile(&sorted, Quantile::P99),
            Duration::from_millis(990)
        );
        assert_eq!(
            percentile(&sorted, Quantile::P50),
            Duration::from_millis(500)
        );
        assert_eq!(
            percentile(&sorted[..1], Quantile::P999),
            Duration::from_millis(1)
        );
        assert_eq!(percentile(&[], Quantile::P50), Duration::ZERO);
    }

    #[test]
    fn nine_values_give_the_second_and_eighth_at_95_percent() {
        let values = [9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0];
        let Interval { low, high, holds } =
            median_interval(&values, 0.95).expect("nine values suffice");
        assert_eq!((low, high), (2.0, 8.0));
        // 1 - 2 * (1 + 9) / 512.
        assert!((holds - 0.960_937_5).abs() < 1e-12, "{holds}");
    }

    #[test]
    fn six_values_are_the_fewest_for_95_percent() {
        let Interval { low, high, holds } =
            median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0.95).unwrap();
        assert_eq!((low, high), (1.0, 6.0));
        // 1 - 2 / 64.
        assert!((holds - 0.968_75).abs() < 1e-12, "{holds}");
        assert_eq!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95), None);
        assert_eq!(median_interval(&[], 0.95), None);
    }

    #[test]
    fn more_values_narrow_the_interval() {
        let values: Vec<f64> = (1..=20).map(f64::from).collect();
        // 20 values: the 6th and the 15th hold the median 95.9% of the time, the 7th and
        // 14th only 88.5%.
        let Interval { low, high, holds } = median_interval(&values, 0.95).unwrap();
        assert_eq!((low, high), (6.0, 15.0));
        assert!(holds > 0.95 && holds < 0.96, "{holds}");
    }

    /// Past 1 074 values, 2^-n is below the smallest f64: built from it, every term was zero,
    /// and the interval claimed to hold the median always, from the middle two values alone.
    /// For 2 000 values, in exact integers, the 956th smallest and largest hold the median
    /// 1 - 2 x (C(2000, 0) + ... + C(2000, 955)) / 2^2000 = 95.345% of the time, the 957th
    /// under 95% (the normal approximation: 1 000 - 1.96 x sqrt(2 000) / 2, about 956).
    #[test]
    fn many_values_give_an_interval_of_the_right_width() {
        let values: Vec<f64> = (1..=2_000).map(f64::from).collect();
        let Interval { low, high, holds } = median_interval(&values, 0.95).unwrap();
        assert_eq!((low, high), (956.0, 1_045.0));
        assert!((holds - 0.953_447_179_5).abs() < 1e-9, "{holds}");
    }

    #[test]
    fn an_interval_says_the_median_is_on_one_side_only_when_all_of_it_is() {
        let interval = |low, high| Interval {
            low,
            high,
            holds: 0.96,
        };
        assert_eq!(interval(0.98, 0.99).side(1.0), Side::Below);
        assert_eq!(interval(1.01, 1.02).side(1.0), Side::Above);
        assert_eq!(interval(0.99, 1.01).side(1.0), Side::Across);
        assert_eq!(interval(0.99, 1.0).side(1.0), Side::Across);
        assert_eq!(interval(1.0, 1.01).side(1.0), Side::Across);
    }

    #[test]
    fn a_verdict_names_a_side_only_when_the_whole_interval_is_on_it() {
        let ahead = against(
            &[1.02, 1.03, 1.01, 1.05, 1.04, 1.02],
            1.0,
            "ahead",
            "behind",
        );
        assert_eq!((ahead.side, ahead.word), (Some(Side::Above), "ahead"));
        assert!(
            ahead
                .text
                .starts_with("1.025x, ahead (97% interval of the median 1.010x to 1.050x)"),
            "{}",
            ahead.text
        );
        let level = against(
            &[0.99, 1.03, 1.01, 1.05, 1.04, 1.02],
            1.0,
            "ahead",
            "behind",
        );
        assert_eq!((level.side, level.word), (Some(Side::Across), "level"));
        let behind = against(&[0.9; 6], 1.0, "ahead", "behind");
        assert_eq!((behind.side, behind.word), (Some(Side::Below), "behind"));
        let few = against(&[2.0; 5], 1.0, "ahead", "behind");
        assert_eq!((few.side, few.word), (None, "not known (too few rounds)"));
    }
}
