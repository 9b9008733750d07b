//! What the deadline crates cost and buy, measured beside the alternatives in the same run.
//!
//! - **Per call** (this module's root): one call, made `n` times, in each of the ways this
//!   crate compares: tokio's own timeout, tower's `Timeout`, `Timeout` + `Retry` (with tower's
//!   `TpsBudget`) and `Timeout` + `Hedge`, and the deadline crates' call paths; around a future
//!   that is ready at once, one that is pending once (every timer armed, as a real
//!   dependency's answer arms them), and each call in a scope of its own (as a request
//!   handler makes it). `src/bin/calls.rs` runs them under valgrind's callgrind for
//!   instruction counts (`scripts/instructions.sh`), and the criterion bench `benches/calls.rs`
//!   for time.
//! - **Where users feel it**: the programs `server` (a server's requests per second, latency
//!   and CPU time per request, with and without `DeadlineLayer`), `downstream` (a downstream
//!   call per request: reqwest, `Dependency::run`, tower's stack), `tail` (what hedging buys
//!   against a heavy tail); each runs its servers in processes of their own ([`child`]), loads
//!   them from its own runtime ([`load`]), and prints both sides of every comparison; `server`
//!   and `downstream` also count a request's instructions exactly ([`callgrind`]).

pub mod apps;
pub mod callgrind;
pub mod child;
pub mod cpu;
pub mod dependency;
pub mod downstream;
pub mod load;
pub mod options;
pub mod stats;

use core::future::{Ready, ready};
use core::hint::black_box;
use core::time::Duration;

use deadline_core::Outcome;
use deadline_core::breaker::{BreakerConfig, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, call_timeout};
use deadline_core::drive::{DeadlineOnly, Driver};
use deadline_core::policy::{Backoff, HedgePolicy, Jitter};
use deadline_core::rng::SplitMix64;
use deadline_core::wire::GrpcTimeout;
use deadline_core::{Clock, Deadline, Policy, ms};
use deadline_tokio::low_level::{call, decide, drive, within};
use deadline_tokio::time::{TokioClock, TokioTimer};
use deadline_tokio::{Dependency, Tokio, scope, scope_timeout};
use tower::{Service, ServiceExt};

/// The scenarios, by the name the programs take (and, with feature `advice`,
/// `dependency_run_advice`).
pub const SCENARIOS: [&str; 43] = [
    "clock_tokio",
    "clock_deadline",
    "call_timeout",
    "grpc_timeout_decode",
    "grpc_timeout_encode",
    "tokio_timeout",
    "tower_timeout",
    "tower_timeout_retry",
    "tower_timeout_hedge",
    "deadline_within",
    "deadline_drive",
    "deadline_drive_only",
    "deadline_drive_only_scoped",
    "deadline_drive_armed",
    "deadline_run_armed",
    "dependency_run",
    "dependency_run_armed",
    "dependency_run_deadline_only",
    // The attempt pending once (its timer armed), as a real dependency call is.
    "tokio_timeout_pending",
    "tower_timeout_pending",
    "tower_timeout_hedge_pending",
    "deadline_drive_only_pending",
    "deadline_run_armed_pending",
    "dependency_run_deadline_only_pending",
    "dependency_run_pending",
    "dependency_run_armed_pending",
    // A scope per call, as a request handler has under `DeadlineLayer`: the request's deadline
    // read, then the handler's future built in its scope, with the call in it.
    "scope_tokio_timeout",
    "scope_dependency_run_deadline_only",
    "scope_dependency_run",
    "scope_dependency_run_armed",
    "scope_tokio_timeout_pending",
    "scope_dependency_run_deadline_only_pending",
    "scope_dependency_run_pending",
    "scope_dependency_run_armed_pending",
    // The same with `scope_timeout`, which reads the clock after the work's future is built.
    "scope_timeout_tokio_timeout",
    "scope_timeout_dependency_run_deadline_only",
    // One request through the `server` program's axum router, in process (no sockets).
    "axum_request",
    "axum_request_deadline_layer",
    "axum_request_tower_timeout",
    "axum_request_deadline_layer_around",
    "axum_request_empty_layer",
    // One reqwest request built, with a timeout of its own or the time left.
    "reqwest_build",
    "reqwest_build_time_left",
];

