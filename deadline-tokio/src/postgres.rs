//! PostgreSQL queries under the current deadline (feature `postgres`, on tokio-postgres).
//!
//! The database is the last hop of a request, and the one most likely to keep working for
//! nobody: dropping a tokio-postgres future stops the wait, not the query, which runs on in
//! the server until it ends or its statement timeout fires. A query run by a [`Session`]:
//!
//! 1. is not started when too little time is left ([`StatementPolicy::floor`]), neither
//!    before its transaction begins nor after (the `BEGIN` may wait behind a query the client
//!    still runs): the result is the shortfall's error ([`Error::InsufficientTime`]). Inside a
//!    [`Dependency::run`](deadline_core::Dependency::run) attempt, a query not started ends
//!    the attempt as never sent: the breaker does not count it; when what was short was the
//!    call's time, no retry or hedge follows and the call answers
//!    [`Error::DeadlineExceeded`] (or an earlier attempt's failure), and when it was only the
//!    attempt's cap (an attempt starting then could start the query), the attempt ran out
//!    of time, and is retried as a timeout is;
//! 2. runs in a transaction whose `SET LOCAL statement_timeout` is the time left, less the
//!    policy's margin, capped ([`decide_statement`]): at the deadline the server ends the
//!    statement itself, a few milliseconds before the caller would give up. PostgreSQL times
//!    a statement's parse and its run apart, so the statement is parsed under that timeout
//!    and runs with what is left of it, set again: a parse that waited behind a lock does not
//!    give the run the whole timeout again. PostgreSQL does not time a `COMMIT`, so the
//!    deferred constraints are checked before it
//!    ([`CHECK_DEFERRED_CONSTRAINTS`](deadline_core::statement::CHECK_DEFERRED_CONSTRAINTS)), under
//!    what is left of the timeout (at least a millisecond), set again, not untimed at the
//!    `COMMIT`: for the free functions ([`query`], [`execute`]) in a round trip of its own,
//!    for a session in the `COMMIT`'s;
//! 3. is cancelled on the server the moment its future is dropped before it is done (the
//!    caller left, the deadline passed, a hedge lost), and its connection is not used again
//!    until the cancel has settled (below);
//! 4. reports SQLSTATE 57014 (`query_canceled`: the statement timeout fired) that comes once
//!    the timeout could have fired as the library's timeout, [`Error::Timeout`] (one before
//!    then is a cancel of someone else's, the database's error; the core's rule:
//!    [`StatementTimeout::error_of`](deadline_core::statement::StatementTimeout::error_of)),
//!    and the deadline passing as [`Error::DeadlineExceeded`];
//!    inside a [`Dependency::run`](deadline_core::Dependency::run) attempt, whose error it
//!    becomes, the call counts it as the attempt's timeout and answers `Error::Timeout` if it
//!    gives up, never a failed dependency (the statement timeout is noted with the runtime,
//!    as a deadline sent in a header is: [`note_sent`](deadline_core::runtime::note_sent)).
//!
//! # The cancel, and why the session holds the connection
//!
//! PostgreSQL's cancel is addressed to a connection's backend, not to a query: a cancel that
//! arrives after the query it was meant for has ended fails whatever the connection runs
//! next. So a session keeps its connection through a cancel. When a query's future is dropped
//! mid-flight, a task on the runtime takes the connection and:
//!
//! - sends the cancel request with the connection's own TLS connector (the [`Database`]'s:
//!   over TLS exactly when the connection is, never in plaintext behind its back), and waits
//!   until the server closes the cancel connection, by which time PostgreSQL has signalled the
//!   backend (at most [`CANCEL_LIMIT`](crate::database::CANCEL_LIMIT));
//! - runs `ROLLBACK` and `SELECT 1` on the connection: by their answers the signal has been
//!   taken, by the dropped query or by the idle backend. A connection that has not settled
//!   (or, after a failure, closed) within the same limit, because its network went silent or
//!   its query ignores the cancel, is given up: the session's next query returns
//!   [`PgError::Lost`] instead of waiting, and the task holds the connection until it settles
//!   or closes, then drops it, so a pool never has it back busy;
//! - gives the connection back: the session's next query waits for it (within its own
//!   deadline), and a session dropped meanwhile drops the connection only then, so that a
//!   pooled connection goes back to its pool settled.
//!
//! A cancel that fails (the server unreachable on a new connection, a TLS failure, no answer
//! in time) is never dropped silently: it is counted in [`Database::cancels`], logged as a
//! `tracing` warning under feature `tracing`, and its connection is closed (its backend ended)
//! rather than reused, since a late signal could still reach it: the session's next query
//! returns [`PgError::Lost`].
//!
//! What not to do: do not run queries on a session's connection other than through the
//! session ([`Session::connection`] hands it out once any cancel has settled), and do not send
//! your own cancels on it. Behind a connection pooler (PgBouncer), the settle holds only if
//! the pooler closes a cancel connection once it has passed the cancel on to the server: one
//! that closes it at once, and forwards the cancel later, lets the cancel land after the
//! settle, on what the connection (in transaction pooling, another client) runs next.
//!
//! Inside a [`Dependency`](deadline_core::Dependency)'s call (for retries, a breaker), give
//! the call [`classify`]: `DB.run(|_| ..).classify(postgres::classify)`. It reads a
//! deadline's error as the attempt's timeout and the database's by its SQLSTATE
//! ([`outcome_of_sqlstate`]): a serialization
//! failure or a deadlock runs again, a constraint violation is final. The default reads every
//! error as a failure a retry may fix: a duplicate key would be retried, and held against the
//! breaker.
//!
//! [`PgError::Deadline`] does not say the query's changes were not committed: a query dropped,
//! or a deadline that passed, after the server ran its `COMMIT` but before the answer
//! arrived leaves them committed (as does a `COMMIT` that waits for a synchronous standby,
//! which a cancel does not undo). Retry a write only when it is idempotent, or check first.
//!
//! ```no_run
//! use deadline_core::ms;
//! use deadline_core::statement::StatementPolicy;
//! use deadline_tokio::postgres::{Database, PgError};
//! use deadline_tokio::scope_timeout;
//!
//! // At most 300 ms per query; with under 25 ms left (the 20 ms floor plus the 5 ms margin),
//! // do not start.
//! const ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).with_floor(ms(20));
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config: tokio_postgres::Config = "host=127.0.0.1 user=app dbname=shop".parse()?;
//! // The connections' TLS connector (here none): the cancels go through it too.
//! let db = Database::new(&config, tokio_postgres::NoTls)?;
//! let mut session = db.connect().await?;
//! let rows = scope_timeout(ms(250), async {
//!     session
//!         .query(&ORDERS, "SELECT id FROM orders WHERE user_id = $1", &[&42_i64])
//!         .await
//! })
//! .await?;
//! # let _ = rows;
//! # Ok(())
//! # }
//! ```
//!
//! A pooled connection works the same: deadpool-postgres's `Object` through
//! [`Database::session_with`] (`db.session_with(pool.get().await?, |object| object)`), bb8's
//! owned `PooledConnection` through [`Database::session`]. The wait for the pool's connection
//! comes before the session, so only the request's scope bounds it (and the pool's own
//! timeout): inside `scope_timeout`, `pool.get()` ends at the deadline.
//!
//! [`query`] and [`execute`] take a `&mut tokio_postgres::Client` instead: the same statement
//! timeout and floor, but no cancel. The caller has the client back the moment the future is
//! dropped, so a cancel sent then could reach its next query; a dropped query runs on until
//! its statement timeout (at most the deadline, less the margin) instead.
//!
//! [`decide_statement`]: crate::low_level::decide_statement

