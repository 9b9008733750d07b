//! Live snapshots: what a running service's dependencies measured, read back from the JSON of
//! deadline-core's `Dependency::snapshot` (its `serde` feature), for `deadline plan --live`
//! and `deadline lab --live`.
//!
//! A file holds one snapshot or an array of them, as a service exports them:
//!
//! ```text
//! [{"dependency": "pricing", "cap_us": 110000, "configured_cap_us": 110000, ...,
//!   "latency": {"recorded": 5171, "timed_out": 19, "buckets": [[28673, 29696, 12], ...],
//!               "timeouts": [[108544, 110591, 19]]}}]
//! ```
//!
//! Every figure is the core's: the advice comes from
//! [`Advice::assess`](deadline_core::advice::Advice::assess) over the snapshot's buckets, with
//! the timed-out attempts censored as the core counts them; the budget table with the
//! changes comes from [`crate::plan::run`] over the table with the live figures put in.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use deadline_core::Policy;
use deadline_core::advice::{Advice, Reading};
use deadline_core::observe::Bucket;
use deadline_core::policy::Quantile;
use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::output::{fmt_ms, fmt_percent, pad, ser_ms, ser_opt_ms};
use crate::plan::{self, PlanReport};
use crate::sample::MAX_CALLS;
use crate::table::{CapSource, Table};

/// One dependency's snapshot, as a service exported it.
#[derive(Clone, Debug, Deserialize)]
pub struct Snapshot {
    /// The dependency's name.
    pub dependency: String,
    /// The cap in use when the snapshot was taken (an adaptive cap's), in microseconds.
    pub cap_us: Option<u64>,
    /// The cap the service's policy states, in microseconds.
    pub configured_cap_us: Option<u64>,
    /// The quantile the cap should stand at, in parts per million (999 000: the p99.9).
    pub cap_quantile_ppm: u32,
    /// The margin added to that quantile for the suggested cap, in microseconds.
    pub cap_margin_us: Option<u64>,
    /// The service's counters, by name (`calls`, `timeouts`, ...).
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    /// The latency histogram.
    pub latency: Latency,
}

/// A snapshot's latency histogram.
#[derive(Clone, Debug, Deserialize)]
pub struct Latency {
    /// Latencies in it.
    pub recorded: u64,
    /// Of them, attempts that timed out (recorded at their timeout).
    pub timed_out: u64,
    /// The non-empty buckets, ascending: `[low_us, high_us, count]` (`null` high: no bound).
    pub buckets: Vec<(Option<u64>, Option<u64>, u32)>,
    /// The buckets of the attempts that timed out, alike; absent when none did.
    #[serde(default)]
    pub timeouts: Vec<(Option<u64>, Option<u64>, u32)>,
}

/// One snapshot file or more, read and checked.
#[derive(Clone, Debug)]
pub struct Snapshots {
    /// The files, as named.
    pub files: Vec<String>,
    /// Every snapshot, by dependency name.
    pub by_name: BTreeMap<String, Snapshot>,
}

/// A file's content: one snapshot or an array of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    Many(Vec<Snapshot>),
    One(Box<Snapshot>),
}

impl Snapshot {
    /// The histogram's buckets in the core's terms.
    #[must_use]
    pub fn buckets(&self) -> Vec<Bucket> {
        core_buckets(&self.latency.buckets)
    }

    /// The buckets of the attempts that timed out, in the core's terms.
    #[must_use]
    pub fn timeouts(&self) -> Vec<Bucket> {
        core_buckets(&self.latency.timeouts)
    }

    /// The histogram as a sample for the lab: each bucket's latencies at its upper bound (the
    /// last bucket's, which has none, at its lower one), as the histogram reports them.
    #[must_use]
    pub fn latencies(&self) -> Vec<Duration> {
        let mut out = Vec::new();
        for b in self.buckets() {
            let at = if b.high == Duration::MAX {
                b.low
            } else {
                b.high
            };
            out.extend(std::iter::repeat_n(at, b.count as usize));
        }
        out
    }

    /// The cap in use when it was taken.
    #[must_use]
    pub fn cap(&self) -> Duration {
        self.cap_us.map_or(Duration::MAX, Duration::from_micros)
    }

