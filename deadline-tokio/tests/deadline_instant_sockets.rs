//! The deadline instant on real sockets: 1 000 requests per protocol whose handlers finish
//! spread evenly across the 4 ms around their deadline (from 2 ms before it to 2 ms after),
//! over HTTP/1.1, HTTP/2 and gRPC, through a real hyper server (axum's, and tonic's) and a real
//! client (hyper-util's; for gRPC tonic's codec over hyper-util's HTTP/2, which keeps no timer
//! of its own, so what it reads is what the server sent). Every one must get one complete
//! answer: the handler's complete 200, or the layer's complete deadline answer (504 with its
//! text; gRPC `DEADLINE_EXCEEDED`). No empty reply, no reset, no cut body, no 502. The axum
//! server is checked both ways the layer is added: around the whole router
//! (`axum::serve(listener, layer.layer(router))`) and through `Router::layer`.
//!
//! A chain of two servers (A calls B through hyper-util's client under `PropagateLayer`) is
//! checked the same way: A answers B's 200 or a 504, never 502 for B's deadline.
//!
//! Real sockets run on real time, so nothing here asserts how long anything took: only what
//! each client received. Which side of the deadline a handler lands on varies from run to
//! run; the assertion holds for either side. Every request has a bound of its own (10 s), so a
//! hang fails instead of stalling; 50 run at once.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::State;
use bytes::Bytes;
use deadline_core::ms;
use deadline_core::wire::{DeadlineHeader, Propagation};
use deadline_tokio::DeadlineLayer;
use deadline_tokio::current;
use deadline_tokio::layer::{PropagateLayer, PropagateService};
use deadline_tokio::time::to_tokio;
use http::uri::PathAndQuery;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Status};
use tower::{Layer, ServiceExt};

const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
/// Requests per protocol.
const REQUESTS: usize = 1_000;
/// Requests in flight at once.
const IN_FLIGHT: usize = 50;
/// The bound on any one request.
const BOUND: Duration = Duration::from_secs(10);
/// Handlers finish this far before their deadline, up to as far after it.
const SPREAD_US: i64 = 2_000;

/// Where request `i` of `n` finishes, relative to its handler's deadline: evenly from
/// `-SPREAD_US` to `+SPREAD_US` microseconds.
fn offset_us(i: usize, n: usize) -> i64 {
    let i = i64::try_from(i).unwrap();
    let n = i64::try_from(n).unwrap();
    -SPREAD_US + 2 * SPREAD_US * i / (n - 1).max(1)
}

/// Sleeps until `offset_us` from the current deadline.
async fn finish_at(offset_us: i64) {
    let deadline = to_tokio(current().expect("inside the layer's scope").instant());
    let at = if offset_us >= 0 {
        deadline + Duration::from_micros(offset_us.unsigned_abs())
    } else {
        deadline - Duration::from_micros(offset_us.unsigned_abs())
    };
    tokio::time::sleep_until(at).await;
}

/// The offset a request asks for: `?us=-1500`.
fn offset_of(uri: &http::Uri) -> i64 {
    uri.query()
        .and_then(|q| q.strip_prefix("us="))
        .and_then(|us| us.parse().ok())
        .expect("a request names its offset")
}

/// What one client received.
#[derive(Debug, PartialEq, Eq)]
enum Received {
    /// The handler's complete answer.
    Answer,
    /// The deadline's complete answer.
    Deadline,
    /// Anything else: an empty reply, a reset, a cut body, another status.
    Broken(String),
}

async fn handler(uri: http::Uri) -> &'static str {
    finish_at(offset_of(&uri)).await;
    "ok"
}

async fn bind() -> (tokio::net::TcpListener, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// How `DeadlineLayer` is added to an axum router.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// Around the whole router: `axum::serve(listener, layer.layer(router))`.
    Around,
    /// Through `Router::layer`.
    RouterLayer,
}

/// Serves `router` behind `DeadlineLayer` (1 s without a header), added as `form` says.
async fn serve(router: axum::Router, form: Form) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let (listener, addr) = bind().await;
    let layer = DeadlineLayer::new(HOP, ms(1_000));
    let server = match form {
        Form::Around => {
            let app = layer.layer(router);
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() })
        }
        Form::RouterLayer => {
            let app = router.layer(layer);
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() })
        }
    };
    (addr, server)
}

/// An axum server (HTTP/1.1 and HTTP/2) with `DeadlineLayer` whose handler finishes at the
/// offset it is asked for.
async fn server_b(form: Form) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    serve(
        axum::Router::new().route("/", axum::routing::get(handler)),
        form,
    )
    .await
}

fn client(http2: bool) -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(http2)
        .build_http()
}

