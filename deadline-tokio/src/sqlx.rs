//! PostgreSQL queries through sqlx under the current deadline (feature `sqlx`).
//!
//! sqlx has no cancel of its own: dropping a query's future stops the wait, not the query,
//! which runs on in the server until it ends or its statement timeout fires. A query run here
//! through a [`PgPool`]:
//!
//! 1. is not started when too little time is left ([`StatementPolicy::floor`]), neither
//!    before the wait for a pooled connection (it does not wait for one it could not use) nor
//!    after it (the wait counts against the deadline like any other, and is bounded by it):
//!    the result is [`Error::DeadlineExceeded`] or the shortfall's error
//!    ([`Error::InsufficientTime`]). Inside a
//!    [`Dependency::run`](deadline_core::Dependency::run) attempt, a query not started ends
//!    the attempt as never sent: the breaker does not count it; when what was short was the
//!    call's time, no retry or hedge follows and the call answers
//!    [`Error::DeadlineExceeded`] (or an earlier attempt's failure), and when it was only the
//!    attempt's cap (an attempt starting then could start the query), the attempt ran out
//!    of time, and is retried as a timeout is;
//! 2. runs in a transaction whose `SET LOCAL statement_timeout` is the time left, less the
//!    policy's margin, capped ([`decide_statement`]). PostgreSQL times a statement's parse
//!    and its run apart, and sqlx parses a statement the first time a connection runs it
//!    (its statement cache skips the parse after): a first parse that waits behind a lock
//!    leaves the run the whole timeout again, past the deadline, where the query is then
//!    cancelled (3) rather than ended by the server itself. (The `postgres` adapter sets what
//!    is left of the timeout before the run.) PostgreSQL does not time a `COMMIT`, so the
//!    deferred constraints are checked before it
//!    ([`CHECK_DEFERRED_CONSTRAINTS`](deadline_core::statement::CHECK_DEFERRED_CONSTRAINTS)), under
//!    what is left of the timeout (at least a millisecond), set again, in the `COMMIT`'s
//!    message;
//! 3. is cancelled on the server the moment its future is dropped before it is done (the
//!    caller left, the deadline passed, a hedge lost): a task on the runtime keeps the
//!    connection, runs `pg_cancel_backend` on its backend from another connection (an idle
//!    one of the pool, or a new one with the pool's options when none is idle), then
//!    `ROLLBACK` and `SELECT 1` on the connection, and only then lets it go back to the pool.
//!    `pg_cancel_backend` has signalled the backend when it answers, and by the settle's
//!    answers the signal has been taken, so it never reaches a later query. A cancel that
//!    fails, or a settle that fails or does not answer within
//!    [`CANCEL_LIMIT`], closes the connection instead (counted
//!    in [`cancels`], and a `tracing` warning under feature `tracing`);
//! 4. reports SQLSTATE 57014 (`query_canceled`: the statement timeout fired) that comes once
//!    the timeout could have fired as the library's timeout, [`Error::Timeout`] (one before
//!    then is a cancel of someone else's, the database's error; the core's rule:
//!    [`StatementTimeout::error_of`](deadline_core::statement::StatementTimeout::error_of)),
//!    and the deadline passing as [`Error::DeadlineExceeded`];
//!    inside a [`Dependency::run`](deadline_core::Dependency::run) attempt, whose error it
//!    becomes, the call counts it as the attempt's timeout and answers `Error::Timeout` if it
//!    gives up, never a failed dependency.
//!
//! The backend's process id, which the cancel needs, and when its server started, which keeps
//! the cancel off another server behind the same address, come back with the transaction's
//! first round trip (`BEGIN; SET LOCAL ...; SELECT pg_backend_pid(), ...`): no round trip of
//! their own. A cancel that reaches another server counts as failed, and the connection is
//! closed.
//!
//! What to know before using it:
//!
//! - **Connect the pool to PostgreSQL itself, or through a proxy that pools by session.** A
//!   proxy that pools by transaction (PgBouncer's `pool_mode = transaction`, RDS Proxy,
//!   Supavisor's transaction mode) hands the backend to another client once the transaction
//!   ends, and `pg_cancel_backend` names a backend, not a query: a call dropped after its
//!   transaction ended on the server, before its answer arrived, would cancel another
//!   client's query. (The `postgres` adapter's cancel request is the protocol's, which such a
//!   proxy routes itself.)
//! - **A string of several statements**, passed as the query itself (a `&str`, which sqlx
//!   sends as one simple query; `sqlx::query` sends one statement), is timed statement by
//!   statement: PostgreSQL (13 and later) gives each of them the whole statement timeout:
//!   the deadline's cancel ends it, as [`Error::DeadlineExceeded`] rather than the
//!   timeout. Do not put `COMMIT` or `ROLLBACK` in it: it would end the library's
//!   transaction, and the statements after it would run under the role's own timeout.
//! - **[`Error::DeadlineExceeded`] does not say the query's changes were not committed:**
//!   a call dropped, or a deadline that passed, after the server ran the `COMMIT` but before
//!   its answer arrived leaves them committed (as does a `COMMIT` that waits for a
//!   synchronous standby, which a cancel does not undo). Retry a write only when it is
//!   idempotent, or check first.
//!
//! Inside a [`Dependency`](deadline_core::Dependency)'s call (for retries, a breaker), give
//! the call [`classify`]: `DB.run(|_| ..).classify(sqlx::classify)`. The default reads every
//! error as a failure a retry may fix: a duplicate key would be retried, and held against the
//! breaker.
//!
//! ```no_run
//! use deadline_core::ms;
//! use deadline_core::statement::StatementPolicy;
//! use deadline_tokio::scope_timeout;
//! use deadline_tokio::sqlx::{self as db, SqlxError};
//! use sqlx::PgPool;
//!
//! // At most 300 ms per query; with under 25 ms left (the 20 ms floor plus the 5 ms margin),
//! // do not start.
//! const ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).with_floor(ms(20));
//!
//! # async fn run(pool: &PgPool) -> Result<(), SqlxError> {
//! let rows = scope_timeout(ms(250), async {
//!     let query = sqlx::query("SELECT id FROM orders WHERE user_id = $1").bind(42_i64);
//!     db::fetch_all(pool, &ORDERS, query).await
//! })
//! .await??;
//! # let _ = rows;
//! # Ok(())
//! # }
//! ```
//!
//! [`decide_statement`]: crate::low_level::decide_statement