    /// The advice for `policy` (its cap quantile, margin, retries and slice) at `cap`, from
    /// this histogram: the core's.
    #[must_use]
    pub fn advice(&self, policy: &Policy, cap: Duration) -> Option<Advice> {
        Advice::assess(
            self.buckets().into_iter(),
            self.timeouts().into_iter(),
            policy,
            cap,
        )
    }

    /// Checks what the core would never write: buckets out of order, more timeouts than
    /// latencies, a count that is not the buckets' sum, timeouts in no bucket or more than
    /// it holds.
    fn check(&self, file: &str) -> Result<(), InputError> {
        let err = |field: &str, message: String| {
            InputError::new(
                file,
                None,
                Some(&format!("{}.{field}", self.dependency)),
                message,
            )
        };
        let ascending = |field: &str, buckets: &[(Option<u64>, Option<u64>, u32)]| {
            let mut last = None;
            let mut sum = 0u64;
            for &(low, high, count) in buckets {
                let low = low.unwrap_or(0);
                if high.is_some_and(|h| h < low) || last.is_some_and(|l| low <= l) {
                    return Err(err(
                        field,
                        format!("the buckets are not in ascending order (at {low} us)"),
                    ));
                }
                last = Some(high.unwrap_or(u64::MAX));
                sum = sum.saturating_add(u64::from(count));
            }
            Ok(sum)
        };
        let sum = ascending("latency.buckets", &self.latency.buckets)?;
        let timeouts = ascending("latency.timeouts", &self.latency.timeouts)?;
        if timeouts != self.latency.timed_out {
            let message = if self.latency.timeouts.is_empty() {
                format!(
                    "{} attempts timed out, but no `timeouts` buckets say where: a snapshot \
                     from before the timeouts were kept per bucket; take a new one",
                    self.latency.timed_out
                )
            } else {
                format!(
                    "{} attempts timed out, but the `timeouts` buckets hold {timeouts}",
                    self.latency.timed_out
                )
            };
            return Err(err("latency.timeouts", message));
        }
        for &(low, high, count) in &self.latency.timeouts {
            let held = self
                .latency
                .buckets
                .iter()
                .find(|b| b.0 == low && b.1 == high)
                .map_or(0, |b| b.2);
            if count > held {
                return Err(err(
                    "latency.timeouts",
                    format!(
                        "{count} timeouts at {} us, where the buckets hold {held} latencies",
                        low.unwrap_or(0)
                    ),
                ));
            }
        }
        if self.latency.recorded > MAX_CALLS as u64 {
            // The lab draws each latency: more than a sample file may hold is refused, as a
            // sample file's are (a dependency's histogram holds far fewer).
            return Err(err(
                "latency.recorded",
                format!(
                    "{} latencies recorded: more than the {MAX_CALLS} the lab reads",
                    self.latency.recorded
                ),
            ));
        }
        if sum != self.latency.recorded {
            return Err(err(
                "latency.recorded",
                format!(
                    "{} latencies recorded, but the buckets hold {sum}",
                    self.latency.recorded
                ),
            ));
        }
        if self.latency.timed_out > self.latency.recorded {
            return Err(err(
                "latency.timed_out",
                format!(
                    "{} timed out of {} recorded",
                    self.latency.timed_out, self.latency.recorded
                ),
            ));
        }
        if self.cap_quantile_ppm > 1_000_000 {
            return Err(err(
                "cap_quantile_ppm",
                format!("{} is over a million", self.cap_quantile_ppm),
            ));
        }
        Ok(())
    }
}

/// Buckets `[low_us, high_us, count]` in the core's terms.
fn core_buckets(buckets: &[(Option<u64>, Option<u64>, u32)]) -> Vec<Bucket> {
    buckets
        .iter()
        .map(|&(low, high, count)| Bucket {
            low: Duration::from_micros(low.unwrap_or(0)),
            high: high.map_or(Duration::MAX, Duration::from_micros),
            count,
        })
        .collect()
}

