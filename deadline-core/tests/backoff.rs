//! Backoff formulas (none, full, equal, decorrelated, gRPC) against reference computations
//! written here independently, and the injected random source they draw from.

use std::time::Duration;

use deadline_core::ms;
use deadline_core::policy::{Backoff, Jitter, Multiplier};
use deadline_core::rng::{Rng, Sequence, SplitMix64};

/// The reference exponential ceiling, in u128 microseconds: min(max, base * num^n / den^n).
fn reference_ceiling(base: Duration, max: Duration, num: u128, den: u128, n: u32) -> Duration {
    let (mut p, mut q) = (1u128, 1u128);
    for _ in 0..n {
        p *= num;
        q *= den;
    }
    let t = base.as_micros() * p / q;
    Duration::from_micros(t.min(max.as_micros()) as u64)
}

const LOW: &[u32] = &[0];
const HIGH: &[u32] = &[u32::MAX];

#[test]
fn no_jitter_doubles_up_to_max() {
    let (base, max) = (ms(100), ms(5_000));
    let b = Backoff::exponential(base)
        .with_max(max)
        .with_jitter(Jitter::None);
    let mut rng = SplitMix64::new(9);
    for n in 0..12 {
        let expect = reference_ceiling(base, max, 2, 1, n);
        assert_eq!(b.ceiling(n), expect, "n = {n}");
        assert_eq!(b.delay(n, Duration::ZERO, &mut rng), expect, "n = {n}");
    }
    assert_eq!(b.ceiling(6), max); // 6400 ms capped
}

#[test]
fn full_jitter_spans_zero_to_the_ceiling() {
    let b = Backoff::exponential(ms(10))
        .with_max(ms(1_000))
        .with_jitter(Jitter::Full);
    for n in 0..8 {
        let t = reference_ceiling(ms(10), ms(1_000), 2, 1, n);
        assert_eq!(b.bounds(n, Duration::ZERO), (Duration::ZERO, t));
        assert_eq!(
            b.delay(n, Duration::ZERO, &mut Sequence::new(LOW)),
            Duration::ZERO
        );
        assert_eq!(b.delay(n, Duration::ZERO, &mut Sequence::new(HIGH)), t);
    }
}

#[test]
fn equal_jitter_keeps_half_of_the_ceiling() {
    let b = Backoff::exponential(ms(10))
        .with_max(ms(1_000))
        .with_jitter(Jitter::Equal);
    for n in 0..8 {
        let t = reference_ceiling(ms(10), ms(1_000), 2, 1, n);
        assert_eq!(b.delay(n, Duration::ZERO, &mut Sequence::new(LOW)), t / 2);
        assert_eq!(b.delay(n, Duration::ZERO, &mut Sequence::new(HIGH)), t);
    }
}

#[test]
fn decorrelated_jitter_grows_from_the_previous_wait() {
    let (base, max) = (ms(10), ms(500));
    let b = Backoff::exponential(base)
        .with_max(max)
        .with_jitter(Jitter::Decorrelated);
    // Before the first retry, "previous" is base: uniform(base, 3 base).
    assert_eq!(
        b.delay(0, Duration::ZERO, &mut Sequence::new(HIGH)),
        base * 3
    );
    assert_eq!(b.delay(0, Duration::ZERO, &mut Sequence::new(LOW)), base);
    // Always drawing the top: 30, 90, 270, then capped at 500.
    let mut prev = Duration::ZERO;
    let mut waits = Vec::new();
    for n in 0..5 {
        prev = b.delay(n, prev, &mut Sequence::new(HIGH));
        waits.push(prev);
    }
    let mut expect = Vec::new();
    let mut p = base;
    for _ in 0..5 {
        p = (p * 3).min(max);
        expect.push(p);
    }
    assert_eq!(waits, expect);
}

#[test]
fn grpc_form_is_within_20_percent_of_1_6_to_the_n() {
    let (initial, max) = (ms(1_000), ms(120_000));
    let b = Backoff::grpc(initial).with_max(max);
    for n in 0..15 {
        let t = reference_ceiling(initial, max, 8, 5, n);
        assert_eq!(b.ceiling(n), t, "n = {n}");
        let (lo, hi) = b.bounds(n, Duration::ZERO);
        assert_eq!(lo.as_micros(), t.as_micros() * 4 / 5);
        assert_eq!(hi.as_micros(), t.as_micros() * 6 / 5);
        assert_eq!(b.delay(n, Duration::ZERO, &mut Sequence::new(LOW)), lo);
        assert_eq!(b.delay(n, Duration::ZERO, &mut Sequence::new(HIGH)), hi);
    }
}

#[test]
fn multiplier_is_reduced_and_never_under_one() {
    assert_eq!(Multiplier::new(4, 2), Multiplier::TWO);
    assert_eq!(Multiplier::new(16, 10), Multiplier::GRPC);
    assert_eq!(Multiplier::new(1, 2), Multiplier::ONE);
    assert_eq!(Multiplier::new(3, 0), Multiplier::ONE);
    let b = Backoff::exponential(ms(10))
        .with_max(ms(1_000))
        .with_jitter(Jitter::None)
        .with_multiplier(1, 3);
    assert_eq!(b.ceiling(5), ms(10));
    let c = Backoff::constant(ms(7));
    assert_eq!((c.ceiling(0), c.ceiling(40)), (ms(7), ms(7)));
}

