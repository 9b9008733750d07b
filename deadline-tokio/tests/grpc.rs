//! A real tonic server with `DeadlineLayer`, called by a real tonic client over loopback:
//! every call whose deadline passes in the server ends with `DEADLINE_EXCEEDED`, never the
//! `CANCELLED` of tonic's own timer nor the `UNAVAILABLE` or `INTERNAL` that a gRPC client
//! makes of a bare HTTP 504, 503 or 400.
//!
//! Two clients. [`raw`] is tonic's client codec (`tonic::client::Grpc`) over a plain HTTP/2
//! connection (hyper-util's), which keeps no timer of its own: it sees exactly what the
//! server answers, whatever the machine's load. tonic's `Channel` also times each call whose
//! `grpc-timeout` it sends, and fails it with its own `CANCELLED` when that timer fires first;
//! it is used where the library is on the client too (`PropagateLayer` reports such a failure
//! as the deadline's), or where the server's deadline is far shorter than the client's.
//!
//! Real sockets run on real time, so nothing here asserts how long anything took: only the
//! status codes. Every handler that should be cut off sleeps far longer (10 s) than any
//! deadline here (at most 200 ms), and every call has a bound of its own.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use deadline_core::ms;
use deadline_core::wire::Admission;
use deadline_core::wire::DeadlineHeader;
use deadline_core::wire::Propagation;
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::{PropagateLayer, PropagateService};
use deadline_tokio::remaining;
use http::uri::PathAndQuery;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Status};

/// 5 ms kept back per hop; callers believed up to 10 s.
const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
/// Longer than any deadline here: a handler that sleeps this long is always cut off.
const FOREVER: Duration = Duration::from_secs(10);
/// The bound on any one call of these tests, so that a hang fails instead of stalling.
const BOUND: Duration = Duration::from_secs(20);

/// The request: how long the handler works.
#[derive(Clone, PartialEq, prost::Message)]
struct Work {
    #[prost(uint64, tag = "1")]
    sleep_ms: u64,
}

/// The answer: the time the handler had left when it started, in microseconds.
#[derive(Clone, PartialEq, prost::Message)]
struct Reply {
    #[prost(uint64, tag = "1")]
    left_us: u64,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Behaviour = Arc<dyn Fn(Work) -> BoxFuture<Result<Reply, Status>> + Send + Sync>;

/// A gRPC service `test.Slow` with one unary method, `Work`, written by hand as tonic's
/// generated code would be.
#[derive(Clone)]
struct Slow {
    behaviour: Behaviour,
}

impl Slow {
    /// A handler that reports its time left, then works for the time asked.
    fn sleeper() -> Self {
        Slow::new(|work: Work| async move {
            let left = remaining().unwrap_or(Duration::MAX);
            tokio::time::sleep(ms(work.sleep_ms)).await;
            Ok(Reply {
                left_us: u64::try_from(left.as_micros()).unwrap_or(u64::MAX),
            })
        })
    }

    fn new<F, Fut>(behaviour: F) -> Self
    where
        F: Fn(Work) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Reply, Status>> + Send + 'static,
    {
        Slow {
            behaviour: Arc::new(move |work| Box::pin(behaviour(work))),
        }
    }
}

impl tonic::server::NamedService for Slow {
    const NAME: &'static str = "test.Slow";
}

/// The method, for tonic's unary server.
struct Method(Behaviour);

impl tonic::server::UnaryService<Work> for Method {
    type Response = Reply;
    type Future = BoxFuture<Result<tonic::Response<Reply>, Status>>;

    fn call(&mut self, request: tonic::Request<Work>) -> Self::Future {
        let work = (self.0)(request.into_inner());
        Box::pin(async move { work.await.map(tonic::Response::new) })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Slow {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let method = Method(self.behaviour.clone());
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<Reply, Work>::default();
            Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
        })
    }
}

/// Serves `service` behind `layer` on a loopback port; the server stops when the returned
/// guard is dropped.
async fn serve(layer: DeadlineLayer, service: Slow) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let server = Server::builder()
        .layer(layer)
        .add_service(service)
        .serve_with_incoming(incoming);
    let task = tokio::spawn(async move {
        server.await.unwrap();
    });
    (addr, task)
}

