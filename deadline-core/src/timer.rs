//! [`Timer`]: the one thing an async runtime must give the driver: sleep until an instant.

use core::future::Future;

use crate::time::{Clock, Instant};

/// A runtime's timer over its own monotonic clock.
///
/// An adapter implements this by forwarding to the runtime's sleep (`tokio::time::sleep_until`,
/// `embassy_time::Timer::at`, `async_io::Timer::at`). The sleep is owned (no borrow of the
/// timer), so a driver can keep it in its own state without allocating.
///
/// # Contract
///
/// - The future completes at or after `at`, as read by [`Clock::now`] on the same value. A
///   timer may wake late, and may read pending at a poll after `at` (tokio's does until its
///   timer driver has run). The driver reads the clock at every poll and trusts it, not the
///   wake-up; so does [`scope`](crate::runtime::scope), at every poll that finds its work
///   pending, unless the timer says its sleep reads the clock
///   ([`Timer::SLEEP_READS_CLOCK`]).
/// - An `at` in the past completes at the next poll, or as soon as the runtime's timer has
///   caught up with the clock.
/// - Dropping the future cancels the sleep: it never completes. A runtime whose timer queue
///   cannot take a wake-up back (embassy's) may still wake the task once at `at`, for
///   nothing; a wake-up that leaves nothing to do is harmless to a future.
pub trait Timer: Clock {
    /// The future returned by [`Timer::sleep_until`].
    type Sleep: Future<Output = ()>;

    /// Whether the sleep reads the clock when it is polled, and so completes at any poll at
    /// or after its instant (embassy's, async-io's and the manual timer's do). Tokio's does
    /// not: it completes once tokio's timer driver has run, which on a loaded runtime can be
    /// after its task is polled. While this is `false` (the default),
    /// [`scope`](crate::runtime::scope) reads the clock itself at each poll that finds its
    /// work pending; a timer whose sleep reads it saves that read (and, on a
    /// microcontroller, its code).
    const SLEEP_READS_CLOCK: bool = false;

    /// A future that completes once the clock reads `at` or later.
    fn sleep_until(&self, at: Instant) -> Self::Sleep;

    /// Whether the task being polled has used up what its scheduler lets it do in one poll
    /// (tokio's cooperative budget): the runtime's resources then read pending whatever they
    /// hold, so work found pending in that poll may have its answer. The driver and
    /// [`scope`](crate::runtime::scope) give work they find pending at or past its timeout in
    /// such a poll one more poll, in the task's next, before they end it (never two in a
    /// row for the same work). `false` (the default) on a runtime with no such budget;
    /// a timer that wraps another (one that moves or records its sleeps) must forward it, or
    /// the rule is lost with it.
    #[inline]
    fn budget_spent(&self) -> bool {
        false
    }
}

impl<T: Timer + ?Sized> Timer for &T {
    type Sleep = T::Sleep;
    const SLEEP_READS_CLOCK: bool = T::SLEEP_READS_CLOCK;
    fn sleep_until(&self, at: Instant) -> Self::Sleep {
        (**self).sleep_until(at)
    }
    #[inline]
    fn budget_spent(&self) -> bool {
        (**self).budget_spent()
    }
}
