//! The three strategies without the library, written as a careful user would write them:
//! a fixed timeout on every wait, retries in a loop, and for the one-layer retries tower's
//! backoff with jitter and its `TpsBudget`.
//!
//! - **one-try**: the client, the API and the order service each wait 1 s, once.
//! - **retry-every-layer**: the API tries the order service 3 times, 1 s each; the order
//!   service tries the database 3 times, 300 ms each; no backoff, no budget.
//! - **retry-one-layer**: the API tries once (1 s); the order service tries the database 3
//!   times, 300 ms each, with exponential backoff and jitter between tries (tower's
//!   `ExponentialBackoff`, 25 ms doubling to 100 ms) and a retry budget of 10% of its
//!   requests plus 10 a second (tower's `TpsBudget`).
//!
//! Nothing tells the database that a caller stopped waiting: a query whose wait timed out runs
//! on to its end. It runs in a task of its own that holds the connection until the database
//! has answered, so a connection busy with an abandoned query never goes back to the pool,
//! where the next query would queue behind it (the model's database has no queue either).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use deadline_cli::sim::{Model, Strategy};
use tokio_postgres::{Client, Config};
use tower::retry::backoff::{Backoff, ExponentialBackoffMaker, MakeBackoff};
use tower::retry::budget::{Budget, TpsBudget};
use tower::util::rng::HasherRng;

use crate::pool::{self, Pool};
use crate::workload::Workload;

const MODEL: Model = Model::CALIBRATED;
/// How long the client waits, and every hop's wait in one-try and at the API.
const WAIT: Duration = MODEL.client_timeout;
/// The order service's wait for one database try, when it retries.
const DB_TRY: Duration = MODEL.db_attempt;
/// Tries in all at a layer that retries.
const TRIES: u32 = MODEL.attempts;
/// The first backoff, doubling up to [`BACKOFF_MAX`] (retry-one-layer).
const BACKOFF_MIN: Duration = Duration::from_millis(25);
/// The longest backoff (retry-one-layer).
const BACKOFF_MAX: Duration = Duration::from_millis(100);

/// The order service of one of the strategies without the library.
#[derive(Debug)]
pub(crate) struct Orders {
    strategy: Strategy,
    pool: Arc<Pool<Client>>,
    config: Config,
    work: Arc<Workload>,
    budget: TpsBudget,
    throttled: AtomicU64,
}

impl Orders {
    /// The order service of `strategy`, querying through `pool` (new connections with
    /// `config`).
    pub(crate) fn new(
        strategy: Strategy,
        pool: Arc<Pool<Client>>,
        config: Config,
        work: Arc<Workload>,
    ) -> Self {
        Orders {
            strategy,
            pool,
            config,
            work,
            // 10% of the requests, and 10 retries a second whatever the traffic, over tower's
            // usual 10 s window.
            budget: TpsBudget::new(
                Duration::from_secs(10),
                MODEL.budget_floor_per_sec,
                MODEL.budget_percent as f32 / 100.0,
            ),
            throttled: AtomicU64::new(0),
        }
    }

    /// Retries the budget refused.
    pub(crate) fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }
}

/// `GET /orders/{request}` on the order service.
pub(crate) async fn order(
    State(orders): State<Arc<Orders>>,
    Path(request): Path<u64>,
) -> (StatusCode, &'static str) {
    let answered = match orders.strategy {
        Strategy::OneTry => query(&orders, request, WAIT).await,
        Strategy::RetryEveryLayer => {
            let mut answered = false;
            for _ in 0..TRIES {
                answered = query(&orders, request, DB_TRY).await;
                if answered {
                    break;
                }
            }
            answered
        }
        Strategy::RetryOneLayer | Strategy::Propagated => {
            retry_with_backoff(&orders, request).await
        }
    };
    if answered {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::GATEWAY_TIMEOUT, "no answer from the database")
    }
}

/// Up to [`TRIES`] tries of [`DB_TRY`] each, with backoff and jitter between them, each retry
/// paid for by the budget.
async fn retry_with_backoff(orders: &Arc<Orders>, request: u64) -> bool {
    orders.budget.deposit();
    // A maker per request: the backoffs one maker makes share its random generator's state,
    // so every request would wait the same "random" times.
    let mut backoff = ExponentialBackoffMaker::new(BACKOFF_MIN, BACKOFF_MAX, 1.0, HasherRng::new())
        .expect("a valid backoff")
        .make_backoff();
    for tried in 0..TRIES {
        if tried > 0 {
            if !orders.budget.withdraw() {
                orders.throttled.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            backoff.next_backoff().await;
        }
        if query(orders, request, DB_TRY).await {
            return true;
        }
    }
    false
}

/// One query, waited for at most `wait`: whether it answered in time.
async fn query(orders: &Arc<Orders>, request: u64, wait: Duration) -> bool {
    let sql = orders.work.next_query(request);
    let own = Arc::clone(orders);
    // The task holds the connection until the database answers, however long the caller
    // waits (see the module's documentation).
    let task = tokio::spawn(async move {
        let client = pool::client(&own.pool, &own.config).await?;
        client.query(sql.as_str(), &[]).await.map(drop)
    });
    matches!(tokio::time::timeout(wait, task).await, Ok(Ok(Ok(()))))
}

/// The API of one of the strategies without the library.
#[derive(Debug)]
pub(crate) struct Api {
    strategy: Strategy,
    http: reqwest::Client,
    /// The order service's address, `http://127.0.0.1:PORT`.
    orders: String,
}

impl Api {
    /// The API of `strategy`, calling the order service at `orders`.
    pub(crate) fn new(strategy: Strategy, orders: String) -> Self {
        Api {
            strategy,
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

/// `GET /orders/{request}` on the API.
pub(crate) async fn api(
    State(api): State<Arc<Api>>,
    Path(request): Path<u64>,
) -> (StatusCode, &'static str) {
    let tries = match api.strategy {
        Strategy::RetryEveryLayer => TRIES,
        _ => 1,
    };
    let url = format!("{}/orders/{request}", api.orders);
    let mut status = StatusCode::GATEWAY_TIMEOUT;
    for _ in 0..tries {
        match api.http.get(&url).timeout(WAIT).send().await {
            Ok(reply) if reply.status() == StatusCode::OK => {
                if reply.bytes().await.is_ok() {
                    return (StatusCode::OK, "ok");
                }
            }
            Ok(reply) => status = reply.status(),
            Err(_) => status = StatusCode::GATEWAY_TIMEOUT,
        }
    }
    (status, "no answer from the order service")
}

/// The client's request: whether it was answered within its 1 s.
pub(crate) async fn request(http: &reqwest::Client, url: &str) -> bool {
    match http.get(url).timeout(WAIT).send().await {
        Ok(reply) if reply.status() == StatusCode::OK => reply.bytes().await.is_ok(),
        _ => false,
    }
}
