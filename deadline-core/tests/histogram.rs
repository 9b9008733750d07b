//! The latency histogram: its error bound against exact nearest-rank percentiles, counts under
//! concurrency and saturation, extreme inputs, and the policy derived from it.

use core::time::Duration;

use deadline_core::analysis::Sample;
use deadline_core::ms;
use deadline_core::observe::CompactHistogram;
use deadline_core::observe::{Histogram, SmallHistogram};
use deadline_core::policy::Quantile;
use proptest::prelude::*;

type Default = Histogram;
type Compact = CompactHistogram;

/// `reported` is at or above `exact` and at most `1/sub` of it above.
fn within_bound(reported: Duration, exact: Duration, sub: u64) -> bool {
    let exact_us = exact.as_nanos().div_ceil(1_000);
    let reported_us = reported.as_micros();
    reported >= exact && reported_us <= exact_us + exact_us / u128::from(sub)
}

#[test]
fn the_obvious_line_compiles_and_has_the_default_layout() {
    // No type annotation: `new` is the default layout's.
    let h = Histogram::new();
    h.record(ms(5));
    assert_eq!(h.count(), 1);
    assert_eq!(size_of_val(&h), Default::SIZE_BYTES);
    let small = SmallHistogram::with_layout();
    assert_eq!(size_of_val(&small), SmallHistogram::SIZE_BYTES);
}

#[test]
fn empty_histogram_answers_none() {
    let h: Default = Histogram::new();
    assert!(h.is_empty());
    assert_eq!(h.count(), 0);
    assert_eq!(h.p50(), None);
    assert_eq!(h.p999(), None);
    assert_eq!(h.min(), None);
    assert_eq!(h.max(), None);
    assert_eq!(h.mean(), None);
    assert_eq!(h.hedge_delay(), None);
    assert_eq!(h.policy("x", ms(5)), None);
    assert_eq!(h.buckets().count(), 0);
}

#[test]
fn small_values_are_exact() {
    let h: Default = Histogram::new();
    // Under 2^(SUB_BITS + 1) µs every microsecond has its own bucket.
    let exact_below = 2 * Default::SUB_BUCKETS;
    for us in 0..exact_below {
        h.reset();
        h.record(Duration::from_micros(us));
        assert_eq!(h.p50(), Some(Duration::from_micros(us)));
        assert_eq!(h.min(), h.max());
    }
}

#[test]
fn sub_microsecond_latencies_round_up() {
    let h: Default = Histogram::new();
    h.record(Duration::from_nanos(1));
    assert_eq!(h.p50(), Some(Duration::from_micros(1)));
}

#[test]
fn extreme_latencies_do_not_panic() {
    let h: Default = Histogram::new();
    h.record(Duration::ZERO);
    h.record(Duration::MAX);
    h.record(Default::OVERFLOW);
    assert_eq!(h.count(), 3);
    assert_eq!(h.min(), Some(Duration::ZERO));
    assert_eq!(h.max(), Some(Duration::MAX));
    // A quantile in the overflow bucket reports MAX: the histogram cannot bound it lower.
    assert_eq!(h.quantile(Quantile::MAX), Some(Duration::MAX));
    assert!(h.mean().is_some());
    // The median is in the overflow bucket too: a floor there would refuse every call.
    assert_eq!(h.policy("x", ms(1)), None);
}

/// A dependency whose median is beyond the histogram's range (a modem call of 9 s on the
/// compact layout, whose overflow bucket starts at about 7.9 s) gives no policy: its floor
/// would be `Duration::MAX`, and every call would be refused for want of time. With only its
/// tail beyond the range, the policy has no cap (the p99.9 has no upper bound) and the
/// median's floor.
#[test]
fn no_policy_from_a_median_beyond_the_range() {
    let h = Compact::with_layout();
    h.record_n(Duration::from_secs(9), 100);
    assert_eq!(h.p50(), Some(Duration::MAX));
    assert_eq!(h.policy("modem", ms(500)), None);

    let h = Compact::with_layout();
    h.record_n(ms(40), 100);
    h.record(Duration::from_secs(9));
    let policy = h
        .policy("modem", ms(500))
        .expect("a median within the range");
    assert_eq!(policy.cap(), Duration::MAX);
    assert!(policy.floor() < ms(50), "{:?}", policy.floor());
}

#[test]
fn below_the_overflow_bucket_the_bound_holds() {
    let h: Default = Histogram::new();
    let just_below = Default::OVERFLOW - Duration::from_micros(1);
    h.record(just_below);
    let p = h.p50().unwrap();
    assert!(within_bound(p, just_below, Default::SUB_BUCKETS), "{p:?}");
    assert!(p < Duration::MAX);
}

