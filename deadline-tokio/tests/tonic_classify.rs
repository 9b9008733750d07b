//! `deadline_tokio::tonic::classify`: a tonic client's `Status` counts as the core reads a gRPC
//! status. Without it every status is a plain failure: a `NOT_FOUND` retried and a
//! `DEADLINE_EXCEEDED` counted as the dependency failing. Virtual time: each attempt answers
//! at once, and the backoffs pass on tokio's paused clock.

mod common;

use std::cell::Cell;

use deadline_core::policy::Backoff;
use deadline_core::{CallError, Error, Outcome, Policy, ms};
use deadline_tokio::{Dependency, scope_timeout};
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// Three attempts at most, 10 ms apart.
const fn thrice(name: &'static str) -> Policy<'static> {
    Policy::required(name)
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(1))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)))
}

/// The attempts `dep` makes when each returns `status`, and the call's error.
async fn attempts(dep: &'static Dependency, status: fn() -> Status) -> (u32, CallError<Status>) {
    let tries = Cell::new(0);
    let error = scope_timeout(ms(1_000), async {
        dep.run(|_| {
            tries.set(tries.get() + 1);
            async move { Err::<(), _>(status()) }
        })
        .classify(deadline_tokio::tonic::classify)
        .await
    })
    .await
    .expect("inside its scope")
    .unwrap_err();
    (tries.get(), error)
}

#[tokio::test(start_paused = true)]
async fn a_servers_answer_is_final_and_not_a_failure() {
    static NOT_FOUND: Dependency = Dependency::new(thrice("not_found"));
    let (tries, error) = attempts(&NOT_FOUND, || Status::not_found("no such item")).await;
    assert_eq!(tries, 1, "NOT_FOUND is not retried");
    assert!(matches!(error, CallError::Attempt(ref s) if s.code() == Code::NotFound));
    let counts = NOT_FOUND.counters().snapshot();
    assert_eq!((counts.calls, counts.retries, counts.timeouts), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn deadline_exceeded_is_the_attempts_timeout() {
    static SLOW: Dependency = Dependency::new(thrice("slow"));
    let (tries, error) = attempts(&SLOW, || Status::deadline_exceeded("ran out")).await;
    assert_eq!(tries, 3, "retried as a timeout is");
    assert!(
        matches!(error, CallError::Library(Error::Timeout { .. })),
        "{error:?}"
    );
    assert_eq!(SLOW.counters().snapshot().timeouts, 3);
}

/// An error that wraps another, as a tower `Buffer`'s does.
#[derive(Debug)]
struct Wrapped(tonic::TimeoutExpired);

impl std::fmt::Display for Wrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the service failed")
    }
}

impl std::error::Error for Wrapped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// tonic's own timer (a `Channel` timing a call by its `grpc-timeout` or its endpoint's
/// timeout) fails the call with `CANCELLED`, its `TimeoutExpired` kept as the status's
/// source: the attempt ran out of time, not the server's final answer. Read as its code alone,
/// it ended the call at the first attempt, held nothing against the dependency and was
/// counted as no timeout.
#[tokio::test(start_paused = true)]
async fn tonics_own_timer_is_the_attempts_timeout() {
    static TIMED: Dependency = Dependency::new(thrice("timed"));
    let (tries, error) = attempts(&TIMED, || {
        Status::from_error(Box::new(tonic::TimeoutExpired(())))
    })
    .await;
    assert_eq!(tries, 3, "retried as a timeout is");
    assert!(
        matches!(error, CallError::Library(Error::Timeout { .. })),
        "{error:?}"
    );
    assert_eq!(Status::from(error).code(), Code::DeadlineExceeded);
    assert_eq!(TIMED.counters().snapshot().timeouts, 3);

    // Found however deep in the status's sources it is (a `Buffer` in front of the
    // `Channel` wraps it in its own error). A server's CANCELLED is read by its code.
    let wrapped = Status::from_error(Box::new(Wrapped(tonic::TimeoutExpired(()))));
    assert_eq!(wrapped.code(), Code::Cancelled);
    assert_eq!(deadline_tokio::tonic::classify(&wrapped), Outcome::TimedOut);
    assert_eq!(
        deadline_tokio::tonic::classify(&Status::cancelled("Timeout expired")),
        Outcome::Failed
    );
}