use core::fmt;

use deadline_core::statement::{
    StatementDecision, StatementPolicy, StatementTimeout, grpc_code_of_sqlstate,
    outcome_of_sqlstate,
};
use deadline_core::wire::GrpcCode;
use deadline_core::{Clock, Error, Instant, Outcome};
use futures_util::future::try_join;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use crate::clock::TokioClock;
use crate::context::within_current;
use crate::statement::{self, Sending, TimeoutSet};

mod cancel;
mod database;
mod session;

pub use cancel::{CancelSocket, CancelTls};
pub use database::Database;
pub use session::Session;

/// The error of a query run under the deadline.
#[derive(Debug)]
#[non_exhaustive]
pub enum PgError {
    /// The deadline's: the query was not started (too little time left:
    /// [`Error::InsufficientTime`]), its statement timeout fired on the server (SQLSTATE
    /// 57014: [`Error::Timeout`]), or the deadline passed while it ran
    /// ([`Error::DeadlineExceeded`]; a [`Session`] cancelled it on the server). Each maps to
    /// 504 and gRPC `DEADLINE_EXCEEDED`.
    Deadline(Error),
    /// The database's own error (or the connection's).
    Db(tokio_postgres::Error),
    /// The [`Session`] has no connection any more: the task that settled a dropped query's
    /// cancel did not give it back (its runtime shut down, the connection did not settle or
    /// close within the cancel limit, or it was closed, its cancel having failed).
    Lost,
}

