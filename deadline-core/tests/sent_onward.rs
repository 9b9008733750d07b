//! What an attempt sent onward decides how its failure counts: a next service that runs out
//! of the time it was told answers (a 504, an `UNAVAILABLE`) before the attempt's own end,
//! and through a client whose answer the library never sees (reqwest) it comes back as the
//! attempt's own error. Once what the attempt sent is running out
//! ([`Sent::running_out_from`]), such a failure is the attempt running out of time: counted
//! as a timeout, retried as one, and the call's error a timeout, never a failed dependency.
//!
//! An attempt that could send nothing ([`Onward::Nothing`]: its time was under the allowance
//! one hop keeps back) never reached the dependency, and the breaker does not count it. When
//! the call's time was short, the call is out of time, and no timeout counts it; when only the
//! attempt's own cap was, the attempt ran out of time: a timeout, which may be retried.
//!
//! Virtual time (`ManualRuntime`): every instant here is exact.

use deadline_core::breaker::BreakerConfig;
use deadline_core::drive::DeadlineOnly;
use deadline_core::runtime::{KeepsSent, Onward, note_sent, scope_timeout};
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::wire::{DeadlineHeader, Incoming, Propagation};
use deadline_core::{CallError, Clock, Dependency, Error, Outcome, Policy, Timer, ms};

/// Sends the time left until `deadline` onward, as an adapter does (5 ms kept per hop), and
/// tells the runtime.
fn send_time_left(deadline: deadline_core::Deadline) {
    let t = ManualRuntime::timer();
    let out = Propagation::DEFAULT
        .send(
            deadline,
            t.now(),
            Incoming::NONE,
            DeadlineHeader::DeadlineMs,
        )
        .unwrap();
    note_sent::<ManualRuntime>(&out.sent());
}

/// Sends the attempt's time left ([`send_time_left`]) and waits `after_ms` for the next
/// service's answer: a failure.
async fn sends_then_fails(
    deadline: deadline_core::Deadline,
    after_ms: u64,
) -> Result<(), &'static str> {
    send_time_left(deadline);
    let t = ManualRuntime::timer();
    t.sleep_until(t.now() + ms(after_ms)).await;
    Err("504 Gateway Timeout")
}

/// Waits `after_ms`, then fails, having sent nothing.
async fn fails(after_ms: u64) -> Result<(), &'static str> {
    let t = ManualRuntime::timer();
    t.sleep_until(t.now() + ms(after_ms)).await;
    Err("502 Bad Gateway")
}

/// One call to `dep` (a 100 ms cap) whose attempt sends its time left, 95 ms, and fails
/// `after_ms` in: what the call returned, and the timeouts `dep` counted.
fn sends_then_fails_after(
    dep: &'static Dependency<ManualRuntime, DeadlineOnly>,
    after_ms: u64,
) -> (Result<(), CallError<&'static str>>, u64) {
    let called = ManualRuntime::block_on(async {
        dep.run(|limits| sends_then_fails(limits.deadline(), after_ms))
            .await
    })
    .unwrap();
    (called, dep.counters().snapshot().timeouts)
}

#[test]
fn a_failure_once_what_was_sent_runs_out_is_a_timeout() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("a").with_cap(ms(100)));
    // Sent 95 ms (until 95); running out from 90 ms: the answer at 90 ms is the deadline's.
    assert_eq!(
        sends_then_fails_after(&DEP, 90),
        (Err(CallError::Library(Error::Timeout { after: ms(90) })), 1)
    );
}

#[test]
fn a_failure_before_what_was_sent_runs_out_is_the_dependencys() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("b").with_cap(ms(100)));
    // At 89 ms, 1 ms before the time sent is within the allowance of running out.
    assert_eq!(
        sends_then_fails_after(&DEP, 89),
        (Err(CallError::Attempt("504 Gateway Timeout")), 0)
    );
}

/// The answer that the time sent ran out came while the poll that finds it was under way:
/// the clock was read at the poll's start, 1 ms before the time sent was running out, and the
/// answer was there 1 ms after (a thread preempted between the two, on a busy machine). The
/// failure is the deadline's, as the clock says when it is seen, not as it said before. Like
/// everything that poll found, it is timed at the poll's start.
#[test]
fn a_failure_seen_after_the_polls_clock_read_is_judged_by_the_clock() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("late").with_cap(ms(100)));
    let called = ManualRuntime::block_on(async {
        DEP.run(|limits| async move {
            send_time_left(limits.deadline());
            let t = ManualRuntime::timer();
            // Woken at 89 ms (the driver reads the clock there), the answer is found 2 ms
            // into that poll, at 91 ms: running out from 90 ms.
            t.sleep_until(t.now() + ms(89)).await;
            t.advance(ms(2));
            Err::<(), _>("504 Gateway Timeout")
        })
        .await
    })
    .unwrap();
    assert_eq!(
        (called, DEP.counters().snapshot().timeouts),
        (Err(CallError::Library(Error::Timeout { after: ms(89) })), 1)
    );
}

