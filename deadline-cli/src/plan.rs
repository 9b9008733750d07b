//! `deadline plan`: proposals with their reasons, the budget table of one screen, and replays
//! of traces through the core's [`Plan`](deadline_core::plan::Plan).
//!
//! Every timeout here comes from [`Plan::decide`](deadline_core::plan::Plan::decide) (so from
//! [`deadline_core::call::call_timeout`]); every worst case from
//! [`analysis::worst_case_with_backoff`]; the whole request's typical, worst and least
//! lengths from [`Plan::critical_path`](deadline_core::plan::Plan::critical_path); every in-flight count from [`analysis::in_flight`];
//! every cap from the latency table (p99.9 plus the margin) or stated; every replayed attempt from the
//! core's driver ([`crate::replay`]). This module only arranges the core's answers into a
//! table.

use std::fmt::Write as _;
use std::time::Duration;

use deadline_core::analysis::{self, Rate, Sample};
use deadline_core::call::{Decision, call_timeout};
use deadline_core::plan::StepId;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Instant, Policy};
use serde::Serialize;

use crate::error::InputError;
use crate::output::{fmt_ms, fmt_num, fmt_percent, pad, ser_ms, ser_opt_ms};
use crate::replay::{self, TraceReport};
use crate::table::{CapSource, HedgeSetting, MAX_DEPENDENCIES, Table, TablePlan};

/// The request rate used for Little's law when neither the table nor `--rate` gives one.
pub const DEFAULT_RATE_PER_SEC: f64 = 100.0;

/// Everything `deadline plan` prints.
#[derive(Clone, Debug, Serialize)]
pub struct PlanReport {
    /// The table's file.
    pub file: String,
    /// The request budget.
    #[serde(serialize_with = "ser_ms")]
    pub budget_ms: Duration,
    /// Our own work after the calls.
    #[serde(serialize_with = "ser_ms")]
    pub own_work_ms: Duration,
    /// The request rate for Little's law.
    pub rate_per_sec: f64,
    /// One row per dependency, in call order.
    pub dependencies: Vec<DependencyRow>,
    /// The whole request.
    pub whole: WholeRow,
    /// Replays of the table's traces.
    pub traces: Vec<TraceReport>,
}

/// One dependency's proposals and its line of the budget table.
#[derive(Clone, Debug, Serialize)]
pub struct DependencyRow {
    /// Its name.
    pub name: String,
    /// What it is.
    pub about: Option<String>,
    /// Whether the request fails without it.
    pub required: bool,
    /// `"sequential"` or `"parallel"` (alongside the one before).
    pub mode: &'static str,
    /// Median latency.
    #[serde(serialize_with = "ser_ms")]
    pub p50_ms: Duration,
    /// 95th percentile, if known.
    #[serde(serialize_with = "ser_opt_ms")]
    pub p95_ms: Option<Duration>,
    /// 99.9th percentile.
    #[serde(serialize_with = "ser_ms")]
    pub p999_ms: Duration,
    /// The cap: the longest one attempt waits.
    #[serde(serialize_with = "ser_ms")]
    pub cap_ms: Duration,
    /// The floor: the shortest timeout worth calling with.
    #[serde(serialize_with = "ser_ms")]
    pub floor_ms: Duration,
    /// The hedge delay, if the dependency hedges.
    #[serde(serialize_with = "ser_opt_ms")]
    pub hedge_delay_ms: Option<Duration>,
    /// Retries after the first attempt.
    pub retries: u32,
    /// Why: `"p99.9 = 90 ms, cap 110 ms, floor 30 ms"`, and where each came from.
    pub reason: String,
    /// The time left for this call, after the reserve, when every earlier call takes its p50.
    #[serde(serialize_with = "ser_ms")]
    pub slice_ms: Duration,
    /// The timeout it gets then: `min(slice, cap)`, from the core's decision.
    #[serde(serialize_with = "ser_opt_ms")]
    pub timeout_ms: Option<Duration>,
    /// `(retries + 1) × cap` plus the longest backoff before each retry: every attempt
    /// running to its cap, every wait as long as its jitter allows.
    #[serde(serialize_with = "ser_ms")]
    pub worst_case_ms: Duration,
    /// Whether the worst case fits in the slice.
    pub fits: bool,
    /// The share of measured calls slower than the cap, when a sample is given.
    pub kill_fraction_at_cap: Option<f64>,
    /// Little's law at the p50: calls in flight to this dependency on a normal day.
    pub in_flight_p50: u64,
    /// Little's law at the worst case: calls in flight during a stall.
    pub in_flight_worst: u64,
}

