//! A dependency's calls on the `metrics` facade (feature `metrics`).
//!
//! Per dependency (label `dependency`), one counter per [`CounterEvent`], named
//! `deadline_<event>_total`: `deadline_calls_total`, `deadline_successes_total`,
//! `deadline_timeouts_total` (attempts), `deadline_deadline_exceeded_total`,
//! `deadline_skipped_total`, `deadline_retries_total`, `deadline_hedges_total`,
//! `deadline_hedge_wins_total`, `deadline_budget_refusals_total`,
//! `deadline_breaker_rejections_total`; and the histogram `deadline_call_duration_seconds`
//! of each call made, from its first attempt's start to its end, labelled too with its
//! `outcome`: `success`, `deadline_exceeded` or `failed`. The deadline-exceeded rate of a
//! dependency is `deadline_deadline_exceeded_total / deadline_calls_total`. A call whose
//! future is dropped before it ends (its caller went away) counts in `deadline_calls_total`,
//! with the timeouts, retries and hedges it made, but neither as a success nor as deadline
//! exceeded, and has no duration.
//!
//! With feature `advice`, the live advice's gauges, set each time it is checked:
//! `deadline_kill_fraction` (the estimated share of attempts that run past the cap in use:
//! [`Advice::kill_fraction`](crate::advice::Advice::kill_fraction)),
//! `deadline_timed_out_fraction`, `deadline_suggested_cap_seconds` (the cap the stated
//! false-timeout rate needs: its estimate, or its lower bound while the quantile lies
//! beyond every answer) and `deadline_cap_seconds` (the cap in use).
//!
//! [`describe_metrics`] gives the installed recorder each one's unit and description.

use crate::counters::{CounterEvent, Counters};
use crate::drive::{Called, Report};

/// The metric name of a counter event.
const fn metric(event: CounterEvent) -> &'static str {
    match event {
        CounterEvent::Call => "deadline_calls_total",
        CounterEvent::Success => "deadline_successes_total",
        CounterEvent::Timeout => "deadline_timeouts_total",
        CounterEvent::DeadlineExceeded => "deadline_deadline_exceeded_total",
        CounterEvent::Skipped => "deadline_skipped_total",
        CounterEvent::Retry => "deadline_retries_total",
        CounterEvent::Hedge => "deadline_hedges_total",
        CounterEvent::HedgeWin => "deadline_hedge_wins_total",
        CounterEvent::BudgetRefusal => "deadline_budget_refusals_total",
        CounterEvent::BreakerRejection => "deadline_breaker_rejections_total",
    }
}

/// What a counter event's metric counts, for its description.
const fn description(event: CounterEvent) -> &'static str {
    match event {
        CounterEvent::Call => "Calls made to the dependency, or refused before an attempt",
        CounterEvent::Success => "Calls that ended with an answer",
        CounterEvent::Timeout => "Attempts whose timeout fired, or that had no time to send",
        CounterEvent::DeadlineExceeded => "Calls that ended because their deadline passed",
        CounterEvent::Skipped => "Optional calls skipped for want of time",
        CounterEvent::Retry => "Retries started, after a failure and a backoff",
        CounterEvent::Hedge => "Hedges sent while an attempt was still running",
        CounterEvent::HedgeWin => "Calls a hedge answered first",
        CounterEvent::BudgetRefusal => "Retries and hedges the retry budget refused",
        CounterEvent::BreakerRejection => "Attempts the circuit breaker refused",
    }
}

/// The histogram of call durations, in seconds.
pub(crate) const CALL_DURATION_SECONDS: &str = "deadline_call_duration_seconds";

/// Gives the installed `metrics` recorder the unit and the description of every metric a
/// [`Dependency`](crate::Dependency)'s calls send (feature `metrics`; with `advice`, its
/// gauges too): an exporter writes them beside the values (Prometheus's `# HELP` and
/// `# UNIT`). Call it once, after installing the recorder; the values are sent whether or
/// not it is called.
///
/// ```
/// # let recorder = metrics_util::debugging::DebuggingRecorder::new();
/// // A service installs its exporter's recorder (metrics-exporter-prometheus's, say), then:
/// metrics::with_local_recorder(&recorder, deadline_core::observe::describe_metrics);
/// ```
pub fn describe_metrics() {
    use metrics::{Unit, describe_counter, describe_histogram};
    for event in CounterEvent::ALL {
        describe_counter!(metric(event), Unit::Count, description(event));
    }
    describe_histogram!(
        CALL_DURATION_SECONDS,
        Unit::Seconds,
        "Calls from the first attempt's start to the end, by outcome"
    );
    #[cfg(feature = "advice")]
    {
        use metrics::describe_gauge;
        describe_gauge!(
            KILL_FRACTION,
            "Estimated share of attempts that run past the cap in use"
        );
        describe_gauge!(TIMED_OUT_FRACTION, "Share of attempts that timed out");
        describe_gauge!(
            SUGGESTED_CAP_SECONDS,
            Unit::Seconds,
            "The cap the stated false-timeout rate needs"
        );
        describe_gauge!(CAP_SECONDS, Unit::Seconds, "The cap in use");
    }
}

