//! Replaying a trace: the request's calls run through the core's [`Driver`] on a
//! [`ManualTimer`], so every first attempt, retry, backoff and hedge in a replay is the one
//! the core makes for the same policy.
//!
//! An attempt is simulated: it sleeps on the virtual timer for the latency the trace gives
//! that attempt, then answers. The driver arms its timeout, drops it when the timeout fires
//! first, sends hedges, backs off and retries; this module only records what each attempt did.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use deadline_core::call::Limits;
use deadline_core::drive::{Called, Driver, Event, EventKind, Observe};
use deadline_core::plan::StepId;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Instant, Timer};
use serde::Serialize;

use crate::output::{fmt_ms, pad, ser_ms, ser_opt_ms};
use crate::table::{Table, TablePlan, Trace};

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
    /// Called, and dropped before its timeout: another copy answered first, or the request
    /// ended (a required call beside it failed).
    Cancelled,
}

/// One attempt of one call in a replay.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// The dependency.
    pub name: String,
    /// When the attempt started (or would have), from the request's arrival.
    #[serde(serialize_with = "ser_ms")]
    pub start_ms: Duration,
    /// The timeout the core gave it; `null` when it was not called.
    #[serde(serialize_with = "ser_opt_ms")]
    pub timeout_ms: Option<Duration>,
    /// What happened.
    pub outcome: Outcome,
    /// Whether it was a hedge: a copy sent while an earlier attempt was still running.
    pub hedge: bool,
    /// How long the dependency took (as the trace says), for the text view.
    #[serde(skip)]
    pub latency: Option<Duration>,
}

/// One replayed request.
#[derive(Clone, Debug, Serialize)]
pub struct TraceReport {
    /// The trace's name.
    pub name: String,
    /// Every attempt, in the order they started.
    pub steps: Vec<StepReport>,
    /// When the response went out (an answer, or the error of a failed request).
    #[serde(serialize_with = "ser_ms")]
    pub respond_ms: Duration,
    /// Whether the request was answered (false: a required call failed).
    pub answered: bool,
}

/// One attempt being recorded: its line of the report. It reads "cancelled" until its end
/// is heard of; one whose end never comes was dropped with its call (a required call
/// beside it failed), which cancelled it.
struct Record {
    report: StepReport,
}

/// What the calls of one replay share: the plan, the trace, the timer and the record.
struct Replay<'a, 'p> {
    table: &'a Table,
    plan: &'a TablePlan<'p>,
    trace: &'a Trace,
    timer: &'a ManualTimer,
    arrival: Instant,
    records: RefCell<Vec<Record>>,
}

/// Replays `trace` through `plan` (whose deadline starts at `timer`'s reading); `groups`
/// lists the steps that start together ([`crate::plan::groups`]). Step `i` of the plan is
/// dependency `i` of the table.
pub fn run(
    table: &Table,
    plan: &TablePlan<'_>,
    groups: &[Vec<StepId>],
    trace: &Trace,
    timer: &ManualTimer,
) -> TraceReport {
    let replay = Replay {
        table,
        plan,
        trace,
        timer,
        arrival: timer.now(),
        records: RefCell::new(Vec::new()),
    };
    // Every attempt waits on this timer, so a replay cannot stall; if it did, the request
    // would never be answered.
    let answered = timer.run(replay.request(groups)).unwrap_or(false);
    let respond = if answered {
        timer.now() + table.own_work
    } else {
        timer.now()
    };
    TraceReport {
        name: trace.name.clone(),
        steps: replay
            .records
            .into_inner()
            .into_iter()
            .map(|r| r.report)
            .collect(),
        respond_ms: respond - replay.arrival,
        answered,
    }
}

impl Replay<'_, '_> {
    /// The whole request: each group's calls side by side, one group after another. Returns
    /// whether every required call answered; the timer then reads when the last call ended,
    /// or when the request failed.
    async fn request(&self, groups: &[Vec<StepId>]) -> bool {
        for group in groups {
            if !self.group(group).await {
                return false;
            }
        }
        true
    }

