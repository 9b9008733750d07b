//! What the database integrations share (feature `postgres` or `sqlx`): how long a dropped
//! query's cancel may take, and what became of the cancels.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a dropped query's cancel may take, from the first step of sending it to the
/// server's word that it acted on it: past it the cancel counts as failed, and its connection
/// is closed rather than reused.
pub const CANCEL_LIMIT: Duration = Duration::from_secs(5);

/// What became of the cancels of dropped queries: those of a
/// [`postgres::Database`](crate::postgres::Database)'s sessions, or of this process's
/// [`sqlx`](crate::sqlx) queries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cancels {
    sent: u64,
    failed: u64,
    closed: u64,
}

impl Cancels {
    /// Cancels the server acted on: it signalled the query's backend.
    #[must_use]
    pub const fn sent(&self) -> u64 {
        self.sent
    }

    /// Cancels that could not be sent or confirmed: no connection to send it on, a TLS
    /// failure, no answer within [`CANCEL_LIMIT`]. The query ran on until its statement
    /// timeout. Each one is also a `tracing` warning under feature `tracing`.
    #[must_use]
    pub const fn failed(&self) -> u64 {
        self.failed
    }

    /// Connections closed rather than reused, because their cancel failed or the settle
    /// after it failed; for sqlx, also a settle that did not answer within [`CANCEL_LIMIT`].
    /// (A PostgreSQL session's connection that has not settled within it is given up by its
    /// session and held until it settles or closes: counted here only if it then closes.)
    #[must_use]
    pub const fn closed(&self) -> u64 {
        self.closed
    }
}

/// The counts behind [`Cancels`], shared by the tasks that send the cancels.
#[derive(Debug, Default)]
pub(crate) struct CancelCounts {
    sent: AtomicU64,
    failed: AtomicU64,
    closed: AtomicU64,
}

impl CancelCounts {
    /// No cancel yet.
    pub(crate) const fn new() -> Self {
        CancelCounts {
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            closed: AtomicU64::new(0),
        }
    }

    /// One cancel the server acted on.
    pub(crate) fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// One cancel that failed.
    pub(crate) fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// One connection closed rather than reused.
    pub(crate) fn closed(&self) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub(crate) fn read(&self) -> Cancels {
        Cancels {
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
        }
    }
}

/// The gRPC status that answers a caller with `code` and `message`: a query's error, for `?`
/// in a tonic handler.
#[cfg(feature = "tonic")]
pub(crate) fn grpc_status(
    code: deadline_core::wire::GrpcCode,
    message: impl Into<String>,
) -> tonic::Status {
    tonic::Status::new(tonic::Code::from_i32(i32::from(code.as_u8())), message)
}

/// The HTTP status that answers a caller with `code`, by the Connect protocol's table: a
/// query's error, for `?` in an axum or hyper handler.
#[cfg(feature = "tower")]
pub(crate) fn http_status(code: deadline_core::wire::GrpcCode) -> http::StatusCode {
    http::StatusCode::from_u16(code.connect_http_status())
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
}