#[test]
fn a_full_bucket_saturates_instead_of_wrapping() {
    let h: Default = Histogram::new();
    h.record_n(ms(10), u32::MAX - 1);
    h.record_n(ms(10), 5);
    h.record(ms(10));
    assert_eq!(h.count(), u64::from(u32::MAX));
    h.record(ms(20));
    assert_eq!(h.count(), u64::from(u32::MAX) + 1);
}

#[test]
fn reset_empties() {
    let h: Default = Histogram::new();
    h.record_n(ms(3), 7);
    assert_eq!(h.count(), 7);
    h.reset();
    assert!(h.is_empty());
    assert_eq!(h.p99(), None);
}

#[test]
fn recording_from_many_threads_loses_nothing() {
    static H: Histogram = Histogram::new();
    let threads = 8u64;
    let per_thread = 5_000u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..per_thread {
                    H.record(Duration::from_micros(1 + (i * 37 + t * 1_001) % 200_000));
                }
            });
        }
    });
    assert_eq!(H.count(), threads * per_thread);
    let summed: u64 = H.buckets().map(|b| u64::from(b.count)).sum();
    assert_eq!(summed, threads * per_thread);
}

#[test]
fn size_is_four_bytes_a_bucket() {
    assert_eq!(core::mem::size_of::<Default>(), Default::SIZE_BYTES);
    assert_eq!(
        core::mem::size_of::<SmallHistogram>(),
        SmallHistogram::SIZE_BYTES
    );
    // Both layouts reach past two minutes before the overflow bucket.
    assert!(Default::OVERFLOW > Duration::from_secs(120));
    assert!(SmallHistogram::OVERFLOW > Duration::from_secs(120));
}

#[test]
fn policy_and_hedge_delay_come_from_p999_p50_and_p95() {
    let h: Default = Histogram::new();
    for i in 1..=1000u64 {
        h.record(Duration::from_micros(i * 100));
    }
    let policy = h.policy("dep", ms(20)).unwrap();
    assert_eq!(policy.cap(), h.p999().unwrap() + ms(20));
    assert_eq!(policy.floor(), h.p50().unwrap());
    assert_eq!(h.hedge_delay(), h.p95());
    assert!(policy.is_required());
    // And each is within the bound of the exact value: 50.0 ms, 95.0 ms, 99.9 ms.
    let mut exact: Vec<Duration> = (1..=1000u64)
        .map(|i| Duration::from_micros(i * 100))
        .collect();
    let s = Sample::new(&mut exact).unwrap();
    assert!(within_bound(policy.floor(), s.p50(), Default::SUB_BUCKETS));
    assert!(within_bound(
        h.hedge_delay().unwrap(),
        s.p95(),
        Default::SUB_BUCKETS
    ));
    assert!(within_bound(
        policy.cap() - ms(20),
        s.p999(),
        Default::SUB_BUCKETS
    ));
}

#[test]
fn mean_is_within_the_bound() {
    let h: Default = Histogram::new();
    let mut calls: Vec<Duration> = (0..500u64)
        .map(|i| Duration::from_micros(1_000 + i * 997))
        .collect();
    for &c in &calls {
        h.record(c);
    }
    let exact = Sample::new(&mut calls).unwrap().mean();
    let mean = h.mean().unwrap();
    let diff = mean.abs_diff(exact);
    assert!(
        diff <= exact / Default::SUB_BUCKETS as u32,
        "{mean:?} vs {exact:?}"
    );
}

#[test]
fn buckets_are_ascending_and_disjoint() {
    let h: Default = Histogram::new();
    for us in [1u64, 50, 51, 1_000, 1_001, 65_000, 2_000_000] {
        h.record(Duration::from_micros(us));
    }
    let buckets: Vec<_> = h.buckets().collect();
    for pair in buckets.windows(2) {
        assert!(pair[0].high < pair[1].low, "{pair:?}");
    }
    for b in &buckets {
        assert!(b.low <= b.high);
    }
}

/// `reported` is at or above `exact`, and at most `1/sub` above `exact` rounded up to a whole
/// `unit`: the compact layout's bound, in units rather than microseconds.
fn within_unit_bound(reported: Duration, exact: Duration, sub: u64, unit: Duration) -> bool {
    let unit_ns = unit.as_nanos();
    let units = exact.as_nanos().div_ceil(unit_ns);
    let bound_ns = (units + units / u128::from(sub)) * unit_ns;
    reported >= exact && reported.as_nanos() <= bound_ns
}

