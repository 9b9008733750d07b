//! [`LiveLatency`]: a dependency's latency histogram, with the live hedge delay read from it
//! kept ready for the next call.

use core::time::Duration;

use crate::latency::DependencyHistogram;
use crate::quantile::Quantile;
use crate::sync::{AtomicU32, Ordering};

/// The delay kept: its microseconds plus one, and 0 for none. 64 bits where the target has
/// 64-bit atomics; 32 elsewhere, where a delay is kept up to `u32::MAX - 1` µs (71 minutes)
/// and a longer one as that.
#[cfg(target_has_atomic = "64")]
type DelayCell = crate::sync::AtomicU64;
/// The delay kept: its microseconds plus one, and 0 for none (32 bits: see above).
#[cfg(not(target_has_atomic = "64"))]
type DelayCell = AtomicU32;
/// The integer in a [`DelayCell`].
#[cfg(target_has_atomic = "64")]
type DelayWord = u64;
/// The integer in a [`DelayCell`].
#[cfg(not(target_has_atomic = "64"))]
type DelayWord = u32;

/// A `u64` as a [`DelayWord`], saturating.
#[cfg(all(feature = "advice", target_has_atomic = "64"))]
const fn narrow(us: u64) -> DelayWord {
    us
}
/// A `u64` as a [`DelayWord`], saturating.
#[cfg(all(feature = "advice", not(target_has_atomic = "64")))]
const fn narrow(us: u64) -> DelayWord {
    if us > DelayWord::MAX as u64 {
        DelayWord::MAX
    } else {
        us as DelayWord
    }
}

/// A [`DelayWord`] as a `u64`.
#[cfg(target_has_atomic = "64")]
const fn widen(w: DelayWord) -> u64 {
    w
}
/// A [`DelayWord`] as a `u64`.
#[cfg(not(target_has_atomic = "64"))]
const fn widen(w: DelayWord) -> u64 {
    w as u64
}

/// An optional duration in one atomic: its microseconds plus one, and 0 for none (see
/// [`DelayCell`]). A new one is zero: none.
#[derive(Debug)]
pub(crate) struct MicrosCell(DelayCell);

impl MicrosCell {
    pub(crate) const fn new() -> Self {
        MicrosCell(DelayCell::new(0))
    }

    /// A new cell keeping `micros`, saturating where the cell is 32 bits wide.
    #[cfg(feature = "advice")]
    pub(crate) const fn keeping(micros: u64) -> Self {
        MicrosCell(DelayCell::new(narrow(micros).saturating_add(1)))
    }

    /// Keeps `micros` (`None`: none), saturating where the cell is 32 bits wide.
    #[inline]
    pub(crate) fn store(&self, micros: Option<u64>) {
        let word = micros.map_or(0, |us| {
            DelayWord::try_from(us)
                .unwrap_or(DelayWord::MAX)
                .saturating_add(1)
        });
        self.0.store(word, Ordering::Relaxed);
    }

    /// The duration kept, if any.
    #[inline]
    pub(crate) fn load(&self) -> Option<Duration> {
        self.load_micros().map(Duration::from_micros)
    }

    /// The duration kept, in microseconds, if any.
    #[inline]
    pub(crate) fn load_micros(&self) -> Option<u64> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            word => Some(widen(word.wrapping_sub(1))),
        }
    }
}

/// A dependency's latency histogram, and the hedge delay read from it.
///
/// Reading a quantile walks the histogram's buckets, far too slow for every call; so the
/// delay is read again after every [`REFRESH`](Self::REFRESH) latencies recorded (and as
/// soon as there are [`MIN_SAMPLES`](Self::MIN_SAMPLES)), and each call reads the value
/// kept, one atomic load. Every [`HALF_LIFE`](Self::HALF_LIFE) latencies the histogram is
/// halved, so older latencies fade and the delay follows what the dependency does now.
///
/// A new one is all zeros (an empty histogram, nothing recorded, no delay kept), so that a
/// `static` holding one starts as zeroed memory does.
#[derive(Debug)]
pub(crate) struct LiveLatency {
    histogram: DependencyHistogram,
    /// Latencies recorded through [`record`](Self::record).
    recorded: AtomicU32,
    /// The delay kept.
    delay: MicrosCell,
    /// Of the latencies in the histogram, the attempts that timed out, each at its timeout
    /// (a lower bound of its latency) in a histogram of the same layout, halved with it.
    #[cfg(feature = "advice")]
    timeouts: DependencyHistogram,
}

impl LiveLatency {
    /// The fewest latencies before a live delay is read.
    pub(crate) const MIN_SAMPLES: u32 = 20;
    /// The delay is read again after this many more latencies.
    pub(crate) const REFRESH: u32 = 64;
    /// The histogram is halved after this many more latencies.
    pub(crate) const HALF_LIFE: u32 = 4_096;

