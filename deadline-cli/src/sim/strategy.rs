//! The four strategies, each one request at a time over virtual instants: the client, the API,
//! the service and the database, with every timeout, retry and statement timeout decided by
//! deadline-core.
//!
//! Each layer is the same loop: [`Call::decide`] gives the attempt's timeout from the layer's
//! deadline ([`deadline_core::call_timeout`]); after a failed attempt [`RetryState::decide`]
//! says whether and when to retry (attempt cap, backoff with jitter, "fits before the
//! deadline", floor, retry budget). What differs between strategies is the deadline each layer
//! holds, its policy, and whether the database is told when to stop.

use std::time::Duration;

use deadline_core::retry::{Call, Outcome, RetryDecision, RetryState};
use deadline_core::statement::{StatementDecision, StatementPolicy, statement_timeout};
use deadline_core::throttle::RetryBudget;
use deadline_core::wire::Propagation;
use deadline_core::{Deadline, Decision, Instant, Policy};

use super::model::{Db, Model};

/// How the layers time out and retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// 1 s timeouts everywhere, no retry.
    OneTry,
    /// The API tries the service 3 times (1 s each); each service call tries the database 3
    /// times (300 ms each). No backoff, no budget, nobody told when a caller leaves.
    RetryEveryLayer,
    /// Only the service retries the database: 3 attempts of 300 ms, backoff with jitter, a
    /// retry budget. The database is not told, and runs stalled queries to the end.
    RetryOneLayer,
    /// The time left travels with the request (minus an allowance per hop); the service
    /// retries within it; the database's statement timeout is `min(300 ms, time left)`.
    Propagated,
}

impl Strategy {
    /// All four, in the order they are reported.
    pub const ALL: [Strategy; 4] = [
        Strategy::OneTry,
        Strategy::RetryEveryLayer,
        Strategy::RetryOneLayer,
        Strategy::Propagated,
    ];

    /// The name used in output and JSON.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Strategy::OneTry => "one-try",
            Strategy::RetryEveryLayer => "retry-every-layer",
            Strategy::RetryOneLayer => "retry-one-layer",
            Strategy::Propagated => "propagated",
        }
    }

    /// Whether the strategy draws its retries from a retry budget.
    #[must_use]
    pub const fn has_budget(self) -> bool {
        matches!(self, Strategy::RetryOneLayer | Strategy::Propagated)
    }
}

/// One layer's way of calling the next: its policy (cap, floor, attempts, backoff) and
/// whether it has a retry budget.
#[derive(Clone, Copy, Debug)]
struct Layer {
    policy: Policy,
    budget: bool,
}

/// Everything fixed for one strategy's run: the layers' policies, the hop rules and the
/// retry budget.
#[derive(Debug)]
pub struct Setup {
    strategy: Strategy,
    model: Model,
    api: Layer,
    service: Layer,
    statement: Option<StatementPolicy>,
    propagation: Option<Propagation>,
    budget: RetryBudget,
}

/// What became of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestResult {
    /// When the client stopped waiting: its answer came, or it gave up.
    pub client_stop: Instant,
    /// Whether the client got its answer.
    pub answered: bool,
}

/// Counts the setup keeps across requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Retries the retry budget refused.
    pub throttled: u64,
}

impl Setup {
    /// The layers of `strategy` under `model`.
    #[must_use]
    pub fn new(strategy: Strategy, model: Model) -> Self {
        let one_second = model.client_timeout;
        let none = Duration::ZERO;
        let (api, service) = match strategy {
            Strategy::OneTry => (
                Policy::required("service", one_second, none),
                Policy::required("db", one_second, none),
            ),
            Strategy::RetryEveryLayer => (
                Policy::required("service", one_second, none)
                    .with_attempts(model.attempts, deadline_core::backoff::Backoff::NONE),
                Policy::required("db", model.db_attempt, none)
                    .with_attempts(model.attempts, deadline_core::backoff::Backoff::NONE),
            ),
            Strategy::RetryOneLayer | Strategy::Propagated => (
                Policy::required("service", one_second, none),
                Policy::required("db", model.db_attempt, model.db_floor)
                    .with_attempts(model.attempts, model.backoff),
            ),
        };
        let propagated = strategy == Strategy::Propagated;
        Setup {
            strategy,
            model,
            api: Layer {
                policy: api,
                budget: false,
            },
            service: Layer {
                policy: service,
                budget: strategy.has_budget(),
            },
            statement: propagated.then(|| StatementPolicy::new(model.db_attempt, model.db_floor)),
            propagation: propagated.then(|| Propagation::new(model.allowance, one_second)),
            budget: RetryBudget::new(model.budget_percent, model.budget_floor_per_sec),
        }
    }

