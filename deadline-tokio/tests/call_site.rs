//! The one-line call to a `Dependency` on tokio: its defaults, its scope, its recording.
//! Paused time throughout: every figure is exact.

use std::sync::Mutex;
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::drive::DeadlineOnly;
use deadline_core::policy::{Backoff, Jitter};
use deadline_core::{Error, Outcome, Policy, ms};
use deadline_tokio::{Dependency, Steps, remaining, scope_timeout};
use tokio::time::Instant;

/// An error of the dependency's own, matched on by the classifier.
#[derive(Debug, PartialEq, Eq)]
enum Upstream {
    Busy,
    BadRequest,
}

#[tokio::test(start_paused = true)]
async fn the_call_is_one_line_and_question_mark_works() {
    static PRICING: Dependency = Dependency::new(
        Policy::required("pricing")
            .with_cap(ms(110))
            .with_floor(ms(30)),
    );

    async fn handler() -> Result<u32, CallError<Upstream>> {
        let price = PRICING
            .run(|_| async {
                tokio::time::sleep(ms(30)).await;
                Ok(42)
            })
            .reserve(ms(20))
            .await?;
        Ok(price + 1)
    }
    assert_eq!(
        scope_timeout(ms(200), handler())
            .await
            .expect("inside its scope"),
        Ok(43)
    );
    let counts = PRICING.counters().snapshot();
    assert_eq!((counts.calls, counts.successes), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn the_attempt_function_runs_inside_the_attempts_scope() {
    static B: Dependency =
        Dependency::new(Policy::required("B").with_cap(ms(110)).with_floor(ms(30)));
    let seen = scope_timeout(ms(200), async {
        B.run(|limits| {
            // Synchronous code in the attempt function: the attempt's deadline, not the
            // request's 200 ms.
            let before = remaining();
            async move { Ok::<_, ()>((before, remaining(), limits.timeout())) }
        })
        .reserve(ms(20))
        .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(seen, Ok((Some(ms(110)), Some(ms(110)), ms(110))));
}

#[tokio::test(start_paused = true)]
async fn the_default_classifier_retries_every_error_of_an_idempotent_call() {
    static FLAKY: Dependency = Dependency::new(
        Policy::required("flaky")
            .idempotent()
            .with_cap(ms(50))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(5))),
    );
    let tries = Mutex::new(0);
    let answer = scope_timeout(ms(500), async {
        FLAKY
            .run(|_| {
                let mut n = tries.lock().unwrap();
                *n += 1;
                let n = *n;
                async move { if n < 3 { Err(Upstream::Busy) } else { Ok(n) } }
            })
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(answer, Ok(3));
    assert_eq!(FLAKY.counters().snapshot().retries, 2);
}

/// A dependency that is not idempotent is retried only after a refusal or a pushback, which
/// the default classifier never reports: its retries would never start. Awaited without a
/// classifier, such a call says so (in a debug build); with one, a refused connection is
/// retried.
const ORDERS_POLICY: Policy = Policy::required("orders")
    .not_idempotent()
    .with_cap(ms(50))
    .with_retries(2)
    .with_backoff(Backoff::constant(ms(5)));
static ORDERS: Dependency = Dependency::new(ORDERS_POLICY);

#[cfg(debug_assertions)]
#[tokio::test(start_paused = true)]
#[should_panic(expected = "the call to `orders` would never be retried")]
async fn a_call_whose_retries_could_never_start_says_so() {
    let _ = scope_timeout(ms(500), async {
        ORDERS.run(|_| async { Err::<(), _>(Upstream::Busy) }).await
    })
    .await;
}

/// A deadline-only dependency makes one attempt per call: given the same policy with its
/// retries set to 0 (as it must be: one with retries is refused where it is made), awaited
/// without a classifier, it is one attempt and no complaint.
#[tokio::test(start_paused = true)]
async fn a_deadline_only_call_with_the_same_policy_makes_its_one_attempt() {
    static ORDERS_ONCE: Dependency<DeadlineOnly> =
        Dependency::deadline_only(ORDERS_POLICY.with_retries(0));
    let tries = Mutex::new(0);
    let answer = scope_timeout(ms(500), async {
        ORDERS_ONCE
            .run(|_| {
                *tries.lock().unwrap() += 1;
                async { Err::<(), _>(Upstream::Busy) }
            })
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(answer, Err(CallError::Attempt(Upstream::Busy)));
    assert_eq!(*tries.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_is_not_idempotent_is_retried_after_what_its_classifier_calls_refused() {
    let tries = Mutex::new(0);
    let answer = scope_timeout(ms(500), async {
        ORDERS
            .run(|_| {
                let mut n = tries.lock().unwrap();
                *n += 1;
                let n = *n;
                async move { if n < 2 { Err(Upstream::Busy) } else { Ok(n) } }
            })
            .classify(|e| match e {
                Upstream::Busy => Outcome::Refused,
                Upstream::BadRequest => Outcome::Fatal,
            })
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(answer, Ok(2));
}

#[tokio::test(start_paused = true)]
async fn an_unannotated_classifier_closure_compiles_and_decides() {
    static PICKY: Dependency = Dependency::new(
        Policy::required("picky")
            .idempotent()
            .with_cap(ms(50))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(5))),
    );
    let tries = Mutex::new(0);
    let answer = scope_timeout(ms(500), async {
        PICKY
            .run(|_| {
                *tries.lock().unwrap() += 1;
                async { Err::<(), _>(Upstream::BadRequest) }
            })
            // No annotation on `e`: its type comes from the attempt's error.
            .classify(|e| match e {
                Upstream::Busy => Outcome::Failed,
                Upstream::BadRequest => Outcome::Fatal,
            })
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(answer, Err(CallError::Attempt(Upstream::BadRequest)));
    assert_eq!(*tries.lock().unwrap(), 1, "a fatal error is not retried");
}

/// The backoff a call waited before its one retry, measured between the first attempt's
/// failure and the retry's start.
async fn backoff_of_one_call(dep: &'static Dependency) -> Duration {
    let failed_at = Mutex::new(None);
    let waited = Mutex::new(None);
    scope_timeout(ms(1_000), async {
        dep.run(|_| {
            let now = Instant::now();
            let mut failed = failed_at.lock().unwrap();
            match *failed {
                None => *failed = Some(now),
                Some(at) => *waited.lock().unwrap() = Some(now - at),
            }
            let first = waited.lock().unwrap().is_none();
            async move { if first { Err(()) } else { Ok(()) } }
        })
        .await
        .unwrap();
    })
    .await
    .expect("inside its scope");
    waited.into_inner().unwrap().expect("the call was retried")
}

#[tokio::test(start_paused = true)]
async fn calls_with_the_default_random_source_draw_different_jitter() {
    // Full jitter under a 400 ms ceiling. The draw is in microseconds, but tokio's timer fires
    // on whole milliseconds (rounding up), so a backoff waits one of 400 lengths, each as
    // likely (a wait of 0 takes a draw of exactly 0): two calls wait the same one time in
    // 400. Eight calls that all waited the same would be a coincidence of one in 400^7 (about
    // 10^18).
    static JITTERED: Dependency = Dependency::new(
        Policy::required("jittered")
            .idempotent()
            .with_cap(ms(100))
            .with_retries(1)
            .with_backoff(
                Backoff::exponential(ms(400))
                    .with_max(ms(400))
                    .with_jitter(Jitter::Full),
            ),
    );
    let mut waits = Vec::new();
    for _ in 0..8 {
        waits.push(backoff_of_one_call(&JITTERED).await);
    }
    assert!(waits.iter().all(|w| *w <= ms(400)), "{waits:?}");
    waits.sort();
    waits.dedup();
    assert!(
        waits.len() > 1,
        "the default source drew the same jitter eight times: {waits:?}"
    );
}

/// When the hedge of one call went out, after the first attempt started (the first attempt
/// never answers; the hedge answers at once).
async fn hedge_sent_after(dep: &'static Dependency) -> Duration {
    let started = Mutex::new(Vec::new());
    scope_timeout(ms(1_000), async {
        dep.run(|_| {
            let mut started = started.lock().unwrap();
            started.push(Instant::now());
            let first = started.len() == 1;
            async move {
                if first {
                    std::future::pending::<()>().await;
                }
                Ok::<_, ()>(())
            }
        })
        .await
        .unwrap();
    })
    .await
    .expect("inside its scope");
    let started = started.into_inner().unwrap();
    started[1] - started[0]
}

#[tokio::test(start_paused = true)]
async fn the_hedge_delay_follows_a_histogram_that_shifts() {
    static LIVE: Dependency = Dependency::new(
        Policy::required("live")
            .idempotent()
            .with_cap(ms(500))
            .with_hedge_at_p95(ms(40)),
    );
    // Too few samples: the fallback.
    assert_eq!(hedge_sent_after(&LIVE).await, ms(40));
    // The dependency answers in about 10 ms: the hedge goes out at the histogram's p95.
    for _ in 0..200 {
        LIVE.record_latency(ms(10));
    }
    let p95 = LIVE.live_hedge_delay().unwrap();
    assert!(p95 >= ms(10) && p95 < ms(11), "{p95:?}");
    assert_at_tick(hedge_sent_after(&LIVE).await, p95);
    // It slows down to about 80 ms: the p95 follows, and so does the hedge.
    for _ in 0..4_000 {
        LIVE.record_latency(ms(80));
    }
    let p95 = LIVE.live_hedge_delay().unwrap();
    assert!(p95 >= ms(80) && p95 < ms(83), "{p95:?}");
    assert_at_tick(hedge_sent_after(&LIVE).await, p95);
    // It recovers to about 10 ms. The histogram is halved every 4 096 latencies, so the 4 000
    // slow ones fade: after 24 576 fast ones the p95 is back near 10 ms (kept forever, the
    // slow ones would still be 14% of the sample, and the p95 would stay at 80 ms).
    for _ in 0..24_576 {
        LIVE.record_latency(ms(10));
    }
    let p95 = LIVE.live_hedge_delay().unwrap();
    assert!(p95 >= ms(10) && p95 < ms(11), "{p95:?}");
    assert_at_tick(hedge_sent_after(&LIVE).await, p95);
}

/// The last hedge setting wins: a fixed delay set after a live quantile replaces it (and a
/// live quantile set after a fixed delay replaces that), so a delay from configuration set
/// over a default in code is the delay the hedges go out at.
#[tokio::test(start_paused = true)]
async fn a_fixed_hedge_delay_set_after_a_live_one_replaces_it() {
    static FIXED_LAST: Dependency = Dependency::new(
        Policy::required("fixed last")
            .idempotent()
            .with_cap(ms(500))
            .with_hedge_at_p95(ms(60))
            .with_hedge_after(ms(40)),
    );
    static LIVE_LAST: Dependency = Dependency::new(
        Policy::required("live last")
            .idempotent()
            .with_cap(ms(500))
            .with_hedge_after(ms(40))
            .with_hedge_at_p95(ms(60)),
    );
    for dep in [&FIXED_LAST, &LIVE_LAST] {
        for _ in 0..200 {
            dep.record_latency(ms(80));
        }
    }
    assert_eq!(FIXED_LAST.policy().hedge().unwrap().live(), None);
    assert_eq!(hedge_sent_after(&FIXED_LAST).await, ms(40));
    let p95 = LIVE_LAST.live_hedge_delay().unwrap();
    assert!(p95 >= ms(80) && p95 < ms(83), "{p95:?}");
    assert_at_tick(hedge_sent_after(&LIVE_LAST).await, p95);
}

/// `sent` is `due`, on tokio's timer: its sleeps end on whole milliseconds, the first at or
/// after the instant asked for.
fn assert_at_tick(sent: Duration, due: Duration) {
    let tick = Duration::from_millis(u64::try_from(due.as_micros().div_ceil(1_000)).unwrap());
    assert!(
        sent == due || sent == tick,
        "hedge sent after {sent:?}, due after {due:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_plan_computes_each_reserve() {
    static A: Dependency =
        Dependency::new(Policy::required("A").with_cap(ms(50)).with_floor(ms(10)));
    static B: Dependency =
        Dependency::new(Policy::required("B").with_cap(ms(110)).with_floor(ms(30)));
    static C: Dependency =
        Dependency::new(Policy::optional("C").with_cap(ms(60)).with_floor(ms(25)));
    static CHECKOUT: Steps<3> = Steps::new([&A, &B, &C]).own_work(ms(20));

    /// A dependency that answers after `latency` with the timeout it was given.
    async fn answer(latency: u64, timeout: Duration) -> Result<Duration, ()> {
        tokio::time::sleep(ms(latency)).await;
        Ok(timeout)
    }

    // The checkout example's slow case: A 48 ms, B 108 ms, so C has 24 ms < 25 ms.
    let (a, b, c) = scope_timeout(ms(200), async {
        let a = A.run(|l| answer(48, l.timeout())).in_plan(&CHECKOUT).await;
        let b = B.run(|l| answer(108, l.timeout())).in_plan(&CHECKOUT).await;
        let c = C.run(|l| answer(25, l.timeout())).in_plan(&CHECKOUT).await;
        (a, b, c)
    })
    .await
    .expect("inside its scope");
    assert_eq!(a, Ok(ms(50)));
    assert_eq!(b, Ok(ms(110)));
    assert!(matches!(c, Err(CallError::Skipped(s)) if s.available() == ms(24)));
    assert_eq!(C.counters().snapshot().skipped, 1);
}

#[tokio::test(start_paused = true)]
async fn a_spent_request_does_not_call() {
    static D: Dependency =
        Dependency::new(Policy::required("D").with_cap(ms(50)).with_floor(ms(10)));
    let called = Mutex::new(false);
    let answer = scope_timeout(ms(5), async {
        D.run(|_| {
            *called.lock().unwrap() = true;
            async { Ok::<_, ()>(()) }
        })
        .await
    })
    .await
    .expect("inside its scope");
    assert!(
        matches!(
            answer,
            Err(CallError::Library(Error::InsufficientTime { .. }))
        ),
        "{answer:?}"
    );
    assert!(!*called.lock().unwrap());
}

#[tokio::test(start_paused = true)]
async fn the_report_is_there_when_asked_for() {
    static R: Dependency = Dependency::new(
        Policy::required("R")
            .idempotent()
            .with_cap(ms(20))
            .with_retries(1)
            .with_backoff(Backoff::constant(ms(5))),
    );
    let called = scope_timeout(ms(200), async {
        R.run(|_| std::future::pending::<Result<(), ()>>())
            .report()
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(20) }))
    );
    assert_eq!((called.report.attempts, called.report.timeouts), (2, 2));
    // Both timeouts went to the histogram, at their timeouts.
    assert_eq!(R.latency().count(), 2);
}

/// An attempt that ends with an error saying it ran out of time (a classifier's
/// `Outcome::TimedOut`, as for a downstream's 504; or any failure at its timeout, as when a
/// client's own timer set to the attempt's limit fires first) is that attempt's timeout:
/// counted, and recorded in the dependency's histogram at the time it ran, as when the
/// driver cuts an attempt off. Virtual time: the clock moves only when every task waits.
#[tokio::test(start_paused = true)]
async fn a_timeout_the_attempt_reports_itself_goes_to_the_histogram() {
    static TOLD: Dependency = Dependency::new(Policy::required("told").with_cap(ms(100)));
    static OWN_TIMER: Dependency = Dependency::new(Policy::required("own").with_cap(ms(100)));

    let called = scope_timeout(ms(500), async {
        TOLD.run(|_| async {
            tokio::time::sleep(ms(30)).await;
            Err::<(), _>("504 from below")
        })
        .classify(|_| Outcome::TimedOut)
        .report()
        .await
    })
    .await
    .expect("inside its scope");
    assert_eq!((called.report.attempts, called.report.timeouts), (1, 1));
    assert_eq!(TOLD.latency().count(), 1);
    // At the 30 ms it ran, not at its 100 ms timeout.
    let (low, high) = (TOLD.latency().min().unwrap(), TOLD.latency().max().unwrap());
    assert!(
        low <= ms(30) && ms(30) <= high && high < ms(40),
        "{low:?}..{high:?}"
    );

    // An error at the attempt's limit, from a timer of the attempt's own.
    let called = scope_timeout(ms(500), async {
        OWN_TIMER
            .run(|limits| async move {
                tokio::time::sleep(limits.timeout()).await;
                Err::<(), _>("the client's own timeout")
            })
            .report()
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!((called.report.attempts, called.report.timeouts), (1, 1));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(100) }))
    );
    assert_eq!(OWN_TIMER.latency().count(), 1);
    assert!(OWN_TIMER.latency().max().unwrap() >= ms(100));
}

/// `with_hedges(0)` turns hedging off, and a hedge delay set after it (the number read from
/// configuration, the delay in code) keeps it off: no copy is sent for a slow call.
#[tokio::test(start_paused = true)]
async fn no_hedges_stay_off_whatever_order_the_settings_come_in() {
    const HEDGES: u32 = 0;
    static AFTER: Dependency = Dependency::new(
        Policy::required("after")
            .idempotent()
            .with_cap(ms(100))
            .with_hedges(HEDGES)
            .with_hedge_after(ms(10)),
    );
    static BEFORE: Dependency = Dependency::new(
        Policy::required("before")
            .idempotent()
            .with_cap(ms(100))
            .with_hedge_after(ms(10))
            .with_hedges(HEDGES),
    );
    for dep in [&AFTER, &BEFORE] {
        assert_eq!(dep.policy().hedge(), None);
        let called = scope_timeout(ms(500), async {
            dep.run(|_| async {
                tokio::time::sleep(ms(50)).await;
                Ok::<_, ()>(())
            })
            .report()
            .await
        })
        .await
        .expect("inside its scope");
        assert_eq!(called.result, Ok(()));
        assert_eq!((called.report.attempts, called.report.hedges), (1, 0));
    }
}

/// A deadline-only dependency: the same one-line call, one attempt per call, its timeout from
/// the time left, recorded like any other.
#[tokio::test(start_paused = true)]
async fn a_deadline_only_dependency_makes_one_attempt_in_the_time_left() {
    // The same cap and floor as the full dependency below, without its retries (which a
    // deadline-only dependency refuses where it is made: it would never make them).
    static ONLY: Dependency<DeadlineOnly> = Dependency::deadline_only(
        Policy::required("only")
            .idempotent()
            .with_cap(ms(110))
            .with_floor(ms(30)),
    );
    static FULL: Dependency = Dependency::new(
        Policy::required("full")
            .idempotent()
            .with_cap(ms(110))
            .with_floor(ms(30))
            .with_retries(2),
    );
    static PLAN: Steps<1, DeadlineOnly> = Steps::new([&ONLY]).own_work(ms(20));

    let attempts = Mutex::new(Vec::new());
    let slow = |limits: deadline_core::call::Limits| {
        attempts.lock().unwrap().push(limits.timeout());
        async {
            tokio::time::sleep(ms(150)).await;
            Ok::<_, Upstream>(1)
        }
    };
    let start = Instant::now();
    let only = scope_timeout(ms(400), async {
        ONLY.run(slow).in_plan(&PLAN).report().await
    })
    .await
    .expect("inside its scope");
    assert_eq!(
        only.result,
        Err(CallError::Library(Error::Timeout { after: ms(110) }))
    );
    assert_eq!((only.report.attempts, only.report.timeouts), (1, 1));
    assert_eq!(start.elapsed(), ms(110));
    assert_eq!(*attempts.lock().unwrap(), [ms(110)]);
    let counts = ONLY.counters().snapshot();
    assert_eq!((counts.calls, counts.timeouts, counts.retries), (1, 1, 0));
    assert!(ONLY.retry_budget().is_none() && ONLY.circuit_breaker().is_none());

    // The policy with retries, on a full dependency, retries.
    attempts.lock().unwrap().clear();
    let full = scope_timeout(ms(400), async {
        FULL.run(slow).reserve(ms(20)).report().await
    })
    .await
    .expect("inside its scope");
    assert!(full.report.attempts > 1, "{:?}", full.report);

    // An answer in time is the call's.
    let fast = scope_timeout(ms(200), async {
        ONLY.run(|limits| async move { Ok::<_, Upstream>(limits.timeout()) })
            .reserve(ms(20))
            .await
    })
    .await
    .expect("inside its scope");
    assert_eq!(fast, Ok(ms(110)));
}
