//! [`Histogram`]: a fixed-size, lock-free latency histogram with log-linear buckets, from
//! which a dependency's [`Policy`] and hedge delay are derived; its [`Count`]ers.

use core::fmt;
use core::time::Duration;

use crate::sync::{AtomicU16, AtomicU32, Ordering};

use crate::dependency_policy::Policy;
use crate::quantile::Quantile;
use crate::time::duration_to_micros_ceil;

/// The smaller layout: 384 buckets (1536 bytes), at most 6.25% high, exact up to about 130 s.
/// Made by [`SmallHistogram::with_layout`].
pub type SmallHistogram = Histogram<384, 4>;

/// The compact layout, for microcontrollers: 88 buckets of 16-bit counts (176 bytes), in
/// units of 1.024 ms, at most 12.5% high plus one unit, up to about 7.9 s. Made by
/// [`CompactHistogram::with_layout`]; what a [`Dependency`](crate::Dependency) keeps on a
/// target without 64-bit atomics ([`DependencyHistogram`](crate::observe::DependencyHistogram)).
pub type CompactHistogram = Histogram<88, 3, 10, u16>;

/// A latency histogram of `N` log-linear buckets with `2^SUB_BITS` sub-buckets per power of
/// two, in units of `2^UNIT_BITS` microseconds, each bucket a counter of type `C` (`u32` or
/// `u16`): see below for the layout, the error bound and the size.
///
/// ```
/// use deadline_core::ms;
/// use deadline_core::observe::Histogram;
///
/// static LATENCY: Histogram = Histogram::new();
///
/// for (n, t) in [(45, 8), (25, 11), (15, 16), (8, 24), (4, 45), (2, 90), (1, 400)] {
///     LATENCY.record_n(ms(t), n);
/// }
/// assert_eq!(LATENCY.count(), 100);
/// // Reported at the bucket's upper bound: never below the true value, at most 1/32 above.
/// let p99 = LATENCY.p99().unwrap();
/// assert!(p99 >= ms(90) && p99 <= ms(90) + ms(90) / 32);
///
/// // cap = p99.9 + margin, floor = p50; hedge after the p95.
/// let policy = LATENCY.policy("pricing", ms(20)).unwrap();
/// assert_eq!(policy.cap(), LATENCY.p999().unwrap() + ms(20));
/// assert_eq!(policy.floor(), LATENCY.p50().unwrap());
/// assert_eq!(LATENCY.hedge_delay(), LATENCY.p95());
/// ```
///
/// Buckets, error bound, size and concurrency: [the guide](crate::guide#latency-histograms).
pub struct Histogram<
    const N: usize = 736,
    const SUB_BITS: u32 = 5,
    const UNIT_BITS: u32 = 0,
    C: Count = u32,
> {
    buckets: [C::Cell; N],
}

/// One non-empty bucket, from [`Histogram::buckets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Bucket {
    /// The smallest latency the bucket holds.
    pub low: Duration,
    /// The largest latency the bucket holds ([`Duration::MAX`] for the overflow bucket).
    pub high: Duration,
    /// How many latencies it holds (saturated at its counter's maximum).
    pub count: u32,
}

impl Histogram {
    /// An empty histogram of the default layout (736 buckets, at most 3.125% high). `const`,
    /// so it can be a `static`. Other layouts: [`Histogram::with_layout`].
    ///
    /// ```
    /// use deadline_core::ms;
    /// use deadline_core::observe::Histogram;
    ///
    /// let h = Histogram::new();
    /// h.record(ms(12));
    /// assert_eq!(h.count(), 1);
    /// ```
    #[must_use]
    pub const fn new() -> Self {
        Histogram::with_layout()
    }
}

