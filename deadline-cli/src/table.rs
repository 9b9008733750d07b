//! The dependency table `deadline plan` reads: TOML, checked field by field.
//!
//! ```toml
//! budget_ms = 200          # how long the client waits
//! own_work_ms = 20         # our own work after the calls
//! cap_margin_ms = 10       # cap = p99.9 + margin, for a dependency with no `cap_ms`
//! rate_per_sec = 100       # requests per second, for Little's law (or `--rate`)
//!
//! [[dependency]]
//! name = "B"
//! about = "pricing"
//! p50_ms = 30              # or `samples = "b.txt"`: a file of measured latencies
//! p95_ms = 60
//! p999_ms = 90
//! cap_ms = 110             # optional: else p999_ms + cap_margin_ms
//! floor_ms = 30            # optional: else p50_ms
//! required = true          # false: it has a fallback, and is skipped when time is short
//! mode = "sequential"      # or "parallel": runs alongside the dependency before it
//! idempotent = true        # repeating the call is safe (default false); needed for retries
//!                          # and hedges, which repeat it
//! retries = 1              # retries after the first attempt
//! backoff_ms = 5           # first backoff; doubles up to backoff_max_ms, full jitter
//! backoff_max_ms = 40
//! hedge = true             # send a second copy after hedge_delay_ms (default: the p95)
//! hedge_delay_ms = 60      # optional: alone, it turns hedging on too
//!
//! [[trace]]                # a replay: each dependency's latency (a list: one per attempt)
//! name = "B is slow"
//! latency_ms = { A = 10, B = 105, C = 25 }
//! ```
//!
//! Every mistake becomes an [`InputError`] with the file, the line and the field.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

use deadline_core::Policy;
use deadline_core::analysis::Sample;
use deadline_core::plan::Plan;
use deadline_core::policy::{
    Backoff, HedgePolicy, Idempotence, Jitter, Necessity, PolicyError, Quantile,
};
use serde::Deserialize;
use toml::Spanned;

use crate::error::InputError;
use crate::sample;

/// The most dependencies a table may list (the capacity of the core's [`deadline_core::plan::Plan`]).
pub const MAX_DEPENDENCIES: usize = 32;

/// The most retries a dependency may ask for, as `lab --retries` allows.
pub const MAX_RETRIES: u32 = 100;

/// The core's plan for a table: at most [`MAX_DEPENDENCIES`] steps.
pub type TablePlan<'p> = Plan<'p, MAX_DEPENDENCIES>;

/// The margin added to p99.9 when neither the dependency nor the table states one.
pub const DEFAULT_CAP_MARGIN: Duration = Duration::from_millis(10);

/// The first backoff before a retry when the table states none.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(5);

/// The file name used in messages for the built-in table.
pub const CHECKOUT_NAME: &str = "<built-in checkout example table>";

/// The checkout example's table, built in: the default of `deadline plan`.
pub const CHECKOUT: &str = include_str!("../data/checkout.toml");

/// A checked dependency table.
#[derive(Clone, Debug)]
pub struct Table {
    /// The file it came from.
    pub file: String,
    /// How long the client waits for the whole request.
    pub budget: Duration,
    /// Our own work after the calls (merging, serializing, the trip back).
    pub own_work: Duration,
    /// Requests per second, for Little's law, if the table states it.
    pub rate_per_sec: Option<f64>,
    /// The margin added to a p99.9 for a cap, where a dependency states neither a cap nor a
    /// margin of its own (`cap_margin_ms`, or [`DEFAULT_CAP_MARGIN`]).
    pub cap_margin: Duration,
    /// The dependencies, in call order.
    pub dependencies: Vec<Dependency>,
    /// Replays to run through the plan.
    pub traces: Vec<Trace>,
}

/// Where a dependency's cap comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapSource {
    /// `cap_ms` is written in the table.
    Stated(Duration),
    /// p99.9 plus this margin.
    Margin(Duration),
}

/// Whether hedged copies are sent, and after how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HedgeSetting {
    /// No hedging.
    Off,
    /// After the dependency's p95.
    AfterP95,
    /// After the stated delay.
    After(Duration),
}