/// The whole request against its budget.
#[derive(Clone, Debug, Serialize)]
pub struct WholeRow {
    /// Own work plus the floors of the required calls (the least a success needs).
    #[serde(serialize_with = "ser_ms")]
    pub floors_ms: Duration,
    /// Own work plus every call at its p50.
    #[serde(serialize_with = "ser_ms")]
    pub typical_ms: Duration,
    /// Own work plus every call at its worst case (parallel calls count once, the longest).
    #[serde(serialize_with = "ser_ms")]
    pub worst_case_ms: Duration,
    /// Whether the floors fit: if not, no request can succeed.
    pub floors_fit: bool,
    /// Whether the typical request fits.
    pub typical_fits: bool,
    /// Whether every call can run to its worst case within the budget. When not, later
    /// calls get shorter timeouts after slow earlier ones (and optional ones may be skipped).
    pub fits: bool,
    /// Little's law at the typical latency.
    pub in_flight_typical: u64,
    /// Little's law at the budget: requests in flight when every one runs to the deadline.
    pub in_flight_worst: u64,
}

/// Builds the core plan for `policies`, in table order: step `i` is dependency `i`, and a
/// parallel dependency goes alongside the step before it.
///
/// # Errors
///
/// Never for a checked table (it holds at most [`MAX_DEPENDENCIES`] steps).
pub fn build_plan<'p>(
    table: &Table,
    policies: &'p [Policy<'p>],
    deadline: Deadline,
) -> Result<TablePlan<'p>, InputError> {
    let mut plan = TablePlan::new(deadline, table.own_work);
    for (dep, policy) in table.dependencies.iter().zip(policies) {
        let added = if dep.parallel {
            plan.alongside(policy)
        } else {
            plan.then(policy)
        };
        added.map_err(|_| {
            InputError::new(
                &table.file,
                Some(dep.line),
                Some("dependency"),
                format!("at most {MAX_DEPENDENCIES} dependencies per table"),
            )
        })?;
    }
    Ok(plan)
}

/// The groups of a plan: runs of steps that start together (a step and the steps the plan
/// runs alongside it), in order.
#[must_use]
pub fn groups(plan: &TablePlan<'_>) -> Vec<Vec<StepId>> {
    let mut groups: Vec<Vec<StepId>> = Vec::new();
    for step in 0..plan.len() {
        match groups.last_mut() {
            Some(group) if step > 0 && plan.parallel(step, step - 1) => group.push(step),
            _ => groups.push(vec![step]),
        }
    }
    groups
}

/// A request rate as the core's [`Rate`], to the thousandth of a request per second.
#[must_use]
pub fn rate(per_sec: f64) -> Rate {
    let per_sec = if per_sec.is_finite() && per_sec > 0.0 {
        per_sec
    } else {
        0.0
    };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let per_kilo_sec = (per_sec * 1000.0).round().min(u64::MAX as f64) as u64;
    Rate::new(per_kilo_sec, Duration::from_secs(1000))
}

