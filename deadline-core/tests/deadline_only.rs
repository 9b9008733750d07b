//! The deadline-only driver: one attempt with its timeout from the time left, and nothing
//! else. It ends every call the way the full driver ends a call whose policy has no retries,
//! hedges, budget or breaker; with them configured, it still makes one attempt and leaves
//! the breaker and the budget alone.

use std::time::Duration;

use deadline_core::CallError;
use deadline_core::breaker::{BreakerConfig, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp};
use deadline_core::drive::{Called, Driver, Report};
use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Instant, Outcome, Policy, Timer, ms};

/// How the simulated dependency answers: after `latency`, with `answer`.
#[derive(Clone, Copy)]
struct Dep {
    latency: Duration,
    answer: Result<u32, &'static str>,
}

fn run_both(
    policy: &Policy,
    budget: Duration,
    reserve: Duration,
    dep: Dep,
) -> [Called<u32, &'static str>; 2] {
    let full = {
        let timer = ManualTimer::new();
        let t = &timer;
        let call = Call::new(policy, Deadline::after(t.now(), budget), reserve);
        timer
            .run(Driver::new(call, t, SplitMix64::new(1)).run(
                |_| Outcome::Failed,
                |_| async move {
                    t.sleep_until(t.now() + dep.latency).await;
                    dep.answer
                },
            ))
            .unwrap()
    };
    let only = {
        let timer = ManualTimer::new();
        let t = &timer;
        let call = Call::new(policy, Deadline::after(t.now(), budget), reserve);
        timer
            .run(Driver::deadline_only(call, t).run(
                |_| Outcome::Failed,
                |_| async move {
                    t.sleep_until(t.now() + dep.latency).await;
                    dep.answer
                },
            ))
            .unwrap()
    };
    [full, only]
}

/// The report without why the call gave up (the deadline-only driver always says
/// `Exhausted`: its one attempt is used).
fn without_reason(mut report: Report) -> Report {
    report.gave_up = None;
    report
}

#[test]
fn without_retries_or_hedges_it_ends_every_call_as_the_full_driver_does() {
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
    let cases = [
        (
            &b,
            ms(200),
            ms(20),
            Dep {
                latency: ms(105),
                answer: Ok(42),
            },
        ),
        (
            &b,
            ms(200),
            ms(20),
            Dep {
                latency: ms(500),
                answer: Ok(42),
            },
        ),
        (
            &b,
            ms(200),
            ms(20),
            Dep {
                latency: ms(10),
                answer: Err("503"),
            },
        ),
        (
            &b,
            ms(40),
            ms(20),
            Dep {
                latency: ms(1),
                answer: Ok(1),
            },
        ),
        (
            &c,
            ms(44),
            ms(20),
            Dep {
                latency: ms(1),
                answer: Ok(1),
            },
        ),
        (
            &b,
            ms(0),
            ms(0),
            Dep {
                latency: ms(1),
                answer: Ok(1),
            },
        ),
    ];
    for (policy, budget, reserve, dep) in cases {
        let [full, only] = run_both(policy, budget, reserve, dep);
        assert_eq!(full.result, only.result, "{}", policy.name());
        assert_eq!(
            without_reason(full.report),
            without_reason(only.report),
            "{}",
            policy.name()
        );
        if only.report.attempts > 0 && only.result.is_err() {
            assert_eq!(only.report.gave_up, Some(GiveUp::Exhausted));
        }
    }
}