/// Why `text`, the file `path`, is not one snapshot or an array of them (`e`, the untagged
/// enum's error, says little): read as an array, the first element that is not a snapshot
/// and what is wrong with it, by its place and its `dependency`; else read as one snapshot,
/// what is wrong and where.
fn snapshot_error(path: &str, text: &str, e: &serde_json::Error) -> InputError {
    if let Ok(elements) = serde_json::from_str::<Vec<serde_json::Value>>(text) {
        for (i, element) in elements.into_iter().enumerate() {
            let name = element
                .get("dependency")
                .and_then(serde_json::Value::as_str)
                .map(|name| format!(" (`{name}`)"))
                .unwrap_or_default();
            if let Err(e) = serde_json::from_value::<Snapshot>(element) {
                return InputError::new(
                    path,
                    None,
                    None,
                    format!("snapshot {i} of the array{name} is not a dependency snapshot: {e}"),
                );
            }
        }
    }
    match serde_json::from_str::<Snapshot>(text) {
        Err(one) => InputError::new(
            path,
            Some(one.line()),
            None,
            format!("not a dependency snapshot: {one}"),
        ),
        Ok(_) => InputError::new(path, None, None, format!("not a dependency snapshot: {e}")),
    }
}

/// Reads and checks snapshot files.
///
/// # Errors
///
/// A file that cannot be read, is not a snapshot's JSON, or holds an impossible histogram;
/// one dependency in two snapshots.
pub fn read(paths: &[String]) -> Result<Snapshots, InputError> {
    let mut by_name = BTreeMap::new();
    for path in paths {
        let text = crate::read::read_text(std::path::Path::new(path))
            .map_err(|e| InputError::new(path, None, None, format!("cannot read: {e}")))?;
        let snapshots = match serde_json::from_str::<OneOrMany>(&text) {
            Ok(OneOrMany::Many(v)) => v,
            Ok(OneOrMany::One(s)) => vec![*s],
            Err(e) => return Err(snapshot_error(path, &text, &e)),
        };
        for s in snapshots {
            s.check(path)?;
            if by_name.contains_key(&s.dependency) {
                return Err(InputError::new(
                    path,
                    None,
                    Some("dependency"),
                    format!("`{}` has two snapshots", s.dependency),
                ));
            }
            by_name.insert(s.dependency.clone(), s);
        }
    }
    Ok(Snapshots {
        files: paths.to_vec(),
        by_name,
    })
}

/// A quantile's estimate and bounds in milliseconds (see [`Reading`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Bounds {
    /// With each timed-out attempt at its timeout.
    #[serde(serialize_with = "ser_ms")]
    pub at_least_ms: Duration,
    /// The estimate, each timed-out attempt given the latencies of those that ran on:
    /// `null` when the quantile lies beyond every answer.
    #[serde(serialize_with = "ser_opt_ms")]
    pub estimate_ms: Option<Duration>,
    /// With each timed-out attempt slower than everything: `null` when the quantile lies
    /// among the timeouts.
    #[serde(serialize_with = "ser_opt_ms")]
    pub at_most_ms: Option<Duration>,
}

impl From<Reading> for Bounds {
    fn from(r: Reading) -> Self {
        Bounds {
            at_least_ms: r.at_least,
            estimate_ms: r.estimate,
            at_most_ms: r.at_most,
        }
    }
}

impl Bounds {
    /// `12.5`, or `>=110.59` when there is no estimate.
    fn show(&self) -> String {
        match self.estimate_ms {
            Some(d) => fmt_ms(d),
            None => format!(">={}", fmt_ms(self.at_least_ms)),
        }
    }
}

