//! Replaying a trace through the core's [`Plan`](deadline_core::Plan) over a [`ManualClock`]: each step's start,
//! the timeout the plan decides at that instant, and what happened.

use std::fmt::Write as _;
use std::time::Duration;

use deadline_core::retry::{Call as RetryCall, Outcome as RetryOutcome, RetryDecision, RetryState};
use deadline_core::rng::SplitMix64;
use deadline_core::{Clock, Decision, Instant, ManualClock};
use serde::Serialize;

use crate::output::{fmt_ms, pad, ser_ms, ser_opt_ms};
use crate::plan::TablePlan;
use crate::table::{Table, Trace};

/// The seed of the backoff jitter in replays, so a replay gives the same answer every run.
pub const REPLAY_SEED: u64 = 0;

/// What became of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The answer came within the timeout.
    Ok,
    /// Not called: an optional dependency whose timeout would fall under its floor (the
    /// fallback is used).
    Skipped,
    /// Not called: a required dependency whose timeout would fall under its floor, so the
    /// request fails at once.
    Failed,
    /// Called, and the timeout fired first.
    Timeout,
}

/// One attempt of one call in a replay.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// The dependency.
    pub name: String,
    /// When the attempt started (or would have), from the request's arrival.
    #[serde(serialize_with = "ser_ms")]
    pub start_ms: Duration,
    /// The timeout the plan gave it; `null` when it was not called.
    #[serde(serialize_with = "ser_opt_ms")]
    pub timeout_ms: Option<Duration>,
    /// What happened.
    pub outcome: Outcome,
    /// How long the dependency took (as the trace says), for the text view.
    #[serde(skip)]
    pub latency: Option<Duration>,
}

/// One replayed request.
#[derive(Clone, Debug, Serialize)]
pub struct TraceReport {
    /// The trace's name.
    pub name: String,
    /// Every attempt, in order.
    pub steps: Vec<StepReport>,
    /// When the response went out (an answer, or the error of a failed request).
    #[serde(serialize_with = "ser_ms")]
    pub respond_ms: Duration,
    /// Whether the request was answered (false: a required call failed).
    pub answered: bool,
}

/// Replays `trace` through `plan` (whose deadline starts at `clock`'s reading). `ids` maps
/// the table's dependencies to plan steps and `groups` lists the steps that start together.
pub fn run(
    table: &Table,
    plan: &TablePlan<'_>,
    ids: &[usize],
    groups: &[Vec<usize>],
    trace: &Trace,
    clock: &ManualClock,
) -> TraceReport {
    let arrival = clock.now();
    let mut steps = Vec::new();
    let mut failed_at: Option<Instant> = None;
    for group in groups {
        let start = clock.now();
        let mut group_end = start;
        for &i in group {
            let dep = &table.dependencies[i];
            let latencies = trace.latencies.get(&dep.name);
            let (end, ok) = call(plan, ids[i], dep.p50, latencies, start, &mut steps, arrival);
            group_end = group_end.max(end);
            if !ok && dep.required {
                failed_at = Some(failed_at.map_or(end, |f| f.min(end)));
            }
        }
        if let Some(at) = failed_at {
            clock.set(at);
            break;
        }
        clock.set(group_end);
    }
    let answered = failed_at.is_none();
    if answered {
        clock.advance(table.own_work);
    }
    TraceReport {
        name: trace.name.clone(),
        steps,
        respond_ms: clock.now() - arrival,
        answered,
    }
}

/// One call with its retries, starting at `start`: the first attempt's timeout from
/// [`Plan::decide`](deadline_core::Plan::decide), each retry from the core's
/// [`RetryState::decide`] (backoff, "fits before the deadline", floor). Returns when it ended
/// and whether the request can go on (an answer, or an optional call's fallback).
fn call(
    plan: &TablePlan<'_>,
    id: usize,
    p50: Duration,
    latencies: Option<&Vec<Duration>>,
    start: Instant,
    steps: &mut Vec<StepReport>,
    arrival: Instant,
) -> (Instant, bool) {
    let Some(policy) = plan.policy(id) else {
        return (start, false);
    };
    let retry_call = RetryCall::new(policy, plan.deadline(), plan.reserve(id));
    let mut state = RetryState::new();
    let mut rng = SplitMix64::new(REPLAY_SEED);
    let mut now = start;
    let mut decision = plan.decide(id, now);
    let mut attempt = 0usize;
    loop {
        let latency = latencies
            .and_then(|l| l.get(attempt).or_else(|| l.last()).copied())
            .unwrap_or(p50);
        let mut step = StepReport {
            name: policy.name.to_owned(),
            start_ms: now - arrival,
            timeout_ms: decision.timeout(),
            outcome: Outcome::Ok,
            latency: None,
        };
        let timeout = match decision {
            Decision::Call(limits) => limits.timeout,
            Decision::Skip(_) => {
                step.outcome = Outcome::Skipped;
                steps.push(step);
                return (now, true);
            }
            Decision::Fail(_) => {
                step.outcome = Outcome::Failed;
                steps.push(step);
                return (now, false);
            }
        };
        step.latency = Some(latency);
        if latency <= timeout {
            steps.push(step);
            return (now + latency, true);
        }
        step.outcome = Outcome::Timeout;
        steps.push(step);
        let ended = now + timeout;
        match state.decide(&retry_call, ended, RetryOutcome::TimedOut, &mut rng) {
            RetryDecision::Retry(retry) => {
                now = retry.at;
                decision = Decision::Call(retry.limits);
                attempt += 1;
            }
            RetryDecision::GiveUp(_) => return (ended, !policy.is_required()),
        }
    }
}

/// A replay as text: one line per attempt, then the response.
#[must_use]
pub fn render(t: &TraceReport) -> String {
    let mut out = format!("trace \"{}\":\n", t.name);
    let width = t
        .steps
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(1);
    for s in &t.steps {
        let what = match s.outcome {
            Outcome::Ok => format!(
                "answered in {} ms",
                s.latency.map_or_else(String::new, fmt_ms)
            ),
            Outcome::Timeout => format!(
                "timed out (it would take {} ms)",
                s.latency.map_or_else(String::new, fmt_ms)
            ),
            Outcome::Skipped => "skipped: under its floor, fallback used".to_owned(),
            Outcome::Failed => "not called: under its floor, the request fails".to_owned(),
        };
        let timeout = s
            .timeout_ms
            .map_or_else(|| "-".to_owned(), |d| format!("{} ms", fmt_ms(d)));
        let _ = writeln!(
            out,
            "  {:>6} ms  {}  timeout {:>7}  {}",
            fmt_ms(s.start_ms),
            pad(&s.name, width),
            timeout,
            what
        );
    }
    let _ = writeln!(
        out,
        "  response at {} ms{}",
        fmt_ms(t.respond_ms),
        if t.answered { "" } else { " (failed)" }
    );
    out
}
