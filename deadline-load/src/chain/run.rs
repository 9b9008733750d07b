//! One strategy's run: its order service and its API on loopback ports, and its clients, each
//! sending one request at a time until the run's requests are spent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::get;
use deadline_cli::sim::Strategy;
use deadline_tokio::postgres::Database;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_postgres::{Config, NoTls};

use crate::pool::Pool;
use crate::report::{Record, StrategyRun};
use crate::workload::Workload;
use crate::{plain, propagated};

/// What every strategy's run is given.
#[derive(Clone, Debug)]
pub(crate) struct Params {
    /// The run (stall share) of this program, which tags its queries.
    pub(crate) run: u32,
    /// Requests per strategy.
    pub(crate) requests: u64,
    /// The share of queries that stall.
    pub(crate) stall_rate: f64,
    /// The seed of the query times.
    pub(crate) seed: u64,
    /// Clients sending at once, each one request at a time.
    pub(crate) clients: u64,
    /// The database.
    pub(crate) config: Config,
}

/// The services of one strategy, serving until dropped.
struct Services {
    /// The API's address: the client's first hop.
    api: String,
    tasks: [JoinHandle<()>; 2],
    /// What the run reports about the order service: (throttled, connections opened, cancels).
    stats: Box<dyn Fn() -> (u64, u64, u64) + Send>,
}

impl Drop for Services {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Serves `app` on a new loopback port: its address and the serving task.
async fn serve(app: Router) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("a local address");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}"), task)
}

/// Starts the order service and the API of `strategy`, with `params.clients` database
/// connections open already.
async fn start(strategy: Strategy, params: &Params, work: Arc<Workload>) -> Services {
    let route = "/orders/{request}";
    // Opened before the run, as a service does before it takes traffic.
    let opened = params.clients;
    if strategy == Strategy::Propagated {
        let database = Database::new(&params.config, NoTls).expect("one database server");
        let pool = Pool::new();
        for _ in 0..params.clients {
            let session = database.connect().await.expect("connect to the database");
            pool.give(session);
        }
        let before = propagated::throttled();
        let orders = Arc::new(propagated::Orders::new(
            database.clone(),
            Arc::clone(&pool),
            work,
        ));
        let (orders_url, orders_task) = serve(
            Router::new()
                .route(route, get(propagated::order))
                .with_state(orders)
                .layer(propagated::deadline_layer()),
        )
        .await;
        let (api, api_task) = serve(
            Router::new()
                .route(route, get(propagated::api))
                .with_state(Arc::new(propagated::Api::new(orders_url)))
                .layer(propagated::deadline_layer()),
        )
        .await;
        Services {
            api,
            tasks: [orders_task, api_task],
            stats: Box::new(move || {
                (
                    propagated::throttled() - before,
                    opened + pool.opened(),
                    database.cancels().sent(),
                )
            }),
        }
    } else {
        let pool = Pool::new();
        for _ in 0..params.clients {
            let (client, connection) = params
                .config
                .connect(NoTls)
                .await
                .expect("connect to the database");
            tokio::spawn(connection);
            pool.give(client);
        }
        let orders = Arc::new(plain::Orders::new(
            strategy,
            Arc::clone(&pool),
            params.config.clone(),
            work,
        ));
        let (orders_url, orders_task) = serve(
            Router::new()
                .route(route, get(plain::order))
                .with_state(Arc::clone(&orders)),
        )
        .await;
        let (api, api_task) = serve(
            Router::new()
                .route(route, get(plain::api))
                .with_state(Arc::new(plain::Api::new(strategy, orders_url))),
        )
        .await;
        Services {
            api,
            tasks: [orders_task, api_task],
            stats: Box::new(move || (orders.throttled(), opened + pool.opened(), 0)),
        }
    }
}

/// Now, in microseconds since the Unix epoch (the server log's clock).
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Runs `params.requests` requests of `strategy`: `params.clients` clients, each sending its
/// next request when it stops waiting for the last one.
pub(crate) async fn run(strategy: Strategy, params: Params) -> StrategyRun {
    let work = Arc::new(Workload::new(
        params.run,
        strategy,
        params.requests,
        params.stall_rate,
        params.seed,
    ));
    let services = start(strategy, &params, Arc::clone(&work)).await;
    let next = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for _ in 0..params.clients {
        let (next, api, requests) = (Arc::clone(&next), services.api.clone(), params.requests);
        clients.push(tokio::spawn(async move {
            // Loopback only: no proxy from the environment (reqwest reads HTTP_PROXY and
            // ALL_PROXY, and makes no exception for loopback).
            let http = reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a reqwest client");
            let mut seen = Vec::new();
            // Bounded: each turn takes a request number, and there are `requests` of them.
            loop {
                let request = next.fetch_add(1, Ordering::Relaxed);
                if request >= requests {
                    break;
                }
                let url = format!("{api}/orders/{request}");
                let answered = match strategy {
                    Strategy::Propagated => propagated::request(&http, &url).await,
                    _ => plain::request(&http, &url).await,
                };
                let stop_us = now_us();
                seen.push((request, Record { answered, stop_us }));
            }
            seen
        }));
    }
    let mut records = vec![
        Record {
            answered: false,
            stop_us: 0,
        };
        usize::try_from(params.requests).unwrap_or(0)
    ];
    for client in clients {
        for (request, record) in client.await.expect("a client task") {
            if let Some(slot) = usize::try_from(request)
                .ok()
                .and_then(|i| records.get_mut(i))
            {
                *slot = record;
            }
        }
    }
    let (throttled, connections, cancels) = (services.stats)();
    drop(services);
    StrategyRun {
        strategy,
        records,
        sent: work.sent(),
        throttled,
        connections,
        cancels,
        stalled_first: work.stalled_first(),
    }
}
