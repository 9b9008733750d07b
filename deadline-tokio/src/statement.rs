//! Database statement timeouts from the current deadline.

#[cfg(any(feature = "postgres", feature = "sqlx"))]
use deadline_core::Error;
use deadline_core::runtime::{KeepsSent, Onward};
#[cfg(any(feature = "postgres", feature = "sqlx"))]
use deadline_core::statement::{CHECK_DEFERRED_CONSTRAINTS, StatementTimeout};
use deadline_core::statement::{StatementDecision, StatementPolicy, statement_timeout};
use deadline_core::{Clock, Instant};

use crate::context::{Tokio, current_or_never};
use crate::time::TokioClock;

/// The statement timeout for a query starting now, under the current deadline (see
/// [`deadline_core::statement::statement_timeout`]). Outside any [`scope`](crate::scope) the time left is
/// unbounded, so the query gets the policy's cap.
///
/// Run the [`StatementTimeout`](deadline_core::statement::StatementTimeout)'s SQL at the start
/// of the query's transaction; on [`StatementDecision::DontStart`], do not run the query and
/// report [`Shortfall::error`](deadline_core::call::Shortfall::error). PostgreSQL does not time
/// a `COMMIT`: before it, check the transaction's deferred constraints under what is left of
/// the timeout, set again
/// ([`StatementTimeout::left_at_or_shortest`](deadline_core::statement::StatementTimeout::left_at_or_shortest),
/// then [`CHECK_DEFERRED_CONSTRAINTS`](deadline_core::statement::CHECK_DEFERRED_CONSTRAINTS)),
/// as this crate's own queries do.
///
/// A timeout set is also noted with the runtime
/// ([`StatementTimeout::running_out_from`](deadline_core::statement::StatementTimeout::running_out_from)),
/// as a deadline sent in a header is: inside a `Dependency::run` attempt, the statement's own
/// timeout (SQLSTATE 57014), which comes the policy's margin before the attempt's end, is
/// then counted and answered as the attempt's timeout, not as a failed dependency. A query
/// not started is noted as nothing sent, for want of
/// [`StatementPolicy::needs`](deadline_core::statement::StatementPolicy::needs): the attempt
/// never reached the dependency. So call it right before the statement is sent. A check made
/// earlier (before a wait for a connection) must note nothing when it lets the query go on:
/// it is [`statement_timeout`](deadline_core::statement::statement_timeout) with the current
/// deadline, and on a refusal
/// [`note_sent`](deadline_core::runtime::KeepsSent::note_sent)`(Onward::nothing(policy.needs()))`,
/// as this crate's own queries do.
///
/// ```
/// use deadline_core::ms;
/// use deadline_core::statement::{StatementDecision, StatementPolicy};
/// use deadline_tokio::scope_timeout;
/// use deadline_tokio::low_level::decide_statement;
///
/// const ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).with_floor(ms(40));
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// scope_timeout(ms(1000), async {
///     tokio::time::sleep(ms(850)).await;
///     let StatementDecision::Set(t) = decide_statement(&ORDERS) else { unreachable!() };
///     // 150 ms left, less the policy's margin (5 ms by default) for the server's answer.
///     assert_eq!(t.to_string(), "SET LOCAL statement_timeout = 145");
///
///     tokio::time::sleep(ms(125)).await;
///     // 25 ms left: under the 40 ms floor, the query is not started.
///     assert!(matches!(decide_statement(&ORDERS), StatementDecision::DontStart(_)));
/// })
/// .await;
/// # }
/// ```
pub fn decide_statement(policy: &StatementPolicy) -> StatementDecision {
    decide(policy, Sending::Now).0
}

/// Whether the statement is sent right after the decision.
pub(crate) enum Sending {
    /// Right after it: a timeout set is noted as sent ([`decide_statement`]).
    Now,
    /// Not yet (the check before a wait for a connection or for `BEGIN`): nothing is noted unless the query
    /// is refused, which is noted as nothing sent, as [`decide_statement`] notes it.
    #[cfg(any(feature = "postgres", feature = "sqlx"))]
    Later,
}