#[test]
fn what_was_sent_before_the_call_is_not_the_attempts() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("c").with_cap(ms(100)));
    // The handler sends the time left itself, in its own scope, then makes the call: the
    // attempt sends nothing, and its failure at 90 ms of 100 is the dependency's.
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(100), async {
        let t = ManualRuntime::timer();
        let own = Propagation::DEFAULT
            .send(
                deadline_core::runtime::current::<ManualRuntime>().unwrap(),
                t.now(),
                Incoming::NONE,
                DeadlineHeader::DeadlineMs,
            )
            .unwrap();
        note_sent::<ManualRuntime>(&own.sent());
        DEP.run(|_| fails(90)).await
    }))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(called, Err(CallError::Attempt("502 Bad Gateway")));
    let counts = DEP.counters().snapshot();
    assert_eq!(counts.timeouts, 0);
}

#[test]
fn each_attempt_is_judged_by_what_it_sent() {
    static DEP: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("d")
            .idempotent()
            .with_cap(ms(100))
            .with_floor(ms(10))
            .with_retries(1),
    );
    // The first attempt sends nothing and fails at 90 ms of its 100: the dependency's
    // failure, retried. The retry sends its time left and its next service runs out of it:
    // a timeout, and the call's error.
    let mut tries = 0;
    let called = ManualRuntime::block_on(async {
        DEP.run(|limits| {
            tries += 1;
            let first = tries == 1;
            async move {
                if first {
                    fails(90).await
                } else {
                    sends_then_fails(limits.deadline(), limits.timeout().as_millis() as u64 - 10)
                        .await
                }
            }
        })
        .await
    })
    .unwrap();
    assert!(
        matches!(called, Err(CallError::Library(Error::Timeout { .. }))),
        "{called:?}"
    );
    let counts = DEP.counters().snapshot();
    assert_eq!((counts.retries, counts.timeouts), (1, 1));
}

#[test]
fn a_fatal_answer_stays_fatal() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("e").with_cap(ms(100)));
    // A 404 at 95 ms is the server's answer, not the deadline's.
    let called = ManualRuntime::block_on(async {
        DEP.run(|limits| sends_then_fails(limits.deadline(), 95))
            .classify(|_| Outcome::Fatal)
            .await
    })
    .unwrap();
    assert_eq!(called, Err(CallError::Attempt("504 Gateway Timeout")));
    assert_eq!(DEP.counters().snapshot().timeouts, 0);
}

#[test]
fn a_call_made_inside_an_attempt_does_not_take_what_the_attempt_sent() {
    static OUTER: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("outer").with_cap(ms(100)));
    static INNER: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("inner").with_cap(ms(50)));
    // The attempt sends its time left, then makes a call of its own in the same poll (one
    // that answers at once, having sent nothing), then its next service runs out.
    let called = ManualRuntime::block_on(async {
        OUTER
            .run(|limits| async move {
                send_time_left(limits.deadline());
                let t = ManualRuntime::timer();
                INNER.run(|_| async { Ok::<_, ()>(1) }).await.unwrap();
                t.sleep_until(t.now() + ms(90)).await;
                Err::<(), _>("504 Gateway Timeout")
            })
            .await
    })
    .unwrap();
    assert_eq!(
        called,
        Err(CallError::Library(Error::Timeout { after: ms(90) }))
    );
}

/// Sends the attempt's time left as an adapter does, and answers `after_ms` later; or, with
/// less time than the 5 ms allowance, sends nothing and says so, as an adapter does.
async fn sends_then_answers(
    deadline: deadline_core::Deadline,
    after_ms: u64,
) -> Result<u32, &'static str> {
    let t = ManualRuntime::timer();
    match Propagation::DEFAULT.send(
        deadline,
        t.now(),
        Incoming::NONE,
        DeadlineHeader::DeadlineMs,
    ) {
        Ok(out) => {
            note_sent::<ManualRuntime>(&out.sent());
            t.sleep_until(t.now() + ms(after_ms)).await;
            Ok(1)
        }
        Err(_) => {
            ManualRuntime::note_sent(Onward::nothing(Propagation::DEFAULT.needs()));
            Err("not sent: no time left to send")
        }
    }
}

