//! The async driver on virtual time ([`ManualTimer`]): the checkout example's chain and its slow case, a
//! retry within the budget, a hedge that wins while its loser is cancelled, a deadline reached
//! in the middle of a backoff, and a required call under its floor that fails uncalled.
#![cfg(feature = "drive")]

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp, Limits};
use deadline_core::drive::{Called, Driver};
use deadline_core::plan::Plan;
use deadline_core::policy::{Backoff, HedgePolicy, Idempotence, Jitter};
use deadline_core::rng::{Sequence, SplitMix64};
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Error, Instant, Outcome, Policy, Pushback, Timer, ms};
use proptest::prelude::*;

/// A simulated dependency: answers `out` after `latency` on the virtual timer.
fn sim<'t, T: 't>(t: &'t ManualTimer, latency: Duration, out: T) -> impl Future<Output = T> + 't {
    let at = t.now() + latency;
    async move {
        t.sleep_until(at).await;
        out
    }
}

/// Sets its flag when dropped: shows that an attempt's future was cancelled.
struct DropGuard(Rc<Cell<bool>>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepError {
    Unavailable,
    Refused,
    /// The attempt's connect limit ran out (before its timeout).
    ConnectTimedOut,
    RetryAfter(Duration),
    NoRetry,
    BadRequest,
}

fn classify(e: &DepError) -> Outcome {
    match e {
        DepError::Unavailable => Outcome::Failed,
        DepError::Refused => Outcome::Refused,
        DepError::ConnectTimedOut => Outcome::TimedOut,
        DepError::RetryAfter(d) => Outcome::Pushback(Pushback::After(*d)),
        DepError::NoRetry => Outcome::Pushback(Pushback::DontRetry),
        DepError::BadRequest => Outcome::Fatal,
    }
}

/// One step of a chain: start instant, the limits the attempt got (if called).
#[derive(Debug, Clone, Copy)]
struct Seen {
    start: Instant,
    limits: Limits,
}

/// The response instant, what each call saw, and the last call's result.
type ChainRun = (
    Instant,
    Vec<(&'static str, Seen)>,
    Result<&'static str, CallError<()>>,
);

/// The checkout example's chain on the driver: A, B, C called one after another, each attempt simulated
/// with the given latency; our own work (20 ms) after them. Returns the instant the response
/// goes out, what each call saw, and C's result.
fn checkout_chain(latency_a: Duration, latency_b: Duration, latency_c: Duration) -> ChainRun {
    let a = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
    let own_work = ms(20);

    let timer = ManualTimer::new();
    let t = &timer;
    let deadline = Deadline::after(t.now(), ms(200));
    let mut plan: Plan<'_, 3> = Plan::new(deadline, own_work);
    let steps = [&a, &b, &c].map(|p| plan.then(p).unwrap());
    let seen = RefCell::new(Vec::new());

    let (response, c_result) = timer
        .run(async {
            let mut rng = SplitMix64::new(0);
            let mut last = Ok("");
            for ((policy, step), latency) in [&a, &b, &c]
                .into_iter()
                .zip(steps)
                .zip([latency_a, latency_b, latency_c])
            {
                let call = Call::new(policy, deadline, plan.reserve(step));
                let called: Called<&'static str, ()> = Driver::new(call, t, &mut rng)
                    .run(
                        |_: &()| Outcome::Failed,
                        |limits| {
                            let seen_now = Seen {
                                start: t.now(),
                                limits,
                            };
                            seen.borrow_mut().push((policy.name(), seen_now));
                            sim(t, latency, Ok(policy.name()))
                        },
                    )
                    .await;
                last = called.result;
            }
            t.sleep_until(t.now() + own_work).await;
            (t.now(), last)
        })
        .unwrap();
    (response, seen.into_inner(), c_result)
}

#[test]
fn checkout_chain_responds_at_160_ms() {
    let (response, seen, c) = checkout_chain(ms(10), ms(105), ms(25));
    let names: Vec<_> = seen.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["A", "B", "C"]);
    let [(_, a), (_, b), (_, c_seen)] = [seen[0], seen[1], seen[2]];
    // A starts at 0 with min(200 - 0 - 50, 50) = 50; B at 10 with min(200 - 10 - 20, 110) =
    // 110; C at 115 with min(200 - 115 - 20, 60) = 60.
    assert_eq!(
        (a.start, a.limits.timeout()),
        (Instant::from_millis(0), ms(50))
    );
    assert_eq!(
        (b.start, b.limits.timeout()),
        (Instant::from_millis(10), ms(110))
    );
    assert_eq!(
        (c_seen.start, c_seen.limits.timeout()),
        (Instant::from_millis(115), ms(60))
    );
    assert_eq!(c, Ok("C"));
    assert_eq!(response, Instant::from_millis(160));
}

#[test]
fn checkout_slow_case_skips_c_and_responds_at_176_ms() {
    let (response, seen, c) = checkout_chain(ms(48), ms(108), ms(25));
    // C is never called: only A and B saw an attempt.
    let names: Vec<_> = seen.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["A", "B"]);
    // C would start at 156 ms with min(200 - 156 - 20, 60) = 24 ms < its 25 ms floor.
    match c {
        Err(CallError::Skipped(s)) => {
            assert_eq!(s.available(), ms(24));
            assert_eq!(s.floor(), ms(25));
        }
        other => panic!("C should be skipped, got {other:?}"),
    }
    assert_eq!(response, Instant::from_millis(176));
}

#[test]
fn retry_within_the_budget() {
    let timer = ManualTimer::new();
    let t = &timer;
    let backoff = ms(15);
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_backoff(Backoff::constant(backoff));
    let deadline = Deadline::after(t.now(), ms(200));
    // 100%: each original call banks one retry. Ten earlier calls have deposited.
    let budget = RetryBudget::percent(100).with_floor_per_sec(0);
    for _ in 0..10 {
        budget.deposit(t.now());
    }
    let before = budget.balance();
    let call = Call::new(&b, deadline, ms(20)).with_budget(&budget);
    let calls = Cell::new(0u32);
    let starts = RefCell::new(Vec::new());
    let (fail_after, answer_after) = (ms(20), ms(40));

    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(3)).run(classify, |limits: Limits| {
                let n = calls.get();
                calls.set(n + 1);
                starts.borrow_mut().push((t.now(), limits));
                let out = if n == 0 {
                    Err(DepError::Unavailable)
                } else {
                    Ok("price")
                };
                sim(t, if n == 0 { fail_after } else { answer_after }, out)
            }),
        )
        .unwrap();

    assert_eq!(called.result, Ok("price"));
    assert_eq!(calls.get(), 2);
    let r = called.report;
    assert_eq!(
        (r.attempts, r.retries, r.hedges, r.winner),
        (2, 1, 0, Some(1))
    );
    // The retry starts after the failure plus the backoff, with the timeout computed again
    // from the time left then.
    let starts = starts.into_inner();
    let retry_start = Instant::ZERO + fail_after + backoff;
    assert_eq!(starts[1].0, retry_start);
    assert_eq!(
        starts[1].1.timeout(),
        (deadline.remaining(retry_start) - ms(20)).min(b.cap())
    );
    assert_eq!(r.ended, retry_start + answer_after);
    // The original call deposited one token, the retry took one.
    assert_eq!(budget.balance(), before + 1 - 1);
}

