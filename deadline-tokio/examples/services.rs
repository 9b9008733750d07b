//! A chain of real services on loopback: client -> gateway (axum) -> service (tonic) ->
//! PostgreSQL, one deadline from end to end. Each hop prints the time left it got.
//!
//! ```text
//! bash scripts/services.sh
//! ```
//!
//! (which starts a throwaway PostgreSQL when `DEADLINE_TEST_DATABASE_URL` is not set, runs
//! this program, and stops the server). First one request with no deadline, which opens the
//! connections and warms the database's caches, as a service does before it takes traffic.
//! Then two requests, each sent with 1 s: one whose query takes 50 ms (answered, with every
//! hop's time left), and one whose query would take 5 s (504 at the deadline, and the query
//! gone from the database at once). The program exits non-zero when a request ends otherwise.
//!
//! The deadline is real time on a real machine: 1 s leaves a loaded machine (a first query of
//! a fresh database backend has taken over 250 ms on a busy 2-core one) room to answer the
//! 50 ms query well within it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use deadline_core::ms;
use deadline_core::statement::StatementPolicy;
use deadline_core::wire::DeadlineHeader;
use deadline_core::wire::Propagation;
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::{PropagateLayer, PropagateService};
use deadline_tokio::postgres::{Database, Session};
use deadline_tokio::reqwest::DeadlineRequest;
use deadline_tokio::{remaining, scope_timeout};
use http::uri::PathAndQuery;
use tokio::sync::Mutex;
use tonic::Status;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tower::Layer;

/// 5 ms kept back per hop; callers believed up to 10 s.
const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
/// The client's deadline for each measured request.
const CLIENT: Duration = ms(1_000);
/// At most 2 s per query; under 10 ms left, do not start.
const QUERY: StatementPolicy = StatementPolicy::capped(ms(2_000)).with_floor(ms(10));

