//! [`Recorder`]: the observer of a dependency's calls, feeding its latency histogram (and,
//! with feature `tracing`, a tracing event per step).

use crate::drive::{Event, EventKind, Full, Mode, Observer};
use crate::quantile::Quantile;

use super::Dependency;
use super::latency::LiveLatency;
#[cfg(feature = "advice")]
use super::watch::LiveAdvice;
#[cfg(feature = "advice")]
use crate::dependency_policy::Policy;
#[cfg(feature = "advice")]
use crate::time::Instant;
#[cfg(feature = "advice")]
use core::time::Duration;

/// The policy and the live advice of a dependency, whose advice is checked every
/// [`LiveAdvice::EVERY`] latencies when something reads it (feature `advice`).
#[cfg(feature = "advice")]
type Watch<'d> = (&'d Policy<'d>, &'d LiveAdvice);

/// Hears every step of one call to a dependency: records each attempt's latency in the
/// dependency's histogram (an answer with its own latency, a timeout with the time it ran,
/// which the attempt took at least), and with feature `tracing` emits a tracing event per step.
/// [`Dependency::run`](crate::Dependency::run) uses one; a driver of your own takes
/// [`Dependency::recorder`](crate::Dependency::recorder).
#[derive(Clone, Debug)]
pub struct Recorder<'d> {
    name: &'d str,
    latency: &'d LiveLatency,
    live: Option<Quantile>,
    #[cfg(feature = "advice")]
    watch: Watch<'d>,
}

impl<'d> Recorder<'d> {
    /// A recorder into `latency`, naming the dependency `name` in its traces and keeping the
    /// `live` quantile's hedge delay up to date.
    pub(crate) const fn new(
        name: &'d str,
        latency: &'d LiveLatency,
        live: Option<Quantile>,
        #[cfg(feature = "advice")] watch: Watch<'d>,
    ) -> Self {
        Recorder {
            name,
            latency,
            live,
            #[cfg(feature = "advice")]
            watch,
        }
    }
}

impl Observer for Recorder<'_> {
    #[inline]
    fn on_event(&mut self, event: &Event) {
        hear::<Full>(
            self.name,
            self.latency,
            self.live,
            #[cfg(feature = "advice")]
            self.watch,
            event,
        );
    }
}

/// Records `event` of a call, made in mode `M`, to the dependency named `name`: its latency, if
/// it is an attempt's answer or timeout (and with feature `advice`, the time a cancelled copy
/// ran), keeping the `live` quantile's hedge delay up to date in a full call (a deadline-only
/// call never hedges: a constant branch, so none of the code that reads a quantile is linked
/// for it); with feature `advice`, a timeout or a cancellation recorded apart too (a timeout
/// at its cap when the cap limited it and it came within 11 ms of it) and, in a full call,
/// the advice checked every [`LiveAdvice::EVERY`] latencies when something reads it (a
/// deadline-only call checks nothing); with feature `tracing`, a tracing event.
#[inline]
fn hear<M: Mode>(
    name: &str,
    latency: &LiveLatency,
    live: Option<Quantile>,
    #[cfg(feature = "advice")] watch: Watch<'_>,
    event: &Event,
) {
    let took = match event.kind {
        EventKind::Succeeded { took, .. } => Some(took),
        EventKind::TimedOut {
            after,
            timeout,
            capped,
            ..
        } => {
            // With the advice, one of an attempt its cap limited that came within 11 ms of
            // the cap is the cap's kill, recorded at the cap (`LiveAdvice::timed_out_at`).
            #[cfg(feature = "advice")]
            let after = {
                let at = LiveAdvice::timed_out_at(after, timeout, capped);
                latency.count_timeout(at);
                at
            };
            #[cfg(not(feature = "advice"))]
            let _ = (timeout, capped);
            Some(after)
        }
        // With the advice, a copy another one overtook (or a fatal answer cut short) took at
        // least `after`: recorded there, censored as a timeout is, so that the slow copies a
        // hedge hides still weigh in the advice's quantiles. The live hedge delay reads the
        // same histogram as plain latencies (a slow first copy at its hedge's time, a hedge
        // that lost at its own short time). Only a full call has copies to cancel (a constant
        // branch: none of this is linked for a deadline-only one). Without the advice, nothing
        // says such a latency is a lower bound, and a microcontroller's code is spared it
        // (112 B on a Cortex-M0).
        #[cfg(feature = "advice")]
        EventKind::Cancelled { after, .. } if M::FULL => {
            latency.count_timeout(after);
            Some(after)
        }
        _ => None,
    };
    if let Some(took) = took {
        if M::FULL {
            #[cfg(feature = "advice")]
            record_watched(latency, took, live, watch, event.at);
            #[cfg(not(feature = "advice"))]
            let _ = latency.record(took, live);
        } else {
            let _ = latency.record_only(took);
        }
    }
    #[cfg(feature = "tracing")]
    crate::trace::emit(name, event);
    #[cfg(not(feature = "tracing"))]
    let _ = name;
}

/// Records `took` in a full call's `latency` (keeping the `live` quantile up to date) and
/// checks the advice every [`LiveAdvice::EVERY`] latencies. One function, out of line as the
/// recording alone is without the feature: inlined, the check made the machine's
/// `succeeded` too large for the compiler to inline into the call's poll, and a
/// `Dependency::run` that answers at once took 41 instructions more than without the
/// feature, and 30 with this function, when it was written. With the timeouts' histogram
/// since, 38 (`FEATURES=advice bash scripts/instructions.sh dependency_run`, against the
/// same without `FEATURES`: BENCHMARKS, "Live timeout advice").
#[cfg(feature = "advice")]
#[inline(never)]
fn record_watched(
    latency: &LiveLatency,
    took: Duration,
    live: Option<Quantile>,
    watch: Watch<'_>,
    at: Instant,
) {
    let (policy, advice) = watch;
    let _ = latency.record_checked(took, live, |latency, n| {
        if n % LiveAdvice::EVERY == LiveAdvice::CHECK_AT {
            advice.check_due(policy, latency, at);
        }
    });
}

/// The recorder of the calls of [`Dependency::run`](crate::Dependency::run): the dependency
/// itself, one pointer in the call's future.
pub(crate) struct ModeRecorder<'d, 'n, Rt, M> {
    dep: &'d Dependency<'n, Rt, M>,
}

impl<'d, 'n, Rt, M> ModeRecorder<'d, 'n, Rt, M> {
    pub(crate) const fn new(dep: &'d Dependency<'n, Rt, M>) -> Self {
        ModeRecorder { dep }
    }
}

impl<Rt, M: Mode> Observer for ModeRecorder<'_, '_, Rt, M> {
    #[inline]
    fn on_event(&mut self, event: &Event) {
        let dep = self.dep;
        hear::<M>(
            dep.name(),
            dep.live_latency(),
            dep.live_quantile(),
            #[cfg(feature = "advice")]
            dep.watch(),
            event,
        );
    }
}
