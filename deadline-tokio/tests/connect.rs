//! `connect::Connector`: each connect bounded by the shorter of the connect limit and the
//! time left, read when it starts; a connect that runs out is the attempt's timeout, and a
//! refused one is retried as never sent, through hyper-util's legacy client under
//! `DependencyLayer` and through a tonic `Channel`.
//!
//! A connector that never completes, and a refused connect to a closed loopback port (the
//! kernel answers at once), run on paused time, so every figure is exact. A connect to a
//! live server on loopback runs on real time: nothing there is timed, and every call has a
//! bound of its own.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use deadline_core::CallError;
use deadline_core::policy::{Backoff, Idempotence};
use deadline_core::wire::DeadlineHeader;
use deadline_core::{Error, Outcome, Policy, ms};
use deadline_tokio::DependencyLayer;
use deadline_tokio::connect::{ClassifyConnect, ConnectError, Connector, outcome};
use deadline_tokio::layer::DependencyError;
use deadline_tokio::{Dependency, scope_timeout};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

mod budget;
mod common;

use common::closed_port;

/// The bound on any one call over a real socket, so that a hang fails instead of stalling.
const BOUND: Duration = Duration::from_secs(20);

/// A connector that counts its connects and never completes one: a host that does not
/// answer.
#[derive(Clone, Default)]
struct Never {
    connects: Arc<AtomicUsize>,
}

impl Service<Uri> for Never {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = std::future::Pending<io::Result<TokioIo<TcpStream>>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        self.connects.fetch_add(1, Ordering::SeqCst);
        std::future::pending()
    }
}

/// [`Never`], and its count of connects.
fn never() -> (Never, Arc<AtomicUsize>) {
    let never = Never::default();
    let connects = never.connects.clone();
    (never, connects)
}

fn uri(addr: SocketAddr) -> Uri {
    format!("http://{addr}/").parse().unwrap()
}

/// A policy with this connect limit (and no cap), for the connector alone.
const fn connect_limit(connect: Duration) -> Policy<'static> {
    Policy::required("connector alone").with_connect(connect)
}

/// 100 ms per attempt, of which at most 20 to connect; two retries, 10 ms apart.
const fn connect_20(name: &'static str, idempotence: Idempotence) -> Policy<'static> {
    Policy::required(name)
        .with_idempotence(idempotence)
        .with_cap(ms(100))
        .with_floor(ms(1))
        .with_connect(ms(20))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)))
}

// 1. The connector alone.

#[tokio::test(start_paused = true)]
async fn a_connect_that_never_completes_ends_at_the_connect_limit() {
    let (inner, connects) = never();
    let start = Instant::now();
    let error = scope_timeout(
        ms(100),
        Connector::new(inner, &connect_limit(ms(20))).oneshot(uri(closed_port())),
    )
    .await
    .expect("inside its scope")
    .unwrap_err();
    assert!(
        matches!(error, ConnectError::TimedOut { after } if after == ms(20)),
        "{error:?}"
    );
    assert_eq!(Instant::now() - start, ms(20));
    assert_eq!(connects.load(Ordering::SeqCst), 1);
    assert_eq!(outcome(&error), Some(Outcome::TimedOut));
    assert_eq!(error.to_string(), "the connect timed out after 20ms");
}

#[tokio::test(start_paused = true)]
async fn the_time_left_bounds_the_connect_when_it_is_shorter() {
    let (inner, _) = never();
    let start = Instant::now();
    let error = scope_timeout(ms(200), async {
        tokio::time::sleep(ms(190)).await;
        // 10 ms left, under the 20 ms connect limit.
        Connector::new(inner, &connect_limit(ms(20)))
            .oneshot(uri(closed_port()))
            .await
    })
    .await
    .expect("inside its scope")
    .unwrap_err();
    assert!(matches!(error, ConnectError::TimedOut { after } if after == ms(10)));
    assert_eq!(Instant::now() - start, ms(200));

    // No connect limit: the time left alone.
    let (inner, _) = never();
    let error = scope_timeout(
        ms(70),
        Connector::new(inner, &connect_limit(Duration::MAX)).oneshot(uri(closed_port())),
    )
    .await
    .expect("inside its scope")
    .unwrap_err();
    assert!(matches!(error, ConnectError::TimedOut { after } if after == ms(70)));
}

