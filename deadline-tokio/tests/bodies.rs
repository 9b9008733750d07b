//! The layers on virtual time: Connect's `connect-timeout-ms`, response bodies bounded by the
//! deadline (server and client), and downstream failures that arrive with no time left.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use deadline_core::wire::{DeadlineHeader, Propagation};
use deadline_core::{Clock, Error, Instant, ms};
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::{BodyError, DeadlineBody, PropagateError, PropagateLayer};
use deadline_tokio::time::TokioClock;
use deadline_tokio::{remaining, scope_timeout};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, StreamBody};
use tokio::time::Sleep;
use tonic::codegen::tokio_stream::{self, Stream, StreamExt};
use tower::{Layer, ServiceExt, service_fn};

const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));

fn layer() -> DeadlineLayer {
    DeadlineLayer::new(HOP, ms(1_000)).with_reply_margin(Duration::ZERO)
}

fn request(headers: &[(&'static str, &'static str)]) -> Request<()> {
    let mut builder = Request::builder();
    for &(name, value) in headers {
        builder = builder.header(name, value);
    }
    builder.body(()).unwrap()
}

/// What a ticking body saw: the time left in its scope at each poll, when it was dropped.
#[derive(Clone, Default)]
struct Watch {
    dropped: Arc<Mutex<Option<Instant>>>,
    left: Arc<Mutex<Vec<Option<Duration>>>>,
}

/// A body that sends a frame every 10 ms, forever (a server-sent event stream, a
/// server-streaming call), and records what it sees.
struct Ticker {
    sleep: Pin<Box<Sleep>>,
    watch: Watch,
}

impl Ticker {
    fn new(watch: &Watch) -> Self {
        Ticker {
            sleep: Box::pin(tokio::time::sleep(ms(10))),
            watch: watch.clone(),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        *self.watch.dropped.lock().unwrap() = Some(TokioClock.now());
    }
}

impl Body for Ticker {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.watch.left.lock().unwrap().push(remaining());
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let next = tokio::time::Instant::now() + ms(10);
        self.sleep.as_mut().reset(next);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"data: tick\n\n")))))
    }
}

/// Reads `body` to its end: the data frames, then the trailers or the error it ended with.
async fn drain<B: Body<Data = Bytes>>(body: B) -> (usize, Result<Option<HeaderMap>, B::Error>) {
    let mut body = std::pin::pin!(body);
    let mut frames = 0;
    loop {
        match body.frame().await {
            None => return (frames, Ok(None)),
            Some(Err(error)) => return (frames, Err(error)),
            Some(Ok(frame)) => match frame.into_trailers() {
                Ok(trailers) => return (frames, Ok(Some(trailers))),
                Err(_data) => frames += 1,
            },
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_server_reads_connect_timeout_ms() {
    let server = layer().layer(service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(format!("{:?}", remaining().unwrap())))
    }));
    let response = server
        .clone()
        .oneshot(request(&[("connect-timeout-ms", "300")]))
        .await
        .unwrap();
    let text = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(text, "300ms");
    // With several deadline headers, the earliest deadline wins.
    let response = server
        .clone()
        .oneshot(request(&[
            ("connect-timeout-ms", "300"),
            ("x-deadline-ms", "40"),
        ]))
        .await
        .unwrap();
    assert_eq!(
        response.into_body().collect().await.unwrap().to_bytes(),
        "40ms"
    );
    // Eleven digits: malformed, 400, named, in Connect's JSON error (a request with
    // Connect's own timeout header is a Connect request).
    let response = server
        .clone()
        .oneshot(request(&[("connect-timeout-ms", "10000000000")]))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let text = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        text,
        r#"{"code":"invalid_argument","message":"malformed connect-timeout-ms header: header value has too many digits"}"#
    );
}

