//! Real HTTP over loopback: an axum gateway behind `DeadlineLayer` calling a tonic service
//! (through `PropagateLayer`) and an axum service (through reqwest's `DeadlineRequest`), and
//! hostile deadline headers over real HTTP/1.1 and HTTP/2 connections.
//!
//! Where a time bound is part of the outcome (the 504 before the caller's deadline), the test
//! runs on tokio's paused clock, loopback sockets and all, so the bound is exact.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use deadline_core::ms;
use deadline_core::wire::DeadlineHeader;
use deadline_core::wire::{Propagation, ServerPolicy};
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::{PropagateLayer, PropagateService};
use deadline_tokio::remaining;
use deadline_tokio::reqwest::DeadlineRequest;
use http::uri::PathAndQuery;
use http_body_util::BodyExt;
use tonic::Status;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tower::Layer;

const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
const BOUND: Duration = Duration::from_secs(20);

#[derive(Clone, PartialEq, prost::Message)]
struct Work {
    #[prost(uint64, tag = "1")]
    sleep_ms: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Reply {
    #[prost(uint64, tag = "1")]
    left_us: u64,
}

/// `test.Slow/Work` on tonic: reports its time left, then works for the time asked.
#[derive(Clone)]
struct Slow;

impl tonic::server::NamedService for Slow {
    const NAME: &'static str = "test.Slow";
}

struct Method;

impl tonic::server::UnaryService<Work> for Method {
    type Response = Reply;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Reply>, Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Work>) -> Self::Future {
        let work = request.into_inner();
        Box::pin(async move {
            let left = remaining().unwrap_or(Duration::MAX);
            tokio::time::sleep(ms(work.sleep_ms)).await;
            Ok(tonic::Response::new(Reply {
                left_us: u64::try_from(left.as_micros()).unwrap_or(u64::MAX),
            }))
        })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Slow {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<Reply, Work>::default();
            Ok(tonic::server::Grpc::new(codec).unary(Method, request).await)
        })
    }
}

#[derive(Clone)]
struct Gateway {
    grpc: PropagateService<Channel>,
    http: reqwest::Client,
    next_http: SocketAddr,
}

/// `/grpc?sleep=N`: calls the tonic service; `/http?sleep=N`: calls the axum service. Both
/// answer `gateway=<us left> next=<us left>`, or 504 for the deadline.
async fn via_grpc(State(gateway): State<Gateway>, uri: http::Uri) -> (StatusCode, String) {
    let q = Sleep::of(&uri);
    let mine = remaining().unwrap().as_micros();
    let mut grpc = tonic::client::Grpc::new(gateway.grpc.clone());
    if grpc.ready().await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready".into());
    }
    let codec = tonic_prost::ProstCodec::<Work, Reply>::default();
    let path = PathAndQuery::from_static("/test.Slow/Work");
    match grpc
        .unary(tonic::Request::new(Work { sleep_ms: q.sleep }), path, codec)
        .await
    {
        Ok(reply) => (
            StatusCode::OK,
            format!("gateway={mine} next={}", reply.into_inner().left_us),
        ),
        Err(status) if status.code() == tonic::Code::DeadlineExceeded => {
            (StatusCode::GATEWAY_TIMEOUT, "deadline exceeded".into())
        }
        Err(status) => (StatusCode::BAD_GATEWAY, format!("{status:?}")),
    }
}

async fn via_http(State(gateway): State<Gateway>, uri: http::Uri) -> (StatusCode, String) {
    let q = Sleep::of(&uri);
    let mine = remaining().unwrap().as_micros();
    let url = format!("http://{}/work?sleep={}", gateway.next_http, q.sleep);
    let Ok(request) = gateway
        .http
        .get(url)
        .deadline(&HOP, DeadlineHeader::DeadlineMs)
    else {
        return (StatusCode::GATEWAY_TIMEOUT, "deadline exceeded".into());
    };
    match request.send().await {
        Ok(response) if response.status() == 200 => {
            let next = response.text().await.unwrap_or_default();
            (StatusCode::OK, format!("gateway={mine} next={next}"))
        }
        Ok(response) => (response.status(), "downstream".into()),
        Err(error) if error.is_timeout() => {
            (StatusCode::GATEWAY_TIMEOUT, "deadline exceeded".into())
        }
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()),
    }
}

/// The `sleep=N` of a query string (milliseconds), or 0.
struct Sleep {
    sleep: u64,
}

