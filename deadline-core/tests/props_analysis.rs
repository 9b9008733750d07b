//! Properties of the timeout analysis: kill fractions, failure probabilities, attempts that
//! fit, percentiles by nearest rank, Little's law.

use core::time::Duration;

use deadline_core::analysis::Sample;
use deadline_core::analysis::{
    Rate, SampleError, attempts_that_fit, failure_probability, in_flight, retries_that_fit,
    worst_case,
};
use deadline_core::policy::Quantile;
use proptest::prelude::*;

/// Latencies across the whole range, with the extremes.
fn latency() -> impl Strategy<Value = Duration> {
    prop_oneof![
        4 => (0u64..1_000_000_000).prop_map(Duration::from_nanos),
        1 => any::<u64>().prop_map(Duration::from_nanos),
        1 => (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        1 => Just(Duration::ZERO),
        1 => Just(Duration::MAX),
    ]
}

fn sample_data() -> impl Strategy<Value = Vec<Duration>> {
    prop::collection::vec(latency(), 1..100)
}

#[test]
fn empty_and_unsorted_samples_are_refused() {
    assert_eq!(Sample::new(&mut []), Err(SampleError::Empty));
    assert_eq!(Sample::from_sorted(&[]), Err(SampleError::Empty));
    let unsorted = [Duration::from_millis(2), Duration::from_millis(1)];
    assert_eq!(Sample::from_sorted(&unsorted), Err(SampleError::Unsorted));
}

#[test]
fn a_zero_timeout_fits_without_limit() {
    assert_eq!(attempts_that_fit(Duration::ZERO, Duration::ZERO), u32::MAX);
    assert_eq!(
        attempts_that_fit(Duration::MAX, Duration::from_nanos(1)),
        u32::MAX
    );
}

proptest! {
    #[test]
    fn kill_fraction_is_a_fraction_and_never_rises_with_t(
        mut calls in sample_data(),
        a in latency(),
        b in latency(),
    ) {
        let s = Sample::new(&mut calls).unwrap();
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let (k_lo, k_hi) = (s.kill_fraction(lo), s.kill_fraction(hi));
        prop_assert!((0.0..=1.0).contains(&k_lo));
        prop_assert!((0.0..=1.0).contains(&k_hi));
        prop_assert!(k_hi <= k_lo);
        prop_assert_eq!(s.above(lo) + s.at_most(lo), s.count());
        // Against a brute-force count of the calls strictly above T.
        prop_assert_eq!(s.above(lo), s.as_slice().iter().filter(|&&c| c > lo).count());
        prop_assert_eq!(s.kill_fraction(Duration::MAX), 0.0);
        prop_assert_eq!(s.cdf(Duration::MAX), 1.0);
    }

    #[test]
    fn attempts_that_fit_fit_and_one_more_does_not(alloc in latency(), t in latency()) {
        let n = attempts_that_fit(alloc, t);
        prop_assert!(t.as_nanos() * u128::from(n) <= alloc.as_nanos() || t.is_zero());
        if n < u32::MAX {
            prop_assert!(t.as_nanos() * (u128::from(n) + 1) > alloc.as_nanos());
        }
        prop_assert_eq!(retries_that_fit(alloc, t), n.checked_sub(1));
        if let Some(r) = retries_that_fit(alloc, t) {
            prop_assert!(worst_case(t, r) <= alloc);
        }
    }

    #[test]
    fn failure_probability_is_a_fraction_falling_with_retries(
        mut calls in sample_data(),
        t in latency(),
        r in 0u32..10,
    ) {
        let s = Sample::new(&mut calls).unwrap();
        let p0 = s.failure_probability(t, r);
        let p1 = s.failure_probability(t, r + 1);
        prop_assert!((0.0..=1.0).contains(&p0));
        prop_assert!(p1 <= p0);
        prop_assert_eq!(s.failure_probability(t, 0), s.kill_fraction(t));
        // The exact ratio and the repeated squaring agree.
        let approx = failure_probability(s.kill_fraction(t), r);
        prop_assert!((p0 - approx).abs() <= 1e-12 * p0.max(f64::MIN_POSITIVE), "{} vs {}", p0, approx);
    }

    #[test]
    fn failure_probability_of_any_fraction_stays_in_range(
        p in prop_oneof![any::<f64>(), 0.0..=1.0f64],
        r in any::<u32>(),
    ) {
        let f = failure_probability(p, r);
        prop_assert!((0.0..=1.0).contains(&f), "{} -> {}", p, f);
    }

    #[test]
    fn assessment_is_consistent(
        mut calls in sample_data(),
        t in latency(),
        r in any::<u32>(),
        alloc in latency(),
    ) {
        let s = Sample::new(&mut calls).unwrap();
        let a = s.assess(t, r, alloc);
        let exact = t.as_nanos() * (u128::from(r) + 1);
        let fits_exactly = exact <= alloc.as_nanos();
        prop_assert_eq!(a.fits, fits_exactly);
        prop_assert_eq!(a.worst_case.as_nanos(), exact.min(Duration::MAX.as_nanos()));
        prop_assert_eq!(a.kill_fraction, s.kill_fraction(t));
        prop_assert_eq!(a.killed, s.above(t));
        prop_assert_eq!(a.calls, s.count());
        if a.fits {
            prop_assert!(a.attempts.min(u64::from(u32::MAX)) <= u64::from(attempts_that_fit(alloc, t)));
        }
        prop_assert_eq!(a.attempts, u64::from(r) + 1);
    }

    #[test]
    fn percentiles_are_nearest_rank_members_monotone_in_q(
        mut calls in sample_data(),
        a in 0u32..=1_000_000,
        b in 0u32..=1_000_000,
    ) {
        let s = Sample::new(&mut calls).unwrap();
        let (lo, hi) = (Quantile::from_ppm(a.min(b)), Quantile::from_ppm(a.max(b)));
        let (v_lo, v_hi) = (s.percentile(lo), s.percentile(hi));
        prop_assert!(v_lo <= v_hi);
        prop_assert!(s.as_slice().contains(&v_lo));
        // Nearest rank: at least ceil(q n) values are at most it, fewer are strictly below it.
        let n = s.count() as u64;
        let rank = usize::try_from(lo.nearest_rank(n)).unwrap();
        prop_assert!(s.at_most(v_lo) >= rank);
        prop_assert!(s.as_slice().iter().filter(|&&c| c < v_lo).count() < rank);
        prop_assert!(u128::from(rank as u64) * 1_000_000 >= u128::from(lo.as_ppm()) * u128::from(n));
        prop_assert!(s.min() <= s.mean() && s.mean() <= s.max());
    }

    #[test]
    fn from_sorted_agrees_with_new(mut calls in sample_data(), q in 0u32..=1_000_000) {
        let q = Quantile::from_ppm(q);
        let sorted = Sample::new(&mut calls).unwrap().percentile(q);
        let checked = Sample::from_sorted(&calls).unwrap();
        prop_assert_eq!(checked.percentile(q), sorted);
    }

    #[test]
    fn in_flight_rounds_littles_law_up(events in 0u64..1_000_000, latency_ms in 0u64..10_000_000, per_ms in 1u64..100_000) {
        let rate = Rate::new(events, Duration::from_millis(per_ms));
        let n = in_flight(rate, Duration::from_millis(latency_ms));
        let product = u128::from(events) * u128::from(latency_ms);
        prop_assert!(u128::from(n) * u128::from(per_ms) >= product);
        prop_assert!(n == 0 || u128::from(n - 1) * u128::from(per_ms) < product);
        prop_assert!(in_flight(rate, Duration::from_millis(latency_ms + 1)) >= n);
    }

    #[test]
    fn in_flight_never_panics(events in any::<u64>(), latency in latency(), per in latency()) {
        let _ = in_flight(Rate::new(events, per), latency);
    }
}
