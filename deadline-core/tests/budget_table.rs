//! The budget table of one screen (connect and read limits, skip below the floor, backoff out
//! of the budget), as decisions:
//!
//! ```text
//! budget 2000 ms
//!   ├─ call A   2000 left → uses 300
//!   ├─ call B   1700 left → uses 250 (and fails)
//!   ├─ retry    1450 left → waits 200 + calls 400
//!   └─ call C    850 left → under its floor of 1000: not called, fails at once
//! ```
//!
//! Every call's read limit is the time left (no cap, no reserve). Each "left" figure is read
//! from the deadline at the instant the step starts, then compared with the table.

use std::time::Duration;

use deadline_core::call::{Call, Decision, RetryDecision, RetryState};
use deadline_core::policy::{Backoff, Jitter};
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualClock;
use deadline_core::{Clock, Deadline, Error, Outcome, Policy, ms};

const BUDGET: Duration = ms(2_000);
const A_USES: Duration = ms(300);
const B_USES: Duration = ms(250);
const RETRY_WAIT: Duration = ms(200);
const RETRY_USES: Duration = ms(400);

/// The read limit is the time left: no cap below the budget.
fn policies() -> [Policy<'static>; 3] {
    let no_cap = Duration::MAX;
    [
        Policy::required("A").with_cap(no_cap).with_floor(ms(100)),
        // B is retried once, after exactly 200 ms (no jitter).
        Policy::required("B")
            .idempotent()
            .with_cap(no_cap)
            .with_floor(ms(100))
            .with_retries(1)
            .with_backoff(
                Backoff::exponential(RETRY_WAIT)
                    .with_max(RETRY_WAIT)
                    .with_jitter(Jitter::None),
            ),
        Policy::required("C").with_cap(no_cap).with_floor(ms(1_000)),
    ]
}

#[test]
fn the_budget_table_of_one_screen() {
    let [a, b, c] = policies();
    let clock = ManualClock::new();
    let deadline = Deadline::after(clock.now(), BUDGET);
    let reserve = Duration::ZERO;

    // A: 2000 left; its read limit is all of it.
    let left = deadline.remaining(clock.now());
    assert_eq!(left, ms(2_000));
    assert_eq!(
        Call::new(&a, deadline, reserve)
            .decide(clock.now())
            .timeout(),
        Some(left)
    );
    clock.advance(A_USES);

    // B: 1700 left; the first attempt uses 250 and fails.
    let left = deadline.remaining(clock.now());
    assert_eq!(left, ms(1_700));
    let call_b = Call::new(&b, deadline, reserve);
    assert_eq!(call_b.decide(clock.now()).timeout(), Some(left));
    let mut state = RetryState::new();
    clock.advance(B_USES);

    // The retry: 1450 left; it waits 200, then has the rest as its read limit, and uses 400.
    let left = deadline.remaining(clock.now());
    assert_eq!(left, ms(1_450));
    let decision = state.decide(
        &call_b,
        Outcome::Failed,
        &mut SplitMix64::new(0),
        clock.now(),
    );
    let RetryDecision::Retry(retry) = decision else {
        panic!("the retry fits: {decision:?}");
    };
    assert_eq!(retry.wait, RETRY_WAIT);
    assert_eq!(retry.at, clock.now() + RETRY_WAIT);
    assert_eq!(retry.limits.timeout(), deadline.remaining(retry.at));
    clock.set(retry.at);
    clock.advance(RETRY_USES);

    // C: 850 left, under its floor of 1000: not called, and the request fails at once.
    let left = deadline.remaining(clock.now());
    assert_eq!(left, ms(850));
    match Call::new(&c, deadline, reserve).decide(clock.now()) {
        Decision::Fail(shortfall) => {
            assert_eq!(shortfall.available(), left);
            assert_eq!(shortfall.floor(), c.floor());
            assert_eq!(
                shortfall.error(),
                Error::InsufficientTime {
                    available: left,
                    floor: c.floor()
                }
            );
        }
        other => panic!("C must fail uncalled: {other:?}"),
    }
}

/// The same table run by the async driver on virtual time: the attempts really take their
/// time, B's retry is the driver's, and C's attempt function is never invoked.
#[cfg(feature = "drive")]
#[test]
fn the_budget_table_on_the_driver() {
    use std::cell::RefCell;

    use deadline_core::CallError;
    use deadline_core::drive::{Called, Driver};
    use deadline_core::virtual_time::ManualTimer;
    use deadline_core::{Instant, Timer};

    let [a, b, c] = policies();
    let timer = ManualTimer::new();
    let t = &timer;
    let deadline = Deadline::after(t.now(), BUDGET);
    let left_at_starts = RefCell::new(Vec::new());

    let (called_b, called_c) = timer
        .run(async {
            let mut rng = SplitMix64::new(0);
            let step = |uses: Duration, fail_first: bool| {
                let attempts = std::cell::Cell::new(0);
                let left_at_starts = &left_at_starts;
                move |_| {
                    left_at_starts
                        .borrow_mut()
                        .push(deadline.remaining(t.now()));
                    attempts.set(attempts.get() + 1);
                    let uses = if fail_first && attempts.get() == 1 {
                        B_USES
                    } else {
                        uses
                    };
                    let out = if fail_first && attempts.get() == 1 {
                        Err(())
                    } else {
                        Ok(())
                    };
                    let end = t.now() + uses;
                    async move {
                        t.sleep_until(end).await;
                        out
                    }
                }
            };
            let failed = |_: &()| Outcome::Failed;
            let call = |p| Call::new(p, deadline, Duration::ZERO);
            let ra: Called<(), ()> = Driver::new(call(&a), t, &mut rng)
                .run(failed, step(A_USES, false))
                .await;
            assert_eq!(ra.result, Ok(()));
            let rb = Driver::new(call(&b), t, &mut rng)
                .run(failed, step(RETRY_USES, true))
                .await;
            let rc = Driver::new(call(&c), t, &mut rng)
                .run(failed, step(ms(1), false))
                .await;
            (rb, rc)
        })
        .unwrap();

    // A started with 2000 left, B with 1700, B's retry with 1450 - 200 = 1250; C never started.
    let b_failed_at = Instant::ZERO + A_USES + B_USES;
    assert_eq!(deadline.remaining(b_failed_at), ms(1_450));
    assert_eq!(
        left_at_starts.into_inner(),
        [
            ms(2_000),
            ms(1_700),
            deadline.remaining(b_failed_at + RETRY_WAIT)
        ]
    );
    assert_eq!(called_b.result, Ok(()));
    assert_eq!((called_b.report.attempts, called_b.report.retries), (2, 1));
    assert!(!called_c.report.was_called());
    let left_for_c = deadline.remaining(called_c.report.ended);
    assert_eq!(left_for_c, ms(850));
    assert_eq!(
        called_c.result,
        Err(CallError::Library(Error::InsufficientTime {
            available: left_for_c,
            floor: c.floor()
        }))
    );
}