#[test]
fn retry_refused_by_the_budget_is_not_made() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_floor(ms(30))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(15)));
    let budget = RetryBudget::percent(0).with_floor_per_sec(0);
    let call = Call::new(&b, Deadline::after(t.now(), ms(200)), ms(20)).with_budget(&budget);
    let calls = Cell::new(0u32);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(3)).run(classify, |_| {
            calls.set(calls.get() + 1);
            sim(t, ms(20), Err(DepError::Unavailable))
        }))
        .unwrap();
    assert_eq!(calls.get(), 1);
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
    assert_eq!(called.report.gave_up, Some(GiveUp::Throttled));
    assert_eq!(called.report.budget_refusals, 1);
    assert_eq!(called.report.ended, Instant::from_millis(20));
}

/// A hedge the budget refuses is asked for again one delay later, while its first copy runs:
/// the same hedge refused ten times is one refusal, not ten (the count says how many copies
/// the budget kept from the dependency).
#[test]
fn a_hedge_refused_again_and_again_is_one_refusal() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_hedge(HedgePolicy::new(ms(10), 1));
    let budget = RetryBudget::percent(0).with_floor_per_sec(0);
    let call = Call::new(&b, Deadline::after(t.now(), ms(200)), ms(0)).with_budget(&budget);
    let calls = Cell::new(0u32);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(3)).run(classify, |_| {
            calls.set(calls.get() + 1);
            sim(t, ms(105), Ok(()))
        }))
        .unwrap();
    assert_eq!(called.result, Ok(()));
    // Asked for at 10, 20, ... 100 ms, refused each time, never sent.
    assert_eq!(calls.get(), 1);
    assert_eq!(called.report.hedges, 0);
    assert_eq!(called.report.budget_refusals, 1);
}

/// A call whose first hedge is sent and whose second is refused, then asked for again and
/// refused again, counts one refusal: the second hedge's.
#[test]
fn a_hedge_sent_then_one_refused_twice_is_one_refusal() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(110))
        .with_hedge(HedgePolicy::new(ms(10), 2));
    // One token, the call's own deposit: the first hedge is sent at 10, the second refused
    // at 20 and again at 30.
    let budget = RetryBudget::percent(100).with_floor_per_sec(0);
    let call = Call::new(&b, Deadline::after(t.now(), ms(200)), ms(0)).with_budget(&budget);
    let calls = Cell::new(0u32);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(3)).run(classify, |_| {
            calls.set(calls.get() + 1);
            sim(t, ms(35), Ok(()))
        }))
        .unwrap();
    assert_eq!(called.result, Ok(()));
    assert_eq!((calls.get(), called.report.hedges), (2, 1));
    assert_eq!(called.report.budget_refusals, 1);
}

