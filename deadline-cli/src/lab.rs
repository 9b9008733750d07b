//! `deadline lab`: candidate timeouts against a measured sample and an allocation.
//!
//! For each candidate timeout `T` (the median, the p95, the p99, the mean and any given) and
//! each retry count `r`, the core's [`Sample::assess`] gives the worst case `(r + 1) × T`,
//! whether it fits the allocation, the kill fraction `1 − F(T)` and the failure probability
//! `(1 − F(T))^(r+1)` (if the attempts are independent). This module only lists them.

use std::fmt::Write as _;
use std::time::Duration;

use deadline_core::analysis::{self, Sample};
use serde::Serialize;

use crate::error::InputError;
use crate::output::{fmt_ms, fmt_percent, pad, ser_ms};

/// The default allocation: the preset's 250 ms.
pub const DEFAULT_ALLOC: Duration = Duration::from_millis(250);

/// The default largest retry count: rows for 0, 1 and 2 retries.
pub const DEFAULT_MAX_RETRIES: u32 = 2;

/// The name of the built-in sample in messages.
pub const PRESET_NAME: &str = "<built-in lab preset sample>";

/// The lab's preset sample: a hundred measured calls.
pub const PRESET: &str = include_str!("../data/lab-preset.txt");

/// What the lab is asked.
#[derive(Clone, Debug, PartialEq)]
pub struct LabOptions {
    /// The time the budget gives this call.
    pub alloc: Duration,
    /// Timeouts to try besides the median, p95, p99 and mean.
    pub timeouts: Vec<Duration>,
    /// Rows for 0..=`max_retries` retries.
    pub max_retries: u32,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            alloc: DEFAULT_ALLOC,
            timeouts: Vec::new(),
            max_retries: DEFAULT_MAX_RETRIES,
        }
    }
}

/// A candidate timeout and where it comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    /// `median`, `p95`, `p99`, `mean` or `given` (joined with `=` when they coincide).
    pub label: String,
    /// The timeout.
    #[serde(serialize_with = "ser_ms")]
    pub timeout_ms: Duration,
    /// Attempts whose worst case fits the allocation: `⌊alloc / T⌋`.
    pub attempts_that_fit: u32,
    /// How many calls of the sample it abandons.
    pub killed: usize,
}

/// One `(T, r)` pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LabRow {
    /// The timeout of each attempt.
    #[serde(serialize_with = "ser_ms")]
    pub timeout_ms: Duration,
    /// Retries after the first attempt.
    pub retries: u32,
    /// `(r + 1) × T`.
    #[serde(serialize_with = "ser_ms")]
    pub worst_case_ms: Duration,
    /// Whether the worst case fits the allocation.
    pub fits: bool,
    /// `1 − F(T)`.
    pub kill_fraction: f64,
    /// `(1 − F(T))^(r+1)`, if attempts are independent.
    pub failure_probability: f64,
}

/// Everything `deadline lab` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LabReport {
    /// The sample's file.
    pub sample: String,
    /// How many calls it holds.
    pub calls: usize,
    /// The allocation.
    #[serde(serialize_with = "ser_ms")]
    pub alloc_ms: Duration,
    /// The mean latency.
    #[serde(serialize_with = "ser_ms")]
    pub mean_ms: Duration,
    /// The median (nearest rank).
    #[serde(serialize_with = "ser_ms")]
    pub p50_ms: Duration,
    /// The 95th percentile.
    #[serde(serialize_with = "ser_ms")]
    pub p95_ms: Duration,
    /// The 99th percentile.
    #[serde(serialize_with = "ser_ms")]
    pub p99_ms: Duration,
    /// The slowest call.
    #[serde(serialize_with = "ser_ms")]
    pub max_ms: Duration,
    /// The candidates, in order.
    pub candidates: Vec<Candidate>,
    /// One row per candidate and retry count.
    pub rows: Vec<LabRow>,
}