use core::fmt;
use std::pin::Pin;

use ::sqlx::pool::PoolConnection;
use ::sqlx::postgres::{PgConnection, PgPool, PgQueryResult, PgRow, Postgres};
use ::sqlx::{Connection, Execute, Executor, Row};
use deadline_core::statement::{
    StatementDecision, StatementPolicy, grpc_code_of_sqlstate, outcome_of_sqlstate,
};
use deadline_core::wire::GrpcCode;
use deadline_core::{Clock, Error, Outcome};

use crate::clock::TokioClock;
use crate::context::within_current;
use crate::database::{CANCEL_LIMIT, CancelCounts, Cancels};
use crate::statement::{Sending, TimeoutSet, decide};

/// The error of a query run under the deadline.
#[derive(Debug)]
#[non_exhaustive]
pub enum SqlxError {
    /// The deadline's: no pooled connection in time or the query not started (too little
    /// time left: [`Error::InsufficientTime`]), its statement timeout fired on the server
    /// (SQLSTATE 57014: [`Error::Timeout`]), or the deadline passed while it waited or ran
    /// ([`Error::DeadlineExceeded`]; the query was cancelled on the server). Each maps to 504
    /// and gRPC `DEADLINE_EXCEEDED`.
    Deadline(Error),
    /// sqlx's own error: the database's, the connection's or the pool's.
    Db(::sqlx::Error),
}