/// Runs `deadline plan` over a checked table: proposals, the budget table and the replays.
/// `rate_per_sec` overrides the table's rate.
///
/// # Errors
///
/// A table the core's plan cannot hold.
pub fn run(table: &Table, rate_per_sec: Option<f64>) -> Result<PlanReport, InputError> {
    let rate_per_sec = rate_per_sec
        .or(table.rate_per_sec)
        .unwrap_or(DEFAULT_RATE_PER_SEC);
    let rate = rate(rate_per_sec);
    let policies: Vec<Policy> = table.dependencies.iter().map(|d| d.policy()).collect();
    let deadline = Deadline::after(Instant::ZERO, table.budget);
    let plan = build_plan(table, &policies, deadline)?;
    let groups = groups(&plan);

    // Each step's length, for the core's critical path (step `i` is dependency `i`).
    let p50 = |step: StepId, _: &Policy| {
        table
            .dependencies
            .get(step)
            .map_or(Duration::ZERO, |d| d.p50)
    };
    let worst_case = |_: StepId, p: &Policy| analysis::worst_case_with_backoff(p.cap(), &p.retry());
    let floor = |_: StepId, p: &Policy| {
        if p.is_required() {
            p.floor()
        } else {
            Duration::ZERO
        }
    };
    // The typical request: every call at its p50. A group starts once the groups before it
    // have taken theirs: the whole path less the part from the group on.
    let typical_path = plan.critical_path(0, p50);

    let mut rows = Vec::with_capacity(policies.len());
    for group in &groups {
        let first = group.first().copied().unwrap_or_default();
        let start = Instant::ZERO + typical_path.saturating_sub(plan.critical_path(first, p50));
        for &step in group {
            let (dep, policy) = (&table.dependencies[step], &policies[step]);
            let slice = slice(policy, &plan, step, start);
            let timeout = plan.decide(step, start).timeout();
            let worst_case = worst_case(step, policy);
            let kill = dep.samples.as_ref().and_then(|s| {
                let mut sorted = s.clone();
                Sample::new(&mut sorted)
                    .ok()
                    .map(|sample| sample.kill_fraction(policy.cap()))
            });
            rows.push(DependencyRow {
                name: dep.name.clone(),
                about: dep.about.clone(),
                required: dep.required,
                mode: if dep.parallel {
                    "parallel"
                } else {
                    "sequential"
                },
                p50_ms: dep.p50,
                p95_ms: dep.p95,
                p999_ms: dep.p999,
                cap_ms: policy.cap(),
                floor_ms: policy.floor(),
                hedge_delay_ms: policy.hedge().map(|h| h.delay()),
                retries: dep.retries,
                reason: reason(dep, policy, kill),
                slice_ms: slice,
                timeout_ms: timeout,
                worst_case_ms: worst_case,
                fits: worst_case <= slice,
                kill_fraction_at_cap: kill,
                in_flight_p50: analysis::in_flight(rate, dep.p50),
                in_flight_worst: analysis::in_flight(rate, worst_case),
            });
        }
    }
    let typical = table.own_work.saturating_add(typical_path);
    let worst = table
        .own_work
        .saturating_add(plan.critical_path(0, worst_case));
    // The least a success needs: own work and the floors of the required calls.
    let floors = table.own_work.saturating_add(plan.critical_path(0, floor));
    let whole = WholeRow {
        floors_ms: floors,
        typical_ms: typical,
        worst_case_ms: worst,
        floors_fit: floors <= table.budget,
        typical_fits: typical <= table.budget,
        fits: worst <= table.budget,
        in_flight_typical: analysis::in_flight(rate, typical.min(table.budget)),
        in_flight_worst: analysis::in_flight(rate, table.budget),
    };
    let mut traces = Vec::with_capacity(table.traces.len());
    for trace in &table.traces {
        let timer = ManualTimer::new();
        let deadline = Deadline::after(timer.now(), table.budget);
        let plan = build_plan(table, &policies, deadline)?;
        traces.push(replay::run(table, &plan, &groups, trace, &timer));
    }
    Ok(PlanReport {
        file: table.file.clone(),
        budget_ms: table.budget,
        own_work_ms: table.own_work,
        rate_per_sec,
        dependencies: rows,
        whole,
        traces,
    })
}

/// The time a call would have if it started at `start` with no cap: the core's decision for
/// an uncapped copy of its policy (`deadline.remaining(start) - reserve`).
fn slice(policy: &Policy, plan: &TablePlan<'_>, id: StepId, start: Instant) -> Duration {
    let uncapped = policy.with_cap(Duration::MAX);
    match call_timeout(&uncapped, plan.deadline(), plan.reserve(id), start) {
        Decision::Call(limits) => limits.timeout(),
        Decision::Skip(short) | Decision::Fail(short) => short.available(),
    }
}

/// The reason for a dependency's numbers: `p99.9 = 90 ms, cap 110 ms, floor 30 ms`, then
/// where each came from.
fn reason(dep: &crate::table::Dependency, policy: &Policy, kill: Option<f64>) -> String {
    let mut s = format!(
        "p99.9 = {} ms, cap {} ms, floor {} ms",
        fmt_ms(dep.p999),
        fmt_ms(policy.cap()),
        fmt_ms(policy.floor())
    );
    if let Some(h) = policy.hedge() {
        let _ = write!(s, ", hedge after {} ms", fmt_ms(h.delay()));
    }
    let cap_why = match dep.cap {
        CapSource::Margin(m) => format!("cap = p99.9 + {} ms margin", fmt_ms(m)),
        CapSource::Stated(c) if c < dep.p999 => format!(
            "cap stated, below the p99.9{}: more false timeouts accepted",
            if dep.required {
                ""
            } else {
                " because it has a fallback"
            }
        ),
        CapSource::Stated(c) => format!(
            "cap stated: p99.9 + {} ms",
            fmt_ms(c.saturating_sub(dep.p999))
        ),
    };
    let floor_why = if dep.floor.is_some() {
        "floor stated"
    } else {
        "floor = p50"
    };
    let _ = write!(s, " ({cap_why}; {floor_why}");
    match dep.hedge {
        HedgeSetting::AfterP95 => s.push_str("; hedge after the p95"),
        HedgeSetting::After(_) => s.push_str("; hedge delay stated"),
        HedgeSetting::Off => {}
    }
    if let Some(k) = kill {
        let _ = write!(s, "; the cap abandons {} of the sample", fmt_percent(k));
    }
    if let Some(file) = &dep.samples_file {
        let _ = write!(s, "; percentiles from {file}");
    }
    s.push(')');
    s
}

