//! `tail`: what hedging buys against a heavy tail, and what drawing hedges from the retry
//! budget costs and buys. A loopback dependency (in a process of its own) answers in 2 ms,
//! and 2% of its answers take 100 times as long (200 ms; `--slow-ms` and `--slow-percent`
//! set another tail); this program calls it from its own
//! runtime, `--connections` (16) calls in flight at a time, each way in turn, in rounds whose
//! order rotates (each way's turn starts with a warm-up that is not counted: tower's latency
//! histogram is emptied after two idle periods, a second each here), and prints each way's
//! latency (p50, p99, p99.9, pooled over the rounds) and the extra requests the dependency
//! received per call:
//!
//! - **no hedge**: plain reqwest;
//! - **the library's hedge**: `Dependency::run`, hedging at the dependency's live p95, its
//!   hedges (and retries) drawn from the default retry budget (10%);
//! - **the library's hedge, no budget**: the same dependency with `.no_budget()`;
//! - **tower's `Hedge`**, at the percentile that makes as many extra requests as the
//!   library's (found in this run: see "calibration"), and at p95 (the library's setting);
//!   its hedges draw from no budget.
//!
//! The target's "no worse than tower's" is judged round by round, as the other loopback
//! programs judge theirs: the library's p99.9 over each tower row's in the same round, the
//! median of those ratios and the interval that holds it 95% of the time (the sign test's).
//! The library is worse than a row only when that whole interval lies above 1; with too few
//! rounds for an interval (6 at least) it is not known, and the target is not met.
//!
//! Then two scenarios the budget is for, the library's two ways beside tower's `Hedge` at p95:
//!
//! - **an incident**: the dependency turns slow for every answer (20 ms) from a warm steady
//!   state: the extra requests each way sends while its latency estimate catches up;
//! - **failures**: 10% of answers fail (503) and are retried: retries and hedges compete for
//!   the library's budget, and tower's `Retry` (with its `TpsBudget`) does not limit its
//!   hedges.
//!
//! ```text
//! cargo run -p deadline-bench --release --bin tail -- [--slow-ms 200] [--slow-percent 2] [--rounds 7] [--seconds 3] [--connections 16] [--quick]
//! ```

use std::sync::Arc;
use std::time::Duration;

use deadline_bench::child::Child;
use deadline_bench::dependency::Model;
use deadline_bench::downstream::{TowerStack, call_tower, client, get, tower_stack_for};
use deadline_bench::options::{Options, Slow};
use deadline_bench::stats::{self, Side, load_average, ms, percentile};
use deadline_core::policy::Quantile;
use deadline_core::{Policy, ms as millis};
use deadline_tokio::reqwest::DeadlineRequest;
use deadline_tokio::{Dependency, scope_timeout};
use tokio::time::Instant;
use tower::BoxError;

/// Each attempt's limit, well above the tail: no way cuts it.
const CAP: Duration = millis(1_000);
/// Each call's deadline.
const BUDGET: Duration = millis(2_000);

/// The fast answers' latency (microseconds).
const FAST: u64 = 2_000;

/// The Tail at Scale's shape: 2% of answers 100 times slower (200 ms).
const TAIL_AT_SCALE: Slow = Slow {
    us: 200_000,
    per_10k: 200,
};

/// The dependency's model: 2 ms, and the `slow` answers.
fn steady_model(slow: Slow) -> Model {
    Model {
        fast: (FAST, FAST),
        slow_per_10k: slow.per_10k,
        slow: slow.us,
        fail_per_10k: 0,
    }
}

/// The tail, and 10% of answers failing (503) after the usual latency.
fn failing_model(slow: Slow) -> Model {
    Model {
        fail_per_10k: 1_000,
        ..steady_model(slow)
    }
}

/// An incident: every answer takes 20 ms.
const INCIDENT: Model = Model {
    fast: (20_000, 20_000),
    slow_per_10k: 0,
    slow: 0,
    fail_per_10k: 0,
};

