//! Percentiles and medians of what a run measured, and how they are printed.

use std::time::Duration;

/// The `p`-th percentile (0 to 100) of `sorted`, nearest rank; zero when empty.
#[must_use]
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
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

/// A distribution-free interval for the median of `values` (each one measured the same way,
/// independently: a round's ratio, say), from their order statistics: the `k`-th smallest
/// and the `k`-th largest, with `k` the largest for which the interval holds the median at
/// least `confidence` (0 to 1) of the time, by the sign test's binomial. Returns the
/// interval and the share of the time it holds the median; `None` when there are too few
/// values for that confidence (fewer than 6 for 95%).
#[must_use]
pub fn median_interval(values: &[f64], confidence: f64) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // P(Binomial(n, 1/2) <= i) for each i, built term by term: C(n, i) / 2^n.
    let mut term = 0.5f64.powi(i32::try_from(n).ok()?);
    let mut below = 0.0;
    let mut best = None;
    for k in 1..=n / 2 {
        // `below` is P(X <= k - 2); add P(X = k - 1).
        below += term;
        term *= (n - (k - 1)) as f64 / k as f64;
        let holds = 1.0 - 2.0 * below;
        if holds < confidence {
            break;
        }
        best = Some((v[k - 1], v[n - k], holds));
    }
    best
}

#[cfg(test)]
mod tests {
    use super::median_interval;

    #[test]
    fn nine_values_give_the_second_and_eighth_at_95_percent() {
        let values = [9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0];
        let (lo, hi, holds) = median_interval(&values, 0.95).expect("nine values suffice");
        assert_eq!((lo, hi), (2.0, 8.0));
        // 1 - 2 * (1 + 9) / 512.
        assert!((holds - 0.960_937_5).abs() < 1e-12, "{holds}");
    }

    #[test]
    fn six_values_are_the_fewest_for_95_percent() {
        let (lo, hi, holds) = median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0.95).unwrap();
        assert_eq!((lo, hi), (1.0, 6.0));
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
        let (lo, hi, holds) = median_interval(&values, 0.95).unwrap();
        assert_eq!((lo, hi), (6.0, 15.0));
        assert!(holds > 0.95 && holds < 0.96, "{holds}");
    }
}