/// [`statement_timeout`] for a query starting now under the current deadline, noted with the
/// runtime as `sending` says; and the instant it was decided at.
pub(crate) fn decide(policy: &StatementPolicy, sending: Sending) -> (StatementDecision, Instant) {
    let now = TokioClock.now();
    let decision = statement_timeout(policy, current_or_never(), now);
    match &decision {
        StatementDecision::Set(timeout) => {
            if matches!(sending, Sending::Now) {
                Tokio::note_sent(Onward::RunningOutFrom(timeout.running_out_from(now)));
            }
        }
        StatementDecision::DontStart(_) => Tokio::note_sent(Onward::nothing(policy.needs())),
    }
    (decision, now)
}

/// A statement's timeout (`timeout`, decided at `decided`), and the one set for it at `at`:
/// the whole of it, or what was left of it for its run (PostgreSQL times a prepared
/// statement's parse and its run apart) or for the check of its deferred constraints before
/// the `COMMIT` (which PostgreSQL does not time). Its errors are judged by the timeout set.
#[cfg(any(feature = "postgres", feature = "sqlx"))]
#[derive(Clone, Copy)]
pub(crate) struct TimeoutSet {
    timeout: StatementTimeout,
    decided: Instant,
    set: StatementTimeout,
    at: Instant,
}

#[cfg(any(feature = "postgres", feature = "sqlx"))]
impl TimeoutSet {
    /// The whole `timeout`, decided (and set) at `decided`.
    pub(crate) const fn whole(timeout: StatementTimeout, decided: Instant) -> TimeoutSet {
        TimeoutSet {
            timeout,
            decided,
            set: timeout,
            at: decided,
        }
    }

    /// What is left of the whole timeout now, set now; `None` when the statement's time is
    /// spent ([`StatementTimeout::left_at`]).
    #[cfg(feature = "postgres")]
    pub(crate) fn rest(&self) -> Option<TimeoutSet> {
        let now = TokioClock.now();
        let set = self.timeout.left_at(self.decided, now)?;
        Some(self.set_at(set, now))
    }

    /// What is left of the whole timeout now, at least a millisecond, set now: for the check
    /// of the deferred constraints, which must run timed
    /// ([`StatementTimeout::left_at_or_shortest`]).
    pub(crate) fn check(&self) -> TimeoutSet {
        let now = TokioClock.now();
        self.set_at(self.timeout.left_at_or_shortest(self.decided, now), now)
    }

    /// The same statement's timeout, with `set` set at `at`.
    const fn set_at(&self, set: StatementTimeout, at: Instant) -> TimeoutSet {
        TimeoutSet { set, at, ..*self }
    }

    /// The `SET LOCAL` statement of the timeout set.
    #[cfg(feature = "postgres")]
    pub(crate) fn statement(&self) -> String {
        self.set.to_string()
    }

    /// The timeout set, then the check of the deferred constraints under it
    /// ([`CHECK_DEFERRED_CONSTRAINTS`]).
    pub(crate) fn check_deferred(&self) -> String {
        format!("{}; {CHECK_DEFERRED_CONSTRAINTS}", self.set)
    }

    /// The error of a statement whose time is spent before it could run: its timeout's.
    #[cfg(feature = "postgres")]
    pub(crate) const fn spent(&self) -> Error {
        Error::Timeout {
            after: self.timeout.as_duration(),
        }
    }

    /// What a database error with SQLSTATE `sqlstate`, come back `now`, is for the statement:
    /// the timeout set firing is the library's timeout after the whole statement timeout
    /// ([`StatementTimeout::error_of`], judged by the timeout set and when it was); `None` for
    /// any other error, the database's own.
    pub(crate) fn timeout_error(&self, sqlstate: &[u8], now: Instant) -> Option<Error> {
        self.set
            .error_of(sqlstate, self.at, now)
            .map(|_| Error::Timeout {
                after: self.timeout.as_duration(),
            })
    }
}