/// The dependency, hedged at its live p95 (10 ms until 20 latencies are known), two retries,
/// drawing both from the default retry budget.
static HEDGED: Dependency = Dependency::new(policy("tail"));
/// The same, with no budget.
static HEDGED_NO_BUDGET: Dependency = Dependency::new(policy("tail, no budget")).no_budget();

const fn policy(name: &'static str) -> Policy<'static> {
    Policy::required(name)
        .idempotent()
        .with_cap(CAP)
        .with_floor(millis(1))
        .with_retries(2)
        .with_hedge_at_p95(millis(10))
}

/// One way of calling the dependency.
#[derive(Clone)]
enum Way {
    Plain,
    Library(&'static Dependency),
    Tower(TowerStack, &'static str),
}

impl Way {
    fn name(&self) -> &'static str {
        match self {
            Way::Plain => "no hedge (reqwest)",
            Way::Library(dep) if std::ptr::eq(*dep, &HEDGED_NO_BUDGET) => "library, no budget",
            Way::Library(_) => "library (budget)",
            Way::Tower(_, name) => name,
        }
    }

    async fn call(&self, client: &reqwest::Client, url: &str) -> Result<(), BoxError> {
        match self {
            Way::Plain => get(client, url, Some(CAP))
                .await
                .map(drop)
                .map_err(Into::into),
            Way::Library(dep) => {
                let call = dep.run(|_| async {
                    let response = client.get(url).time_left()?.send().await?;
                    Ok::<_, BoxError>(response.error_for_status()?.bytes().await?)
                });
                match scope_timeout(BUDGET, call).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string().into()),
                    Err(e) => Err(e.into()),
                }
            }
            Way::Tower(stack, _) => call_tower(stack).await.map(drop),
        }
    }
}

/// What one way measured.
#[derive(Clone, Debug, Default)]
struct Measured {
    ok: Vec<Duration>,
    failed: u64,
    calls: u64,
    sent: u64,
}

impl Measured {
    fn add(&mut self, other: Measured) {
        self.ok.extend(other.ok);
        self.failed += other.failed;
        self.calls += other.calls;
        self.sent += other.sent;
    }

    fn extra(&self) -> f64 {
        self.sent as f64 / self.calls.max(1) as f64 - 1.0
    }

    /// The p99.9 of the answered calls' latencies.
    fn p999(&self) -> Duration {
        let mut ok = self.ok.clone();
        ok.sort_unstable();
        percentile(&ok, Quantile::P999)
    }
}

/// Calls the dependency `way` for `duration`, `concurrency` calls at a time.
fn phase(
    runtime: &tokio::runtime::Runtime,
    dependency: &mut Child,
    way: &Way,
    client: &reqwest::Client,
    url: &Arc<str>,
    concurrency: usize,
    duration: Duration,
) -> Measured {
    let before = dependency.received();
    let mut measured = runtime.block_on(async {
        let end = Instant::now() + duration;
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (way, client, url) = (way.clone(), client.clone(), Arc::clone(url));
            tasks.push(tokio::spawn(async move {
                let mut m = Measured::default();
                while Instant::now() < end {
                    let start = Instant::now();
                    match way.call(&client, &url).await {
                        Ok(()) => m.ok.push(start.elapsed()),
                        Err(_) => m.failed += 1,
                    }
                    m.calls += 1;
                }
                m
            }));
        }
        let mut all = Measured::default();
        for task in tasks {
            all.add(task.await.expect("a caller"));
        }
        all
    });
    measured.sent = dependency.received() - before;
    measured
}

