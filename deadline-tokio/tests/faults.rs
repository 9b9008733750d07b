//! Fault injection on tokio: the shared fault suite in paused time, and what only a runtime
//! has: a dependency that panics (contained in its task), tasks left behind
//! (`num_alive_tasks`), a handler behind `DeadlineLayer` that hangs or panics, and a
//! dependency on a real loopback socket that accepts and never answers (its sockets closed
//! when the attempts are dropped).

use std::convert::Infallible;
use std::future::pending;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::wire::Propagation;
use deadline_core::{Clock, Outcome, Policy, ms};
use deadline_testkit::Attempts;
use deadline_testkit::faults::SLACK;
use deadline_tokio::DeadlineLayer;
use deadline_tokio::low_level::{call, drive};
use deadline_tokio::scope_timeout;
use deadline_tokio::time::{TokioClock, TokioTimer};
use http::{Request, Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, ServiceExt, service_fn};

macro_rules! on_tokio {
    ($name:ident) => {
        #[tokio::test(start_paused = true)]
        async fn $name() {
            deadline_testkit::faults::$name(TokioTimer).await;
        }
    };
}

deadline_testkit::for_each_fault!(on_tokio);

/// Hedged after 20 ms; up to 3 attempts of at most 50 ms.
static FLAKY: Policy = Policy::required("flaky")
    .idempotent()
    .with_cap(ms(50))
    .with_floor(ms(5))
    .with_retries(2)
    .with_backoff(Backoff::constant(ms(5)))
    .with_hedge(HedgePolicy::new(ms(20), 1));

fn failed(_: &&'static str) -> Outcome {
    Outcome::Failed
}

/// A dependency that panics, in a request task: the first attempt hangs, its hedge panics at
/// 20 ms. The panic stays in the request's task (the join handle reports it), unwinding
/// drops the hung attempt, no task is left, and the runtime goes on serving.
#[tokio::test(start_paused = true)]
async fn a_panicking_dependency_is_contained_in_its_task() {
    static PROBE: OnceLock<Attempts> = OnceLock::new();
    let probe = PROBE.get_or_init(|| Attempts::new(TokioClock.now()));
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let task = tokio::spawn(scope_timeout(
        ms(200),
        drive(call(&FLAKY, ms(0)), SplitMix64::new(1), failed, |limits| {
            let first = probe.started() == 0;
            let guard = probe.begin(TokioClock, limits);
            async move {
                let _guard = guard;
                if first {
                    pending::<()>().await;
                }
                panic!("the dependency's client panicked");
                #[allow(unreachable_code)]
                Ok::<_, &'static str>(())
            }
        }),
    ));
    let joined = task.await;
    assert!(
        joined.unwrap_err().is_panic(),
        "the panic is the task's, reported to its join"
    );
    assert_eq!(
        probe.started(),
        2,
        "the hung attempt and the hedge that panicked"
    );
    assert_eq!(probe.alive(), 0, "unwinding dropped the hung attempt");
    assert_eq!(metrics.num_alive_tasks(), before, "no task is left behind");

    // The runtime still serves: the next request is answered.
    let next = scope_timeout(
        ms(200),
        drive(call(&FLAKY, ms(0)), SplitMix64::new(2), failed, |_| async {
            Ok::<_, &'static str>("served")
        }),
    )
    .await
    .expect("answered inside its scope");
    assert_eq!(next.result, Ok("served"));
}

/// A thousand requests in their own tasks against a dependency that hangs forever: every
/// request ends by its deadline (200 ms, plus the slack), every attempt is dropped, and no
/// task is left.
#[tokio::test(start_paused = true)]
async fn many_hung_requests_leave_no_task_and_no_attempt() {
    static PROBES: OnceLock<Vec<Attempts>> = OnceLock::new();
    const REQUESTS: usize = 1_000;
    let t0 = TokioClock.now();
    let probes = PROBES.get_or_init(|| (0..REQUESTS).map(|_| Attempts::new(t0)).collect());
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let tasks: Vec<_> = probes
        .iter()
        .enumerate()
        .map(|(i, probe)| {
            tokio::spawn(scope_timeout(
                ms(200),
                drive(
                    call(&FLAKY, ms(0)),
                    SplitMix64::new(i as u64),
                    failed,
                    |limits| {
                        let guard = probe.begin(TokioClock, limits);
                        async move {
                            let _guard = guard;
                            pending::<()>().await;
                            Ok::<_, &'static str>(())
                        }
                    },
                ),
            ))
        })
        .collect();
    assert_eq!(metrics.num_alive_tasks(), before + REQUESTS);
    for task in tasks {
        let called = task
            .await
            .expect("no request task panics")
            .expect("the driver ends the call at the deadline, before its scope would");
        assert!(called.result.is_err());
        assert!(called.report.ended <= t0 + ms(200) + SLACK);
    }
    assert!(TokioClock.now() <= t0 + ms(200) + SLACK);
    assert_eq!(
        metrics.num_alive_tasks(),
        before,
        "a request task outlived its request"
    );
    for (i, probe) in probes.iter().enumerate() {
        assert_eq!(probe.alive(), 0, "an attempt of request {i} outlived it");
        assert!(probe.started() >= 2, "each request retried or hedged");
    }
}