#[test]
fn extreme_inputs_saturate_without_panicking() {
    let odd = Multiplier::new(u32::MAX, u32::MAX - 1);
    for jitter in [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
        Jitter::Grpc,
    ] {
        for (base, max) in [
            (Duration::MAX, Duration::MAX),
            (Duration::from_micros(1), Duration::MAX),
            (Duration::MAX, Duration::ZERO),
            (Duration::ZERO, Duration::ZERO),
        ] {
            for multiplier in [Multiplier::TWO, Multiplier::GRPC, odd] {
                let b = Backoff::exponential(base)
                    .with_max(max)
                    .with_jitter(jitter)
                    .with_multiplier(multiplier.num(), multiplier.den());
                let mut rng = SplitMix64::new(1);
                for n in [0, 1, 63, 64, 1_000, u32::MAX] {
                    let d = b.delay(n, Duration::MAX, &mut rng);
                    let (lo, hi) = b.bounds(n, Duration::MAX);
                    assert!(lo <= d && d <= hi, "{jitter:?} {base:?} {max:?} n={n}");
                }
            }
        }
    }
    // Past the exact range the ceiling is still min(max, ...): a huge n reaches max.
    let b = Backoff::exponential(Duration::from_micros(1))
        .with_max(ms(3_600_000))
        .with_jitter(Jitter::None);
    assert_eq!(b.ceiling(u32::MAX), ms(3_600_000));
    let slow = Backoff::exponential(ms(1))
        .with_max(ms(3_600_000))
        .with_jitter(Jitter::None)
        .with_multiplier(1_001, 1_000);
    assert!(slow.ceiling(100) > slow.ceiling(99));
    assert_eq!(slow.ceiling(u32::MAX), ms(3_600_000));
}

#[test]
fn rng_draws_stay_in_range_and_spread_out() {
    let mut rng = SplitMix64::new(2024);
    let mut buckets = [0u32; 10];
    for _ in 0..10_000 {
        let v = rng.u64_between(100, 109);
        assert!((100..=109).contains(&v));
        buckets[(v - 100) as usize] += 1;
    }
    // 1000 expected per bucket; a fair generator stays well inside +-15%.
    assert!(
        buckets.iter().all(|&c| (850..=1150).contains(&c)),
        "{buckets:?}"
    );
    // Swapped bounds, a single value, the whole range.
    assert!((5..=9).contains(&rng.u64_between(9, 5)));
    assert_eq!(rng.u64_between(7, 7), 7);
    let _ = rng.u64_between(0, u64::MAX);
    let d = rng.duration_between(ms(3), ms(4));
    assert!(ms(3) <= d && d <= ms(4));
}

#[test]
fn splitmix64_matches_the_reference_sequence() {
    // The first outputs of the reference SplitMix64 (Vigna's splitmix64.c) seeded with 0.
    let mut rng = SplitMix64::new(0);
    assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
}

#[test]
fn sequence_cycles_and_an_empty_one_draws_zeros() {
    let mut s = Sequence::new(&[5, 6]);
    assert_eq!([s.next_u32(), s.next_u32(), s.next_u32()], [5, 6, 5]);
    let mut e = Sequence::new(&[]);
    assert_eq!(e.next_u64(), 0);
    let mut rng = SplitMix64::new(1);
    let by_ref: &mut dyn Rng = &mut rng;
    let _ = by_ref.duration_between(ms(1), ms(2));
}

/// A generator with its own range mapping: always the low end, whatever its bits say.
struct LowEnd;

impl Rng for LowEnd {
    fn next_u32(&mut self) -> u32 {
        // The default mapping would read these bits as the high end.
        u32::MAX
    }

    fn u64_between(&mut self, lo: u64, hi: u64) -> u64 {
        lo.min(hi)
    }
}

#[test]
fn a_generators_own_range_mapping_holds_through_a_reference() {
    let b = Backoff::exponential(ms(100)).with_jitter(Jitter::Full);
    let mut rng = LowEnd;
    assert_eq!(b.delay(0, Duration::ZERO, &mut rng), Duration::ZERO);
    // Through `&mut LowEnd` as the generator (as `.rng(&mut my_rng)` passes it).
    assert_eq!(b.delay(0, Duration::ZERO, &mut &mut rng), Duration::ZERO);
}

#[test]
fn a_growth_factor_set_after_constant_acts() {
    let b = Backoff::constant(ms(100));
    assert_eq!([b.ceiling(0), b.ceiling(3)], [ms(100), ms(100)]);
    let b = Backoff::constant(ms(100)).with_multiplier(2, 1);
    assert_eq!([b.ceiling(0), b.ceiling(2)], [ms(100), ms(400)]);
    let b = b.with_max(ms(250));
    assert_eq!(b.ceiling(2), ms(250));
}
