//! Every step of a dependency's call as a `tracing` event (feature `tracing`).
//!
//! Levels: every step of a call at `DEBUG` (attempt started, answered, failed or timed out; a
//! retry, a backoff, a hedge; an optional call skipped, a call not made, a call that gives up)
//! but a loser cancelled, at `TRACE`. Nothing a single call does is logged above `DEBUG`: in
//! an outage every call fails alike, and a `WARN` per call would flood the log when it costs
//! most. The rates are the counters' and the metrics' to tell; what the call's caller makes
//! of its error is the caller's to log. Every event names the dependency (`dependency`) and
//! the attempt (`attempt`) where there is one.
//!
//! With feature `advice`, a `WARN` when a dependency's cap is not within its policy (it kills
//! more than its stated rate, or its worst case does not fit its slice), at most once per
//! interval, with the figures that say so.

#[cfg(feature = "advice")]
use tracing::warn;
use tracing::{debug, trace};

use crate::drive::{Event, EventKind};

/// Emits `event` of dependency `name`.
pub(crate) fn emit(name: &str, event: &Event) {
    let at_us = event.at.as_micros();
    match event.kind {
        EventKind::Started {
            attempt,
            hedge,
            timeout,
        } => {
            if hedge {
                debug!(dependency = name, attempt, ?timeout, at_us, "hedge sent");
            } else if attempt == 0 {
                debug!(dependency = name, attempt, ?timeout, at_us, "call started");
            } else {
                debug!(dependency = name, attempt, ?timeout, at_us, "retry started");
            }
        }
        EventKind::Succeeded { attempt, took } => {
            debug!(dependency = name, attempt, ?took, at_us, "attempt answered");
        }
        EventKind::Failed { attempt, outcome } => {
            debug!(
                dependency = name,
                attempt,
                ?outcome,
                at_us,
                "attempt failed"
            );
        }
        EventKind::TimedOut { attempt, after, .. } => {
            debug!(
                dependency = name,
                attempt,
                ?after,
                at_us,
                "attempt timed out"
            );
        }
        EventKind::NotSent { attempt } => {
            debug!(dependency = name, attempt, at_us, "attempt sent nothing");
        }
        EventKind::Cancelled { attempt, after } => {
            trace!(
                dependency = name,
                attempt,
                ?after,
                at_us,
                "attempt cancelled"
            );
        }
        EventKind::Backoff { until, wait } => {
            let until_us = until.as_micros();
            debug!(
                dependency = name,
                ?wait,
                until_us,
                at_us,
                "retry after backoff"
            );
        }
        EventKind::Skipped { shortfall } => {
            let (available, floor) = (shortfall.available(), shortfall.floor());
            debug!(
                dependency = name,
                ?available,
                ?floor,
                at_us,
                "optional call skipped: too little time left"
            );
        }
        EventKind::NotCalled { error } => {
            debug!(dependency = name, %error, at_us, "call not made");
        }
        EventKind::GaveUp { reason } => {
            debug!(dependency = name, ?reason, at_us, "gave up");
        }
        EventKind::Ended { ok, deadline } => {
            if ok {
                debug!(dependency = name, at_us, "call answered");
            } else {
                // Why was said at its own level (gave up, not made, skipped).
                debug!(
                    dependency = name,
                    // The call's error, not the counters' count (see `EventKind::Ended`).
                    deadline_exceeded_error = deadline,
                    at_us,
                    "call ended without an answer"
                );
            }
        }
    }
}

/// Warns that the cap of dependency `name` is not within its policy, as `advice` says.
#[cfg(feature = "advice")]
pub(crate) fn advice(name: &str, advice: &crate::advice::Advice) {
    let message = match (advice.kills_too_many, advice.fits) {
        (true, Some(false)) => {
            "timeout advice: the cap kills more than its stated rate, and its worst case does \
             not fit its slice"
        }
        (true, _) => "timeout advice: the cap kills more than its stated rate",
        (false, _) => "timeout advice: the cap's worst case does not fit its slice",
    };
    warn!(
        dependency = name,
        cap = ?advice.cap,
        kill_fraction = advice.kill_fraction,
        stated_rate = advice.stated_rate,
        timed_out_share = advice.timed_out_share,
        p999 = ?advice.p999,
        suggested_cap = ?advice.suggested_cap,
        worst_case = ?advice.worst_case,
        slice = ?advice.slice,
        recorded = advice.recorded,
        "{message}"
    );
}