impl<const N: usize, const SUB_BITS: u32, const UNIT_BITS: u32, C: Count>
    Histogram<N, SUB_BITS, UNIT_BITS, C>
{
    /// Rejects layouts whose bucket arithmetic would not fit in a `u64`.
    const VALID: () = assert!(
        SUB_BITS <= 16 && UNIT_BITS <= 32,
        "SUB_BITS must be at most 16, UNIT_BITS at most 32"
    );

    /// Sub-buckets per power of two: `2^SUB_BITS`. A reported value is at most
    /// `value / SUB_BUCKETS` above the true one (plus the rounding up to a whole
    /// [`UNIT`](Self::UNIT)).
    pub const SUB_BUCKETS: u64 = 1 << SUB_BITS;

    /// The unit latencies are counted in: `2^UNIT_BITS` microseconds. Each is rounded up to a
    /// whole unit, so a reported value may be up to one unit above the true one.
    pub const UNIT: Duration = Duration::from_micros(1 << UNIT_BITS);

    /// The histogram's size in bytes: four per bucket with `u32` counters, two with `u16`.
    pub const SIZE_BYTES: usize = N.saturating_mul(C::BYTES);

    /// The lower bound of the last bucket: values at or above it all land there, and a
    /// quantile in it reports [`Duration::MAX`]. Below it, the error bound holds.
    pub const OVERFLOW: Duration = Duration::from_micros(Self::low_micros(N.saturating_sub(1)));

    /// An empty histogram of this layout. `const`, so it can be a `static`.
    ///
    /// For the default layout, [`Histogram::new`] needs no type annotation; this names any
    /// other one:
    ///
    /// ```
    /// use deadline_core::observe::CompactHistogram;
    /// use deadline_core::observe::{Histogram, SmallHistogram};
    ///
    /// static SMALL: SmallHistogram = SmallHistogram::with_layout();
    /// static COMPACT: CompactHistogram = CompactHistogram::with_layout();
    /// let custom = Histogram::<128, 3>::with_layout();
    /// assert_eq!((SMALL.count(), COMPACT.count(), custom.count()), (0, 0, 0));
    /// ```
    #[must_use]
    pub const fn with_layout() -> Self {
        let () = Self::VALID;
        Histogram {
            buckets: [const { C::ZERO }; N],
        }
    }

    /// Records one latency. Lock-free, never panics: [`Duration::MAX`] lands in the overflow
    /// bucket, zero in the first one.
    pub fn record(&self, latency: Duration) {
        self.record_n(latency, 1);
    }

    /// Records `n` calls of the same latency (saturating the bucket at its counter's maximum).
    pub fn record_n(&self, latency: Duration, n: u32) {
        if n == 0 {
            return;
        }
        // Rounded up, so a bucket's upper bound is never below the latency.
        let micros = duration_to_micros_ceil(latency);
        if let Some(bucket) = self.buckets.get(Self::index(micros)) {
            C::add(bucket, n);
        }
    }

    /// Empties the histogram. Bucket by bucket: values recorded during a reset may survive it.
    pub fn reset(&self) {
        for bucket in &self.buckets {
            C::clear(bucket);
        }
    }

    /// Halves every bucket's count (rounding down): the recorded latencies weigh half as
    /// much as those recorded after, so a histogram halved at a steady pace follows what the
    /// dependency does now. Bucket by bucket, like [`reset`](Self::reset). A count of one
    /// becomes zero: a latency alone in its bucket is forgotten, and a quantile held up by
    /// such latencies (a sparse tail's p99.9) reads lower until new ones come.
    ///
    /// ```
    /// use deadline_core::ms;
    /// use deadline_core::observe::Histogram;
    ///
    /// let h: Histogram = Histogram::new();
    /// h.record_n(ms(10), 100);
    /// h.halve();
    /// h.record_n(ms(80), 100);
    /// assert_eq!(h.count(), 150);
    /// assert!(h.p50().unwrap() >= ms(80)); // the newer latencies are now the majority
    /// ```
    pub fn halve(&self) {
        for bucket in &self.buckets {
            C::halve(bucket, false);
        }
    }

    /// Halves every bucket's count as [`halve`](Self::halve) does, but an odd count rounds
    /// up in every other bucket, which ones alternating with `round`'s parity (call it with
    /// the number of the halving). Over the buckets and over successive halvings an odd
    /// count's half is kept as often as it is dropped: the halving is exact on average, and a
    /// latency alone in its bucket fades as the others do, where rounding down would forget
    /// it at once (and a sparse tail's quantile would read low).
    #[cfg(feature = "drive")]
    pub(crate) fn halve_alternating(&self, round: u32) {
        let mut round_up = round % 2 == 1;
        for bucket in &self.buckets {
            C::halve(bucket, round_up);
            round_up = !round_up;
        }
    }

    /// How many latencies are recorded.
    #[must_use]
    pub fn count(&self) -> u64 {
        // `N` counts of at most `u32::MAX` each: below `u64::MAX` while `N` is below 2^32 (a
        // histogram of 16 GiB), so the sum cannot wrap. A plain add per bucket, not a
        // saturating one: a dependency's live hedge delay walks every bucket this way each
        // time it is read again.
        self.buckets
            .iter()
            .map(|b| u64::from(C::get(b)))
            .fold(0, u64::wrapping_add)
    }

    /// Whether nothing is recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buckets.iter().all(|b| C::get(b) == 0)
    }

    /// The `q` quantile by nearest rank, reported as the upper bound of its bucket: never
    /// below the true value, at most [`SUB_BUCKETS`](Self::SUB_BUCKETS)`⁻¹` of it above
    /// ([`Duration::MAX`] in the overflow bucket). `None` when empty.
    #[must_use]
    pub fn quantile(&self, q: Quantile) -> Option<Duration> {
        self.quantile_bucket(q, self.count()).map(Self::high)
    }

    /// The `q` quantile among `count` latencies (the histogram's [`count`](Self::count)), or
    /// among those the buckets hold when a walk finds fewer (halved since: `quantile_bucket`),
    /// as the upper bound of its bucket in microseconds (`u64::MAX` in the overflow bucket).
    /// `None` when `count` is zero. (A dependency's live hedge delay.)
    #[cfg(feature = "drive")]
    pub(crate) fn quantile_micros(&self, q: Quantile, count: u64) -> Option<u64> {
        self.quantile_bucket(q, count).map(Self::high_micros)
    }

    /// The bucket that holds the `q` quantile among `count` latencies.
    ///
    /// Other threads may record, halve or reset while the buckets are read. A walk that comes
    /// up short of the quantile's rank read a histogram made smaller since `count` was taken
    /// (a dependency's is halved every 4 096 latencies): it is walked again, against the total
    /// that walk saw, rather than reporting its highest bucket as the quantile. A halving
    /// between the count and the walk takes one walk more; one during the first walk, two.
    /// Short on the third walk, it reports the last bucket it saw.
    ///
    /// A halving during the count itself, or seen out of order by a processor that reorders
    /// loads (`Relaxed`, as every bucket is read), can still leave the walk's rank too high
    /// for what it reads, and the quantile in a higher bucket than either the whole or the
    /// halved histogram has. Ruling that out takes a second
    /// pass over the buckets, or a sequence count around each halving; for the hedge delay,
    /// read every 64 latencies, the pass would cost every such call about 25 instructions.
    fn quantile_bucket(&self, q: Quantile, count: u64) -> Option<usize> {
        let mut total = count;
        let mut last = None;
        for _ in 0..3 {
            let rank = q.nearest_rank(total);
            if rank == 0 {
                break;
            }
            let seen;
            (last, seen) = self.walk_to(rank);
            if seen >= rank {
                break;
            }
            total = seen;
        }
        last
    }

    /// Reads the buckets in order until `rank` latencies are seen: the last non-empty bucket
    /// read, and the latencies seen up to it (fewer than `rank` when the buckets hold fewer).
    fn walk_to(&self, rank: u64) -> (Option<usize>, u64) {
        let mut seen = 0u64;
        let mut last = None;
        for (i, bucket) in self.buckets.iter().enumerate() {
            let c = C::get(bucket);
            if c == 0 {
                continue;
            }
            // Cannot wrap: see `count`.
            seen = seen.wrapping_add(u64::from(c));
            last = Some(i);
            if seen >= rank {
                break;
            }
        }
        (last, seen)
    }

    /// The median.
    #[must_use]
    pub fn p50(&self) -> Option<Duration> {
        self.quantile(Quantile::P50)
    }

    /// The 95th percentile.
    #[must_use]
    pub fn p95(&self) -> Option<Duration> {
        self.quantile(Quantile::P95)
    }

    /// The 99th percentile.
    #[must_use]
    pub fn p99(&self) -> Option<Duration> {
        self.quantile(Quantile::P99)
    }

    /// The 99.9th percentile.
    #[must_use]
    pub fn p999(&self) -> Option<Duration> {
        self.quantile(Quantile::P999)
    }

    /// The lower bound of the lowest non-empty bucket: at most the true minimum (rounded up
    /// to a whole microsecond, as recorded), and within the error bound of it.
    #[must_use]
    pub fn min(&self) -> Option<Duration> {
        self.buckets
            .iter()
            .position(|b| C::get(b) != 0)
            .map(Self::low)
    }

    /// The upper bound of the highest non-empty bucket: at least the true maximum, within the
    /// error bound of it ([`Duration::MAX`] if anything overflowed).
    #[must_use]
    pub fn max(&self) -> Option<Duration> {
        self.buckets
            .iter()
            .rposition(|b| C::get(b) != 0)
            .map(Self::high)
    }

    /// The mean, taking each bucket at its midpoint (the overflow bucket at its lower bound):
    /// within half the error bound of the true mean, unless something overflowed.
    #[must_use]
    pub fn mean(&self) -> Option<Duration> {
        let mut total = 0u128;
        let mut sum = 0u128;
        for (i, bucket) in self.buckets.iter().enumerate() {
            let c = u128::from(C::get(bucket));
            if c == 0 {
                continue;
            }
            let low = Self::low_micros(i);
            let mid = if i.saturating_add(1) >= N {
                low
            } else {
                low.saturating_add(Self::high_micros(i).saturating_sub(low) / 2)
            };
            total = total.saturating_add(c);
            sum = sum.saturating_add(c.saturating_mul(u128::from(mid)));
        }
        let micros = sum.checked_div(total)?;
        Some(Duration::from_micros(
            u64::try_from(micros).unwrap_or(u64::MAX),
        ))
    }

    /// The non-empty buckets in ascending order, for export.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + Clone + '_ {
        self.buckets.iter().enumerate().filter_map(|(i, b)| {
            let count = C::get(b);
            (count != 0).then(|| Bucket {
                low: Self::low(i),
                high: Self::high(i),
                count,
            })
        })
    }

    /// The delay after which to send a hedged copy: the p95.
    ///
    /// Hedging after the p95 sends a second copy for about 5% of calls (The Tail at Scale):
    /// a small extra load that cuts the tail, since the copies go out only for the calls
    /// already slower than 95% of their peers. `None` when empty.
    #[must_use]
    pub fn hedge_delay(&self) -> Option<Duration> {
        self.p95()
    }

    /// A required dependency's [`Policy`] from the recorded latencies:
    /// `cap = p99.9 + margin`, `floor = p50`. `None` when empty, or when the p50 is in the
    /// overflow bucket (beyond [`OVERFLOW`](Self::OVERFLOW)): a floor with no upper bound
    /// would refuse every call. A p99.9 there gives no cap.
    ///
    /// - **Cap from the p99.9.** The cap is the longest we wait even with time to spare, and it
    ///   is picked from an acceptable rate of false timeouts (timeouts of calls that would
    ///   have succeeded): the p99.9 cuts off 0.1% of them, and the margin absorbs drift.
    /// - **Floor at the p50.** Under its median a dependency is more likely than not to time
    ///   out, so a call with less time than that is not worth making: it is skipped (optional)
    ///   or failed at once (required).
    ///
    /// Both come from upper bucket bounds, so both err high: the cap keeps the false-timeout
    /// rate at or under 0.1% of what was recorded, and the floor skips slightly more eagerly.
    /// Adjust necessity, retries and hedging with the policy's setters.
    #[must_use]
    pub fn policy<'n>(&self, name: &'n str, margin: Duration) -> Option<Policy<'n>> {
        let floor = self.p50().filter(|p50| *p50 != Duration::MAX)?;
        Some(
            Policy::required(name)
                .with_floor(floor)
                .with_cap(self.p999()?.saturating_add(margin)),
        )
    }

    /// The bucket of a latency in whole microseconds.
    fn index(micros: u64) -> usize {
        let sub = Self::SUB_BUCKETS;
        // Whole units, rounded up (for a unit of one microsecond, `micros` itself).
        let below_unit = micros & Self::UNIT_MASK;
        let units = micros
            .checked_shr(UNIT_BITS)
            .unwrap_or(0)
            .wrapping_add(u64::from(below_unit != 0));
        let index = if units < sub {
            units
        } else {
            // `units >= 2^SUB_BITS`, so its highest set bit is at or above SUB_BITS.
            let msb = 63u32.saturating_sub(units.leading_zeros());
            let shift = msb.saturating_sub(SUB_BITS);
            let top = units.checked_shr(shift).unwrap_or(0);
            u64::from(shift).saturating_mul(sub).saturating_add(top)
        };
        usize::try_from(index)
            .unwrap_or(usize::MAX)
            .min(N.saturating_sub(1))
    }

    /// The microseconds under one unit: `2^UNIT_BITS - 1`.
    const UNIT_MASK: u64 = (1u64 << UNIT_BITS).wrapping_sub(1);

    /// The smallest latency, in microseconds, of bucket `i` (ignoring overflow): the bucket's
    /// lowest unit less one, plus one microsecond (a latency rounds up into it), or zero.
    const fn low_micros(i: usize) -> u64 {
        let units = Self::bounds(i).0;
        if units == 0 {
            0
        } else {
            Self::micros_of(units.saturating_sub(1)).saturating_add(1)
        }
    }

    /// The largest latency, in microseconds, of bucket `i` (`u64::MAX` for the last bucket).
    const fn high_micros(i: usize) -> u64 {
        if i.saturating_add(1) >= N {
            u64::MAX
        } else {
            Self::micros_of(Self::bounds(i).1)
        }
    }

    /// `units` in microseconds, saturating at `u64::MAX`.
    const fn micros_of(units: u64) -> u64 {
        if units > u64::MAX >> UNIT_BITS {
            u64::MAX
        } else {
            units << UNIT_BITS
        }
    }

    /// The smallest latency of bucket `i`.
    const fn low(i: usize) -> Duration {
        Duration::from_micros(Self::low_micros(i))
    }

    /// The largest latency of bucket `i`; [`Duration::MAX`] for the overflow bucket.
    const fn high(i: usize) -> Duration {
        if i.saturating_add(1) >= N {
            Duration::MAX
        } else {
            Duration::from_micros(Self::high_micros(i))
        }
    }

    /// Bucket `i`'s range of units, both ends included, saturating at `u64::MAX`.
    const fn bounds(i: usize) -> (u64, u64) {
        let sub = Self::SUB_BUCKETS;
        let i = i as u64;
        if i < sub {
            return (i, i);
        }
        let (Some(octave), Some(offset)) = (i.checked_div(sub), i.checked_rem(sub)) else {
            return (u64::MAX, u64::MAX);
        };
        let shift = octave.saturating_sub(1);
        let top = offset.saturating_add(sub);
        // `top << shift` loses bits (and the bucket lies past u64::MAX) exactly when the shift
        // is more than `top`'s leading zeros. In u64: no u128 arithmetic on 32-bit targets.
        if shift > top.leading_zeros() as u64 {
            return (u64::MAX, u64::MAX);
        }
        let low = top << shift;
        let high = low.saturating_add((1u64 << shift).wrapping_sub(1));
        (low, high)
    }
}