#[test]
fn an_attempt_that_sends_nothing_is_out_of_time_not_a_timeout() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("f").with_cap(ms(100)));
    // 4 ms left: under the 5 ms allowance, nothing is sent.
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(
        ms(4),
        DEP.run(|limits| sends_then_answers(limits.deadline(), 1)),
    ))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(called, Err(CallError::Library(Error::DeadlineExceeded)));
    let counts = DEP.counters().snapshot();
    assert_eq!((counts.timeouts, counts.deadline_exceeded), (0, 1));
}

#[test]
fn a_hedge_that_sends_nothing_leaves_the_first_attempt_to_answer() {
    static DEP: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("g")
            .idempotent()
            .with_cap(ms(100))
            .with_retries(2)
            .with_hedge_after(ms(10))
            .with_hedges(2),
    )
    .breaker(BreakerConfig::DEFAULT);
    // 14 ms: the first attempt sends 9 ms; the hedge due at 10 ms has 4 ms, under the
    // allowance, and sends nothing. The first attempt's answer
    // (already on its way back at 11 ms) wins.
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(14), async {
        DEP.run(|limits| sends_then_answers(limits.deadline(), 11))
            .report()
            .await
    }))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(called.result, Ok(1));
    assert_eq!(
        (
            called.report.attempts,
            called.report.hedges,
            called.report.winner
        ),
        (2, 1, Some(0))
    );
    let counts = DEP.counters().snapshot();
    assert_eq!((counts.timeouts, counts.successes), (0, 1));
}

/// Waits `wait_ms` before sending (for a pooled connection, say), then sends the attempt's
/// time left or, with less than the allowance left, nothing ([`sends_then_answers`]).
async fn waits_then_sends(
    deadline: deadline_core::Deadline,
    wait_ms: u64,
) -> Result<u32, &'static str> {
    let t = ManualRuntime::timer();
    t.sleep_until(t.now() + ms(wait_ms)).await;
    sends_then_answers(deadline, 1).await
}

/// The attempt's own time (its 100 ms cap) ran short before it could send, with 900 ms of
/// the call's left: it ran out of time (the call's timeout, 504, never the deadline's), and
/// since the dependency never saw it, the breaker does not count it. Not the call's time: an
/// attempt starting then would have a whole cap.
#[test]
fn an_attempt_whose_own_cap_ran_short_before_sending_is_its_timeout() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("h").with_cap(ms(100)));
    // 96 ms waited: 4 ms of the cap left, under the 5 ms allowance.
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(
        ms(1_000),
        DEP.run(|limits| waits_then_sends(limits.deadline(), 96)),
    ))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(
        called,
        Err(CallError::Library(Error::Timeout { after: ms(96) }))
    );
    let counts = DEP.counters().snapshot();
    assert_eq!((counts.timeouts, counts.deadline_exceeded), (1, 0));
}

/// The same with retries: the retry, after its backoff, has a whole cap, sends and answers.
/// Retried as a timeout is (the call is idempotent); the breaker counts nothing against the
/// dependency, which never saw the first attempt.
#[test]
fn an_attempt_whose_own_cap_ran_short_before_sending_is_retried_as_a_timeout() {
    use core::cell::Cell;
    use deadline_core::breaker::BreakerState;

    static DEP: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("i")
            .idempotent()
            .with_cap(ms(100))
            .with_retries(2),
    )
    .breaker(BreakerConfig::DEFAULT.with_consecutive_failures(1));
    let made = Cell::new(0_u32);
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(1_000), async {
        DEP.run(|limits| {
            made.set(made.get() + 1);
            // The first waits 96 ms before sending; the retry sends at once.
            let wait = if made.get() == 1 { 96 } else { 0 };
            waits_then_sends(limits.deadline(), wait)
        })
        .report()
        .await
    }))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(called.result, Ok(1));
    assert_eq!((called.report.attempts, called.report.retries), (2, 1));
    let counts = DEP.counters().snapshot();
    assert_eq!((counts.timeouts, counts.deadline_exceeded), (1, 0));
    // One failure counted would have opened it, and refused the retry.
    assert_eq!(
        DEP.circuit_breaker().map(|b| b.state()),
        Some(BreakerState::Closed)
    );
}

/// Waits `wait_ms`, then sends nothing for want of `needed_ms` left, whatever it has.
async fn waits_then_refuses(wait_ms: u64, needed_ms: u64) -> Result<u32, &'static str> {
    let t = ManualRuntime::timer();
    t.sleep_until(t.now() + ms(wait_ms)).await;
    ManualRuntime::note_sent(Onward::nothing(ms(needed_ms)));
    Err("not sent")
}