#[test]
fn hedge_wins_and_its_loser_is_cancelled() {
    let timer = ManualTimer::new();
    let t = &timer;
    let delay = ms(60);
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(30))
        .with_hedge(HedgePolicy::new(delay, 1));
    let deadline = Deadline::after(t.now(), ms(200));
    let call = Call::new(&b, deadline, ms(20));
    let (slow, fast) = (ms(140), ms(10));
    let dropped = [Rc::new(Cell::new(false)), Rc::new(Cell::new(false))];
    let completed = [Rc::new(Cell::new(false)), Rc::new(Cell::new(false))];
    let starts = RefCell::new(Vec::new());

    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(5)).run(classify, |limits: Limits| {
                let n = starts.borrow().len();
                starts.borrow_mut().push((t.now(), limits));
                let guard = DropGuard(dropped[n].clone());
                let done = completed[n].clone();
                let answer = sim(t, if n == 0 { slow } else { fast }, Ok::<_, DepError>(n));
                async move {
                    let _guard = guard;
                    let out = answer.await;
                    done.set(true);
                    out
                }
            }),
        )
        .unwrap();

    let starts = starts.into_inner();
    assert_eq!(starts.len(), 2);
    let hedge_at = Instant::ZERO + delay;
    assert_eq!(starts[1].0, hedge_at);
    // The hedge's timeout comes from the time left when it is sent.
    assert_eq!(
        starts[1].1.timeout(),
        (deadline.remaining(hedge_at) - ms(20)).min(b.cap())
    );
    assert_eq!(called.result, Ok(1));
    let r = called.report;
    assert!(r.hedge_won);
    assert_eq!(
        (r.attempts, r.hedges, r.winner, r.cancelled),
        (2, 1, Some(1), 1)
    );
    assert_eq!(r.ended, hedge_at + fast);
    // The first attempt was dropped before it could finish.
    assert!(dropped[0].get(), "the loser was not dropped");
    assert!(!completed[0].get(), "the loser ran to completion");
    assert!(completed[1].get() && dropped[1].get());
}

/// A hedged call whose first attempt fails with `first` after 50 ms while its hedge (sent at
/// 30 ms) fails with `hedge` after 40 ms. Returns the result, the report, the attempts
/// started, and whether the hedge's future was dropped unfinished.
fn hedged_failures(first: DepError, hedge: DepError) -> (Called<(), DepError>, u32, bool) {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(10))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5)))
        .with_hedge(HedgePolicy::new(ms(30), 2));
    let call = Call::new(&b, Deadline::after(t.now(), ms(300)), ms(0));
    let calls = Cell::new(0u32);
    let hedge_dropped = Rc::new(Cell::new(false));
    let hedge_done = Rc::new(Cell::new(false));
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            let guard = (n == 2).then(|| DropGuard(hedge_dropped.clone()));
            let done = hedge_done.clone();
            let (latency, out) = if n == 1 {
                (ms(50), first)
            } else {
                (ms(40), hedge)
            };
            let answer = sim(t, latency, Err::<(), _>(out));
            async move {
                let _guard = guard;
                let out = answer.await;
                if n == 2 {
                    done.set(true);
                }
                out
            }
        }))
        .unwrap();
    let cancelled = hedge_dropped.get() && !hedge_done.get();
    (called, calls.get(), cancelled)
}

#[test]
fn a_fatal_error_cancels_the_hedges_and_ends_the_call() {
    let (called, calls, hedge_cancelled) =
        hedged_failures(DepError::BadRequest, DepError::Unavailable);
    assert_eq!(calls, 2);
    assert!(hedge_cancelled, "the running hedge was not cancelled");
    assert_eq!(called.result, Err(CallError::Attempt(DepError::BadRequest)));
    assert_eq!(called.report.gave_up, Some(GiveUp::NotRetryable));
    assert_eq!(
        (called.report.cancelled, called.report.ended),
        (1, Instant::from_millis(50))
    );
}

#[test]
fn dont_retry_stops_hedges_and_retries_but_lets_running_copies_finish() {
    let (called, calls, hedge_cancelled) =
        hedged_failures(DepError::NoRetry, DepError::Unavailable);
    // The hedge sent at 30 ms ran to its end at 70 ms; no second hedge (due at 60 ms), no retry.
    assert_eq!(calls, 2);
    assert!(!hedge_cancelled);
    assert_eq!(called.result, Err(CallError::Attempt(DepError::NoRetry)));
    assert_eq!(called.report.gave_up, Some(GiveUp::ServerSaidNo));
    assert_eq!(called.report.ended, Instant::from_millis(70));
    // Without the server's word, the same failures are retried.
    let (called, calls, _) = hedged_failures(DepError::Unavailable, DepError::Unavailable);
    assert!(calls > 2);
    assert!(called.report.retries > 0);
}

/// A hedged call whose first copy answers `1` after 200 ms, while its hedge (sent at 30 ms)
/// fails after 40 ms and each retry answers its number after 10 ms; `retries` retries, 5 ms
/// of backoff, a 400 ms deadline. Returns the result, the report and when each attempt
/// started.
fn slow_first_failed_hedge(retries: u32) -> (Called<u32, DepError>, Vec<Instant>) {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(300))
        .with_floor(ms(10))
        .with_retries(retries)
        .with_backoff(Backoff::constant(ms(5)))
        .with_hedge(HedgePolicy::new(ms(30), 1));
    let call = Call::new(&b, Deadline::after(t.now(), ms(400)), ms(0));
    let starts = RefCell::new(Vec::new());
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(3)).run(classify, |_| {
            starts.borrow_mut().push(t.now());
            let n = u32::try_from(starts.borrow().len()).unwrap();
            let (latency, out) = match n {
                1 => (ms(200), Ok(1)),
                2 => (ms(40), Err(DepError::Unavailable)),
                _ => (ms(10), Ok(n)),
            };
            sim(t, latency, out)
        }))
        .unwrap();
    (called, starts.into_inner())
}

