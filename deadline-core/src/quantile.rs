//! [`Quantile`]: a quantile held exactly in parts per million, as the histogram and the
//! offline analysis read it.

/// Parts per million in one.
const PPM: u32 = 1_000_000;

/// A quantile `q` in `[0, 1]`, held exactly in parts per million.
///
/// Build one from an integer ([`percent`](Quantile::percent),
/// [`per_mille`](Quantile::per_mille), [`from_ppm`](Quantile::from_ppm)), so that p99.9 is
/// exactly 999/1000, or from an `f64` with [`from_fraction`](Quantile::from_fraction).
/// Out-of-range inputs are clamped to `[0, 1]`.
///
/// ```
/// use deadline_core::policy::Quantile;
///
/// assert_eq!(Quantile::per_mille(999), Quantile::P999);
/// assert_eq!(Quantile::from_fraction(0.95), Quantile::P95);
/// // Nearest rank: the 95th of 100 values, the 1st of 1, the 999th of 1000.
/// assert_eq!(Quantile::P95.nearest_rank(100), 95);
/// assert_eq!(Quantile::P95.nearest_rank(1), 1);
/// assert_eq!(Quantile::P999.nearest_rank(1000), 999);
/// ```
///
/// It has no `Default`: no one quantile is right for every use (a hedge is sent at p95, a
/// cap set at p99.9), and a zero default would be the smallest value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Quantile {
    ppm: u32,
}

impl Quantile {
    /// The smallest value (nearest rank 1).
    pub const MIN: Quantile = Quantile { ppm: 0 };
    /// The median.
    pub const P50: Quantile = Quantile { ppm: 500_000 };
    /// The 95th percentile: the hedge delay.
    pub const P95: Quantile = Quantile { ppm: 950_000 };
    /// The 99th percentile.
    pub const P99: Quantile = Quantile { ppm: 990_000 };
    /// The 99.9th percentile: the cap, for a false-timeout rate of 0.1%.
    pub const P999: Quantile = Quantile { ppm: 999_000 };
    /// The largest value.
    pub const MAX: Quantile = Quantile { ppm: PPM };

    /// `ppm` parts per million, clamped to one million.
    #[must_use]
    pub const fn from_ppm(ppm: u32) -> Self {
        Quantile {
            ppm: if ppm > PPM { PPM } else { ppm },
        }
    }

    /// `per_mille` thousandths (999 for p99.9), clamped to 1000.
    #[must_use]
    pub const fn per_mille(per_mille: u32) -> Self {
        Quantile::from_ppm(per_mille.saturating_mul(1_000))
    }

    /// `percent` hundredths (95 for p95), clamped to 100.
    #[must_use]
    pub const fn percent(percent: u32) -> Self {
        Quantile::from_ppm(percent.saturating_mul(10_000))
    }

    /// The quantile nearest to `q`, rounded to the nearest part per million. `q` is clamped
    /// to `[0, 1]`; NaN reads as 0.
    #[must_use]
    pub fn from_fraction(q: f64) -> Self {
        if q.is_nan() || q <= 0.0 {
            Quantile::MIN
        } else if q >= 1.0 {
            Quantile::MAX
        } else {
            // In (0, 1e6 + 0.5): the cast is exact after truncation, and saturating anyway.
            Quantile::from_ppm((q * f64::from(PPM) + 0.5) as u32)
        }
    }

    /// Parts per million.
    #[must_use]
    pub const fn as_ppm(self) -> u32 {
        self.ppm
    }

    /// As a fraction in `[0, 1]`.
    #[must_use]
    pub fn as_fraction(self) -> f64 {
        f64::from(self.ppm) / f64::from(PPM)
    }

    /// The nearest rank of this quantile among `n` sorted values: `⌈q·n⌉`, at least 1 and at
    /// most `n` (and 0 when `n` is 0). Exact integer arithmetic.
    #[must_use]
    pub const fn nearest_rank(self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // ⌈ppm·n / 10^6⌉ in u64 (no u128: a Cortex-M has no 128-bit arithmetic, and its
        // division builtin is large): with n = whole·10^6 + rest, it is
        // ppm·whole + ⌈ppm·rest / 10^6⌉, where ppm·whole <= n and ppm·rest < 10^12.
        let (ppm, per) = (self.ppm as u64, PPM as u64);
        // The divisor is a non-zero constant: neither `checked_` operation fails.
        let whole = match n.checked_div(per) {
            Some(w) => w,
            None => 0,
        };
        let rest = match n.checked_rem(per) {
            Some(r) => r,
            None => 0,
        };
        // Neither product wraps (bounded above); `div_ceil` by the constant cannot fail.
        let rank = ppm
            .wrapping_mul(whole)
            .saturating_add(ppm.wrapping_mul(rest).div_ceil(per));
        if rank == 0 {
            1
        } else if rank > n {
            n
        } else {
            rank
        }
    }
}
