//! The runtimes on std: [`AsyncIo`] (async-std, smol, anything on `async-io`) and
//! [`Blocking`] (plain threads), each with the current deadline in a thread-local.

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use deadline_core::runtime::{KeepsSent, Onward, Runtime, ThreadDeadline};
use deadline_core::{Clock, Deadline, Instant, Timer};

use crate::clock::StdClock;
use crate::entropy::Entropy;

/// A runtime on std threads whose timer is `T`: the current deadline in a thread-local set
/// around each poll of a scoped future ([`ThreadDeadline`]), so it follows the future across
/// an executor's threads, and [`Entropy`] for jitter. [`AsyncIo`] and [`Blocking`] are its
/// two forms.
#[derive(Debug)]
pub struct OnThreads<T> {
    timer: PhantomData<fn() -> T>,
}

impl<T: Timer + Default + 'static> Runtime for OnThreads<T> {
    type Timer = T;
    type Rng = Entropy;
    const KEEPS_SENT: bool = true;

    fn timer() -> T {
        T::default()
    }

    fn rng() -> Entropy {
        Entropy
    }

    fn current() -> Option<Deadline> {
        ThreadDeadline::current()
    }

    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        ThreadDeadline::enter(deadline, f)
    }

    #[inline]
    fn enter_attempt<R>(deadline: Deadline, f: impl FnOnce() -> R) -> (R, Option<Onward>) {
        ThreadDeadline::enter_attempt(deadline, f)
    }
}

impl<T: Timer + Default + 'static> KeepsSent for OnThreads<T> {
    #[inline]
    fn note_sent(onward: Onward) {
        ThreadDeadline::note_sent(onward);
    }
}

/// async-std and smol (and any executor whose timers run on `async-io`) as the core's
/// [`Runtime`]: [`AsyncIoTimer`](crate::AsyncIoTimer), [`Entropy`], and the current deadline
/// in a thread-local (feature `async-io`).
#[cfg(feature = "async-io")]
pub type AsyncIo = OnThreads<crate::AsyncIoTimer>;

/// Plain threads as the core's [`Runtime`]: the same async application code, run to its end
/// on the calling thread by [`Blocking::block_on`], with sleeps that block the thread
/// ([`ThreadTimer`]), [`Entropy`], and the current deadline in a thread-local.
///
/// An attempt whose body blocks (a `std::net` socket with the attempt's limits, see
/// [`crate::net`]) answers at its first poll, so there are no hedges (a hedge needs a second
/// attempt running beside a pending one) and such an attempt is never cut off from outside:
/// it enforces its own limits. (An attempt that returns pending, waiting on another thread,
/// is hedged and cut off at its timeout as on any runtime; what it waits on runs on until
/// its own limits end it.) Retries, backoffs, the budget and the breaker work as on any
/// runtime.
///
/// ```
/// use deadline_core::{Dependency, Policy, ms};
/// use deadline_std::Blocking;
///
/// static PRICING: Dependency<Blocking> =
///     Dependency::new(Policy::required("pricing").with_cap(ms(110)).with_floor(ms(30)));
///
/// let price = Blocking::block_on(deadline_core::runtime::scope_timeout::<Blocking, _>(ms(200), async {
///     PRICING
///         .run(|limits| async move {
///             assert_eq!(limits.timeout(), ms(110)); // min(200 - 20, 110)
///             Ok::<_, std::io::Error>(42) // a blocking call within `limits`
///         })
///         .reserve(ms(20))
///         .await
/// }));
/// assert_eq!(price.expect("inside its scope").unwrap(), 42);
/// ```
pub type Blocking = OnThreads<ThreadTimer>;

impl OnThreads<ThreadTimer> {
    /// Runs `future` to its end on this thread, parking it while the future waits: until
    /// something wakes it (work on another thread answering) or a [`ThreadSleep`] inside it
    /// is due (a scope's deadline, a backoff).
    ///
    /// Its sleeps are woken by this loop, so they must be polled by it: do not run another
    /// executor inside the future (another crate's `block_on` on this thread). That executor
    /// holds this loop in one poll, and a [`ThreadSleep`] it polls waits for a wake-up this
    /// loop cannot give until it returns: a scope inside it would never end.
    pub fn block_on<F: Future>(future: F) -> F::Output {
        crate::block_on::block_on(future)
    }
}

/// A [`Timer`] on [`StdClock`] for [`Blocking::block_on`]: the timer of the [`Blocking`]
/// runtime. There its sleep waits beside the rest of the future, and `block_on` wakes it at
/// its instant; polled anywhere else, it blocks the thread until then (on an async
/// executor, that executor's thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ThreadTimer;

impl Clock for ThreadTimer {
    fn now(&self) -> Instant {
        StdClock.now()
    }
}

impl Timer for ThreadTimer {
    type Sleep = ThreadSleep;
    const SLEEP_READS_CLOCK: bool = true;

    fn sleep_until(&self, at: Instant) -> ThreadSleep {
        ThreadSleep { at, kept: None }
    }
}

/// The sleep of [`ThreadTimer`]: ready once the clock reads its instant. Inside
/// [`Blocking::block_on`] it is pending until then, and `block_on` wakes it; elsewhere its
/// first poll blocks the thread until then. Dropped before then (its scope's work answered
/// first), it wakes nothing.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct ThreadSleep {
    at: Instant,
    /// The number `block_on` keeps its wake-up under, once it was polled pending there.
    kept: Option<u64>,
}

impl Future for ThreadSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if StdClock.now() < self.at {
            let kept = crate::block_on::wake_at(self.at, cx.waker(), self.kept);
            if kept.is_some() {
                self.kept = kept;
                return Poll::Pending;
            }
        }
        // Due, or outside `block_on` (nothing there would wake it): no waiting, or the
        // thread's own.
        crate::blocking::Sleeper::sleep_until(&crate::blocking::ThreadSleeper, self.at);
        Poll::Ready(())
    }
}

impl Drop for ThreadSleep {
    fn drop(&mut self) {
        if let Some(id) = self.kept {
            crate::block_on::forget(id);
        }
    }
}
