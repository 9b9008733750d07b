//! The async driver with a circuit breaker, on virtual time: an open breaker fails the call
//! at once, uncalled; the call's own timeouts open it and stop its retries; a half-open
//! breaker admits only its probes across concurrent calls; hedges ask it too; cancelled and
//! dropped attempts hand their probe slots back at once.
#![cfg(feature = "drive")]

use std::cell::Cell;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::Outcome;
use deadline_core::breaker::BreakerOutcome;
use deadline_core::breaker::{BreakerConfig, BreakerState, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp, Limits};
use deadline_core::drive::{Called, Driver};
use deadline_core::observe::Counters;
use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Error, Instant, Policy, Timer, ms};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepError {
    Unavailable,
    BadRequest,
}

fn classify(e: &DepError) -> Outcome {
    match e {
        DepError::Unavailable => Outcome::Failed,
        DepError::BadRequest => Outcome::Fatal,
    }
}

/// A simulated dependency: answers `out` after `latency` on the virtual timer.
fn sim<'t, T: 't>(t: &'t ManualTimer, latency: Duration, out: T) -> impl Future<Output = T> + 't {
    let at = t.now() + latency;
    async move {
        t.sleep_until(at).await;
        out
    }
}

/// Opens on `n` failures in a row; 1 s cooldown; `probes` probes with 500 ms for them.
fn config(n: u32, probes: u32) -> BreakerConfig {
    BreakerConfig::DEFAULT
        .with_consecutive_failures(n)
        .with_failure_percent(0)
        .with_window(20)
        .with_min_calls(10)
        .with_cooldown(ms(1_000))
        .with_probes(probes)
        .with_probe_timeout(ms(500))
}

/// Opens `b` at `now` with `n` failures.
fn trip(b: &CircuitBreaker, n: u32, now: Instant) {
    for _ in 0..n {
        let permit = b.try_acquire(now).unwrap();
        b.record(permit, BreakerOutcome::Failure, now);
    }
    assert_eq!(b.state(), BreakerState::Open);
}

/// Polls every future until all are done, on the same task: concurrent calls.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    poll_fn(move |cx| {
        for (f, out) in futures.iter_mut().zip(outs.iter_mut()) {
            if out.is_none() {
                if let Poll::Ready(v) = f.as_mut().poll(cx) {
                    *out = Some(v);
                }
            }
        }
        if outs.iter().all(Option::is_some) {
            Poll::Ready(outs.iter_mut().map(|o| o.take().unwrap()).collect())
        } else {
            Poll::Pending
        }
    })
    .await
}

#[test]
fn an_open_breaker_fails_the_call_at_once_and_uncalled() {
    let timer = ManualTimer::starting_at(Instant::from_millis(100));
    let t = &timer;
    let breaker = CircuitBreaker::new(config(2, 1));
    trip(&breaker, 2, Instant::from_millis(50));
    let budget = RetryBudget::percent(10).with_floor_per_sec(0);
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let call = Call::new(&b, Deadline::after(t.now(), ms(200)), ms(20))
        .with_budget(&budget)
        .with_breaker(&breaker);
    let invoked = Cell::new(0);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(1)).run(classify, |_| {
            invoked.set(invoked.get() + 1);
            sim(t, ms(10), Ok(()))
        }))
        .unwrap();
    assert_eq!(invoked.get(), 0, "the attempt function was invoked");
    assert_eq!(called.result, Err(CallError::Library(Error::CircuitOpen)));
    let r = called.report;
    assert!(!r.was_called());
    assert_eq!(
        (r.breaker_rejections, r.ended),
        (1, Instant::from_millis(100))
    );
    // A call that never went out is not an original call for the retry budget.
    assert_eq!(budget.balance(), 0);

    let counters = Counters::new();
    called.record(&counters);
    let s = counters.snapshot();
    assert_eq!((s.calls, s.breaker_rejections), (1, 1));
    assert_eq!((s.skipped, s.deadline_exceeded, s.timeouts), (0, 0, 0));
}