/// The `outcome` label of a call that was made: `success`, `deadline_exceeded` (its
/// deadline passed, [`Called::is_deadline_exceeded`]) or `failed`.
fn outcome<T, E>(called: &Called<T, E>) -> &'static str {
    if called.result.is_ok() {
        "success"
    } else if called.is_deadline_exceeded() {
        "deadline_exceeded"
    } else {
        "failed"
    }
}

/// Sends one call of dependency `name` to the installed `metrics` recorder: the same counts
/// that [`Called::record`] adds to the dependency's [`Counters`], and the call's duration
/// with its outcome, if it was made.
pub(crate) fn publish<T, E>(name: &str, called: &Called<T, E>) {
    let this_call = Counters::new();
    called.record(&this_call);
    publish_counts(name, &this_call);
    if called.report.was_called() {
        metrics::histogram!(
            CALL_DURATION_SECONDS,
            "dependency" => std::string::String::from(name),
            "outcome" => outcome(called)
        )
        .record(called.report.elapsed().as_secs_f64());
    }
}

/// Sends one call of dependency `name` that was dropped before it ended, having done what
/// `report` says, to the installed `metrics` recorder: the same counts that the dependency's
/// [`Counters`] get for it (the call, and its steps; no duration, as it never ended).
pub(crate) fn publish_dropped(name: &str, report: &Report) {
    let this_call = Counters::new();
    report.record_steps(&this_call);
    publish_counts(name, &this_call);
}

/// Sends the counts of one call of dependency `name`, in `this_call`, to the installed
/// `metrics` recorder.
fn publish_counts(name: &str, this_call: &Counters) {
    let snapshot = this_call.snapshot();
    for event in CounterEvent::ALL {
        let n = snapshot.get(event);
        if n > 0 {
            metrics::counter!(metric(event), "dependency" => std::string::String::from(name))
                .increment(n);
        }
    }
}

/// The gauge of the share of attempts the cap in use kills.
#[cfg(feature = "advice")]
pub(crate) const KILL_FRACTION: &str = "deadline_kill_fraction";
/// The gauge of the share of attempts that timed out.
#[cfg(feature = "advice")]
pub(crate) const TIMED_OUT_FRACTION: &str = "deadline_timed_out_fraction";
/// The gauge of the suggested cap, in seconds.
#[cfg(feature = "advice")]
pub(crate) const SUGGESTED_CAP_SECONDS: &str = "deadline_suggested_cap_seconds";
/// The gauge of the cap in use, in seconds.
#[cfg(feature = "advice")]
pub(crate) const CAP_SECONDS: &str = "deadline_cap_seconds";

/// Sets the advice's gauges of dependency `name` on the installed `metrics` recorder, with
/// `cap`, the cap in use once the advice has moved an adaptive one.
#[cfg(feature = "advice")]
pub(crate) fn gauges(name: &str, advice: &crate::advice::Advice, cap: core::time::Duration) {
    let label = || std::string::String::from(name);
    metrics::gauge!(KILL_FRACTION, "dependency" => label()).set(advice.kill_fraction);
    metrics::gauge!(TIMED_OUT_FRACTION, "dependency" => label()).set(advice.timed_out_share);
    metrics::gauge!(SUGGESTED_CAP_SECONDS, "dependency" => label())
        .set(seconds(advice.suggested_cap.value()));
    metrics::gauge!(CAP_SECONDS, "dependency" => label()).set(seconds(cap));
}

/// `d` in seconds; no cap at all ([`Duration::MAX`](core::time::Duration::MAX): a policy
/// without one, or a quantile beyond the histogram) is infinite, as Prometheus writes it
/// (`+Inf`), not 1.8e19 seconds.
#[cfg(feature = "advice")]
fn seconds(d: core::time::Duration) -> f64 {
    if d == core::time::Duration::MAX {
        f64::INFINITY
    } else {
        d.as_secs_f64()
    }
}

#[cfg(all(test, feature = "advice"))]
mod tests {
    use core::time::Duration;

    use super::seconds;

    /// No cap is an infinite one, which Prometheus writes `+Inf`: not the 1.8e19 seconds of
    /// `Duration::MAX`, which a dashboard would plot as a cap.
    #[test]
    fn no_cap_is_infinite_seconds() {
        assert_eq!(seconds(Duration::MAX), f64::INFINITY);
        assert_eq!(seconds(Duration::from_millis(50)), 0.05);
    }
}
