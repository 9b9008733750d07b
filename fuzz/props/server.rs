//! Properties of [`DeadlineLayer`]'s header handling, over arbitrary requests.
//!
//! One copy, used by the cargo-fuzz target `server_headers` and by the proptest suite that CI
//! runs on stable (`deadline-tokio/tests/fuzz_headers.rs`). [`check_server`] panics when a
//! property fails.
//!
//! The bytes make one request: the first byte chooses the protocol (gRPC or plain HTTP),
//! which deadline headers are sent (`grpc-timeout`, `x-deadline-ms`, Envoy's
//! `x-envoy-expected-rq-timeout-ms`), whether a second `grpc-timeout` follows the first,
//! whether the server sheds with an [`Admission`], and the rest, split at `\n`, gives the
//! header values and how long the handler works. A header value HTTP cannot carry (a control
//! byte) is not sent, as no client can send it. The request is served on a current-thread
//! runtime in paused (virtual) time.

#![allow(dead_code, unreachable_pub)]

use std::cell::RefCell;
use std::convert::Infallible;
use std::rc::Rc;
use std::time::Duration;

use deadline_core::wire::Admission;
use deadline_core::wire::{DeadlineMs, GrpcTimeout, Propagation};
use deadline_core::{Clock, Deadline, Error, Instant};
use deadline_tokio::DeadlineLayer;
use deadline_tokio::time::TokioClock;
use http::{HeaderValue, Request, Response};
use tower::{Layer, ServiceExt, service_fn};

/// The server believes callers up to 10 s.
pub const MAX: Duration = Duration::from_secs(10);
/// A request with no deadline header gets 1 s.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(1);
/// With admission, the handler needs 20 ms.
pub const NEED: Duration = Duration::from_millis(20);
/// Tokio's timers tick in whole milliseconds: an answer at the deadline may come up to one
/// tick after it.
pub const TIMER_SLACK: Duration = Duration::from_millis(1);
const MARGIN: Duration = deadline_core::wire::ServerPolicy::DEFAULT_REPLY_MARGIN;

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
}

/// What the handler saw: the deadline in the request's extensions, at the moment it was called.
#[derive(Clone, Copy, Debug)]
struct Seen {
    deadline: Option<Deadline>,
    at: Instant,
}

/// The request `data` makes, served once: see the module's docs.
///
/// - Never a panic, whatever the headers.
/// - A deadline header the core's codec rejects (the first value of any of them) gets 400
///   (gRPC: 200 with `grpc-status` 3, `INVALID_ARGUMENT`), at once, and the handler is not
///   called.
/// - Otherwise the budget is the shortest of the headers sent (the earliest deadline wins),
///   and the deadline is that budget clamped to the server's maximum, less the reply
///   margin: none left answers 504 (`grpc-status` 4) and with admission, less than the need
///   answers 503 (`grpc-status` 14), both at once and without calling the handler.
/// - A handler that is called finds the deadline in its request, never more than the maximum
///   away; its answer passes through when it finishes inside the deadline; one that would
///   finish after it is dropped and 504 (`grpc-status` 4) is sent at the deadline (within one
///   timer tick). No answer ever comes later than the clamped budget plus that tick.
/// - Every status the layer writes is one of those; every `grpc-message` is printable ASCII.
pub fn check_server(data: &[u8]) {
    RUNTIME.with(|runtime| runtime.block_on(serve(data)));
}

