//! Simulated dependencies: they answer after a given latency, on the runtime's own timer.

use core::future::{Future, poll_fn};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

use deadline_core::{Instant, Timer, ms};

/// How much of a simulated latency is spent yielding to the runtime rather than asleep.
///
/// Runtime timers wake late: tokio's by up to a millisecond (its timer has millisecond
/// resolution), any of them by the time the thread takes to be scheduled. A simulated
/// dependency sleeps on the runtime's timer until this long before its answer is due, then
/// yields to the runtime until the clock reads the instant, so it answers on time to within
/// microseconds and the example's timeline matches the worked example to the millisecond.
pub const SPIN: Duration = ms(5);

/// Waits until `timer`'s clock reads `at`: asleep on the runtime's timer for all but the last
/// [`SPIN`], then yielding to the runtime. On a virtual-time timer the last stretch is a
/// sleep like the rest (the timer's sleep until `at` is polled on every yield).
pub async fn until<T: Timer>(timer: T, at: Instant) {
    timer.sleep_until(at.saturating_sub(SPIN)).await;
    let mut sleep = pin!(timer.sleep_until(at));
    poll_fn(|cx| {
        if sleep.as_mut().poll(cx).is_ready() || timer.now() >= at {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// A dependency that answers `answer` `latency` after it is called.
pub fn dependency<T: Timer + Copy, V>(
    timer: T,
    latency: Duration,
    answer: V,
) -> impl Future<Output = V> {
    let at = timer.now().saturating_add(latency);
    async move {
        until(timer, at).await;
        answer
    }
}