#[tokio::test(start_paused = true)]
async fn outside_any_scope_the_connect_limit_alone_bounds_it() {
    let (inner, _) = never();
    let start = Instant::now();
    let error = Connector::new(inner, &connect_limit(ms(35)))
        .oneshot(uri(closed_port()))
        .await
        .unwrap_err();
    assert!(matches!(error, ConnectError::TimedOut { after } if after == ms(35)));
    assert_eq!(Instant::now() - start, ms(35));
}

#[tokio::test(start_paused = true)]
async fn with_no_time_left_no_connect_is_started() {
    let (inner, connects) = never();
    let error = scope_timeout(ms(10), async {
        tokio::time::sleep(ms(10)).await;
        Connector::new(inner, &connect_limit(ms(20)))
            .oneshot(uri(closed_port()))
            .await
    })
    .await
    .expect("inside its scope")
    .unwrap_err();
    assert!(matches!(error, ConnectError::TimedOut { after } if after.is_zero()));
    assert_eq!(error.to_string(), "no time left to connect");
    assert_eq!(connects.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_refused_connect_is_refused_before_sending() {
    let start = Instant::now();
    let error = scope_timeout(
        ms(100),
        Connector::new(HttpConnector::new(), &connect_limit(ms(20))).oneshot(uri(closed_port())),
    )
    .await
    .expect("inside its scope")
    .unwrap_err();
    // The kernel refused it at once: no time passed, and the error is the connector's.
    assert_eq!(Instant::now(), start);
    assert!(matches!(error, ConnectError::Failed(_)), "{error:?}");
    assert_eq!(outcome(&error), Some(Outcome::Refused));
    let io = find::<io::Error>(&error).expect("the io::Error in the chain");
    assert_eq!(io.kind(), io::ErrorKind::ConnectionRefused);
}

#[tokio::test]
async fn a_connect_to_a_live_server_gives_its_connection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connected = tokio::time::timeout(
        BOUND,
        scope_timeout(
            ms(10_000),
            Connector::new(HttpConnector::new(), &connect_limit(ms(5_000))).oneshot(uri(addr)),
        ),
    )
    .await
    .expect("the connect ended within its bound")
    .expect("inside its scope")
    .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    assert_eq!(
        connected.get_ref().inner().local_addr().unwrap(),
        accepted.peer_addr().unwrap()
    );
}

#[test]
fn the_classifier_reads_connect_errors_anywhere_in_the_chain_and_leaves_the_rest() {
    use deadline_core::drive::Classify;

    /// An error wrapping another, as a client's error wraps its connector's.
    #[derive(Debug)]
    struct Wrapped(Box<dyn std::error::Error + Send + Sync>);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("wrapped")
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.0)
        }
    }

    let timed_out = Wrapped(Box::new(Wrapped(Box::new(ConnectError::TimedOut {
        after: ms(5),
    }))));
    let refused = Wrapped(Box::new(ConnectError::Failed(Box::new(io::Error::from(
        io::ErrorKind::ConnectionRefused,
    )))));
    let reset = Wrapped(Box::new(io::Error::from(io::ErrorKind::ConnectionReset)));
    let mut classify = ClassifyConnect::new();
    assert_eq!(classify.classify(&timed_out), Outcome::TimedOut);
    assert_eq!(classify.classify(&refused), Outcome::Refused);
    assert_eq!(classify.classify(&reset), Outcome::Failed);
    let mut fatal = ClassifyConnect::new().otherwise(|_: &Wrapped| Outcome::Fatal);
    assert_eq!(fatal.classify(&reset), Outcome::Fatal);
    assert_eq!(fatal.classify(&refused), Outcome::Refused);
}

/// The first error of type `T` in `error`'s source chain.
fn find<'e, T: std::error::Error + 'static>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e T> {
    let mut link = Some(error);
    while let Some(error) = link {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        link = error.source();
    }
    None
}

// 2. hyper-util's legacy client under `DependencyLayer`.

type HttpClient<C> = Client<Connector<C>, Empty<Bytes>>;