#[test]
fn with_retries_hedges_a_budget_and_a_breaker_it_makes_one_attempt_and_touches_neither() {
    static BUDGET: RetryBudget = RetryBudget::percent(10).with_floor_per_sec(0);
    static BREAKER: CircuitBreaker =
        CircuitBreaker::new(BreakerConfig::DEFAULT.with_consecutive_failures(1));
    let armed = Policy::required("armed")
        .idempotent()
        .with_cap(ms(50))
        .with_floor(ms(1))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(1)))
        .with_hedge(HedgePolicy::new(ms(5), 2));
    // Open the breaker: one failure is enough.
    let now = Instant::ZERO;
    let permit = BREAKER.try_acquire(now).unwrap();
    BREAKER.record(permit, deadline_core::breaker::BreakerOutcome::Failure, now);
    assert!(BREAKER.try_acquire(now).is_err(), "the breaker is open");

    let timer = ManualTimer::new();
    let t = &timer;
    let mut started = 0;
    let call = Call::new(&armed, Deadline::after(t.now(), ms(1_000)), ms(0))
        .with_budget(&BUDGET)
        .with_breaker(&BREAKER);
    let called: Called<(), &str> = timer
        .run(Driver::deadline_only(call, t).run(
            |_| Outcome::Failed,
            |_| {
                started += 1;
                async move {
                    t.sleep_until(t.now() + ms(20)).await;
                    Err("503")
                }
            },
        ))
        .unwrap();
    // One attempt, no hedge after 5 ms, no retry, though the breaker is open.
    assert_eq!(started, 1);
    assert_eq!(called.result, Err(CallError::Attempt("503")));
    assert_eq!(
        (
            called.report.attempts,
            called.report.hedges,
            called.report.retries
        ),
        (1, 0, 0)
    );
    assert_eq!(called.report.breaker_rejections, 0);
    // Nothing was deposited in the budget.
    assert_eq!(BUDGET.balance_milli(), 0);
}

/// An attempt future of 1 KiB, to see how many of them a driver's future keeps room for.
async fn big_attempt(_limits: deadline_core::call::Limits, timer: &ManualTimer) -> Result<u32, ()> {
    let buffer = [7u8; 1024];
    timer.sleep_until(timer.now() + ms(1)).await;
    Ok(u32::from(core::hint::black_box(buffer)[1023]))
}

#[test]
fn a_deadline_only_future_keeps_room_for_one_attempt_and_a_full_one_for_four() {
    let policy = Policy::required("B").with_cap(ms(110));
    let timer = ManualTimer::new();
    let t = &timer;
    let call = || Call::new(&policy, Deadline::after(Instant::ZERO, ms(200)), ms(0));
    let only = Driver::deadline_only(call(), t).run(|_| Outcome::Failed, |l| big_attempt(l, t));
    let full =
        Driver::new(call(), t, SplitMix64::new(1)).run(|_| Outcome::Failed, |l| big_attempt(l, t));
    let (only, full) = (size_of_val(&only), size_of_val(&full));
    // One 1 KiB slot and the machine, against four slots: every slot beyond the first is at
    // least 1 KiB more.
    assert!(
        (1024..2048).contains(&only),
        "deadline-only future: {only} B"
    );
    assert!(
        full >= only + 3 * 1024,
        "full future: {full} B, deadline-only: {only} B"
    );
    // And the deadline-only one runs: its one attempt answers.
    let called = timer
        .run(Driver::deadline_only(call(), t).run(|_| Outcome::Failed, |l| big_attempt(l, t)))
        .unwrap();
    assert_eq!(called.result, Ok(7));
}

#[test]
fn a_deadline_only_dependency_records_latencies_but_keeps_no_live_hedge_delay() {
    use deadline_core::Dependency;
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::policy::Quantile;
    use deadline_core::virtual_time::ManualRuntime;

    // The same policy, hedging at its live p95, in both modes (the deadline-only one with its
    // hedges set to 0: it would never send them).
    const HEDGED: Policy<'static> = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_hedge_at(Quantile::P95, ms(60));
    static FULL: Dependency<ManualRuntime> = Dependency::new(HEDGED);
    static ONLY: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(HEDGED.with_hedges(0));
    for _ in 0..Dependency::<ManualRuntime>::MIN_LIVE_SAMPLES {
        FULL.record_latency(ms(20));
        ONLY.record_latency(ms(20));
    }
    // Both histograms hold the latencies; only the full dependency reads a hedge delay from
    // them (its calls hedge; the deadline-only one's never do).
    assert_eq!(ONLY.latency().count(), FULL.latency().count());
    assert_eq!(FULL.live_hedge_delay(), FULL.latency().p95());
    assert_eq!(ONLY.live_hedge_delay(), None);
    // Its calls record their latency too, and make one attempt.
    let mut attempts = 0;
    let answer = ManualRuntime::block_on(async {
        ONLY.run(|_| {
            attempts += 1;
            async { Ok::<_, ()>(()) }
        })
        .await
    });
    assert_eq!((answer, attempts), (Ok(Ok(())), 1));
    assert_eq!(ONLY.latency().count(), FULL.latency().count() + 1);
    assert_eq!(ONLY.live_hedge_delay(), None);
}
