//! The downstream call the call site is built for, over real HTTP on loopback: a timeout
//! from the time left, two retries with jittered backoff, a hedge at the live p95, the
//! default 10% retry budget, and the time left sent in a header, as one `static` and one
//! expression. The service answers 503 to its first request and 200 after, and notes the
//! `x-deadline-ms` each request carried.
//!
//! Real sockets run on real time; nothing here asserts a duration, only what the service
//! saw and what the call returned.

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
    let client = reqwest::Client::new();

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
    assert_eq!(seen.len(), 2, "the 503 was retried once: {seen:?}");
    // Each attempt sent its own time left less 5 ms per hop: at most its 110 ms cap - 5 ms.
    assert!(seen.iter().all(|&ms| ms > 0 && ms <= 105), "{seen:?}");
    let counts = PRICING.counters().snapshot();
    assert_eq!((counts.calls, counts.retries, counts.successes), (1, 1, 1));
}
