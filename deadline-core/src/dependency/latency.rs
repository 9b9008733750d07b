//! [`LiveLatency`]: a dependency's latency histogram, with the live hedge delay read from it
//! kept ready for the next call.

use core::time::Duration;

use crate::latency::DependencyHistogram;
use crate::quantile::Quantile;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::time::duration_to_micros;

/// No live delay yet (too few samples, or no quantile asked for).
const NONE: u64 = u64::MAX;

/// A dependency's latency histogram, and the hedge delay read from it.
///
/// Reading a quantile walks the histogram's buckets, far too slow for every call; so the
/// delay is read again after every [`REFRESH`](Self::REFRESH) latencies recorded (and as
/// soon as there are [`MIN_SAMPLES`](Self::MIN_SAMPLES)), and each call reads the value
/// kept, one atomic load. Every [`HALF_LIFE`](Self::HALF_LIFE) latencies the histogram is
/// halved, so older latencies fade and the delay follows what the dependency does now.
#[derive(Debug)]
pub(crate) struct LiveLatency {
    histogram: DependencyHistogram,
    /// Latencies recorded through [`record`](Self::record).
    recorded: AtomicU32,
    /// The delay kept, in microseconds, or [`NONE`].
    delay_us: AtomicU64,
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
            delay_us: AtomicU64::new(NONE),
        }
    }

    pub(crate) const fn histogram(&self) -> &DependencyHistogram {
        &self.histogram
    }

    /// Records one latency; halves the histogram and reads the `live` quantile again when
    /// they are due.
    pub(crate) fn record(&self, latency: Duration, live: Option<Quantile>) {
        self.histogram.record(latency);
        let n = self
            .recorded
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        if n % Self::HALF_LIFE == 0 {
            self.histogram.halve();
        }
        let Some(quantile) = live else {
            return;
        };
        if n == Self::MIN_SAMPLES || (n > Self::MIN_SAMPLES && n % Self::REFRESH == 0) {
            self.refresh(quantile);
        }
    }

    /// Reads the `quantile` from the histogram now and keeps it.
    pub(crate) fn refresh(&self, quantile: Quantile) {
        let delay = self
            .histogram
            .quantile(quantile)
            .filter(|_| self.histogram.count() >= u64::from(Self::MIN_SAMPLES));
        let us = delay.map_or(NONE, |d| duration_to_micros(d).min(NONE - 1));
        self.delay_us.store(us, Ordering::Relaxed);
    }

    /// The delay kept, if any.
    #[inline]
    pub(crate) fn delay(&self) -> Option<Duration> {
        match self.delay_us.load(Ordering::Relaxed) {
            NONE => None,
            us => Some(Duration::from_micros(us)),
        }
    }
}
