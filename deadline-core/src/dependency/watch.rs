//! [`LiveAdvice`]: a dependency's advice kept up to date off the call path (feature
//! `advice`): the adaptive cap in use, the gauges (feature `metrics`) and the warning
//! (feature `tracing`), at most once per interval.

use core::time::Duration;

use crate::advice::Advice;
use crate::dependency_policy::Policy;
use crate::sync::{AtomicU32, Ordering};
use crate::time::Instant;
use crate::wire::{Propagation, ServerPolicy};

use super::latency::{LiveLatency, MicrosCell};

/// Whether the advice is published when it is checked: gauges with feature `metrics`, a
/// warning with feature `tracing`.
pub(crate) const PUBLISHES: bool = cfg!(feature = "metrics") || cfg!(feature = "tracing");

/// What a dependency's live advice keeps between checks: the adaptive cap in use, and when
/// the advice last warned. All zeros when new, but for an adaptive cap, which starts at the
/// policy's cap within its bounds.
#[derive(Debug)]
pub(crate) struct LiveAdvice {
    /// The adaptive cap in use; none for a policy without one.
    cap: MicrosCell,
    /// The millisecond (of the clock's, wrapping at 2^32) of the last warning, plus one; 0
    /// for none yet.
    warned: AtomicU32,
}

impl LiveAdvice {
    /// The advice is checked again after this many latencies: as often as the histogram is
    /// halved, just before, when it holds the most (a check walks the histogram twice; a
    /// call pays a few instructions for it).
    pub(crate) const EVERY: u32 = 4_096;
    /// The check is made with the latency whose count leaves this remainder by
    /// [`EVERY`](Self::EVERY): the one that halves the histogram, by the thread that
    /// records it, before it halves it
    /// ([`LiveLatency::record_checked`](super::latency::LiveLatency::record_checked)), so
    /// that no halving runs while the check copies it.
    pub(crate) const CHECK_AT: u32 = 0;

    /// The live advice of a dependency called as `policy`: with an adaptive cap, the
    /// policy's cap within its bounds, until the advice moves it.
    pub(crate) const fn new(policy: &Policy) -> Self {
        let cap = match policy.adaptive_micros() {
            Some((min, max)) => {
                let c = policy.cap_micros();
                MicrosCell::keeping(if c < min {
                    min
                } else if c > max {
                    max
                } else {
                    c
                })
            }
            None => MicrosCell::new(),
        };
        LiveAdvice {
            cap,
            warned: AtomicU32::new(0),
        }
    }

    /// The cap in use under `policy`, in whole microseconds (`u64::MAX` for none): with an
    /// adaptive cap, where it moved (it starts at the policy's, within its bounds); else the
    /// policy's.
    #[inline]
    pub(crate) fn cap_micros(&self, policy: &Policy) -> u64 {
        if policy.is_adaptive() {
            self.cap.load_micros().unwrap_or(u64::MAX)
        } else {
            policy.cap_micros()
        }
    }

    /// [`cap_micros`](Self::cap_micros) as a [`Duration`] ([`Duration::MAX`] for none).
    pub(crate) fn cap(&self, policy: &Policy) -> Duration {
        match self.cap_micros(policy) {
            u64::MAX => Duration::MAX,
            us => Duration::from_micros(us),
        }
    }

    /// Where an attempt given `timeout`, which timed out after `after`, is recorded: at its
    /// timeout when that was its call's cap (`capped`) and `after` came within
    /// [`CAP_WINDOW`](Self::CAP_WINDOW) of it (at most half the cap), else at `after`.
    ///
    /// The cap cut such an attempt: the next service it called was told the cap less the
    /// hop's allowance, rounded down to a millisecond, and answered that its time ran out a
    /// little before that (a 504, a `DEADLINE_EXCEEDED`; a server on this library answers
    /// its reply margin early). Recorded when it came, in a bucket below the cap, it would
    /// read as cut by its caller's shorter deadline, and the cap as killing none. It is
    /// recorded at the cap its call was made with, even when an adaptive cap has moved since.
    /// An attempt whose timeout was less than the cap (its caller's deadline was nearer) is
    /// censored where it ended, however near the cap: its caller cut it. So is a timeout that
    /// comes earlier (a connect limit, a shorter time the request carried, a statement
    /// timeout, a next service's own early answer), and one a next service told with a larger
    /// allowance gives (it answers earlier still). Half the cap at most: below that, the
    /// cap's own kills cannot come (a fast dependency's next service is told too little to
    /// answer so early).
    #[must_use]
    pub(crate) fn timed_out_at(after: Duration, timeout: Duration, capped: bool) -> Duration {
        let window = Self::CAP_WINDOW.min(timeout.checked_div(2).unwrap_or(timeout));
        if capped && after < timeout && timeout.saturating_sub(after) <= window {
            timeout
        } else {
            after
        }
    }

