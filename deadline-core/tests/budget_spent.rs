//! A runtime whose task can spend what its scheduler lets it do in one poll
//! ([`Timer::budget_spent`], tokio's cooperative budget): the driver gives an attempt it finds
//! pending at its timeout in such a poll one more poll, and has the task woken for it, before
//! it cuts the attempt off; an answer that comes by then is the call's. A timer that says
//! nothing of a budget (the default) cuts at once. Each future is polled by hand, on a manual
//! clock.

use std::cell::Cell;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use deadline_core::call::Call;
use deadline_core::drive::Driver;
use deadline_core::virtual_time::{ManualSleep, ManualTimer};
use deadline_core::{Clock, Deadline, Error, Instant, Outcome, Policy, Timer, ms};

/// A manual timer whose task's budget is spent while `spent` says so.
struct Budgeted<'t> {
    timer: &'t ManualTimer,
    spent: Cell<bool>,
}

impl Clock for Budgeted<'_> {
    fn now(&self) -> Instant {
        self.timer.now()
    }
}

impl<'t> Timer for Budgeted<'t> {
    type Sleep = ManualSleep<'t>;

    fn sleep_until(&self, at: Instant) -> ManualSleep<'t> {
        self.timer.sleep_until(at)
    }

    fn budget_spent(&self) -> bool {
        self.spent.get()
    }
}

/// A waker that counts how often it is woken.
#[derive(Default)]
struct Wakes(AtomicU32);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

static B: Policy = Policy::required("B").with_cap(ms(50));

/// An attempt that is pending until `answer` holds its value.
fn attempt(answer: &Cell<Option<u32>>) -> impl Future<Output = Result<u32, ()>> + '_ {
    std::future::poll_fn(move |_| answer.take().map_or(Poll::Pending, |v| Poll::Ready(Ok(v))))
}

#[test]
fn an_answer_a_spent_budget_hid_at_the_timeout_is_the_calls() {
    let timer = ManualTimer::new();
    let budgeted = Budgeted {
        timer: &timer,
        spent: Cell::new(false),
    };
    let answer = Cell::new(None);
    let call = Call::new(&B, Deadline::after(timer.now(), ms(200)), ms(0));
    let mut driven = pin!(
        Driver::deadline_only(call, &budgeted).run(|_: &()| Outcome::Failed, |_| attempt(&answer),)
    );
    let wakes = Arc::new(Wakes::default());
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(driven.as_mut().poll(&mut cx).is_pending());
    timer.advance(ms(60));
    let before = wakes.0.load(Ordering::SeqCst);
    // Past the timeout, with the budget spent: one more poll, and the task woken for it.
    budgeted.spent.set(true);
    assert!(driven.as_mut().poll(&mut cx).is_pending());
    assert_eq!(wakes.0.load(Ordering::SeqCst), before + 1, "woken for it");
    // That poll, with a fresh budget, finds the answer.
    budgeted.spent.set(false);
    answer.set(Some(7));
    let Poll::Ready(called) = driven.as_mut().poll(&mut cx) else {
        panic!("the answer was not taken");
    };
    assert_eq!(called.result, Ok(7));
    assert_eq!(called.report.timeouts, 0);
}

#[test]
fn work_still_pending_at_its_one_more_poll_is_cut_off_there() {
    let timer = ManualTimer::new();
    let budgeted = Budgeted {
        timer: &timer,
        spent: Cell::new(true),
    };
    let answer = Cell::new(None);
    let call = Call::new(&B, Deadline::after(timer.now(), ms(200)), ms(0));
    let mut driven = pin!(
        Driver::deadline_only(call, &budgeted).run(|_: &()| Outcome::Failed, |_| attempt(&answer),)
    );
    let mut cx = Context::from_waker(Waker::noop());
    assert!(driven.as_mut().poll(&mut cx).is_pending());
    timer.advance(ms(60));
    assert!(driven.as_mut().poll(&mut cx).is_pending(), "one more poll");
    // The budget spent again: no second one.
    let Poll::Ready(called) = driven.as_mut().poll(&mut cx) else {
        panic!("spared a second time");
    };
    assert_eq!(
        called.result.unwrap_err().library(),
        Some(Error::Timeout { after: ms(50) })
    );
    assert_eq!(called.report.timeouts, 1);
}