#[test]
fn the_compact_layout_is_176_bytes_of_16_bit_counts_in_1024_us_units() {
    assert_eq!(core::mem::size_of::<Compact>(), 176);
    assert_eq!(Compact::SIZE_BYTES, 176);
    assert_eq!(Compact::UNIT, Duration::from_micros(1_024));
    assert_eq!(Compact::SUB_BUCKETS, 8);
    assert_eq!(Default::UNIT, Duration::from_micros(1));
    // 2^13 units of 1.024 ms, the last bucket (from 7680 units) shared with all above.
    assert_eq!(Compact::OVERFLOW, Duration::from_micros(7_679 * 1_024 + 1));
}

#[test]
fn compact_values_are_rounded_up_to_whole_units_and_exact_in_them_below_16() {
    let h = Compact::with_layout();
    assert_eq!(Compact::with_layout().p50(), None);
    h.record(Duration::ZERO);
    assert_eq!(
        (h.min(), h.max()),
        (Some(Duration::ZERO), Some(Duration::ZERO))
    );
    for units in 1..16u64 {
        for us in [(units - 1) * 1_024 + 1, units * 1_024] {
            h.reset();
            h.record(Duration::from_micros(us));
            // Its own bucket: from one microsecond over the unit below, to this unit.
            assert_eq!(
                h.p50(),
                Some(Duration::from_micros(units * 1_024)),
                "{us} µs"
            );
            assert_eq!(
                h.min(),
                Some(Duration::from_micros((units - 1) * 1_024 + 1))
            );
        }
    }
    // The checkout example's 20 ms: 19.53 units, rounded up to 20, in the bucket of 20 and
    // 21 units; reported as 21 units, 21.504 ms.
    h.reset();
    h.record(ms(20));
    assert_eq!(h.p95(), Some(Duration::from_micros(21 * 1_024)));
}

#[test]
fn a_compact_bucket_saturates_at_65535() {
    let h = Compact::with_layout();
    h.record_n(ms(10), 65_000);
    h.record_n(ms(10), 1_000);
    h.record_n(ms(10), u32::MAX);
    assert_eq!(h.count(), 65_535);
    h.record(ms(300));
    assert_eq!(h.count(), 65_536);
    h.halve();
    assert_eq!(h.count(), 32_767);
}

#[test]
fn compact_extremes_do_not_panic_and_overflow_reports_max() {
    let h = Compact::with_layout();
    h.record(Duration::MAX);
    h.record(Compact::OVERFLOW);
    h.record(Compact::OVERFLOW - Duration::from_micros(1));
    assert_eq!(h.max(), Some(Duration::MAX));
    assert_eq!(h.quantile(Quantile::MAX), Some(Duration::MAX));
    let below = h.quantile(Quantile::MIN).unwrap();
    assert!(below < Duration::MAX);
    assert!(within_unit_bound(
        below,
        Compact::OVERFLOW - Duration::from_micros(1),
        Compact::SUB_BUCKETS,
        Compact::UNIT
    ));
    let buckets: Vec<_> = h.buckets().collect();
    assert_eq!(buckets.len(), 2);
    assert!(buckets[0].high < buckets[1].low);
    assert_eq!(buckets[1].high, Duration::MAX);
}

/// Latencies across the whole range, with the extremes.
fn latency() -> impl Strategy<Value = Duration> {
    prop_oneof![
        4 => (0u64..10_000_000).prop_map(Duration::from_micros),
        2 => (0u64..u64::MAX).prop_map(Duration::from_nanos),
        1 => any::<u64>().prop_map(Duration::from_micros),
        1 => Just(Duration::ZERO),
        1 => Just(Duration::MAX),
    ]
}

/// `⌈ppm·n / 10^6⌉` clamped to `[1, n]`, in u128: the nearest rank as its definition says.
fn nearest_rank_u128(ppm: u32, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let rank = (u128::from(ppm) * u128::from(n)).div_ceil(1_000_000);
    u64::try_from(rank.clamp(1, u128::from(n))).unwrap()
}

#[test]
fn nearest_rank_at_the_edges() {
    for ppm in [0, 1, 500_000, 950_000, 999_000, 999_999, 1_000_000] {
        for n in [
            0,
            1,
            2,
            19,
            20,
            999_999,
            1_000_000,
            1_000_001,
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(
                Quantile::from_ppm(ppm).nearest_rank(n),
                nearest_rank_u128(ppm, n),
                "ppm {ppm}, n {n}"
            );
        }
    }
}

