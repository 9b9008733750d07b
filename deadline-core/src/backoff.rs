//! Backoff between attempts: exponential, with jitter.

use core::time::Duration;

use crate::rng::Rng;
use crate::time::{duration_to_micros, micros_to_duration, mul_wide};

/// How the backoff before a retry is randomised. The formulas are in the [`Backoff`] docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Jitter {
    /// No randomness: `t(n) = min(max, base × multiplier^n)`.
    None,
    /// AWS "full jitter": uniform in `[0, t(n)]`. The fewest calls and the least total work of
    /// the AWS forms, at the price of sometimes retrying almost at once.
    Full,
    /// AWS "equal jitter": half of `t(n)` fixed, the other half uniform, so in
    /// `[t(n)/2, t(n)]`.
    Equal,
    /// AWS "decorrelated jitter": `min(max, uniform(base, 3 × previous))`, where `previous` is
    /// the previous wait (`base` before the first retry). It does not use `n` or the
    /// multiplier.
    Decorrelated,
    /// gRPC's connection backoff: `t(n)` times a factor uniform in `[0.8, 1.2]`. The result
    /// may exceed `max` by up to 20%, as in gRPC.
    Grpc,
}

/// A growth factor `num / den` for exponential backoff, such as 2 or gRPC's 1.6 (`8 / 5`).
///
/// A factor under 1 (or a zero denominator) is read as 1: the backoff never shrinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Multiplier {
    num: u32,
    den: u32,
}

impl Multiplier {
    /// Doubling: the AWS formulas' `2^n`.
    pub const TWO: Multiplier = Multiplier { num: 2, den: 1 };
    /// gRPC's default backoff multiplier, 1.6.
    pub const GRPC: Multiplier = Multiplier { num: 8, den: 5 };
    /// No growth: a constant backoff.
    pub const ONE: Multiplier = Multiplier { num: 1, den: 1 };

    /// The factor `num / den`; under 1 (or with `den == 0`) it is read as 1.
    #[must_use]
    pub const fn new(num: u32, den: u32) -> Self {
        if den == 0 || num <= den {
            return Multiplier::ONE;
        }
        // Reduced, so that `num^n` and `den^n` stay exact for as long as possible.
        let g = gcd(num, den);
        match (num.checked_div(g), den.checked_div(g)) {
            (Some(num), Some(den)) => Multiplier { num, den },
            _ => Multiplier::ONE,
        }
    }

    /// The numerator.
    #[must_use]
    pub const fn num(self) -> u32 {
        self.num
    }

    /// The denominator (never zero).
    #[must_use]
    pub const fn den(self) -> u32 {
        self.den
    }

    /// `self^n` as an exact fraction `(num^n, den^n)`, if both fit a `u64`.
    ///
    /// One multiply per factor, in one loop: a multiplier is 1 or has `num > den >= 1`
    /// ([`Multiplier::new`]), so `den^n <= num^n` fits whenever `num^n` does, and with
    /// `num >= 2` the loop ends by the 64th factor (a product past `u64::MAX`). Smaller than
    /// two `checked_pow`s, each a square-and-multiply loop with two overflow checks a step.
    fn pow_exact(self, n: u32) -> Option<(u64, u64)> {
        let (num, den) = (u64::from(self.num), u64::from(self.den.max(1)));
        if num <= den {
            // The multiplier 1 (the only one with `num <= den`): every power is 1.
            return Some((1, 1));
        }
        let (mut p, mut q) = (1u64, 1u64);
        for _ in 0..n {
            p = p.checked_mul(num)?;
            // `den < num`, so `q <= p`: no wrap.
            q = q.wrapping_mul(den);
        }
        Some((p, q))
    }

    /// `self^n` in 32.32 fixed point (rounded down), saturating at `u64::MAX` (a factor of
    /// about 4.3e9).
    fn pow_q32(self, n: u32) -> u64 {
        const ONE_Q32: u64 = 1 << 32;
        let den = u64::from(self.den.max(1));
        // `(num << 32) / den`: the high half is zero and `den >= 1`, so it always fits.
        let mut base = div_wide(0, u64::from(self.num) << 32, den)
            .unwrap_or(ONE_Q32)
            .max(ONE_Q32);
        let mut acc = ONE_Q32;
        let mut n = n;
        while n > 0 {
            if n & 1 == 1 {
                acc = mul_q32(acc, base);
            }
            n >>= 1;
            if n > 0 {
                base = mul_q32(base, base);
            }
        }
        acc
    }
}