impl<const N: usize, const SUB_BITS: u32, const UNIT_BITS: u32, C: Count> Default
    for Histogram<N, SUB_BITS, UNIT_BITS, C>
{
    fn default() -> Self {
        Histogram::with_layout()
    }
}

/// A copy of the counts as they are now, read bucket by bucket (as a query reads them): a
/// snapshot to read at leisure while the original goes on recording.
impl<const N: usize, const SUB_BITS: u32, const UNIT_BITS: u32, C: Count> Clone
    for Histogram<N, SUB_BITS, UNIT_BITS, C>
{
    fn clone(&self) -> Self {
        let copy = Histogram::with_layout();
        for (from, to) in self.buckets.iter().zip(&copy.buckets) {
            C::add(to, C::get(from));
        }
        copy
    }
}

impl<const N: usize, const SUB_BITS: u32, const UNIT_BITS: u32, C: Count> fmt::Debug
    for Histogram<N, SUB_BITS, UNIT_BITS, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("p50", &self.p50())
            .field("p95", &self.p95())
            .field("p99", &self.p99())
            .field("p999", &self.p999())
            .field("max", &self.max())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize, const SUB_BITS: u32, const UNIT_BITS: u32, C: Count> defmt::Format
    for Histogram<N, SUB_BITS, UNIT_BITS, C>
{
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Histogram {{ count: {=u64}, p50: {}, p95: {}, p99: {}, p999: {}, max: {} }}",
            self.count(),
            self.p50(),
            self.p95(),
            self.p99(),
            self.p999(),
            self.max()
        );
    }
}

