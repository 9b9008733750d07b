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

use deadline_core::drive::{CallError, Called, Driver, ManualTimer};
use deadline_core::retry::Call;
use deadline_core::rng::SplitMix64;
use deadline_core::{Clock, Instant, Limits, StepId, Timer};
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

/// One attempt being recorded: its line of the report, its dependency, and whether it is
/// still running (so that an attempt started beside it is known to be a hedge).
struct Record {
    report: StepReport,
    step: StepId,
    running: bool,
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
    /// on: an answer, or an optional call's fallback.
    async fn call(&self, step: StepId) -> bool {
        let (Some(policy), Some(dep)) = (self.plan.policy(step), self.table.dependencies.get(step))
        else {
            return false;
        };
        let call = Call::new(policy, self.plan.deadline(), self.plan.reserve(step));
        let latencies = self.trace.latencies.get(&dep.name);
        let started = Cell::new(0usize);
        let timer = self.timer;
        let called: Called<(), Infallible> = Driver::new(call, timer, SplitMix64::new(REPLAY_SEED))
            .run(
                |never: &Infallible| match *never {},
                |limits: Limits| {
                    let n = started.replace(started.get() + 1);
                    let latency = latencies
                        .and_then(|l| l.get(n).or_else(|| l.last()).copied())
                        .unwrap_or(dep.p50);
                    let attempt = self.start(step, policy.name, limits, latency);
                    async move {
                        let mut attempt = attempt;
                        timer.sleep_until(attempt.answers_at).await;
                        attempt.answered();
                        Ok(())
                    }
                },
            )
            .await;
        if !called.report.was_called() {
            let skipped = matches!(called.result, Err(CallError::Skipped(_)));
            self.records.borrow_mut().push(Record {
                report: StepReport {
                    name: policy.name.to_owned(),
                    start_ms: called.report.ended - self.arrival,
                    timeout_ms: None,
                    outcome: if skipped {
                        Outcome::Skipped
                    } else {
                        Outcome::Failed
                    },
                    hedge: false,
                    latency: None,
                },
                step,
                running: false,
            });
        }
        called.result.is_ok() || !policy.is_required()
    }

    /// Records an attempt of `step` starting now with `limits`, which will answer after
    /// `latency` unless dropped first.
    fn start(&self, step: StepId, name: &str, limits: Limits, latency: Duration) -> Attempt<'_> {
        let now = self.timer.now();
        let mut records = self.records.borrow_mut();
        let hedge = records.iter().any(|r| r.step == step && r.running);
        records.push(Record {
            report: StepReport {
                name: name.to_owned(),
                start_ms: now - self.arrival,
                timeout_ms: Some(limits.timeout),
                outcome: Outcome::Timeout,
                hedge,
                latency: Some(latency),
            },
            step,
            running: true,
        });
        Attempt {
            records: &self.records,
            index: records.len() - 1,
            timer: self.timer,
            until: limits.until,
            answers_at: now + latency,
        }
    }
}

/// A simulated attempt in flight. When the driver drops it unanswered, its record says
/// why: its timeout had come, or it was cancelled before.
struct Attempt<'a> {
    records: &'a RefCell<Vec<Record>>,
    index: usize,
    timer: &'a ManualTimer,
    until: Instant,
    answers_at: Instant,
}

impl Attempt<'_> {
    fn answered(&mut self) {
        self.end(Outcome::Ok);
    }

    fn end(&mut self, outcome: Outcome) {
        if let Some(record) = self.records.borrow_mut().get_mut(self.index) {
            if record.running {
                record.running = false;
                record.report.outcome = outcome;
            }
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        let outcome = if self.timer.now() >= self.until {
            Outcome::Timeout
        } else {
            Outcome::Cancelled
        };
        self.end(outcome);
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
