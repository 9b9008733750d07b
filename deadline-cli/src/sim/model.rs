//! The simulator's model: the numbers that describe the system, and the database.
//!
//! The parameters, and why they give the figures they do, are explained in the crate's
//! README (section "The simulator's model").

use std::time::Duration;

use deadline_core::Instant;
use deadline_core::policy::{Backoff, Jitter};
use deadline_core::rng::{Rng, SplitMix64};

/// The most database queries one request can cause (3 API attempts × 3 service attempts).
pub const MAX_QUERIES: usize = 9;

/// The numbers that describe the simulated system.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    /// How long the client waits for an answer.
    pub client_timeout: Duration,
    /// One-way network delay of each hop (client → API → service → database, and back).
    pub hop: Duration,
    /// What each hop subtracts from the time left it passes on (propagated deadline only).
    pub allowance: Duration,
    /// A normal query takes a time drawn uniformly from this range.
    pub query: (Duration, Duration),
    /// A stalled query takes a time drawn uniformly from this range, unless cancelled.
    pub stall: (Duration, Duration),
    /// The service's timeout per database attempt when it retries (and the statement
    /// timeout's cap when the deadline is propagated).
    pub db_attempt: Duration,
    /// The shortest time left worth starting a database attempt with.
    pub db_floor: Duration,
    /// Attempts in all at a retrying layer.
    pub attempts: u32,
    /// The backoff between the service's retries (one-layer and propagated).
    pub backoff: Backoff,
    /// The retry budget's ratio: extra calls per hundred original calls.
    pub budget_percent: u32,
    /// The retry budget's floor: extra calls per second whatever the traffic.
    pub budget_floor_per_sec: u32,
}

impl Model {
    /// The model with the README's parameters (the README says why each number).
    pub const CALIBRATED: Model = Model {
        client_timeout: Duration::from_secs(1),
        hop: Duration::from_millis(1),
        allowance: Duration::from_millis(5),
        query: (Duration::from_millis(40), Duration::from_millis(60)),
        stall: (Duration::from_millis(1500), Duration::from_millis(2500)),
        db_attempt: Duration::from_millis(300),
        db_floor: Duration::from_millis(40),
        attempts: 3,
        backoff: Backoff::exponential(Duration::from_millis(25))
            .with_max(Duration::from_millis(100))
            .with_jitter(Jitter::Full),
        budget_percent: 10,
        budget_floor_per_sec: 10,
    };
}

impl Default for Model {
    fn default() -> Self {
        Model::CALIBRATED
    }
}

/// One query as the database ran it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    /// When the database started it.
    pub start: Instant,
    /// When the database stopped working on it (finished or cancelled).
    pub end: Instant,
    /// Whether it finished with rows (not cancelled).
    pub answered: bool,
    /// Whether it stalled.
    pub stalled: bool,
}

/// The database: runs queries, each stalling with a probability, and keeps what it did for
/// the current request (no heap: at most [`MAX_QUERIES`]).
#[derive(Debug)]
pub struct Db {
    model: Model,
    stall_threshold: u64,
    rng: SplitMix64,
    queries: [Option<Query>; MAX_QUERIES],
    len: usize,
    /// Queries beyond [`MAX_QUERIES`] in one request (none with the shipped strategies).
    pub overflow: u64,
}

impl Db {
    /// A database where each query stalls with probability `stall_rate` (clamped to `[0, 1]`),
    /// drawing from a generator seeded with `seed`.
    #[must_use]
    pub fn new(model: Model, stall_rate: f64, seed: u64) -> Self {
        let p = if stall_rate.is_nan() {
            0.0
        } else {
            stall_rate.clamp(0.0, 1.0)
        };
        // A draw below the threshold stalls: P = threshold / 2^64 (1.0 maps to u64::MAX,
        // which misses one draw in 2^64).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let stall_threshold = if p >= 1.0 {
            u64::MAX
        } else {
            (p * 18_446_744_073_709_551_616.0) as u64
        };
        Db {
            model,
            stall_threshold,
            rng: SplitMix64::new(seed),
            queries: [None; MAX_QUERIES],
            len: 0,
            overflow: 0,
        }
    }

    /// The generator, shared with the jitter of the backoff.
    pub fn rng(&mut self) -> &mut SplitMix64 {
        &mut self.rng
    }

    /// Runs a query that arrives at `start`. With a statement timeout the database cancels it
    /// when the timeout passes; without one it runs to the end, whoever is waiting.
    pub fn query(&mut self, start: Instant, statement_timeout: Option<Duration>) -> Query {
        let stalled =
            self.stall_threshold == u64::MAX || self.rng.next_u64() < self.stall_threshold;
        let (lo, hi) = if stalled {
            self.model.stall
        } else {
            self.model.query
        };
        let takes = self.rng.duration_between(lo, hi);
        let (runs, answered) = match statement_timeout {
            Some(limit) if takes > limit => (limit, false),
            _ => (takes, true),
        };
        let q = Query {
            start,
            end: start + runs,
            answered,
            stalled,
        };
        match self.queries.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(q);
                self.len += 1;
            }
            None => self.overflow += 1,
        }
        q
    }

    /// The queries of the current request, and forgets them.
    pub fn take(&mut self) -> impl Iterator<Item = Query> + '_ {
        let len = std::mem::take(&mut self.len);
        self.queries.iter_mut().take(len).filter_map(Option::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_rate_one_stalls_every_query_and_zero_none() {
        let mut all = Db::new(Model::CALIBRATED, 1.0, 1);
        let mut none = Db::new(Model::CALIBRATED, 0.0, 1);
        for i in 0..1000 {
            let t = Instant::from_millis(i);
            assert!(all.query(t, None).stalled);
            assert!(!none.query(t, None).stalled);
            let _ = all.take().count();
            let _ = none.take().count();
        }
    }

    #[test]
    fn a_statement_timeout_cancels_a_stalled_query() {
        let mut db = Db::new(Model::CALIBRATED, 1.0, 7);
        let limit = Duration::from_millis(300);
        let q = db.query(Instant::from_millis(10), Some(limit));
        assert!(!q.answered);
        assert_eq!(q.end - q.start, limit);
        let q = db.query(Instant::from_millis(10), None);
        assert!(q.answered && q.end - q.start >= Model::CALIBRATED.stall.0);
        assert_eq!(db.take().count(), 2);
        assert_eq!(db.take().count(), 0);
    }
}
