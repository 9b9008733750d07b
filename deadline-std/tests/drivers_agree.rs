//! The same scenario through the core's async driver (on its virtual-time `ManualTimer`) and
//! the blocking driver (on a `ManualClock`): the same attempts with the same limits, and the
//! same result and report, for successes, failures, timeouts, deadlines, the retry budget
//! and the circuit breaker.
//!
//! A dependency that never answers is, for the async driver, an attempt still pending at its
//! `until` (the driver cuts it off); for the blocking driver, an attempt whose socket read
//! limit fires at its `until` and returns a timeout error. Both must end the call alike.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::Outcome;
use deadline_core::breaker::{BreakerConfig, BreakerState, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp, Limits};
use deadline_core::drive::{Called, Driver};
use deadline_core::policy::Backoff;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualClock;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Error, Instant, Policy, Timer, ms};
use deadline_std::blocking::{BlockingDriver, Sleeper};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DepError {
    /// A 503: a retry may fix it.
    Unavailable,
    /// A 400: a retry would not.
    BadRequest,
    /// The socket's read limit fired (blocking only: the async driver cuts the attempt off).
    ReadTimedOut,
}

fn classify(e: &DepError) -> Outcome {
    match e {
        DepError::Unavailable => Outcome::Failed,
        DepError::BadRequest => Outcome::Fatal,
        DepError::ReadTimedOut => Outcome::TimedOut,
    }
}

/// What one attempt of the simulated dependency does.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Answers after this many ms.
    Answer(u64),
    /// Fails with this error after this many ms.
    Fail(DepError, u64),
    /// Never answers.
    Hang,
}

/// One scenario: the policy, the time left, the attempts' behaviour (the last one repeats),
/// how late every wake-up is, and the state of the shared budget and breaker.
struct Scenario {
    policy: Policy<'static>,
    budget: u64,
    steps: &'static [Step],
    late: u64,
    empty_budget: bool,
    breaker: Option<(BreakerConfig, bool)>,
}

impl Scenario {
    fn new(policy: Policy<'static>, budget: u64, steps: &'static [Step]) -> Self {
        Scenario {
            policy,
            budget,
            steps,
            late: 0,
            empty_budget: false,
            breaker: None,
        }
    }

    fn step(&self, n: usize) -> Step {
        self.steps[n.min(self.steps.len() - 1)]
    }

    /// The breaker of a run: fresh, and opened first if the scenario says so.
    fn breaker(&self) -> Option<CircuitBreaker> {
        self.breaker.map(|(config, open)| {
            let b = CircuitBreaker::new(config);
            // Bounded: a window holds at most `MAX_WINDOW` outcomes, so a breaker that opens
            // at all opens within as many failures.
            for _ in 0..=BreakerConfig::MAX_WINDOW {
                if !open || b.state() == BreakerState::Open {
                    break;
                }
                let permit = b.try_acquire(Instant::ZERO).unwrap();
                b.record(
                    permit,
                    deadline_core::breaker::BreakerOutcome::Failure,
                    Instant::ZERO,
                );
            }
            assert!(
                !open || b.state() == BreakerState::Open,
                "the breaker never opened"
            );
            b
        })
    }

    fn retry_budget(&self) -> RetryBudget {
        if self.empty_budget {
            RetryBudget::percent(0).with_floor_per_sec(0)
        } else {
            RetryBudget::percent(100).with_floor_per_sec(10)
        }
    }
}

/// What a run did: each attempt's start and limits, the call, and the breaker's state.
type Run = (
    Vec<(Instant, Limits)>,
    Called<usize, DepError>,
    Option<BreakerState>,
);

fn run_async(s: &Scenario) -> Run {
    let timer = ManualTimer::new().with_lateness(ms(s.late));
    let t = &timer;
    let breaker = s.breaker();
    let budget = s.retry_budget();
    let call = Call::new(&s.policy, Deadline::after(t.now(), ms(s.budget)), ms(0))
        .with_budget(&budget)
        .with_breaker_opt(breaker.as_ref());
    let seen = RefCell::new(Vec::new());
    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(9)).run(classify, |limits: Limits| {
                let n = seen.borrow().len();
                seen.borrow_mut().push((t.now(), limits));
                let (latency, out) = match s.step(n) {
                    Step::Answer(l) => (ms(l), Ok(n)),
                    Step::Fail(e, l) => (ms(l), Err(e)),
                    Step::Hang => (Duration::from_secs(3_600), Ok(n)),
                };
                sim(t, latency, out)
            }),
        )
        .unwrap();
    (
        seen.into_inner(),
        called,
        breaker.as_ref().map(CircuitBreaker::state),
    )
}

fn sim<'t, T: 't>(t: &'t ManualTimer, latency: Duration, out: T) -> impl Future<Output = T> + 't {
    let at = t.now() + latency;
    async move {
        t.sleep_until(at).await;
        out
    }
}

/// A sleeper that wakes `late` after every instant, like the async timer.
struct Sleepy<'a>(&'a ManualClock, Duration);

impl Clock for Sleepy<'_> {
    fn now(&self) -> Instant {
        self.0.now()
    }
}

impl Sleeper for Sleepy<'_> {
    fn sleep_until(&self, at: Instant) {
        self.0.set(at.max(self.0.now()) + self.1);
    }
}