    /// The calls of one group, run together. Returns false as soon as a required one fails:
    /// the others are dropped there (cancelled), since nobody waits for them any more.
    async fn group(&self, group: &[StepId]) -> bool {
        let mut calls: Vec<Option<Pin<Box<dyn Future<Output = bool> + '_>>>> = group
            .iter()
            .map(|&step| {
                let call: Pin<Box<dyn Future<Output = bool> + '_>> = Box::pin(self.call(step));
                Some(call)
            })
            .collect();
        poll_fn(|cx| {
            // Every call is polled at each instant, so the calls that start (or end) together
            // all do, whichever of them fails.
            let mut failed = false;
            for slot in &mut calls {
                if let Some(call) = slot {
                    if let Poll::Ready(ok) = call.as_mut().poll(cx) {
                        *slot = None;
                        failed |= !ok;
                    }
                }
            }
            if failed {
                Poll::Ready(false)
            } else if calls.iter().all(Option::is_none) {
                Poll::Ready(true)
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// One dependency call, run by the core's driver. Returns whether the request can go
    /// on: an answer, or an optional call's fallback. What each attempt did is recorded from
    /// the driver's events, not worked out here.
    async fn call(&self, step: StepId) -> bool {
        let (Some(call), Some(dep)) = (self.plan.call(step), self.table.dependencies.get(step))
        else {
            return false;
        };
        let policy = call.policy;
        let latencies = self.trace.latencies.get(&dep.name);
        // The trace's latency of attempt `n`, in the order the attempts start (its last for
        // any further attempt; the dependency's p50 without any).
        let latency = |n: usize| {
            latencies
                .and_then(|l| l.get(n).or_else(|| l.last()).copied())
                .unwrap_or(dep.p50)
        };
        // The record of each attempt of this call, by its number.
        let lines: RefCell<Vec<usize>> = RefCell::new(Vec::new());
        let record = |event: &Event| self.record(policy.name(), &lines, latency, event);
        let started = Cell::new(0usize);
        let timer = self.timer;
        let called: Called<(), Infallible> = Driver::new(call, timer, SplitMix64::new(REPLAY_SEED))
            .with_observer(Observe(record))
            .run(
                |never: &Infallible| match *never {},
                |_limits: Limits| {
                    let answers_at = timer.now() + latency(started.replace(started.get() + 1));
                    async move {
                        timer.sleep_until(answers_at).await;
                        Ok(())
                    }
                },
            )
            .await;
        called.result.is_ok() || !policy.is_required()
    }

    /// Records one event of a call to `name`: `lines` maps the call's attempt numbers to
    /// their records, `latency` gives each attempt's latency.
    fn record(
        &self,
        name: &str,
        lines: &RefCell<Vec<usize>>,
        latency: impl Fn(usize) -> Duration,
        event: &Event,
    ) {
        let mut records = self.records.borrow_mut();
        let mut set = |attempt: u32, outcome: Outcome| {
            let line = usize::try_from(attempt)
                .ok()
                .and_then(|n| lines.borrow().get(n).copied());
            if let Some(record) = line.and_then(|i| records.get_mut(i)) {
                record.report.outcome = outcome;
            }
        };
        let not_called = |outcome: Outcome| Record {
            report: StepReport {
                name: name.to_owned(),
                start_ms: event.at - self.arrival,
                timeout_ms: None,
                outcome,
                hedge: false,
                latency: None,
            },
        };
        match event.kind {
            EventKind::Started {
                attempt,
                hedge,
                timeout,
            } => {
                let n = usize::try_from(attempt).unwrap_or(usize::MAX);
                lines.borrow_mut().push(records.len());
                records.push(Record {
                    report: StepReport {
                        name: name.to_owned(),
                        start_ms: event.at - self.arrival,
                        timeout_ms: Some(timeout),
                        outcome: Outcome::Cancelled,
                        hedge,
                        latency: Some(latency(n)),
                    },
                });
            }
            EventKind::Succeeded { attempt, .. } => set(attempt, Outcome::Ok),
            EventKind::TimedOut { attempt, .. } => set(attempt, Outcome::Timeout),
            EventKind::Cancelled { attempt, .. } => set(attempt, Outcome::Cancelled),
            EventKind::Skipped { .. } => records.push(not_called(Outcome::Skipped)),
            EventKind::NotCalled { .. } => records.push(not_called(Outcome::Failed)),
            _ => {}
        }
    }
}

/// A replay as text: one line per attempt, then the response.
#[must_use]
pub fn render(t: &TraceReport) -> String {
    let mut out = format!("trace \"{}\":\n", t.name);
    let label = |s: &StepReport| {
        if s.hedge {
            format!("{} (hedge)", s.name)
        } else {
            s.name.clone()
        }
    };
    let width = t
        .steps
        .iter()
        .map(|s| label(s).chars().count())
        .max()
        .unwrap_or(1);
    for s in &t.steps {
        let takes = s.latency.map_or_else(String::new, fmt_ms);
        let what = match s.outcome {
            Outcome::Ok => format!("answered in {takes} ms"),
            Outcome::Timeout => format!("timed out (it would take {takes} ms)"),
            Outcome::Cancelled => format!("cancelled (it would take {takes} ms)"),
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
            pad(&label(s), width),
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