/// `a × b` for two 32.32 fixed-point numbers, saturating at `u64::MAX`: the product's bits
/// 32 to 95, in u64 halves (no `u128`).
fn mul_q32(a: u64, b: u64) -> u64 {
    let (high, low) = mul_wide(a, b);
    if high >> 32 != 0 {
        return u64::MAX;
    }
    (high << 32) | (low >> 32)
}

/// The greatest common divisor, for reducing a ratio.
const fn gcd(mut a: u32, mut b: u32) -> u32 {
    while let Some(r) = a.checked_rem(b) {
        a = b;
        b = r;
    }
    a
}

/// `micros × num / den`, saturating, rounding down (a zero `den` reads as 1).
///
/// In u64 arithmetic: a 64 × 64 → 128-bit product in halves, then, unless `den <= 1` (every
/// integer multiplier, 2 among them), [`div_wide`].
fn scale(micros: u64, num: u64, den: u64) -> u64 {
    let (high, low) = mul_wide(micros, num);
    if den <= 1 {
        return if high == 0 { low } else { u64::MAX };
    }
    div_wide(high, low, den).unwrap_or(u64::MAX)
}

/// `(high × 2^64 + low) / den`, rounded down, or `None` when the quotient does not fit a u64
/// (`high >= den`, so also when `den` is zero).
///
/// Shift-and-subtract, one quotient bit per step, 64 steps: a few hundred cycles, with no
/// 64- or 128-bit division builtin (Cortex-M divides 32 bits at most). Only an exponential
/// backoff whose multiplier is not a whole number comes here, once per retry.
fn div_wide(high: u64, low: u64, den: u64) -> Option<u64> {
    if high >= den {
        return None;
    }
    // Invariant: `rem < den`.
    let mut rem = high;
    let mut low = low;
    let mut quotient = 0u64;
    for _ in 0..64 {
        // The 65-bit value `2 × rem + next bit` is below `2 × den`: one subtraction of `den`
        // brings it under `den`. Its top bit is `carry`; when set, the value is at least
        // 2^64 > den, and the wrapping subtraction gives its true difference (below den).
        let carry = rem >> 63;
        rem = (rem << 1) | (low >> 63);
        low <<= 1;
        quotient <<= 1;
        if carry != 0 || rem >= den {
            rem = rem.wrapping_sub(den);
            quotient |= 1;
        }
    }
    Some(quotient)
}

/// `(t × 4 / 5, t × 6 / 5)`, rounded down, the second saturating: gRPC's jitter range.
///
/// As `t - ceil(t / 5)` and `t + floor(t / 5)`, with `t / 5` a multiply-high by
/// `ceil(2^66 / 5)` (exact for every u64, the compilers' own form): no division.
fn grpc_range(t: u64) -> (u64, u64) {
    let fifth = mul_wide(t, 0xCCCC_CCCC_CCCC_CCCD).0 >> 2;
    // `5 × fifth <= t`: neither operation wraps.
    let rest = t.wrapping_sub(fifth.wrapping_mul(5));
    let ceil_fifth = fifth.saturating_add(u64::from(rest != 0));
    (t.saturating_sub(ceil_fifth), t.saturating_add(fifth))
}

