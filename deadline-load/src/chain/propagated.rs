//! The propagated deadline, with the library, the way its README builds a service:
//!
//! - the client sets its 1 s with a scope and sends the time left in `x-deadline-ms`
//!   (`DeadlineRequest::time_left`: 5 ms kept back for the trip);
//! - the API and the order service each read it with `DeadlineLayer`, which runs the handler
//!   under that deadline;
//! - the API calls the order service once, through a deadline-only `Dependency` (the time
//!   left, less 5 ms, goes on in the header);
//! - the order service's `Dependency` on the database retries, at this one layer: 3 tries of
//!   at most 300 ms, backoff with jitter (25 ms doubling to 100 ms), the retry budget of 10%
//!   plus 10 a second, and no try started with under 40 ms left;
//! - each try runs its query in a `postgres::Session`: the statement timeout is the try's time
//!   left less 5 ms, and a query whose future is dropped is cancelled on the server.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use deadline_cli::sim::Model;
use deadline_core::Policy;
use deadline_core::budget::RetryBudget;
use deadline_core::drive::DeadlineOnly;
use deadline_core::statement::StatementPolicy;
use deadline_core::wire::Propagation;
use deadline_tokio::postgres::{Database, PgError, Session};
use deadline_tokio::reqwest::DeadlineRequest;
use deadline_tokio::{DeadlineLayer, Dependency, scope_timeout};
use tokio_postgres::{Client, NoTls};

use crate::pool::{self, Pool};
use crate::workload::Workload;

const MODEL: Model = Model::CALIBRATED;

/// How each service reads an incoming deadline: callers believed up to 1 s, and 1 s for a
/// request without one.
pub(crate) fn deadline_layer() -> DeadlineLayer {
    DeadlineLayer::new(
        Propagation::DEFAULT.with_max(MODEL.client_timeout),
        MODEL.client_timeout,
    )
}

/// The API's call to the order service: one try, its timeout the time left.
static ORDERS: Dependency<DeadlineOnly> = Dependency::deadline_only(
    Policy::required("orders")
        .with_cap(MODEL.client_timeout)
        .with_floor(Duration::ZERO),
);

/// The order service's database: the one layer that retries.
static ORDERS_DB: Dependency = Dependency::new(
    Policy::required("orders-db")
        .idempotent()
        .with_cap(MODEL.db_attempt)
        .with_floor(MODEL.db_floor)
        .with_retries(MODEL.attempts - 1)
        .with_backoff(MODEL.backoff),
)
.budget(RetryBudget::percent(MODEL.budget_percent).with_floor_per_sec(MODEL.budget_floor_per_sec));

/// Each query's statement timeout: the try's time left, less the default 5 ms margin, at most
/// 300 ms; not started under 40 ms.
const STATEMENT: StatementPolicy =
    StatementPolicy::capped(MODEL.db_attempt).with_floor(MODEL.db_floor);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The order service with the library.
pub(crate) struct Orders {
    database: Database<NoTls>,
    pool: Arc<Pool<Session<Client, NoTls>>>,
    work: Arc<Workload>,
}

impl Orders {
    /// The order service, querying through sessions of `database` kept in `pool`.
    pub(crate) fn new(
        database: Database<NoTls>,
        pool: Arc<Pool<Session<Client, NoTls>>>,
        work: Arc<Workload>,
    ) -> Self {
        Orders {
            database,
            pool,
            work,
        }
    }
}

/// Retries the order service's budget has refused so far, in this process.
pub(crate) fn throttled() -> u64 {
    ORDERS_DB.counters().snapshot().budget_refusals
}

/// `GET /orders/{request}` on the order service, under `DeadlineLayer`.
pub(crate) async fn order(
    State(orders): State<Arc<Orders>>,
    Path(request): Path<u64>,
) -> Result<&'static str, StatusCode> {
    ORDERS_DB
        .run(|_| async {
            let mut session = pool::session(&orders.pool, &orders.database)
                .await
                .map_err(PgError::Db)?;
            let sql = orders.work.next_query(request);
            session.query(&STATEMENT, &sql, &[]).await
        })
        .await?;
    Ok("ok")
}

/// The API with the library.
#[derive(Debug)]
pub(crate) struct Api {
    http: reqwest::Client,
    /// The order service's address, `http://127.0.0.1:PORT`.
    orders: String,
}

impl Api {
    /// The API, calling the order service at `orders`.
    pub(crate) fn new(orders: String) -> Self {
        Api {
            // Loopback only: no proxy from the environment (reqwest reads HTTP_PROXY and
            // ALL_PROXY, and makes no exception for loopback).
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a reqwest client"),
            orders,
        }
    }
}

/// `GET /orders/{request}` on the API, under `DeadlineLayer`.
pub(crate) async fn api(
    State(api): State<Arc<Api>>,
    Path(request): Path<u64>,
) -> Result<&'static str, StatusCode> {
    let url = format!("{}/orders/{request}", api.orders);
    let status = ORDERS
        .run(|_| async {
            let reply = api.http.get(&url).time_left()?.send().await?;
            let status = reply.status();
            reply.bytes().await?;
            Ok::<_, BoxError>(status)
        })
        .await?;
    if status == StatusCode::OK {
        Ok("ok")
    } else {
        Err(status)
    }
}

/// The client's request: whether it was answered within its 1 s.
pub(crate) async fn request(http: &reqwest::Client, url: &str) -> bool {
    let answer = scope_timeout(MODEL.client_timeout, async {
        let reply = http.get(url).time_left()?.send().await?;
        let ok = reply.status() == StatusCode::OK;
        reply.bytes().await?;
        Ok::<_, BoxError>(ok)
    })
    .await;
    matches!(answer, Ok(Ok(true)))
}
