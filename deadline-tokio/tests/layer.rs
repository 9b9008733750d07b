//! The tower layers: a request's deadline from its header, admission, the handler under the
//! deadline, and the time left passed on to the next service. Paused tokio time throughout.
//!
//! The last test counts heap allocations with a global allocator that counts on the test's
//! own thread only (each test runs on its own thread, on a current-thread runtime).
#![allow(unsafe_code, reason = "a global allocator is an unsafe trait")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadline_core::wire::Admission;
use deadline_core::wire::{DeadlineHeader, Propagation, ServerPolicy};
use deadline_core::{Clock, Deadline, Error, Instant, Policy, ms};
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::{DeadlineBody, PropagateError, PropagateLayer};
use deadline_tokio::low_level::decide;
use deadline_tokio::time::TokioClock;
use deadline_tokio::{current, propagate, remaining, scope_timeout};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::{Layer, Service, ServiceExt, service_fn};

/// 5 ms kept back per hop; callers believed up to 10 s.
const HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
/// A request with no deadline header gets 1 s.
const DEFAULT_BUDGET: Duration = ms(1_000);

/// The server layer of these tests: no reply margin, so that the figures are the header's
/// own (the margin has tests of its own, in `grpc.rs` and below).
fn layer() -> DeadlineLayer {
    DeadlineLayer::new(HOP, DEFAULT_BUDGET).with_reply_margin(Duration::ZERO)
}

/// The handler's own body, from a response that the layer let the handler answer.
fn body<B>(response: Response<DeadlineBody<B>>) -> B {
    response
        .into_body()
        .into_inner()
        .expect("the handler's body, not the layer's answer")
}

/// The text of an answer the layer made itself.
async fn answer_text<B>(response: Response<DeadlineBody<B>>) -> String
where
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: std::fmt::Debug,
{
    let body = response.into_body();
    assert!(body.is_answer());
    let bytes = body.collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// What a handler saw when it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Seen {
    remaining: Option<Duration>,
    current: Option<Deadline>,
    /// The current deadline in the service's `call`, before its future is polled.
    in_call: Option<Deadline>,
}

/// A request with the given headers and no body.
fn request(headers: &[(&'static str, &'static str)]) -> Request<()> {
    let mut builder = Request::builder();
    for &(name, value) in headers {
        builder = builder.header(name, value);
    }
    builder.body(()).unwrap()
}

/// Counts the calls made to a service.
#[derive(Clone, Default)]
struct Calls(Arc<AtomicUsize>);