/// `service` served over loopback by tonic alone: no `DeadlineLayer`, so the server knows
/// no deadline of the library's (tonic's own answers `CANCELLED` when a request's
/// `grpc-timeout` runs out).
async fn serve_bare(service: Slow) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let task = tokio::spawn(async move {
        Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    (addr, task)
}

/// A gRPC connection with no timer of its own: hyper-util's HTTP/2 client, as a tonic
/// `GrpcService`, with `addr` as the origin of every request.
type Raw = tonic::client::Grpc<
    hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        tonic::body::Body,
    >,
>;

fn raw(addr: SocketAddr) -> Raw {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let origin = format!("http://{addr}").parse().unwrap();
    tonic::client::Grpc::with_origin(client, origin)
}

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Calls `Work` on `service` with `request`, bounded by [`BOUND`].
async fn call<T>(service: T, request: tonic::Request<Work>) -> Result<Reply, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    grpc_call(tonic::client::Grpc::new(service), request).await
}

/// Calls `Work` through `grpc` with `request`, bounded by [`BOUND`].
async fn grpc_call<T>(
    mut grpc: tonic::client::Grpc<T>,
    request: tonic::Request<Work>,
) -> Result<Reply, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| Status::unknown(e.into().to_string()))?;
        let codec = tonic_prost::ProstCodec::<Work, Reply>::default();
        let path = PathAndQuery::from_static("/test.Slow/Work");
        grpc.unary(request, path, codec)
            .await
            .map(tonic::Response::into_inner)
    };
    tokio::time::timeout(BOUND, call)
        .await
        .expect("the call ended within its bound")
}

fn work(sleep: Duration, timeout: Option<Duration>) -> tonic::Request<Work> {
    let mut request = tonic::Request::new(Work {
        sleep_ms: u64::try_from(sleep.as_millis()).unwrap(),
    });
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    request
}

fn codes(results: &[Result<Reply, Status>]) -> Vec<Code> {
    results
        .iter()
        .map(|r| r.as_ref().map_or_else(Status::code, |_| Code::Ok))
        .collect()
}

/// The client sends 50 ms and waits: the deadline passes in the server, whose answer comes
/// the reply margin before it, ahead of tonic's own timer (same deadline, read a moment
/// earlier), every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_calls_whose_deadline_passes_in_the_server_are_deadline_exceeded() {
    let (addr, server) = serve(DeadlineLayer::new(HOP, ms(1_000)), Slow::sleeper()).await;
    let client = raw(addr);
    let calls = (0..100).map(|_| grpc_call(client.clone(), work(FOREVER, Some(ms(50)))));
    let codes = codes(&join_all(calls).await);
    assert_eq!(codes.len(), 100);
    assert!(
        codes.iter().all(|&c| c == Code::DeadlineExceeded),
        "every call must end DEADLINE_EXCEEDED: {codes:?}"
    );
    server.abort();
}

/// The library on both ends: a tonic `Channel` behind `PropagateLayer`, in a 50 ms scope.
/// Whichever comes first (the server's answer, the `Channel`'s own timer on the 45 ms it
/// sent, or the scope's deadline), the caller reads `DEADLINE_EXCEEDED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_calls_from_a_channel_behind_propagate_layer_are_deadline_exceeded() {
    let (addr, server) = serve(DeadlineLayer::new(HOP, ms(1_000)), Slow::sleeper()).await;
    let client = PropagateService::new(
        channel(addr).await,
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
    );
    let calls = (0..100).map(|_| {
        let client = client.clone();
        deadline_tokio::propagate(deadline_tokio::scope_timeout(ms(50), async move {
            call(client, work(FOREVER, None)).await
        }))
    });
    let results: Vec<_> = join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap_or_else(|cut| Err(cut.into())))
        .collect();
    let codes = codes(&results);
    assert_eq!(codes.len(), 100);
    assert!(
        codes.iter().all(|&c| c == Code::DeadlineExceeded),
        "every call must end DEADLINE_EXCEEDED: {codes:?}"
    );
    server.abort();
}