/// The library's error (a scope cut at its deadline, say) is the deadline's, so that
/// `scope_timeout(..).await??` reads as one error.
impl From<Error> for PgError {
    fn from(error: Error) -> Self {
        PgError::Deadline(error)
    }
}

impl PgError {
    /// The deadline's error, if that is what this is.
    #[must_use]
    pub fn deadline(&self) -> Option<Error> {
        match self {
            PgError::Deadline(error) => Some(*error),
            PgError::Db(_) | PgError::Lost => None,
        }
    }

    /// The gRPC code that answers the caller for this error: the deadline's
    /// (`DEADLINE_EXCEEDED`), the database's by its SQLSTATE
    /// ([`grpc_code_of_sqlstate`]: a unique violation is
    /// `ALREADY_EXISTS`, a serialization failure `ABORTED`, ..., one it does not name
    /// `INTERNAL`), a connection closed or lost `UNAVAILABLE`.
    #[must_use]
    pub fn grpc_code(&self) -> GrpcCode {
        match self {
            PgError::Deadline(error) => error.grpc_code(),
            PgError::Db(error) if error.is_closed() => GrpcCode::Unavailable,
            PgError::Db(error) => {
                grpc_code_of_sqlstate(error.code().map(|state| state.code().as_bytes()))
            }
            PgError::Lost => GrpcCode::Unavailable,
        }
    }
}

/// How an attempt that failed with `error` ended, for a
/// [`Dependency`](deadline_core::Dependency)'s call: `.classify(postgres::classify)`. The
/// deadline's error is the attempt's timeout ([`Outcome::TimedOut`]); the database's is read
/// by its SQLSTATE ([`outcome_of_sqlstate`]: a serialization failure or a deadlock
/// [`Outcome::Refused`], run again; a constraint violation or bad data [`Outcome::Fatal`],
/// final); a connection closed under the query, or lost, [`Outcome::Failed`] (it may have
/// run).
///
/// For an attempt that runs one query (each query here is a transaction of its own): a
/// serialization failure says that query did nothing, not that an earlier query of the same
/// attempt, committed, did nothing. An attempt of several queries classifies its errors
/// itself.
///
/// ```
/// use deadline_core::{Error, Outcome};
/// use deadline_tokio::postgres::{PgError, classify};
///
/// assert_eq!(classify(&PgError::Deadline(Error::DeadlineExceeded)), Outcome::TimedOut);
/// assert_eq!(classify(&PgError::Lost), Outcome::Failed);
/// ```
#[must_use]
pub fn classify(error: &PgError) -> Outcome {
    match error {
        PgError::Deadline(_) => Outcome::TimedOut,
        PgError::Db(error) if error.is_closed() => Outcome::Failed,
        PgError::Db(error) => {
            outcome_of_sqlstate(error.code().map(|state| state.code().as_bytes()))
        }
        PgError::Lost => Outcome::Failed,
    }
}

