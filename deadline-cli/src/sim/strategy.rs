//! The four strategies, each one request at a time over virtual instants: the client, the API,
//! the service and the database, with every timeout, retry and statement timeout decided by
//! deadline-core.
//!
//! Each layer calls the next through the core's [`Driver`] on a [`ManualTimer`]: the driver
//! gives each attempt its timeout from the layer's deadline ([`deadline_core::call::call_timeout`]),
//! drops the attempt when that timeout fires, and after a failure asks
//! [`RetryState::decide`](deadline_core::call::RetryState::decide) whether and when to retry
//! (attempt cap, backoff with jitter, "fits before the deadline", floor, retry budget), exactly
//! as it would in a server. What differs between strategies is the deadline each layer holds,
//! its policy, and whether the database is told when to stop.
//!
//! A layer's attempt works out the next layer's whole run when it starts (on the next layer's
//! own timer), because in these strategies nothing tells a layer that its caller has stopped
//! waiting: a service whose caller timed out keeps retrying, and a database query runs on,
//! unless a propagated deadline stops them. Through the driver the simulator runs a million
//! requests per strategy in 0.3 to 0.45 s (see the README's "Speed").

use std::cell::RefCell;
use std::time::Duration;

use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, Limits};
use deadline_core::drive::Driver;
use deadline_core::rng::Rng;
use deadline_core::statement::{StatementDecision, StatementPolicy, statement_timeout};
use deadline_core::virtual_time::ManualTimer;
use deadline_core::wire::Propagation;
use deadline_core::{Clock, Deadline, Instant, Outcome, Policy, Timer};

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
    policy: Policy<'static>,
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
                Policy::required("service")
                    .with_cap(one_second)
                    .with_floor(none),
                Policy::required("db").with_cap(one_second).with_floor(none),
            ),
            Strategy::RetryEveryLayer => (
                Policy::required("service")
                    .idempotent()
                    .with_cap(one_second)
                    .with_floor(none)
                    .with_retries(model.attempts.saturating_sub(1))
                    .with_backoff(deadline_core::policy::Backoff::NONE),
                Policy::required("db")
                    .idempotent()
                    .with_cap(model.db_attempt)
                    .with_floor(none)
                    .with_retries(model.attempts.saturating_sub(1))
                    .with_backoff(deadline_core::policy::Backoff::NONE),
            ),
            Strategy::RetryOneLayer | Strategy::Propagated => (
                Policy::required("service")
                    .with_cap(one_second)
                    .with_floor(none),
                Policy::required("db")
                    .idempotent()
                    .with_cap(model.db_attempt)
                    .with_floor(model.db_floor)
                    .with_retries(model.attempts.saturating_sub(1))
                    .with_backoff(model.backoff),
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
            // The model's database is reached in no time: its statement timeout is all of
            // the time left, with no margin for an answer's trip back.
            statement: propagated.then(|| {
                StatementPolicy::capped(model.db_attempt)
                    .with_floor(model.db_floor)
                    .with_margin(Duration::ZERO)
            }),
            propagation: propagated.then(|| {
                Propagation::DEFAULT
                    .with_allowance(model.allowance)
                    .with_max(one_second)
            }),
            budget: RetryBudget::percent(model.budget_percent)
                .with_floor_per_sec(model.budget_floor_per_sec),
        }
    }

    /// The strategy.
    #[must_use]
    pub const fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Runs one request that leaves the client at `start`. The database keeps the queries.
    pub fn request(&self, start: Instant, db: &mut Db, counts: &mut Counts) -> RequestResult {
        let db = RefCell::new(db);
        let hop = self.model.hop;
        let client_deadline = Deadline::after(start, self.model.client_timeout);
        let api_arrival = start + hop;
        let api_deadline = match self.propagation {
            // The client sends the time left in `x-deadline-ms`; the API reads it back on
            // its own clock.
            Some(p) => p
                .hop(client_deadline, start, api_arrival)
                .unwrap_or(Deadline::at(api_arrival)),
            // Without propagation each layer only has its own fixed timeouts.
            None => Deadline::NEVER,
        };
        let (api_end, api_ok) = self.layer(
            &self.api,
            api_deadline,
            api_arrival,
            &db,
            counts,
            |limits, now, counts| self.service_call(limits.deadline(), now, &db, counts),
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
        db: &RefCell<&mut Db>,
        counts: &mut Counts,
    ) -> (Instant, bool) {
        let hop = self.model.hop;
        let arrival = now + hop;
        let deadline = match self.propagation {
            Some(p) => match p.hop(attempt_deadline, now, arrival) {
                Ok(deadline) => deadline,
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
            |limits, now, _| self.db_call(limits.deadline(), now, db),
        );
        (end + hop, ok)
    }

    /// The service's query, sent at `now` for an attempt that must end by `attempt_deadline`.
    /// Returns when the result (rows or the cancellation) reaches the service, and whether it
    /// has rows.
    fn db_call(
        &self,
        attempt_deadline: Deadline,
        now: Instant,
        db: &RefCell<&mut Db>,
    ) -> (Instant, bool) {
        let hop = self.model.hop;
        let statement = match self.statement {
            Some(policy) => match statement_timeout(&policy, attempt_deadline, now) {
                StatementDecision::Set(t) => Some(t.as_duration()),
                StatementDecision::DontStart(_) => return (now, false),
            },
            None => None,
        };
        let q = db.borrow_mut().query(now + hop, statement);
        (q.end + hop, q.answered)
    }

    /// One layer calling the next, through the core's driver on a virtual timer that starts
    /// when the request reaches the layer: `next(limits, now, counts)` makes one attempt at
    /// `now` and returns when its result arrives and whether it succeeded. The driver arms
    /// the attempt's timeout, retries and backs off. The next layer's work is worked out in
    /// full when the attempt starts, as nothing tells it when its caller stops waiting.
    /// Returns when the layer is done and whether it has an answer.
    fn layer<F>(
        &self,
        layer: &Layer,
        deadline: Deadline,
        arrival: Instant,
        db: &RefCell<&mut Db>,
        counts: &mut Counts,
        mut next: F,
    ) -> (Instant, bool)
    where
        F: FnMut(Limits, Instant, &mut Counts) -> (Instant, bool),
    {
        let budget = layer.budget.then_some(&self.budget);
        let call = Call::new(&layer.policy, deadline, Duration::ZERO).with_budget_opt(budget);
        let timer = ManualTimer::starting_at(arrival);
        let t = &timer;
        let called = timer.run(Driver::new(call, t, DbRng(db)).run(
            |(): &()| Outcome::Failed,
            |limits: Limits| {
                let (at, ok) = next(limits, t.now(), &mut *counts);
                async move {
                    t.sleep_until(at).await;
                    if ok { Ok(()) } else { Err(()) }
                }
            },
        ));
        match called {
            Ok(called) => {
                counts.throttled += u64::from(called.report.budget_refusals);
                (called.report.ended, called.result.is_ok())
            }
            // Every attempt waits on this timer, so the driver cannot stall; if it did, the
            // layer would have no answer.
            Err(stalled) => (stalled.at, false),
        }
    }
}

/// The database's generator, drawn by the driver for the backoff's jitter: one random stream
/// for stalls, query times and jitter, as the requests use it.
struct DbRng<'a, 'd>(&'a RefCell<&'d mut Db>);

impl Rng for DbRng<'_, '_> {
    fn next_u32(&mut self) -> u32 {
        self.0.borrow_mut().rng().next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.0.borrow_mut().rng().next_u64()
    }
}