/// Counts its drops: shows that the handler's future was dropped.
struct DropCount(&'static AtomicUsize);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A handler behind `DeadlineLayer` that hangs forever is dropped at the deadline and the
/// caller gets 504 at once; one that panics panics in its connection's task (as hyper runs
/// each connection), where it is contained, and its future is dropped as it unwinds.
#[tokio::test(start_paused = true)]
async fn a_hanging_or_panicking_handler_behind_the_layer() {
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    let layer = DeadlineLayer::new(
        Propagation::DEFAULT
            .with_allowance(ms(5))
            .with_max(ms(10_000)),
        ms(1_000),
    )
    .with_reply_margin(Duration::ZERO);
    let hanging = layer.layer(service_fn(|_req: Request<String>| {
        let guard = DropCount(&DROPPED);
        async move {
            let _guard = guard;
            pending::<()>().await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let t0 = TokioClock.now();
    let request = Request::builder()
        .header("x-deadline-ms", "150")
        .body(String::new())
        .unwrap();
    let response = hanging.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(TokioClock.now().saturating_duration_since(t0), ms(150));
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        1,
        "the hung handler was dropped"
    );

    let panicking = layer.layer(service_fn(|_req: Request<String>| {
        let guard = DropCount(&DROPPED);
        async move {
            let _guard = guard;
            tokio::time::sleep(ms(10)).await;
            panic!("the handler panicked");
            #[allow(unreachable_code)]
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    }));
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let request = Request::builder()
        .header("x-deadline-ms", "150")
        .body(String::new())
        .unwrap();
    let connection = tokio::spawn(panicking.oneshot(request));
    assert!(connection.await.unwrap_err().is_panic());
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        2,
        "the panicking handler was dropped"
    );
    assert_eq!(metrics.num_alive_tasks(), before);
}

/// A dependency on a real loopback socket that accepts every connection, reads the request,
/// and never answers. Each attempt connects, writes and waits; at its timeout the attempt is
/// dropped, and with it its socket: the server reads end-of-file on every connection it
/// accepted. Real time (sockets), so nothing here is timed: each wait is bounded instead.
#[tokio::test]
async fn a_hung_socket_dependency_leaves_no_socket_open() {
    static SOCKETS: Policy = Policy::required("socket")
        .idempotent()
        .with_cap(ms(40))
        .with_floor(ms(1))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let closed = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::new(AtomicUsize::new(0));
    let server = {
        let (closed, accepted) = (Arc::clone(&closed), Arc::clone(&accepted));
        tokio::spawn(async move {
            let mut connections = Vec::new();
            // At most the policy's 3 attempts connect.
            for _ in 0..3 {
                let Ok(Ok((mut stream, _))) =
                    tokio::time::timeout(Duration::from_secs(5), listener.accept()).await
                else {
                    break;
                };
                accepted.fetch_add(1, Ordering::SeqCst);
                let closed = Arc::clone(&closed);
                connections.push(tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    // Read the request, answer nothing, and wait for the client to close.
                    loop {
                        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
                            .await
                        {
                            Ok(Ok(0)) | Ok(Err(_)) => {
                                closed.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                            Ok(Ok(_)) => continue,
                            Err(_) => return, // still open after 5 s: counted as not closed
                        }
                    }
                }));
            }
            for c in connections {
                c.await.unwrap();
            }
        })
    };
    let called = scope_timeout(
        ms(300),
        drive(
            call(&SOCKETS, ms(0)),
            SplitMix64::new(3),
            |_: &std::io::Error| Outcome::Failed,
            |_| async move {
                let mut stream = tokio::net::TcpStream::connect(address).await?;
                stream.write_all(b"GET / HTTP/1.1\r\n\r\n").await?;
                let mut buf = [0u8; 16];
                let _ = stream.read(&mut buf).await?;
                Ok::<_, std::io::Error>(())
            },
        ),
    )
    .await
    .expect("the driver ends the call at the deadline, before its scope would");
    assert!(
        called.result.is_err(),
        "a dependency that never answers cannot succeed"
    );
    let attempts = called.report.attempts as usize;
    assert!(attempts >= 1);
    server.await.unwrap();
    let accepted = accepted.load(Ordering::SeqCst);
    assert!(accepted >= 1, "at least one attempt reached the server");
    assert!(accepted <= attempts);
    assert_eq!(
        closed.load(Ordering::SeqCst),
        accepted,
        "every connection the dependency accepted was closed by the client"
    );
}