#[derive(Clone, PartialEq, prost::Message)]
struct Lookup {
    /// How long the query sleeps, in milliseconds.
    #[prost(uint64, tag = "1")]
    sleep_ms: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Found {
    /// The time the service had left when it started, in microseconds.
    #[prost(uint64, tag = "1")]
    left_us: u64,
    /// The statement timeout it gave the query.
    #[prost(string, tag = "2")]
    statement_timeout: String,
}

/// The service's one database connection: a session, which cancels a dropped query on the
/// server and uses the connection again only once the cancel has settled.
type Db = Arc<Mutex<Session<tokio_postgres::Client, tokio_postgres::NoTls>>>;

/// The tonic service `chain.Orders/Lookup`: runs the query under the request's deadline.
#[derive(Clone)]
struct Orders(Db);

impl tonic::server::NamedService for Orders {
    const NAME: &'static str = "chain.Orders";
}

struct Method(Db);

impl tonic::server::UnaryService<Lookup> for Method {
    type Response = Found;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Found>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Lookup>) -> Self::Future {
        let db = self.0.clone();
        let sleep = request.into_inner().sleep_ms;
        Box::pin(async move {
            let left = remaining().unwrap_or(Duration::MAX);
            println!("  service (tonic):   {:>7.2} ms left", millis(left));
            let mut session = db.lock().await;
            let sql = format!(
                "SELECT current_setting('statement_timeout'), pg_sleep({sleep}::float8 / 1000) /* deadline_example */"
            );
            let rows = session
                .query(&QUERY, &sql, &[])
                .await
                .map_err(|e| match e.deadline() {
                    Some(error) => Status::from(error),
                    None => Status::internal(e.to_string()),
                })?;
            let statement_timeout: String = rows[0].get(0);
            println!("  database:          statement_timeout = {statement_timeout}");
            Ok(tonic::Response::new(Found {
                left_us: u64::try_from(left.as_micros()).unwrap_or(u64::MAX),
                statement_timeout,
            }))
        })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Orders {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let method = Method(self.0.clone());
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<Found, Lookup>::default();
            Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
        })
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// The gateway's one route: `/orders?sleep=N`, answered by the tonic service.
async fn orders(State(next): State<PropagateService<Channel>>, uri: Uri) -> (StatusCode, String) {
    let left = remaining().unwrap_or(Duration::MAX);
    println!("  gateway (axum):    {:>7.2} ms left", millis(left));
    let sleep = uri
        .query()
        .and_then(|q| q.strip_prefix("sleep="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut grpc = tonic::client::Grpc::new(next);
    if grpc.ready().await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "service not ready".into());
    }
    let codec = tonic_prost::ProstCodec::<Lookup, Found>::default();
    let path = PathAndQuery::from_static("/chain.Orders/Lookup");
    match grpc
        .unary(tonic::Request::new(Lookup { sleep_ms: sleep }), path, codec)
        .await
    {
        Ok(found) => (
            StatusCode::OK,
            format!("found ({})", found.into_inner().statement_timeout),
        ),
        Err(status) if status.code() == tonic::Code::DeadlineExceeded => {
            (StatusCode::GATEWAY_TIMEOUT, "deadline exceeded".into())
        }
        Err(status) => (StatusCode::BAD_GATEWAY, status.message().to_owned()),
    }
}

async fn running_queries(observer: &tokio_postgres::Client) -> i64 {
    observer
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
             AND pid <> pg_backend_pid() AND position('deadline_example' in query) > 0",
            &[],
        )
        .await
        .map(|row| row.get(0))
        .unwrap_or(-1)
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the database at {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

#[tokio::main]
async fn main() {
    let url = std::env::var("DEADLINE_TEST_DATABASE_URL").unwrap_or_else(|_| {
        eprintln!("DEADLINE_TEST_DATABASE_URL is not set: run `bash scripts/services.sh`, which starts a throwaway PostgreSQL");
        std::process::exit(2);
    });
    let config: tokio_postgres::Config = url
        .parse()
        .unwrap_or_else(|e| panic!("not a PostgreSQL URL: {url}: {e}"));
    let database = Database::new(&config, tokio_postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot cancel on {url}: {e}"));
    let session = database
        .connect()
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the database at {url}: {e}"));
    let db: Db = Arc::new(Mutex::new(session));
    let observer = connect(&url).await;

    // The service (tonic) and the gateway (axum), each behind DeadlineLayer.
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let service_addr = incoming.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .layer(DeadlineLayer::new(HOP, ms(10_000)))
            .add_service(Orders(db))
            .serve_with_incoming(incoming),
    );
    let channel = Channel::from_shared(format!("http://{service_addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let next = PropagateService::new(
        channel,
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
    );
    let router = axum::Router::new()
        .route("/orders", axum::routing::get(orders))
        .with_state(next);
    let app = DeadlineLayer::new(HOP, ms(10_000)).layer(router);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a reqwest client");
    let mut ok = true;
    // No deadline: the connections opened and the database's caches filled before the
    // measured requests, whose times then show the deadline's work and not a cold start.
    println!("warm-up: a request with no deadline (the layers' default of 10 s)");
    let start = Instant::now();
    let warm = async {
        let response = http
            .get(format!("http://{gateway}/orders?sleep=0"))
            .send()
            .await?;
        Ok::<_, reqwest::Error>(response.status().as_u16())
    }
    .await;
    match warm {
        Ok(200) => println!(
            "  answer:            200 after {:.1} ms",
            millis(start.elapsed())
        ),
        other => {
            println!("  answer:            {other:?}");
            ok = false;
        }
    }

    // The client: reqwest, with a deadline of its own.
    for (sleep, expected) in [(50, 200), (5_000, 504)] {
        println!(
            "request: query of {sleep} ms, client deadline {} ms",
            CLIENT.as_millis()
        );
        let start = Instant::now();
        let answer = scope_timeout(CLIENT, async {
            let request = http
                .get(format!("http://{gateway}/orders?sleep={sleep}"))
                .deadline(&HOP, DeadlineHeader::DeadlineMs)
                .expect("the client's deadline has time left");
            println!(
                "  client:            {:>7.2} ms left",
                millis(remaining().unwrap())
            );
            let response = request.send().await?;
            let status = response.status().as_u16();
            Ok::<_, reqwest::Error>((status, response.text().await?))
        })
        .await
        .expect("inside its scope");
        let took = start.elapsed();
        match answer {
            Ok((status, body)) => {
                println!(
                    "  answer:            {status} {} after {:.1} ms",
                    body.trim(),
                    millis(took)
                );
                ok &= status == expected;
            }
            Err(error) => {
                println!("  answer:            {error} after {:.1} ms", millis(took));
                ok = false;
            }
        }
        if expected == 504 {
            // The query was stopped in the database when nobody waited for it any more: by
            // its statement timeout, which ends it a few milliseconds before the deadline, or
            // by the session's cancel.
            let mut gone = None;
            for _ in 0..200 {
                if running_queries(&observer).await == 0 {
                    gone = Some(start.elapsed());
                    break;
                }
                tokio::time::sleep(ms(1)).await;
            }
            match gone {
                Some(at) => println!(
                    "  database:          the query was gone at {:.1} ms",
                    millis(at)
                ),
                None => {
                    println!("  database:          the query was still running");
                    ok = false;
                }
            }
        }
    }
    if !ok {
        eprintln!("a request did not end as expected");
        std::process::exit(1);
    }
}