#[test]
fn timeouts_open_the_breaker_and_the_next_call_is_not_made() {
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(3, 1));
    let b = Policy::required("B").with_cap(ms(50)).with_floor(ms(10));
    let invoked = Cell::new(0);
    let mut results = Vec::new();
    for _ in 0..4 {
        let call = Call::new(&b, Deadline::after(t.now(), ms(200)), ms(0)).with_breaker(&breaker);
        let called: Called<(), DepError> = timer
            .run(Driver::new(call, t, SplitMix64::new(2)).run(classify, |_| {
                invoked.set(invoked.get() + 1);
                std::future::pending()
            }))
            .unwrap();
        results.push(called.result);
    }
    // Three calls timed out after 50 ms each; the breaker opened on the third, so the
    // fourth failed at once at 150 ms without calling.
    assert_eq!(invoked.get(), 3);
    let timeout = Err(CallError::Library(Error::Timeout { after: ms(50) }));
    assert_eq!(&results[..3], &[timeout.clone(), timeout.clone(), timeout]);
    assert_eq!(results[3], Err(CallError::Library(Error::CircuitOpen)));
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(t.now(), Instant::from_millis(150));
}

#[test]
fn a_retry_the_breaker_refuses_is_not_made() {
    // Two timeouts of this call's own open the breaker: its third attempt is refused, and
    // the call ends on its last timeout, with time left.
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(2, 1));
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_retries(4)
        .with_backoff(Backoff::constant(ms(10)));
    let call = Call::new(&b, Deadline::after(t.now(), ms(1_000)), ms(0)).with_breaker(&breaker);
    let invoked = Cell::new(0);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(3)).run(classify, |_| {
            invoked.set(invoked.get() + 1);
            std::future::pending()
        }))
        .unwrap();
    assert_eq!(invoked.get(), 2);
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(50) }))
    );
    let r = called.report;
    assert_eq!(r.gave_up, Some(GiveUp::CircuitOpen));
    assert_eq!((r.attempts, r.retries, r.timeouts), (2, 1, 2));
    assert_eq!(r.breaker_rejections, 1);
    // 0-50, backoff, 60-110, backoff: refused at 120.
    assert_eq!(r.ended, Instant::from_millis(120));
    assert!(!called.is_deadline_exceeded());
}

#[test]
fn a_retry_the_breaker_refuses_while_a_copy_runs_leaves_that_copy_running() {
    // The hedge (sent at 30 ms) fails at 70 ms, which opens the breaker (one failure in a row
    // opens it). Its retry is decided at once, but the breaker refuses it when its backoff
    // ends, at 75 ms: the first copy, still running, is not cancelled, and its answer at
    // 200 ms is the call's.
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(1, 1));
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(300))
        .with_floor(ms(10))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5)))
        .with_hedge(HedgePolicy::new(ms(30), 1));
    let call = Call::new(&b, Deadline::after(t.now(), ms(400)), ms(0)).with_breaker(&breaker);
    let invoked = Cell::new(0);
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(2)).run(classify, |_| {
            invoked.set(invoked.get() + 1);
            if invoked.get() == 1 {
                sim(t, ms(200), Ok(1))
            } else {
                sim(t, ms(40), Err(DepError::Unavailable))
            }
        }))
        .unwrap();
    assert_eq!(invoked.get(), 2);
    assert_eq!(called.result, Ok(1));
    let r = called.report;
    assert_eq!(
        (r.attempts, r.hedges, r.retries, r.winner, r.cancelled),
        (2, 1, 0, Some(0), 0)
    );
    assert_eq!((r.breaker_rejections, r.gave_up), (1, None));
    assert_eq!(r.ended, Instant::from_millis(200));
}