fn hyper_client<C>(connector: Connector<C>) -> HttpClient<C>
where
    Connector<C>: hyper_util::client::legacy::connect::Connect + Clone,
{
    Client::builder(TokioExecutor::new()).build(connector)
}

fn get(addr: SocketAddr) -> Request<Empty<Bytes>> {
    Request::get(uri(addr)).body(Empty::new()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn through_hyper_util_a_connect_that_runs_out_is_the_attempts_timeout() {
    static DEAD: Dependency = Dependency::new(connect_20("dead host", Idempotence::Idempotent));
    let (inner, connects) = never();
    let client = DependencyLayer::new(&DEAD, DeadlineHeader::DeadlineMs)
        .classify_error(ClassifyConnect::new())
        .layer(hyper_client(Connector::new(inner, DEAD.policy())));
    let start = Instant::now();
    let error = scope_timeout(ms(1_000), client.oneshot(get(closed_port())))
        .await
        .expect("inside its scope")
        .unwrap_err();
    // Three attempts, each given up at its 20 ms connect limit (not the 100 ms cap), 10 ms
    // apart: counted and retried as timeouts, and the call's error is the library's timeout.
    assert_eq!(connects.load(Ordering::SeqCst), 3);
    assert_eq!(Instant::now() - start, ms(80));
    assert_eq!(error.library(), Some(Error::Timeout { after: ms(20) }));
    let counts = DEAD.counters().snapshot();
    assert_eq!((counts.timeouts, counts.retries, counts.calls), (3, 2, 1));
    assert_eq!(counts.deadline_exceeded, 0);
}

#[tokio::test(start_paused = true)]
async fn through_hyper_util_a_connect_that_runs_out_is_not_repeated_when_not_idempotent() {
    // The policy does not say the call may be repeated: a timeout may have run, so none is.
    static ONCE: Dependency = Dependency::new(connect_20(
        "dead host, not idempotent",
        Idempotence::NotIdempotent,
    ));
    let (inner, connects) = never();
    let client = DependencyLayer::new(&ONCE, DeadlineHeader::DeadlineMs)
        .classify_error(ClassifyConnect::new())
        .layer(hyper_client(Connector::new(inner, ONCE.policy())));
    let error = scope_timeout(ms(1_000), client.oneshot(get(closed_port())))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert_eq!(connects.load(Ordering::SeqCst), 1);
    assert_eq!(error.library(), Some(Error::Timeout { after: ms(20) }));
    let counts = ONCE.counters().snapshot();
    assert_eq!((counts.timeouts, counts.retries), (1, 0));
}

/// An HTTP/2 server resets the request's stream with `REFUSED_STREAM`: closed before any
/// processing, so the request never ran, and a call that is not idempotent sends it again.
/// (It was a plain failure, which such a call never retries: the call failed at once.) Real
/// sockets on loopback; the 5 s scope only bounds the test.
#[tokio::test]
async fn through_hyper_util_a_stream_the_server_refused_is_sent_again() {
    static PAY: Dependency = Dependency::new(
        Policy::required("pay over h2")
            .not_idempotent()
            .with_cap(ms(1_000))
            .with_retries(1)
            .with_backoff(Backoff::constant(ms(1))),
    );
    let (addr, streams) = common::refusing_first_stream().await;
    let client: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let client = DependencyLayer::new(&PAY, DeadlineHeader::DeadlineMs)
        .classify_error(ClassifyConnect::new())
        .layer(client);
    let request = Request::post(uri(addr)).body(Empty::new()).unwrap();
    let response = scope_timeout(ms(5_000), client.oneshot(request))
        .await
        .expect("inside its scope")
        .expect("the second stream's answer");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(streams.load(Ordering::SeqCst), 2);
    assert_eq!(PAY.counters().snapshot().retries, 1);
}

#[tokio::test(start_paused = true)]
async fn through_hyper_util_the_deadline_cuts_a_connect_shorter_than_its_limit() {
    static SHORT: Dependency =
        Dependency::new(connect_20("short deadline", Idempotence::Idempotent));
    let (inner, connects) = never();
    let client = DependencyLayer::new(&SHORT, DeadlineHeader::DeadlineMs)
        .classify_error(ClassifyConnect::new())
        .layer(hyper_client(Connector::new(inner, SHORT.policy())));
    let start = Instant::now();
    // 15 ms for the whole request: the first connect gets 15, not 20; no retry fits.
    let error = scope_timeout(ms(15), client.oneshot(get(closed_port())))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert_eq!(Instant::now() - start, ms(15));
    assert_eq!(connects.load(Ordering::SeqCst), 1);
    assert_eq!(error.library(), Some(Error::DeadlineExceeded));
    let counts = SHORT.counters().snapshot();
    assert_eq!((counts.timeouts, counts.deadline_exceeded), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn through_hyper_util_a_refused_connect_is_retried_even_when_not_idempotent() {
    static REFUSING: Dependency =
        Dependency::new(connect_20("refusing", Idempotence::NotIdempotent));
    let addr = closed_port();
    let connector = Connector::new(HttpConnector::new(), REFUSING.policy());

    // With the default classifier, a client error is a failure that may have run: the call
    // is not repeated.
    let plain = DependencyLayer::new(&REFUSING, DeadlineHeader::DeadlineMs)
        .layer(hyper_client(connector.clone()));
    let error = scope_timeout(ms(1_000), plain.oneshot(get(addr)))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert!(error.into_inner().expect("the client's error").is_connect());
    assert_eq!(REFUSING.counters().snapshot().retries, 0);

    // Read by `ClassifyConnect`: refused, never sent, so retried twice.
    let start = Instant::now();
    let client = DependencyLayer::new(&REFUSING, DeadlineHeader::DeadlineMs)
        .classify_error(ClassifyConnect::new())
        .layer(hyper_client(connector));
    let error = scope_timeout(ms(1_000), client.oneshot(get(addr)))
        .await
        .expect("inside its scope")
        .unwrap_err();
    // Refused at once each time: only the two 10 ms backoffs passed.
    assert_eq!(Instant::now() - start, ms(20));
    let DependencyError::Call(CallError::Attempt(error)) = error else {
        panic!("the client's error, not {error:?}");
    };
    assert!(error.is_connect());
    assert_eq!(outcome(&error), Some(Outcome::Refused));
    let counts = REFUSING.counters().snapshot();
    assert_eq!((counts.calls, counts.retries, counts.timeouts), (2, 2, 0));
}

#[tokio::test(start_paused = true)]
async fn a_connection_whose_writes_stall_for_the_cap_is_given_up() {
    // 100 ms per attempt, one attempt: the write of 16 MiB to a peer that never reads
    // stalls, the attempt times out, and the connection, which hyper's task would keep
    // trying to flush for as long as the peer holds it, is given up 100 ms into the stall.
    static STALLED: Dependency = Dependency::new(connect_20("stalled", Idempotence::NotIdempotent));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(std::sync::Mutex::new(Vec::new()));
    let peer = tokio::spawn({
        let held = held.clone();
        async move {
            while let Ok((stream, _)) = listener.accept().await {
                held.lock().unwrap().push(stream);
            }
        }
    });
    let before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let client: Client<Connector<HttpConnector>, Full<Bytes>> =
        Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(Connector::new(HttpConnector::new(), STALLED.policy()));
    let client = DependencyLayer::new(&STALLED, DeadlineHeader::DeadlineMs)
        .classify_error(ClassifyConnect::new())
        .layer(client);
    let body = Full::new(Bytes::from(vec![b'x'; 16 << 20]));
    let request = Request::put(uri(addr)).body(body).unwrap();
    let error = scope_timeout(ms(1_000), client.oneshot(request))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert_eq!(error.library(), Some(Error::Timeout { after: ms(100) }));
    assert_eq!(
        held.lock().unwrap().len(),
        1,
        "one connection, held by the peer"
    );
    // The stall limit has passed: the connection's task has ended, the peer still holding
    // its end.
    tokio::time::sleep(ms(100)).await;
    assert_eq!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        before,
        "the connection's task is gone"
    );
    peer.abort();
}

#[tokio::test]
async fn through_hyper_util_a_live_server_answers() {
    static LIVE: Dependency = Dependency::new(
        Policy::required("live")
            .with_cap(ms(5_000))
            .with_floor(ms(1))
            .with_connect(ms(2_000)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let service = hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"42"))))
        });
        hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await
    });
    let client = DependencyLayer::new(&LIVE, DeadlineHeader::DeadlineMs)
        .classify_error(ClassifyConnect::new())
        .layer(hyper_client(Connector::new(
            HttpConnector::new(),
            LIVE.policy(),
        )));
    let response = tokio::time::timeout(BOUND, client.oneshot(get(addr)))
        .await
        .expect("the call ended within its bound")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "42");
    assert_eq!(LIVE.counters().snapshot().successes, 1);
    server.abort();
}