/// Exponential backoff with jitter. The formulas are in the docs above.
///
/// ```
/// use deadline_core::ms;
/// use deadline_core::policy::{Backoff, Jitter, Multiplier};
///
/// // gRPC's defaults: 1 s, x1.6, at most 120 s, jitter x(0.8..1.2).
/// let grpc = Backoff::grpc(ms(1_000)).with_max(ms(120_000));
/// assert_eq!(grpc.multiplier(), Multiplier::GRPC);
/// assert_eq!(grpc.ceiling(2), ms(2_560));
/// assert_eq!(grpc.bounds(2, ms(0)), (ms(2_048), ms(3_072)));
/// ```
///
/// The wait before retry `n` (`n = 0` for the first retry) starts from the exponential
/// ceiling
///
/// ```text
/// t(n) = min(max, base × multiplier^n)          (multiplier 2 unless set)
/// ```
///
/// and [`Jitter`] then spreads it so that clients that failed together do not come back
/// together (the AWS Architecture Blog, "Exponential Backoff And Jitter", 2015, and gRPC's
/// connection backoff):
///
/// | jitter | wait before retry `n` |
/// |---|---|
/// | [`Jitter::None`] | `t(n)` |
/// | [`Jitter::Full`] | `uniform(0, t(n))` |
/// | [`Jitter::Equal`] | `t(n)/2 + uniform(0, t(n) - t(n)/2)`, so in `[t(n)/2, t(n)]` |
/// | [`Jitter::Decorrelated`] | `min(max, uniform(base, max(base, 3 × previous)))`, with `previous = base` before the first retry |
/// | [`Jitter::Grpc`] | `uniform(t(n) × 0.8, t(n) × 1.2)`: up to 20% over `max`, as in gRPC |
///
/// All of it is integer arithmetic in microseconds (no floats, no libm): the multiplier is a
/// ratio, raised to the `n`th power by squaring in 32.32 fixed point, and every step saturates,
/// so no input can overflow or panic. Bounds are inclusive; products round down.
///
/// ```
/// use deadline_core::ms;
/// use deadline_core::policy::{Backoff, Jitter};
/// use deadline_core::rng::SplitMix64;
///
/// let b = Backoff::exponential(ms(100)).with_max(ms(1_000)).with_jitter(Jitter::Full);
/// assert_eq!(b.ceiling(0), ms(100));
/// assert_eq!(b.ceiling(3), ms(800));
/// assert_eq!(b.ceiling(4), ms(1_000)); // 1600 capped at max
///
/// let mut rng = SplitMix64::new(1);
/// let wait = b.delay(3, ms(0), &mut rng);
/// assert!(wait <= ms(800));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Backoff {
    /// The first backoff, before jitter (gRPC's `initial_backoff`).
    pub(crate) base: Duration,
    /// The largest backoff, before jitter (the AWS formulas' `cap`).
    pub(crate) max: Duration,
    /// How the backoff is randomised.
    pub(crate) jitter: Jitter,
    /// The growth per retry: `t(n) = min(max, base × multiplier^n)`.
    pub(crate) multiplier: Multiplier,
}

impl Backoff {
    /// No wait between attempts.
    pub const NONE: Backoff = Backoff {
        base: Duration::ZERO,
        max: Duration::ZERO,
        jitter: Jitter::None,
        multiplier: Multiplier::TWO,
    };

    /// The backoff of a policy that sets none ([`Policy::with_retries`](crate::Policy::with_retries)
    /// alone): exponential from 10 ms up to 100 ms, doubling, with full jitter (a wait drawn
    /// uniformly under each ceiling, so that callers that failed together do not retry
    /// together).
    pub const DEFAULT: Backoff =
        Backoff::exponential(Duration::from_millis(10)).with_max(Duration::from_millis(100));

    /// Exponential backoff from `base`, doubling, with full jitter and no ceiling until
    /// [`with_max`](Self::with_max) sets one (the deadline bounds it all the same).
    #[must_use]
    pub const fn exponential(base: Duration) -> Self {
        Backoff {
            base,
            max: Duration::MAX,
            jitter: Jitter::Full,
            multiplier: Multiplier::TWO,
        }
    }

    /// The same backoff, never longer than `max` before jitter.
    #[must_use]
    pub const fn with_max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// The same wait before every retry, with no jitter: a growth factor of one, and no
    /// ceiling, so that a later setting acts ([`with_multiplier`](Self::with_multiplier) makes
    /// it grow, [`with_jitter`](Self::with_jitter) spreads it, [`with_max`](Self::with_max)
    /// bounds it).
    #[must_use]
    pub const fn constant(wait: Duration) -> Self {
        Backoff {
            base: wait,
            max: Duration::MAX,
            jitter: Jitter::None,
            multiplier: Multiplier::ONE,
        }
    }

    /// gRPC's form: from `initial`, times 1.6 per retry, with a factor uniform in
    /// `[0.8, 1.2]`; set its `max_backoff` with [`with_max`](Self::with_max).
    #[must_use]
    pub const fn grpc(initial: Duration) -> Self {
        Backoff {
            base: initial,
            max: Duration::MAX,
            jitter: Jitter::Grpc,
            multiplier: Multiplier::GRPC,
        }
    }

    /// The same backoff with another growth factor, `num / den` (see [`Multiplier::new`]).
    #[must_use]
    pub const fn with_multiplier(mut self, num: u32, den: u32) -> Self {
        self.multiplier = Multiplier::new(num, den);
        self
    }

