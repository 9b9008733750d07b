//! What the database is asked: one `SELECT pg_sleep(..)` per query, as long as the propagation
//! model's database takes for the same query, and tagged with its run, strategy and request so
//! that the server's statement log says whose it was.
//!
//! The query times are the model's own draws: before a run, `deadline sim`'s run of the same
//! strategy, requests, stall share and seed is replayed, and the order service's `i`-th query
//! for request `r` sleeps as long as the model's `i`-th query for request `r` took. The real
//! chain and the model therefore meet the same stalls, and where their figures differ, the
//! difference is the chain's, not the luck of the draw. (At 5%, 2 000 requests draw about 100
//! stalls, give or take 10: 10% of the database time.)

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use deadline_cli::sim::{Counts, Db, Model, Setup, Strategy};
use deadline_core::Clock;
use deadline_core::rng::{Rng, SplitMix64};
use deadline_core::virtual_time::ManualClock;

/// The text every query carries, before its run, strategy and request:
/// `/* chain run=N s=NAME r=N */`.
pub(crate) const TAG: &str = "/* chain run=";

/// The queries of one strategy's run: how long each one sleeps, and how many were sent.
#[derive(Debug)]
pub(crate) struct Workload {
    /// The run (stall share) of this program the queries belong to.
    run: u32,
    strategy: Strategy,
    stall_rate: f64,
    seed: u64,
    /// The model's query times, per request, in the order the model made the queries.
    model: Vec<Vec<Duration>>,
    /// Queries sent so far for each request.
    per_request: Vec<AtomicU32>,
    sent: AtomicU64,
}

impl Workload {
    /// The queries of `requests` requests under `strategy` in run `run`, a share `stall_rate`
    /// of which stall, drawn from `seed` as the model draws them.
    pub(crate) fn new(
        run: u32,
        strategy: Strategy,
        requests: u64,
        stall_rate: f64,
        seed: u64,
    ) -> Self {
        Workload {
            run,
            strategy,
            stall_rate,
            seed,
            model: model_queries(strategy, requests, stall_rate, seed),
            per_request: (0..requests).map(|_| AtomicU32::new(0)).collect(),
            sent: AtomicU64::new(0),
        }
    }

    /// The next query of `request`, counted as sent: as long as the model's query of the
    /// same number for the same request, or, past the queries the model made for it, a new
    /// draw from the model's distribution.
    pub(crate) fn next_query(&self, request: u64) -> String {
        let r = usize::try_from(request).unwrap_or(usize::MAX);
        let index = self
            .per_request
            .get(r)
            .map_or(0, |n| n.fetch_add(1, Ordering::Relaxed));
        self.sent.fetch_add(1, Ordering::Relaxed);
        let takes = self
            .model
            .get(r)
            .and_then(|times| times.get(usize::try_from(index).unwrap_or(usize::MAX)))
            .copied()
            .unwrap_or_else(|| fresh(self.seed, self.stall_rate, request, index));
        format!(
            "SELECT pg_sleep({:.6}) {TAG}{} s={} r={request} */",
            takes.as_secs_f64(),
            self.run,
            self.strategy.name()
        )
    }

    /// Queries sent so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The requests whose first query stalls.
    pub(crate) fn stalled_first(&self) -> usize {
        self.model
            .iter()
            .filter(|times| {
                times
                    .first()
                    .is_some_and(|&t| t >= Model::CALIBRATED.stall.0)
            })
            .count()
    }
}

/// The times of the queries the model's `strategy` makes for each of `requests` requests:
/// `deadline sim`'s run, replayed request by request (the same loop as
/// `deadline_cli::sim::run_strategy`, so the same draws). A query the model's database cut
/// short at its statement timeout ran only as long as that; it gets a time of its own, of its
/// kind (a stall or not), since the real chain's database cuts it short too.
fn model_queries(
    strategy: Strategy,
    requests: u64,
    stall_rate: f64,
    seed: u64,
) -> Vec<Vec<Duration>> {
    let model = Model::CALIBRATED;
    let setup = Setup::new(strategy, model);
    let mut db = Db::new(model, stall_rate, seed);
    let mut counts = Counts::default();
    let clock = ManualClock::new();
    (0..requests)
        .map(|request| {
            let result = setup.request(clock.now(), &mut db, &mut counts);
            clock.set(result.client_stop);
            db.take()
                .zip(0u32..)
                .map(|(query, index)| {
                    if query.answered {
                        query.end - query.start
                    } else {
                        redraw(seed, request, index, query.stalled)
                    }
                })
                .collect()
        })
        .collect()
}

