//! [`ManualRuntime`]: a [`Runtime`] on virtual time, for tests and simulations (feature
//! `test-util`).

use core::future::Future;

use crate::deadline::Deadline;
use crate::rng::SplitMix64;
use crate::time::{Clock, Instant};

use super::manual::{ManualTimer, Stalled};
use super::runtime::{KeepsSent, Onward, Runtime};
use super::thread_deadline::ThreadDeadline;

std::thread_local! {
    /// Each thread's virtual clock: tests running side by side do not share one.
    static TIMER: &'static ManualTimer = std::boxed::Box::leak(std::boxed::Box::new(ManualTimer::new()));
    /// Each call's jitter seed on this thread, counted up from 1.
    static SEED: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// A [`Runtime`] on virtual time: each thread has its own [`ManualTimer`], whose clock moves
/// only when every future it runs is waiting ([`ManualRuntime::block_on`]); the current
/// deadline lives in a thread-local ([`ThreadDeadline`]); jitter comes from a [`SplitMix64`]
/// seeded from a per-thread count, so a test gives the same answer every run.
///
/// ```
/// use deadline_core::runtime::scope_timeout;
/// use deadline_core::virtual_time::ManualRuntime;
/// use deadline_core::{Clock, Dependency, Policy, Timer, ms};
///
/// static PRICING: Dependency<ManualRuntime> =
///     Dependency::new(Policy::required("pricing").with_cap(ms(110)).with_floor(ms(30)));
///
/// let price = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(200), async {
///     PRICING
///         .run(|limits| async move {
///             assert_eq!(limits.timeout(), ms(110)); // min(200 - 20, 110)
///             let t = ManualRuntime::timer();
///             t.sleep_until(t.now() + ms(30)).await; // the dependency's latency
///             Ok::<_, ()>(42)
///         })
///         .reserve(ms(20))
///         .await
/// }));
/// assert_eq!(price, Ok(Ok(Ok(42)))); // the clock moved; the scope held; the call answered
/// assert_eq!(PRICING.counters().snapshot().successes, 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ManualRuntime;

impl ManualRuntime {
    /// This thread's virtual clock.
    #[must_use]
    pub fn timer() -> &'static ManualTimer {
        TIMER.with(|t| *t)
    }

    /// This thread's virtual clock's reading.
    #[must_use]
    pub fn now() -> Instant {
        Self::timer().now()
    }

    /// Runs `future` to completion on this thread's virtual clock.
    ///
    /// # Errors
    ///
    /// [`Stalled`] when the future waits on something that is not a sleep of the clock.
    pub fn block_on<F: Future>(future: F) -> Result<F::Output, Stalled> {
        Self::timer().run(future)
    }
}

impl Runtime for ManualRuntime {
    type Timer = &'static ManualTimer;
    type Rng = SplitMix64;
    const KEEPS_SENT: bool = true;

    fn timer() -> &'static ManualTimer {
        ManualRuntime::timer()
    }

    fn rng() -> SplitMix64 {
        let seed = SEED.with(|s| {
            let next = s.get().wrapping_add(1);
            s.set(next);
            next
        });
        SplitMix64::new(seed)
    }

    fn current() -> Option<Deadline> {
        ThreadDeadline::current()
    }

    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        ThreadDeadline::enter(deadline, f)
    }

    fn enter_attempt<R>(deadline: Deadline, f: impl FnOnce() -> R) -> (R, Option<Onward>) {
        ThreadDeadline::enter_attempt(deadline, f)
    }
}

impl KeepsSent for ManualRuntime {
    fn note_sent(onward: Onward) {
        ThreadDeadline::note_sent(onward);
    }
}