/// `INTERNAL` is the server failing in a way a retry would not fix: one attempt, and held
/// against the dependency's breaker, which opens. `NOT_FOUND`, its answer, never opens it.
#[tokio::test(start_paused = true)]
async fn internal_is_not_retried_but_opens_the_breaker() {
    use deadline_core::breaker::BreakerConfig;

    static BROKEN: Dependency = Dependency::new(thrice("broken"))
        .breaker(BreakerConfig::DEFAULT.with_consecutive_failures(2));
    for _ in 0..2 {
        let (tries, error) = attempts(&BROKEN, || Status::internal("disk on fire")).await;
        assert_eq!(tries, 1, "INTERNAL is not retried");
        assert!(matches!(error, CallError::Attempt(ref s) if s.code() == Code::Internal));
    }
    let (tries, error) = attempts(&BROKEN, || Status::internal("disk on fire")).await;
    assert_eq!(tries, 0, "the breaker is open");
    assert!(
        matches!(error, CallError::Library(Error::CircuitOpen)),
        "{error:?}"
    );

    static ANSWERS: Dependency = Dependency::new(thrice("answers"))
        .breaker(BreakerConfig::DEFAULT.with_consecutive_failures(2));
    for _ in 0..4 {
        let (tries, _) = attempts(&ANSWERS, || Status::not_found("no such item")).await;
        assert_eq!(tries, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn unavailable_is_retried_unless_the_server_says_not_to() {
    static BUSY: Dependency = Dependency::new(thrice("busy"));
    let (tries, _) = attempts(&BUSY, || Status::unavailable("busy")).await;
    assert_eq!(tries, 3);

    // gRFC A6: a negative pushback says not to retry.
    static STOP: Dependency = Dependency::new(thrice("stop"));
    let (tries, error) = attempts(&STOP, || {
        let mut status = Status::unavailable("go away");
        status
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", MetadataValue::from_static("-1"));
        status
    })
    .await;
    assert_eq!(tries, 1);
    assert!(matches!(error, CallError::Attempt(ref s) if s.code() == Code::Unavailable));
}

#[test]
fn every_code_reads_as_the_core_reads_a_grpc_status() {
    use deadline_core::wire::{GrpcCode, classify_grpc};
    for number in 1..=16u8 {
        let code = GrpcCode::from_u8(number).unwrap();
        let status = Status::new(Code::from_i32(i32::from(number)), "");
        assert_eq!(
            Some(deadline_tokio::tonic::classify(&status)),
            classify_grpc(code, None),
            "{code}"
        );
    }
    // Not an error a client gives, nor a code gRPC defines: final.
    assert_eq!(
        deadline_tokio::tonic::classify(&Status::new(Code::Ok, "")),
        Outcome::Fatal
    );
}

/// A channel that cannot connect (tonic's own connector, to a loopback port that refuses every
/// connect): tonic answers `UNAVAILABLE`, and the request never left, so a call that is not
/// idempotent retries it, as after any refused connection. (It was a plain failure, which such
/// a call never retries: one attempt.) Real sockets: each connect is refused at once; the
/// 5 s scope only bounds the test.
#[tokio::test]
async fn a_channel_that_cannot_connect_is_refused() {
    use tower::ServiceExt;

    static PAY: Dependency = Dependency::new(
        Policy::required("pay")
            .not_idempotent()
            .with_cap(ms(1_000))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(1))),
    );
    let addr = common::closed_port();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let tries = Cell::new(0);
    let error = scope_timeout(ms(5_000), async {
        PAY.run(|_| {
            tries.set(tries.get() + 1);
            let channel = channel.clone();
            async move {
                let request = http::Request::post(format!("http://{addr}/test.Pay/Pay"))
                    .header("content-type", "application/grpc")
                    .body(tonic::body::Body::empty())
                    .unwrap();
                // What a generated client makes of the channel's error.
                let error = channel.oneshot(request).await.unwrap_err();
                Err::<(), _>(Status::from_error(Box::new(error)))
            }
        })
        .classify(deadline_tokio::tonic::classify)
        .await
    })
    .await
    .expect("inside its scope")
    .unwrap_err();
    assert!(
        matches!(error, CallError::Attempt(ref s) if s.code() == Code::Unavailable),
        "{error:?}"
    );
    assert_eq!(tries.get(), 3, "the first attempt and both retries");
}

/// The server resets the call's HTTP/2 stream with `REFUSED_STREAM` (closed before any
/// processing): tonic answers `UNAVAILABLE`, and the call never ran, so a call that is not
/// idempotent sends it again. (It was a plain failure, never retried for such a call.) Real
/// sockets on loopback; the 5 s scope only bounds the test.
#[tokio::test]
async fn a_stream_the_server_refused_is_sent_again() {
    use std::sync::atomic::Ordering;

    use tower::ServiceExt;

    static ORDER: Dependency = Dependency::new(
        Policy::required("order")
            .not_idempotent()
            .with_cap(ms(1_000))
            .with_retries(1)
            .with_backoff(Backoff::constant(ms(1))),
    );
    let (addr, streams) = common::refusing_first_stream().await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let tries = Cell::new(0);
    let answer = scope_timeout(ms(5_000), async {
        ORDER
            .run(|_| {
                tries.set(tries.get() + 1);
                let channel = channel.clone();
                async move {
                    let request = http::Request::post(format!("http://{addr}/test.Orders/Place"))
                        .header("content-type", "application/grpc")
                        .body(tonic::body::Body::empty())
                        .unwrap();
                    match channel.oneshot(request).await {
                        Ok(response) => Ok(response.status()),
                        // What a generated client makes of the channel's error.
                        Err(error) => Err(Status::from_error(Box::new(error))),
                    }
                }
            })
            .classify(deadline_tokio::tonic::classify)
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(
        answer.expect("the second stream's answer"),
        http::StatusCode::OK
    );
    assert_eq!((tries.get(), streams.load(Ordering::SeqCst)), (2, 2));
}
