//! The front server of the `downstream` program: one handler per request calls the loopback
//! dependency, three ways, each on its own port.
//!
//! - **reqwest**: a plain call with a fixed timeout (the dependency's cap).
//! - **`Dependency::run`**: behind `DeadlineLayer` (around the whole router, as the library's
//!   documentation serves it), one line per call: the cap, two retries,
//!   a hedge at the dependency's live p95, the default retry budget (10%, which hedges draw
//!   from too), a circuit breaker, and the time left in `x-deadline-ms`.
//! - **tower**: `Retry` (with a `TpsBudget` of 10%, two retries after the library's default
//!   backoff) around `Hedge` (at the p95
//!   of tower's own latency histogram; behind a `Buffer`, since `Hedge` is not `Clone`)
//!   around `Timeout` (the cap), over the same reqwest call, as a `BoxCloneSyncService`
//!   cloned per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use bytes::Bytes;
use deadline_core::breaker::BreakerConfig;
use deadline_core::rng::{Rng, SplitMix64};
use deadline_core::wire::Propagation;
use deadline_core::{Policy, ms};
use deadline_tokio::reqwest::DeadlineRequest;
use deadline_tokio::{DeadlineLayer, Dependency};
use tower::Layer;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt};

use crate::apps::App;

/// The variants, in the order of [`apps`].
pub const VARIANTS: [&str; 3] = ["reqwest", "Dependency::run", "tower stack"];

/// Each attempt's limit: the cap of the library's policy, the fixed timeout of the plain call,
/// tower's `Timeout`.
pub const CAP: Duration = ms(100);
/// Retries after the first attempt, in the library's policy and tower's retry policy.
pub const RETRIES: u32 = 2;
/// The hedge delay before there are latencies to read a p95 from (the library's fallback).
pub const HEDGE_FALLBACK: Duration = ms(10);

/// The dependency as the library calls it.
pub static DEPENDENCY: Dependency = Dependency::new(
    Policy::required("dependency")
        .idempotent()
        .with_cap(CAP)
        .with_floor(ms(1))
        .with_retries(RETRIES)
        .with_hedge_at_p95(HEDGE_FALLBACK),
)
.breaker(BreakerConfig::DEFAULT);

/// tower's stack over one reqwest call, type-erased.
pub type TowerStack = BoxCloneSyncService<(), Bytes, BoxError>;

/// What each handler needs.
#[derive(Clone, Debug)]
pub struct Front {
    client: reqwest::Client,
    url: Arc<str>,
    tower: TowerStack,
}

/// One GET of the dependency with `client`, its body read.
pub async fn get(
    client: &reqwest::Client,
    url: &str,
    timeout: Option<Duration>,
) -> Result<Bytes, reqwest::Error> {
    let mut request = client.get(url);
    if let Some(timeout) = timeout {
        request = request.timeout(timeout);
    }
    request.send().await?.error_for_status()?.bytes().await
}

fn bad_gateway(timed_out: bool) -> StatusCode {
    if timed_out {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        StatusCode::BAD_GATEWAY
    }
}

async fn plain(State(front): State<Front>) -> Result<Bytes, StatusCode> {
    get(&front.client, &front.url, Some(CAP))
        .await
        .map_err(|e| bad_gateway(e.is_timeout()))
}