#[test]
fn a_failed_hedge_is_retried_while_the_slow_first_copy_runs() {
    // The hedge fails at 70 ms. Its retry does not wait for the first copy (due at 200 ms):
    // it starts after its backoff, at 75 ms, in the slot the hedge left, answers at 85 ms and
    // wins; the first copy is cancelled.
    let (called, starts) = slow_first_failed_hedge(2);
    assert_eq!(
        starts,
        [
            Instant::ZERO,
            Instant::from_millis(30),
            Instant::from_millis(75)
        ]
    );
    assert_eq!(called.result, Ok(3));
    let r = called.report;
    assert_eq!(
        (r.attempts, r.hedges, r.retries, r.winner, r.cancelled),
        (3, 1, 1, Some(2), 1)
    );
    assert_eq!(r.ended, Instant::from_millis(85));
}

#[test]
fn a_failed_hedge_with_no_retry_left_waits_for_the_first_copy() {
    // No retry allowed: the failure does not end the call while a copy still runs, and the
    // first copy's answer at 200 ms is the call's.
    let (called, starts) = slow_first_failed_hedge(0);
    assert_eq!(starts, [Instant::ZERO, Instant::from_millis(30)]);
    assert_eq!(called.result, Ok(1));
    let r = called.report;
    assert_eq!(
        (r.attempts, r.retries, r.winner, r.gave_up),
        (2, 0, Some(0), None)
    );
    assert_eq!(r.ended, Instant::from_millis(200));
}

/// A hedged call whose hedge (sent at 30 ms) fails after 10 ms, so that its retry backs off
/// from 40 ms to 60 ms, while the first copy fails at 50 ms, in the middle of that backoff,
/// with `first`; each retry answers its number after 10 ms. Two retries, a 400 ms deadline
/// ([`two_copies_fail`]). Returns the result, the report and when each attempt started.
fn server_word_during_a_backoff(first: DepError) -> (Called<u32, DepError>, Vec<Instant>) {
    two_copies_fail((50, first), (10, DepError::Unavailable))
}

#[test]
fn a_server_s_dont_retry_during_a_backoff_calls_off_the_retry() {
    // The hedge's failure at 40 ms gets a retry, due at 60 ms. The first copy's "do not retry"
    // at 50 ms stands for the whole call (gRFC A6): the retry is never made, and with no copy
    // left the call ends there, with the server's answer.
    let (called, starts) = server_word_during_a_backoff(DepError::NoRetry);
    assert_eq!(starts, [Instant::ZERO, Instant::from_millis(30)]);
    assert_eq!(called.result, Err(CallError::Attempt(DepError::NoRetry)));
    let r = called.report;
    assert_eq!((r.attempts, r.retries), (2, 0));
    assert_eq!(r.gave_up, Some(GiveUp::ServerSaidNo));
    assert_eq!(r.ended, Instant::from_millis(50));
}

#[test]
fn a_server_s_retry_after_during_a_backoff_postpones_the_retry() {
    // The retry due at 60 ms waits for the first copy's "retry after 40 ms", said at 50 ms: it
    // starts at 90 ms and answers at 100 ms.
    let (called, starts) = server_word_during_a_backoff(DepError::RetryAfter(ms(40)));
    assert_eq!(
        starts,
        [
            Instant::ZERO,
            Instant::from_millis(30),
            Instant::from_millis(90)
        ]
    );
    assert_eq!(called.result, Ok(3));
    let r = called.report;
    assert_eq!((r.attempts, r.retries, r.winner), (3, 1, Some(2)));
    assert_eq!(r.ended, Instant::from_millis(100));
}

/// A "retry after 1 s" said at 50 ms, during a backoff, of a call whose deadline is at
/// 400 ms: the wait would end past the deadline, so the retry is called off and, with no copy
/// left, the call ends there. (The backoff was moved past the deadline, and the call waited
/// for the deadline again and again, never ending.)
#[test]
fn a_server_s_retry_after_past_the_deadline_during_a_backoff_calls_off_the_retry() {
    let (called, starts) = server_word_during_a_backoff(DepError::RetryAfter(ms(1_000)));
    assert_eq!(starts, [Instant::ZERO, Instant::from_millis(30)]);
    assert!(called.result.is_err(), "{:?}", called.result);
    let r = called.report;
    assert_eq!((r.attempts, r.retries), (2, 0));
    assert!(
        matches!(r.gave_up, Some(GiveUp::BackoffPastDeadline { .. })),
        "{:?}",
        r.gave_up
    );
    assert_eq!(r.ended, Instant::from_millis(50));
}

/// A hedged call (a hedge at 30 ms) whose first copy fails with `first` after `first_ms` and
/// whose hedge fails with `hedge` after `hedge_ms`; each retry answers its number after
/// 10 ms. Two retries with a 20 ms backoff, a 400 ms deadline. Returns the result, the report
/// and when each attempt started.
fn two_copies_fail(
    first: (u64, DepError),
    hedge: (u64, DepError),
) -> (Called<u32, DepError>, Vec<Instant>) {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(300))
        .with_floor(ms(10))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(20)))
        .with_hedge(HedgePolicy::new(ms(30), 1));
    let call = Call::new(&b, Deadline::after(t.now(), ms(400)), ms(0));
    let starts = RefCell::new(Vec::new());
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(3)).run(classify, |_| {
            starts.borrow_mut().push(t.now());
            let n = u32::try_from(starts.borrow().len()).unwrap();
            let (latency, out) = match n {
                1 => (ms(first.0), Err(first.1)),
                2 => (ms(hedge.0), Err(hedge.1)),
                _ => (ms(10), Ok(n)),
            };
            sim(t, latency, out)
        }))
        .unwrap();
    (called, starts.into_inner())
}