#[tokio::test(start_paused = true)]
async fn a_connect_request_gets_a_connect_answer() {
    let server = layer().layer(service_fn(|_req: Request<()>| async {
        tokio::time::sleep(ms(10_000)).await;
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    // Unary: the error's HTTP status and Connect's JSON error. Also for a unary request
    // without `connect-protocol-version` (Connect clients should send it, and may not): it is
    // Connect's by its `connect-timeout-ms`, and a plain 504 would read as `unavailable` to a
    // Connect client. A GET with neither header (it runs on the server's default budget of
    // 1 s) carries `connect=v1` in its query string instead.
    let versioned: &[(&str, &str)] = &[
        ("connect-protocol-version", "1"),
        ("content-type", "application/proto"),
        ("connect-timeout-ms", "50"),
    ];
    let unversioned: &[(&str, &str)] = &[
        ("content-type", "application/json"),
        ("connect-timeout-ms", "50"),
    ];
    let get = Request::get("/acme.Prices/Quote?encoding=json&message=%7B%7D&connect=v1")
        .body(())
        .unwrap();
    // Nor one with only Connect's protobuf type, which no other protocol uses.
    let proto: &[(&str, &str)] = &[("content-type", "application/proto")];
    for request in [
        request(versioned),
        request(unversioned),
        get,
        request(proto),
    ] {
        let asked = format!("{request:?}");
        let response = server.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT, "{asked}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let text = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            text,
            r#"{"code":"deadline_exceeded","message":"deadline exceeded"}"#
        );
    }
    // Streaming: HTTP 200 and an end-of-stream message (flags 0x02, length, JSON).
    let stream = request(&[
        ("content-type", "application/connect+proto"),
        ("connect-timeout-ms", "-1"),
    ]);
    let response = server.oneshot(stream).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "application/connect+proto"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = br#"{"error":{"code":"invalid_argument","message":"malformed connect-timeout-ms header: header value has a sign"}}"#;
    assert_eq!(bytes[0], 0x02);
    assert_eq!(
        &bytes[1..5],
        &u32::try_from(json.len()).unwrap().to_be_bytes()
    );
    assert_eq!(&bytes[5..], json);
}

#[tokio::test(start_paused = true)]
async fn the_client_writes_connect_timeout_ms() {
    let next = service_fn(|req: Request<()>| async move {
        Ok::<_, Infallible>(Response::new(req.headers().clone()))
    });
    let client = PropagateLayer::new(HOP, DeadlineHeader::ConnectTimeout).layer(next);
    let sent = scope_timeout(ms(200), client.clone().oneshot(request(&[])))
        .await
        .expect("inside its scope")
        .unwrap()
        .into_body()
        .into_inner()
        .unwrap();
    assert_eq!(sent["connect-timeout-ms"], "195");
    assert!(sent.get("grpc-timeout").is_none() && sent.get("x-deadline-ms").is_none());
    // A shorter timeout already on the request (in any of the three headers) is kept.
    let sent = scope_timeout(
        ms(200),
        client
            .clone()
            .oneshot(request(&[("connect-timeout-ms", "40")])),
    )
    .await
    .expect("inside its scope")
    .unwrap()
    .into_body()
    .into_inner()
    .unwrap();
    assert_eq!(sent["connect-timeout-ms"], "40");
    // Under one millisecond left to send: no call.
    let spent = scope_timeout(
        ms(5) + Duration::from_micros(900),
        client.oneshot(request(&[])),
    )
    .await
    .expect("inside its scope");
    assert_eq!(
        spent.unwrap_err(),
        PropagateError::Deadline(Error::DeadlineExceeded)
    );
}

/// The server bounds a streaming body by the request's deadline, polls it in the request's
/// scope, drops it at the deadline and ends a gRPC stream with DEADLINE_EXCEEDED trailers.
#[tokio::test(start_paused = true)]
async fn a_grpc_stream_is_cut_at_the_deadline_with_deadline_exceeded_trailers() {
    let watch = Watch::default();
    let server = layer().layer(service_fn({
        let watch = watch.clone();
        move |_req: Request<()>| {
            let body = Ticker::new(&watch);
            async move { Ok::<_, Infallible>(Response::new(body)) }
        }
    }));
    let start = TokioClock.now();
    let request = request(&[
        ("content-type", "application/grpc"),
        ("grpc-timeout", "55m"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    let (frames, end) = drain(response.into_body()).await;
    assert_eq!(frames, 5, "a frame at 10, 20, 30, 40 and 50 ms");
    let trailers = end.unwrap().expect("trailers");
    assert_eq!(trailers["grpc-status"], "4");
    assert_eq!(trailers["grpc-message"], "deadline exceeded");
    assert_eq!(*watch.dropped.lock().unwrap(), Some(start + ms(55)));
    // Every poll of the body ran in the request's scope.
    let left = watch.left.lock().unwrap();
    assert!(!left.is_empty());
    assert!(
        left.iter().all(|l| l.is_some_and(|l| l <= ms(55))),
        "{left:?}"
    );
}

/// A gRPC client checks the answer's content type before it reads `grpc-status`: a client
/// that sent JSON (`application/grpc+json`, as connect-go's gRPC client with its JSON codec
/// does) rejects a bare `application/grpc` as `INTERNAL`, so the answer made at the deadline
/// names the request's codec. Media types are compared without regard to case.
#[tokio::test(start_paused = true)]
async fn a_grpc_answer_names_the_requests_codec() {
    let server = layer().layer(service_fn(|_req: Request<()>| async {
        tokio::time::sleep(ms(10_000)).await;
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    for (sent, answered) in [
        ("application/grpc+json", "application/grpc+json"),
        ("application/grpc+proto", "application/grpc"),
        ("Application/GRPC", "application/grpc"),
        ("application/grpc-web+json", "application/grpc-web+json"),
        (
            "application/grpc-web-text+json",
            "application/grpc-web-text+json",
        ),
    ] {
        let response = server
            .clone()
            .oneshot(request(&[("content-type", sent), ("grpc-timeout", "50m")]))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{sent}");
        assert_eq!(response.headers()["content-type"], answered, "{sent}");
        assert_eq!(response.headers()["grpc-status"], "4", "{sent}");
    }
}

/// A request in a codec other than protobuf or JSON (connect-go and grpc-go take any codec a
/// service registers: `application/grpc+cbor`) is answered in the request's own media type and
/// codec, in the case sent: connect-go reads an answer in another codec as `INTERNAL`, not
/// `DEADLINE_EXCEEDED`. So whether the layer answers at the deadline or at once (no time
/// left); a Connect stream's end message carries the error whatever the codec.
#[tokio::test(start_paused = true)]
async fn an_answer_repeats_a_codec_it_cannot_name() {
    let server = layer().layer(service_fn(|_req: Request<()>| async {
        tokio::time::sleep(ms(10_000)).await;
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    for sent in [
        "application/grpc+cbor",
        "application/grpc+Thrift; charset=utf-8",
        "application/grpc-web+cbor",
        "application/grpc-web-text+cbor",
        "application/connect+cbor",
    ] {
        let connect = sent.starts_with("application/connect");
        for timeout in ["50m", "0m"] {
            let timeout_header = if connect {
                (
                    "connect-timeout-ms",
                    if timeout == "0m" { "0" } else { "50" },
                )
            } else {
                ("grpc-timeout", timeout)
            };
            let response = server
                .clone()
                .oneshot(request(&[("content-type", sent), timeout_header]))
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{sent} {timeout}");
            // The media type and codec, as sent; not the parameters.
            let repeated = sent.split(';').next().unwrap();
            assert_eq!(
                response.headers()["content-type"],
                repeated,
                "{sent} {timeout}"
            );
            if connect {
                let body = response.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body[0], 0x02, "{sent}: the end-of-stream message");
                assert!(
                    body[5..].starts_with(br#"{"error":{"code":"deadline_exceeded""#),
                    "{sent}: {body:?}"
                );
            } else {
                assert_eq!(response.headers()["grpc-status"], "4", "{sent} {timeout}");
            }
        }
    }
    // A content type longer than the layer keeps (32 bytes) is answered in the protocol's
    // protobuf type, which a gRPC client that checks only the prefix still reads.
    let long = "application/grpc+a-codec-whose-name-is-long";
    let response = server
        .clone()
        .oneshot(request(&[("content-type", long), ("grpc-timeout", "50m")]))
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/grpc");
    assert_eq!(response.headers()["grpc-status"], "4");
    // JSON and protobuf keep their fixed names: nothing else of the request is repeated.
    let response = server
        .oneshot(request(&[
            ("content-type", "application/grpc+JSON; charset=utf-8"),
            ("grpc-timeout", "50m"),
        ]))
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/grpc+json");
}

/// A gRPC-Web stream (a browser's, through tonic-web behind the layer) cut at the deadline
/// ends with its trailers as the body's last message, gRPC-Web's trailer frame, since a
/// browser cannot read HTTP trailers; in base64 for `application/grpc-web-text`. A gRPC-Web
/// request answered at once gets a trailers-only answer in gRPC-Web's content type.
#[tokio::test(start_paused = true)]
async fn a_grpc_web_stream_is_cut_with_a_trailer_frame() {
    let frame = deadline_trailer_frame();
    let server = layer().layer(service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Ticker::new(&Watch::default())))
    }));
    for (content_type, last) in [
        ("application/grpc-web+proto", Bytes::from(frame.clone())),
        (
            "application/grpc-web-text",
            Bytes::from(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                &frame,
            )),
        ),
    ] {
        let request = request(&[("content-type", content_type), ("grpc-timeout", "25m")]);
        let response = server.clone().oneshot(request).await.unwrap();
        let mut body = std::pin::pin!(response.into_body());
        let mut data = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.unwrap();
            assert!(frame.is_data(), "{content_type}: no HTTP trailers");
            data.push(frame.into_data().unwrap());
        }
        assert_eq!(
            data.len(),
            3,
            "{content_type}: two ticks, then the trailer frame"
        );
        assert_eq!(data[2], last, "{content_type}");
    }

    // No time to serve it: answered at once, trailers-only, in gRPC-Web's content type.
    let request = request(&[
        ("content-type", "application/grpc-web-text"),
        ("grpc-timeout", "0m"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "application/grpc-web-text+proto"
    );
    assert_eq!(response.headers()["grpc-status"], "4");
    let (frames, end) = drain(response.into_body()).await;
    assert_eq!((frames, end.unwrap()), (0, None));
}

/// A body that sends the frames it is given, each at its time after it was made, then waits
/// for ever (or ends, with trailers if it has some).
fn script(
    frames: Vec<(Duration, Frame<Bytes>)>,
    ends: bool,
) -> StreamBody<impl Stream<Item = Result<Frame<Bytes>, Infallible>>> {
    let start = tokio::time::Instant::now();
    let sent = tokio_stream::iter(frames).then(move |(at, frame)| async move {
        tokio::time::sleep_until(start + at).await;
        Ok(frame)
    });
    // Once the frames are sent: the end, or a wait that never ends.
    let then = tokio_stream::pending().take(usize::from(!ends));
    StreamBody::new(sent.chain(then))
}

/// A body that sends `frames` as [`script`] does, then fails with `error` at `fails_at` after
/// it was made.
fn failing_script(
    frames: Vec<(Duration, Frame<Bytes>)>,
    fails_at: Duration,
    error: &'static str,
) -> StreamBody<impl Stream<Item = Result<Frame<Bytes>, std::io::Error>>> {
    let start = tokio::time::Instant::now();
    let sent = frames.into_iter().map(|(at, frame)| (at, Ok(frame)));
    let failed = (fails_at, Err(std::io::Error::other(error)));
    let items = sent.chain(std::iter::once(failed));
    StreamBody::new(
        tokio_stream::iter(items).then(move |(at, item)| async move {
            tokio::time::sleep_until(start + at).await;
            item
        }),
    )
}

/// gRPC-Web's trailer frame with `DEADLINE_EXCEEDED`: how the layer ends a gRPC-Web body cut
/// at the deadline.
fn deadline_trailer_frame() -> Vec<u8> {
    let lines = b"grpc-status:4\r\ngrpc-message:deadline exceeded\r\n";
    let mut frame = vec![0x80];
    frame.extend_from_slice(&u32::try_from(lines.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(lines);
    frame
}

/// `message` in the envelope gRPC, gRPC-Web and Connect streaming share.
fn envelope(message: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0];
    bytes.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    bytes.extend_from_slice(message);
    bytes
}

/// Reads `body` to its end: its data, and what ended it (trailers, or an error).
async fn read_all<B: Body<Data = Bytes>>(
    body: B,
) -> (Vec<u8>, Result<Option<HeaderMap>, B::Error>) {
    let mut body = std::pin::pin!(body);
    let mut data = Vec::new();
    loop {
        match body.frame().await {
            None => return (data, Ok(None)),
            Some(Err(error)) => return (data, Err(error)),
            Some(Ok(frame)) => match frame.into_trailers() {
                Ok(trailers) => return (data, Ok(Some(trailers))),
                Err(frame) => data.extend_from_slice(&frame.into_data().unwrap()),
            },
        }
    }
}

/// A server behind the layer whose handler answers with `frames` (made anew for each
/// request, then the body waits for ever, or ends), in the request's own content type: a
/// gRPC, gRPC-Web or Connect response.
fn answering<F>(
    frames: F,
    ends: bool,
) -> impl tower::Service<
    Request<()>,
    Response = Response<DeadlineBody<impl Body<Data = Bytes, Error = Infallible>>>,
    Error = Infallible,
> + Clone
where
    F: Fn() -> Vec<(Duration, Frame<Bytes>)> + Clone + Send + 'static,
{
    layer().layer(service_fn(move |req: Request<()>| {
        let mut response = Response::new(script(frames(), ends));
        if let Some(content_type) = req.headers().get("content-type") {
            response
                .headers_mut()
                .insert("content-type", content_type.clone());
        }
        async move { Ok::<_, Infallible>(response) }
    }))
}

/// A body that says its length exactly (as a proxied response with a `content-length`
/// does), whatever it sends.
struct Declared<B>(Pin<Box<B>>, u64);

impl<B: Body> Body for Declared<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.0.as_mut().poll_frame(cx)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.1)
    }
}

/// A stream whose response declares its length (a gateway passing on an upstream's
/// `content-length`) and which is cut at the deadline: its protocol's ending (gRPC's
/// trailers, gRPC-Web's trailer frame, Connect's end-stream message) is not counted in that
/// length, so the layer declares none (no header, and no exact size for hyper to write one
/// from), and the client reads the deadline's status, not a body whose length disagrees with
/// its head (a malformed HTTP/2 stream, a closed HTTP/1.1 connection). A plain HTTP body
/// keeps its length: cut, it ends short, which the length lets the client see.
#[tokio::test(start_paused = true)]
async fn a_declared_length_is_dropped_where_the_cut_writes_the_protocols_ending() {
    let message = envelope(b"abc");
    let server = layer().layer(service_fn({
        let message = message.clone();
        move |req: Request<()>| {
            let frames = vec![(ms(10), Frame::data(Bytes::from(message.clone())))];
            let body = Declared(Box::pin(script(frames, false)), 100);
            let mut response = Response::new(body);
            let headers = response.headers_mut();
            if let Some(content_type) = req.headers().get("content-type") {
                headers.insert("content-type", content_type.clone());
            }
            headers.insert("content-length", "100".parse().unwrap());
            async move { Ok::<_, Infallible>(response) }
        }
    }));
    for (content_type, ending) in [
        ("application/grpc", None),
        ("application/grpc-web+proto", Some(&b"grpc-status:4"[..])),
        ("application/connect+proto", Some(&b"deadline_exceeded"[..])),
    ] {
        let request = request(&[("content-type", content_type), ("grpc-timeout", "50m")]);
        let response = server.clone().oneshot(request).await.unwrap();
        assert!(
            response.headers().get("content-length").is_none(),
            "{content_type}: no length declared"
        );
        assert_eq!(response.body().size_hint().exact(), None, "{content_type}");
        let (data, end) = read_all(response.into_body()).await;
        assert_eq!(&data[..message.len()], &message[..], "{content_type}");
        let end = end.expect("an ending, not a cut stream");
        match ending {
            None => assert_eq!(end.expect("trailers")["grpc-status"], "4"),
            Some(ending) => {
                let written = &data[message.len()..];
                assert!(
                    written.windows(ending.len()).any(|w| w == ending),
                    "{content_type}: {written:?}"
                );
            }
        }
    }
    let request = request(&[("x-deadline-ms", "50")]);
    let response = server.oneshot(request).await.unwrap();
    assert_eq!(response.headers()["content-length"], "100");
    assert_eq!(response.body().size_hint().exact(), Some(100));
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, message);
    assert!(end.is_err(), "a cut stream, {end:?}");
}

/// A response compressed whole (`content-encoding: gzip`, as tower-http's `CompressionLayer`
/// inside the layer makes one for Connect streaming) is not the protocol's messages: cut at
/// the deadline, a gRPC-Web or Connect stream ends as a cut stream (the body fails, and the
/// server resets it), with no trailer frame or end-stream message written into the
/// compressed bytes, which would make the client's decoder fail on garbage instead. gRPC's
/// trailers travel beside the body, and still come.
#[tokio::test(start_paused = true)]
async fn a_body_compressed_whole_is_cut_with_nothing_written_into_it() {
    let compressed = Bytes::from_static(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
    let server = layer().layer(service_fn({
        let compressed = compressed.clone();
        move |req: Request<()>| {
            let frames = vec![(ms(10), Frame::data(compressed.clone()))];
            let mut response = Response::new(script(frames, false));
            let headers = response.headers_mut();
            headers.insert("content-type", req.headers()["content-type"].clone());
            headers.insert("content-encoding", "gzip".parse().unwrap());
            async move { Ok::<_, Infallible>(response) }
        }
    }));
    for content_type in ["application/grpc-web+proto", "application/connect+proto"] {
        let request = request(&[("content-type", content_type), ("grpc-timeout", "50m")]);
        let response = server.clone().oneshot(request).await.unwrap();
        let (data, end) = read_all(response.into_body()).await;
        assert_eq!(
            data,
            &compressed[..],
            "{content_type}: as it came, nothing added"
        );
        assert!(end.is_err(), "{content_type}: a cut stream, {end:?}");
    }
    let request = request(&[
        ("content-type", "application/grpc"),
        ("grpc-timeout", "50m"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, &compressed[..]);
    assert_eq!(end.unwrap().expect("trailers")["grpc-status"], "4");
}

/// A stream whose frames split its messages (a proxy passing on what it received) and which
/// is cut at the deadline in the middle of one: the client gets the whole messages, then the
/// deadline's status in its protocol's form, never part of a message before it (which a
/// client reading whole messages takes for a broken stream, `INTERNAL`, not
/// `DEADLINE_EXCEEDED`). A message split across frames is sent when it is whole.
#[tokio::test(start_paused = true)]
async fn a_stream_cut_in_the_middle_of_a_message_ends_after_the_whole_ones() {
    let (one, two, three) = (envelope(b"one"), envelope(b"second"), envelope(b"third"));
    let frames = {
        let (one, two, three) = (one.clone(), two.clone(), three.clone());
        move || {
            // At 10 ms: the first message and 3 bytes of the second; at 30 ms: the rest of the
            // second and 7 bytes of the third, whose rest would come at 100 ms.
            let mut first = one.clone();
            first.extend_from_slice(&two[..3]);
            let mut second = two[3..].to_vec();
            second.extend_from_slice(&three[..7]);
            vec![
                (ms(10), Frame::data(Bytes::from(first))),
                (ms(30), Frame::data(Bytes::from(second))),
                (ms(100), Frame::data(Bytes::from(three[7..].to_vec()))),
            ]
        }
    };
    let server = answering(frames, false);
    let mut whole = one.clone();
    whole.extend_from_slice(&two);
    let trailer_frame = deadline_trailer_frame();
    let end_stream = {
        let json = br#"{"error":{"code":"deadline_exceeded","message":"deadline exceeded"}}"#;
        let mut frame = vec![0x02];
        frame.extend_from_slice(&u32::try_from(json.len()).unwrap().to_be_bytes());
        frame.extend_from_slice(json);
        frame
    };
    for (content_type, last) in [
        ("application/grpc", None),
        ("application/grpc-web+proto", Some(&trailer_frame)),
        ("application/connect+proto", Some(&end_stream)),
    ] {
        let request = request(&[("content-type", content_type), ("grpc-timeout", "55m")]);
        let response = server.clone().oneshot(request).await.unwrap();
        let (data, end) = read_all(response.into_body()).await;
        let (messages, tail) = data.split_at(whole.len().min(data.len()));
        assert_eq!(messages, &whole[..], "{content_type}: the whole messages");
        match last {
            None => {
                assert!(tail.is_empty(), "{content_type}: {tail:?}");
                let trailers = end.unwrap().expect("trailers");
                assert_eq!(trailers["grpc-status"], "4", "{content_type}");
            }
            Some(last) => {
                assert_eq!(tail, &last[..], "{content_type}: then its last message");
                assert_eq!(end.unwrap(), None, "{content_type}");
            }
        }
    }
}

/// `bytes` in base64, padded: gRPC-Web's text form.
fn base64_text(bytes: &[u8]) -> Bytes {
    use base64::Engine;
    Bytes::from(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A gRPC-Web request in the base64 form, with `grpc-timeout: timeout`.
fn web_text_request(timeout: &'static str) -> Request<()> {
    request(&[
        ("content-type", "application/grpc-web-text"),
        ("grpc-timeout", timeout),
    ])
}

/// What a gRPC-Web client reads from a body in gRPC-Web's base64 form: its 4-character quanta
/// decoded in turn, any of them padded (a server may pad wherever it flushes, as gRPC-Web's
/// protocol says), however the body's frames split them.
fn decode_web_text(text: &[u8]) -> Vec<u8> {
    use base64::Engine;
    assert_eq!(text.len() % 4, 0, "whole quanta: {text:?}");
    text.chunks(4)
        .flat_map(|quantum| {
            base64::engine::general_purpose::STANDARD
                .decode(quantum)
                .expect("base64")
        })
        .collect()
}

/// gRPC-Web's base64 form (`application/grpc-web-text`, what a browser's gRPC-Web client asks
/// for by default) cut at the deadline in the middle of a message: the client decodes whole
/// messages, then the trailer frame with `DEADLINE_EXCEEDED`, never part of a message before
/// it. Two handlers: one that pads each frame's text (each frame's bytes encoded alone, the
/// messages split across frames), and one whose text is a single encoding split anywhere,
/// inside a quantum too.
#[tokio::test(start_paused = true)]
async fn a_grpc_web_text_stream_cut_in_the_middle_of_a_message_ends_after_the_whole_ones() {
    let (one, two, three) = (envelope(b"one"), envelope(b"second"), envelope(b"third"));
    let mut stream = one.clone();
    stream.extend_from_slice(&two);
    stream.extend_from_slice(&three);
    let trailer_frame = deadline_trailer_frame();
    let mut expected = one.clone();
    expected.extend_from_slice(&two);
    expected.extend_from_slice(&trailer_frame);

    // At 10 ms the first message and 3 bytes of the second; at 30 ms the rest of the second
    // and 7 bytes of the third, whose rest would come at 100 ms: each frame encoded alone.
    let padded = {
        let (a, b) = (one.len() + 3, one.len() + two.len() + 7);
        let stream = stream.clone();
        move || {
            vec![
                (ms(10), Frame::data(base64_text(&stream[..a]))),
                (ms(30), Frame::data(base64_text(&stream[a..b]))),
                (ms(100), Frame::data(base64_text(&stream[b..]))),
            ]
        }
    };
    // One encoding of the whole stream, split at characters 13 and 35 (inside quanta): by
    // 30 ms, the text of the first message, the second and part of the third.
    let continuous = {
        let text = base64_text(&stream);
        move || {
            vec![
                (ms(10), Frame::data(text.slice(..13))),
                (ms(30), Frame::data(text.slice(13..35))),
                (ms(100), Frame::data(text.slice(35..))),
            ]
        }
    };
    let request = || web_text_request("55m");
    let response = answering(padded, false).oneshot(request()).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(end.unwrap(), None, "padded frames");
    assert_eq!(decode_web_text(&data), expected, "padded frames");
    let response = answering(continuous, false)
        .oneshot(request())
        .await
        .unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(end.unwrap(), None, "one encoding");
    assert_eq!(decode_web_text(&data), expected, "one encoding");
}

/// A gRPC-Web stream in the base64 form that ends in time reaches the client as its handler
/// sent it, whatever its frames split: the client decodes the same messages and trailer frame.
/// One whose text is not base64 is sent as it comes, and cut at the deadline it ends as a cut
/// stream (nothing written into text the client cannot read).
#[tokio::test(start_paused = true)]
async fn a_grpc_web_text_stream_loses_nothing_and_text_that_is_not_base64_passes_as_it_came() {
    let mut stream = envelope(b"one");
    stream.extend_from_slice(&envelope(&[9; 70]));
    let mut trailer = vec![0x80];
    trailer.extend_from_slice(&13_u32.to_be_bytes());
    trailer.extend_from_slice(b"grpc-status:0");
    stream.extend_from_slice(&trailer);
    // The text of the whole stream in frames of 1 to 7 characters.
    let frames = {
        let text = base64_text(&stream);
        move || {
            let mut frames = Vec::new();
            let mut at = 0;
            for size in [1, 7, 2, 5, 3, 6, 4].into_iter().cycle() {
                if at >= text.len() {
                    break;
                }
                let end = (at + size).min(text.len());
                frames.push((ms(1), Frame::data(text.slice(at..end))));
                at = end;
            }
            frames
        }
    };
    let request = || web_text_request("1S");
    let response = answering(frames, true).oneshot(request()).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(end.unwrap(), None);
    assert_eq!(decode_web_text(&data), stream);

    let not_base64 = || vec![(ms(10), Frame::data(Bytes::from_static(b"data: tick\n\n")))];
    let response = answering(not_base64, false)
        .oneshot(request())
        .await
        .unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, b"data: tick\n\n");
    assert_eq!(
        end.unwrap_err(),
        BodyError::Deadline(Error::DeadlineExceeded)
    );
}

/// A handler's stream that ends with part of a message (a broken stream of its own) loses
/// nothing: the held bytes are sent, then its trailers if it has some.
#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_inside_a_message_is_sent_as_it_was() {
    let mut sent = envelope(b"one");
    sent.extend_from_slice(&[0, 0, 0]);
    for with_trailers in [true, false] {
        let frames = {
            let sent = sent.clone();
            move || {
                let mut frames = vec![(ms(10), Frame::data(Bytes::from(sent.clone())))];
                if with_trailers {
                    let mut trailers = HeaderMap::new();
                    trailers.insert("grpc-status", "0".parse().unwrap());
                    frames.push((ms(20), Frame::trailers(trailers)));
                }
                frames
            }
        };
        let server = answering(frames, true);
        let request = request(&[("content-type", "application/grpc"), ("grpc-timeout", "1S")]);
        let response = server.oneshot(request).await.unwrap();
        let (data, end) = read_all(response.into_body()).await;
        assert_eq!(data, sent, "with trailers: {with_trailers}");
        let trailers = end.unwrap();
        assert_eq!(trailers.is_some(), with_trailers);
        if let Some(trailers) = trailers {
            assert_eq!(trailers["grpc-status"], "0");
        }
    }
}

/// A body always ready with one byte of a message at a time: the layer reads a bounded number
/// of frames in one poll, yields, and comes back; the message goes whole, as one frame.
#[tokio::test(start_paused = true)]
async fn a_message_in_many_small_frames_goes_whole() {
    let message = envelope(&[7; 100]);
    let frames = {
        let message = message.clone();
        move || {
            message
                .iter()
                .map(|byte| (ms(0), Frame::data(Bytes::copy_from_slice(&[*byte]))))
                .collect()
        }
    };
    let server = answering(frames, true);
    let request = request(&[("content-type", "application/grpc"), ("grpc-timeout", "1S")]);
    let response = server.oneshot(request).await.unwrap();
    let mut body = std::pin::pin!(response.into_body());
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), message);
    assert!(body.frame().await.is_none());
}

/// A message longer than the most held passes as it comes, and a stream cut inside it ends as
/// a cut stream (an error, on which the server resets it), never with a status after part of
/// a message.
#[tokio::test(start_paused = true)]
async fn a_stream_cut_inside_a_message_too_long_to_hold_is_reset() {
    let mut start = vec![0];
    start.extend_from_slice(&(4 * 1024 * 1024 + 1_u32).to_be_bytes());
    start.extend_from_slice(&[1; 1000]);
    let frames = {
        let start = start.clone();
        move || vec![(ms(10), Frame::data(Bytes::from(start.clone())))]
    };
    let server = answering(frames, false);
    let request = request(&[
        ("content-type", "application/grpc"),
        ("grpc-timeout", "50m"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, start, "its first bytes went as they came");
    assert_eq!(
        end.unwrap_err(),
        BodyError::Deadline(Error::DeadlineExceeded)
    );
}

/// A handler's body that fails while part of a message is held: the failure is the body's
/// end, and the part is dropped with it (the stream is reset; nothing looks complete).
#[tokio::test(start_paused = true)]
async fn a_stream_that_fails_inside_a_message_fails() {
    let whole = envelope(b"one");
    let mut first = whole.clone();
    first.extend_from_slice(&[0, 0]);
    let server = layer().layer(service_fn(move |_req: Request<()>| {
        let first = Bytes::from(first.clone());
        let failing = tokio_stream::iter([Ok(Frame::data(first)), Err("the upstream broke")]);
        let mut response = Response::new(StreamBody::new(failing));
        response
            .headers_mut()
            .insert("content-type", "application/grpc".parse().unwrap());
        async move { Ok::<_, Infallible>(response) }
    }));
    let request = request(&[("content-type", "application/grpc"), ("grpc-timeout", "1S")]);
    let response = server.oneshot(request).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, whole);
    assert_eq!(end.unwrap_err(), BodyError::Inner("the upstream broke"));
}

/// A gRPC-Web or Connect stream whose handler has sent its protocol's last message (the
/// trailer frame, the end-stream message) and then waits past the deadline (a proxy waiting
/// for its upstream's end) ends there: nothing is added after the client's answer.
#[tokio::test(start_paused = true)]
async fn a_stream_that_sent_its_last_message_gets_nothing_more() {
    let reply = envelope(b"reply");
    for (content_type, flag) in [
        ("application/grpc-web+proto", 0x80),
        ("application/connect+proto", 0x02),
    ] {
        let mut last = vec![flag];
        last.extend_from_slice(&5_u32.to_be_bytes());
        last.extend_from_slice(b"done!");
        let frames = {
            let (reply, last) = (reply.clone(), last.clone());
            move || {
                vec![
                    (ms(10), Frame::data(Bytes::from(reply.clone()))),
                    (ms(20), Frame::data(Bytes::from(last.clone()))),
                ]
            }
        };
        let server = answering(frames, false);
        let request = request(&[("content-type", content_type), ("grpc-timeout", "50m")]);
        let response = server.oneshot(request).await.unwrap();
        let (data, end) = read_all(response.into_body()).await;
        assert_eq!(data, [reply.clone(), last].concat(), "{content_type}");
        assert_eq!(end.unwrap(), None, "{content_type}");
    }
}

/// A gRPC request answered with a body that is not gRPC messages (no gRPC content type: an
/// event stream, an error page) is sent as it comes, and still cut with the deadline's
/// trailers.
#[tokio::test(start_paused = true)]
async fn a_grpc_request_answered_in_plain_bytes_is_sent_as_it_comes() {
    let frames = || vec![(ms(10), Frame::data(Bytes::from_static(b"\0\0\0\0\x09abc")))];
    let server = layer().layer(service_fn(move |_req: Request<()>| {
        let body = script(frames(), false);
        async move { Ok::<_, Infallible>(Response::new(body)) }
    }));
    let request = request(&[
        ("content-type", "application/grpc"),
        ("grpc-timeout", "50m"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, b"\0\0\0\0\x09abc", "sent as it came, not held");
    assert_eq!(end.unwrap().expect("trailers")["grpc-status"], "4");
}

/// A plain HTTP stream (server-sent events, chunked) ends with an error at the deadline,
/// which hyper turns into a reset stream or a closed connection.
#[tokio::test(start_paused = true)]
async fn an_http_stream_is_cut_at_the_deadline_with_an_error() {
    let watch = Watch::default();
    let server = layer().layer(service_fn({
        let watch = watch.clone();
        move |_req: Request<()>| {
            let body = Ticker::new(&watch);
            async move { Ok::<_, Infallible>(Response::new(body)) }
        }
    }));
    let start = TokioClock.now();
    let response = server
        .oneshot(request(&[("x-deadline-ms", "35")]))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (frames, end) = drain(response.into_body()).await;
    assert_eq!(frames, 3);
    assert_eq!(
        end.unwrap_err(),
        BodyError::Deadline(Error::DeadlineExceeded)
    );
    assert_eq!(*watch.dropped.lock().unwrap(), Some(start + ms(35)));
}

/// The client layer bounds the response body as well as the head.
#[tokio::test(start_paused = true)]
async fn the_client_layer_cuts_the_body_at_the_deadline() {
    let watch = Watch::default();
    let next = service_fn({
        let watch = watch.clone();
        move |_req: Request<()>| {
            let body = Ticker::new(&watch);
            async move { Ok::<_, Infallible>(Response::new(body)) }
        }
    });
    let client = PropagateLayer::new(HOP, DeadlineHeader::DeadlineMs).layer(next);
    let start = TokioClock.now();
    let (frames, end) = scope_timeout(ms(45), async {
        let response = client.oneshot(request(&[])).await.unwrap();
        drain(response.into_body()).await
    })
    .await
    .expect("inside its scope");
    assert_eq!(frames, 4);
    assert_eq!(
        end.unwrap_err(),
        PropagateError::Deadline(Error::DeadlineExceeded)
    );
    assert_eq!(*watch.dropped.lock().unwrap(), Some(start + ms(45)));
}

/// An answer that is a failure (HTTP 503/504, gRPC CANCELLED/UNAVAILABLE) arriving with no
/// time left to send is the deadline's; with time left it is relayed as it came.
#[tokio::test(start_paused = true)]
async fn a_downstream_failure_answer_with_no_time_left_is_the_deadlines() {
    let answering = |delay: Duration, status: u16, grpc: Option<&'static str>| {
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(service_fn(
            move |_req: Request<()>| async move {
                tokio::time::sleep(delay).await;
                let mut response = Response::new(String::new());
                *response.status_mut() = StatusCode::from_u16(status).unwrap();
                if let Some(code) = grpc {
                    let headers = response.headers_mut();
                    headers.insert("content-type", "application/grpc".parse().unwrap());
                    headers.insert("grpc-status", code.parse().unwrap());
                }
                Ok::<_, Infallible>(response)
            },
        ))
    };
    for (status, grpc) in [
        (503, None),
        (504, None),
        (200, Some("1")),
        (200, Some("14")),
    ] {
        // At 196 ms of 200, 4 ms are left: within the 5 ms allowance.
        let late = scope_timeout(
            ms(200),
            answering(ms(196), status, grpc).oneshot(request(&[])),
        )
        .await
        .expect("inside its scope");
        assert_eq!(
            late.unwrap_err(),
            PropagateError::Deadline(Error::DeadlineExceeded),
            "{status} {grpc:?}"
        );
        // At 100 ms it is the next service's own answer.
        let early = scope_timeout(
            ms(200),
            answering(ms(100), status, grpc).oneshot(request(&[])),
        )
        .await
        .expect("inside its scope")
        .unwrap();
        assert_eq!(early.status().as_u16(), status);
        assert_eq!(
            early
                .headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap()),
            grpc
        );
    }
}

/// gRPC trailers with CANCELLED or UNAVAILABLE at the end of a body, with no time left, are
/// rewritten to DEADLINE_EXCEEDED, without the status details they came with (whose code a
/// client checks against the status: grpc-go reads a mismatch as INTERNAL); the other
/// trailers stay. With time left, relayed as they came.
#[tokio::test(start_paused = true)]
async fn grpc_trailers_with_no_time_left_are_rewritten_to_deadline_exceeded() {
    let trailing = |delay: Duration, code: &'static str| {
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(service_fn(
            move |_req: Request<()>| async move {
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", code.parse().unwrap());
                trailers.insert("grpc-status-details-bin", "CA4".parse().unwrap());
                trailers.insert("x-app", "kept".parse().unwrap());
                let body = Delayed {
                    sleep: Box::pin(tokio::time::sleep(delay)),
                    trailers: Some(trailers),
                };
                Ok::<_, Infallible>(Response::new(body))
            },
        ))
    };
    for code in ["1", "14"] {
        let late = scope_timeout(ms(200), async {
            let response = trailing(ms(196), code).oneshot(request(&[])).await.unwrap();
            drain(response.into_body()).await
        })
        .await
        .expect("inside its scope");
        let trailers = late.1.unwrap().unwrap();
        assert_eq!(trailers["grpc-status"], "4", "{code}");
        assert_eq!(trailers.get("grpc-status-details-bin"), None, "{code}");
        assert_eq!(trailers["x-app"], "kept", "{code}");
        let early = scope_timeout(ms(200), async {
            let response = trailing(ms(100), code).oneshot(request(&[])).await.unwrap();
            drain(response.into_body()).await
        })
        .await
        .expect("inside its scope");
        let trailers = early.1.unwrap().unwrap();
        assert_eq!(trailers["grpc-status"], code);
        assert_eq!(trailers["grpc-status-details-bin"], "CA4");
    }
}

/// Trailers that say when to retry, or not to (`grpc-retry-pushback-ms`, gRFC A6), are the
/// next service's own answer whenever they come, as in a response's head: relayed as they
/// came, with no time left too ("do not retry" stays "do not retry", with its status).
#[tokio::test(start_paused = true)]
async fn grpc_trailers_with_a_pushback_are_relayed_as_they_came() {
    let trailing = |pushback: &'static str| {
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(service_fn(
            move |_req: Request<()>| async move {
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", "14".parse().unwrap());
                trailers.insert("grpc-retry-pushback-ms", pushback.parse().unwrap());
                let body = Delayed {
                    sleep: Box::pin(tokio::time::sleep(ms(196))),
                    trailers: Some(trailers),
                };
                Ok::<_, Infallible>(Response::new(body))
            },
        ))
    };
    for pushback in ["-1", "50"] {
        let late = scope_timeout(ms(200), async {
            let response = trailing(pushback).oneshot(request(&[])).await.unwrap();
            drain(response.into_body()).await
        })
        .await
        .expect("inside its scope");
        let trailers = late.1.unwrap().unwrap();
        assert_eq!(trailers["grpc-status"], "14", "{pushback}");
        assert_eq!(trailers["grpc-retry-pushback-ms"], pushback);
    }
}

/// A stream of one trailers frame, after a delay.
struct Delayed {
    sleep: Pin<Box<Sleep>>,
    trailers: Option<HeaderMap>,
}

impl Body for Delayed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
}

/// A gateway's handler that passes on an upstream's streaming answer, called through
/// `PropagateLayer` in the request's scope: the upstream sends one message, then waits. The
/// relayed body is bounded by the same deadline and polled first, so at the deadline it fails
/// with the deadline's error; the client still gets the message, then the deadline's
/// trailers (`grpc-status: 4`), as for a body of the handler's own. The body failed with
/// that error before, which resets the stream: a gRPC client reads `INTERNAL`.
#[tokio::test(start_paused = true)]
async fn a_relayed_stream_cut_at_the_deadline_ends_with_the_deadlines_trailers() {
    let message = envelope(b"abc");
    let upstream_message = message.clone();
    let server = layer().layer(service_fn(move |req: Request<()>| {
        let message = upstream_message.clone();
        let upstream = PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(service_fn(
            move |_req: Request<()>| {
                let frames = vec![(ms(10), Frame::data(Bytes::from(message.clone())))];
                let response = Response::builder()
                    .header("content-type", "application/grpc")
                    .body(script(frames, false))
                    .unwrap();
                async move { Ok::<_, Infallible>(response) }
            },
        ));
        upstream.oneshot(req)
    }));
    let request = request(&[
        ("content-type", "application/grpc"),
        ("grpc-timeout", "55m"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, message);
    let trailers = end.expect("trailers, not an error").expect("trailers");
    assert_eq!(trailers["grpc-status"], "4");
}

/// A gateway made of layers alone (`DeadlineLayer` around `PropagateLayer` around a client)
/// whose upstream never answers: the client layer, bounded by the same deadline and polled
/// first, fails at the deadline, and the server answers the deadline (a gRPC trailers-only
/// `DEADLINE_EXCEEDED`, a plain HTTP 504), where that error reached the server, which closes
/// the connection or resets the stream with no answer.
#[tokio::test(start_paused = true)]
async fn a_client_layer_failing_at_the_deadline_is_answered_as_the_deadline() {
    for (headers, status, grpc_status) in [
        (
            [
                ("content-type", "application/grpc"),
                ("grpc-timeout", "55m"),
            ],
            StatusCode::OK,
            Some("4"),
        ),
        (
            [("content-type", "text/plain"), ("x-deadline-ms", "55")],
            StatusCode::GATEWAY_TIMEOUT,
            None,
        ),
    ] {
        let server = layer().layer(PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(
            service_fn(|_req: Request<()>| {
                std::future::pending::<Result<Response<String>, Infallible>>()
            }),
        ));
        let start = TokioClock.now();
        let response = server
            .oneshot(request(&headers))
            .await
            .expect("an answer, not the client layer's error");
        assert_eq!(TokioClock.now(), start + ms(55));
        assert_eq!(response.status(), status);
        assert_eq!(
            response
                .headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap()),
            grpc_status
        );
    }
}

/// A gateway made of layers alone whose client layer fails as its deadline before the
/// server's deadline: what it sent was running out (the upstream answered a 504, or a gRPC
/// `UNAVAILABLE`, at 196 ms of 200: the client layer told it 195, and reads a failure from 190
/// on as the deadline's), or nothing was left to send (5 ms, no more than the hop's
/// allowance). Both are within the server's failure window (two 5 ms allowances and a
/// millisecond: from 189 ms of 200), and the server answers the deadline, where that error
/// reached the server (before the deadline, it was passed on), which closes the connection
/// or resets the stream with no answer. An error before the window is passed on as it was
/// (the next test).
#[tokio::test(start_paused = true)]
async fn a_client_layer_failing_of_what_it_sent_is_answered_as_the_deadline() {
    let grpc = |timeout| {
        [
            ("content-type", "application/grpc"),
            ("grpc-timeout", timeout),
        ]
    };
    let plain = |timeout| [("content-type", "text/plain"), ("x-deadline-ms", timeout)];
    let upstream_504 = || {
        Response::builder()
            .status(StatusCode::GATEWAY_TIMEOUT)
            .body(String::new())
            .unwrap()
    };
    let upstream_unavailable = || {
        Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", "14")
            .body(String::new())
            .unwrap()
    };
    type Case = (
        [(&'static str, &'static str); 2],
        fn() -> Response<String>,
        Duration,
        StatusCode,
        Option<&'static str>,
    );
    let cases: [Case; 4] = [
        (
            plain("200"),
            upstream_504,
            ms(196),
            StatusCode::GATEWAY_TIMEOUT,
            None,
        ),
        (
            grpc("200m"),
            upstream_unavailable,
            ms(196),
            StatusCode::OK,
            Some("4"),
        ),
        (
            plain("5"),
            upstream_504,
            ms(0),
            StatusCode::GATEWAY_TIMEOUT,
            None,
        ),
        (
            grpc("5m"),
            upstream_unavailable,
            ms(0),
            StatusCode::OK,
            Some("4"),
        ),
    ];
    for (headers, upstream, answers_at, status, grpc_status) in cases {
        let server = layer().layer(PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(
            service_fn(move |_req: Request<()>| async move {
                tokio::time::sleep(ms(196)).await;
                Ok::<_, Infallible>(upstream())
            }),
        ));
        let start = TokioClock.now();
        let response = server
            .oneshot(request(&headers))
            .await
            .unwrap_or_else(|error| panic!("{headers:?}: the client layer's error: {error:?}"));
        assert_eq!(TokioClock.now(), start + answers_at, "{headers:?}");
        assert_eq!(response.status(), status, "{headers:?}");
        assert_eq!(
            response
                .headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap()),
            grpc_status,
            "{headers:?}"
        );
    }
}

/// Before the failure window, a service's error is its own, and passed on as it was: the
/// upstream refused at 150 ms of 200 (a transport error, not yet the deadline's), and a
/// relayed body failing then ends with its own error.
#[tokio::test(start_paused = true)]
async fn a_failure_before_the_window_is_passed_on() {
    let server = layer().layer(PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(
        service_fn(|_req: Request<()>| async {
            tokio::time::sleep(ms(150)).await;
            Err::<Response<String>, _>(std::io::Error::other("connection refused"))
        }),
    ));
    let failed = server
        .oneshot(request(&[("x-deadline-ms", "200")]))
        .await
        .expect_err("the upstream's own failure");
    assert!(
        matches!(failed, PropagateError::Inner(ref e) if e.to_string() == "connection refused"),
        "{failed:?}"
    );

    let server = layer().layer(service_fn(|_req: Request<()>| async {
        let body = failing_script(
            vec![(ms(10), Frame::data(Bytes::from(envelope(b"abc"))))],
            ms(150),
            "the stream broke",
        );
        Ok::<_, Infallible>(
            Response::builder()
                .header("content-type", "application/grpc")
                .body(body)
                .unwrap(),
        )
    }));
    let request = request(&[
        ("content-type", "application/grpc"),
        ("grpc-timeout", "200m"),
    ]);
    let response = server.oneshot(request).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(data, envelope(b"abc"));
    assert!(
        matches!(end, Err(BodyError::Inner(ref e)) if e.to_string() == "the stream broke"),
        "{end:?}"
    );
}

/// The failure window is two of the server's hop allowances and a millisecond before the
/// handler's deadline (the request's, less the reply margin): with a 5 ms allowance and a
/// 200 ms budget, a service error from 189 ms on is the deadline's, and one at 188 ms is passed
/// on; with a 5 ms reply margin, the handler's deadline is 195 ms, and the window starts at 184.
#[tokio::test(start_paused = true)]
async fn the_failure_window_is_two_allowances_and_a_millisecond_before_the_handlers_deadline() {
    for (margin, fails_at, answered) in [
        (Duration::ZERO, ms(189), true),
        (Duration::ZERO, ms(188), false),
        (ms(5), ms(184), true),
        (ms(5), ms(183), false),
    ] {
        let server = layer().with_reply_margin(margin).layer(service_fn(
            move |_req: Request<()>| async move {
                tokio::time::sleep(fails_at).await;
                Err::<Response<String>, _>(std::io::Error::other("the service failed"))
            },
        ));
        let start = TokioClock.now();
        let answer = server.oneshot(request(&[("x-deadline-ms", "200")])).await;
        assert_eq!(TokioClock.now(), start + fails_at);
        match answer {
            Ok(response) => {
                assert!(answered, "{margin:?} {fails_at:?}: answered, not passed on");
                assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
            }
            Err(error) => {
                assert!(!answered, "{margin:?} {fails_at:?}: passed on: {error}");
                assert_eq!(error.to_string(), "the service failed");
            }
        }
    }
}

/// A relayed stream (as in the test above) whose upstream body fails at 196 ms of 200, once
/// what the client layer sent is running out (it told the upstream 195, and reads a failure
/// from 190 on as the deadline's): the client gets the message, then the deadline's trailers,
/// where the body failed with the client layer's error before the deadline, which resets the
/// stream (a gRPC client reads `INTERNAL`).
#[tokio::test(start_paused = true)]
async fn a_relayed_stream_failing_of_what_was_sent_ends_with_the_deadlines_trailers() {
    let message = envelope(b"abc");
    let upstream_message = message.clone();
    let server = layer().layer(service_fn(move |req: Request<()>| {
        let message = upstream_message.clone();
        let upstream = PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(service_fn(
            move |_req: Request<()>| {
                let body = failing_script(
                    vec![(ms(10), Frame::data(Bytes::from(message.clone())))],
                    ms(196),
                    "the upstream reset the stream",
                );
                let response = Response::builder()
                    .header("content-type", "application/grpc")
                    .body(body)
                    .unwrap();
                async move { Ok::<_, Infallible>(response) }
            },
        ));
        upstream.oneshot(req)
    }));
    let request = request(&[
        ("content-type", "application/grpc"),
        ("grpc-timeout", "200m"),
    ]);
    let start = TokioClock.now();
    let response = server.oneshot(request).await.unwrap();
    let (data, end) = read_all(response.into_body()).await;
    assert_eq!(TokioClock.now(), start + ms(196));
    assert_eq!(data, message);
    let trailers = end.expect("trailers, not an error").expect("trailers");
    assert_eq!(trailers["grpc-status"], "4");
}

/// The layer's own answers to a `HEAD` request have its status and headers and no body: an
/// HTTP/2 server sends what it is given (axum strips a `HEAD` answer's body only inside its
/// router, which the layer's answers never pass through), and an HTTP/2 client resets a
/// stream whose answer to `HEAD` carries data, so it never read the 504. Refused on arrival
/// (a deadline already spent, a header it cannot read), and dropped at the deadline.
#[tokio::test(start_paused = true)]
async fn the_layers_answers_to_head_have_no_body() {
    let cases: [(&[(&'static str, &'static str)], StatusCode); 3] = [
        (&[("x-deadline-ms", "0")], StatusCode::GATEWAY_TIMEOUT),
        (&[("x-deadline-ms", "soon")], StatusCode::BAD_REQUEST),
        (&[("x-deadline-ms", "55")], StatusCode::GATEWAY_TIMEOUT),
    ];
    for (headers, status) in cases {
        for method in [http::Method::HEAD, http::Method::GET] {
            let server = layer().layer(service_fn(|_req: Request<()>| {
                std::future::pending::<Result<Response<String>, Infallible>>()
            }));
            let mut request = request(headers);
            *request.method_mut() = method.clone();
            let response = server.oneshot(request).await.unwrap();
            assert_eq!(response.status(), status, "{method} {headers:?}");
            let (data, end) = read_all(response.into_body()).await;
            assert!(end.is_ok_and(|trailers| trailers.is_none()));
            assert_eq!(
                data.is_empty(),
                method == http::Method::HEAD,
                "{method} {headers:?}: {data:?}"
            );
        }
    }
}
