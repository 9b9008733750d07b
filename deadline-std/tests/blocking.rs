//! The blocking driver, in virtual time: the sleeper is a `ManualClock`, and each simulated
//! attempt moves the clock by its latency. Nothing sleeps for real.

use std::cell::RefCell;
use std::io;
use std::net::TcpListener;
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp, Limits};
use deadline_core::plan::Plan;
use deadline_core::policy::Backoff;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualClock;
use deadline_core::{Clock, Deadline, Error, Instant, Outcome, Policy, ms};
use deadline_std::blocking::{BlockingDriver, Sleeper};
use deadline_std::net;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DepError {
    Unavailable,
    TimedOut,
}

fn classify(e: &DepError) -> Outcome {
    match e {
        DepError::Unavailable => Outcome::Failed,
        DepError::TimedOut => Outcome::TimedOut,
    }
}

/// Each attempt's start (from the clock's origin) and limits.
type Starts = RefCell<Vec<(Instant, Limits)>>;

/// What a blocking run of the checkout example's chain did: the attempts seen per call, C's result and
/// the instant the response goes out.
type ChainRun = (
    Vec<Vec<(Instant, Limits)>>,
    Result<&'static str, CallError<DepError>>,
    Instant,
);

/// The checkout example's chain with blocking calls.
fn chain(latencies: [Duration; 3]) -> ChainRun {
    let policies = [
        Policy::required("A").with_cap(ms(50)).with_floor(ms(10)),
        Policy::required("B").with_cap(ms(110)).with_floor(ms(30)),
        Policy::optional("C").with_cap(ms(60)).with_floor(ms(25)),
    ];
    let clock = ManualClock::new();
    let deadline = Deadline::after(clock.now(), ms(200));
    let mut plan: Plan<'_, 3> = Plan::new(deadline, ms(20));
    let steps = policies.each_ref().map(|p| plan.then(p).unwrap());
    let mut seen = Vec::new();
    let mut last = Ok("");
    for i in 0..3 {
        let starts = Starts::default();
        let call = Call::new(&policies[i], deadline, plan.reserve(steps[i]));
        let called =
            BlockingDriver::new(call, &clock, SplitMix64::new(0)).run(classify, |limits| {
                starts.borrow_mut().push((clock.now(), limits));
                clock.advance(latencies[i]);
                Ok(policies[i].name())
            });
        seen.push(starts.into_inner());
        last = called.result;
    }
    clock.advance(ms(20)); // our own work
    (seen, last, clock.now())
}

#[test]
fn checkout_chain_blocking() {
    let (seen, c, response) = chain([ms(10), ms(105), ms(25)]);
    let got: Vec<_> = seen
        .iter()
        .map(|s| (s[0].0.as_millis(), s[0].1.timeout()))
        .collect();
    assert_eq!(got, [(0, ms(50)), (10, ms(110)), (115, ms(60))]);
    assert_eq!(c, Ok("C"));
    assert_eq!(response, Instant::from_millis(160));
}

#[test]
fn checkout_slow_case_blocking_skips_c_uncalled() {
    let (seen, c, response) = chain([ms(48), ms(108), ms(25)]);
    assert!(seen[2].is_empty(), "C must not be called");
    let Err(CallError::Skipped(s)) = c else {
        panic!("C must be skipped, got {c:?}");
    };
    assert_eq!((s.available(), s.floor()), (ms(24), ms(25)));
    assert_eq!(response, Instant::from_millis(176));
}

#[test]
fn a_retry_sleeps_its_backoff_and_gets_the_time_left() {
    // B's first attempt hits its socket's read limit (110 ms); 10 ms later the retry gets
    // min(200 - 120 - 20, 110) = 60 ms, and answers in 30.
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)));
    let clock = ManualClock::new();
    let budget = RetryBudget::percent(10).with_floor_per_sec(5);
    let call = Call::new(&b, Deadline::after(clock.now(), ms(200)), ms(20)).with_budget(&budget);
    let starts = Starts::default();
    let called = BlockingDriver::new(call, &clock, SplitMix64::new(1)).run(classify, |limits| {
        starts.borrow_mut().push((clock.now(), limits));
        if starts.borrow().len() == 1 {
            clock.set(limits.until());
            Err(DepError::TimedOut)
        } else {
            clock.advance(ms(30));
            Ok("price")
        }
    });
    assert_eq!(called.result, Ok("price"));
    let starts = starts.into_inner();
    assert_eq!(starts[0].1.timeout(), ms(110));
    assert_eq!(
        (starts[1].0, starts[1].1.timeout()),
        (Instant::from_millis(120), ms(60))
    );
    let r = called.report;
    assert_eq!(
        (r.attempts, r.retries, r.timeouts, r.winner),
        (2, 1, 1, Some(1))
    );
    assert_eq!(r.ended, Instant::from_millis(150));
}