/// `?` in an axum or hyper handler: the deadline's error is its status (504), the
/// database's by its SQLSTATE ([`PgError::grpc_code`], as the Connect protocol maps it to HTTP: a
/// unique violation 409, bad input 400, one it does not name 500), a connection closed or
/// lost 503.
///
/// A bare status, with no body: what a plain HTTP client reads. A Connect client reads only
/// some statuses as their codes (a bare 409 is `unknown` to it), so a handler that serves
/// Connect answers with its own error type, made from [`PgError::grpc_code`].
///
/// ```
/// use deadline_core::Error;
/// use deadline_tokio::postgres::PgError;
/// use http::StatusCode;
///
/// assert_eq!(StatusCode::from(PgError::Deadline(Error::DeadlineExceeded)), StatusCode::GATEWAY_TIMEOUT);
/// assert_eq!(StatusCode::from(PgError::Lost), StatusCode::SERVICE_UNAVAILABLE);
/// ```
#[cfg(feature = "tower")]
impl From<PgError> for http::StatusCode {
    fn from(error: PgError) -> Self {
        match error {
            PgError::Deadline(error) => error.into(),
            PgError::Db(_) | PgError::Lost => crate::database::http_status(error.grpc_code()),
        }
    }
}

/// `?` in a tonic handler: the deadline's error is its status (`DEADLINE_EXCEEDED`), the
/// database's by its SQLSTATE ([`PgError::grpc_code`]), with the error's text (tokio-postgres's:
/// `db error` for one of the database's, so no detail of the schema goes to the caller).
#[cfg(feature = "tonic")]
impl From<PgError> for tonic::Status {
    fn from(error: PgError) -> Self {
        match error {
            PgError::Deadline(error) => error.into(),
            PgError::Db(_) | PgError::Lost => {
                crate::database::grpc_status(error.grpc_code(), error.to_string())
            }
        }
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgError::Deadline(error) => error.fmt(f),
            PgError::Db(error) => error.fmt(f),
            PgError::Lost => {
                f.write_str("the session's connection was lost while a cancel settled")
            }
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PgError::Deadline(error) => Some(error),
            PgError::Db(error) => Some(error),
            PgError::Lost => None,
        }
    }
}

