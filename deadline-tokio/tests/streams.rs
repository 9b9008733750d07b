//! Streams over real sockets: a server-streaming tonic call and an axum server-sent-events
//! response, both behind `DeadlineLayer`, are cut at the deadline with the right status, and
//! the handler's stream is dropped.
//!
//! Real sockets run on real time: the tests assert outcomes (statuses, errors, that the
//! stream was dropped), not durations. Every wait is bounded.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::sse::{Event, Sse};
use deadline_core::ms;
use deadline_core::wire::Propagation;
use deadline_tokio::DeadlineLayer;
use http::uri::PathAndQuery;
use http_body_util::BodyExt;
use tonic::codegen::tokio_stream::Stream;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Status};

const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
/// The bound on any one wait of these tests.
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

/// Whether a stream was dropped, and how many items it sent.
#[derive(Clone, Default)]
struct Watch {
    dropped: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
}

impl Watch {
    /// Waits (bounded: 5 s, in 5 ms steps) until the stream is dropped.
    async fn dropped(&self) -> bool {
        for _ in 0..1_000 {
            if self.dropped.load(Ordering::SeqCst) {
                return true;
            }
            tokio::time::sleep(ms(5)).await;
        }
        false
    }
}

/// A stream that yields an item every 10 ms, forever, and records its drop.
struct Ticker<T> {
    sleep: Pin<Box<tokio::time::Sleep>>,
    watch: Watch,
    item: fn() -> T,
}

impl<T> Ticker<T> {
    fn new(watch: &Watch, item: fn() -> T) -> Self {
        Ticker {
            sleep: Box::pin(tokio::time::sleep(ms(10))),
            watch: watch.clone(),
            item,
        }
    }
}

impl<T> Drop for Ticker<T> {
    fn drop(&mut self) {
        self.watch.dropped.store(true, Ordering::SeqCst);
    }
}

impl<T> Stream for Ticker<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let next = tokio::time::Instant::now() + ms(10);
        self.sleep.as_mut().reset(next);
        self.watch.sent.fetch_add(1, Ordering::SeqCst);
        Poll::Ready(Some((self.item)()))
    }
}

impl<T> Unpin for Ticker<T> {}

/// `test.Ticks/Watch`: a server-streaming method that ticks forever.
#[derive(Clone)]
struct Ticks(Watch);

impl tonic::server::NamedService for Ticks {
    const NAME: &'static str = "test.Ticks";
}

struct Method(Watch);

impl tonic::server::ServerStreamingService<Work> for Method {
    type Response = Reply;
    type ResponseStream = Ticker<Result<Reply, Status>>;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<Self::ResponseStream>, Status>> + Send>>;

    fn call(&mut self, _request: tonic::Request<Work>) -> Self::Future {
        let stream = Ticker::new(&self.0, || Ok(Reply { left_us: 1 }));
        Box::pin(async move { Ok(tonic::Response::new(stream)) })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Ticks {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let method = Method(self.0.clone());
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<Reply, Work>::default();
            Ok(tonic::server::Grpc::new(codec)
                .server_streaming(method, request)
                .await)
        })
    }
}

/// Serves `service` behind `DeadlineLayer` with tonic's server on a loopback port.
fn serve<S>(service: S) -> (SocketAddr, tokio::task::JoinHandle<()>)
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let server = Server::builder()
        .layer(DeadlineLayer::new(HOP, ms(10_000)))
        .add_service(service)
        .serve_with_incoming(incoming);
    let task = tokio::spawn(async move {
        server.await.unwrap();
    });
    (addr, task)
}

