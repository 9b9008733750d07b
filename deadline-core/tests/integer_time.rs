//! The core's time arithmetic is whole microseconds in `u64`, with no `u128` and no 64-bit
//! division on the per-call path. This file checks that it gives exactly what the earlier
//! 128-bit formulas gave: each oracle below is the earlier code, line for line, in `u128`
//! (and `Duration::from_micros`, `Duration::as_micros`, `Duration::as_millis` from `core`),
//! compared over wide input ranges and their edges (0, `u64::MAX`, powers of two, multiples
//! of a million, huge multipliers, every jitter).

use std::time::Duration;

use deadline_core::policy::{Backoff, Jitter, Multiplier};
use deadline_core::rng::Rng;
use deadline_core::statement::{StatementDecision, StatementPolicy, statement_timeout};
use deadline_core::{Deadline, Instant};

/// A duration in whole microseconds, rounded down (saturating), as the core keeps one.
fn duration_to_micros(d: Duration) -> u64 {
    Instant::ZERO.saturating_add(d).as_micros()
}

/// Whole microseconds as a duration, as the core gives one back.
fn micros_to_duration(micros: u64) -> Duration {
    Instant::from_micros(micros).since_origin()
}
use proptest::prelude::*;

// ---- The oracles: the earlier u128 code. ----

/// The earlier `Multiplier::pow_exact`.
fn old_pow_exact(m: Multiplier, n: u32) -> Option<(u64, u64)> {
    let p = u64::from(m.num()).checked_pow(n)?;
    let q = u64::from(m.den().max(1)).checked_pow(n)?;
    Some((p, q))
}

/// The earlier `mul_q32`.
fn old_mul_q32(a: u64, b: u64) -> u64 {
    let product = u128::from(a).saturating_mul(u128::from(b)) >> 32;
    u64::try_from(product).unwrap_or(u64::MAX)
}

/// The earlier `Multiplier::pow_q32`.
fn old_pow_q32(m: Multiplier, n: u32) -> u64 {
    const ONE_Q32: u64 = 1 << 32;
    let den = u64::from(m.den().max(1));
    let mut base = (u64::from(m.num()) << 32)
        .checked_div(den)
        .unwrap_or(ONE_Q32)
        .max(ONE_Q32);
    let mut acc = ONE_Q32;
    let mut n = n;
    while n > 0 {
        if n & 1 == 1 {
            acc = old_mul_q32(acc, base);
        }
        n >>= 1;
        if n > 0 {
            base = old_mul_q32(base, base);
        }
    }
    acc
}

/// The earlier `scale`.
fn old_scale(micros: u64, num: u64, den: u64) -> u64 {
    let product = u128::from(micros).saturating_mul(u128::from(num));
    let quotient = product.checked_div(u128::from(den)).unwrap_or(product);
    u64::try_from(quotient).unwrap_or(u64::MAX)
}

/// The earlier `Backoff::ceiling`, in microseconds.
fn old_ceiling(b: &Backoff, n: u32) -> u64 {
    let base = duration_to_micros(b.base());
    let max = duration_to_micros(b.max());
    let t = if let Some((p, q)) = old_pow_exact(b.multiplier(), n) {
        old_scale(base, p, q)
    } else {
        let pow = old_pow_q32(b.multiplier(), n);
        if pow == u64::MAX && base > 0 {
            max
        } else {
            let product = u128::from(base).saturating_mul(u128::from(pow)) >> 32;
            u64::try_from(product).unwrap_or(u64::MAX)
        }
    };
    t.min(max)
}

/// The earlier `Backoff::decorrelated`.
fn old_decorrelated(b: &Backoff, previous: Duration) -> (u64, u64, u64) {
    let base = duration_to_micros(b.base());
    let previous = match duration_to_micros(previous) {
        0 => base,
        p => p,
    };
    let hi = previous.saturating_mul(3).max(base);
    (base, hi, duration_to_micros(b.max()))
}

/// The earlier `Backoff::bounds_micros`.
fn old_bounds(b: &Backoff, n: u32, previous: Duration) -> (u64, u64) {
    match b.jitter() {
        Jitter::None => {
            let t = old_ceiling(b, n);
            (t, t)
        }
        Jitter::Full => (0, old_ceiling(b, n)),
        Jitter::Equal => {
            let t = old_ceiling(b, n);
            (t / 2, t)
        }
        Jitter::Decorrelated => {
            let (base, hi, max) = old_decorrelated(b, previous);
            (base.min(max), hi.min(max))
        }
        Jitter::Grpc => {
            let t = old_ceiling(b, n);
            (old_scale(t, 4, 5), old_scale(t, 6, 5))
        }
        _ => unreachable!("a jitter this file does not know"),
    }
}