/// The counter of one bucket of a [`Histogram`]: `u32` (the default), or `u16` for half the
/// room (a bucket saturates at 65 535; a [`Dependency`](crate::Dependency)'s histogram, halved
/// every 4 096 latencies, stays far below). Sealed: these two are the counters.
pub trait Count: sealed::Sealed {
    /// The atomic that holds the count.
    #[doc(hidden)]
    type Cell: fmt::Debug + Send + Sync;
    /// Bytes per bucket.
    #[doc(hidden)]
    const BYTES: usize;
    /// An empty bucket.
    // A constant to copy into each element of the buckets' array (`[const { C::ZERO }; N]`),
    // never one shared cell.
    #[allow(clippy::declare_interior_mutable_const)]
    #[doc(hidden)]
    const ZERO: Self::Cell;
    /// The count.
    #[doc(hidden)]
    fn get(cell: &Self::Cell) -> u32;
    /// Adds `n`, saturating at the counter's maximum.
    #[doc(hidden)]
    fn add(cell: &Self::Cell, n: u32);
    /// Halves the count, an odd one rounding down, or up with `round_up`.
    #[doc(hidden)]
    fn halve(cell: &Self::Cell, round_up: bool);
    /// Empties the bucket.
    #[doc(hidden)]
    fn clear(cell: &Self::Cell);
}