    /// The strategy.
    #[must_use]
    pub const fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Runs one request that leaves the client at `start`. The database keeps the queries.
    pub fn request(&self, start: Instant, db: &mut Db, counts: &mut Counts) -> RequestResult {
        let hop = self.model.hop;
        let client_deadline = Deadline::after(start, self.model.client_timeout);
        let api_arrival = start + hop;
        let api_deadline = match self.propagation {
            // The client sends the time left in `x-deadline-ms`; the API reads it back on
            // its own clock.
            Some(p) => match p.encode_deadline_ms(client_deadline, start) {
                Ok(header) => p
                    .decode_deadline_ms(header.as_bytes(), api_arrival)
                    .unwrap_or(Deadline::at(api_arrival)),
                Err(_) => Deadline::at(api_arrival),
            },
            // Without propagation each layer only has its own fixed timeouts.
            None => Deadline::NEVER,
        };
        let (api_end, api_ok) = self.layer(
            &self.api,
            api_deadline,
            api_arrival,
            db,
            counts,
            |setup, db, counts, limits_deadline, now| {
                setup.service_call(limits_deadline, now, db, counts)
            },
        );
        let reply = api_end + hop;
        let answered = api_ok && reply <= client_deadline.instant();
        let client_stop = if answered {
            reply
        } else {
            client_deadline.instant()
        };
        RequestResult {
            client_stop,
            answered,
        }
    }

    /// The API's call to the service, made at `now` with the attempt's own deadline
    /// (`attempt_deadline`). Returns when the service's reply reaches the API and whether it
    /// is an answer.
    fn service_call(
        &self,
        attempt_deadline: Deadline,
        now: Instant,
        db: &mut Db,
        counts: &mut Counts,
    ) -> (Instant, bool) {
        let hop = self.model.hop;
        let arrival = now + hop;
        let deadline = match self.propagation {
            Some(p) => match p.encode_deadline_ms(attempt_deadline, now) {
                Ok(header) => p
                    .decode_deadline_ms(header.as_bytes(), arrival)
                    .unwrap_or(Deadline::at(arrival)),
                // Nothing left to send: the API does not make the call.
                Err(_) => return (now, false),
            },
            None => Deadline::NEVER,
        };
        let (end, ok) = self.layer(
            &self.service,
            deadline,
            arrival,
            db,
            counts,
            |setup, db, _counts, limits_deadline, now| setup.db_call(limits_deadline, now, db),
        );
        (end + hop, ok)
    }

    /// The service's query, sent at `now` for an attempt that must end by `attempt_deadline`.
    /// Returns when the result (rows or the cancellation) reaches the service, and whether it
    /// has rows.
    fn db_call(&self, attempt_deadline: Deadline, now: Instant, db: &mut Db) -> (Instant, bool) {
        let hop = self.model.hop;
        let statement = match self.statement {
            Some(policy) => match statement_timeout(&policy, attempt_deadline, now) {
                StatementDecision::Set(t) => Some(t.as_duration()),
                StatementDecision::DontStart(_) => return (now, false),
            },
            None => None,
        };
        let q = db.query(now + hop, statement);
        (q.end + hop, q.answered)
    }

    /// One layer calling the next, with retries: `next(setup, db, counts, deadline, now)`
    /// makes one attempt whose own deadline is `deadline` and returns when its result arrives
    /// and whether it succeeded. Returns when the layer is done and whether it has an answer.
    fn layer<F>(
        &self,
        layer: &Layer,
        deadline: Deadline,
        arrival: Instant,
        db: &mut Db,
        counts: &mut Counts,
        mut next: F,
    ) -> (Instant, bool)
    where
        F: FnMut(&Self, &mut Db, &mut Counts, Deadline, Instant) -> (Instant, bool),
    {
        let budget = layer.budget.then_some(&self.budget);
        let call = Call::new(&layer.policy, deadline, Duration::ZERO).with_budget_opt(budget);
        call.deposit(arrival);
        let mut state = RetryState::new();
        let mut now = arrival;
        let mut decision = call.decide(now);
        loop {
            let limits = match decision {
                Decision::Call(limits) => limits,
                Decision::Skip(_) | Decision::Fail(_) => return (now, false),
            };
            let (result_at, ok) = next(self, db, counts, limits.deadline(), now);
            if ok && result_at <= limits.until {
                return (result_at, true);
            }
            // The attempt failed: its error arrived, or its timeout fired first.
            let (failed_at, outcome) = if !ok && result_at < limits.until {
                (result_at, Outcome::Failed)
            } else {
                (limits.until, Outcome::TimedOut)
            };
            match state.decide(&call, failed_at, outcome, db.rng()) {
                RetryDecision::Retry(retry) => {
                    now = retry.at;
                    decision = Decision::Call(retry.limits);
                }
                RetryDecision::GiveUp(reason) => {
                    if reason == deadline_core::retry::GiveUp::Throttled {
                        counts.throttled += 1;
                    }
                    return (failed_at, false);
                }
            }
        }
    }
}