fn table(title: &str, rows: &[(String, Measured)]) {
    println!("\n{title}");
    println!(
        "{:<22} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "way", "calls", "p50", "p99", "p99.9", "extra", "failed"
    );
    for (name, m) in rows {
        let mut ok = m.ok.clone();
        ok.sort_unstable();
        println!(
            "{:<22} {:>8} {:>10} {:>10} {:>10} {:>9.2}% {:>9}",
            name,
            m.calls,
            ms(percentile(&ok, Quantile::P50)),
            ms(percentile(&ok, Quantile::P99)),
            ms(percentile(&ok, Quantile::P999)),
            m.extra() * 100.0,
            m.failed
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--dependency") {
        // Told its tail at once, with the `model` command.
        deadline_bench::dependency::child_main(steady_model(TAIL_AT_SCALE), 1);
        return;
    }
    let o = Options::parse(
        Options {
            rounds: 7,
            phase: Duration::from_secs(3),
            connections: 16,
            threads: None,
            rate: None,
            quick: false,
            slow: Some(TAIL_AT_SCALE),
        },
        args,
    );
    let tail = o.slow.unwrap_or(TAIL_AT_SCALE);
    println!(
        "tail: 2 ms, and {}% of answers at {} ms; {} rounds of {:.2} s per way, {} calls in flight; load average {}",
        tail.percent(),
        tail.ms(),
        o.rounds,
        o.phase.as_secs_f64(),
        o.connections,
        load_average().unwrap_or_default()
    );
    let mut dependency = Child::spawn(&["--dependency"]);
    dependency.ask(&steady_model(tail).command());
    let url: Arc<str> = Arc::from(format!("http://{}/", dependency.addrs()[0]));
    let runtime = deadline_bench::load::runtime();
    let client = client();
    // Long enough for tower's latency histogram, which rotates each second, to be read (the
    // short form CI runs does not wait for it).
    let warm = if o.quick {
        o.phase
    } else {
        o.phase.max(Duration::from_millis(2_500))
    };
    let run = |dependency: &mut Child, way: &Way, duration: Duration| {
        phase(
            &runtime,
            dependency,
            way,
            &client,
            &url,
            o.connections,
            duration,
        )
    };

    // Calibration: tower's percentile for as many extra requests as the library's hedge.
    let library = Way::Library(&HEDGED);
    run(&mut dependency, &library, warm);
    let target = run(&mut dependency, &library, o.phase).extra().max(0.001);
    let tower_at = |p: f32, name: &'static str| {
        let stack =
            runtime.block_on(async { tower_stack_for(client.clone(), Arc::clone(&url), CAP, p) });
        Way::Tower(stack, name)
    };
    let mut p = (1.0 - target).clamp(0.5, 0.999) as f32;
    let first = tower_at(p, "tower Hedge");
    run(&mut dependency, &first, warm);
    let got = run(&mut dependency, &first, o.phase).extra().max(0.001);
    let corrected = (1.0 - f64::from(1.0 - p) * target / got).clamp(0.5, 0.999) as f32;
    println!(
        "calibration: the library's hedge sent {:.2}% extra; tower at p{:.1} sent {:.2}%, so tower hedges at p{:.2}",
        target * 100.0,
        p * 100.0,
        got * 100.0,
        corrected * 100.0
    );
    p = corrected;
    let tower = tower_at(p, "tower Hedge, same load");
    let tower_p95 = tower_at(0.95, "tower Hedge at p95");
    let no_budget = Way::Library(&HEDGED_NO_BUDGET);
    let ways = [
        Way::Plain,
        library.clone(),
        no_budget.clone(),
        tower,
        tower_p95.clone(),
    ];
    for way in &ways[1..] {
        run(&mut dependency, way, warm);
    }

    // The steady tail: each way's latencies pooled over the rounds, and its p99.9 in each
    // round.
    let mut steady: Vec<Measured> = vec![Measured::default(); ways.len()];
    let mut p999_by_round: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    for round in 0..o.rounds {
        for i in 0..ways.len() {
            let w = (round + i) % ways.len();
            // Each way warmed again first, not counted: tower's histogram forgets everything
            // after two idle periods, which each way's turn is for the others.
            run(&mut dependency, &ways[w], warm);
            let m = run(&mut dependency, &ways[w], o.phase);
            p999_by_round[w].push(m.p999().as_secs_f64());
            steady[w].add(m);
        }
    }
    let rows: Vec<(String, Measured)> = ways
        .iter()
        .zip(&steady)
        .map(|(w, m)| (w.name().to_owned(), m.clone()))
        .collect();
    table(
        &format!(
            "a heavy tail: 2 ms, and {}% of answers at {} ms (latencies pooled over the rounds)",
            tail.percent(),
            tail.ms()
        ),
        &rows,
    );
    let (plain, lib) = (&steady[0], &steady[1]);
    let cut = plain.p999().as_secs_f64() / lib.p999().as_secs_f64();
    // The library against each of tower's rows, round by round.
    let mut no_worse = true;
    let mut against = Vec::new();
    for t in [3, 4] {
        let ratios: Vec<f64> = p999_by_round[1]
            .iter()
            .zip(&p999_by_round[t])
            .map(|(lib, tower)| lib / tower)
            .collect();
        let verdict = stats::against(&ratios, 1.0, "higher", "lower");
        if verdict.side.is_none_or(|side| side == Side::Above) {
            no_worse = false;
        }
        let text = format!(
            "{} ({} of {} rounds lower)",
            verdict.text,
            ratios.iter().filter(|r| **r < 1.0).count(),
            ratios.len()
        );
        against.push(format!("against {}: {text}", ways[t].name()));
    }
    println!(
        "the library's p99.9 over tower's, round by round: {}",
        against.join("; ")
    );
    let met = cut >= 10.0 && lib.extra() <= 0.05 && no_worse;
    let tower_rows = [3, 4]
        .map(|t| {
            format!(
                "{}: p99.9 {} for {:.2}% extra",
                ways[t].name(),
                ms(steady[t].p999()),
                steady[t].extra() * 100.0
            )
        })
        .join("; ");
    println!(
        "target: the library's hedge cuts p99.9 at least 10x for at most 5% extra requests, no worse than tower's: {} \
         (p99.9 {:.1}x lower, {:.2}% extra; {tower_rows})",
        if met { "met" } else { "not met" },
        cut,
        lib.extra() * 100.0,
    );

    // An incident, from a warm steady state each time.
    // Tower's `Hedge` at p95, the library's own setting: its "same load" percentile lies
    // between the fast answers and the slow ones, and from one run to the next it lands on
    // either side.
    let hedgers = [library, no_budget, tower_p95];
    let mut incident: Vec<Measured> = vec![Measured::default(); hedgers.len()];
    for round in 0..o.rounds {
        for i in 0..hedgers.len() {
            let w = (round + i) % hedgers.len();
            run(&mut dependency, &hedgers[w], warm);
            dependency.ask(&INCIDENT.command());
            let m = run(&mut dependency, &hedgers[w], o.phase);
            dependency.ask(&steady_model(tail).command());
            incident[w].add(m);
        }
    }
    let rows: Vec<(String, Measured)> = hedgers
        .iter()
        .zip(&incident)
        .map(|(w, m)| (w.name().to_owned(), m.clone()))
        .collect();
    table(
        &format!(
            "an incident: every answer turns 20 ms, from the steady tail; the first {:.1} s of it",
            o.phase.as_secs_f64()
        ),
        &rows,
    );

    // Failures: retries and hedges from one budget.
    dependency.ask(&failing_model(tail).command());
    let mut failing: Vec<Measured> = vec![Measured::default(); hedgers.len()];
    for round in 0..o.rounds {
        for i in 0..hedgers.len() {
            let w = (round + i) % hedgers.len();
            run(&mut dependency, &hedgers[w], warm);
            let m = run(&mut dependency, &hedgers[w], o.phase);
            failing[w].add(m);
        }
    }
    let rows: Vec<(String, Measured)> = hedgers
        .iter()
        .zip(&failing)
        .map(|(w, m)| (w.name().to_owned(), m.clone()))
        .collect();
    table(
        "failures: the tail, and 10% of answers a 503 (each way retries them: two retries)",
        &rows,
    );
    drop(dependency);
    println!(
        "load average at the end: {}",
        load_average().unwrap_or_default()
    );
    // Not a check of speed: a way that never got an answer did not run.
    if steady
        .iter()
        .chain(&incident)
        .chain(&failing)
        .any(|m| m.ok.is_empty())
    {
        eprintln!("tail: a way got no answer at all");
        std::process::exit(1);
    }
}
