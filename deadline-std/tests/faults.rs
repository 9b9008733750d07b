//! Fault injection on the std adapter: the shared fault suite on the async-std and smol
//! executors (in virtual time, as the scenario suite runs), and the blocking driver's own:
//! a dependency that hangs (a socket read that times out at the attempt's limit), one that
//! errors every time, one that panics (the panic reaches the caller, and the breaker's probe
//! slot it held comes back), a clock that steps back, a sleeper that wakes late, and a real
//! loopback dependency that never answers (every socket closed).

use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::Outcome;
use deadline_core::breaker::{BreakerConfig, BreakerState, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, Limits};
use deadline_core::policy::Backoff;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualClock;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Instant, Policy, ms};
use deadline_std::StdClock;
use deadline_std::blocking::{BlockingDriver, Sleeper, ThreadSleeper};
use deadline_testkit::faults::SLACK;
use deadline_testkit::{Stepper, run_virtual};

macro_rules! on_async_std_and_smol {
    ($name:ident) => {
        mod $name {
            use super::*;

            #[test]
            fn async_std() {
                let timer = ManualTimer::new();
                let stepper = Stepper::new(&timer);
                async_std::task::block_on(run_virtual(
                    &stepper,
                    deadline_testkit::faults::$name(&stepper),
                    |to| timer.clock().set(to),
                ));
            }

            #[test]
            fn smol() {
                let timer = ManualTimer::new();
                let stepper = Stepper::new(&timer);
                let executor = smol::LocalExecutor::new();
                let task = executor.spawn(run_virtual(
                    &stepper,
                    deadline_testkit::faults::$name(&stepper),
                    |to| timer.clock().set(to),
                ));
                smol::block_on(executor.run(task));
            }
        }
    };
}

deadline_testkit::for_each_fault!(on_async_std_and_smol);

/// Up to 3 attempts of at most 50 ms, 5 ms apart; 200 ms per request.
const FLAKY: Policy = Policy::required("flaky")
    .idempotent()
    .with_cap(ms(50))
    .with_floor(ms(5))
    .with_retries(2)
    .with_backoff(Backoff::constant(ms(5)));
const BUDGET: Duration = ms(200);

/// A socket read that timed out: the attempt's own limit.
fn timed_out(e: &io::Error) -> Outcome {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Outcome::TimedOut,
        _ => Outcome::Failed,
    }
}

/// A blocking attempt against a dependency that hangs: it blocks until its limit (a read
/// timeout armed from the limits) and fails with `TimedOut`. On virtual time, blocking is
/// moving `clock` to the limit.
fn hang(clock: &ManualClock, limits: Limits, starts: &mut Vec<Instant>) -> io::Result<()> {
    starts.push(clock.now());
    let until = limits.deadline().instant();
    if clock.now() < until {
        clock.set(until);
    }
    Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"))
}

#[test]
fn blocking_dependency_hangs_forever() {
    let clock = ManualClock::new();
    let deadline = Deadline::after(clock.now(), BUDGET);
    let mut starts = Vec::new();
    let called = BlockingDriver::new(
        Call::new(&FLAKY, deadline, Duration::ZERO),
        &clock,
        SplitMix64::new(1),
    )
    .run(timed_out, |limits| hang(&clock, limits, &mut starts));
    assert!(called.result.is_err());
    assert_eq!(starts.len(), 3, "each attempt timed out and was retried");
    assert_eq!(called.report.timeouts, 3);
    assert!(called.report.ended <= deadline.instant());
    assert!(clock.now() <= deadline.instant());
}

#[test]
fn blocking_dependency_errors_every_time() {
    for (budget, expected) in [
        (None, 3),
        (Some(RetryBudget::percent(10).with_floor_per_sec(0)), 1),
    ] {
        let clock = ManualClock::new();
        let deadline = Deadline::after(clock.now(), BUDGET);
        let calls = AtomicU32::new(0);
        let call = Call::new(&FLAKY, deadline, Duration::ZERO).with_budget_opt(budget.as_ref());
        let called = BlockingDriver::new(call, &clock, SplitMix64::new(2)).run(
            |_: &io::Error| Outcome::Failed,
            |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                clock.advance(ms(2));
                Err::<(), _>(io::Error::other("503"))
            },
        );
        assert!(matches!(called.result, Err(CallError::Attempt(_))));
        assert_eq!(calls.load(Ordering::SeqCst), expected, "budget {budget:?}");
        assert!(called.report.ended <= deadline.instant());
    }
}

