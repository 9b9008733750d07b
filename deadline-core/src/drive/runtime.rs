//! [`Runtime`]: what the call site needs from a runtime, so that the same application code
//! runs on each of them.

use crate::deadline::Deadline;
use crate::rng::Rng;
use crate::timer::Timer;

/// A runtime as the call site sees it: its timer, its default random source, and where the
/// current deadline lives while a request's future runs.
///
/// The adapter crates implement it: `deadline_tokio::Tokio`, `deadline_std`'s
/// `AsyncIo` for async-std and smol and `Blocking` for plain threads (all three a
/// thread-local, set only while the scoped future is polled: [`ThreadDeadline`](crate::runtime::ThreadDeadline)), `deadline_embassy::Embassy` (a static behind a
/// critical section). A [`Dependency`](crate::Dependency) is built for one runtime, and its
/// one-line call reads everything else from it.
///
/// # Contract
///
/// [`enter`](Runtime::enter) makes `deadline` the one [`current`](Runtime::current) returns
/// while `f` runs, on the thread (or task) that runs it, and puts back what was there before
/// when `f` returns or unwinds. [`Scoped`](super::Scoped) calls it around every poll of the
/// future it wraps, so the deadline follows the future across threads and tasks.
pub trait Runtime: 'static {
    /// The runtime's timer.
    type Timer: Timer;
    /// The default random source for jitter: seeded from entropy where the platform has it.
    type Rng: Rng;

    /// The timer (a handle: cheap to make).
    fn timer() -> Self::Timer;

    /// A random source for one call's jitter, made as the call is. Every call makes one,
    /// and most draw nothing (a deadline-only dependency never does): a handle that reads its
    /// source only when it draws, as `deadline-std`'s and `deadline-embassy`'s are, costs
    /// such a call nothing.
    fn rng() -> Self::Rng;

    /// The current deadline, or `None` outside any scope.
    fn current() -> Option<Deadline>;

    /// Runs `f` with `deadline` as the current deadline (as it is: the caller takes the
    /// earlier of it and the enclosing one).
    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R;
}
