//! The async-io timer's contract, under async-std and under smol, with no waiting.
//!
//! async-io has no virtual time, so these tests check only what needs none: an instant in the
//! past completes at the first poll; an instant in the future is pending at the first poll and
//! its sleep can be dropped (cancelled) without waking the task. Behaviour over time is tested
//! on these executors with the core's virtual-time timer (see the scenario suite).

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use deadline_core::{Clock, Instant, Timer};
use deadline_std::AsyncIoTimer;

/// Counts its wake-ups.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `fut` once with its own waker, from inside the executor's task.
async fn first_poll<F: Future>(fut: F, waker: &Waker) -> Poll<F::Output> {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(waker);
    let first = fut.as_mut().poll(&mut cx);
    // Yield once to the executor, so the runtime gets a turn with the timer registered.
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await;
    first
}

async fn contract() {
    let waker_state = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(waker_state.clone());
    let now = AsyncIoTimer.now();

    // In the past (and right now): ready at the first poll.
    let past = now.saturating_sub(Duration::from_millis(5));
    assert_eq!(
        first_poll(AsyncIoTimer.sleep_until(past), &waker).await,
        Poll::Ready(())
    );
    assert_eq!(
        first_poll(AsyncIoTimer.sleep_until(Instant::ZERO), &waker).await,
        Poll::Ready(())
    );

    // An hour ahead: pending at the first poll; dropped right after, it never wakes the task.
    let later = now + Duration::from_secs(3600);
    assert_eq!(
        first_poll(AsyncIoTimer.sleep_until(later), &waker).await,
        Poll::Pending
    );
    // Never: pending too, and no panic.
    assert_eq!(
        first_poll(AsyncIoTimer.sleep_until(Instant::MAX), &waker).await,
        Poll::Pending
    );
    assert_eq!(waker_state.0.load(Ordering::SeqCst), 0);
}

#[test]
fn contract_under_async_std() {
    async_std::task::block_on(contract());
}

#[test]
fn contract_under_smol() {
    smol::block_on(contract());
}

#[test]
fn the_clock_reads_the_same_time_as_the_std_clock() {
    let before = deadline_std::from_std(std::time::Instant::now());
    let t = AsyncIoTimer.now();
    let after = deadline_std::StdClock.now();
    assert!(before <= t && t <= after);
}