fn run_blocking(s: &Scenario) -> Run {
    let clock = ManualClock::new();
    let late = ms(s.late);
    let breaker = s.breaker();
    let budget = s.retry_budget();
    let call = Call::new(&s.policy, Deadline::after(clock.now(), ms(s.budget)), ms(0))
        .with_budget(&budget)
        .with_breaker_opt(breaker.as_ref());
    let mut seen = Vec::new();
    let called = BlockingDriver::new(call, Sleepy(&clock, late), SplitMix64::new(9)).run(
        classify,
        |limits| {
            let n = seen.len();
            seen.push((clock.now(), limits));
            match s.step(n) {
                Step::Answer(l) => {
                    clock.advance(ms(l) + late);
                    Ok(n)
                }
                Step::Fail(e, l) => {
                    clock.advance(ms(l) + late);
                    Err(e)
                }
                // The socket's read limit, set from the attempt's limits, fires at `until`.
                Step::Hang => {
                    clock.set(limits.until() + late);
                    Err(DepError::ReadTimedOut)
                }
            }
        },
    );
    (seen, called, breaker.as_ref().map(CircuitBreaker::state))
}

/// Runs `s` through both drivers, checks that they agree, and returns the call.
fn agree(s: &Scenario) -> Called<usize, DepError> {
    let (seen_async, called_async, breaker_async) = run_async(s);
    let (seen_blocking, called_blocking, breaker_blocking) = run_blocking(s);
    assert_eq!(seen_async, seen_blocking, "the attempts differ");
    assert_eq!(called_async, called_blocking, "the calls ended differently");
    assert_eq!(breaker_async, breaker_blocking);
    called_async
}

const HANG: &[Step] = &[Step::Hang];
const FAIL: &[Step] = &[Step::Fail(DepError::Unavailable, 40)];

#[test]
fn a_timeout_with_no_retry_ends_in_timeout_on_both() {
    let pay = Policy::required("pay")
        .not_idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10));
    let called = agree(&Scenario::new(pay, 200, HANG));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(50) }))
    );
    assert_eq!(called.report.gave_up, Some(GiveUp::MayHaveRun));
    assert_eq!(called.report.timeouts, 1);
}

#[test]
fn timeouts_until_the_attempts_run_out() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5)));
    let called = agree(&Scenario::new(b, 500, HANG));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(50) }))
    );
    assert_eq!((called.report.timeouts, called.report.retries), (3, 2));
    assert_eq!(called.report.gave_up, Some(GiveUp::Exhausted));
}

#[test]
fn a_timeout_into_the_deadline_is_deadline_exceeded_on_both() {
    let b = Policy::required("B").with_cap(ms(100)).with_floor(ms(10));
    let called = agree(&Scenario::new(b, 60, HANG));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::DeadlineExceeded))
    );
    assert!(called.is_deadline_exceeded());
}

#[test]
fn a_failure_then_an_answer() {
    const STEPS: &[Step] = &[Step::Fail(DepError::Unavailable, 20), Step::Answer(30)];
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)));
    let called = agree(&Scenario::new(b, 200, STEPS));
    assert_eq!(called.result, Ok(1));
    assert_eq!(called.report.ended, Instant::from_millis(60));
}

#[test]
fn failures_until_the_attempts_run_out() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(10)));
    let called = agree(&Scenario::new(b, 500, FAIL));
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
    assert_eq!(called.report.gave_up, Some(GiveUp::Exhausted));
}

#[test]
fn a_fatal_error_is_not_retried() {
    const STEPS: &[Step] = &[Step::Fail(DepError::BadRequest, 5)];
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)));
    let called = agree(&Scenario::new(b, 500, STEPS));
    assert_eq!(called.result, Err(CallError::Attempt(DepError::BadRequest)));
    assert_eq!(called.report.gave_up, Some(GiveUp::NotRetryable));
}

#[test]
fn a_backoff_past_the_deadline() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(70)));
    let called = agree(&Scenario::new(b, 100, FAIL));
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
    assert!(matches!(
        called.report.gave_up,
        Some(GiveUp::BackoffPastDeadline { .. })
    ));
}

#[test]
fn a_late_wake_after_the_deadline() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(20)));
    let mut s = Scenario::new(b, 100, FAIL);
    s.late = 30;
    let called = agree(&s);
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::DeadlineExceeded))
    );
    assert_eq!(called.report.gave_up, Some(GiveUp::DeadlinePassed));
    assert_eq!(called.report.ended, Instant::from_millis(120));
}

#[test]
fn a_retry_the_budget_refuses() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)));
    let mut s = Scenario::new(b, 200, FAIL);
    s.empty_budget = true;
    let called = agree(&s);
    assert_eq!(called.report.gave_up, Some(GiveUp::Throttled));
    assert_eq!(called.report.budget_refusals, 1);
}

#[test]
fn an_open_breaker_on_both() {
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let mut s = Scenario::new(b, 200, FAIL);
    s.breaker = Some((BreakerConfig::DEFAULT.with_consecutive_failures(1), true));
    let called = agree(&s);
    assert_eq!(called.result, Err(CallError::Library(Error::CircuitOpen)));
    assert_eq!(
        (called.report.attempts, called.report.breaker_rejections),
        (0, 1)
    );
}

#[test]
fn timeouts_that_open_the_breaker_stop_the_retries_on_both() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_retries(4)
        .with_backoff(Backoff::constant(ms(5)));
    let mut s = Scenario::new(b, 1_000, HANG);
    s.breaker = Some((BreakerConfig::DEFAULT.with_consecutive_failures(2), false));
    let called = agree(&s);
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(50) }))
    );
    assert_eq!(called.report.gave_up, Some(GiveUp::CircuitOpen));
    assert_eq!(
        (called.report.timeouts, called.report.breaker_rejections),
        (2, 1)
    );
}
