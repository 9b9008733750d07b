//! The clock, the timer and the current deadline, in paused (virtual) time.

use std::time::Duration;

use deadline_core::call::Decision;
use deadline_core::statement::{StatementDecision, StatementPolicy};
use deadline_core::{Clock, Deadline, Error, Instant, Policy, Timer, ms};
use deadline_tokio::low_level::with_deadline;
use deadline_tokio::low_level::{decide, decide_statement, within};
use deadline_tokio::time::{TokioClock, TokioTimer, from_tokio, to_tokio};
use deadline_tokio::{current, propagate, remaining, scope, scope_timeout};

mod budget;
use budget::{poll_starved, spend_budget};

#[tokio::test(start_paused = true)]
async fn the_clock_follows_paused_time() {
    let t0 = TokioClock.now();
    tokio::time::advance(ms(10)).await;
    assert_eq!(TokioClock.now() - t0, ms(10));
    tokio::time::sleep(Duration::from_micros(2_500)).await;
    // tokio's timer wakes on whole milliseconds: 12.5 ms rounds up to 13.
    assert_eq!(TokioClock.now() - t0, ms(13));
    assert_eq!(TokioTimer.now(), TokioClock.now());
}

#[tokio::test(start_paused = true)]
async fn the_timer_sleeps_until_the_instant_and_no_longer() {
    let t0 = TokioTimer.now();
    TokioTimer.sleep_until(t0 + ms(160)).await;
    assert_eq!(TokioTimer.now() - t0, ms(160));
    // An instant in the past completes at once, with no time passing.
    TokioTimer.sleep_until(t0).await;
    assert_eq!(TokioTimer.now() - t0, ms(160));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_that_never_comes_does_not_panic_and_does_not_fire() {
    let sleep = TokioTimer.sleep_until(Instant::MAX);
    let raced = tokio::time::timeout(Duration::from_secs(3600), sleep).await;
    assert!(
        raced.is_err(),
        "Instant::MAX must not complete within an hour"
    );
}

#[tokio::test(start_paused = true)]
async fn conversions_round_trip_to_the_microsecond() {
    let now = tokio::time::Instant::now();
    let core = from_tokio(now);
    assert!(to_tokio(core) <= now);
    assert!(now - to_tokio(core) < Duration::from_micros(1));
    assert_eq!(from_tokio(to_tokio(core + ms(7))), core + ms(7));
    // A tokio instant long before the origin saturates to the origin, it does not panic.
    let early = now.checked_sub(Duration::from_secs(10 * 86_400));
    if let Some(early) = early {
        assert_eq!(from_tokio(early), Instant::ZERO);
    }
}

#[tokio::test(start_paused = true)]
async fn outside_a_scope_there_is_no_deadline() {
    assert_eq!(current(), None);
    assert_eq!(remaining(), None);
}

#[tokio::test(start_paused = true)]
async fn nested_scopes_only_shorten_the_deadline() {
    let t0 = TokioClock.now();
    let outer = Deadline::after(t0, ms(200));
    scope(outer, async {
        // Asking for more than the outer deadline: capped at the outer one.
        scope(Deadline::after(t0, ms(300)), async {
            assert_eq!(current(), Some(outer));
        })
        .await
        .expect("inside its scope");
        // Asking for less: the inner deadline is the shorter one.
        let inner = Deadline::after(t0, ms(80));
        scope(inner, async {
            assert_eq!(current(), Some(inner));
            scope_timeout(ms(500), async {
                assert_eq!(current(), Some(inner));
            })
            .await
            .expect("inside its scope");
        })
        .await
        .expect("inside its scope");
        // Back outside the inner scope, the outer deadline again.
        assert_eq!(current(), Some(outer));
    })
    .await
    .expect("inside its scope");
}

#[tokio::test(start_paused = true)]
async fn the_time_left_shrinks_with_the_clock_and_stops_at_zero() {
    // Past its deadline on purpose: the deadline is set, not enforced.
    let deadline = Deadline::after(TokioClock.now(), ms(200));
    with_deadline(deadline, async {
        assert_eq!(remaining(), Some(ms(200)));
        tokio::time::sleep(ms(115)).await;
        assert_eq!(remaining(), Some(ms(85)));
        assert!(!current().unwrap().is_expired(TokioClock.now()));
        tokio::time::sleep(ms(100)).await;
        assert_eq!(remaining(), Some(Duration::ZERO));
        assert!(current().unwrap().is_expired(TokioClock.now()));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn spawned_tasks_see_the_deadline_only_when_propagated() {
    scope_timeout(ms(200), async {
        let lost = tokio::spawn(async { current() }).await.unwrap();
        assert_eq!(lost, None);
        let kept = tokio::spawn(propagate(async { remaining() }))
            .await
            .unwrap();
        assert_eq!(kept, Some(ms(200)));
    })
    .await
    .expect("inside its scope");
}

#[tokio::test(start_paused = true)]
async fn checkout_timeouts_come_from_the_task_local_deadline() {
    let a = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
    let t0 = TokioClock.now();
    scope_timeout(ms(200), async {
        // A's reserve: own work 20 + B's floor 30.
        assert_eq!(decide(&a, ms(50)).timeout(), Some(ms(50)));
        tokio::time::sleep(ms(10)).await;
        assert_eq!(decide(&b, ms(20)).timeout(), Some(ms(110)));
        tokio::time::sleep(ms(105)).await;
        assert_eq!(decide(&c, ms(20)).timeout(), Some(ms(60)));
    })
    .await
    .expect("inside its scope");
    let slow = Deadline::after(t0, ms(200));
    tokio::time::sleep_until(to_tokio(t0 + ms(156))).await;
    scope(slow, async {
        let Decision::Skip(s) = decide(&c, ms(20)) else {
            panic!("C must be skipped at 156 ms");
        };
        assert_eq!((s.available(), s.floor()), (ms(24), ms(25)));
    })
    .await
    .expect("inside its scope");
}

/// Sets a flag when dropped: shows that a cut-off call's future is dropped, not left running.
struct DropFlag<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for DropFlag<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn within_runs_the_call_under_its_own_deadline_and_drops_it_at_the_timeout() {
    use std::sync::atomic::{AtomicBool, Ordering};

    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let dropped = AtomicBool::new(false);
    let t0 = TokioClock.now();
    scope_timeout(ms(200), async {
        let limits = decide(&b, ms(20)).limits().unwrap();
        let seen = within(limits, async {
            let _flag = DropFlag(&dropped);
            let inner = remaining();
            tokio::time::sleep(ms(500)).await;
            inner
        })
        .await;
        assert_eq!(seen, Err(Error::Timeout { after: ms(110) }));
        assert!(
            dropped.load(Ordering::SeqCst),
            "the cut-off call was not dropped"
        );
        // Cut off exactly at the call's timeout, not at the request deadline.
        assert_eq!(TokioClock.now() - t0, ms(110));
    })
    .await
    .expect("inside its scope");
}

/// The future is polled before the timer, as tokio's own timeout does: a future that is
/// ready wins even when its timeout has come; one that is pending then is cut off at that
/// poll, with no time passing.
#[tokio::test(start_paused = true)]
async fn within_polls_the_future_first_and_cuts_off_a_pending_one_whose_time_is_up() {
    let b = Policy::required("B").with_cap(ms(50));
    let limits = decide(&b, ms(0)).limits().unwrap();
    tokio::time::advance(ms(80)).await;
    assert_eq!(within(limits, async { 7 }).await, Ok(7));
    let t0 = TokioClock.now();
    let late = within(limits, std::future::pending::<()>()).await;
    assert_eq!(late, Err(Error::Timeout { after: ms(50) }));
    assert_eq!(TokioClock.now(), t0);
    // A future pending at its first poll and ready before its timeout: its answer, at once.
    let limits = decide(&b, ms(0)).limits().unwrap();
    let quick = within(limits, async {
        tokio::task::yield_now().await;
        tokio::time::sleep(ms(10)).await;
        "quick"
    });
    assert_eq!(quick.await, Ok("quick"));
    assert_eq!(TokioClock.now() - t0, ms(10));
}

/// A future that uses up the task's cooperative budget at every poll, and never answers.
async fn always_busy() {
    loop {
        tokio::task::consume_budget().await;
    }
}

/// Polls `fut` once, in a fresh poll of the task (with a whole cooperative budget).
async fn poll_once<F: std::future::Future + Unpin>(fut: &mut F) -> std::task::Poll<F::Output> {
    tokio::task::yield_now().await;
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *fut).poll(cx))).await
}

/// A future that uses up the task's budget at every poll is still cut off at its timeout:
/// the timer is read all the same, as tokio's own timeout does (polled with no budget left,
/// tokio's timer answers "pending", whatever the time). With no budget left, its "pending"
/// past the timeout could be the budget's (see the next test): it is polled once more, in
/// the task's next poll, and cut off there.
#[tokio::test(start_paused = true)]
async fn within_cuts_off_a_future_that_uses_up_the_budget() {
    let b = Policy::required("B").with_cap(ms(50));
    let limits = decide(&b, ms(0)).limits().unwrap();
    let mut call = Box::pin(within(limits, always_busy()));
    assert!(poll_once(&mut call).await.is_pending());
    tokio::time::advance(ms(60)).await;
    assert!(poll_once(&mut call).await.is_pending(), "one more poll");
    assert_eq!(
        poll_once(&mut call).await,
        std::task::Poll::Ready(Err(Error::Timeout { after: ms(50) }))
    );
}

/// A future whose answer is ready at its timeout keeps it, even when the task's cooperative
/// budget was spent before the poll (by other work of the task): a tokio resource then reads
/// "pending" whatever it holds, which is the budget's "pending", not the work's. The bound
/// gives the work one more poll, in the task's next poll with a fresh budget, and the answer
/// is kept. Work pending again at that poll is cut off.
#[tokio::test(start_paused = true)]
async fn within_keeps_an_answer_that_a_spent_budget_hid_at_its_timeout() {
    let b = Policy::required("B").with_cap(ms(50));
    let limits = decide(&b, ms(0)).limits().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let mut call = Box::pin(within(limits, rx));
    assert!(poll_once(&mut call).await.is_pending());
    tx.send(7).unwrap();
    tokio::time::advance(ms(60)).await;
    let starved = poll_starved(&mut call).await;
    assert!(
        starved.is_pending(),
        "cut off with its answer ready: {starved:?}"
    );
    assert_eq!(
        poll_once(&mut call).await,
        std::task::Poll::Ready(Ok(Ok(7)))
    );

    // Through the scheduler, as a task awaits it (the outer timeout only guards against a
    // hang, in virtual time; whether the bound itself wakes the task is checked by
    // `work_spared_one_more_poll_is_woken_for_it_and_then_ends`).
    let limits = decide(&b, ms(0)).limits().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let mut call = Box::pin(within(limits, rx));
    assert!(poll_once(&mut call).await.is_pending());
    tx.send(8).unwrap();
    tokio::time::advance(ms(60)).await;
    let answer = tokio::time::timeout(ms(1_000), async {
        std::future::poll_fn(|cx| {
            spend_budget(cx);
            std::task::Poll::Ready(())
        })
        .await;
        call.await
    })
    .await;
    assert_eq!(answer, Ok(Ok(Ok(8))));

    // Work that is still pending at that next poll is cut off there.
    let limits = decide(&b, ms(0)).limits().unwrap();
    let (_tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let mut call = Box::pin(within(limits, rx));
    assert!(poll_once(&mut call).await.is_pending());
    tokio::time::advance(ms(60)).await;
    assert!(poll_starved(&mut call).await.is_pending());
    assert_eq!(
        poll_once(&mut call).await,
        std::task::Poll::Ready(Err(Error::Timeout { after: ms(50) }))
    );
}

/// The same for a driven call: its attempt's timeout fires though the attempt uses up the
/// budget at every poll.
#[tokio::test(start_paused = true)]
async fn a_driven_attempt_that_uses_up_the_budget_is_cut_off_at_its_timeout() {
    let b = Policy::required("B").with_cap(ms(50));
    let attempt = |_| async {
        always_busy().await;
        Ok::<(), ()>(())
    };
    let mut call = Box::pin(deadline_tokio::low_level::drive(
        deadline_tokio::low_level::call(&b, ms(0)),
        deadline_core::rng::SplitMix64::new(1),
        |_: &()| deadline_core::Outcome::Failed,
        attempt,
    ));
    assert!(poll_once(&mut call).await.is_pending());
    tokio::time::advance(ms(60)).await;
    // With the budget spent, the attempt's "pending" could be the budget's: it is polled
    // once more, in the task's next poll, and cut off there.
    assert!(poll_once(&mut call).await.is_pending(), "one more poll");
    let std::task::Poll::Ready(called) = poll_once(&mut call).await else {
        panic!("the attempt was not cut off at its timeout");
    };
    assert_eq!(
        called.result.unwrap_err().library(),
        Some(Error::Timeout { after: ms(50) })
    );
    assert_eq!(called.report.timeouts, 1);
}

/// The same as for `within`, for a call through [`deadline_tokio::Dependency`] and for the
/// core's own scope on tokio: an attempt whose answer is ready at its timeout keeps it when
/// the task's budget was spent before the poll that finds it.
#[tokio::test(start_paused = true)]
async fn a_driven_call_and_a_core_scope_keep_an_answer_a_spent_budget_hid() {
    static SPARED: deadline_tokio::Dependency =
        deadline_tokio::Dependency::new(Policy::required("spared").with_cap(ms(50)));
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let mut rx = Some(rx);
    let mut call = Box::pin(
        SPARED
            .run(move |_| {
                let rx = rx.take().expect("one attempt");
                async move { rx.await.map_err(|_| ()) }
            })
            .into_future(),
    );
    assert!(poll_once(&mut call).await.is_pending());
    tx.send(7).unwrap();
    tokio::time::advance(ms(60)).await;
    assert!(
        poll_starved(&mut call).await.is_pending(),
        "cut off with its answer ready"
    );
    assert!(matches!(
        poll_once(&mut call).await,
        std::task::Poll::Ready(Ok(7))
    ));
    assert_eq!(SPARED.counters().snapshot().timeouts, 0);

    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let mut scope = Box::pin(deadline_core::runtime::scope_timeout::<
        deadline_tokio::Tokio,
        _,
    >(ms(50), rx));
    assert!(poll_once(&mut scope).await.is_pending());
    tx.send(8).unwrap();
    tokio::time::advance(ms(60)).await;
    assert!(poll_starved(&mut scope).await.is_pending());
    assert_eq!(
        poll_once(&mut scope).await,
        std::task::Poll::Ready(Ok(Ok(8)))
    );
}

/// Work that is really pending (not a tokio resource held back by the budget) and found so
/// at its timeout with the task's budget spent: the bound, the driver and the core's scope
/// each have the task woken for its one more poll at once, and end it there with their own
/// timeout. Without that wake-up, nothing would poll the task again until the outer timeout
/// of a second (a guard in virtual time) fired: the clock is checked to have not moved.
#[tokio::test(start_paused = true)]
async fn work_spared_one_more_poll_is_woken_for_it_and_then_ends() {
    async fn starved_then<F: std::future::Future + Unpin>(fut: &mut F) -> F::Output {
        std::future::poll_fn(|cx| {
            spend_budget(cx);
            std::task::Poll::Ready(())
        })
        .await;
        let before = tokio::time::Instant::now();
        let ended = fut.await;
        assert_eq!(tokio::time::Instant::now(), before, "not woken at once");
        ended
    }
    let b = Policy::required("B").with_cap(ms(50));
    let limits = decide(&b, ms(0)).limits().unwrap();
    let mut call = Box::pin(within(limits, std::future::pending::<()>()));
    assert!(poll_once(&mut call).await.is_pending());
    tokio::time::advance(ms(60)).await;
    let ended = tokio::time::timeout(ms(1_000), starved_then(&mut call)).await;
    assert_eq!(ended, Ok(Err(Error::Timeout { after: ms(50) })));

    static PENDING: deadline_tokio::Dependency =
        deadline_tokio::Dependency::new(Policy::required("pending").with_cap(ms(50)));
    let mut call = Box::pin(
        PENDING
            .run(|_| std::future::pending::<Result<(), ()>>())
            .into_future(),
    );
    assert!(poll_once(&mut call).await.is_pending());
    tokio::time::advance(ms(60)).await;
    let ended = tokio::time::timeout(ms(1_000), starved_then(&mut call)).await;
    assert!(
        matches!(&ended, Ok(Err(e)) if e.library() == Some(Error::Timeout { after: ms(50) })),
        "{ended:?}"
    );

    let mut scope = Box::pin(deadline_core::runtime::scope_timeout::<
        deadline_tokio::Tokio,
        _,
    >(ms(50), std::future::pending::<()>()));
    assert!(poll_once(&mut scope).await.is_pending());
    tokio::time::advance(ms(60)).await;
    let ended = tokio::time::timeout(ms(1_000), starved_then(&mut scope)).await;
    assert_eq!(ended, Ok(Err(Error::DeadlineExceeded)));
}

/// The one more poll is given before each cut: a retry whose answer a spent budget hid at its
/// own timeout keeps it, though the first attempt was spared one more poll too, and then cut.
#[tokio::test(start_paused = true)]
async fn a_retry_keeps_an_answer_a_spent_budget_hid_after_a_spared_attempt_was_cut() {
    static RETRIED: deadline_tokio::Dependency = deadline_tokio::Dependency::new(
        Policy::required("retried")
            .idempotent()
            .with_cap(ms(50))
            .with_retries(1)
            .with_backoff(deadline_core::policy::Backoff::constant(ms(5))),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    // The first attempt never answers; the second answers on `rx`.
    let mut answers = [None, Some(rx)].into_iter();
    let mut call = Box::pin(
        RETRIED
            .run(move |_| {
                let answer = answers.next().flatten();
                async move {
                    match answer {
                        None => std::future::pending().await,
                        Some(rx) => rx.await.map_err(|_| ()),
                    }
                }
            })
            .into_future(),
    );
    // Attempt 0 (never answers), spared one more poll at its timeout, then cut off.
    assert!(poll_once(&mut call).await.is_pending());
    tokio::time::advance(ms(60)).await;
    assert!(poll_starved(&mut call).await.is_pending());
    assert!(
        poll_once(&mut call).await.is_pending(),
        "cut off, backing off"
    );
    // Its retry, whose answer comes in time, found at its timeout with the budget spent.
    tokio::time::advance(ms(5)).await;
    assert!(poll_once(&mut call).await.is_pending(), "the retry started");
    tx.send(7).unwrap();
    tokio::time::advance(ms(60)).await;
    assert!(
        poll_starved(&mut call).await.is_pending(),
        "the retry was cut off with its answer ready"
    );
    assert!(matches!(
        poll_once(&mut call).await,
        std::task::Poll::Ready(Ok(7))
    ));
    assert_eq!(RETRIED.counters().snapshot().timeouts, 1);
}

#[tokio::test(start_paused = true)]
async fn statement_timeout_follows_the_current_deadline() {
    const ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).with_floor(ms(40));
    // Outside any scope: the cap.
    let outside = decide_statement(&ORDERS).timeout().map(|t| t.millis());
    assert_eq!(outside, Some(300));
    scope_timeout(ms(1000), async {
        tokio::time::sleep(ms(750)).await;
        let t = decide_statement(&ORDERS).timeout().unwrap();
        // 250 ms left, less the default margin of 5 ms.
        assert_eq!(t.to_string(), "SET LOCAL statement_timeout = 245");
        tokio::time::sleep(ms(206)).await;
        let StatementDecision::DontStart(s) = decide_statement(&ORDERS) else {
            panic!("44 ms left, 39 after the margin, must not start a query");
        };
        assert_eq!(s.available(), ms(39));
    })
    .await
    .expect("inside its scope");
}

/// Many scoped tasks interleaved on the worker threads of the multi-threaded runtime, each
/// yielding between reads: each sees its own deadline at every poll, whichever thread polls
/// it and whatever ran on that thread before; an unscoped task sees none. The current deadline
/// is set around each poll of the scoped future and put back after it, so nothing leaks from
/// one task into another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_task_sees_its_own_deadline_on_every_worker_thread() {
    let now = TokioClock.now();
    let mut tasks = Vec::new();
    for i in 0..16u64 {
        let deadline = Deadline::after(now, ms(1_000 + i));
        tasks.push(tokio::spawn(scope(deadline, async move {
            let mut seen = Vec::new();
            for _ in 0..64 {
                tokio::task::yield_now().await;
                seen.push(current());
            }
            (deadline, seen)
        })));
    }
    let unscoped = tokio::spawn(async {
        let mut seen = Vec::new();
        for _ in 0..64 {
            tokio::task::yield_now().await;
            seen.push(current());
        }
        seen
    });
    for task in tasks {
        let (deadline, seen) = task.await.unwrap().expect("inside its scope");
        assert!(
            seen.iter().all(|d| *d == Some(deadline)),
            "{deadline:?}: {seen:?}"
        );
    }
    assert!(unscoped.await.unwrap().iter().all(Option::is_none));
    assert_eq!(current(), None);
}
