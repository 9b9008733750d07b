//! The chain: a client, then the front (axum with `DeadlineLayer`), whose dependency is
//! called through `DependencyLayer` over hyper-util's client connecting through
//! `connect::Connector`, then the back (axum with `DeadlineLayer`), then PostgreSQL.
//!
//! The front calls its dependency with `PUT /?db_ms=N` and a body (small, or large enough
//! to fill the socket buffers of a peer that never reads); the back runs `pg_sleep(N ms)`
//! with `deadline_tokio::postgres::query` and answers 200. Connections are not pooled, on
//! either client: every connection a request opens is closed once it is answered, so what
//! is open after an answer is left over.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::serve::ListenerExt;
use bytes::Bytes;
use deadline_core::policy::Backoff;
use deadline_core::statement::StatementPolicy;
use deadline_core::wire::DeadlineHeader;
use deadline_core::wire::Propagation;
use deadline_core::{Policy, ms};
use deadline_tokio::Dependency;
use deadline_tokio::connect::{ClassifyConnect, Connector};
use deadline_tokio::layer::DependencyService;
use deadline_tokio::postgres;
use deadline_tokio::{DeadlineLayer, DependencyLayer};
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tower::ServiceExt;

/// 5 ms kept back per hop; callers believed up to 10 s.
pub(crate) const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));

/// The front's dependency, the back: 250 ms per attempt, of which 50 to connect (a host on
/// the same machine answers a connect in well under a millisecond); three attempts, 10 ms
/// apart. `PUT` is idempotent.
pub(crate) const BACK: Policy<'static> = Policy::required("back")
    .idempotent()
    .with_cap(ms(250))
    .with_floor(ms(10))
    .with_connect(ms(50))
    .with_retries(2)
    .with_backoff(Backoff::constant(ms(10)));

/// The back's queries: at most 2 s; under 5 ms left, not started.
const QUERY: StatementPolicy = StatementPolicy::capped(ms(2_000)).with_floor(ms(5));

/// The `application_name` of the back's database connection, to find its queries in
/// `pg_stat_activity`.
pub(crate) const APPLICATION: &str = "deadline-net-faults";

/// A server on loopback. Dropping it stops it.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The database URL the tests were given.
pub(crate) fn database_url() -> String {
    std::env::var("DEADLINE_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "DEADLINE_TEST_DATABASE_URL is not set: the network-fault suite needs a \
             PostgreSQL server (`eval \"$(bash scripts/postgres.sh start)\"` starts one)"
        )
    })
}

/// A database connection, its connection task spawned; named `application`.
pub(crate) async fn connect_db(application: &str) -> tokio_postgres::Client {
    let url = database_url();
    let mut config = tokio_postgres::Config::from_str(&url)
        .unwrap_or_else(|e| panic!("DEADLINE_TEST_DATABASE_URL={url} cannot be read: {e}"));
    config.application_name(application);
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the database at {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// The back, with a database connection of its own.
pub(crate) async fn back() -> Server {
    let db = Arc::new(Mutex::new(connect_db(APPLICATION).await));
    serve(
        axum::Router::new()
            .route("/", axum::routing::put(back_handler).get(back_handler))
            .with_state(db)
            .layer(DeadlineLayer::new(HOP, ms(10_000))),
    )
    .await
}

/// The front, whose dependency (a fresh one, returned) is reached at `target`: the back,
/// a proxy to it, or a faulty peer; each call sends `body` bytes.
pub(crate) async fn front(target: SocketAddr, body: usize) -> (Server, &'static Dependency) {
    let dependency: &'static Dependency = Box::leak(Box::new(Dependency::new(BACK)));
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let connector = Connector::new(http, &BACK);
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector);
    let client = tower::Layer::layer(
        &DependencyLayer::new(dependency, DeadlineHeader::DeadlineMs)
            .with_propagation(HOP)
            .classify_error(ClassifyConnect::new()),
        client,
    );
    let front = Front {
        client,
        target,
        body: Bytes::from(vec![b'x'; body]),
    };
    let server = serve(
        axum::Router::new()
            .route("/", axum::routing::get(front_handler))
            .with_state(front)
            .layer(DeadlineLayer::new(HOP, ms(10_000))),
    )
    .await;
    (server, dependency)
}

/// Serves `app` on a free loopback port (with `TCP_NODELAY`, as a service would).
async fn serve(app: axum::Router) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Server { addr, task }
}

