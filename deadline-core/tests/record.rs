//! A driven call's result and report, added to a dependency's counters.
#![cfg(feature = "drive")]

use deadline_core::CallError;
use deadline_core::Outcome;
use deadline_core::call::{Call, GiveUp, Limits};
use deadline_core::drive::{Called, Driver};
use deadline_core::observe::{CounterSnapshot, Counters};
use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Error, Instant, Policy, Timer, ms};

fn failed(_: &()) -> Outcome {
    Outcome::Failed
}

#[test]
fn an_optional_call_under_its_floor_counts_as_skipped() {
    let timer = ManualTimer::new();
    let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
    // 44 ms left, 20 ms reserved: 24 ms < 25 ms.
    let call = Call::new(&c, Deadline::after(Instant::ZERO, ms(44)), ms(20));
    let called = timer
        .run(
            Driver::new(call, &timer, SplitMix64::new(3))
                .run(failed, |_: Limits| async { Ok::<_, ()>(()) }),
        )
        .unwrap();
    let counters = Counters::new();
    called.record(&counters);
    let s = counters.snapshot();
    assert_eq!((s.calls, s.skipped, s.successes), (1, 1, 0));
    assert_eq!(s.deadline_exceeded, 0);
}

#[test]
fn a_hedge_that_wins_counts_as_hedge_and_hedge_win() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(30))
        .with_hedge(HedgePolicy::new(ms(40), 1));
    let call = Call::new(&b, Deadline::after(Instant::ZERO, ms(200)), ms(0));
    let mut sent = 0;
    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(3)).run(failed, |_: Limits| {
                sent += 1;
                // The first attempt takes 140 ms; the hedge, sent at 40 ms, answers in 20.
                let latency = if sent == 1 { ms(140) } else { ms(20) };
                let at = t.now() + latency;
                async move {
                    t.sleep_until(at).await;
                    Ok::<_, ()>(sent)
                }
            }),
        )
        .unwrap();
    assert_eq!(called.result, Ok(2));
    let counters = Counters::new();
    called.record(&counters);
    let s = counters.snapshot();
    assert_eq!((s.calls, s.successes, s.hedges, s.hedge_wins), (1, 1, 1, 1));
    assert_eq!((s.timeouts, s.retries, s.skipped), (0, 0, 0));
}

/// Drives one call to `policy` with `budget` left, each attempt failing (`Err(())`) after
/// `fail_after`, or never answering when it is `None`; returns the call and its counters.
fn failing(
    policy: &Policy,
    budget: u64,
    fail_after: Option<u64>,
) -> (Called<(), ()>, CounterSnapshot) {
    let timer = ManualTimer::new();
    let t = &timer;
    let call = Call::new(policy, Deadline::after(Instant::ZERO, ms(budget)), ms(0));
    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(4)).run(failed, |_: Limits| {
                let at = fail_after.map(|f| t.now() + ms(f));
                async move {
                    match at {
                        Some(at) => t.sleep_until(at).await,
                        None => core::future::pending().await,
                    }
                    Err(())
                }
            }),
        )
        .unwrap();
    let counters = Counters::new();
    called.record(&counters);
    (called, counters.snapshot())
}

#[test]
fn timeouts_with_time_left_are_not_deadline_exceeded() {
    // Two attempts of 100 ms with 500 ms left: both time out, and the call gives up at
    // 210 ms with its attempts exhausted. The dependency is too slow for its cap; the
    // deadline had time to spare.
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(10)));
    let (called, s) = failing(&b, 500, None);
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(100) }))
    );
    assert_eq!(called.report.gave_up, Some(GiveUp::Exhausted));
    assert_eq!((s.calls, s.timeouts, s.retries), (1, 2, 1));
    assert_eq!(s.deadline_exceeded, 0);
    assert!(!called.is_deadline_exceeded());

    // The same with a call that is not idempotent: no retry after a timeout that may have
    // run, and still no deadline exceeded.
    let pay = Policy::required("pay")
        .not_idempotent()
        .with_cap(ms(100))
        .with_floor(ms(10));
    let (called, s) = failing(&pay, 500, None);
    assert_eq!(called.report.gave_up, Some(GiveUp::MayHaveRun));
    assert_eq!((s.timeouts, s.deadline_exceeded), (1, 0));
}

#[test]
fn a_timeout_that_runs_into_the_deadline_is_deadline_exceeded() {
    // 80 ms left and a 100 ms cap: the attempt's timeout is the time left.
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(10)));
    let (called, s) = failing(&b, 80, None);
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::DeadlineExceeded))
    );
    assert_eq!((s.calls, s.timeouts, s.deadline_exceeded), (1, 1, 1));
}

#[test]
fn no_time_left_for_a_retry_is_deadline_exceeded() {
    // The attempt fails at 40 ms of 100; the 70 ms backoff would end past the deadline. The
    // call ends on the attempt's own error, but it ended for want of time.
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(70)));
    let (called, s) = failing(&b, 100, Some(40));
    assert_eq!(called.result, Err(CallError::Attempt(())));
    assert!(matches!(
        called.report.gave_up,
        Some(GiveUp::BackoffPastDeadline { .. })
    ));
    assert_eq!((s.timeouts, s.deadline_exceeded), (0, 1));

    // With a short enough backoff the retry fits; once the attempts are used up, the call
    // ends with time left and the deadline is not to blame.
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5)));
    let (called, s) = failing(&b, 100, Some(40));
    assert_eq!(called.report.gave_up, Some(GiveUp::Exhausted));
    assert_eq!((s.retries, s.deadline_exceeded), (1, 0));
}

#[test]
fn a_required_call_with_time_left_but_all_of_it_reserved_is_insufficient_time() {
    // 180 ms left, 180 ms reserved: time is left, so the deadline is not exceeded; the call
    // just cannot have any of it.
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let deadline = Deadline::after(Instant::ZERO, ms(200));
    let now = Instant::from_millis(20);
    let call = Call::new(&b, deadline, ms(180));
    let shortfall = match call.decide(now) {
        deadline_core::call::Decision::Fail(s) => s,
        other => panic!("B must fail uncalled: {other:?}"),
    };
    assert_eq!((shortfall.left(), shortfall.available()), (ms(180), ms(0)));
    let insufficient = Error::InsufficientTime {
        available: ms(0),
        floor: ms(30),
    };
    assert_eq!(shortfall.error(), insufficient);

    let timer = ManualTimer::starting_at(now);
    let called = timer
        .run(
            Driver::new(call, &timer, SplitMix64::new(3))
                .run(failed, |_: Limits| async { Ok::<_, ()>(()) }),
        )
        .unwrap();
    assert_eq!(called.result, Err(CallError::Library(insufficient)));
    assert!(!called.is_deadline_exceeded());
    let counters = Counters::new();
    called.record(&counters);
    let s = counters.snapshot();
    assert_eq!((s.calls, s.skipped, s.deadline_exceeded), (1, 1, 0));

    // With nothing left at all, the deadline is exceeded.
    let call = Call::new(&b, deadline, ms(180));
    match call.decide(Instant::from_millis(200)) {
        deadline_core::call::Decision::Fail(s) => {
            assert_eq!(s.left(), ms(0));
            assert_eq!(s.error(), Error::DeadlineExceeded);
        }
        other => panic!("B must fail uncalled: {other:?}"),
    }
}