/// A sleeper whose clock steps back `by` on every other reading.
struct StepsBack<'a> {
    clock: &'a ManualClock,
    by: Duration,
    readings: AtomicU32,
}

impl Clock for StepsBack<'_> {
    fn now(&self) -> Instant {
        let now = self.clock.now();
        if self.readings.fetch_add(1, Ordering::SeqCst) % 2 == 1 {
            now.saturating_sub(self.by)
        } else {
            now
        }
    }
}

impl Sleeper for StepsBack<'_> {
    fn sleep_until(&self, at: Instant) {
        if self.clock.now() < at {
            self.clock.set(at);
        }
    }
}

#[test]
fn blocking_clock_steps_back() {
    const STEP: Duration = ms(40);
    let clock = ManualClock::new();
    let stepping = StepsBack {
        clock: &clock,
        by: STEP,
        readings: AtomicU32::new(0),
    };
    let deadline = Deadline::after(clock.now(), BUDGET);
    let mut starts = Vec::new();
    let called = BlockingDriver::new(
        Call::new(&FLAKY, deadline, Duration::ZERO),
        &stepping,
        SplitMix64::new(3),
    )
    .run(timed_out, |limits| hang(&clock, limits, &mut starts));
    assert!(called.result.is_err());
    assert!((1..=3).contains(&starts.len()));
    assert!(
        clock.now() <= deadline.instant() + STEP + SLACK,
        "ran to {:?}",
        clock.now()
    );
}

/// A sleeper that wakes every sleep `by` late.
struct LateSleeper<'a> {
    clock: &'a ManualClock,
    by: Duration,
}

impl Clock for LateSleeper<'_> {
    fn now(&self) -> Instant {
        self.clock.now()
    }
}

impl Sleeper for LateSleeper<'_> {
    fn sleep_until(&self, at: Instant) {
        self.clock.set(self.clock.now().max(at) + self.by);
    }
}

/// Backoffs of 60 ms: the attempt fails at 30 ms, the backoff would end at 90 ms, the
/// sleeper wakes at 120, another attempt fails at 150, the next backoff would end at 210,
/// past the deadline: no attempt starts after the deadline, and the call ends by it.
#[test]
fn blocking_sleeper_wakes_late() {
    const LATE: Duration = ms(30);
    let slow: Policy = Policy::required("slow")
        .idempotent()
        .with_cap(ms(50))
        .with_floor(ms(5))
        .with_retries(4)
        .with_backoff(Backoff::constant(ms(60)));
    let clock = ManualClock::new();
    let late = LateSleeper {
        clock: &clock,
        by: LATE,
    };
    let deadline = Deadline::after(clock.now(), BUDGET);
    let mut starts = Vec::new();
    let called = BlockingDriver::new(
        Call::new(&slow, deadline, Duration::ZERO),
        &late,
        SplitMix64::new(4),
    )
    .run(
        |_: &io::Error| Outcome::Failed,
        |_| {
            starts.push(clock.now());
            clock.advance(ms(30));
            Err::<(), _>(io::Error::other("503"))
        },
    );
    assert!(called.result.is_err());
    assert!(starts.len() >= 2, "the late wake-up still retried");
    assert!(
        starts.iter().all(|s| *s < deadline.instant()),
        "an attempt started after the deadline"
    );
    assert!(called.report.ended <= deadline.instant() + LATE + SLACK);
}