proptest! {
    #[test]
    fn nearest_rank_is_the_exact_ceiling(ppm in 0u32..=1_000_000, n in any::<u64>(), small in 0u64..5_000) {
        for n in [n, small] {
            prop_assert_eq!(Quantile::from_ppm(ppm).nearest_rank(n), nearest_rank_u128(ppm, n));
        }
    }

    #[test]
    fn quantiles_are_monotone_in_q(
        calls in prop::collection::vec(latency(), 1..200),
        mut qs in prop::collection::vec(0u32..=1_000_000, 2..20),
    ) {
        let h: Default = Histogram::new();
        for &c in &calls {
            h.record(c);
        }
        qs.sort_unstable();
        let reported: Vec<Duration> = qs
            .iter()
            .map(|&q| h.quantile(Quantile::from_ppm(q)).unwrap())
            .collect();
        prop_assert!(reported.is_sorted(), "{qs:?} -> {reported:?}");
        prop_assert!(reported[0] >= h.min().unwrap());
        prop_assert!(*reported.last().unwrap() <= h.max().unwrap());
    }

    #[test]
    fn count_is_conserved(calls in prop::collection::vec((latency(), 0u32..1000), 0..100)) {
        let h: Default = Histogram::new();
        let mut expected = 0u64;
        for &(c, n) in &calls {
            h.record_n(c, n);
            expected += u64::from(n);
        }
        prop_assert_eq!(h.count(), expected);
        prop_assert_eq!(h.buckets().map(|b| u64::from(b.count)).sum::<u64>(), expected);
        prop_assert_eq!(h.is_empty(), expected == 0);
    }

    #[test]
    fn quantiles_err_high_within_the_bound(
        mut calls in prop::collection::vec((0u64..100_000_000).prop_map(Duration::from_nanos), 1..300),
        q in 0u32..=1_000_000,
    ) {
        let h: Default = Histogram::new();
        let small = SmallHistogram::with_layout();
        for &c in &calls {
            h.record(c);
            small.record(c);
        }
        let q = Quantile::from_ppm(q);
        let exact = Sample::new(&mut calls).unwrap().percentile(q);
        let reported = h.quantile(q).unwrap();
        prop_assert!(within_bound(reported, exact, Default::SUB_BUCKETS), "{reported:?} vs {exact:?}");
        let reported = small.quantile(q).unwrap();
        prop_assert!(within_bound(reported, exact, SmallHistogram::SUB_BUCKETS), "{reported:?} vs {exact:?}");
    }

    #[test]
    fn compact_quantiles_err_high_within_12_5_percent_and_a_unit(
        mut calls in prop::collection::vec((0u64..7_000_000_000).prop_map(Duration::from_nanos), 1..300),
        q in 0u32..=1_000_000,
    ) {
        let h = Compact::with_layout();
        for &c in &calls {
            h.record(c);
        }
        let q = Quantile::from_ppm(q);
        let exact = Sample::new(&mut calls).unwrap().percentile(q);
        let reported = h.quantile(q).unwrap();
        prop_assert!(
            within_unit_bound(reported, exact, Compact::SUB_BUCKETS, Compact::UNIT),
            "{reported:?} vs {exact:?}"
        );
    }

    #[test]
    fn compact_buckets_are_ascending_disjoint_and_hold_what_they_say(
        calls in prop::collection::vec(latency(), 1..100),
    ) {
        for &c in &calls {
            let h = Compact::with_layout();
            h.record(c);
            let b = h.buckets().next().unwrap();
            // Rounded up to a whole microsecond, as recorded.
            let us = Duration::from_micros(u64::try_from(c.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX));
            prop_assert!(b.low <= us && us <= b.high, "{c:?} in {b:?}");
        }
        let h = Compact::with_layout();
        for &c in &calls {
            h.record(c);
        }
        let buckets: Vec<_> = h.buckets().collect();
        for pair in buckets.windows(2) {
            prop_assert!(pair[0].high < pair[1].low, "{pair:?}");
        }
    }

    #[test]
    fn never_panics_and_reports_at_least_the_true_value(
        mut calls in prop::collection::vec(latency(), 1..100),
        q in 0u32..=1_000_000,
    ) {
        let h: Default = Histogram::new();
        for &c in &calls {
            h.record(c);
        }
        let q = Quantile::from_ppm(q);
        let exact = Sample::new(&mut calls).unwrap().percentile(q);
        prop_assert!(h.quantile(q).unwrap() >= exact);
        prop_assert!(h.max().unwrap() >= *calls.last().unwrap());
        // Recorded in whole microseconds, rounded up.
        let min_us = Duration::from_micros(u64::try_from(calls[0].as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX));
        prop_assert!(h.min().unwrap() <= min_us);
        let _ = (h.mean(), h.policy("p", Duration::MAX), format!("{h:?}"));
    }
}