/// A tonic `Channel` behind `PropagateLayer`, each call with its own 50 ms
/// (`Request::set_timeout`) inside a 1 s request, to a server that knows no deadline and
/// never answers: 50 ms go out, the `Channel` times them and fails each call with its own
/// `CANCELLED` when they run out, and the layer reads that failure against the 50 ms it sent
/// (not the request's 1 s): every caller reads `DEADLINE_EXCEEDED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channels_own_timer_on_a_shorter_timeout_set_on_the_call_is_deadline_exceeded() {
    // No DeadlineLayer: the server never answers, so the client's own timer decides.
    let (addr, server) = serve_bare(Slow::sleeper()).await;
    let client = PropagateService::new(
        channel(addr).await,
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
    );
    let calls = (0..100).map(|_| {
        let client = client.clone();
        deadline_tokio::propagate(deadline_tokio::scope_timeout(ms(1_000), async move {
            call(client, work(FOREVER, Some(ms(50)))).await
        }))
    });
    // A call the scope cut at its deadline reads as the scope's error, `DEADLINE_EXCEEDED`.
    let results: Vec<_> = join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap_or_else(|cut| Err(cut.into())))
        .collect();
    let codes = codes(&results);
    assert_eq!(codes.len(), 100);
    assert!(
        codes.iter().all(|&c| c == Code::DeadlineExceeded),
        "every call must end DEADLINE_EXCEEDED: {codes:?}"
    );
    server.abort();
}

