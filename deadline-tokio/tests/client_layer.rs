//! `DependencyLayer`: each request a client sends is one call to a `Dependency`, with its
//! retries, hedges, budget and breaker, each attempt's time left in its header, and
//! responses classified by status.
//!
//! Scripted services (`tower::service_fn`) run in paused time, so every figure is exact. The
//! real servers (hyper, tonic) on loopback run on real time: nothing there is timed, and
//! every call has a bound of its own.

mod common;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use deadline_core::CallError;
use deadline_core::breaker::BreakerConfig;
use deadline_core::budget::RetryBudget;
use deadline_core::policy::{Backoff, Idempotence};
use deadline_core::wire::DeadlineHeader;
use deadline_core::wire::Propagation;
use deadline_core::{Error, Outcome, Policy, ms};
use deadline_tokio::layer::DependencyError;
use deadline_tokio::{DeadlineLayer, DependencyLayer};
use deadline_tokio::{Dependency, remaining, scope_timeout};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt, service_fn};

/// The bound on any one call over a real socket, so that a hang fails instead of stalling.
const BOUND: Duration = Duration::from_secs(20);

/// What the scripted service saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    x_deadline_ms: Option<String>,
    grpc_timeout: Option<String>,
    body: String,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn header(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| v.to_str().unwrap_or("?").to_owned())
}

/// A service that answers its `n`th request (from 0) with `answer(n)`, at once, and logs
/// every request it sees.
fn scripted<F>(
    answer: F,
) -> (
    impl Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
    Log,
)
where
    F: Fn(usize) -> Response<String> + Send + Sync + 'static,
{
    let log: Log = Arc::default();
    let answer = Arc::new(answer);
    let service = service_fn({
        let log = log.clone();
        move |req: Request<String>| {
            let mut log = log.lock().unwrap();
            let n = log.len();
            log.push(Seen {
                at: Instant::now(),
                x_deadline_ms: header(req.headers(), "x-deadline-ms"),
                grpc_timeout: header(req.headers(), "grpc-timeout"),
                body: req.body().clone(),
            });
            let response = answer(n);
            async move { Ok::<_, Infallible>(response) }
        }
    });
    (service, log)
}

fn status(code: u16) -> Response<String> {
    Response::builder()
        .status(code)
        .body(format!("{code}"))
        .unwrap()
}

fn with_header(code: u16, name: &'static str, value: &'static [u8]) -> Response<String> {
    let mut response = status(code);
    response
        .headers_mut()
        .insert(name, HeaderValue::from_bytes(value).unwrap());
    response
}

/// A trailers-only gRPC response with `grpc-status: code`, and `extra` headers.
fn grpc(code: &'static str, extra: &[(&'static str, &'static [u8])]) -> Response<String> {
    let mut response = Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .header("grpc-status", code)
        .body(format!("grpc {code}"))
        .unwrap();
    for (name, value) in extra {
        response
            .headers_mut()
            .insert(*name, HeaderValue::from_bytes(value).unwrap());
    }
    response
}

fn seen(log: &Log) -> Vec<Seen> {
    log.lock().unwrap().clone()
}

/// The body of a response through the layer.
async fn text<B>(response: Response<B>) -> String
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A policy that retries twice, 10 ms apart.
const fn twice(name: &'static str, idempotence: Idempotence) -> Policy<'static> {
    Policy::required(name)
        .with_idempotence(idempotence)
        .with_cap(ms(100))
        .with_floor(ms(1))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)))
}

// 1. 503, 503, 200.