#[test]
fn a_timer_without_a_budget_cuts_off_at_once() {
    let timer = ManualTimer::new();
    let answer = Cell::new(None);
    let call = Call::new(&B, Deadline::after(timer.now(), ms(200)), ms(0));
    let mut driven = pin!(
        Driver::deadline_only(call, &timer).run(|_: &()| Outcome::Failed, |_| attempt(&answer),)
    );
    let mut cx = Context::from_waker(Waker::noop());
    assert!(driven.as_mut().poll(&mut cx).is_pending());
    timer.advance(ms(60));
    let Poll::Ready(called) = driven.as_mut().poll(&mut cx) else {
        panic!("not cut off at its first poll past the timeout");
    };
    assert_eq!(
        called.result.unwrap_err().library(),
        Some(Error::Timeout { after: ms(50) })
    );
}

/// A retry is given its one more poll too, though the attempt before it was given one and
/// then ended on its own in it (failed, so nothing was cut).
#[test]
fn a_retry_is_given_one_more_poll_after_an_attempt_that_failed_in_its_own() {
    static RETRIED: Policy = Policy::required("retried")
        .idempotent()
        .with_cap(ms(50))
        .with_retries(1)
        .with_backoff(deadline_core::policy::Backoff::constant(ms(5)));
    let timer = ManualTimer::new();
    let budgeted = Budgeted {
        timer: &timer,
        spent: Cell::new(false),
    };
    // The first attempt fails once `fail` says so; the second answers once `answer` holds it.
    let fail = Cell::new(false);
    let answer = Cell::new(None);
    let started = Cell::new(0u32);
    let call = Call::new(&RETRIED, Deadline::after(timer.now(), ms(500)), ms(0));
    let mut driven = pin!(
        Driver::new(call, &budgeted, deadline_core::rng::SplitMix64::new(1)).run(
            |_: &()| Outcome::Failed,
            |_| {
                let n = started.get();
                started.set(n + 1);
                let (fail, answer) = (&fail, &answer);
                std::future::poll_fn(move |_| match n {
                    0 if fail.get() => Poll::Ready(Err(())),
                    0 => Poll::Pending,
                    _ => answer.take().map_or(Poll::Pending, |v| Poll::Ready(Ok(v))),
                })
            },
        )
    );
    let mut cx = Context::from_waker(Waker::noop());
    assert!(driven.as_mut().poll(&mut cx).is_pending());
    // The first attempt at its timeout, the budget spent: one more poll, in which it fails.
    timer.advance(ms(60));
    budgeted.spent.set(true);
    assert!(driven.as_mut().poll(&mut cx).is_pending(), "one more poll");
    budgeted.spent.set(false);
    fail.set(true);
    assert!(
        driven.as_mut().poll(&mut cx).is_pending(),
        "failed, backing off"
    );
    timer.advance(ms(5));
    assert!(
        driven.as_mut().poll(&mut cx).is_pending(),
        "the retry started"
    );
    assert_eq!(started.get(), 2);
    // The retry at its timeout, the budget spent: one more poll, in which its answer comes.
    timer.advance(ms(60));
    budgeted.spent.set(true);
    assert!(
        driven.as_mut().poll(&mut cx).is_pending(),
        "the retry was cut off at once"
    );
    budgeted.spent.set(false);
    answer.set(Some(7));
    let Poll::Ready(called) = driven.as_mut().poll(&mut cx) else {
        panic!("the retry's answer was not taken");
    };
    assert_eq!(called.result, Ok(7));
    // The first attempt's failure, past its timeout, is its timeout; the retry's is none.
    assert_eq!((called.report.timeouts, called.report.retries), (1, 1));
}