impl Count for u32 {
    type Cell = AtomicU32;
    const BYTES: usize = 4;
    #[allow(clippy::declare_interior_mutable_const)]
    const ZERO: AtomicU32 = AtomicU32::new(0);

    #[inline]
    fn get(cell: &AtomicU32) -> u32 {
        cell.load(Ordering::Relaxed)
    }

    #[inline]
    fn add(cell: &AtomicU32, n: u32) {
        let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
            (c != u32::MAX).then(|| c.saturating_add(n))
        });
    }

    fn halve(cell: &AtomicU32, round_up: bool) {
        let up = u32::from(round_up);
        let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
            // At most half the maximum plus one: never wraps.
            (c != 0).then_some((c >> 1).wrapping_add(c & up))
        });
    }

    fn clear(cell: &AtomicU32) {
        cell.store(0, Ordering::Relaxed);
    }
}

impl Count for u16 {
    type Cell = AtomicU16;
    const BYTES: usize = 2;
    #[allow(clippy::declare_interior_mutable_const)]
    const ZERO: AtomicU16 = AtomicU16::new(0);

    #[inline]
    fn get(cell: &AtomicU16) -> u32 {
        u32::from(cell.load(Ordering::Relaxed))
    }

    #[inline]
    fn add(cell: &AtomicU16, n: u32) {
        let n = u16::try_from(n).unwrap_or(u16::MAX);
        let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
            (c != u16::MAX).then(|| c.saturating_add(n))
        });
    }

    fn halve(cell: &AtomicU16, round_up: bool) {
        let up = u16::from(round_up);
        let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
            // At most half the maximum plus one: never wraps.
            (c != 0).then_some((c >> 1).wrapping_add(c & up))
        });
    }

    fn clear(cell: &AtomicU16) {
        cell.store(0, Ordering::Relaxed);
    }
}

mod sealed {
    /// The counters a [`Histogram`](super::Histogram) may have.
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u16 {}
}

#[cfg(all(test, feature = "drive"))]
mod tests {
    use super::*;
    use crate::time::ms;

    /// A dependency's hedge delay is read as its histogram's count, then the quantile's rank
    /// among the buckets. Halved between the two (another thread's 4 096th latency), the
    /// buckets held half the latencies the rank was taken from, the walk ran past every
    /// bucket, and its highest one (the slowest latency, the cap) was the delay: no call
    /// hedged until the next reading.
    #[test]
    fn a_quantile_read_across_a_halving_is_the_halved_histograms() {
        let h = Histogram::new();
        h.record_n(ms(2), 990);
        h.record_n(ms(100), 10);
        let count = h.count();
        let p95 = h.quantile_micros(Quantile::P95, count);
        h.halve();
        assert_eq!(h.quantile_micros(Quantile::P95, count), p95);
        assert!(p95.unwrap() < 3_000, "{p95:?}");
    }
}
