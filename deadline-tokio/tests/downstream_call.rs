//! The downstream call the call site is built for, over real HTTP on loopback: a timeout
//! from the time left, two retries with jittered backoff, a hedge at the live p95, the
//! default 10% retry budget, and the time left sent in a header, as one `static` and one
//! expression. The service answers 503 to its first request and 200 after, and notes the
//! `x-deadline-ms` each request carried.
//!
//! Real sockets run on real time; nothing here asserts a duration, only what the service
//! saw and what the call returned. How the call got its answer depends on the machine's
//! speed: a first attempt that takes past the hedge delay (60 ms) is hedged, and the hedge
//! may be the one that answers; so the tests count every request the service saw as the
//! first attempt, a retry or a hedge (and a retry or a hedge cancelled before its request
//! reached the service is counted but not seen).

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use deadline_core::{Policy, ms};
use deadline_tokio::reqwest::DeadlineRequest;
use deadline_tokio::{Dependency, scope_timeout};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// The target: 110 ms cap, 30 ms floor, 2 retries (jittered exponential backoff by default), a
// hedge at the live p95 (60 ms until there are enough samples), idempotent; the retry
// budget is the default 10%.
static PRICING: Dependency = Dependency::new(
    Policy::required("pricing")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_hedge_at_p95(ms(60)),
);

/// What the service saw: each request's `x-deadline-ms`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<u64>>>);

async fn price(State(seen): State<Seen>, headers: HeaderMap) -> Result<&'static str, StatusCode> {
    let sent = headers
        .get("x-deadline-ms")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(u64::MAX);
    let mut seen = seen.0.lock().unwrap();
    seen.push(sent);
    if seen.len() == 1 {
        Err(StatusCode::SERVICE_UNAVAILABLE)
    } else {
        Ok("42")
    }
}

#[tokio::test]
async fn retries_and_propagation_in_one_expression() {
    let seen = Seen::default();
    let app = axum::Router::new()
        .route("/price", axum::routing::get(price))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/price", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a reqwest client");

    let answer = scope_timeout(ms(2_000), async {
        // The call site: one expression.
        PRICING
            .run(|_| async {
                let response = client
                    .get(&url)
                    .time_left()?
                    .send()
                    .await?
                    .error_for_status()?;
                Ok::<_, BoxError>(response.text().await?)
            })
            .reserve(ms(20))
            .await
    })
    .await
    .expect("inside its scope");
    server.abort();

    assert_eq!(answer.map_err(|e| e.to_string()).as_deref(), Ok("42"));
    let seen = seen.0.lock().unwrap().clone();
    // Each attempt sent its own time left less 5 ms per hop: at most its 110 ms cap - 5 ms.
    assert!(seen.iter().all(|&ms| ms > 0 && ms <= 105), "{seen:?}");
    let counts = PRICING.counters().snapshot();
    assert_eq!((counts.calls, counts.successes), (1, 1), "{counts:?}");
    // The first request the service saw had its 503, so another answered: the 503 was
    // retried, or (on a slow machine) hedged. Every request seen is the first attempt, a
    // retry or a hedge; one cancelled once another had answered may never have arrived.
    assert!(counts.retries + counts.hedges >= 1, "{counts:?}");
    assert!(
        (2..=1 + counts.retries + counts.hedges).contains(&(seen.len() as u64)),
        "{seen:?} {counts:?}"
    );
}