/// The scenario `name` is compared with: tokio's own timeout in the same setting (ready at
/// once or pending once, `*_pending`; with or without a scope per call, `scope_*`), a request
/// through the axum router without a layer for `axum_*`; `None` for the scenarios that are
/// not a call (the clock, a header, a reqwest request built).
#[must_use]
pub fn base_of(name: &str) -> Option<&'static str> {
    if name.starts_with("axum_") {
        return Some("axum_request");
    }
    if name.starts_with("scope_timeout_") {
        return Some("scope_timeout_tokio_timeout");
    }
    let call = [
        "tokio_timeout",
        "tower_",
        "deadline_",
        "dependency_",
        "scope_",
    ];
    if !call.iter().any(|prefix| name.starts_with(prefix)) {
        return None;
    }
    Some(
        match (name.starts_with("scope_"), name.ends_with("_pending")) {
            (false, false) => "tokio_timeout",
            (false, true) => "tokio_timeout_pending",
            (true, false) => "scope_tokio_timeout",
            (true, true) => "scope_tokio_timeout_pending",
        },
    )
}

/// The request's budget in every scenario: far more than any call here takes.
const BUDGET: Duration = Duration::from_secs(3_600);
/// Each call's timeout.
const TIMEOUT: Duration = Duration::from_secs(10);

static PLAIN: Policy = Policy::required("plain")
    .with_cap(TIMEOUT)
    .with_floor(ms(1));
static ARMED: Policy = Policy::required("armed")
    .idempotent()
    .with_cap(TIMEOUT)
    .with_floor(ms(1))
    .with_retries(2)
    .with_backoff(
        Backoff::exponential(ms(10))
            .with_max(ms(100))
            .with_jitter(Jitter::Full),
    )
    .with_hedge(HedgePolicy::new(ms(50), 1));
static BUDGET_10: RetryBudget = RetryBudget::percent(10).with_floor_per_sec(10);
static BREAKER: CircuitBreaker = CircuitBreaker::new(BreakerConfig::DEFAULT);
/// The plain policy as a dependency: its default retry budget, counters and live histogram,
/// called in one line.
static PLAIN_DEP: Dependency = Dependency::new(PLAIN);
/// The plain policy as a deadline-only dependency: one attempt per call, its counters and
/// histogram, no budget, no retry or hedge code.
static ONLY_DEP: Dependency<DeadlineOnly> = Dependency::deadline_only(PLAIN);
/// The armed policy as a dependency, with its budget and a breaker, hedging at the live p95.
static ARMED_DEP: Dependency = Dependency::new(
    Policy::required("armed")
        .idempotent()
        .with_cap(TIMEOUT)
        .with_floor(ms(1))
        .with_retries(2)
        .with_backoff(
            Backoff::exponential(ms(10))
                .with_max(ms(100))
                .with_jitter(Jitter::Full),
        )
        .with_hedge_at_p95(ms(50)),
)
.budget(RetryBudget::percent(10).with_floor_per_sec(10))
.breaker(BreakerConfig::DEFAULT);

/// The plain policy as a dependency whose cap follows its live latencies, between 1 ms and
/// the plain cap: its advice is checked every `ADVICE_EVERY` latencies, and moves the cap
/// (scenario `dependency_run_advice`, feature `advice`).
#[cfg(feature = "advice")]
static ADVICE_DEP: Dependency = Dependency::new(
    Policy::required("advice")
        .with_cap(TIMEOUT)
        .with_floor(ms(1))
        .with_adaptive_cap(ms(1), TIMEOUT),
);

/// A call to the armed policy under the current deadline, with its budget and breaker.
#[inline]
fn armed_call() -> Call<'static> {
    call(&ARMED, ms(0))
        .with_budget(&BUDGET_10)
        .with_breaker(&BREAKER)
}

/// A request's deadline, as `DeadlineLayer` reads it when the request arrives.
#[inline]
fn request_deadline() -> Deadline {
    Deadline::after(TokioClock.now(), BUDGET)
}

/// The dependency: answers at once.
fn answer() -> Ready<Result<u64, ()>> {
    ready(Ok(black_box(7)))
}

/// The dependency as a real one answers: pending at its first poll (it wakes its task at once),
/// ready at the second. Every timer around it is armed.
fn pending_once() -> PendingOnce {
    PendingOnce { polled: false }
}