#[test]
fn a_half_open_breaker_admits_only_its_probes_across_concurrent_calls() {
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(1, 2));
    trip(&breaker, 1, Instant::ZERO);
    timer.advance(ms(1_001)); // the cooldown is over
    let b = Policy::required("B").with_cap(ms(100)).with_floor(ms(10));
    let invoked = Cell::new(0);
    let calls: Vec<_> = (0..5)
        .map(|i| {
            let call =
                Call::new(&b, Deadline::after(t.now(), ms(200)), ms(0)).with_breaker(&breaker);
            Driver::new(call, t, SplitMix64::new(i)).run(classify, |_| {
                invoked.set(invoked.get() + 1);
                sim(t, ms(10), Ok::<_, DepError>(()))
            })
        })
        .collect();
    let results = timer.run(join_all(calls)).unwrap();
    assert_eq!(invoked.get(), 2, "only the two probes may call");
    let admitted = results.iter().filter(|c| c.result.is_ok()).count();
    let refused = results
        .iter()
        .filter(|c| c.result == Err(CallError::Library(Error::CircuitOpen)))
        .count();
    assert_eq!((admitted, refused), (2, 3));
    assert!(
        results
            .iter()
            .all(|c| c.report.breaker_rejections == u32::from(c.result.is_err()))
    );
    // Both probes succeeded: the breaker is closed again.
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn a_hedge_the_breaker_refuses_is_not_sent() {
    // Half-open with one probe: the first attempt is the probe, so the hedge due at 20 ms is
    // refused, and no other is tried.
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(1, 1));
    trip(&breaker, 1, Instant::ZERO);
    timer.advance(ms(1_001));
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(10))
        .with_hedge(HedgePolicy::new(ms(20), 3));
    let call = Call::new(&b, Deadline::after(t.now(), ms(300)), ms(0)).with_breaker(&breaker);
    let invoked = Cell::new(0);
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(4)).run(classify, |_| {
            invoked.set(invoked.get() + 1);
            sim(t, ms(100), Ok::<_, DepError>(()))
        }))
        .unwrap();
    assert_eq!(invoked.get(), 1);
    assert_eq!(called.result, Ok(()));
    assert_eq!(
        (called.report.hedges, called.report.breaker_rejections),
        (0, 1)
    );
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn a_cancelled_loser_hands_its_probe_slot_back() {
    // Half-open with two probes: the first attempt and its hedge take both. The hedge wins;
    // the loser is reported abandoned, so a probe slot is free at once.
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(1, 2));
    trip(&breaker, 1, Instant::ZERO);
    timer.advance(ms(1_001));
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(10))
        .with_hedge(HedgePolicy::new(ms(20), 1));
    let call = Call::new(&b, Deadline::after(t.now(), ms(300)), ms(0)).with_breaker(&breaker);
    let n = Cell::new(0);
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(5)).run(classify, |_| {
            n.set(n.get() + 1);
            let latency = if n.get() == 1 { ms(100) } else { ms(10) };
            sim(t, latency, Ok::<_, DepError>(n.get()))
        }))
        .unwrap();
    assert_eq!(called.result, Ok(2));
    assert_eq!(called.report.cancelled, 1);
    // One probe succeeded, the other was abandoned: still half-open, one slot free.
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let probe = breaker
        .try_acquire(t.now())
        .expect("the loser's slot is free");
    assert!(probe.is_probe());
    breaker.record(probe, BreakerOutcome::Success, t.now());
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn dropping_the_driver_hands_its_probe_slot_back_at_once() {
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(1, 1));
    trip(&breaker, 1, Instant::ZERO);
    timer.advance(ms(1_001));
    let b = Policy::required("B").with_cap(ms(150)).with_floor(ms(10));
    let call = Call::new(&b, Deadline::after(t.now(), ms(300)), ms(0)).with_breaker(&breaker);
    let mut driven = Box::pin(
        Driver::new(call, t, SplitMix64::new(6))
            .run(classify, |_| sim(t, ms(100), Ok::<_, DepError>(()))),
    );
    // The call starts: its attempt holds the only probe slot.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(driven.as_mut().poll(&mut cx).is_pending());
    timer.advance(ms(30));
    assert_eq!(breaker.try_acquire(t.now()), Err(Error::CircuitOpen));
    // The caller stops waiting, long before the 500 ms probe timeout.
    drop(driven);
    let probe = breaker
        .try_acquire(t.now())
        .expect("the dropped probe's slot is free");
    assert!(probe.is_probe());
}

#[test]
fn what_each_result_tells_the_breaker() {
    // A fatal error (the request's fault) is an answer, not a failure of the dependency;
    // a server's failure is.
    let timer = ManualTimer::new();
    let t = &timer;
    let breaker = CircuitBreaker::new(config(1, 1));
    let b = Policy::required("B").with_cap(ms(100)).with_floor(ms(10));
    let run = |error: DepError| {
        let call = Call::new(&b, Deadline::after(t.now(), ms(200)), ms(0)).with_breaker(&breaker);
        timer
            .run(
                Driver::new(call, t, SplitMix64::new(7))
                    .run(classify, |_: Limits| sim(t, ms(5), Err::<(), _>(error))),
            )
            .unwrap()
    };
    let called = run(DepError::BadRequest);
    assert_eq!(called.result, Err(CallError::Attempt(DepError::BadRequest)));
    assert_eq!(breaker.state(), BreakerState::Closed);
    let called = run(DepError::Unavailable);
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
    assert_eq!(breaker.state(), BreakerState::Open);
}
