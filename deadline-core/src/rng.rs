//! Injected randomness: the [`Rng`] trait, a small seeded generator ([`SplitMix64`]) and a

use core::time::Duration;

use crate::time::{duration_to_micros, micros_to_duration, mul_wide};

/// A source of uniformly distributed random bits.
///
/// Implement [`next_u32`](Rng::next_u32); the other methods have default bodies built on it.
/// Implementations need not be cryptographic: jitter only has to spread clients apart.
///
/// fixed sequence for tests ([`Sequence`]).
///
/// Jittered backoff needs random numbers, and a sans-IO core may not reach for a global
/// generator or an entropy source. Every decision that draws takes `&mut impl Rng`, so a test
/// fixes the draws and gets the same decisions every run, and a server seeds one generator per
/// worker (or per request) from wherever it likes.
///
/// ```
/// use core::time::Duration;
/// use deadline_core::rng::{Rng, Sequence, SplitMix64};
///
/// let mut rng = SplitMix64::new(42);
/// let d = rng.duration_between(Duration::from_millis(10), Duration::from_millis(20));
/// assert!(d >= Duration::from_millis(10) && d <= Duration::from_millis(20));
///
/// // A fixed sequence: 0 draws the low end of any range, u32::MAX the high end.
/// let mut low = Sequence::new(&[0]);
/// assert_eq!(low.duration_between(Duration::from_millis(10), Duration::from_millis(20)),
///            Duration::from_millis(10));
/// let mut high = Sequence::new(&[u32::MAX]);
/// assert_eq!(high.duration_between(Duration::from_millis(10), Duration::from_millis(20)),
///            Duration::from_millis(20));
/// ```
pub trait Rng {
    /// The next 32 uniformly distributed random bits.
    fn next_u32(&mut self) -> u32;

    /// The next 64 random bits: by default two [`next_u32`](Rng::next_u32) draws, the first
    /// one in the high half.
    fn next_u64(&mut self) -> u64 {
        let hi = u64::from(self.next_u32());
        let lo = u64::from(self.next_u32());
        (hi << 32) | lo
    }

    /// A value in `lo..=hi` (the bounds swapped if `hi < lo`) from one
    /// [`next_u64`](Rng::next_u64) draw.
    ///
    /// It maps the draw onto the range with a widening multiply (`draw * span >> 64`, Lemire's
    /// method without the rejection step), so it always takes exactly one draw and always
    /// returns. The bias that the skipped rejection step would remove is at most
    /// `span / 2^64` per value: under `2^-24` for any span below 1.1 million seconds in
    /// microseconds, which is nothing worth mentioning for jitter. A draw of 0 gives `lo` and
    /// a draw of `u64::MAX` gives `hi`.
    fn u64_between(&mut self, lo: u64, hi: u64) -> u64 {
        let (lo, hi) = if hi < lo { (hi, lo) } else { (lo, hi) };
        let draw = self.next_u64();
        let gap = hi.saturating_sub(lo);
        let Some(span) = gap.checked_add(1) else {
            // The whole u64 range: every draw is already uniform over it.
            return draw;
        };
        // `draw × span >> 64`: the high half of the 128-bit product, in u64 halves.
        let (scaled, _) = mul_wide(draw, span);
        // `scaled < span`, so `lo + scaled <= hi`.
        let offset = scaled.min(gap);
        lo.saturating_add(offset)
    }

    /// A duration in `lo..=hi`, uniform at microsecond resolution (see
    /// [`u64_between`](Rng::u64_between)). Durations longer than `u64::MAX` microseconds are
    /// treated as that.
    fn duration_between(&mut self, lo: Duration, hi: Duration) -> Duration {
        micros_to_duration(self.u64_between(duration_to_micros(lo), duration_to_micros(hi)))
    }
}

impl<R: Rng + ?Sized> Rng for &mut R {
    fn next_u32(&mut self) -> u32 {
        (**self).next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        (**self).next_u64()
    }

    // A generator's own range mapping (an unbiased one, a fixed test value) holds through a
    // reference too.
    fn u64_between(&mut self, lo: u64, hi: u64) -> u64 {
        (**self).u64_between(lo, hi)
    }

    fn duration_between(&mut self, lo: Duration, hi: Duration) -> Duration {
        (**self).duration_between(lo, hi)
    }
}

/// SplitMix64: a tiny, fast, seeded generator (Steele, Lea and Flood, 2014) with 64 bits of
/// state. Every seed, zero included, gives a full-period sequence that passes BigCrush.
///
/// Not cryptographic. Seed one per worker or per request; two generators with the same seed
/// give the same sequence, which is what a test wants.
///
/// ```
/// use deadline_core::rng::{Rng, SplitMix64};
///
/// let mut a = SplitMix64::new(7);
/// let mut b = SplitMix64::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }
}

impl Rng for SplitMix64 {
    fn next_u32(&mut self) -> u32 {
        // The high half: the better-mixed bits.
        let [a, b, c, d, ..] = self.next_u64().to_be_bytes();
        u32::from_be_bytes([a, b, c, d])
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A random source that always draws zero, and takes no room: every jittered wait drawn from
/// it is the lowest its range allows. It is what a deadline-only driver
/// ([`Driver::deadline_only`](crate::drive::Driver::deadline_only)) holds, since such a call
/// has no backoff and never draws.
///
/// ```
/// use deadline_core::rng::{NoJitter, Rng};
///
/// assert_eq!(NoJitter.u64_between(10, 20), 10);
/// assert_eq!(size_of::<NoJitter>(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NoJitter;

impl Rng for NoJitter {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        0
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        0
    }
}

/// A fixed sequence of 32-bit draws, repeated from the start when it runs out: for tests that
/// need to know exactly what each decision draws.
///
/// Each [`next_u64`](Rng::next_u64) takes two values and repeats them in both halves when
/// they are equal, so `Sequence::new(&[0])` always draws the low end of a range and
/// `Sequence::new(&[u32::MAX])` always the high end. An empty sequence draws zeros.
///
/// ```
/// use deadline_core::rng::{Rng, Sequence};
///
/// let mut rng = Sequence::new(&[1, 2, 3]);
/// assert_eq!([rng.next_u32(), rng.next_u32(), rng.next_u32(), rng.next_u32()], [1, 2, 3, 1]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sequence<'a> {
    values: &'a [u32],
    next: usize,
}

impl<'a> Sequence<'a> {
    /// A sequence that draws `values` in order, then starts again.
    #[must_use]
    pub const fn new(values: &'a [u32]) -> Self {
        Sequence { values, next: 0 }
    }
}

impl Rng for Sequence<'_> {
    fn next_u32(&mut self) -> u32 {
        let value = self.values.get(self.next).copied().unwrap_or(0);
        let after = self.next.saturating_add(1);
        self.next = if after >= self.values.len() { 0 } else { after };
        value
    }
}