/// Calls `test.Ticks/Watch` at `addr` with `timeout`, from a tonic client with no timer of its
/// own (what it reads is what the server sent), and reads the stream to its end (bounded):
/// the replies received, and the status it ended with.
async fn watch_ticks(addr: SocketAddr, timeout: Duration) -> (Vec<u64>, Status) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let mut grpc =
        tonic::client::Grpc::with_origin(client, format!("http://{addr}").parse().unwrap());
    let call = async {
        grpc.ready().await.unwrap();
        let mut request = tonic::Request::new(Work { sleep_ms: 0 });
        request.set_timeout(timeout);
        let codec = tonic_prost::ProstCodec::<Work, Reply>::default();
        let path = PathAndQuery::from_static("/test.Ticks/Watch");
        let mut stream = grpc
            .server_streaming(request, path, codec)
            .await
            .unwrap()
            .into_inner();
        let mut received = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(reply)) => received.push(reply.left_us),
                Ok(None) => return (received, Status::ok("the stream ended")),
                Err(status) => return (received, status),
            }
        }
    };
    tokio::time::timeout(BOUND, call).await.expect("bounded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_streaming_call_is_cut_at_the_deadline_with_deadline_exceeded() {
    let watch = Watch::default();
    let (addr, server) = serve(Ticks(watch.clone()));
    let (received, status) = watch_ticks(addr, ms(200)).await;
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        !received.is_empty(),
        "some messages came before the deadline"
    );
    assert!(watch.dropped().await, "the handler's stream was dropped");
    server.abort();
}

/// A proxy's server-streaming answer: its frames are what the network gave it, not whole
/// messages. The first two frames are ready at once and hold two whole `Reply` messages and
/// the first bytes of a third, whose rest never comes.
struct Proxied {
    frames: Vec<bytes::Bytes>,
    watch: Watch,
}

impl Drop for Proxied {
    fn drop(&mut self) {
        self.watch.dropped.store(true, Ordering::SeqCst);
    }
}

impl http_body::Body for Proxied {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Infallible>>> {
        if self.frames.is_empty() {
            // Waits for the rest of the third message, which never comes.
            return Poll::Pending;
        }
        Poll::Ready(Some(Ok(http_body::Frame::data(self.frames.remove(0)))))
    }
}

/// `test.Ticks/Watch` answered by a proxy: [`Proxied`].
#[derive(Clone)]
struct Proxy(Watch);

impl tonic::server::NamedService for Proxy {
    const NAME: &'static str = "test.Ticks";
}

impl tower::Service<http::Request<tonic::body::Body>> for Proxy {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: http::Request<tonic::body::Body>) -> Self::Future {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for left_us in [1, 300, 7_000_000] {
            let message = prost::Message::encode_to_vec(&Reply { left_us });
            starts.push(bytes.len());
            bytes.push(0);
            bytes.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
            bytes.extend_from_slice(&message);
        }
        // Split 2 bytes into the second message, and 7 into the third (its prefix and 2
        // bytes of the message).
        let (second, third) = (starts[1] + 2, starts[2] + 7);
        let frames = vec![
            bytes::Bytes::copy_from_slice(&bytes[..second]),
            bytes::Bytes::copy_from_slice(&bytes[second..third]),
        ];
        let body = Proxied {
            frames,
            watch: self.0.clone(),
        };
        let response = http::Response::builder()
            .header("content-type", "application/grpc")
            .body(tonic::body::Body::new(body))
            .unwrap();
        std::future::ready(Ok(response))
    }
}

