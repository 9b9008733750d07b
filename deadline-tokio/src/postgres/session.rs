//! A connection held for queries under the current deadline: cancelled on the server when
//! dropped, and not used again until the cancel has settled.

use std::fmt;

use deadline_core::statement::{StatementDecision, StatementPolicy};
use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use std::ops::Deref;

use tokio_postgres::Socket;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};

use super::cancel::CancelTls;
use super::database::Database;
use super::{Done, Kind, PgError, parse_then_run};
use crate::context::within_current;
use crate::statement::TimeoutSet;
use crate::statement::{Sending, decide};

/// A connection for queries under the current deadline, each cancelled on the server when its
/// future is dropped before it is done. Made by [`Database::connect`], [`Database::session`]
/// or [`Database::session_with`] (see the [module](super) for the rules).
///
/// A session holds its connection: when a query's future is dropped (the deadline passed, the
/// caller left, a hedge lost), a task on the runtime takes the connection, cancels the query,
/// waits until the cancel has settled, and gives the connection back. The session's next
/// query (or [`Session::connection`]) waits for it, within its deadline; a session dropped
/// meanwhile drops the connection once it is settled (a pooled one goes back to its pool
/// then, not before).
pub struct Session<C, M> {
    db: Database<M>,
    client: fn(&C) -> &Client,
    slot: Slot<C>,
}

enum Slot<C> {
    /// The connection, idle.
    Ready(C),
    /// A dropped query's cancel is settling; the connection comes back through this.
    Settling(oneshot::Receiver<Option<C>>),
    /// The task that settles a cancel did not give the connection back: its runtime shut
    /// down, or the connection did not settle or close within the cancel limit.
    Lost,
}

impl<C, M> fmt::Debug for Session<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.slot {
            Slot::Ready(_) => "ready",
            Slot::Settling(_) => "settling a cancel",
            Slot::Lost => "lost",
        };
        f.debug_struct("Session").field("state", &state).finish()
    }
}

impl<C: Send + 'static, M: CancelTls> Session<C, M> {
    pub(super) fn new(conn: C, client: fn(&C) -> &Client, db: Database<M>) -> Self {
        Session {
            db,
            client,
            slot: Slot::Ready(conn),
        }
    }

    /// Runs `statement` with `params` and returns its rows, under the current deadline: in a
    /// transaction with `SET LOCAL statement_timeout` from the time left (see `policy`),
    /// committed when it succeeds, cancelled on the server if the future is dropped first.
    /// Outside any [`scope`](crate::scope) the statement timeout is the policy's cap and the
    /// future is not bounded.
    ///
    /// # Errors
    ///
    /// [`PgError::Deadline`] for a query not started, timed out or cut at the deadline (also
    /// when the deadline passes while a cancel before it settles); [`PgError::Db`] for
    /// anything else the database or the connection reports; [`PgError::Lost`] when the
    /// session has no connection any more.
    pub async fn query(
        &mut self,
        policy: &StatementPolicy,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, PgError> {
        self.run(policy, statement, params, Kind::Query)
            .await
            .map(Done::rows)
    }

    /// Runs `statement` with `params` and returns the number of rows it changed, under the
    /// current deadline, as [`Session::query`] does.
    ///
    /// # Errors
    ///
    /// As [`Session::query`].
    pub async fn execute(
        &mut self,
        policy: &StatementPolicy,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, PgError> {
        self.run(policy, statement, params, Kind::Execute)
            .await
            .map(Done::count)
    }

    /// The connection itself, for work of your own (prepared statements, `COPY`, a
    /// transaction of several statements): once any cancel has settled, waiting within the
    /// current deadline. Work done through it is not cancelled when dropped; bound it with a
    /// statement timeout of its own.
    ///
    /// # Errors
    ///
    /// [`PgError::Deadline`] when the deadline passes first; [`PgError::Lost`] when the
    /// session has no connection any more.
    pub async fn connection(&mut self) -> Result<&mut C, PgError> {
        self.settled().await?;
        match &mut self.slot {
            Slot::Ready(conn) => Ok(conn),
            Slot::Settling(_) | Slot::Lost => Err(PgError::Lost),
        }
    }

    /// Waits, within the current deadline, until no cancel is settling.
    async fn settled(&mut self) -> Result<(), PgError> {
        if let Slot::Settling(back) = &mut self.slot {
            // The receiver stays in the slot while it waits: a caller that leaves now leaves
            // the session as it was.
            let back = within_current(back).await.map_err(PgError::Deadline)?;
            self.slot = match back {
                Ok(Some(conn)) => Slot::Ready(conn),
                // A connection closed after its cancel or its settle failed, one that did not
                // settle or close within the cancel limit (it is held until it does, then
                // dropped), or a runtime that shut down.
                Ok(None) | Err(_) => Slot::Lost,
            };
        }
        Ok(())
    }

    async fn run(
        &mut self,
        policy: &StatementPolicy,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
        kind: Kind,
    ) -> Result<Done, PgError> {
        self.settled().await?;
        let Slot::Ready(conn) = std::mem::replace(&mut self.slot, Slot::Lost) else {
            return Err(PgError::Lost);
        };
        // Decided once the connection is free: the wait for it has used some of the time.
        let (timeout, decided) = match decide(policy, Sending::Now) {
            (StatementDecision::Set(timeout), decided) => (timeout, decided),
            (StatementDecision::DontStart(shortfall), _) => {
                self.slot = Slot::Ready(conn);
                return Err(PgError::Deadline(shortfall.error()));
            }
        };
        // Armed until the transaction is over: dropped before that, it hands the connection to
        // a task that cancels the query and settles the cancel.
        let held = Held {
            slot: &mut self.slot,
            conn: Some(conn),
            client: self.client,
            db: &self.db,
        };
        let client = held.client();
        let work = async {
            let (done, rest) = parse_then_run(
                client,
                &format!("BEGIN; {timeout}"),
                TimeoutSet::whole(timeout, decided),
                statement,
                params,
                kind,
            )
            .await?;
            // The deferred constraints, checked under what is left of the timeout, set
            // again, then `COMMIT` (which PostgreSQL does not time), in one message.
            let check = rest.check();
            client
                .batch_execute(&format!("{}; COMMIT", check.check_deferred()))
                .await
                .map_err(|error| check.error(error))?;
            Ok::<_, PgError>(done)
        };
        let done = match within_current(work).await {
            // The deadline passed: the work is dropped, and so is `held`, armed.
            Err(deadline) => return Err(PgError::Deadline(deadline)),
            Ok(done) => done,
        };
        if done.is_err() {
            // The transaction failed (or never began): end it before the next query.
            let _ = client.batch_execute("ROLLBACK").await;
        }
        held.release();
        done
    }
}

/// A session's connection during a query. Released, it goes back to the session; dropped
/// unreleased, to a task that cancels the query and settles the cancel first.
struct Held<'a, C: Send + 'static, M: CancelTls> {
    slot: &'a mut Slot<C>,
    conn: Option<C>,
    client: fn(&C) -> &Client,
    db: &'a Database<M>,
}

impl<C: Send + 'static, M: CancelTls> Held<'_, C, M> {
    fn client(&self) -> &Client {
        match &self.conn {
            Some(conn) => (self.client)(conn),
            None => unreachable!("a held connection is there until released or dropped"),
        }
    }

    fn release(mut self) {
        if let Some(conn) = self.conn.take() {
            *self.slot = Slot::Ready(conn);
        }
    }
}

impl<C: Send + 'static, M: CancelTls> Drop for Held<'_, C, M> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to cancel on (it is shutting down): the connection is dropped, with
            // no cancel sent, so none can reach a later query; the statement timeout ends the
            // query.
            return;
        };
        let (back, settled) = oneshot::channel();
        *self.slot = Slot::Settling(settled);
        let db = self.db.clone();
        let client = self.client;
        runtime.spawn(async move { db.settle(conn, client, back).await });
    }
}