async fn serve(data: &[u8]) {
    let (flags, rest) = data.split_first().map_or((0, &[][..]), |(f, r)| (*f, r));
    let grpc = flags & 1 != 0;
    let send_grpc_timeout = flags & 2 != 0;
    let send_deadline_ms = flags & 4 != 0;
    let shed = flags & 8 != 0;
    let second_grpc_timeout = flags & 16 != 0;
    let send_envoy = flags & 32 != 0;
    let mut parts = rest.split(|b| *b == b'\n');
    let grpc_value = parts.next().unwrap_or_default();
    let ms_value = parts.next().unwrap_or_default();
    let second_value = parts.next().unwrap_or_default();
    let work_bytes = parts.next().unwrap_or_default();
    let envoy_value = parts.next().unwrap_or_default();
    let mut work = [0u8; 2];
    for (slot, byte) in work.iter_mut().zip(work_bytes) {
        *slot = *byte;
    }
    // Up to 65 s of work: longer than the server's maximum.
    let work = Duration::from_millis(u64::from(u16::from_le_bytes(work)));

    let mut request = Request::builder().uri("/");
    if grpc {
        request = request.header("content-type", "application/grpc");
    }
    let grpc_header = HeaderValue::from_bytes(grpc_value)
        .ok()
        .filter(|_| send_grpc_timeout);
    let ms_header = HeaderValue::from_bytes(ms_value)
        .ok()
        .filter(|_| send_deadline_ms);
    if let Some(value) = &grpc_header {
        request = request.header("grpc-timeout", value.clone());
        if second_grpc_timeout {
            if let Ok(second) = HeaderValue::from_bytes(second_value) {
                request = request.header("grpc-timeout", second);
            }
        }
    }
    if let Some(value) = &ms_header {
        request = request.header("x-deadline-ms", value.clone());
    }
    let envoy_header = HeaderValue::from_bytes(envoy_value)
        .ok()
        .filter(|_| send_envoy);
    if let Some(value) = &envoy_header {
        request = request.header("x-envoy-expected-rq-timeout-ms", value.clone());
    }
    let request = request.body(String::new()).expect("a valid request");

    // What the layer must make of it: the shortest budget sent, or a malformed header.
    let trimmed = |value: &HeaderValue| value.as_bytes().trim_ascii().to_vec();
    let decoded = [
        grpc_header
            .as_ref()
            .map(|v| GrpcTimeout::parse(&trimmed(v)).map(|t| t.duration())),
        ms_header
            .as_ref()
            .map(|v| DeadlineMs::parse(&trimmed(v)).map(|t| t.duration())),
        envoy_header
            .as_ref()
            .map(|v| DeadlineMs::parse(&trimmed(v)).map(|t| t.duration())),
    ];
    let mut budget = Ok(None::<Duration>);
    for one in decoded.into_iter().flatten() {
        budget = budget.and_then(|shortest| {
            one.map(|one| Some(shortest.map_or(one, |s: Duration| s.min(one))))
        });
    }
    let budget = budget.map(|b| b.unwrap_or(DEFAULT_BUDGET).min(MAX));

    let mut layer = DeadlineLayer::new(
        Propagation::DEFAULT
            .with_allowance(Duration::ZERO)
            .with_max(MAX),
        DEFAULT_BUDGET,
    );
    if shed {
        layer = layer.with_admission(Admission::new(NEED));
    }
    let seen: Rc<RefCell<Option<Seen>>> = Rc::default();
    let record = Rc::clone(&seen);
    let service = layer.layer(service_fn(move |_request: Request<String>| {
        *record.borrow_mut() = Some(Seen {
            deadline: deadline_tokio::current(),
            at: TokioClock.now(),
        });
        async move {
            tokio::time::sleep(work).await;
            Ok::<_, Infallible>(Response::new("served".to_owned()))
        }
    }));

    let start = TokioClock.now();
    let response = service
        .oneshot(request)
        .await
        .expect("the service never fails");
    let elapsed = TokioClock.now().saturating_duration_since(start);
    let seen = *seen.borrow();

    let status = response.status().as_u16();
    let grpc_status = response
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().expect("digits").to_owned());
    if let Some(message) = response.headers().get("grpc-message") {
        assert!(message.as_bytes().iter().all(|b| (0x20..0x7f).contains(b)));
    }
    // The layer's own answers: an HTTP status, or a gRPC status in a 200.
    let answered = |error: Error| {
        if grpc {
            assert_eq!(status, 200);
            assert_eq!(
                grpc_status.as_deref(),
                Some(error.grpc_code().as_u8().to_string().as_str())
            );
        } else {
            assert_eq!(status, error.http_status());
            assert!(grpc_status.is_none());
        }
    };

    let budget = match budget {
        Err(_) => {
            answered(Error::MalformedDeadline);
            assert!(seen.is_none(), "a malformed header reached the handler");
            assert_eq!(elapsed, Duration::ZERO);
            return;
        }
        Ok(budget) => budget,
    };
    // The handler's window: the budget as the clock counts it (whole microseconds), less the
    // reply margin.
    let window = Deadline::after(start, budget)
        .shortened_by(MARGIN)
        .remaining(start);
    if window.is_zero() {
        answered(Error::DeadlineExceeded);
        assert!(seen.is_none());
        assert_eq!(elapsed, Duration::ZERO);
        return;
    }
    if shed && window < NEED {
        answered(Error::Shed);
        assert!(seen.is_none());
        assert_eq!(elapsed, Duration::ZERO);
        return;
    }
    let seen = seen.expect("an admitted request reaches the handler");
    let deadline = seen.deadline.expect("the handler finds its deadline");
    assert_eq!(deadline.remaining(seen.at), window);
    assert!(deadline.remaining(seen.at) <= MAX);
    assert!(
        elapsed <= window + TIMER_SLACK,
        "answered {elapsed:?} into a {window:?} window"
    );
    assert!(elapsed <= MAX + TIMER_SLACK);
    if work + TIMER_SLACK < window {
        assert_eq!(status, 200);
        assert!(
            grpc_status.is_none(),
            "the handler's own answer passes through"
        );
        assert_eq!(elapsed, work);
    } else if work > window + TIMER_SLACK {
        answered(Error::DeadlineExceeded);
        assert!(elapsed >= window);
    }
}