/// A tonic `Channel` called inside `Dependency::run`, each attempt's timeout set on its call
/// (`Request::set_timeout(limits.timeout())`), to a tonic server whose handler never answers:
/// whichever comes first, the driver's timer, the `Channel`'s (its own `CANCELLED`) or the
/// server's answer to the `grpc-timeout` it was sent (tonic's server answers `CANCELLED`
/// then), each attempt ran out of time. So the call is retried as a timeout is, counts three
/// timeouts and ends as the library's timeout, `DEADLINE_EXCEEDED` for the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channels_own_timer_inside_a_dependency_call_is_a_timeout() {
    use deadline_core::policy::Backoff;
    use deadline_core::{CallError, Error, Policy};

    static HANGS: deadline_tokio::Dependency = deadline_tokio::Dependency::new(
        Policy::required("hangs")
            .idempotent()
            .with_cap(ms(50))
            .with_floor(ms(5))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(5))),
    );
    let (addr, server) = serve_bare(Slow::sleeper()).await;
    let client = channel(addr).await;
    let tries = std::sync::atomic::AtomicU32::new(0);
    let result = deadline_tokio::scope_timeout(ms(10_000), async {
        HANGS
            .run(|limits| {
                tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                call(client.clone(), work(FOREVER, Some(limits.timeout())))
            })
            .classify(deadline_tokio::tonic::classify)
            .await
    })
    .await
    .expect("the call ended within its bound");
    let error = result.unwrap_err();
    assert!(
        matches!(error, CallError::Library(Error::Timeout { .. })),
        "{error:?}"
    );
    assert_eq!(Status::from(error).code(), Code::DeadlineExceeded);
    assert_eq!(tries.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(HANGS.counters().snapshot().timeouts, 3);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_deadline_is_deadline_exceeded_when_it_decides() {
    // Clamped: the caller asks for 10 s, the server believes 100 ms at most.
    let clamped = DeadlineLayer::new(
        Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(100)),
        ms(1_000),
    );
    let (addr, server) = serve(clamped, Slow::sleeper()).await;
    let result = call(channel(addr).await, work(FOREVER, Some(ms(10_000)))).await;
    assert_eq!(codes(&[result]), [Code::DeadlineExceeded]);
    server.abort();

    // No timeout sent: the server's default budget, 100 ms.
    let (addr, server) = serve(DeadlineLayer::new(HOP, ms(100)), Slow::sleeper()).await;
    let result = call(channel(addr).await, work(FOREVER, None)).await;
    assert_eq!(codes(&[result]), [Code::DeadlineExceeded]);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_on_arrival_is_deadline_exceeded_without_calling_the_handler() {
    let called = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = Slow::new({
        let called = called.clone();
        move |_work| {
            called.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(Reply { left_us: 0 }) }
        }
    });
    let (addr, server) = serve(DeadlineLayer::new(HOP, ms(1_000)), counting).await;
    let mut request = work(Duration::ZERO, None);
    request
        .metadata_mut()
        .insert("grpc-timeout", "0m".parse().unwrap());
    let result = grpc_call(raw(addr), request).await;
    assert_eq!(codes(&[result]), [Code::DeadlineExceeded]);
    assert_eq!(called.load(std::sync::atomic::Ordering::SeqCst), 0);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_shed_by_admission_is_unavailable() {
    let shedding = DeadlineLayer::new(HOP, ms(1_000)).with_admission(Admission::new(ms(50)));
    let (addr, server) = serve(shedding, Slow::sleeper()).await;
    let client = raw(addr);
    let shed = grpc_call(client.clone(), work(Duration::ZERO, Some(ms(20)))).await;
    assert_eq!(codes(&[shed]), [Code::Unavailable]);
    // With enough time, the same server answers.
    let served = grpc_call(client, work(Duration::ZERO, Some(ms(5_000)))).await;
    assert_eq!(codes(&[served]), [Code::Ok]);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_grpc_timeout_is_invalid_argument() {
    let (addr, server) = serve(DeadlineLayer::new(HOP, ms(1_000)), Slow::sleeper()).await;
    let client = raw(addr);
    for bad in ["5x", "-5m", "123456789m", "m"] {
        let mut request = work(Duration::ZERO, None);
        request
            .metadata_mut()
            .insert("grpc-timeout", bad.parse().unwrap());
        let result = grpc_call(client.clone(), request).await;
        let status = result.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{bad}");
        assert!(
            status
                .message()
                .starts_with("malformed grpc-timeout header"),
            "{bad}"
        );
    }
    server.abort();
}

/// The first server's handler calls the second through `PropagateLayer`, with `?`: the
/// second is told the time left, and whichever runs out first, the client reads
/// `DEADLINE_EXCEEDED`, never the second server's `CANCELLED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_two_tonic_servers_answers_deadline_exceeded() {
    let (inner_addr, inner) = serve(DeadlineLayer::new(HOP, ms(1_000)), Slow::sleeper()).await;
    let next = PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout);
    let next = PropagateService::new(channel(inner_addr).await, next);
    let gateway = Slow::new(move |work: Work| {
        let next = next.clone();
        async move {
            let reply = call(next, tonic::Request::new(work)).await?;
            Ok(reply)
        }
    });
    let (outer_addr, outer) = serve(DeadlineLayer::new(HOP, ms(1_000)), gateway).await;
    let client = raw(outer_addr);
    let calls = (0..20).map(|_| grpc_call(client.clone(), work(FOREVER, Some(ms(100)))));
    let codes = codes(&join_all(calls).await);
    assert!(
        codes.iter().all(|&c| c == Code::DeadlineExceeded),
        "every call must end DEADLINE_EXCEEDED: {codes:?}"
    );
    // When the inner server answers in time, the answer comes back through the chain with
    // less time left than the caller sent.
    let reply = grpc_call(client, work(Duration::ZERO, Some(ms(200))))
        .await
        .unwrap();
    assert!(
        reply.left_us > 0 && reply.left_us < 200_000,
        "{}",
        reply.left_us
    );
    outer.abort();
    inner.abort();
}

/// A tonic client over `PropagateLayer` with its budget spent reads `DEADLINE_EXCEEDED`:
/// the layer's error carries a `tonic::Status` in its source chain, which tonic finds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_client_over_propagate_layer_reads_a_spent_budget_as_deadline_exceeded() {
    let (addr, server) = serve(DeadlineLayer::new(HOP, ms(1_000)), Slow::sleeper()).await;
    let client = PropagateService::new(
        channel(addr).await,
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
    );
    // 3 ms left, 5 ms kept per hop: nothing to send, so no call.
    let result = deadline_tokio::scope_timeout(ms(3), call(client, work(Duration::ZERO, None)))
        .await
        .expect("inside its scope");
    let status = result.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    server.abort();
}

/// `futures::future::join_all`, for a handful of futures, without the dependency: each is
/// spawned on the runtime and awaited in order.
async fn join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}
