//! A small pool of database connections: a connection taken is given back when its guard is
//! dropped, and a new one is opened when none is idle. (The services open a few before the
//! run, as a service does before it takes traffic.)

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use deadline_tokio::postgres::{Database, Session};
use tokio_postgres::{Client, Config, NoTls};

/// Idle connections of type `T` (a plain `tokio_postgres::Client`, or the library's
/// `Session`).
#[derive(Debug)]
pub(crate) struct Pool<T> {
    idle: Mutex<Vec<T>>,
    opened: AtomicU64,
}

impl<T> Pool<T> {
    /// An empty pool.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Pool {
            idle: Mutex::new(Vec::new()),
            opened: AtomicU64::new(0),
        })
    }

    /// An idle connection, if there is one.
    fn take(self: &Arc<Self>) -> Option<Pooled<T>> {
        let item = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
        Some(self.guard(item))
    }

    /// A connection just opened, given to the pool when its guard is dropped.
    fn guard(self: &Arc<Self>, item: T) -> Pooled<T> {
        Pooled {
            pool: Arc::clone(self),
            item: Some(item),
        }
    }

    /// Gives `item`, an idle connection, to the pool.
    pub(crate) fn give(&self, item: T) {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(item);
    }

    /// Connections the pool opened itself (when none was idle).
    pub(crate) fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
}

/// A connection taken from a [`Pool`]; back in the pool when dropped.
#[derive(Debug)]
pub(crate) struct Pooled<T> {
    pool: Arc<Pool<T>>,
    item: Option<T>,
}

impl<T> Deref for Pooled<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.item.as_ref().expect("taken only on drop")
    }
}

impl<T> DerefMut for Pooled<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.item.as_mut().expect("taken only on drop")
    }
}

impl<T> Drop for Pooled<T> {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            self.pool.give(item);
        }
    }
}

/// An idle plain connection, or a new one.
pub(crate) async fn client(
    pool: &Arc<Pool<Client>>,
    config: &Config,
) -> Result<Pooled<Client>, tokio_postgres::Error> {
    while let Some(client) = pool.take() {
        if !client.is_closed() {
            return Ok(client);
        }
        // A connection the server closed: dropped, not given back.
        drop(client.into_inner());
    }
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(connection);
    pool.opened.fetch_add(1, Ordering::Relaxed);
    Ok(pool.guard(client))
}

/// An idle session of the library, or a new one.
pub(crate) async fn session(
    pool: &Arc<Pool<Session<Client, NoTls>>>,
    database: &Database<NoTls>,
) -> Result<Pooled<Session<Client, NoTls>>, tokio_postgres::Error> {
    if let Some(session) = pool.take() {
        return Ok(session);
    }
    let session = database.connect().await?;
    pool.opened.fetch_add(1, Ordering::Relaxed);
    Ok(pool.guard(session))
}

impl<T> Pooled<T> {
    /// The connection, no longer the pool's.
    fn into_inner(mut self) -> T {
        self.item.take().expect("taken only once")
    }
}