impl Calls {
    fn count(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A server whose handler reports what it saw, counting its calls.
fn reporting_server(
    layer: DeadlineLayer,
    calls: &Calls,
) -> impl Service<Request<()>, Response = Response<DeadlineBody<String>>, Error = Infallible>
+ Clone
+ use<> {
    let calls = calls.clone();
    layer.layer(service_fn(move |_req: Request<()>| {
        calls.count();
        let in_call = current();
        async move {
            let mut response = Response::new(String::new());
            response.extensions_mut().insert(Seen {
                remaining: remaining(),
                current: current(),
                in_call,
            });
            Ok::<_, Infallible>(response)
        }
    }))
}

/// What the handler saw for a request with `headers` sent through `layer`, and the status.
async fn serve(
    layer: DeadlineLayer,
    headers: &[(&'static str, &'static str)],
) -> (StatusCode, Seen) {
    let calls = Calls::default();
    let response = reporting_server(layer, &calls)
        .oneshot(request(headers))
        .await
        .unwrap();
    let seen = response.extensions().get::<Seen>().copied();
    (response.status(), seen.unwrap_or_default())
}

#[tokio::test(start_paused = true)]
async fn grpc_timeout_sets_the_handlers_deadline() {
    let arrival = TokioClock.now();
    let layer = layer();
    let (status, seen) = serve(layer, &[("grpc-timeout", "200m")]).await;
    assert_eq!(status, StatusCode::OK);
    let expected = Deadline::after(arrival, ms(200));
    assert_eq!(
        seen,
        Seen {
            remaining: Some(ms(200)),
            current: Some(expected),
            in_call: Some(expected),
        }
    );
}

#[tokio::test(start_paused = true)]
async fn x_deadline_ms_is_read_when_there_is_no_grpc_timeout() {
    let layer = layer();
    let (_, seen) = serve(layer, &[("x-deadline-ms", "350")]).await;
    assert_eq!(seen.remaining, Some(ms(350)));
}

#[tokio::test(start_paused = true)]
async fn a_header_sent_twice_is_read_by_its_first_value_among_any_others() {
    let layer = layer();
    let headers = [
        ("host", "example.test"),
        ("accept", "*/*"),
        ("x-deadline-ms", "350"),
        ("user-agent", "test"),
        ("x-deadline-ms", "90"),
        ("x-request-id", "1"),
    ];
    assert_eq!(serve(layer, &headers).await.1.remaining, Some(ms(350)));
    // The protocol too: a gRPC request among other headers gets a gRPC answer.
    let grpc = [
        ("accept", "*/*"),
        ("content-type", "application/grpc"),
        ("grpc-timeout", "0m"),
    ];
    let (status, seen) = serve(layer, &grpc).await;
    assert_eq!(
        seen,
        Seen::default(),
        "no time left: the handler is not called"
    );
    assert_eq!(
        status,
        StatusCode::OK,
        "a gRPC answer (HTTP 200), not a plain 504"
    );
}

#[tokio::test(start_paused = true)]
async fn the_earliest_deadline_header_wins_and_every_one_is_checked() {
    let layer = layer();
    let both = [("x-deadline-ms", "900"), ("grpc-timeout", "1500u")];
    assert_eq!(
        serve(layer, &both).await.1.remaining,
        Some(ms(1) + Duration::from_micros(500))
    );
    let both = [("x-deadline-ms", "90"), ("grpc-timeout", "1500m")];
    assert_eq!(serve(layer, &both).await.1.remaining, Some(ms(90)));
    // Envoy tells the time it waits: read as a budget like the others.
    let proxied = [
        ("grpc-timeout", "1S"),
        ("x-envoy-expected-rq-timeout-ms", "250"),
    ];
    assert_eq!(serve(layer, &proxied).await.1.remaining, Some(ms(250)));
    // A malformed header beside a good one is refused, naming it: the caller meant it.
    let bad_other = [("grpc-timeout", "200m"), ("x-deadline-ms", "-1")];
    let (status, seen) = serve(layer, &bad_other).await;
    assert_eq!((status, seen.remaining), (StatusCode::BAD_REQUEST, None));
    let bad_envoy = [("x-envoy-expected-rq-timeout-ms", "25 0")];
    assert_eq!(serve(layer, &bad_envoy).await.0, StatusCode::BAD_REQUEST);
}

#[tokio::test(start_paused = true)]
async fn whitespace_around_a_value_is_ignored() {
    let layer = layer();
    let (_, seen) = serve(layer, &[("grpc-timeout", " 200m\t")]).await;
    assert_eq!(seen.remaining, Some(ms(200)));
}

#[tokio::test(start_paused = true)]
async fn an_incoming_budget_is_clamped_to_the_server_maximum() {
    let layer = layer();
    for header in [("grpc-timeout", "99999999H"), ("x-deadline-ms", "86400000")] {
        let (_, seen) = serve(layer, &[header]).await;
        assert_eq!(seen.remaining, Some(HOP.max()), "{header:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn no_header_gets_the_default_budget_clamped_to_the_maximum() {
    let (_, seen) = serve(layer(), &[]).await;
    assert_eq!(seen.remaining, Some(DEFAULT_BUDGET));
    let generous = DeadlineLayer::new(HOP, ms(60_000)).with_reply_margin(Duration::ZERO);
    let (_, seen) = serve(generous, &[("content-type", "text/plain")]).await;
    assert_eq!(seen.remaining, Some(HOP.max()));
}

#[tokio::test(start_paused = true)]
async fn a_malformed_header_is_400_and_the_handler_is_not_called() {
    let calls = Calls::default();
    let server = reporting_server(layer(), &calls);
    let malformed = [
        ("grpc-timeout", "-5S"),
        ("grpc-timeout", "15"),
        ("grpc-timeout", "15s"),
        ("grpc-timeout", "1 S"),
        ("grpc-timeout", "123456789S"),
        ("grpc-timeout", ""),
        ("x-deadline-ms", "850ms"),
        ("x-deadline-ms", "+5"),
    ];
    for header in malformed {
        let response = server.clone().oneshot(request(&[header])).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{header:?}");
        let text = answer_text(response).await;
        assert!(
            text.starts_with(&format!("malformed {} header: ", header.0)),
            "{text}"
        );
    }
    assert_eq!(calls.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn admission_sheds_with_503_and_the_handler_is_not_called() {
    let calls = Calls::default();
    let layer = layer().with_admission(Admission::new(ms(20)));
    let server = reporting_server(layer, &calls);

    let shed = server
        .clone()
        .oneshot(request(&[("grpc-timeout", "19999u")]))
        .await
        .unwrap();
    assert_eq!(shed.status().as_u16(), Error::Shed.http_status());
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.get(), 0);

    // Exactly what the handler needs is enough.
    let served = server
        .oneshot(request(&[("grpc-timeout", "20m")]))
        .await
        .unwrap();
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(
        served.extensions().get::<Seen>().unwrap().remaining,
        Some(ms(20))
    );
    assert_eq!(calls.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_passed_on_arrival_is_504_without_calling_the_handler() {
    let calls = Calls::default();
    let with_admission = layer().with_admission(Admission::new(ms(20)));
    for layer in [layer(), with_admission] {
        let server = reporting_server(layer, &calls);
        for header in [("grpc-timeout", "0S"), ("x-deadline-ms", "0")] {
            let response = server.clone().oneshot(request(&[header])).await.unwrap();
            assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT, "{header:?}");
        }
    }
    assert_eq!(calls.get(), 0);
}

/// Records when the future holding it was dropped, and whether it finished first.
struct DropGuard {
    dropped: Arc<Mutex<Option<Instant>>>,
    finished: bool,
}

impl DropGuard {
    fn new(dropped: &Arc<Mutex<Option<Instant>>>) -> Self {
        DropGuard {
            dropped: dropped.clone(),
            finished: false,
        }
    }

    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.finished {
            *self.dropped.lock().unwrap() = Some(TokioClock.now());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_still_running_at_the_deadline_is_dropped_and_the_answer_is_504() {
    let dropped = Arc::new(Mutex::new(None));
    let server = layer().layer(service_fn({
        let dropped = dropped.clone();
        move |_req: Request<()>| {
            let mut guard = DropGuard::new(&dropped);
            async move {
                tokio::time::sleep(ms(500)).await;
                guard.finish();
                Ok::<_, Infallible>(Response::new("done".to_owned()))
            }
        }
    }));
    let arrival = TokioClock.now();
    let mut server = server;
    let answer = server
        .ready()
        .await
        .unwrap()
        .call(request(&[("grpc-timeout", "200m")]));
    tokio::pin!(answer);
    let response = answer.as_mut().await.unwrap();
    // Dropped when the deadline came, not later with the response future.
    assert_eq!(*dropped.lock().unwrap(), Some(arrival + ms(200)));
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        response.status().as_u16(),
        Error::DeadlineExceeded.http_status()
    );
    assert_eq!(answer_text(response).await, "deadline exceeded\n");
    assert_eq!(TokioClock.now() - arrival, ms(200));
}

#[tokio::test(start_paused = true)]
async fn inner_errors_pass_through_both_layers() {
    let server = layer().layer(service_fn(|_req: Request<()>| async {
        Err::<Response<()>, _>("handler failed")
    }));
    let failed = server.oneshot(request(&[("grpc-timeout", "200m")])).await;
    assert_eq!(failed.unwrap_err(), "handler failed");

    let client = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
        service_fn(|_req: Request<()>| async { Err::<(), _>("refused") }),
    );
    let failed = scope_timeout(ms(200), client.oneshot(request(&[])))
        .await
        .expect("inside its scope");
    assert_eq!(failed, Err(PropagateError::Inner("refused")));
    assert_eq!(failed.unwrap_err().deadline(), None);
}

#[tokio::test(start_paused = true)]
async fn nested_decisions_in_the_handler_inherit_the_request_deadline() {
    static B: Policy = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let server = layer().layer(service_fn(|_req: Request<()>| async {
        tokio::time::sleep(ms(40)).await;
        // 100 - 40 - 20 = 40 ms, under B's 110 ms cap.
        Ok::<_, Infallible>(Response::new(decide(&B, ms(20)).timeout()))
    }));
    let response = server
        .oneshot(request(&[("x-deadline-ms", "100")]))
        .await
        .unwrap();
    assert_eq!(body(response), Some(ms(40)));
}

/// A next service that answers with the headers it was sent, counting its calls.
/// `layer` around `inner`, a service that answers a bare value: the value travels as the
/// response's body, and the client reads it back. The layer's errors are the test's.
fn propagating<S, T>(
    layer: PropagateLayer,
    inner: S,
) -> impl Service<
    Request<()>,
    Response = T,
    Error = PropagateError<S::Error>,
    Future = impl Future<Output = Result<T, PropagateError<S::Error>>>,
> + Clone
+ use<S, T>
where
    S: Service<Request<()>, Response = T> + Clone,
{
    let inner = inner.map_response(Response::new as fn(T) -> Response<T>);
    layer.layer(inner).map_response(
        |response: Response<deadline_tokio::layer::PropagateBody<T>>| {
            response.into_body().into_inner().expect("not cut")
        },
    )
}

fn echo_headers(
    calls: &Calls,
) -> impl Service<Request<()>, Response = HeaderMap, Error = Infallible> + Clone + use<> {
    let calls = calls.clone();
    service_fn(move |req: Request<()>| {
        calls.count();
        let headers = req.headers().clone();
        async move { Ok::<_, Infallible>(headers) }
    })
}

#[tokio::test(start_paused = true)]
async fn the_handler_passes_the_time_left_on() {
    let calls = Calls::default();
    let client = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::Both),
        echo_headers(&calls),
    );
    let server = layer().layer(service_fn(move |_req: Request<()>| {
        let client = client.clone();
        async move {
            tokio::time::sleep(ms(50)).await;
            let sent = client.oneshot(request(&[])).await.unwrap();
            Ok::<_, Infallible>(Response::new(sent))
        }
    }));
    let response = server
        .oneshot(request(&[("grpc-timeout", "200m")]))
        .await
        .unwrap();
    let sent = body(response);
    // 200 ms in, 50 ms of work, 5 ms kept for the network.
    assert_eq!(sent["grpc-timeout"], "145000u");
    assert_eq!(sent["x-deadline-ms"], "145");
    assert_eq!(calls.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_proxy_stack_forwards_the_time_left() {
    // A gateway made of layers alone: the server layer, then the client layer, then the next
    // service. The client layer reads the deadline in its `call`, which the server layer
    // makes inside the request's scope.
    let calls = Calls::default();
    let proxy = layer().layer(
        propagating(
            PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
            echo_headers(&calls),
        )
        .map_response(Response::new),
    );
    let response = proxy
        .oneshot(request(&[("grpc-timeout", "200m")]))
        .await
        .unwrap();
    let sent = body(response);
    // 200 ms in, 5 ms kept for the network: the incoming header is replaced, not passed on.
    assert_eq!(sent["grpc-timeout"], "195000u");
    assert_eq!(calls.get(), 1);
}

/// Each header choice writes its header; and a deadline header the request already carries
/// that says more time than is left is written down to it too, whichever header was chosen
/// (a caller's longer `grpc-timeout`, tonic's `set_timeout` of 1 h, would otherwise tell a
/// gRPC server reading only that header to work for an hour).
#[tokio::test(start_paused = true)]
async fn each_header_choice_writes_its_header_and_no_header_says_more_than_is_left() {
    for header in [
        DeadlineHeader::GrpcTimeout,
        DeadlineHeader::DeadlineMs,
        DeadlineHeader::Both,
    ] {
        let client = propagating(
            PropagateLayer::new(HOP, header),
            echo_headers(&Calls::default()),
        );
        let old = [("grpc-timeout", "1H"), ("x-deadline-ms", "9000")];
        let sent = scope_timeout(ms(200), client.clone().oneshot(request(&old)))
            .await
            .expect("inside its scope")
            .unwrap();
        let value = |name| sent.get(name).map(|v| v.to_str().unwrap());
        assert_eq!(
            (value("grpc-timeout"), value("x-deadline-ms")),
            (Some("195000u"), Some("195")),
            "{header:?}"
        );
        // With no header on the request, the chosen one alone.
        let client = propagating(
            PropagateLayer::new(HOP, header),
            echo_headers(&Calls::default()),
        );
        let sent = scope_timeout(ms(200), client.oneshot(request(&[])))
            .await
            .expect("inside its scope")
            .unwrap();
        let value = |name| sent.get(name).map(|v| v.to_str().unwrap());
        let grpc = matches!(header, DeadlineHeader::GrpcTimeout | DeadlineHeader::Both);
        let millis = matches!(header, DeadlineHeader::DeadlineMs | DeadlineHeader::Both);
        assert_eq!(
            (value("grpc-timeout"), value("x-deadline-ms")),
            (grpc.then_some("195000u"), millis.then_some("195")),
            "{header:?}"
        );
    }
    // Envoy's header, passed on by a proxy, and a value that cannot be read: written down too.
    let client = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
        echo_headers(&Calls::default()),
    );
    let old = [
        ("x-envoy-expected-rq-timeout-ms", "86400000"),
        ("connect-timeout-ms", "soon"),
    ];
    let sent = scope_timeout(ms(200), client.clone().oneshot(request(&old)))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(sent["grpc-timeout"], "195000u");
    assert_eq!(sent["x-envoy-expected-rq-timeout-ms"], "195");
    assert_eq!(sent["connect-timeout-ms"], "195");
    // A route timeout of its own for Envoy, which Envoy would wait (and tell the next service)
    // in place of `grpc-timeout`: written down too. Envoy's "no timeout" (0) as well.
    for own in ["30000", "0"] {
        let sent = scope_timeout(
            ms(200),
            client
                .clone()
                .oneshot(request(&[("x-envoy-upstream-rq-timeout-ms", own)])),
        )
        .await
        .expect("inside its scope")
        .unwrap();
        assert_eq!(sent["grpc-timeout"], "195000u", "{own}");
        assert_eq!(sent["x-envoy-upstream-rq-timeout-ms"], "195", "{own}");
    }
    // A shorter one is kept, in every header.
    let sent = scope_timeout(
        ms(200),
        client.oneshot(request(&[("x-envoy-upstream-rq-timeout-ms", "50")])),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    assert_eq!(sent["grpc-timeout"], "50000000n");
    assert_eq!(sent["x-envoy-upstream-rq-timeout-ms"], "50");
}

/// A request already carrying a shorter timeout (tonic's `Request::set_timeout(50 ms)` inside
/// a 1 s scope) goes out with that timeout, not the scope's time left, in every header written.
#[tokio::test(start_paused = true)]
async fn a_shorter_timeout_already_on_the_request_is_kept() {
    let cases = [
        (
            DeadlineHeader::GrpcTimeout,
            [("grpc-timeout", "50m")],
            Some("50000000n"),
            None,
        ),
        (
            DeadlineHeader::DeadlineMs,
            [("x-deadline-ms", "50")],
            None,
            Some("50"),
        ),
        (
            DeadlineHeader::Both,
            [("grpc-timeout", "50m")],
            Some("50000000n"),
            Some("50"),
        ),
        (
            DeadlineHeader::Both,
            [("x-deadline-ms", "50")],
            Some("50000000n"),
            Some("50"),
        ),
    ];
    for (header, old, grpc, millis) in cases {
        let client = propagating(
            PropagateLayer::new(HOP, header),
            echo_headers(&Calls::default()),
        );
        let sent = scope_timeout(ms(1_000), client.oneshot(request(&old)))
            .await
            .expect("inside its scope")
            .unwrap();
        let value = |name| sent.get(name).map(|v| v.to_str().unwrap());
        assert_eq!(
            (value("grpc-timeout"), value("x-deadline-ms")),
            (grpc, millis),
            "{header:?} {old:?}"
        );
    }
    // A value that is not a timeout is replaced; a zero one means nothing is left to send.
    let client = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
        echo_headers(&Calls::default()),
    );
    let sent = scope_timeout(
        ms(1_000),
        client.clone().oneshot(request(&[("grpc-timeout", "soon")])),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    assert_eq!(sent["grpc-timeout"], "995000u");
    let zero = scope_timeout(
        ms(1_000),
        client.oneshot(request(&[("grpc-timeout", "0m")])),
    )
    .await
    .expect("inside its scope");
    assert_eq!(
        zero.unwrap_err(),
        PropagateError::Deadline(Error::DeadlineExceeded)
    );
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_fails_without_calling_the_next_service() {
    let calls = Calls::default();
    for header in [
        DeadlineHeader::GrpcTimeout,
        DeadlineHeader::DeadlineMs,
        DeadlineHeader::Both,
    ] {
        let client = propagating(PropagateLayer::new(HOP, header), echo_headers(&calls));
        // Exactly the allowance is left: nothing to send.
        let spent = scope_timeout(HOP.allowance(), client.oneshot(request(&[])))
            .await
            .expect("inside its scope");
        let error = spent.unwrap_err();
        assert_eq!(
            error,
            PropagateError::Deadline(Error::DeadlineExceeded),
            "{header:?}"
        );
        assert_eq!(error.deadline().map(Error::http_status), Some(504));
    }
    assert_eq!(calls.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn both_headers_are_sent_or_neither() {
    // 0.5 ms to send: enough for grpc-timeout, not for whole milliseconds.
    let left = HOP.allowance() + Duration::from_micros(500);
    let calls = Calls::default();
    let grpc = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
        echo_headers(&calls),
    );
    let sent = scope_timeout(left, grpc.oneshot(request(&[])))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(sent["grpc-timeout"], "500000n");
    assert_eq!(calls.get(), 1);

    let both = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::Both),
        echo_headers(&calls),
    );
    let spent = scope_timeout(left, both.oneshot(request(&[])))
        .await
        .expect("inside its scope");
    assert_eq!(
        spent.unwrap_err(),
        PropagateError::Deadline(Error::DeadlineExceeded)
    );
    assert_eq!(calls.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_call_is_dropped_at_the_deadline() {
    let dropped = Arc::new(Mutex::new(None));
    let client = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
        service_fn({
            let dropped = dropped.clone();
            move |_req: Request<()>| {
                let mut guard = DropGuard::new(&dropped);
                async move {
                    tokio::time::sleep(ms(500)).await;
                    guard.finish();
                    Ok::<_, Infallible>(())
                }
            }
        }),
    );
    let start = TokioClock.now();
    let mut client = client;
    let (cut, dropped_at) = scope_timeout(ms(200), async {
        let call = client.ready().await.unwrap().call(request(&[]));
        tokio::pin!(call);
        let cut = call.as_mut().await;
        // Dropped when the deadline came, not later with the response future.
        (cut, *dropped.lock().unwrap())
    })
    .await
    .expect("inside its scope");
    assert_eq!(cut, Err(PropagateError::Deadline(Error::DeadlineExceeded)));
    assert_eq!(TokioClock.now() - start, ms(200));
    assert_eq!(dropped_at, Some(start + ms(200)));
}

#[tokio::test(start_paused = true)]
async fn outside_any_scope_the_request_is_untouched_and_unbounded() {
    let calls = Calls::default();
    let client = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::Both),
        service_fn({
            let calls = calls.clone();
            move |req: Request<()>| {
                calls.count();
                async move {
                    tokio::time::sleep(ms(3_600_000)).await; // slower than any deadline here
                    Ok::<_, Infallible>(req.headers().clone())
                }
            }
        }),
    );
    let original = request(&[("x-deadline-ms", "7"), ("accept", "text/plain")]);
    let expected = original.headers().clone();

    let sent = client.clone().oneshot(original).await.unwrap();
    assert_eq!(sent, expected);
    // A task given `propagate` outside any scope has the never-coming deadline: the same.
    let sent = propagate(client.oneshot(request(&[("accept", "text/plain")])))
        .await
        .unwrap();
    assert_eq!(sent.get("grpc-timeout"), None);
    assert_eq!(sent.get("x-deadline-ms"), None);
    assert_eq!(calls.get(), 2);
}

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note_allocation() {
    // `try_with`: the allocator may run while the thread's locals are being torn down.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the same arguments; counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: as for `alloc`; `ptr` and `layout` come from this allocator, i.e. `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, i.e. `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations on this thread while `service` answers 100 requests from `make`, after 10
/// requests of warm-up. The requests are built before counting starts.
async fn allocations<S, F, B>(service: S, make: F) -> u64
where
    S: Service<Request<B>> + Clone,
    S::Error: std::fmt::Debug,
    F: Fn() -> Request<B>,
{
    for _ in 0..10 {
        service.clone().oneshot(make()).await.unwrap();
    }
    let requests: Vec<_> = (0..100).map(|_| make()).collect();
    ALLOCATIONS.with(|c| c.set(0));
    COUNTING.with(|on| on.set(true));
    for request in requests {
        std::hint::black_box(service.clone().oneshot(request).await.unwrap());
    }
    COUNTING.with(|on| on.set(false));
    ALLOCATIONS.with(Cell::get)
}

#[tokio::test(start_paused = true)]
async fn the_layers_allocate_nothing_beyond_what_http_does() {
    let handler =
        || service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    let with_header = || request(&[("grpc-timeout", "200m")]);

    // The server layer allocates nothing: its futures are not boxed, and the deadline is kept
    // in the scope, not in the request.
    let server = layer().layer(handler());
    let inserts = service_fn(|mut req: Request<()>| {
        req.extensions_mut().insert(Deadline::NEVER);
        async { Ok::<_, Infallible>(Response::new(())) }
    });
    let layered = allocations(server, with_header).await;
    let bare = allocations(handler(), with_header).await;
    assert!(
        allocations(inserts, with_header).await > 0,
        "the instrument counts http's own allocations"
    );
    assert_eq!(layered, bare);

    // The client layer costs what writing the header costs (by a name made once, which
    // allocates nothing for the name).
    let client = propagating(
        PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
        handler(),
    );
    let writes = service_fn(|mut req: Request<()>| {
        let value = HeaderValue::from_bytes(b"195000u").unwrap();
        req.headers_mut()
            .insert(http::HeaderName::from_static("grpc-timeout"), value);
        async { Ok::<_, Infallible>(Response::new(())) }
    });
    let no_header = || request(&[]);
    let layered = scope_timeout(ms(100_000), allocations(client, no_header))
        .await
        .expect("inside its scope");
    let by_hand = allocations(writes, no_header).await;
    assert!(by_hand > 0, "the instrument counts http's own allocations");
    assert_eq!(layered, by_hand);
}

#[tokio::test(start_paused = true)]
async fn a_failure_that_arrives_with_no_time_left_to_send_is_the_deadlines() {
    // The next service fails after `delay`.
    let failing = |delay: Duration| {
        propagating(
            PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout),
            service_fn(move |_req: Request<()>| async move {
                tokio::time::sleep(delay).await;
                Err::<(), _>("cancelled downstream")
            }),
        )
    };
    // At 196 ms of 200, 4 ms are left: within the 5 ms allowance, nothing could be sent any
    // more, so the failure is the deadline's (504 / DEADLINE_EXCEEDED), not "cancelled".
    let late = scope_timeout(ms(200), failing(ms(196)).oneshot(request(&[])))
        .await
        .expect("inside its scope");
    assert_eq!(late, Err(PropagateError::Deadline(Error::DeadlineExceeded)));
    // At 100 ms the same failure is the next service's own.
    let early = scope_timeout(ms(200), failing(ms(100)).oneshot(request(&[])))
        .await
        .expect("inside its scope");
    assert_eq!(early, Err(PropagateError::Inner("cancelled downstream")));
}

#[tokio::test(start_paused = true)]
async fn a_grpc_request_gets_a_trailers_only_grpc_answer() {
    let calls = Calls::default();
    let layer = DeadlineLayer::new(HOP, DEFAULT_BUDGET).with_admission(Admission::new(ms(20)));
    let server = reporting_server(layer, &calls);
    let grpc = |timeout: &'static str| {
        request(&[
            ("content-type", "application/grpc+proto"),
            ("grpc-timeout", timeout),
        ])
    };
    let cases = [
        ("0m", "4", "deadline exceeded"),
        ("10m", "14", "request shed at admission"),
        (
            "10x",
            "3",
            "malformed grpc-timeout header: grpc-timeout unit is not one of H M S m u n",
        ),
    ];
    for (timeout, code, message) in cases {
        let response = server.clone().oneshot(grpc(timeout)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{timeout}");
        let headers = response.headers();
        assert_eq!(headers["content-type"], "application/grpc");
        assert_eq!(headers["grpc-status"], code, "{timeout}");
        assert_eq!(headers["grpc-message"], message, "{timeout}");
        // Trailers-only: the status travels in the headers, and there is no body at all.
        let body = response.into_body();
        assert!(body.is_answer());
        assert!(http_body::Body::is_end_stream(&body));
        let collected = body.collect().await.unwrap();
        assert!(collected.trailers().is_none());
        assert!(collected.to_bytes().is_empty());
    }
    assert_eq!(calls.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_plain_http_answer_names_its_reason() {
    let layer = DeadlineLayer::new(HOP, DEFAULT_BUDGET).with_admission(Admission::new(ms(20)));
    let server = reporting_server(layer, &Calls::default());
    let cases = [
        (("grpc-timeout", "0m"), 504, "deadline exceeded\n"),
        (("x-deadline-ms", "10"), 503, "request shed at admission\n"),
        (
            ("x-deadline-ms", "18446744073709551616999"),
            400,
            "malformed x-deadline-ms header: header value has too many digits\n",
        ),
    ];
    for (header, status, text) in cases {
        let response = server.clone().oneshot(request(&[header])).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{header:?}");
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; charset=utf-8"
        );
        assert_eq!(answer_text(response).await, text, "{header:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_reply_margin_comes_off_the_handlers_deadline() {
    let dropped = Arc::new(Mutex::new(None));
    let arrival = TokioClock.now();
    let server = DeadlineLayer::new(HOP, DEFAULT_BUDGET).layer(service_fn({
        let dropped = dropped.clone();
        move |_req: Request<()>| {
            let mut guard = DropGuard::new(&dropped);
            async move {
                let left = remaining();
                tokio::time::sleep(ms(500)).await;
                guard.finish();
                Ok::<_, Infallible>(Response::new(format!("{left:?}")))
            }
        }
    }));
    let response = server
        .oneshot(request(&[("grpc-timeout", "200m")]))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    // Answered the default margin, 5 ms, before the caller's 200 ms.
    assert_eq!(*dropped.lock().unwrap(), Some(arrival + ms(195)));
    assert_eq!(ServerPolicy::DEFAULT_REPLY_MARGIN, ms(5));
}

#[cfg(feature = "axum")]
#[tokio::test(start_paused = true)]
async fn around_a_router_the_layer_adds_one_allocation_to_what_axum_serve_makes() {
    use deadline_tokio::layer::AxumService;
    let router = || axum::Router::new().route("/", axum::routing::get(|| async { "served" }));
    let with_header = || {
        Request::get("/")
            .header("x-deadline-ms", "1000")
            .body(axum::body::Body::empty())
            .unwrap()
    };
    // What `axum::serve` makes of a router for each connection: its handlers made into
    // routes once.
    let bare = allocations(router().with_state::<()>(()), with_header).await;
    // What it makes of the router behind the layer: the same, and the response body's box.
    let layered = allocations(AxumService::from(layer().layer(router())), with_header).await;
    assert!(bare > 0, "the instrument counts axum's own allocations");
    assert_eq!(layered, bare + 100, "one box per request, for 100 requests");
}

/// An inner service that is not ready until `open` (if any), as one behind a concurrency
/// limit is until a permit is free; once ready it answers with the time its request has left.
struct Gate {
    open: Option<tokio::time::Instant>,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    called: Arc<AtomicUsize>,
}

impl Gate {
    fn new(open: Option<tokio::time::Instant>, called: &Arc<AtomicUsize>) -> Self {
        Gate {
            open,
            sleep: None,
            called: called.clone(),
        }
    }
}

/// A clone is a new handle, not yet polled.
impl Clone for Gate {
    fn clone(&self) -> Self {
        Gate {
            open: self.open,
            sleep: None,
            called: self.called.clone(),
        }
    }
}

impl Service<Request<()>> for Gate {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        let Some(open) = self.open else {
            return std::task::Poll::Ready(Ok(()));
        };
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(open)));
        sleep.as_mut().poll(cx).map(Ok)
    }

    fn call(&mut self, _request: Request<()>) -> Self::Future {
        self.called.fetch_add(1, Ordering::Relaxed);
        let left = remaining().expect("called in the request's scope");
        std::future::ready(Ok(Response::new(format!("{left:?}"))))
    }
}

/// A request's budget runs from when it arrived, not from when the service behind the layer
/// was ready to take it: the wait in `poll_ready` is spent from it (it was not, and a
/// request that waited 100 ms of its 50 ms got 50 ms more).
#[tokio::test(start_paused = true)]
async fn the_wait_for_the_service_to_be_ready_is_spent_from_the_budget() {
    let called = Arc::new(AtomicUsize::new(0));
    let request = || {
        Request::builder()
            .header("x-deadline-ms", "50")
            .body(())
            .unwrap()
    };

    // 20 ms of the 50 spent waiting: the handler has 30 ms.
    let gate = Gate::new(Some(tokio::time::Instant::now() + ms(20)), &called);
    let response = layer().layer(gate).oneshot(request()).await.unwrap();
    assert_eq!(body(response), "30ms");

    // 100 ms waiting, past the 50: answered at once, the handler not called.
    let gate = Gate::new(Some(tokio::time::Instant::now() + ms(100)), &called);
    let response = layer().layer(gate).oneshot(request()).await.unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        called.load(Ordering::Relaxed),
        1,
        "only the first was called"
    );

    // A service ready at once: the whole budget.
    let gate = Gate::new(None, &called);
    let response = layer().layer(gate).oneshot(request()).await.unwrap();
    assert_eq!(body(response), "50ms");
}

/// A clone of a service that has waited for its inner service has not: a request through
/// the clone gets its whole budget (a clone carried the wait over, and answered a request
/// that came 200 ms later as already past its deadline).
#[tokio::test(start_paused = true)]
async fn a_clone_of_a_service_that_waited_starts_with_no_wait() {
    let called = Arc::new(AtomicUsize::new(0));
    let mut waited = layer().layer(Gate::new(
        Some(tokio::time::Instant::now() + ms(100)),
        &called,
    ));
    std::future::poll_fn(|cx| {
        assert!(waited.poll_ready(cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
    tokio::time::sleep(ms(200)).await;
    let request = Request::builder()
        .header("x-deadline-ms", "50")
        .body(())
        .unwrap();
    let response = waited.clone().oneshot(request).await.unwrap();
    assert_eq!(body(response), "50ms");
}