/// The library's error (a scope cut at its deadline, say) is the deadline's, so that
/// `scope_timeout(..).await??` reads as one error.
impl From<Error> for SqlxError {
    fn from(error: Error) -> Self {
        SqlxError::Deadline(error)
    }
}

impl SqlxError {
    /// The deadline's error, if that is what this is.
    #[must_use]
    pub fn deadline(&self) -> Option<Error> {
        match self {
            SqlxError::Deadline(error) => Some(*error),
            SqlxError::Db(_) => None,
        }
    }

    /// The gRPC code that answers the caller for this error: the deadline's
    /// (`DEADLINE_EXCEEDED`), the database's by its SQLSTATE
    /// ([`grpc_code_of_sqlstate`]: a unique violation is
    /// `ALREADY_EXISTS`, a serialization failure `ABORTED`, ...), no connection to be had
    /// (the pool's wait ran out, the pool closed, the socket failed) `UNAVAILABLE`, and any
    /// other of sqlx's `INTERNAL`.
    #[must_use]
    pub fn grpc_code(&self) -> GrpcCode {
        match self {
            SqlxError::Deadline(error) => error.grpc_code(),
            SqlxError::Db(::sqlx::Error::Database(db)) => {
                grpc_code_of_sqlstate(db.code().as_deref().map(str::as_bytes))
            }
            SqlxError::Db(
                ::sqlx::Error::PoolTimedOut | ::sqlx::Error::PoolClosed | ::sqlx::Error::Io(_),
            ) => GrpcCode::Unavailable,
            SqlxError::Db(_) => GrpcCode::Internal,
        }
    }
}

/// How an attempt that failed with `error` ended, for a
/// [`Dependency`](deadline_core::Dependency)'s call: `.classify(sqlx::classify)`. The
/// deadline's error is the attempt's timeout ([`Outcome::TimedOut`]); the database's is read
/// by its SQLSTATE ([`outcome_of_sqlstate`]: a serialization failure or a deadlock
/// [`Outcome::Refused`], run again; a constraint violation or bad data [`Outcome::Fatal`],
/// final). Of sqlx's own: the pool's wait running out (`PoolTimedOut`: nothing was sent)
/// [`Outcome::Refused`]; the connection's errors (`Io`, `Tls`, `Protocol`, `WorkerCrashed`)
/// [`Outcome::Failed`] (the query may have run); no row (`RowNotFound`) and a closed pool
/// [`Outcome::Fatal`]; any other (a column that does not decode, say) [`Outcome::Broken`].
///
/// For an attempt that runs one query (each query here is a transaction of its own, and
/// waits for its pooled connection first): a serialization failure, or the pool's wait
/// running out, says that query did nothing, not that an earlier query of the same attempt,
/// committed, did nothing. An attempt of several queries classifies its errors itself.
///
/// ```
/// use deadline_core::{Error, Outcome};
/// use deadline_tokio::sqlx::{SqlxError, classify};
///
/// assert_eq!(classify(&SqlxError::Deadline(Error::DeadlineExceeded)), Outcome::TimedOut);
/// assert_eq!(classify(&SqlxError::Db(sqlx::Error::PoolTimedOut)), Outcome::Refused);
/// assert_eq!(classify(&SqlxError::Db(sqlx::Error::RowNotFound)), Outcome::Fatal);
/// ```
#[must_use]
pub fn classify(error: &SqlxError) -> Outcome {
    match error {
        SqlxError::Deadline(_) => Outcome::TimedOut,
        SqlxError::Db(::sqlx::Error::Database(db)) => {
            outcome_of_sqlstate(db.code().as_deref().map(str::as_bytes))
        }
        SqlxError::Db(::sqlx::Error::PoolTimedOut) => Outcome::Refused,
        SqlxError::Db(
            ::sqlx::Error::Io(_)
            | ::sqlx::Error::Tls(_)
            | ::sqlx::Error::Protocol(_)
            | ::sqlx::Error::WorkerCrashed,
        ) => Outcome::Failed,
        SqlxError::Db(::sqlx::Error::RowNotFound | ::sqlx::Error::PoolClosed) => Outcome::Fatal,
        SqlxError::Db(_) => Outcome::Broken,
    }
}