async fn library(State(front): State<Front>) -> Result<Bytes, StatusCode> {
    DEPENDENCY
        .run(|_| async {
            let response = front.client.get(&*front.url).time_left()?.send().await?;
            Ok::<_, BoxError>(response.error_for_status()?.bytes().await?)
        })
        .await
        .map_err(|e| match e.library() {
            Some(error) => StatusCode::from_u16(error.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            None => StatusCode::BAD_GATEWAY,
        })
}

async fn tower_stack(State(front): State<Front>) -> Result<Bytes, StatusCode> {
    call_tower(&front.tower)
        .await
        .map_err(|e| bad_gateway(e.is::<tower::timeout::error::Elapsed>()))
}

/// One call through tower's stack (a clone of it, as each request makes).
///
/// # Errors
///
/// The stack's error.
pub async fn call_tower(stack: &TowerStack) -> Result<Bytes, BoxError> {
    let mut stack = stack.clone();
    stack.ready().await?.call(()).await
}

/// tower's retry policy: an error is retried while attempts are left and the budget allows,
/// after the library's default backoff (exponential from 10 ms, at most 100 ms, full jitter).
#[derive(Clone, Debug)]
struct RetryErrors {
    left: u32,
    budget: Arc<tower::retry::budget::TpsBudget>,
}

/// Seeds each request's jitter.
static SEEDS: AtomicU64 = AtomicU64::new(1);

impl tower::retry::Policy<(), Bytes, BoxError> for RetryErrors {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, _: &mut (), result: &mut Result<Bytes, BoxError>) -> Option<Self::Future> {
        use tower::retry::budget::Budget;
        match result {
            Ok(_) => {
                self.budget.deposit();
                None
            }
            Err(_) if self.left > 0 && self.budget.withdraw() => {
                let retry = RETRIES - self.left;
                self.left -= 1;
                let ceiling = (10_000u64 << retry).min(100_000);
                let seed = SEEDS.fetch_add(1, Ordering::Relaxed);
                let wait = SplitMix64::new(seed).u64_between(0, ceiling);
                Some(tokio::time::sleep(Duration::from_micros(wait)))
            }
            Err(_) => None,
        }
    }

    fn clone_request(&mut self, _: &()) -> Option<()> {
        Some(())
    }
}

/// tower's hedge policy: every request may be hedged.
#[derive(Clone, Copy, Debug)]
struct HedgeAll;

impl tower::hedge::Policy<()> for HedgeAll {
    fn clone_request(&self, _: &()) -> Option<()> {
        Some(())
    }

    fn can_retry(&self, _: &()) -> bool {
        true
    }
}

/// tower's stack over `client` and `url`: each attempt limited to `cap`, hedged at
/// `percentile` of its latencies, retried while the budget allows. Call it inside a tokio
/// runtime (the `Buffer` spawns its worker).
#[must_use]
pub fn tower_stack_for(
    client: reqwest::Client,
    url: Arc<str>,
    cap: Duration,
    percentile: f32,
) -> TowerStack {
    let call = tower::service_fn(move |()| {
        let (client, url) = (client.clone(), Arc::clone(&url));
        async move { get(&client, &url, None).await.map_err(BoxError::from) }
    });
    let timeout = tower::timeout::Timeout::new(call, cap);
    // 20 latencies before hedging (the library waits for 20 too); the percentile is read
    // from the latencies of the last whole second (tower's histogram rotates each period).
    let hedge = tower::hedge::Hedge::new(timeout, HedgeAll, 20, percentile, Duration::from_secs(1));
    // `Hedge` is not `Clone`: shared by concurrent requests behind a `Buffer`, as tower has it.
    let hedge = tower::buffer::Buffer::new(hedge, 1_024);
    let budget = tower::retry::budget::TpsBudget::new(Duration::from_secs(10), 10, 0.1);
    let retry = tower::retry::Retry::new(
        RetryErrors {
            left: RETRIES,
            budget: Arc::new(budget),
        },
        hedge,
    );
    BoxCloneSyncService::new(retry)
}

/// A reqwest client for loopback: no proxy.
#[must_use]
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a reqwest client")
}

/// The three front servers calling the dependency at `url`, in the order of [`VARIANTS`].
pub fn apps(url: &str) -> [App; 3] {
    let client = client();
    let url: Arc<str> = Arc::from(url);
    let front = Front {
        tower: tower_stack_for(client.clone(), Arc::clone(&url), CAP, 0.95),
        client,
        url,
    };
    let route = |handler| {
        axum::Router::new()
            .route("/", handler)
            .with_state(front.clone())
    };
    let deadline_layer = DeadlineLayer::new(Propagation::DEFAULT.with_max(ms(10_000)), ms(1_000));
    [
        App::Router(route(axum::routing::get(plain))),
        App::Wrapped(deadline_layer.layer(route(axum::routing::get(library)))),
        App::Router(route(axum::routing::get(tower_stack))),
    ]
}