/// One dependency, its table values beside its live ones.
#[derive(Clone, Debug, Serialize)]
pub struct LiveRow {
    /// Its name.
    pub name: String,
    /// The table's p50.
    #[serde(serialize_with = "ser_ms")]
    pub table_p50_ms: Duration,
    /// The table's p99.9.
    #[serde(serialize_with = "ser_ms")]
    pub table_p999_ms: Duration,
    /// The table's cap.
    #[serde(serialize_with = "ser_ms")]
    pub table_cap_ms: Duration,
    /// The cap the service had in use (an adaptive cap's), when it differs from the table's
    /// and is a cap (see `service_uncapped`).
    #[serde(serialize_with = "ser_opt_ms")]
    pub service_cap_ms: Option<Duration>,
    /// The service's calls had no cap when the snapshot was taken (the library's default for
    /// a policy that states none).
    pub service_uncapped: bool,
    /// Latencies in the snapshot.
    pub recorded: u64,
    /// The share of them that timed out.
    pub timed_out_share: f64,
    /// The live p50.
    pub p50: Bounds,
    /// The live p99.
    pub p99: Bounds,
    /// The live p99.9.
    pub p999: Bounds,
    /// The quantile the cap should stand at, by name (`p99.9`).
    pub cap_quantile: String,
    /// That quantile, live.
    pub quantile: Bounds,
    /// The table's cap's kill fraction on the live latencies (timeouts read as censored).
    /// Where the table's cap is above the service's, the service's: the attempts it cut say
    /// nothing past it, and a longer cap kills at most as many (`kill_fraction_at_most`).
    pub kill_fraction: f64,
    /// Whether `kill_fraction` is only a bound from above: the table's cap is above the cap
    /// the service's calls ran with.
    pub kill_fraction_at_most: bool,
    /// Whether the quantile lies past every answer where the service's cap cut too few
    /// attempts to measure it: their callers' deadlines cut them, no cap measures it, and
    /// the cap stays (or goes past those deadlines, if the table's cut them first).
    pub quantile_past_callers: bool,
    /// The cap's stated false-timeout rate (the service's cap quantile).
    pub stated_rate: f64,
    /// Whether there were enough latencies to judge the cap.
    pub enough: bool,
    /// The cap the stated rate needs: the quantile plus the margin.
    pub suggested_cap: Bounds,
    /// The cap proposed: the suggested one rounded up to a whole millisecond; with the
    /// quantile past every answer, the suggested one's lower bound (never under the table's
    /// cap) when a cap cut the attempts, and the table's cap when their callers did.
    #[serde(serialize_with = "ser_ms")]
    pub proposed_cap_ms: Duration,
    /// The floor proposed: the live p50 rounded up, where the table's floor is its p50.
    #[serde(serialize_with = "ser_opt_ms")]
    pub proposed_floor_ms: Option<Duration>,
}

/// `deadline plan --live`: the live rows, the changes, and the budget table with them.
#[derive(Clone, Debug, Serialize)]
pub struct LiveReport {
    /// The snapshot files.
    pub files: Vec<String>,
    /// One row per dependency of the table that has a snapshot, in table order.
    pub dependencies: Vec<LiveRow>,
    /// The table's dependencies that have no snapshot (or an empty one).
    pub without_snapshot: Vec<String>,
    /// The snapshots of dependencies the table does not list (a name that differs, say),
    /// which were not read.
    pub unused_snapshots: Vec<String>,
    /// What would change, one line per change, with its reason.
    pub changes: Vec<String>,
    /// The budget table with the changes made.
    pub plan: PlanReport,
}

/// A quantile's name: `p99.9`, `p99`, `p95`, or its fraction.
fn quantile_name(ppm: u32) -> String {
    let percent = f64::from(ppm) / 10_000.0;
    format!("p{}", crate::output::fmt_num(percent, 4))
}

/// Rounds up to a whole millisecond.
fn ceil_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_micros().div_ceil(1_000)).unwrap_or(u64::MAX))
}