    /// How long before the cap a next service told the cap's time answers that it ran out,
    /// at most: [`Propagation::DEFAULT`]'s allowance and its millisecond unit
    /// ([`Propagation::needs`], 6 ms), and the reply margin of a server on this library
    /// ([`ServerPolicy::DEFAULT_REPLY_MARGIN`], 5 ms): 11 ms.
    pub(crate) const CAP_WINDOW: Duration = Propagation::DEFAULT
        .needs()
        .saturating_add(ServerPolicy::DEFAULT_REPLY_MARGIN);

    /// Whether the advice is checked for a dependency called as `policy`: when it is
    /// published (feature `metrics` or `tracing`) or its cap follows the latencies.
    #[inline]
    pub(crate) const fn watches(policy: &Policy) -> bool {
        PUBLISHES || policy.is_adaptive()
    }

    /// Checks the advice if something reads it ([`watches`](Self::watches)): called after
    /// every [`EVERY`](Self::EVERY)-th latency, rarely, so kept out of line and off the
    /// call's own path.
    #[cold]
    #[inline(never)]
    pub(crate) fn check_due(&self, policy: &Policy, latency: &LiveLatency, at: Instant) {
        if Self::watches(policy) {
            self.check(policy, latency, at);
        }
    }

    /// Checks the advice of the dependency called as `policy`, whose histogram is `latency`,
    /// at `at` (the instant of the event that recorded the latest latency: no clock is
    /// read): moves the adaptive cap, sets the gauges, and warns if the cap is not within
    /// its policy and the last warning is an interval old.
    pub(crate) fn check(&self, policy: &Policy, latency: &LiveLatency, at: Instant) {
        let cap = self.cap(policy);
        let (histogram, timeouts) = latency.copies();
        let Some(mut advice) = Advice::assess(histogram.buckets(), timeouts.buckets(), policy, cap)
        else {
            return;
        };
        if let Some((min, max)) = policy.advice().adaptive_cap() {
            if let Some(next) = advice.adapted_cap(min, max) {
                self.cap.store(Some(crate::time::duration_to_micros(next)));
                // The gauges and the warning speak of the cap now in use, not the one it
                // replaced (whose kills the move has just answered).
                if let Some(moved) =
                    Advice::assess(histogram.buckets(), timeouts.buckets(), policy, next)
                {
                    advice = moved;
                }
            }
        }
        #[cfg(feature = "metrics")]
        super::metrics::gauges(policy.name(), &advice, self.cap(policy));
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
        let live = LiveAdvice::new(&Policy::required("p"));
        let minute = Duration::from_secs(60);
        assert!(live.claim_warning(Instant::from_millis(0), minute));
        assert!(!live.claim_warning(Instant::from_millis(59_999), minute));
        assert!(live.claim_warning(Instant::from_millis(60_000), minute));
        assert!(!live.claim_warning(Instant::from_millis(60_001), minute));
    }

    #[test]
    fn the_adaptive_cap_starts_at_the_policys_within_its_bounds() {
        let fixed = Policy::required("p").with_cap(ms(50));
        let adaptive = fixed.with_adaptive_cap(ms(60), ms(90));
        assert_eq!(LiveAdvice::new(&fixed).cap(&fixed), ms(50));
        let live = LiveAdvice::new(&adaptive);
        assert_eq!(live.cap(&adaptive), ms(60));
        live.cap.store(Some(80_000));
        assert_eq!(live.cap(&adaptive), ms(80));
        assert_eq!(live.cap(&fixed), ms(50), "a fixed cap does not move");
    }

    /// The window below the cap: 11 ms, at most half the cap; at its edge, inside; only for an
    /// attempt the cap limited.
    #[test]
    fn a_timeout_within_the_window_below_the_cap_is_recorded_at_the_cap() {
        let at = |cap: Duration, after: Duration| LiveAdvice::timed_out_at(after, cap, true);
        let us = Duration::from_micros;
        assert_eq!(at(ms(50), ms(39)), ms(50));
        assert_eq!(at(ms(50), ms(39) - us(1)), ms(39) - us(1));
        assert_eq!(at(ms(50), ms(50)), ms(50));
        assert_eq!(at(ms(50), ms(3)), ms(3));
        // A 4 ms cap: a window of 2 ms, so a caller's 1 ms is its own.
        assert_eq!(at(ms(4), ms(2)), ms(4));
        assert_eq!(at(ms(4), ms(2) - us(1)), ms(2) - us(1));
        // No cap: nothing is the cap's.
        assert_eq!(LiveAdvice::timed_out_at(ms(2), Duration::MAX, false), ms(2));
        // An attempt its caller's deadline limited to 45 ms: its own, wherever it ended.
        assert_eq!(LiveAdvice::timed_out_at(ms(45), ms(45), false), ms(45));
        assert_eq!(LiveAdvice::timed_out_at(ms(40), ms(45), false), ms(40));
    }
}
