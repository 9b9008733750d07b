//! [`LiveAdvice`]: a dependency's advice kept up to date off the call path (feature
//! `advice`): the adaptive cap in use, the gauges (feature `metrics`) and the warning
//! (feature `tracing`), at most once per interval.

use core::time::Duration;

use crate::advice::Advice;
use crate::dependency_policy::Policy;
use crate::sync::{AtomicU32, Ordering};
use crate::time::Instant;

use super::latency::{LiveLatency, MicrosCell};

/// Whether the advice is published when it is checked: gauges with feature `metrics`, a
/// warning with feature `tracing`.
pub(crate) const PUBLISHES: bool = cfg!(feature = "metrics") || cfg!(feature = "tracing");

/// What a dependency's live advice keeps between checks: the adaptive cap, once it moved,
/// and when the advice last warned. All zeros when new.
#[derive(Debug)]
pub(crate) struct LiveAdvice {
    /// The adaptive cap, once it moved.
    cap: MicrosCell,
    /// The millisecond (of the clock's, wrapping at 2^32) of the last warning, plus one; 0
    /// for none yet.
    warned: AtomicU32,
}

impl LiveAdvice {
    /// The advice is checked again after this many latencies.
    pub(crate) const EVERY: u32 = 1_024;

    pub(crate) const fn new() -> Self {
        LiveAdvice {
            cap: MicrosCell::new(),
            warned: AtomicU32::new(0),
        }
    }

    /// The cap in use under `policy`: with an adaptive cap, the one it moved to (the
    /// policy's until it moves), within its bounds; else the policy's.
    #[inline]
    pub(crate) fn cap(&self, policy: &Policy) -> Duration {
        match policy.advice().adaptive_cap() {
            Some((min, max)) => self
                .cap
                .load()
                .unwrap_or_else(|| policy.cap())
                .clamp(min, max.max(min)),
            None => policy.cap(),
        }
    }

    /// Whether the advice is checked for a dependency called as `policy`: when it is
    /// published (feature `metrics` or `tracing`) or its cap follows the latencies.
    #[inline]
    pub(crate) const fn watches(policy: &Policy) -> bool {
        PUBLISHES || policy.advice().adaptive_cap().is_some()
    }

    /// Checks the advice of the dependency called as `policy`, whose histogram is `latency`,
    /// at `at` (the instant of the event that recorded the latest latency: no clock is
    /// read): moves the adaptive cap, sets the gauges, and warns if the cap is not within
    /// its policy and the last warning is an interval old.
    pub(crate) fn check(&self, policy: &Policy, latency: &LiveLatency, at: Instant) {
        let cap = self.cap(policy);
        let Some(advice) = Advice::assess(
            latency.histogram().buckets(),
            latency.timed_out(),
            policy,
            cap,
        ) else {
            return;
        };
        if let Some((min, max)) = policy.advice().adaptive_cap() {
            if let Some(next) = advice.adapted_cap(min, max) {
                self.cap.store(Some(crate::time::duration_to_micros(next)));
            }
        }
        #[cfg(feature = "metrics")]
        super::metrics::gauges(policy.name(), &advice);
        let warn = !advice.is_within_policy() && self.claim_warning(at, policy.advice().interval());
        #[cfg(feature = "tracing")]
        if warn {
            crate::trace::advice(policy.name(), &advice);
        }
        #[cfg(not(feature = "tracing"))]
        let _ = warn;
    }

    /// Whether a warning may be given at `at`: none yet, or the last one at least `interval`
    /// ago. The caller that may is the one that records `at` (a compare-and-swap), so two
    /// threads checking at once warn once.
    fn claim_warning(&self, at: Instant, interval: Duration) -> bool {
        // Milliseconds in 32 bits, wrapping: an interval is compared by the wrapping
        // difference, exact for intervals under 24 days.
        let now = (at.as_millis() as u32).wrapping_add(1);
        let last = self.warned.load(Ordering::Relaxed);
        let interval = u32::try_from(interval.as_millis()).unwrap_or(u32::MAX);
        if last != 0 && now.wrapping_sub(last) < interval {
            return false;
        }
        self.warned
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::ms;

    #[test]
    fn a_warning_is_claimed_once_per_interval() {
        let live = LiveAdvice::new();
        let minute = Duration::from_secs(60);
        assert!(live.claim_warning(Instant::from_millis(0), minute));
        assert!(!live.claim_warning(Instant::from_millis(59_999), minute));
        assert!(live.claim_warning(Instant::from_millis(60_000), minute));
        assert!(!live.claim_warning(Instant::from_millis(60_001), minute));
    }

    #[test]
    fn the_adaptive_cap_starts_at_the_policys_within_its_bounds() {
        let live = LiveAdvice::new();
        let fixed = Policy::required("p").with_cap(ms(50));
        assert_eq!(live.cap(&fixed), ms(50));
        assert_eq!(live.cap(&fixed.with_adaptive_cap(ms(60), ms(90))), ms(60));
        live.cap.store(Some(200_000));
        assert_eq!(live.cap(&fixed.with_adaptive_cap(ms(60), ms(90))), ms(90));
        assert_eq!(live.cap(&fixed), ms(50), "a fixed cap does not move");
    }
}