/// A dependency whose client panics, behind a half-open breaker: the panic reaches the caller
/// (a blocking driver cannot contain it, nor should it), and the probe slot the attempt held
/// is not lost: the next call probes, succeeds, and the breaker closes.
#[test]
fn blocking_dependency_panics() {
    let breaker = CircuitBreaker::new(
        BreakerConfig::DEFAULT
            .with_consecutive_failures(1)
            .with_failure_percent(0)
            .with_window(20)
            .with_min_calls(10)
            .with_cooldown(ms(100))
            .with_probes(1)
            .with_probe_timeout(ms(300)),
    );
    let once = Policy::required("once").with_cap(ms(50)).with_floor(ms(5));
    let clock = ManualClock::new();
    let run = |attempt: &mut dyn FnMut() -> io::Result<()>| {
        let deadline = Deadline::after(clock.now(), BUDGET);
        let call = Call::new(&once, deadline, Duration::ZERO).with_breaker(&breaker);
        BlockingDriver::new(call, &clock, SplitMix64::new(5))
            .run(|_: &io::Error| Outcome::Failed, |_| attempt())
    };
    // Open it.
    let opened = run(&mut || Err(io::Error::other("503")));
    assert!(opened.result.is_err());
    assert_eq!(breaker.state(), BreakerState::Open);
    clock.advance(ms(100));

    let panicked = catch_unwind(AssertUnwindSafe(|| {
        run(&mut || panic!("the client panicked"))
    }));
    assert!(panicked.is_err(), "the panic reaches the caller");
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    // Unwinding handed the probe permit back (abandoned), so the slot is free at once: the
    // next call probes, succeeds, and closes the breaker.
    let probed = run(&mut || Ok(()));
    assert!(probed.result.is_ok(), "{:?}", probed.result);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A real loopback dependency that accepts, reads the request, and never answers: each
/// blocking attempt connects with `net::connect` (its read limit armed from the attempt's
/// limits), times out, and drops its socket; the server reads end-of-file on every
/// connection. Real time, so nothing is timed: every wait is bounded.
#[test]
fn blocking_hung_socket_leaves_no_socket_open() {
    let quick: Policy = Policy::required("socket")
        .idempotent()
        .with_cap(ms(30))
        .with_floor(ms(1))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(2)));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let closed = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::new(AtomicUsize::new(0));
    let server = {
        let (closed, accepted) = (Arc::clone(&closed), Arc::clone(&accepted));
        std::thread::spawn(move || {
            listener.set_nonblocking(false).unwrap();
            let mut handlers = Vec::new();
            for stream in listener.incoming().take(3) {
                let mut stream = stream.unwrap();
                accepted.fetch_add(1, Ordering::SeqCst);
                let closed = Arc::clone(&closed);
                handlers.push(std::thread::spawn(move || {
                    stream
                        .set_read_timeout(Some(Duration::from_secs(5)))
                        .unwrap();
                    let mut buf = [0u8; 64];
                    loop {
                        match stream.read(&mut buf) {
                            Ok(0) => {
                                closed.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                            Ok(_) => continue,
                            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                                closed.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                            Err(_) => return, // still open after 5 s: not counted as closed
                        }
                    }
                }));
            }
            for h in handlers {
                h.join().unwrap();
            }
        })
    };
    let deadline = Deadline::after(StdClock.now(), BUDGET);
    let called = BlockingDriver::new(
        Call::new(&quick, deadline, Duration::ZERO),
        ThreadSleeper,
        SplitMix64::new(6),
    )
    .run(timed_out, |limits| {
        let (mut stream, _) = deadline_std::net::connect(&address, &limits, &StdClock)?;
        stream.write_all(b"GET / HTTP/1.1\r\n\r\n")?;
        let mut buf = [0u8; 16];
        stream.read(&mut buf).map(drop)
    });
    assert!(
        called.result.is_err(),
        "a dependency that never answers cannot succeed"
    );
    let attempts = called.report.attempts as usize;
    // Unblock the accept loop if fewer than 3 attempts connected.
    for _ in attempts..3 {
        drop(std::net::TcpStream::connect(address));
    }
    server.join().unwrap();
    let accepted = accepted.load(Ordering::SeqCst);
    assert_eq!(accepted, 3);
    assert_eq!(
        closed.load(Ordering::SeqCst),
        accepted,
        "a socket was left open"
    );
    assert!((1..=3).contains(&attempts));
}
