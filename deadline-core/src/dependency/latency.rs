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
    /// The delay kept: microseconds plus one, or 0 for none.
    delay: DelayCell,
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
            delay: DelayCell::new(0),
        }
    }

    pub(crate) const fn histogram(&self) -> &DependencyHistogram {
        &self.histogram
    }

    /// Records one latency; halves the histogram and reads the `live` quantile again when
    /// they are due.
    pub(crate) fn record(&self, latency: Duration, live: Option<Quantile>) {
        let n = self.record_only(latency);
        let Some(quantile) = live else {
            return;
        };
        if n == Self::MIN_SAMPLES || (n > Self::MIN_SAMPLES && n % Self::REFRESH == 0) {
            self.refresh(quantile);
        }
    }

    /// Records one latency, halving the histogram when it is due, and reads no quantile (for
    /// a deadline-only call: none of the code that reads one is linked); returns how many
    /// latencies were recorded with it.
    #[inline]
    pub(crate) fn record_only(&self, latency: Duration) -> u32 {
        self.histogram.record(latency);
        let n = self
            .recorded
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        if n % Self::HALF_LIFE == 0 {
            self.histogram.halve();
        }
        n
    }

    /// Reads the `quantile` from the histogram now and keeps it.
    pub(crate) fn refresh(&self, quantile: Quantile) {
        let count = self.histogram.count();
        let delay = self
            .histogram
            .quantile_micros(quantile, count)
            .filter(|_| count >= u64::from(Self::MIN_SAMPLES));
        let word = delay.map_or(0, |us| {
            DelayWord::try_from(us)
                .unwrap_or(DelayWord::MAX)
                .saturating_add(1)
        });
        self.delay.store(word, Ordering::Relaxed);
    }

    /// The delay kept, if any.
    #[inline]
    pub(crate) fn delay(&self) -> Option<Duration> {
        match self.delay.load(Ordering::Relaxed) {
            0 => None,
            word => Some(Duration::from_micros(widen(word.wrapping_sub(1)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_one_is_all_zeros_and_keeps_no_delay() {
        let live = LiveLatency::new();
        assert_eq!(live.recorded.load(Ordering::Relaxed), 0);
        assert_eq!(live.delay.load(Ordering::Relaxed), 0);
        assert!(live.histogram.is_empty());
        assert_eq!(live.delay(), None);
    }

    #[test]
    fn a_delay_of_zero_is_kept_as_one_and_read_back_as_zero() {
        let live = LiveLatency::new();
        for _ in 0..LiveLatency::MIN_SAMPLES {
            live.record(Duration::ZERO, Some(Quantile::P95));
        }
        assert_eq!(live.delay.load(Ordering::Relaxed), 1);
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
}