/// `?` in an axum or hyper handler: the deadline's error is its status (504), the database's
/// by its SQLSTATE ([`SqlxError::grpc_code`], as the Connect protocol maps it to HTTP: a unique
/// violation 409, bad input 400, one it does not name 500), no connection to be had 503.
///
/// A bare status, with no body: what a plain HTTP client reads. A Connect client reads only
/// some statuses as their codes (a bare 409 is `unknown` to it), so a handler that serves
/// Connect answers with its own error type, made from [`SqlxError::grpc_code`].
#[cfg(feature = "tower")]
impl From<SqlxError> for http::StatusCode {
    fn from(error: SqlxError) -> Self {
        match error {
            SqlxError::Deadline(error) => error.into(),
            SqlxError::Db(_) => crate::database::http_status(error.grpc_code()),
        }
    }
}

/// `?` in a tonic handler: the deadline's error is its status (`DEADLINE_EXCEEDED`), the
/// database's by its SQLSTATE ([`SqlxError::grpc_code`]), with sqlx's text of the error (which
/// holds the database's message: a constraint's name, say).
#[cfg(feature = "tonic")]
impl From<SqlxError> for tonic::Status {
    fn from(error: SqlxError) -> Self {
        match error {
            SqlxError::Deadline(error) => error.into(),
            SqlxError::Db(_) => crate::database::grpc_status(error.grpc_code(), error.to_string()),
        }
    }
}

impl fmt::Display for SqlxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlxError::Deadline(error) => error.fmt(f),
            SqlxError::Db(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SqlxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SqlxError::Deadline(error) => Some(error),
            SqlxError::Db(error) => Some(error),
        }
    }
}

/// Runs `query` on a connection of `pool` and returns its rows, under the current deadline
/// (see the [module](self)). Outside any [`scope`](crate::scope) the statement timeout is the
/// policy's cap and nothing is bounded.
///
/// # Errors
///
/// [`SqlxError::Deadline`] for no connection in time, a query not started, timed out or cut
/// at the deadline; [`SqlxError::Db`] for anything else sqlx reports.
pub async fn fetch_all<'q, E>(
    pool: &PgPool,
    policy: &StatementPolicy,
    query: E,
) -> Result<Vec<PgRow>, SqlxError>
where
    E: 'q + Execute<'q, Postgres>,
{
    run(pool, policy, query, Kind::Rows)
        .await
        .map(|done| match done {
            Done::Rows(rows) => rows,
            Done::Count(_) => Vec::new(),
        })
}

/// Runs `query` on a connection of `pool` and returns the number of rows it changed, under
/// the current deadline, as [`fetch_all`] does.
///
/// # Errors
///
/// As [`fetch_all`].
pub async fn execute<'q, E>(
    pool: &PgPool,
    policy: &StatementPolicy,
    query: E,
) -> Result<u64, SqlxError>
where
    E: 'q + Execute<'q, Postgres>,
{
    run(pool, policy, query, Kind::Count)
        .await
        .map(|done| match done {
            Done::Rows(rows) => rows.len() as u64,
            Done::Count(count) => count,
        })
}

enum Kind {
    Rows,
    Count,
}

enum Done {
    Rows(Vec<PgRow>),
    Count(u64),
}