/// The seed of query `index` of `request`'s own draws (apart from the model's stream).
fn stream(seed: u64, request: u64, index: u32) -> u64 {
    !seed ^ (request << 8) ^ u64::from(index.min(255))
}

/// A new time for query `index` of `request`, drawn as the model's database draws one: it
/// stalls with probability `stall_rate`.
fn fresh(seed: u64, stall_rate: f64, request: u64, index: u32) -> Duration {
    let mut db = Db::new(Model::CALIBRATED, stall_rate, stream(seed, request, index));
    let query = db.query(deadline_core::Instant::ZERO, None);
    query.end - query.start
}

/// A new time for query `index` of `request`, in the model's range for a stall or for a
/// normal query.
fn redraw(seed: u64, request: u64, index: u32, stalled: bool) -> Duration {
    let model = Model::CALIBRATED;
    let (lo, hi) = if stalled { model.stall } else { model.query };
    SplitMix64::new(stream(seed, request, index)).duration_between(lo, hi)
}

/// The run, strategy and request a logged statement's text names, if it is one of ours.
pub(crate) fn parse_tag(statement: &str) -> Option<(u32, &str, u64)> {
    let rest = &statement[statement.find(TAG)? + TAG.len()..];
    let (run, rest) = rest.split_once(" s=")?;
    let (name, rest) = rest.split_once(" r=")?;
    let (request, _) = rest.split_once(' ')?;
    Some((run.parse().ok()?, name, request.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use deadline_cli::sim::{self, SimOptions};

    use super::*;

    #[test]
    fn a_query_names_its_strategy_and_request() {
        let work = Workload::new(3, Strategy::RetryOneLayer, 10, 0.05, 2);
        let sql = work.next_query(7);
        assert!(sql.starts_with("SELECT pg_sleep("), "{sql}");
        assert_eq!(parse_tag(&sql), Some((3, "retry-one-layer", 7)));
        assert_eq!(parse_tag("execute <unnamed>: SELECT 1"), None);
        assert_eq!(work.sent(), 1);
    }

    #[test]
    fn the_queries_are_the_models() {
        let model = Model::CALIBRATED;
        for (stall_rate, strategy) in [
            (0.05, Strategy::OneTry),
            (0.05, Strategy::RetryOneLayer),
            (0.05, Strategy::Propagated),
            (1.0, Strategy::RetryEveryLayer),
        ] {
            let options = SimOptions {
                requests: 500,
                stall_rate,
                seed: 2,
                model,
            };
            let sim = sim::run_strategy(strategy, &options);
            let work = Workload::new(0, strategy, 500, stall_rate, 2);
            let queries: usize = work.model.iter().map(Vec::len).sum();
            assert_eq!(
                queries as f64 / 500.0,
                sim.queries_per_request,
                "{strategy:?}"
            );
            for &t in work.model.iter().flatten() {
                let normal = t >= model.query.0 && t <= model.query.1;
                let stall = t >= model.stall.0 && t <= model.stall.1;
                assert!(normal || stall, "{t:?}");
            }
            if strategy == Strategy::OneTry {
                // One try fails exactly the requests whose query stalls.
                let stalled = work.stalled_first() as f64 / 500.0;
                assert!((1.0 - sim.answered - stalled).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn past_the_models_queries_the_draws_keep_its_stall_share() {
        let work = Workload::new(0, Strategy::OneTry, 2_000, 0.05, 2);
        // One-try's model made one query per request: the second ones are new draws.
        let stalls = (0..2_000)
            .filter(|&r| {
                let _ = work.next_query(r);
                let sql = work.next_query(r);
                let secs: f64 = sql["SELECT pg_sleep(".len()..sql.find(')').unwrap()]
                    .parse()
                    .unwrap();
                secs >= 1.5
            })
            .count();
        // 5% of 2 000 is 100; a binomial draw stays well within 60 to 140.
        assert!((60..=140).contains(&stalls), "{stalls} stalls");
    }
}
