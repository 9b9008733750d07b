//! PostgreSQL queries under the current deadline (feature `postgres`, on tokio-postgres).
//!
//! The database is the last hop of a request, and the one most likely to keep working for
//! nobody: dropping a tokio-postgres future stops the wait, not the query, which runs on in
//! the server until it ends or its statement timeout fires. So a query run here:
//!
//! 1. is not started when too little time is left ([`StatementPolicy::floor`]): the result
//!    is the shortfall's error ([`Error::InsufficientTime`]);
//! 2. runs in a transaction whose `SET LOCAL statement_timeout` is the time left, capped
//!    ([`statement_timeout`]): `SET LOCAL` applies to the
//!    transaction only, and does nothing outside one;
//! 3. is cancelled on the server, with the connection's [`CancelToken`], the moment its future
//!    is dropped before it is done: the caller left, the deadline passed (the future is
//!    bounded by the current deadline), a hedge lost. The cancel request is spawned on the
//!    runtime, so drop never blocks; the transaction is rolled back, and the connection can
//!    go back to its pool;
//! 4. reports SQLSTATE 57014 (`query_canceled`: the statement timeout fired) as the library's
//!    timeout, [`Error::Timeout`], and the deadline passing as [`Error::DeadlineExceeded`].
//!
//! A pooled client (deadpool-postgres's `Object`, bb8's `PooledConnection`) dereferences to a
//! [`tokio_postgres::Client`]: pass `&mut client` as it is. The wait for a connection counts
//! against the deadline too: bound it with [`checkout`].
//!
//! ```no_run
//! use deadline_core::{StatementPolicy, ms};
//! use deadline_tokio::postgres::{self, PgError};
//! use deadline_tokio::scope_timeout;
//!
//! // At most 300 ms per query; under 20 ms left, do not start.
//! const ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).floor(ms(20));
//!
//! # async fn run(client: &mut tokio_postgres::Client) -> Result<(), PgError> {
//! let rows = scope_timeout(ms(250), async {
//!     postgres::query(client, &ORDERS, "SELECT id FROM orders WHERE user_id = $1", &[&42_i64])
//!         .await
//! })
//! .await?;
//! # let _ = rows;
//! # Ok(())
//! # }
//! ```

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use deadline_core::{Deadline, Error, StatementDecision, StatementPolicy};
use tokio::time::Sleep;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use crate::clock::to_tokio;
use crate::context::current_or_never;
use crate::statement_timeout;

mod cancel;
mod database;
mod session;

pub use cancel::{CancelSocket, CancelTls};
pub use database::{CANCEL_LIMIT, Cancels, Database};
pub use session::Session;

/// The error of a query run under the deadline.
#[derive(Debug)]
#[non_exhaustive]
pub enum PgError {
    /// The deadline's: the query was not started (too little time left:
    /// [`Error::InsufficientTime`]), its statement timeout fired on the server (SQLSTATE
    /// 57014: [`Error::Timeout`]), or the deadline passed while it ran
    /// ([`Error::DeadlineExceeded`]; the query was cancelled on the server). Each maps to 504
    /// and gRPC `DEADLINE_EXCEEDED`.
    Deadline(Error),
    /// The database's own error (or the connection's).
    Db(tokio_postgres::Error),
    /// The [`Session`] has no connection any more: the task that settled a dropped query's
    /// cancel ended without giving it back (its runtime shut down).
    Lost,
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

/// Runs `statement` with `params` and returns its rows, under the current deadline: in a
/// transaction with `SET LOCAL statement_timeout` from the time left (see `policy`),
/// committed when it succeeds, cancelled on the server if the future is dropped first (see
/// the [module](self)). Outside any [`scope`](crate::scope) the statement timeout is the
/// policy's cap and the future is not bounded.
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
    let timeout = match statement_timeout(policy) {
        StatementDecision::Set(timeout) => timeout,
        StatementDecision::DontStart(shortfall) => {
            return Err(PgError::Deadline(shortfall.error()));
        }
    };
    let deadline = current_or_never();
    let work = async {
        let transaction = client.transaction().await?;
        transaction.batch_execute(&timeout.to_string()).await?;
        let done = match kind {
            Kind::Query => Done::Rows(transaction.query(statement, params).await?),
            Kind::Execute => Done::Count(transaction.execute(statement, params).await?),
        };
        transaction.commit().await?;
        Ok::<_, tokio_postgres::Error>(done)
    };
    let result = if deadline == Deadline::NEVER {
        Ok(work.await)
    } else {
        tokio::time::timeout_at(to_tokio(deadline.instant()), work).await
    };
    match result {
        // The deadline passed: the work is dropped (its transaction's drop queues a
        // `ROLLBACK` behind the query), and the query ends at its statement timeout.
        Err(_elapsed) => Err(PgError::Deadline(Error::DeadlineExceeded)),
        Ok(done) => done.map_err(|error| {
            if error.code() == Some(&SqlState::QUERY_CANCELED) {
                PgError::Deadline(Error::Timeout {
                    after: timeout.as_duration(),
                })
            } else {
                PgError::Db(error)
            }
        }),
    }
}

/// Bounds the wait for a pooled connection (`pool.get()` of deadpool-postgres or bb8, or any
/// future) by the current deadline: the wait counts against the request's budget like any
/// other. The deadline is read when the future is first polled. Outside any
/// [`scope`](crate::scope) the wait is not bounded.
///
/// ```
/// use deadline_core::{Error, ms};
/// use deadline_tokio::postgres::checkout;
/// use deadline_tokio::scope_timeout;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // A pool with no connection free: its `get()` never resolves.
/// let get = std::future::pending::<Result<(), ()>>();
/// let waited = scope_timeout(ms(50), checkout(get)).await;
/// assert_eq!(waited, Err(Error::DeadlineExceeded));
/// # }
/// ```
pub fn checkout<F: Future>(get: F) -> Checkout<F> {
    Checkout {
        started: false,
        sleep: None,
        get,
    }
}

pin_project_lite::pin_project! {
    /// The future returned by [`checkout`]: the wait, or [`Error::DeadlineExceeded`] at the
    /// deadline.
    #[must_use = "futures do nothing unless polled"]
    pub struct Checkout<F> {
        // Whether the deadline has been read: at the first poll, where the scope is.
        started: bool,
        #[pin]
        sleep: Option<Sleep>,
        #[pin]
        get: F,
    }
}

impl<F: Future> Future for Checkout<F> {
    type Output = Result<F::Output, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if !*this.started {
            *this.started = true;
            let deadline = current_or_never();
            if deadline != Deadline::NEVER {
                this.sleep
                    .set(Some(tokio::time::sleep_until(to_tokio(deadline.instant()))));
            }
        }
        if let Poll::Ready(out) = this.get.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        match this.sleep.as_pin_mut().map(|sleep| sleep.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Err(Error::DeadlineExceeded)),
            _ => Poll::Pending,
        }
    }
}
