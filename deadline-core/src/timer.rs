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
///   timer driver has run). The driver and [`scope`](crate::runtime::scope) read the clock
///   at every poll that finds their work pending, and trust the clock, not the wake-up.
/// - An `at` in the past completes at the next poll, or as soon as the runtime's timer has
///   caught up with the clock.
/// - Dropping the future cancels the sleep.
pub trait Timer: Clock {
    /// The future returned by [`Timer::sleep_until`].
    type Sleep: Future<Output = ()>;

    /// A future that completes once the clock reads `at` or later.
    fn sleep_until(&self, at: Instant) -> Self::Sleep;
}

impl<T: Timer + ?Sized> Timer for &T {
    type Sleep = T::Sleep;
    fn sleep_until(&self, at: Instant) -> Self::Sleep {
        (**self).sleep_until(at)
    }
}
