//! What a request can leave behind once it is answered, counted four ways:
//!
//! - tasks alive on the runtime (`Handle::metrics().num_alive_tasks()`): a connection's
//!   task, a cancel still running;
//! - sockets open in this process (the `socket:` entries of `/proc/self/fd`): a connection
//!   to the next hop, or to the database;
//! - connections open through the fault proxy;
//! - the back's queries still running in PostgreSQL (`pg_stat_activity`: any state but
//!   `idle`, for the back's `application_name`; an open or aborted transaction counts).
//!
//! After each answer, every count must come back to what it was before the request, within
//! [`SETTLE`].

use std::time::Duration;

use tokio::time::Instant;

use crate::chain::{APPLICATION, connect_db};

/// How long what a request started may take to end after its answer: the back's own
/// deadline (at most the 250 ms of an attempt), a chunk still held by the proxy (at most
/// 200 ms), and a cancel sent to PostgreSQL (a new connection and a fork: a few
/// milliseconds), with room for a loaded machine.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// How often the counts are read while they settle.
const POLL: Duration = Duration::from_millis(2);

/// The four counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Count {
    pub(crate) tasks: usize,
    pub(crate) sockets: usize,
    pub(crate) proxied: usize,
    pub(crate) queries: i64,
}

/// Reads the counts, with a database connection of its own (not counted among the back's
/// queries).
pub(crate) struct Probe {
    monitor: tokio_postgres::Client,
}

impl Probe {
    pub(crate) async fn new() -> Probe {
        Probe {
            monitor: connect_db("deadline-net-faults-monitor").await,
        }
    }

    /// The counts now; `proxied` as given.
    pub(crate) async fn count(&self, proxied: usize) -> Count {
        let queries: i64 = self
            .monitor
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = $1 AND state <> 'idle'",
                &[&APPLICATION],
            )
            .await
            .expect("pg_stat_activity can be read")
            .get(0);
        Count {
            tasks: tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            sockets: open_sockets(),
            proxied,
            queries,
        }
    }

    /// Waits until the counts equal `expected()` (read again at each poll), for at most
    /// [`SETTLE`]: how long that took, or the counts at the end of the wait.
    pub(crate) async fn settle(
        &self,
        expected: impl Fn() -> Count,
        proxied: impl Fn() -> usize,
    ) -> Result<Duration, (Count, Count)> {
        let start = Instant::now();
        let mut last = self.count(proxied()).await;
        // Bounded: SETTLE / POLL reads, each at least POLL apart.
        for _ in 0..SETTLE.as_millis() / POLL.as_millis() {
            if last == expected() {
                return Ok(start.elapsed());
            }
            if start.elapsed() > SETTLE {
                break;
            }
            tokio::time::sleep(POLL).await;
            last = self.count(proxied()).await;
        }
        if last == expected() {
            Ok(start.elapsed())
        } else {
            Err((last, expected()))
        }
    }

    /// The counts once they have stopped moving (the same twice, 50 ms apart; at most 2 s).
    pub(crate) async fn steady(&self, proxied: impl Fn() -> usize) -> Count {
        let mut last = self.count(proxied()).await;
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.count(proxied()).await;
            if now == last {
                return now;
            }
            last = now;
        }
        panic!("the counts did not settle before the first request: {last:?}");
    }
}

/// The sockets open in this process.
pub(crate) fn open_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd can be read")
        .filter_map(Result::ok)
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .count()
}