/// A stream cut at the deadline in the middle of a message (a proxy's frames split
/// messages): on the wire, the two whole messages, then trailers with `DEADLINE_EXCEEDED`,
/// and nothing of the third. A client that reads whole messages before the status (grpc-go's
/// reads the message it has begun, and reports a stream that ends inside one as `INTERNAL`)
/// would read part of one as a broken stream; tonic's client reads the trailers' status
/// either way, and gets the two messages and `DEADLINE_EXCEEDED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_stream_cut_inside_a_message_gives_the_client_deadline_exceeded() {
    let watch = Watch::default();
    let (addr, server) = serve(Proxy(watch.clone()));
    // A second: the proxied frames are ready at once, and must reach the client before the
    // deadline on a busy machine too.
    let (received, status) = watch_ticks(addr, ms(1_000)).await;
    assert_eq!(received, [1, 300]);
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(watch.dropped().await, "the proxied stream was dropped");

    // The same call read frame by frame over HTTP/2.
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let request = http::Request::post(format!("http://{addr}/test.Ticks/Watch"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", "1S")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(&[
            0, 0, 0, 0, 0,
        ])))
        .unwrap();
    let read = async {
        let mut body = client.request(request).await.unwrap().into_body();
        let mut data = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame.unwrap().into_data() {
                Ok(bytes) => data.extend_from_slice(&bytes),
                Err(frame) => return (data, frame.into_trailers().ok()),
            }
        }
        (data, None)
    };
    let (data, trailers) = tokio::time::timeout(BOUND, read).await.expect("bounded");
    let whole: Vec<u8> = [1, 300]
        .into_iter()
        .flat_map(|left_us| {
            let message = prost::Message::encode_to_vec(&Reply { left_us });
            let mut bytes = vec![0];
            bytes.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
            bytes.extend_from_slice(&message);
            bytes
        })
        .collect();
    assert_eq!(
        data, whole,
        "the two whole messages, and nothing of the third"
    );
    assert_eq!(trailers.expect("trailers")["grpc-status"], "4");
    server.abort();
}

fn event() -> Result<Event, Infallible> {
    Ok(Event::default().data("tick"))
}

/// An axum server whose `/events` streams server-sent events forever.
async fn sse_server(watch: &Watch) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let watch = watch.clone();
    let app = axum::Router::new()
        .route(
            "/events",
            axum::routing::get(move || {
                let watch = watch.clone();
                async move { Sse::new(Ticker::new(&watch, event)) }
            }),
        )
        .layer(DeadlineLayer::new(HOP, ms(10_000)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, task)
}

/// How a response body ended.
#[derive(Debug, PartialEq)]
enum Ended {
    /// Whole.
    Complete,
    /// In an error: a reset HTTP/2 stream (with the reset's reason, found in the error's
    /// source chain), an HTTP/1.1 chunked body cut short (no reason).
    Failed(Option<h2::Reason>),
}

/// The reason of the HTTP/2 reset in `error`'s source chain, if it has one.
fn reset_reason(error: &(dyn std::error::Error + 'static)) -> Option<h2::Reason> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            return h2.reason();
        }
        cause = error.source();
    }
    None
}

/// Reads a response body to its end: the data received, and how it ended.
async fn read_events(http2: bool, addr: SocketAddr) -> (String, Ended) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(http2)
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let request = http::Request::get(format!("http://{addr}/events"))
        .header("x-deadline-ms", "200")
        .body(http_body_util::Empty::new())
        .unwrap();
    let read = async {
        let response = client.request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let mut text = String::new();
        loop {
            match body.frame().await {
                None => return (text, Ended::Complete),
                Some(Err(error)) => return (text, Ended::Failed(reset_reason(&error))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        text.push_str(&String::from_utf8_lossy(&data));
                    }
                }
            }
        }
    };
    tokio::time::timeout(BOUND, read).await.expect("bounded")
}

/// The body ends in an error, never complete: over HTTP/2 a reset with `CANCEL` (which a
/// gRPC or Connect client reads as `CANCELLED`, the deadline's shape; hyper's default for a
/// failed body, `INTERNAL_ERROR`, reads as `INTERNAL`), over HTTP/1.1 a chunked body cut
/// short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_response_is_cut_at_the_deadline_over_http1_and_http2() {
    for http2 in [false, true] {
        let watch = Watch::default();
        let (addr, server) = sse_server(&watch).await;
        let (text, ended) = read_events(http2, addr).await;
        assert!(text.contains("data: tick"), "events came first: {text:?}");
        let reset = http2.then_some(h2::Reason::CANCEL);
        assert_eq!(ended, Ended::Failed(reset), "http2 = {http2}");
        assert!(
            watch.dropped().await,
            "http2 = {http2}: the stream was dropped"
        );
        server.abort();
    }
}