    /// The same backoff with another jitter.
    #[must_use]
    pub const fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The exponential ceiling before retry `n` (0 for the first retry), before jitter:
    /// `min(max, base × multiplier^n)`, saturating.
    ///
    /// Exact (rounded down to the microsecond) while `num^n` and `den^n` of the reduced
    /// multiplier fit a `u64` (up to `n = 63` for 2, `n = 21` for 1.6); past that, computed in
    /// 32.32 fixed point, and `max` once `multiplier^n` passes about 4.3e9.
    #[must_use]
    pub fn ceiling(&self, n: u32) -> Duration {
        micros_to_duration(self.ceiling_micros(n))
    }

    /// [`ceiling`](Backoff::ceiling) in whole microseconds, as the jitters use it.
    fn ceiling_micros(&self, n: u32) -> u64 {
        let base = duration_to_micros(self.base);
        let max = duration_to_micros(self.max);
        let t = if let Some((p, q)) = self.multiplier.pow_exact(n) {
            scale(base, p, q)
        } else {
            let pow = self.multiplier.pow_q32(n);
            if pow == u64::MAX && base > 0 {
                max
            } else {
                mul_q32(base, pow)
            }
        };
        t.min(max)
    }

    /// The inclusive range the wait before retry `n` is drawn from, given the previous wait
    /// (only [`Jitter::Decorrelated`] uses it; zero means "no previous wait" and reads as
    /// `base`). See the table in the docs above.
    #[must_use]
    pub fn bounds(&self, n: u32, previous: Duration) -> (Duration, Duration) {
        let (lo, hi) = self.bounds_micros(n, previous);
        (micros_to_duration(lo), micros_to_duration(hi))
    }

    fn bounds_micros(&self, n: u32, previous: Duration) -> (u64, u64) {
        if let Jitter::Decorrelated = self.jitter {
            let (base, hi, max) = self.decorrelated(previous);
            // min(max, uniform(base, hi)) lies in [min(base, max), min(hi, max)].
            return (base.min(max), hi.min(max));
        }
        // Every other jitter spreads the ceiling, read once.
        let t = self.ceiling_micros(n);
        match self.jitter {
            Jitter::Full => (0, t),
            Jitter::Equal => (t / 2, t),
            Jitter::Grpc => grpc_range(t),
            Jitter::None | Jitter::Decorrelated => (t, t),
        }
    }

    /// Decorrelated jitter's range before the cap, in micros: `(base, max(base, 3 x previous),
    /// max)`, with a zero `previous` (before the first retry) read as `base`.
    fn decorrelated(&self, previous: Duration) -> (u64, u64, u64) {
        let base = duration_to_micros(self.base);
        let previous = match duration_to_micros(previous) {
            0 => base,
            p => p,
        };
        let hi = previous.saturating_mul(3).max(base);
        (base, hi, duration_to_micros(self.max))
    }

    /// The wait before retry `n` (0 for the first retry), drawn from `rng`; `previous` is the
    /// previous wait, used by [`Jitter::Decorrelated`] (pass zero before the first retry).
    ///
    /// Always in [`bounds(n, previous)`](Backoff::bounds). It takes one
    /// [`Rng::u64_between`] draw, or none when the range is a single value (always so for
    /// [`Jitter::None`]).
    pub fn delay<R: Rng + ?Sized>(&self, n: u32, previous: Duration, rng: &mut R) -> Duration {
        if let Jitter::Decorrelated = self.jitter {
            // min(max, uniform(base, hi)): draw over the uncapped range, then cap, as AWS does.
            let (base, hi, max) = self.decorrelated(previous);
            return micros_to_duration(rng.u64_between(base, hi).min(max));
        }
        let (lo, hi) = self.bounds_micros(n, previous);
        if lo == hi {
            return micros_to_duration(lo);
        }
        micros_to_duration(rng.u64_between(lo, hi))
    }
    /// The first backoff, before jitter (gRPC's `initial_backoff`).
    #[must_use]
    pub const fn base(&self) -> Duration {
        self.base
    }

    /// The largest backoff, before jitter (the AWS formulas' `cap`).
    #[must_use]
    pub const fn max(&self) -> Duration {
        self.max
    }

    /// How the backoff is randomised.
    #[must_use]
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The growth per retry: `t(n) = min(max, base × multiplier^n)`.
    #[must_use]
    pub const fn multiplier(&self) -> Multiplier {
        self.multiplier
    }
}