/// Runs `deadline plan --live`: each table dependency's live figures against its table
/// values, the changes they call for, and the budget table with the changes made.
///
/// # Errors
///
/// A table the core's plan cannot hold.
pub fn run(
    table: &Table,
    snapshots: &Snapshots,
    rate_per_sec: Option<f64>,
) -> Result<LiveReport, InputError> {
    let configured = plan::run(table, rate_per_sec)?;
    let mut after = table.clone();
    let mut rows = Vec::new();
    let mut without = Vec::new();
    let mut changes = Vec::new();
    let mut reasons = BTreeMap::new();
    for (dep, row) in after.dependencies.iter_mut().zip(&configured.dependencies) {
        let advice = snapshots.by_name.get(&dep.name).and_then(|snap| {
            let quantile = Quantile::from_ppm(snap.cap_quantile_ppm);
            let policy = dep
                .policy()
                .with_cap_quantile(quantile)
                .with_cap_margin(dep.cap_margin)
                .with_slice(row.slice_ms);
            snap.advice(&policy, policy.cap())
                .map(|a| (snap, policy, a))
        });
        let Some((snap, policy, advice)) = advice else {
            without.push(dep.name.clone());
            continue;
        };
        // A quantile past every answer: the cap raised (never lowered) to measure it when the
        // service's cap is what cut the attempts (as the core's adaptive cap judges it), or
        // past the callers' deadlines when the table's cap kills more than its rate before
        // them; kept when the callers' deadlines cut them under it (no cap measures it).
        let kills = |cap: Duration| kills(snap, &policy, cap);
        let (kill_fraction, kill_fraction_at_most) = kills(row.cap_ms);
        let cut_by_cap = snap
            .advice(&policy, snap.cap())
            .is_some_and(|a| a.killed > 0 && (a.kills_too_many || a.enough));
        let raise = cut_by_cap || (!kill_fraction_at_most && kill_fraction > advice.stated_rate);
        let proposed_cap = match advice.suggested_cap.estimate {
            Some(cap) => ceil_ms(cap),
            None if raise => ceil_ms(advice.suggested_cap.at_least).max(row.cap_ms),
            None => row.cap_ms,
        };
        let proposed_floor = dep.floor.is_none().then(|| ceil_ms(advice.p50.value()));
        let service_uncapped = snap.cap() == Duration::MAX;
        let service_cap = (!service_uncapped && snap.cap() != row.cap_ms).then(|| snap.cap());
        let live = LiveRow {
            name: dep.name.clone(),
            table_p50_ms: dep.p50,
            table_p999_ms: dep.p999,
            table_cap_ms: row.cap_ms,
            service_cap_ms: service_cap,
            service_uncapped,
            recorded: advice.recorded,
            timed_out_share: advice.timed_out_share,
            p50: advice.p50.into(),
            p99: advice.p99.into(),
            p999: advice.p999.into(),
            cap_quantile: quantile_name(snap.cap_quantile_ppm),
            quantile: advice.quantile.into(),
            kill_fraction,
            kill_fraction_at_most,
            quantile_past_callers: advice.quantile.estimate.is_none() && !cut_by_cap,
            stated_rate: advice.stated_rate,
            enough: advice.enough,
            suggested_cap: advice.suggested_cap.into(),
            proposed_cap_ms: proposed_cap,
            proposed_floor_ms: proposed_floor,
        };
        changes.extend(describe(&live, dep.cap_margin));
        // The proposed cap's own kill fraction on the live latencies, for its reason.
        let killed_after = kills(proposed_cap);
        reasons.insert(
            dep.name.clone(),
            reason(&live, dep.cap_margin, killed_after),
        );
        dep.p50 = advice.p50.value();
        dep.p999 = advice.p999.value();
        dep.cap = CapSource::Stated(proposed_cap);
        if proposed_floor.is_some() {
            dep.floor = proposed_floor;
        }
        dep.samples = None;
        dep.samples_file = None;
        // A change that leaves a setting of the table that could never act (a stated floor
        // above the new cap, a hedge at or past it) is said, not silently planned.
        if let Some((field, what)) = crate::table::never_acts(dep) {
            changes.push(format!(
                "{}: with these changes {what} (`{field}` as the table states it)",
                dep.name
            ));
        }
        rows.push(live);
    }
    if rows.is_empty() {
        // Nothing was checked: said so, not "every cap and floor stands".
        let names = |names: Vec<&str>| {
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        return Err(InputError::new(
            &snapshots.files.join(", "),
            None,
            Some("dependency"),
            format!(
                "no snapshot holds live latencies of a dependency of the table, so nothing \
                 was checked (a snapshot must name a dependency as the table does, and have \
                 latencies recorded): the table names {}; the snapshots name {}",
                names(table.dependencies.iter().map(|d| d.name.as_str()).collect()),
                names(snapshots.by_name.keys().map(String::as_str).collect()),
            ),
        ));
    }
    let mut plan = plan::run(&after, rate_per_sec)?;
    plan.file = format!("{} with the live changes", table.file);
    for row in &mut plan.dependencies {
        if let Some(reason) = reasons.remove(&row.name) {
            row.reason = reason;
        }
    }
    let unused_snapshots = snapshots
        .by_name
        .keys()
        .filter(|name| !table.dependencies.iter().any(|d| d.name == **name))
        .cloned()
        .collect();
    Ok(LiveReport {
        files: snapshots.files.clone(),
        dependencies: rows,
        without_snapshot: without,
        unused_snapshots,
        changes,
        plan,
    })
}

/// What a cap of `cap` kills of `snap`'s attempts (`policy` says the stated rate), and
/// whether that is only a bound from above: past the cap the service's calls ran with, the
/// attempts it cut are censored there, and a longer cap kills at most as many.
fn kills(snap: &Snapshot, policy: &Policy, cap: Duration) -> (f64, bool) {
    let service = snap.cap();
    let (at, at_most) = if cap > service {
        (service, true)
    } else {
        (cap, false)
    };
    let fraction = snap.advice(policy, at).map_or(0.0, |a| a.kill_fraction);
    (fraction, at_most)
}

/// A kill fraction, `<=` before it when it is a bound from above.
fn fmt_kills((fraction, at_most): (f64, bool)) -> String {
    let bound = if at_most { "<=" } else { "" };
    format!("{bound}{}", fmt_percent(fraction))
}

/// The changes one row calls for, each with its reason.
fn describe(r: &LiveRow, margin: Duration) -> Vec<String> {
    let mut out = Vec::new();
    let judged = if r.enough {
        ""
    } else {
        " (too few latencies to judge the cap: take this as a hint)"
    };
    if r.proposed_cap_ms != r.table_cap_ms {
        let q = &r.cap_quantile;
        let why = match r.quantile.estimate_ms {
            Some(value) => format!(
                "live {q} {} ms + {} ms margin; table p99.9 {} ms",
                fmt_ms(value),
                fmt_ms(margin),
                fmt_ms(r.table_p999_ms)
            ),
            None if r.quantile_past_callers => format!(
                "the live {q} lies past every answer, beyond the callers' deadlines, which cut \
                 {} of the attempts; the table's cap would cut them first: past this it cuts \
                 none",
                fmt_percent(r.timed_out_share)
            ),
            None => format!(
                "the live {q} lies beyond every answer, among the attempts that timed out ({} \
                 of all); raise the cap to at least this to measure it",
                fmt_percent(r.timed_out_share)
            ),
        };
        out.push(format!(
            "{}: cap {} -> {} ms ({why}); the table's cap kills {} (stated {}){judged}",
            r.name,
            fmt_ms(r.table_cap_ms),
            fmt_ms(r.proposed_cap_ms),
            fmt_kills((r.kill_fraction, r.kill_fraction_at_most)),
            fmt_percent(r.stated_rate),
        ));
    } else if r.quantile.estimate_ms.is_none() {
        let why = if r.quantile_past_callers {
            format!(
                "past every answer, beyond the callers' deadlines, which cut {} of the \
                 attempts before the cap: no cap measures it",
                fmt_percent(r.timed_out_share)
            )
        } else {
            format!(
                "among the attempts a cap cut, above {} ms: a cap above that measures it",
                fmt_ms(r.quantile.at_least_ms)
            )
        };
        out.push(format!(
            "{}: cap stays {} ms (the live {} lies {why})",
            r.name,
            fmt_ms(r.table_cap_ms),
            r.cap_quantile,
        ));
    }
    if let Some(floor) = r.proposed_floor_ms {
        let table_floor = ceil_ms(r.table_p50_ms);
        if floor != table_floor {
            out.push(format!(
                "{}: floor {} -> {} ms (the live p50 {} ms, rounded up)",
                r.name,
                fmt_ms(table_floor),
                fmt_ms(floor),
                r.p50.show()
            ));
        }
    }
    out
}

/// The reason of a dependency's numbers in the budget table with the changes.
fn reason(r: &LiveRow, margin: Duration, killed_after: (f64, bool)) -> String {
    let q = &r.cap_quantile;
    let mut s = match r.quantile.estimate_ms {
        Some(value) => format!(
            "{q} = {} ms live ({} latencies, {} timed out), cap {} ms = {q} + {} ms margin, \
             rounded up; the cap kills {} of them (stated {})",
            fmt_ms(value),
            r.recorded,
            fmt_percent(r.timed_out_share),
            fmt_ms(r.proposed_cap_ms),
            fmt_ms(margin),
            fmt_kills(killed_after),
            fmt_percent(r.stated_rate),
        ),
        None if r.quantile_past_callers && r.proposed_cap_ms == r.table_cap_ms => format!(
            "{q} past every answer live ({} latencies, {} timed out, before the cap: cut by \
             the callers' deadlines), cap {} ms kept: no cap measures it",
            r.recorded,
            fmt_percent(r.timed_out_share),
            fmt_ms(r.proposed_cap_ms),
        ),
        None if r.quantile_past_callers => format!(
            "{q} past every answer live ({} latencies, {} timed out: cut by the callers' \
             deadlines, up to {} ms), cap {} ms = that + {} ms margin, rounded up, past them; \
             it kills {} of them (stated {})",
            r.recorded,
            fmt_percent(r.timed_out_share),
            fmt_ms(r.quantile.at_least_ms),
            fmt_ms(r.proposed_cap_ms),
            fmt_ms(margin),
            fmt_kills(killed_after),
            fmt_percent(r.stated_rate),
        ),
        None if r.proposed_cap_ms == r.table_cap_ms => format!(
            "{q} above {} ms live ({} latencies, {} timed out: the {q} lies among them), cap {} \
             ms kept, above that: what it kills is at most {} of them (stated {})",
            fmt_ms(r.quantile.at_least_ms),
            r.recorded,
            fmt_percent(r.timed_out_share),
            fmt_ms(r.proposed_cap_ms),
            fmt_kills(killed_after),
            fmt_percent(r.stated_rate),
        ),
        None => format!(
            "{q} above {} ms live ({} latencies, {} timed out: the {q} lies among them), cap {} \
             ms = that + {} ms margin, rounded up, to measure it; what it kills is measured \
             once the service runs with it (stated {})",
            fmt_ms(r.quantile.at_least_ms),
            r.recorded,
            fmt_percent(r.timed_out_share),
            fmt_ms(r.proposed_cap_ms),
            fmt_ms(margin),
            fmt_percent(r.stated_rate),
        ),
    };
    if let Some(floor) = r.proposed_floor_ms {
        let _ = write!(s, "; floor {} ms = live p50, rounded up", fmt_ms(floor));
    }
    s
}

/// The live rows beside the table's, the changes, then the budget table with them.
#[must_use]
pub fn render(report: &LiveReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "deadline plan --live: {} ({} of {} dependencies)\n",
        report.files.join(", "),
        report.dependencies.len(),
        report.dependencies.len() + report.without_snapshot.len()
    );
    let width = report
        .dependencies
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(8, 32);
    let _ = writeln!(
        out,
        "{}  {:>6} {:>9}  {:>14}  {:>16}  {:>6} {:>7} {:>7}  {:>9}",
        pad("call", width),
        "seen",
        "timed out",
        "p50 table/live",
        "p99.9 table/live",
        "cap",
        "kills",
        "stated",
        "suggested"
    );
    for r in &report.dependencies {
        let _ = writeln!(
            out,
            "{}  {:>6} {:>9}  {:>14}  {:>16}  {:>6} {:>7} {:>7}  {:>9}",
            pad(&r.name, width),
            r.recorded,
            fmt_percent(r.timed_out_share),
            format!("{} / {}", fmt_ms(r.table_p50_ms), r.p50.show()),
            format!("{} / {}", fmt_ms(r.table_p999_ms), r.p999.show()),
            fmt_ms(r.table_cap_ms),
            fmt_kills((r.kill_fraction, r.kill_fraction_at_most)),
            fmt_percent(r.stated_rate),
            r.suggested_cap.show(),
        );
    }
    let _ = writeln!(
        out,
        "\nseen: latencies in the service's histogram (it halves them every 4 096); timed out: \
         recorded at\ntheir timeout, each given the latencies of the attempts that ran on, so a \
         quantile beyond every\nanswer is only known to lie above (>=); kills: the estimated \
         share of attempts that run past the\ntable's cap (<=: at most, for a cap above the \
         service's); suggested: the quantile the stated rate names,\nplus the margin."
    );
    for r in &report.dependencies {
        if r.service_uncapped {
            let _ = writeln!(
                out,
                "{}: the service's calls had no cap when the snapshot was taken",
                r.name
            );
        }
        if let Some(cap) = r.service_cap_ms {
            let _ = writeln!(
                out,
                "{}: the service's cap was {} ms when the snapshot was taken",
                r.name,
                fmt_ms(cap)
            );
        }
    }
    if !report.without_snapshot.is_empty() {
        let _ = writeln!(
            out,
            "no live latencies, no snapshot or an empty one (kept as the table says): {}",
            report.without_snapshot.join(", ")
        );
    }
    if !report.unused_snapshots.is_empty() {
        let _ = writeln!(
            out,
            "snapshots of no dependency in the table (not read; the names must match): {}",
            report.unused_snapshots.join(", ")
        );
    }
    let _ = writeln!(out, "\nchanges it would make:");
    if report.changes.is_empty() {
        let _ = writeln!(out, "  none: every cap and floor stands");
    }
    for c in &report.changes {
        let _ = writeln!(out, "  {c}");
    }
    let _ = writeln!(out, "\nthe budget table with these changes:\n");
    out.push_str(&plan::render(&report.plan));
    out
}