/// Runs the lab over `latencies` (from the file `sample`).
///
/// # Errors
///
/// An empty sample.
pub fn run(
    sample: &str,
    latencies: &[Duration],
    options: &LabOptions,
) -> Result<LabReport, InputError> {
    let mut sorted = latencies.to_vec();
    let s = Sample::new(&mut sorted)
        .map_err(|e| InputError::new(sample, None, Some("latency"), e.to_string()))?;
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut add = |label: &str, t: Duration| {
        if let Some(c) = candidates.iter_mut().find(|c| c.timeout_ms == t) {
            if !c.label.split('=').any(|l| l == label) {
                c.label = format!("{}={label}", c.label);
            }
        } else {
            candidates.push(Candidate {
                label: label.to_owned(),
                timeout_ms: t,
                attempts_that_fit: analysis::attempts_that_fit(options.alloc, t),
                killed: s.above(t),
            });
        }
    };
    add("median", s.p50());
    add("p95", s.p95());
    add("p99", s.p99());
    add("mean", s.mean());
    for &t in &options.timeouts {
        add("given", t);
    }
    let mut rows = Vec::new();
    for c in &candidates {
        for r in 0..=options.max_retries {
            let a = s.assess(c.timeout_ms, r, options.alloc);
            rows.push(LabRow {
                timeout_ms: a.timeout,
                retries: a.retries,
                worst_case_ms: a.worst_case,
                fits: a.fits,
                kill_fraction: a.kill_fraction,
                failure_probability: a.failure_probability,
            });
        }
    }
    Ok(LabReport {
        sample: sample.to_owned(),
        calls: s.count(),
        alloc_ms: options.alloc,
        mean_ms: s.mean(),
        p50_ms: s.p50(),
        p95_ms: s.p95(),
        p99_ms: s.p99(),
        max_ms: s.max(),
        candidates,
        rows,
    })
}

/// Runs the lab over its preset sample.
///
/// # Errors
///
/// Never for the shipped preset; the signature matches [`run`].
pub fn preset(options: &LabOptions) -> Result<LabReport, InputError> {
    let latencies = crate::sample::parse(PRESET_NAME, PRESET)?;
    run(PRESET_NAME, &latencies, options)
}

/// The lab as a table of one screen.
#[must_use]
pub fn render(report: &LabReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "deadline lab: {} ({} calls), allocation {} ms\nmedian {} ms, p95 {} ms, p99 {} ms, \
         mean {} ms, slowest {} ms\n",
        report.sample,
        report.calls,
        fmt_ms(report.alloc_ms),
        fmt_ms(report.p50_ms),
        fmt_ms(report.p95_ms),
        fmt_ms(report.p99_ms),
        fmt_ms(report.mean_ms),
        fmt_ms(report.max_ms),
    );
    let _ = writeln!(
        out,
        "{}  {:>9}  {:>7}  {:>10}  {:>4}  {:>6}  {:>10}",
        pad("candidate", 16),
        "timeout",
        "retries",
        "worst case",
        "fits",
        "kills",
        "fails"
    );
    for c in &report.candidates {
        for row in report.rows.iter().filter(|r| r.timeout_ms == c.timeout_ms) {
            let label = if row.retries == 0 {
                c.label.as_str()
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "{}  {:>6} ms  {:>7}  {:>7} ms  {:>4}  {:>6}  {:>10}",
                pad(label, 16),
                fmt_ms(row.timeout_ms),
                row.retries,
                fmt_ms(row.worst_case_ms),
                if row.fits { "yes" } else { "no" },
                fmt_percent(row.kill_fraction),
                fmt_percent(row.failure_probability),
            );
        }
    }
    let _ = writeln!(
        out,
        "\nworst case = (retries + 1) x timeout, against the allocation; kills = calls slower \
         than the timeout\n(good calls abandoned); fails = kills^(retries + 1), if attempts are \
         independent (not against an\noverloaded dependency, where a retry times out too)."
    );
    for c in &report.candidates {
        // A zero timeout (a sample whose median is 0) fits any number of attempts; the count
        // stops at u32::MAX.
        let fit = match c.attempts_that_fit {
            _ if c.timeout_ms.is_zero() => "any number of attempts".to_owned(),
            u32::MAX => format!("{} or more attempts", u32::MAX),
            n => format!("{n} attempt(s)"),
        };
        let _ = writeln!(
            out,
            "{} = {} ms: {fit} fit in {} ms, abandons {} of {} calls",
            c.label,
            fmt_ms(c.timeout_ms),
            fmt_ms(report.alloc_ms),
            c.killed,
            report.calls
        );
    }
    out
}