/// The earlier `Rng::u64_between`, for one draw.
fn old_u64_between(draw: u64, lo: u64, hi: u64) -> u64 {
    let (lo, hi) = if hi < lo { (hi, lo) } else { (lo, hi) };
    let gap = hi.saturating_sub(lo);
    let Some(span) = gap.checked_add(1) else {
        return draw;
    };
    let scaled = u128::from(draw)
        .saturating_mul(u128::from(span))
        .checked_shr(64)
        .unwrap_or(0);
    let offset = u64::try_from(scaled).unwrap_or(gap).min(gap);
    lo.saturating_add(offset)
}

/// The earlier `Backoff::delay`, for one draw.
fn old_delay(b: &Backoff, n: u32, previous: Duration, draw: u64) -> u64 {
    if let Jitter::Decorrelated = b.jitter() {
        let (base, hi, max) = old_decorrelated(b, previous);
        return old_u64_between(draw, base, hi).min(max);
    }
    let (lo, hi) = old_bounds(b, n, previous);
    if lo == hi {
        return lo;
    }
    old_u64_between(draw, lo, hi)
}

/// The earlier `statement_timeout`'s milliseconds.
fn old_statement_millis(available: Duration) -> u32 {
    available
        .as_millis()
        .min(deadline_core::statement::MAX_STATEMENT_MILLIS as u128) as u32
}

// ---- The inputs. ----

/// A random source that draws one fixed 64-bit value (its two halves for `next_u32`).
struct Fixed(u64, bool);

impl Rng for Fixed {
    fn next_u32(&mut self) -> u32 {
        self.1 = !self.1;
        if self.1 {
            (self.0 >> 32) as u32
        } else {
            self.0 as u32
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.0
    }
}

const JITTERS: [Jitter; 5] = [
    Jitter::None,
    Jitter::Full,
    Jitter::Equal,
    Jitter::Decorrelated,
    Jitter::Grpc,
];

/// Microseconds over the whole u64 range, weighted toward the edges and realistic values.
fn micros() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        (0..64u32).prop_map(|k| 1u64 << k),
        (0..64u32).prop_map(|k| (1u64 << k).wrapping_sub(1)),
        (0..=18_446_744_073_709u64).prop_map(|s| s * 1_000_000),
        (0..=18_446_744_073_709u64, 0..3u64).prop_map(|(s, d)| (s * 1_000_000).saturating_sub(d)),
        0..10_000_000_000u64,
        any::<u64>(),
        any::<u64>().prop_map(|x| x >> 20),
    ]
}

/// A duration: whole microseconds, or beyond `u64::MAX` microseconds.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        8 => micros().prop_map(Duration::from_micros),
        1 => (any::<u64>(), 0..1_000_000_000u32).prop_map(|(s, n)| Duration::new(s, n)),
        1 => Just(Duration::MAX),
    ]
}

/// A multiplier's parts: the usual ones, small ones and huge ones.
fn ratio_part() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1u32),
        Just(u32::MAX),
        Just(u32::MAX - 1),
        1..10u32,
        1..1_000u32,
        (0..32u32).prop_map(|k| 1u32 << k),
        any::<u32>(),
    ]
}

/// A retry number: the early ones, the ones where exact powers stop fitting, and huge ones.
fn retry_n() -> impl Strategy<Value = u32> {
    prop_oneof![0..30u32, 0..200u32, Just(u32::MAX), any::<u32>()]
}

fn backoff() -> impl Strategy<Value = Backoff> {
    (
        duration(),
        duration(),
        ratio_part(),
        ratio_part(),
        0..5usize,
    )
        .prop_map(|(base, max, num, den, j)| {
            Backoff::exponential(base)
                .with_max(max)
                .with_jitter(JITTERS[j])
                .with_multiplier(num, den)
        })
}