#[test]
fn a_backoff_past_the_deadline_is_not_slept() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(70)));
    let clock = ManualClock::new();
    let call = Call::new(&b, Deadline::after(clock.now(), ms(100)), Duration::ZERO);
    let mut calls = 0;
    let called = BlockingDriver::new(call, &clock, SplitMix64::new(2)).run(classify, |_| {
        calls += 1;
        clock.advance(ms(40));
        Err::<(), _>(DepError::Unavailable)
    });
    assert_eq!(calls, 1);
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
    // Given up at the failure, 40 ms, without sleeping.
    assert_eq!(clock.now(), Instant::from_millis(40));
    assert_eq!(
        called.report.gave_up,
        Some(GiveUp::BackoffPastDeadline {
            at: Instant::from_millis(110)
        })
    );
}

/// A sleeper that oversleeps by a fixed amount, like a busy machine.
struct Oversleeper<'a>(&'a ManualClock, Duration);

impl Clock for Oversleeper<'_> {
    fn now(&self) -> Instant {
        self.0.now()
    }
}

impl Sleeper for Oversleeper<'_> {
    fn sleep_until(&self, at: Instant) {
        self.0.set(at + self.1);
    }
}

#[test]
fn the_deadline_reached_in_the_middle_of_a_backoff_starts_nothing() {
    // The 20 ms backoff after the failure at 70 ms was to end at 90, before the 100 ms
    // deadline; the thread wakes 30 ms late, at 120, and the driver starts nothing.
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(20)));
    let clock = ManualClock::new();
    let deadline = Deadline::after(clock.now(), ms(100));
    let call = Call::new(&b, deadline, Duration::ZERO);
    let mut calls = 0;
    let sleeper = Oversleeper(&clock, ms(30));
    let called = BlockingDriver::new(call, &sleeper, SplitMix64::new(3)).run(classify, |_| {
        calls += 1;
        clock.advance(ms(70));
        Err::<(), _>(DepError::Unavailable)
    });
    assert_eq!(calls, 1);
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::DeadlineExceeded))
    );
    assert_eq!(called.report.ended, Instant::from_millis(120));
    assert_eq!(called.report.gave_up, Some(GiveUp::DeadlinePassed));
}

#[test]
fn a_retry_the_budget_refuses_is_not_made() {
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)));
    let clock = ManualClock::new();
    let empty = RetryBudget::percent(0).with_floor_per_sec(0);
    let call = Call::new(&b, Deadline::after(clock.now(), ms(200)), ms(20)).with_budget(&empty);
    let called = BlockingDriver::new(call, &clock, SplitMix64::new(4)).run(classify, |_| {
        clock.advance(ms(20));
        Err::<(), _>(DepError::Unavailable)
    });
    assert_eq!(called.report.gave_up, Some(GiveUp::Throttled));
    assert_eq!(
        (called.report.attempts, called.report.budget_refusals),
        (1, 1)
    );
}

#[test]
fn a_required_call_under_its_floor_fails_uncalled() {
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let clock = ManualClock::starting_at(Instant::from_millis(160));
    let call = Call::new(&b, Deadline::after(Instant::ZERO, ms(200)), ms(20));
    let called = BlockingDriver::new(call, &clock, SplitMix64::new(5))
        .run(classify, |_| -> Result<(), DepError> {
            panic!("must not be called")
        });
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::InsufficientTime {
            available: ms(20),
            floor: ms(30)
        }))
    );
    assert!(!called.report.was_called());
}

#[test]
fn each_attempt_hands_its_limits_to_its_socket() {
    // C at 115 ms: the attempt connects within its connect limit and its socket reads with the
    // call's 60 ms timeout (read back from the socket, without waiting).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let c = Policy::optional("C")
        .with_cap(ms(60))
        .with_floor(ms(25))
        .with_connect(ms(20));
    let clock = ManualClock::starting_at(Instant::from_millis(115));
    let call = Call::new(&c, Deadline::after(Instant::ZERO, ms(200)), ms(20));
    let called = BlockingDriver::new(call, &clock, SplitMix64::new(6)).run(
        |_: &io::Error| Outcome::Refused,
        |limits| {
            assert_eq!(limits.connect(), ms(20));
            let (stream, armed) = net::connect(&addr, &limits, &clock)?;
            Ok((armed, stream.read_timeout()?))
        },
    );
    // The limit computed (exact), and the socket's read-back (the kernel may round it up to
    // its timer tick).
    let (armed, read_back) = called.result.unwrap();
    assert_eq!(armed, ms(60));
    let read_back = read_back.unwrap();
    assert!(armed <= read_back && read_back < armed + ms(10));
}

#[test]
fn an_unannotated_classifier_closure_compiles() {
    let clock = ManualClock::new();
    let dep = Policy::required("D").with_cap(ms(100)).with_floor(ms(10));
    let call = Call::new(&dep, Deadline::after(clock.now(), ms(200)), ms(0));
    let called = BlockingDriver::new(call, &clock, SplitMix64::new(1)).run(
        |e| match e {
            DepError::Unavailable => Outcome::Fatal,
            DepError::TimedOut => Outcome::TimedOut,
        },
        |_| Err::<(), _>(DepError::Unavailable),
    );
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
}