/// A next service behind `DeadlineLayer` that runs out of the time it was sent answers 504
/// its reply margin before that, which is an allowance and a margin before the attempt's own
/// end: the call times out (a 504 from this service too), it does not fail (a 502). The
/// answer comes back either inside the time sent's allowance (the rule of what was sent) or,
/// on a slow machine, after the attempt's end (the attempt's own timeout): a timeout both
/// ways, so nothing here depends on how fast the machine is.
#[tokio::test]
async fn a_next_service_that_runs_out_makes_a_timeout_not_a_failure() {
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::wire::Propagation;
    use deadline_core::{CallError, Error};
    use deadline_tokio::DeadlineLayer;
    use tower::Layer;

    static SLOW: Dependency<DeadlineOnly> =
        Dependency::deadline_only(Policy::required("slow").with_cap(ms(100)));

    async fn never_in_time() -> &'static str {
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        "too late"
    }
    let next = DeadlineLayer::new(Propagation::DEFAULT, ms(1_000))
        .layer(axum::Router::new().route("/slow", axum::routing::get(never_in_time)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, next).await.unwrap() });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a reqwest client");

    let called = scope_timeout(ms(2_000), async {
        SLOW.run(|_| async {
            let response = client.get(&url).time_left()?.send().await?;
            Ok::<_, BoxError>(response.error_for_status()?.text().await?)
        })
        .await
    })
    .await
    .expect("inside its scope");
    server.abort();

    match called {
        Err(CallError::Library(Error::Timeout { after })) => assert!(after <= ms(100)),
        other => panic!("a timeout, not {other:?}"),
    }
    assert_eq!(SLOW.counters().snapshot().timeouts, 1);
}

/// A next service told a deadline answers 504 by its own margins before the time it was sent
/// (here at once, as one whose database ended the query at its statement timeout, a margin
/// before its handler's deadline, would): long before the attempt's end, and before the time
/// sent is running out. Read by `reqwest::classify`, that 504 is the attempt's timeout: the
/// call answers 504 and counts a timeout, where it answered 502 as a failed dependency.
#[tokio::test]
async fn a_next_services_early_504_is_the_attempts_timeout() {
    use deadline_core::{CallError, Error};
    use deadline_tokio::reqwest::classify;

    static EARLY: Dependency = Dependency::new(
        Policy::required("early")
            .not_idempotent()
            .with_cap(ms(1_000)),
    );

    async fn ran_out() -> StatusCode {
        StatusCode::GATEWAY_TIMEOUT
    }
    let next = axum::Router::new().route("/early", axum::routing::get(ran_out));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/early", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, next).await.unwrap() });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a reqwest client");

    let called = scope_timeout(ms(5_000), async {
        EARLY
            .run(|_| async {
                let response = client.get(&url).time_left()?.send().await?;
                Ok::<_, BoxError>(response.error_for_status()?.text().await?)
            })
            .classify(|e| classify(&**e))
            .await
    })
    .await
    .expect("inside its scope");
    server.abort();

    let error = called.expect_err("the service answered 504");
    assert!(
        matches!(error, CallError::Library(Error::Timeout { after }) if after < ms(1_000)),
        "{error:?}"
    );
    assert_eq!(StatusCode::from(error), StatusCode::GATEWAY_TIMEOUT);
    let counts = EARLY.counters().snapshot();
    assert_eq!((counts.calls, counts.timeouts), (1, 1));
}

/// A connect that the client's own connect timeout ends (`ClientBuilder::connect_timeout`,
/// where the module's docs say to give reqwest the dependency's connect limit) is the
/// attempt's timeout, as the library's `Connector` makes one: the call answers 504 and counts
/// a timeout, where it answered 502 as a refused connection (reqwest's error says both
/// "connect" and "timeout"). The peer is a listener on loopback whose accept queue is full:
/// the kernel drops the client's SYN, so the connect hangs until the client's limit (Linux's
/// way with a full queue; another system may refuse the connect instead).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_connect_timeout_is_the_attempts_timeout() {
    use deadline_core::{CallError, Error};
    use deadline_tokio::reqwest::classify;

    static SLOW_CONNECT: Dependency = Dependency::new(
        Policy::required("slow-connect")
            .not_idempotent()
            .with_cap(ms(1_000)),
    );

    // A backlog of 1, filled until a connect no longer completes (within 200 ms, for at most
    // 16 connects), its connections held and never accepted.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = Vec::new();
    let mut full = false;
    for _ in 0..16 {
        match tokio::time::timeout(ms(200), tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => queued.push(stream),
            Ok(Err(e)) => panic!("a connect to fill the backlog failed: {e}"),
            Err(_) => {
                full = true;
                break;
            }
        }
    }
    assert!(full, "the listen backlog did not fill after 16 connects");

    let client = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(ms(100))
        .build()
        .expect("a reqwest client");
    let url = format!("http://{addr}/pay");
    let called = scope_timeout(ms(5_000), async {
        SLOW_CONNECT
            .run(|_| async {
                let response = client.post(&url).time_left()?.send().await?;
                Ok::<_, BoxError>(response.error_for_status()?.text().await?)
            })
            .classify(|e| classify(&**e))
            .await
    })
    .await
    .expect("inside its scope");
    drop((queued, listener));

    let error = called.expect_err("the connect never completes");
    assert!(
        matches!(error, CallError::Library(Error::Timeout { after }) if after < ms(1_000)),
        "{error:?}"
    );
    assert_eq!(StatusCode::from(error), StatusCode::GATEWAY_TIMEOUT);
    let counts = SLOW_CONNECT.counters().snapshot();
    assert_eq!((counts.calls, counts.timeouts), (1, 1));
}