    pub(crate) const fn new() -> Self {
        LiveLatency {
            histogram: DependencyHistogram::with_layout(),
            recorded: AtomicU32::new(0),
            delay: MicrosCell::new(),
            #[cfg(feature = "advice")]
            timeouts: DependencyHistogram::with_layout(),
        }
    }

    pub(crate) const fn histogram(&self) -> &DependencyHistogram {
        &self.histogram
    }

    /// Records one latency; halves the histogram and reads the `live` quantile again when
    /// they are due; returns how many latencies were recorded with it.
    pub(crate) fn record(&self, latency: Duration, live: Option<Quantile>) -> u32 {
        self.record_checked(latency, live, |_, _| {})
    }

    /// [`record`](Self::record), calling `check` with the histogram and the count of
    /// latencies recorded before the histogram is halved: a check made with the latency that
    /// halves it reads it whole, and no other halving can come while it reads (the next is
    /// [`HALF_LIFE`](Self::HALF_LIFE) latencies away).
    #[inline]
    pub(crate) fn record_checked(
        &self,
        latency: Duration,
        live: Option<Quantile>,
        check: impl FnOnce(&Self, u32),
    ) -> u32 {
        let n = self.count_in(latency);
        check(self, n);
        self.halve_if_due(n);
        if let Some(quantile) = live {
            if n == Self::MIN_SAMPLES || (n > Self::MIN_SAMPLES && n % Self::REFRESH == 0) {
                self.refresh(quantile);
            }
        }
        n
    }

    /// Records one attempt cut short after `after` (it timed out, or was cancelled when
    /// another copy answered) among the timeouts, before `after` is recorded as its latency.
    #[cfg(feature = "advice")]
    #[inline]
    pub(crate) fn count_timeout(&self, after: Duration) {
        self.timeouts.record(after);
    }

    /// Copies of the histogram and of its timed-out attempts (each at its timeout), to read
    /// at leisure: a copy does not change, nor is it halved, while it is read, where the live
    /// histograms may be. Copied while latencies are recorded, a bucket's timeouts may be a
    /// few more than its latencies, and while a halving runs (which the live check never
    /// meets: it is made before the halving) up to twice as many or half as many: every
    /// reader takes a bucket's timeouts as at most its latencies.
    #[cfg(feature = "advice")]
    pub(crate) fn copies(&self) -> (DependencyHistogram, DependencyHistogram) {
        (self.histogram.clone(), self.timeouts.clone())
    }

    /// Records one latency, halving the histogram when it is due, and reads no quantile (for
    /// a deadline-only call: none of the code that reads one is linked); returns how many
    /// latencies were recorded with it.
    #[inline]
    pub(crate) fn record_only(&self, latency: Duration) -> u32 {
        let n = self.count_in(latency);
        self.halve_if_due(n);
        n
    }

