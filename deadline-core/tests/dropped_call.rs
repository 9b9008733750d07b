//! A call whose caller goes away before it ends (a `select!` whose other branch won, a
//! `try_join!` whose other branch failed, a client that disconnected) is still counted, once,
//! with what it did: in the dependency's counters and on the `metrics` recorder.

use std::future::{Future, IntoFuture};
use std::task::Poll;

use deadline_core::policy::Backoff;
use deadline_core::runtime::scope_timeout;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Dependency, Instant, Policy, Timer, ms};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

static LEFT: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("left")
        .idempotent()
        .with_cap(ms(20))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5))),
);

/// Polls `work` on this thread's virtual clock until it ends or the clock reaches `at`, when
/// it is dropped unfinished (as a `select!` drops the branch that lost): its output, if it
/// ended first.
fn until<F: Future>(at: Instant, work: F) -> Option<F::Output> {
    let mut work = Box::pin(work);
    let mut timer = Box::pin(ManualRuntime::timer().sleep_until(at));
    ManualRuntime::block_on(std::future::poll_fn(move |cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }))
    .expect("the clock moves")
}

/// A call its caller left: attempt 0 hangs and times out at 20 ms, a 5 ms backoff, attempt 1
/// hangs, and the caller goes away at 30 ms (a `select!` whose other branch won). The call
/// counts once, with the timeout and the retry it made; nothing says it succeeded or that
/// its deadline passed. A call dropped before it started counts nothing, and one dropped
/// after it ended was counted when it ended, and is not counted again.
#[test]
fn a_call_dropped_before_it_ends_is_counted_with_what_it_did() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let start = ManualRuntime::now();
    let left = metrics::with_local_recorder(&recorder, || {
        until(
            start + ms(30),
            scope_timeout::<ManualRuntime, _>(ms(500), async {
                LEFT.run(|_| core::future::pending::<Result<(), ()>>())
                    .await
            }),
        )
    });
    assert!(left.is_none(), "the caller left first: {left:?}");
    assert_eq!(ManualRuntime::now(), start + ms(30));
    let counts = LEFT.counters().snapshot();
    assert_eq!(
        (
            counts.calls,
            counts.timeouts,
            counts.retries,
            counts.successes,
            counts.deadline_exceeded
        ),
        (1, 1, 1, 0, 0)
    );
    // The metrics recorder gets the same counts.
    let snapshot = snapshotter.snapshot().into_vec();
    let counter = |name: &str| {
        snapshot
            .iter()
            .find(|(key, ..)| key.key().name() == name)
            .map(|(.., value)| value)
    };
    assert_eq!(
        counter("deadline_calls_total"),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        counter("deadline_timeouts_total"),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        counter("deadline_retries_total"),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(counter("deadline_call_duration_seconds"), None);

    // Dropped before its first poll: it never started, and counts nothing.
    drop(LEFT.run(|_| async { Ok::<_, ()>(()) }).into_future());
    assert_eq!(LEFT.counters().snapshot().calls, 1);

    // Ended, then dropped: counted once, when it ended.
    let at = ManualRuntime::now() + ms(100);
    let answered = until(
        at,
        scope_timeout::<ManualRuntime, _>(ms(500), async {
            LEFT.run(|_| async { Ok::<_, ()>(()) }).await
        }),
    );
    assert_eq!(answered, Some(Ok(Ok(()))));
    let counts = LEFT.counters().snapshot();
    assert_eq!((counts.calls, counts.successes), (2, 1));
}