async fn run<'q, E>(
    pool: &PgPool,
    policy: &StatementPolicy,
    query: E,
    kind: Kind,
) -> Result<Done, SqlxError>
where
    E: 'q + Execute<'q, Postgres>,
{
    // Too little time already: no wait for a connection that could not be used. (Nothing is
    // sent yet: the statement timeout is decided, and noted as sent, once a connection is
    // there.)
    if let (StatementDecision::DontStart(shortfall), _) = decide(policy, Sending::Later) {
        return Err(SqlxError::Deadline(shortfall.error()));
    }
    let conn = within_current(pool.acquire())
        .await
        .map_err(SqlxError::Deadline)?
        .map_err(SqlxError::Db)?;
    // Decided again once the connection is there: the wait for it has used some of the time.
    let (timeout, decided) = match decide(policy, Sending::Now) {
        (StatementDecision::Set(timeout), decided) => (timeout, decided),
        (StatementDecision::DontStart(shortfall), _) => {
            return Err(SqlxError::Deadline(shortfall.error()));
        }
    };
    // Armed until the transaction is over: dropped before that, it hands the connection to a
    // task that cancels the query and settles the cancel.
    let mut held = Held {
        conn: Some(conn),
        backend: None,
        pool: pool.clone(),
    };
    let Held { conn, backend, .. } = &mut held;
    let Some(conn) = conn.as_mut() else {
        unreachable!("the connection was just put there")
    };
    // `BEGIN` and the statement timeout, in one round trip that also reads which backend of
    // which server runs the query.
    let begin = format!("BEGIN; {timeout}; SELECT pg_backend_pid(), {SERVER_START}");
    // The timeout in force, and when it was set: by it an error is judged.
    let mut in_force = TimeoutSet::whole(timeout, decided);
    let work = async {
        let row = conn.fetch_one(begin.as_str()).await?;
        *backend = Some(Backend {
            pid: row.try_get(0)?,
            server_start: row.try_get(1)?,
        });
        let done = match kind {
            Kind::Rows => Done::Rows(conn.fetch_all(query).await?),
            Kind::Count => Done::Count(conn.execute(query).await?.rows_affected()),
        };
        // The deferred constraints, checked under what is left of the timeout, set again,
        // then `COMMIT` (which PostgreSQL does not time), in one message.
        in_force = in_force.check();
        simple(conn, &format!("{}; COMMIT", in_force.check_deferred())).await?;
        Ok::<_, ::sqlx::Error>(done)
    };
    // The deadline passing drops the work, and `held`, armed, on the way out.
    let done = within_current(work).await.map_err(SqlxError::Deadline)?;
    // When an error came back, before the `ROLLBACK` after it takes its own time.
    let ended = TokioClock.now();
    if done.is_err() {
        // The transaction failed (or never began): end it before the pool has it back.
        let _ = simple(conn, "ROLLBACK").await;
    }
    held.release();
    done.map_err(|error| {
        let code = error.as_database_error().and_then(|e| e.code());
        match code.and_then(|code| in_force.timeout_error(code.as_bytes(), ended)) {
            Some(timed_out) => SqlxError::Deadline(timed_out),
            None => SqlxError::Db(error),
        }
    })
}

/// A pooled connection during a query. Released, it goes back to the pool; dropped
/// unreleased, to a task that cancels the query and settles the cancel first.
struct Held {
    conn: Option<PoolConnection<Postgres>>,
    /// The backend, once the transaction's first round trip has answered.
    backend: Option<Backend>,
    pool: PgPool,
}

/// The backend a query runs on: its process id, and when its server started, which tells that
/// server from another behind the same address (a load balancer, a name for several hosts).
struct Backend {
    pid: i32,
    server_start: i64,
}

/// When the server started, in whole microseconds since the epoch: a number, the same in
/// every session whatever its time zone or date style (the text of a timestamp is not).
const SERVER_START: &str = "(extract(epoch from pg_postmaster_start_time()) * 1000000)::int8";

impl Held {
    fn release(mut self) {
        // Dropped: back to the pool.
        self.conn = None;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to cancel on: the connection is dropped with no cancel sent, so none
            // can reach a later query; the statement timeout ends the query.
            return;
        };
        runtime.spawn(settle(conn, self.backend.take(), self.pool.clone()));
    }
}

