//! The database a session's cancels go to: its address, its TLS connector, and what became of
//! each cancel.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config};

use super::cancel::{CancelTls, Target, cancel};
use crate::database::{CANCEL_LIMIT, CancelCounts, Cancels};

/// A PostgreSQL database, as [`Session`](super::Session)s reach it to cancel a dropped query: the server's
/// address (from the `tokio_postgres::Config` the connections use) and their TLS connector.
/// Cheap to clone; make one at start-up, beside the pool.
///
/// ```no_run
/// use deadline_tokio::postgres::Database;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config: tokio_postgres::Config = "host=db.internal user=app dbname=shop".parse()?;
/// // The connector the connections use (here none; with TLS, the same `MakeTlsConnect`).
/// let db = Database::new(&config, tokio_postgres::NoTls)?;
/// let mut session = db.connect().await?;
/// # let _ = &mut session;
/// # Ok(())
/// # }
/// ```
pub struct Database<M> {
    shared: Arc<Shared<M>>,
}

/// The database's address and its cancels' counts; the connector and the configuration's
/// credentials are left out.
impl<M> std::fmt::Debug for Database<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("hosts", &self.shared.config.get_hosts())
            .field("ports", &self.shared.config.get_ports())
            .field("cancels", &self.shared.cancels.read())
            .finish_non_exhaustive()
    }
}

struct Shared<M> {
    config: Config,
    target: Target,
    tls: M,
    cancels: CancelCounts,
}