fn draw() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(u64::MAX), Just(1u64 << 63), any::<u64>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    #[test]
    fn micros_to_duration_is_from_micros(m in micros()) {
        prop_assert_eq!(micros_to_duration(m), Duration::from_micros(m));
    }

    #[test]
    fn instant_arithmetic_is_the_u128_one(a in micros(), d in duration()) {
        let t = Instant::from_micros(a);
        prop_assert_eq!(t.as_millis(), a / 1_000);
        let wide = d.as_micros();
        let add = u64::try_from(wide).ok().and_then(|d| a.checked_add(d));
        let sub = u64::try_from(wide).ok().and_then(|d| a.checked_sub(d));
        prop_assert_eq!(t.checked_add(d).map(Instant::as_micros), add);
        prop_assert_eq!(t.checked_sub(d).map(Instant::as_micros), sub);
        prop_assert_eq!(t.since_origin(), Duration::from_micros(a));
        let e = Instant::from_micros(a / 3);
        prop_assert_eq!(t.saturating_duration_since(e), Duration::from_micros(a - a / 3));
    }

    #[test]
    fn u64_between_is_the_widening_multiply(draw in draw(), lo in micros(), hi in micros()) {
        let mut rng = Fixed(draw, false);
        prop_assert_eq!(rng.u64_between(lo, hi), old_u64_between(draw, lo, hi));
    }

    #[test]
    fn ceiling_is_the_u128_one(b in backoff(), n in retry_n()) {
        prop_assert_eq!(b.ceiling(n), Duration::from_micros(old_ceiling(&b, n)));
    }

    #[test]
    fn bounds_and_delay_are_the_u128_ones(
        b in backoff(),
        n in retry_n(),
        previous in duration(),
        draw in draw(),
    ) {
        for jitter in JITTERS {
            let b = b.with_jitter(jitter);
            let (lo, hi) = old_bounds(&b, n, previous);
            prop_assert_eq!(
                b.bounds(n, previous),
                (Duration::from_micros(lo), Duration::from_micros(hi)),
                "{:?}", jitter
            );
            let mut rng = Fixed(draw, false);
            prop_assert_eq!(
                b.delay(n, previous, &mut rng),
                Duration::from_micros(old_delay(&b, n, previous, draw)),
                "{:?}", jitter
            );
        }
    }

    #[test]
    fn statement_millis_are_the_u128_ones(
        cap in duration(),
        reserve in duration(),
        budget in duration(),
        now in micros(),
    ) {
        let policy = StatementPolicy::capped(cap)
            .with_floor(Duration::ZERO)
            .with_reserve(reserve)
            .with_margin(Duration::ZERO);
        let deadline = Deadline::after(Instant::ZERO, budget);
        let now = Instant::from_micros(now);
        let available = deadline.remaining(now).saturating_sub(reserve).min(cap);
        let expect = old_statement_millis(available);
        match statement_timeout(&policy, deadline, now) {
            StatementDecision::Set(t) => prop_assert_eq!(t.millis(), expect),
            StatementDecision::DontStart(s) => {
                prop_assert_eq!(expect, 0);
                prop_assert_eq!(s.available(), available);
            }
        }
    }
}

/// gRPC's range at and around every multiple of 5 near the edges, where `t × 4 / 5` and
/// `t × 6 / 5` round and saturate.
#[test]
fn grpc_range_at_the_edges() {
    for t in (0..2_000u64).chain(u64::MAX - 2_000..=u64::MAX) {
        let b = Backoff::grpc(Duration::from_micros(t))
            .with_max(Duration::MAX)
            .with_multiplier(1, 1);
        let expect = (old_scale(t, 4, 5), old_scale(t, 6, 5));
        let (lo, hi) = b.bounds(0, Duration::ZERO);
        assert_eq!(
            (duration_to_micros(lo), duration_to_micros(hi)),
            expect,
            "t = {t}"
        );
    }
}

/// Every microsecond count around the first and last few thousand seconds converts exactly.
#[test]
fn micros_to_duration_around_whole_seconds() {
    for s in (0..3_000u64).chain(u64::MAX / 1_000_000 - 3_000..=u64::MAX / 1_000_000) {
        for d in [0u64, 1, 2, 499_999, 500_000, 999_998, 999_999] {
            let m = s.saturating_mul(1_000_000).saturating_add(d);
            assert_eq!(micros_to_duration(m), Duration::from_micros(m), "{m}");
        }
    }
    for m in u64::MAX - 100_000..=u64::MAX {
        assert_eq!(micros_to_duration(m), Duration::from_micros(m), "{m}");
    }
}