/// `GET /?us=offset` with `x-deadline-ms: budget`, read whole.
async fn get(
    client: Client<HttpConnector, Empty<Bytes>>,
    addr: SocketAddr,
    offset: i64,
    budget: &'static str,
) -> Received {
    let request = Request::get(format!("http://{addr}/?us={offset}"))
        .header("x-deadline-ms", budget)
        .body(Empty::new())
        .unwrap();
    let call = async {
        let response = match client.request(request).await {
            Ok(response) => response,
            Err(error) => return Received::Broken(format!("no response: {error:?}")),
        };
        let status = response.status();
        let body = match response.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(error) => return Received::Broken(format!("{status}, body cut: {error:?}")),
        };
        match (status, &body[..]) {
            (StatusCode::OK, b"ok") => Received::Answer,
            (StatusCode::GATEWAY_TIMEOUT, b"deadline exceeded\n") => Received::Deadline,
            (status, body) => Received::Broken(format!("{status} {body:?}")),
        }
    };
    tokio::time::timeout(BOUND, call)
        .await
        .unwrap_or_else(|_| Received::Broken("no answer within the bound".to_owned()))
}

/// Runs `REQUESTS` calls made by `call(i)`, `IN_FLIGHT` at a time, and checks what each
/// received; returns how many got the handler's answer and how many the deadline's.
async fn run_all<F, Fut>(what: &str, call: F) -> (usize, usize)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Received> + Send + 'static,
{
    let mut received = Vec::with_capacity(REQUESTS);
    for chunk in (0..REQUESTS).collect::<Vec<_>>().chunks(IN_FLIGHT) {
        let mut tasks = tokio::task::JoinSet::new();
        for &i in chunk {
            tasks.spawn(call(i));
        }
        while let Some(one) = tasks.join_next().await {
            received.push(one.unwrap());
        }
    }
    let broken: Vec<&Received> = received
        .iter()
        .filter(|r| matches!(r, Received::Broken(_)))
        .collect();
    assert!(
        broken.is_empty(),
        "{what}: {} of {REQUESTS} got no complete answer, e.g. {:?}",
        broken.len(),
        &broken[..broken.len().min(5)]
    );
    let answers = received.iter().filter(|r| **r == Received::Answer).count();
    let deadlines = received
        .iter()
        .filter(|r| **r == Received::Deadline)
        .count();
    assert_eq!(answers + deadlines, REQUESTS);
    println!("{what}: {answers} answers, {deadlines} deadline answers, 0 broken");
    (answers, deadlines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_and_http2_every_request_at_the_deadline_gets_one_complete_answer() {
    for form in [Form::Around, Form::RouterLayer] {
        let (addr, server) = server_b(form).await;
        for (protocol, http2) in [("HTTP/1.1", false), ("HTTP/2", true)] {
            let client = client(http2);
            run_all(&format!("{protocol}, {form:?}"), |i| {
                get(client.clone(), addr, offset_us(i, REQUESTS), "30")
            })
            .await;
        }
        server.abort();
    }
}

/// A's state: its client to B, under `PropagateLayer`.
#[derive(Clone)]
struct ToB {
    client: PropagateService<Client<HttpConnector, Empty<Bytes>>>,
    b: SocketAddr,
}

/// A: calls B with the offset it was given; answers B's text, or its own status for a
/// failed call (`StatusCode::from` the layer's error: 504 for the deadline's, 502 for B's).
///
/// B's body can fail in A's hands as its call can: A's layer bounds it by the time it sent,
/// and a body whose head came in time but whose bytes hyper's client had not yet handed over
/// when that time was up (its connection task runs apart, late on a loaded machine) is cut
/// there, the deadline's, 504. A answers that as it answers a call that failed.
async fn via_b(State(to_b): State<ToB>, uri: http::Uri) -> (StatusCode, String) {
    let request = Request::get(format!("http://{}/?us={}", to_b.b, offset_of(&uri)))
        .body(Empty::new())
        .unwrap();
    match to_b.client.oneshot(request).await {
        Ok(response) => {
            let status = response.status();
            match response.into_body().collect().await {
                Ok(body) => (
                    status,
                    String::from_utf8_lossy(&body.to_bytes()).into_owned(),
                ),
                Err(error) => failed(StatusCode::from(error)),
            }
        }
        Err(error) => failed(StatusCode::from(error)),
    }
}

/// A's own answer for a call to B that failed with `status`: a 504 with the text the layer's
/// own deadline answer has, anything else with its own text (which the client counts as
/// broken).
fn failed(status: StatusCode) -> (StatusCode, String) {
    let text = if status == StatusCode::GATEWAY_TIMEOUT {
        "deadline exceeded\n"
    } else {
        "failed\n"
    };
    (status, text.to_owned())
}

/// Serves A, which calls `b`.
async fn server_a(b: SocketAddr) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let state = ToB {
        client: PropagateLayer::new(HOP, DeadlineHeader::DeadlineMs).layer(client(false)),
        b,
    };
    let router = axum::Router::new()
        .route("/", axum::routing::get(via_b))
        .with_state(state);
    serve(router, Form::Around).await
}

/// A chain, client -> A -> B: B's handlers finish around B's deadline, which is what A sent
/// it less the allowance. A relays B's answers whole, and never reports B's deadline as a
/// failed dependency (502).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_reports_the_next_services_deadline_as_the_deadline() {
    let (b, b_server) = server_b(Form::RouterLayer).await;
    let (a, a_server) = server_a(b).await;
    let client = client(false);
    run_all("A -> B over HTTP/1.1", |i| {
        get(client.clone(), a, offset_us(i, REQUESTS), "40")
    })
    .await;
    a_server.abort();
    b_server.abort();
}