/// An attempt that could not send is its own time's only when time was what stopped it and
/// a retry could do better. Not when no attempt could send (it needs more than the 100 ms
/// cap: a statement's floor above it, say), nor when it had what it needed and something
/// else stopped it (a timeout the request already carried): no retry follows, each would meet
/// the same refusal, and the call ends as out of time. These hold whether the refusal comes
/// at the attempt's start or 10 ms in; 94 ms in, it has exactly the 6 ms it needs.
#[test]
fn an_attempt_no_retry_could_help_is_not_retried() {
    static DEP: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("j")
            .idempotent()
            .with_cap(ms(100))
            .with_retries(2),
    );
    for (wait_ms, needed_ms) in [(0, 150), (10, 150), (0, 6), (10, 6), (94, 6)] {
        let before = DEP.counters().snapshot();
        let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(
            ms(1_000),
            DEP.run(|_| waits_then_refuses(wait_ms, needed_ms)).report(),
        ))
        .unwrap()
        .expect("inside its scope");
        let case = format!("waited {wait_ms} ms, needed {needed_ms} ms");
        assert_eq!(
            called.result,
            Err(CallError::Library(Error::DeadlineExceeded)),
            "{case}"
        );
        assert_eq!(called.report.attempts, 1, "{case}");
        let counts = DEP.counters().snapshot().since(&before);
        assert_eq!(
            (counts.timeouts, counts.deadline_exceeded),
            (0, 1),
            "{case}"
        );
    }
}

/// 95 ms in, with 5 ms of the 6 it needs: its own time, a timeout. A call that is not
/// idempotent does not retry it, as it does not retry a timeout (the library cannot see
/// whatever else the attempt may have sent before it refused).
#[test]
fn an_attempt_that_ran_out_of_its_own_time_is_not_retried_when_not_idempotent() {
    static DEP: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("k")
            .not_idempotent()
            .with_cap(ms(100))
            .with_retries(2),
    );
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(
        ms(1_000),
        DEP.run(|_| waits_then_refuses(95, 6))
            .classify(|_| Outcome::Refused)
            .report(),
    ))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(95) }))
    );
    assert_eq!(called.report.attempts, 1);
    assert_eq!(called.report.timeouts, 1);
}

/// Its own time ran short 96 ms in, with 14 ms of the call's 110 left: an attempt starting then
/// would have the 6 ms it needs, and a retry is decided; after its 9 ms backoff it has 5, is
/// refused in turn, having sent nothing (that lack is the call's: no attempt could do
/// better), and the call ends with the first attempt's timeout. Nothing was sent either time.
#[test]
fn a_retry_left_less_than_it_needs_by_its_backoff_ends_the_call() {
    use deadline_core::policy::Backoff;

    static DEP: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("l")
            .idempotent()
            .with_cap(ms(100))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(9))),
    );
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(
        ms(110),
        DEP.run(|limits| {
            // The first waits 96 ms; the retry is refused at once.
            let wait = if limits.timeout() > ms(50) { 96 } else { 0 };
            waits_then_refuses(wait, 6)
        })
        .report(),
    ))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::Timeout { after: ms(96) }))
    );
    assert_eq!((called.report.attempts, called.report.timeouts), (2, 1));
}

/// The attempt refuses by its own clock, later in the poll than the driver's reading of it (a
/// poll takes time): 90 ms in, its poll takes 0.5 ms, and it is refused with 9.5 ms of the 10
/// it needs. Judged by the poll's reading (10 ms left) it would have had what it needed, and
/// the call would end as the deadline's with 910 ms left; the clock read again says its own
/// time ran short: its timeout.
#[test]
fn a_refusal_is_judged_by_the_clock_after_the_poll_that_found_it() {
    static DEP: Dependency<ManualRuntime, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("m").with_cap(ms(100)));
    let called = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(
        ms(1_000),
        DEP.run(|_| async {
            let t = ManualRuntime::timer();
            t.sleep_until(t.now() + ms(90)).await;
            // This poll takes half a millisecond before it refuses.
            t.clock().advance(core::time::Duration::from_micros(500));
            ManualRuntime::note_sent(Onward::nothing(ms(10)));
            Err::<u32, _>("not sent")
        }),
    ))
    .unwrap()
    .expect("inside its scope");
    assert_eq!(
        called,
        Err(CallError::Library(Error::Timeout { after: ms(90) }))
    );
    let counts = DEP.counters().snapshot();
    assert_eq!((counts.timeouts, counts.deadline_exceeded), (1, 0));
}
