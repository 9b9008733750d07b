//! [`AsyncIoTimer`]: the core's async timer on `async-io`, the reactor under async-std and smol.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use deadline_core::{Clock, Instant, Timer};

use crate::clock::{StdClock, checked_to_std};

/// The core's [`Timer`] on [`async_io::Timer::at`]; its clock is [`StdClock`].
///
/// async-std and smol both drive their timers with `async-io`, so this one timer serves both
/// (and any other executor: `async-io` runs its own reactor thread when nobody else drives it).
///
/// async-io has no virtual time. The contract of [`Timer`] is tested here without waiting (an
/// instant in the past completes at the first poll; a future one is pending at the first poll
/// and cancels cleanly on drop); the behaviour of the library over time is tested on the
/// async-std and smol executors with the core's virtual-time timer instead.
///
/// ```
/// use deadline_core::{Clock, Timer};
/// use deadline_std::AsyncIoTimer;
///
/// smol::block_on(async {
///     let now = AsyncIoTimer.now();
///     AsyncIoTimer.sleep_until(now).await; // already due: completes at once
///     assert!(AsyncIoTimer.now() >= now);
/// });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AsyncIoTimer;

impl Clock for AsyncIoTimer {
    fn now(&self) -> Instant {
        StdClock.now()
    }
}

impl Timer for AsyncIoTimer {
    type Sleep = AsyncIoSleep;
    // async-io's timer compares its instant with the clock at each poll.
    const SLEEP_READS_CLOCK: bool = true;

    fn sleep_until(&self, at: Instant) -> AsyncIoSleep {
        // The core's "never" (no deadline and no cap), and an instant the platform cannot
        // represent, never come: a timer that is not in the reactor at all.
        let at = if at == Instant::MAX {
            None
        } else {
            checked_to_std(at)
        };
        AsyncIoSleep {
            timer: at.map_or_else(async_io::Timer::never, async_io::Timer::at),
        }
    }
}

/// The future of [`AsyncIoTimer::sleep_until`]: an [`async_io::Timer`] that completes with `()`.
/// Dropping it removes the timer from the reactor.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct AsyncIoSleep {
    timer: async_io::Timer,
}

impl Future for AsyncIoSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.timer).poll(cx).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use deadline_core::{Instant, Timer};

    use super::AsyncIoTimer;

    #[test]
    fn never_is_not_a_timer_in_the_reactor() {
        // `Instant::MAX` is some 585 000 years ahead: std can represent it on the usual
        // platforms, and async-io would keep it as a real timer entry.
        assert!(!AsyncIoTimer.sleep_until(Instant::MAX).timer.will_fire());
        assert!(
            AsyncIoTimer
                .sleep_until(Instant::from_secs(1))
                .timer
                .will_fire()
        );
    }
}