#[tokio::test(start_paused = true)]
async fn an_idempotent_call_is_retried_past_two_503s_and_the_caller_gets_the_200() {
    static FLAKY: Dependency = Dependency::new(twice("flaky", Idempotence::Idempotent));
    let (next, log) = scripted(|n| status(if n < 2 { 503 } else { 200 }));
    let client = DependencyLayer::new(&FLAKY, DeadlineHeader::DeadlineMs).layer(next);

    let response = scope_timeout(ms(1_000), client.oneshot(Request::new("q".into())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(text(response).await, "200");
    let seen = seen(&log);
    assert_eq!(seen.len(), 3);
    // Every attempt sent the request, body included.
    assert!(seen.iter().all(|s| s.body == "q"));
    let counts = FLAKY.counters().snapshot();
    assert_eq!((counts.calls, counts.retries, counts.successes), (1, 2, 1));
}

#[tokio::test(start_paused = true)]
async fn a_call_that_is_not_idempotent_returns_the_first_503_as_its_response() {
    static ONCE: Dependency = Dependency::new(twice("not idempotent", Idempotence::NotIdempotent));
    let (next, log) = scripted(|n| status(if n < 2 { 503 } else { 200 }));
    let client = DependencyLayer::new(&ONCE, DeadlineHeader::DeadlineMs).layer(next);

    let response = scope_timeout(ms(1_000), client.oneshot(Request::new("q".into())))
        .await
        .expect("inside its scope")
        .unwrap();
    // The server may have acted on it: not repeated, and the 503 is the caller's answer.
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(text(response).await, "503");
    assert_eq!(seen(&log).len(), 1);
    let counts = ONCE.counters().snapshot();
    assert_eq!((counts.calls, counts.retries, counts.successes), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn when_the_retries_run_out_the_last_response_is_returned() {
    static DOWN: Dependency = Dependency::new(twice("down", Idempotence::Idempotent));
    // Three 503s, each with its own body: the caller gets the third.
    let (next, log) = scripted(|n| {
        Response::builder()
            .status(503)
            .body(format!("503 #{n}"))
            .unwrap()
    });
    let client = DependencyLayer::new(&DOWN, DeadlineHeader::DeadlineMs).layer(next);
    let response = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(text(response).await, "503 #2");
    assert_eq!(seen(&log).len(), 3);
    assert_eq!(DOWN.counters().snapshot().retries, 2);
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_is_the_dependencys() {
    // A budget that refuses every retry.
    static BROKE: Dependency = Dependency::new(twice("broke", Idempotence::Idempotent))
        .budget(RetryBudget::percent(0).with_floor_per_sec(0));
    let (next, log) = scripted(|n| status(if n < 2 { 503 } else { 200 }));
    let client = DependencyLayer::new(&BROKE, DeadlineHeader::DeadlineMs).layer(next);
    let response = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(seen(&log).len(), 1);
    let counts = BROKE.counters().snapshot();
    assert_eq!((counts.retries, counts.budget_refusals), (0, 1));
}

/// Sends `client` `n` requests, one after the other, each answered with `status` as it came.
async fn answered_as_it_came<S, B>(client: &S, n: usize, status: StatusCode)
where
    S: Service<Request<String>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
{
    for _ in 0..n {
        let response = client
            .clone()
            .oneshot(Request::new(String::new()))
            .await
            .unwrap();
        assert_eq!(response.status(), status);
    }
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_on_5xx_but_not_on_4xx() {
    static BREAKS: Dependency = Dependency::new(
        Policy::required("breaks")
            .with_cap(ms(100))
            .with_floor(ms(1)),
    )
    .breaker(BreakerConfig::DEFAULT.with_consecutive_failures(2));
    let (next, log) = scripted(|_| status(503));
    let client = DependencyLayer::new(&BREAKS, DeadlineHeader::DeadlineMs).layer(next);
    answered_as_it_came(&client, 2, StatusCode::SERVICE_UNAVAILABLE).await;
    // Two failures in a row: the breaker is open, and the dependency is not called.
    let refused = client
        .oneshot(Request::new(String::new()))
        .await
        .unwrap_err();
    assert_eq!(refused.library(), Some(Error::CircuitOpen));
    assert!(matches!(
        refused,
        DependencyError::Call(CallError::Library(Error::CircuitOpen))
    ));
    assert_eq!(seen(&log).len(), 2);
    assert_eq!(BREAKS.counters().snapshot().breaker_rejections, 1);

    // A 400 is the caller's mistake, not the dependency's failure.
    static PICKY: Dependency = Dependency::new(
        Policy::required("picky")
            .with_cap(ms(100))
            .with_floor(ms(1)),
    )
    .breaker(BreakerConfig::DEFAULT.with_consecutive_failures(2));
    let (next, log) = scripted(|_| status(400));
    let client = DependencyLayer::new(&PICKY, DeadlineHeader::DeadlineMs).layer(next);
    answered_as_it_came(&client, 5, StatusCode::BAD_REQUEST).await;
    assert_eq!(seen(&log).len(), 5);
}

/// A 5xx that a retry would not fix (507 here; gRPC's `INTERNAL`, `UNKNOWN`, `DATA_LOSS`) is
/// not retried, but it is the dependency failing: the breaker opens on it. Read as final and
/// nothing more, it was held as a success, and a dependency that failed every call so was
/// never cut off.
#[tokio::test(start_paused = true)]
async fn the_breaker_opens_on_a_5xx_a_retry_would_not_fix() {
    static FULL: Dependency = Dependency::new(
        Policy::required("full")
            .idempotent()
            .with_cap(ms(100))
            .with_floor(ms(1))
            .with_retries(2),
    )
    .breaker(BreakerConfig::DEFAULT.with_consecutive_failures(2));
    let (next, log) = scripted(|_| status(507));
    let client = DependencyLayer::new(&FULL, DeadlineHeader::DeadlineMs).layer(next);
    answered_as_it_came(&client, 2, StatusCode::INSUFFICIENT_STORAGE).await;
    // One attempt each (not retried), two failures: open.
    assert_eq!(seen(&log).len(), 2);
    let refused = client
        .oneshot(Request::new(String::new()))
        .await
        .unwrap_err();
    assert_eq!(refused.library(), Some(Error::CircuitOpen));
    assert_eq!(seen(&log).len(), 2);
}

// 2. 429 with Retry-After.

#[tokio::test(start_paused = true)]
async fn a_429s_retry_after_is_honoured() {
    // Not idempotent: a 429 is a request the server did not act on, so it is retried
    // anyway, after the server's second rather than the 10 ms backoff.
    static SLOW_DOWN: Dependency = Dependency::new(twice("slow down", Idempotence::NotIdempotent));
    let (next, log) = scripted(|n| {
        if n == 0 {
            with_header(429, "retry-after", b"1")
        } else {
            status(200)
        }
    });
    let client = DependencyLayer::new(&SLOW_DOWN, DeadlineHeader::DeadlineMs).layer(next);
    let response = scope_timeout(ms(5_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = seen(&log);
    assert_eq!(seen.len(), 2);
    let waited = seen[1].at - seen[0].at;
    assert!(
        waited >= Duration::from_secs(1),
        "the retry came {waited:?} after the 429"
    );
    assert!(waited < ms(1_100), "{waited:?}");
    assert_eq!(SLOW_DOWN.counters().snapshot().retries, 1);
}

#[tokio::test(start_paused = true)]
async fn a_429_that_asks_for_longer_than_the_deadline_is_returned_at_once() {
    static SLOW_DOWN: Dependency = Dependency::new(twice(
        "slow down, short deadline",
        Idempotence::NotIdempotent,
    ));
    let (next, log) = scripted(|n| {
        if n == 0 {
            with_header(429, "retry-after", b"1")
        } else {
            status(200)
        }
    });
    let client = DependencyLayer::new(&SLOW_DOWN, DeadlineHeader::DeadlineMs).layer(next);
    let start = Instant::now();
    let response = scope_timeout(ms(500), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    // The retry could only start after the deadline: none is made, and the caller gets the
    // 429 (with its Retry-After) now, not at the deadline.
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(Instant::now() - start, Duration::ZERO);
    assert_eq!(seen(&log).len(), 1);
    assert_eq!(SLOW_DOWN.counters().snapshot().retries, 0);
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_is_pushback_and_garbage_is_a_plain_failure() {
    static BUSY: Dependency = Dependency::new(twice("busy", Idempotence::Idempotent));
    let (next, log) = scripted(|n| match n {
        0 => with_header(503, "retry-after", b"2"),
        // Not a number: no pushback, the 10 ms backoff. Never a panic.
        1 => with_header(503, "retry-after", b"\xff soon"),
        _ => status(200),
    });
    let client = DependencyLayer::new(&BUSY, DeadlineHeader::DeadlineMs).layer(next);
    let response = scope_timeout(ms(5_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = seen(&log);
    assert_eq!(seen.len(), 3);
    assert!(seen[1].at - seen[0].at >= Duration::from_secs(2));
    assert_eq!(seen[2].at - seen[1].at, ms(10));
}

/// A `Retry-After` in its HTTP-date form (RFC 9110 §10.2.3) is the server's pushback until
/// that date on the system clock: a 503 asking for the whole second 4 s ahead is retried
/// after 3 to 4 s (less the little real time the test takes), where the date was not read
/// and the retry came after the 10 ms backoff; a date already past says nothing, and the
/// retry after it comes after the backoff.
#[tokio::test(start_paused = true)]
async fn a_retry_after_date_is_the_servers_pushback_until_then() {
    use std::time::{SystemTime, UNIX_EPOCH};
    static DATED: Dependency = Dependency::new(twice("dated", Idempotence::Idempotent));
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let later = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(now.as_secs() + 4));
    let (next, log) = scripted(move |n| match n {
        0 => {
            let mut response = status(503);
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_str(&later).unwrap());
            response
        }
        1 => with_header(503, "retry-after", b"Fri, 31 Dec 1999 23:59:59 GMT"),
        _ => status(200),
    });
    let client = DependencyLayer::new(&DATED, DeadlineHeader::DeadlineMs).layer(next);
    let response = scope_timeout(ms(10_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = seen(&log);
    assert_eq!(seen.len(), 3);
    let waited = seen[1].at - seen[0].at;
    assert!(
        (Duration::from_secs(2)..=Duration::from_secs(4)).contains(&waited),
        "the retry came {waited:?} after the 503"
    );
    assert_eq!(seen[2].at - seen[1].at, ms(10));
}

// 3. 400.

#[tokio::test(start_paused = true)]
async fn a_400_is_returned_at_once_and_not_retried() {
    static STRICT: Dependency = Dependency::new(twice("strict", Idempotence::Idempotent));
    let (next, log) = scripted(|_| status(400));
    let client = DependencyLayer::new(&STRICT, DeadlineHeader::DeadlineMs).layer(next);
    let start = Instant::now();
    let response = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(text(response).await, "400");
    assert_eq!(Instant::now() - start, Duration::ZERO);
    assert_eq!(seen(&log).len(), 1);
    assert_eq!(STRICT.counters().snapshot().retries, 0);
}

// 4. gRPC trailers-only statuses.

#[tokio::test(start_paused = true)]
async fn grpc_unavailable_is_retried() {
    static GRPC: Dependency = Dependency::new(twice("grpc unavailable", Idempotence::Idempotent));
    let (next, log) = scripted(|n| grpc(if n == 0 { "14" } else { "0" }, &[]));
    let client = DependencyLayer::new(&GRPC, DeadlineHeader::GrpcTimeout).layer(next);
    let response = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.headers()["grpc-status"], "0");
    assert_eq!(seen(&log).len(), 2);
    assert_eq!(GRPC.counters().snapshot().retries, 1);
}

#[tokio::test(start_paused = true)]
async fn grpc_resource_exhausted_waits_for_the_servers_pushback() {
    static GRPC: Dependency = Dependency::new(twice("grpc pushback", Idempotence::Idempotent));
    let (next, log) = scripted(|n| {
        if n == 0 {
            grpc("8", &[("grpc-retry-pushback-ms", b"300")])
        } else {
            grpc("0", &[])
        }
    });
    let client = DependencyLayer::new(&GRPC, DeadlineHeader::GrpcTimeout).layer(next);
    let response = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.headers()["grpc-status"], "0");
    let seen = seen(&log);
    assert_eq!(seen.len(), 2);
    assert!(seen[1].at - seen[0].at >= ms(300));
}

#[tokio::test(start_paused = true)]
async fn grpc_invalid_argument_is_returned_and_not_retried() {
    static GRPC: Dependency = Dependency::new(twice("grpc invalid", Idempotence::Idempotent));
    let (next, log) = scripted(|n| grpc(if n == 0 { "3" } else { "0" }, &[]));
    let client = DependencyLayer::new(&GRPC, DeadlineHeader::GrpcTimeout).layer(next);
    let response = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.headers()["grpc-status"], "3");
    assert_eq!(seen(&log).len(), 1);
    assert_eq!(GRPC.counters().snapshot().retries, 0);
}

/// A Connect unary call answered 500 is Connect's `unknown`, `internal` or `data_loss`,
/// which gRPC's `INTERNAL` is not retried for either: returned at once, whether the caller's
/// request said it was Connect or the layer's `connect-timeout-ms` made it so. The same 500
/// to a plain HTTP request is retried; a Connect 503 (`unavailable`) is retried too.
#[tokio::test(start_paused = true)]
async fn a_connect_unary_500_is_returned_and_not_retried_as_grpc_internal_is_not() {
    static CONNECT: Dependency = Dependency::new(twice("connect 500", Idempotence::Idempotent));
    static PLAIN: Dependency = Dependency::new(twice("plain 500", Idempotence::Idempotent));
    static MADE_CONNECT: Dependency =
        Dependency::new(twice("made connect 500", Idempotence::Idempotent));
    static UNAVAILABLE: Dependency = Dependency::new(twice("connect 503", Idempotence::Idempotent));
    let connect_error = |code: u16, name: &str| {
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(format!(r#"{{"code":"{name}","message":"failed"}}"#))
            .unwrap()
    };
    let connect_request = || {
        Request::builder()
            .header("content-type", "application/proto")
            .header("connect-protocol-version", "1")
            .body(String::new())
            .unwrap()
    };
    for (dependency, answer, request, header, attempts) in [
        (
            &CONNECT,
            500,
            connect_request(),
            DeadlineHeader::ConnectTimeout,
            1,
        ),
        (
            &PLAIN,
            500,
            Request::new(String::new()),
            DeadlineHeader::DeadlineMs,
            3,
        ),
        (
            &MADE_CONNECT,
            500,
            Request::new(String::new()),
            DeadlineHeader::ConnectTimeout,
            1,
        ),
        (
            &UNAVAILABLE,
            503,
            connect_request(),
            DeadlineHeader::ConnectTimeout,
            3,
        ),
    ] {
        let name = if answer == 500 {
            "internal"
        } else {
            "unavailable"
        };
        let (next, log) = scripted(move |_| connect_error(answer, name));
        let client = DependencyLayer::new(dependency, header).layer(next);
        let response = scope_timeout(ms(1_000), client.oneshot(request))
            .await
            .expect("inside its scope")
            .unwrap();
        let name = dependency.policy().name();
        assert_eq!(response.status().as_u16(), answer, "{name}");
        assert_eq!(seen(&log).len(), attempts, "{name}");
    }
}

/// With no deadline at all (outside any scope, a policy with no cap) the attempt's request is
/// sent as it came, and its own headers still say it is a Connect unary call: a 500 is final.
#[tokio::test(start_paused = true)]
async fn a_connect_unary_500_with_no_deadline_is_returned_and_not_retried() {
    static UNCAPPED: Dependency = Dependency::new(
        Policy::required("uncapped connect")
            .idempotent()
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(10))),
    );
    let (next, log) = scripted(|_| {
        Response::builder()
            .status(500)
            .header("content-type", "application/json")
            .body(r#"{"code":"internal"}"#.to_owned())
            .unwrap()
    });
    let client = DependencyLayer::new(&UNCAPPED, DeadlineHeader::ConnectTimeout).layer(next);
    let request = Request::builder()
        .header("content-type", "application/proto")
        .header("connect-protocol-version", "1")
        .body(String::new())
        .unwrap();
    let response = client.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(seen(&log).len(), 1);
}

/// A next service told a deadline answers `DEADLINE_EXCEEDED` (or 504) by its own margins
/// before the time it was sent, long before this attempt's end: the attempt ran out of time
/// below. The call ends as the library's timeout, counted as one (a response relayed as a
/// fatal answer before), and answers the same code.
#[tokio::test(start_paused = true)]
async fn an_early_deadline_exceeded_or_504_is_the_attempts_timeout() {
    static GRPC_DEADLINE: Dependency =
        Dependency::new(twice("grpc deadline", Idempotence::NotIdempotent));
    static HTTP_DEADLINE: Dependency =
        Dependency::new(twice("http deadline", Idempotence::NotIdempotent));
    for (dependency, header, answer) in [
        (&GRPC_DEADLINE, DeadlineHeader::GrpcTimeout, grpc("4", &[])),
        (&HTTP_DEADLINE, DeadlineHeader::DeadlineMs, status(504)),
    ] {
        let answer = Arc::new(Mutex::new(Some(answer)));
        let (next, log) = scripted(move |_| answer.lock().unwrap().take().unwrap());
        let client = DependencyLayer::new(dependency, header).layer(next);
        let error = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
            .await
            .expect("inside its scope")
            .unwrap_err();
        // Answered at once, with 100 ms of the attempt left: the attempt's own timeout, after
        // the time it ran.
        assert!(
            matches!(error.library(), Some(Error::Timeout { after }) if after == ms(0)),
            "{error:?}"
        );
        assert_eq!(StatusCode::from(error), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(seen(&log).len(), 1);
        let counts = dependency.counters().snapshot();
        assert_eq!((counts.calls, counts.timeouts, counts.successes), (1, 1, 0));
    }
}

/// A response the next service chose, arriving when the time it was sent is running out
/// (within the 5 ms allowance of it), is still that service's answer unless it has the
/// deadline's shape: a 500, a 429, a gRPC `RESOURCE_EXHAUSTED` or `INTERNAL` reaches the
/// caller as it came, exactly as through `PropagateLayer`, and is counted as a failure, not a
/// timeout; so does one that says when to retry, or not to (a 503 with `Retry-After`, a
/// `DEADLINE_EXCEEDED` with `grpc-retry-pushback-ms: -1`, gRFC A6), which is the server's
/// own word whatever its status. A 503 or `UNAVAILABLE` at the same instant is the
/// deadline's (504), and so is a 499 to a Connect call (Connect's `canceled`, as gRPC's
/// `CANCELLED` is), where a 499 to a plain HTTP request is relayed.
#[tokio::test(start_paused = true)]
async fn an_answer_near_the_end_of_the_time_sent_is_relayed_unless_it_is_the_deadlines() {
    let answers: [(DeadlineHeader, Response<String>, Option<StatusCode>); 10] = [
        (
            DeadlineHeader::DeadlineMs,
            status(500),
            Some(StatusCode::INTERNAL_SERVER_ERROR),
        ),
        (
            DeadlineHeader::DeadlineMs,
            status(429),
            Some(StatusCode::TOO_MANY_REQUESTS),
        ),
        (
            DeadlineHeader::GrpcTimeout,
            grpc("8", &[]),
            Some(StatusCode::OK),
        ),
        (
            DeadlineHeader::GrpcTimeout,
            grpc("13", &[]),
            Some(StatusCode::OK),
        ),
        (
            DeadlineHeader::DeadlineMs,
            with_header(503, "retry-after", b"1"),
            Some(StatusCode::SERVICE_UNAVAILABLE),
        ),
        (
            DeadlineHeader::GrpcTimeout,
            grpc("4", &[("grpc-retry-pushback-ms", b"-1")]),
            Some(StatusCode::OK),
        ),
        (
            DeadlineHeader::DeadlineMs,
            status(499),
            Some(StatusCode::from_u16(499).unwrap()),
        ),
        (DeadlineHeader::DeadlineMs, status(503), None),
        (DeadlineHeader::GrpcTimeout, grpc("14", &[]), None),
        // `connect-timeout-ms` makes the request a Connect call.
        (DeadlineHeader::ConnectTimeout, status(499), None),
    ];
    for (header, answer, relayed) in answers {
        // A dependency of its own per answer, so that each one's counters are its own.
        let dependency: &'static Dependency = Box::leak(Box::new(Dependency::new(
            Policy::required("near the end")
                .idempotent()
                .with_cap(ms(100))
                .with_floor(ms(1))
                .with_retries(0),
        )));
        let body = answer.body().clone();
        let answer = Arc::new(Mutex::new(Some(answer)));
        let next = service_fn(move |_req: Request<String>| {
            let answer = answer.lock().unwrap().take().unwrap();
            async move {
                // 95 ms were sent (the 100 ms cap less the allowance): from 90 ms on, they
                // are running out. The answer comes at 92 ms, 8 ms before the attempt's end.
                tokio::time::sleep(ms(92)).await;
                Ok::<_, Infallible>(answer)
            }
        });
        let client = DependencyLayer::new(dependency, header).layer(next);
        let result = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
            .await
            .expect("inside its scope");
        let counts = dependency.counters().snapshot();
        match relayed {
            Some(code) => {
                let response = result.expect("the dependency's own answer");
                assert_eq!(response.status(), code, "{body}");
                assert_eq!(text(response).await, body);
                assert_eq!((counts.calls, counts.timeouts), (1, 0), "{body}");
            }
            None => {
                let error = result.expect_err("the deadline's answer");
                assert_eq!(
                    StatusCode::from(error),
                    StatusCode::GATEWAY_TIMEOUT,
                    "{body}"
                );
                assert_eq!((counts.calls, counts.timeouts), (1, 1), "{body}");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_negative_or_unreadable_grpc_pushback_stops_the_retries() {
    static GRPC: Dependency = Dependency::new(twice("grpc do not retry", Idempotence::Idempotent));
    let refusals = [&b"-1"[..], b"-250", b"soon", b"\xff\xfe", b"99999999999"];
    // UNAVAILABLE, and DEADLINE_EXCEEDED, which is otherwise retried as a timeout.
    for (code, pushback) in refusals
        .map(|p| ("14", p))
        .into_iter()
        .chain([("4", &b"-1"[..])])
    {
        let (next, log) = scripted(move |n| {
            if n == 0 {
                let mut response = grpc(code, &[]);
                response.headers_mut().insert(
                    "grpc-retry-pushback-ms",
                    HeaderValue::from_bytes(pushback).unwrap(),
                );
                response
            } else {
                grpc("0", &[])
            }
        });
        let client = DependencyLayer::new(&GRPC, DeadlineHeader::GrpcTimeout).layer(next);
        let response = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
            .await
            .expect("inside its scope")
            .unwrap();
        assert_eq!(response.headers()["grpc-status"], code, "{pushback:?}");
        assert_eq!(seen(&log).len(), 1, "{code} {pushback:?}");
    }
    assert_eq!(GRPC.counters().snapshot().retries, 0);
}

#[tokio::test(start_paused = true)]
async fn a_garbage_grpc_status_is_final_and_nothing_panics() {
    static GRPC: Dependency = Dependency::new(twice("grpc garbage", Idempotence::Idempotent));
    for garbage in [
        &b"abc"[..],
        b"",
        b"\xff",
        b"-14",
        b"14 14",
        b"99999999999999999999",
    ] {
        let (next, log) = scripted(move |_| {
            let mut response = grpc("0", &[]);
            response
                .headers_mut()
                .insert("grpc-status", HeaderValue::from_bytes(garbage).unwrap());
            response
        });
        let client = DependencyLayer::new(&GRPC, DeadlineHeader::GrpcTimeout).layer(next);
        let response = client.oneshot(Request::new(String::new())).await.unwrap();
        assert_eq!(response.headers()["grpc-status"].as_bytes(), garbage);
        assert_eq!(seen(&log).len(), 1, "{garbage:?}");
    }
}

// 5. Each attempt's own deadline header; hedges.

/// A service whose first request fails with a 503 after 60 ms and whose later ones answer at
/// once, logging every request it sees.
fn slow_503_then_200() -> (
    impl Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
    Log,
) {
    let log: Log = Arc::default();
    let next = service_fn({
        let log = log.clone();
        move |req: Request<String>| {
            let n = {
                let mut log = log.lock().unwrap();
                log.push(Seen {
                    at: Instant::now(),
                    x_deadline_ms: header(req.headers(), "x-deadline-ms"),
                    grpc_timeout: header(req.headers(), "grpc-timeout"),
                    body: String::new(),
                });
                log.len()
            };
            async move {
                if n == 1 {
                    tokio::time::sleep(ms(60)).await;
                    return Ok::<_, Infallible>(status(503));
                }
                Ok(status(200))
            }
        }
    });
    (next, log)
}

#[tokio::test(start_paused = true)]
async fn each_attempt_carries_its_own_time_left() {
    static TIMED: Dependency = Dependency::new(twice("timed", Idempotence::Idempotent));
    // The first attempt fails after 60 ms; the retry answers at once.
    let (next, log) = slow_503_then_200();
    let both = DependencyLayer::new(&TIMED, DeadlineHeader::Both).layer(next);
    let response = scope_timeout(ms(150), both.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = seen(&log);
    assert_eq!(seen.len(), 2);
    // First attempt at 0 ms: min(150, cap 100) = 100 ms, less 5 ms for the network.
    assert_eq!(seen[0].x_deadline_ms.as_deref(), Some("95"));
    assert_eq!(seen[0].grpc_timeout.as_deref(), Some("95000000n"));
    // The retry at 70 ms (60 ms, then the 10 ms backoff): 80 ms left, less 5.
    assert_eq!(seen[1].at - seen[0].at, ms(70));
    assert_eq!(seen[1].x_deadline_ms.as_deref(), Some("75"));
    assert_eq!(seen[1].grpc_timeout.as_deref(), Some("75000000n"));
}

/// A request's own timeout (tonic's `Request::set_timeout`, here `grpc-timeout: 90m`) is for
/// the whole call, as its caller set it: a retry is sent with what is left of it, not with the
/// whole 90 ms again, and a call whose attempts hang ends when it runs out. (Each attempt was
/// sent with the request's 90 ms, so the retry below went out at 70 ms saying 90 ms, and a
/// hung call ran to its 100 ms cap.)
#[tokio::test(start_paused = true)]
async fn a_requests_own_timeout_bounds_the_whole_call_not_each_attempt() {
    static OWN: Dependency = Dependency::new(twice("own", Idempotence::Idempotent));
    // The first attempt fails after 60 ms; the retry answers at once.
    let (next, log) = slow_503_then_200();
    let client = DependencyLayer::new(&OWN, DeadlineHeader::GrpcTimeout).layer(next);
    let own = || {
        let mut request = Request::new(String::new());
        request
            .headers_mut()
            .insert("grpc-timeout", HeaderValue::from_static("90m"));
        request
    };
    let response = scope_timeout(ms(1_000), client.oneshot(own()))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = seen(&log);
    assert_eq!(seen.len(), 2);
    // First attempt at 0 ms: the request's 90 ms (under the 100 ms cap), less 5 ms for the
    // network.
    assert_eq!(seen[0].grpc_timeout.as_deref(), Some("85000000n"));
    // The retry at 70 ms (60 ms, then the 10 ms backoff): 20 ms of the 90 left, less 5.
    assert_eq!(seen[1].at - seen[0].at, ms(70));
    assert_eq!(seen[1].grpc_timeout.as_deref(), Some("15000000n"));

    // The reserve is for the work after the call, in the scope's time: it does not come off
    // the request's own 90 ms.
    let (next, log) = scripted(|_| status(200));
    let reserving = DependencyLayer::new(&OWN, DeadlineHeader::GrpcTimeout)
        .reserve(ms(50))
        .layer(next);
    scope_timeout(ms(1_000), reserving.oneshot(own()))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(
        log.lock().unwrap()[0].grpc_timeout.as_deref(),
        Some("85000000n")
    );

    // Every attempt hangs: the call ends when the request's 90 ms run out, not at the cap.
    let hung = DependencyLayer::new(&OWN, DeadlineHeader::GrpcTimeout).layer(service_fn(
        |_req: Request<String>| async {
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(status(200))
        },
    ));
    let start = Instant::now();
    let result = scope_timeout(ms(1_000), hung.oneshot(own()))
        .await
        .expect("inside its scope");
    assert!(
        result.is_err(),
        "the call ran out of the request's own time"
    );
    assert_eq!(start.elapsed(), ms(90));
}

#[tokio::test(start_paused = true)]
async fn outside_any_scope_each_attempt_still_carries_the_cap() {
    static CAPPED: Dependency = Dependency::new(
        Policy::required("capped")
            .with_cap(ms(250))
            .with_floor(ms(1)),
    );
    let (next, log) = scripted(|_| status(200));
    let client = DependencyLayer::new(&CAPPED, DeadlineHeader::DeadlineMs)
        .with_propagation(Propagation::DEFAULT.with_allowance(ms(10)))
        .layer(next);
    client.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(seen(&log)[0].x_deadline_ms.as_deref(), Some("240"));
}

#[tokio::test(start_paused = true)]
async fn the_hedge_answers_and_the_hung_first_attempt_is_dropped() {
    static HEDGED: Dependency = Dependency::new(
        Policy::required("hedged")
            .idempotent()
            .with_cap(ms(100))
            .with_floor(ms(1))
            .with_hedge_after(ms(30)),
    );
    /// Set when the attempt's future is dropped.
    struct Dropped(Arc<AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let log: Log = Arc::default();
    let next = service_fn({
        let (log, dropped) = (log.clone(), dropped.clone());
        move |req: Request<String>| {
            let n = {
                let mut log = log.lock().unwrap();
                log.push(Seen {
                    at: Instant::now(),
                    x_deadline_ms: header(req.headers(), "x-deadline-ms"),
                    grpc_timeout: None,
                    body: String::new(),
                });
                log.len()
            };
            let guard = Dropped(dropped.clone());
            async move {
                if n == 1 {
                    // The first attempt hangs.
                    let _guard = guard;
                    std::future::pending::<()>().await;
                }
                Ok::<_, Infallible>(status(200))
            }
        }
    });
    let client = DependencyLayer::new(&HEDGED, DeadlineHeader::DeadlineMs).layer(next);
    let start = Instant::now();
    let response = scope_timeout(ms(120), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The hedge answered at once, 30 ms in.
    assert_eq!(Instant::now() - start, ms(30));
    assert!(
        dropped.load(Ordering::SeqCst),
        "the losing attempt was dropped"
    );
    let seen = seen(&log);
    assert_eq!(seen.len(), 2);
    // The first: min(120, 100) - 5. The hedge, at 30 ms: min(90, 100) - 5.
    assert_eq!(seen[0].x_deadline_ms.as_deref(), Some("95"));
    assert_eq!(seen[1].x_deadline_ms.as_deref(), Some("85"));
    let counts = HEDGED.counters().snapshot();
    assert_eq!((counts.hedges, counts.hedge_wins), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_hung_dependency_times_out_with_the_librarys_error() {
    static HUNG: Dependency = Dependency::new(twice("hung", Idempotence::Idempotent));
    let calls = Arc::new(AtomicUsize::new(0));
    let next = service_fn({
        let calls = calls.clone();
        move |_req: Request<String>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { std::future::pending::<Result<Response<String>, Infallible>>().await }
        }
    });
    let client = DependencyLayer::new(&HUNG, DeadlineHeader::DeadlineMs).layer(next);
    let start = Instant::now();
    let error = scope_timeout(ms(10_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap_err();
    // Three attempts, each cut off at its 100 ms cap, 10 ms apart.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(error.library(), Some(Error::Timeout { after: ms(100) }));
    assert_eq!(Instant::now() - start, ms(320));
    let counts = HUNG.counters().snapshot();
    assert_eq!((counts.retries, counts.timeouts), (2, 3));
    // Each timeout in the histogram, at its cap: the layer's own bound on the time it sent
    // ends the attempt first, as an error that says it ran out of time.
    assert_eq!(HUNG.latency().count(), 3);
    let (low, high) = (HUNG.latency().min().unwrap(), HUNG.latency().max().unwrap());
    assert!(low <= ms(100) && ms(99) <= high, "{low:?}..{high:?}");
}

#[tokio::test(start_paused = true)]
async fn with_no_time_for_the_call_the_dependency_is_not_called() {
    static FLOORED: Dependency = Dependency::new(
        Policy::required("floored")
            .with_cap(ms(100))
            .with_floor(ms(30)),
    );
    let (next, log) = scripted(|_| status(200));
    let client = DependencyLayer::new(&FLOORED, DeadlineHeader::DeadlineMs)
        .reserve(ms(10))
        .layer(next);
    // 35 ms left, 10 kept after the call: 25 ms, under the 30 ms floor.
    let error = scope_timeout(ms(35), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert!(
        matches!(error.library(), Some(Error::InsufficientTime { .. })),
        "{error:?}"
    );
    assert!(seen(&log).is_empty());
}

/// A retry that finds too little time to send anything (under the per-hop allowance, with
/// no floor to stop it before it starts) does not replace the answer before it: the caller
/// gets the dependency's 503 as it came, as when the same lack of time stops the retry one
/// step earlier (under a floor), not a 504 for a deadline that has not passed.
#[tokio::test(start_paused = true)]
async fn a_retry_with_nothing_to_send_leaves_the_answer_before_it() {
    for floor in [ms(0), ms(5)] {
        let dependency: &'static Dependency = Box::leak(Box::new(Dependency::new(
            Policy::required("answered, then no time")
                .idempotent()
                .with_cap(ms(1_000))
                .with_floor(floor)
                .with_retries(1)
                .with_backoff(Backoff::constant(ms(17))),
        )));
        let calls = Arc::new(AtomicUsize::new(0));
        let next = service_fn({
            let calls = calls.clone();
            move |_req: Request<String>| {
                calls.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(ms(80)).await;
                    Ok::<_, Infallible>(status(503))
                }
            }
        });
        let client = DependencyLayer::new(dependency, DeadlineHeader::DeadlineMs).layer(next);
        // The 503 at 80 ms, with 15 ms of the 95 sent left: the dependency's own answer. The
        // retry, at 97 ms, has 3 ms left, under the 5 ms allowance.
        let response = scope_timeout(ms(100), client.oneshot(Request::new(String::new())))
            .await
            .expect("inside its scope")
            .expect("the dependency's answer");
        assert_eq!(
            response.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "floor {floor:?}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1, "floor {floor:?}");
        // The call ended for want of time, whichever step found it: counted so.
        assert_eq!(dependency.counters().snapshot().deadline_exceeded, 1);
    }
}

/// An attempt with less time than the per-hop allowance (and no floor to stop it before it
/// starts) sends nothing: the next service never sees it, so its breaker does not count it,
/// and the request is answered as out of time (504), not as a failed dependency.
#[tokio::test(start_paused = true)]
async fn an_attempt_with_nothing_to_send_is_out_of_time_and_the_breaker_never_hears_of_it() {
    static UNFLOORED: Dependency = Dependency::new(
        Policy::required("unfloored")
            .idempotent()
            .with_cap(ms(100))
            .with_retries(2),
    )
    .breaker(BreakerConfig::DEFAULT);
    let (next, log) = scripted(|_| status(200));
    let client = DependencyLayer::new(&UNFLOORED, DeadlineHeader::DeadlineMs).layer(next);
    // Ten requests with 4 ms left, under the 5 ms allowance (the breaker opens on 5 failures
    // in a row).
    for _ in 0..10 {
        let error = scope_timeout(ms(4), client.clone().oneshot(Request::new(String::new())))
            .await
            .expect("inside its scope")
            .unwrap_err();
        assert_eq!(error.library(), Some(Error::DeadlineExceeded), "{error:?}");
        assert_eq!(StatusCode::from(error), StatusCode::GATEWAY_TIMEOUT);
    }
    assert!(seen(&log).is_empty());
    let counts = UNFLOORED.counters().snapshot();
    assert_eq!(
        (
            counts.calls,
            counts.timeouts,
            counts.retries,
            counts.deadline_exceeded
        ),
        (10, 0, 0, 10)
    );
    // A request with time is made.
    let answered = scope_timeout(ms(200), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    assert_eq!(seen(&log).len(), 1);
}

// Inner service errors and their classifier.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Transport {
    Refused,
    Reset,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Transport {}

fn failing(
    error: Transport,
) -> (
    impl Service<Request<String>, Response = Response<String>, Error = Transport> + Clone,
    Arc<AtomicUsize>,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let service = service_fn({
        let calls = calls.clone();
        move |_req: Request<String>| {
            calls.fetch_add(1, Ordering::SeqCst);
            let error = error.clone();
            async move { Err::<Response<String>, _>(error) }
        }
    });
    (service, calls)
}

#[tokio::test(start_paused = true)]
async fn an_inner_error_is_a_failure_unless_classified_otherwise() {
    // Not idempotent: a failure that may have reached the server is not repeated.
    static ONCE: Dependency = Dependency::new(twice("errors", Idempotence::NotIdempotent));
    let (next, calls) = failing(Transport::Refused);
    let client = DependencyLayer::new(&ONCE, DeadlineHeader::DeadlineMs).layer(next);
    let error = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(matches!(
        error,
        DependencyError::Call(CallError::Attempt(Transport::Refused))
    ));

    // A connection refused never reached the server: retried even so.
    let (next, calls) = failing(Transport::Refused);
    let client = DependencyLayer::new(&ONCE, DeadlineHeader::DeadlineMs)
        .classify_error(|e: &Transport| match e {
            Transport::Refused => Outcome::Refused,
            Transport::Reset => Outcome::Fatal,
        })
        .layer(next);
    let error = scope_timeout(
        ms(1_000),
        client.clone().oneshot(Request::new(String::new())),
    )
    .await
    .expect("inside its scope")
    .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(error.into_inner(), Some(Transport::Refused));

    let (next, calls) = failing(Transport::Reset);
    let client = DependencyLayer::new(&ONCE, DeadlineHeader::DeadlineMs)
        .classify_error(|e: &Transport| match e {
            Transport::Refused => Outcome::Refused,
            Transport::Reset => Outcome::Fatal,
        })
        .layer(next);
    let error = scope_timeout(ms(1_000), client.oneshot(Request::new(String::new())))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(error.to_string(), "the last attempt failed: Reset");
    assert!(std::error::Error::source(&error).is_some());
}

// Buffered bodies (not `Clone`).

#[tokio::test(start_paused = true)]
async fn a_body_that_is_not_clone_is_buffered_and_sent_by_each_attempt() {
    static BUFFERED: Dependency = Dependency::new(twice("buffered", Idempotence::Idempotent));
    let bodies: Arc<Mutex<Vec<Bytes>>> = Arc::default();
    let next = service_fn({
        let bodies = bodies.clone();
        move |req: Request<tonic::body::Body>| {
            let bodies = bodies.clone();
            async move {
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let n = {
                    let mut bodies = bodies.lock().unwrap();
                    bodies.push(body);
                    bodies.len()
                };
                Ok::<_, Infallible>(status(if n == 1 { 503 } else { 200 }))
            }
        }
    });
    let client = DependencyLayer::new(&BUFFERED, DeadlineHeader::GrpcTimeout)
        .buffered(1_024)
        .layer(next);
    let request = Request::new(tonic::body::Body::new(String::from("the message")));
    let response = scope_timeout(ms(1_000), client.clone().oneshot(request))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        *bodies.lock().unwrap(),
        [Bytes::from("the message"), Bytes::from("the message")]
    );

    // Longer than the limit: not sent at all.
    let request = Request::new(tonic::body::Body::new("x".repeat(1_025)));
    let error = client.oneshot(request).await.unwrap_err();
    assert!(matches!(
        error,
        DependencyError::BodyTooLarge { limit: 1_024 }
    ));
    assert_eq!(bodies.lock().unwrap().len(), 2);
    assert_eq!(
        tonic::Status::from(error).code(),
        tonic::Code::ResourceExhausted
    );
}

#[test]
fn the_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    static ANY: Dependency = Dependency::new(Policy::required("any"));
    let client: hyper_util::client::legacy::Client<_, String> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let mut http = DependencyLayer::new(&ANY, DeadlineHeader::DeadlineMs).layer(client);
    send(&http.call(Request::new(String::new())));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let channel = tonic::transport::Channel::from_static("http://127.0.0.1:1").connect_lazy();
    let mut grpc = DependencyLayer::new(&ANY, DeadlineHeader::GrpcTimeout)
        .buffered(1_024)
        .layer(channel);
    send(&grpc.call(Request::new(tonic::body::Body::empty())));
}

// 6. A real hyper server, through hyper-util's legacy client.

#[tokio::test]
async fn a_real_hyper_server_answering_503_then_200() {
    static HYPER: Dependency = Dependency::new(
        Policy::required("hyper")
            .idempotent()
            .with_cap(ms(5_000))
            .with_floor(ms(1))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(5))),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let deadlines: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let server = tokio::spawn({
        let deadlines = deadlines.clone();
        async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let deadlines = deadlines.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<_>| {
                        let n = {
                            let mut deadlines = deadlines.lock().unwrap();
                            deadlines.push(header(req.headers(), "x-deadline-ms"));
                            deadlines.len()
                        };
                        async move {
                            let code = if n == 1 { 503 } else { 200 };
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(code)
                                    .body(http_body_util::Full::new(Bytes::from(format!(
                                        "answer {n}"
                                    ))))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    });

    let client: hyper_util::client::legacy::Client<_, String> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let client = DependencyLayer::new(&HYPER, DeadlineHeader::DeadlineMs).layer(client);
    let request = Request::get(format!("http://{addr}/price"))
        .body(String::new())
        .unwrap();
    let response = tokio::time::timeout(BOUND, client.oneshot(request))
        .await
        .expect("the call ended within its bound")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(text(response).await, "answer 2");
    let deadlines = deadlines.lock().unwrap().clone();
    assert_eq!(deadlines.len(), 2);
    // Each attempt carried its own time left: at most the 5 s cap less 5 ms.
    for sent in &deadlines {
        let sent: u64 = sent.as_deref().expect("a deadline header").parse().unwrap();
        assert!(sent > 0 && sent <= 4_995, "{sent}");
    }
    assert_eq!(HYPER.counters().snapshot().retries, 1);
    server.abort();
}

#[tokio::test]
async fn a_refused_connection_is_retried_when_classified_as_refused() {
    // Not idempotent: only a request that never left may be sent again.
    static REFUSED: Dependency = Dependency::new(
        Policy::required("refused")
            .not_idempotent()
            .with_cap(ms(5_000))
            .with_floor(ms(1))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(1))),
    );
    let addr = common::closed_port();
    let client: hyper_util::client::legacy::Client<_, String> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let request = || {
        Request::get(format!("http://{addr}/"))
            .body(String::new())
            .unwrap()
    };

    // By default a transport error is a failure: the call is not repeated.
    let plain = DependencyLayer::new(&REFUSED, DeadlineHeader::DeadlineMs).layer(client.clone());
    let error = tokio::time::timeout(BOUND, plain.oneshot(request()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(error.into_inner().expect("the client's error").is_connect());
    assert_eq!(REFUSED.counters().snapshot().retries, 0);

    let refused = DependencyLayer::new(&REFUSED, DeadlineHeader::DeadlineMs)
        .classify_error(|e: &hyper_util::client::legacy::Error| {
            if e.is_connect() {
                Outcome::Refused
            } else {
                Outcome::Failed
            }
        })
        .layer(client);
    let error = tokio::time::timeout(BOUND, refused.oneshot(request()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(error.into_inner().expect("the client's error").is_connect());
    assert_eq!(REFUSED.counters().snapshot().retries, 2);
}

// 7. A real tonic server, through a tonic `Channel`.

#[derive(Clone, PartialEq, prost::Message)]
struct Ask {
    #[prost(string, tag = "1")]
    item: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Price {
    /// What the server read of its deadline, in microseconds (0 for none).
    #[prost(uint64, tag = "1")]
    left_us: u64,
    #[prost(string, tag = "2")]
    item: String,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Handler = Arc<dyn Fn(usize, Ask) -> Result<Price, tonic::Status> + Send + Sync>;

/// `test.Pricing/Price`, written by hand as tonic's generated code would be: its `n`th call
/// (from 0) is answered by the handler.
#[derive(Clone)]
struct Pricing {
    calls: Arc<AtomicUsize>,
    handler: Handler,
}

impl tonic::server::NamedService for Pricing {
    const NAME: &'static str = "test.Pricing";
}

struct Method(Pricing);

impl tonic::server::UnaryService<Ask> for Method {
    type Response = Price;
    type Future = BoxFuture<Result<tonic::Response<Price>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Ask>) -> Self::Future {
        let n = self.0.calls.fetch_add(1, Ordering::SeqCst);
        let answer = (self.0.handler)(n, request.into_inner());
        Box::pin(async move { answer.map(tonic::Response::new) })
    }
}

impl tower::Service<Request<tonic::body::Body>> for Pricing {
    type Response = Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        let method = Method(self.clone());
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<Price, Ask>::default();
            Ok(tonic::server::Grpc::new(codec).unary(method, request).await)
        })
    }
}

/// Serves `pricing` behind `DeadlineLayer` on a loopback port.
async fn serve(pricing: Pricing) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let incoming =
        tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let server = tonic::transport::Server::builder()
        .layer(DeadlineLayer::new(Propagation::DEFAULT, ms(30_000)))
        .add_service(pricing)
        .serve_with_incoming(incoming);
    (addr, tokio::spawn(async move { server.await.unwrap() }))
}

/// A tonic channel connected to the server at `addr`.
async fn connect(addr: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Calls `Price` through `service`.
async fn price<T>(service: T, item: &str) -> Result<Price, tonic::Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut grpc = tonic::client::Grpc::new(service);
    let call = async {
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::from_error(e.into()))?;
        let codec = tonic_prost::ProstCodec::<Ask, Price>::default();
        let path = http::uri::PathAndQuery::from_static("/test.Pricing/Price");
        let ask = tonic::Request::new(Ask { item: item.into() });
        grpc.unary(ask, path, codec)
            .await
            .map(tonic::Response::into_inner)
    };
    tokio::time::timeout(BOUND, call)
        .await
        .expect("the call ended within its bound")
}

fn left_us() -> u64 {
    remaining().map_or(0, |left| {
        u64::try_from(left.as_micros()).unwrap_or(u64::MAX)
    })
}

#[tokio::test]
async fn a_real_tonic_server_unavailable_once_then_ok() {
    static PRICES: Dependency = Dependency::new(
        Policy::required("prices")
            .idempotent()
            .with_cap(ms(5_000))
            .with_floor(ms(1))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(5))),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let (addr, server) = serve(Pricing {
        calls: calls.clone(),
        handler: Arc::new(|n, ask| {
            if n == 0 {
                Err(tonic::Status::unavailable("warming up"))
            } else {
                Ok(Price {
                    left_us: left_us(),
                    item: ask.item,
                })
            }
        }),
    })
    .await;
    let channel = connect(addr).await;
    let client = DependencyLayer::new(&PRICES, DeadlineHeader::GrpcTimeout)
        .buffered(64 * 1_024)
        .layer(channel);

    let reply = price(client.clone(), "tea").await.unwrap();
    assert_eq!(reply.item, "tea", "the retry sent the same message");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // The server read the retry's own deadline from its grpc-timeout: at most 5 s less 5 ms.
    assert!(
        reply.left_us > 0 && reply.left_us <= 4_995_000,
        "{}",
        reply.left_us
    );
    assert_eq!(PRICES.counters().snapshot().retries, 1);
    server.abort();
}

#[tokio::test]
async fn a_real_tonic_servers_invalid_argument_is_not_retried_and_a_spent_budget_is_deadline_exceeded()
 {
    static STRICT_PRICES: Dependency = Dependency::new(
        Policy::required("strict prices")
            .idempotent()
            .with_cap(ms(5_000))
            .with_floor(ms(10))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(5))),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let (addr, server) = serve(Pricing {
        calls: calls.clone(),
        handler: Arc::new(|_, _| Err(tonic::Status::invalid_argument("no such item"))),
    })
    .await;
    let channel = connect(addr).await;
    let client = DependencyLayer::new(&STRICT_PRICES, DeadlineHeader::GrpcTimeout)
        .buffered(64 * 1_024)
        .layer(channel);

    let status = price(client.clone(), "gold").await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "no such item");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // 5 ms left, under the 10 ms floor: not called, and tonic reads the layer's error as
    // DEADLINE_EXCEEDED (not UNKNOWN).
    let status = scope_timeout(ms(5), price(client, "gold"))
        .await
        .expect("inside its scope")
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    server.abort();
}

/// A request longer than what a buffered layer keeps to send again is not sent, and a tonic
/// client reads the layer's error as `RESOURCE_EXHAUSTED`, gRPC's code for a message over a
/// limit (not `UNKNOWN`).
#[tokio::test]
async fn a_tonic_request_longer_than_the_buffer_is_resource_exhausted() {
    static SMALL_PRICES: Dependency = Dependency::new(
        Policy::required("small prices")
            .idempotent()
            .with_cap(ms(5_000))
            .with_floor(ms(10)),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let (addr, server) = serve(Pricing {
        calls: calls.clone(),
        handler: Arc::new(|_, ask| {
            Ok(Price {
                left_us: left_us(),
                item: ask.item,
            })
        }),
    })
    .await;
    let channel = connect(addr).await;
    let client = DependencyLayer::new(&SMALL_PRICES, DeadlineHeader::GrpcTimeout)
        .buffered(64)
        .layer(channel);

    // Its 5-byte frame header and the message fit in 64 bytes.
    let reply = price(client.clone(), "tea").await.unwrap();
    assert_eq!(reply.item, "tea");
    let status = price(client, &"gold leaf ".repeat(10)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the long one was not sent");
    server.abort();
}