/// The future of [`pending_once`].
struct PendingOnce {
    polled: bool,
}

impl core::future::Future for PendingOnce {
    type Output = Result<u64, ()>;

    fn poll(
        mut self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<Self::Output> {
        if self.polled {
            core::task::Poll::Ready(Ok(black_box(7)))
        } else {
            self.polled = true;
            cx.waker().wake_by_ref();
            core::task::Poll::Pending
        }
    }
}

/// The same dependency as a tower service.
fn service() -> impl Service<u64, Response = u64, Error = tower::BoxError, Future: Send> + Clone {
    tower::service_fn(|x: u64| ready(Ok::<_, tower::BoxError>(black_box(x))))
}

/// The pending-once dependency as a tower service.
fn pending_service()
-> impl Service<u64, Response = u64, Error = tower::BoxError, Future: Send> + Clone {
    tower::service_fn(|x: u64| async move {
        pending_once().await.map_err(|()| "never")?;
        Ok::<_, tower::BoxError>(black_box(x))
    })
}

/// tower's retry policy for the comparison: retry errors, within a 10% `TpsBudget`.
#[derive(Clone)]
struct Retry(std::sync::Arc<tower::retry::budget::TpsBudget>);

impl tower::retry::Policy<u64, u64, tower::BoxError> for Retry {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _req: &mut u64,
        result: &mut Result<u64, tower::BoxError>,
    ) -> Option<Self::Future> {
        use tower::retry::budget::Budget;
        match result {
            Ok(_) => {
                self.0.deposit();
                None
            }
            Err(_) => self.0.withdraw().then(|| ready(())),
        }
    }

    fn clone_request(&mut self, req: &u64) -> Option<u64> {
        Some(*req)
    }
}

/// tower's hedge policy for the comparison: every request may be hedged.
#[derive(Clone)]
struct Hedge;

impl tower::hedge::Policy<u64> for Hedge {
    fn clone_request(&self, req: &u64) -> Option<u64> {
        Some(*req)
    }

    fn can_retry(&self, _req: &u64) -> bool {
        true
    }
}