/// The hedge's "retry after 500 ms", said at 40 ms, ends past the 400 ms deadline: no retry
/// then. The first copy's plain failure at 100 ms does not lift it (gRFC A6: the server's
/// word counts whenever it comes): no third request before 540 ms, so none at all. (The
/// failure at 100 ms was retried at 120 ms, 420 ms before the server's time.)
#[test]
fn a_server_s_retry_after_holds_when_another_copy_fails_later() {
    let (called, starts) = two_copies_fail(
        (100, DepError::Unavailable),
        (10, DepError::RetryAfter(ms(500))),
    );
    assert_eq!(starts, [Instant::ZERO, Instant::from_millis(30)]);
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
    let r = called.report;
    assert_eq!((r.attempts, r.retries), (2, 0));
    assert_eq!(
        r.gave_up,
        Some(GiveUp::BackoffPastDeadline {
            at: Instant::from_millis(540)
        })
    );
    assert_eq!(r.ended, Instant::from_millis(100));
}

/// Both copies fail at 40 ms, the first with "retry after 100 ms", the hedge plainly: the
/// retry waits for the server's time, 140 ms, whichever failure is heard last. (It started at
/// 60 ms, after the plain failure's backoff.)
#[test]
fn a_server_s_retry_after_holds_when_another_copy_fails_at_once() {
    let (called, starts) = two_copies_fail(
        (40, DepError::RetryAfter(ms(100))),
        (10, DepError::Unavailable),
    );
    assert_eq!(
        starts,
        [
            Instant::ZERO,
            Instant::from_millis(30),
            Instant::from_millis(140)
        ]
    );
    assert_eq!(called.result, Ok(3));
    let r = called.report;
    assert_eq!((r.attempts, r.retries, r.winner), (3, 1, Some(2)));
    assert_eq!(r.ended, Instant::from_millis(150));
}

#[test]
fn hedge_uses_the_live_delay_when_given() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(30))
        .with_hedge(HedgePolicy::new(ms(60), 1));
    let call = Call::new(&b, Deadline::after(t.now(), ms(200)), ms(0));
    let live = ms(25);
    let starts = RefCell::new(Vec::new());
    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(5))
                .with_hedge_delay(Some(live))
                .run(classify, |_| {
                    starts.borrow_mut().push(t.now());
                    let n = starts.borrow().len();
                    sim(
                        t,
                        if n == 1 { ms(100) } else { ms(10) },
                        Ok::<_, DepError>(n),
                    )
                }),
        )
        .unwrap();
    assert_eq!(starts.into_inner(), [Instant::ZERO, Instant::ZERO + live]);
    assert_eq!(called.report.ended, Instant::ZERO + live + ms(10));
}

#[test]
fn not_idempotent_call_is_not_retried_after_a_timeout() {
    // (Nor hedged: a policy that is not idempotent cannot be given a hedge at all.)
    let timer = ManualTimer::new();
    let t = &timer;
    let pay = Policy::required("pay")
        .not_idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5)));
    let call = Call::new(&pay, Deadline::after(t.now(), ms(200)), ms(0));
    let dropped = Rc::new(Cell::new(false));
    let calls = Cell::new(0);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
            calls.set(calls.get() + 1);
            let guard = DropGuard(dropped.clone());
            let hang = sim(t, ms(1_000), Ok(()));
            async move {
                let _guard = guard;
                hang.await
            }
        }))
        .unwrap();
    assert_eq!(calls.get(), 1);
    assert!(dropped.get(), "the timed-out attempt was not dropped");
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(50) }))
    );
    assert_eq!(called.report.gave_up, Some(GiveUp::MayHaveRun));
    assert_eq!((called.report.timeouts, called.report.hedges), (1, 0));
    assert_eq!(called.report.ended, Instant::from_millis(50));
}

#[test]
fn a_connect_limit_that_runs_out_is_the_attempts_timeout() {
    // Each attempt may take 50 ms, of which 10 to connect; the host never answers, and each
    // connect gives up at its limit, well before the attempt's timeout.
    let timer = ManualTimer::new();
    let t = &timer;
    let dead = Policy::required("dead host")
        .idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_connect(ms(10))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5)));
    let call = Call::new(&dead, Deadline::after(t.now(), ms(200)), ms(0));
    let starts = RefCell::new(Vec::new());
    let called: Called<(), DepError> = timer
        .run(
            Driver::new(call, t, SplitMix64::new(0)).run(classify, |limits: Limits| {
                starts.borrow_mut().push(t.now());
                sim(t, limits.connect(), Err(DepError::ConnectTimedOut))
            }),
        )
        .unwrap();
    // Counted and retried as timeouts, and the call's error is the library's timeout after
    // the 10 ms the last attempt ran, not the connect error.
    assert_eq!(
        starts.into_inner(),
        [0, 15, 30].map(Instant::from_millis).to_vec()
    );
    assert_eq!((called.report.timeouts, called.report.retries), (3, 2));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(10) }))
    );
    assert_eq!(called.report.ended, Instant::from_millis(40));

    // Not idempotent: a connect that timed out is not repeated (the policy says so).
    let once = dead.with_idempotence(Idempotence::NotIdempotent);
    let call = Call::new(&once, Deadline::after(t.now(), ms(200)), ms(0));
    let called: Called<(), DepError> = timer
        .run(
            Driver::new(call, t, SplitMix64::new(0)).run(classify, |limits: Limits| {
                sim(t, limits.connect(), Err(DepError::ConnectTimedOut))
            }),
        )
        .unwrap();
    assert_eq!((called.report.attempts, called.report.timeouts), (1, 1));
    assert_eq!(called.report.gave_up, Some(GiveUp::MayHaveRun));
}