/// One dependency, as the table describes it.
#[derive(Clone, Debug)]
pub struct Dependency {
    /// Its name (used in traces).
    pub name: String,
    /// What it is, for the table.
    pub about: Option<String>,
    /// The line of its `[[dependency]]` header.
    pub line: usize,
    /// Median latency.
    pub p50: Duration,
    /// 95th percentile, if known.
    pub p95: Option<Duration>,
    /// 99.9th percentile.
    pub p999: Duration,
    /// The measured latencies, when the table names a sample file.
    pub samples: Option<Vec<Duration>>,
    /// The sample file, as written in the table.
    pub samples_file: Option<String>,
    /// The cap, stated or from a margin.
    pub cap: CapSource,
    /// The margin over the p99.9 of a cap proposed from live figures (`deadline plan
    /// --live`): the dependency's own `cap_margin_ms`, or the table's, whether or not it
    /// states its cap.
    pub cap_margin: Duration,
    /// The floor, if stated (else the p50).
    pub floor: Option<Duration>,
    /// The connect limit, if stated.
    pub connect: Option<Duration>,
    /// Required, or optional with a fallback.
    pub required: bool,
    /// Runs alongside the dependency before it.
    pub parallel: bool,
    /// Repeating the call is safe: it may be retried after a timeout and hedged. The
    /// library's default, `false`, is the table's too, and a table that asks for retries or
    /// hedges must say `idempotent = true`.
    pub idempotent: bool,
    /// Retries after the first attempt.
    pub retries: u32,
    /// First backoff before a retry.
    pub backoff: Duration,
    /// Largest backoff.
    pub backoff_max: Duration,
    /// Hedging.
    pub hedge: HedgeSetting,
}

/// One replay: each dependency's latency per attempt.
#[derive(Clone, Debug)]
pub struct Trace {
    /// A name for the replay.
    pub name: String,
    /// Per dependency name, the latency of each attempt (the last one repeats).
    pub latencies: BTreeMap<String, Vec<Duration>>,
}

impl Dependency {
    /// The floor: stated, or the p50.
    #[must_use]
    pub fn floor(&self) -> Duration {
        self.floor.unwrap_or(self.p50)
    }

    /// The hedge delay, if this dependency hedges and the delay is known.
    #[must_use]
    pub fn hedge_delay(&self) -> Option<Duration> {
        match self.hedge {
            HedgeSetting::Off => None,
            HedgeSetting::AfterP95 => self.p95,
            HedgeSetting::After(d) => Some(d),
        }
    }