/// Makes `n` calls in scenario `name`, on the current tokio runtime (which must have time
/// enabled), and returns the sum of their answers (so that nothing is optimised away), or
/// `None` for an unknown scenario.
pub async fn run(name: &str, n: u64) -> Option<u64> {
    let mut sum = 0u64;
    match name {
        "clock_tokio" => {
            let start = tokio::time::Instant::now();
            for _ in 0..n {
                sum += u64::from(black_box(tokio::time::Instant::now()) > start);
            }
        }
        "clock_deadline" => {
            let start = TokioClock.now();
            for _ in 0..n {
                sum += u64::from(black_box(TokioClock.now()) >= start);
            }
        }
        "call_timeout" => {
            let deadline = Deadline::after(TokioClock.now(), BUDGET);
            let now = TokioClock.now();
            for _ in 0..n {
                // Every input passes through `black_box`, and every part of the decision (the
                // timeout, the connect limit, the end) goes into the sum: if the call is
                // inlined, none of its work is folded away or dropped.
                let decision = call_timeout(
                    black_box(&PLAIN),
                    black_box(deadline),
                    black_box(ms(0)),
                    black_box(now),
                );
                sum += decision.limits().map_or(0, |l| {
                    l.until().as_micros() ^ l.timeout_micros() ^ l.connect_micros()
                });
            }
        }
        "grpc_timeout_decode" => {
            for _ in 0..n {
                let t = GrpcTimeout::parse(black_box(b"12345678u")).unwrap();
                sum += u64::from(t.value() & 1);
            }
        }
        "grpc_timeout_encode" => {
            for i in 0..n {
                let t = GrpcTimeout::from_duration(black_box(Duration::from_micros(
                    123_456_789 + (i & 1),
                )))
                .unwrap();
                sum += t.as_bytes().len() as u64;
            }
        }
        "tokio_timeout" => {
            for _ in 0..n {
                sum += tokio::time::timeout(TIMEOUT, answer())
                    .await
                    .unwrap()
                    .unwrap();
            }
        }
        "tower_timeout" => {
            let mut svc = tower::timeout::Timeout::new(service(), TIMEOUT);
            for i in 0..n {
                sum += svc.ready().await.unwrap().call(i).await.unwrap();
            }
        }
        "tower_timeout_retry" => {
            let budget = tower::retry::budget::TpsBudget::new(Duration::from_secs(10), 10, 0.1);
            let policy = Retry(std::sync::Arc::new(budget));
            let timeout = tower::timeout::Timeout::new(service(), TIMEOUT);
            let mut svc = tower::retry::Retry::new(policy, timeout);
            for i in 0..n {
                sum += svc.ready().await.unwrap().call(i).await.unwrap();
            }
        }
        "tower_timeout_hedge" => {
            let timeout = tower::timeout::Timeout::new(service(), TIMEOUT);
            let mut svc =
                tower::hedge::Hedge::new(timeout, Hedge, 10, 0.95, Duration::from_secs(10));
            for i in 0..n {
                sum += svc.ready().await.unwrap().call(i).await.unwrap();
            }
        }
        "deadline_within" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    let limits = decide(&PLAIN, ms(0)).limits().unwrap();
                    sum += within(limits, answer()).await.unwrap().unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "deadline_drive" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    let called = drive(
                        call(&PLAIN, ms(0)),
                        SplitMix64::new(1),
                        |_: &()| Outcome::Failed,
                        |_| answer(),
                    )
                    .await;
                    sum += called.result.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "deadline_drive_only" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    // Around the same future as tokio's timeout.
                    let driver = Driver::deadline_only(call(&PLAIN, ms(0)), TokioTimer);
                    let called = driver.run(|_: &()| Outcome::Failed, |_| answer()).await;
                    sum += called.result.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "deadline_drive_only_scoped" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    // Each attempt in its own scope, as `drive` runs them.
                    let driver = Driver::deadline_only(call(&PLAIN, ms(0)), TokioTimer);
                    let called = driver
                        .run_scoped::<Tokio, _, _, _, _, _>(|_: &()| Outcome::Failed, |_| answer())
                        .await;
                    sum += called.result.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "deadline_drive_armed" => {
            scope_timeout(BUDGET, async {
                let mut rng = SplitMix64::new(1);
                for _ in 0..n {
                    let called = drive(
                        armed_call(),
                        &mut rng,
                        |_: &()| Outcome::Failed,
                        |_| answer(),
                    )
                    .await;
                    sum += called.result.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "deadline_run_armed" => {
            scope_timeout(BUDGET, async {
                let mut rng = SplitMix64::new(1);
                for _ in 0..n {
                    // Around the same future as tokio's timeout (`drive` runs each attempt in
                    // its own scope: `deadline_drive_armed`).
                    let driver = Driver::new(armed_call(), TokioTimer, &mut rng);
                    let called = driver.run(|_: &()| Outcome::Failed, |_| answer()).await;
                    sum += called.result.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "dependency_run" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    sum += PLAIN_DEP.run(|_| answer()).await.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "dependency_run_armed" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    sum += ARMED_DEP.run(|_| answer()).await.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        #[cfg(feature = "advice")]
        "dependency_run_advice" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    sum += ADVICE_DEP.run(|_| answer()).await.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "dependency_run_deadline_only" => {
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    sum += ONLY_DEP.run(|_| answer()).await.unwrap();
                }
            })
            .await
            .expect("inside its scope");
        }
        "tokio_timeout_pending" => {
            for _ in 0..n {
                sum += tokio::time::timeout(TIMEOUT, pending_once())
                    .await
                    .unwrap()
                    .unwrap();
            }
        }
        "tower_timeout_pending" => {
            let mut svc = tower::timeout::Timeout::new(pending_service(), TIMEOUT);
            for i in 0..n {
                sum += svc.ready().await.unwrap().call(i).await.unwrap();
            }
        }
        "tower_timeout_hedge_pending" => {
            let timeout = tower::timeout::Timeout::new(pending_service(), TIMEOUT);
            let mut svc =
                tower::hedge::Hedge::new(timeout, Hedge, 10, 0.95, Duration::from_secs(10));
            for i in 0..n {
                sum += svc.ready().await.unwrap().call(i).await.unwrap();
            }
        }
        "deadline_drive_only_pending" => {
            for _ in 0..n {
                let driver = Driver::deadline_only(call(&PLAIN, ms(0)), TokioTimer);
                let called = driver
                    .run(|_: &()| Outcome::Failed, |_| pending_once())
                    .await;
                sum += called.result.unwrap();
            }
        }
        "deadline_run_armed_pending" => {
            let mut rng = SplitMix64::new(1);
            for _ in 0..n {
                let driver = Driver::new(armed_call(), TokioTimer, &mut rng);
                let called = driver
                    .run(|_: &()| Outcome::Failed, |_| pending_once())
                    .await;
                sum += called.result.unwrap();
            }
        }
        "dependency_run_deadline_only_pending" => {
            // No scope around it, as tokio's timeout has none: the call's timeout is its
            // cap, and its timer is armed.
            for _ in 0..n {
                sum += ONLY_DEP.run(|_| pending_once()).await.unwrap();
            }
        }
        "dependency_run_pending" => {
            // No scope around it, as tokio's timeout has none: the call's timeout is its
            // cap, and its timer is armed.
            for _ in 0..n {
                sum += PLAIN_DEP.run(|_| pending_once()).await.unwrap();
            }
        }
        "dependency_run_armed_pending" => {
            // No scope around it, as tokio's timeout has none: the call's timeout is its
            // cap, and its timer is armed.
            for _ in 0..n {
                sum += ARMED_DEP.run(|_| pending_once()).await.unwrap();
            }
        }
        // A scope per call: each call inside a request's own scope, as a handler under
        // `DeadlineLayer` has it (the deadline read first, then the handler's future built in
        // the scope).
        "scope_tokio_timeout" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    tokio::time::timeout(TIMEOUT, answer()).await
                })
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            }
        }
        "scope_dependency_run_deadline_only" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    ONLY_DEP.run(|_| answer()).await
                })
                .await
                .unwrap()
                .unwrap();
            }
        }
        "scope_dependency_run" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    PLAIN_DEP.run(|_| answer()).await
                })
                .await
                .unwrap()
                .unwrap();
            }
        }
        "scope_dependency_run_armed" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    ARMED_DEP.run(|_| answer()).await
                })
                .await
                .unwrap()
                .unwrap();
            }
        }
        "scope_tokio_timeout_pending" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    tokio::time::timeout(TIMEOUT, pending_once()).await
                })
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            }
        }
        "scope_dependency_run_deadline_only_pending" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    ONLY_DEP.run(|_| pending_once()).await
                })
                .await
                .unwrap()
                .unwrap();
            }
        }
        "scope_dependency_run_pending" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    PLAIN_DEP.run(|_| pending_once()).await
                })
                .await
                .unwrap()
                .unwrap();
            }
        }
        "scope_dependency_run_armed_pending" => {
            for _ in 0..n {
                sum += scope(request_deadline(), async {
                    ARMED_DEP.run(|_| pending_once()).await
                })
                .await
                .unwrap()
                .unwrap();
            }
        }
        "scope_timeout_tokio_timeout" => {
            for _ in 0..n {
                sum += scope_timeout(BUDGET, async {
                    tokio::time::timeout(TIMEOUT, answer()).await
                })
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            }
        }
        "scope_timeout_dependency_run_deadline_only" => {
            for _ in 0..n {
                sum += scope_timeout(BUDGET, async { ONLY_DEP.run(|_| answer()).await })
                    .await
                    .unwrap()
                    .unwrap();
            }
        }
        "axum_request"
        | "axum_request_empty_layer"
        | "axum_request_deadline_layer"
        | "axum_request_tower_timeout" => {
            // As `axum::serve` serves a router: its handlers made into routes once.
            let mut router = match name {
                "axum_request" => apps::plain(),
                "axum_request_empty_layer" => apps::empty_layer(),
                "axum_request_deadline_layer" => apps::deadline_layer(),
                _ => apps::tower_timeout(),
            }
            .with_state::<()>(());
            for _ in 0..n {
                let request = http::Request::get("/")
                    .header("x-deadline-ms", "1000")
                    .body(axum::body::Body::empty())
                    .expect("a valid request");
                let ready = ServiceExt::<http::Request<axum::body::Body>>::ready(&mut router);
                let response = ready.await.unwrap().call(request).await.unwrap();
                let body = http_body_util::BodyExt::collect(response.into_body())
                    .await
                    .expect("the whole body");
                sum += body.to_bytes().len() as u64;
            }
        }
        "reqwest_build" | "reqwest_build_time_left" => {
            use deadline_tokio::reqwest::DeadlineRequest;
            let client = reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a client");
            let time_left = name == "reqwest_build_time_left";
            scope_timeout(BUDGET, async {
                for _ in 0..n {
                    let builder = client.get("http://127.0.0.1:9/price");
                    let builder = if time_left {
                        builder.time_left().expect("time is left")
                    } else {
                        builder.timeout(TIMEOUT)
                    };
                    let request = builder.build().expect("a valid request");
                    sum += request.headers().len() as u64;
                }
            })
            .await
            .expect("inside its scope");
        }
        "axum_request_deadline_layer_around" => {
            // As `axum::serve` serves the wrapped router.
            let mut service =
                deadline_tokio::layer::AxumService::from(apps::deadline_layer_around());
            for _ in 0..n {
                let request = http::Request::get("/")
                    .header("x-deadline-ms", "1000")
                    .body(axum::body::Body::empty())
                    .expect("a valid request");
                let ready = ServiceExt::<http::Request<axum::body::Body>>::ready(&mut service);
                let response = ready.await.unwrap().call(request).await.unwrap();
                let body = http_body_util::BodyExt::collect(response.into_body())
                    .await
                    .expect("the whole body");
                sum += body.to_bytes().len() as u64;
            }
        }
        _ => return None,
    }
    Some(sum)
}