/// A [`Database`]'s sessions: over a connection of their own, or over one of a pool.
impl<M: CancelTls> Database<M> {
    /// Opens a connection of its own, with the configuration and TLS connector given to
    /// [`Database::new`], and returns a session over it. The connection's task is spawned on
    /// the current runtime.
    ///
    /// # Errors
    ///
    /// The connect's error.
    pub async fn connect(&self) -> Result<Session<Client, M>, tokio_postgres::Error>
    where
        M: MakeTlsConnect<
                Socket,
                Stream: Send + 'static,
                TlsConnect: TlsConnect<Socket, Future: Send> + Send,
            >,
    {
        let (client, connection) = self.config().connect(self.tls().clone()).await?;
        tokio::spawn(async move {
            // The connection's end is the client's error to report.
            let _ = connection.await;
        });
        Ok(self.session_with(client, |client| client))
    }

    /// A session over `conn`, a connection handle that dereferences to a
    /// [`tokio_postgres::Client`]: bb8's `PooledConnection` (from `get_owned`), a
    /// `Box<Client>`. When the session is dropped (and any cancel it sent has settled), the
    /// handle is dropped: a pooled connection goes back to its pool.
    ///
    /// For other handles, [`Database::session_with`].
    pub fn session<C>(&self, conn: C) -> Session<C, M>
    where
        C: Deref<Target = Client> + Send + 'static,
    {
        self.session_with(conn, |conn| conn)
    }

    /// A session over `conn`, whose `Client` `client` reaches. For deadpool-postgres's
    /// `Object`, which dereferences to its `ClientWrapper` and that to the `Client`,
    /// `|object| object` (the compiler dereferences twice); for a `Client` of your own,
    /// `|client| client`.
    ///
    /// ```no_run
    /// use deadline_tokio::postgres::Database;
    /// use tokio_postgres::{Client, NoTls};
    ///
    /// # fn run(db: Database<NoTls>, client: Client) {
    /// let session = db.session_with(client, |client| client);
    /// # let _ = session;
    /// # }
    /// ```
    pub fn session_with<C>(&self, conn: C, client: fn(&C) -> &Client) -> Session<C, M>
    where
        C: Send + 'static,
    {
        Session::new(conn, client, self.clone())
    }
}