    /// Records one latency and counts it, halving nothing; returns how many latencies were
    /// recorded with it.
    #[inline]
    fn count_in(&self, latency: Duration) -> u32 {
        self.histogram.record(latency);
        self.recorded
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1)
    }

    /// Halves the histogram (and its timeouts) when `n`, the count of latencies recorded,
    /// says it is due.
    #[inline]
    fn halve_if_due(&self, n: u32) {
        if n % Self::HALF_LIFE == 0 {
            self.histogram.halve_alternating(n / Self::HALF_LIFE);
            // Halved alike, a bucket's timeouts stay no more than its latencies.
            #[cfg(feature = "advice")]
            self.timeouts.halve_alternating(n / Self::HALF_LIFE);
        }
    }

    /// Reads the `quantile` from the histogram now and keeps it.
    pub(crate) fn refresh(&self, quantile: Quantile) {
        let count = self.histogram.count();
        let delay = self
            .histogram
            .quantile_micros(quantile, count)
            .filter(|_| count >= u64::from(Self::MIN_SAMPLES));
        self.delay.store(delay);
    }

    /// The delay kept, if any.
    #[inline]
    pub(crate) fn delay(&self) -> Option<Duration> {
        self.delay.load()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_one_is_all_zeros_and_keeps_no_delay() {
        let live = LiveLatency::new();
        assert_eq!(live.recorded.load(Ordering::Relaxed), 0);
        assert_eq!(live.delay.0.load(Ordering::Relaxed), 0);
        assert!(live.histogram.is_empty());
        assert_eq!(live.delay(), None);
    }

    /// A sparse tail: per half-life, 6 slow calls (each alone in its bucket) and 4 090 fast
    /// ones. Halved exactly, the slow weigh 6 of 4 096 right after each halving (0.15%), so
    /// the p99.9 is a slow latency. Rounding every count down forgot each slow latency at the
    /// halving after it, and the p99.9 read the fast one; the alternating halving keeps them
    /// on average.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "32 768 latencies into a 736-bucket histogram: minutes under miri"
    )]
    fn a_sparse_tail_outlives_the_halvings() {
        let live = LiveLatency::new();
        for _ in 0..8 {
            for slow_ms in [400, 500, 600, 700, 800, 900] {
                live.record_only(Duration::from_millis(slow_ms));
            }
            for _ in 0..LiveLatency::HALF_LIFE - 6 {
                live.record_only(Duration::from_millis(10));
            }
        }
        let p999 = live.histogram().p999().expect("recorded");
        assert!(
            p999 >= Duration::from_millis(400),
            "p99.9 {p999:?}: the slow calls were forgotten"
        );
    }

    #[test]
    fn a_delay_of_zero_is_kept_as_one_and_read_back_as_zero() {
        let live = LiveLatency::new();
        for _ in 0..LiveLatency::MIN_SAMPLES {
            live.record(Duration::ZERO, Some(Quantile::P95));
        }
        assert_eq!(live.delay.0.load(Ordering::Relaxed), 1);
        assert_eq!(live.delay(), Some(Duration::ZERO));
    }

    #[test]
    fn the_delay_is_read_at_min_samples_and_kept_between_refreshes() {
        let live = LiveLatency::new();
        for _ in 1..LiveLatency::MIN_SAMPLES {
            live.record(Duration::from_millis(20), Some(Quantile::P95));
        }
        assert_eq!(live.delay(), None, "too few samples");
        live.record(Duration::from_millis(20), Some(Quantile::P95));
        let delay = live.delay().expect("read at MIN_SAMPLES");
        assert_eq!(Some(delay), live.histogram().p95());
        // Not read again before the next refresh, whatever is recorded.
        live.record(Duration::from_secs(1), Some(Quantile::P95));
        assert_eq!(live.delay(), Some(delay));
        // With no quantile asked for, nothing is read.
        let none = LiveLatency::new();
        for _ in 0..LiveLatency::REFRESH {
            none.record(Duration::from_millis(20), None);
        }
        assert_eq!(none.delay(), None);
    }

    /// At every refresh, over three halvings and past them, the delay kept is the
    /// histogram's own p95, for latencies from 1 µs to 100 ms drawn from a fixed seed (mostly
    /// short, one in twenty long: a p95 that moves as the older latencies fade).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "12 608 latencies and 197 refreshes, each walking 736 buckets: minutes under \
                  miri, where the other tests here run the same code"
    )]
    fn the_delay_is_the_histograms_p95_at_every_refresh_across_halvings() {
        use crate::rng::{Rng, SplitMix64};

        let live = LiveLatency::new();
        let mut rng = SplitMix64::new(7);
        let mut refreshes = 0;
        for n in 1..=3 * LiveLatency::HALF_LIFE + 5 * LiveLatency::REFRESH {
            let micros = if rng.next_u32() % 20 == 0 {
                10_000 + rng.next_u64() % 90_000
            } else {
                1 + rng.next_u64() % 3_000
            };
            live.record(Duration::from_micros(micros), Some(Quantile::P95));
            if n > LiveLatency::MIN_SAMPLES && n % LiveLatency::REFRESH == 0 {
                refreshes += 1;
                assert_eq!(live.delay(), live.histogram().p95(), "after {n} latencies");
            }
        }
        assert_eq!(refreshes, 3 * 64 + 5);
    }

    /// A histogram emptied directly (through `Dependency::latency`, not through `record`):
    /// at the next refresh the delay is the p95 of what it holds now, not of what it held.
    #[test]
    fn a_histogram_emptied_directly_gives_the_p95_of_what_it_holds_now() {
        let live = LiveLatency::new();
        for _ in 0..100 {
            live.record(Duration::from_secs(1), Some(Quantile::P95));
        }
        live.histogram().reset();
        // 1 to 28 ms, one latency each: at the refresh after 128 latencies, the p95 of these
        // 28 is the 27th, 27 ms (reported as its bucket's upper bound).
        for ms in 1..=28 {
            live.record(Duration::from_millis(ms), Some(Quantile::P95));
        }
        assert_eq!(live.recorded.load(Ordering::Relaxed), 128);
        let p95 = live.histogram().p95().expect("28 latencies");
        assert!(p95 >= Duration::from_millis(27) && p95 < Duration::from_millis(28));
        assert_eq!(live.delay(), Some(p95));
    }
}