/// A current-thread tokio runtime with time, as the scenarios run on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

/// The sizes of the futures the call scenarios await, in bytes, by scenario (for a future
/// that is ready at once, as in the scenarios). Call it inside a tokio runtime with time.
pub fn future_sizes() -> Vec<(&'static str, usize)> {
    let tokio = tokio::time::timeout(TIMEOUT, answer());
    let limits = call_timeout(&PLAIN, Deadline::NEVER, ms(0), deadline_core::Instant::ZERO)
        .limits()
        .expect("a call under a deadline that never comes is made");
    let within = within(limits, answer());
    let driven = drive(
        call(&PLAIN, ms(0)),
        SplitMix64::new(1),
        |_: &()| Outcome::Failed,
        |_| answer(),
    );
    let only = Driver::deadline_only(call(&PLAIN, ms(0)), TokioTimer)
        .run(|_: &()| Outcome::Failed, |_| answer());
    let only_scoped = Driver::deadline_only(call(&PLAIN, ms(0)), TokioTimer)
        .run_scoped::<Tokio, _, _, _, _, _>(|_: &()| Outcome::Failed, |_| answer());
    let run = core::future::IntoFuture::into_future(PLAIN_DEP.run(|_| answer()));
    let run_only = core::future::IntoFuture::into_future(ONLY_DEP.run(|_| answer()));
    // The driver's own future, around an attempt future of no size (`Pending` holds nothing),
    // without the attempt's scope (whose deadline the future would carry).
    let zst = |_: deadline_core::call::Limits| core::future::pending::<Result<u64, ()>>();
    let only_zst =
        Driver::deadline_only(call(&PLAIN, ms(0)), TokioTimer).run(|_: &()| Outcome::Failed, zst);
    let full_zst = Driver::new(call(&PLAIN, ms(0)), TokioTimer, SplitMix64::new(1))
        .run(|_: &()| Outcome::Failed, zst);
    vec![
        ("tokio_timeout", core::mem::size_of_val(&tokio)),
        ("dependency_run", core::mem::size_of_val(&run)),
        (
            "dependency_run_deadline_only",
            core::mem::size_of_val(&run_only),
        ),
        ("deadline_drive_only", core::mem::size_of_val(&only)),
        (
            "deadline_drive_only_scoped",
            core::mem::size_of_val(&only_scoped),
        ),
        ("deadline_within", core::mem::size_of_val(&within)),
        ("deadline_drive", core::mem::size_of_val(&driven)),
        (
            "driver_deadline_only_zst",
            core::mem::size_of_val(&only_zst),
        ),
        ("driver_full_zst", core::mem::size_of_val(&full_zst)),
    ]
}