// 3. A tonic `Channel`.

mod tonic_channel {
    use tonic::transport::Endpoint;

    use super::*;

    fn endpoint(addr: SocketAddr) -> Endpoint {
        Endpoint::from_shared(format!("http://{addr}")).unwrap()
    }

    /// A gRPC request (its body is not read: nothing answers).
    fn grpc_request(addr: SocketAddr) -> Request<tonic::body::Body> {
        Request::post(format!("http://{addr}/test.Pricing/Price"))
            .header("content-type", "application/grpc")
            .body(tonic::body::Body::empty())
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn connect_with_connector_is_bounded_by_the_callers_deadline() {
        let (inner, connects) = never();
        let start = Instant::now();
        // The channel's first connect is awaited here, in the caller's scope: 10 ms left,
        // under the 20 ms connect limit.
        let error = scope_timeout(
            ms(10),
            endpoint(closed_port())
                .connect_with_connector(Connector::new(inner, &connect_limit(ms(20)))),
        )
        .await
        .expect("inside its scope")
        .unwrap_err();
        assert_eq!(Instant::now() - start, ms(10));
        assert_eq!(connects.load(Ordering::SeqCst), 1);
        assert_eq!(outcome(&error), Some(Outcome::TimedOut), "{error:?}");
        let connect = find::<ConnectError>(&error).unwrap();
        assert!(matches!(connect, &ConnectError::TimedOut { after } if after == ms(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn connect_with_connector_to_a_closed_port_is_refused() {
        let error = endpoint(closed_port())
            .connect_with_connector(Connector::new(HttpConnector::new(), &connect_limit(ms(20))))
            .await
            .unwrap_err();
        assert_eq!(outcome(&error), Some(Outcome::Refused), "{error:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_channel_whose_connects_are_refused_is_retried_as_never_sent() {
        static GRPC_REFUSED: Dependency =
            Dependency::new(connect_20("grpc refused", Idempotence::NotIdempotent));
        let addr = closed_port();
        // Lazy: each request finds the channel unconnected and its connect refused.
        let channel = endpoint(addr).connect_with_connector_lazy(Connector::new(
            HttpConnector::new(),
            GRPC_REFUSED.policy(),
        ));
        let client = DependencyLayer::new(&GRPC_REFUSED, DeadlineHeader::GrpcTimeout)
            .buffered(1_024)
            .classify_error(ClassifyConnect::new())
            .layer(channel);
        let error = scope_timeout(ms(1_000), client.oneshot(grpc_request(addr)))
            .await
            .expect("inside its scope")
            .unwrap_err();
        let DependencyError::Call(CallError::Attempt(error)) = error else {
            panic!("the channel's error, not {error:?}");
        };
        assert_eq!(outcome(&error), Some(Outcome::Refused));
        let counts = GRPC_REFUSED.counters().snapshot();
        assert_eq!((counts.retries, counts.timeouts), (2, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_channel_whose_reconnects_run_out_counts_timeouts() {
        static GRPC_DEAD: Dependency =
            Dependency::new(connect_20("grpc dead host", Idempotence::Idempotent));
        let (inner, connects) = never();
        // The channel reconnects from its own task, where no request's deadline is current:
        // each connect there is bounded by the connect limit alone.
        let channel = endpoint(closed_port())
            .connect_with_connector_lazy(Connector::new(inner, GRPC_DEAD.policy()));
        let client = DependencyLayer::new(&GRPC_DEAD, DeadlineHeader::GrpcTimeout)
            .buffered(1_024)
            .classify_error(ClassifyConnect::new())
            .layer(channel);
        let start = Instant::now();
        let error = scope_timeout(ms(1_000), client.oneshot(grpc_request(closed_port())))
            .await
            .expect("inside its scope")
            .unwrap_err();
        assert_eq!(connects.load(Ordering::SeqCst), 3);
        assert_eq!(Instant::now() - start, ms(80));
        assert_eq!(error.library(), Some(Error::Timeout { after: ms(20) }));
        // What a tonic client sees of it.
        assert_eq!(
            tonic::Status::from_error(Box::new(error)).code(),
            tonic::Code::DeadlineExceeded
        );
        let counts = GRPC_DEAD.counters().snapshot();
        assert_eq!((counts.timeouts, counts.retries), (3, 2));
    }

    #[tokio::test]
    async fn connect_with_connector_to_a_live_server_serves_calls() {
        static GRPC_LIVE: Dependency = Dependency::new(
            Policy::required("grpc live")
                .with_cap(ms(5_000))
                .with_floor(ms(1))
                .with_connect(ms(2_000)),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // An HTTP/2 server answering every call with a trailers-only gRPC OK.
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service =
                hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", "application/grpc")
                            .header("grpc-status", "0")
                            .body(Empty::<Bytes>::new())
                            .unwrap(),
                    )
                });
            hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
        });
        let channel = tokio::time::timeout(
            BOUND,
            endpoint(addr)
                .connect_with_connector(Connector::new(HttpConnector::new(), GRPC_LIVE.policy())),
        )
        .await
        .expect("the connect ended within its bound")
        .unwrap();
        let client = DependencyLayer::new(&GRPC_LIVE, DeadlineHeader::GrpcTimeout)
            .buffered(1_024)
            .classify_error(ClassifyConnect::new())
            .layer(channel);
        let response = tokio::time::timeout(BOUND, client.oneshot(grpc_request(addr)))
            .await
            .expect("the call ended within its bound")
            .unwrap();
        assert_eq!(response.headers()["grpc-status"], "0");
        assert_eq!(GRPC_LIVE.counters().snapshot().successes, 1);
        server.abort();
    }
}

/// A connector whose one connect completes when told: its connection to a loopback listener
/// is made beforehand, and handed over once the gate opens.
#[derive(Clone)]
struct Gated(Arc<std::sync::Mutex<Option<GatedConnect>>>);

/// The gate, and the connection it holds back.
type GatedConnect = (tokio::sync::oneshot::Receiver<()>, TcpStream);

impl Service<Uri> for Gated {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<TokioIo<TcpStream>>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        let (gate, stream) = self.0.lock().unwrap().take().expect("one connect");
        Box::pin(async move {
            gate.await.map_err(io::Error::other)?;
            Ok(TokioIo::new(stream))
        })
    }
}

/// A connect made when its limit runs out is kept when the task's cooperative budget was
/// spent before the poll that finds it (a tokio resource then reads "pending" whatever it
/// holds): it gets one more poll, in the task's next poll with a fresh budget.
#[tokio::test(start_paused = true)]
async fn a_connect_a_spent_budget_hid_at_its_limit_is_kept() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stream = TcpStream::connect(addr).await.unwrap();
    let (open, gate) = tokio::sync::oneshot::channel();
    let inner = Gated(Arc::new(std::sync::Mutex::new(Some((gate, stream)))));
    let mut connect = Box::pin(Connector::new(inner, &connect_limit(ms(20))).oneshot(uri(addr)));
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert!(connect.as_mut().poll(&mut cx).is_pending());
    open.send(()).unwrap();
    tokio::time::advance(ms(30)).await;
    tokio::task::yield_now().await;
    assert!(
        budget::poll_starved(&mut connect).await.is_pending(),
        "timed out with its connection made"
    );
    tokio::task::yield_now().await;
    let std::task::Poll::Ready(connected) = connect.as_mut().poll(&mut cx) else {
        panic!("still pending with a fresh budget");
    };
    assert!(connected.is_ok(), "{:?}", connected.err());
}