#[test]
fn not_idempotent_call_is_retried_when_refused() {
    let timer = ManualTimer::new();
    let t = &timer;
    let pay = Policy::required("pay")
        .not_idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5)));
    let call = Call::new(&pay, Deadline::after(t.now(), ms(200)), ms(0));
    let calls = Cell::new(0);
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
            calls.set(calls.get() + 1);
            let out = if calls.get() == 1 {
                Err(DepError::Refused)
            } else {
                Ok("paid")
            };
            sim(t, ms(1), out)
        }))
        .unwrap();
    assert_eq!(called.result, Ok("paid"));
    assert_eq!(calls.get(), 2);
}

#[test]
fn server_pushback_lengthens_the_backoff() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5)));
    let call = Call::new(&b, Deadline::after(t.now(), ms(500)), ms(0));
    let pushback = ms(120);
    let starts = RefCell::new(Vec::new());
    let called = timer
        .run(Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
            starts.borrow_mut().push(t.now());
            let first = starts.borrow().len() == 1;
            let out = if first {
                Err(DepError::RetryAfter(pushback))
            } else {
                Ok(())
            };
            sim(t, ms(10), out)
        }))
        .unwrap();
    assert_eq!(called.result, Ok(()));
    let starts = starts.into_inner();
    assert_eq!(starts[1], starts[0] + ms(10) + pushback);
}

#[test]
fn timed_out_attempt_is_dropped_and_retried() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(40))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5)));
    let deadline = Deadline::after(t.now(), ms(200));
    let call = Call::new(&b, deadline, ms(0));
    let dropped = Rc::new(Cell::new(false));
    let starts = RefCell::new(Vec::new());
    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(0)).run(classify, |limits: Limits| {
                starts.borrow_mut().push((t.now(), limits));
                let first = starts.borrow().len() == 1;
                let guard = first.then(|| DropGuard(dropped.clone()));
                let answer = sim(
                    t,
                    if first { ms(1_000) } else { ms(10) },
                    Ok::<_, DepError>(()),
                );
                async move {
                    let _guard = guard;
                    answer.await
                }
            }),
        )
        .unwrap();
    assert_eq!(called.result, Ok(()));
    assert!(dropped.get());
    let starts = starts.into_inner();
    // The first attempt's timeout fired at its `until`; the retry started a backoff later.
    assert_eq!(starts[1].0, starts[0].1.until() + ms(5));
    assert_eq!(called.report.timeouts, 1);
}

#[test]
fn deadline_reached_in_the_middle_of_a_backoff() {
    // A runtime that wakes every sleep 30 ms late: the backoff was planned to end before the
    // deadline, but the driver wakes after it, sees the clock, and starts nothing.
    let late = ms(30);
    let timer = ManualTimer::new().with_lateness(late);
    let t = &timer;
    let deadline = Deadline::after(t.now(), ms(100));
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(20)));
    let call = Call::new(&b, deadline, ms(0));
    let starts = RefCell::new(Vec::new());
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
            starts.borrow_mut().push(t.now());
            sim(t, ms(40), Err(DepError::Unavailable))
        }))
        .unwrap();
    // The attempt failed at 40 + 30 = 70 ms; the backoff was to end at 90 ms, before the
    // deadline, but the driver woke at 120 ms.
    assert_eq!(starts.into_inner(), [Instant::ZERO]);
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::DeadlineExceeded))
    );
    assert!(deadline.is_expired(called.report.ended));
    assert_eq!(called.report.gave_up, Some(GiveUp::DeadlinePassed));
}

#[test]
fn backoff_that_would_end_after_the_deadline_gives_up_at_once() {
    let timer = ManualTimer::new();
    let t = &timer;
    let deadline = Deadline::after(t.now(), ms(100));
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(70)));
    let call = Call::new(&b, deadline, ms(0));
    let calls = Cell::new(0);
    let failed_at = ms(40);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
            calls.set(calls.get() + 1);
            sim(t, failed_at, Err(DepError::Unavailable))
        }))
        .unwrap();
    assert_eq!(calls.get(), 1);
    assert_eq!(
        called.result,
        Err(CallError::Attempt(DepError::Unavailable))
    );
    // It fails fast: no waiting until the deadline.
    assert_eq!(called.report.ended, Instant::ZERO + failed_at);
    assert_eq!(
        called.report.gave_up,
        Some(GiveUp::BackoffPastDeadline {
            at: Instant::ZERO + failed_at + ms(70)
        })
    );
}