/// A service that is busy answers 503 with `Retry-After`: the server refused the request
/// unprocessed, and says when to come back. Made into an error by
/// `deadline_tokio::reqwest::error_for_status`, the answer keeps that word: a payment (never
/// sent twice after a failure) is retried after a `Retry-After: 0`, and not retried when the
/// server asks for an hour, past the call's deadline, so the call ends at once on the 503.
/// Made into an error by reqwest's own `error_for_status`, the header is lost: the 503 is a
/// plain failure, which a payment never retries.
#[tokio::test]
async fn a_busy_services_retry_after_is_kept() {
    use deadline_core::CallError;
    use deadline_tokio::reqwest::{StatusError, classify, error_for_status};

    static PAY: Dependency = Dependency::new(
        Policy::required("pay")
            .not_idempotent()
            .with_cap(ms(1_000))
            .with_retries(1),
    );

    /// The service answers each request's first try 503 with `Retry-After: <after>` (the
    /// query string), and 200 after; it counts the requests.
    async fn busy(
        State(seen): State<Arc<Mutex<Vec<String>>>>,
        axum::extract::RawQuery(after): axum::extract::RawQuery,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        let after = after.unwrap_or_default();
        let mut seen = seen.lock().unwrap();
        let first = !seen.contains(&after);
        seen.push(after.clone());
        if first {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [("retry-after", after)],
                "busy",
            )
                .into_response()
        } else {
            "paid".into_response()
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .route("/pay", axum::routing::post(busy))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/pay", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a reqwest client");

    // One payment whose first answer says `Retry-After: <after>`, its 503 made into an error
    // by this crate's `error_for_status` (`kept`) or by reqwest's: the answer, and the
    // requests the service saw for it.
    let pay = |after: &'static str, kept: bool| {
        let (client, url, seen) = (&client, format!("{url}?{after}"), &seen);
        async move {
            let called = scope_timeout(ms(5_000), async {
                PAY.run(|_| async {
                    let response = client.post(&url).time_left()?.send().await?;
                    let response = if kept {
                        error_for_status(response)?
                    } else {
                        response.error_for_status()?
                    };
                    Ok::<_, BoxError>(response.text().await?)
                })
                .classify(|e| classify(&**e))
                .await
            })
            .await
            .expect("inside its scope");
            let requests = seen.lock().unwrap().iter().filter(|a| *a == after).count();
            (called, requests)
        }
    };

    let (called, requests) = pay("0", true).await;
    assert_eq!(called.map_err(|e| e.to_string()).as_deref(), Ok("paid"));
    assert_eq!(requests, 2, "retried as the server asked");

    let (called, requests) = pay("3600", true).await;
    match called {
        Err(CallError::Attempt(error)) => {
            let status = error.downcast_ref::<StatusError>().map(StatusError::status);
            assert_eq!(status, Some(StatusCode::SERVICE_UNAVAILABLE), "{error}");
        }
        other => panic!("the 503, not {other:?}"),
    }
    assert_eq!(requests, 1, "an hour is past the deadline: not retried");

    // reqwest's own `error_for_status` loses the header: a plain failure, never retried by a
    // payment.
    let (called, requests) = pay("1", false).await;
    assert!(matches!(called, Err(CallError::Attempt(_))), "{called:?}");
    assert_eq!(requests, 1, "the 503 without its Retry-After");
    server.abort();
}