/// A next service that closes the connection without an answer around the deadline it was
/// sent (from 2 ms before it to 2 ms after), as a server that drops its work at its deadline,
/// or a proxy in between, does: a plain TCP server that reads the request's head, then
/// closes at `x-deadline-ms` plus the request's offset after it arrived.
async fn closes_at_its_deadline() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let (listener, addr) = bind().await;
    let task = tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let arrived = tokio::time::Instant::now();
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16_384 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let field = |name: &str| -> Option<i64> {
                    let at = head.find(name)? + name.len();
                    let digits: String = head[at..]
                        .chars()
                        .skip_while(|c| *c == ' ')
                        .take_while(|c| c.is_ascii_digit() || *c == '-')
                        .collect();
                    digits.parse().ok()
                };
                let (Some(budget), Some(offset)) = (field("x-deadline-ms:"), field("us=")) else {
                    return;
                };
                let at = arrived + Duration::from_millis(budget.unsigned_abs());
                let at = if offset >= 0 {
                    at + Duration::from_micros(offset.unsigned_abs())
                } else {
                    at - Duration::from_micros(offset.unsigned_abs())
                };
                tokio::time::sleep_until(at).await;
                drop(stream);
            });
        }
    });
    (addr, task)
}

/// The chain again, with a next service that closes the connection around the deadline A
/// sent it: A's client sees a transport failure near the time it sent, which is the
/// deadline's, and A answers 504 every time, never 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_at_the_time_sent_is_the_deadline_not_a_failed_dependency() {
    let (b, b_server) = closes_at_its_deadline().await;
    let (a, a_server) = server_a(b).await;
    let client = client(false);
    let (answers, deadlines) = run_all("A -> a peer closing at its deadline", |i| {
        get(client.clone(), a, offset_us(i, REQUESTS), "40")
    })
    .await;
    assert_eq!((answers, deadlines), (0, REQUESTS));
    a_server.abort();
    b_server.abort();
}

/// The gRPC request: where the handler finishes, relative to its deadline.
#[derive(Clone, PartialEq, prost::Message)]
struct Finish {
    #[prost(sint64, tag = "1")]
    offset_us: i64,
}

/// The answer: "ok".
#[derive(Clone, PartialEq, prost::Message)]
struct Done {
    #[prost(string, tag = "1")]
    text: String,
}

/// A gRPC service `test.Instant` with one unary method, `Finish`, written by hand as tonic's
/// generated code would be.
#[derive(Clone)]
struct Instant;

impl tonic::server::NamedService for Instant {
    const NAME: &'static str = "test.Instant";
}

struct Method;

impl tonic::server::UnaryService<Finish> for Method {
    type Response = Done;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Done>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Finish>) -> Self::Future {
        let offset = request.into_inner().offset_us;
        Box::pin(async move {
            finish_at(offset).await;
            Ok(tonic::Response::new(Done {
                text: "ok".to_owned(),
            }))
        })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Instant {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<Done, Finish>::default();
            Ok(tonic::server::Grpc::new(codec).unary(Method, request).await)
        })
    }
}

/// A gRPC connection with no timer of its own.
type Raw = tonic::client::Grpc<Client<HttpConnector, tonic::body::Body>>;

async fn finish(mut grpc: Raw, offset_us: i64) -> Received {
    let mut request = tonic::Request::new(Finish { offset_us });
    request.set_timeout(ms(30));
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| Status::unknown(e.to_string()))?;
        let codec = tonic_prost::ProstCodec::<Finish, Done>::default();
        let path = PathAndQuery::from_static("/test.Instant/Finish");
        grpc.unary(request, path, codec)
            .await
            .map(tonic::Response::into_inner)
    };
    match tokio::time::timeout(BOUND, call).await {
        Ok(Ok(done)) if done.text == "ok" => Received::Answer,
        Ok(Err(status)) if status.code() == Code::DeadlineExceeded => Received::Deadline,
        Ok(other) => Received::Broken(format!("{other:?}")),
        Err(_) => Received::Broken("no answer within the bound".to_owned()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_every_call_at_the_deadline_gets_its_reply_or_deadline_exceeded() {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let server = tokio::spawn(async move {
        Server::builder()
            .layer(DeadlineLayer::new(HOP, ms(1_000)))
            .add_service(Instant)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    let http2 = Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let origin = format!("http://{addr}").parse().unwrap();
    let raw: Raw = tonic::client::Grpc::with_origin(http2, origin);
    run_all("gRPC", |i| finish(raw.clone(), offset_us(i, REQUESTS))).await;
    server.abort();
}
