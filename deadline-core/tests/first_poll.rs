//! The driver's first poll: a call whose first attempt answers at once ends on it, with no
//! timer armed, in every mode; one that fails at once or is pending arms what it needs; one
//! that is not made never invokes its attempt. Each future is polled by hand, once, so that
//! "on the first poll" is what is checked.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::breaker::{BreakerConfig, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, Limits};
use deadline_core::drive::Driver;
use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::{ManualSleep, ManualTimer};
use deadline_core::{Clock, Deadline, Error, Instant, Outcome, Policy, Timer, ms};

/// A manual timer that counts the sleeps a driver arms.
struct Counting<'t> {
    timer: &'t ManualTimer,
    sleeps: Cell<u32>,
}

impl<'t> Counting<'t> {
    fn new(timer: &'t ManualTimer) -> Self {
        Counting {
            timer,
            sleeps: Cell::new(0),
        }
    }
}

impl Clock for Counting<'_> {
    fn now(&self) -> Instant {
        self.timer.now()
    }
}

impl<'t> Timer for Counting<'t> {
    type Sleep = ManualSleep<'t>;

    fn sleep_until(&self, at: Instant) -> ManualSleep<'t> {
        self.sleeps.set(self.sleeps.get() + 1);
        self.timer.sleep_until(at)
    }
}

/// Polls `future` once.
fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    pin!(future).poll(&mut cx)
}

/// Retries, a hedge, the budget and a breaker: everything a full call can do.
static ARMED: Policy = Policy::required("armed")
    .idempotent()
    .with_cap(ms(100))
    .with_floor(ms(10))
    .with_retries(2)
    .with_backoff(Backoff::constant(ms(10)))
    .with_hedge(HedgePolicy::new(ms(30), 1));

/// A call to [`ARMED`] with `left` before its deadline, keeping 20 ms.
fn armed_call(timer: &ManualTimer, left: Duration) -> Call<'static> {
    Call::new(&ARMED, Deadline::after(timer.now(), left), ms(20))
}

#[test]
fn a_full_call_whose_first_attempt_answers_at_once_ends_on_its_first_poll_with_no_timer() {
    let timer = ManualTimer::new();
    let counting = Counting::new(&timer);
    let budget = RetryBudget::percent(10);
    let breaker = CircuitBreaker::new(BreakerConfig::DEFAULT);
    let call = armed_call(&timer, ms(200))
        .with_budget(&budget)
        .with_breaker(&breaker);
    let invoked = Cell::new(0);
    let polled = poll_once(Driver::new(call, &counting, SplitMix64::new(1)).run(
        |_: &()| Outcome::Failed,
        |limits: Limits| {
            invoked.set(invoked.get() + 1);
            assert_eq!(limits.timeout(), ms(100));
            core::future::ready(Ok::<_, ()>("price"))
        },
    ));
    let Poll::Ready(called) = polled else {
        panic!("a call whose first attempt answers at once ends on its first poll");
    };
    assert_eq!(called.result, Ok("price"));
    let r = called.report;
    assert_eq!(
        (r.attempts, r.winner, r.hedges, r.retries),
        (1, Some(0), 0, 0)
    );
    assert_eq!(r.started, Some(Instant::ZERO));
    assert_eq!(r.ended, Instant::ZERO);
    assert_eq!(invoked.get(), 1);
    assert_eq!(counting.sleeps.get(), 0, "no timer is armed");
    // Its success was reported to the breaker.
    let stats = breaker.window_stats();
    assert_eq!((stats.calls, stats.failures), (1, 0));
}

#[test]
fn a_deadline_only_call_whose_attempt_answers_at_once_ends_on_its_first_poll_with_no_timer() {
    let timer = ManualTimer::new();
    let counting = Counting::new(&timer);
    let call = armed_call(&timer, ms(200));
    let polled = poll_once(Driver::deadline_only(call, &counting).run(
        |_: &()| Outcome::Failed,
        |_| core::future::ready(Ok::<_, ()>(7)),
    ));
    let Poll::Ready(called) = polled else {
        panic!("a call whose attempt answers at once ends on its first poll");
    };
    assert_eq!(called.result, Ok(7));
    assert_eq!((called.report.attempts, called.report.winner), (1, Some(0)));
    assert_eq!(counting.sleeps.get(), 0, "no timer is armed");
}

#[test]
fn a_first_attempt_that_fails_at_once_arms_the_backoff_and_its_retry_answers() {
    let timer = ManualTimer::new();
    let counting = Counting::new(&timer);
    let call = armed_call(&timer, ms(200));
    let invoked = Cell::new(0);
    let driver = Driver::new(call, &counting, SplitMix64::new(1)).run(
        |_: &&str| Outcome::Failed,
        |_| {
            invoked.set(invoked.get() + 1);
            let answer = if invoked.get() == 1 {
                Err("503")
            } else {
                Ok("price")
            };
            core::future::ready(answer)
        },
    );
    let mut driver = pin!(driver);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(driver.as_mut().poll(&mut cx).is_pending(), "it backs off");
    assert_eq!((invoked.get(), counting.sleeps.get()), (1, 1));
    timer.advance(ms(10));
    let Poll::Ready(called) = driver.as_mut().poll(&mut cx) else {
        panic!("the retry answers at once, at the end of the backoff");
    };
    assert_eq!(called.result, Ok("price"));
    assert_eq!((called.report.attempts, called.report.retries), (2, 1));
    assert_eq!(called.report.ended, Instant::from_millis(10));
    assert_eq!(invoked.get(), 2);
}

#[test]
fn a_pending_first_attempt_arms_one_sleep_until_its_hedge() {
    let timer = ManualTimer::new();
    let counting = Counting::new(&timer);
    let call = armed_call(&timer, ms(200));
    let polled = poll_once(Driver::new(call, &counting, SplitMix64::new(1)).run(
        |_: &()| Outcome::Failed,
        |_| core::future::pending::<Result<(), ()>>(),
    ));
    assert!(polled.is_pending());
    // One sleep: until the hedge is due, the earliest of the hedge (30 ms), the attempt's
    // timeout (100 ms) and the deadline.
    assert_eq!(counting.sleeps.get(), 1);
}

#[test]
fn a_call_not_made_ends_on_its_first_poll_without_invoking_its_attempt() {
    let timer = ManualTimer::new();
    let counting = Counting::new(&timer);
    // 15 ms left, 20 ms reserved: nothing for the attempt.
    let call = armed_call(&timer, ms(15));
    let invoked = Cell::new(false);
    let polled = poll_once(Driver::new(call, &counting, SplitMix64::new(1)).run(
        |_: &()| Outcome::Failed,
        |_| {
            invoked.set(true);
            core::future::ready(Ok::<_, ()>(()))
        },
    ));
    let Poll::Ready(called) = polled else {
        panic!("a call that is not made ends on its first poll");
    };
    assert!(matches!(
        called.result,
        Err(CallError::Library(
            Error::InsufficientTime { .. } | Error::DeadlineExceeded
        ))
    ));
    assert_eq!(called.report.attempts, 0);
    assert!(!invoked.get(), "the attempt is not invoked");
    assert_eq!(counting.sleeps.get(), 0);
}