/// The budget table of one screen, then the reasons, then the replays.
#[must_use]
pub fn render(report: &PlanReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "deadline plan: {}\nbudget {} ms, own work {} ms, Little's law at {} requests/s\n",
        report.file,
        fmt_ms(report.budget_ms),
        fmt_ms(report.own_work_ms),
        fmt_num(report.rate_per_sec, 3)
    );
    let label = |r: &DependencyRow| {
        format!(
            "{}{}{}{}",
            if r.mode == "parallel" { "| " } else { "" },
            r.name,
            r.about
                .as_deref()
                .map(|a| format!(" ({a})"))
                .unwrap_or_default(),
            if r.required { "" } else { " [optional]" }
        )
    };
    let width = report
        .dependencies
        .iter()
        .map(|r| label(r).chars().count())
        .max()
        .unwrap_or(4)
        .clamp(14, 48);
    let _ = writeln!(
        out,
        "{}  {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>3} {:>6} {:>7} {:>6} {:>4}  {:>9}",
        pad("call", width),
        "p50",
        "p95",
        "p99.9",
        "cap",
        "floor",
        "hedge",
        "try",
        "slice",
        "timeout",
        "worst",
        "fits",
        "in flight",
    );
    for r in &report.dependencies {
        let opt = |d: Option<Duration>| d.map_or_else(|| "-".to_owned(), fmt_ms);
        let _ = writeln!(
            out,
            "{}  {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>3} {:>6} {:>7} {:>6} {:>4}  {:>9}",
            pad(&label(r), width),
            fmt_ms(r.p50_ms),
            opt(r.p95_ms),
            fmt_ms(r.p999_ms),
            fmt_ms(r.cap_ms),
            fmt_ms(r.floor_ms),
            opt(r.hedge_delay_ms),
            r.retries.saturating_add(1),
            fmt_ms(r.slice_ms),
            opt(r.timeout_ms),
            fmt_ms(r.worst_case_ms),
            if r.fits { "yes" } else { "no" },
            format!("{}..{}", r.in_flight_p50, r.in_flight_worst),
        );
    }
    let w = &report.whole;
    let _ = writeln!(
        out,
        "\nwhole request: own work {} ms; at the p50s {} ms; floors {} ms; worst case {} ms; \
         budget {} ms: {}",
        fmt_ms(report.own_work_ms),
        fmt_ms(w.typical_ms),
        fmt_ms(w.floors_ms),
        fmt_ms(w.worst_case_ms),
        fmt_ms(report.budget_ms),
        if w.fits {
            "fits"
        } else if w.floors_fit {
            "the worst case does not fit"
        } else {
            "the floors alone do not fit: no request can succeed"
        }
    );
    if !w.fits && w.floors_fit {
        let _ = writeln!(
            out,
            "  a call gets its full cap only when earlier calls leave time: later calls get \
             shorter timeouts\n  after slow earlier ones, and optional ones are skipped under \
             their floor"
        );
    }
    let _ = writeln!(
        out,
        "requests in flight (Little's law): {} at the p50s, {} when every request runs to its \
         deadline",
        w.in_flight_typical, w.in_flight_worst
    );
    let _ = writeln!(
        out,
        "\nslice: time left for the call (after the reserve) when earlier calls take their p50; \
         worst: (retries + 1) x cap\nplus the longest backoff before each retry; in flight: \
         Little's law, rate x p50 .. rate x worst case.\n\"| \" runs alongside the call above; \
         \"(hedge)\" marks a copy sent while an attempt was running.\n"
    );
    for r in &report.dependencies {
        let _ = writeln!(out, "{}: {}", r.name, r.reason);
    }
    for t in &report.traces {
        out.push('\n');
        out.push_str(&replay::render(t));
    }
    out
}