#[test]
fn required_call_under_its_floor_fails_uncalled() {
    let timer = ManualTimer::starting_at(Instant::from_millis(1_150));
    let t = &timer;
    let deadline = Deadline::after(Instant::ZERO, ms(2_000));
    let c = Policy::required("C")
        .with_cap(ms(2_000))
        .with_floor(ms(1_000));
    let call = Call::new(&c, deadline, ms(0));
    let invoked = Cell::new(false);
    let called: Called<(), DepError> = timer
        .run(Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
            invoked.set(true);
            sim(t, ms(1), Ok(()))
        }))
        .unwrap();
    assert!(!invoked.get(), "the attempt function was invoked");
    let left = deadline.remaining(t.now());
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::InsufficientTime {
            available: left,
            floor: c.floor()
        }))
    );
    assert!(!called.report.was_called());
    assert_eq!(called.report.ended, t.now());
}

#[test]
fn driver_future_is_send_when_its_parts_are() {
    fn assert_send<T: Send>(_: &T) {}
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_hedge(HedgePolicy::new(ms(10), 2));
    let budget = RetryBudget::percent(10).with_floor_per_sec(1);
    let call = Call::new(&b, Deadline::after(t.now(), ms(100)), ms(0)).with_budget(&budget);
    let mut rng = SplitMix64::new(0);
    let fut =
        Driver::new(call, t, &mut rng).run(classify, |_| sim(t, ms(5), Ok::<_, DepError>(1u8)));
    assert_send(&fut);
    assert_eq!(timer.run(fut).unwrap().result, Ok(1));
}

#[test]
fn dropping_the_driver_cancels_its_attempts() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_hedge(HedgePolicy::new(ms(10), 1));
    let call = Call::new(&b, Deadline::after(t.now(), ms(100)), ms(0));
    let dropped = [Rc::new(Cell::new(false)), Rc::new(Cell::new(false))];
    let n = Cell::new(0usize);
    // The request is abandoned at 30 ms: the caller stops waiting for the call.
    let abandon = t.sleep_until(Instant::from_millis(30));
    let driven = Driver::new(call, t, SplitMix64::new(0)).run(classify, |_| {
        let guard = DropGuard(dropped[n.get()].clone());
        n.set(n.get() + 1);
        let answer = sim(t, ms(80), Ok::<_, DepError>(()));
        async move {
            let _guard = guard;
            answer.await
        }
    });
    timer
        .run(async {
            let mut driven = std::pin::pin!(driven);
            let mut abandon = std::pin::pin!(abandon);
            std::future::poll_fn(|cx| {
                if abandon.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(());
                }
                let _ = driven.as_mut().poll(cx);
                std::task::Poll::Pending
            })
            .await;
        })
        .unwrap();
    // The first attempt and its hedge (sent at 10 ms) were both running, and both are gone.
    assert_eq!(n.get(), 2);
    assert!(dropped.iter().all(|d| d.get()));
}

#[test]
fn jitter_comes_from_the_injected_rng() {
    // Full jitter drawn from a fixed sequence: the low end of the range, then the high end.
    let timer = ManualTimer::new();
    let t = &timer;
    let base = ms(8);
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(
            Backoff::exponential(base)
                .with_max(ms(1_000))
                .with_jitter(Jitter::Full),
        );
    let call = Call::new(&b, Deadline::after(t.now(), ms(1_000)), ms(0));
    let starts = RefCell::new(Vec::new());
    let draws = [0, 0, u32::MAX, u32::MAX];
    let called: Called<(), DepError> = timer
        .run(
            Driver::new(call, t, Sequence::new(&draws)).run(classify, |_| {
                starts.borrow_mut().push(t.now());
                sim(t, ms(1), Err(DepError::Unavailable))
            }),
        )
        .unwrap();
    let s = starts.into_inner();
    assert_eq!(s.len(), 3);
    // First retry: uniform(0, base) at its low end; second: uniform(0, 2 base) at its top.
    assert_eq!(s[1], s[0] + ms(1));
    assert_eq!(s[2], s[1] + ms(1) + base * 2);
    assert_eq!(called.report.gave_up, Some(GiveUp::Exhausted));
}

/// What one attempt of a random scenario does.
#[derive(Debug, Clone, Copy)]
enum Step {
    Answer(u16),
    Fail(u16),
    Refuse(u16),
}