impl Sleep {
    fn of(uri: &http::Uri) -> Sleep {
        let sleep = uri
            .query()
            .and_then(|q| q.strip_prefix("sleep="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Sleep { sleep }
    }
}

/// The HTTP service the gateway calls: reports its time left (us), after `sleep` ms.
async fn work(uri: http::Uri) -> String {
    let left = remaining().unwrap().as_micros();
    tokio::time::sleep(ms(Sleep::of(&uri).sleep)).await;
    left.to_string()
}

async fn bind() -> (tokio::net::TcpListener, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// The chain: a tonic service and an axum service, each with a default budget of 10 s (the
/// downstreams' own, longer timeouts), and an axum gateway in front of them. The axum service
/// adds `DeadlineLayer` through `Router::layer`, the gateway around its whole router.
async fn chain() -> (SocketAddr, Vec<tokio::task::JoinHandle<()>>) {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let grpc_addr = incoming.local_addr().unwrap();
    let grpc = tokio::spawn(async move {
        Server::builder()
            .layer(DeadlineLayer::new(HOP, ms(10_000)))
            .add_service(Slow)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    let (listener, http_addr) = bind().await;
    let app = axum::Router::new()
        .route("/work", axum::routing::get(work))
        .layer(DeadlineLayer::new(HOP, ms(10_000)));
    let http = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let channel = Channel::from_shared(format!("http://{grpc_addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let state = Gateway {
        grpc: PropagateService::new(
            channel,
            PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
        ),
        http: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("a reqwest client"),
        next_http: http_addr,
    };
    let (listener, addr) = bind().await;
    let router = axum::Router::new()
        .route("/grpc", axum::routing::get(via_grpc))
        .route("/http", axum::routing::get(via_http))
        .with_state(state);
    // The gateway is served as the documentation adds the layer: around the whole router.
    let app = DeadlineLayer::new(HOP, ms(10_000)).layer(router);
    let gateway = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, vec![grpc, http, gateway])
}

type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Empty<bytes::Bytes>,
>;

fn client(http2: bool) -> Client {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(http2)
        .build_http()
}

/// Sends `GET path` with one header (raw bytes), and reads the status and the body.
async fn get(
    client: &Client,
    addr: SocketAddr,
    path: &str,
    header: Option<(&str, &[u8])>,
) -> (u16, String) {
    let mut request = http::Request::get(format!("http://{addr}{path}"));
    if let Some((name, value)) = header {
        request = request.header(name, http::HeaderValue::from_bytes(value).unwrap());
    }
    let request = request.body(http_body_util::Empty::new()).unwrap();
    let call = async {
        let response = client.request(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(BOUND, call).await.expect("bounded")
}

/// `gateway=A next=B` in microseconds.
fn hops(body: &str) -> (u64, u64) {
    let mut parts = body
        .split(' ')
        .map(|p| p.split('=').nth(1).unwrap().parse().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_left_shrinks_hop_by_hop_over_http_and_grpc() {
    let (addr, tasks) = chain().await;
    for path in ["/grpc?sleep=0", "/http?sleep=0"] {
        for http2 in [false, true] {
            let (status, body) =
                get(&client(http2), addr, path, Some(("x-deadline-ms", b"300"))).await;
            assert_eq!(status, 200, "{path}: {body}");
            let (gateway, next) = hops(&body);
            eprintln!(
                "{path} http2={http2}: sent 300 ms, gateway had {gateway} us, next {next} us"
            );
            assert!(gateway < 300_000, "{body}");
            assert!(next < gateway, "{body}");
        }
    }
    tasks.iter().for_each(|t| t.abort());
}

/// The 504 in virtual time (tokio's paused clock: the servers, the client and their loopback
/// sockets run on one thread, and the clock moves only when every task waits on a timer), so
/// the bound holds exactly on any machine, however loaded: the caller gets its 504 before its
/// own 200 ms have passed, and no earlier than the hops' allowances and reply margins explain.
#[tokio::test(start_paused = true)]
async fn a_caller_sending_200_ms_gets_its_504_before_its_deadline() {
    let (addr, tasks) = chain().await;
    let http1 = client(false);
    for path in ["/grpc?sleep=10000", "/http?sleep=10000"] {
        let start = tokio::time::Instant::now();
        let (status, body) = get(&http1, addr, path, Some(("x-deadline-ms", b"200"))).await;
        let took = start.elapsed();
        eprintln!("{path}: sent 200 ms, 504 after {took:?} (virtual time)");
        assert_eq!(status, 504, "{path}: {body}");
        // At most the caller's deadline; at least its deadline less, for each of the two
        // servers on the way, the hop's allowance and the server's reply margin.
        assert!(took <= ms(200), "{path}: the 504 came after {took:?}");
        let hops = 2 * (HOP.allowance() + ServerPolicy::DEFAULT_REPLY_MARGIN);
        assert!(
            took >= ms(200) - hops,
            "{path}: the 504 came after only {took:?}"
        );
    }
    tasks.iter().for_each(|t| t.abort());
}

/// Hostile deadline headers, each over HTTP/1.1 and HTTP/2: the documented answer, and the
/// server stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_deadline_headers_get_the_documented_answer_over_http1_and_http2() {
    let router = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { format!("{}", remaining().unwrap().as_millis()) }),
    );
    let layer = DeadlineLayer::new(HOP, ms(1_000)).with_reply_margin(Duration::ZERO);
    // The layer around the whole router, and through `Router::layer`.
    let (listener, around) = bind().await;
    let app = layer.layer(router.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let (listener, through) = bind().await;
    let app = router.layer(layer);
    let server_2 = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    // A request with Connect's own timeout header is a Connect request: its answer is
    // Connect's JSON error; any other, a line of text.
    let malformed = |header: &str, why: &str| match header {
        "connect-timeout-ms" => {
            format!(r#"{{"code":"invalid_argument","message":"malformed {header} header: {why}"}}"#)
        }
        _ => format!("malformed {header} header: {why}\n"),
    };
    let cases: &[(&str, &[u8], u16, Option<&str>)] = &[
        (
            "grpc-timeout",
            b"123456789m",
            400,
            Some("header value has too many digits"),
        ),
        (
            "grpc-timeout",
            b"5x",
            400,
            Some("grpc-timeout unit is not one of H M S m u n"),
        ),
        (
            "grpc-timeout",
            b"15",
            400,
            Some("grpc-timeout value has no unit"),
        ),
        ("grpc-timeout", b"-5m", 400, Some("header value has a sign")),
        ("grpc-timeout", b"+5m", 400, Some("header value has a sign")),
        ("grpc-timeout", b"", 400, Some("header value has no digits")),
        (
            "grpc-timeout",
            b"1 0m",
            400,
            Some("header value contains whitespace"),
        ),
        (
            "grpc-timeout",
            b"5\xc2\xb5",
            400,
            Some("grpc-timeout unit is not one of H M S m u n"),
        ),
        (
            "grpc-timeout",
            b"\xd9\xa5m",
            400,
            Some("header value has a byte that is not an ASCII digit"),
        ),
        // Absurdly large, but well formed: clamped to the server's maximum (10 s).
        ("grpc-timeout", b"99999999H", 200, None),
        (
            "x-deadline-ms",
            b"999999999999999999999",
            400,
            Some("header value has too many digits"),
        ),
        // Twenty digits, past u64::MAX milliseconds: rejected, never read as the largest.
        (
            "x-deadline-ms",
            b"99999999999999999999",
            400,
            Some("header value is past u64::MAX milliseconds"),
        ),
        // Twenty digits that fit: clamped to the server's maximum.
        ("x-deadline-ms", b"18446744073709551615", 200, None),
        ("x-deadline-ms", b"-1", 400, Some("header value has a sign")),
        (
            "x-deadline-ms",
            b"",
            400,
            Some("header value has no digits"),
        ),
        (
            "x-deadline-ms",
            b"1 0",
            400,
            Some("header value contains whitespace"),
        ),
        (
            "x-deadline-ms",
            b"50ms",
            400,
            Some("header value has a byte that is not an ASCII digit"),
        ),
        (
            "x-deadline-ms",
            b"\xc3\xa9",
            400,
            Some("header value has a byte that is not an ASCII digit"),
        ),
        (
            "connect-timeout-ms",
            b"10000000000",
            400,
            Some("header value has too many digits"),
        ),
        ("connect-timeout-ms", b"9999999999", 200, None),
    ];
    for (addr, http2) in [
        (around, false),
        (around, true),
        (through, false),
        (through, true),
    ] {
        let client = client(http2);
        for &(header, value, status, why) in cases {
            let (got, body) = get(&client, addr, "/", Some((header, value))).await;
            assert_eq!(got, status, "http2={http2} {header}: {value:?}: {body}");
            if let Some(why) = why {
                assert_eq!(
                    body,
                    malformed(header, why),
                    "http2={http2} {header}: {value:?}"
                );
            } else {
                // Clamped to the server's 10 s maximum.
                assert!(body.parse::<u64>().unwrap() <= 10_000, "{body}");
            }
        }
        // The server is still up and serves a well-formed request.
        let (got, body) = get(&client, addr, "/", Some(("x-deadline-ms", b"250"))).await;
        assert_eq!((got, body.parse::<u64>().unwrap() <= 250), (200, true));
    }
    server.abort();
    server_2.abort();
}