/// Cancels the query `conn` was running when its future was dropped, waits until the cancel
/// has settled, and lets the connection go back to the pool; closes it when the cancel fails,
/// or the settle fails or does not answer within [`CANCEL_LIMIT`].
async fn settle(mut conn: PoolConnection<Postgres>, backend: Option<Backend>, pool: PgPool) {
    if let Some(backend) = backend {
        // Without it the transaction's first round trip never answered: nothing but it has
        // run, and no cancel is needed.
        let sent = tokio::time::timeout(CANCEL_LIMIT, cancel_backend(&pool, &backend))
            .await
            .unwrap_or_else(|_| Err(::sqlx::Error::PoolTimedOut));
        let failed = match sent {
            Ok(true) => None,
            Ok(false) => Some(
                "a dropped query's cancel reached another server, or no such backend".to_owned(),
            ),
            Err(error) => Some(format!("a dropped query's cancel failed: {error}")),
        };
        if let Some(why) = failed {
            COUNTS.failed();
            close(conn, &why);
            return;
        }
        COUNTS.sent();
    }
    let settled = async {
        // The transaction's end (its warning when there is none is harmless). The first try
        // may answer with the dropped query's own error, which sqlx reads first: then once
        // more.
        for _ in 0..2 {
            if simple(&mut conn, "ROLLBACK").await.is_ok() {
                break;
            }
        }
        simple(&mut conn, "SELECT 1").await
    };
    match tokio::time::timeout(CANCEL_LIMIT, settled).await {
        // Dropped here: back to the pool, settled.
        Ok(Ok(_)) => {}
        Ok(Err(error)) => close(conn, &format!("the settle after a cancel failed: {error}")),
        Err(_) => close(
            conn,
            "the settle after a cancel did not answer within the cancel limit",
        ),
    }
}

/// Closes `conn` instead of returning it to the pool, and says why.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
fn close(mut conn: PoolConnection<Postgres>, why: &str) {
    COUNTS.closed();
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "deadline_tokio::sqlx", "{why}: the connection is closed");
    conn.close_on_drop();
}

/// Signals the backend with `pg_cancel_backend` from another connection: an idle one of the
/// pool, or a new one with the pool's options. True when that connection reached the
/// backend's server and the signal was sent; false when it reached another server (the
/// pool's address leads to several) or no such backend.
async fn cancel_backend(pool: &PgPool, backend: &Backend) -> Result<bool, ::sqlx::Error> {
    match pool.try_acquire() {
        Some(mut other) => signal(&mut other, backend).await,
        None => {
            let mut other = PgConnection::connect_with(&pool.connect_options()).await?;
            let sent = signal(&mut other, backend).await;
            let _ = other.close().await;
            sent
        }
    }
}

// The statements, each a boxed `Send` future over one connection's borrow (sqlx's executor
// futures, awaited in a generic `async fn`, are not provably `Send` to the compiler).

/// One statement, or several, with no parameters, over the simple query protocol.
fn simple<'c>(conn: &'c mut PgConnection, sql: &'c str) -> Statement<'c, PgQueryResult> {
    conn.execute(sql)
}

/// `pg_cancel_backend(pid)` on the backend's server only: true when the signal was sent.
fn signal<'c>(conn: &'c mut PgConnection, backend: &'c Backend) -> Statement<'c, bool> {
    Box::pin(async move {
        let sql = format!("SELECT pg_cancel_backend($1) WHERE {SERVER_START} = $2");
        let row = ::sqlx::query(&sql)
            .bind(backend.pid)
            .bind(backend.server_start)
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) => row.try_get(0),
            None => Ok(false),
        }
    })
}

type Statement<'c, T> = Pin<Box<dyn Future<Output = Result<T, ::sqlx::Error>> + Send + 'c>>;

static COUNTS: CancelCounts = CancelCounts::new();

/// What became of this process's cancels of dropped sqlx queries so far.
#[must_use]
pub fn cancels() -> Cancels {
    COUNTS.read()
}
