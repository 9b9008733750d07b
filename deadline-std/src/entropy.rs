//! [`Entropy`]: the default random source for jitter, seeded from the operating system.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use deadline_core::rng::{Rng, SplitMix64};

std::thread_local! {
    /// Each thread's generator, seeded on its first draw.
    static THREAD_RNG: Cell<Option<SplitMix64>> = const { Cell::new(None) };
}

/// Seeds handed out so far in this process, mixed into the next one.
static SEEDS: AtomicU64 = AtomicU64::new(0);

/// The default random source: a generator per thread, seeded from the operating system's
/// randomness the first time the thread draws.
///
/// Jitter exists so that clients that failed together do not retry together. A generator with
/// a fixed seed gives every request the same first jitter, which is the synchronized retry
/// storm jitter is meant to prevent. `Entropy` is a unit value: pass it wherever a driver
/// takes an [`Rng`], and every call draws from its thread's generator, so two calls, two
/// threads or two processes never share a sequence. Keep the seeded generators
/// ([`SplitMix64`], [`Sequence`](deadline_core::rng::Sequence)) for tests and simulations,
/// where the same draws every run is the point.
///
/// Each thread's generator is a [`SplitMix64`] seeded by [`Entropy::seed`]. Not
/// cryptographic: jitter only has to spread clients apart.
///
/// ```
/// use deadline_core::{Clock, Deadline, Instant, ms, Outcome, Policy};
/// use deadline_core::call::Call;
/// use deadline_core::policy::{Backoff, Jitter};
/// use deadline_core::virtual_time::ManualClock;
/// use deadline_std::Entropy;
/// use deadline_std::blocking::BlockingDriver;
///
/// // Two attempts, with a fully jittered backoff (somewhere in 0 to 10 ms) between them.
/// let b = Policy::required("B").idempotent().with_cap(ms(110)).with_floor(ms(30))
///     .with_retries(1).with_backoff(Backoff::exponential(ms(10)).with_max(ms(80)).with_jitter(Jitter::Full));
/// let clock = ManualClock::new(); // virtual time, for the example: the sleep moves it
/// let call = Call::new(&b, Deadline::after(clock.now(), ms(500)), ms(20));
/// let mut attempts = 0;
/// let called = BlockingDriver::new(call, &clock, Entropy).run(
///     |_| Outcome::Failed,
///     |_| {
///         attempts += 1;
///         if attempts == 1 { Err("503") } else { Ok("price") }
///     },
/// );
/// assert_eq!(called.result, Ok("price"));
/// assert!(clock.now() <= Instant::from_millis(10)); // a different wait in every run
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Entropy;

impl Entropy {
    /// A fresh 64-bit seed from the operating system's randomness, different at every call:
    /// for a generator of your own (`SplitMix64::new(Entropy::seed())`, one per worker).
    ///
    /// It is std's [`RandomState`] hash (whose keys come from the operating system's random
    /// source, once per thread, and change at every `RandomState::new`) of a per-process
    /// counter, the thread and the time.
    #[must_use]
    pub fn seed() -> u64 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(SEEDS.fetch_add(1, Ordering::Relaxed));
        std::hash::Hash::hash(&std::thread::current().id(), &mut hasher);
        std::hash::Hash::hash(&std::time::Instant::now(), &mut hasher);
        hasher.finish()
    }
}

impl Rng for Entropy {
    fn next_u32(&mut self) -> u32 {
        with_thread_rng(SplitMix64::next_u32)
    }

    fn next_u64(&mut self) -> u64 {
        with_thread_rng(SplitMix64::next_u64)
    }
}

/// One draw from this thread's generator, seeded at its first use; while the thread's locals
/// are being torn down, from a generator of its own for this draw.
fn with_thread_rng<T>(draw: fn(&mut SplitMix64) -> T) -> T {
    THREAD_RNG
        .try_with(|cell: &Cell<Option<SplitMix64>>| {
            let mut rng = cell
                .take()
                .unwrap_or_else(|| SplitMix64::new(Entropy::seed()));
            let value = draw(&mut rng);
            cell.set(Some(rng));
            value
        })
        .unwrap_or_else(|_| draw(&mut SplitMix64::new(Entropy::seed())))
}