    /// The core policy for this dependency; its name is borrowed from this row.
    #[must_use]
    pub fn policy(&self) -> Policy<'_> {
        let name = self.name.as_str();
        let mut policy = match self.cap {
            CapSource::Margin(margin) => Policy::required(name)
                .with_floor(self.p50)
                .with_cap(self.p999.saturating_add(margin)),
            CapSource::Stated(cap) => Policy::required(name).with_cap(cap).with_floor(self.p50),
        };
        if let Some(floor) = self.floor {
            policy = policy.with_floor(floor);
        }
        if !self.required {
            policy = policy.with_necessity(Necessity::Optional);
        }
        if let Some(connect) = self.connect {
            policy = policy.with_connect(connect);
        }
        // Checked when the table was read: retries and hedges come with `idempotent = true`.
        policy = policy.with_idempotence(if self.idempotent {
            Idempotence::Idempotent
        } else {
            Idempotence::NotIdempotent
        });
        if self.retries > 0 {
            policy = policy.with_retries(self.retries).with_backoff(
                Backoff::exponential(self.backoff)
                    .with_max(self.backoff_max)
                    .with_jitter(Jitter::Full),
            );
        }
        if let Some(delay) = self.hedge_delay() {
            policy = policy.with_hedge(HedgePolicy::new(delay, 1));
        }
        policy
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    budget_ms: Spanned<f64>,
    own_work_ms: Option<Spanned<f64>>,
    cap_margin_ms: Option<Spanned<f64>>,
    rate_per_sec: Option<Spanned<f64>>,
    #[serde(default)]
    dependency: Vec<Spanned<RawDependency>>,
    #[serde(default)]
    trace: Vec<Spanned<RawTrace>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Sequential,
    Parallel,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDependency {
    name: Spanned<String>,
    about: Option<String>,
    p50_ms: Option<Spanned<f64>>,
    p95_ms: Option<Spanned<f64>>,
    p999_ms: Option<Spanned<f64>>,
    samples: Option<Spanned<String>>,
    cap_ms: Option<Spanned<f64>>,
    cap_margin_ms: Option<Spanned<f64>>,
    floor_ms: Option<Spanned<f64>>,
    connect_ms: Option<Spanned<f64>>,
    required: Option<bool>,
    mode: Option<Mode>,
    idempotent: Option<bool>,
    retries: Option<Spanned<u32>>,
    backoff_ms: Option<Spanned<f64>>,
    backoff_max_ms: Option<Spanned<f64>>,
    hedge: Option<bool>,
    hedge_delay_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrace {
    name: Option<String>,
    latency_ms: BTreeMap<Spanned<String>, Spanned<RawLatencies>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawLatencies {
    One(f64),
    Many(Vec<f64>),
}

/// The context for checking one file's values.
struct Checker<'a> {
    file: &'a str,
    source: &'a str,
}

impl Checker<'_> {
    fn err(
        &self,
        span: &std::ops::Range<usize>,
        field: &str,
        msg: impl Into<String>,
    ) -> InputError {
        InputError::at_span(self.file, self.source, span, Some(field), msg)
    }

    fn ms(&self, value: &Spanned<f64>, field: &str) -> Result<Duration, InputError> {
        sample::ms_to_duration(*value.get_ref()).map_err(|m| self.err(&value.span(), field, m))
    }

    fn opt_ms(
        &self,
        value: Option<&Spanned<f64>>,
        field: &str,
    ) -> Result<Option<Duration>, InputError> {
        value.map(|v| self.ms(v, field)).transpose()
    }
}

/// Parses and checks a table from its text. `file` names it in messages; sample files named
/// in the table are read relative to `base_dir`.
///
/// # Errors
///
/// Malformed TOML, a missing or unknown field, a value of the wrong type, a negative or
/// absurd latency, a missing percentile, a duplicate or unknown dependency name, an unreadable
/// sample file: each an [`InputError`] naming file, line and field.
pub fn parse(file: &str, source: &str, base_dir: Option<&Path>) -> Result<Table, InputError> {
    let raw: RawTable =
        toml::from_str(source).map_err(|e| InputError::from_toml(file, source, &e))?;
    let ck = Checker { file, source };
    let budget = ck.ms(&raw.budget_ms, "budget_ms")?;
    if budget.is_zero() {
        return Err(ck.err(
            &raw.budget_ms.span(),
            "budget_ms",
            "the budget must be positive",
        ));
    }
    let own_work = ck
        .opt_ms(raw.own_work_ms.as_ref(), "own_work_ms")?
        .unwrap_or_default();
    let table_margin = ck
        .opt_ms(raw.cap_margin_ms.as_ref(), "cap_margin_ms")?
        .unwrap_or(DEFAULT_CAP_MARGIN);
    let rate_per_sec = match &raw.rate_per_sec {
        Some(r) if !(r.get_ref().is_finite() && *r.get_ref() >= 0.0) => {
            return Err(ck.err(&r.span(), "rate_per_sec", "the rate must be a number >= 0"));
        }
        Some(r) => Some(*r.get_ref()),
        None => None,
    };
    if raw.dependency.is_empty() {
        return Err(InputError::new(
            file,
            None,
            Some("dependency"),
            "the table lists no [[dependency]]",
        ));
    }
    if raw.dependency.len() > MAX_DEPENDENCIES {
        let span = raw
            .dependency
            .get(MAX_DEPENDENCIES)
            .map(Spanned::span)
            .unwrap_or_default();
        return Err(ck.err(
            &span,
            "dependency",
            format!("at most {MAX_DEPENDENCIES} dependencies per table"),
        ));
    }
    let mut names = HashSet::new();
    let mut dependencies = Vec::with_capacity(raw.dependency.len());
    // The calls of the samples read so far: all are held at once, so the limit is theirs.
    let mut sampled = 0;
    for (index, dep) in raw.dependency.iter().enumerate() {
        let d = dependency(&ck, index, dep, table_margin, base_dir, &mut sampled)?;
        if !names.insert(d.name.clone()) {
            return Err(ck.err(
                &dep.get_ref().name.span(),
                "name",
                format!("dependency `{}` is listed twice", d.name),
            ));
        }
        dependencies.push(d);
    }
    let mut traces = Vec::with_capacity(raw.trace.len());
    for (index, t) in raw.trace.iter().enumerate() {
        traces.push(trace(&ck, index, t, &names)?);
    }
    Ok(Table {
        file: file.to_owned(),
        budget,
        own_work,
        rate_per_sec,
        cap_margin: table_margin,
        dependencies,
        traces,
    })
}

/// Reads and checks a table file.
///
/// # Errors
///
/// The file cannot be read, or [`parse`] rejects it.
pub fn read(path: &str) -> Result<Table, InputError> {
    let source = crate::read::read_text(Path::new(path))
        .map_err(|e| InputError::new(path, None, None, format!("cannot read: {e}")))?;
    parse(path, &source, Path::new(path).parent())
}

/// The checkout example's built-in table.
///
/// # Errors
///
/// Never for the shipped file; the signature matches [`parse`].
pub fn checkout() -> Result<Table, InputError> {
    parse(CHECKOUT_NAME, CHECKOUT, None)
}

fn dependency(
    ck: &Checker<'_>,
    index: usize,
    spanned: &Spanned<RawDependency>,
    table_margin: Duration,
    base_dir: Option<&Path>,
    sampled: &mut usize,
) -> Result<Dependency, InputError> {
    let raw = spanned.get_ref();
    let header = spanned.span();
    let name = raw.name.get_ref().trim().to_owned();
    if name.is_empty() {
        return Err(ck.err(&raw.name.span(), "name", "a dependency needs a name"));
    }
    let (samples, samples_file) = match &raw.samples {
        Some(path) => {
            let written = path.get_ref().clone();
            let full =
                base_dir.map_or_else(|| Path::new(&written).to_path_buf(), |d| d.join(&written));
            let text = crate::read::read_text(&full).map_err(|e| {
                ck.err(
                    &path.span(),
                    "samples",
                    format!("cannot read `{}`: {e}", full.display()),
                )
            })?;
            let values = sample::parse_after(&full.display().to_string(), &text, *sampled)?;
            *sampled = sampled.saturating_add(values.len());
            (Some(values), Some(written))
        }
        None => (None, None),
    };
    let measured = |per_mille: u32| samples.as_deref().and_then(|s| percentile(s, per_mille));
    let percentile_field = |value: Option<&Spanned<f64>>, field: &str, per_mille: u32| match ck
        .opt_ms(value, field)?
    {
        Some(d) => Ok(Some(d)),
        None => Ok(measured(per_mille)),
    };
    let missing = |field: &str| {
        ck.err(
            &header,
            field,
            format!(
                "dependency `{name}` (dependency[{index}]) needs `{field}` or a `samples` file"
            ),
        )
    };
    let p50 =
        percentile_field(raw.p50_ms.as_ref(), "p50_ms", 500)?.ok_or_else(|| missing("p50_ms"))?;
    let p95 = percentile_field(raw.p95_ms.as_ref(), "p95_ms", 950)?;
    let p999 = percentile_field(raw.p999_ms.as_ref(), "p999_ms", 999)?
        .ok_or_else(|| missing("p999_ms"))?;
    if p999 < p50 {
        let span = raw.p999_ms.as_ref().map_or(header.clone(), Spanned::span);
        return Err(ck.err(
            &span,
            "p999_ms",
            format!("p99.9 ({p999:?}) is below p50 ({p50:?})"),
        ));
    }
    // A p95 the table states (one read from `samples` lies between the sample's own p50 and
    // p99.9, which the table may state otherwise).
    if let (Some(stated), Some(p95)) = (raw.p95_ms.as_ref(), p95) {
        if p95 < p50 || p95 > p999 {
            return Err(ck.err(
                &stated.span(),
                "p95_ms",
                format!("p95 ({p95:?}) is not between p50 ({p50:?}) and p99.9 ({p999:?})"),
            ));
        }
    }
    let cap_margin = ck
        .opt_ms(raw.cap_margin_ms.as_ref(), "cap_margin_ms")?
        .unwrap_or(table_margin);
    let cap = match &raw.cap_ms {
        Some(cap) => {
            let d = ck.ms(cap, "cap_ms")?;
            if d.is_zero() {
                return Err(ck.err(&cap.span(), "cap_ms", "a cap must be positive"));
            }
            CapSource::Stated(d)
        }
        None => CapSource::Margin(cap_margin),
    };
    let backoff = ck
        .opt_ms(raw.backoff_ms.as_ref(), "backoff_ms")?
        .unwrap_or(DEFAULT_BACKOFF);
    let backoff_max = ck
        .opt_ms(raw.backoff_max_ms.as_ref(), "backoff_max_ms")?
        .unwrap_or(backoff.saturating_mul(8));
    let hedge_delay = ck.opt_ms(raw.hedge_delay_ms.as_ref(), "hedge_delay_ms")?;
    let hedge = match (raw.hedge, hedge_delay) {
        (Some(false), _) | (None, None) => HedgeSetting::Off,
        (_, Some(d)) => HedgeSetting::After(d),
        (Some(true), None) if p95.is_some() => HedgeSetting::AfterP95,
        (Some(true), None) => return Err(missing("p95_ms")),
    };
    let retries = raw.retries.as_ref().map_or(0, |r| *r.get_ref());
    if let Some(r) = raw.retries.as_ref().filter(|r| *r.get_ref() > MAX_RETRIES) {
        return Err(ck.err(
            &r.span(),
            "retries",
            format!("at most {MAX_RETRIES} retries, not {}", r.get_ref()),
        ));
    }
    let idempotent = raw.idempotent.unwrap_or(false);
    if !idempotent && (retries > 0 || hedge != HedgeSetting::Off) {
        let what = if retries > 0 { "retries" } else { "hedge" };
        return Err(ck.err(
            &header,
            "idempotent",
            format!(
                "dependency `{name}` (dependency[{index}]) has `{what}`, which repeat the call: \
                 set `idempotent = true` if repeating it is safe (policies are not idempotent \
                 unless they say so)"
            ),
        ));
    }
    let dependency = Dependency {
        name,
        about: raw.about.clone(),
        line: crate::error::line_of(ck.source, header.start),
        p50,
        p95,
        p999,
        samples,
        samples_file,
        cap,
        cap_margin,
        floor: ck.opt_ms(raw.floor_ms.as_ref(), "floor_ms")?,
        connect: ck.opt_ms(raw.connect_ms.as_ref(), "connect_ms")?,
        required: raw.required.unwrap_or(true),
        parallel: raw.mode == Some(Mode::Parallel),
        idempotent,
        retries,
        backoff,
        backoff_max,
        hedge,
    };
    check_settings_act(ck, &header, index, &dependency)?;
    Ok(dependency)
}

/// Refuses a dependency with a setting that could never act ([`never_acts`]).
fn check_settings_act(
    ck: &Checker<'_>,
    header: &std::ops::Range<usize>,
    index: usize,
    dependency: &Dependency,
) -> Result<(), InputError> {
    match never_acts(dependency) {
        Some((field, what)) => Err(ck.err(
            header,
            field,
            format!(
                "dependency `{}` (dependency[{index}]): {what}",
                dependency.name
            ),
        )),
        None => Ok(()),
    }
}

/// A setting of `dependency` that could never act, as the library refuses such a policy when
/// a `Dependency` is made ([`Policy::check`] decides): a cap under a microsecond or a floor
/// above the cap (the call would never be made), a connect limit under a microsecond (every
/// connection would be refused), or a hedge due at or after the cap (every attempt has timed
/// out by then). The field to change, and what is wrong.
#[must_use]
pub fn never_acts(dependency: &Dependency) -> Option<(&'static str, String)> {
    let policy = dependency.policy();
    let error = policy.check().err()?;
    let (cap, floor) = (policy.cap(), policy.floor());
    // The cap's own field, and how to raise it, as the table gives it.
    let (cap_field, raise_cap) = match dependency.cap {
        CapSource::Margin(_) => (
            "cap_margin_ms",
            "raise `cap_margin_ms` or state a larger `cap_ms`",
        ),
        CapSource::Stated(_) => ("cap_ms", "raise `cap_ms`"),
    };
    Some(match error {
        PolicyError::ConnectUnderAMicrosecond => (
            "connect_ms",
            "its connect limit is under a microsecond, so every connection would be refused: \
             raise `connect_ms`, or leave it out for the call's timeout"
                .to_owned(),
        ),
        PolicyError::CapUnderAMicrosecond => (
            cap_field,
            match dependency.cap {
                CapSource::Margin(_) => format!(
                    "its cap ({cap:?}, its p99.9 and margin) is under a microsecond, so it \
                     would never be called: {raise_cap}"
                ),
                CapSource::Stated(_) => format!(
                    "its cap ({cap:?}) is under a microsecond, so it would never be called: \
                     {raise_cap}"
                ),
            },
        ),
        PolicyError::FloorAboveCap => (
            if dependency.floor.is_some() {
                "floor_ms"
            } else {
                cap_field
            },
            format!(
                "its cap ({cap:?}) is under its floor ({floor:?}, its p50 unless `floor_ms` \
                 says), so it would never be called: {raise_cap}, or lower `floor_ms`"
            ),
        ),
        PolicyError::HedgeNotUnderCap => {
            // The delay the library checked (the check found one).
            let delay = policy.hedge().map_or(Duration::MAX, |hedge| hedge.delay());
            let (field, sooner) = if dependency.hedge == HedgeSetting::AfterP95 {
                ("p95_ms", "state a `hedge_delay_ms` under the cap")
            } else {
                ("hedge_delay_ms", "lower `hedge_delay_ms`")
            };
            (
                field,
                format!(
                    "its hedge is due after {delay:?}, not under its cap ({cap:?}), so it would \
                     never be sent: {sooner}, or {raise_cap}"
                ),
            )
        }
        // A table states no adaptive cap, so the library's other reasons cannot come; one
        // that did is said in the library's words, on the `[[dependency]]` as a whole.
        other => ("dependency", other.to_string()),
    })
}

fn trace(
    ck: &Checker<'_>,
    index: usize,
    spanned: &Spanned<RawTrace>,
    names: &HashSet<String>,
) -> Result<Trace, InputError> {
    let raw = spanned.get_ref();
    let mut latencies = BTreeMap::new();
    for (key, value) in &raw.latency_ms {
        let field = format!("latency_ms.{}", key.get_ref());
        if !names.contains(key.get_ref()) {
            return Err(ck.err(
                &key.span(),
                &field,
                format!("no dependency is named `{}`", key.get_ref()),
            ));
        }
        let values = match value.get_ref() {
            RawLatencies::One(v) => vec![*v],
            RawLatencies::Many(v) => v.clone(),
        };
        if values.is_empty() {
            return Err(ck.err(&value.span(), &field, "give at least one latency"));
        }
        let durations = values
            .into_iter()
            .map(|v| sample::ms_to_duration(v).map_err(|m| ck.err(&value.span(), &field, m)))
            .collect::<Result<Vec<_>, _>>()?;
        latencies.insert(key.get_ref().clone(), durations);
    }
    Ok(Trace {
        name: raw
            .name
            .clone()
            .unwrap_or_else(|| format!("trace {}", index + 1)),
        latencies,
    })
}

/// The `per_mille`-th percentile of a sample by nearest rank, from the core's analysis.
fn percentile(samples: &[Duration], per_mille: u32) -> Option<Duration> {
    let mut sorted = samples.to_vec();
    Sample::new(&mut sorted)
        .ok()
        .map(|s| s.percentile(Quantile::per_mille(per_mille)))
}