impl<M> Clone for Database<M> {
    fn clone(&self) -> Self {
        Database {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<M: CancelTls> Database<M> {
    /// The database that `config` connects to, with `tls`, the connections' TLS connector.
    ///
    /// # Errors
    ///
    /// An [`io::ErrorKind::InvalidInput`] error when `config` names no host, or several hosts
    /// or ports: a cancel must reach the one server its connection went to.
    ///
    /// A cancel opens a connection of its own, to the host as `config` names it: a host name
    /// that leads to several servers (round-robin DNS) may send it to another one, which
    /// ignores it (it carries the backend's secret key), and the query then runs on until its
    /// statement timeout. Pin such a name to one address with `Config::hostaddr`.
    pub fn new(config: &Config, tls: M) -> io::Result<Self> {
        Ok(Database {
            shared: Arc::new(Shared {
                target: Target::from_config(config)?,
                config: config.clone(),
                tls,
                cancels: CancelCounts::new(),
            }),
        })
    }

    /// The configuration the connections use.
    pub(super) fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The connections' TLS connector.
    pub(super) fn tls(&self) -> &M {
        &self.shared.tls
    }

    /// What became of the cancels sent so far.
    #[must_use]
    pub fn cancels(&self) -> Cancels {
        self.shared.cancels.read()
    }

    /// Cancels the query `conn` was running when its future was dropped, waits until the
    /// cancel has settled, and gives the connection back through `back` when it settled idle;
    /// closed, it is not given back (`None`): the session has no connection any more.
    ///
    /// 1. The cancel request goes to the database's address through its TLS connector, and
    ///    the wait lasts until the server closes the cancel connection (by then PostgreSQL has
    ///    signalled the backend), at most [`CANCEL_LIMIT`].
    /// 2. `ROLLBACK` ends the dropped query's transaction, and `SELECT 1` runs after it: by
    ///    their answers, any signal the cancel sent has been taken by the dropped query, by
    ///    these statements, or by the idle backend, which ignores it.
    /// 3. If the cancel fails, or the settle fails, the connection's backend is ended
    ///    (`pg_terminate_backend`; by the server's idle-in-transaction limit where the role
    ///    may not end it), so that no pool hands it out again, and `back` says the
    ///    connection is gone (`None`).
    /// 4. The session waits at most [`CANCEL_LIMIT`] for the settle, and as long again for
    ///    the close: past either, `back` says the connection is gone (`None`), and the
    ///    connection is kept here until the settle or the close ends (its network silent, or
    ///    a query that ignores the cancel, may take until TCP or the statement timeout gives
    ///    up), then dropped. So a pool never has it back busy.
    pub(super) async fn settle<C>(
        &self,
        conn: C,
        client: fn(&C) -> &Client,
        back: oneshot::Sender<Option<C>>,
    ) {
        let shared = &*self.shared;
        let mut back = Some(back);
        {
            let pg = client(&conn);
            let sent = tokio::time::timeout(
                CANCEL_LIMIT,
                cancel(&shared.target, &shared.tls, &pg.cancel_token()),
            )
            .await
            .unwrap_or_else(|_| Err("no answer within the cancel limit".into()));
            let settled = match sent {
                Ok(()) => {
                    shared.cancels.sent();
                    let settle = async {
                        // The transaction's end; its warning when there is none is harmless.
                        let _ = pg.batch_execute("ROLLBACK").await;
                        pg.simple_query("SELECT 1").await
                    };
                    match within_limit(settle, &mut back).await {
                        Ok(_) => true,
                        Err(error) => {
                            report("the settle after a cancel failed", &error);
                            false
                        }
                    }
                }
                Err(error) => {
                    shared.cancels.failed();
                    report("a dropped query's cancel failed", &*error);
                    false
                }
            };
            if !settled {
                shared.cancels.closed();
                within_limit(close(pg), &mut back).await;
            }
            if let Some(back) = back.take() {
                // Settled, the connection goes back to the session (a session dropped
                // meanwhile: it is dropped here); closed, the session has none any more.
                let _ = back.send(settled.then_some(conn));
            }
        }
    }
}

/// Awaits `work`. If it takes longer than [`CANCEL_LIMIT`], tells the session at once that its
/// connection is gone (`None` through `back`) and awaits `work` to its end all the same: the
/// connection stays held until then.
async fn within_limit<T, C>(
    work: impl Future<Output = T>,
    back: &mut Option<oneshot::Sender<Option<C>>>,
) -> T {
    let mut work = pin!(work);
    match tokio::time::timeout(CANCEL_LIMIT, work.as_mut()).await {
        Ok(done) => done,
        Err(_) => {
            if let Some(back) = back.take() {
                let _ = back.send(None);
                #[cfg(feature = "tracing")]
                tracing::warn!(
                    target: "deadline_tokio::postgres",
                    "a dropped query's connection did not settle within the cancel limit: its \
                     session has lost it, and it is held until it settles or closes"
                );
            }
            work.await
        }
    }
}

/// Ends the connection's backend, so that the connection is closed and no pool reuses it.
///
/// The dropped query's transaction is ended first: that query may still be running (its
/// cancel failed), and if it then fails (at its own statement timeout, say) its transaction
/// is aborted, and PostgreSQL refuses every statement there but the transaction's end
/// (SQLSTATE 25P02), the one that ends the backend included. Up to three tries: a late
/// signal of the failed cancel may cancel the statement that ends it.
///
/// A backend whose role may not end it (`pg_terminate_backend` refused, 42501: a session
/// that took a plain role with `SET ROLE` after a superuser login), or that is still there
/// after three tries, is ended by the server itself ([`idle_out`]).
async fn close(client: &Client) {
    for _ in 0..3 {
        // Its warning when there is no transaction is harmless.
        let _ = client.batch_execute("ROLLBACK").await;
        match client
            .batch_execute("SELECT pg_terminate_backend(pg_backend_pid())")
            .await
        {
            Err(error)
                if error.code() == Some(&SqlState::QUERY_CANCELED)
                    || error.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION) =>
            {
                continue;
            }
            // Ended: the server's error for its own end, or the connection's.
            Err(error)
                if error.code().is_none() || error.code() == Some(&SqlState::ADMIN_SHUTDOWN) =>
            {
                return;
            }
            // Refused, or not ended.
            _ => break,
        }
    }
    idle_out(client).await;
}

/// Has the server end the connection's session: it is left idle in a transaction whose
/// `idle_in_transaction_session_timeout` is 1 ms, which any role may set, and the server
/// then ends it (SQLSTATE 25P03). Waits until the connection is closed, for at most
/// [`CANCEL_LIMIT`] (the caller bounds it too).
async fn idle_out(client: &Client) {
    let mut idle = Ok(());
    for _ in 0..3 {
        let _ = client.batch_execute("ROLLBACK").await;
        idle = client
            .batch_execute("BEGIN; SET LOCAL idle_in_transaction_session_timeout = 1")
            .await;
        if idle.is_ok() {
            break;
        }
        // A late signal of the failed cancel took it: again.
    }
    if let Err(error) = idle {
        // Nothing more to try: the pool may hand it out again, and a late signal of the
        // failed cancel could reach its next query.
        #[cfg(feature = "tracing")]
        tracing::warn!(
            target: "deadline_tokio::postgres",
            error = %error,
            "a failed cancel's connection could not be ended: a pool may hand it out again"
        );
        #[cfg(not(feature = "tracing"))]
        let _ = error;
        return;
    }
    let _ = tokio::time::timeout(CANCEL_LIMIT, async {
        while !client.is_closed() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
fn report(what: &str, error: &dyn std::error::Error) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "deadline_tokio::postgres",
        error = %error,
        "{what}: the connection is closed"
    );
}
