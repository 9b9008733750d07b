//! `deadline sim`: the propagation model's simulator. A client sends requests through an API
//! and a service to a database, one after another, under four strategies; queries stall at a
//! given rate.
//!
//! Per strategy it reports the share of requests answered, database queries and database
//! time per request, and the share of database time spent after the client stopped waiting
//! (when it got its answer, or gave up at its timeout). Every timeout, retry, backoff, retry
//! budget grant, header and statement timeout is decided by deadline-core over virtual
//! instants, each layer's attempts run by its driver ([`strategy`]); this module keeps the
//! client's clock and adds up the results.
//!
//! The client is closed-loop: it sends the next request when it stops waiting for the
//! previous one, so the traffic is at most a few dozen requests per second. Requests share
//! the clock, the random stream and the retry budget; the database has no queue (a stalled
//! query slows nobody else), so work left behind by one request does not change the next.

pub mod model;
pub mod strategy;

use std::fmt::Write as _;
use std::time::Duration;

use deadline_core::Clock;
use deadline_core::virtual_time::ManualClock;
use serde::Serialize;

use crate::output::{fmt_num, fmt_percent, ms_f64, pad, ser_rounded};
pub use model::{Db, Model, Query};
pub use strategy::{Counts, RequestResult, Setup, Strategy};

/// The default number of requests per strategy (the propagation model's default run).
pub const DEFAULT_REQUESTS: u64 = 2_000;

/// The default share of queries that stall.
pub const DEFAULT_STALL_RATE: f64 = 0.05;

/// The default seed.
pub const DEFAULT_SEED: u64 = 2;

/// What the simulator is asked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimOptions {
    /// Requests per strategy.
    pub requests: u64,
    /// The share of queries that stall, in `[0, 1]`.
    pub stall_rate: f64,
    /// The seed of the random stream (stalls, query times, jitter).
    pub seed: u64,
    /// The system's numbers.
    pub model: Model,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            requests: DEFAULT_REQUESTS,
            stall_rate: DEFAULT_STALL_RATE,
            seed: DEFAULT_SEED,
            model: Model::CALIBRATED,
        }
    }
}

/// One strategy's totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StrategyReport {
    /// `one-try`, `retry-every-layer`, `retry-one-layer` or `propagated`.
    pub name: &'static str,
    /// The share of requests whose client got an answer in time.
    #[serde(serialize_with = "ser_rounded")]
    pub answered: f64,
    /// Database queries per request.
    #[serde(serialize_with = "ser_rounded")]
    pub queries_per_request: f64,
    /// Database time per request, in milliseconds.
    #[serde(serialize_with = "ser_rounded")]
    pub db_ms_per_request: f64,
    /// The share of database time spent after the client stopped waiting.
    #[serde(serialize_with = "ser_rounded")]
    pub db_after_client_gone: f64,
    /// Retries the retry budget refused (text output only).
    #[serde(skip)]
    pub throttled: u64,
    /// The virtual time the run covered (text output only).
    #[serde(skip)]
    pub virtual_time: Duration,
}

/// Everything `deadline sim` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimReport {
    /// Requests per strategy.
    pub requests: u64,
    /// The share of queries that stall.
    pub stall_rate: f64,
    /// The random seed of the simulated latencies.
    pub seed: u64,
    /// One entry per strategy, in [`Strategy::ALL`] order.
    pub strategies: Vec<StrategyReport>,
}

/// Runs `options.requests` requests under one strategy.
#[must_use]
pub fn run_strategy(strategy: Strategy, options: &SimOptions) -> StrategyReport {
    let setup = Setup::new(strategy, options.model);
    let mut db = Db::new(options.model, options.stall_rate, options.seed);
    let mut counts = Counts::default();
    let clock = ManualClock::new();
    let mut answered = 0u64;
    let mut queries = 0u64;
    let mut db_time = Duration::ZERO;
    let mut after = Duration::ZERO;
    for _ in 0..options.requests {
        let result = setup.request(clock.now(), &mut db, &mut counts);
        answered += u64::from(result.answered);
        for q in db.take() {
            queries += 1;
            db_time += q.end - q.start;
            after += q.end - q.start.max(result.client_stop);
        }
        clock.set(result.client_stop);
    }
    queries += db.overflow;
    let n = options.requests.max(1) as f64;
    StrategyReport {
        name: strategy.name(),
        answered: answered as f64 / n,
        queries_per_request: queries as f64 / n,
        db_ms_per_request: ms_f64(db_time) / n,
        db_after_client_gone: if db_time.is_zero() {
            0.0
        } else {
            after.as_secs_f64() / db_time.as_secs_f64()
        },
        throttled: counts.throttled,
        virtual_time: clock.now() - deadline_core::Instant::ZERO,
    }
}

/// Runs every strategy.
#[must_use]
pub fn run(options: &SimOptions) -> SimReport {
    SimReport {
        requests: options.requests,
        stall_rate: options.stall_rate,
        seed: options.seed,
        strategies: Strategy::ALL
            .iter()
            .map(|&s| run_strategy(s, options))
            .collect(),
    }
}

/// The totals as a table.
#[must_use]
pub fn render(report: &SimReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "deadline sim: {} requests per strategy, {} of queries stall, seed {}\n\
         client -> API -> service -> database; the client waits 1 s\n",
        report.requests,
        fmt_percent(report.stall_rate),
        report.seed
    );
    let _ = writeln!(
        out,
        "{}  {:>8}  {:>15}  {:>16}  {:>19}  {:>9}",
        pad("strategy", 18),
        "answered",
        "queries/request",
        "DB time/request",
        "DB time, client gone",
        "throttled"
    );
    for s in &report.strategies {
        let _ = writeln!(
            out,
            "{}  {:>8}  {:>15}  {:>13} ms  {:>19}  {:>9}",
            pad(s.name, 18),
            fmt_percent(s.answered),
            fmt_num(s.queries_per_request, 3),
            fmt_num(s.db_ms_per_request, 1),
            fmt_percent(s.db_after_client_gone),
            s.throttled,
        );
    }
    let _ = writeln!(
        out,
        "\none-try: 1 s timeouts, no retry. retry-every-layer: the API tries the service 3 times \
         (1 s each),\neach service call tries the database 3 times (300 ms each). retry-one-layer: \
         only the service retries\n(3 x 300 ms, backoff with jitter, 10% retry budget); the \
         database is not told. propagated: the time\nleft travels in x-deadline-ms, minus 5 ms \
         per hop; statement timeout = min(300 ms, time left).\nthrottled: retries the retry \
         budget refused."
    );
    out
}