proptest! {
    /// Against random latencies, failures, policies and deadlines: no attempt starts at or
    /// after the deadline; every attempt's timeout is at least the floor and at most the time
    /// left less the reserve, and ends by the deadline; attempts stay within the cap and
    /// hedges within theirs; the driver itself never runs past the deadline.
    #[test]
    fn driver_keeps_the_invariants(
        budget_ms in 1u64..2_000,
        cap_ms in 1u64..1_000,
        floor_ms in 0u64..300,
        reserve_ms in 0u64..300,
        attempts in 0u32..6,
        base_ms in 0u64..200,
        jitter in 0usize..5,
        hedge in proptest::option::of((0u64..300, 0u32..4)),
        idempotent in any::<bool>(),
        steps in proptest::collection::vec((0u8..3, 0u16..1_500), 1..12),
        seed in any::<u64>(),
    ) {
        let jitter = [Jitter::None, Jitter::Full, Jitter::Equal, Jitter::Decorrelated, Jitter::Grpc][jitter];
        let mut policy = Policy::required("X").with_cap(ms(cap_ms)).with_floor(ms(floor_ms))
            .with_idempotence(if idempotent { Idempotence::Idempotent } else { Idempotence::NotIdempotent })
            .with_retries(attempts.saturating_sub(1)).with_backoff(Backoff::exponential(ms(base_ms)).with_max(ms(base_ms * 8)).with_jitter(jitter));
        if let Some((delay, max)) = hedge {
            if idempotent {
                policy = policy.with_hedge(HedgePolicy::new(ms(delay), max));
            }
        }
        let steps: Vec<Step> = steps
            .into_iter()
            .map(|(k, l)| match k { 0 => Step::Answer(l), 1 => Step::Fail(l), _ => Step::Refuse(l) })
            .collect();
        let timer = ManualTimer::starting_at(Instant::from_millis(7));
        let t = &timer;
        let deadline = Deadline::after(t.now(), ms(budget_ms));
        let reserve = ms(reserve_ms);
        let call = Call::new(&policy, deadline, reserve);
        let seen = RefCell::new(Vec::new());
        let called: Called<usize, DepError> = timer
            .run(Driver::new(call, t, SplitMix64::new(seed)).run(classify, |limits: Limits| {
                let n = seen.borrow().len();
                seen.borrow_mut().push((t.now(), limits));
                let (latency, out) = match steps[n % steps.len()] {
                    Step::Answer(l) => (l, Ok(n)),
                    Step::Fail(l) => (l, Err(DepError::Unavailable)),
                    Step::Refuse(l) => (l, Err(DepError::Refused)),
                };
                sim(t, ms(u64::from(latency)), out)
            }))
            .unwrap();
        let seen = seen.into_inner();
        let r = called.report;
        prop_assert_eq!(seen.len() as u32, r.attempts);
        for (start, limits) in &seen {
            prop_assert!(!deadline.is_expired(*start), "attempt at {:?}", start);
            prop_assert!(limits.timeout() >= policy.floor());
            prop_assert!(!limits.timeout().is_zero());
            prop_assert!(limits.timeout() <= deadline.remaining(*start).saturating_sub(reserve));
            prop_assert!(limits.timeout() <= policy.cap());
            prop_assert!(limits.until() <= deadline.instant());
        }
        prop_assert!(r.attempts - r.hedges <= policy.retry().attempts());
        prop_assert_eq!(r.attempts - r.hedges, r.retries + u32::from(r.was_called()));
        prop_assert!(r.hedges <= hedge.map_or(0, |(_, max)| max));
        if !idempotent {
            prop_assert_eq!(r.hedges, 0);
        }
        prop_assert!(r.ended <= deadline.instant());
        if let Ok(n) = called.result {
            prop_assert_eq!(r.winner, Some(n as u32));
        }
    }
}

/// A client library's own timer set to the attempt's deadline (reqwest's `timeout`, tonic's
/// `Channel`) fires at the same instant as the driver's, and its error (which the classifier
/// reads as a plain failure) is polled first: the attempt ran out of time all the same. It is
/// counted as a timeout, retried as one, and the call ends as the library's timeout (504),
/// never as the dependency's own failure (502).
#[test]
fn a_client_timer_at_the_attempts_deadline_is_the_attempts_timeout() {
    let timer = ManualTimer::new();
    let t = &timer;
    let slow = Policy::required("slow")
        .idempotent()
        .with_cap(ms(50))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5)));
    let call = Call::new(&slow, Deadline::after(t.now(), ms(500)), ms(0));
    let called: Called<(), DepError> = timer
        .run(
            Driver::new(call, t, SplitMix64::new(0)).run(classify, |limits: Limits| {
                // The client's timer fires at the attempt's deadline, with its own error.
                sim(t, limits.timeout(), Err(DepError::Unavailable))
            }),
        )
        .unwrap();
    assert_eq!((called.report.timeouts, called.report.retries), (2, 1));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(50) }))
    );
    assert_eq!(called.result.unwrap_err().http_status(), 504);
}

/// An attempt that does its whole call inside its first poll (a blocking socket read with the
/// attempt's limits, on the blocking runtime) takes its time there: the driver reads the clock
/// again when the attempt ends. A read that gave up at the attempt's deadline is the attempt's
/// timeout, and the retry after it gets the time that is really left, not the time left
/// before the first attempt ran.
#[test]
fn an_attempt_that_takes_its_time_inside_one_poll_is_timed() {
    let timer = ManualTimer::new();
    let t = &timer;
    let blocking = Policy::required("blocking")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5)));
    // 170 ms, keeping 20 ms for the work after the call.
    let call = Call::new(&blocking, Deadline::after(t.now(), ms(170)), ms(20));
    let timeouts = RefCell::new(Vec::new());
    let called: Called<(), DepError> = timer
        .run(
            Driver::new(call, t, SplitMix64::new(0)).run(classify, |limits: Limits| {
                timeouts.borrow_mut().push(limits.timeout());
                // The read blocks until its socket limit, the attempt's deadline, then fails.
                t.advance(limits.timeout());
                std::future::ready(Err(DepError::Unavailable))
            }),
        )
        .unwrap();
    // 100 ms, then 170 - 105 - 20 = 45 ms: the retry's timeout is what is really left.
    assert_eq!(*timeouts.borrow(), [ms(100), ms(45)]);
    assert_eq!((called.report.timeouts, called.report.retries), (2, 1));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(45) }))
    );
}