/// Runs `statement` with `params` on `client` and returns its rows, under the current
/// deadline: in a transaction with `SET LOCAL statement_timeout` from the time left (see
/// `policy`), committed when it succeeds. Outside any [`scope`](crate::scope) the statement
/// timeout is the policy's cap and the future is not bounded.
///
/// No cancel is sent when the future is dropped (the caller has the client back at once, and
/// a cancel could reach its next query): the query runs on until its statement timeout. A
/// [`Session`] cancels it and keeps the connection until the cancel has settled.
///
/// # Errors
///
/// [`PgError::Deadline`] for a query not started, timed out or cut at the deadline;
/// [`PgError::Db`] for anything else the database or the connection reports.
pub async fn query(
    client: &mut Client,
    policy: &StatementPolicy,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, PgError> {
    run(client, policy, statement, params, Kind::Query)
        .await
        .map(Done::rows)
}

/// Runs `statement` with `params` and returns the number of rows it changed, under the
/// current deadline, as [`query`] does.
///
/// # Errors
///
/// As [`query`].
pub async fn execute(
    client: &mut Client,
    policy: &StatementPolicy,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, PgError> {
    run(client, policy, statement, params, Kind::Execute)
        .await
        .map(Done::count)
}

#[derive(Clone, Copy)]
enum Kind {
    Query,
    Execute,
}

enum Done {
    Rows(Vec<Row>),
    Count(u64),
}

impl Done {
    fn rows(self) -> Vec<Row> {
        match self {
            Done::Rows(rows) => rows,
            Done::Count(_) => Vec::new(),
        }
    }

    fn count(self) -> u64 {
        match self {
            Done::Rows(rows) => rows.len() as u64,
            Done::Count(count) => count,
        }
    }
}

async fn run(
    client: &mut Client,
    policy: &StatementPolicy,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
    kind: Kind,
) -> Result<Done, PgError> {
    // Too little time left: no round trip at all. (Nothing is sent yet: the statement timeout
    // is decided, and noted as sent, once the transaction has begun.)
    decide(policy, Sending::Later)?;
    let work = async {
        let transaction = client.transaction().await.map_err(PgError::Db)?;
        // Decided again once the transaction has begun: its `BEGIN` waits behind whatever
        // the client still runs (a query dropped before this one runs on until its statement
        // timeout), and that wait has used some of the time.
        let (timeout, decided) = decide(policy, Sending::Now)?;
        let (done, rest) = parse_then_run(
            transaction.client(),
            &timeout.to_string(),
            TimeoutSet::whole(timeout, decided),
            statement,
            params,
            kind,
        )
        .await?;
        // The deferred constraints, checked under what is left of the timeout, set again
        // (PostgreSQL does not time a `COMMIT`): a round trip of its own, as
        // `Transaction::commit` takes the transaction.
        let check = rest.check();
        transaction
            .batch_execute(&check.check_deferred())
            .await
            .map_err(|error| check.error(error))?;
        transaction
            .commit()
            .await
            .map_err(|error| check.error(error))?;
        Ok(done)
    };
    match within_current(work).await {
        // The deadline passed: the work is dropped (its transaction's drop queues a
        // `ROLLBACK` behind the query), and the query ends at its statement timeout.
        Err(deadline) => Err(PgError::Deadline(deadline)),
        Ok(done) => done,
    }
}

/// Parses `statement` on `client` in one round trip with `first` (the `SET` of the whole
/// timeout, with whatever goes before it), then runs it with what is left of the timeout, set
/// again in one round trip with the run: PostgreSQL times a statement's parse and its run
/// apart, each with a statement timeout of its own, so a parse that waited behind a lock
/// would give the run the whole timeout again, past the deadline. (tokio-postgres sends
/// requests polled together without waiting between them, the first polled first, and the
/// server runs them in order.) What it came to, and the timeout set for the run, by which
/// what follows in the transaction is judged.
async fn parse_then_run(
    client: &Client,
    first: &str,
    whole: TimeoutSet,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
    kind: Kind,
) -> Result<(Done, TimeoutSet), PgError> {
    let (_, prepared) = try_join(client.batch_execute(first), client.prepare(statement))
        .await
        .map_err(|error| whole.error(error))?;
    // Parsed at the end of its time: it is its timeout's, not run.
    let rest = whole
        .rest()
        .ok_or_else(|| PgError::Deadline(whole.spent()))?;
    let set = rest.statement();
    let ran = match kind {
        Kind::Query => try_join(client.batch_execute(&set), client.query(&prepared, params))
            .await
            .map(|(_, rows)| Done::Rows(rows)),
        Kind::Execute => try_join(
            client.batch_execute(&set),
            client.execute(&prepared, params),
        )
        .await
        .map(|(_, count)| Done::Count(count)),
    };
    Ok((ran.map_err(|error| rest.error(error))?, rest))
}

/// The statement timeout from the time left now, and when it was decided; or the error of a
/// query not to start; noted with the runtime as `sending` says.
fn decide(
    policy: &StatementPolicy,
    sending: Sending,
) -> Result<(StatementTimeout, Instant), PgError> {
    match statement::decide(policy, sending) {
        (StatementDecision::Set(timeout), decided) => Ok((timeout, decided)),
        (StatementDecision::DontStart(shortfall), _) => Err(PgError::Deadline(shortfall.error())),
    }
}

/// The database's errors, judged by the timeout set for the statement ([`TimeoutSet`]).
impl TimeoutSet {
    /// The error of a statement under this timeout, now: the timeout set firing is the
    /// library's timeout ([`TimeoutSet::timeout_error`]), any other error the database's own.
    fn error(&self, error: tokio_postgres::Error) -> PgError {
        let now = TokioClock.now();
        match error
            .code()
            .and_then(|code| self.timeout_error(code.code().as_bytes(), now))
        {
            Some(timed_out) => PgError::Deadline(timed_out),
            None => PgError::Db(error),
        }
    }
}
