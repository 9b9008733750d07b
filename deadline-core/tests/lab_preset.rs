//! The timeout lab's preset sample, figure by figure: a timeout and a retry count against a measured sample and an
//! allocation. Also Little's-law sizing.

use core::time::Duration;

use deadline_core::analysis::{
    Rate, Sample, attempts_that_fit, in_flight, retries_that_fit, worst_case,
};
use deadline_core::ms;
use deadline_core::observe::Histogram;
use deadline_core::policy::Quantile;

/// The lab's preset, as (calls, latency in ms): a hundred measured calls.
const PRESET: [(usize, u64); 7] = [
    (45, 8),
    (25, 11),
    (15, 16),
    (8, 24),
    (4, 45),
    (2, 90),
    (1, 400),
];

/// The preset as a list of latencies, deliberately not in order (the slowest first).
fn preset() -> Vec<Duration> {
    let mut calls: Vec<Duration> = PRESET
        .iter()
        .flat_map(|&(n, t)| core::iter::repeat_n(ms(t), n))
        .collect();
    calls.reverse();
    calls
}

#[test]
fn preset_holds_a_hundred_calls() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    assert_eq!(sample.count(), 100);
    assert_eq!(sample.min(), ms(8));
    assert_eq!(sample.max(), ms(400));
}

#[test]
fn median_p95_p99_by_nearest_rank() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    assert_eq!(sample.p50(), ms(11));
    assert_eq!(sample.p95(), ms(45));
    assert_eq!(sample.p99(), ms(90));
    // The same through fractions and per mille.
    assert_eq!(sample.percentile(Quantile::from_fraction(0.5)), ms(11));
    assert_eq!(sample.percentile(Quantile::per_mille(950)), ms(45));
}

#[test]
fn mean_is_exactly_18_27_ms() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    assert_eq!(sample.mean(), ms(1827) / 100);
}

#[test]
fn a_timeout_at_the_mean_kills_15_percent() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    let mean = sample.mean();
    assert_eq!(sample.above(mean), 15);
    assert_eq!(sample.kill_fraction(mean), 0.15);
}

#[test]
fn a_timeout_at_90_ms_kills_1_percent() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    assert_eq!(sample.above(ms(90)), 1);
    assert_eq!(sample.kill_fraction(ms(90)), 0.01);
    assert_eq!(sample.cdf(ms(90)), 0.99);
}

#[test]
fn failure_probability_at_90_ms_is_1_in_100_then_1_in_10_000() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    assert_eq!(sample.failure_probability(ms(90), 0), 1.0 / 100.0);
    assert_eq!(sample.failure_probability(ms(90), 1), 1.0 / 10_000.0);
}

#[test]
fn one_retry_at_90_ms_fits_in_250_and_two_do_not() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();

    let one = sample.assess(ms(90), 1, ms(250));
    assert_eq!(one.worst_case, ms(180));
    assert_eq!(one.attempts, 2);
    assert!(one.fits);
    assert_eq!(one.kill_fraction, 0.01);
    assert_eq!(one.failure_probability, 0.0001);

    let two = sample.assess(ms(90), 2, ms(250));
    assert_eq!(two.worst_case, ms(270));
    assert!(!two.fits);

    // The budget decides: two attempts fit, so one retry and no more.
    assert_eq!(attempts_that_fit(ms(250), ms(90)), 2);
    assert_eq!(retries_that_fit(ms(250), ms(90)), Some(1));
}

#[test]
fn t_125_with_one_retry_uses_all_250_and_still_kills_1_percent() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    let a = sample.assess(ms(125), 1, ms(250));
    assert_eq!(a.worst_case, a.allocation);
    assert!(a.fits);
    // Nothing lies between 90 and 400 ms: the extra 35 ms rescue no call.
    assert_eq!(a.killed, sample.above(ms(90)));
    assert_eq!(a.kill_fraction, 0.01);
    // One nanosecond more and it no longer fits.
    assert!(
        !sample
            .assess(ms(125) + Duration::from_nanos(1), 1, ms(250))
            .fits
    );
}

#[test]
fn allocation_150_leaves_no_retry_at_the_p99() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    let p99 = sample.p99();
    assert_eq!(attempts_that_fit(ms(150), p99), 1);
    assert_eq!(retries_that_fit(ms(150), p99), Some(0));
    assert!(!sample.assess(p99, 1, ms(150)).fits);
}

#[test]
fn allocation_150_with_t_45_and_one_retry() {
    let mut calls = preset();
    let sample = Sample::new(&mut calls).unwrap();
    let a = sample.assess(ms(45), 1, ms(150));
    assert_eq!(a.worst_case, ms(90));
    assert!(a.fits);
    assert_eq!(a.killed, 3);
    assert_eq!(a.kill_fraction, 0.03);
    assert_eq!(a.failure_probability, 0.0009);
    // T = 45 ms is the p95, and 150 ms would hold three attempts of it.
    assert_eq!(sample.p95(), ms(45));
    assert_eq!(attempts_that_fit(ms(150), ms(45)), 3);
}

#[test]
fn worst_case_is_attempts_times_timeout() {
    assert_eq!(worst_case(ms(90), 0), ms(90));
    assert_eq!(worst_case(ms(90), 1), ms(180));
    assert_eq!(worst_case(ms(90), 2), ms(270));
}

#[test]
fn littles_law_200_per_second_for_10_s_is_2000_in_flight() {
    assert_eq!(
        in_flight(Rate::per_second(200), Duration::from_secs(10)),
        2000
    );
}

#[test]
fn the_histogram_agrees_with_the_sample_within_its_error() {
    let mut calls = preset();
    let hist: Histogram = Histogram::new();
    for &c in &calls {
        hist.record(c);
    }
    let sample = Sample::new(&mut calls).unwrap();
    let bound = Histogram::<736, 5>::SUB_BUCKETS as u32;
    for q in [
        Quantile::P50,
        Quantile::P95,
        Quantile::P99,
        Quantile::P999,
        Quantile::MAX,
    ] {
        let exact = sample.percentile(q);
        let reported = hist.quantile(q).unwrap();
        assert!(reported >= exact, "{q:?}: {reported:?} < {exact:?}");
        assert!(
            reported <= exact + exact / bound,
            "{q:?}: {reported:?} too far above {exact:?}"
        );
    }
    // The policy derived from the live histogram errs high against the preset's figures.
    let policy = hist.policy("lab", ms(10)).unwrap();
    assert!(policy.floor() >= sample.p50());
    assert!(policy.cap() >= sample.p999() + ms(10));
}