/// The `db_ms` of a request's query string (0 if there is none).
fn db_ms(uri: &Uri) -> u64 {
    uri.query()
        .and_then(|q| q.strip_prefix("db_ms="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The back: `pg_sleep(db_ms)` under the request's deadline.
async fn back_handler(
    State(db): State<Arc<Mutex<tokio_postgres::Client>>>,
    uri: Uri,
    _body: Bytes,
) -> (StatusCode, String) {
    let db_ms = db_ms(&uri);
    let mut client = db.lock().await;
    let seconds = db_ms as f64 / 1_000.0;
    match postgres::query(&mut client, &QUERY, "SELECT pg_sleep($1)", &[&seconds]).await {
        Ok(_) => (StatusCode::OK, format!("slept {db_ms} ms")),
        Err(error) => match error.deadline() {
            Some(deadline) => (status(deadline.http_status()), deadline.to_string()),
            None => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
        },
    }
}

type FrontClient =
    DependencyService<Client<Connector<HttpConnector>, Full<Bytes>>, ClassifyConnect>;

#[derive(Clone)]
struct Front {
    client: FrontClient,
    target: SocketAddr,
    body: Bytes,
}

/// The front: one call to its dependency, answered with the dependency's answer or with
/// the status of why there is none.
async fn front_handler(State(front): State<Front>, uri: Uri) -> (StatusCode, String) {
    let request = Request::put(format!("http://{}/?db_ms={}", front.target, db_ms(&uri)))
        .body(Full::new(front.body.clone()))
        .unwrap();
    match front.client.oneshot(request).await {
        Ok(response) => {
            let status = response.status();
            match response.into_body().collect().await {
                Ok(body) => (
                    status,
                    String::from_utf8_lossy(&body.to_bytes()).into_owned(),
                ),
                // The answer's body was cut at the attempt's deadline.
                Err(error) => (StatusCode::GATEWAY_TIMEOUT, error.to_string()),
            }
        }
        Err(error) => match error.library() {
            Some(deadline) => (status(deadline.http_status()), deadline.to_string()),
            // The dependency could not be reached, or failed.
            None => (StatusCode::BAD_GATEWAY, error.to_string()),
        },
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A client with no pool: each request on a connection of its own.
pub(crate) type TestClient = Client<HttpConnector, Empty<Bytes>>;

pub(crate) fn client() -> TestClient {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(http)
}

/// One answer, as the client saw it.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    /// The status, or `None` when no complete answer came (an error, or no answer within
    /// the deadline plus 5 s).
    pub(crate) status: Option<u16>,
    /// From just before the request was sent to the last byte of the answer's body.
    pub(crate) took: Duration,
    pub(crate) body: String,
}

/// `GET /?db_ms=N` to `addr`, with `x-deadline-ms: deadline`.
pub(crate) async fn send(
    client: &TestClient,
    addr: SocketAddr,
    deadline: Duration,
    db_ms: u64,
) -> Answer {
    let request = Request::get(format!("http://{addr}/?db_ms={db_ms}"))
        .header("x-deadline-ms", deadline.as_millis().to_string())
        .body(Empty::new())
        .unwrap();
    let start = Instant::now();
    let exchange = async {
        let response = client.request(request).await.map_err(|e| chain_of(&e))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| chain_of(&e))?;
        Ok::<_, String>((status, body.to_bytes()))
    };
    let answer = tokio::time::timeout(deadline + Duration::from_secs(5), exchange).await;
    let took = start.elapsed();
    match answer {
        Ok(Ok((status, body))) => Answer {
            status: Some(status),
            took,
            body: String::from_utf8_lossy(&body).into_owned(),
        },
        Ok(Err(error)) => Answer {
            status: None,
            took,
            body: error,
        },
        Err(_) => Answer {
            status: None,
            took,
            body: "no answer".to_owned(),
        },
    }
}

/// An error and its sources, for a report.
fn chain_of(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(error) = source {
        text.push_str(": ");
        text.push_str(&error.to_string());
        source = error.source();
    }
    text
}
